/* Structured pruning (see prune.h): score, choose, cut, write.
 *
 * The model is opened through the engine (no packing) so the scores see
 * the weights as the forward pass does and the calibration runs through
 * the same code as a chat; the output is built from the GGUF's tensors,
 * cut by name, with every other tensor and key copied as it is. */
#include "prune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "files.h"
#include "gguf.h"
#include "model.h"
#include "model_layout.h"
#include "simd.h"

/* ---- PageRank ---- */

int eng_pagerank(uint32_t n, const uint32_t *src, const uint32_t *dst, const double *w, size_t n_edges,
                 double damping, double tol, int max_iter, double *rank)
{
    if (n == 0 || !(damping >= 0 && damping < 1) || max_iter < 1)
        return ENG_EINVAL;
    for (size_t i = 0; i < n_edges; i++)
        if (src[i] >= n || dst[i] >= n || (w && !(w[i] >= 0 && isfinite(w[i]))))
            return ENG_EINVAL;
    double *out = calloc(n, sizeof *out), *next = malloc(n * sizeof *next);
    if (!out || !next) {
        free(out);
        free(next);
        return ENG_ENOMEM;
    }
    for (size_t i = 0; i < n_edges; i++)
        out[src[i]] += w ? w[i] : 1.0;
    for (uint32_t i = 0; i < n; i++)
        rank[i] = 1.0 / n;
    int it = 0;
    while (it < max_iter) {
        it++;
        double dangling = 0;
        for (uint32_t i = 0; i < n; i++)
            if (!(out[i] > 0))
                dangling += rank[i];
        double base = (1 - damping) / n + damping * dangling / n;
        for (uint32_t i = 0; i < n; i++)
            next[i] = base;
        for (size_t i = 0; i < n_edges; i++)
            if (out[src[i]] > 0)
                next[dst[i]] += damping * rank[src[i]] * (w ? w[i] : 1.0) / out[src[i]];
        double diff = 0;
        for (uint32_t i = 0; i < n; i++) {
            diff += fabs(next[i] - rank[i]);
            rank[i] = next[i];
        }
        if (diff < tol)
            break;
    }
    free(out);
    free(next);
    return it;
}

/* ---- scores ---- */

typedef struct pruner {
    const eng_prune_opts *o;
    eng_model *m;
    const eng_gguf *g;
    uint32_t nl, hd;
    uint32_t *heads, *kv, *ffn;   /* per layer, as loaded */
    size_t *goff, *noff;          /* first group / neuron of layer l in the flat arrays */
    size_t n_groups, n_neurons;
    double *hsum;                 /* per query head (flat, hoff): sum over tokens of mean |output| */
    size_t *hoff;
    double *nsum;                 /* per neuron (flat, noff): sum over tokens of |activation| */
    uint32_t n_calib;             /* calibration tokens seen */
    int hm, nm;                   /* rows of methods[] chosen for heads, neurons */
    double *gscore, *nscore;      /* per group, per neuron */
    uint8_t *gkeep, *nkeep;
    uint8_t *gprot;
} pruner;

static const struct {
    const char *name;
    int kind, method;
    int calib;                    /* needs calibration text */
    const char *score;            /* what nibble.prune.*_score records */
} methods[] = {
    {"vnorm", ENG_PRUNE_KIND_HEADS, ENG_PRUNE_HEADS_VNORM, 1,
     "mean |attention output| x ||W_o columns||, per KV group, on calibration text"},
    {"weight", ENG_PRUNE_KIND_HEADS, ENG_PRUNE_HEADS_WEIGHT, 0,
     "||W_v rows|| x ||W_o columns||, per KV group, from the weights"},
    {"wprod", ENG_PRUNE_KIND_NEURONS, ENG_PRUNE_NEURONS_WPROD, 0, "||gate row|| x ||up row|| x ||down column||, per layer"},
    {"act", ENG_PRUNE_KIND_NEURONS, ENG_PRUNE_NEURONS_ACT, 1,
     "mean |activation| (the down projection's input), per layer, on calibration text"},
};

static int method_row(int kind, int method)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (methods[i].kind == kind && methods[i].method == method)
            return (int)i;
    return -1;
}

int eng_prune_method_find(const char *name, int *kind, int *method)
{
    for (size_t i = 0; name && i < sizeof methods / sizeof methods[0]; i++)
        if (!strcmp(name, methods[i].name)) {
            *kind = methods[i].kind;
            *method = methods[i].method;
            return 0;
        }
    return ENG_EINVAL;
}

const char *eng_prune_method_name(int kind, int method)
{
    int i = method_row(kind, method);
    return i < 0 ? NULL : methods[i].name;
}

static void progress(const pruner *p, double f, const char *what)
{
    if (p->o->progress)
        p->o->progress(p->o->user, f, what);
}

/* Row r of a weight as floats (cols of them). */
static void weight_row(const eng_weight *w, uint32_t r, float *out)
{
    simd_type_traits(w->type)->dequant((const char *)w->data + (size_t)r * w->row_bytes, out, w->cols);
}

/* The matmul observer: the output projection's input is the attention
 * output, head after head; the down projection's input is the FFN's
 * activation, neuron after neuron. */
static void observe(void *user, const eng_weight *w, const float *x, uint32_t nt, uint32_t cols)
{
    pruner *p = user;
    for (uint32_t l = 0; l < p->nl; l++) {
        const eng_layer *L = eng_model_layer(p->m, l);
        if (w == &L->wo) {
            for (uint32_t t = 0; t < nt; t++)
                for (uint32_t h = 0; h < p->heads[l] && (h + 1) * p->hd <= cols; h++) {
                    double s = 0;
                    const float *v = x + (size_t)t * cols + (size_t)h * p->hd;
                    for (uint32_t i = 0; i < p->hd; i++)
                        s += fabsf(v[i]);
                    p->hsum[p->hoff[l] + h] += s / p->hd;
                }
            return;
        }
        if (w == &L->w_down) {
            double *a = p->nsum + p->noff[l];
            for (uint32_t t = 0; t < nt; t++)
                for (uint32_t i = 0; i < p->ffn[l] && i < cols; i++)
                    a[i] += fabsf(x[(size_t)t * cols + i]);
            return;
        }
    }
}

/* The calibration pass, when a chosen method needs it: hsum and nsum
 * gathered over the calibration tokens. */
static int calibrate(pruner *p, eng_err *e)
{
    const eng_prune_opts *o = p->o;
    int32_t *ids = NULL;
    uint32_t n_tok = 0;
    uint32_t max_tok = o->calib_tokens ? o->calib_tokens : 2048, n_ctx = o->n_ctx ? o->n_ctx : 128;
    if (!o->calib_text && !o->calib_path)
        return eng_errf(e, ENG_EINVAL, "the '%s' score needs calibration text (--calib TEXT)",
                        methods[o->heads > 0 && methods[p->hm].calib ? p->hm : p->nm].name);
    int r = tools_calib_tokens(p->m, o->calib_text ? NULL : o->calib_path, o->calib_text, o->calib_len, 8, max_tok,
                               "pruning", &ids, &n_tok, e);
    if (!r)
        r = tools_calib_run(p->m, ids, n_tok, n_ctx, o->threads, observe, p, o->progress, o->user, 0, 0.6, e);
    free(ids);
    p->n_calib = n_tok;
    return r;
}

/* Squared norms of the output projection's columns, summed per query
 * head: cn[h] for the heads[l] heads of layer l. */
static int wo_head_norms(const pruner *p, uint32_t l, double *cn)
{
    const eng_layer *L = eng_model_layer(p->m, l);
    uint32_t nq = p->heads[l] * p->hd;
    float *row = malloc(nq * sizeof *row);
    if (!row)
        return ENG_ENOMEM;
    for (uint32_t h = 0; h < p->heads[l]; h++)
        cn[h] = 0;
    for (uint32_t rr = 0; rr < L->wo.rows; rr++) {
        weight_row(&L->wo, rr, row);
        for (uint32_t i = 0; i < nq; i++)
            cn[i / p->hd] += (double)row[i] * row[i];
    }
    free(row);
    return 0;
}

/* Squared norms of the value projection's rows, summed per KV head:
 * vn[g] for the kv[l] groups of layer l. */
static int wv_group_norms(const pruner *p, uint32_t l, double *vn)
{
    const eng_layer *L = eng_model_layer(p->m, l);
    float *row = malloc(L->wv.cols * sizeof *row);
    if (!row)
        return ENG_ENOMEM;
    for (uint32_t g = 0; g < p->kv[l]; g++) {
        vn[g] = 0;
        for (uint32_t rr = g * p->hd; rr < (g + 1) * p->hd && rr < L->wv.rows; rr++) {
            weight_row(&L->wv, rr, row);
            for (uint32_t c = 0; c < L->wv.cols; c++)
                vn[g] += (double)row[c] * row[c];
        }
    }
    free(row);
    return 0;
}

/* A KV group's score, summed over its query heads h:
 *   vnorm:  mean |output of h| on the calibration text x ||W_o columns of h||
 *           (what the head adds to the residual stream);
 *   weight: ||W_v rows of the group|| x ||W_o columns of h|| (how much the
 *           group can add, from the weights alone). */
static int score_heads(pruner *p, eng_err *e)
{
    for (uint32_t l = 0; l < p->nl; l++) {
        if (!p->kv[l])
            continue;
        uint32_t per = p->heads[l] / p->kv[l];
        double *cn = calloc(p->heads[l] + p->kv[l], sizeof *cn), *vn = cn + p->heads[l];
        if (!cn || wo_head_norms(p, l, cn) ||
            (methods[p->hm].method == ENG_PRUNE_HEADS_WEIGHT && wv_group_norms(p, l, vn))) {
            free(cn);
            return eng_errf(e, ENG_ENOMEM, "out of memory");
        }
        for (uint32_t h = 0; h < p->heads[l]; h++) {
            double s = methods[p->hm].method == ENG_PRUNE_HEADS_WEIGHT ? sqrt(vn[h / per])
                                                                   : p->hsum[p->hoff[l] + h] / p->n_calib;
            p->gscore[p->goff[l] + h / per] += s * sqrt(cn[h]);
        }
        free(cn);
    }
    return 0;
}

/* A neuron's score:
 *   wprod: ||gate row|| x ||up row|| x ||down column|| (gelu: no gate);
 *   act:   mean |activation| on the calibration text. */
static int score_neurons(pruner *p, eng_err *e)
{
    if (methods[p->nm].method == ENG_PRUNE_NEURONS_ACT) {
        for (size_t i = 0; i < p->n_neurons; i++)
            p->nscore[i] = p->nsum[i] / p->n_calib;
        return 0;
    }
    for (uint32_t l = 0; l < p->nl; l++) {
        const eng_layer *L = eng_model_layer(p->m, l);
        uint32_t f = p->ffn[l], dim = L->w_down.rows;
        if (!f)
            continue;
        double *dn = calloc(f, sizeof *dn);
        float *row = malloc((f > L->w_up.cols ? f : L->w_up.cols) * sizeof *row);
        if (!dn || !row) {
            free(dn);
            free(row);
            return eng_errf(e, ENG_ENOMEM, "out of memory");
        }
        for (uint32_t r = 0; r < dim; r++) {
            weight_row(&L->w_down, r, row);
            for (uint32_t i = 0; i < f; i++)
                dn[i] += (double)row[i] * row[i];
        }
        for (uint32_t i = 0; i < f; i++) {
            double s = sqrt(dn[i]), u = 0, gt = 0;
            weight_row(&L->w_up, i, row);
            for (uint32_t c = 0; c < L->w_up.cols; c++)
                u += (double)row[c] * row[c];
            s *= sqrt(u);
            if (L->w_gate.data) {
                weight_row(&L->w_gate, i, row);
                for (uint32_t c = 0; c < L->w_gate.cols; c++)
                    gt += (double)row[c] * row[c];
                s *= sqrt(gt);
            }
            p->nscore[p->noff[l] + i] = s;
        }
        free(dn);
        free(row);
    }
    return 0;
}

/* ---- choosing ---- */

typedef struct ranked {
    double s;
    size_t i;
} ranked;

static int by_score(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->s != y->s)
        return x->s < y->s ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i); /* ties: the earlier unit first, so runs repeat */
}

static double cap_share(const eng_prune_opts *o) { return o->max_per_layer > 0 ? o->max_per_layer : 0.75; }

/* The graph guard: PageRank over embedding -> groups of layer 0 -> MLP 0
 * -> groups of layer 1 -> ... -> output, edges weighted by their
 * target's score; the best-ranked share of groups is protected. */
static int guard(pruner *p, eng_prune_report *rep, eng_err *e)
{
    uint32_t n = (uint32_t)(p->n_groups + p->nl + 2);
    size_t ne = 2 * p->n_groups + 1;
    uint32_t *src = malloc(ne * sizeof *src), *dst = malloc(ne * sizeof *dst);
    double *w = malloc(ne * sizeof *w), *rank = malloc(n * sizeof *rank);
    ranked *rk = malloc((p->n_groups + 1) * sizeof *rk);
    if (!src || !dst || !w || !rank || !rk) {
        free(src); free(dst); free(w); free(rank); free(rk);
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    }
    /* node ids: 0 the embedding, then per layer its groups and its MLP, last the output */
    size_t k = 0;
    uint32_t prev = 0, id = 1;
    for (uint32_t l = 0; l < p->nl; l++) {
        double tot = 0;
        for (uint32_t g = 0; g < p->kv[l]; g++)
            tot += p->gscore[p->goff[l] + g];
        uint32_t mlp = id + p->kv[l];
        for (uint32_t g = 0; g < p->kv[l]; g++) {
            double s = p->gscore[p->goff[l] + g];
            src[k] = prev, dst[k] = id + g, w[k++] = tot > 0 ? s : 1; /* a silent layer: equal weights */
            src[k] = id + g, dst[k] = mlp, w[k++] = 1;
        }
        prev = mlp;
        id = mlp + 1;
    }
    src[k] = prev, dst[k] = id, w[k++] = 1;
    int it = eng_pagerank(id + 1, src, dst, w, k, 0.85, 1e-12, 1000, rank);
    if (it < 0) {
        free(src); free(dst); free(w); free(rank); free(rk);
        return eng_errf(e, it, "PageRank failed");
    }
    id = 1;
    for (uint32_t l = 0; l < p->nl; l++) {
        for (uint32_t g = 0; g < p->kv[l]; g++)
            rk[p->goff[l] + g] = (ranked){-rank[id + g], p->goff[l] + g};
        id += p->kv[l] + 1;
    }
    qsort(rk, p->n_groups, sizeof *rk, by_score);
    double share = p->o->protect_share > 0 ? p->o->protect_share : 0.1;
    size_t np = (size_t)ceil(share * (double)p->n_groups - 1e-6); /* 0.1f given as a float: still 2 of 20 */
    for (size_t i = 0; i < np && i < p->n_groups; i++)
        p->gprot[rk[i].i] = 1;
    rep->n_protected = (uint32_t)(np < p->n_groups ? np : p->n_groups);
    free(src); free(dst); free(w); free(rank); free(rk);
    return 0;
}

static int choose_groups(pruner *p, eng_prune_report *rep, eng_err *e)
{
    const eng_prune_opts *o = p->o;
    size_t target = (size_t)llround(o->heads * (double)p->n_groups);
    if (!target)
        return 0;
    int r;
    if (o->protect == ENG_PRUNE_PROTECT_PAGERANK && (r = guard(p, rep, e)))
        return r;
    ranked *rk = malloc(p->n_groups * sizeof *rk);
    uint32_t *gone = calloc(p->nl, sizeof *gone);
    if (!rk || !gone) {
        free(rk);
        free(gone);
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < p->n_groups; i++)
        rk[i] = (ranked){p->gscore[i], i};
    qsort(rk, p->n_groups, sizeof *rk, by_score);
    size_t removed = 0;
    for (size_t i = 0; i < p->n_groups && removed < target; i++) {
        size_t gi = rk[i].i;
        uint32_t l = 0;
        while (l + 1 < p->nl && p->goff[l + 1] <= gi)
            l++;
        uint32_t cap = (uint32_t)floor(cap_share(o) * p->kv[l] + 1e-9);
        if (cap >= p->kv[l])
            cap = p->kv[l] - 1;
        if (p->gprot[gi] || gone[l] >= cap)
            continue;
        p->gkeep[gi] = 0;
        gone[l]++;
        removed++;
    }
    rep->groups_short = (uint32_t)(target - removed);
    free(rk);
    free(gone);
    return 0;
}

static int choose_neurons(pruner *p, eng_err *e)
{
    const eng_prune_opts *o = p->o;
    for (uint32_t l = 0; l < p->nl; l++) {
        uint32_t f = p->ffn[l];
        uint64_t want = (uint64_t)llround(o->neurons * f), cap = (uint64_t)floor(cap_share(o) * f + 1e-9);
        if (want > cap)
            want = cap;
        if (f && want >= f)
            want = f - 1;
        uint64_t keep = f - want;
        if (f % 32 == 0 && keep % 32) /* quantized types then still fit their blocks */
            keep += 32 - keep % 32;
        if (!want || keep >= f)
            continue;
        ranked *rk = malloc(f * sizeof *rk);
        if (!rk)
            return eng_errf(e, ENG_ENOMEM, "out of memory");
        for (uint32_t i = 0; i < f; i++)
            rk[i] = (ranked){p->nscore[p->noff[l] + i], i};
        qsort(rk, f, sizeof *rk, by_score);
        for (uint64_t i = 0; i < f - keep; i++)
            p->nkeep[p->noff[l] + rk[i].i] = 0;
        free(rk);
    }
    return 0;
}

/* ---- cutting ---- */

static int float_type(int t) { return t == SIMD_F32 || t == SIMD_F16 || t == SIMD_BF16; }

/* A copy of t with only the kept units of its rows (cols = 0) or its
 * columns (cols = 1; a vector's elements count as columns); a unit is
 * `unit` rows or columns, keep[] one flag per unit. */
static void *cut(const eng_gguf_tensor *t, int cols, const uint8_t *keep, uint32_t n_units, uint32_t unit,
                 uint64_t *ne, int *rc, eng_err *e)
{
    uint64_t rows = t->n_dims >= 2 ? t->ne[1] : 1, along = cols ? t->ne[0] : rows;
    if (along != (uint64_t)n_units * unit || t->n_dims > 2) {
        *rc = eng_errf(e, ENG_EFORMAT, "tensor '%s': %llu %s, expected %u x %u", t->name, (unsigned long long)along,
                 cols ? "columns" : "rows", n_units, unit);
        return NULL;
    }
    if (cols && !float_type(t->type)) {
        *rc = eng_errf(e, ENG_EUNSUP,
                 "tensor '%s' is %s: pruning cuts its columns, which needs float weights (f32, f16, bf16); "
                 "prune the float model and quantize after (--then TYPE)",
                 t->name, simd_type_name(t->type));
        return NULL;
    }
    uint32_t kept = 0;
    for (uint32_t u = 0; u < n_units; u++)
        kept += keep[u] != 0;
    size_t rb = simd_row_bytes(t->type, t->ne[0]);
    size_t es = cols ? simd_row_bytes(t->type, 1) : 0;
    uint64_t new_rows = cols ? rows : (uint64_t)kept * unit, new_cols = cols ? (uint64_t)kept * unit : t->ne[0];
    size_t nrb = cols ? es * new_cols : rb;
    char *out = malloc(nrb * new_rows + 1), *o = out;
    if (!out) {
        *rc = eng_errf(e, ENG_ENOMEM, "tensor '%s': out of memory", t->name);
        return NULL;
    }
    const char *in = t->data;
    if (cols) {
        for (uint64_t r = 0; r < rows; r++)
            for (uint32_t u = 0; u < n_units; u++)
                if (keep[u]) {
                    memcpy(o, in + r * rb + (size_t)u * unit * es, (size_t)unit * es);
                    o += (size_t)unit * es;
                }
    } else {
        for (uint32_t u = 0; u < n_units; u++)
            if (keep[u]) {
                memcpy(o, in + (size_t)u * unit * rb, (size_t)unit * rb);
                o += (size_t)unit * rb;
            }
    }
    ne[0] = new_cols;
    ne[1] = new_rows;
    return out;
}

/* What layer l's tensor `suffix` needs cut: 0 nothing, else which way. */
enum cut_kind { CUT_NONE, CUT_QROWS, CUT_KVROWS, CUT_QCOLS, CUT_NROWS, CUT_NCOLS };

static enum cut_kind cut_of(const char *suffix)
{
    static const struct {
        const char *s;
        enum cut_kind k;
    } t[] = {
        {"attn_q.weight", CUT_QROWS},  {"attn_q.bias", CUT_QCOLS},   {"attn_k.weight", CUT_KVROWS},
        {"attn_k.bias", CUT_KVROWS},   {"attn_v.weight", CUT_KVROWS}, {"attn_v.bias", CUT_KVROWS},
        {"attn_output.weight", CUT_QCOLS}, {"ffn_gate.weight", CUT_NROWS}, {"ffn_up.weight", CUT_NROWS},
        {"ffn_gate.bias", CUT_NCOLS}, {"ffn_up.bias", CUT_NCOLS},   {"ffn_down.weight", CUT_NCOLS},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(suffix, t[i].s))
            return t[i].k;
    return CUT_NONE;
}

/* Keys the output writes itself. */
static int own_key(const char *k, const char *arch)
{
    static const char *const per_layer[] = {"attention.head_count", "attention.head_count_kv",
                                            "feed_forward_length", "attention.key_length",
                                            "attention.value_length"};
    if (!strcmp(k, "general.architecture") || !strncmp(k, "nibble.prune.", 13))
        return 1;
    size_t al = strlen(arch);
    if (strncmp(k, arch, al) || k[al] != '.')
        return 0;
    for (size_t i = 0; i < sizeof per_layer / sizeof per_layer[0]; i++)
        if (!strcmp(k + al + 1, per_layer[i]))
            return 1;
    return 0;
}

static int write_out(pruner *p, const char *in_path, const char *out_path, eng_prune_report *rep, eng_err *e)
{
    const eng_gguf *g = p->g;
    const char *arch = rep->arch_in, *oarch = rep->arch_out;
    uint64_t nt = eng_gguf_n_tensors(g);
    eng_gguf_writer *w = eng_gguf_writer_new();
    void **bufs = calloc(nt + 1, sizeof *bufs);
    int32_t *a_h = malloc(p->nl * sizeof *a_h), *a_kv = malloc(p->nl * sizeof *a_kv);
    int32_t *a_f = malloc(p->nl * sizeof *a_f), *s_kv = malloc(p->nl * sizeof *s_kv), *s_f = malloc(p->nl * sizeof *s_f);
    uint8_t **qkeep = calloc(p->nl, sizeof *qkeep);
    int r = 0;
    if (!w || !bufs || !a_h || !a_kv || !a_f || !s_kv || !s_f || !qkeep) {
        r = eng_errf(e, ENG_ENOMEM, "out of memory");
        goto done;
    }
    for (uint32_t l = 0; l < p->nl; l++) {
        uint32_t kg = 0, kn = 0, per = p->kv[l] ? p->heads[l] / p->kv[l] : 1;
        if (!(qkeep[l] = malloc(p->heads[l] + 1))) {
            r = eng_errf(e, ENG_ENOMEM, "out of memory");
            goto done;
        }
        for (uint32_t h = 0; h < p->heads[l]; h++)
            qkeep[l][h] = p->gkeep[p->goff[l] + h / per];
        for (uint32_t gi = 0; gi < p->kv[l]; gi++)
            kg += p->gkeep[p->goff[l] + gi];
        for (uint32_t i = 0; i < p->ffn[l]; i++)
            kn += p->nkeep[p->noff[l] + i];
        a_h[l] = (int32_t)(kg * per);
        a_kv[l] = (int32_t)kg;
        a_f[l] = (int32_t)kn;
        s_kv[l] = (int32_t)p->kv[l];
        s_f[l] = (int32_t)p->ffn[l];
        rep->groups_after += kg;
        rep->heads_after += kg * per;
        rep->ffn_after += kn;
    }
    size_t al = strlen(arch);
    char key[256];
    for (uint64_t i = 0; i < eng_gguf_n_kv(g); i++) {
        const char *k = eng_gguf_kv_key(g, i);
        if (own_key(k, arch))
            continue;
        const char *as = NULL;
        if (strcmp(arch, oarch) && !strncmp(k, arch, al) && k[al] == '.') {
            snprintf(key, sizeof key, "%s%s", oarch, k + al);
            as = key;
        }
        if ((r = eng_gguf_writer_copy_kv_as(w, g, i, as)))
            goto oom;
    }
#define K(s) (snprintf(key, sizeof key, "%s.%s", oarch, s), key)
    uint8_t prot = p->o->protect == ENG_PRUNE_PROTECT_PAGERANK;
    int hm = p->hm, nm = p->nm;
    if ((r = eng_gguf_writer_str(w, "general.architecture", oarch)) ||
        (r = eng_gguf_writer_arr(w, K("attention.head_count"), GGUF_I32, a_h, p->nl)) ||
        (r = eng_gguf_writer_arr(w, K("attention.head_count_kv"), GGUF_I32, a_kv, p->nl)) ||
        (r = eng_gguf_writer_arr(w, K("feed_forward_length"), GGUF_I32, a_f, p->nl)) ||
        (r = eng_gguf_writer_u32(w, K("attention.key_length"), p->hd)) ||
        (r = eng_gguf_writer_u32(w, K("attention.value_length"), p->hd)) ||
        (r = eng_gguf_writer_str(w, "nibble.prune.source_architecture", arch)) ||
        (r = eng_gguf_writer_f32(w, "nibble.prune.heads", (float)p->o->heads)) ||
        (r = eng_gguf_writer_f32(w, "nibble.prune.neurons", (float)p->o->neurons)) ||
        (r = eng_gguf_writer_f32(w, "nibble.prune.max_per_layer", (float)cap_share(p->o))) ||
        (r = eng_gguf_writer_str(w, "nibble.prune.head_method", methods[hm].name)) ||
        (r = eng_gguf_writer_str(w, "nibble.prune.head_score", methods[hm].score)) ||
        (r = eng_gguf_writer_str(w, "nibble.prune.neuron_method", methods[nm].name)) ||
        (r = eng_gguf_writer_str(w, "nibble.prune.neuron_score", methods[nm].score)) ||
        (r = eng_gguf_writer_str(w, "nibble.prune.protect", prot ? "pagerank" : "none")) ||
        (prot && (r = eng_gguf_writer_u32(w, "nibble.prune.protected_groups", rep->n_protected))) ||
        (p->n_calib && p->o->calib_path && (r = eng_gguf_writer_str(w, "nibble.prune.calibration", eng_path_base(p->o->calib_path)))) ||
        (p->n_calib && (r = eng_gguf_writer_u32(w, "nibble.prune.calibration_tokens", p->n_calib))) ||
        (r = eng_gguf_writer_arr(w, "nibble.prune.source_head_count_kv", GGUF_I32, s_kv, p->nl)) ||
        (r = eng_gguf_writer_arr(w, "nibble.prune.source_feed_forward_length", GGUF_I32, s_f, p->nl)) ||
        (r = eng_gguf_writer_arr(w, "nibble.prune.kv_groups_kept", GGUF_U8, p->gkeep, p->n_groups)) ||
        (r = eng_gguf_writer_arr(w, "nibble.prune.neurons_kept", GGUF_U8, p->nkeep, p->n_neurons)))
        goto oom;
#undef K
    for (uint64_t i = 0; i < nt; i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        uint64_t ne[ENG_GGUF_MAX_DIMS] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        uint64_t count_in = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        const void *data = t->data;
        char *end;
        long l = !strncmp(t->name, "blk.", 4) ? strtol(t->name + 4, &end, 10) : -1;
        enum cut_kind ck = l >= 0 && l < (long)p->nl && *end == '.' ? cut_of(end + 1) : CUT_NONE;
        if (ck != CUT_NONE) {
            uint32_t L = (uint32_t)l;
            const uint8_t *gk = p->gkeep + p->goff[L], *nk = p->nkeep + p->noff[L];
            int cols = ck == CUT_QCOLS || ck == CUT_NCOLS || t->n_dims == 1;
            switch (ck) {
            case CUT_QROWS: case CUT_QCOLS: bufs[i] = cut(t, cols, qkeep[L], p->heads[L], p->hd, ne, &r, e); break;
            case CUT_KVROWS: bufs[i] = cut(t, cols, gk, p->kv[L], p->hd, ne, &r, e); break;
            default: bufs[i] = cut(t, cols, nk, p->ffn[L], 1, ne, &r, e); break;
            }
            if (!bufs[i])
                goto done;
            if (t->n_dims == 1)
                ne[1] = 1;
            data = bufs[i];
        }
        if ((r = eng_gguf_writer_tensor(w, t->name, t->type, t->n_dims, ne, data)))
            goto oom;
        rep->params_before += count_in;
        rep->params_after += ne[0] * (t->n_dims > 1 ? ne[1] : 1) * ne[2] * ne[3];
        progress(p, 0.6 + 0.3 * (i + 1) / (double)nt, "cutting");
    }
    if ((r = eng_gguf_writer_save(w, out_path, e)))
        goto done;
    progress(p, 1.0, "written");
    (void)in_path;
    goto done;
oom:
    r = eng_errf(e, ENG_ENOMEM, "out of memory while building %s", out_path);
done:
    eng_gguf_writer_free(w);
    for (uint64_t i = 0; bufs && i < nt; i++)
        free(bufs[i]);
    for (uint32_t l = 0; qkeep && l < p->nl; l++)
        free(qkeep[l]);
    free(qkeep);
    free(bufs);
    free(a_h);
    free(a_kv);
    free(a_f);
    free(s_kv);
    free(s_f);
    return r;
}

/* ---- the whole run ---- */

static int setup(pruner *p, const char *in_path, eng_prune_report *rep, eng_err *e)
{
    const eng_model_info *in = eng_model_get_info(p->m);
    static const char *const ok[] = {"llama", "deci", "qwen2", "qwen3"};
    int known = 0;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        known |= !strcmp(in->arch, ok[i]);
    if (!known)
        return eng_errf(e, ENG_EUNSUP, "%s: architecture '%s' cannot be pruned yet (llama, deci, qwen2, qwen3)",
                        in_path, in->arch);
    snprintf(rep->arch_in, sizeof rep->arch_in, "%s", in->arch);
    snprintf(rep->arch_out, sizeof rep->arch_out, "%s", !strcmp(in->arch, "llama") ? "deci" : in->arch);
    p->nl = in->n_layers;
    p->hd = in->head_dim;
    rep->n_layers = p->nl;
    p->heads = calloc(p->nl, sizeof *p->heads);
    p->kv = calloc(p->nl, sizeof *p->kv);
    p->ffn = calloc(p->nl, sizeof *p->ffn);
    p->goff = calloc(p->nl + 1, sizeof *p->goff);
    p->noff = calloc(p->nl + 1, sizeof *p->noff);
    p->hoff = calloc(p->nl + 1, sizeof *p->hoff);
    if (!p->heads || !p->kv || !p->ffn || !p->goff || !p->noff || !p->hoff)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    for (uint32_t l = 0; l < p->nl; l++) {
        const eng_layer *L = eng_model_layer(p->m, l);
        char nm[96];
        snprintf(nm, sizeof nm, "blk.%u.attn_q.weight", l);
        if (L->n_heads && !eng_gguf_tensor_find(p->g, nm))
            return eng_errf(e, ENG_EUNSUP, "%s: layer %u has no separate '%s' (fused q/k/v cannot be pruned yet)",
                            in_path, l, nm);
        snprintf(nm, sizeof nm, "blk.%u.ffn_gate.weight", l);
        if (L->ffn && !eng_gguf_tensor_find(p->g, nm))
            return eng_errf(e, ENG_EUNSUP, "%s: layer %u has no separate '%s' (a fused gate/up cannot be pruned yet)",
                            in_path, l, nm);
        p->heads[l] = L->n_heads;
        p->kv[l] = L->n_kv_heads;
        p->ffn[l] = L->ffn;
        p->goff[l + 1] = p->goff[l] + L->n_kv_heads;
        p->noff[l + 1] = p->noff[l] + L->ffn;
        p->hoff[l + 1] = p->hoff[l] + L->n_heads;
        rep->groups_before += L->n_kv_heads;
        rep->heads_before += L->n_heads;
        rep->ffn_before += L->ffn;
    }
    p->n_groups = p->goff[p->nl];
    p->n_neurons = p->noff[p->nl];
    p->hsum = calloc(p->hoff[p->nl] + 1, sizeof *p->hsum);
    p->nsum = calloc(p->n_neurons + 1, sizeof *p->nsum);
    p->gscore = calloc(p->n_groups + 1, sizeof *p->gscore);
    p->nscore = calloc(p->n_neurons + 1, sizeof *p->nscore);
    p->gkeep = malloc(p->n_groups + 1);
    p->nkeep = malloc(p->n_neurons + 1);
    p->gprot = calloc(p->n_groups + 1, 1);
    if (!p->hsum || !p->nsum || !p->gscore || !p->nscore || !p->gkeep || !p->nkeep || !p->gprot)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    memset(p->gkeep, 1, p->n_groups + 1);
    memset(p->nkeep, 1, p->n_neurons + 1);
    return 0;
}

int eng_prune_file(const char *in_path, const char *out_path, const eng_prune_opts *o, eng_prune_report *rep,
                   eng_err *e)
{
    eng_prune_report dummy;
    if (!rep)
        rep = &dummy;
    memset(rep, 0, sizeof *rep);
    if (!o || !(o->heads >= 0 && o->heads <= 1) || !(o->neurons >= 0 && o->neurons <= 1) ||
        !(o->max_per_layer >= 0 && o->max_per_layer <= 1) || !(o->protect_share >= 0 && o->protect_share <= 1))
        return eng_errf(e, ENG_EINVAL, "pruning shares must be between 0 and 1");
    int hm = method_row(ENG_PRUNE_KIND_HEADS, o->head_method), nm = method_row(ENG_PRUNE_KIND_NEURONS, o->neuron_method);
    if (hm < 0 || nm < 0)
        return eng_errf(e, ENG_EINVAL, "unknown pruning method (heads: vnorm, weight; neurons: wprod, act)");
    pruner p = {.o = o, .hm = hm, .nm = nm};
    eng_model_opts mo = {.no_pack = 1};
    int r = eng_model_open_opts(in_path, &mo, &p.m, e);
    if (r)
        return r;
    p.g = eng_model_gguf(p.m);
    int calib_heads = o->heads > 0 && methods[hm].calib, calib_neurons = o->neurons > 0 && methods[nm].calib;
    if (!(r = setup(&p, in_path, rep, e)) && (!(calib_heads || calib_neurons) || !(r = calibrate(&p, e))) &&
        (o->neurons <= 0 || !(r = score_neurons(&p, e))) && (o->heads <= 0 || !(r = score_heads(&p, e))) &&
        !(r = choose_groups(&p, rep, e)) && !(r = choose_neurons(&p, e)))
        r = write_out(&p, in_path, out_path, rep, e);
    eng_model_close(p.m);
    free(p.heads);
    free(p.kv);
    free(p.ffn);
    free(p.goff);
    free(p.noff);
    free(p.hoff);
    free(p.hsum);
    free(p.nsum);
    free(p.gscore);
    free(p.nscore);
    free(p.gkeep);
    free(p.nkeep);
    free(p.gprot);
    return r;
}
