/* The scalar kernel set: the reference every other set must reproduce bit
 * for bit. The order below IS the definition; change it only together
 * with every set (kernels_x86.h explains how they follow it).
 *  - quantized types: integer block sums are exact; per block the float
 *    work is
 *        term = (d_w * d_a) * (float)isum   [+ (m_w * d_a) * (float)asum]
 *    (both products, then their sum), and acc[b mod 8] += term, blocks in
 *    increasing b;
 *  - f32/f16/bf16 weights: acc[i mod 8] += w[i] * a[i], i increasing;
 *  - the 8 lanes are combined by simd_reduce8.
 * No FMA anywhere (-ffp-contract=off). A set may add extra zero terms
 * (padding): an accumulator starting at +0 never becomes -0, so they
 * change nothing. */
#include "simd_internal.h"

static float dot_f32(size_t n, const float *a, const float *b)
{
    float acc[8] = {0};
    for (size_t i = 0; i < n; i++)
        acc[i & 7] += a[i] * b[i];
    return simd_reduce8(acc);
}

static float dot_w_f32(size_t n, const void *w, const void *a) { return dot_f32(n, w, a); }

static float dot_w_f16(size_t n, const void *w, const void *a)
{
    const simd_f16 *x = w;
    const float *y = a;
    float acc[8] = {0};
    for (size_t i = 0; i < n; i++)
        acc[i & 7] += simd_f16_to_f32(x[i]) * y[i];
    return simd_reduce8(acc);
}

static float dot_w_bf16(size_t n, const void *w, const void *a)
{
    const simd_bf16 *x = w;
    const float *y = a;
    float acc[8] = {0};
    for (size_t i = 0; i < n; i++)
        acc[i & 7] += simd_bf16_to_f32(x[i]) * y[i];
    return simd_reduce8(acc);
}

static float dot_q8_0(size_t n, const void *w, const void *a)
{
    const simd_block_q8_0 *x = w;
    const simd_block_q8a *y = a;
    float acc[8] = {0};
    for (size_t b = 0; b < n / SIMD_QK; b++) {
        int32_t s = 0;
        for (int j = 0; j < SIMD_QK; j++)
            s += (int32_t)x[b].qs[j] * y[b].qs[j];
        acc[b & 7] += (simd_f16_to_f32(x[b].d) * y[b].d) * (float)s;
    }
    return simd_reduce8(acc);
}

static float dot_q4_0(size_t n, const void *w, const void *a)
{
    const simd_block_q4_0 *x = w;
    const simd_block_q8a *y = a;
    float acc[8] = {0};
    for (size_t b = 0; b < n / SIMD_QK; b++) {
        int32_t s = 0;
        for (int j = 0; j < SIMD_QK / 2; j++)
            s += ((x[b].qs[j] & 0x0f) - 8) * y[b].qs[j] + ((x[b].qs[j] >> 4) - 8) * y[b].qs[j + 16];
        acc[b & 7] += (simd_f16_to_f32(x[b].d) * y[b].d) * (float)s;
    }
    return simd_reduce8(acc);
}

static float dot_q4_1(size_t n, const void *w, const void *a)
{
    const simd_block_q4_1 *x = w;
    const simd_block_q8a *y = a;
    float acc[8] = {0};
    for (size_t b = 0; b < n / SIMD_QK; b++) {
        int32_t s = 0;
        for (int j = 0; j < SIMD_QK / 2; j++)
            s += (x[b].qs[j] & 0x0f) * y[b].qs[j] + (x[b].qs[j] >> 4) * y[b].qs[j + 16];
        acc[b & 7] += (simd_f16_to_f32(x[b].d) * y[b].d) * (float)s +
                      (simd_f16_to_f32(x[b].m) * y[b].d) * (float)y[b].sum;
    }
    return simd_reduce8(acc);
}

static inline uint32_t qh_word(const uint8_t qh[4])
{
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

static float dot_q5_0(size_t n, const void *w, const void *a)
{
    const simd_block_q5_0 *x = w;
    const simd_block_q8a *y = a;
    float acc[8] = {0};
    for (size_t b = 0; b < n / SIMD_QK; b++) {
        uint32_t qh = qh_word(x[b].qh);
        int32_t s = 0;
        for (int j = 0; j < SIMD_QK / 2; j++) {
            int lo = ((x[b].qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4) - 16;
            int hi = ((x[b].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4) - 16;
            s += lo * y[b].qs[j] + hi * y[b].qs[j + 16];
        }
        acc[b & 7] += (simd_f16_to_f32(x[b].d) * y[b].d) * (float)s;
    }
    return simd_reduce8(acc);
}

static float dot_q5_1(size_t n, const void *w, const void *a)
{
    const simd_block_q5_1 *x = w;
    const simd_block_q8a *y = a;
    float acc[8] = {0};
    for (size_t b = 0; b < n / SIMD_QK; b++) {
        uint32_t qh = qh_word(x[b].qh);
        int32_t s = 0;
        for (int j = 0; j < SIMD_QK / 2; j++) {
            int lo = (x[b].qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
            int hi = (x[b].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            s += lo * y[b].qs[j] + hi * y[b].qs[j + 16];
        }
        acc[b & 7] += (simd_f16_to_f32(x[b].d) * y[b].d) * (float)s +
                      (simd_f16_to_f32(x[b].m) * y[b].d) * (float)y[b].sum;
    }
    return simd_reduce8(acc);
}

void simd_set_scalar(simd_kernel_set *s)
{
    s->q8a_quant = simd_q8a_quant_ref;
    s->q8k_quant = simd_q8k_quant_ref;
    s->dot_f32 = dot_f32;
    s->dot[SIMD_F32] = dot_w_f32;
    s->dot[SIMD_F16] = dot_w_f16;
    s->dot[SIMD_BF16] = dot_w_bf16;
    s->dot[SIMD_Q8_0] = dot_q8_0;
    s->dot[SIMD_Q4_0] = dot_q4_0;
    s->dot[SIMD_Q4_1] = dot_q4_1;
    s->dot[SIMD_Q5_0] = dot_q5_0;
    s->dot[SIMD_Q5_1] = dot_q5_1;
}
