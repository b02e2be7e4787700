/* Norm gains refitted to a quantized model (normfit.h). Per window of the
 * calibration text the float model runs first and the observer keeps
 * each fitted layer's q/k/v and gate/up inputs z; then the quantized
 * model runs the same window and the observer sums, per input, zq zq^T,
 * zq z^T and z z^T (doubles, on the calling thread in token order, so the
 * sums do not depend on the thread count). */
#include "normfit.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "gguf.h"
#include "gptq.h"
#include "simd.h"

/* the layers of one round: [l0, l1), two inputs each (attention, FFN) */
typedef struct {
    uint32_t l0, l1, dim, n_ctx;
    const eng_model *mf, *mq;
    float *z;                /* [site][n_ctx][dim]: the float model's inputs this window */
    uint32_t *pos[2];        /* [site]: tokens of the window seen, per model */
    double *Hq, *C, *Hf;     /* [site][dim][dim] */
} round_sums;

/* the weight keying layer l's FFN input (gate, or up without one) */
static const eng_weight *ffn_key(const eng_layer *L) { return L->w_gate.cols ? &L->w_gate : &L->w_up; }

static int site_of(const round_sums *f, const eng_model *m, const eng_weight *w, uint32_t *k)
{
    for (uint32_t l = f->l0; l < f->l1; l++) {
        const eng_layer *L = eng_model_layer(m, l);
        if (w == &L->wq || w == ffn_key(L)) {
            *k = (l - f->l0) * 2 + (w != &L->wq);
            return 1;
        }
    }
    return 0;
}

/* phase 0 (the float model): keep the input; phase 1: the sums */
static void observe(round_sums *f, int phase, const eng_weight *w, const float *x, uint32_t nt, uint32_t cols)
{
    uint32_t k;
    if (cols != f->dim || !site_of(f, phase ? f->mq : f->mf, w, &k))
        return;
    size_t d = f->dim, d2 = d * d;
    uint32_t p0 = f->pos[phase][k];
    if (p0 + nt > f->n_ctx)
        return;
    f->pos[phase][k] += nt;
    float *z = f->z + ((size_t)k * f->n_ctx + p0) * d;
    if (!phase)
        memcpy(z, x, (size_t)nt * d * sizeof *x);
    else
        tools_pair_sums(f->Hq + k * d2, f->C + k * d2, f->Hf + k * d2, x, z, nt, f->dim, 0, f->dim);
}

static void on_float(void *user, const eng_weight *w, const float *x, uint32_t nt, uint32_t cols)
{
    observe(user, 0, w, x, nt, cols);
}

static void on_quant(void *user, const eng_weight *w, const float *x, uint32_t nt, uint32_t cols)
{
    observe(user, 1, w, x, nt, cols);
}

static void on_window(void *user)
{
    round_sums *f = user;
    memset(f->pos[0], 0, 2 * (f->l1 - f->l0) * sizeof *f->pos[0]);
    memset(f->pos[1], 0, 2 * (f->l1 - f->l0) * sizeof *f->pos[1]);
}

static float *dequant(const eng_weight *w)
{
    const simd_traits *tr = simd_type_traits(w->type);
    float *o = tr && tr->dequant ? malloc((size_t)w->rows * w->cols * sizeof *o + 1) : NULL;
    for (uint32_t r = 0; o && r < w->rows; r++)
        tr->dequant((const char *)w->data + r * w->row_bytes, o + (size_t)r * w->cols, w->cols);
    return o;
}

/* The gain gguf holds for name: its file offset when it is dim f32
 * values equal to have (what the model reads: a loader that changes a
 * gain, e.g. adds 1, could not be patched by scaling); else 0. */
static uint64_t gain_offset(const eng_gguf *g, const char *name, const float *have, uint32_t dim)
{
    const eng_gguf_tensor *t = eng_gguf_tensor_find(g, name);
    if (!t || t->type != SIMD_F32 || t->n_dims != 1 || t->ne[0] != dim || !have ||
        memcmp(t->data, have, dim * sizeof *have))
        return 0;
    return eng_gguf_data_offset(g) + t->offset;
}

/* Fit site k's gain (layer l; attention when k is even) into out (dim
 * floats: the new gain). Returns 1 fitted, 0 skipped, or a negative code. */
static int fit_site(const round_sums *f, uint32_t k, float *out, double *ratio, eng_err *e)
{
    uint32_t l = f->l0 + k / 2, dim = f->dim;
    const eng_layer *Lf = eng_model_layer(f->mf, l), *Lq = eng_model_layer(f->mq, l);
    const eng_weight *wf[3], *wq[3];
    int n = 0;
    if (k % 2 == 0) {
        wf[0] = &Lf->wq, wf[1] = &Lf->wk, wf[2] = &Lf->wv;
        wq[0] = &Lq->wq, wq[1] = &Lq->wk, wq[2] = &Lq->wv;
        n = 3;
    } else {
        wf[n] = &Lf->w_up, wq[n++] = &Lq->w_up;
        if (Lf->w_gate.cols)
            wf[n] = &Lf->w_gate, wq[n++] = &Lq->w_gate;
    }
    int quantized = 0;
    for (int i = 0; i < n; i++) {
        if (wf[i]->cols != dim || wq[i]->cols != dim || wf[i]->rows != wq[i]->rows)
            return 0;
        quantized |= wf[i]->type != wq[i]->type;
    }
    if (!quantized)
        return 0;
    size_t d2 = (size_t)dim * dim;
    eng_gain_mat m[3];
    float *mem[6] = {0};
    double *s = malloc(dim * sizeof *s + 1);
    int r = s ? 0 : ENG_ENOMEM;
    for (int i = 0; !r && i < n; i++) {
        mem[2 * i] = dequant(wf[i]);
        mem[2 * i + 1] = dequant(wq[i]);
        if (!mem[2 * i] || !mem[2 * i + 1])
            r = ENG_ENOMEM;
        m[i] = (eng_gain_mat){.w = mem[2 * i], .wq = mem[2 * i + 1], .rows = wf[i]->rows, .H = f->Hq + k * d2,
                              .cross = f->C + k * d2, .h_fp = f->Hf + k * d2};
    }
    double l0 = 0, l1 = 0;
    eng_gain_opts go = {.per_matrix = 1};
    if (!r)
        r = eng_normfit_gain(dim, m, (uint32_t)n, &go, s, &l0, &l1);
    const float *g0 = k % 2 ? Lq->ffn_norm : Lq->attn_norm;
    for (uint32_t c = 0; !r && c < dim; c++)
        out[c] = (float)(g0[c] * s[c]);
    *ratio = l0 > 0 ? l1 / l0 : 1;
    for (int i = 0; i < 6; i++)
        free(mem[i]);
    free(s);
    if (r == ENG_EFORMAT) /* not definite: the gain stays */
        return 0;
    if (r == ENG_ENOMEM)
        return eng_errf(e, r, "out of memory fitting layer %u's gain", l);
    return r ? r : 1;
}

int eng_normfit_run(const char *float_path, const char *quant_path, const eng_normfit_opts *o,
                    eng_normfit_report *rep, eng_err *e)
{
    eng_normfit_report dummy;
    if (!rep)
        rep = &dummy;
    memset(rep, 0, sizeof *rep);
    eng_model *mf = NULL, *mq = NULL;
    int32_t *ids = NULL;
    uint32_t n_tok = 0, n_ctx = o->n_ctx ? o->n_ctx : 256;
    round_sums f = {0};
    float *gains = NULL;
    uint64_t *offs = NULL;
    int r = eng_model_open(float_path, &mf, e);
    if (r || (r = eng_model_open(quant_path, &mq, e)))
        goto done;
    const eng_model_info *in = eng_model_get_info(mf), *iq = eng_model_get_info(mq);
    if (in->dim != iq->dim || in->n_layers != iq->n_layers) {
        r = eng_errf(e, ENG_EINVAL, "%s and %s differ in shape", float_path, quant_path);
        goto done;
    }
    if (eng_model_norm(mf) != ENG_NORM_RMS) {
        r = eng_errf(e, ENG_EUNSUP, "fitting norm gains needs RMSNorm layers");
        goto done;
    }
    if (n_ctx > in->ctx_train)
        n_ctx = in->ctx_train;
    if ((r = tools_calib_tokens(mf, o->calib_path, NULL, 0, n_ctx, o->max_tokens ? o->max_tokens : 4096,
                                "fitting norm gains", &ids, &n_tok, e)))
        goto done;
    eng_model_close(mq);
    mq = NULL;
    uint32_t dim = in->dim, nl = in->n_layers;
    size_t d2 = (size_t)dim * dim;
    uint64_t per_layer = (uint64_t)6 * d2 * sizeof(double) + (uint64_t)2 * n_ctx * dim * sizeof(float);
    uint64_t budget = o->max_bytes ? o->max_bytes : (uint64_t)1 << 30;
    uint32_t step = budget / per_layer > nl ? nl : budget / per_layer ? (uint32_t)(budget / per_layer) : 1;
    f.n_ctx = n_ctx, f.dim = dim, f.mf = mf;
    f.z = malloc((size_t)2 * step * n_ctx * dim * sizeof *f.z + 1);
    f.pos[0] = malloc(2 * step * sizeof *f.pos[0] + 1);
    f.pos[1] = malloc(2 * step * sizeof *f.pos[1] + 1);
    f.Hq = malloc(2 * step * d2 * sizeof *f.Hq + 1);
    f.C = malloc(2 * step * d2 * sizeof *f.C + 1);
    f.Hf = malloc(2 * step * d2 * sizeof *f.Hf + 1);
    gains = malloc((size_t)2 * step * dim * sizeof *gains + 1);
    offs = malloc(2 * step * sizeof *offs + 1);
    if (!f.z || !f.pos[0] || !f.pos[1] || !f.Hq || !f.C || !f.Hf || !gains || !offs) {
        r = eng_errf(e, ENG_ENOMEM, "out of memory for the sums of %u layers", step);
        goto done;
    }
    double ratio_sum = 0;
    for (uint32_t l0 = 0; l0 < nl; l0 += step) {
        /* the quantized model as the rounds before left it */
        if ((r = eng_model_open(quant_path, &mq, e)))
            goto done;
        f.mq = mq, f.l0 = l0, f.l1 = l0 + step < nl ? l0 + step : nl;
        uint32_t ns = 2 * (f.l1 - l0);
        memset(f.Hq, 0, ns * d2 * sizeof *f.Hq);
        memset(f.C, 0, ns * d2 * sizeof *f.C);
        memset(f.Hf, 0, ns * d2 * sizeof *f.Hf);
        tools_calib_pair pp = {.threads = o->threads, .window = on_window, .on_float = on_float,
                               .on_quant = on_quant, .user = &f, .progress = o->progress, .puser = o->user,
                               .p0 = (double)l0 / nl, .span = (double)(f.l1 - l0) / nl, .what = "fit norms"};
        r = tools_calib_pair_run(mf, mq, ids, n_tok, n_ctx, &pp, e);
        for (uint32_t k = 0; !r && k < ns; k++) {
            tools_mirror_lower(f.Hq + k * d2, dim);
            tools_mirror_lower(f.Hf + k * d2, dim);
        }
        if (r)
            goto done;
        eng_gguf *g = NULL;
        if ((r = eng_gguf_open(quant_path, &g, e)))
            goto done;
        for (uint32_t k = 0; k < ns; k++) {
            const eng_layer *Lq = eng_model_layer(mq, l0 + k / 2);
            char name[64];
            snprintf(name, sizeof name, "blk.%u.%s.weight", l0 + k / 2, k % 2 ? "ffn_norm" : "attn_norm");
            offs[k] = gain_offset(g, name, k % 2 ? Lq->ffn_norm : Lq->attn_norm, dim);
            double ratio = 1;
            int fr = offs[k] && !(k % 2 ? Lq->ffn_norm_b : Lq->attn_norm_b) ? fit_site(&f, k, gains + (size_t)k * dim,
                                                                                          &ratio, e) : 0;
            if (fr < 0) {
                eng_gguf_close(g);
                r = fr;
                goto done;
            }
            if (!fr)
                offs[k] = 0, rep->n_skipped++;
            else
                rep->n_fit++, ratio_sum += ratio;
        }
        eng_gguf_close(g);
        eng_model_close(mq);
        mq = NULL;
        /* the gains into the file, the model closed */
        FILE *fp = fopen(quant_path, "r+b");
        for (uint32_t k = 0; fp && k < ns; k++)
            if (offs[k] && (offs[k] > LONG_MAX || fseek(fp, (long)offs[k], SEEK_SET) ||
                            fwrite(gains + (size_t)k * dim, sizeof *gains, dim, fp) != dim)) {
                fclose(fp);
                fp = NULL;
            }
        if (!fp || fclose(fp)) {
            r = eng_errf(e, ENG_EIO, "cannot write the fitted gains into %s", quant_path);
            goto done;
        }
        rep->rounds++;
    }
    rep->ratio = rep->n_fit ? ratio_sum / rep->n_fit : 1;
done:
    eng_model_close(mf);
    eng_model_close(mq);
    free(ids);
    free(f.z);
    free(f.pos[0]);
    free(f.pos[1]);
    free(f.Hq);
    free(f.C);
    free(f.Hf);
    free(gains);
    free(offs);
    return r;
}

/* ---- norm gains fitted to the quantized matrices ---- */

/* sum_r over m's rows, for row r with Hessian Hr (H / (c c^T) when the
 * matrix meets inputs divided by c) and d = diag(wq_r):
 *   A += wt d Hr d,  b += wt d Hr w_r,  c += wt w_r^T Hr w_r
 * so that sum_r wt ||(w_r - wq_r o s)^T z||^2 = s^T A s - 2 b^T s + c. */
static void gain_sums(const eng_gain_mat *m, uint32_t n, double wt, double *A, double *b, double *c, double *hw)
{
    for (uint32_t r = 0; r < m->rows; r++) {
        const double *H = m->row_h ? m->row_h + (size_t)r * n * n : m->H;
        const double *C = m->cross ? m->cross : H, *F = m->cross ? m->h_fp : H;
        const float *w = m->w + (size_t)r * n, *q = m->wq + (size_t)r * n;
        for (uint32_t i = 0; i < n; i++) {
            const double *h = H + (size_t)i * n, *x = C + (size_t)i * n, *f = F + (size_t)i * n;
            double ci = m->col ? m->col[i] : 1, s = 0, sf = 0;
            for (uint32_t j = 0; j < n; j++) {
                double sc = m->col ? 1 / (ci * m->col[j]) : 1;
                s += x[j] * sc * w[j];
                sf += f[j] * sc * w[j];
                A[(size_t)i * n + j] += wt * q[i] * h[j] * sc * q[j];
            }
            hw[i] = s;
            *c += wt * w[i] * sf;
        }
        for (uint32_t i = 0; i < n; i++)
            b[i] += wt * q[i] * hw[i];
    }
}

/* s^T A s - 2 b^T s + c */
static double gain_loss(const double *A, const double *b, double c, const double *s, uint32_t n)
{
    double l = c;
    for (uint32_t i = 0; i < n; i++) {
        double t = 0;
        for (uint32_t j = 0; j < n; j++)
            t += A[(size_t)i * n + j] * s[j];
        l += s[i] * t - 2 * b[i] * s[i];
    }
    return l;
}

int eng_normfit_gain(uint32_t n, const eng_gain_mat *m, uint32_t n_mats, const eng_gain_opts *o, double *s,
                      double *loss0, double *loss1)
{
    static const eng_gain_opts none;
    const eng_gain_opts *op = o ? o : &none;
    for (uint32_t i = 0; i < n; i++)
        s[i] = 1;
    if (!n)
        return 0;
    size_t n2 = (size_t)n * n;
    double *A = calloc(n2, sizeof *A), *L = malloc(n2 * sizeof *L), *b = calloc(n, sizeof *b);
    double *hw = malloc(n * sizeof *hw), *y = malloc(n * sizeof *y);
    int r = 0;
    if (!A || !L || !b || !hw || !y) {
        r = ENG_ENOMEM;
        goto done;
    }
    double c = 0;
    for (uint32_t k = 0; k < n_mats; k++) {
        double wt = 1;
        if (op->per_matrix) {
            /* each matrix's loss relative to its own output energy
             * sum_r w_r^T Hr w_r: q, k and v (or gate and up) count alike */
            double e = 0;
            for (uint32_t rr = 0; rr < m[k].rows; rr++) {
                const double *H = m[k].cross ? m[k].h_fp : m[k].row_h ? m[k].row_h + (size_t)rr * n2 : m[k].H;
                const float *w = m[k].w + (size_t)rr * n;
                for (uint32_t i = 0; i < n; i++) {
                    double ci = m[k].col ? m[k].col[i] : 1, t = 0;
                    for (uint32_t j = 0; j < n; j++)
                        t += (m[k].col ? H[(size_t)i * n + j] / (ci * m[k].col[j]) : H[(size_t)i * n + j]) * w[j];
                    e += w[i] * t;
                }
            }
            wt = e > 0 ? 1 / e : 0;
        }
        gain_sums(&m[k], n, wt, A, b, &c, hw);
    }
    double l0 = gain_loss(A, b, c, s, n);
    double mean = 0;
    for (uint32_t i = 0; i < n; i++)
        mean += A[(size_t)i * n + i];
    mean = mean > 0 ? mean / n : 1;
    /* the ridge pulls s toward 1: lam ||s - 1||^2, lam a share of A's mean diagonal;
     * raised tenfold (from 1e-6 at least) while A + lam is not positive definite */
    double lam = op->ridge > 0 ? op->ridge : 0;
    int ok = 0;
    for (int tries = 0; tries < 8 && !ok; tries++) {
        memcpy(L, A, n2 * sizeof *L);
        for (uint32_t i = 0; i < n; i++)
            L[(size_t)i * n + i] += lam * mean;
        ok = !tools_chol_lower(L, n);
        if (!ok)
            lam = lam > 0 ? lam * 10 : 1e-6;
    }
    if (!ok) {
        r = ENG_EFORMAT;
        goto done;
    }
    /* (A + lam) s = b + lam: forward, then back substitution */
    for (uint32_t i = 0; i < n; i++) {
        double t = b[i] + lam * mean;
        for (uint32_t k = 0; k < i; k++)
            t -= L[(size_t)i * n + k] * y[k];
        y[i] = t / L[(size_t)i * n + i];
    }
    for (uint32_t i = n; i-- > 0;) {
        double t = y[i];
        for (uint32_t k = i + 1; k < n; k++)
            t -= L[(size_t)k * n + i] * s[k];
        s[i] = t / L[(size_t)i * n + i];
    }
    double l1 = gain_loss(A, b, c, s, n);
    if (!(l1 <= l0)) { /* never worse than leaving the gain alone (numerics) */
        for (uint32_t i = 0; i < n; i++)
            s[i] = 1;
        l1 = l0;
    }
    if (loss0)
        *loss0 = l0;
    if (loss1)
        *loss1 = l1;
done:
    free(A); free(L); free(b); free(hw); free(y);
    return r;
}
