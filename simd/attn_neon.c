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
#include "attn_neon.h"

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
