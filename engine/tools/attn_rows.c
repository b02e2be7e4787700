/* attn_v's Hessians from the attention, for GPTQ (see attn_rows.h). */
#include "attn_rows.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "err.h"
#include "simd.h"

struct tools_attn {
    uint32_t dim, nh, nkv, hd, grp, nq, nkvd, rd, half;
    int neox;
    double scale;                 /* the softmax's: 1/sqrt(head_dim) */
    const float *bq, *bk, *bv;    /* biases or NULL */
    float *wq, *wk, *wv;          /* the weights as floats, rows x dim */
    double *hv;                   /* nkv x dim x dim: each kv head's sum (the lower triangle while summing) */
    uint32_t n_tok, n_ctx, win0;  /* the calibration's cut, and where the current window starts */
    uint32_t nx, no;              /* tokens of the window seen: inputs, outputs */
    float *x, *obs;               /* the window: inputs [n_ctx][dim], the pass's outputs [n_ctx][nq] */
    float *q, *k, *v;             /* q, k, v unrotated (bias added) [n_ctx][nq|nkvd|nkvd] */
    float *p;                     /* [nh][n_ctx][n_ctx]: p[i][t][s], s <= t */
    double *cd, *sd;              /* [n_ctx][half]: cos and sin of (position or distance) * freq */
    double *freq;                 /* [half] */
    double *xb;                   /* [nkv][dim]: each head's task's xbar */
    double err, ref;              /* the check's sums */
    int oom;
};

int tools_attn_supported(const eng_model *m, uint32_t l)
{
    const eng_model_info *in = eng_model_get_info(m);
    const eng_layer *L = eng_model_layer(m, l);
    if (!L->n_heads || !L->n_kv_heads || L->n_heads % L->n_kv_heads || L->q_norm || L->k_norm || L->sinks ||
        L->window || in->rope_yarn > 0 || in->rope_dims > in->head_dim || in->rope_dims % 2 || !in->head_dim)
        return 0;
    uint32_t hd = in->head_dim;
    if (L->wq.rows != L->n_heads * hd || L->wk.rows != L->n_kv_heads * hd || L->wv.rows != L->n_kv_heads * hd ||
        L->wq.cols != in->dim || L->wk.cols != in->dim || L->wv.cols != in->dim)
        return 0;
    return 1;
}

uint64_t tools_attn_bytes(const eng_model *m, uint32_t l, uint32_t n_ctx)
{
    const eng_model_info *in = eng_model_get_info(m);
    const eng_layer *L = eng_model_layer(m, l);
    uint64_t dim = in->dim, nq = (uint64_t)L->n_heads * in->head_dim, nkvd = (uint64_t)L->n_kv_heads * in->head_dim;
    return (uint64_t)L->n_kv_heads * dim * dim * sizeof(double) + (nq + 2 * nkvd) * dim * sizeof(float) +
           (uint64_t)n_ctx * (dim + 2 * nq + 2 * nkvd + (uint64_t)L->n_heads * n_ctx) * sizeof(float);
}

static float *read_rows(const eng_weight *w)
{
    const simd_traits *tr = simd_type_traits(w->type);
    float *f = malloc((size_t)w->rows * w->cols * sizeof *f);
    if (!f || !tr || !tr->dequant) {
        free(f);
        return NULL;
    }
    for (uint32_t r = 0; r < w->rows; r++)
        tr->dequant((const char *)w->data + r * w->row_bytes, f + (size_t)r * w->cols, w->cols);
    return f;
}

tools_attn *tools_attn_new(const eng_model *m, uint32_t l, uint32_t n_tok, uint32_t n_ctx)
{
    const eng_model_info *in = eng_model_get_info(m);
    const eng_layer *L = eng_model_layer(m, l);
    tools_attn *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->dim = in->dim, a->nh = L->n_heads, a->nkv = L->n_kv_heads, a->hd = in->head_dim;
    a->grp = a->nh / a->nkv, a->nq = a->nh * a->hd, a->nkvd = a->nkv * a->hd;
    a->rd = in->rope_dims, a->half = in->rope_dims / 2, a->neox = in->rope_neox;
    a->scale = 1 / sqrt((double)a->hd);
    a->bq = L->bq, a->bk = L->bk, a->bv = L->bv;
    a->n_tok = n_tok, a->n_ctx = n_ctx;
    size_t d2 = (size_t)a->dim * a->dim, T = n_ctx;
    a->wq = read_rows(&L->wq), a->wk = read_rows(&L->wk), a->wv = read_rows(&L->wv);
    a->hv = calloc(a->nkv * d2, sizeof *a->hv);
    a->x = malloc(T * a->dim * sizeof *a->x);
    a->obs = malloc(T * a->nq * sizeof *a->obs);
    a->q = malloc(T * a->nq * sizeof *a->q);
    a->k = malloc(T * a->nkvd * sizeof *a->k);
    a->v = malloc(T * a->nkvd * sizeof *a->v);
    a->p = malloc((size_t)a->nh * T * T * sizeof *a->p);
    a->cd = malloc((T * a->half + 1) * sizeof *a->cd);
    a->sd = malloc((T * a->half + 1) * sizeof *a->sd);
    a->freq = malloc((a->half + 1) * sizeof *a->freq);
    a->xb = malloc((size_t)a->nkv * a->dim * sizeof *a->xb);
    if (!a->wq || !a->wk || !a->wv || !a->hv || !a->x || !a->obs || !a->q || !a->k ||
        !a->v || !a->p || !a->cd || !a->sd || !a->freq || !a->xb) {
        tools_attn_free(a);
        return NULL;
    }
    /* the forward pass's angles (engine/model/forward.c rope_setup) for a
     * family without frequency factors; a family with them fails the check */
    for (uint32_t i = 0; i < a->half; i++)
        a->freq[i] = pow((double)in->rope_base, -2.0 * i / a->rd) / (in->rope_scale > 0 ? in->rope_scale : 1);
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t i = 0; i < a->half; i++) {
            a->cd[t * a->half + i] = cos((double)t * a->freq[i]);
            a->sd[t * a->half + i] = sin((double)t * a->freq[i]);
        }
    return a;
}

void tools_attn_input(tools_attn *a, const float *x, uint32_t nt)
{
    uint32_t room = a->n_ctx - a->nx;
    nt = nt < room ? nt : room;
    memcpy(a->x + (size_t)a->nx * a->dim, x, (size_t)nt * a->dim * sizeof *x);
    a->nx += nt;
}

/* out (n x rows) = in (n x cols) W^T + b, in double. */
static void project(const float *in, uint32_t n, const float *W, uint32_t rows, uint32_t cols, const float *b,
                    float *out)
{
    for (uint32_t t = 0; t < n; t++)
        for (uint32_t r = 0; r < rows; r++) {
            const float *x = in + (size_t)t * cols, *w = W + (size_t)r * cols;
            double s = b ? b[r] : 0;
            for (uint32_t c = 0; c < cols; c++)
                s += (double)w[c] * x[c];
            out[(size_t)t * rows + r] = (float)s;
        }
}

/* One head's values src (hd floats) rotated to position pos into dst:
 * the first rd values in pairs (i, i + rd/2) for NeoX order, else (2i,
 * 2i + 1), each pair by the angle pos * freq[i]; the rest copied. */
static void rope_head(const tools_attn *a, const float *src, uint32_t pos, double *dst)
{
    for (uint32_t d = 0; d < a->hd; d++)
        dst[d] = src[d];
    for (uint32_t i = 0; i < a->half; i++) {
        uint32_t da = a->neox ? i : 2 * i, db = a->neox ? i + a->half : 2 * i + 1;
        double c = a->cd[(size_t)pos * a->half + i], sn = a->sd[(size_t)pos * a->half + i];
        dst[da] = src[da] * c - src[db] * sn;
        dst[db] = src[da] * sn + src[db] * c;
    }
}

/* The window's q, k, v, probabilities and outputs (T tokens), and the
 * check against the pass's outputs. */
static void recompute(tools_attn *a, uint32_t T)
{
    uint32_t hd = a->hd, nq = a->nq, nkvd = a->nkvd;
    project(a->x, T, a->wq, nq, a->dim, a->bq, a->q);
    project(a->x, T, a->wk, nkvd, a->dim, a->bk, a->k);
    project(a->x, T, a->wv, nkvd, a->dim, a->bv, a->v);
    double *qr = malloc((size_t)hd * sizeof *qr), *kr = malloc((size_t)T * hd * sizeof *kr);
    double *sc = malloc((size_t)T * sizeof *sc);
    if (!qr || !kr || !sc) {
        a->oom = 1;
        goto done;
    }
    for (uint32_t h = 0; h < a->nkv; h++) {
        /* the keys of head h rotated to their positions */
        for (uint32_t s = 0; s < T; s++)
            rope_head(a, a->k + (size_t)s * nkvd + (size_t)h * hd, s, kr + (size_t)s * hd);
        for (uint32_t i = h * a->grp; i < (h + 1) * a->grp; i++)
            for (uint32_t t = 0; t < T; t++) {
                rope_head(a, a->q + (size_t)t * nq + (size_t)i * hd, t, qr);
                double mx = -INFINITY, sum = 0;
                for (uint32_t s = 0; s <= t; s++) {
                    double d = 0;
                    for (uint32_t c = 0; c < hd; c++)
                        d += qr[c] * kr[(size_t)s * hd + c];
                    sc[s] = d * a->scale;
                    mx = sc[s] > mx ? sc[s] : mx;
                }
                for (uint32_t s = 0; s <= t; s++)
                    sum += sc[s] = exp(sc[s] - mx);
                float *p = a->p + ((size_t)i * a->n_ctx + t) * a->n_ctx;
                const float *ob = a->obs + (size_t)t * nq + (size_t)i * hd;
                for (uint32_t c = 0; c < hd; c++)
                    qr[c] = 0;
                for (uint32_t s = 0; s <= t; s++) {
                    p[s] = (float)(sc[s] / sum);
                    const float *v = a->v + (size_t)s * nkvd + (size_t)h * hd;
                    for (uint32_t c = 0; c < hd; c++)
                        qr[c] += (sc[s] / sum) * v[c];
                }
                for (uint32_t c = 0; c < hd; c++) {
                    a->err += (qr[c] - ob[c]) * (qr[c] - ob[c]);
                    a->ref += (double)ob[c] * ob[c];
                }
            }
    }
done:
    free(qr); free(kr); free(sc);
}

/* h (n x n, lower triangle) += v v^T. */
static void add_outer(double *h, const double *v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        double vi = v[i], *hi = h + (size_t)i * n;
        if (vi == 0)
            continue;
        for (uint32_t j = 0; j <= i; j++)
            hi[j] += vi * v[j];
    }
}

typedef struct win_job {
    tools_attn *a;
    uint32_t T;
} win_job;

/* The Hessian of attn_v's rows of kv head h += this window's sums. */
static void sum_v_head(tools_attn *a, uint32_t T, uint32_t h, double *xb)
{
    uint32_t dim = a->dim;
    double *H = a->hv + (size_t)h * dim * dim;
    for (uint32_t i = h * a->grp; i < (h + 1) * a->grp; i++)
        for (uint32_t t = 0; t < T; t++) {
            const float *p = a->p + ((size_t)i * a->n_ctx + t) * a->n_ctx;
            memset(xb, 0, dim * sizeof *xb);
            for (uint32_t s = 0; s <= t; s++) {
                const float *x = a->x + (size_t)s * dim;
                double ps = p[s];
                if (ps != 0)
                    for (uint32_t j = 0; j < dim; j++)
                        xb[j] += ps * x[j];
            }
            add_outer(H, xb, dim);
        }
}

/* Tasks: attn_v's heads b..e. */
static void win_tasks(void *arg, uint32_t b, uint32_t e)
{
    win_job *j = arg;
    tools_attn *a = j->a;
    for (uint32_t h = b; h < e; h++)
        sum_v_head(a, j->T, h, a->xb + (size_t)h * a->dim);
}

int tools_attn_output(tools_attn *a, const float *o, uint32_t nt, eng_pool *pool)
{
    uint32_t room = a->n_ctx - a->no;
    nt = nt < room ? nt : room;
    memcpy(a->obs + (size_t)a->no * a->nq, o, (size_t)nt * a->nq * sizeof *o);
    a->no += nt;
    uint32_t T = a->n_tok - a->win0 < a->n_ctx ? a->n_tok - a->win0 : a->n_ctx;
    if (!T || a->no < T || a->nx < T)
        return a->oom ? ENG_ENOMEM : 0;
    recompute(a, T);
    win_job j = {a, T};
    if (pool && !a->oom)
        eng_pool_run_range(pool, win_tasks, &j, a->nkv, 1);
    else if (!a->oom)
        win_tasks(&j, 0, a->nkv);
    a->win0 += T;
    a->nx = a->no = 0;
    return a->oom ? ENG_ENOMEM : 0;
}

double tools_attn_finish(tools_attn *a)
{
    for (uint32_t h = 0; h < a->nkv; h++)
        tools_mirror_lower(a->hv + (size_t)h * a->dim * a->dim, a->dim);
    return a->ref > 0 ? sqrt(a->err / a->ref) : 0;
}

const double *tools_attn_v_hessians(const tools_attn *a, uint32_t *rows, uint32_t *per)
{
    *rows = a->nkvd;
    *per = a->hd;
    return a->hv;
}

void tools_attn_free(tools_attn *a)
{
    if (!a)
        return;
    free(a->wq); free(a->wk); free(a->wv);
    free(a->hv);
    free(a->x); free(a->obs); free(a->q); free(a->k); free(a->v); free(a->p);
    free(a->cd); free(a->sd); free(a->freq); free(a->xb);
    free(a);
}
