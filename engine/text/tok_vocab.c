/* Tokenizer vocabulary: pieces and their hash maps, the special-token
 * trie and the join set, built from a spec (eng_tok_new); and the way
 * back from ids to text, plus the small queries. */
#include "tok_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- construction ---- */

/* Room for at least n keys at a load of at most 0.7. */
static size_t table_size(size_t n)
{
    size_t cap = 16;
    while (cap < n + n / 2 + 1)
        cap *= 2;
    return cap;
}

static int map_grow(eng_tok *t)
{
    size_t cap = (t->map_mask + 1) * 2;
    text_slot *old = t->map, *nm = malloc(cap * sizeof *nm);
    if (!nm)
        return ENG_ENOMEM;
    for (size_t i = 0; i < cap; i++)
        nm[i].id = -1;
    size_t old_cap = t->map_mask + 1;
    t->map = nm;
    t->map_mask = cap - 1;
    for (size_t i = 0; i < old_cap; i++) {
        if (old[i].id < 0)
            continue;
        int32_t id = old[i].id;
        *map_slot(t, piece_ptr(t, id), piece_len(t, id), hash_bytes(piece_ptr(t, id), piece_len(t, id))) = old[i];
    }
    free(old);
    return 0;
}

/* Map piece id's text to id. A text that is already there is taken over
 * by the later id, as a vocabulary read in order would. */
static int map_put(eng_tok *t, int32_t id)
{
    if ((t->map_used + 1) * 10 > (t->map_mask + 1) * 7) {
        int r = map_grow(t);
        if (r)
            return r;
    }
    const char *s = piece_ptr(t, id);
    size_t n = piece_len(t, id);
    uint64_t h = hash_bytes(s, n);
    text_slot *sl = map_slot(t, s, n, h);
    if (sl->id < 0)
        t->map_used++;
    sl->id = id;
    sl->tag = (uint32_t)(h >> 32);
    return 0;
}

static int grow_blob(eng_tok *t, size_t more)
{
    if (t->blob_len + more <= t->blob_cap)
        return 0;
    if (more > SIZE_MAX / 4 - t->blob_len)
        return ENG_ENOMEM;
    size_t cap = (t->blob_len + more) * 2;
    char *nb = realloc(t->blob, cap);
    if (!nb)
        return ENG_ENOMEM;
    t->blob = nb;
    t->blob_cap = cap;
    return 0;
}

/* Append a piece that is not a token (a merge part missing from the
 * vocabulary); returns its id or a negative code. */
static int32_t add_piece(eng_tok *t, const char *s, size_t n)
{
    if (t->n_pieces >= INT32_MAX - 1)
        return ENG_EFORMAT;
    if (t->n_pieces == t->cap_pieces) {
        uint32_t cap = t->cap_pieces < (uint32_t)INT32_MAX / 2 ? t->cap_pieces * 2 : (uint32_t)INT32_MAX;
        size_t *no = realloc(t->off, ((size_t)cap + 1) * sizeof *no);
        if (!no)
            return ENG_ENOMEM;
        t->off = no;
        t->cap_pieces = cap;
    }
    int r = grow_blob(t, n);
    if (r)
        return r;
    if (n)
        memcpy(t->blob + t->blob_len, s, n);
    t->blob_len += n;
    int32_t id = (int32_t)t->n_pieces++;
    t->off[id + 1] = t->blob_len;
    r = map_put(t, id);
    return r ? r : id;
}

static int32_t intern(eng_tok *t, const char *s, size_t n)
{
    int32_t id = map_find(t, s, n);
    return id >= 0 ? id : add_piece(t, s, n);
}

static int build_joins(eng_tok *t)
{
    /* about 16 bits a pair keeps false "joinable" answers rare; the
     * text's byte count bounds the pair count */
    size_t bits = (size_t)1 << 16;
    while (bits < 16 * t->blob_len && bits < ((size_t)1 << 27))
        bits *= 2;
    if (!(t->joins = calloc(bits / 64, sizeof *t->joins)))
        return ENG_ENOMEM;
    t->joins_mask = bits - 1;
    for (uint32_t id = 0; id < t->n_vocab; id++) {
        const unsigned char *p = (const unsigned char *)piece_ptr(t, (int32_t)id);
        size_t n = piece_len(t, (int32_t)id), k;
        if (!n)
            continue;
        uint32_t prev = char_key(p, n, &k);
        for (size_t i = k; i < n; i += k) {
            uint32_t c = char_key(p + i, n - i, &k);
            size_t bit = join_bit(t, prev, c);
            t->joins[bit / 64] |= (uint64_t)1 << (bit % 64);
            prev = c;
        }
    }
    return 0;
}

static int id_ok(int32_t id, uint32_t n) { return id == -1 || (id >= 0 && (uint32_t)id < n); }

static int check_spec(const eng_tok_spec *s, eng_err *e)
{
    if (!s)
        return eng_errf(e, ENG_EINVAL, "tokenizer: no specification");
    if (s->kind != ENG_TOK_SPM && s->kind != ENG_TOK_BPE)
        return eng_errf(e, ENG_EUNSUP, "tokenizer.ggml.model: unknown tokenizer kind %d", (int)s->kind);
    if (s->n_vocab == 0 || !s->tokens)
        return eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.tokens: the vocabulary is empty");
    if (s->n_vocab >= (uint32_t)INT32_MAX)
        return eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.tokens: %u tokens is too many", s->n_vocab);
    for (uint32_t i = 0; i < s->n_vocab; i++)
        if (s->tokens[i].len && !s->tokens[i].ptr)
            return eng_errf(e, ENG_EINVAL, "tokenizer.ggml.tokens[%u]: text missing", i);
    if (s->types)
        for (uint32_t i = 0; i < s->n_vocab; i++)
            if (s->types[i] < 0 || s->types[i] > ENG_TT_BYTE)
                return eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.token_type[%u]: %d is not a token type", i,
                                (int)s->types[i]);
    static const char *const id_keys[] = {"bos_token_id", "eos_token_id", "unknown_token_id", "padding_token_id",
                                          "eot_token_id"};
    const int32_t ids[] = {s->bos, s->eos, s->unk, s->pad, s->eot};
    for (int k = 0; k < 5; k++)
        if (!id_ok(ids[k], s->n_vocab))
            return eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.%s: token id %d is out of range (the vocabulary has %u tokens)",
                            id_keys[k], (int)ids[k], s->n_vocab);
    if (s->kind == ENG_TOK_BPE) {
        if (s->n_merges && !s->merges)
            return eng_errf(e, ENG_EINVAL, "tokenizer.ggml.merges: list missing");
        if (s->n_merges >= (uint32_t)INT32_MAX)
            return eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.merges: %u merges is too many", s->n_merges);
        for (uint32_t i = 0; i < s->n_merges; i++) {
            eng_str m = s->merges[i];
            /* the separator is the first space after the first byte, so a
             * left part may itself be a space */
            const char *sp = (m.ptr && m.len >= 3) ? memchr(m.ptr + 1, ' ', m.len - 1) : NULL;
            if (!sp || sp == m.ptr + m.len - 1)
                return eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.merges[%u]: expected two parts separated by a space",
                                i);
        }
    }
    return 0;
}

/* Texts of special tokens that end a turn in the chat formats we know;
 * any control or user-defined token with one of them stops generation. */
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "<|EOT|>",
    "<\xef\xbd\234end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", /* DeepSeek, full-width bars */
    "<|end\xe2\x96\x81of\xe2\x96\x81sentence|>",
    /* the rest of llama.cpp's end-of-generation texts (llama-vocab.cpp) */
    "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>",
};

static int build_trie(eng_tok *t)
{
    size_t bytes = 0;
    for (uint32_t i = 0; i < t->n_vocab; i++) {
        unsigned ty = t->attr[i] & TT_MASK;
        if (ty == ENG_TT_CONTROL || ty == ENG_TT_USER_DEFINED || ty == ENG_TT_UNKNOWN)
            bytes += piece_len(t, (int32_t)i);
    }
    if (!bytes)
        return 0;
    if (bytes >= UINT32_MAX - 1)
        return ENG_EFORMAT;
    t->trie = malloc((bytes + 1) * sizeof *t->trie);
    if (!t->trie)
        return ENG_ENOMEM;
    t->trie[0] = (trie_node){0, 0, -1, 0};
    t->n_trie = 1;
    for (uint32_t i = 0; i < t->n_vocab; i++) {
        unsigned ty = t->attr[i] & TT_MASK;
        size_t n = piece_len(t, (int32_t)i);
        if (!n || (ty != ENG_TT_CONTROL && ty != ENG_TT_USER_DEFINED && ty != ENG_TT_UNKNOWN))
            continue;
        if (ty == ENG_TT_USER_DEFINED)
            t->has_user = 1;
        const unsigned char *s = (const unsigned char *)piece_ptr(t, (int32_t)i);
        uint32_t node = 0;
        for (size_t k = 0; k < n; k++) {
            uint32_t *link = node == 0 ? &t->root[s[k]] : &t->trie[node].child;
            uint32_t ch = *link;
            while (ch && t->trie[ch].byte != s[k])
                ch = t->trie[ch].sibling;
            if (!ch) {
                ch = t->n_trie++;
                t->trie[ch] = (trie_node){0, node == 0 ? 0 : *link, -1, s[k]};
                *link = ch;
            }
            node = ch;
        }
        t->trie[node].tok = (int32_t)i;
    }
    return 0;
}

/* The message for a code from building the tables: memory, or an id
 * past what 32 bits hold. */
static int build_fail(eng_err *e, int r)
{
    return eng_errf(e, r, r == ENG_ENOMEM ? "tokenizer: out of memory" : "tokenizer: the vocabulary is too large");
}

/* The token texts into the blob, their types and scores, and the text
 * map over them. Reports its error in e. */
static int copy_pieces(eng_tok *t, const eng_tok_spec *spec, eng_err *e)
{
    const uint32_t n = spec->n_vocab;
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (spec->tokens[i].len > SIZE_MAX / 4 - total)
            return eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.tokens: texts too long");
        total += spec->tokens[i].len;
    }
    t->off = malloc(((size_t)n + 1) * sizeof *t->off);
    t->attr = malloc(n);
    t->blob = malloc(total ? total : 1);
    t->blob_cap = total ? total : 1;
    if (!t->off || !t->attr || !t->blob)
        return build_fail(e, ENG_ENOMEM);
    t->off[0] = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (spec->tokens[i].len)
            memcpy(t->blob + t->blob_len, spec->tokens[i].ptr, spec->tokens[i].len);
        t->blob_len += spec->tokens[i].len;
        t->off[i + 1] = t->blob_len;
        t->attr[i] = (uint8_t)(spec->types ? spec->types[i] : ENG_TT_NORMAL);
    }
    if (spec->scores) {
        if (!(t->scores = malloc((size_t)n * sizeof *t->scores)))
            return build_fail(e, ENG_ENOMEM);
        /* a NaN would make the heap order meaningless: rank it last */
        for (uint32_t i = 0; i < n; i++)
            t->scores[i] = isnan(spec->scores[i]) ? -INFINITY : spec->scores[i];
    }

    size_t cap = table_size(n);
    if (!(t->map = malloc(cap * sizeof *t->map)))
        return build_fail(e, ENG_ENOMEM);
    for (size_t i = 0; i < cap; i++)
        t->map[i].id = -1;
    t->map_mask = cap - 1;
    for (uint32_t i = 0; i < n; i++) {
        int r = map_put(t, (int32_t)i);
        if (r)
            return build_fail(e, r);
    }
    return 0;
}

/* Byte-level BPE: the merge table (pair of pieces -> rank and merged
 * piece) and each byte's piece. Returns 0 or a code for build_fail. */
static int build_merges(eng_tok *t, const eng_tok_spec *spec)
{
    /* parts first, so a merged text that a later line uses as a part
     * has a piece before results are looked up */
    for (uint32_t i = 0; i < spec->n_merges; i++) {
        eng_str m = spec->merges[i];
        const char *sp = memchr(m.ptr + 1, ' ', m.len - 1);
        int32_t a = intern(t, m.ptr, (size_t)(sp - m.ptr));
        if (a < 0 || (a = intern(t, sp + 1, (size_t)(m.ptr + m.len - sp - 1))) < 0)
            return a;
    }
    size_t cap = table_size(spec->n_merges);
    if (!(t->merges = malloc(cap * sizeof *t->merges)))
        return ENG_ENOMEM;
    for (size_t i = 0; i < cap; i++)
        t->merges[i].rank = -1;
    t->merge_mask = cap - 1;
    char *joined = NULL;
    size_t joined_cap = 0;
    for (uint32_t i = 0; i < spec->n_merges; i++) {
        eng_str m = spec->merges[i];
        const char *sp = memchr(m.ptr + 1, ' ', m.len - 1);
        size_t la = (size_t)(sp - m.ptr), lb = (size_t)(m.ptr + m.len - sp - 1);
        int32_t a = map_find(t, m.ptr, la), b = map_find(t, sp + 1, lb);
        merge_slot *sl = merge_find(t, pair_key(a, b));
        if (sl->rank >= 0)
            continue; /* a repeated pair keeps its first (best) rank */
        if (la + lb > joined_cap) {
            char *nj = realloc(joined, la + lb);
            if (!nj) {
                free(joined);
                return ENG_ENOMEM;
            }
            joined = nj;
            joined_cap = la + lb;
        }
        memcpy(joined, m.ptr, la);
        memcpy(joined + la, sp + 1, lb);
        sl->key = pair_key(a, b);
        sl->rank = (int32_t)i;
        sl->result = map_find(t, joined, la + lb);
    }
    free(joined);
    for (int b = 0; b < 256; b++) {
        char buf[4];
        size_t k = eng_uni_encode(eng_uni_byte_to_cp((uint8_t)b), buf);
        t->byte_tok[b] = map_find(t, buf, k);
    }
    return 0;
}

/* SentencePiece: each byte's <0xNN> token. */
static void spm_byte_tokens(eng_tok *t)
{
    for (int b = 0; b < 256; b++) {
        char buf[8];
        snprintf(buf, sizeof buf, "<0x%02X>", b);
        int32_t id = map_find(t, buf, 6);
        if (id < 0 && b < 0x80) {
            /* no byte token: a vocabulary may still spell the
             * character itself */
            buf[0] = (char)b;
            id = map_find(t, buf, 1);
        }
        t->byte_tok[b] = id;
    }
}

/* Generation stops at the end-of-sequence and end-of-turn ids and at
 * control or user tokens spelled as a known end of turn. */
static void mark_eog(eng_tok *t)
{
    for (uint32_t i = 0; i < t->n_vocab; i++) {
        unsigned ty = t->attr[i] & TT_MASK;
        if (ty != ENG_TT_CONTROL && ty != ENG_TT_USER_DEFINED)
            continue;
        for (size_t k = 0; k < sizeof eog_texts / sizeof eog_texts[0]; k++)
            if (same_text(t, (int32_t)i, eog_texts[k], strlen(eog_texts[k])))
                t->attr[i] |= TT_EOG;
    }
    if (t->eos >= 0)
        t->attr[t->eos] |= TT_EOG;
    if (t->eot >= 0)
        t->attr[t->eot] |= TT_EOG;
}

/* gpt-oss's harmony format, known by a vocabulary with both <|return|>
 * and <|call|>: a reply is a run of messages,
 *   <|channel|>analysis<|message|>THINKING<|end|>
 *   <|start|>assistant<|channel|>final<|message|>ANSWER<|return|>
 * so <|end|> closes a message, not the turn (llama.cpp takes it out of
 * its end-of-generation set for this vocabulary too), and the tags that
 * frame the messages are shown in the reply's text, where the chat finds
 * the thinking and the answer. They stay control tokens: text a user
 * types is not read as them. */
static void mark_harmony(eng_tok *t)
{
    if (eng_tok_find(t, "<|return|>") < 0 || eng_tok_find(t, "<|call|>") < 0)
        return;
    static const char *const shown[] = {"<|channel|>", "<|message|>", "<|start|>", "<|end|>", "<|constrain|>"};
    for (size_t k = 0; k < sizeof shown / sizeof shown[0]; k++) {
        int32_t id = eng_tok_find(t, shown[k]);
        unsigned ty = id >= 0 ? t->attr[id] & TT_MASK : 0;
        if (id >= 0 && (ty == ENG_TT_CONTROL || ty == ENG_TT_USER_DEFINED))
            t->attr[id] |= TT_SHOW;
    }
    int32_t end = eng_tok_find(t, "<|end|>");
    if (end >= 0)
        t->attr[end] &= (uint8_t)~TT_EOG;
}

int eng_tok_new(const eng_tok_spec *spec, eng_tok **out, eng_err *e)
{
    if (!out)
        return eng_errf(e, ENG_EINVAL, "tokenizer: no output pointer");
    *out = NULL;
    int r = check_spec(spec, e);
    if (r)
        return r;
    int ignore_merges = 0, pre = ENG_PRE_GPT2;
    if (spec->kind == ENG_TOK_BPE) {
        pre = eng_uni_pretok_lookup(spec->pre, spec->pre ? strlen(spec->pre) : 0, &ignore_merges);
        if (pre < 0)
            return eng_errf(e, ENG_EUNSUP, "tokenizer.ggml.pre: pre-tokenizer '%.64s' is not supported", spec->pre);
    }

    eng_tok *t = calloc(1, sizeof *t);
    if (!t)
        return eng_errf(e, ENG_ENOMEM, "tokenizer: out of memory");
    t->kind = spec->kind;
    t->pre = (enum eng_pretok)pre;
    t->ignore_merges = ignore_merges;
    t->n_vocab = t->n_pieces = t->cap_pieces = spec->n_vocab;
    t->bos = spec->bos, t->eos = spec->eos, t->unk = spec->unk, t->pad = spec->pad, t->eot = spec->eot;
    t->add_bos = spec->add_bos != 0, t->add_eos = spec->add_eos != 0;
    t->add_space_prefix = spec->add_space_prefix != 0;

    if ((r = copy_pieces(t, spec, e)))
        goto fail;
    if (t->kind == ENG_TOK_BPE)
        r = build_merges(t, spec);
    else
        spm_byte_tokens(t);
    if (!r)
        r = build_trie(t);
    if (!r && t->kind == ENG_TOK_BPE)
        r = tok_set_replacement(t);
    if (!r && t->kind == ENG_TOK_SPM)
        r = build_joins(t);
    if (r) {
        build_fail(e, r);
        goto fail;
    }
    mark_eog(t);
    mark_harmony(t);
    *out = t;
    return 0;

fail:
    eng_tok_free(t);
    return r;
}

void eng_tok_free(eng_tok *t)
{
    if (!t)
        return;
    free(t->blob);
    free(t->off);
    free(t->scores);
    free(t->attr);
    free(t->map);
    free(t->merges);
    free(t->trie);
    free(t->joins);
    free(t);
}

/* ---- decoding and queries ---- */

static void put(char *buf, size_t cap, size_t *w, const char *s, size_t n)
{
    if (*w < cap) {
        size_t k = cap - *w < n ? cap - *w : n;
        memcpy(buf + *w, s, k);
    }
    *w += n;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

size_t eng_tok_piece(const eng_tok *t, int32_t id, int show_special, char *buf, size_t cap)
{
    if (!t || id < 0 || (uint32_t)id >= t->n_vocab)
        return 0;
    if (!buf)
        cap = 0;
    const char *s = piece_ptr(t, id);
    size_t n = piece_len(t, id), w = 0;
    switch (t->attr[id] & TT_MASK) {
    case ENG_TT_CONTROL:
    case ENG_TT_UNKNOWN:
    case ENG_TT_UNUSED:
        if (show_special || (t->attr[id] & TT_SHOW))
            put(buf, cap, &w, s, n);
        return w;
    case ENG_TT_USER_DEFINED:
        put(buf, cap, &w, s, n);
        return w;
    case ENG_TT_BYTE:
        if (n == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' && hexval(s[3]) >= 0 && hexval(s[4]) >= 0) {
            char b = (char)(hexval(s[3]) * 16 + hexval(s[4]));
            put(buf, cap, &w, &b, 1);
            return w;
        }
        break; /* not spelled as a byte: show it as text */
    default:
        break;
    }
    if (t->kind == ENG_TOK_SPM) {
        for (size_t i = 0; i < n;) {
            if (n - i >= 3 && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
                put(buf, cap, &w, " ", 1);
                i += 3;
            } else {
                size_t j = i + 1;
                while (j < n && !(n - j >= 3 && memcmp(s + j, "\xe2\x96\x81", 3) == 0))
                    j++;
                put(buf, cap, &w, s + i, j - i);
                i = j;
            }
        }
        return w;
    }
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t k = eng_uni_next(u + i, n - i, &cp);
        int b = cp >= 0 ? eng_uni_cp_to_byte((uint32_t)cp) : -1;
        if (b >= 0) {
            char c = (char)b;
            put(buf, cap, &w, &c, 1);
        } else {
            put(buf, cap, &w, s + i, k); /* not from the byte map: as written */
        }
        i += k;
    }
    return w;
}

eng_str eng_tok_text(const eng_tok *t, int32_t id)
{
    eng_str none = {"", 0};
    if (!t || id < 0 || (uint32_t)id >= t->n_vocab)
        return none;
    eng_str s = {piece_ptr(t, id), piece_len(t, id)};
    return s;
}

uint32_t eng_tok_n_vocab(const eng_tok *t) { return t ? t->n_vocab : 0; }
int32_t eng_tok_bos(const eng_tok *t) { return t ? t->bos : -1; }
int32_t eng_tok_eos(const eng_tok *t) { return t ? t->eos : -1; }
enum eng_tok_kind eng_tok_kind(const eng_tok *t) { return t ? t->kind : ENG_TOK_SPM; }

int eng_tok_is_eog(const eng_tok *t, int32_t id)
{
    return t && id >= 0 && (uint32_t)id < t->n_vocab && (t->attr[id] & TT_EOG) != 0;
}

int32_t eng_tok_find(const eng_tok *t, const char *s)
{
    if (!t || !s)
        return -1;
    int32_t id = map_find(t, s, strlen(s));
    return id >= 0 && (uint32_t)id < t->n_vocab ? id : -1;
}
