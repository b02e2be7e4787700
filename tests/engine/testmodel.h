/* What the engine tests that build their own models share: a seeded
 * PRNG, the tensors of a test model (values as generated, as stored in
 * the file's type, and that stored form read back as floats), the small
 * SentencePiece vocabulary every test model carries, and the distance
 * between a run's logits and the reference's.
 *
 * Include after testutil.h, engine/gguf/include/gguf.h, model.h and
 * simd/simd.h. */
#ifndef NIBBLE_TESTMODEL_H
#define NIBBLE_TESTMODEL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tests' contexts take batches of TM_BATCH tokens (the engine's
 * default is larger), so their 40-token sequences cross a batch boundary. */
#define TM_BATCH 32
static inline int tm_ctx_new(eng_model *m, uint32_t n_ctx, int threads, eng_ctx **c, eng_err *e)
{
    eng_ctx_opts o = {.n_ctx = n_ctx, .n_threads = threads, .n_batch = TM_BATCH};
    return eng_ctx_new_opts(m, &o, c, e);
}

/* ---- a seeded PRNG (splitmix64), so every run sees the same models ---- */

static uint64_t rng_s;

static inline uint64_t rng_next(void)
{
    uint64_t z = (rng_s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [-1, 1) */
static inline double rng_unif(void) { return (double)(rng_next() >> 11) * (2.0 / 9007199254740992.0) - 1.0; }

static inline void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

/* ---- a test model's tensors ---- */

#define TM_MAX_T 96

typedef struct wt {
    char name[64];
    uint32_t n_dims;
    uint64_t ne[2];
    int type;
    float *master; /* as generated; NULL unless kept */
    void *data;    /* in `type`, as written to the file */
    float *deq;    /* data dequantized: what the engine computes with */
} wt;

typedef struct tm_tensors {
    wt t[TM_MAX_T];
    int n;
} tm_tensors;

static inline wt *tm_find(tm_tensors *ts, const char *name)
{
    for (int i = 0; i < ts->n; i++)
        if (strcmp(ts->t[i].name, name) == 0)
            return &ts->t[i];
    return NULL;
}

/* A tensor of ne0 x ne1 values offset + scale * U(-1,1) (ne1 0: a vector,
 * always f32), stored as `type`, or f16 where rows do not fill its
 * blocks. Rows are whole blocks, so blocks never straddle rows. The
 * generated values are kept in ->master when keep_master is set. */
static inline wt *tm_add(tm_tensors *ts, const char *name, uint64_t ne0, uint64_t ne1, int type, double scale,
                         double offset, int keep_master)
{
    if (ts->n == TM_MAX_T) {
        fprintf(stderr, "TM_MAX_T too small\n");
        exit(1);
    }
    wt *w = &ts->t[ts->n++];
    snprintf(w->name, sizeof w->name, "%s", name);
    w->n_dims = ne1 ? 2 : 1;
    w->ne[0] = ne0;
    w->ne[1] = ne1 ? ne1 : 1;
    if (!ne1)
        type = SIMD_F32;
    if (simd_type_traits(type)->block > 1 && ne0 % simd_type_traits(type)->block)
        type = SIMD_F16;
    w->type = type;
    size_t n = (size_t)(w->ne[0] * w->ne[1]);
    float *master = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        master[i] = (float)(offset + scale * rng_unif());
    w->deq = xmalloc(n * sizeof(float));
    w->data = xmalloc(simd_row_bytes(type, ne0) * w->ne[1]);
    const simd_traits *tr = simd_type_traits(type);
    tr->quant(master, w->data, n);
    tr->dequant(w->data, w->deq, n);
    if (keep_master) {
        w->master = master;
    } else {
        w->master = NULL;
        free(master);
    }
    return w;
}

static inline void tm_free(tm_tensors *ts)
{
    for (int i = 0; i < ts->n; i++) {
        free(ts->t[i].master);
        free(ts->t[i].data);
        free(ts->t[i].deq);
    }
    ts->n = 0;
}

/* Every tensor but the one named `omit` (may be NULL) into the writer;
 * nonzero if one failed. */
static inline int tm_put_tensors(eng_gguf_writer *w, const tm_tensors *ts, const char *omit)
{
    int rc = 0;
    for (int i = 0; i < ts->n; i++) {
        const wt *t = &ts->t[i];
        if (omit && strcmp(omit, t->name) == 0)
            continue;
        rc |= eng_gguf_writer_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
    }
    return rc;
}

/* ---- the vocabulary: <unk> <s> </s>, the 256 byte tokens, then words ---- */

#define TM_MAX_WORDS 64

/* A SentencePiece vocabulary of 3 + 256 + n_words tokens, with BOS 1,
 * EOS 2 and UNK 0; nonzero if a key failed. */
static inline int tm_put_spm_vocab(eng_gguf_writer *w, const char *const *words, int n_words)
{
    enum { N = 3 + 256 + TM_MAX_WORDS };
    static char texts[N][24];
    const char *tok[N];
    float scores[N];
    int32_t types[N];
    if (n_words > TM_MAX_WORDS) {
        fprintf(stderr, "TM_MAX_WORDS too small\n");
        exit(1);
    }
    int nv = 3 + 256 + n_words;
    for (int i = 0; i < nv; i++) {
        if (i < 3) {
            static const char *const special[3] = {"<unk>", "<s>", "</s>"};
            snprintf(texts[i], sizeof texts[i], "%s", special[i]);
            types[i] = i == 0 ? 2 : 3;
            scores[i] = 0;
        } else if (i < 3 + 256) {
            snprintf(texts[i], sizeof texts[i], "<0x%02X>", i - 3);
            types[i] = 6;
            scores[i] = 0;
        } else {
            snprintf(texts[i], sizeof texts[i], "\xe2\x96\x81%s", words[i - 259]); /* U+2581 word start */
            types[i] = 1;
            scores[i] = -(float)(i - 259);
        }
        tok[i] = texts[i];
    }
    int rc = 0;
    rc |= eng_gguf_writer_str(w, "tokenizer.ggml.model", "llama");
    rc |= eng_gguf_writer_arr_str(w, "tokenizer.ggml.tokens", tok, (uint64_t)nv);
    rc |= eng_gguf_writer_arr(w, "tokenizer.ggml.scores", GGUF_F32, scores, (uint64_t)nv);
    rc |= eng_gguf_writer_arr(w, "tokenizer.ggml.token_type", GGUF_I32, types, (uint64_t)nv);
    rc |= eng_gguf_writer_u32(w, "tokenizer.ggml.bos_token_id", 1);
    rc |= eng_gguf_writer_u32(w, "tokenizer.ggml.eos_token_id", 2);
    rc |= eng_gguf_writer_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    return rc;
}

/* ---- comparisons ---- */

/* max_v |a - ref| / max_v |ref| over nv logits */
static inline double tm_pos_err(const float *a, const double *ref, int nv)
{
    double mx = 0, d = 0;
    for (int v = 0; v < nv; v++) {
        mx = fmax(mx, fabs(ref[v]));
        d = fmax(d, fabs((double)a[v] - ref[v]));
    }
    return mx > 0 ? d / mx : d;
}

static inline double tm_pos_err_dd(const double *a, const double *ref, int nv)
{
    double mx = 0, d = 0;
    for (int v = 0; v < nv; v++) {
        mx = fmax(mx, fabs(ref[v]));
        d = fmax(d, fabs(a[v] - ref[v]));
    }
    return mx > 0 ? d / mx : d;
}

#endif
