/* Tokenizer tests.
 *
 * Conformance: llama.cpp's ggml-vocab test vectors (X.gguf.inp holds the
 * texts, X.gguf.out the ids the Hugging Face tokenizer gives, no BOS)
 * must come out exactly, for the vocabularies shipped as GGUF and for
 * Qwen2 and Llama 3, whose vocabularies the test builds from their
 * vocab.json + merges files. Every text must also decode back to itself.
 * Then: invalid UTF-8, special tokens, output buffer sizes, long texts,
 * and malformed tokenizer metadata, which must give errors, not crashes. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gguf.h"
#include "testutil.h"
#include "tokenizer.h"
#include "unicode.h"

static int shared_missing;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Encode into a fresh array; *n gets the count (-1 on error). */
static int32_t *encode(const eng_tok *t, const char *s, size_t len, int bos, int special, int *n)
{
    *n = eng_tok_encode(t, s, len, bos, special, NULL, 0);
    if (*n < 0)
        return NULL;
    int32_t *ids = malloc(((size_t)*n + 1) * sizeof *ids);
    int m = eng_tok_encode(t, s, len, bos, special, ids, (size_t)*n);
    if (m != *n) {
        fprintf(stderr, "second encode gave %d ids, first %d\n", m, *n);
        *n = -1;
    }
    return ids;
}

/* All pieces of ids joined; caller frees. */
static char *decode(const eng_tok *t, const int32_t *ids, int n, int show_special, size_t *len)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += eng_tok_piece(t, ids[i], show_special, NULL, 0);
    char *s = malloc(total + 1);
    size_t w = 0;
    for (int i = 0; i < n; i++)
        w += eng_tok_piece(t, ids[i], show_special, s + w, total - w);
    s[w] = 0;
    *len = w;
    return s;
}

/* What each byte decodes to when encoded alone: itself, except bytes no
 * token stands for (byte-level vocabularies often leave out those UTF-8
 * never uses, Falcon also rare controls), which come back as U+FFFD (or
 * nothing, via <unk>). */
typedef struct lone_bytes {
    char text[256][8];
    size_t len[256];
} lone_bytes;

/* decode(encode(s)) gives s back, with lost bytes as lone says (NULL:
 * every byte comes back); SentencePiece adds its leading space. */
static int round_trip(const eng_tok *t, const char *s, size_t len, int spm_prefix, const lone_bytes *lone)
{
    int n;
    int32_t *ids = encode(t, s, len, 0, 0, &n);
    if (n < 0) {
        free(ids);
        return 0;
    }
    int ok = 1;
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= eng_tok_n_vocab(t))
            ok = 0;
    size_t dl, el = 0;
    char *d = decode(t, ids, n, 0, &dl);
    char *want = malloc(len * 8 + 1);
    for (size_t i = 0; i < len; i++) {
        unsigned char b = (unsigned char)s[i];
        if (lone) {
            memcpy(want + el, lone->text[b], lone->len[b]);
            el += lone->len[b];
        } else {
            want[el++] = s[i];
        }
    }
    size_t skip = spm_prefix && len > 0 ? 1 : 0;
    if (skip && (dl < 1 || d[0] != ' '))
        ok = 0;
    else if (dl - skip != el || memcmp(d + skip, want, el) != 0)
        ok = 0;
    free(want);
    free(d);
    free(ids);
    return ok;
}

static int spm_prefix(const eng_tok *t)
{
    /* the tokenizers under test that are SentencePiece all add the space */
    return eng_tok_kind(t) == ENG_TOK_SPM;
}

/* ---- the ggml-vocab vectors ---- */

#define SEP "\n__ggml_vocab_test__\n"

typedef struct vectors {
    char *inp, *out;
    size_t n;
    const char *text[64];
    size_t len[64];
    const char *ids[64]; /* line of the .out file */
} vectors;

static int load_vectors(const char *name, vectors *v)
{
    char rel[256], buf[4096];
    memset(v, 0, sizeof *v);
    snprintf(rel, sizeof rel, "models/ggml-vocab/ggml-vocab-%s.gguf.inp", name);
    if (!tu_shared(rel, buf))
        return shared_missing = 1, -1;
    size_t inl = 0, outl = 0;
    v->inp = tu_read(buf, &inl);
    snprintf(rel, sizeof rel, "models/ggml-vocab/ggml-vocab-%s.gguf.out", name);
    if (!tu_shared(rel, buf) || !(v->out = tu_read(buf, &outl)) || !v->inp) {
        free(v->inp);
        free(v->out);
        return shared_missing = 1, -1;
    }
    /* every case ends with the separator line, the last one included */
    for (size_t pos = 0; pos < inl && v->n < 64;) {
        char *sep = strstr(v->inp + pos, SEP);
        if (!sep)
            break;
        v->text[v->n] = v->inp + pos;
        v->len[v->n] = (size_t)(sep - (v->inp + pos));
        v->n++;
        pos = (size_t)(sep - v->inp) + strlen(SEP);
    }
    size_t lines = 0;
    for (char *p = v->out; lines < 64 && p < v->out + outl;) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = 0;
        v->ids[lines++] = p;
        if (!nl)
            break;
        p = nl + 1;
    }
    CHECKF(lines == v->n, "%s: %zu cases but %zu result lines", name, v->n, lines);
    if (lines < v->n)
        v->n = lines;
    return 0;
}

static void free_vectors(vectors *v)
{
    free(v->inp);
    free(v->out);
}

static int parse_ids(const char *line, int32_t *ids, int cap)
{
    int n = 0;
    char *end;
    for (const char *p = line; *p;) {
        long x = strtol(p, &end, 10);
        if (end == p)
            break;
        if (n < cap)
            ids[n] = (int32_t)x;
        n++;
        p = end;
    }
    return n;
}

static void show_ids(const char *what, const int32_t *ids, int n)
{
    fprintf(stderr, "  %s:", what);
    for (int i = 0; i < n; i++)
        fprintf(stderr, " %d", ids[i]);
    fputc('\n', stderr);
}

/* Run all cases of one vocabulary; returns how many matched. */
static size_t check_vectors(const char *name, const eng_tok *t, const vectors *v)
{
    size_t pass = 0, trips = 0;
    for (size_t c = 0; c < v->n; c++) {
        int32_t want[512];
        int nw = parse_ids(v->ids[c], want, 512);
        int n;
        int32_t *got = encode(t, v->text[c], v->len[c], 0, 0, &n);
        int same = n == nw && nw <= 512;
        for (int i = 0; same && i < n; i++)
            same = got[i] == want[i];
        if (same) {
            pass++;
        } else {
            fprintf(stderr, "%s case %zu: '%.*s'\n", name, c, (int)v->len[c], v->text[c]);
            show_ids("want", want, nw < 512 ? nw : 512);
            show_ids("got ", got, n);
        }
        free(got);
        trips += round_trip(t, v->text[c], v->len[c], spm_prefix(t), NULL);
    }
    printf("%-15s %zu/%zu cases match, %zu/%zu round trips\n", name, pass, v->n, trips, v->n);
    CHECKF(pass == v->n, "%s: %zu of %zu cases differ", name, v->n - pass, v->n);
    CHECKF(trips == v->n, "%s: %zu of %zu round trips differ", name, v->n - trips, v->n);
    return pass;
}

/* ---- building vocabularies from vocab.json + merges ---- */

typedef struct built {
    char *json, *merges_txt, *arena;
    eng_str *tokens;
    int32_t *types;
    eng_str *merges;
    uint32_t n_vocab, n_merges;
} built;

static void skip_ws(const char **p)
{
    while (**p == ' ' || **p == '\n' || **p == '\r' || **p == '\t')
        (*p)++;
}

static int hex4(const char *p, unsigned *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        *v = *v * 16 + (unsigned)d;
    }
    return 0;
}

static size_t put_utf8(unsigned cp, char *o)
{
    if (cp < 0x80)
        return o[0] = (char)cp, 1;
    if (cp < 0x800)
        return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000)
        return o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 0x3F)), o[2] = (char)(0x80 | (cp & 0x3F)), 3;
    o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A JSON string at *p (after the opening quote), unescaped into *o. */
static int json_string(const char **p, char **o)
{
    const char *s = *p;
    char *w = *o;
    while (*s && *s != '"') {
        if (*s != '\\') {
            *w++ = *s++;
            continue;
        }
        s++;
        switch (*s) {
        case '"': case '\\': case '/': *w++ = *s; break;
        case 'b': *w++ = '\b'; break;
        case 'f': *w++ = '\f'; break;
        case 'n': *w++ = '\n'; break;
        case 'r': *w++ = '\r'; break;
        case 't': *w++ = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (hex4(s + 1, &cp))
                return -1;
            s += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && s[1] == '\\' && s[2] == 'u' && !hex4(s + 3, &lo) && lo >= 0xDC00 &&
                lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                s += 6;
            }
            w += put_utf8(cp, w);
            break;
        }
        default:
            return -1;
        }
        s++;
    }
    if (*s != '"')
        return -1;
    *p = s + 1;
    *o = w;
    return 0;
}

/* Parse {"text": id, ...} into b->tokens (ids must be dense from 0 and
 * leave room for n_extra more); returns 0 or -1. */
static int parse_vocab_json(built *b, uint32_t n_total)
{
    size_t len = strlen(b->json);
    b->arena = malloc(len + 1);
    b->tokens = calloc(n_total, sizeof *b->tokens);
    b->types = malloc(n_total * sizeof *b->types);
    if (!b->arena || !b->tokens || !b->types)
        return -1;
    char *w = b->arena;
    const char *p = b->json;
    uint32_t count = 0, max = 0;
    skip_ws(&p);
    if (*p++ != '{')
        return -1;
    for (;;) {
        skip_ws(&p);
        if (*p == '}')
            break;
        if (*p++ != '"')
            return -1;
        char *start = w;
        if (json_string(&p, &w))
            return -1;
        skip_ws(&p);
        if (*p++ != ':')
            return -1;
        char *end;
        long id = strtol(p, &end, 10);
        if (end == p || id < 0 || (uint64_t)id >= n_total)
            return -1;
        p = end;
        if (b->tokens[id].ptr)
            return -1; /* the same id twice */
        b->tokens[id].ptr = start;
        b->tokens[id].len = (uint64_t)(w - start);
        b->types[id] = ENG_TT_NORMAL;
        count++;
        if ((uint32_t)id + 1 > max)
            max = (uint32_t)id + 1;
        skip_ws(&p);
        if (*p == ',')
            p++;
    }
    if (count != max)
        return -1;
    b->n_vocab = max;
    return 0;
}

static int parse_merges(built *b)
{
    size_t len = strlen(b->merges_txt), n = 0;
    for (size_t i = 0; i < len; i++)
        n += b->merges_txt[i] == '\n';
    b->merges = malloc((n + 1) * sizeof *b->merges);
    if (!b->merges)
        return -1;
    b->n_merges = 0;
    for (char *p = b->merges_txt; *p;) {
        char *nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p) : strlen(p);
        if (l && p[l - 1] == '\r')
            l--;
        if (l && !(b->n_merges == 0 && strncmp(p, "#version", 8) == 0)) {
            b->merges[b->n_merges].ptr = p;
            b->merges[b->n_merges].len = l;
            b->n_merges++;
        }
        if (!nl)
            break;
        p = nl + 1;
    }
    return 0;
}

static void add_special(built *b, uint32_t id, const char *text)
{
    b->tokens[id].ptr = text;
    b->tokens[id].len = strlen(text);
    b->types[id] = ENG_TT_CONTROL;
    if (id + 1 > b->n_vocab)
        b->n_vocab = id + 1;
}

static void free_built(built *b)
{
    free(b->json);
    free(b->merges_txt);
    free(b->arena);
    free(b->tokens);
    free(b->types);
    free(b->merges);
}

static char llama3_names[256][40];

/* Llama 3 (llama-bpe) or Qwen2 from their JSON and merges files. */
static eng_tok *build_json_vocab(const char *which, built *b)
{
    char p1[4096], p2[4096];
    int llama3 = strcmp(which, "llama-bpe") == 0;
    memset(b, 0, sizeof *b);
    if (!tu_shared(llama3 ? "models/llama3.2-encoder.json" : "models/qwen2-vocab.json", p1) ||
        !tu_shared(llama3 ? "models/llama3.2-vocab.bpe" : "models/qwen2-merges.txt", p2)) {
        shared_missing = 1;
        return NULL;
    }
    b->json = tu_read(p1, NULL);
    b->merges_txt = tu_read(p2, NULL);
    uint32_t n_total = llama3 ? 128256 : 151646;
    if (!b->json || !b->merges_txt || parse_vocab_json(b, n_total) || parse_merges(b)) {
        CHECKF(0, "%s: cannot read the vocabulary files", which);
        return NULL;
    }
    eng_tok_spec s;
    memset(&s, 0, sizeof s);
    s.kind = ENG_TOK_BPE;
    s.pre = which;
    s.bos = s.eos = s.unk = s.pad = s.eot = -1;
    if (llama3) {
        CHECK(b->n_vocab == 128000);
        /* the special tokens are not in encoder.json: 128000.. as Meta
         * numbers them */
        static const char *const named[] = {"<|begin_of_text|>", "<|end_of_text|>", NULL, NULL,
                                            "<|finetune_right_pad_id|>", NULL, "<|start_header_id|>",
                                            "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"};
        int reserved = 0;
        for (uint32_t i = 0; i < 256; i++) {
            if (i < sizeof named / sizeof named[0] && named[i])
                snprintf(llama3_names[i], sizeof llama3_names[i], "%s", named[i]);
            else
                snprintf(llama3_names[i], sizeof llama3_names[i], "<|reserved_special_token_%d|>", reserved++);
            add_special(b, 128000 + i, llama3_names[i]);
        }
        s.bos = 128000, s.eos = 128001, s.eot = 128009;
        s.add_bos = 1;
    } else {
        CHECK(b->n_vocab == 151643);
        add_special(b, 151643, "<|endoftext|>");
        add_special(b, 151644, "<|im_start|>");
        add_special(b, 151645, "<|im_end|>");
        s.eos = 151645, s.pad = 151643;
    }
    s.n_vocab = b->n_vocab;
    s.tokens = b->tokens;
    s.types = b->types;
    s.merges = b->merges;
    s.n_merges = b->n_merges;
    eng_tok *t = NULL;
    eng_err e = {{0}};
    double t0 = now();
    int r = eng_tok_new(&s, &t, &e);
    CHECKF(r == 0, "%s: %s", which, e.msg);
    printf("%-15s built from JSON: %u tokens, %u merges in %.2f s\n", which, b->n_vocab, b->n_merges, now() - t0);
    return t;
}

static eng_tok *load_gguf_vocab(const char *name)
{
    char rel[256], path[4096];
    snprintf(rel, sizeof rel, "models/ggml-vocab/ggml-vocab-%s.gguf", name);
    if (!tu_shared(rel, path)) {
        shared_missing = 1;
        return NULL;
    }
    eng_gguf *g = NULL;
    eng_tok *t = NULL;
    eng_err e = {{0}};
    int r = eng_gguf_open(path, &g, &e);
    CHECKF(r == 0, "%s: %s", name, e.msg);
    if (r)
        return NULL;
    r = eng_tok_from_gguf(g, &t, &e);
    CHECKF(r == 0, "%s: %s", name, e.msg);
    eng_gguf_close(g); /* the tokenizer must not need the file any more */
    return t;
}

/* ---- properties every tokenizer must have ---- */

static const char *const samples[] = {
    "Hello, world! 123 4567 89.5%",
    "na\xc3\xafve caf\xc3\xa9 \xe2\x80\x94 \xe2\x80\x9cquoted\xe2\x80\x9d",
    "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88",
    "emoji \xf0\x9f\x8e\x89\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd!",
    "tabs\tand\nnewlines\r\n\r\n  \n",
    "   leading and trailing   ",
    "'S 'LL 'Ve \xc5\xbfome can't I'M",
    "e\xcc\x81 combining, \xd8\xa7\xd9\x84\xd8\xb9\xd8\xb1\xd8\xa8\xd9\x8a\xd8\xa9, \xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\xa8\xe0\xa5\x8d\xe0\xa4\xa6\xe0\xa5\x80",
    "int main(void) { return x<=y && a->b[3] != 0x7F; }",
    "\xe2\x85\xa0\xe2\x85\xa1 \xc2\xbd \xd9\xa3\xd9\xa4 \xef\xbc\x91\xef\xbc\x92",
    "\xe3\x80\x80ideographic\xe3\x80\x80space\xe3\x80\x82 \xef\xbc\x81",
    "\x01\x02\x7f control \x1b[0m",
    "",
    " ",
};

/* Bytes that are not UTF-8: lone continuation, truncated, overlong,
 * surrogate, beyond U+10FFFF, invalid lead bytes, and a mix. */
static const char *const invalid[] = {
    "\xff", "\x80", "\xc3", "a\xc3(b", "\xe2\x82", "\xe2\x82 x", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
    "\xf8\x88\x80\x80\x80", "ok \xfe\xfe\xfe ok", "\xf0\x9f\x98", "x\xe3\x81\x82\xe3\x81y",
};

static void check_properties(const char *name, const eng_tok *t)
{
    static lone_bytes lone;
    int lost = 0;
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        int n;
        size_t dl;
        int32_t *ids = encode(t, &c, 1, 0, 0, &n);
        char *d = decode(t, ids, n, 0, &dl);
        size_t skip = spm_prefix(t) && dl > 0 && d[0] == ' ' ? 1 : 0;
        lone.len[b] = dl - skip < 8 ? dl - skip : 0;
        memcpy(lone.text[b], d + skip, lone.len[b]);
        if (lone.len[b] != 1 || lone.text[b][0] != c) {
            lost++;
            CHECKF(lone.len[b] == 0 || (lone.len[b] == 3 && memcmp(lone.text[b], "\xef\xbf\xbd", 3) == 0),
                   "%s: byte 0x%02X comes back as %zu other bytes", name, b, lone.len[b]);
        }
        free(ids);
        free(d);
    }
    size_t ok = 0, total = 0;
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++, total++) {
        int r = round_trip(t, samples[i], strlen(samples[i]), spm_prefix(t), NULL);
        CHECKF(r, "%s: round trip of sample %zu", name, i);
        ok += r;
    }
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++, total++) {
        int r = round_trip(t, invalid[i], strlen(invalid[i]), spm_prefix(t), &lone);
        CHECKF(r, "%s: round trip of invalid sample %zu", name, i);
        ok += r;
    }
    /* random bytes, NUL included (seeded: the same every run) */
    uint32_t seed = 12345;
    char buf[64];
    for (int k = 0; k < 200; k++, total++) {
        size_t len = 1 + k % 63;
        for (size_t i = 0; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            buf[i] = (char)(seed >> 16);
        }
        int r = round_trip(t, buf, len, spm_prefix(t), &lone);
        CHECKF(r, "%s: round trip of random bytes %d", name, k);
        ok += r;
    }
    /* NULL output with a capacity, and a buffer too small: the count is
     * still the full one and nothing is written past cap */
    const char *s = "The quick brown fox jumps over the lazy dog.";
    int n = eng_tok_encode(t, s, strlen(s), 0, 0, NULL, 100);
    CHECK(n > 3);
    int32_t small[4] = {-7, -7, -7, -7};
    CHECK(eng_tok_encode(t, s, strlen(s), 0, 0, small, 3) == n);
    CHECK(small[3] == -7 && small[0] >= 0);
    CHECK(eng_tok_encode(t, NULL, 0, 0, 0, NULL, 0) == 0);
    CHECK(eng_tok_encode(t, NULL, 5, 0, 0, NULL, 0) < 0);
    CHECK(eng_tok_piece(t, -1, 1, buf, sizeof buf) == 0);
    CHECK(eng_tok_piece(t, (int32_t)eng_tok_n_vocab(t), 1, buf, sizeof buf) == 0);
    CHECK(eng_tok_text(t, -5).len == 0);
    printf("%-15s %zu/%zu round trips of samples, invalid and random bytes (%d bytes have no token)\n", name, ok,
           total, lost);
}

/* Long texts in well under a few seconds, and no quadratic corner. */
static void check_speed(const char *name, const eng_tok *t, const vectors *v)
{
    size_t cap = 1 << 20, len = 0;
    char *big = malloc(cap + 4096);
    while (len < cap) {
        for (size_t c = 0; c < v->n && len < cap; c++) {
            memcpy(big + len, v->text[c], v->len[c]);
            len += v->len[c];
            big[len++] = '\n';
        }
    }
    double t0 = now();
    int n = eng_tok_encode(t, big, len, 1, 0, NULL, 0);
    double dt = now() - t0;
    printf("%-15s %.2f MB in %.3f s (%d tokens)\n", name, len / 1e6, dt, n);
    CHECK(n > 0);
    CHECKF(dt < 30.0, "%s: %.1f s for 1 MB", name, dt);
    /* one-character runs: a word of 200k letters, spaces, digits */
    const char fill[] = {'a', ' ', '7', '\n', '!'};
    for (size_t f = 0; f < sizeof fill; f++) {
        memset(big, fill[f], 200000);
        t0 = now();
        n = eng_tok_encode(t, big, 200000, 0, 0, NULL, 0);
        dt = now() - t0;
        CHECKF(n > 0 && dt < 20.0, "%s: run of '%c': %d tokens in %.1f s", name, fill[f], n, dt);
    }
    free(big);
}

/* One vocabulary: vectors, properties, speed. */
static void check_vocab(const char *name, eng_tok *t)
{
    vectors v;
    if (!t)
        return;
    if (load_vectors(name, &v) == 0) {
        check_vectors(name, t, &v);
        check_speed(name, t, &v);
        free_vectors(&v);
    }
    check_properties(name, t);
}

/* ---- special tokens, flags ---- */

static int has_id(const int32_t *ids, int n, int32_t id)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == id)
            return 1;
    return 0;
}

static void check_llama3_specials(const eng_tok *t)
{
    const char *s = "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>";
    int n;
    int32_t *ids = encode(t, s, strlen(s), 1, 1, &n);
    CHECK(n > 5 && ids[0] == 128000 && ids[1] == 128006 && ids[n - 1] == 128009 && has_id(ids, n, 128007));
    size_t dl;
    char *d = decode(t, ids + 1, n - 1, 1, &dl);
    CHECKF(strcmp(d, s) == 0, "llama3 specials decode to '%s'", d);
    free(d);
    d = decode(t, ids, n, 0, &dl);
    CHECKF(strcmp(d, "user\n\nHi there") == 0, "llama3 without specials: '%s'", d);
    free(d);
    free(ids);
    /* without parse_special the markup is plain text */
    ids = encode(t, s, strlen(s), 0, 0, &n);
    int any = 0;
    for (int i = 0; i < n; i++)
        any |= ids[i] >= 128000;
    CHECK(n > 10 && !any);
    free(ids);
    CHECK(eng_tok_is_eog(t, 128009) && eng_tok_is_eog(t, 128001) && eng_tok_is_eog(t, 128008));
    CHECK(!eng_tok_is_eog(t, 128000) && !eng_tok_is_eog(t, 1000) && !eng_tok_is_eog(t, -1));
    CHECK(eng_tok_bos(t) == 128000 && eng_tok_eos(t) == 128001);
    CHECK(eng_tok_find(t, "<|eot_id|>") == 128009 && eng_tok_find(t, "Hello") >= 0 &&
          eng_tok_find(t, "no such token anywhere") == -1);
}

static void check_qwen2_specials(const eng_tok *t)
{
    const char *s = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n";
    int n;
    int32_t *ids = encode(t, s, strlen(s), 1, 1, &n);
    /* no BOS for Qwen2 */
    CHECK(n > 6 && ids[0] == 151644 && has_id(ids, n, 151645));
    free(ids);
    CHECK(eng_tok_is_eog(t, 151645) && eng_tok_is_eog(t, 151643));
    /* a prefix of a special token is plain text */
    ids = encode(t, "<|im_sta", 8, 0, 1, &n);
    CHECK(n > 0 && !has_id(ids, n, 151644));
    free(ids);
    ids = encode(t, "<|im_start|", 11, 0, 1, &n);
    CHECK(n > 0 && !has_id(ids, n, 151644));
    free(ids);
}

static void check_spm_specials(const eng_tok *t)
{
    int n, m;
    int32_t *a = encode(t, "<s>Hello world", 14, 0, 1, &n);
    int32_t *b = encode(t, "Hello world", 11, 0, 0, &m);
    /* the special token, then the text with its leading space again */
    CHECK(n == m + 1 && a[0] == 1 && memcmp(a + 1, b, (size_t)m * sizeof *a) == 0);
    free(a);
    a = encode(t, "Hello world", 11, 1, 0, &n);
    CHECK(n == m + 1 && a[0] == 1);
    free(a);
    free(b);
    a = encode(t, "<s>", 3, 0, 0, &n);
    CHECK(n > 1 && !has_id(a, n, 1));
    free(a);
    CHECK(eng_tok_bos(t) == 1 && eng_tok_eos(t) == 2 && eng_tok_is_eog(t, 2));
    char buf[16];
    CHECK(eng_tok_piece(t, 1, 0, buf, sizeof buf) == 0);
    CHECK(eng_tok_piece(t, 1, 1, buf, sizeof buf) == 3 && memcmp(buf, "<s>", 3) == 0);
    int32_t id = eng_tok_find(t, "<0x41>");
    CHECK(id >= 0 && eng_tok_piece(t, id, 0, buf, sizeof buf) == 1 && buf[0] == 'A');
    id = eng_tok_find(t, "\xe2\x96\x81the");
    CHECK(id >= 0 && eng_tok_piece(t, id, 0, buf, sizeof buf) == 4 && memcmp(buf, " the", 4) == 0);
    /* the piece's length is reported even when the buffer is short */
    CHECK(eng_tok_piece(t, id, 0, buf, 2) == 4 && buf[0] == ' ' && buf[1] == 't');
}

/* ---- pre-tokenizer rules on their own ---- */

/* The words of text joined by '|'. */
static const char *split(enum eng_pretok kind, const char *text)
{
    static char out[512];
    eng_uni_char c[128];
    uint32_t ends[128], tmp[128];
    size_t len = strlen(text), nc = eng_uni_decode(text, len, c);
    size_t nw = eng_uni_pretok_split(kind, c, nc, ends, tmp), w = 0, a = 0;
    for (size_t k = 0; k < nw; k++) {
        size_t from = c[a].off, to = ends[k] < nc ? c[ends[k]].off : len;
        if (k)
            out[w++] = '|';
        memcpy(out + w, text + from, to - from);
        w += to - from;
        a = ends[k];
    }
    out[w] = 0;
    return out;
}

static void expect_split(enum eng_pretok kind, const char *text, const char *want)
{
    const char *got = split(kind, text);
    CHECKF(strcmp(got, want) == 0, "pre-tokenizer %d on '%s': got '%s', want '%s'", (int)kind, text, got, want);
}

static void check_pretok(void)
{
    expect_split(ENG_PRE_GPT2, "Hello world  x", "Hello| world| | x");
    expect_split(ENG_PRE_GPT2, "\t\tx", "\t|\t|x");
    expect_split(ENG_PRE_GPT2, "it's 'S  ", "it|'s| '|S|  ");
    expect_split(ENG_PRE_GPT2, "a\xff\xfe" "b \xc3", "a|\xff\xfe|b| \xc3");
    expect_split(ENG_PRE_LLAMA3, "I'VE 12345\n\n  y", "I|'VE| |123|45|\n\n| | y");
    expect_split(ENG_PRE_LLAMA3, "?Hi ...\n\nok", "?Hi| ...\n\n|ok");
    expect_split(ENG_PRE_LLAMA3, "\xc5\xbf'\xc5\xbf", "\xc5\xbf|'\xc5\xbf");
    expect_split(ENG_PRE_QWEN2, "x12345", "x|1|2|3|4|5");
    expect_split(ENG_PRE_DEEPSEEK_LLM, "ab  \n", "ab|  |\n");
    expect_split(ENG_PRE_DEEPSEEK_LLM, "ab  cd", "ab| | cd");
    expect_split(ENG_PRE_DEEPSEEK_CODER, "x=\xe4\xb8\xad\xe6\x96\x87 42", "x|=|\xe4\xb8\xad\xe6\x96\x87| |4|2");
    expect_split(ENG_PRE_FALCON, "x=12345", "x|=|123|45");
    expect_split(ENG_PRE_STARCODER, " 42", " |4|2");
    expect_split(ENG_PRE_GPT2, "", "");
    /* GPT-4o (gpt-oss): words split where lower case turns upper, marks in both case classes, digits by 3,
     * punctuation with its trailing newlines and slashes; the expected splits are those of the o200k regex
     * (Hugging Face tokenizers' pattern, run with Python's regex module) */
    expect_split(ENG_PRE_GPT4O, "Hello world  x", "Hello| world| | x");
    expect_split(ENG_PRE_GPT4O, "HELLO World", "HELLO| World");
    expect_split(ENG_PRE_GPT4O, "HeLLo wORLD", "He|LLo| w|ORLD");
    expect_split(ENG_PRE_GPT4O, "don't DON'T I'VE we'll", "don't| DON'T| I'VE| we'll");
    expect_split(ENG_PRE_GPT4O, "?Hi ...\n\nok", "?Hi| ...\n\n|ok");
    expect_split(ENG_PRE_GPT4O, "x12345 6", "x|123|45| |6");
    expect_split(ENG_PRE_GPT4O, "a/b//\n\nc", "a|/b|//\n\n|c");
    expect_split(ENG_PRE_GPT4O, "  \n\t x", "  \n|\t| x");
    expect_split(ENG_PRE_GPT4O, "ABC\xe4""\xb8""\xad""\xe6""\x96""\x87"" \xe4""\xb8""\xad""ABC", "ABC\xe4""\xb8""\xad""\xe6""\x96""\x87""| \xe4""\xb8""\xad""|ABC");
    expect_split(ENG_PRE_GPT4O, "cafe\xcc""\x81"" e\xcc""\x81""t\xc3""\xa9""", "cafe\xcc""\x81""| e\xcc""\x81""t\xc3""\xa9""");
    expect_split(ENG_PRE_GPT4O, "\xcc""\x81""abc", "\xcc""\x81""abc");
    expect_split(ENG_PRE_GPT4O, "!\xcc""\x81""ab", "!\xcc""\x81""ab");
    expect_split(ENG_PRE_GPT4O, "foo.bar(baz)\r\n", "foo|.bar|(baz|)\r\n");
    expect_split(ENG_PRE_GPT4O, "\xce""\xa9""mega \xc7""\x85""z", "\xce""\xa9""mega| \xc7""\x85""z");
    expect_split(ENG_PRE_GPT4O, "tab\there", "tab|\there");
    expect_split(ENG_PRE_GPT4O, "   trailing   ", "  | trailing|   ");
    expect_split(ENG_PRE_GPT4O, "<start>user<message>Hi", "<start|>user|<message|>Hi");
    expect_split(ENG_PRE_GPT4O, "x\xd9""\xa0""\xd9""\xa1""\xd9""\xa2""\xd9""\xa3""", "x|\xd9""\xa0""\xd9""\xa1""\xd9""\xa2""|\xd9""\xa3""");
    expect_split(ENG_PRE_GPT4O, "\xca""\xb0""ab \xca""\xb0""AB", "\xca""\xb0""ab| \xca""\xb0""|AB");
    expect_split(ENG_PRE_GPT4O, "A'S b's", "A'S| b's");
    int im = -1;
    CHECK(eng_uni_pretok_lookup("llama-bpe", 9, &im) == ENG_PRE_LLAMA3 && im == 1);
    CHECK(eng_uni_pretok_lookup(NULL, 0, &im) == ENG_PRE_GPT2 && im == 0);
    CHECK(eng_uni_pretok_lookup("qwen", 4, &im) == -1);
    CHECK(eng_uni_pretok_lookup("gpt-4o", 6, &im) == ENG_PRE_GPT4O && im == 0);
    for (int b = 0; b < 256; b++)
        CHECK(eng_uni_cp_to_byte(eng_uni_byte_to_cp((uint8_t)b)) == b);
    CHECK(eng_uni_byte_to_cp(' ') == 0x120 && eng_uni_byte_to_cp('\n') == 0x10A && eng_uni_byte_to_cp(0xAD) == 0x143);
}

/* ---- malformed metadata ---- */

static char tmp_path[4096];

enum {
    BAD_NONE, BAD_SCORES_TYPE, BAD_TOKENS_TYPE, BAD_TYPES_LEN, BAD_SCORES_LEN, BAD_BOS, BAD_MODEL, NO_MODEL,
    BAD_TYPE_VALUE, SCORES_SCALAR, BAD_FLAG_TYPE, NO_TOKENS, BAD_EOS_TYPE, BPE_OK, BPE_BAD_MERGE, BPE_BAD_PRE,
    BPE_NO_MERGES, BPE_MERGES_TYPE,
};

/* A tiny vocabulary: <unk> <s> </s>, 256 byte tokens, then a few words. */
#define N_WORDS 8
static const char *const words[N_WORDS] = {"\xe2\x96\x81", "a", "b", "\xe2\x96\x81" "a", "ab", "\xe2\x96\x81" "ab",
                                          "c", "\xc4\xa0"};

static int write_vocab(int bad)
{
    eng_gguf_writer *w = eng_gguf_writer_new();
    enum { N = 3 + 256 + N_WORDS };
    static char bytes[256][8];
    const char *toks[N];
    float scores[N];
    int32_t types[N + 1]; /* one spare for the too-long variant */
    toks[0] = "<unk>", toks[1] = "<s>", toks[2] = "</s>";
    types[0] = ENG_TT_UNKNOWN, types[1] = types[2] = ENG_TT_CONTROL;
    for (int i = 0; i < 256; i++) {
        snprintf(bytes[i], sizeof bytes[i], "<0x%02X>", i);
        toks[3 + i] = bytes[i];
        types[3 + i] = ENG_TT_BYTE;
    }
    for (int i = 0; i < N_WORDS; i++) {
        toks[3 + 256 + i] = words[i];
        types[3 + 256 + i] = ENG_TT_NORMAL;
    }
    types[N] = ENG_TT_NORMAL;
    for (int i = 0; i < N; i++)
        scores[i] = (float)-i;
    int bpe = bad >= BPE_OK;
    if (bad == BAD_MODEL)
        eng_gguf_writer_str(w, "tokenizer.ggml.model", "bert");
    else if (bad != NO_MODEL)
        eng_gguf_writer_str(w, "tokenizer.ggml.model", bpe ? "gpt2" : "llama");
    if (bad == BAD_TOKENS_TYPE)
        eng_gguf_writer_arr(w, "tokenizer.ggml.tokens", GGUF_I32, types, N);
    else if (bad != NO_TOKENS)
        eng_gguf_writer_arr_str(w, "tokenizer.ggml.tokens", toks, N);
    if (bad == BAD_SCORES_TYPE)
        eng_gguf_writer_arr_str(w, "tokenizer.ggml.scores", toks, N);
    else if (bad == SCORES_SCALAR)
        eng_gguf_writer_f32(w, "tokenizer.ggml.scores", 1.0f);
    else if (!bpe)
        eng_gguf_writer_arr(w, "tokenizer.ggml.scores", GGUF_F32, scores, bad == BAD_SCORES_LEN ? N - 1 : N);
    if (bad == BAD_TYPE_VALUE)
        types[7] = 42;
    eng_gguf_writer_arr(w, "tokenizer.ggml.token_type", GGUF_I32, types, bad == BAD_TYPES_LEN ? N + 1 : N);
    eng_gguf_writer_u32(w, "tokenizer.ggml.bos_token_id", bad == BAD_BOS ? N : 1);
    if (bad == BAD_EOS_TYPE)
        eng_gguf_writer_str(w, "tokenizer.ggml.eos_token_id", "2");
    else
        eng_gguf_writer_u32(w, "tokenizer.ggml.eos_token_id", 2);
    eng_gguf_writer_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    /* padding past the vocabulary is tolerated: converters write that */
    eng_gguf_writer_u32(w, "tokenizer.ggml.padding_token_id", N + 5);
    if (bad == BAD_FLAG_TYPE)
        eng_gguf_writer_str(w, "tokenizer.ggml.add_bos_token", "yes");
    if (bpe) {
        const char *merges[] = {"a b", "\xc4\xa0 a", "\xc4\xa0" "a b", bad == BPE_BAD_MERGE ? "ab" : "c c"};
        if (bad == BPE_MERGES_TYPE)
            eng_gguf_writer_arr(w, "tokenizer.ggml.merges", GGUF_F32, scores, 4);
        else if (bad != BPE_NO_MERGES)
            eng_gguf_writer_arr_str(w, "tokenizer.ggml.merges", merges, 4);
        eng_gguf_writer_str(w, "tokenizer.ggml.pre", bad == BPE_BAD_PRE ? "klingon-bpe" : "gpt-2");
    }
    eng_err e = {{0}};
    int r = eng_gguf_writer_save(w, tmp_path, &e);
    eng_gguf_writer_free(w);
    CHECKF(r == 0, "writing the test vocabulary: %s", e.msg);
    return r;
}

/* Load variant bad; returns the code and leaves the message in e. */
static int load_variant(int bad, eng_tok **t, eng_err *e)
{
    *t = NULL;
    if (write_vocab(bad))
        return -100;
    eng_gguf *g = NULL;
    int r = eng_gguf_open(tmp_path, &g, e);
    CHECKF(r == 0, "variant %d: the GGUF itself is fine: %s", bad, e->msg);
    if (r)
        return -100;
    r = eng_tok_from_gguf(g, t, e);
    eng_gguf_close(g);
    return r;
}

static void expect_error(int bad, int code, const char *needle, const char *needle2)
{
    eng_tok *t = (eng_tok *)1;
    eng_err e = {{0}};
    int r = load_variant(bad, &t, &e);
    CHECKF(r < 0 && r != -100 && t == NULL, "variant %d: expected an error, got %d", bad, r);
    if (code)
        CHECKF(r == code, "variant %d: code %d, expected %d (%s)", bad, r, code, e.msg);
    CHECKF(strstr(e.msg, needle) != NULL, "variant %d: message '%s' does not name '%s'", bad, e.msg, needle);
    if (needle2)
        CHECKF(strstr(e.msg, needle2) != NULL, "variant %d: message '%s' does not say '%s'", bad, e.msg, needle2);
    eng_tok_free(t);
}

/* gpt-oss's harmony vocabulary (it has <|return|> and <|call|>): <|end|>
 * closes a message, not the turn, so it does not stop generation, and the
 * message tags show in replies; typed text is still not read as them. A
 * vocabulary without <|call|> keeps <|end|> as an end of turn. */
static void check_harmony(void)
{
    eng_str toks[10] = {{"a", 1}, {"b", 1}, {"<|start|>", 9}, {"<|channel|>", 11}, {"<|message|>", 11},
                        {"<|end|>", 7}, {"<|return|>", 10}, {"<|call|>", 8}, {"<", 1}, {"|", 1}};
    int32_t types[10] = {1, 1, 3, 3, 3, 3, 3, 3, 1, 1};
    eng_str merges[1] = {{"a b", 3}};
    for (int with_call = 1; with_call >= 0; with_call--) {
        eng_tok_spec s;
        memset(&s, 0, sizeof s);
        s.kind = ENG_TOK_BPE;
        s.n_vocab = 10;
        s.tokens = toks;
        s.types = types;
        s.n_merges = 1;
        s.merges = merges;
        s.bos = s.unk = s.pad = s.eot = -1;
        s.eos = 6;
        eng_str renamed[10];
        memcpy(renamed, toks, sizeof renamed);
        if (!with_call)
            renamed[7] = (eng_str){"<|cal|>", 7};
        s.tokens = renamed;
        eng_tok *t = NULL;
        eng_err e;
        CHECK(eng_tok_new(&s, &t, &e) == 0 && t);
        if (!t)
            continue;
        CHECKF(eng_tok_is_eog(t, 5) == !with_call, "<|end|> end of generation: %d (harmony %d)",
               eng_tok_is_eog(t, 5), with_call);
        CHECK(eng_tok_is_eog(t, 6));
        char buf[32];
        size_t n = eng_tok_piece(t, 3, 0, buf, sizeof buf);
        CHECKF(with_call ? n == 11 && !memcmp(buf, "<|channel|>", 11) : n == 0, "<|channel|> shows %zu bytes", n);
        CHECK(eng_tok_piece(t, 6, 0, buf, sizeof buf) == 0); /* <|return|> ends it, unseen */
        int ni;
        int32_t *ids = encode(t, "<|channel|>", 11, 0, 0, &ni);
        CHECKF(ni > 1 && ids && ids[0] != 3, "typed tag became %d ids, first %d", ni, ids ? ids[0] : -1);
        free(ids);
        ids = encode(t, "<|channel|>", 11, 0, 1, &ni);
        CHECK(ni == 1 && ids && ids[0] == 3);
        free(ids);
        eng_tok_free(t);
    }
}

static void check_malformed(void)
{
    const char *dir = getenv("TMPDIR");
    snprintf(tmp_path, sizeof tmp_path, "%s/nibble-test-tok-%ld.gguf", dir && *dir ? dir : "/tmp", (long)getpid());

    eng_tok *t = NULL;
    eng_err e = {{0}};
    int r = load_variant(BAD_NONE, &t, &e);
    CHECKF(r == 0 && t, "the well-formed vocabulary: %s", e.msg);
    if (t) {
        int n;
        int32_t *ids = encode(t, "ab a", 4, 1, 0, &n);
        /* BOS, then "▁ab" and "▁a" (the merged pieces with the best scores) */
        CHECKF(n == 3 && ids[0] == 1 && ids[1] == 3 + 256 + 5 && ids[2] == 3 + 256 + 3, "tiny SPM: %d ids", n);
        free(ids);
        /* z has no token of its own: byte fallback */
        ids = encode(t, "z", 1, 0, 0, &n);
        CHECK(n == 2 && ids[0] == 3 + 256 && ids[1] == 3 + 'z');
        free(ids);
        CHECK(round_trip(t, "a b\xff\x01 zz", 8, 1, NULL));
        eng_tok_free(t);
    }
    r = load_variant(BPE_OK, &t, &e);
    CHECKF(r == 0 && t, "the well-formed BPE vocabulary: %s", e.msg);
    if (t) {
        int n;
        int32_t *ids = encode(t, "ab ab", 5, 1, 0, &n);
        /* no BOS by default for gpt2; "ab" then "Ġa"+"b" (Ġab is no token:
         * byte pieces remain) */
        CHECKF(n >= 2 && ids[0] == 3 + 256 + 4, "tiny BPE: %d ids, first %d", n, n ? ids[0] : -1);
        free(ids);
        eng_tok_free(t);
    }

    expect_error(BAD_SCORES_TYPE, ENG_EFORMAT, "tokenizer.ggml.scores", "expected array of f32, got array of string");
    expect_error(SCORES_SCALAR, ENG_EFORMAT, "tokenizer.ggml.scores", "expected array of f32");
    expect_error(BAD_TOKENS_TYPE, ENG_EFORMAT, "tokenizer.ggml.tokens", "array of string");
    expect_error(NO_TOKENS, ENG_EFORMAT, "tokenizer.ggml.tokens", NULL);
    expect_error(BAD_TYPES_LEN, ENG_EFORMAT, "tokenizer.ggml.token_type", NULL);
    expect_error(BAD_SCORES_LEN, ENG_EFORMAT, "tokenizer.ggml.scores", NULL);
    expect_error(BAD_TYPE_VALUE, ENG_EFORMAT, "tokenizer.ggml.token_type", NULL);
    expect_error(BAD_BOS, ENG_EFORMAT, "tokenizer.ggml.bos_token_id", "out of range");
    expect_error(BAD_EOS_TYPE, ENG_EFORMAT, "tokenizer.ggml.eos_token_id", NULL);
    expect_error(BAD_FLAG_TYPE, ENG_EFORMAT, "tokenizer.ggml.add_bos_token", NULL);
    expect_error(BAD_MODEL, ENG_EUNSUP, "bert", NULL);
    expect_error(NO_MODEL, ENG_EFORMAT, "tokenizer.ggml.model", NULL);
    expect_error(BPE_BAD_MERGE, ENG_EFORMAT, "tokenizer.ggml.merges", NULL);
    expect_error(BPE_BAD_PRE, ENG_EUNSUP, "klingon-bpe", NULL);
    expect_error(BPE_NO_MERGES, ENG_EFORMAT, "tokenizer.ggml.merges", NULL);
    expect_error(BPE_MERGES_TYPE, ENG_EFORMAT, "tokenizer.ggml.merges", "array of string");
    remove(tmp_path);

    /* the same checks on a specification built by hand */
    eng_str toks[4] = {{"a", 1}, {"b", 1}, {"ab", 2}, {NULL, 3}};
    eng_str merges[2] = {{"a b", 3}, {"ab", 2}};
    int32_t types[3] = {1, 1, 9};
    eng_tok_spec s;
    memset(&s, 0, sizeof s);
    s.kind = ENG_TOK_BPE;
    s.n_vocab = 3;
    s.tokens = toks;
    s.n_merges = 1;
    s.merges = merges;
    s.bos = s.eos = s.unk = s.pad = s.eot = -1;
    t = NULL;
    CHECK(eng_tok_new(&s, &t, &e) == 0 && t);
    if (t) {
        int n;
        int32_t *ids = encode(t, "abab", 4, 0, 0, &n);
        CHECK(n == 2 && ids[0] == 2 && ids[1] == 2);
        free(ids);
        /* "c" has no token and no byte piece: nothing to emit, no crash */
        ids = encode(t, "c\xff", 2, 0, 0, &n);
        CHECK(n == 0);
        free(ids);
        eng_tok_free(t);
    }
    eng_tok_spec b = s;
    b.bos = 3;
    CHECK(eng_tok_new(&b, &t, &e) == ENG_EFORMAT && !t && strstr(e.msg, "bos_token_id"));
    b = s;
    b.eot = -2;
    CHECK(eng_tok_new(&b, &t, &e) == ENG_EFORMAT && !t && strstr(e.msg, "eot_token_id"));
    b = s;
    b.n_merges = 2;
    CHECK(eng_tok_new(&b, &t, &e) == ENG_EFORMAT && !t && strstr(e.msg, "merges[1]"));
    b = s;
    b.merges = NULL;
    CHECK(eng_tok_new(&b, &t, &e) < 0 && !t);
    b = s;
    b.n_vocab = 4;
    CHECK(eng_tok_new(&b, &t, &e) < 0 && !t && strstr(e.msg, "tokens[3]"));
    b = s;
    b.types = types;
    CHECK(eng_tok_new(&b, &t, &e) == ENG_EFORMAT && !t && strstr(e.msg, "token_type[2]"));
    b = s;
    b.n_vocab = 0;
    CHECK(eng_tok_new(&b, &t, &e) < 0 && !t);
    b = s;
    b.kind = (enum eng_tok_kind)7;
    CHECK(eng_tok_new(&b, &t, &e) < 0 && !t);
    b = s;
    b.pre = "no-such-pre";
    CHECK(eng_tok_new(&b, &t, &e) == ENG_EUNSUP && !t && strstr(e.msg, "no-such-pre"));
    CHECK(eng_tok_new(NULL, &t, &e) < 0 && !t);
    eng_tok_free(NULL);
    CHECK(eng_tok_n_vocab(NULL) == 0 && eng_tok_encode(NULL, "x", 1, 0, 0, NULL, 0) < 0);
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0); /* keep reports in order with stderr */
    static const char *const ggufs[] = {"llama-spm", "phi-3", "gpt-2", "deepseek-llm", "deepseek-coder", "falcon",
                                        "starcoder"};
    for (size_t i = 0; i < sizeof ggufs / sizeof ggufs[0]; i++) {
        eng_tok *t = load_gguf_vocab(ggufs[i]);
        check_vocab(ggufs[i], t);
        if (t && strcmp(ggufs[i], "llama-spm") == 0)
            check_spm_specials(t);
        eng_tok_free(t);
    }
    built b;
    eng_tok *t = build_json_vocab("qwen2", &b);
    check_vocab("qwen2", t);
    if (t)
        check_qwen2_specials(t);
    eng_tok_free(t);
    free_built(&b);
    t = build_json_vocab("llama-bpe", &b);
    check_vocab("llama-bpe", t);
    if (t)
        check_llama3_specials(t);
    eng_tok_free(t);
    free_built(&b);

    check_pretok();
    check_harmony();
    check_malformed();

    if (tu_failures)
        return tu_result("test_tokenizer");
    if (shared_missing) {
        printf("test_tokenizer: the shared vocabularies are missing; only the self-contained checks ran\n");
        return TU_SKIP;
    }
    return tu_result("test_tokenizer");
}
