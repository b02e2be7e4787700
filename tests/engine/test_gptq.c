/* engine/tools/gptq.c, AWQ's clipping and `nibble quantize --method`:
 *  - on a random matrix whose inputs are correlated, the GPTQ pass's
 *    output error ||X W^T - X Q^T||^2 is below round-to-nearest's, for
 *    every type it writes (a code written to the wrong bits would show as
 *    a large error, since the error is measured on the dequantized
 *    output), and its reported error equals the one measured here;
 *  - with H = identity (nothing to fold) it gives RTN's bytes exactly;
 *  - an unsupported type, a width off the block, an H that is not
 *    positive definite are refused;
 *  - on the embedded model (with ../shared's WikiText), a q4_0 file made
 *    with the GPTQ pass has lower KL to the f32 model than RTN's, AWQ with
 *    its clipping search lower than AWQ without, and the method is
 *    recorded in the metadata;
 *  - the local search after the pass (refine) lowers every type's
 *    output error by at least 5% (12-17% measured) and the embedded
 *    model's KL; two threads give the same bytes as one;
 *  - the Hessians collected a layer at a time (a budget of one byte) on
 *    two threads give the same file as collected at once;
 *  - --ffn-rows (eng_gptq_opts.ffn_rows): each SwiGLU gate/up row gets its
 *    own Hessian (none for other tensors, none without the option), the
 *    embedded model's q4_0 KL falls below the plain pass's, and two
 *    threads with the layers collected one at a time give the same bytes;
 *  - --attn-rows (eng_gptq_opts.attn_rows): attn_v's rows get Hessians
 *    from the recomputed attention (which matches the forward pass's),
 *    the rows of one head sharing one and the heads differing (none for
 *    attn_q, attn_k, attn_output, none without the option), the embedded
 *    model's q4_0 KL falls below --ffn-rows' alone, and two threads with
 *    the layers collected one at a time give the same bytes;
 *  - --asym (eng_gptq_opts.asym_path): the target map T = Hq^-1 C gives
 *    W' A = W exactly when the quantized inputs are A x (A invertible),
 *    keeps I's row for an input never seen, is damped when singular; on
 *    the embedded model (a first GPTQ file, then the sums side by side)
 *    the map is near I but not I, the q4_0 KL does not rise, and two
 *    threads with a layer at a time give one thread's bytes;
 *  - the command line's --method, --refine and --asym errors; --asym on a
 *    text shorter than a window leaves no file; a good run records its
 *    blend and leaves no first file. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "awq.h"
#include "gguf.h"
#include "gptq.h"
#include "model.h"
#include "ppl.h"
#include "quantize.h"
#include "simd.h"
#include "testutil.h"

static char dir[256];

/* --attn-rows' KL on 12 windows must be below this share of --ffn-rows' alone */
#define ATTN_BOUND 0.99
/* --asym's KL on 12 windows against the plain pass's: stage by stage at
 * the command line's default CLI_BLEND must be below ASYM_BOUND of it
 * (0.919 measured, 0.916 since attention's multiply-adds are fused; it
 * must also be below the layer form's). Layer by layer at ASYM_BLEND the
 * gain is within this model's noise (0.958 measured, then 1.010 after
 * the fused multiply-adds moved the attention's roundings only), so that
 * form is held to ASYM_LAYERS_BOUND: no worse than the plain pass beyond
 * that noise. */
#define ASYM_BOUND 1.0
#define ASYM_LAYERS_BOUND 1.03
#define ASYM_BLEND 0.5
#define CLI_BLEND 0.7f

static const char *tmp(const char *name)
{
    return tu_path(dir, name);
}

static uint64_t rng = 0x9e3779b97f4a7c15u;

static double gauss(void) { return tu_gauss(&rng); }

/* n inputs of cols values, neighbouring channels correlated and every
 * seventh channel three times louder (the outliers real activations
 * have); H = X^T X. */
static void make_inputs(float *X, double *H, uint32_t n, uint32_t cols)
{
    for (uint32_t t = 0; t < n; t++) {
        double z1 = 0, z2 = 0;
        for (uint32_t c = 0; c < cols; c++) {
            double z = gauss();
            X[(size_t)t * cols + c] = (float)((z + 0.8 * z1 + 0.5 * z2) * (c % 7 == 0 ? 3 : 1));
            z2 = z1, z1 = z;
        }
    }
    memset(H, 0, (size_t)cols * cols * sizeof *H);
    for (uint32_t t = 0; t < n; t++)
        for (uint32_t i = 0; i < cols; i++)
            for (uint32_t j = 0; j < cols; j++)
                H[(size_t)i * cols + j] += (double)X[(size_t)t * cols + i] * X[(size_t)t * cols + j];
}

/* sum over inputs and rows of (x . (w - q))^2 */
static double out_err(const float *X, uint32_t n, const float *W, const float *Q, uint32_t rows, uint32_t cols)
{
    double s = 0;
    for (uint32_t t = 0; t < n; t++)
        for (uint32_t r = 0; r < rows; r++) {
            double d = 0;
            for (uint32_t c = 0; c < cols; c++)
                d += (double)X[(size_t)t * cols + c] * ((double)W[(size_t)r * cols + c] - Q[(size_t)r * cols + c]);
            s += d * d;
        }
    return s;
}

static const int types[] = {SIMD_Q4_0,  SIMD_Q4_1, SIMD_Q5_0, SIMD_Q5_1, SIMD_Q8_0,   SIMD_Q4_K,
                            SIMD_Q5_K,  SIMD_Q6_K, SIMD_Q2_K, SIMD_Q3_K, SIMD_IQ4_NL, SIMD_IQ4_XS};
#define N_TYPES (sizeof types / sizeof types[0])

static void test_matrix(void)
{
    enum { ROWS = 12, COLS = 256, N = 600 };
    float *X = malloc(sizeof(float) * N * COLS), *W = malloc(sizeof(float) * ROWS * COLS);
    float *Wc = malloc(sizeof(float) * ROWS * COLS), *Q = malloc(sizeof(float) * ROWS * COLS);
    double *H = malloc(sizeof(double) * COLS * COLS), *I = calloc((size_t)COLS * COLS, sizeof(double));
    char *a = malloc(2 * ROWS * 1024), *b = malloc(ROWS * 1024);
    make_inputs(X, H, N, COLS);
    for (uint32_t i = 0; i < ROWS * COLS; i++)
        W[i] = (float)(gauss() * 0.05);
    for (uint32_t i = 0; i < COLS; i++)
        I[(size_t)i * COLS + i] = 1;
    for (size_t k = 0; k < N_TYPES; k++) {
        int ty = types[k];
        const simd_traits *tr = simd_type_traits(ty);
        size_t rb = simd_row_bytes(ty, COLS);
        CHECK(eng_gptq_supports(ty));
        for (uint32_t r = 0; r < ROWS; r++)
            tr->quant(W + (size_t)r * COLS, a + r * rb, COLS);
        tr->dequant(a, Q, (size_t)ROWS * COLS);
        double e_rtn = out_err(X, N, W, Q, ROWS, COLS);
        for (int clip = 0; clip < 2; clip++) {
            memcpy(Wc, W, sizeof(float) * ROWS * COLS);
            eng_gptq_params p = {.clip = clip};
            eng_gptq_stats st;
            CHECK(eng_gptq_quant_matrix(ty, Wc, ROWS, COLS, H, &p, b, &st) == 0);
            tr->dequant(b, Q, (size_t)ROWS * COLS);
            double e_gptq = out_err(X, N, W, Q, ROWS, COLS);
            printf("%-6s clip %d: output error %.4g, RTN %.4g (%.1f%%)\n", tr->name, clip, e_gptq, e_rtn,
                   100 * e_gptq / e_rtn);
            /* q8_0's rounding is so fine that little is left to fold */
            CHECKF(e_gptq < (ty == SIMD_Q8_0 || ty == SIMD_Q6_K ? 0.95 : 0.8) * e_rtn, "%s clip %d: %g vs %g",
                   tr->name, clip, e_gptq, e_rtn);
            CHECKF(fabs(st.err_gptq - e_gptq) <= 1e-6 * e_gptq && fabs(st.err_rtn - e_rtn) <= 1e-6 * e_rtn,
                   "%s: reported %g / %g, measured %g / %g", tr->name, st.err_gptq, st.err_rtn, e_gptq, e_rtn);
        }
        /* the local search after the pass: a smaller error than the
         * pass's (each move lowers it), and the same bytes
         * on two threads as on one */
        {
            double e_pass = 0, e_ref = 0;
            for (int refine = 0; refine < 2; refine++) {
                memcpy(Wc, W, sizeof(float) * ROWS * COLS);
                eng_gptq_params p = {.clip = 1, .refine = refine ? 4 : 0};
                CHECK(eng_gptq_quant_matrix(ty, Wc, ROWS, COLS, H, &p, b, NULL) == 0);
                tr->dequant(b, Q, (size_t)ROWS * COLS);
                *(refine ? &e_ref : &e_pass) = out_err(X, N, W, Q, ROWS, COLS);
            }
            printf("%-6s refine: output error %.4g, the pass alone %.4g (%.1f%%)\n", tr->name, e_ref, e_pass,
                   100 * e_ref / e_pass);
            CHECKF(e_ref < 0.95 * e_pass, "%s: refined %g, pass %g",
                   tr->name, e_ref, e_pass);
            memcpy(Wc, W, sizeof(float) * ROWS * COLS);
            eng_gptq_params p2 = {.clip = 1, .refine = 4, .threads = 2};
            memset(a + ROWS * rb, 0, ROWS * rb);
            CHECK(eng_gptq_quant_matrix(ty, Wc, ROWS, COLS, H, &p2, a + ROWS * rb, NULL) == 0);
            CHECKF(!memcmp(a + ROWS * rb, b, ROWS * rb), "%s: two threads differ from one", tr->name);
        }
        /* H = identity: no error to fold, exactly RTN */
        memcpy(Wc, W, sizeof(float) * ROWS * COLS);
        memset(b, 0, ROWS * rb);
        CHECK(eng_gptq_quant_matrix(ty, Wc, ROWS, COLS, I, NULL, b, NULL) == 0);
        CHECKF(!memcmp(a, b, ROWS * rb), "%s: H = I differs from RTN", tr->name);
    }
    /* refused */
    memcpy(Wc, W, sizeof(float) * ROWS * COLS);
    CHECK(eng_gptq_quant_matrix(SIMD_F16, Wc, ROWS, COLS, H, NULL, b, NULL) == ENG_EUNSUP);
    CHECK(eng_gptq_quant_matrix(SIMD_MXFP4, Wc, ROWS, COLS, H, NULL, b, NULL) == ENG_EUNSUP);
    CHECK(eng_gptq_quant_matrix(SIMD_Q4_K, Wc, ROWS, 96, H, NULL, b, NULL) == ENG_EUNSUP);
    H[COLS] = H[1] = NAN;
    CHECK(eng_gptq_quant_matrix(SIMD_Q4_0, Wc, ROWS, COLS, H, NULL, b, NULL) == ENG_EFORMAT);
    free(X); free(W); free(Wc); free(Q); free(H); free(I); free(a); free(b);
}

/* KL to the f32 model of q4_0 files made with each method, on 12
 * windows of WikiText's test split, calibrated on its validation split. */
static void test_model(const char *model)
{
    char pv[4096], pt[4096];
    const char *valid = tu_shared("text/wiki.valid.raw", pv), *test = tu_shared("text/wiki.test.raw", pt);
    if (!valid || !test)
        return;
    eng_err e;
    eng_gptq *g = NULL;
    eng_gptq_opts go = {.calib_path = valid, .max_tokens = 2048, .threads = 1};
    CHECKF(eng_gptq_collect(model, &go, &g, &e) == 0, "%s", e.msg);
    uint32_t cols = 0, c2 = 0, c3 = 0, c4 = 0;
    const double *hk = NULL, *hq = NULL, *hd = NULL, *ho = NULL;
    CHECK(eng_gptq_hessian(g, "blk.0.attn_k.weight", &hk, &cols, &e) == 0 &&
          eng_gptq_hessian(g, "blk.0.attn_q.weight", &hq, &c2, &e) == 0 && hk && hk == hq && cols == 64 &&
          eng_gptq_hessian(g, "blk.4.ffn_down.weight", &hd, &c3, &e) == 0 && hd && c3 == 172 &&
          eng_gptq_hessian(g, "output.weight", &ho, &c4, &e) == 0 && !ho && !c4 && eng_gptq_tokens(g) == 2048 &&
          eng_gptq_groups(g) == 1);
    eng_awq *aw[2] = {NULL, NULL};
    for (int c = 0; c < 2; c++) {
        eng_awq_opts ao = {.target = eng_qtarget_find("q4_0"), .calib_path = valid, .max_tokens = 2048,
                           .threads = 1, .clip = c};
        CHECKF(eng_awq_compute(model, &ao, &aw[c], &e) == 0, "%s", e.msg);
    }
    size_t len = 0;
    char *text = tu_read(test, &len);
    eng_model *base = NULL;
    CHECK(text && eng_model_open(model, &base, &e) == 0);
    /* the same Hessians collected a layer at a time (five groups, five
     * calibration passes) on two threads */
    eng_gptq *g1 = NULL;
    eng_gptq_opts go1 = {.calib_path = valid, .max_tokens = 2048, .threads = 2, .max_bytes = 1};
    CHECKF(eng_gptq_collect(model, &go1, &g1, &e) == 0, "%s", e.msg);
    CHECK(eng_gptq_groups(g1) == 5);
    const char *names[] = {"rtn", "gptq", "awq", "awq+clip", "gptq+refine", "gptq+refine"};
    double kl[6] = {0, 0, 0, 0, 0, 0};
    for (int k = 0; g && g1 && aw[0] && aw[1] && base && text && k < 6; k++) {
        eng_quant_opts o = {.target = eng_qtarget_find("q4_0"), .method = names[k]};
        if (k == 1)
            o.gptq = g, o.gptq_params.clip = 1;
        if (k >= 4)
            o.gptq = k == 4 ? g : g1, o.gptq_params.clip = 1, o.gptq_params.refine = 4;
        if (k == 5)
            o.gptq_params.threads = 2;
        if (k == 2 || k == 3)
            o.edits = eng_awq_edits(aw[k - 2], &o.n_edits);
        eng_quant_report rep;
        eng_model *m = NULL;
        eng_ppl_result r;
        eng_ppl_opts po = {.n_ctx = 256, .max_chunks = 12, .threads = 1, .base = base};
        if (k == 5) { /* layer by layer on two threads: the same file */
            CHECKF(eng_quantize_file(model, tmp("q5.gguf"), &o, &rep, &e) == 0, "%s", e.msg);
            size_t n4 = 0, n5 = 0;
            char *f4 = tu_read(tmp("q4.gguf"), &n4), *f5 = tu_read(tmp("q5.gguf"), &n5);
            CHECKF(f4 && f5 && n4 == n5 && !memcmp(f4, f5, n4), "layer groups: a different file");
            free(f4);
            free(f5);
            continue;
        }
        if (eng_quantize_file(model, tmp(k == 4 ? "q4.gguf" : "q.gguf"), &o, &rep, &e) ||
            eng_model_open(tmp(k == 4 ? "q4.gguf" : "q.gguf"), &m, &e) ||
            eng_ppl_run(m, text, len, &po, &r, &e)) {
            CHECKF(0, "%s: %s", names[k], e.msg);
            eng_model_close(m);
            continue;
        }
        kl[k] = r.kl;
        if (k == 1) /* q, k, v, o, gate, up of 5 layers (ffn_down is f16 here) */
            CHECKF(rep.n_gptq == 30 && rep.gptq_ratio > 0.3 && rep.gptq_ratio < 0.8, "%llu %g",
                   (unsigned long long)rep.n_gptq, rep.gptq_ratio);
        eng_str s = {0};
        CHECK(eng_gguf_get_str(eng_model_gguf(m), "nibble.quantize.method", &s, NULL) == 0 &&
              s.len == strlen(names[k]) && !memcmp(s.ptr, names[k], s.len));
        printf("q4_0 %-8s mean KL to f32 %.5f, top-1 %.2f%%\n", names[k], r.kl, 100 * r.top1);
        eng_model_close(m);
    }
    CHECKF(kl[1] < 0.8 * kl[0], "gptq %g, rtn %g", kl[1], kl[0]);
    CHECKF(kl[3] < kl[2], "awq with clipping %g, without %g", kl[3], kl[2]);
    CHECKF(kl[4] < 0.97 * kl[1], "gptq with the local search %g, without %g", kl[4], kl[1]);
    eng_gptq_free(g1);
    eng_model_close(base);
    free(text);
    eng_awq_free(aw[0]);
    eng_awq_free(aw[1]);
    eng_gptq_free(g);
}

/* q4_0 files from the collections g[0] (without the option; NULL: left
 * out), g[1] (with it, one thread) and g[2] (with it, two threads: must
 * give g[1]'s bytes; NULL: left out); kl[0], kl[1] the first two's mean KL to the f32
 * model on 12 windows of test (0 where a step failed or was left out).
 * base_opt and opt name the options of g[0] and the one g[1] adds. */
static void q4_0_kl(const char *model, const char *test, eng_gptq *const g[3], const char *base_opt, const char *opt,
                    double kl[2])
{
    eng_err e;
    size_t len = 0;
    char *text = tu_read(test, &len);
    eng_model *base = NULL;
    CHECK(text && eng_model_open(model, &base, &e) == 0);
    kl[0] = kl[1] = 0;
    for (int k = 0; k < 3 && base && text; k++) {
        if (!g[k] && k != 1)
            continue; /* the caller has the plain pass's KL, or checks two threads elsewhere */
        eng_quant_opts o = {.target = eng_qtarget_find("q4_0"), .method = "gptq", .gptq = g[k]};
        o.gptq_params.clip = 1, o.gptq_params.refine = 4, o.gptq_params.threads = k == 2 ? 2 : 1;
        eng_quant_report rep;
        char name[32];
        snprintf(name, sizeof name, "kl%d.gguf", k);
        CHECKF(eng_quantize_file(model, tmp(name), &o, &rep, &e) == 0, "%s", e.msg);
        if (k == 2) {
            size_t n1 = 0, n2 = 0;
            char *f1 = tu_read(tmp("kl1.gguf"), &n1), *f2 = tu_read(tmp("kl2.gguf"), &n2);
            CHECKF(f1 && f2 && n1 == n2 && !memcmp(f1, f2, n1), "%s: two threads, a different file", opt);
            free(f1);
            free(f2);
            break;
        }
        eng_model *m = NULL;
        eng_ppl_result r;
        eng_ppl_opts po = {.n_ctx = 256, .max_chunks = 12, .threads = 1, .base = base};
        if (eng_model_open(tmp(name), &m, &e) || eng_ppl_run(m, text, len, &po, &r, &e)) {
            CHECKF(0, "%s", e.msg);
            eng_model_close(m);
            continue;
        }
        kl[k] = r.kl;
        printf("q4_0 gptq%s%s%s%s mean KL to f32 %.5f, top-1 %.2f%%\n", *base_opt ? " " : "", base_opt, k ? " " : "",
               k ? opt : "", r.kl, 100 * r.top1);
        eng_model_close(m);
    }
    eng_model_close(base);
    free(text);
}

/* The per-row Hessians of --ffn-rows on the embedded model. */
static void test_ffn_rows(const char *model)
{
    char pv[4096], pt[4096];
    const char *valid = tu_shared("text/wiki.valid.raw", pv), *test = tu_shared("text/wiki.test.raw", pt);
    if (!valid || !test)
        return;
    eng_err e;
    eng_gptq *g[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; k++) {
        /* plain; per-row on one thread; per-row on two, a layer at a time */
        eng_gptq_opts go = {.calib_path = valid, .max_tokens = 2048, .threads = k == 2 ? 2 : 1, .ffn_rows = k > 0,
                            .max_bytes = k == 2 ? 1 : 0};
        CHECKF(eng_gptq_collect(model, &go, &g[k], &e) == 0, "%s", e.msg);
    }
    if (!g[0] || !g[1] || !g[2])
        goto done;
    const double *hg = NULL, *hu = NULL, *hq = NULL, *h0 = NULL, *H = NULL;
    uint32_t rg = 0, ru = 0, rq = 1, r0 = 1, cols = 0, pg = 0, pu = 0, pq = 1, p0 = 1;
    CHECK(eng_gptq_row_hessians(g[1], "blk.1.ffn_gate.weight", &hg, &rg, &pg, &e) == 0 && hg && rg == 172 &&
          pg == 1 && eng_gptq_row_hessians(g[1], "blk.1.ffn_up.weight", &hu, &ru, &pu, &e) == 0 &&
          hu == hg + 172 * 64 * 64 && ru == 172 && pu == 1 &&
          eng_gptq_row_hessians(g[1], "blk.1.attn_q.weight", &hq, &rq, &pq, &e) == 0 && !hq && !rq && !pq &&
          eng_gptq_row_hessians(g[0], "blk.1.ffn_gate.weight", &h0, &r0, &p0, &e) == 0 && !h0 && !r0 && !p0);
    CHECK(eng_gptq_hessian(g[1], "blk.1.ffn_up.weight", &H, &cols, &e) == 0 && H && cols == 64);
    /* each row's sum is symmetric, positive on its diagonal, and rows
     * differ (the weights are per row, not one for all) */
    int sym = 1, pos = 1, differ = 0;
    for (uint32_t r = 0; hg && r < 2 * 172; r++) {
        const double *h = hg + (size_t)r * 64 * 64;
        for (uint32_t i = 0; i < 64; i++) {
            pos &= h[i * 64 + i] > 0;
            for (uint32_t j = 0; j < i; j++)
                sym &= h[i * 64 + j] == h[j * 64 + i];
        }
        differ |= r && fabs(h[0] / h[65] - hg[0] / hg[65]) > 1e-6 * fabs(hg[0] / hg[65]);
    }
    CHECK(sym && pos && differ);
    double kl[2];
    q4_0_kl(model, test, g, "", "--ffn-rows", kl);
    CHECKF(kl[1] > 0 && kl[1] < 0.97 * kl[0], "--ffn-rows %g, without %g", kl[1], kl[0]);
done:
    for (int k = 0; k < 3; k++)
        eng_gptq_free(g[k]);
}

/* --asym's target map: when the quantized model's inputs are an
 * invertible linear map of the float model's, xq = A x, the moved target
 * reproduces the float outputs from them exactly: W' A = W, i.e.
 * T = Hq^-1 C = A^-T; an input never seen keeps T's row of I; a singular
 * Hq with no damping is damped, not refused. */
static void test_asym_algebra(void)
{
    enum { D = 24, NT = 400 };
    float *X = malloc(sizeof(float) * NT * D), *Xq = malloc(sizeof(float) * NT * D);
    double *H = malloc(sizeof(double) * D * D), *A = malloc(sizeof(double) * D * D);
    double *Hq = calloc(D * D, sizeof(double)), *C = calloc(D * D, sizeof(double)), *T = malloc(sizeof(double) * D * D);
    if (!X || !Xq || !H || !A || !Hq || !C || !T) {
        CHECK(0);
        goto done;
    }
    make_inputs(X, H, NT, D);
    for (int i = 0; i < D; i++) /* A: near I, well conditioned but far from diagonal */
        for (int j = 0; j < D; j++)
            A[i * D + j] = (i == j) + 0.3 * gauss() / sqrt(D);
    for (int t = 0; t < NT; t++)
        for (int i = 0; i < D; i++) {
            double s = 0;
            for (int j = 0; j < D; j++)
                s += A[i * D + j] * X[t * D + j];
            Xq[t * D + i] = (float)s;
        }
    for (int t = 0; t < NT; t++)
        for (int i = 0; i < D; i++)
            for (int j = 0; j < D; j++) {
                Hq[i * D + j] += (double)Xq[t * D + i] * Xq[t * D + j];
                C[i * D + j] += (double)Xq[t * D + i] * X[t * D + j];
            }
    CHECK(eng_gptq_asym_target(D, Hq, C, 0, T) == 0);
    /* (T^T A)_ij = sum_k T[k][i] A[k][j] must be I (the floats of Xq leave ~1e-6) */
    double worst = 0;
    for (int i = 0; i < D; i++)
        for (int j = 0; j < D; j++) {
            double s = 0;
            for (int k = 0; k < D; k++)
                s += T[k * D + i] * A[k * D + j];
            worst = fmax(worst, fabs(s - (i == j)));
        }
    CHECKF(worst < 1e-4, "T^T A differs from I by %g", worst);
    /* damped, the map moves toward I but stays near it */
    CHECK(eng_gptq_asym_target(D, Hq, C, 0.01, T) == 0);
    /* input 5 never seen: its row of Hq and C is zero */
    for (int k = 0; k < D; k++)
        Hq[5 * D + k] = Hq[k * D + 5] = C[5 * D + k] = 0;
    CHECK(eng_gptq_asym_target(D, Hq, C, 0, T) == 0);
    int row_i = 1;
    for (int k = 0; k < D; k++)
        row_i &= T[5 * D + k] == (k == 5);
    CHECK(row_i);
    /* rank one: definite only once damped */
    memset(Hq, 0, sizeof(double) * D * D);
    for (int i = 0; i < D; i++)
        for (int j = 0; j < D; j++)
            Hq[i * D + j] = (1.0 + i) * (1.0 + j);
    CHECK(eng_gptq_asym_target(D, Hq, C, 0, T) == 0);
    int finite = 1;
    for (int k = 0; k < D * D; k++)
        finite &= isfinite(T[k]);
    CHECK(finite);
done:
    free(X); free(Xq); free(H); free(A); free(Hq); free(C); free(T);
}

/* --asym on the embedded model, layer by layer (seq 1, --asym-layers) or
 * stage by stage within each layer (seq 2, the default): the targets and
 * Hessians from a first GPTQ file's inputs, side by side with the float
 * model (each collection patches its own copy of the first file); the KL
 * must fall below ASYM_BOUND of the plain pass's (layer by layer
 * ASYM_LAYERS_BOUND), stage by stage also
 * below layer by layer's; two threads give one thread's bytes (layer by
 * layer here; stage by stage test_cli checks it). */
static void test_asym(const char *model, int seq)
{
    /* seq 1's plain and --asym KL, for seq 2, which also reuses its first
     * file (asym0.gguf) and so has no plain collection (g[0]) of its own */
    static double kl_plain, kl_layers;
    char pv[4096], pt[4096];
    const char *valid = tu_shared("text/wiki.valid.raw", pv), *test = tu_shared("text/wiki.test.raw", pt);
    if (!valid || !test)
        return;
    eng_err e;
    eng_gptq *g[3] = {NULL, NULL, NULL};
    if (seq == 1) {
        eng_gptq_opts go = {.calib_path = valid, .max_tokens = 2048, .threads = 1};
        CHECKF(eng_gptq_collect(model, &go, &g[0], &e) == 0, "%s", e.msg);
        eng_quant_opts o = {.target = eng_qtarget_find("q4_0"), .method = "gptq", .gptq = g[0]};
        o.gptq_params.clip = 1, o.gptq_params.refine = 4, o.gptq_params.threads = 1;
        eng_quant_report rep;
        CHECKF(g[0] && eng_quantize_file(model, tmp("asym0.gguf"), &o, &rep, &e) == 0, "%s", e.msg);
    }
    size_t nf = 0;
    char *first = tu_read(tmp("asym0.gguf"), &nf);
    for (int k = 1; k < 3; k++) {
        FILE *f = fopen(tmp(k == 1 ? "asym1.gguf" : "asym2.gguf"), "wb");
        CHECK(first && f && fwrite(first, 1, nf, f) == nf);
        if (f)
            fclose(f);
    }
    free(first);
    for (int k = 1; k < (seq == 2 ? 2 : 3); k++) {
        eng_gptq_opts ga = {.calib_path = valid, .max_tokens = 2048, .threads = k, .asym_seq = seq,
                            .asym_blend = seq == 2 ? CLI_BLEND : ASYM_BLEND,
                            .asym_path = tmp(k == 1 ? "asym1.gguf" : "asym2.gguf")};
        CHECKF(eng_gptq_collect(model, &ga, &g[k], &e) == 0, "%s", e.msg);
    }
    if ((seq == 1 && (!g[0] || !g[2])) || !g[1])
        goto done;
    /* a group a layer, or one per input of a layer (q/k/v, attn_output, gate/up, down) */
    CHECKF(eng_gptq_groups(g[1]) == (seq == 2 ? 20u : 5u), "%u groups", eng_gptq_groups(g[1]));
    CHECK(eng_gptq_asym_stage(g[1], "blk.1.ffn_up.weight") == (seq == 2 ? 6 : 1) &&
          eng_gptq_asym_stage(g[1], "blk.1.ffn_down.weight") == (seq == 2 ? 7 : 1) &&
          eng_gptq_asym_stage(g[1], "blk.1.attn_norm.weight") == -1 &&
          (seq == 2 || eng_gptq_asym_stage(g[0], "blk.1.ffn_up.weight") == -1));
    const double *T = NULL, *T0 = NULL, *H = NULL;
    uint32_t cols = 0;
    CHECK(eng_gptq_target(g[1], "blk.2.attn_output.weight", &T, &e) == 0 && T &&
          eng_gptq_hessian(g[1], "blk.2.attn_output.weight", &H, &cols, &e) == 0 && H && cols == 64 &&
          eng_gptq_target(g[0], "blk.2.attn_output.weight", &T0, &e) == 0 && !T0);
    /* the map is near I (the first file is close) but not I */
    double off = 0, diag = 0;
    for (uint32_t i = 0; T && i < 64; i++)
        for (uint32_t j = 0; j < 64; j++)
            i == j ? (diag += fabs(T[i * 64 + j] - 1)) : (off += fabs(T[i * 64 + j]));
    CHECKF(T && diag / 64 < 0.5 && off / (64 * 63) < 0.1 && diag + off > 1e-3, "T: |diag - 1| %g, |off| %g",
           diag / 64, off / (64 * 63));
    double kl[2];
    q4_0_kl(model, test, g, "", seq == 2 ? "--asym (stage by stage)" : "--asym --asym-layers", kl);
    if (seq == 1)
        kl_plain = kl[0], kl_layers = kl[1];
    CHECKF(kl[1] > 0 && kl[1] < (seq == 2 ? ASYM_BOUND : ASYM_LAYERS_BOUND) * kl_plain, "--asym (seq %d) %g, without %g",
           seq, kl[1], kl_plain);
    if (seq == 2)
        CHECKF(kl[1] < kl_layers, "--asym stage by stage %g, layer by layer %g", kl[1], kl_layers);
done:
    for (int k = 0; k < 3; k++)
        eng_gptq_free(g[k]);
}

/* The per-row attention Hessians of --attn-rows on the embedded model. */
static void test_attn_rows(const char *model)
{
    char pv[4096], pt[4096];
    const char *valid = tu_shared("text/wiki.valid.raw", pv), *test = tu_shared("text/wiki.test.raw", pt);
    if (!valid || !test)
        return;
    eng_err e;
    eng_gptq *g[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; k++) {
        /* --ffn-rows; with --attn-rows on one thread; on two, a layer at a time */
        eng_gptq_opts go = {.calib_path = valid, .max_tokens = 2048, .threads = k == 2 ? 2 : 1, .ffn_rows = 1,
                            .attn_rows = k > 0, .max_bytes = k == 2 ? 1 : 0};
        CHECKF(eng_gptq_collect(model, &go, &g[k], &e) == 0, "%s", e.msg);
    }
    if (!g[0] || !g[1] || !g[2])
        goto done;
    const double *hq = NULL, *hk = NULL, *hv = NULL, *ho = NULL, *h0 = NULL, *H = NULL;
    uint32_t rq = 1, rk = 1, rv = 0, ro = 1, r0 = 1, off = 1, cols = 0, per = 0, pn = 1;
    double diff = 1;
    CHECK(eng_gptq_row_hessians(g[1], "blk.2.attn_v.weight", &hv, &rv, &per, &e) == 0 && hv && rv == 32 && per == 8 &&
          eng_gptq_row_hessians(g[1], "blk.2.attn_q.weight", &hq, &rq, &pn, &e) == 0 && !hq && !rq && !pn &&
          eng_gptq_row_hessians(g[1], "blk.2.attn_k.weight", &hk, &rk, &pn, &e) == 0 && !hk && !rk &&
          eng_gptq_row_hessians(g[1], "blk.2.attn_output.weight", &ho, &ro, &pn, &e) == 0 && !ho && !ro &&
          eng_gptq_row_hessians(g[0], "blk.2.attn_v.weight", &h0, &r0, &pn, &e) == 0 && !h0 && !r0);
    CHECK(eng_gptq_hessian(g[1], "blk.2.attn_v.weight", &H, &cols, &e) == 0 && H && cols == 64);
    /* every layer's recomputed attention is the forward pass's (its f16 cache aside) */
    CHECK(eng_gptq_attn_layers(g[1], &off, &diff) == 5 && off == 0 && diff < 0.01);
    printf("--attn-rows: recomputed attention within %.3f%% of the forward pass's\n", 100 * diff);
    /* one Hessian for each kv head's 8 rows: symmetric, positive
     * diagonals; the heads differ and differ from the shared H */
    int sym = 1, pos = 1, differ = 0;
    for (uint32_t h = 0; hv && h < 4; h++) {
        const double *v = hv + (size_t)h * 64 * 64;
        for (uint32_t i = 0; i < 64; i++) {
            pos &= v[i * 64 + i] > 0;
            for (uint32_t j = 0; j < i; j++)
                sym &= v[i * 64 + j] == v[j * 64 + i];
        }
        differ |= h && fabs(v[1] / v[65] - hv[1] / hv[65]) > 1e-6 * fabs(hv[1] / hv[65]);
    }
    CHECK(sym && pos && differ && H && hv && fabs(hv[1] / hv[65] - H[1] / H[65]) > 1e-6);
    double kl[2];
    q4_0_kl(model, test, g, "--ffn-rows", "--attn-rows", kl);
    CHECKF(kl[1] > 0 && kl[1] < ATTN_BOUND * kl[0], "--attn-rows %g, without %g", kl[1], kl[0]);
done:
    for (int k = 0; k < 3; k++)
        eng_gptq_free(g[k]);
}

#ifndef _WIN32
/* A nibble command line (tu_run), stderr in err.txt; whether it says what. */
#define run(bin, args) tu_run(bin, args, tmp("err.txt"))
#define err_has(what) tu_file_has(tmp("err.txt"), what)

static int exists(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f)
        fclose(f);
    return f != NULL;
}

static void test_cli(const char *model)
{
    const char *bin = getenv("NIBBLE_BIN");
    if (!bin || !*bin)
        return;
    FILE *f = fopen(tmp("calib.txt"), "w");
    for (int i = 0; f && i < 60; i++)
        fputs("Once upon a time, a little girl named Lily found a red ball in the park. She was very happy. ", f);
    if (f)
        fclose(f);
    char a[2048], cal[600];
    snprintf(cal, sizeof cal, "%s", tmp("calib.txt"));
    /* refusals: `quantize MODEL OUT TYPE -q ARGS`, where @ in ARGS is the
     * calibration text and NONE a file that does not exist; the exit code
     * and what the message must hold */
    static const struct {
        const char *type, *args;
        int rc;
        const char *want, *want2;
    } bad[] = {
        {"q4_0", "--method best --calib @", 2, "--method best: expected rtn, awq, gptq or awq+gptq", NULL},
        {"q4_0", "--method gptq", 2, "needs --calib TEXT", NULL},
        {"q4_0", "--calib @", 2, "is for --method awq, gptq or awq+gptq", NULL},
        {"q4_0", "--method gptq --awq @", 2, "is short for --method awq", NULL},
        {"u4g32", "--method gptq --calib @", 2, "not the uniform baseline", NULL},
        {"f16", "--method awq+gptq --calib @", 2, "needs a type with integer codes", NULL},
        {"q4_0", "--method gptq --calib @ --damp 0", 2, "--damp 0: expected a share of the diagonal", NULL},
        {"q4_0", "--method awq --calib @ --refine 2", 2, "--refine 2: is for --method gptq or awq+gptq", NULL},
        {"q4_0", "--method gptq --calib @ --refine 101", 2, "expected a number of rounds in 0..100", NULL},
        {"q4_0", "--calib @ --method awq --hessian-mb 5", 2, "--hessian-mb 5: is for --method gptq or awq+gptq",
         NULL},
        {"q4_0", "--awq @ --ffn-rows", 2, "--ffn-rows", "is for --method gptq or awq+gptq"},
        {"q4_0", "--attn-rows", 2, "--attn-rows", "is for --method gptq or awq+gptq"},
        {"q4_0", "--method gptq --calib NONE", 1, "calibration text", NULL},
        {"q4_0", "--method awq --calib @ --asym", 2, "--asym", "is for --method gptq or awq+gptq"},
        {"q4_0", "--method gptq --calib @ --asym-blend 0.25", 2, "is for --asym", NULL},
        {"q4_0", "--method gptq --calib @ --asym-once", 2, "--asym-once", "is for --asym"},
        {"q4_0", "--method gptq --calib @ --asym-layers", 2, "--asym-layers", "is for --asym"},
        {"q4_0", "--method gptq --calib @ --asym --asym-once --asym-layers", 2, "exclude each other", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int n = snprintf(a, sizeof a, "quantize %s %s %s -q ", model, tmp("o.gguf"), bad[i].type);
        for (const char *c = bad[i].args; *c && n < (int)sizeof a - 1;)
            if (*c == '@')
                n += snprintf(a + n, sizeof a - (size_t)n, "%s", cal), c++;
            else if (!strncmp(c, "NONE", 4))
                n += snprintf(a + n, sizeof a - (size_t)n, "%s", tmp("none.txt")), c += 4;
            else
                a[n++] = *c++, a[n] = 0;
        int rc = run(bin, a);
        CHECKF(rc == bad[i].rc && err_has(bad[i].want) && (!bad[i].want2 || err_has(bad[i].want2)),
               "%s: exit %d, want %d and \"%s\"", a, rc, bad[i].rc, bad[i].want);
    }
    /* --asym on a text shorter than a window: the first pass runs, the
     * side-by-side one cannot; neither OUT nor the first file is left */
    FILE *fs = fopen(tmp("short.txt"), "w");
    if (fs)
        fputs("Once upon a time, a little girl named Lily found a red ball in the park. She was very happy.", fs),
            fclose(fs);
    snprintf(a, sizeof a, "quantize %s %s q4_0 -q --method gptq --calib %s --asym", model, tmp("o3.gguf"),
             tmp("short.txt"));
    CHECK(run(bin, a) == 1 && err_has("--asym needs a calibration window"));
    CHECK(!exists(tmp("o3.gguf")) && !exists(tmp("o3.gguf.asym-first")));
    snprintf(a, sizeof a, "quantize %s %s q4_0 -q --method gptq --calib %s --asym --asym-layers", model,
             tmp("o3.gguf"), tmp("short.txt"));
    CHECK(run(bin, a) == 1 && err_has("--asym needs a calibration window"));
    CHECK(!exists(tmp("o3.gguf")) && !exists(tmp("o3.gguf.asym-first")));
    /* a good one records its blend and leaves only OUT */
    snprintf(a, sizeof a, "quantize %s %s q4_0 -q --method gptq --calib %s --asym --asym-once --asym-blend 0.25 -t 2",
             model, tmp("o3.gguf"), cal);
    CHECK(run(bin, a) == 0 && exists(tmp("o3.gguf")) && !exists(tmp("o3.gguf.asym-first")));
    eng_gguf *ga = NULL;
    eng_err ea;
    float blend = 0;
    CHECK(eng_gguf_open(tmp("o3.gguf"), &ga, &ea) == 0 && eng_gguf_get_f32(ga, "nibble.quantize.asym", &blend, NULL) == 0 &&
          blend == 0.25f);
    eng_gguf_close(ga);
    /* stage by stage (the default: the first file patched as each of a
     * layer's inputs finishes, a calibration pass each; the attention
     * check of --attn-rows across two of them): one thread's bytes on
     * two, the default blend recorded */
    for (int k = 1; k <= 2; k++) {
        snprintf(a, sizeof a, "quantize %s %s q4_0 -q --method gptq --calib %s --calib-tokens 512 --asym --attn-rows "
                 "-t %d", model, tmp(k == 1 ? "l1.gguf" : "l2.gguf"), cal, k);
        CHECK(run(bin, a) == 0 && err_has("(20 calibration passes)") && err_has("attention Hessians in 5 layers"));
    }
    size_t nl1 = 0, nl2 = 0;
    char *l1 = tu_read(tmp("l1.gguf"), &nl1), *l2 = tu_read(tmp("l2.gguf"), &nl2);
    CHECK(l1 && l2 && nl1 == nl2 && !memcmp(l1, l2, nl1));
    free(l1);
    free(l2);
    CHECK(eng_gguf_open(tmp("l2.gguf"), &ga, &ea) == 0 && eng_gguf_get_f32(ga, "nibble.quantize.asym", &blend, NULL) == 0 &&
          blend == CLI_BLEND);
    eng_gguf_close(ga);
    /* --asym-rows: gate/up's per-row sums on the quantized inputs and a
     * target per row; one thread's bytes on two, not the file without it */
    for (int k = 0; k <= 2; k++) {
        snprintf(a, sizeof a, "quantize %s %s q4_0 -q --method gptq --calib %s --calib-tokens 256 --ffn-rows --asym%s "
                 "-t %d", model, tmp(k == 0 ? "r0.gguf" : k == 1 ? "l1.gguf" : "l2.gguf"), cal,
                 k ? " --asym-rows" : "", k ? k : 2);
        CHECK(run(bin, a) == 0);
    }
    l1 = tu_read(tmp("l1.gguf"), &nl1), l2 = tu_read(tmp("l2.gguf"), &nl2);
    size_t nr0 = 0;
    char *r0 = tu_read(tmp("r0.gguf"), &nr0);
    CHECK(l1 && l2 && r0 && nl1 == nl2 && !memcmp(l1, l2, nl1) && nr0 == nl1 && memcmp(r0, l1, nl1));
    free(l1);
    free(l2);
    free(r0);
    snprintf(a, sizeof a, "quantize %s %s q4_0 -q --method gptq --calib %s --asym --asym-rows", model, tmp("o.gguf"),
             cal);
    CHECK(run(bin, a) == 2 && err_has("is for --asym with --ffn-rows"));
    /* layer by layer: a pass a layer */
    snprintf(a, sizeof a, "quantize %s %s q4_0 -q --method gptq --calib %s --calib-tokens 512 --asym --asym-layers "
             "-t 2", model, tmp("l1.gguf"), cal);
    CHECK(run(bin, a) == 0 && err_has("(5 calibration passes)"));
    /* a good run: the method and the calibration recorded */
    snprintf(a, sizeof a, "quantize %s %s q5_1 -q --method awq+gptq --calib %s", model, tmp("o.gguf"), cal);
    CHECK(run(bin, a) == 0 && err_has("gptq: 30 matrices"));
    /* layer groups: a layer's Hessians take 0.33 MB, so 1 MB holds three */
    snprintf(a, sizeof a, "quantize %s %s q4_0 -q --method gptq --calib %s --hessian-mb 1 -t 2", model,
             tmp("o2.gguf"), cal);
    CHECK(run(bin, a) == 0 && err_has("(2 calibration passes)"));
    eng_gguf *g = NULL;
    eng_err e;
    eng_str s = {0}, c = {0};
    CHECK(eng_gguf_open(tmp("o.gguf"), &g, &e) == 0 && eng_gguf_get_str(g, "nibble.quantize.method", &s, NULL) == 0 &&
          s.len == 8 && !memcmp(s.ptr, "awq+gptq", 8) &&
          eng_gguf_get_str(g, "nibble.quantize.calibration", &c, NULL) == 0 && c.len == 9 &&
          !memcmp(c.ptr, "calib.txt", 9));
    eng_gguf_close(g);
}
#endif

int main(void)
{
    simd_init();
    if (!tu_scratch(dir, sizeof dir, "test_gptq"))
        return 1;
    char buf[4096];
    const char *model = tu_asset("stories260K.gguf", buf);
    test_matrix();
    test_asym_algebra();
    if (model) {
#ifndef _WIN32
        test_cli(model);
#endif
        test_model(model);
        test_ffn_rows(model);
        test_attn_rows(model);
        test_asym(model, 1);
        test_asym(model, 2);
    }
    tu_rmtree(dir);
    return tu_result("test_gptq");
}
