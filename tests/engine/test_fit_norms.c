/* Norm gains fitted to the quantized matrices (eng_gptq_fit_gain,
 * eng_quant_opts.fit_norms, `nibble quantize --fit-norms`):
 *  - the algebra: a quantized copy that is the float matrix with its
 *    columns divided by c is repaired exactly (s = c); on random q4_0
 *    matrices fed by correlated inputs the fitted gain lowers the output
 *    error sum ||X W^T - X (Wq diag(s))^T||^2 measured here, and the loss
 *    the fit reports before and after equals that measure; a large ridge
 *    keeps s near 1;
 *  - on the embedded model (with ../shared's WikiText): an RTN q4_0 file
 *    with fitted attn_norm / ffn_norm gains has lower KL to the f32 model
 *    on 12 windows than without (by a margin), only those gains change
 *    (every matrix byte for byte as without the fit), the file is the
 *    same with the Hessians and the rows on two threads, and with GPTQ
 *    too. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gguf.h"
#include "gptq.h"
#include "model.h"
#include "ppl.h"
#include "quantize.h"
#include "simd.h"
#include "testutil.h"

/* the fitted RTN file's KL on 12 windows must be below this share of the
 * unfitted one's (0.964 measured) */
#define KL_BOUND 0.98

static char dir[256];

static const char *tmp(const char *name) { return tu_path(dir, name); }

static uint64_t rng = 0x2545f4914f6cdd1du;

static double uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return ((rng >> 11) + 0.5) / 9007199254740992.0;
}

static double gauss(void) { return sqrt(-2 * log(uniform())) * cos(6.283185307179586 * uniform()); }

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
    CHECK(eng_gptq_fit_gain(COLS, m, MATS, &plain, s, &l0, &l1) == 0);
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
        CHECK(eng_gptq_fit_gain(COLS, m, MATS, &o, s, &l0, &l1) == 0);
        double e0 = out_err(X, W, Q, NULL), e1 = out_err(X, W, Q, s);
        printf("q4_0, %s: output error %.6g -> %.6g (%.1f%%)\n", pm ? "per matrix" : "alike", e0, e1, 100 * e1 / e0);
        CHECKF(e1 < 0.995 * e0, "the fit did not lower the error: %g -> %g", e0, e1);
        if (!pm) /* alike: the reported loss is the measured one */
            CHECKF(fabs(l0 - e0) < 1e-6 * e0 && fabs(l1 - e1) < 1e-6 * e0, "reported %g %g, measured %g %g", l0,
                   l1, e0, e1);
    }
    /* a large ridge holds s at 1 */
    eng_gain_opts stiff = {.ridge = 1e4};
    CHECK(eng_gptq_fit_gain(COLS, m, MATS, &stiff, s, &l0, &l1) == 0);
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

/* Quantize model to q4_0 into name (gptq: through the GPTQ pass; fit:
 * with fitted gains from g); 0 or 1. */
static int quantize(const char *model, const char *name, eng_gptq *g, int gptq, int fit, int threads,
                    eng_quant_report *rep)
{
    eng_err e;
    eng_quant_opts o = {.target = eng_qtarget_find("q4_0"), .method = gptq ? "gptq" : "rtn", .threads = threads};
    if (gptq)
        o.gptq = g, o.gptq_params.clip = 1, o.gptq_params.refine = 4, o.gptq_params.threads = threads;
    if (fit)
        o.fit_norms = g, o.fit_which = 3, o.fit_opts.per_matrix = 1, o.fit_rows = 1;
    if (eng_quantize_file(model, tmp(name), &o, rep, &e)) {
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

static void test_model(const char *model)
{
    char pv[4096], pt[4096];
    const char *valid = tu_shared("text/wiki.valid.raw", pv), *test = tu_shared("text/wiki.test.raw", pt);
    if (!valid || !test)
        return;
    eng_err e;
    eng_gptq *g1 = NULL, *g2 = NULL;
    eng_gptq_opts go1 = {.calib_path = valid, .max_tokens = 2048, .threads = 1, .ffn_rows = 1};
    eng_gptq_opts go2 = {.calib_path = valid, .max_tokens = 2048, .threads = 2, .ffn_rows = 1, .max_bytes = 1};
    CHECKF(eng_gptq_collect(model, &go1, &g1, &e) == 0, "%s", e.msg);
    CHECKF(eng_gptq_collect(model, &go2, &g2, &e) == 0, "%s", e.msg);
    size_t len = 0;
    char *text = tu_read(test, &len);
    eng_model *base = NULL;
    CHECK(text && eng_model_open(model, &base, &e) == 0);
    eng_quant_report rep;
    if (!g1 || !g2 || !base || !text || quantize(model, "rtn.gguf", g1, 0, 0, 1, &rep) ||
        quantize(model, "fit.gguf", g1, 0, 1, 1, &rep))
        goto done;
    /* 5 layers' attn_norm and ffn_norm, each loss lowered */
    CHECKF(rep.n_fit == 10 && rep.fit_ratio > 0.5 && rep.fit_ratio < 0.99, "%llu gains, ratio %g",
           (unsigned long long)rep.n_fit, rep.fit_ratio);
    double k0 = kl_of("rtn.gguf", base, text, len), k1 = kl_of("fit.gguf", base, text, len);
    printf("fitted / unfitted KL: %.4f\n", k1 / k0);
    CHECKF(k0 > 0 && k1 > 0 && k1 < KL_BOUND * k0, "fitted %g, unfitted %g", k1, k0);
    /* only the fitted gains differ, and they do */
    eng_gguf *a = NULL, *b = NULL;
    CHECK(eng_gguf_open(tmp("rtn.gguf"), &a, &e) == 0 && eng_gguf_open(tmp("fit.gguf"), &b, &e) == 0);
    int n_diff = 0, others_same = 1;
    for (uint64_t i = 0; a && b && i < eng_gguf_n_tensors(a); i++) {
        const eng_gguf_tensor *ta = eng_gguf_tensor_at(a, i), *tb = eng_gguf_tensor_find(b, ta->name);
        int gain = strstr(ta->name, ".attn_norm.") || strstr(ta->name, ".ffn_norm.");
        int same = tb && ta->type == tb->type && ta->size == tb->size && !memcmp(ta->data, tb->data, ta->size);
        if (gain && !same && tb && tb->type == SIMD_F32)
            n_diff++;
        others_same &= gain || same;
    }
    CHECKF(n_diff == 10 && others_same, "%d gains changed; the rest the same: %d", n_diff, others_same);
    eng_gguf_close(a);
    eng_gguf_close(b);
    /* two threads, the Hessians collected a layer at a time: the same bytes */
    if (!quantize(model, "fit2.gguf", g2, 0, 1, 2, &rep))
        CHECKF(same_file("fit.gguf", "fit2.gguf"), "two threads: another file");
    /* with the GPTQ pass: the fit runs on its codes, the same at two threads */
    if (!quantize(model, "gfit.gguf", g1, 1, 1, 1, &rep) && !quantize(model, "gfit2.gguf", g2, 1, 1, 2, &rep))
        CHECKF(rep.n_fit == 10 && same_file("gfit.gguf", "gfit2.gguf"), "gptq: %llu gains, or another file",
               (unsigned long long)rep.n_fit);
done:
    eng_model_close(base);
    free(text);
    eng_gptq_free(g1);
    eng_gptq_free(g2);
}

int main(void)
{
    simd_init();
    snprintf(dir, sizeof dir, "test_fit_norms.XXXXXX");
    if (!tu_mkdtemp(dir)) {
        fprintf(stderr, "cannot make a scratch directory\n");
        return 1;
    }
    char buf[4096];
    const char *model = tu_asset("stories260K.gguf", buf);
    test_algebra();
    if (model)
        test_model(model);
    tu_rmtree(dir);
    return tu_result("test_fit_norms");
}
