#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model_layout.h"
#include "pool.h"
#include "simd.h"
#include "session.h"
#include "spec.h"
#include "sys.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct bw_job {
    const uint64_t *buf;
    size_t words;
    uint64_t sums[256];
} bw_job;

/* Each worker reads its slice; the sums keep the reads from being
 * optimised away. Four independent accumulators let the loads overlap. */
static void bw_worker(void *arg, int ith, int nth)
{
    bw_job *j = arg;
    size_t lo = j->words * (size_t)ith / (size_t)nth, hi = j->words * (size_t)(ith + 1) / (size_t)nth;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = lo; i + 4 <= hi; i += 4) {
        a += j->buf[i];
        b += j->buf[i + 1];
        c += j->buf[i + 2];
        d += j->buf[i + 3];
    }
    j->sums[ith & 255] = a ^ b ^ c ^ d;
}

double eng_bench_membw(int n_threads, size_t bytes)
{
    size_t words = bytes / 8;
    uint64_t *buf = malloc(words * 8);
    eng_pool *p = eng_pool_new(n_threads);
    if (!buf || !p) {
        free(buf);
        eng_pool_free(p);
        return -1;
    }
    for (size_t i = 0; i < words; i++)
        buf[i] = i * 0x9e3779b97f4a7c15ull;
    bw_job j = {buf, words, {0}};
    double best = 0;
    for (int pass = 0; pass < 5; pass++) {
        double t0 = now_s();
        eng_pool_run(p, bw_worker, &j);
        double dt = now_s() - t0;
        double gbs = (double)words * 8 / dt / 1e9;
        if (gbs > best)
            best = gbs;
    }
    eng_pool_free(p);
    free(buf);
    return best;
}

uint64_t eng_bench_bytes_per_token(const eng_model *m) { return eng_model_bytes_per_token(m); }

#define PEAK_ROWS 256u  /* 16 packed groups */
#define PEAK_COLS 1024u /* q8_0: 272 KB of weights, in any L2 of this decade */
#define PEAK_NT 32u     /* prefill's batch (forward.c) */

typedef struct peak_job {
    int type;
    const void *w;           /* rows, packed when dot_packed is set */
    const void *act;         /* PEAK_NT activation rows */
    size_t wstride, astride;
    const simd_traits *t;
    int packed;              /* w is packed: the set's dot_packed reads it */
    long iters;
    float *out;              /* per thread: PEAK_NT * PEAK_ROWS floats */
} peak_job;

static void peak_worker(void *arg, int ith, int nth)
{
    (void)nth;
    peak_job *j = arg;
    float *out = j->out + (size_t)ith * PEAK_NT * PEAK_ROWS;
    for (long i = 0; i < j->iters; i++) {
        if (j->packed)
            j->t->dot_packed(PEAK_COLS, j->w, PEAK_ROWS / SIMD_PACK_ROWS, j->act, j->astride, PEAK_NT, out, PEAK_ROWS);
        else
            j->t->dot_rows(PEAK_COLS, j->w, j->wstride, PEAK_ROWS, j->act, j->astride, PEAK_NT, out, PEAK_ROWS);
    }
}

double eng_bench_peak(int type, int n_threads)
{
    const simd_traits *t = simd_type_traits(type);
    if (!t || !t->dot_rows || !t->quant || n_threads < 1)
        return -1;
    size_t wstride = simd_row_bytes(type, PEAK_COLS), astride = simd_act_row_bytes(t->act, PEAK_COLS);
    float *x = malloc(PEAK_COLS * sizeof *x);
    char *rows = malloc(wstride * PEAK_ROWS), *packed = malloc(wstride * PEAK_ROWS);
    char *act = malloc(astride * PEAK_NT);
    float *out = malloc((size_t)n_threads * PEAK_NT * PEAK_ROWS * sizeof *out);
    eng_pool *p = eng_pool_new(n_threads);
    double best = -1;
    if (!x || !rows || !packed || !act || !out || !p)
        goto out;
    uint64_t s = 99;
    for (uint32_t r = 0; r < PEAK_ROWS + PEAK_NT; r++) {
        for (uint32_t i = 0; i < PEAK_COLS; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            x[i] = (float)((int64_t)(s >> 40) - (1 << 23)) / (float)(1 << 23);
        }
        if (r < PEAK_ROWS)
            t->quant(x, rows + r * wstride, PEAK_COLS);
        else
            simd_act_quant(t->act, x, act + (r - PEAK_ROWS) * astride, PEAK_COLS);
    }
    peak_job j = {type, rows, act, wstride, astride, t, 0, 1, out};
    if (t->dot_packed && simd_pack_has_layout(type)) {
        simd_pack(type, PEAK_COLS, rows, wstride, PEAK_ROWS / SIMD_PACK_ROWS, packed);
        j.w = packed;
        j.packed = 1;
    }
    /* size the passes to about 0.2 s each, then keep the best of three */
    double t0 = now_s();
    eng_pool_run(p, peak_worker, &j);
    double one = now_s() - t0;
    j.iters = one > 0 ? (long)(0.2 / one) + 1 : 1000;
    for (int pass = 0; pass < 3; pass++) {
        t0 = now_s();
        eng_pool_run(p, peak_worker, &j);
        double dt = now_s() - t0;
        double g = (double)PEAK_ROWS * PEAK_COLS * PEAK_NT * (double)j.iters * n_threads / dt / 1e9;
        if (g > best)
            best = g;
    }
out:
    eng_pool_free(p);
    free(x);
    free(rows);
    free(packed);
    free(act);
    free(out);
    return best;
}

/* One of simd's peak loops on every thread of a pool (int8 or float). */
typedef struct peak_loop_job {
    int fma; /* 0: simd_int8_peak_run, 1: simd_fma_peak_run */
    long iters;
    uint64_t macs[256];
    int32_t sink[256];
    float fsink[256];
} peak_loop_job;

static void peak_loop_worker(void *arg, int ith, int nth)
{
    (void)nth;
    peak_loop_job *j = arg;
    j->macs[ith & 255] = j->fma ? simd_fma_peak_run(j->iters, &j->fsink[ith & 255])
                                : simd_int8_peak_run(j->iters, &j->sink[ith & 255]);
}

/* The loop's rate on n_threads threads, G multiply-adds/s: the best of
 * three passes of about 0.2 s each, or -1. */
static double peak_loop(int fma, int n_threads)
{
    eng_pool *p = eng_pool_new(n_threads);
    if (!p)
        return -1;
    peak_loop_job j = {.fma = fma, .iters = 10000};
    double t0 = now_s();
    eng_pool_run(p, peak_loop_worker, &j);
    double one = now_s() - t0;
    j.iters = one > 0 ? (long)(10000 * 0.2 / one) + 1 : 10000;
    double best = -1;
    for (int pass = 0; pass < 3; pass++) {
        t0 = now_s();
        eng_pool_run(p, peak_loop_worker, &j);
        double dt = now_s() - t0;
        uint64_t macs = 0;
        for (int i = 0; i < n_threads && i < 256; i++)
            macs += j.macs[i];
        if (dt > 0 && macs / dt / 1e9 > best)
            best = macs / dt / 1e9;
    }
    eng_pool_free(p);
    return best;
}

double eng_bench_int8_peak(int n_threads) { return peak_loop(0, n_threads); }

double eng_bench_fma_peak(int n_threads) { return peak_loop(1, n_threads); }

uint64_t eng_bench_attn_macs_per_prompt_token(const eng_model *m, uint32_t depth, uint32_t n_prompt)
{
    const eng_model_info *in = eng_model_get_info(m);
    if (!n_prompt)
        return 0;
    uint64_t total = 0;
    for (uint32_t l = 0; l < in->n_layers; l++) {
        const eng_layer *L = eng_model_layer(m, l);
        /* the positions token t of the prompt sees: depth + t + 1, or the
         * layer's window */
        uint64_t seen = 0;
        for (uint64_t t = 0; t < n_prompt; t++) {
            uint64_t p = (uint64_t)depth + t + 1;
            seen += L->window && p > L->window ? L->window : p;
        }
        total += seen * L->n_heads * in->head_dim;
    }
    return (total + n_prompt / 2) / n_prompt;
}

uint64_t eng_bench_macs_per_prompt_token(const eng_model *m)
{
    const eng_model_info *in = eng_model_get_info(m);
    uint64_t table = (uint64_t)in->n_vocab * in->dim, skip = in->tied_output ? table : 2 * table;
    return in->n_active_params > skip ? in->n_active_params - skip : 0;
}

static void stat_of(const double *v, int n, eng_bench_stat *s)
{
    double sum = 0, ss = 0;
    for (int i = 0; i < n; i++)
        sum += v[i];
    s->mean = sum / n;
    for (int i = 0; i < n; i++)
        ss += (v[i] - s->mean) * (v[i] - s->mean);
    s->sd = n > 1 ? sqrt(ss / (n - 1)) : 0;
    s->reps = n;
}

/* The resident set after a run: what the mapped weights, the KV cache
 * and the scratch buffers add up to while the model runs. */
static void note_rss(eng_bench_mem *mem)
{
    uint64_t r = eng_rss_bytes();
    if (mem && r > mem->rss)
        mem->rss = r;
}

/* Truncate the context back to depth; where a sliding window forgot what
 * depth needs, run the context's tokens again (outside the timing). */
static int back_to(eng_ctx *c, const int32_t *ids, uint32_t depth, eng_err *e)
{
    uint32_t kept = eng_ctx_truncate(c, depth);
    return kept < depth ? eng_ctx_eval(c, ids + kept, depth - kept, NULL, 0, e) : 0;
}

int eng_bench_run(eng_model *m, int n_threads, int n_depth, int n_prompt, int n_gen, int reps, eng_bench_stat *pp,
                  eng_bench_stat *tg, eng_bench_mem *mem, eng_err *e)
{
    return eng_bench_run_kv(m, n_threads, ENG_KV_F16, ENG_KV_F16, n_depth, n_prompt, n_gen, reps, pp, tg, mem, e);
}

int eng_bench_run_kv(eng_model *m, int n_threads, int type_k, int type_v, int n_depth, int n_prompt, int n_gen,
                     int reps, eng_bench_stat *pp, eng_bench_stat *tg, eng_bench_mem *mem, eng_err *e)
{
    const eng_model_info *in = eng_model_get_info(m);
    uint32_t depth = n_depth > 0 ? (uint32_t)n_depth : 0;
    uint32_t need = depth + (uint32_t)(n_prompt > n_gen + 1 ? n_prompt : n_gen + 1);
    eng_ctx *c;
    eng_ctx_opts co = {.n_ctx = need, .n_threads = n_threads, .type_k = type_k, .type_v = type_v};
    int r = eng_ctx_new_opts(m, &co, &c, e);
    if (r)
        return r;
    int32_t *ids = malloc(need * sizeof *ids);
    float *logits = malloc(in->n_vocab * sizeof *logits);
    double *v = malloc((size_t)(reps + 1) * sizeof *v);
    if (!ids || !logits || !v) {
        r = eng_errf(e, ENG_ENOMEM, "out of memory");
        goto out;
    }
    uint64_t s = 12345;
    for (uint32_t i = 0; i < need; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((s >> 33) % in->n_vocab);
    }
    /* the context every run starts from: kept, each run truncates back to it */
    if (depth && (r = eng_ctx_eval(c, ids, depth, NULL, 0, e)))
        goto out;
    memset(pp, 0, sizeof *pp);
    memset(tg, 0, sizeof *tg);
    if (mem) {
        memset(mem, 0, sizeof *mem);
        mem->kv_bytes = eng_ctx_kv_bytes(c);
        mem->kv_full_bytes = eng_model_kv_bytes_typed(m, need, 1, type_k, type_v);
        mem->kv_read_bytes = eng_model_kv_bytes_typed(m, depth + (uint32_t)(n_gen > 0 ? n_gen : 0) / 2 + 1, 0, type_k,
                                                      type_v);
        mem->pack_extra = eng_model_pack_extra_bytes(m);
        mem->budget = in->file_size + mem->kv_bytes + ((uint64_t)64 << 20) + mem->pack_extra;
    }
    for (int run = 0; n_prompt > 0 && run <= reps; run++) {
        if ((r = back_to(c, ids, depth, e)))
            goto out;
        double t0 = now_s();
        if ((r = eng_ctx_eval(c, ids + depth, (uint32_t)n_prompt, logits, 0, e)))
            goto out;
        if (run > 0) /* run 0 warms caches and pages */
            v[run - 1] = n_prompt / (now_s() - t0);
        note_rss(mem);
    }
    if (n_prompt > 0)
        stat_of(v, reps, pp);
    for (int run = 0; n_gen > 0 && run <= reps; run++) {
        if ((r = back_to(c, ids, depth, e)))
            goto out;
        if ((r = eng_ctx_eval(c, ids + depth, 1, logits, 0, e)))
            goto out;
        double t0 = now_s();
        for (int i = 1; i <= n_gen; i++)
            if ((r = eng_ctx_eval(c, ids + depth + i, 1, logits, 0, e)))
                goto out;
        if (run > 0)
            v[run - 1] = n_gen / (now_s() - t0);
        note_rss(mem);
    }
    if (n_gen > 0)
        stat_of(v, reps, tg);
out:
    free(ids);
    free(logits);
    free(v);
    eng_ctx_free(c);
    return r;
}

int eng_bench_load_time(const char *path, const eng_model_opts *mo, int n_threads, int reps, eng_bench_load *out,
                        eng_err *e)
{
    out->open_ms = out->first_ms = 0;
    for (int run = 0; run < reps; run++) {
        double t0 = now_s();
        eng_model *m;
        eng_ctx *c = NULL;
        int r = eng_model_open_opts(path, mo, &m, e);
        if (r)
            return r;
        float *logits = malloc(eng_model_get_info(m)->n_vocab * sizeof *logits);
        if (!logits) {
            eng_model_close(m);
            return eng_errf(e, ENG_ENOMEM, "out of memory");
        }
        if ((r = eng_ctx_new(m, 0, n_threads, &c, e)) == 0) {
            double t1 = now_s();
            int32_t first = eng_tok_bos(eng_model_tok(m));
            if (first < 0)
                first = 0;
            if ((r = eng_ctx_eval(c, &first, 1, logits, 0, e)) == 0) {
                double t2 = now_s();
                if (run == 0 || (t1 - t0) * 1e3 < out->open_ms)
                    out->open_ms = (t1 - t0) * 1e3;
                if (run == 0 || (t2 - t0) * 1e3 < out->first_ms)
                    out->first_ms = (t2 - t0) * 1e3;
            }
        }
        eng_ctx_free(c);
        free(logits);
        eng_model_close(m);
        if (r)
            return r;
    }
    return 0;
}

/* ---- speculative decoding against plain decoding (issue 23) ---- */

/* Greedy from the prompt: n tokens plainly, or with sp, after the
 * session was put back to the prompt (keep). An end-of-text token is fed
 * and generation goes on, as the random-id decode test never stops. */
static int gen_tokens(eng_session *s, eng_spec *sp, uint32_t base, const float *keep, int n, int32_t *out, eng_err *e)
{
    eng_session_keep(s, base, keep);
    if (sp)
        eng_spec_drop(sp);
    int k = 0;
    while (k < n) {
        if (eng_session_pos(s) + 1 >= eng_session_ctx_size(s))
            return eng_errf(e, ENG_EINVAL, "the context is full after %d tokens", k);
        int r;
        uint32_t got = 1;
        if (sp)
            r = eng_spec_next(sp, (uint32_t)(n - k), out + k, &got, e);
        else
            r = eng_session_next(s, out + k, e);
        if (r < 0)
            return r;
        k += (int)got;
        if (r == 1 && (r = eng_session_feed(s, &out[k - 1], 1, e)))
            return r;
    }
    return 0;
}

int eng_bench_spec(eng_model *m, const eng_bench_spec_opts *o, eng_bench_spec_result *res, eng_err *e)
{
    memset(res, 0, sizeof *res);
    eng_sampler_params p = eng_sampler_defaults();
    p.temp = 0;
    eng_session *s = NULL;
    eng_spec *sp = NULL;
    uint32_t nv = eng_model_get_info(m)->n_vocab;
    float *keep = malloc(nv * sizeof *keep);
    int32_t *a = malloc((size_t)o->n_gen * sizeof *a), *b = malloc((size_t)o->n_gen * sizeof *b);
    double *v = malloc((size_t)(o->reps + 1) * sizeof *v);
    int r = 0;
    if (!keep || !a || !b || !v) {
        r = eng_errf(e, ENG_ENOMEM, "out of memory");
        goto out;
    }
    if ((r = eng_session_new(m, o->n_ctx, o->n_threads, &p, &s, e)) || (r = eng_session_feed_text(s, o->prompt, 1, e)))
        goto out;
    eng_spec_opts so = {.draft = o->draft, .draft_max = o->draft_max, .draft_min = o->draft_min, .lookup = o->lookup};
    if ((r = eng_spec_new(s, &so, &sp, e)))
        goto out;
    uint32_t base = eng_session_pos(s);
    memcpy(keep, eng_session_logits(s), nv * sizeof *keep);
    res->prompt_tokens = base;
    /* plain and speculative runs take turns, so a change in the machine's
     * load touches both alike; run 0 of each warms up */
    double *w = malloc((size_t)(o->reps + 1) * sizeof *w);
    if (!w) {
        r = eng_errf(e, ENG_ENOMEM, "out of memory");
        goto out;
    }
    res->same = 1;
    for (int run = 0; run <= o->reps; run++) {
        double t0 = now_s();
        if ((r = gen_tokens(s, NULL, base, keep, o->n_gen, a, e)))
            break;
        double t1 = now_s();
        if (run == 1)
            eng_spec_reset_stats(sp);
        if ((r = gen_tokens(s, sp, base, keep, o->n_gen, b, e)))
            break;
        double t2 = now_s();
        if (run > 0) {
            v[run - 1] = o->n_gen / (t1 - t0);
            w[run - 1] = o->n_gen / (t2 - t1);
        }
        if (memcmp(a, b, (size_t)o->n_gen * sizeof *a))
            res->same = 0;
    }
    if (!r) {
        stat_of(v, o->reps, &res->plain);
        stat_of(w, o->reps, &res->spec);
        const eng_spec_stats *st = eng_spec_get_stats(sp);
        res->checks = st->steps;
        res->drafted = st->drafted;
        res->accepted = st->accepted;
    }
    free(w);
out:
    eng_spec_free(sp);
    eng_session_free(s);
    free(keep);
    free(a);
    free(b);
    free(v);
    return r;
}
