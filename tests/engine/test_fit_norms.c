/* Norm gains fitted to the quantized matrices (eng_normfit_gain,
 * eng_quant_opts.fit_norms, `nibble quantize --fit-norms`):
 *  - the algebra: a quantized copy that is the float matrix with its
 *    columns divided by c is repaired exactly (s = c); on random q4_0
 *    matrices fed by correlated inputs the fitted gain lowers the output
 *    error sum ||X W^T - X (Wq diag(s))^T||^2 measured here, and the loss
 *    the fit reports before and after equals that measure; given the
 *    cross sums of inputs equal to the float ones it solves the same; a
 *    large ridge keeps s near 1;
 *  - on the embedded model (with ../shared's WikiText): eng_normfit_run
 *    on an RTN q4_0 file fits all 10 attn_norm / ffn_norm gains, lowers
 *    the KL to the f32 model on 12 windows by a margin, changes only
 *    those gains (every other tensor byte for byte), gives the same bytes
 *    on two threads, fits all gains a layer per round; on a GPTQ file
 *    the KL does not rise;
 *  - `nibble quantize --fit-norms`: refused without --calib, a failed fit
 *    (a text shorter than a window) leaves no OUT, a good run reports
 *    the 10 gains and records nibble.quantize.fit_norms. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "gguf.h"
#include "gptq.h"
#include "model.h"
#include "normfit.h"
#include "ppl.h"
#include "quantize.h"
#include "simd.h"
#include "testutil.h"

/* the fitted files' KL on 12 windows must be below these shares of the
 * unfitted ones' (measured: see test_model's output) */
#define KL_BOUND_RTN 0.95
#define KL_BOUND_GPTQ 1.0

static char dir[256];

static const char *tmp(const char *name) { return tu_path(dir, name); }

static uint64_t rng = 0x2545f4914f6cdd1du;

static double uniform(void) { return tu_uniform(&rng); }

static double gauss(void) { return tu_gauss(&rng); }

enum { COLS = 64, ROWS = 48, N = 500, MATS = 3 };

/* sum over inputs, matrices and rows of (x . (w - q o s))^2 */
static double out_err(const float *X, const float *W, const float *Q, const double *s)
{
    double e = 0;
    for (int t = 0; t < N; t++)
        for (int r = 0; r < MATS * ROWS; r++) {
            double d = 0;
            for (int c = 0; c < COLS; c++)
                d += (double)X[t * COLS + c] * ((double)W[r * COLS + c] - Q[r * COLS + c] * (s ? s[c] : 1.0));
            e += d * d;
        }
    return e;
}

static void test_algebra(void)
{
    float *X = malloc(sizeof(float) * N * COLS), *W = malloc(sizeof(float) * MATS * ROWS * COLS);
    float *Q = malloc(sizeof(float) * MATS * ROWS * COLS);
    double *H = calloc(COLS * COLS, sizeof *H), s[COLS], c[COLS];
    const simd_traits *tr = simd_type_traits(SIMD_Q4_0);
    char blk[64 * 18 / 32 + 8];
    if (!X || !W || !Q || !H) {
        CHECK(0);
        goto done;
    }
    for (int t = 0; t < N; t++) {
        double z1 = 0;
        for (int i = 0; i < COLS; i++) {
            double z = gauss();
            X[t * COLS + i] = (float)((z + 0.7 * z1) * (1 + (i % 5)));
            z1 = z;
        }
    }
    for (int t = 0; t < N; t++)
        for (int i = 0; i < COLS; i++)
            for (int j = 0; j < COLS; j++)
                H[i * COLS + j] += (double)X[t * COLS + i] * X[t * COLS + j];
    for (int i = 0; i < MATS * ROWS * COLS; i++)
        W[i] = (float)(0.1 * gauss());
    eng_gain_mat m[MATS];
    for (int k = 0; k < MATS; k++)
        m[k] = (eng_gain_mat){.w = W + k * ROWS * COLS, .wq = Q + k * ROWS * COLS, .rows = ROWS, .H = H};
    /* W with its columns divided by c: s = c exactly */
    for (int i = 0; i < COLS; i++)
        c[i] = 0.8 + 0.4 * uniform();
    for (int i = 0; i < MATS * ROWS * COLS; i++)
        Q[i] = (float)(W[i] / c[i % COLS]);
    double l0 = 0, l1 = 0, worst = 0;
    eng_gain_opts plain = {0};
    CHECK(eng_normfit_gain(COLS, m, MATS, &plain, s, &l0, &l1) == 0);
    for (int i = 0; i < COLS; i++)
        worst = fmax(worst, fabs(s[i] - c[i]) / c[i]);
    CHECKF(worst < 1e-5 && l1 < 1e-8 * l0, "scaled copy: s off by %g, loss %g -> %g", worst, l0, l1);
    /* q4_0 rounding: the fit lowers the measured error and reports it */
    for (int r = 0; r < MATS * ROWS; r++) {
        tr->quant(W + r * COLS, blk, COLS);
        tr->dequant(blk, Q + r * COLS, COLS);
    }
    for (int pm = 0; pm < 2; pm++) {
        eng_gain_opts o = {.per_matrix = pm};
        CHECK(eng_normfit_gain(COLS, m, MATS, &o, s, &l0, &l1) == 0);
        double e0 = out_err(X, W, Q, NULL), e1 = out_err(X, W, Q, s);
        printf("q4_0, %s: output error %.6g -> %.6g (%.1f%%)\n", pm ? "per matrix" : "alike", e0, e1, 100 * e1 / e0);
        CHECKF(e1 < 0.995 * e0, "the fit did not lower the error: %g -> %g", e0, e1);
        if (!pm) /* alike: the reported loss is the measured one */
            CHECKF(fabs(l0 - e0) < 1e-6 * e0 && fabs(l1 - e1) < 1e-6 * e0, "reported %g %g, measured %g %g", l0,
                   l1, e0, e1);
    }
    /* the quantized model's own inputs equal to the float ones (cross =
     * h_fp = H): the same solution */
    double s2[COLS], l2 = 0, l3 = 0;
    eng_gain_mat mc[MATS];
    for (int k = 0; k < MATS; k++)
        mc[k] = m[k], mc[k].cross = H, mc[k].h_fp = H;
    CHECK(eng_normfit_gain(COLS, m, MATS, &plain, s, &l0, &l1) == 0 &&
          eng_normfit_gain(COLS, mc, MATS, &plain, s2, &l2, &l3) == 0 && !memcmp(s, s2, sizeof s) && l0 == l2 &&
          l1 == l3);
    /* a large ridge holds s at 1 */
    eng_gain_opts stiff = {.ridge = 1e4};
    CHECK(eng_normfit_gain(COLS, m, MATS, &stiff, s, &l0, &l1) == 0);
    worst = 0;
    for (int i = 0; i < COLS; i++)
        worst = fmax(worst, fabs(s[i] - 1));
    CHECKF(worst < 1e-3 && l1 <= l0, "ridge 1e4: s off 1 by %g", worst);
done:
    free(X);
    free(W);
    free(Q);
    free(H);
}

/* Quantize model to q4_0 into name (with g: through the GPTQ pass) and,
 * with fit, refit its gains (the sums of `layers` layers at a time, on
 * `threads` threads); 0 or 1. */
static int quantize(const char *model, const char *calib, const char *name, eng_gptq *g, int fit, int threads,
                    uint32_t layers, eng_normfit_report *fr)
{
    eng_err e;
    eng_quant_opts o = {.target = eng_qtarget_find("q4_0"), .method = g ? "gptq" : "rtn", .threads = threads,
                        .fit_norms = fit};
    if (g)
        o.gptq = g, o.gptq_params.clip = 1, o.gptq_params.refine = 4, o.gptq_params.threads = threads;
    eng_quant_report rep;
    /* one layer's sums: 6 x 64^2 doubles and 2 windows of 256 x 64 floats */
    eng_normfit_opts no = {.calib_path = calib, .max_tokens = 2048, .threads = threads,
                           .max_bytes = (uint64_t)layers * (6 * 64 * 64 * 8 + 2 * 256 * 64 * 4)};
    if (eng_quantize_file(model, tmp(name), &o, &rep, &e) || (fit && eng_normfit_run(model, tmp(name), &no, fr, &e))) {
        CHECKF(0, "%s: %s", name, e.msg);
        return 1;
    }
    return 0;
}

static double kl_of(const char *name, eng_model *base, const char *text, size_t len)
{
    eng_err e;
    eng_model *m = NULL;
    eng_ppl_result r;
    eng_ppl_opts po = {.n_ctx = 256, .max_chunks = 12, .threads = 1, .base = base};
    if (eng_model_open(tmp(name), &m, &e) || eng_ppl_run(m, text, len, &po, &r, &e)) {
        CHECKF(0, "%s: %s", name, e.msg);
        eng_model_close(m);
        return 0;
    }
    printf("%-12s mean KL to f32 %.5f, top-1 %.2f%%\n", name, r.kl, 100 * r.top1);
    eng_model_close(m);
    return r.kl;
}

static int same_file(const char *a, const char *b)
{
    size_t na = 0, nb = 0;
    char *fa = tu_read(tmp(a), &na), *fb = tu_read(tmp(b), &nb);
    int same = fa && fb && na == nb && !memcmp(fa, fb, na);
    free(fa);
    free(fb);
    return same;
}

/* Only the gains differ between files a and b (all 10, f32, when fitted). */
static int only_gains_differ(const char *a, const char *b)
{
    eng_err e;
    eng_gguf *ga = NULL, *gb = NULL;
    int n_diff = 0, others_same = 1;
    if (eng_gguf_open(tmp(a), &ga, &e) || eng_gguf_open(tmp(b), &gb, &e))
        others_same = 0;
    for (uint64_t i = 0; ga && gb && i < eng_gguf_n_tensors(ga); i++) {
        const eng_gguf_tensor *ta = eng_gguf_tensor_at(ga, i), *tb = eng_gguf_tensor_find(gb, ta->name);
        int gain = strstr(ta->name, ".attn_norm.") || strstr(ta->name, ".ffn_norm.");
        int same = tb && ta->type == tb->type && ta->size == tb->size && !memcmp(ta->data, tb->data, ta->size);
        n_diff += gain && !same && tb && tb->type == SIMD_F32;
        others_same &= gain || same;
    }
    eng_gguf_close(ga);
    eng_gguf_close(gb);
    CHECKF(n_diff == 10 && others_same, "%s against %s: %d gains changed; the rest the same: %d", b, a, n_diff,
           others_same);
    return n_diff == 10 && others_same;
}

static void test_model(const char *model)
{
    char pv[4096], pt[4096];
    const char *valid = tu_shared("text/wiki.valid.raw", pv), *test = tu_shared("text/wiki.test.raw", pt);
    if (!valid || !test)
        return;
    eng_err e;
    eng_gptq *g = NULL;
    eng_gptq_opts go = {.calib_path = valid, .max_tokens = 2048, .threads = 1, .ffn_rows = 1};
    CHECKF(eng_gptq_collect(model, &go, &g, &e) == 0, "%s", e.msg);
    size_t len = 0;
    char *text = tu_read(test, &len);
    eng_model *base = NULL;
    CHECK(text && eng_model_open(model, &base, &e) == 0);
    eng_normfit_report fr;
    if (!g || !base || !text || quantize(model, valid, "rtn.gguf", NULL, 0, 1, 5, &fr) ||
        quantize(model, valid, "fit.gguf", NULL, 1, 1, 5, &fr))
        goto done;
    /* 5 layers' attn_norm and ffn_norm in one round, each loss lowered */
    CHECKF(fr.n_fit == 10 && fr.n_skipped == 0 && fr.rounds == 1 && fr.ratio > 0.3 && fr.ratio < 0.99,
           "%u gains (%u left), %u rounds, ratio %g", fr.n_fit, fr.n_skipped, fr.rounds, fr.ratio);
    double k0 = kl_of("rtn.gguf", base, text, len), k1 = kl_of("fit.gguf", base, text, len);
    printf("rtn: fitted / unfitted KL %.4f\n", k1 / k0);
    CHECKF(k0 > 0 && k1 > 0 && k1 < KL_BOUND_RTN * k0, "rtn: fitted %g, unfitted %g", k1, k0);
    only_gains_differ("rtn.gguf", "fit.gguf");
    /* two threads: the same bytes */
    if (!quantize(model, valid, "fit2.gguf", NULL, 1, 2, 5, &fr))
        CHECKF(same_file("fit.gguf", "fit2.gguf"), "two threads: another file");
    /* a layer a round (each round sees the gains fitted before): all fitted */
    if (!quantize(model, valid, "fit1.gguf", NULL, 1, 1, 1, &fr))
        CHECKF(fr.n_fit == 10 && fr.rounds == 5 && only_gains_differ("rtn.gguf", "fit1.gguf"), "%u rounds",
               fr.rounds);
    /* after GPTQ */
    if (!quantize(model, valid, "gptq.gguf", g, 0, 1, 5, &fr) && !quantize(model, valid, "gfit.gguf", g, 1, 1, 5, &fr)) {
        double g0 = kl_of("gptq.gguf", base, text, len), g1 = kl_of("gfit.gguf", base, text, len);
        printf("gptq: fitted / unfitted KL %.4f\n", g1 / g0);
        CHECKF(g0 > 0 && g1 > 0 && g1 < KL_BOUND_GPTQ * g0, "gptq: fitted %g, unfitted %g", g1, g0);
    }
done:
    eng_model_close(base);
    free(text);
    eng_gptq_free(g);
}

#ifndef _WIN32
/* A nibble command line (tu_run), stderr in err.txt; whether it says what. */
#define run(bin, args) tu_run(bin, args, tmp("err.txt"))
#define err_has(what) tu_file_has(tmp("err.txt"), what)

/* quantize --fit-norms: refused without a text; a fit that fails (a text
 * shorter than one window) leaves no OUT; a good run says what it did
 * and records it */
static void test_cli(const char *model)
{
    const char *bin = getenv("NIBBLE_BIN");
    if (!bin || !*bin)
        return;
    FILE *f = fopen(tmp("short.txt"), "w");
    if (f)
        fputs("Once upon a time.", f), fclose(f);
    f = fopen(tmp("calib.txt"), "w");
    for (int i = 0; f && i < 60; i++)
        fputs("Once upon a time, a little girl named Lily found a red ball in the park. She was very happy. ", f);
    if (f)
        fclose(f);
    char a[2048], cal[600];
    snprintf(a, sizeof a, "quantize %s %s q4_0 -q --fit-norms", model, tmp("o.gguf"));
    CHECK(run(bin, a) == 2 && err_has("--fit-norms") && err_has("needs --calib TEXT"));
    snprintf(cal, sizeof cal, "%s", tmp("short.txt"));
    snprintf(a, sizeof a, "quantize %s %s q4_0 -q --fit-norms --calib %s", model, tmp("o.gguf"), cal);
    FILE *o = NULL;
    CHECK(run(bin, a) == 1 && err_has("fitting norm gains") && !(o = fopen(tmp("o.gguf"), "rb")));
    if (o)
        fclose(o);
    snprintf(cal, sizeof cal, "%s", tmp("calib.txt"));
    snprintf(a, sizeof a, "quantize %s %s q4_0 -q --fit-norms --calib %s -t 2", model, tmp("o.gguf"), cal);
    CHECK(run(bin, a) == 0 && err_has("fit-norms: 10 norm gains refitted (0 left) in 1 round"));
    eng_gguf *g = NULL;
    eng_err e;
    uint32_t v = 0;
    eng_str m = {0};
    CHECK(eng_gguf_open(tmp("o.gguf"), &g, &e) == 0 && eng_gguf_get_u32(g, "nibble.quantize.fit_norms", &v, NULL) == 0 &&
          v == 1 && eng_gguf_get_str(g, "nibble.quantize.method", &m, NULL) == 0 && m.len == 3 &&
          !memcmp(m.ptr, "rtn", 3));
    eng_gguf_close(g);
}
#endif

int main(void)
{
    simd_init();
    if (!tu_scratch(dir, sizeof dir, "test_fit_norms"))
        return 1;
    char buf[4096];
    const char *model = tu_asset("stories260K.gguf", buf);
    test_algebra();
    if (model) {
#ifndef _WIN32
        test_cli(model);
#endif
        test_model(model);
    }
    tu_rmtree(dir);
    return tu_result("test_fit_norms");
}
