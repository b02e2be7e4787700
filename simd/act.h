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

/* e^a for a <= 0 (attn.h's exp, the same operations), +0 for a below
 * ATTN_EXP_MIN and for NaN; branch-free: the exp is made in every lane
 * (of a safe value where a is out of range), then selected, since a
 * conditional float operation would keep the branch. */
static inline float act_exp_neg(float a)
{
    int ok = a >= ATTN_EXP_MIN; /* false for NaN */
    float e = attn_exp_core(ok ? a : 0.0f);
    return ok ? e : 0.0f;
}

/* x * sigmoid(z) = x / (1 + e^-z), written as
 *     e = e^-|z|,  (z >= 0 ? x : x * e) / (1 + e),
 * so the exp never overflows. */
static inline float act_x_sigmoid(float x, float z)
{
    float e = act_exp_neg(z < 0.0f ? z : -z);
    float xe = x * e;
    float num = z >= 0.0f ? x : xe;
    return num / (1.0f + e);
}

/* g[i] = silu(g[i]) * u[i], silu(x) = x * sigmoid(x). NaN gives NaN,
 * -inf NaN (-inf * 0), +inf +inf; |x| > 87 gives x or -0. */
static inline void act_silu_mul(float *restrict g, const float *restrict u, size_t n)
{
    for (size_t i = 0; i < n; i++)
        g[i] = act_x_sigmoid(g[i], g[i]) * u[i];
}

/* gpt-oss's clamped SwiGLU: x = min(g, limit), y = u clamped to
 * [-limit, limit], g = x * sigmoid(alpha x) * (y + 1). A NaN gate stays
 * NaN (the min keeps it), as does a NaN up. */
static inline void act_swiglu_oai(float *restrict g, const float *restrict u, size_t n, float alpha, float limit)
{
    for (size_t i = 0; i < n; i++) {
        float x = g[i] > limit ? limit : g[i];
        float y = u[i] > limit ? limit : u[i] < -limit ? -limit : u[i];
        g[i] = act_x_sigmoid(x, alpha * x) * (y + 1.0f);
    }
}

/* g[i] = gelu(g[i]), the tanh form GPT-2 was trained with:
 * 0.5 x (1 + tanh(y)), y = sqrt(2/pi) (x + 0.044715 x^3), which is
 * x * sigmoid(2y) exactly; computed that way, so large negative x gives
 * -0 rather than a cancellation. */
static inline void act_gelu(float *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = g[i];
        float y = 0.7978845608028654f * (x + 0.044715f * x * x * x);
        g[i] = act_x_sigmoid(x, y + y);
    }
}

/* simd_f32_to_f16_row and simd_deq_f16_row with F16C (act_avx2.c, every
 * x86 set): the plain-C forms' bits (simd_internal.h) */
void simd_f32_to_f16_row_f16c(const float *src, simd_f16 *dst, size_t n);
void simd_deq_f16_row_f16c(int type, const void *blocks, size_t n, simd_f16 *dst);
void simd_silu_mul_ref(float *g, const float *u, size_t n);
void simd_silu_mul_avx2(float *g, const float *u, size_t n);
void simd_silu_mul_avx512(float *g, const float *u, size_t n);
void simd_gelu_ref(float *g, size_t n);
void simd_swiglu_oai_ref(float *g, const float *u, size_t n, float alpha, float limit);
void simd_swiglu_oai_avx2(float *g, const float *u, size_t n, float alpha, float limit);
void simd_swiglu_oai_avx512(float *g, const float *u, size_t n, float alpha, float limit);
void simd_gelu_avx2(float *g, size_t n);
void simd_gelu_avx512(float *g, size_t n);

/* Put set k's activations into s (the baseline build for scalar and Arm,
 * where the baseline is already Advanced SIMD). */
void simd_set_act(enum simd_kernel k, simd_kernel_set *s);

#endif
