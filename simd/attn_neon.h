/* Private to simd/: the Advanced SIMD pieces of attention that the Arm
 * forms share (attn_neon.c for an f16 cache, attn_q_neon.h for a
 * quantized one): the exp four lanes at a time, the max and the
 * exp-and-sum of rows of scores, each in simd_attn_ref's order of float
 * operations (attn_neon.c says how). */
#ifndef NIBBLE_ATTN_NEON_H
#define NIBBLE_ATTN_NEON_H

#include "attn.h"

#include <arm_neon.h>
#include <math.h>

#define AI static inline __attribute__((always_inline))

AI float32x4_t set1(float f) { return vdupq_n_f32(f); }
/* acc + a * b rounded once (attn_fma's bits in each lane) */
AI float32x4_t madd(float32x4_t acc, float32x4_t a, float32x4_t b) { return vfmaq_f32(acc, a, b); }
/* four cache halves as floats (fcvtl: exact, as simd_f16_to_f32) */
AI float32x4_t ldh(const simd_f16 *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }

/* attn_exp, four lanes at a time */
AI float32x4_t exp4(float32x4_t x)
{
    uint32x4_t keep = vcgeq_f32(x, set1(ATTN_EXP_MIN)); /* false for NaN */
    x = vbslq_f32(vcltq_f32(x, vdupq_n_f32(0.0f)), x, vdupq_n_f32(0.0f));
    float32x4_t t = vaddq_f32(vmulq_f32(x, set1(ATTN_LOG2E)), set1(ATTN_ROUND));
    float32x4_t n = vsubq_f32(t, set1(ATTN_ROUND));
    float32x4_t r = vsubq_f32(x, vmulq_f32(n, set1(ATTN_LN2_HI)));
    r = vsubq_f32(r, vmulq_f32(n, set1(ATTN_LN2_LO)));
    float32x4_t p = set1(ATTN_C7);
    p = vaddq_f32(vmulq_f32(p, r), set1(ATTN_C6));
    p = vaddq_f32(vmulq_f32(p, r), set1(ATTN_C5));
    p = vaddq_f32(vmulq_f32(p, r), set1(ATTN_C4));
    p = vaddq_f32(vmulq_f32(p, r), set1(ATTN_C3));
    p = vaddq_f32(vmulq_f32(p, r), set1(ATTN_C2));
    p = vaddq_f32(vmulq_f32(p, r), set1(1.0f));
    p = vaddq_f32(vmulq_f32(p, r), set1(1.0f));
    int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    float32x4_t y = vmulq_f32(p, vreinterpretq_f32_s32(e));
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(y), keep));
}

/* Largest score, NaN passed over (select s where s > m). */
static inline float attn_max(const float *s, size_t n)
{
    float32x4_t mv = set1(-INFINITY);
    size_t p = 0;
    for (; p + 4 <= n; p += 4) {
        float32x4_t x = vld1q_f32(s + p);
        mv = vbslq_f32(vcgtq_f32(x, mv), x, mv);
    }
    float l[4], mx = -INFINITY;
    vst1q_f32(l, mv);
    for (int i = 0; i < 4; i++)
        if (l[i] > mx)
            mx = l[i];
    for (; p < n; p++)
        if (s[p] > mx)
            mx = s[p];
    return mx;
}

/* Rows an attn_exp_rows call takes at most (the forms' row blocks and
 * head groups). */
#define ATTN_EXP_ROWS 8
_Static_assert(ATTN_HB <= ATTN_EXP_ROWS, "attn_exp_rows takes a pass's heads at once");

/* For each of nr rows: s[i][p] = exp(s[i][p] - mx[i]) for p < n, sum[i]
 * their sum (lane p mod 8, added in increasing p, then simd_reduce8),
 * the rows' vectors interleaved so that their exp chains overlap; each
 * row's bits are what it gives alone (attn_x86.h's form says why). */
AI void attn_exp_rows(float *const *s, int nr, size_t n, const float *mx, float *sum)
{
    float32x4_t slo[ATTN_EXP_ROWS], shi[ATTN_EXP_ROWS];
    for (int i = 0; i < nr; i++)
        slo[i] = shi[i] = vdupq_n_f32(0.0f);
    size_t p = 0;
    for (; p + 8 <= n; p += 8)
        for (int i = 0; i < nr; i++) {
            float32x4_t mv = set1(mx[i]);
            float32x4_t e0 = exp4(vsubq_f32(vld1q_f32(s[i] + p), mv));
            float32x4_t e1 = exp4(vsubq_f32(vld1q_f32(s[i] + p + 4), mv));
            vst1q_f32(s[i] + p, e0);
            vst1q_f32(s[i] + p + 4, e1);
            slo[i] = vaddq_f32(slo[i], e0);
            shi[i] = vaddq_f32(shi[i], e1);
        }
    for (int i = 0; i < nr; i++) {
        if (p < n) { /* padding lanes are -inf: exp gives +0, which adds nothing */
            float32x4_t mv = set1(mx[i]);
            float tmp[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
            memcpy(tmp, s[i] + p, (n - p) * sizeof(float));
            float32x4_t e0 = exp4(vsubq_f32(vld1q_f32(tmp), mv));
            float32x4_t e1 = exp4(vsubq_f32(vld1q_f32(tmp + 4), mv));
            vst1q_f32(tmp, e0);
            vst1q_f32(tmp + 4, e1);
            memcpy(s[i] + p, tmp, (n - p) * sizeof(float));
            slo[i] = vaddq_f32(slo[i], e0);
            shi[i] = vaddq_f32(shi[i], e1);
        }
        float l[8];
        vst1q_f32(l, slo[i]);
        vst1q_f32(l + 4, shi[i]);
        sum[i] = simd_reduce8(l);
    }
}

#endif
