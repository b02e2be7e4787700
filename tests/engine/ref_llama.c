/* Double-precision reference forward pass (see ref_llama.h). Written for
 * clarity, not speed: the whole sequence is kept, K and V of every
 * position are recomputed per call, and each step is its own loop. */
#include "ref_llama.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* x rounded to the nearest IEEE half (ties to even): 11 significant bits,
 * a step of 2^-24 below the smallest normal 2^-14, infinity from 65520 */
static double round_half(double x)
{
    if (x == 0 || !isfinite(x))
        return x;
    int e;
    frexp(x, &e); /* |x| = m * 2^e, 0.5 <= m < 1: the leading bit is 2^(e-1) */
    int lead = e - 1 < -14 ? -14 : e - 1;
    double step = ldexp(1.0, lead - 10);
    double r = nearbyint(x / step) * step; /* the default rounding mode: to nearest even */
    return fabs(r) > 65504 ? copysign(INFINITY, x) : r;
}

/* out = rmsnorm(x) * w over n values (out may be x) */
static void rmsnorm(double *out, const double *x, const float *w, int n, double eps)
{
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++)
        out[i] = x[i] * r * (double)w[i];
}

/* out = (x - mean) / sqrt(var + eps) * w + b over n values, var the
 * population variance */
static void layernorm(double *out, const double *x, const float *w, const float *b, int n, double eps)
{
    double mean = 0, var = 0;
    for (int i = 0; i < n; i++)
        mean += x[i];
    mean /= n;
    for (int i = 0; i < n; i++)
        var += (x[i] - mean) * (x[i] - mean);
    var /= n;
    double r = 1.0 / sqrt(var + eps);
    for (int i = 0; i < n; i++)
        out[i] = (x[i] - mean) * r * (double)w[i] + (b ? (double)b[i] : 0.0);
}

/* the configured norm of one dim-vector */
static void norm(const ref_llama_cfg *c, double *out, const double *x, const float *w, const float *b)
{
    if (c->layer_norm)
        layernorm(out, x, w, b, c->dim, c->norm_eps);
    else
        rmsnorm(out, x, w, c->dim, c->norm_eps);
}

/* Round n values (a multiple of 32) in place to int8 steps of amax/127
 * per block of 32. *margin (if not NULL) drops to the smallest distance,
 * in steps, of a value from a rounding tie (halfway between two steps). */
static void round_q8(double *x, int n, double *margin)
{
    for (int b = 0; b < n; b += 32) {
        double amax = 0;
        for (int j = 0; j < 32; j++)
            amax = fmax(amax, fabs(x[b + j]));
        double d = amax / 127;
        for (int j = 0; j < 32 && d > 0; j++) {
            double r = x[b + j] / d;
            if (margin)
                *margin = fmin(*margin, fabs(r - floor(r) - 0.5));
            x[b + j] = d * nearbyint(r);
        }
    }
}

/* out[r] = sum_c W[r][c] * x[c] (+ b[r]) for W of rows x cols. With a
 * scratch qbuf (cols values) and cols a multiple of 32, the input is the
 * copy of x that round_q8 made (x itself is not changed). */
static void matvec(double *out, const float *W, const float *b, const double *x, int rows, int cols, double *qbuf,
                   double *margin)
{
    if (qbuf && cols % 32 == 0) {
        memcpy(qbuf, x, sizeof(double) * (size_t)cols);
        round_q8(qbuf, cols, margin);
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

double ref_gelu(double x)
{
    const double k = sqrt(2.0 / 3.14159265358979323846);
    return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

void ref_llama_rope(double *x, int rope_dims, int neox, double pos, double base, double factor)
{
    ref_llama_rope_freqs(x, rope_dims, neox, pos, base, factor, NULL);
}

void ref_llama_rope_freqs(double *x, int rope_dims, int neox, double pos, double base, double factor,
                          const float *freqs)
{
    int half = rope_dims / 2;
    for (int i = 0; i < half; i++) {
        double theta = (pos / factor) * pow(base, -2.0 * i / rope_dims) / (freqs ? (double)freqs[i] : 1.0);
        double cs = cos(theta), sn = sin(theta);
        int a = neox ? i : 2 * i;
        int b = neox ? i + half : 2 * i + 1;
        double x0 = x[a], x1 = x[b];
        x[a] = x0 * cs - x1 * sn;
        x[b] = x0 * sn + x1 * cs;
    }
}

static int heads_of(const ref_llama_cfg *c, int l) { return c->layer_heads ? c->layer_heads[l] : c->n_heads; }
static int kv_of(const ref_llama_cfg *c, int l) { return c->layer_kv_heads ? c->layer_kv_heads[l] : c->n_kv_heads; }
static int ffn_of(const ref_llama_cfg *c, int l) { return c->layer_ffn ? c->layer_ffn[l] : c->ffn; }

static int cfg_ok(const ref_llama_cfg *c)
{
    if (!(c->n_vocab > 0 && c->dim > 0 && c->n_layers >= 0 && c->head_dim > 0 && c->rope_dims >= 0 &&
          c->rope_dims % 2 == 0 && c->rope_dims <= c->head_dim && c->rope_base > 0 && c->rope_factor > 0))
        return 0;
    for (int l = 0; l < c->n_layers; l++) {
        int h = heads_of(c, l), kv = kv_of(c, l);
        if (h < 0 || kv < 0 || (h == 0) != (kv == 0) || (h && h % kv) || ffn_of(c, l) < 0)
            return 0;
        if (c->layer_window && (c->layer_window[l] < 0 || (c->layer_window[l] && !(c->rope_base_local > 0))))
            return 0;
    }
    return 1;
}

int ref_llama_forward(const ref_llama_cfg *c, const ref_llama_weights *w, const int32_t *tokens, int n,
                      double *logits)
{
    return ref_llama_forward_margins(c, w, tokens, n, logits, NULL);
}

int ref_llama_forward_margins(const ref_llama_cfg *c, const ref_llama_weights *w, const int32_t *tokens, int n,
                              double *logits, double *tie_margin)
{
    if (!cfg_ok(c) || n <= 0 || (w->pos_embd && n > w->n_pos))
        return -1;
    for (int t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= c->n_vocab)
            return -1;

    const int dim = c->dim, hd = c->head_dim;
    const double scale = c->attn_scale > 0 ? c->attn_scale : 1.0 / sqrt((double)hd);
    /* the widest layer sizes the buffers */
    int max_q = 0, max_kv = 0, max_ffn = 1;
    for (int l = 0; l < c->n_layers; l++) {
        max_q = heads_of(c, l) * hd > max_q ? heads_of(c, l) * hd : max_q;
        max_kv = kv_of(c, l) * hd > max_kv ? kv_of(c, l) * hd : max_kv;
        max_ffn = ffn_of(c, l) > max_ffn ? ffn_of(c, l) : max_ffn;
    }
    max_q = max_q ? max_q : 1;
    max_kv = max_kv ? max_kv : 1;

    /* x: residual stream [n][dim]; q [n][qdim]; k, v [n][kvdim] of the layer at hand */
    double *x = malloc(sizeof(double) * (size_t)n * dim);
    double *q = malloc(sizeof(double) * (size_t)n * max_q);
    double *k = malloc(sizeof(double) * (size_t)n * max_kv);
    double *v = malloc(sizeof(double) * (size_t)n * max_kv);
    double *h = malloc(sizeof(double) * (size_t)dim);
    double *att = malloc(sizeof(double) * (size_t)max_q);
    double *o = malloc(sizeof(double) * (size_t)dim);
    double *g = malloc(sizeof(double) * (size_t)max_ffn);
    double *u = malloc(sizeof(double) * (size_t)max_ffn);
    double *p = malloc(sizeof(double) * (size_t)n);
    int widest = dim > max_q ? dim : max_q;
    widest = widest > max_ffn ? widest : max_ffn;
    /* round_q8 scratch; NULL: exact matmul inputs */
    double *q8 = c->act_q8 ? malloc(sizeof(double) * (size_t)widest) : NULL;
    int rc = -1;
    if (!x || !q || !k || !v || !h || !att || !o || !g || !u || !p || (c->act_q8 && !q8))
        goto done;

    /* margins go to tie_margin[t] for position t, else nowhere */
    double no_margin = 0.5;
#define MG(t) (tie_margin ? &tie_margin[t] : &no_margin)
    for (int t = 0; t < n; t++)
        *MG(t) = 0.5;
    for (int t = 0; t < n; t++)
        for (int i = 0; i < dim; i++)
            x[(size_t)t * dim + i] = (double)w->tok_embd[(size_t)tokens[t] * dim + i] *
                                         (c->embd_scale > 0 ? c->embd_scale : 1.0) +
                                     (w->pos_embd ? (double)w->pos_embd[(size_t)t * dim + i] : 0.0);

    for (int l = 0; l < c->n_layers; l++) {
        const ref_llama_layer *L = &w->layers[l];
        const int nh = heads_of(c, l), nkv = kv_of(c, l), ffn = ffn_of(c, l);
        const int qdim = nh * hd, kvdim = nkv * hd;
        const int win = c->layer_window ? c->layer_window[l] : 0;
        const double base = win ? c->rope_base_local : c->rope_base, factor = win ? 1.0 : c->rope_factor;
        const float *freqs = win ? NULL : c->rope_freqs;

        /* q, k, v of every position: projected, biased, head-normed, rotated for that position */
        for (int t = 0; t < n && nh; t++) {
            double *qt = q + (size_t)t * qdim, *kt = k + (size_t)t * kvdim, *vt = v + (size_t)t * kvdim;
            norm(c, h, x + (size_t)t * dim, L->attn_norm, L->attn_norm_b);
            matvec(qt, L->wq, L->bq, h, qdim, dim, q8, MG(t));
            matvec(kt, L->wk, L->bk, h, kvdim, dim, q8, MG(t));
            matvec(vt, L->wv, L->bv, h, kvdim, dim, q8, MG(t));
            for (int hh = 0; hh < nh; hh++) {
                if (L->q_norm)
                    rmsnorm(qt + hh * hd, qt + hh * hd, L->q_norm, hd, c->norm_eps);
                ref_llama_rope_freqs(qt + hh * hd, c->rope_dims, c->rope_neox, t, base, factor, freqs);
            }
            for (int hh = 0; hh < nkv; hh++) {
                if (L->k_norm)
                    rmsnorm(kt + hh * hd, kt + hh * hd, L->k_norm, hd, c->norm_eps);
                ref_llama_rope_freqs(kt + hh * hd, c->rope_dims, c->rope_neox, t, base, factor, freqs);
            }
            for (int i = 0; i < kvdim && c->kv_f16; i++) {
                kt[i] = round_half(kt[i]);
                vt[i] = round_half(vt[i]);
            }
        }

        /* causal attention, q head hh reading kv head hh / (nh / nkv), then
         * the output projection into the residual */
        for (int t = 0; t < n && nh; t++) {
            for (int hh = 0; hh < nh; hh++) {
                const double *qh = q + (size_t)t * qdim + hh * hd;
                int kvh = hh / (nh / nkv);
                int j0 = win && t + 1 > win ? t + 1 - win : 0; /* the window's first position */
                double mx = -INFINITY;
                for (int j = j0; j <= t; j++) {
                    const double *kj = k + (size_t)j * kvdim + kvh * hd;
                    double s = 0;
                    for (int d = 0; d < hd; d++)
                        s += qh[d] * kj[d];
                    p[j] = s * scale;
                    if (p[j] > mx)
                        mx = p[j];
                }
                double sum = 0;
                for (int j = j0; j <= t; j++) {
                    p[j] = exp(p[j] - mx);
                    sum += p[j];
                }
                double *ah = att + hh * hd;
                for (int d = 0; d < hd; d++)
                    ah[d] = 0;
                for (int j = j0; j <= t; j++) {
                    const double *vj = v + (size_t)j * kvdim + kvh * hd;
                    for (int d = 0; d < hd; d++)
                        ah[d] += p[j] / sum * vj[d];
                }
            }
            matvec(o, L->wo, L->bo, att, dim, qdim, q8, MG(t));
            if (L->attn_post_norm)
                rmsnorm(o, o, L->attn_post_norm, dim, c->norm_eps);
            for (int i = 0; i < dim; i++)
                x[(size_t)t * dim + i] += o[i];
        }

        /* the MLP: gated SiLU, or GELU without a gate */
        for (int t = 0; t < n && ffn; t++) {
            double *xt = x + (size_t)t * dim;
            norm(c, h, xt, L->ffn_norm, L->ffn_norm_b);
            if (c->gelu) {
                matvec(g, L->w_up, L->b_up, h, ffn, dim, q8, MG(t));
                for (int i = 0; i < ffn; i++)
                    g[i] = ref_gelu(g[i]);
            } else {
                matvec(g, L->w_gate, NULL, h, ffn, dim, q8, MG(t));
                matvec(u, L->w_up, L->b_up, h, ffn, dim, q8, MG(t));
                for (int i = 0; i < ffn; i++)
                    g[i] = (c->geglu ? ref_gelu(g[i]) : silu(g[i])) * u[i];
            }
            matvec(o, L->w_down, L->b_down, g, dim, ffn, q8, MG(t));
            if (L->ffn_post_norm)
                rmsnorm(o, o, L->ffn_post_norm, dim, c->norm_eps);
            for (int i = 0; i < dim; i++)
                xt[i] += o[i];
        }
    }

    for (int t = 0; t < n; t++) {
        norm(c, h, x + (size_t)t * dim, w->out_norm, w->out_norm_b);
        double *lt = logits + (size_t)t * c->n_vocab;
        matvec(lt, w->output, NULL, h, c->n_vocab, dim, q8, MG(t));
        for (int v = 0; v < c->n_vocab && c->logit_softcap > 0; v++)
            lt[v] = c->logit_softcap * tanh(lt[v] / c->logit_softcap);
    }
#undef MG
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
