/* AWQ (see awq.h): a calibration pass with an observer on every matmul,
 * then a grid search of the scale exponent per layer group.
 *
 * Per group the observer keeps the sum of |x| per input channel over all
 * calibration tokens, and a sample of whole input rows (every k-th token,
 * at most `cap` rows) on which the search measures the output error
 *     err(alpha) = sum over sampled x, over the group's weights W of
 *                  || (Q(W diag(s)) diag(1/s) - W) x ||^2,
 *     s = a^alpha / sqrt(max(a^alpha) * min(a^alpha)),
 * Q being the round trip through the type that weight will be written
 * in. alpha = 0 (s = 1) is plain RTN and always a candidate, so the
 * chosen scales never make a group's error on the sample worse. */
#include "awq.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "model_layout.h"
#include "simd.h"

enum { G_QKV, G_O, G_GU, G_DOWN, G_KINDS };

typedef struct grp {
    int kind;
    uint32_t layer;
    const eng_weight *w[3];
    char wname[3][96];
    int nw;
    uint32_t cols;
    double *absum;   /* [cols] */
    float *rows;     /* [cap][cols] sampled inputs */
    uint32_t n_rows, cap;
    uint64_t seen;
    float *s;        /* [cols] chosen scales, NULL if none */
    float alpha;
    double err_rtn, err_best;
    float *clip[3];          /* per weight: clip ratios (rows * cols/B), or NULL */
    uint32_t clip_group[3];  /* B, the block of the type it is written in */
    double clip_before, clip_after;
} grp;

struct eng_awq {
    eng_tensor_edit *edits;
    size_t n_edits, cap_edits;
    char summary[384];
};

typedef struct calib {
    grp *g;
    size_t ng;
    uint64_t stride;
} calib;

static void observe(void *user, const eng_weight *w, const float *x, uint32_t nt, uint32_t cols)
{
    calib *c = user;
    for (size_t i = 0; i < c->ng; i++) {
        grp *g = &c->g[i];
        if (g->w[0] != w || g->cols != cols)
            continue;
        for (uint32_t t = 0; t < nt; t++) {
            const float *row = x + (size_t)t * cols;
            for (uint32_t j = 0; j < cols; j++)
                g->absum[j] += fabsf(row[j]);
            if (g->seen++ % c->stride == 0 && g->n_rows < g->cap)
                memcpy(g->rows + (size_t)g->n_rows++ * cols, row, cols * sizeof(float));
        }
        return;
    }
}

/* ---- edits ---- */

static eng_tensor_edit *edit_get(eng_awq *a, const char *name)
{
    for (size_t i = 0; i < a->n_edits; i++)
        if (!strcmp(a->edits[i].name, name))
            return &a->edits[i];
    if (a->n_edits == a->cap_edits) {
        size_t nc = a->cap_edits ? 2 * a->cap_edits : 32;
        eng_tensor_edit *ne = realloc(a->edits, nc * sizeof *ne);
        if (!ne)
            return NULL;
        a->edits = ne;
        a->cap_edits = nc;
    }
    eng_tensor_edit *ed = &a->edits[a->n_edits++];
    memset(ed, 0, sizeof *ed);
    snprintf(ed->name, sizeof ed->name, "%s", name);
    return ed;
}

/* Multiply edit factors f (n of them, or 1/f if invert) into the edit's
 * columns (which = 0) or rows (1). */
static int edit_mul(eng_awq *a, const char *name, int which, const float *f, uint32_t n, int invert)
{
    eng_tensor_edit *ed = edit_get(a, name);
    if (!ed)
        return ENG_ENOMEM;
    float **v = which ? &ed->row : &ed->col;
    if (!*v) {
        *v = malloc(n * sizeof(float));
        if (!*v)
            return ENG_ENOMEM;
        for (uint32_t i = 0; i < n; i++)
            (*v)[i] = 1.0f;
    }
    for (uint32_t i = 0; i < n; i++)
        (*v)[i] *= invert ? 1.0f / f[i] : f[i];
    return 0;
}

/* ---- search ---- */

/* Squared output error of W (rows x cols) quantized after scaling its
 * columns by s, over the group's sampled rows. Scratch: e [rows*cols],
 * t [cols], q [row bytes]. */
static double group_err(const grp *g, const float *W, uint32_t rows, int type, int fake, const float *s, float *e,
                        float *t, void *q)
{
    uint32_t cols = g->cols;
    const simd_traits *tr = simd_type_traits(type);
    for (uint32_t r = 0; r < rows; r++) {
        const float *w = W + (size_t)r * cols;
        for (uint32_t c = 0; c < cols; c++)
            t[c] = w[c] * s[c];
        if (fake)
            eng_fake_quant_row(t, t, cols, fake, 32);
        else {
            tr->quant(t, q, cols);
            tr->dequant(q, t, cols);
        }
        float *er = e + (size_t)r * cols;
        for (uint32_t c = 0; c < cols; c++)
            er[c] = t[c] / s[c] - w[c];
    }
    double err = 0;
    for (uint32_t i = 0; i < g->n_rows; i++) {
        const float *x = g->rows + (size_t)i * cols;
        for (uint32_t r = 0; r < rows; r++) {
            const float *er = e + (size_t)r * cols;
            double d = 0;
            for (uint32_t c = 0; c < cols; c++)
                d += (double)er[c] * x[c];
            err += d * d;
        }
    }
    return err;
}

typedef struct wq {
    float *W;
    uint32_t rows;
    int type, fake, idx;
} wq;

/* The clip search on one matrix W (rows x cols, already scaled by s):
 * per row and block of B columns, the ratio r of the block's largest
 * magnitude that minimises e^T G e, e the block's error after clipping to
 * r and rounding through the type, G the block's Gram matrix of the
 * sampled inputs (sum over rows x of x x^T, x the sampled input divided by
 * s: what the scaled weight meets). Ratios into clip (rows * cols/B).
 * Returns the error summed over blocks before and after, in *before and
 * *after; 0 or ENG_ENOMEM. */
static int clip_search(const grp *g, const float *W, uint32_t rows, int type, const float *s, float *clip,
                       double *before, double *after)
{
    uint32_t cols = g->cols, B = simd_type_traits(type)->block, nb = cols / B;
    const simd_traits *tr = simd_type_traits(type);
    double *G = malloc((size_t)nb * B * B * sizeof *G);
    float *t = malloc(B * sizeof *t), *d = malloc(B * sizeof *d);
    double *e = malloc(B * sizeof *e);
    void *q = malloc(tr->bytes * (B / tr->block) + 16);
    if (!G || !t || !d || !e || !q) {
        free(G); free(t); free(d); free(e); free(q);
        return ENG_ENOMEM;
    }
    memset(G, 0, (size_t)nb * B * B * sizeof *G);
    for (uint32_t i = 0; i < g->n_rows; i++) {
        const float *x = g->rows + (size_t)i * cols;
        for (uint32_t b = 0; b < nb; b++) {
            double *Gb = G + (size_t)b * B * B;
            for (uint32_t u = 0; u < B; u++) {
                double xu = x[b * B + u] / s[b * B + u];
                for (uint32_t v = 0; v < B; v++)
                    Gb[u * B + v] += xu * (x[b * B + v] / s[b * B + v]);
            }
        }
    }
    *before = *after = 0;
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t b = 0; b < nb; b++) {
            const float *w = W + (size_t)r * cols + (size_t)b * B;
            const double *Gb = G + (size_t)b * B * B;
            float amax = 0;
            for (uint32_t u = 0; u < B; u++)
                amax = fmaxf(amax, fabsf(w[u] * s[b * B + u]));
            double best = INFINITY;
            float best_ratio = 1;
            for (int k = 0; k <= 10; k++) {
                float ratio = 1.0f - 0.05f * (float)k, lim = amax * ratio;
                for (uint32_t u = 0; u < B; u++)
                    t[u] = fminf(lim, fmaxf(-lim, w[u] * s[b * B + u]));
                tr->quant(t, q, B);
                tr->dequant(q, d, B);
                for (uint32_t u = 0; u < B; u++)
                    e[u] = (double)d[u] - (double)w[u] * s[b * B + u];
                double err = 0;
                for (uint32_t u = 0; u < B; u++) {
                    double acc = 0;
                    for (uint32_t v = 0; v < B; v++)
                        acc += Gb[u * B + v] * e[v];
                    err += e[u] * acc;
                }
                if (k == 0)
                    *before += err;
                if (err < best) {
                    best = err;
                    best_ratio = ratio;
                }
            }
            *after += best;
            clip[(size_t)r * nb + b] = best_ratio;
        }
    free(G); free(t); free(d); free(e); free(q);
    return 0;
}

static int search_group(grp *g, const eng_model *m, const eng_qtarget *tg, int grid, int clip)
{
    uint32_t cols = g->cols;
    const eng_model_info *in = eng_model_get_info(m);
    wq ws[3];
    int nq = 0, rc = 0;
    uint32_t max_rows = 0;
    int has_output = eng_gguf_tensor_find(eng_model_gguf(m), "output.weight") != NULL;
    memset(ws, 0, sizeof ws);
    for (int i = 0; i < g->nw; i++) {
        const eng_weight *w = g->w[i];
        uint64_t ne[2] = {w->cols, w->rows};
        int planned, fb;
        int type = eng_quant_plan(tg, g->wname[i], 2, ne, w->type, in->n_layers, has_output, &planned, &fb);
        if (!tg->fake_bits && (type == SIMD_F32 || type == SIMD_F16 || type == SIMD_BF16))
            continue; /* no rounding worth scaling against */
        float *W = malloc((size_t)w->rows * cols * sizeof *W);
        if (!W) {
            rc = ENG_ENOMEM;
            goto done;
        }
        const simd_traits *st = simd_type_traits(w->type);
        for (uint32_t r = 0; r < w->rows; r++)
            st->dequant((const char *)w->data + (size_t)r * w->row_bytes, W + (size_t)r * cols, cols);
        ws[nq++] = (wq){W, w->rows, type, tg->fake_bits, i};
        if (w->rows > max_rows)
            max_rows = w->rows;
    }
    if (nq == 0 || g->n_rows == 0 || g->seen == 0)
        goto done;
    float *a = malloc(cols * sizeof *a), *s = malloc(cols * sizeof *s), *best = malloc(cols * sizeof *best);
    float *e = malloc((size_t)max_rows * cols * sizeof *e), *t = malloc(cols * sizeof *t);
    void *q = malloc(cols * 4 + 64);
    if (!a || !s || !best || !e || !t || !q) {
        free(a); free(s); free(best); free(e); free(t); free(q);
        rc = ENG_ENOMEM;
        goto done;
    }
    double amax = 0;
    for (uint32_t c = 0; c < cols; c++) {
        a[c] = (float)(g->absum[c] / (double)g->seen);
        if (a[c] > amax)
            amax = a[c];
    }
    if (g->kind == G_O) {
        /* channel (head h, dim d) of the output projection's input comes
         * from v row (h / group, d): heads sharing a kv head share s */
        const eng_layer *L = eng_model_layer(m, g->layer);
        uint32_t hd = in->head_dim, grp_sz = L->n_heads / L->n_kv_heads;
        for (uint32_t kv = 0; kv < L->n_kv_heads; kv++)
            for (uint32_t d = 0; d < hd; d++) {
                double sum = 0;
                for (uint32_t h = kv * grp_sz; h < (kv + 1) * grp_sz; h++)
                    sum += a[h * hd + d];
                for (uint32_t h = kv * grp_sz; h < (kv + 1) * grp_sz; h++)
                    a[h * hd + d] = (float)(sum / grp_sz);
            }
    }
    for (uint32_t c = 0; c < cols; c++)
        if (!(a[c] > amax * 1e-6))
            a[c] = (float)(amax * 1e-6 + 1e-30);
    double best_err = INFINITY, rtn = 0;
    float best_alpha = 0;
    for (int k = 0; k <= grid; k++) {
        float alpha = (float)k / (float)grid;
        float smax = 0, smin = INFINITY;
        for (uint32_t c = 0; c < cols; c++) {
            s[c] = powf(a[c], alpha);
            if (s[c] > smax) smax = s[c];
            if (s[c] < smin) smin = s[c];
        }
        float norm = 1.0f / sqrtf(smax * smin);
        for (uint32_t c = 0; c < cols; c++)
            s[c] = k ? s[c] * norm : 1.0f;
        double err = 0;
        for (int i = 0; i < nq; i++)
            err += group_err(g, ws[i].W, ws[i].rows, ws[i].type, ws[i].fake, s, e, t, q);
        if (k == 0)
            rtn = err;
        if (err < best_err) {
            best_err = err;
            best_alpha = alpha;
            memcpy(best, s, cols * sizeof *s);
        }
    }
    g->alpha = best_alpha;
    g->err_rtn = rtn;
    g->err_best = best_err;
    for (int i = 0; clip && i < nq && !rc; i++) {
        if (ws[i].fake)
            continue; /* the uniform baseline keeps its min..max groups */
        uint32_t B = simd_type_traits(ws[i].type)->block;
        float *cr = malloc((size_t)ws[i].rows * (cols / B) * sizeof *cr);
        double before, after;
        if (!cr || clip_search(g, ws[i].W, ws[i].rows, ws[i].type, best, cr, &before, &after)) {
            free(cr);
            rc = ENG_ENOMEM;
            break;
        }
        g->clip[ws[i].idx] = cr;
        g->clip_group[ws[i].idx] = B;
        g->clip_before += before;
        g->clip_after += after;
    }
    if (best_alpha > 0) {
        g->s = best;
        best = NULL;
    }
    free(a); free(s); free(best); free(e); free(t); free(q);
done:
    for (int i = 0; i < 3; i++)
        free(ws[i].W);
    return rc;
}

/* ---- the whole run ---- */

static int add_group(calib *c, size_t *capg, int kind, uint32_t l, int nw, const eng_weight *w0, const char *n0,
                     const eng_weight *w1, const char *n1, const eng_weight *w2, const char *n2, uint32_t cap)
{
    if (c->ng == *capg) {
        size_t nc = *capg ? 2 * *capg : 16;
        grp *ng = realloc(c->g, nc * sizeof *ng);
        if (!ng)
            return ENG_ENOMEM;
        c->g = ng;
        *capg = nc;
    }
    grp *g = &c->g[c->ng];
    memset(g, 0, sizeof *g);
    g->kind = kind;
    g->layer = l;
    g->nw = nw;
    const eng_weight *ws[3] = {w0, w1, w2};
    const char *ns[3] = {n0, n1, n2};
    for (int i = 0; i < nw; i++) {
        g->w[i] = ws[i];
        snprintf(g->wname[i], sizeof g->wname[i], "blk.%u.%s", l, ns[i]);
    }
    g->cols = w0->cols;
    g->cap = cap;
    g->absum = calloc(g->cols, sizeof *g->absum);
    g->rows = malloc((size_t)cap * g->cols * sizeof *g->rows);
    c->ng++;
    return g->absum && g->rows ? 0 : ENG_ENOMEM;
}

static int has_tensor(const eng_model *m, uint32_t l, const char *what)
{
    char n[96];
    snprintf(n, sizeof n, "blk.%u.%s", l, what);
    return eng_gguf_tensor_find(eng_model_gguf(m), n) != NULL;
}

/* Hand a group's clip ratios to its weights' edits (the edits own them). */
static int fold_clip(eng_awq *a, grp *g)
{
    for (int i = 0; i < g->nw; i++) {
        if (!g->clip[i])
            continue;
        eng_tensor_edit *ed = edit_get(a, g->wname[i]);
        if (!ed)
            return ENG_ENOMEM;
        free(ed->clip);
        ed->clip = g->clip[i];
        ed->clip_group = g->clip_group[i];
        g->clip[i] = NULL;
    }
    return 0;
}

/* Fold a group's scales into the model as edits. */
static int fold(eng_awq *a, const eng_model *m, const grp *g)
{
    char n[96];
    uint32_t l = g->layer;
    int r = 0;
    for (int i = 0; i < g->nw && !r; i++)
        r = edit_mul(a, g->wname[i], 0, g->s, g->cols, 0);
    if (r)
        return r;
#define NAME(s) (snprintf(n, sizeof n, "blk.%u." s, l), n)
    switch (g->kind) {
    case G_QKV:
        return edit_mul(a, NAME("attn_norm.weight"), 0, g->s, g->cols, 1);
    case G_GU:
        return edit_mul(a, NAME("ffn_norm.weight"), 0, g->s, g->cols, 1);
    case G_O: {
        /* v row (kv, d) takes 1/s of any head of its group */
        const eng_layer *L = eng_model_layer(m, l);
        uint32_t hd = eng_model_get_info(m)->head_dim, grp_sz = L->n_heads / L->n_kv_heads, nkv = L->n_kv_heads * hd;
        float *sv = malloc(nkv * sizeof *sv);
        if (!sv)
            return ENG_ENOMEM;
        for (uint32_t kv = 0; kv < L->n_kv_heads; kv++)
            for (uint32_t d = 0; d < hd; d++)
                sv[kv * hd + d] = g->s[kv * grp_sz * hd + d];
        r = edit_mul(a, NAME("attn_v.weight"), 1, sv, nkv, 1);
        if (!r && has_tensor(m, l, "attn_v.bias"))
            r = edit_mul(a, NAME("attn_v.bias"), 0, sv, nkv, 1);
        free(sv);
        return r;
    }
    case G_DOWN:
        r = edit_mul(a, NAME("ffn_up.weight"), 1, g->s, g->cols, 1);
        if (!r && has_tensor(m, l, "ffn_up.bias"))
            r = edit_mul(a, NAME("ffn_up.bias"), 0, g->s, g->cols, 1);
        return r;
    }
#undef NAME
    return 0;
}

/* One group per scaled input of every layer: q/k/v, o, gate/up, down.
 * Sample rows: at most 512 per group, fewer for wide groups (about
 * 256 MB in all); *cap gets the count. */
static int make_groups(const eng_model *m, calib *c, uint32_t n_tok, uint32_t *cap_out)
{
    const eng_model_info *in = eng_model_get_info(m);
    uint64_t sum_cols = 0;
    for (uint32_t l = 0; l < in->n_layers; l++)
        sum_cols += (uint64_t)2 * in->dim + eng_model_layer(m, l)->n_heads * in->head_dim + eng_model_layer(m, l)->ffn;
    uint64_t cap64 = ((uint64_t)1 << 26) / (sum_cols ? sum_cols : 1);
    uint32_t cap = cap64 > 512 ? 512 : cap64 < 32 ? 32 : (uint32_t)cap64;
    size_t capg = 0;
    int r = 0;
    *cap_out = cap;
    c->stride = n_tok / cap > 1 ? n_tok / cap : 1;
    for (uint32_t l = 0; l < in->n_layers && !r; l++) {
        const eng_layer *L = eng_model_layer(m, l);
        if (L->n_heads && has_tensor(m, l, "attn_q.weight")) {
            r = add_group(c, &capg, G_QKV, l, 3, &L->wq, "attn_q.weight", &L->wk, "attn_k.weight", &L->wv,
                          "attn_v.weight", cap);
            if (!r)
                r = add_group(c, &capg, G_O, l, 1, &L->wo, "attn_output.weight", NULL, NULL, NULL, NULL, cap);
        }
        if (!r && L->ffn && has_tensor(m, l, "ffn_gate.weight")) {
            r = add_group(c, &capg, G_GU, l, 2, &L->w_gate, "ffn_gate.weight", &L->w_up, "ffn_up.weight", NULL, NULL,
                          cap);
            if (!r)
                r = add_group(c, &capg, G_DOWN, l, 1, &L->w_down, "ffn_down.weight", NULL, NULL, NULL, NULL, cap);
        }
    }
    return r;
}

/* Search every group, fold the chosen scales into a's edits, and write
 * the summary. */
static int search_all(eng_awq *a, const eng_model *m, const eng_awq_opts *o, calib *c, uint32_t n_tok, uint32_t cap,
                      eng_err *e)
{
    int grid = o->grid > 0 ? o->grid : 20, r;
    double sum_alpha = 0, err_rtn = 0, err_awq = 0, clip_before = 0, clip_after = 0;
    int searched = 0;
    for (size_t i = 0; i < c->ng; i++) {
        grp *g = &c->g[i];
        if ((r = search_group(g, m, o->target, grid, o->clip)))
            return eng_errf(e, r, "AWQ: out of memory in the search");
        if (g->err_rtn > 0) {
            searched++;
            sum_alpha += g->alpha;
            err_rtn += g->err_rtn / (g->err_rtn + 1e-30);
            err_awq += g->err_best / (g->err_rtn + 1e-30);
        }
        if ((g->s && (r = fold(a, m, g))) || (r = fold_clip(a, g)))
            return eng_errf(e, r, "out of memory");
        clip_before += g->clip_before;
        clip_after += g->clip_after;
        if (o->progress)
            o->progress(o->user, 0.3 + 0.7 * (double)(i + 1) / (double)c->ng, g->wname[0]);
    }
    snprintf(a->summary, sizeof a->summary,
             "%d of %zu layer groups searched on %u tokens (%u rows each), mean alpha %.2f, "
             "layer output error %.1f%% of RTN's",
             searched, c->ng, n_tok, cap < n_tok ? cap : n_tok, searched ? sum_alpha / searched : 0.0,
             searched ? 100 * err_awq / err_rtn : 100.0);
    if (o->clip && clip_before > 0) {
        size_t used = strlen(a->summary);
        snprintf(a->summary + used, sizeof a->summary - used, "; clipping: block output error %.1f%% of unclipped",
                 100 * clip_after / clip_before);
    }
    return 0;
}

int eng_awq_compute(const char *model_path, const eng_awq_opts *o, eng_awq **out, eng_err *e)
{
    *out = NULL;
    eng_model *m = NULL;
    calib c = {0};
    int32_t *ids = NULL;
    uint32_t n_tok = 0, cap = 0;
    eng_awq *a = calloc(1, sizeof *a);
    int r = a ? 0 : eng_errf(e, ENG_ENOMEM, "out of memory");
    if (r || (r = eng_model_open(model_path, &m, e)))
        goto done;
    const eng_model_info *in = eng_model_get_info(m);
    if (eng_model_norm(m) != ENG_NORM_RMS || eng_model_ffn(m) != ENG_FFN_SWIGLU) {
        r = eng_errf(e, ENG_EUNSUP, "AWQ: %s has %s; the scales fold only into RMSNorm + SwiGLU models", model_path,
                     eng_model_norm(m) != ENG_NORM_RMS ? "LayerNorm" : "a GELU FFN");
        goto done;
    }
    uint32_t n_ctx = o->n_ctx ? o->n_ctx : 256, max_tok = o->max_tokens ? o->max_tokens : 4096;
    if (n_ctx > in->ctx_train)
        n_ctx = in->ctx_train;
    if ((r = tools_calib_tokens(m, o->calib_text ? NULL : o->calib_path, o->calib_text, o->calib_len, 16, max_tok,
                                "AWQ", &ids, &n_tok, e)))
        goto done;
    if ((r = make_groups(m, &c, n_tok, &cap))) {
        r = eng_errf(e, ENG_ENOMEM, "out of memory for the calibration statistics");
        goto done;
    }
    if (!(r = tools_calib_run(m, ids, n_tok, n_ctx, o->threads, observe, &c, o->progress, o->user, 0, 0.3, e)))
        r = search_all(a, m, o, &c, n_tok, cap, e);
done:
    for (size_t i = 0; i < c.ng; i++) {
        free(c.g[i].absum);
        free(c.g[i].rows);
        free(c.g[i].s);
        for (int k = 0; k < 3; k++)
            free(c.g[i].clip[k]);
    }
    free(c.g);
    free(ids);
    eng_model_close(m);
    if (r) {
        eng_awq_free(a);
        return r;
    }
    *out = a;
    return 0;
}

const eng_tensor_edit *eng_awq_edits(const eng_awq *a, size_t *n)
{
    *n = a ? a->n_edits : 0;
    return a ? a->edits : NULL;
}

const char *eng_awq_summary(const eng_awq *a) { return a ? a->summary : ""; }

void eng_awq_free(eng_awq *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n_edits; i++) {
        free(a->edits[i].col);
        free(a->edits[i].row);
        free(a->edits[i].clip);
    }
    free(a->edits);
    free(a);
}
