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
#include "tok_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

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

int tok_set_replacement(eng_tok *t)
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
