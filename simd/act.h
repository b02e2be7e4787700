/* Private to simd/: the element-wise activations' one body, built once
 * per instruction set (act.c baseline, act_avx2.c, act_avx512.c) and
 * picked with the kernel set. Plain C the compiler vectorizes: each lane
 * does the scalar operations in the scalar order (selects, not branches;
 * no libm calls; the project builds with -ffp-contract=off), so every
 * build of it gives the same bits. The files that include it are built
 * with -fno-trapping-math, without which GCC keeps the selects as
 * branches and does not vectorize. */
#ifndef NIBBLE_ACT_H
#define NIBBLE_ACT_H

#include "attn.h"

/* g[i] = silu(g[i]) * u[i], silu(x) = x / (1 + e^-x), written as
 *     e = e^-|x| (attn.h's exp: e^a for a <= 0),
 *     silu(x) = (x >= 0 ? x : x * e) / (1 + e),
 * so the exp never overflows. NaN gives NaN, -inf NaN (-inf * 0), +inf
 * +inf; |x| > 87 gives x or -0. */
static inline void act_silu_mul(float *restrict g, const float *restrict u, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = g[i];
        float a = x < 0.0f ? x : -x;
        int ok = a >= ATTN_EXP_MIN; /* false for NaN */
        float ac = ok ? a : 0.0f;   /* keeps the exponent arithmetic defined */
        float t = ac * ATTN_LOG2E + ATTN_ROUND;
        float k = t - ATTN_ROUND;
        float r = ac - k * ATTN_LN2_HI;
        r = r - k * ATTN_LN2_LO;
        float p = ATTN_C7;
        p = p * r + ATTN_C6;
        p = p * r + ATTN_C5;
        p = p * r + ATTN_C4;
        p = p * r + ATTN_C3;
        p = p * r + ATTN_C2;
        p = p * r + 1.0f;
        p = p * r + 1.0f;
        uint32_t bits = (uint32_t)((int32_t)k + 127) << 23;
        float s;
        memcpy(&s, &bits, 4);
        /* every product is made in every lane, then selected: no
         * conditional float operation, so no branch */
        float ps = p * s;
        float e = ok ? ps : 0.0f;
        float xe = x * e;
        float num = x >= 0.0f ? x : xe;
        g[i] = num / (1.0f + e) * u[i];
    }
}

void simd_silu_mul_ref(float *g, const float *u, size_t n);
void simd_silu_mul_avx2(float *g, const float *u, size_t n);
void simd_silu_mul_avx512(float *g, const float *u, size_t n);

/* Put set k's activations into s (the baseline build for scalar and Arm,
 * where the baseline is already Advanced SIMD). */
void simd_set_act(enum simd_kernel k, simd_kernel_set *s);

#endif
