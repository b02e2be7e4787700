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
 * Every product and sum is a separate vmulq / vaddq: no fused forms. */
#include "attn.h"

#include <arm_neon.h>
#include <math.h>

#define AI static inline __attribute__((always_inline))
#define HB 4  /* query heads per pass */
#define VT 32 /* positions per tile of the V sum */

AI float32x4_t set1(float f) { return vdupq_n_f32(f); }
AI float32x4_t madd(float32x4_t acc, float32x4_t a, float32x4_t b) { return vaddq_f32(acc, vmulq_f32(a, b)); }

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
AI void scores4(const simd_attn_args *a, const float *q, size_t p, int m, float *s)
{
    float32x4_t lo[4], hi[4];
    const float *k = a->k + p * a->kvstride;
    for (int j = 0; j < 4; j++)
        lo[j] = hi[j] = vdupq_n_f32(0.0f);
    for (size_t d = 0; d < a->hd; d += 8) {
        float32x4_t q0 = vld1q_f32(q + d), q1 = vld1q_f32(q + d + 4);
        for (int j = 0; j < 4; j++)
            if (j < m) {
                lo[j] = madd(lo[j], q0, vld1q_f32(k + j * a->kvstride + d));
                hi[j] = madd(hi[j], q1, vld1q_f32(k + j * a->kvstride + d + 4));
            }
    }
    for (int j = 0; j < m; j++) {
        float32x4_t t = vaddq_f32(lo[j], hi[j]);
        float32x2_t u = vadd_f32(vget_low_f32(t), vget_high_f32(t));
        s[p + j] = vpadds_f32(u) * a->scale;
    }
}

/* Largest score, NaN passed over (select s where s > m). */
static float max_of(const float *s, size_t n)
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
static float exp_sum(float *s, size_t n, float mx)
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

/* The V sum of nh heads (weights e[h]) for d in [d0, d0+4*nv) and
 * positions [p0, p1): adds to the sums o[h] holds (starts them at 0 when
 * p0 is 0), positions in order, so tiles keep the reference's order. */
AI void vsum(const simd_attn_args *a, const float *const *e, int nh, int nv, size_t d0, size_t p0, size_t p1,
             float *const *o)
{
    float32x4_t acc[HB][4];
    for (int i = 0; i < nh; i++)
        for (int c = 0; c < nv; c++)
            acc[i][c] = p0 ? vld1q_f32(o[i] + d0 + 4 * c) : vdupq_n_f32(0.0f);
    const float *v = a->v + p0 * a->kvstride + d0;
    for (size_t p = p0; p < p1; p++, v += a->kvstride) {
        float32x4_t vv[4];
        for (int c = 0; c < nv; c++)
            vv[c] = vld1q_f32(v + 4 * c);
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

/* nh (1..HB) heads starting at head h0 */
AI void heads(const simd_attn_args *a, size_t h0, int nh)
{
    const float *q[HB], *e[HB];
    float *o[HB];
    for (int i = 0; i < nh; i++) {
        q[i] = a->q + (h0 + i) * a->qstride;
        e[i] = a->scratch + (h0 + i) * a->n;
        o[i] = a->part + (h0 + i) * a->pstride + 2;
    }
    size_t n = a->n, p = 0;
    for (; p + 4 <= n; p += 4)
        for (int i = 0; i < nh; i++)
            scores4(a, q[i], p, 4, (float *)e[i]);
    if (p < n)
        for (int i = 0; i < nh; i++)
            scores4(a, q[i], p, (int)(n - p), (float *)e[i]);
    for (int i = 0; i < nh; i++) {
        o[i][-2] = max_of(e[i], n);
        o[i][-1] = exp_sum((float *)e[i], n, o[i][-2]);
    }
    /* V in tiles of VT positions, every d of a tile before the next (the
     * tile stays in L1 for the other column chunks) */
    for (size_t p0 = 0; p0 < n; p0 += VT) {
        size_t p1 = p0 + VT < n ? p0 + VT : n, d = 0;
        for (; d + 16 <= a->hd; d += 16)
            vsum(a, e, nh, 4, d, p0, p1, o);
        for (; d < a->hd; d += 8)
            vsum(a, e, nh, 2, d, p0, p1, o);
    }
}

void simd_attn_neon(const simd_attn_args *a)
{
    if (a->hd % 8) {
        simd_attn_ref(a);
        return;
    }
    size_t h = 0;
    for (; h + HB <= a->nq; h += HB)
        heads(a, h, HB);
    switch (a->nq - h) {
    case 3: heads(a, h, 3); break;
    case 2: heads(a, h, 2); break;
    case 1: heads(a, h, 1); break;
    default: break;
    }
}
