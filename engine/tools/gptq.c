/* GPTQ (see gptq.h): Hessians gathered through the forward pass's
 * observer, and the column-by-column pass over a block format.
 *
 * The pass, for one row w of W (the rows are independent: each meets the
 * same inputs, so they share H and its factor):
 *   U = the upper Cholesky factor of (H + damp*I)^-1   (H^-1 = U^T U)
 *   for each column j in order:
 *     if j starts a block: the type's quantizer picks the block's scales
 *       from w[j .. j+B) as the updates so far have left it
 *     q = the level nearest w[j] under those scales
 *     w[k] -= (w[j] - q) / U[j][j] * U[j][k]   for every k > j
 * The levels: every supported format stores, per value, a small integer
 * code whose value is A*g(code) + B, with A and B fixed by the block's
 * scales (and minimum) and g the identity or, for iq4, a table. A and B of
 * each position are read back by dequantizing the block with every code
 * set to the lowest and then the highest code, so no format's scale
 * encoding is repeated here, only where its codes sit (set_code). */
#include "gptq.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_rows.h"
#include "calib.h"
#include "gguf.h"
#include "model_layout.h"
#include "pool.h"
#include "simd.h"

/* ---- where each format keeps its codes ---- */

typedef struct fmt {
    int lo, hi;  /* code range */
    int table;   /* levels are simd_iq4nl_values[code] rather than code */
} fmt;

static int fmt_of(int type, fmt *f)
{
    f->table = 0;
    switch (type) {
    case SIMD_Q4_0: case SIMD_Q4_1: case SIMD_Q4_K: f->lo = 0, f->hi = 15; return 1;
    case SIMD_IQ4_NL: case SIMD_IQ4_XS: f->lo = 0, f->hi = 15, f->table = 1; return 1;
    case SIMD_Q5_0: case SIMD_Q5_1: case SIMD_Q5_K: f->lo = 0, f->hi = 31; return 1;
    case SIMD_Q8_0: f->lo = -127, f->hi = 127; return 1;
    case SIMD_Q6_K: f->lo = 0, f->hi = 63; return 1;
    case SIMD_Q3_K: f->lo = 0, f->hi = 7; return 1; /* level code - 4 */
    case SIMD_Q2_K: f->lo = 0, f->hi = 3; return 1;
    default: return 0;
    }
}

int eng_gptq_supports(int type)
{
    fmt f;
    return fmt_of(type, &f);
}

static double level(const fmt *f, int k) { return f->table ? (double)simd_iq4nl_values[k] : (double)k; }

/* The nibble of value j (0..31) of a 32-value group stored as q4_0 does:
 * low nibbles x[0..15], high nibbles x[16..31]. */
static void set_nibble(uint8_t *qs, int j, int k)
{
    uint8_t *b = &qs[j & 15];
    *b = j < 16 ? (uint8_t)((*b & 0xf0) | k) : (uint8_t)((*b & 0x0f) | k << 4);
}

static void set_bit(uint8_t *p, int bit, int on)
{
    if (on)
        *p |= (uint8_t)(1u << bit);
    else
        *p &= (uint8_t)~(1u << bit);
}

/* Set value v's code in one block of type (layouts: simd.h). */
static void set_code(int type, void *blk, int v, int k)
{
    switch (type) {
    case SIMD_Q4_0: set_nibble(((simd_block_q4_0 *)blk)->qs, v, k); break;
    case SIMD_Q4_1: set_nibble(((simd_block_q4_1 *)blk)->qs, v, k); break;
    case SIMD_IQ4_NL: set_nibble(((simd_block_iq4_nl *)blk)->qs, v, k); break;
    case SIMD_Q5_0: {
        simd_block_q5_0 *b = blk;
        set_nibble(b->qs, v, k & 15);
        set_bit(&b->qh[v / 8], v % 8, k >> 4);
        break;
    }
    case SIMD_Q5_1: {
        simd_block_q5_1 *b = blk;
        set_nibble(b->qs, v, k & 15);
        set_bit(&b->qh[v / 8], v % 8, k >> 4);
        break;
    }
    case SIMD_Q8_0: ((simd_block_q8_0 *)blk)->qs[v] = (int8_t)k; break;
    case SIMD_Q4_K: {
        /* pairs of sub-blocks share 32 bytes: low nibbles the first */
        simd_block_q4_k *b = blk;
        int c = v / 64, w = v % 64;
        uint8_t *p = &b->qs[32 * c + (w & 31)];
        *p = w < 32 ? (uint8_t)((*p & 0xf0) | k) : (uint8_t)((*p & 0x0f) | k << 4);
        break;
    }
    case SIMD_Q5_K: {
        simd_block_q5_k *b = blk;
        int c = v / 64, w = v % 64;
        uint8_t *p = &b->qs[32 * c + (w & 31)];
        *p = w < 32 ? (uint8_t)((*p & 0xf0) | (k & 15)) : (uint8_t)((*p & 0x0f) | (k & 15) << 4);
        set_bit(&b->qh[w & 31], 2 * c + (w >= 32), k >> 4);
        break;
    }
    case SIMD_Q6_K: {
        simd_block_q6_k *b = blk;
        int h = v >> 7, kk = (v >> 5) & 3, l = v & 31;
        uint8_t *p = &b->ql[64 * h + 32 * (kk & 1) + l], *q = &b->qh[32 * h + l];
        *p = kk < 2 ? (uint8_t)((*p & 0xf0) | (k & 15)) : (uint8_t)((*p & 0x0f) | (k & 15) << 4);
        *q = (uint8_t)((*q & ~(3u << 2 * kk)) | (unsigned)(k >> 4) << 2 * kk);
        break;
    }
    case SIMD_Q2_K: {
        simd_block_q2_k *b = blk;
        int h = v >> 7, kk = (v >> 5) & 3, s = (v >> 4) & 1, l = v & 15;
        uint8_t *p = &b->qs[32 * h + 16 * s + l];
        *p = (uint8_t)((*p & ~(3u << 2 * kk)) | (unsigned)k << 2 * kk);
        break;
    }
    case SIMD_Q3_K: {
        simd_block_q3_k *b = blk;
        int h = v >> 7, kk = (v >> 5) & 3, s = (v >> 4) & 1, l = v & 15;
        uint8_t *p = &b->qs[32 * h + 16 * s + l];
        *p = (uint8_t)((*p & ~(3u << 2 * kk)) | (unsigned)(k & 3) << 2 * kk);
        set_bit(&b->hmask[v % 32], 4 * h + kk, k >> 2);
        break;
    }
    case SIMD_IQ4_XS: set_nibble(((simd_block_iq4_xs *)blk)->qs + 16 * (v / 32), v % 32, k); break;
    default: break;
    }
}

/* ---- dense linear algebra on n x n doubles (row-major) ---- */

/* U (upper, n x n, zero below the diagonal) with (H + damp)^-1 = U^T U,
 * from H (n x n). Returns the damping used (a share of the mean diagonal,
 * raised tenfold while the matrix is not positive definite), or -1. */
static double inverse_factor(const double *H, uint32_t n, double damp, double *U, double *t)
{
    double mean = 0;
    for (uint32_t i = 0; i < n; i++)
        mean += H[(size_t)i * n + i];
    mean = mean > 0 ? mean / n : 1;
    for (int tries = 0; tries < 5; tries++, damp *= 10) {
        /* t = L (lower Cholesky of the damped H); dead inputs get 1 */
        memcpy(t, H, (size_t)n * n * sizeof *t);
        for (uint32_t i = 0; i < n; i++) {
            double *d = &t[(size_t)i * n + i];
            *d = *d > 0 ? *d + damp * mean : 1;
        }
        if (tools_chol_lower(t, n))
            continue;
        /* U's lower triangle = L^-1 (forward substitution, column by column) */
        memset(U, 0, (size_t)n * n * sizeof *U);
        for (uint32_t i = 0; i < n; i++) {
            const double *li = t + (size_t)i * n;
            double *ui = U + (size_t)i * n;
            ui[i] = 1 / li[i];
            for (uint32_t j = 0; j < i; j++) {
                double s = 0;
                for (uint32_t k = j; k < i; k++)
                    s += li[k] * U[(size_t)k * n + j];
                ui[j] = -s / li[i];
            }
        }
        /* t = H^-1 = L^-T L^-1, lower triangle, summed a row of L^-1 at a time */
        memset(t, 0, (size_t)n * n * sizeof *t);
        for (uint32_t k = 0; k < n; k++) {
            const double *lk = U + (size_t)k * n;
            for (uint32_t i = 0; i <= k; i++) {
                double *ti = t + (size_t)i * n;
                for (uint32_t j = 0; j <= i; j++)
                    ti[j] += lk[i] * lk[j];
            }
        }
        if (tools_chol_lower(t, n))
            continue;
        /* H^-1 = L2 L2^T = U^T U with U = L2^T */
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t j = 0; j < n; j++)
                U[(size_t)i * n + j] = j >= i ? t[(size_t)j * n + i] : 0;
        return damp;
    }
    return -1;
}

/* (w - q)^T H (w - q) for one row (H symmetric, full). */
static double quad(const double *H, const float *w, const float *q, uint32_t n, double *d)
{
    for (uint32_t i = 0; i < n; i++)
        d[i] = (double)w[i] - q[i];
    double s = 0;
    for (uint32_t i = 0; i < n; i++) {
        const double *h = H + (size_t)i * n;
        double t = 0;
        for (uint32_t j = 0; j < n; j++)
            t += h[j] * d[j];
        s += d[i] * t;
    }
    return s;
}

/* ---- the pass ---- */

typedef struct pass {
    int type;
    fmt f;
    const simd_traits *tr;
    uint32_t B, cols;
    size_t bb;        /* bytes per block */
    const double *U;  /* cols x cols */
    const float *imp;
    int clip;
    int refine;       /* rounds of the local search after the pass */
    /* scratch of B values each, and a block */
    float *t, *t0, *deq, *v0, *v1, *a, *b;
    void *blk, *tmp;
} pass;

static void quant_block(const pass *p, const float *x, void *dst, uint32_t j0)
{
    if (p->imp && p->tr->quant_imp)
        p->tr->quant_imp(x, dst, p->B, p->imp + j0);
    else
        p->tr->quant(x, dst, p->B);
}

/* The levels of block bytes blk into p->deq and their A, B (p->a, p->b). */
static void probe_levels(pass *p, const void *blk)
{
    uint32_t B = p->B;
    p->tr->dequant(blk, p->deq, B);
    memcpy(p->tmp, blk, p->bb);
    for (uint32_t i = 0; i < B; i++)
        set_code(p->type, p->tmp, (int)i, p->f.lo);
    p->tr->dequant(p->tmp, p->v0, B);
    for (uint32_t i = 0; i < B; i++)
        set_code(p->type, p->tmp, (int)i, p->f.hi);
    p->tr->dequant(p->tmp, p->v1, B);
    double g0 = level(&p->f, p->f.lo), g1 = level(&p->f, p->f.hi);
    for (uint32_t i = 0; i < B; i++) {
        p->a[i] = (float)(((double)p->v1[i] - p->v0[i]) / (g1 - g0));
        p->b[i] = (float)(p->v0[i] - (double)p->a[i] * g0);
    }
}

/* The code nearest x at position i, and its level in *q. */
static int nearest(const pass *p, uint32_t i, float x, float *q)
{
    double a = p->a[i], b = p->b[i];
    int k;
    if (a == 0) {
        k = p->f.lo;
    } else if (!p->f.table) {
        double c = rint((x - b) / a);
        k = c < p->f.lo ? p->f.lo : c > p->f.hi ? p->f.hi : (int)c;
    } else {
        k = 0;
        double bd = INFINITY;
        for (int c = p->f.lo; c <= p->f.hi; c++) {
            double d = fabs(a * level(&p->f, c) + b - x);
            if (d < bd)
                bd = d, k = c;
        }
    }
    *q = (float)(a * level(&p->f, k) + b);
    return k;
}

/* The columns of the block at j0 (x: its B values as the pass left them,
 * updated in place), under the scales probe_levels last read: each value
 * the pass has not moved since the block's start (p->t0) keeps the code
 * the quantizer gave it, the others get the nearest level (written into
 * blk when it is not NULL). Each column's error is folded into the later
 * columns of the block and, with rest (the row's values after the block),
 * into those too. Returns GPTQ's loss, the sum of ((w - q) / U[j][j])^2. */
static double block_pass(pass *p, float *x, uint32_t j0, void *blk, float *rest)
{
    uint32_t B = p->B, n = p->cols;
    double loss = 0;
    for (uint32_t i = 0; i < B; i++) {
        uint32_t j = j0 + i;
        float q;
        if (x[i] == p->t0[i]) {
            q = p->deq[i];
        } else {
            int k = nearest(p, i, x[i], &q);
            if (blk)
                set_code(p->type, blk, (int)i, k);
        }
        const double *u = p->U + (size_t)j * n;
        double err = ((double)x[i] - q) / u[j];
        loss += err * err;
        for (uint32_t k = i + 1; k < B; k++)
            x[k] = (float)(x[k] - err * u[j0 + k]);
        if (rest)
            for (uint32_t k = j0 + B; k < n; k++)
                rest[k - j0 - B] = (float)(rest[k - j0 - B] - err * u[k]);
    }
    return loss;
}

/* The block's scales at column j0 of row w, into p->blk: the type's
 * quantizer on w[j0 .. j0+B) as the pass has left it; with clip, the
 * best of that and the quantizer on the values clipped to 0.95 .. 0.5 of
 * their largest magnitude, by GPTQ's own loss over the block (the
 * block's columns run with each candidate's scales). */
static void choose_scales(pass *p, const float *w, uint32_t j0)
{
    uint32_t B = p->B;
    memcpy(p->t0, w + j0, B * sizeof *p->t0);
    quant_block(p, p->t0, p->blk, j0);
    if (!p->clip)
        return;
    float amax = 0;
    for (uint32_t i = 0; i < B; i++)
        amax = fmaxf(amax, fabsf(p->t0[i]));
    double best = INFINITY;
    for (int s = 0; s <= 10; s++) {
        float lim = amax * (1.0f - 0.05f * (float)s);
        for (uint32_t i = 0; i < B; i++)
            p->t[i] = fminf(lim, fmaxf(-lim, p->t0[i]));
        void *cand = (char *)p->tmp + p->bb;
        quant_block(p, p->t, cand, j0);
        probe_levels(p, cand);
        memcpy(p->t, p->t0, B * sizeof *p->t);
        double loss = block_pass(p, p->t, j0, NULL, NULL);
        if (loss < best) {
            best = loss;
            memcpy(p->blk, cand, p->bb);
        }
    }
}

/* One row: w (cols, updated in place) into dst (a row of blocks). */
static void pass_row(pass *p, float *w, char *dst)
{
    uint32_t B = p->B, n = p->cols;
    for (uint32_t j0 = 0; j0 < n; j0 += B) {
        choose_scales(p, w, j0);
        probe_levels(p, p->blk);
        block_pass(p, w + j0, j0, p->blk, j0 + B < n ? w + j0 + B : NULL);
        memcpy(dst + (size_t)(j0 / B) * p->bb, p->blk, p->bb);
    }
}

/* ---- after the pass: a local search on the row's own output error ----
 *
 * GPTQ fixes each column once, in order; the row's error e = w - q under
 * the damped Hessian Hd, e^T Hd e, can still go down by moving single
 * codes to a neighbouring level (coordinate descent: moving q[j] by t
 * changes it by -2 t g[j] + t^2 Hd[j][j], with g = Hd e) and, for the
 * formats whose levels are one f16 scale d times fixed numbers (q4_0,
 * q5_0, q8_0, iq4_nl), by refitting each block's d to its codes (the
 * block's values are d*u, u fixed by the codes: the best d is a ratio of
 * two quadratic forms, rounded to f16 and kept only when it lowers the
 * error). Every move lowers e^T Hd e, so the result is never worse than
 * the pass's. */

static int scale_only(int type)
{
    return type == SIMD_Q4_0 || type == SIMD_Q5_0 || type == SIMD_Q8_0 || type == SIMD_IQ4_NL;
}

/* The code of position i whose level is q (q is one of the levels). */
static int code_of(const pass *p, uint32_t i, float q)
{
    float t;
    return nearest(p, i, q, &t);
}

/* Refit each block's f16 scale d to its codes (the formats of
 * scale_only, whose block starts with d): see refine_row. Returns whether
 * any d changed. */
static int refit_scales(pass *p, const float *w0, char *row, const double *Hd, double *g, float *q, float *A,
                        float *Bv)
{
    uint32_t n = p->cols, B = p->B;
    float *u = p->t, *qn = p->t0;
    int moved = 0;
    (void)w0;
    for (uint32_t j0 = 0; j0 < n; j0 += B) {
        char *blk = row + (size_t)(j0 / B) * p->bb;
        simd_f16 d16;
        memcpy(&d16, blk, sizeof d16);
        double d = simd_f16_to_f32(d16);
        memcpy(p->tmp, blk, p->bb);
        simd_f16 one = simd_f32_to_f16(1.0f);
        memcpy(p->tmp, &one, sizeof one);
        p->tr->dequant(p->tmp, u, B);
        double num = 0, den = 0;
        for (uint32_t i = 0; i < B; i++) {
            const double *h = Hd + (size_t)(j0 + i) * n + j0;
            double s = 0;
            for (uint32_t k = 0; k < B; k++)
                s += h[k] * u[k];
            den += u[i] * s;
            num += u[i] * g[j0 + i];
        }
        if (!(den > 0))
            continue;
        simd_f16 nd16 = simd_f32_to_f16((float)(d + num / den));
        double t = (double)simd_f16_to_f32(nd16) - d;
        if (nd16 == d16 || !isfinite(t) || !(-2 * t * num + t * t * den < 0))
            continue;
        memcpy(blk, &nd16, sizeof nd16);
        p->tr->dequant(blk, qn, B);
        for (uint32_t k = 0; k < B; k++) {
            double dk = (double)qn[k] - q[j0 + k];
            if (dk == 0)
                continue;
            const double *h = Hd + (size_t)(j0 + k) * n;
            for (uint32_t i = 0; i < n; i++)
                g[i] -= dk * h[i];
            q[j0 + k] = qn[k];
        }
        probe_levels(p, blk);
        memcpy(A + j0, p->a, B * sizeof *A);
        memcpy(Bv + j0, p->b, B * sizeof *Bv);
        moved = 1;
    }
    return moved;
}

static void refine_row(pass *p, const float *w0, char *row, const double *Hd, double *g, float *q, float *A,
                       float *Bv)
{
    uint32_t n = p->cols, B = p->B;
    p->tr->dequant(row, q, n);
    for (uint32_t j0 = 0; j0 < n; j0 += B) {
        probe_levels(p, row + (size_t)(j0 / B) * p->bb);
        memcpy(A + j0, p->a, B * sizeof *A);
        memcpy(Bv + j0, p->b, B * sizeof *Bv);
    }
    for (uint32_t i = 0; i < n; i++) {
        const double *h = Hd + (size_t)i * n;
        double s = 0;
        for (uint32_t j = 0; j < n; j++)
            s += h[j] * ((double)w0[j] - q[j]);
        g[i] = s;
    }
    for (int round = 0; round < p->refine; round++) {
        int moved = 0;
        for (uint32_t j = 0; j < n; j++) {
            if (A[j] == 0)
                continue;
            uint32_t b0 = j - j % B;
            memcpy(p->a, A + b0, B * sizeof *A);
            memcpy(p->b, Bv + b0, B * sizeof *Bv);
            int k = code_of(p, j - b0, q[j]), best_k = k;
            double hjj = Hd[(size_t)j * n + j], best = 0, best_t = 0;
            for (int c = k - 1; c <= k + 1; c += 2) {
                if (c < p->f.lo || c > p->f.hi)
                    continue;
                double t = (double)A[j] * level(&p->f, c) + Bv[j] - q[j];
                double d = -2 * t * g[j] + t * t * hjj;
                if (d < best)
                    best = d, best_k = c, best_t = t;
            }
            if (best_k == k)
                continue;
            set_code(p->type, row + (size_t)(j / B) * p->bb, (int)(j - b0), best_k);
            float old = q[j];
            q[j] = (float)((double)A[j] * level(&p->f, best_k) + Bv[j]);
            best_t = (double)q[j] - old; /* the move as stored */
            const double *h = Hd + (size_t)j * n;
            for (uint32_t i = 0; i < n; i++)
                g[i] -= best_t * h[i];
            moved = 1;
        }
        if (scale_only(p->type))
            moved |= refit_scales(p, w0, row, Hd, g, q, A, Bv);
        if (!moved)
            break;
    }
}

/* The rows of one matrix, split into parts that threads take (eng_pool):
 * the factor and Hd are shared and read only; each part has its own
 * scratch and its own sums of the errors. */
typedef struct rows_job {
    const pass *proto;       /* the pass's shared fields */
    float *W;
    char *dst;
    uint32_t rows;
    size_t rb;
    const double *Hs, *Hd;   /* H (scaled as the matrix is) and H damped */
    int stats, n_parts;
    double *err;             /* per part: RTN's error, the pass's error */
    int *failed;             /* per part: out of memory */
} rows_job;

static void rows_part(void *arg, int ith, int nth)
{
    rows_job *j = arg;
    pass p = *j->proto;
    uint32_t cols = p.cols, r0 = (uint32_t)((uint64_t)j->rows * ith / nth),
             r1 = (uint32_t)((uint64_t)j->rows * (ith + 1) / nth);
    float *scr = malloc((size_t)7 * p.B * sizeof *scr), *w0 = malloc((size_t)cols * sizeof *w0);
    float *rq = malloc((size_t)cols * sizeof *rq), *lv = malloc((size_t)3 * cols * sizeof *lv);
    double *dv = malloc(cols * sizeof *dv), *g = malloc(cols * sizeof *g);
    void *blk = malloc(3 * p.bb), *rowq = malloc(j->rb);
    if (!scr || !w0 || !rq || !lv || !dv || !g || !blk || !rowq) {
        j->failed[ith] = 1;
        goto done;
    }
    p.t = scr, p.t0 = scr + p.B, p.deq = scr + 2 * p.B, p.v0 = scr + 3 * p.B, p.v1 = scr + 4 * p.B;
    p.a = scr + 5 * p.B, p.b = scr + 6 * p.B;
    p.blk = blk, p.tmp = (char *)blk + p.bb;
    for (uint32_t rw = r0; rw < r1; rw++) {
        float *w = j->W + (size_t)rw * cols;
        char *out = j->dst + (size_t)rw * j->rb;
        memcpy(w0, w, cols * sizeof *w0);
        if (j->stats) {
            if (p.imp && p.tr->quant_imp)
                p.tr->quant_imp(w0, rowq, cols, p.imp);
            else
                p.tr->quant(w0, rowq, cols);
            p.tr->dequant(rowq, rq, cols);
            j->err[2 * ith] += quad(j->Hs, w0, rq, cols, dv);
        }
        pass_row(&p, w, out);
        if (p.refine)
            refine_row(&p, w0, out, j->Hd, g, lv, lv + cols, lv + 2 * (size_t)cols);
        if (j->stats) {
            p.tr->dequant(out, rq, cols);
            j->err[2 * ith + 1] += quad(j->Hs, w0, rq, cols, dv);
        }
    }
done:
    free(scr); free(w0); free(rq); free(lv); free(dv); free(g); free(blk); free(rowq);
}

int eng_gptq_quant_matrix(int type, float *W, uint32_t rows, uint32_t cols, const double *H,
                          const eng_gptq_params *prm, void *dst, eng_gptq_stats *stats)
{
    static const eng_gptq_params none;
    const eng_gptq_params *pp = prm ? prm : &none;
    if (pp->row_h) {
        /* each run of `per` rows with its own Hessian: a matrix of its own,
         * in order (rows are independent, so this is the bytes of any order) */
        eng_gptq_params one = *pp;
        one.row_h = NULL;
        one.row_h_per = 0;
        uint32_t per = pp->row_h_per ? pp->row_h_per : 1;
        const simd_traits *tr = simd_type_traits(type);
        if (!tr || !cols || cols % tr->block || rows % per)
            return ENG_EUNSUP;
        size_t rb = simd_row_bytes(type, cols);
        eng_gptq_stats sum = {0}, st;
        for (uint32_t r = 0; r < rows; r += per) {
            float *w = W + (size_t)r * cols;
            char *d = (char *)dst + r * rb;
            int rc = eng_gptq_quant_matrix(type, w, per, cols, pp->row_h + (size_t)(r / per) * cols * cols, &one,
                                           d, &st);
            if (rc == ENG_EFORMAT) /* this run's H is degenerate: the shared one */
                rc = eng_gptq_quant_matrix(type, w, per, cols, H, &one, d, &st);
            if (rc)
                return rc;
            sum.err_rtn += st.err_rtn, sum.err_gptq += st.err_gptq;
            sum.damp_used = st.damp_used > sum.damp_used ? st.damp_used : sum.damp_used;
        }
        if (stats)
            *stats = sum;
        return 0;
    }
    pass p = {.type = type, .tr = simd_type_traits(type), .cols = cols, .imp = pp->imp, .clip = pp->clip,
              .refine = pp->refine};
    if (!fmt_of(type, &p.f) || !p.tr || !p.tr->quant || !cols || cols % p.tr->block)
        return ENG_EUNSUP;
    p.B = p.tr->block;
    p.bb = p.tr->bytes;
    int threads = pp->threads > 1 ? pp->threads : 1;
    /* parts: a few per thread, so a thread that loses its core holds up little */
    int n_parts = rows < (uint32_t)(4 * threads) ? (int)(rows ? rows : 1) : 4 * threads;
    size_t n2 = (size_t)cols * cols;
    double *Hs = malloc(n2 * sizeof *Hs), *U = malloc(n2 * sizeof *U), *t = malloc(n2 * sizeof *t);
    double *err = calloc((size_t)2 * n_parts, sizeof *err);
    int *failed = calloc((size_t)n_parts, sizeof *failed);
    eng_pool *pool = NULL;
    int r = 0;
    if (!Hs || !U || !t || !err || !failed || (threads > 1 && !(pool = eng_pool_new(threads)))) {
        r = ENG_ENOMEM;
        goto done;
    }
    /* the matrix meets x / col: its Hessian is H / (col_i col_j) */
    for (uint32_t i = 0; i < cols; i++)
        for (uint32_t j = 0; j < cols; j++)
            Hs[(size_t)i * cols + j] = pp->col ? H[(size_t)i * cols + j] / ((double)pp->col[i] * pp->col[j])
                                               : H[(size_t)i * cols + j];
    double damp = inverse_factor(Hs, cols, pp->damp > 0 ? pp->damp : 0.01, U, t);
    if (damp < 0) {
        r = ENG_EFORMAT;
        goto done;
    }
    p.U = U;
    /* t = Hd, H damped as the factor was: the local search's measure */
    double mean = 0;
    for (uint32_t i = 0; i < cols; i++)
        mean += Hs[(size_t)i * cols + i];
    mean = mean > 0 ? mean / cols : 1;
    memcpy(t, Hs, n2 * sizeof *t);
    for (uint32_t i = 0; i < cols; i++)
        t[(size_t)i * cols + i] += damp * mean;
    rows_job job = {.proto = &p, .W = W, .dst = dst, .rows = rows, .rb = simd_row_bytes(type, cols), .Hs = Hs,
                    .Hd = t, .stats = stats != NULL, .n_parts = n_parts, .err = err, .failed = failed};
    if (pool)
        eng_pool_run_parts(pool, rows_part, &job, n_parts);
    else
        for (int i = 0; i < n_parts; i++)
            rows_part(&job, i, n_parts);
    double e_rtn = 0, e_gptq = 0;
    for (int i = 0; i < n_parts; i++) {
        if (failed[i])
            r = ENG_ENOMEM;
        e_rtn += err[2 * i];
        e_gptq += err[2 * i + 1];
    }
    if (stats && !r) {
        stats->err_rtn = e_rtn;
        stats->err_gptq = e_gptq;
        stats->damp_used = damp;
    }
done:
    eng_pool_free(pool);
    free(Hs); free(U); free(t); free(err); free(failed);
    return r;
}

/* ---- collecting the Hessians ----
 *
 * Layer by layer within a budget: the layers are cut into groups whose
 * Hessians together fit max_bytes, the first group is collected when the
 * collection is made, and asking for a tensor of another group runs the
 * calibration text again for that group (the previous group's Hessians
 * are freed first). Quantization walks the tensors in layer order, so a
 * model in k groups costs k calibration passes and one group's memory. */

#define MAX_NAMES 3
/* --attn-rows: the largest relative RMS difference of the recomputed
 * attention output from the forward pass's (an f16 cache: about 1e-3) */
#define ATTN_CHECK 0.02

typedef struct site {
    const eng_weight *key;
    uint32_t cols, layer;
    uint32_t group;   /* the collection group it is summed in (a layer's sites share one
                       * unless asym_seq is 2: a group each) */
    double *h;   /* cols x cols while its group is loaded; the lower triangle while summing */
    int bad;
    /* --ffn-rows: a SwiGLU FFN's gate/up input also sums, per row i of
     * ffn_gate and of ffn_up, x x^T weighted by how much that row's output
     * moves the product silu(gate) * up: (silu'(g_i) u_i)^2 for the gate
     * row, silu(g_i)^2 for the up row */
    const eng_weight *wg, *wu;  /* the layer's gate and up (NULL: none) */
    uint32_t rows;
    float *wgf, *wuf;           /* their values, rows x cols each, while loaded */
    double *hr;                 /* [2][rows][cols][cols]: gate's rows, then up's */
    /* --asym-rows (with --asym): hr sums the quantized model's inputs,
     * xq xq^T, each token weighted by the float model's row weights of
     * the window (rwf, [n_ctx][2][rows]), and hc each row's sum xq x^T
     * so weighted, then its own target map */
    float *rwf;
    double *hc;
    /* --attn-rows: the q/k/v input's site of a layer that can have them
     * (attn: 1) holds attn_v's Hessians from the attention while loaded (at);
     * the attn_output input's site names it (attn_of: its index + 1) */
    int attn;
    size_t attn_of;
    tools_attn *at;
    char names[MAX_NAMES][96];
    int n_names;
    /* --asym: the quantized model's weight reading the same input (keyq);
     * while loaded, c holds sum xq x^T, then the target map T (see
     * eng_gptq_target), and xf the float model's inputs of the window
     * (pos[phase]: its tokens seen by each model) */
    const eng_weight *keyq;
    int role;    /* which of the layer's inputs (0 q/k/v, 1 attn_output, 2 gate/up, 3 down) */
    double *c;
    float *xf;
    uint32_t pos[2];
} site;

struct eng_gptq {
    site *s;
    size_t n, cap, last;
    uint32_t n_tok, n_ctx;
    uint32_t n_groups, loaded;   /* loaded: the group held (n_groups: none) */
    eng_model *m;
    eng_model *mq;         /* --asym: the quantized model (NULL: plain Hessians) */
    double asym_damp, asym_blend;
    char *asym_path;       /* the quantized model's file */
    int asym_rows;         /* per-row Hessians and targets on the quantized inputs (opts) */
    int asym_seq;          /* 1 layer by layer: a group a layer, the file refreshed between;
                            * 2 stage by stage: a group per input of a layer */
    int phase;             /* --asym: 0 while the float model runs a window, 1 the quantized one */
    int32_t *ids;
    int threads;
    int ffn_rows;          /* per-row Hessians for SwiGLU gate/up (opts) */
    int attn_rows;         /* attn_v's Hessians from the attention, one per kv head (opts) */
    uint32_t attn_layers, attn_off; /* layers collected with them; without (the check failed) */
    double attn_err;       /* the largest recomputation difference among attn_layers */
    eng_pool *pool;        /* for the sums (NULL: one thread) */
    float *rw;             /* the observer's per-token row weights, [nt][2][rows] */
    size_t rw_cap;
    /* the observer's job for the pool: */
    site *cur;
    const float *x;
    uint32_t nt;
};

/* Rows i0..i1 of the current site's lower triangle += the batch's x x^T. */
static void sum_rows(void *arg, uint32_t i0, uint32_t i1)
{
    eng_gptq *g = arg;
    site *s = g->cur;
    uint32_t cols = s->cols;
    for (uint32_t tk = 0; tk < g->nt; tk++) {
        const float *row = g->x + (size_t)tk * cols;
        for (uint32_t i = i0; i < i1; i++) {
            double xi = row[i], *h = s->h + (size_t)i * cols;
            if (xi == 0)
                continue;
            for (uint32_t j = 0; j <= i; j++)
                h[j] += xi * row[j];
        }
    }
}

/* Rows i0..i1 of the current site's side-by-side sums (--asym): Hq's
 * lower triangle (in h) and C (in c) += the quantized model's inputs
 * against the float model's kept for the same tokens. */
static void sum_pair(void *arg, uint32_t i0, uint32_t i1)
{
    eng_gptq *g = arg;
    site *s = g->cur;
    tools_pair_sums(s->h, s->c, NULL, g->x, s->xf + (size_t)s->pos[1] * s->cols, g->nt, s->cols, i0, i1);
}

/* d[j] += a[0] v[0][j] + ... + a[3] v[3][j] for j < n, the four terms
 * added one by one in that order. */
static void add4(double *d, uint32_t n, const double *a, const float *const *v)
{
    const float *v0 = v[0], *v1 = v[1], *v2 = v[2], *v3 = v[3];
    double a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
    for (uint32_t j = 0; j < n; j++) {
        double t = d[j];
        t += a0 * v0[j];
        t += a1 * v1[j];
        t += a2 * v2[j];
        t += a3 * v3[j];
        d[j] = t;
    }
}

/* h's lower triangle (cols x cols) += wt[k] x[k] x[k]^T for k < n, and,
 * with c, c += wt[k] x[k] z[k]^T (whole rows). Every entry takes the
 * terms in k's order, so the sums are those of adding one token at a
 * time; four tokens share a pass, so h and c are loaded and stored once
 * for four products (these sums are most of --ffn-rows' time). */
static void row_outer(double *h, double *c, uint32_t cols, uint32_t n, const double *wt, const float *const *x,
                      const float *const *z)
{
    uint32_t k = 0;
    for (; k + 4 <= n; k += 4)
        for (uint32_t i = 0; i < cols; i++) {
            double a[4];
            for (int m = 0; m < 4; m++)
                a[m] = wt[k + m] * x[k + m][i];
            add4(h + (size_t)i * cols, i + 1, a, x + k);
            if (c)
                add4(c + (size_t)i * cols, cols, a, z + k);
        }
    for (; k < n; k++)
        for (uint32_t i = 0; i < cols; i++) {
            double a = wt[k] * x[k][i], *hi = h + (size_t)i * cols;
            for (uint32_t j = 0; j <= i; j++)
                hi[j] += a * x[k][j];
            if (c) {
                double *ci = c + (size_t)i * cols;
                for (uint32_t j = 0; j < cols; j++)
                    ci[j] += a * z[k][j];
            }
        }
}

/* The tokens of one row's sums with a weight other than zero, gathered a
 * few at a time in order and handed to row_outer. */
enum { ROW_BATCH = 64 };
typedef struct {
    double wt[ROW_BATCH];
    const float *x[ROW_BATCH], *z[ROW_BATCH];
    uint32_t n;
} row_batch;

static void row_add(row_batch *b, double *h, double *c, uint32_t cols, double wt, const float *x, const float *z)
{
    if (wt == 0)
        return;
    b->wt[b->n] = wt, b->x[b->n] = x, b->z[b->n] = z;
    if (++b->n == ROW_BATCH)
        row_outer(h, c, cols, b->n, b->wt, b->x, b->z), b->n = 0;
}

/* Rows r0..r1 (of 2 * rows: gate's, then up's) of the current site's
 * per-row Hessians += the batch's weighted x x^T (lower triangles). */
static void sum_row_hess(void *arg, uint32_t r0, uint32_t r1)
{
    eng_gptq *g = arg;
    site *s = g->cur;
    uint32_t cols = s->cols, rows = s->rows;
    row_batch b;
    for (uint32_t r = r0; r < r1; r++) {
        double *h = s->hr + (size_t)r * cols * cols;
        b.n = 0;
        for (uint32_t tk = 0; tk < g->nt; tk++)
            row_add(&b, h, NULL, cols, g->rw[((size_t)tk * 2 + r / rows) * rows + r % rows],
                    g->x + (size_t)tk * cols, NULL);
        row_outer(h, NULL, cols, b.n, b.wt, b.x, b.z);
    }
}

/* Rows r0..r1 (as sum_row_hess) of the current site's per-row sums on
 * the quantized model's inputs (--asym-rows): hr += wt xq xq^T (lower
 * triangles) and, with hc, hc += wt xq x^T, wt the float model's row
 * weights kept for the same tokens. */
static void sum_row_pair(void *arg, uint32_t r0, uint32_t r1)
{
    eng_gptq *g = arg;
    site *s = g->cur;
    uint32_t cols = s->cols, rows = s->rows, p1 = s->pos[1];
    row_batch b;
    for (uint32_t r = r0; r < r1; r++) {
        double *h = s->hr + (size_t)r * cols * cols, *c = s->hc ? s->hc + (size_t)r * cols * cols : NULL;
        b.n = 0;
        for (uint32_t tk = 0; tk < g->nt; tk++)
            row_add(&b, h, c, cols, s->rwf[((size_t)(p1 + tk) * 2 + r / rows) * rows + r % rows],
                    g->x + (size_t)tk * cols, s->xf + (size_t)(p1 + tk) * cols);
        row_outer(h, c, cols, b.n, b.wt, b.x, b.z);
    }
}

/* The batch's row weights (see site) into dst, or g->rw when NULL.
 * Returns 0 or ENG_ENOMEM. */
static int row_weights(eng_gptq *g, site *s, const float *x, uint32_t nt, float *dst)
{
    uint32_t cols = s->cols, rows = s->rows;
    size_t need = (size_t)nt * 2 * rows;
    if (!dst && need > g->rw_cap) {
        float *n = realloc(g->rw, need * sizeof *n);
        if (!n)
            return ENG_ENOMEM;
        g->rw = n, g->rw_cap = need;
    }
    for (uint32_t tk = 0; tk < nt; tk++) {
        const float *xt = x + (size_t)tk * cols;
        float *wg = (dst ? dst : g->rw) + (size_t)tk * 2 * rows, *wu = wg + rows;
        for (uint32_t i = 0; i < rows; i++) {
            const float *a = s->wgf + (size_t)i * cols, *b = s->wuf + (size_t)i * cols;
            double gi = 0, ui = 0;
            for (uint32_t c = 0; c < cols; c++)
                gi += (double)a[c] * xt[c], ui += (double)b[c] * xt[c];
            double sg = 1 / (1 + exp(-gi)), silu = gi * sg, dsilu = sg * (1 + gi * (1 - sg));
            wg[i] = (float)(dsilu * ui * dsilu * ui);
            wu[i] = (float)(silu * silu);
        }
    }
    return 0;
}

static void observe(void *user, const eng_weight *w, const float *x, uint32_t nt, uint32_t cols)
{
    eng_gptq *g = user;
    site *s = NULL;
    for (size_t k = 0; k < g->n && !s; k++) {
        size_t i = (g->last + k) % g->n; /* matmuls come in the same order every batch */
        if ((g->phase ? g->s[i].keyq : g->s[i].key) == w)
            s = &g->s[g->last = i];
    }
    if (!s || s->cols != cols)
        return;
    if (!s->h) {
        /* stage by stage: attn_output's site is summed in a group of its
         * own, but the q/k/v group's attention still checks against its
         * float inputs (the float model runs first, phase 0) */
        site *q = s->attn_of ? &g->s[s->attn_of - 1] : NULL;
        if (q && q->at && !q->bad && !g->phase && tools_attn_output(q->at, x, nt, g->pool))
            q->bad = 2;
        return;
    }
    for (size_t i = 0; i < (size_t)nt * cols && !s->bad; i++)
        if (!isfinite(x[i]))
            s->bad = 1;
    if (g->mq) {
        /* side by side: the float model's inputs kept, then the sums */
        uint32_t p0 = s->pos[g->phase];
        if (p0 + nt > g->n_ctx || s->bad || (g->phase && p0 + nt > s->pos[0]))
            return;
        if (g->phase) {
            g->cur = s, g->x = x, g->nt = nt;
            if (g->pool)
                eng_pool_run_range(g->pool, sum_pair, g, cols, 8);
            else
                sum_pair(g, 0, cols);
            if (s->rwf && g->pool)
                eng_pool_run_range(g->pool, sum_row_pair, g, 2 * s->rows, 4);
            else if (s->rwf)
                sum_row_pair(g, 0, 2 * s->rows);
            s->pos[1] += nt;
            return;
        }
        memcpy(s->xf + (size_t)p0 * cols, x, (size_t)nt * cols * sizeof *x);
        if (s->rwf) /* the float model's row weights kept: the sums wait for the quantized inputs */
            row_weights(g, s, x, nt, s->rwf + (size_t)p0 * 2 * s->rows);
        s->pos[0] += nt;
    }
    if (s->at)
        tools_attn_input(s->at, x, nt);
    if (s->attn_of && g->s[s->attn_of - 1].at && !s->bad &&
        tools_attn_output(g->s[s->attn_of - 1].at, x, nt, g->pool))
        s->bad = 2;
    g->cur = s, g->x = x, g->nt = nt;
    if (!g->mq && g->pool) /* with --asym, H is the quantized model's inputs' (above) */
        eng_pool_run_range(g->pool, sum_rows, g, cols, 8);
    else if (!g->mq)
        sum_rows(g, 0, cols);
    if (s->hr && !s->rwf && !s->bad) {
        if (row_weights(g, s, x, nt, NULL)) {
            s->bad = 2;
            return;
        }
        if (g->pool)
            eng_pool_run_range(g->pool, sum_row_hess, g, 2 * s->rows, 4);
        else
            sum_row_hess(g, 0, 2 * s->rows);
    }
}

static void observe_float(void *user, const eng_weight *w, const float *x, uint32_t nt, uint32_t cols)
{
    ((eng_gptq *)user)->phase = 0;
    observe(user, w, x, nt, cols);
}

static void observe_quant(void *user, const eng_weight *w, const float *x, uint32_t nt, uint32_t cols)
{
    ((eng_gptq *)user)->phase = 1;
    observe(user, w, x, nt, cols);
}

static void pair_window(void *user)
{
    eng_gptq *g = user;
    for (size_t i = 0; i < g->n; i++)
        g->s[i].pos[0] = g->s[i].pos[1] = 0;
}

int eng_gptq_asym_target(uint32_t n, const double *Hq, const double *C, double damp, double *T)
{
    size_t n2 = (size_t)n * n;
    double *L = malloc(n2 * sizeof *L + 1);
    if (!L)
        return ENG_ENOMEM;
    double mean = 0;
    for (uint32_t i = 0; i < n; i++)
        mean += Hq[(size_t)i * n + i];
    mean = mean > 0 ? mean / n : 1;
    int ok = 0;
    for (int tries = 0; tries < 5 && !ok; tries++, damp = damp > 0 ? damp * 10 : 1e-6) {
        memcpy(L, Hq, n2 * sizeof *L);
        for (uint32_t i = 0; i < n; i++) {
            double *d = &L[(size_t)i * n + i];
            *d = *d > 0 ? *d + damp * mean : 1; /* an input never seen: T's row is I's */
        }
        ok = !tools_chol_lower(L, n);
    }
    if (!ok) {
        free(L);
        return ENG_EFORMAT;
    }
    /* T = (Hq + damp)^-1 C, a column of C at a time: L y = c, L^T t = y */
    for (uint32_t j = 0; j < n; j++) {
        for (uint32_t i = 0; i < n; i++) {
            double t = Hq[(size_t)i * n + i] > 0 ? C[(size_t)i * n + j] : i == j;
            for (uint32_t k = 0; k < i; k++)
                t -= L[(size_t)i * n + k] * T[(size_t)k * n + j];
            T[(size_t)i * n + j] = t / L[(size_t)i * n + i];
        }
        for (uint32_t i = n; i-- > 0;) {
            double t = T[(size_t)i * n + j];
            for (uint32_t k = i + 1; k < n; k++)
                t -= L[(size_t)k * n + i] * T[(size_t)k * n + j];
            T[(size_t)i * n + j] = t / L[(size_t)i * n + i];
        }
    }
    free(L);
    return 0;
}

static site *add_site(eng_gptq *g, const eng_weight *key, uint32_t layer)
{
    if (g->n == g->cap) {
        size_t nc = g->cap ? 2 * g->cap : 32;
        site *ns = realloc(g->s, nc * sizeof *ns);
        if (!ns)
            return NULL;
        g->s = ns;
        g->cap = nc;
    }
    site *s = &g->s[g->n++];
    memset(s, 0, sizeof *s);
    s->key = key;
    s->cols = key->cols;
    s->layer = layer;
    return s;
}

static void name_site(site *s, const eng_model *m, const eng_weight *w, uint32_t l, const char *role)
{
    if (s->n_names == MAX_NAMES)
        return;
    tools_weight_name(m, w, (int)l, role, s->names[s->n_names], sizeof s->names[0]);
    for (int i = 0; i < s->n_names; i++)
        if (!strcmp(s->names[i], s->names[s->n_names]))
            return;
    s->n_names++;
}

/* The weight of the quantized model mq keying layer l's input `role`
 * (make_sites' keys; gate: the FFN's is keyed by its gate). */
static const eng_weight *quant_key(const eng_model *mq, uint32_t l, int role, int gate)
{
    const eng_layer *Q = eng_model_layer(mq, l);
    return role == 0 ? &Q->wq : role == 1 ? &Q->wo : role == 2 ? (gate ? &Q->w_gate : &Q->w_up) : &Q->w_down;
}

/* A site per distinct input of the dense layers, and the layers cut into
 * groups of at most max_bytes of Hessians (a layer larger than that is a
 * group of its own). */
static int make_sites(eng_gptq *g, const eng_model *m, uint64_t max_bytes, eng_err *e)
{
    const eng_model_info *in = eng_model_get_info(m);
    uint64_t bytes = 0;
    for (uint32_t l = 0; l < in->n_layers; l++) {
        const eng_layer *L = eng_model_layer(m, l);
        const eng_weight *keys[4] = {NULL, NULL, NULL, NULL};
        if (L->n_heads)
            keys[0] = &L->wq, keys[1] = &L->wo;
        if (L->ffn) {
            keys[2] = eng_model_ffn(m) == ENG_FFN_GELU ? &L->w_up : &L->w_gate;
            keys[3] = &L->w_down;
        }
        int rows_h = g->ffn_rows && keys[2] == &L->w_gate && L->w_gate.cols && L->w_up.rows == L->w_gate.rows &&
                     L->w_up.cols == L->w_gate.cols;
        int attn = g->attn_rows && L->n_heads && tools_attn_supported(m, l);
        if (attn) {
            /* a fused qkv tensor's rows cannot get Hessians of their own by name */
            char nq[96], nk[96], nv[96];
            tools_weight_name(m, &L->wq, (int)l, "attn_q.weight", nq, sizeof nq);
            tools_weight_name(m, &L->wk, (int)l, "attn_k.weight", nk, sizeof nk);
            tools_weight_name(m, &L->wv, (int)l, "attn_v.weight", nv, sizeof nv);
            attn = strcmp(nq, nk) && strcmp(nk, nv) && strcmp(nq, nv);
        }
        uint64_t lb = attn ? tools_attn_bytes(m, l, g->n_ctx) : 0;
        for (int k = 0; k < 4; k++)
            if (keys[k] && keys[k]->cols)
                lb += (uint64_t)keys[k]->cols * keys[k]->cols * sizeof(double);
        if (rows_h)
            lb += (uint64_t)2 * L->w_gate.rows * L->w_gate.cols * L->w_gate.cols * sizeof(double);
        if (rows_h && g->mq && g->asym_rows) /* the window's row weights and the per-row C */
            lb += (uint64_t)2 * L->w_gate.rows *
                  (g->n_ctx * sizeof(float) + (uint64_t)L->w_gate.cols * L->w_gate.cols * sizeof(double));
        const eng_weight *keysq[4] = {NULL, NULL, NULL, NULL};
        if (g->mq) {
            /* the same roles in the quantized model: the sums need both */
            for (int k = 0; k < 4; k++)
                keysq[k] = quant_key(g->mq, l, k, keys[2] == &L->w_gate);
            for (int k = 0; k < 4; k++)
                if (keys[k] && keys[k]->cols && keysq[k]->cols != keys[k]->cols)
                    return eng_errf(e, ENG_EINVAL, "the quantized model's layer %u differs in shape", l);
            /* the window's float inputs */
            for (int k = 0; k < 4; k++)
                if (keys[k] && keys[k]->cols)
                    lb += (uint64_t)keys[k]->cols * (keys[k]->cols * sizeof(double) + g->n_ctx * sizeof(float));
        }
        if (bytes && (bytes + lb > max_bytes || g->asym_seq))
            g->n_groups++, bytes = 0;
        bytes += lb;
        size_t q_site = g->n;
        for (int k = 0; k < 4; k++) {
            if (!keys[k] || !keys[k]->cols)
                continue;
            site *s = add_site(g, keys[k], l);
            if (!s)
                return eng_errf(e, ENG_ENOMEM, "out of memory");
            if (g->asym_seq == 2 && g->n > q_site + 1)
                g->n_groups++; /* stage by stage: each of the layer's inputs a group */
            s->group = g->n_groups;
            s->keyq = keysq[k];
            s->role = k;
            switch (k) {
            case 0:
                name_site(s, m, &L->wq, l, "attn_q.weight");
                name_site(s, m, &L->wk, l, "attn_k.weight");
                name_site(s, m, &L->wv, l, "attn_v.weight");
                s->attn = attn;
                break;
            case 1:
                name_site(s, m, &L->wo, l, "attn_output.weight");
                if (attn)
                    s->attn_of = q_site + 1;
                break;
            case 2:
                if (keys[2] == &L->w_gate)
                    name_site(s, m, &L->w_gate, l, "ffn_gate.weight");
                name_site(s, m, &L->w_up, l, "ffn_up.weight");
                if (rows_h)
                    s->wg = &L->w_gate, s->wu = &L->w_up, s->rows = L->w_gate.rows;
                break;
            default: name_site(s, m, &L->w_down, l, "ffn_down.weight"); break;
            }
        }
    }
    g->n_groups++;
    g->loaded = g->n_groups;
    return 0;
}

/* The blend (1 - a) I + a (Hq + damp)^-1 C of n x n C into C (no solve:
 * I). Returns 0 or ENG_ENOMEM. */
static int blend_target(const eng_gptq *g, uint32_t n, const double *Hq, double *C)
{
    double *T = malloc((size_t)n * n * sizeof *T);
    if (!T)
        return ENG_ENOMEM;
    int rt = eng_gptq_asym_target(n, Hq, C, g->asym_damp, T);
    if (rt && rt != ENG_EFORMAT) {
        free(T);
        return rt;
    }
    if (rt)
        for (size_t k = 0; k < (size_t)n * n; k++) /* no solve: the target stays W */
            T[k] = k % (n + 1) == 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            C[i * n + j] = g->asym_blend * T[i * n + j] + (i == j ? 1 - g->asym_blend : 0);
    free(T);
    return 0;
}

/* --asym-rows: each gate/up row's own target map from its weighted sums */
static int row_targets(const eng_gptq *g, site *s)
{
    size_t n2 = (size_t)s->cols * s->cols;
    for (uint32_t r = 0; r < 2 * s->rows; r++) {
        int rt = blend_target(g, s->cols, s->hr + r * n2, s->hc + r * n2);
        if (rt)
            return rt;
    }
    return 0;
}

/* Free the Hessians held and collect group grp's (progress: optional). */
static int load_group(eng_gptq *g, uint32_t grp, void (*progress)(void *, double, const char *), void *user,
                      eng_err *e)
{
    for (size_t i = 0; i < g->n; i++) {
        site *s = &g->s[i];
        free(s->h); free(s->hr); free(s->wgf); free(s->wuf); free(s->c); free(s->xf); free(s->rwf); free(s->hc);
        tools_attn_free(s->at);
        s->h = NULL, s->hr = NULL, s->wgf = s->wuf = NULL, s->at = NULL, s->c = NULL, s->xf = NULL;
        s->rwf = NULL, s->hc = NULL;
        s->bad = 0;
    }
    g->loaded = g->n_groups;
    double mb = 0;
    for (size_t i = 0; i < g->n; i++) {
        site *s = &g->s[i];
        if (s->group != grp)
            continue;
        mb += (double)s->cols * s->cols * sizeof(double) / 1e6;
        if (!(s->h = calloc((size_t)s->cols * s->cols, sizeof *s->h)) ||
            (g->mq && (!(s->c = calloc((size_t)s->cols * s->cols, sizeof *s->c)) ||
                       !(s->xf = malloc((size_t)g->n_ctx * s->cols * sizeof *s->xf)))))
            return eng_errf(e, ENG_ENOMEM, "GPTQ: out of memory for the Hessians of '%s' and its group (%.1f MB "
                            "so far; lower the budget to take fewer layers at once)", s->names[0], mb);
        if (s->wg) {
            size_t n = (size_t)s->rows * s->cols;
            const simd_traits *tg = simd_type_traits(s->wg->type), *tu = simd_type_traits(s->wu->type);
            s->hr = calloc(2 * n * s->cols, sizeof *s->hr);
            s->wgf = malloc(n * sizeof *s->wgf);
            s->wuf = malloc(n * sizeof *s->wuf);
            if (g->mq && g->asym_rows) {
                s->rwf = malloc((size_t)g->n_ctx * 2 * s->rows * sizeof *s->rwf);
                s->hc = calloc(2 * n * s->cols, sizeof *s->hc);
            }
            if (!s->hr || !s->wgf || !s->wuf || (g->mq && g->asym_rows && (!s->rwf || !s->hc)))
                return eng_errf(e, ENG_ENOMEM, "GPTQ: out of memory for the per-row Hessians of '%s'", s->names[0]);
            if (!tg || !tg->dequant || !tu || !tu->dequant)
                return eng_errf(e, ENG_EUNSUP, "GPTQ: cannot read '%s' as floats", s->names[0]);
            for (uint32_t r = 0; r < s->rows; r++) {
                tg->dequant((const char *)s->wg->data + r * s->wg->row_bytes, s->wgf + (size_t)r * s->cols, s->cols);
                tu->dequant((const char *)s->wu->data + r * s->wu->row_bytes, s->wuf + (size_t)r * s->cols, s->cols);
            }
        }
        if (s->attn && !(s->at = tools_attn_new(g->m, s->layer, g->n_tok, g->n_ctx)))
            return eng_errf(e, ENG_ENOMEM, "GPTQ: out of memory for the attention Hessians of '%s'", s->names[0]);
    }
    int r;
    if (g->mq) {
        tools_calib_pair pp = {.threads = g->threads, .window = pair_window, .on_float = observe_float,
                               .on_quant = observe_quant, .user = g, .progress = progress, .puser = user, .span = 1,
                               .what = "asym calibration"};
        r = tools_calib_pair_run(g->m, g->mq, g->ids, g->n_tok, g->n_ctx, &pp, e);
    } else {
        r = tools_calib_run(g->m, g->ids, g->n_tok, g->n_ctx, g->threads, observe, g, progress, user, 0, 1, e);
    }
    if (r)
        return r;
    for (size_t i = 0; i < g->n; i++) {
        site *s = &g->s[i];
        if (!s->h)
            continue;
        if (s->bad == 2)
            return eng_errf(e, ENG_ENOMEM, "GPTQ: out of memory for the row weights of '%s'", s->names[0]);
        if (s->bad)
            return eng_errf(e, ENG_EFORMAT, "GPTQ: non-finite activations reached '%s' (the model overflows on "
                            "this text)", s->names[0]);
        tools_mirror_lower(s->h, s->cols);
        if (s->at) {
            /* the recomputed attention must be the forward pass's (a
             * family's own score scale or RoPE factors would not be):
             * else the layer keeps the shared Hessians */
            double d = tools_attn_finish(s->at);
            if (d > ATTN_CHECK) {
                tools_attn_free(s->at);
                s->at = NULL;
                g->attn_off++;
            } else {
                g->attn_layers++;
                g->attn_err = d > g->attn_err ? d : g->attn_err;
            }
        }
        for (uint32_t r = 0; s->hr && r < 2 * s->rows; r++)
            tools_mirror_lower(s->hr + (size_t)r * s->cols * s->cols, s->cols);
        int rt = s->hc ? row_targets(g, s) : 0;
        if (rt)
            return eng_errf(e, rt, "GPTQ: out of memory for the row targets of '%s'", s->names[0]);
        /* C into the target map, blended: (1 - a) I + a T */
        if (s->c && (rt = blend_target(g, s->cols, s->h, s->c)))
            return eng_errf(e, rt, "GPTQ: out of memory for the target of '%s'", s->names[0]);
    }
    g->loaded = grp;
    return 0;
}

/* --asym: the pair runs whole windows only */
static int asym_tokens(eng_gptq *g, eng_err *e)
{
    if (g->n_tok < g->n_ctx)
        return eng_errf(e, ENG_EINVAL, "GPTQ: --asym needs a calibration window of %u tokens; the text has %u",
                        g->n_ctx, g->n_tok);
    g->n_tok -= g->n_tok % g->n_ctx;
    return 0;
}

int eng_gptq_collect(const char *model_path, const eng_gptq_opts *o, eng_gptq **out, eng_err *e)
{
    *out = NULL;
    eng_gptq *g = calloc(1, sizeof *g);
    int r = g ? 0 : eng_errf(e, ENG_ENOMEM, "out of memory");
    if (r || (r = eng_model_open(model_path, &g->m, e)))
        goto done;
    uint32_t n_ctx = o->n_ctx ? o->n_ctx : 256, max_tok = o->max_tokens ? o->max_tokens : 4096;
    if (n_ctx > eng_model_get_info(g->m)->ctx_train)
        n_ctx = eng_model_get_info(g->m)->ctx_train;
    g->n_ctx = n_ctx;
    g->threads = o->threads;
    if (o->asym_path) {
        g->asym_damp = o->asym_damp > 0 ? o->asym_damp : 0.01;
        g->asym_seq = o->asym_seq;
        g->asym_rows = o->ffn_rows ? o->asym_rows : 0;
        g->asym_blend = o->asym_blend > 0 ? o->asym_blend : 1;
        if (!(g->asym_path = malloc(strlen(o->asym_path) + 1))) {
            r = eng_errf(e, ENG_ENOMEM, "out of memory");
            goto done;
        }
        strcpy(g->asym_path, o->asym_path);
        if ((r = eng_gptq_asym_open(g, e))) /* no sites yet: the open and the shape check */
            goto done;
    }
    g->ffn_rows = o->ffn_rows;
    g->attn_rows = o->attn_rows;
    if (o->threads > 1 && !(g->pool = eng_pool_new(o->threads))) {
        r = eng_errf(e, ENG_ENOMEM, "out of memory for %d threads", o->threads);
        goto done;
    }
    if ((r = tools_calib_tokens(g->m, o->calib_text ? NULL : o->calib_path, o->calib_text, o->calib_len, 16,
                                max_tok, "GPTQ", &g->ids, &g->n_tok, e)) ||
        (g->mq && (r = asym_tokens(g, e))) ||
        (r = make_sites(g, g->m, o->max_bytes ? o->max_bytes : ENG_GPTQ_MAX_BYTES, e)) ||
        (r = load_group(g, 0, o->progress, o->user, e)))
        goto done;
done:
    if (r) {
        eng_gptq_free(g);
        return r;
    }
    *out = g;
    return 0;
}

int eng_gptq_hessian(eng_gptq *g, const char *name, const double **H, uint32_t *cols, eng_err *e)
{
    *H = NULL;
    *cols = 0;
    for (size_t i = 0; g && i < g->n; i++)
        for (int k = 0; k < g->s[i].n_names; k++) {
            site *s = &g->s[i];
            if (strcmp(s->names[k], name))
                continue;
            uint32_t grp = s->group;
            int r = grp == g->loaded ? 0 : load_group(g, grp, NULL, NULL, e);
            if (r)
                return r;
            *H = s->h;
            *cols = s->cols;
            return 0;
        }
    return 0;
}

int eng_gptq_row_hessians(eng_gptq *g, const char *name, const double **Hr, uint32_t *rows, uint32_t *per,
                          eng_err *e)
{
    *Hr = NULL;
    *rows = *per = 0;
    const double *H;
    uint32_t cols;
    int r = eng_gptq_hessian(g, name, &H, &cols, e);
    if (r || !H)
        return r;
    for (size_t i = 0; i < g->n; i++) {
        site *s = &g->s[i];
        if (s->h != H)
            continue;
        if (s->at) {
            char nm[96];
            tools_weight_name(g->m, &eng_model_layer(g->m, s->layer)->wv, (int)s->layer, "attn_v.weight", nm,
                              sizeof nm);
            if (!strcmp(name, nm))
                *Hr = tools_attn_v_hessians(s->at, rows, per);
            return 0;
        }
        if (!s->hr)
            return 0;
        char gn[96], un[96];
        tools_weight_name(g->m, s->wg, (int)s->layer, "ffn_gate.weight", gn, sizeof gn);
        tools_weight_name(g->m, s->wu, (int)s->layer, "ffn_up.weight", un, sizeof un);
        size_t n = (size_t)s->rows * s->cols * s->cols;
        if (!strcmp(name, gn))
            *Hr = s->hr;
        else if (!strcmp(name, un))
            *Hr = s->hr + n;
        if (*Hr)
            *rows = s->rows, *per = 1;
        return 0;
    }
    return 0;
}

int eng_gptq_target(eng_gptq *g, const char *name, const double **T, eng_err *e)
{
    *T = NULL;
    const double *H;
    uint32_t cols;
    int r = eng_gptq_hessian(g, name, &H, &cols, e);
    for (size_t i = 0; !r && H && i < g->n; i++)
        if (g->s[i].h == H)
            *T = g->s[i].c;
    return r;
}

int eng_gptq_row_targets(eng_gptq *g, const char *name, const double **Tr, eng_err *e)
{
    *Tr = NULL;
    const double *Hr;
    uint32_t rows, per;
    int r = eng_gptq_row_hessians(g, name, &Hr, &rows, &per, e);
    for (size_t i = 0; !r && Hr && i < g->n; i++) {
        site *s = &g->s[i];
        if (s->hr && s->hc && (Hr == s->hr || Hr == s->hr + (size_t)s->rows * s->cols * s->cols))
            *Tr = s->hc + (Hr - s->hr);
    }
    return r;
}

const char *eng_gptq_asym_pending(const eng_gptq *g, const char *name)
{
    for (size_t i = 0; g && g->asym_seq && g->asym_path && i < g->n; i++)
        for (int k = 0; k < g->s[i].n_names; k++)
            if (!strcmp(g->s[i].names[k], name))
                return g->s[i].group != g->loaded ? g->asym_path : NULL;
    return NULL;
}

long eng_gptq_asym_stage(const eng_gptq *g, const char *name)
{
    for (size_t i = 0; g && g->asym_seq && g->asym_path && i < g->n; i++)
        for (int k = 0; k < g->s[i].n_names; k++)
            if (!strcmp(g->s[i].names[k], name))
                return (long)g->s[i].group;
    return -1;
}

void eng_gptq_asym_close(eng_gptq *g)
{
    if (!g)
        return;
    eng_model_close(g->mq);
    g->mq = NULL;
}

int eng_gptq_asym_open(eng_gptq *g, eng_err *e)
{
    if (!g || !g->asym_path || g->mq)
        return 0;
    int r = eng_model_open(g->asym_path, &g->mq, e);
    if (r)
        return r;
    const eng_model_info *a = eng_model_get_info(g->m), *b = eng_model_get_info(g->mq);
    const char *why = "GPTQ: %s does not have the float model's shape (not the same model quantized)";
    if (a->n_layers != b->n_layers || a->dim != b->dim)
        return eng_errf(e, ENG_EINVAL, why, g->asym_path);
    for (size_t i = 0; i < g->n; i++) {
        site *s = &g->s[i];
        const eng_layer *L = eng_model_layer(g->m, s->layer);
        s->keyq = quant_key(g->mq, s->layer, s->role, s->key == &L->w_gate);
        if (s->keyq->cols != s->cols)
            return eng_errf(e, ENG_EINVAL, why, g->asym_path);
    }
    return 0;
}

uint32_t eng_gptq_tokens(const eng_gptq *g) { return g ? g->n_tok : 0; }

uint32_t eng_gptq_attn_layers(const eng_gptq *g, uint32_t *off, double *err)
{
    *off = g ? g->attn_off : 0;
    *err = g ? g->attn_err : 0;
    return g ? g->attn_layers : 0;
}

uint32_t eng_gptq_groups(const eng_gptq *g) { return g ? g->n_groups : 0; }

void eng_gptq_free(eng_gptq *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n; i++) {
        free(g->s[i].h); free(g->s[i].hr); free(g->s[i].wgf); free(g->s[i].wuf); free(g->s[i].c);
        free(g->s[i].xf); free(g->s[i].rwf); free(g->s[i].hc);
        tools_attn_free(g->s[i].at);
    }
    free(g->rw);
    free(g->s);
    free(g->ids);
    eng_pool_free(g->pool);
    eng_model_close(g->m);
    eng_model_close(g->mq);
    free(g->asym_path);
    free(g);
}
