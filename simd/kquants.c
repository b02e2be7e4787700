/* K-quants: q4_k, q5_k and q6_k (ggml's 256-value super-block layouts,
 * described in simd.h), their reference dequantization and quantization,
 * the q8k activation format and the scalar dot products.
 *
 * Quantization is round-to-nearest with a search for each sub-block's
 * scale (and minimum): a grid of candidate inverse scales around the
 * plain min/max one, each giving a set of levels, for which the best
 * scale (and offset) is solved by weighted least squares; the candidate
 * with the smallest weighted squared error wins. Weights |x| + rms favour
 * the large values, which matter most to a matrix product. Sub-block
 * scales are then quantized against the super-block scale (6 bits for
 * q4_k/q5_k, 8 bits for q6_k) and the levels recomputed with the scales
 * as stored, so what is written is exactly what the search measured.
 *
 * Dot products (weights against q8k activations) keep every integer sum
 * exact and do the float work once per super-block, in this order:
 *     term = (d_w * d_a) * (float)sumi  [- (dmin_w * d_a) * (float)summ]
 * where sumi = sum over sub-blocks of scale_j * (q . a)_j and summ = sum
 * of min_j * (sum of a over sub-block j); acc[b mod 8] += term for blocks
 * b in increasing order, lanes combined by simd_reduce8. Any faster set
 * must follow the same order to give the same bits. */
#include "kquants.h"

#include <math.h>
#include <string.h>

#define QKK SIMD_QKK
#define NSTEP 10 /* candidate inverse scales: nmax + k/NSTEP for k in -NSTEP..NSTEP */

/* Nearest integer in [lo, hi]; NaN gives lo. */
static inline int qround(float v, int lo, int hi)
{
    if (!(v > (float)lo))
        return lo;
    if (v >= (float)hi)
        return hi;
    return simd_rint_small(v);
}

/* ---- 6-bit scale packing of q4_k / q5_k ---- */

static inline void get_sm(int j, const uint8_t *q, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0f) | (q[j - 4] >> 6) << 4;
        *m = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
    }
}

static void put_sm(uint8_t *q, const uint8_t sc[8], const uint8_t m[8])
{
    for (int j = 0; j < 4; j++) {
        q[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        q[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
        q[j + 8] = (uint8_t)((sc[j + 4] & 0x0f) | (m[j + 4] & 0x0f) << 4);
    }
}

/* ---- dequantize ---- */

void simd_deq_q4_k(const void *src, float *dst, size_t n)
{
    const simd_block_q4_k *b = src;
    for (size_t i = 0; i < n / QKK; i++, dst += QKK) {
        float d = simd_f16_to_f32(b[i].d), dmin = simd_f16_to_f32(b[i].dmin);
        for (int p = 0; p < 4; p++) {
            int s0, m0, s1, m1;
            get_sm(2 * p, b[i].scales, &s0, &m0);
            get_sm(2 * p + 1, b[i].scales, &s1, &m1);
            float d0 = d * (float)s0, d1 = d * (float)s1, n0 = dmin * (float)m0, n1 = dmin * (float)m1;
            const uint8_t *q = b[i].qs + 32 * p;
            for (int l = 0; l < 32; l++) {
                dst[64 * p + l] = d0 * (float)(q[l] & 0x0f) - n0;
                dst[64 * p + 32 + l] = d1 * (float)(q[l] >> 4) - n1;
            }
        }
    }
}

void simd_deq_q5_k(const void *src, float *dst, size_t n)
{
    const simd_block_q5_k *b = src;
    for (size_t i = 0; i < n / QKK; i++, dst += QKK) {
        float d = simd_f16_to_f32(b[i].d), dmin = simd_f16_to_f32(b[i].dmin);
        for (int p = 0; p < 4; p++) {
            int s0, m0, s1, m1;
            get_sm(2 * p, b[i].scales, &s0, &m0);
            get_sm(2 * p + 1, b[i].scales, &s1, &m1);
            float d0 = d * (float)s0, d1 = d * (float)s1, n0 = dmin * (float)m0, n1 = dmin * (float)m1;
            const uint8_t *q = b[i].qs + 32 * p;
            for (int l = 0; l < 32; l++) {
                int lo = (q[l] & 0x0f) | ((b[i].qh[l] >> (2 * p)) & 1) << 4;
                int hi = (q[l] >> 4) | ((b[i].qh[l] >> (2 * p + 1)) & 1) << 4;
                dst[64 * p + l] = d0 * (float)lo - n0;
                dst[64 * p + 32 + l] = d1 * (float)hi - n1;
            }
        }
    }
}

/* q6_k level (0..63) of value v (0..255) of a block. Each half of 128
 * values uses 64 ql bytes and 32 qh bytes: value 128h + 32k + l (k 0..3)
 * has its low nibble in ql[64h + 32(k&1) + l] (low nibble for k < 2, high
 * for k >= 2) and its top 2 bits at bit 2k of qh[32h + l]. */
static inline int q6_level(const simd_block_q6_k *b, int v)
{
    int h = v >> 7, k = (v >> 5) & 3, l = v & 31;
    uint8_t lo = b->ql[64 * h + 32 * (k & 1) + l];
    int low = k < 2 ? lo & 0x0f : lo >> 4;
    return low | ((b->qh[32 * h + l] >> (2 * k)) & 3) << 4;
}

void simd_deq_q6_k(const void *src, float *dst, size_t n)
{
    const simd_block_q6_k *b = src;
    for (size_t i = 0; i < n / QKK; i++, dst += QKK) {
        float d = simd_f16_to_f32(b[i].d);
        for (int v = 0; v < QKK; v++)
            dst[v] = d * (float)b[i].scales[v / 16] * (float)(q6_level(&b[i], v) - 32);
    }
}

/* ---- scale search ---- */

/* Fit x[i] ~ a*L[i] - m with L in 0..nmax, a >= 0, m >= 0 (the format
 * stores a non-negative minimum to subtract), minimising sum w*(err)^2.
 * Returns a and m; L is not kept (recomputed after scale quantization). */
static void fit_asym_impl(const float *x, const float *w, int n, int nmax, int free_offset, float *a_out,
                          float *m_out)
{
    float lo = free_offset ? x[0] : 0, hi = x[0];
    for (int i = 0; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
    }
    *a_out = 0;
    *m_out = -lo;
    if (!(hi > lo))
        return;
    float best = INFINITY;
    uint8_t L[64];
    for (int k = -NSTEP; k <= NSTEP; k++) {
        float is = ((float)nmax + (float)k / NSTEP) / (hi - lo);
        double sw = 0, sl = 0, sll = 0, sx = 0, slx = 0;
        for (int i = 0; i < n; i++) {
            int l = qround((x[i] - lo) * is, 0, nmax);
            L[i] = (uint8_t)l;
            sw += w[i];
            sl += w[i] * l;
            sll += w[i] * l * l;
            sx += w[i] * x[i];
            slx += w[i] * l * x[i];
        }
        double det = sw * sll - sl * sl, a, b;
        if (det <= 0)
            continue;
        a = (sw * slx - sl * sx) / det;
        b = (sll * sx - sl * slx) / det;
        if (b > 0 && !free_offset) { /* the format cannot add: pin the offset at 0 */
            b = 0;
            a = sll > 0 ? slx / sll : 0;
        }
        if (!(a > 0))
            continue;
        double err = 0;
        for (int i = 0; i < n; i++) {
            double e = a * L[i] + b - x[i];
            err += w[i] * e * e;
        }
        if (err < best) {
            best = (float)err;
            *a_out = (float)a;
            *m_out = (float)-b;
        }
    }
    if (best == INFINITY) {
        *a_out = (hi - lo) / (float)nmax;
        *m_out = -lo;
    }
}

static void fit_asym(const float *x, const float *w, int n, int nmax, float *a_out, float *m_out)
{
    fit_asym_impl(x, w, n, nmax, 0, a_out, m_out);
}

/* Fit x[i] ~ a*L[i] with L in -nneg..npos (either sign of a), minimising
 * sum w*(err)^2; returns a. */
static float fit_sym(const float *x, const float *w, int n, int nneg, int npos)
{
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (!(amax > 0))
        return 0;
    double best = -1;
    float a_best = max / (float)-nneg;
    for (int sign = 0; sign < 2; sign++)
        for (int k = -NSTEP; k <= NSTEP; k++) {
            /* sign 0: max maps to -nneg (the longer side); sign 1: to +npos */
            float is = sign ? ((float)npos + (float)k / NSTEP) / max : -((float)nneg + (float)k / NSTEP) / max;
            double sxl = 0, sll = 0;
            for (int i = 0; i < n; i++) {
                int l = qround(x[i] * is, -nneg, npos);
                sxl += w[i] * x[i] * l;
                sll += w[i] * l * l;
            }
            /* the error at the best a is sum w x^2 - sxl^2/sll: maximise sxl^2/sll */
            if (sll > 0 && sxl * sxl / sll > best) {
                best = sxl * sxl / sll;
                a_best = (float)(sxl / sll);
            }
        }
    return a_best;
}

static void weights(const float *x, int n, float rms, float *w)
{
    for (int i = 0; i < n; i++)
        w[i] = rms + fabsf(x[i]);
}

/* Weights of n values for the scale searches: with an importance imp
 * (one a value, not all zero) imp[i] * sqrt(sigma2 + x[i]^2), sigma2
 * twice the mean square, so that small values still count; without,
 * rms + |x[i]|. */
void simd_kq_weights(const float *x, const float *imp, int n, float *w)
{
    double ss = 0, is = 0;
    for (int i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    if (imp)
        for (int i = 0; i < n; i++)
            is += imp[i] > 0 ? imp[i] : 0;
    if (imp && is > 0) {
        float s2 = (float)(2 * ss / n);
        for (int i = 0; i < n; i++)
            w[i] = (imp[i] > 0 ? imp[i] : 0) * sqrtf(s2 + x[i] * x[i]);
        return;
    }
    weights(x, n, (float)sqrt(ss / n), w);
}

/* A super-block scale for values up to vmax in `levels` steps, rounded to
 * f16 as stored (0 if vmax is 0). */
static float super_scale(float vmax, int levels, simd_f16 *stored)
{
    *stored = simd_f32_to_f16(vmax > 0 ? vmax / (float)levels : 0.0f);
    return simd_f16_to_f32(*stored);
}

/* The super-block scale of the sub-block scales (or minima) v[0..n),
 * each stored as d * L with L in 0..nmax, for the least
 * sum sw[j] * (v[j] - d*L[j])^2 (sw: the sub-block's total weight):
 * candidates vmax / (nmax + k/10) for k in -4..4, each refitted to its
 * levels and rounded to f16 as stored. Importance-weighted quantization
 * only: the plain path keeps super_scale's vmax / nmax. */
static float super_scale_w(const float *v, const float *sw, int n, int nmax, simd_f16 *stored)
{
    float vmax = 0;
    for (int j = 0; j < n; j++)
        vmax = fmaxf(vmax, v[j]);
    float d0 = super_scale(vmax, nmax, stored);
    if (!(vmax > 0))
        return d0;
    double best = INFINITY;
    simd_f16 best16 = *stored;
    for (int k = -4; k <= 4; k++) {
        float is = ((float)nmax + 0.1f * (float)k) / vmax;
        double sl2 = 0, slv = 0;
        for (int j = 0; j < n; j++) {
            int l = qround(v[j] * is, 0, nmax);
            slv += sw[j] * v[j] * l;
            sl2 += sw[j] * l * l;
        }
        if (!(sl2 > 0))
            continue;
        simd_f16 d16 = simd_f32_to_f16((float)(slv / sl2));
        float d = simd_f16_to_f32(d16);
        if (!(d > 0))
            continue;
        double err = 0;
        for (int j = 0; j < n; j++) {
            double e = v[j] - d * qround(v[j] / d, 0, nmax);
            err += sw[j] * e * e;
        }
        if (err < best)
            best = err, best16 = d16;
    }
    *stored = best16;
    return simd_f16_to_f32(best16);
}

/* q4_k and q5_k share everything but the level count and the packing:
 * levels 0..nmax for the 8 sub-blocks of 32 into L (256 values). */
static void quant_k_asym(const float *x, const float *imp, int nmax, simd_f16 *d16, simd_f16 *dmin16,
                         uint8_t scales[12], uint8_t L[QKK])
{
    float a[8], m[8], w[QKK], amax = 0, mmax = 0;
    simd_kq_weights(x, imp, QKK, w);
    for (int j = 0; j < 8; j++) {
        fit_asym(x + 32 * j, w + 32 * j, 32, nmax, &a[j], &m[j]);
        if (a[j] > amax) amax = a[j];
        if (m[j] > mmax) mmax = m[j];
    }
    float d, dmin;
    if (imp) { /* the sub-block scales and minima searched against the weights too */
        float sw[8];
        for (int j = 0; j < 8; j++) {
            sw[j] = 0;
            for (int i = 0; i < 32; i++)
                sw[j] += w[32 * j + i];
        }
        d = super_scale_w(a, sw, 8, 63, d16);
        dmin = super_scale_w(m, sw, 8, 63, dmin16);
    } else {
        d = super_scale(amax, 63, d16);
        dmin = super_scale(mmax, 63, dmin16);
    }
    uint8_t sc[8], mq[8];
    for (int j = 0; j < 8; j++) {
        sc[j] = (uint8_t)(d > 0 ? qround(a[j] / d, 0, 63) : 0);
        mq[j] = (uint8_t)(dmin > 0 ? qround(m[j] / dmin, 0, 63) : 0);
        float ds = d * (float)sc[j], ms = dmin * (float)mq[j];
        for (int i = 0; i < 32; i++)
            L[32 * j + i] = (uint8_t)(ds > 0 ? qround((x[32 * j + i] + ms) / ds, 0, nmax) : 0);
    }
    put_sm(scales, sc, mq);
}

void simd_quant_q4_k_imp(const float *src, void *dst, size_t n, const float *imp)
{
    simd_block_q4_k *b = dst;
    uint8_t L[QKK];
    for (size_t i = 0; i < n / QKK; i++, src += QKK) {
        quant_k_asym(src, imp ? imp + i * QKK : NULL, 15, &b[i].d, &b[i].dmin, b[i].scales, L);
        for (int p = 0; p < 4; p++)
            for (int l = 0; l < 32; l++)
                b[i].qs[32 * p + l] = (uint8_t)(L[64 * p + l] | L[64 * p + 32 + l] << 4);
    }
}

void simd_quant_q5_k_imp(const float *src, void *dst, size_t n, const float *imp)
{
    simd_block_q5_k *b = dst;
    uint8_t L[QKK];
    for (size_t i = 0; i < n / QKK; i++, src += QKK) {
        quant_k_asym(src, imp ? imp + i * QKK : NULL, 31, &b[i].d, &b[i].dmin, b[i].scales, L);
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int p = 0; p < 4; p++)
            for (int l = 0; l < 32; l++) {
                int lo = L[64 * p + l], hi = L[64 * p + 32 + l];
                b[i].qs[32 * p + l] = (uint8_t)((lo & 0x0f) | (hi & 0x0f) << 4);
                b[i].qh[l] |= (uint8_t)((lo >> 4) << (2 * p) | (hi >> 4) << (2 * p + 1));
            }
    }
}

void simd_quant_q6_k_imp(const float *src, void *dst, size_t n, const float *imp)
{
    simd_block_q6_k *b = dst;
    for (size_t i = 0; i < n / QKK; i++, src += QKK) {
        float a[16], w[QKK], amax = 0;
        simd_kq_weights(src, imp ? imp + i * QKK : NULL, QKK, w);
        for (int j = 0; j < 16; j++) {
            a[j] = fit_sym(src + 16 * j, w + 16 * j, 16, 32, 31);
            if (fabsf(a[j]) > amax) amax = fabsf(a[j]);
        }
        float d = super_scale(amax, 127, &b[i].d);
        uint8_t L[QKK];
        for (int j = 0; j < 16; j++) {
            int sc = d > 0 ? qround(a[j] / d, -127, 127) : 0;
            b[i].scales[j] = (int8_t)sc;
            float ds = d * (float)sc;
            for (int k = 0; k < 16; k++)
                L[16 * j + k] = (uint8_t)(ds != 0 ? qround(src[16 * j + k] / ds, -32, 31) + 32 : 32);
        }
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const uint8_t *q = L + 128 * h + l; /* q[0], q[32], q[64], q[96]: k = 0..3 */
                b[i].ql[64 * h + l] = (uint8_t)((q[0] & 0x0f) | (q[64] & 0x0f) << 4);
                b[i].ql[64 * h + 32 + l] = (uint8_t)((q[32] & 0x0f) | (q[96] & 0x0f) << 4);
                b[i].qh[32 * h + l] = (uint8_t)(q[0] >> 4 | (q[32] >> 4) << 2 | (q[64] >> 4) << 4 | (q[96] >> 4) << 6);
            }
    }
}

void simd_quant_q4_k(const float *src, void *dst, size_t n) { simd_quant_q4_k_imp(src, dst, n, NULL); }
void simd_quant_q5_k(const float *src, void *dst, size_t n) { simd_quant_q5_k_imp(src, dst, n, NULL); }
void simd_quant_q6_k(const float *src, void *dst, size_t n) { simd_quant_q6_k_imp(src, dst, n, NULL); }

/* ---- activations ---- */

/* Over 256 values: q = x * (127/amax) made total (NaN -> 0, clamped to
 * +-127) and rounded half to even, d = 1/(127/amax); bsums exact. This is
 * llama.cpp's q8_K to the bit (its codes and scale both negated when the
 * largest value is positive), so the k-quant and i-quant dots see the
 * same integers as ggml's; q8a keeps amax/127 and 1/d. */
void simd_q8k_quant_ref(const float *x, void *dst, size_t n)
{
    simd_block_q8k *b = dst;
    for (size_t i = 0; i < n / QKK; i++, x += QKK) {
        float amax = 0;
        for (int j = 0; j < QKK; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        float id = amax != 0 ? 127.0f / amax : 0.0f, d = id != 0 ? 1.0f / id : amax / 127.0f;
        for (int s = 0; s < QKK / 16; s++) {
            int sum = 0;
            for (int j = 16 * s; j < 16 * s + 16; j++) {
                float t = x[j] * id;
                if (isnan(t))
                    t = 0;
                t = t > 127.0f ? 127.0f : t < -127.0f ? -127.0f : t;
                int q = (int)lrintf(t);
                b[i].qs[j] = (int8_t)q;
                sum += q;
            }
            b[i].bsums[s] = (int16_t)sum;
        }
        b[i].d = d;
    }
}

/* ---- scalar dots ---- */

static float dot_q4_k(size_t n, const void *w, const void *a)
{
    const simd_block_q4_k *x = w;
    const simd_block_q8k *y = a;
    float acc[8] = {0};
    for (size_t b = 0; b < n / QKK; b++) {
        int32_t sumi = 0, summ = 0;
        for (int p = 0; p < 4; p++) {
            int s0, m0, s1, m1;
            get_sm(2 * p, x[b].scales, &s0, &m0);
            get_sm(2 * p + 1, x[b].scales, &s1, &m1);
            const uint8_t *q = x[b].qs + 32 * p;
            const int8_t *v = y[b].qs + 64 * p;
            int32_t lo = 0, hi = 0;
            for (int l = 0; l < 32; l++) {
                lo += (q[l] & 0x0f) * v[l];
                hi += (q[l] >> 4) * v[32 + l];
            }
            sumi += s0 * lo + s1 * hi;
            summ += m0 * (y[b].bsums[4 * p] + y[b].bsums[4 * p + 1]) + m1 * (y[b].bsums[4 * p + 2] + y[b].bsums[4 * p + 3]);
        }
        acc[b & 7] += (simd_f16_to_f32(x[b].d) * y[b].d) * (float)sumi -
                      (simd_f16_to_f32(x[b].dmin) * y[b].d) * (float)summ;
    }
    return simd_reduce8(acc);
}

static float dot_q5_k(size_t n, const void *w, const void *a)
{
    const simd_block_q5_k *x = w;
    const simd_block_q8k *y = a;
    float acc[8] = {0};
    for (size_t b = 0; b < n / QKK; b++) {
        int32_t sumi = 0, summ = 0;
        for (int p = 0; p < 4; p++) {
            int s0, m0, s1, m1;
            get_sm(2 * p, x[b].scales, &s0, &m0);
            get_sm(2 * p + 1, x[b].scales, &s1, &m1);
            const uint8_t *q = x[b].qs + 32 * p;
            const int8_t *v = y[b].qs + 64 * p;
            int32_t lo = 0, hi = 0;
            for (int l = 0; l < 32; l++) {
                int ql = (q[l] & 0x0f) | ((x[b].qh[l] >> (2 * p)) & 1) << 4;
                int qh = (q[l] >> 4) | ((x[b].qh[l] >> (2 * p + 1)) & 1) << 4;
                lo += ql * v[l];
                hi += qh * v[32 + l];
            }
            sumi += s0 * lo + s1 * hi;
            summ += m0 * (y[b].bsums[4 * p] + y[b].bsums[4 * p + 1]) + m1 * (y[b].bsums[4 * p + 2] + y[b].bsums[4 * p + 3]);
        }
        acc[b & 7] += (simd_f16_to_f32(x[b].d) * y[b].d) * (float)sumi -
                      (simd_f16_to_f32(x[b].dmin) * y[b].d) * (float)summ;
    }
    return simd_reduce8(acc);
}

static float dot_q6_k(size_t n, const void *w, const void *a)
{
    const simd_block_q6_k *x = w;
    const simd_block_q8k *y = a;
    float acc[8] = {0};
    for (size_t b = 0; b < n / QKK; b++) {
        int32_t sumi = 0;
        for (int j = 0; j < 16; j++) {
            int32_t s = 0;
            for (int v = 16 * j; v < 16 * j + 16; v++)
                s += (q6_level(&x[b], v) - 32) * y[b].qs[v];
            sumi += x[b].scales[j] * s;
        }
        acc[b & 7] += (simd_f16_to_f32(x[b].d) * y[b].d) * (float)sumi;
    }
    return simd_reduce8(acc);
}

void simd_set_kquants_scalar(simd_kernel_set *s)
{
    s->dot[SIMD_Q4_K] = dot_q4_k;
    s->dot[SIMD_Q5_K] = dot_q5_k;
    s->dot[SIMD_Q6_K] = dot_q6_k;
}

/* ---- the scale searches, for the other K-type files (lquants.c) ---- */

void simd_kq_fit_asym(const float *x, const float *w, int n, int nmax, float *a, float *m)
{
    fit_asym(x, w, n, nmax, a, m);
}

void simd_kq_fit_affine(const float *x, const float *w, int n, int nmax, float *a, float *m)
{
    fit_asym_impl(x, w, n, nmax, 1, a, m);
}

float simd_kq_fit_sym(const float *x, const float *w, int n, int nneg, int npos)
{
    return fit_sym(x, w, n, nneg, npos);
}
