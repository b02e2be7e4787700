/* Writing the i-quants below 4 bits. The method is ggml's (its
 * ggml-quants.c, MIT): every group of 4 or 8 values must be one point of
 * a fixed grid, so a scale is searched per sub-block, and for each
 * candidate scale each group is rounded level by level to the nearest
 * level vector; when that vector is not a grid point, the point is chosen
 * from a precomputed list of the grid points nearest to it (its
 * "neighbours"). The code is written here; so are these choices:
 *
 *  - Levels. A value is x = D * (2s+1) * q with D the super-block's f16
 *    scale, s a 4-bit (iq1: 3-bit) sub-block code and q the grid point's
 *    level value: the grid byte over 8 (iq2: 1, 3.125, 5.375), over 4
 *    (iq3_xxs) or as is (iq3_s: 1..15); iq1's grid values -1, 0, 1 plus a
 *    delta of +-1/8. The searches use these exact level values (ggml uses
 *    the odd integers 2l+1 as a proxy for them).
 *  - Signs. iq2 and iq3 grids hold magnitudes; each value's sign is
 *    stored, as 8 bits per 8 values (iq2_s, iq3_s) or as 7 bits whose
 *    8th is implied by an even count of negatives (iq2_xxs, iq2_xs,
 *    iq3_xxs). With an odd count, the value of least weight * x^2 takes
 *    the wrong sign: its target magnitude becomes -|x|, which the search
 *    then rounds to the smallest level. iq1 grids are signed; each
 *    sub-block (iq1_s) or group of 8 (iq1_m) takes the delta of the two
 *    that gives the smaller error.
 *  - The search. Sub-block scales from 0.70 to 1.45 times max|x| over the
 *    top level (iq1: 0.30 to 1.25) in steps of 0.05; at each the groups
 *    are picked and the best scale for those picks (sum w x q / sum w q^2)
 *    scored; the best pick is refined once at its own scale.
 *  - The super-block. D is the largest sub-block scale over 2*smax+1 and
 *    each s rounds to nearest; then every group is picked again at the
 *    scale it will really have, D * (2s+1), and D is refitted by weighted
 *    least squares over the whole super-block for those codes (ggml
 *    multiplies D by a fixed fudge factor instead).
 *
 * The tables (per grid: each point's level indices, a map from every
 * level vector to its grid point or its neighbour list, and the lists)
 * are computed from the grids in iquants_grids.c on first use, once, by
 * whichever thread gets there first while others wait, and freed at exit.
 * This is the one place in simd/ that allocates or keeps state besides
 * the dispatch table: the tables are a cache of pure functions of the
 * constant grids. */
#include "iquants_quant.h"

#include "iquants.h"
#include "kquants.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define QKK SIMD_QKK

/* ---- the grids and their tables ---- */

enum { G_IQ2XXS, G_IQ2XS, G_IQ2S, G_IQ3XXS, G_IQ3S, G_IQ1S, G_COUNT };

typedef struct {
    int ngrid, dim, nlev;
    int nwant;          /* distance classes kept in a neighbour list */
    uint8_t bytes[8];   /* the grid's byte values, ascending as levels */
} grid_def;

/* nwant as ggml chose it per type (more classes where the grid is sparse) */
static const grid_def defs[G_COUNT] = {
    [G_IQ2XXS] = {256, 8, 3, 2, {8, 25, 43}},
    [G_IQ2XS] = {512, 8, 3, 2, {8, 25, 43}},
    [G_IQ2S] = {1024, 8, 3, 1, {8, 25, 43}},
    [G_IQ3XXS] = {256, 4, 8, 2, {4, 12, 20, 28, 36, 44, 52, 62}},
    [G_IQ3S] = {512, 4, 8, 3, {1, 3, 5, 7, 9, 11, 13, 15}},
    [G_IQ1S] = {2048, 8, 3, 3, {0xff, 0, 1}}, /* int8 -1, 0, 1 */
};

typedef struct {
    uint8_t *lev;    /* ngrid * dim level indices */
    int32_t *map;    /* nlev^dim level vectors: >= 0 a grid point, else -(1 + offset of its list in nb) */
    uint16_t *nb;    /* lists: a count, then that many grid points */
    size_t n_lists, n_entries;
    int ok;
} grid_table;

static grid_table tables[G_COUNT];
static atomic_int state[G_COUNT]; /* 0 not built, 1 being built, 2 ready */
static atomic_int exit_hook;

static uint8_t grid_byte(int g, int k, int j)
{
    switch (g) {
    case G_IQ2XXS: return (uint8_t)(simd_iq2xxs_grid[k] >> (8 * j));
    case G_IQ2XS: return (uint8_t)(simd_iq2xs_grid[k] >> (8 * j));
    case G_IQ2S: return (uint8_t)(simd_iq2s_grid[k] >> (8 * j));
    case G_IQ3XXS: return (uint8_t)(simd_iq3xxs_grid[k] >> (8 * j));
    case G_IQ3S: return (uint8_t)(simd_iq3s_grid[k] >> (8 * j));
    default: return (uint8_t)(simd_iq1s_grid[k] >> (8 * j));
    }
}

static int n_keys(const grid_def *d)
{
    int n = 1;
    for (int j = 0; j < d->dim; j++)
        n *= d->nlev;
    return n;
}

/* Squared distances (in level steps) from level vector `key` to every grid
 * point into d2, and the largest distance its list keeps. */
static int distances(const grid_def *d, const grid_table *t, int key, uint8_t *d2)
{
    int l[8], hist[256] = {0};
    for (int j = 0, k = key; j < d->dim; j++, k /= d->nlev)
        l[j] = k % d->nlev;
    for (int p = 0; p < d->ngrid; p++) {
        int s = 0;
        for (int j = 0; j < d->dim; j++) {
            int e = t->lev[p * d->dim + j] - l[j];
            s += e * e;
        }
        d2[p] = (uint8_t)s; /* at most 8 * 2^2 or 4 * 7^2 */
        hist[s]++;
    }
    int classes = 0, thr = 0;
    for (int s = 0; s < 256 && classes < d->nwant; s++)
        if (hist[s]) {
            classes++;
            thr = s;
        }
    return thr;
}

static void table_free(grid_table *t)
{
    free(t->lev);
    free(t->map);
    free(t->nb);
    memset(t, 0, sizeof *t);
}

static void free_all(void)
{
    for (int g = 0; g < G_COUNT; g++)
        if (atomic_load(&state[g]) == 2)
            table_free(&tables[g]);
}

static void build(int g, grid_table *t)
{
    const grid_def *d = &defs[g];
    int nk = n_keys(d);
    uint8_t *d2 = malloc((size_t)d->ngrid);
    int *thr = malloc((size_t)nk * sizeof *thr);
    t->lev = malloc((size_t)d->ngrid * (size_t)d->dim);
    t->map = malloc((size_t)nk * sizeof *t->map);
    if (!d2 || !thr || !t->lev || !t->map)
        goto fail;
    int ok = 1;
    for (int p = 0; p < d->ngrid; p++)
        for (int j = 0; j < d->dim; j++) {
            uint8_t b = grid_byte(g, p, j);
            int l = 0;
            while (l < d->nlev && d->bytes[l] != b)
                l++;
            ok &= l < d->nlev;
            t->lev[p * d->dim + j] = (uint8_t)(l < d->nlev ? l : 0);
        }
    for (int k = 0; k < nk; k++)
        t->map[k] = -1;
    for (int p = 0; p < d->ngrid; p++) {
        int key = 0;
        for (int j = d->dim - 1; j >= 0; j--)
            key = key * d->nlev + t->lev[p * d->dim + j];
        ok &= t->map[key] == -1; /* two points with one level vector */
        t->map[key] = p;
    }
    /* two passes: count the lists' lengths, then fill them */
    size_t total = 0;
    for (int k = 0; k < nk; k++) {
        if (t->map[k] >= 0)
            continue;
        thr[k] = distances(d, t, k, d2);
        size_t n = 0;
        for (int p = 0; p < d->ngrid; p++)
            n += d2[p] <= thr[k];
        total += 1 + n;
        t->n_lists++;
    }
    t->n_entries = total - t->n_lists;
    t->nb = malloc(total * sizeof *t->nb + 1);
    if (!t->nb || total > INT32_MAX)
        goto fail;
    size_t at = 0;
    for (int k = 0; k < nk; k++) {
        if (t->map[k] >= 0)
            continue;
        distances(d, t, k, d2);
        size_t start = at++;
        for (int p = 0; p < d->ngrid; p++)
            if (d2[p] <= thr[k])
                t->nb[at++] = (uint16_t)p;
        t->nb[start] = (uint16_t)(at - start - 1);
        t->map[k] = -(int32_t)(1 + start);
    }
    free(d2);
    free(thr);
    t->ok = ok;
    return;
fail:
    free(d2);
    free(thr);
    table_free(t);
}

/* The tables of grid g, built on first use; NULL when out of memory. */
static const grid_table *table_get(int g)
{
    if (atomic_load_explicit(&state[g], memory_order_acquire) != 2) {
        int expect = 0;
        if (atomic_compare_exchange_strong(&state[g], &expect, 1)) {
            build(g, &tables[g]);
            int h = 0;
            if (atomic_compare_exchange_strong(&exit_hook, &h, 1))
                atexit(free_all);
            atomic_store_explicit(&state[g], 2, memory_order_release);
        } else {
            /* another thread is building it (well under a second) */
            while (atomic_load_explicit(&state[g], memory_order_acquire) != 2)
                ;
        }
    }
    return tables[g].map && tables[g].nb ? &tables[g] : NULL;
}

/* ---- the search ---- */

typedef struct {
    int type, grid;
    int unit;    /* values per sub-block scale code: 16 or 32 */
    int smax;    /* largest scale code: 15, or 7 for iq1 */
    int parity;  /* signs as 7 bits of even parity per 8 */
    int iq1;     /* 0; 1: one delta per 32 values (iq1_s); 2: one per 8 (iq1_m) */
    float qdiv;  /* grid byte / qdiv = level value (iq2, iq3) */
} spec;

static const spec specs[] = {
    {SIMD_IQ2_XXS, G_IQ2XXS, 32, 15, 1, 0, 8.0f}, {SIMD_IQ2_XS, G_IQ2XS, 16, 15, 1, 0, 8.0f},
    {SIMD_IQ2_S, G_IQ2S, 16, 15, 0, 0, 8.0f},     {SIMD_IQ3_XXS, G_IQ3XXS, 32, 15, 1, 0, 4.0f},
    {SIMD_IQ3_S, G_IQ3S, 32, 15, 0, 0, 1.0f},     {SIMD_IQ1_S, G_IQ1S, 32, 7, 0, 1, 1.0f},
    {SIMD_IQ1_M, G_IQ1S, 16, 7, 0, 2, 1.0f},
};

/* One sub-block's search state: level values (two sets for iq1, by the
 * sign of delta), its targets t and weights w. */
typedef struct {
    const spec *sp;
    const grid_def *gd;
    const grid_table *tb;
    float lv[2][8];
    float mid[2][8]; /* midpoints between neighbouring levels */
    int nlv; /* 1, or 2 for iq1 (delta +1/8, -1/8) */
} searcher;

/* The grid point for the group of dim targets t (weights w) at scale s
 * with level set `set`: the nearest level vector if it is a grid point,
 * else the best of its neighbours. *err gets the weighted error. The
 * lists are long (tens of points), so each value's error at each level
 * is computed once for the group and the points sum those. */
static int pick_group(const searcher *S, int set, const float *t, const float *w, float s, float *err)
{
    const grid_def *d = S->gd;
    const float *lv = S->lv[set], *mid = S->mid[set];
    const int dim = d->dim, nlev = d->nlev;
    int key = 0;
    for (int j = dim - 1; j >= 0; j--) {
        float v = s > 0 ? t[j] / s : 0;
        int l = 0;
        while (l + 1 < nlev && v > mid[l])
            l++;
        key = key * nlev + l;
    }
    int32_t m = S->tb->map[key];
    if (m >= 0) {
        const uint8_t *pl = S->tb->lev + m * dim;
        float e = 0;
        for (int j = 0; j < dim; j++) {
            float r = s * lv[pl[j]] - t[j];
            e += w[j] * r * r;
        }
        *err = e;
        return m;
    }
    float E[8][8];
    for (int j = 0; j < dim; j++)
        for (int l = 0; l < nlev; l++) {
            float r = s * lv[l] - t[j];
            E[j][l] = w[j] * r * r;
        }
    const uint16_t *list = S->tb->nb + (-(int64_t)m - 1);
    int n = list[0], best = m;
    list++;
    float be = INFINITY;
    for (int c = 0; c < n; c++) {
        const uint8_t *pl = S->tb->lev + list[c] * dim;
        float e = 0;
        for (int j = 0; j < dim; j++)
            e += E[j][pl[j]];
        if (e < be) {
            be = e;
            best = list[c];
        }
    }
    *err = be;
    return best;
}

/* Pick every group of n targets at scale s: grid points into idx, delta
 * signs (iq1) into neg, level values into q; returns sum w*q*t and puts
 * sum w*q^2 in *sqq. */
static float pick_all(const searcher *S, const float *t, const float *w, int n, float s, uint16_t *idx, uint8_t *neg,
                      float *q, float *sqq)
{
    const int dim = S->gd->dim;
    /* iq1_s: one delta for the sub-block, so both sets are tried whole */
    int sets = S->sp->iq1 == 1 ? 2 : 1;
    float best_e = INFINITY;
    uint16_t bi[32];
    uint8_t bn[32];
    for (int set = 0; set < sets; set++) {
        float e = 0;
        uint16_t ci[32];
        uint8_t cn[32];
        for (int k = 0; k < n / dim; k++) {
            float e0;
            int p = pick_group(S, set, t + k * dim, w + k * dim, s, &e0);
            cn[k] = (uint8_t)set;
            if (S->sp->iq1 == 2) { /* iq1_m: a delta per group */
                float e1;
                int p1 = pick_group(S, 1, t + k * dim, w + k * dim, s, &e1);
                if (e1 < e0) {
                    e0 = e1;
                    p = p1;
                    cn[k] = 1;
                }
            }
            ci[k] = (uint16_t)p;
            e += e0;
        }
        if (e < best_e) {
            best_e = e;
            memcpy(bi, ci, sizeof ci);
            memcpy(bn, cn, sizeof cn);
        }
    }
    float sx = 0, s2 = 0;
    for (int k = 0; k < n / dim; k++) {
        idx[k] = bi[k];
        neg[k] = bn[k];
        const uint8_t *pl = S->tb->lev + bi[k] * dim;
        for (int j = 0; j < dim; j++) {
            float v = S->lv[bn[k]][pl[j]];
            q[k * dim + j] = v;
            sx += w[k * dim + j] * v * t[k * dim + j];
            s2 += w[k * dim + j] * v * v;
        }
    }
    *sqq = s2;
    return sx;
}

/* The best scale and picks for one sub-block (n values). */
static float search_unit(const searcher *S, const float *t, const float *w, int n, uint16_t *idx, uint8_t *neg)
{
    const int ng = n / S->gd->dim;
    float amax = 0, q[32], top = S->lv[0][S->gd->nlev - 1];
    for (int i = 0; i < n; i++)
        amax = fmaxf(amax, fabsf(t[i]));
    if (S->sp->iq1)
        top = 1.0f + 0.125f;
    uint16_t ci[32];
    uint8_t cn[32];
    if (!(amax > 1e-30f)) {
        pick_all(S, t, w, n, 0, idx, neg, q, &(float){0});
        return 0;
    }
    float lo = S->sp->iq1 ? 0.30f : 0.70f, hi = S->sp->iq1 ? 1.25f : 1.45f;
    float best = 0, scale = 0; /* best is max (sum w q t)^2 / sum w q^2 */
    int found = 0;
    for (int r = 0; lo + 0.05f * (float)r <= hi + 1e-4f; r++) {
        float s = amax / top * (lo + 0.05f * (float)r), s2;
        float sx = pick_all(S, t, w, n, s, ci, cn, q, &s2);
        if (s2 > 0 && sx > 0 && (!found || sx * sx > best * s2)) {
            best = sx * sx / s2;
            scale = sx / s2;
            memcpy(idx, ci, (size_t)ng * sizeof *idx);
            memcpy(neg, cn, (size_t)ng);
            found = 1;
        }
    }
    if (!found) {
        pick_all(S, t, w, n, 0, idx, neg, q, &(float){0});
        return 0;
    }
    float s2, sx = pick_all(S, t, w, n, scale, ci, cn, q, &s2);
    if (s2 > 0 && sx > 0 && sx * sx > best * s2) {
        scale = sx / s2;
        memcpy(idx, ci, (size_t)ng * sizeof *idx);
        memcpy(neg, cn, (size_t)ng);
    }
    return scale;
}

/* One super-block's codes, as the packers below store them. */
typedef struct {
    uint16_t idx[64]; /* grid point per group of dim values */
    uint8_t neg[64];  /* iq1: delta -1/8 for the group */
    uint8_t sign[32]; /* sign bits of values 8k .. 8k+7 (bit j: value 8k+j negative) */
    uint8_t ls[16];   /* scale code per 16 values */
    simd_f16 d;
} solution;

static void solve(const searcher *S, const float *x, const float *imp, solution *so)
{
    const spec *sp = S->sp;
    const int dim = S->gd->dim, unit = sp->unit, gpu = unit / dim; /* groups per unit */
    float w[QKK], t[QKK], su[16];
    simd_kq_weights(x, imp, QKK, w);
    memset(so, 0, sizeof *so);
    for (int i = 0; i < QKK; i++)
        t[i] = x[i];
    if (!sp->iq1)
        for (int k = 0; k < QKK / 8; k++) {
            unsigned s = 0;
            int neg = 0, imin = 0;
            for (int j = 0; j < 8; j++) {
                float v = x[8 * k + j];
                if (v < 0) {
                    s |= 1u << j;
                    neg++;
                }
                t[8 * k + j] = fabsf(v);
                if (w[8 * k + j] * v * v < w[8 * k + imin] * x[8 * k + imin] * x[8 * k + imin])
                    imin = j;
            }
            if (sp->parity && (neg & 1)) {
                s ^= 1u << imin;
                t[8 * k + imin] = -t[8 * k + imin];
            }
            so->sign[k] = (uint8_t)s;
        }
    float smax = 0;
    for (int u = 0; u < QKK / unit; u++) {
        su[u] = search_unit(S, t + u * unit, w + u * unit, unit, so->idx + u * gpu, so->neg + u * gpu);
        smax = fmaxf(smax, su[u]);
    }
    if (!(smax > 0))
        return; /* d = 0: every value decodes to 0 */
    float D = simd_f16_to_f32(simd_f32_to_f16(smax / (float)(2 * sp->smax + 1)));
    if (!(D > 0) || !isfinite(D))
        return;
    int lpu = unit / 16; /* scale codes (per 16 values) per unit */
    float sx = 0, s2 = 0, q[32];
    for (int u = 0; u < QKK / unit; u++) {
        int l = (int)lrintf(0.5f * (su[u] / D - 1));
        l = l < 0 ? 0 : l > sp->smax ? sp->smax : l;
        for (int j = 0; j < lpu; j++)
            so->ls[u * lpu + j] = (uint8_t)l;
        float c = (float)(2 * l + 1), us2;
        /* picked again at the scale the unit really gets */
        pick_all(S, t + u * unit, w + u * unit, unit, D * c, so->idx + u * gpu, so->neg + u * gpu, q, &us2);
        for (int i = 0; i < unit; i++) {
            sx += w[u * unit + i] * t[u * unit + i] * c * q[i];
            s2 += w[u * unit + i] * c * c * q[i] * q[i];
        }
    }
    float Dfit = s2 > 0 ? sx / s2 : 0;
    so->d = simd_f32_to_f16(Dfit > 0 && isfinite(Dfit) ? Dfit : D);
}

/* ---- the layouts (simd.h), written byte by byte (little-endian) ---- */

static void put16(uint8_t *p, unsigned v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int j = 0; j < 4; j++)
        p[j] = (uint8_t)(v >> (8 * j));
}

static void pack(int type, const solution *so, uint8_t *p)
{
    memset(p, 0, simd_iq_bytes(type));
    if (type != SIMD_IQ1_M)
        put16(p, so->d);
    switch (type) {
    case SIMD_IQ2_XXS:
        for (int i = 0; i < 8; i++) {
            uint8_t *q = p + 2 + 8 * i;
            uint32_t u = (uint32_t)so->ls[2 * i] << 28;
            for (int l = 0; l < 4; l++) {
                q[l] = (uint8_t)so->idx[4 * i + l];
                u |= (uint32_t)(so->sign[4 * i + l] & 127) << (7 * l);
            }
            put32(q + 4, u);
        }
        break;
    case SIMD_IQ2_XS:
        for (int i = 0; i < 8; i++) {
            for (int l = 0; l < 4; l++)
                put16(p + 2 + 2 * (4 * i + l), so->idx[4 * i + l] | (unsigned)(so->sign[4 * i + l] & 127) << 9);
            p[2 + 64 + i] = (uint8_t)(so->ls[2 * i] | so->ls[2 * i + 1] << 4);
        }
        break;
    case SIMD_IQ2_S: /* qs[64] (indices, then signs), qh[8], scales[8] */
        for (int i = 0; i < 8; i++) {
            for (int l = 0; l < 4; l++) {
                p[2 + 4 * i + l] = (uint8_t)so->idx[4 * i + l];
                p[2 + 64 + i] |= (uint8_t)((so->idx[4 * i + l] >> 8) << (2 * l));
                p[2 + 32 + 4 * i + l] = so->sign[4 * i + l];
            }
            p[2 + 72 + i] = (uint8_t)(so->ls[2 * i] | so->ls[2 * i + 1] << 4);
        }
        break;
    case SIMD_IQ3_XXS:
        for (int i = 0; i < 8; i++) {
            uint32_t u = (uint32_t)so->ls[2 * i] << 28;
            for (int k = 0; k < 8; k++)
                p[2 + 8 * i + k] = (uint8_t)so->idx[8 * i + k];
            for (int l = 0; l < 4; l++)
                u |= (uint32_t)(so->sign[4 * i + l] & 127) << (7 * l);
            put32(p + 2 + 64 + 4 * i, u);
        }
        break;
    case SIMD_IQ3_S: /* qs[64], qh[8], signs[32], scales[4] */
        for (int i = 0; i < 8; i++) {
            for (int k = 0; k < 8; k++) {
                p[2 + 8 * i + k] = (uint8_t)so->idx[8 * i + k];
                p[2 + 64 + i] |= (uint8_t)(((so->idx[8 * i + k] >> 8) & 1) << k);
            }
            for (int l = 0; l < 4; l++)
                p[2 + 72 + 4 * i + l] = so->sign[4 * i + l];
            p[2 + 104 + i / 2] |= (uint8_t)(so->ls[2 * i] << (4 * (i & 1)));
        }
        break;
    case SIMD_IQ1_S: /* qs[32], qh[8] as uint16 */
        for (int i = 0; i < 8; i++) {
            unsigned h = (unsigned)so->ls[2 * i] << 12 | (unsigned)so->neg[4 * i] << 15;
            for (int l = 0; l < 4; l++) {
                p[2 + 4 * i + l] = (uint8_t)so->idx[4 * i + l];
                h |= (unsigned)(so->idx[4 * i + l] >> 8) << (3 * l);
            }
            put16(p + 2 + 32 + 2 * i, h);
        }
        break;
    default: { /* SIMD_IQ1_M: qs[32], qh[16], scales as 4 uint16 holding d's nibbles too */
        unsigned sc[4] = {0};
        for (int i = 0; i < 8; i++) {
            for (int l = 0; l < 4; l++) {
                p[4 * i + l] = (uint8_t)so->idx[4 * i + l];
                unsigned v = (unsigned)(so->idx[4 * i + l] >> 8) | (unsigned)so->neg[4 * i + l] << 3;
                p[32 + 2 * i + l / 2] |= (uint8_t)(v << (l & 1 ? 4 : 0));
            }
            sc[i / 2] |= (unsigned)so->ls[2 * i] << (6 * (i & 1)) | (unsigned)so->ls[2 * i + 1] << (6 * (i & 1) + 3);
        }
        for (int k = 0; k < 4; k++)
            put16(p + 48 + 2 * k, sc[k] | (unsigned)((so->d >> (4 * k)) & 15) << 12);
        break;
    }
    }
}

static const spec *spec_of(int type)
{
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
        if (specs[i].type == type)
            return &specs[i];
    return NULL;
}

static void quant(int type, const float *src, void *dst, size_t n, const float *imp)
{
    const spec *sp = spec_of(type);
    searcher S = {.sp = sp, .gd = &defs[sp->grid], .tb = table_get(sp->grid), .nlv = sp->iq1 ? 2 : 1};
    const size_t bs = simd_iq_bytes(type);
    if (!S.tb) { /* out of memory building the tables: every block decodes to 0 */
        memset(dst, 0, n / QKK * bs);
        return;
    }
    for (int l = 0; l < S.gd->nlev; l++) {
        if (sp->iq1) {
            float g = (float)(int8_t)S.gd->bytes[l];
            S.lv[0][l] = g + 0.125f;
            S.lv[1][l] = g - 0.125f;
        } else {
            S.lv[0][l] = (float)S.gd->bytes[l] / sp->qdiv;
        }
    }
    for (int k = 0; k < 2; k++)
        for (int l = 0; l + 1 < S.gd->nlev; l++)
            S.mid[k][l] = 0.5f * (S.lv[k][l] + S.lv[k][l + 1]);
    for (size_t b = 0; b < n / QKK; b++) {
        solution so;
        solve(&S, src + b * QKK, imp ? imp + b * QKK : NULL, &so);
        pack(type, &so, (uint8_t *)dst + b * bs);
    }
}

#define IQ_QUANT(NAME, TYPE)                                                                            \
    void simd_quant_##NAME##_imp(const float *src, void *dst, size_t n, const float *imp)             \
    {                                                                                                   \
        quant(TYPE, src, dst, n, imp);                                                                  \
    }                                                                                                   \
    void simd_quant_##NAME(const float *src, void *dst, size_t n) { quant(TYPE, src, dst, n, NULL); }
IQ_QUANT(iq2_xxs, SIMD_IQ2_XXS)
IQ_QUANT(iq2_xs, SIMD_IQ2_XS)
IQ_QUANT(iq2_s, SIMD_IQ2_S)
IQ_QUANT(iq3_xxs, SIMD_IQ3_XXS)
IQ_QUANT(iq3_s, SIMD_IQ3_S)
IQ_QUANT(iq1_s, SIMD_IQ1_S)
IQ_QUANT(iq1_m, SIMD_IQ1_M)
#undef IQ_QUANT

int simd_iq_quant_check(int type, size_t *n_lists, size_t *n_entries)
{
    const spec *sp = spec_of(type);
    if (!sp)
        return -1;
    const grid_table *t = table_get(sp->grid);
    if (!t || !t->ok)
        return -1;
    const grid_def *d = &defs[sp->grid];
    for (int k = 0; k < n_keys(d); k++) {
        int32_t m = t->map[k];
        if (m < 0 && t->nb[-(int64_t)m - 1] == 0)
            return -1;
    }
    *n_lists = t->n_lists;
    *n_entries = t->n_entries;
    return 0;
}
