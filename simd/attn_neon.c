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
 * The scores' and the V sum's multiply-adds are fused (vfmaq, attn_fma's
 * bits); every other product and sum is a separate vmulq / vaddq. The
 * loops around these (heads, tiles) are attn_driver.h's. The prefill tile
 * (simd_attn_tile_neon, bit-identical to simd_attn_tile_ref) is at the
 * end. */
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

/* ---- the tile (simd_attn_tile): attn_tile_driver.h's loops, sixteen
 * positions a pass in four vectors, four rows a block (16 accumulators);
 * each multiply-add is vfmaq by a scalar lane, the same rounding as by
 * its broadcast. Bit-identical to simd_attn_tile_ref. ---- */

#define TILE_ROWS 4

/* Four halves at src as floats at dst (exact, as simd_f16_to_f32): the
 * step of the tile's runs into kvbuf (attn_tile_driver.h's tile_convert). */
#define TILE_CVT_W 4
AI void tile_cvt_vec(const simd_f16 *src, float *dst) { vst1q_f32(dst, ldh(src)); }

/* K given as rows (ktstride 0) into kvbuf transposed, a position at a
 * time: kt[d*SIMD_ATTN_CHUNK + p] = k_p[d] for p < n16, zeros from n on. */
static inline void tile_k_rows(const simd_attn_args *a, float *kt, size_t n16)
{
    for (size_t p = 0; p < n16; p++) {
        const simd_f16 *k = p < a->n ? a->k + p * a->kvstride : NULL;
        for (size_t d = 0; d < a->hd; d++)
            kt[d * SIMD_ATTN_CHUNK + p] = k ? simd_f16_to_f32(k[d]) : 0.0f;
    }
}

/* 4 values at p + i: floats, or halves converted (exactly). */
AI float32x4_t tile_ld4(const void *p, size_t i, int half)
{
    return half ? ldh((const simd_f16 *)p + i) : vld1q_f32((const float *)p + i);
}

/* Scores of nr rows for positions p < n16, K's row d at k + d*ks (floats,
 * or halves). */
AI void tile_scores(const void *k, size_t ks, int half, size_t hd, size_t n16, float scale, const float *const *q,
                    int nr, float (*s)[SIMD_ATTN_CHUNK])
{
    for (size_t p0 = 0; p0 < n16; p0 += 16) {
        float32x4_t acc[TILE_ROWS][4];
        for (int i = 0; i < nr; i++)
            for (int j = 0; j < 4; j++)
                acc[i][j] = vdupq_n_f32(0.0f);
        for (size_t d = 0, r = p0; d < hd; d++, r += ks) {
            float32x4_t kv[4];
            for (int j = 0; j < 4; j++)
                kv[j] = tile_ld4(k, r + 4 * (size_t)j, half);
            for (int i = 0; i < nr; i++) {
                float qd = q[i][d];
                for (int j = 0; j < 4; j++)
                    acc[i][j] = vfmaq_n_f32(acc[i][j], kv[j], qd);
            }
        }
        for (int i = 0; i < nr; i++)
            for (int j = 0; j < 4; j++)
                vst1q_f32(s[i] + p0 + 4 * j, vmulq_n_f32(acc[i][j], scale));
    }
}

/* The V sum of nr rows for columns [d0, d0 + 4*nv), positions in order,
 * V's row p at v + p*vs. */
AI void tile_vcols(const void *v, size_t vs, int half, size_t n, const float *const *e, int nr, int nv, size_t d0,
                   float *const *o)
{
    float32x4_t acc[TILE_ROWS][4];
    for (int i = 0; i < nr; i++)
        for (int c = 0; c < nv; c++)
            acc[i][c] = vdupq_n_f32(0.0f);
    for (size_t p = 0, r = d0; p < n; p++, r += vs) {
        float32x4_t vv[4];
        for (int c = 0; c < nv; c++)
            vv[c] = tile_ld4(v, r + 4 * (size_t)c, half);
        for (int i = 0; i < nr; i++) {
            float w = e[i][p];
            for (int c = 0; c < nv; c++)
                acc[i][c] = vfmaq_n_f32(acc[i][c], vv[c], w);
        }
    }
    for (int i = 0; i < nr; i++)
        for (int c = 0; c < nv; c++)
            vst1q_f32(o[i] + d0 + 4 * c, acc[i][c]);
}

AI void tile_vsum(const void *v, size_t vs, int half, size_t hd, size_t n, const float *const *e, int nr,
                  float *const *o)
{
    size_t d = 0;
    for (; d + 16 <= hd; d += 16)
        tile_vcols(v, vs, half, n, e, nr, 4, d, o);
    for (; d + 4 <= hd; d += 4)
        tile_vcols(v, vs, half, n, e, nr, 1, d, o);
    for (; d < hd; d++) /* the last hd mod 4 columns one at a time, in the same order (never half: hd % 16 == 0 then) */
        for (int i = 0; i < nr; i++) {
            float acc = 0.0f;
            for (size_t p = 0; p < n; p++)
                acc = attn_fma(e[i][p], ((const float *)v)[p * vs + d], acc);
            o[i][d] = acc;
        }
}

#define TILE_ENTRY simd_attn_tile_neon
#include "attn_tile_driver.h"
