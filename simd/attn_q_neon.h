/* Private to simd/: attention over a q8_0/q4_0 cache (simd_attn_q_tile)
 * for the Arm sets, written once. The including file is built with its
 * set's flags and defines, before including it:
 *   ATTNQ_DOT(q0, q1, k0, k1)  four int32 sums that together hold the
 *                              exact dot of 32 int8 pairs (q0:q1, k0:k1)
 *   ATTNQ_ENTRY                the name of the function it defines (attn_q_driver.h).
 * Bit-identical to simd_attn_q_ref, as attn_q_x86.h is: each block's
 * integer dot is exact, four positions' sums are gathered by pairwise
 * adds into one vector, and each lane takes the reference's float steps;
 * max, exp and sum are attn_neon.h's; the V sum goes over 16 columns at
 * a time, positions in order, over V's values as floats. The scores'
 * and the V sum's multiply-adds are fused (vfmaq, attn_fma's bits); the
 * other products and sums are separate. */
#ifndef NIBBLE_ATTN_Q_NEON_H
#define NIBBLE_ATTN_Q_NEON_H

#include "attn_neon.h"

/* one half as float (fcvt: exact) */
static inline float attnq_h2f(simd_f16 h) { return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0); }

/* A block's 32 codes as two vectors: q8_0's as they are, q4_0's low
 * nibbles then high ones, less 8 (attnq_code's order). */
static inline int8x16x2_t attnq_neon_codes(int type, const void *blk)
{
    int8x16x2_t r;
    if (type == SIMD_Q8_0) {
        const int8_t *q = ((const simd_block_q8_0 *)blk)->qs;
        r.val[0] = vld1q_s8(q);
        r.val[1] = vld1q_s8(q + 16);
        return r;
    }
    uint8x16_t x = vld1q_u8(((const simd_block_q4_0 *)blk)->qs);
    r.val[0] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(x, vdupq_n_u8(0x0f))), vdupq_n_s8(8));
    r.val[1] = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(x, 4)), vdupq_n_s8(8));
    return r;
}

static inline void attnq_neon_store_codes(int type, const void *blk, int8_t *c)
{
    int8x16x2_t r = attnq_neon_codes(type, blk);
    vst1q_s8(c, r.val[0]);
    vst1q_s8(c + 16, r.val[1]);
}

/* d * code for the 32 codes, 4 at a time (each product exact) */
static inline void attnq_neon_values(int type, const void *blk, float d, float *y)
{
    int8x16x2_t r = attnq_neon_codes(type, blk);
    float32x4_t dv = vdupq_n_f32(d);
    for (int i = 0; i < 2; i++) {
        int16x8_t w[2] = {vmovl_s8(vget_low_s8(r.val[i])), vmovl_s8(vget_high_s8(r.val[i]))};
        for (int k = 0; k < 2; k++) {
            vst1q_f32(y + 16 * i + 8 * k, vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(w[k]))), dv));
            vst1q_f32(y + 16 * i + 8 * k + 4, vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(w[k]))), dv));
        }
    }
}

#define ATTNQ_H2F attnq_h2f
#define ATTNQ_CODES attnq_neon_store_codes
#define ATTNQ_VALUES attnq_neon_values
#include "attn_q.h"

/* Scores of query blocks q for positions p..p+m-1 (p a multiple of 4, m <= 4) into s[p..]. */
AI void q_scores(const attnq_buf *b, size_t hd, const simd_block_q8a *q, size_t p, int m, float scale, float *s)
{
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (size_t i = 0; i < hd / 32; i++) {
        int8x16_t q0 = vld1q_s8(q[i].qs), q1 = vld1q_s8(q[i].qs + 16);
        const int8_t *k = b->kc + p * hd + 32 * i;
        int32x4_t v[4];
        for (int j = 0; j < 4; j++)
            v[j] = j < m ? ATTNQ_DOT(q0, q1, vld1q_s8(k + j * hd), vld1q_s8(k + j * hd + 16)) : vdupq_n_s32(0);
        int32x4_t is = vpaddq_s32(vpaddq_s32(v[0], v[1]), vpaddq_s32(v[2], v[3]));
        float32x4_t f = vmulq_f32(vld1q_f32(b->kd + i * SIMD_ATTN_CHUNK + p), set1(q[i].d));
        acc = vfmaq_f32(acc, vcvtq_f32_s32(is), f);
    }
    float32x4_t sv = vmulq_f32(acc, set1(scale));
    if (m == 4) {
        vst1q_f32(s + p, sv);
    } else {
        float tmp[4];
        vst1q_f32(tmp, sv);
        memcpy(s + p, tmp, (size_t)m * sizeof(float));
    }
}

/* The V sum of nh heads (weights e[h]) for columns d0..d0+15, positions
 * 0..n-1 in order, into o[h] (from 0). */
AI void q_vsum(const attnq_buf *b, size_t hd, size_t n, const float *const *e, int nh, size_t d0, float *const *o)
{
    float32x4_t acc[ATTN_HB][4];
    for (int h = 0; h < nh; h++)
        for (int c = 0; c < 4; c++)
            acc[h][c] = vdupq_n_f32(0.0f);
    const float *vf = b->vf + d0;
    for (size_t p = 0; p < n; p++, vf += hd) {
        float32x4_t vv[4] = {vld1q_f32(vf), vld1q_f32(vf + 4), vld1q_f32(vf + 8), vld1q_f32(vf + 12)};
        for (int h = 0; h < nh; h++) {
            float32x4_t w = vld1q_dup_f32(e[h] + p);
            for (int c = 0; c < 4; c++)
                acc[h][c] = madd(acc[h][c], w, vv[c]);
        }
    }
    for (int h = 0; h < nh; h++)
        for (int c = 0; c < 4; c++)
            vst1q_f32(o[h] + d0 + 4 * c, acc[h][c]);
}

/* nh heads from h0 of one token (query blocks qt, rows part). */
AI void q_heads(const simd_attn_q_args *a, const attnq_buf *b, const simd_block_q8a *qt, float *part, size_t h0,
                int nh)
{
    size_t hd = a->hd, n = a->n;
    const float *e[ATTN_HB];
    float *o[ATTN_HB], *sr[ATTN_HB], mx[ATTN_HB], sum[ATTN_HB];
    for (int i = 0; i < nh; i++) {
        float *s = a->scratch + (h0 + i) * n;
        const simd_block_q8a *q = qt + (h0 + i) * a->qstride;
        for (size_t p = 0; p < n; p += 4)
            q_scores(b, hd, q, p, n - p < 4 ? (int)(n - p) : 4, a->scale, s);
        if (a->softcap > 0)
            attn_softcap(s, n, a->softcap);
        o[i] = part + (h0 + i) * a->pstride + 2;
        o[i][-2] = mx[i] = attn_max(s, n);
        e[i] = sr[i] = s;
    }
    attn_exp_rows(sr, nh, n, mx, sum);
    for (int i = 0; i < nh; i++)
        o[i][-1] = sum[i];
    for (size_t d = 0; d < hd; d += 16)
        q_vsum(b, hd, n, e, nh, d, o);
}

#define ATTNQ_KT 0 /* K as rows: q_scores reads a position's codes in order */
#include "attn_q_driver.h"

#endif
