/* Attention with Advanced SIMD (baseline AArch64; used by both Arm sets).
 * Bit-identical to simd_attn_ref, as attn_avx2.c is, with each 8-lane
 * vector of the reference held as two 4-lane halves (lanes 0-3, 4-7):
 *  - scores: per position the halves accumulate q*k over d; lo + hi gives
 *    l_i + l_{i+4}, the pairwise add then (l0+l4)+(l2+l6) and
 *    (l1+l5)+(l3+l7), and a last add combines them: simd_reduce8's tree;
 *  - max and the clamp in the exp use compare-and-select, not
 *    vmaxq/vminq, so NaN and signed zeros are treated as the reference
 *    treats them;
 *  - exp and the sum: positions 8b..8b+7 fill the two halves in order;
 *  - the V sum runs over d in vectors, positions in order.
 * Every product and sum is a separate vmulq / vaddq: no fused forms. The
 * loops around these (heads, tiles) are attn_driver.h's. */
#include "attn.h"

#include <arm_neon.h>
#include <math.h>

#define AI static inline __attribute__((always_inline))

AI float32x4_t set1(float f) { return vdupq_n_f32(f); }
AI float32x4_t madd(float32x4_t acc, float32x4_t a, float32x4_t b) { return vaddq_f32(acc, vmulq_f32(a, b)); }
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

/* Scores of head q for positions p..p+m-1 (m <= 4) into s[p..]. */
AI void attn_scores(const simd_attn_args *a, const float *q, size_t p, int m, float *s)
{
    float32x4_t lo[4], hi[4];
    const simd_f16 *k = a->k + p * a->kvstride;
    for (int j = 0; j < 4; j++)
        lo[j] = hi[j] = vdupq_n_f32(0.0f);
    for (size_t d = 0; d < a->hd; d += 8) {
        float32x4_t q0 = vld1q_f32(q + d), q1 = vld1q_f32(q + d + 4);
        for (int j = 0; j < 4; j++)
            if (j < m) {
                lo[j] = madd(lo[j], q0, ldh(k + j * a->kvstride + d));
                hi[j] = madd(hi[j], q1, ldh(k + j * a->kvstride + d + 4));
            }
    }
    for (int j = 0; j < m; j++) {
        float32x4_t t = vaddq_f32(lo[j], hi[j]);
        float32x2_t u = vadd_f32(vget_low_f32(t), vget_high_f32(t));
        s[p + j] = vpadds_f32(u) * a->scale;
    }
}

/* Largest score, NaN passed over (select s where s > m). */
static float attn_max(const float *s, size_t n)
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

/* s[p] = exp(s[p] - mx); returns their sum (lane p mod 8). */
static float attn_exp_sum(float *s, size_t n, float mx)
{
    float32x4_t mv = set1(mx), slo = vdupq_n_f32(0.0f), shi = slo;
    size_t p = 0;
    for (; p + 8 <= n; p += 8) {
        float32x4_t e0 = exp4(vsubq_f32(vld1q_f32(s + p), mv));
        float32x4_t e1 = exp4(vsubq_f32(vld1q_f32(s + p + 4), mv));
        vst1q_f32(s + p, e0);
        vst1q_f32(s + p + 4, e1);
        slo = vaddq_f32(slo, e0);
        shi = vaddq_f32(shi, e1);
    }
    if (p < n) { /* padding lanes are -inf: exp gives +0, which adds nothing */
        float tmp[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
        memcpy(tmp, s + p, (n - p) * sizeof(float));
        float32x4_t e0 = exp4(vsubq_f32(vld1q_f32(tmp), mv));
        float32x4_t e1 = exp4(vsubq_f32(vld1q_f32(tmp + 4), mv));
        vst1q_f32(tmp, e0);
        vst1q_f32(tmp + 4, e1);
        memcpy(s + p, tmp, (n - p) * sizeof(float));
        slo = vaddq_f32(slo, e0);
        shi = vaddq_f32(shi, e1);
    }
    float l[8];
    vst1q_f32(l, slo);
    vst1q_f32(l + 4, shi);
    return simd_reduce8(l);
}

/* The V sum of nh heads (weights e[h]) for d in [d0, d0+width), width 16 or
 * 8, and positions [p0, p1), in order, added to o[h] (from 0 when p0 is
 * 0), so tiles keep the reference's order. */
AI void attn_vsum(const simd_attn_args *a, const float *const *e, int nh, int width, size_t d0, size_t p0,
                  size_t p1, float *const *o)
{
    const int nv = width / 4;
    float32x4_t acc[ATTN_HB][4];
    for (int i = 0; i < nh; i++)
        for (int c = 0; c < nv; c++)
            acc[i][c] = p0 ? vld1q_f32(o[i] + d0 + 4 * c) : vdupq_n_f32(0.0f);
    const simd_f16 *v = a->v + p0 * a->kvstride + d0;
    for (size_t p = p0; p < p1; p++, v += a->kvstride) {
        float32x4_t vv[4];
        for (int c = 0; c < nv; c++)
            vv[c] = ldh(v + 4 * c);
        for (int i = 0; i < nh; i++) {
            float32x4_t w = vld1q_dup_f32(e[i] + p);
            for (int c = 0; c < nv; c++)
                acc[i][c] = madd(acc[i][c], w, vv[c]);
        }
    }
    for (int i = 0; i < nh; i++)
        for (int c = 0; c < nv; c++)
            vst1q_f32(o[i] + d0 + 4 * c, acc[i][c]);
}

#define ATTN_SB 4
#define ATTN_ENTRY simd_attn_neon
#include "attn_driver.h"
