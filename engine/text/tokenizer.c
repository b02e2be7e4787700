/* Tokenizers: SentencePiece-style BPE over scores ("llama") and
 * byte-level BPE over ranked merges ("gpt2").
 *
 * Both run the same merge loop. Text is cut into symbols (SentencePiece:
 * UTF-8 characters of the text with spaces written as U+2581; byte-level:
 * one symbol per byte of a pre-tokenized word), every adjacent pair that
 * may merge goes into a heap, and the best pair is merged until none is
 * left. SentencePiece ranks a pair by the score of the merged piece,
 * byte-level BPE by the merge's line number; ties go to the leftmost pair.
 *
 * Strings are never built during merging: every token text (and every
 * merge part that is not itself a token) is a "piece" with an id, a
 * symbol carries its piece id, and a byte-level merge is found by the
 * pair of ids in a hash map that also gives the merged piece. */
#include "tokenizer.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unicode.h"

#define TT_MASK 0x07 /* attr bits holding enum eng_tok_type */
#define TT_EOG 0x80  /* attr bit: generation stops at this token */

/* Longest text the encoder takes in one call: the SentencePiece path
 * triples the text when it writes spaces as U+2581, and offsets are 32
 * bits. */
#define MAX_TEXT ((size_t)INT32_MAX / 4)

typedef struct text_slot {
    int32_t id;   /* piece id, -1 when empty */
    uint32_t tag; /* high half of the hash, to skip most memcmp calls */
} text_slot;

typedef struct merge_slot {
    uint64_t key;   /* left piece << 32 | right piece */
    int32_t rank;   /* line in the merges list, -1 when empty */
    int32_t result; /* piece of the merged text, -1 if it is none */
} merge_slot;

/* Special-token trie: node 0 is the root, whose children are found by
 * byte in root[]; deeper children are sibling lists (0 ends a list, as
 * the root is nobody's child). */
typedef struct trie_node {
    uint32_t child, sibling;
    int32_t tok; /* token whose text ends here, or -1 */
    uint8_t byte;
} trie_node;

struct eng_tok {
    enum eng_tok_kind kind;
    enum eng_pretok pre;
    int ignore_merges;
    uint32_t n_vocab;  /* ids 0..n_vocab-1 are tokens */
    uint32_t n_pieces; /* n_vocab, then merge parts that are not tokens */
    uint32_t cap_pieces;
    char *blob; /* piece texts back to back */
    size_t blob_len, blob_cap;
    size_t *off; /* piece i is blob[off[i] .. off[i + 1]) */
    float *scores;
    uint8_t *attr; /* token type | TT_EOG, per token */

    text_slot *map;
    size_t map_mask, map_used;
    merge_slot *merges;
    size_t merge_mask;

    /* SentencePiece: the <0xNN> token of each byte. Byte-level: the piece
     * of each byte's mapped character. -1 where there is none. */
    int32_t byte_tok[256];

    trie_node *trie;
    uint32_t n_trie;
    uint32_t root[256];
    int has_user; /* user-defined tokens exist: the trie runs on every text */

    /* SentencePiece: a bit set of character pairs that occur next to
     * each other inside some token (hashed, so it may say yes wrongly,
     * never no). Where two characters of the text form no such pair, no
     * merge can join them, so the text is merged in independent chunks:
     * same result, small heaps. */
    uint64_t *joins;
    size_t joins_mask;

    /* Byte-level: the tokens of U+FFFD, written for a byte that no token
     * stands for (bytes UTF-8 never uses are often left out). */
    int32_t repl[4];
    int n_repl;

    int32_t bos, eos, unk, pad, eot;
    int add_bos, add_eos, add_space_prefix;
};

static int set_replacement(eng_tok *t);

/* A character as the join set sees it: the code point, or past U+10FFFF
 * for a byte that is not UTF-8. */
static uint32_t char_key(const unsigned char *s, size_t n, size_t *len)
{
    int32_t cp;
    *len = eng_uni_next(s, n, &cp);
    return cp >= 0 ? (uint32_t)cp : 0x110000u + s[0];
}

/* ---- hashing ---- */

static uint64_t mix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return mix64(h ^ n);
}

static const char *piece_ptr(const eng_tok *t, int32_t id) { return t->blob + t->off[id]; }
static size_t piece_len(const eng_tok *t, int32_t id) { return t->off[id + 1] - t->off[id]; }

static int same_text(const eng_tok *t, int32_t id, const char *s, size_t n)
{
    return piece_len(t, id) == n && (n == 0 || memcmp(piece_ptr(t, id), s, n) == 0);
}

/* Slot holding text s, or the empty slot where it would go. */
static text_slot *map_slot(const eng_tok *t, const char *s, size_t n, uint64_t h)
{
    uint32_t tag = (uint32_t)(h >> 32);
    for (size_t i = (size_t)h & t->map_mask;; i = (i + 1) & t->map_mask) {
        text_slot *sl = &t->map[i];
        if (sl->id < 0 || (sl->tag == tag && same_text(t, sl->id, s, n)))
            return sl;
    }
}

static int32_t map_find(const eng_tok *t, const char *s, size_t n)
{
    return map_slot(t, s, n, hash_bytes(s, n))->id;
}

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

static merge_slot *merge_find(const eng_tok *t, uint64_t key)
{
    for (size_t i = (size_t)mix64(key) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        merge_slot *sl = &t->merges[i];
        if (sl->rank < 0 || sl->key == key)
            return sl;
    }
}

static uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t)(uint32_t)a << 32 | (uint32_t)b; }

/* ---- construction ---- */

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

static size_t join_bit(const eng_tok *t, uint32_t a, uint32_t b)
{
    return (size_t)mix64((uint64_t)a << 32 | b) & t->joins_mask;
}

static int joinable(const eng_tok *t, uint32_t a, uint32_t b)
{
    size_t bit = join_bit(t, a, b);
    return (t->joins[bit / 64] >> (bit % 64)) & 1;
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

    const uint32_t n = spec->n_vocab;
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (spec->tokens[i].len > SIZE_MAX / 4 - total) {
            r = eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.tokens: texts too long");
            goto fail;
        }
        total += spec->tokens[i].len;
    }
    t->off = malloc(((size_t)n + 1) * sizeof *t->off);
    t->attr = malloc(n);
    t->blob = malloc(total ? total : 1);
    t->blob_cap = total ? total : 1;
    if (!t->off || !t->attr || !t->blob)
        goto nomem;
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
            goto nomem;
        /* a NaN would make the heap order meaningless: rank it last */
        for (uint32_t i = 0; i < n; i++)
            t->scores[i] = isnan(spec->scores[i]) ? -INFINITY : spec->scores[i];
    }

    size_t cap = table_size(n);
    if (!(t->map = malloc(cap * sizeof *t->map)))
        goto nomem;
    for (size_t i = 0; i < cap; i++)
        t->map[i].id = -1;
    t->map_mask = cap - 1;
    for (uint32_t i = 0; i < n; i++)
        if ((r = map_put(t, (int32_t)i)))
            goto fail_code;

    if (t->kind == ENG_TOK_BPE) {
        /* parts first, so a merged text that a later line uses as a part
         * has a piece before results are looked up */
        for (uint32_t i = 0; i < spec->n_merges; i++) {
            eng_str m = spec->merges[i];
            const char *sp = memchr(m.ptr + 1, ' ', m.len - 1);
            int32_t a = intern(t, m.ptr, (size_t)(sp - m.ptr));
            if (a < 0 || (a = intern(t, sp + 1, (size_t)(m.ptr + m.len - sp - 1))) < 0) {
                r = a;
                goto fail_code;
            }
        }
        cap = table_size(spec->n_merges);
        if (!(t->merges = malloc(cap * sizeof *t->merges)))
            goto nomem;
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
                    goto nomem;
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
    } else {
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

    if ((r = build_trie(t)))
        goto fail_code;
    if (t->kind == ENG_TOK_BPE && (r = set_replacement(t)))
        goto fail_code;
    if (t->kind == ENG_TOK_SPM && (r = build_joins(t)))
        goto fail_code;

    for (uint32_t i = 0; i < n; i++) {
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
    *out = t;
    return 0;

nomem:
    r = ENG_ENOMEM;
fail_code:
    if (r == ENG_ENOMEM)
        eng_errf(e, r, "tokenizer: out of memory");
    else
        eng_errf(e, r, "tokenizer: the vocabulary is too large");
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

/* ---- from GGUF ---- */

/* An array key of element type want: 0 with count and data, 1 when
 * absent, or an error naming the key and what it holds instead. */
static int gguf_array(const eng_gguf *g, const char *key, enum eng_gguf_vtype want, uint64_t *count,
                      const void **data, eng_err *e)
{
    int64_t i = eng_gguf_find(g, key);
    if (i < 0)
        return 1;
    enum eng_gguf_vtype vt = eng_gguf_kv_type(g, (uint64_t)i), et = GGUF_VTYPE_COUNT;
    if (vt != GGUF_ARRAY)
        return eng_errf(e, ENG_EFORMAT, "%s: expected array of %s, got %s", key, eng_gguf_vtype_name(want),
                        eng_gguf_vtype_name(vt));
    if (eng_gguf_get_arr(g, key, -1, &et, count, data, e))
        return ENG_EFORMAT;
    if (et != want)
        return eng_errf(e, ENG_EFORMAT, "%s: expected array of %s, got array of %s", key, eng_gguf_vtype_name(want),
                        eng_gguf_vtype_name(et));
    return 0;
}

/* A special token id: absent keeps *id, -1 (or its u32 spelling) means
 * none. Out of range is an error unless lenient, for ids nibble never
 * emits (padding), which some converters write past the vocabulary. */
static int gguf_id(const eng_gguf *g, const char *key, uint32_t n, int lenient, int32_t *id, eng_err *e)
{
    int64_t v;
    int r = eng_gguf_get_i64(g, key, &v, e);
    if (r)
        return r < 0 ? r : 0;
    if (v == -1 || v == (int64_t)UINT32_MAX) {
        *id = -1;
        return 0;
    }
    if (v < 0 || v >= (int64_t)n) {
        if (lenient) {
            *id = -1;
            return 0;
        }
        return eng_errf(e, ENG_EFORMAT, "%s: token id %lld is out of range (the vocabulary has %u tokens)", key,
                        (long long)v, n);
    }
    *id = (int32_t)v;
    return 0;
}

static int gguf_flag(const eng_gguf *g, const char *key, int *v, eng_err *e)
{
    int r = eng_gguf_get_bool(g, key, v, e);
    return r < 0 ? r : 0;
}

int eng_tok_from_gguf(const eng_gguf *g, eng_tok **out, eng_err *e)
{
    if (!out)
        return eng_errf(e, ENG_EINVAL, "tokenizer: no output pointer");
    *out = NULL;
    if (!g)
        return eng_errf(e, ENG_EINVAL, "tokenizer: no GGUF");
    eng_tok_spec s;
    memset(&s, 0, sizeof s);
    eng_str model, pre = {NULL, 0};
    int r = eng_gguf_get_str(g, "tokenizer.ggml.model", &model, e);
    if (r < 0)
        return r;
    if (r == 1)
        return eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.model: missing (the file has no tokenizer)");
    if (model.len == 5 && memcmp(model.ptr, "llama", 5) == 0)
        s.kind = ENG_TOK_SPM;
    else if (model.len == 4 && memcmp(model.ptr, "gpt2", 4) == 0)
        s.kind = ENG_TOK_BPE;
    else
        return eng_errf(e, ENG_EUNSUP, "tokenizer.ggml.model: '%.*s' is not supported (only 'llama' and 'gpt2')",
                        (int)(model.len > 64 ? 64 : model.len), model.ptr);

    uint64_t n = 0, cnt = 0;
    const void *data = NULL;
    r = gguf_array(g, "tokenizer.ggml.tokens", GGUF_STRING, &n, &data, e);
    if (r < 0)
        return r;
    if (r == 1)
        return eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.tokens: missing");
    if (n == 0 || n >= INT32_MAX)
        return eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.tokens: %llu tokens is not a usable vocabulary",
                        (unsigned long long)n);
    s.n_vocab = (uint32_t)n;

    float *scores = NULL;
    int32_t *types = NULL;
    uint64_t got = 0;
    s.tokens = eng_gguf_arr_strs(g, "tokenizer.ggml.tokens", &got);
    if (!s.tokens || got != n)
        return eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.tokens: not a string array");

    r = gguf_array(g, "tokenizer.ggml.scores", GGUF_F32, &cnt, &data, e);
    if (r < 0)
        goto done;
    if (r == 0) {
        if (cnt != n) {
            r = eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.scores: %llu entries for %llu tokens", (unsigned long long)cnt,
                         (unsigned long long)n);
            goto done;
        }
        if (!(scores = malloc(n * sizeof *scores)))
            goto nomem;
        for (uint64_t i = 0; i < n; i++)
            scores[i] = (float)eng_gguf_arr_f64(GGUF_F32, data, i);
        s.scores = scores;
    }

    r = gguf_array(g, "tokenizer.ggml.token_type", GGUF_I32, &cnt, &data, e);
    if (r < 0)
        goto done;
    if (r == 0) {
        if (cnt != n) {
            r = eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.token_type: %llu entries for %llu tokens",
                         (unsigned long long)cnt, (unsigned long long)n);
            goto done;
        }
        if (!(types = malloc(n * sizeof *types)))
            goto nomem;
        for (uint64_t i = 0; i < n; i++)
            types[i] = (int32_t)eng_gguf_arr_i64(GGUF_I32, data, i);
        s.types = types;
    }

    if (s.kind == ENG_TOK_BPE) {
        r = gguf_array(g, "tokenizer.ggml.merges", GGUF_STRING, &cnt, &data, e);
        if (r < 0)
            goto done;
        if (r == 1) {
            r = eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.merges: missing (a 'gpt2' tokenizer needs its merges)");
            goto done;
        }
        if (cnt >= INT32_MAX) {
            r = eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.merges: too many entries");
            goto done;
        }
        uint64_t got = 0;
        s.merges = eng_gguf_arr_strs(g, "tokenizer.ggml.merges", &got);
        if (cnt && (!s.merges || got != cnt)) {
            r = eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.merges: not a string array");
            goto done;
        }
        s.n_merges = (uint32_t)cnt;
    }

    r = eng_gguf_get_str(g, "tokenizer.ggml.pre", &pre, e);
    if (r < 0)
        goto done;
    char pre_name[65] = "default";
    if (r == 0) {
        if (pre.len > 64) {
            r = eng_errf(e, ENG_EUNSUP, "tokenizer.ggml.pre: pre-tokenizer name too long");
            goto done;
        }
        if (pre.len && memchr(pre.ptr, 0, pre.len)) {
            r = eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.pre: name contains a NUL byte");
            goto done;
        }
        memcpy(pre_name, pre.ptr, pre.len);
        pre_name[pre.len] = 0;
    }
    int ignore_merges = 0;
    if (s.kind == ENG_TOK_BPE) {
        s.pre = pre_name;
        eng_uni_pretok_lookup(pre_name, strlen(pre_name), &ignore_merges);
    }

    /* llama.cpp's defaults for what the file leaves out: SentencePiece
     * vocabularies put <unk> <s> </s> first and want BOS and a leading
     * space; byte-level ones want neither, except Llama 3's family. */
    s.bos = s.eos = s.unk = s.pad = s.eot = -1;
    int32_t eom = -1;
    if (s.kind == ENG_TOK_SPM) {
        if (n > 2)
            s.unk = 0, s.bos = 1, s.eos = 2;
        s.add_bos = 1;
        s.add_space_prefix = 1;
    } else {
        s.add_bos = ignore_merges;
    }
    if ((r = gguf_id(g, "tokenizer.ggml.bos_token_id", s.n_vocab, 0, &s.bos, e)) ||
        (r = gguf_id(g, "tokenizer.ggml.eos_token_id", s.n_vocab, 0, &s.eos, e)) ||
        (r = gguf_id(g, "tokenizer.ggml.unknown_token_id", s.n_vocab, 0, &s.unk, e)) ||
        (r = gguf_id(g, "tokenizer.ggml.eot_token_id", s.n_vocab, 0, &s.eot, e)) ||
        (r = gguf_id(g, "tokenizer.ggml.eom_token_id", s.n_vocab, 0, &eom, e)) ||
        (r = gguf_id(g, "tokenizer.ggml.padding_token_id", s.n_vocab, 1, &s.pad, e)) ||
        (r = gguf_flag(g, "tokenizer.ggml.add_bos_token", &s.add_bos, e)) ||
        (r = gguf_flag(g, "tokenizer.ggml.add_eos_token", &s.add_eos, e)) ||
        (r = gguf_flag(g, "tokenizer.ggml.add_space_prefix", &s.add_space_prefix, e)))
        goto done;

    r = eng_tok_new(&s, out, e);
    if (!r && eom >= 0)
        (*out)->attr[eom] |= TT_EOG;
    goto done;
nomem:
    r = eng_errf(e, ENG_ENOMEM, "tokenizer: out of memory");
done:
    free(scores);
    free(types);
    return r;
}

/* ---- encoding ---- */

typedef struct sym {
    uint32_t start, n; /* bytes of the working text; n is 0 once merged away */
    int32_t prev, next;
    int32_t piece; /* piece id of the text, or -1 */
} sym;

typedef struct pair {
    double key;    /* larger merges first: the score, or minus the rank */
    uint32_t left; /* symbol; the right one is its next */
    uint32_t size; /* left.n + right.n when queued, to spot stale pairs */
    int32_t piece; /* the merged piece */
} pair;

/* Scratch reused across the words of one call. */
typedef struct work {
    char *buf;
    size_t buf_cap;
    sym *syms;
    size_t syms_cap;
    pair *heap;
    size_t heap_n, heap_cap;
    eng_uni_char *chars;
    size_t chars_cap;
    uint32_t *ends, *tmp;
    size_t ends_cap;
} work;

typedef struct obuf {
    int32_t *ids;
    size_t cap, n;
} obuf;

static void emit(obuf *o, int32_t id)
{
    if (o->n < o->cap)
        o->ids[o->n] = id;
    o->n++;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) {
        if (c > SIZE_MAX / 2 / elem)
            return ENG_ENOMEM;
        c *= 2;
    }
    void *np = realloc(*p, c * elem);
    if (!np)
        return ENG_ENOMEM;
    *p = np;
    *cap = c;
    return 0;
}

static int better(const pair *a, const pair *b)
{
    return a->key > b->key || (a->key == b->key && a->left < b->left);
}

static int heap_push(work *w, pair p)
{
    size_t cap = w->heap_cap;
    if (grow((void **)&w->heap, &cap, w->heap_n + 1, sizeof *w->heap))
        return ENG_ENOMEM;
    w->heap_cap = cap;
    size_t i = w->heap_n++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!better(&p, &w->heap[up]))
            break;
        w->heap[i] = w->heap[up];
        i = up;
    }
    w->heap[i] = p;
    return 0;
}

static pair heap_pop(work *w)
{
    pair top = w->heap[0], last = w->heap[--w->heap_n];
    size_t i = 0, n = w->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && better(&w->heap[c + 1], &w->heap[c]))
            c++;
        if (!better(&w->heap[c], &last))
            break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n)
        w->heap[i] = last;
    return top;
}

/* Queue symbols l and l.next if they may merge. */
static int queue_pair(const eng_tok *t, work *w, int32_t l)
{
    if (l < 0)
        return 0;
    const sym *a = &w->syms[l];
    if (a->next < 0)
        return 0;
    const sym *b = &w->syms[a->next];
    pair p;
    p.left = (uint32_t)l;
    p.size = a->n + b->n;
    if (t->kind == ENG_TOK_SPM) {
        int32_t id = map_find(t, w->buf + a->start, p.size);
        if (id < 0 || (uint32_t)id >= t->n_vocab)
            return 0;
        p.key = t->scores ? t->scores[id] : 0.0;
        p.piece = id;
    } else {
        if (a->piece < 0 || b->piece < 0)
            return 0;
        const merge_slot *m = merge_find(t, pair_key(a->piece, b->piece));
        if (m->rank < 0)
            return 0;
        p.key = -(double)m->rank;
        p.piece = m->result;
    }
    return heap_push(w, p);
}

/* Merge w->syms[0..n) until no queued pair is left. */
static int merge_all(const eng_tok *t, work *w, size_t n)
{
    w->heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (queue_pair(t, w, (int32_t)i))
            return ENG_ENOMEM;
    while (w->heap_n) {
        pair p = heap_pop(w);
        sym *a = &w->syms[p.left];
        if (a->n == 0 || a->next < 0)
            continue;
        sym *b = &w->syms[a->next];
        /* stale: one side has merged with something else since */
        if (b->n == 0 || a->n + b->n != p.size)
            continue;
        a->n += b->n;
        a->piece = p.piece;
        b->n = 0;
        a->next = b->next;
        if (a->next >= 0)
            w->syms[a->next].prev = (int32_t)p.left;
        if (queue_pair(t, w, a->prev) || queue_pair(t, w, (int32_t)p.left))
            return ENG_ENOMEM;
    }
    return 0;
}

/* A token that merging may produce: one that decodes through the byte
 * map. User-defined and control tokens decode as written, so a
 * byte-level merge that lands on one is spelled out in bytes instead. */
static int plain_token(const eng_tok *t, int32_t id)
{
    if (id < 0 || (uint32_t)id >= t->n_vocab)
        return 0;
    unsigned ty = t->attr[id] & TT_MASK;
    return t->kind == ENG_TOK_SPM || ty == ENG_TT_NORMAL || ty == ENG_TT_BYTE || ty == 0;
}

/* A byte no piece covers: its byte token; else SentencePiece writes
 * <unk>, byte-level BPE U+FFFD (its unknown token, if any, is often a
 * control token such as <|endoftext|>, which must not appear mid-text). */
static void emit_byte(const eng_tok *t, obuf *o, unsigned char b)
{
    int32_t id = t->byte_tok[b];
    if (plain_token(t, id))
        emit(o, id);
    else if (t->kind == ENG_TOK_SPM && t->unk >= 0)
        emit(o, t->unk);
    else
        for (int k = 0; k < t->n_repl; k++)
            emit(o, t->repl[k]);
}

static void emit_symbols(const eng_tok *t, const work *w, const unsigned char *text, obuf *o)
{
    for (int32_t i = 0; i >= 0; i = w->syms[i].next) {
        const sym *s = &w->syms[i];
        if (plain_token(t, s->piece)) {
            emit(o, s->piece);
            continue;
        }
        for (uint32_t k = 0; k < s->n; k++)
            emit_byte(t, o, text[s->start + k]);
    }
}

/* SentencePiece: one fragment of plain text; prefix: start with a space. */
static int spm_fragment(const eng_tok *t, work *w, const char *s, size_t n, int prefix, obuf *o)
{
    size_t cap = w->buf_cap;
    if (grow((void **)&w->buf, &cap, 3 * n + 3, 1))
        return ENG_ENOMEM;
    w->buf_cap = cap;
    size_t m = 0;
    if (prefix) {
        memcpy(w->buf, "\xe2\x96\x81", 3);
        m = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            memcpy(w->buf + m, "\xe2\x96\x81", 3);
            m += 3;
        } else {
            w->buf[m++] = s[i];
        }
    }
    const unsigned char *u = (const unsigned char *)w->buf;
    size_t ns = 0;
    uint32_t prev = 0;
    for (size_t i = 0; i < m;) {
        size_t k;
        uint32_t c = char_key(u + i, m - i, &k);
        if (ns && !joinable(t, prev, c)) {
            /* nothing merges across here: finish the chunk so far */
            if (merge_all(t, w, ns))
                return ENG_ENOMEM;
            emit_symbols(t, w, u, o);
            ns = 0;
        }
        cap = w->syms_cap;
        if (grow((void **)&w->syms, &cap, ns + 1, sizeof *w->syms))
            return ENG_ENOMEM;
        w->syms_cap = cap;
        sym *y = &w->syms[ns];
        y->start = (uint32_t)i;
        y->n = (uint32_t)k;
        y->prev = (int32_t)ns - 1;
        y->next = -1;
        if (ns)
            w->syms[ns - 1].next = (int32_t)ns;
        y->piece = map_find(t, w->buf + i, k);
        ns++;
        prev = c;
        i += k;
    }
    if (ns) {
        if (merge_all(t, w, ns))
            return ENG_ENOMEM;
        emit_symbols(t, w, u, o);
    }
    return 0;
}

/* Byte-level BPE: one pre-tokenized word, bytes s[0..n). */
static int bpe_word(const eng_tok *t, work *w, const unsigned char *s, size_t n, obuf *o)
{
    if (t->ignore_merges) {
        /* Llama 3 takes a word that is a token as it is, even where the
         * merges would reach it another way */
        size_t cap = w->buf_cap;
        if (grow((void **)&w->buf, &cap, 2 * n, 1))
            return ENG_ENOMEM;
        w->buf_cap = cap;
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            m += eng_uni_encode(eng_uni_byte_to_cp(s[i]), w->buf + m);
        int32_t id = map_find(t, w->buf, m);
        if (plain_token(t, id)) {
            emit(o, id);
            return 0;
        }
    }
    size_t cap = w->syms_cap;
    if (grow((void **)&w->syms, &cap, n, sizeof *w->syms))
        return ENG_ENOMEM;
    w->syms_cap = cap;
    for (size_t i = 0; i < n; i++) {
        sym *y = &w->syms[i];
        y->start = (uint32_t)i;
        y->n = 1;
        y->prev = (int32_t)i - 1;
        y->next = i + 1 < n ? (int32_t)i + 1 : -1;
        y->piece = t->byte_tok[s[i]];
    }
    if (merge_all(t, w, n))
        return ENG_ENOMEM;
    emit_symbols(t, w, s, o);
    return 0;
}

static int set_replacement(eng_tok *t)
{
    work w;
    memset(&w, 0, sizeof w);
    int32_t ids[8];
    obuf o = {ids, 8, 0};
    int r = bpe_word(t, &w, (const unsigned char *)"\xef\xbf\xbd", 3, &o);
    free(w.buf);
    free(w.syms);
    free(w.heap);
    if (r)
        return r;
    if (o.n <= 4) {
        memcpy(t->repl, ids, o.n * sizeof *ids);
        t->n_repl = (int)o.n;
    }
    return 0;
}

static int bpe_fragment(const eng_tok *t, work *w, const char *s, size_t n, obuf *o)
{
    size_t cap = w->chars_cap;
    if (grow((void **)&w->chars, &cap, n, sizeof *w->chars))
        return ENG_ENOMEM;
    w->chars_cap = cap;
    cap = w->ends_cap;
    size_t cap2 = w->ends_cap;
    if (grow((void **)&w->ends, &cap, n, sizeof *w->ends) || grow((void **)&w->tmp, &cap2, n, sizeof *w->tmp))
        return ENG_ENOMEM;
    w->ends_cap = cap < cap2 ? cap : cap2;
    size_t nc = eng_uni_decode(s, n, w->chars);
    size_t nw = eng_uni_pretok_split(t->pre, w->chars, nc, w->ends, w->tmp);
    size_t a = 0;
    for (size_t k = 0; k < nw; k++) {
        size_t b = w->ends[k];
        size_t from = w->chars[a].off, to = w->chars[b - 1].off + w->chars[b - 1].len;
        if (bpe_word(t, w, (const unsigned char *)s + from, to - from, o))
            return ENG_ENOMEM;
        a = b;
    }
    return 0;
}

/* Longest special token at s[0..n): control and unknown-type tokens only
 * when parse_special, user-defined ones always (they are ordinary added
 * words, matched before the model's own splitting as Hugging Face and
 * llama.cpp do). Returns the id and sets *len, or -1. */
static int32_t special_at(const eng_tok *t, const unsigned char *s, size_t n, int parse_special, size_t *len)
{
    int32_t best = -1;
    uint32_t node = t->root[s[0]];
    for (size_t i = 1; node; i++) {
        int32_t id = t->trie[node].tok;
        if (id >= 0 && (parse_special || (t->attr[id] & TT_MASK) == ENG_TT_USER_DEFINED)) {
            best = id;
            *len = i;
        }
        if (i >= n)
            break;
        uint32_t ch = t->trie[node].child;
        while (ch && t->trie[ch].byte != s[i])
            ch = t->trie[ch].sibling;
        node = ch;
    }
    return best;
}

static int plain(const eng_tok *t, work *w, const char *s, size_t n, obuf *o)
{
    if (t->kind == ENG_TOK_SPM)
        return spm_fragment(t, w, s, n, t->add_space_prefix, o);
    return bpe_fragment(t, w, s, n, o);
}

int eng_tok_encode(const eng_tok *t, const char *text, size_t len, int add_bos, int parse_special, int32_t *out,
                   size_t cap)
{
    if (!t || (!text && len))
        return ENG_EINVAL;
    if (len > MAX_TEXT)
        return ENG_EINVAL;
    obuf o = {out, out ? cap : 0, 0};
    work w;
    memset(&w, 0, sizeof w);
    int r = 0;
    if (add_bos && t->add_bos && t->bos >= 0)
        emit(&o, t->bos);
    const unsigned char *u = (const unsigned char *)text;
    int use_trie = t->trie && (parse_special || t->has_user);
    /* Plain text between special tokens is encoded fragment by fragment.
     * Each fragment starts the text or follows a special token, and in
     * both places SentencePiece adds its leading space. */
    size_t frag = 0;
    for (size_t i = 0; use_trie && i < len;) {
        size_t ml = 0;
        int32_t id = t->root[u[i]] ? special_at(t, u + i, len - i, parse_special, &ml) : -1;
        if (id < 0) {
            i++;
            continue;
        }
        if (i > frag && (r = plain(t, &w, text + frag, i - frag, &o)))
            goto done;
        emit(&o, id);
        i += ml;
        frag = i;
    }
    if (frag < len && (r = plain(t, &w, text + frag, len - frag, &o)))
        goto done;
    if (add_bos && t->add_eos && t->eos >= 0)
        emit(&o, t->eos);
    r = o.n > INT_MAX ? ENG_EINVAL : (int)o.n;
done:
    free(w.buf);
    free(w.syms);
    free(w.heap);
    free(w.chars);
    free(w.ends);
    free(w.tmp);
    return r;
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
        if (show_special)
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
