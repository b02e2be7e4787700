/* K-quant dots (q4_k, q5_k, q6_k against q8k activations) for the Arm
 * kernel sets. kernels_neon.c and kernels_neon_dotprod.c each include this
 * once, last, after defining NBK_SET_FN (the name of the filler declared
 * in kquants.h). The byte products use sdot where the compiler targets
 * the dot product (__ARM_FEATURE_DOTPROD, the neon-dotprod file), else
 * smull/smlal into int16 and a pairwise widening add.
 *
 * The row driver is kquants_rows.h, shared with the x86 sets.
 *
 * Bit-identity with kquants.c, as in kquants_x86.h: integer sums exact
 * (codes are made signed: q4_k/q5_k 0..31, q6_k q-32 in -32..31, so the
 * int16 pairs stay within 2*32*127), and per super-block the reference's
 * float expression in plain scalar C,
 *     acc[b & 7] += (d_w * d_a) * (float)sumi [- (dmin_w * d_a) * (float)summ]
 * combined by simd_reduce8; -ffp-contract=off keeps it free of FMA; f16
 * scales are widened with FCVTL, which is exact. */
#ifndef NIBBLE_KQUANTS_NEON_H
#define NIBBLE_KQUANTS_NEON_H

#include "kquants.h"

#include <arm_neon.h>
#include <stddef.h>
#include <string.h>

#define NBK_INLINE static inline __attribute__((always_inline))
#define NBK_MAXT 4
#define NBK_ROW_TILE 16

/* acc + the products of 16 signed bytes, four per int32 lane (the split
 * over lanes differs between the two forms; only totals are used). */
NBK_INLINE int32x4_t nbk_dot16(int32x4_t acc, int8x16_t w, int8x16_t a)
{
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, w, a);
#else
    int16x8_t p = vmull_s8(vget_low_s8(w), vget_low_s8(a));
    p = vmlal_high_s8(p, w, a);
    return vpadalq_s16(acc, p);
#endif
}

NBK_INLINE float nbk_h2f(simd_f16 h)
{
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

/* A super-block's codes, 16 per vector: q4_k/q5_k values 16h .. 16h+15
 * of sub-block j in v[2j + h], q6_k sub-block i (16 values) in v[i]. */
typedef struct {
    int8x16_t v[16];
} nbk_codes;

/* ---- q4_k / q5_k ---- */

/* sc[0..7] and m[0..7] from the 12 packed bytes (see simd_block_q4_k). */
NBK_INLINE void nbk_scales_mins(const uint8_t packed[12], uint8_t sc[8], uint8_t m[8])
{
    uint32_t u[3], s[2], mm[2];
    memcpy(u, packed, 12);
    s[0] = u[0] & 0x3f3f3f3fu;
    mm[0] = u[1] & 0x3f3f3f3fu;
    s[1] = (u[2] & 0x0f0f0f0fu) | ((u[0] >> 6) & 0x03030303u) << 4;
    mm[1] = ((u[2] >> 4) & 0x0f0f0f0fu) | ((u[1] >> 6) & 0x03030303u) << 4;
    memcpy(sc, s, 8);
    memcpy(m, mm, 8);
}

/* Codes of sub-block j, values 16h..16h+15 of it, in w[2j + h]: sub-blocks
 * 2p and 2p+1 are the low and high nibbles of qs[32p .. 32p+31]; q5_k
 * adds bit j of qh[l] as the 5th bit. */
NBK_INLINE void nbk_expand_q45(int five, const uint8_t *qs, const uint8_t *qh, int8x16_t w[16])
{
    const uint8x16_t lo4 = vdupq_n_u8(0x0f);
    uint8x16_t h[2] = {vdupq_n_u8(0), vdupq_n_u8(0)};
    if (five) {
        h[0] = vld1q_u8(qh);
        h[1] = vld1q_u8(qh + 16);
    }
    for (int p = 0; p < 4; p++)
        for (int half = 0; half < 2; half++) {
            uint8x16_t q = vld1q_u8(qs + 32 * p + 16 * half);
            uint8x16_t lo = vandq_u8(q, lo4), hi = vshrq_n_u8(q, 4);
            if (five) {
                /* bit 2p to 0x10 and bit 2p+1 to 0x10: test, then mask */
                uint8x16_t b0 = vtstq_u8(h[half], vdupq_n_u8((uint8_t)(1u << (2 * p))));
                uint8x16_t b1 = vtstq_u8(h[half], vdupq_n_u8((uint8_t)(2u << (2 * p))));
                lo = vorrq_u8(lo, vandq_u8(b0, vdupq_n_u8(0x10)));
                hi = vorrq_u8(hi, vandq_u8(b1, vdupq_n_u8(0x10)));
            }
            w[2 * (2 * p) + half] = vreinterpretq_s8_u8(lo);
            w[2 * (2 * p + 1) + half] = vreinterpretq_s8_u8(hi);
        }
}

typedef struct {
    uint8_t sc[8];
    int16x8_t m16; /* the mins */
} nbk_q45_scales;

NBK_INLINE void nbk_q45_prep(int five, const uint8_t scales[12], const uint8_t *qs, const uint8_t *qh, nbk_codes *w,
                             nbk_q45_scales *s)
{
    uint8_t m[8];
    nbk_scales_mins(scales, s->sc, m);
    s->m16 = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(m)));
    nbk_expand_q45(five, qs, qh, w->v);
}

/* sumi and summ of one token (bounds as in kquants_x86.h). */
NBK_INLINE void nbk_q45_sums(const nbk_codes *w, const nbk_q45_scales *sc, const simd_block_q8k *y, int32_t *sumi,
                             int32_t *summ)
{
    const int16x8_t m16 = sc->m16;
    int32x4_t acc = vdupq_n_s32(0);
    for (int j = 0; j < 8; j++) {
        int32x4_t d = nbk_dot16(vdupq_n_s32(0), w->v[2 * j], vld1q_s8(y->qs + 32 * j));
        d = nbk_dot16(d, w->v[2 * j + 1], vld1q_s8(y->qs + 32 * j + 16));
        acc = vmlaq_n_s32(acc, d, (int32_t)sc->sc[j]);
    }
    *sumi = vaddvq_s32(acc);
    /* the 16 bsums paired into the 8 sub-block sums (|.| <= 32*127) */
    int16x8_t bs = vpaddq_s16(vld1q_s16(y->bsums), vld1q_s16(y->bsums + 8));
    int32x4_t mm = vmull_s16(vget_low_s16(bs), vget_low_s16(m16));
    mm = vmlal_high_s16(mm, bs, m16);
    *summ = vaddvq_s32(mm);
}

/* ---- q6_k ---- */

/* Codes minus 32 of values 16i .. 16i+15 (sub-block i) in w[i]; see
 * q6_level in kquants.c for the layout. */
NBK_INLINE void nbk_expand_q6(const simd_block_q6_k *x, int8x16_t w[16])
{
    const uint8x16_t lo4 = vdupq_n_u8(0x0f), b45 = vdupq_n_u8(0x30);
    const int8x16_t off = vdupq_n_s8(32);
    for (int h = 0; h < 2; h++)
        for (int half = 0; half < 2; half++) {
            uint8x16_t l0 = vld1q_u8(x->ql + 64 * h + 16 * half), l1 = vld1q_u8(x->ql + 64 * h + 32 + 16 * half);
            uint8x16_t hb = vld1q_u8(x->qh + 32 * h + 16 * half);
            uint8x16_t c[4];
            c[0] = vorrq_u8(vandq_u8(l0, lo4), vshlq_n_u8(vandq_u8(hb, vdupq_n_u8(0x03)), 4));
            c[1] = vorrq_u8(vandq_u8(l1, lo4), vshlq_n_u8(vandq_u8(hb, vdupq_n_u8(0x0c)), 2));
            c[2] = vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(hb, b45));
            c[3] = vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(vshrq_n_u8(hb, 2), b45));
            /* value 128h + 32k + 16half + l: sub-block 8h + 2k + half */
            for (int k = 0; k < 4; k++)
                w[8 * h + 2 * k + half] = vsubq_s8(vreinterpretq_s8_u8(c[k]), off);
        }
}

typedef struct {
    const int8_t *sc; /* the block's own 16 scales */
} nbk_q6_scales;

NBK_INLINE void nbk_q6_prep(const simd_block_q6_k *x, nbk_codes *w, nbk_q6_scales *s)
{
    nbk_expand_q6(x, w->v);
    s->sc = x->scales;
}

NBK_INLINE int32_t nbk_q6_sum(const nbk_codes *w, const nbk_q6_scales *sc, const simd_block_q8k *y)
{
    int32x4_t acc = vdupq_n_s32(0);
    for (int j = 0; j < 16; j++)
        acc = vmlaq_n_s32(acc, nbk_dot16(vdupq_n_s32(0), w->v[j], vld1q_s8(y->qs + 16 * j)), (int32_t)sc->sc[j]);
    return vaddvq_s32(acc);
}

#include "kquants_rows.h"

void NBK_SET_FN(simd_kernel_set *s)
{
    nbk_set_dots(s);
}

#endif
