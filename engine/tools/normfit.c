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
    int phase;               /* 0: the float model runs, 1: the quantized one */
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

static void observe(void *user, const eng_weight *w, const float *x, uint32_t nt, uint32_t cols)
{
    round_sums *f = user;
    uint32_t k;
    if (cols != f->dim || !site_of(f, f->phase ? f->mq : f->mf, w, &k))
        return;
    size_t d = f->dim, d2 = d * d;
    uint32_t p0 = f->pos[f->phase][k];
    if (p0 + nt > f->n_ctx)
        return;
    f->pos[f->phase][k] += nt;
    float *z = f->z + ((size_t)k * f->n_ctx + p0) * d;
    if (!f->phase) {
        memcpy(z, x, (size_t)nt * d * sizeof *x);
        return;
    }
    double *Hq = f->Hq + k * d2, *C = f->C + k * d2, *Hf = f->Hf + k * d2;
    for (uint32_t t = 0; t < nt; t++) {
        const float *q = x + (size_t)t * d, *zt = z + (size_t)t * d;
        for (size_t i = 0; i < d; i++) {
            double qi = q[i], zi = zt[i];
            double *hq = Hq + i * d, *c = C + i * d, *hf = Hf + i * d;
            for (size_t j = 0; j < d; j++) {
                hq[j] += qi * q[j];
                c[j] += qi * zt[j];
                hf[j] += zi * zt[j];
            }
        }
    }
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
        r = eng_gptq_fit_gain(dim, m, (uint32_t)n, &go, s, &l0, &l1);
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
        for (uint32_t w0 = 0; w0 + n_ctx <= n_tok && !r; w0 += n_ctx) {
            memset(f.pos[0], 0, ns * sizeof *f.pos[0]);
            memset(f.pos[1], 0, ns * sizeof *f.pos[1]);
            f.phase = 0;
            r = tools_calib_run(mf, ids + w0, n_ctx, n_ctx, o->threads, observe, &f, NULL, NULL, 0, 1, e);
            f.phase = 1;
            if (!r)
                r = tools_calib_run(mq, ids + w0, n_ctx, n_ctx, o->threads, observe, &f, NULL, NULL, 0, 1, e);
            if (o->progress)
                o->progress(o->user, ((double)l0 + (double)(w0 + n_ctx) / n_tok * (f.l1 - l0)) / nl, "fit norms");
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
