/* Double-precision reference forward pass (see ref_llama.h). Written for
 * clarity, not speed: the whole sequence is kept, K and V of every
 * position are recomputed per call, and each step is its own loop. */
#include "ref_llama.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* out = rmsnorm(x) * w over n values */
static void rmsnorm(double *out, const double *x, const float *w, int n, double eps)
{
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++)
        out[i] = x[i] * r * (double)w[i];
}

/* Round n values (a multiple of 32) in place to int8 steps of amax/127
 * per block of 32. */
static void round_q8(double *x, int n)
{
    for (int b = 0; b < n; b += 32) {
        double amax = 0;
        for (int j = 0; j < 32; j++)
            amax = fmax(amax, fabs(x[b + j]));
        double d = amax / 127;
        for (int j = 0; j < 32 && d > 0; j++)
            x[b + j] = d * nearbyint(x[b + j] / d);
    }
}

/* out[r] = sum_c W[r][c] * x[c] (+ b[r]) for W of rows x cols. With a
 * scratch qbuf (cols values) and cols a multiple of 32, the input is the
 * copy of x that round_q8 made (x itself is not changed). */
static void matvec(double *out, const float *W, const float *b, const double *x, int rows, int cols, double *qbuf)
{
    if (qbuf && cols % 32 == 0) {
        memcpy(qbuf, x, sizeof(double) * (size_t)cols);
        round_q8(qbuf, cols);
        x = qbuf;
    }
    for (int r = 0; r < rows; r++) {
        const float *row = W + (size_t)r * cols;
        double s = 0;
        for (int c = 0; c < cols; c++)
            s += (double)row[c] * x[c];
        out[r] = s + (b ? (double)b[r] : 0.0);
    }
}

static double silu(double a) { return a / (1.0 + exp(-a)); }

void ref_llama_rope(double *x, int rope_dims, int neox, double pos, double base, double factor)
{
    int half = rope_dims / 2;
    for (int i = 0; i < half; i++) {
        double theta = (pos / factor) * pow(base, -2.0 * i / rope_dims);
        double cs = cos(theta), sn = sin(theta);
        int a = neox ? i : 2 * i;
        int b = neox ? i + half : 2 * i + 1;
        double x0 = x[a], x1 = x[b];
        x[a] = x0 * cs - x1 * sn;
        x[b] = x0 * sn + x1 * cs;
    }
}

static int cfg_ok(const ref_llama_cfg *c)
{
    return c->n_vocab > 0 && c->dim > 0 && c->n_layers >= 0 && c->n_heads > 0 && c->n_kv_heads > 0 &&
           c->n_heads % c->n_kv_heads == 0 && c->head_dim > 0 && c->ffn > 0 && c->rope_dims >= 0 &&
           c->rope_dims % 2 == 0 && c->rope_dims <= c->head_dim && c->rope_base > 0 && c->rope_factor > 0;
}

int ref_llama_forward(const ref_llama_cfg *c, const ref_llama_weights *w, const int32_t *tokens, int n,
                      double *logits)
{
    if (!cfg_ok(c) || n <= 0)
        return -1;
    for (int t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= c->n_vocab)
            return -1;

    const int dim = c->dim, hd = c->head_dim;
    const int qdim = c->n_heads * hd, kvdim = c->n_kv_heads * hd;
    const int group = c->n_heads / c->n_kv_heads; /* q heads sharing one kv head */
    const double scale = 1.0 / sqrt((double)hd);

    /* x: residual stream [n][dim]; q [n][qdim]; k, v [n][kvdim] */
    double *x = malloc(sizeof(double) * (size_t)n * dim);
    double *q = malloc(sizeof(double) * (size_t)n * qdim);
    double *k = malloc(sizeof(double) * (size_t)n * kvdim);
    double *v = malloc(sizeof(double) * (size_t)n * kvdim);
    double *h = malloc(sizeof(double) * (size_t)dim);
    double *att = malloc(sizeof(double) * (size_t)qdim);
    double *o = malloc(sizeof(double) * (size_t)dim);
    double *g = malloc(sizeof(double) * (size_t)c->ffn);
    double *u = malloc(sizeof(double) * (size_t)c->ffn);
    double *p = malloc(sizeof(double) * (size_t)n);
    int widest = dim > qdim ? dim : qdim;
    widest = widest > c->ffn ? widest : c->ffn;
    /* round_q8 scratch; NULL: exact matmul inputs */
    double *q8 = c->act_q8 ? malloc(sizeof(double) * (size_t)widest) : NULL;
    int rc = -1;
    if (!x || !q || !k || !v || !h || !att || !o || !g || !u || !p || (c->act_q8 && !q8))
        goto done;

    for (int t = 0; t < n; t++)
        for (int i = 0; i < dim; i++)
            x[(size_t)t * dim + i] = w->tok_embd[(size_t)tokens[t] * dim + i];

    for (int l = 0; l < c->n_layers; l++) {
        const ref_llama_layer *L = &w->layers[l];

        /* q, k, v of every position, rotated for that position */
        for (int t = 0; t < n; t++) {
            double *qt = q + (size_t)t * qdim, *kt = k + (size_t)t * kvdim, *vt = v + (size_t)t * kvdim;
            rmsnorm(h, x + (size_t)t * dim, L->attn_norm, dim, c->norm_eps);
            matvec(qt, L->wq, L->bq, h, qdim, dim, q8);
            matvec(kt, L->wk, L->bk, h, kvdim, dim, q8);
            matvec(vt, L->wv, L->bv, h, kvdim, dim, q8);
            for (int hh = 0; hh < c->n_heads; hh++)
                ref_llama_rope(qt + hh * hd, c->rope_dims, c->rope_neox, t, c->rope_base, c->rope_factor);
            for (int hh = 0; hh < c->n_kv_heads; hh++)
                ref_llama_rope(kt + hh * hd, c->rope_dims, c->rope_neox, t, c->rope_base, c->rope_factor);
        }

        /* causal attention, then the output projection into the residual */
        for (int t = 0; t < n; t++) {
            for (int hh = 0; hh < c->n_heads; hh++) {
                const double *qh = q + (size_t)t * qdim + hh * hd;
                int kvh = hh / group;
                double mx = -INFINITY;
                for (int j = 0; j <= t; j++) {
                    const double *kj = k + (size_t)j * kvdim + kvh * hd;
                    double s = 0;
                    for (int d = 0; d < hd; d++)
                        s += qh[d] * kj[d];
                    p[j] = s * scale;
                    if (p[j] > mx)
                        mx = p[j];
                }
                double sum = 0;
                for (int j = 0; j <= t; j++) {
                    p[j] = exp(p[j] - mx);
                    sum += p[j];
                }
                double *ah = att + hh * hd;
                for (int d = 0; d < hd; d++)
                    ah[d] = 0;
                for (int j = 0; j <= t; j++) {
                    const double *vj = v + (size_t)j * kvdim + kvh * hd;
                    for (int d = 0; d < hd; d++)
                        ah[d] += p[j] / sum * vj[d];
                }
            }
            matvec(o, L->wo, NULL, att, dim, qdim, q8);
            for (int i = 0; i < dim; i++)
                x[(size_t)t * dim + i] += o[i];
        }

        /* gated MLP */
        for (int t = 0; t < n; t++) {
            double *xt = x + (size_t)t * dim;
            rmsnorm(h, xt, L->ffn_norm, dim, c->norm_eps);
            matvec(g, L->w_gate, NULL, h, c->ffn, dim, q8);
            matvec(u, L->w_up, NULL, h, c->ffn, dim, q8);
            for (int i = 0; i < c->ffn; i++)
                g[i] = silu(g[i]) * u[i];
            matvec(o, L->w_down, NULL, g, dim, c->ffn, q8);
            for (int i = 0; i < dim; i++)
                xt[i] += o[i];
        }
    }

    for (int t = 0; t < n; t++) {
        rmsnorm(h, x + (size_t)t * dim, w->out_norm, dim, c->norm_eps);
        matvec(logits + (size_t)t * c->n_vocab, w->output, NULL, h, c->n_vocab, dim, q8);
    }
    rc = 0;
done:
    free(x);
    free(q);
    free(k);
    free(v);
    free(h);
    free(att);
    free(o);
    free(g);
    free(u);
    free(p);
    free(q8);
    return rc;
}
