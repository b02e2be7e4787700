/* q2_k, q3_k, iq4_xs (against q8k) and iq4_nl (against q8a) dots for the
 * Arm sets. Included at the end of kernels_neon.c and
 * kernels_neon_dotprod.c, after kernels_neon.h and kquants_neon.h (whose
 * pieces it uses: nbk_dot16, nbk_h2f, nb_tokens4, NB_BATCH), with
 * NBL_SET_FN naming the function that installs the kernels.
 *
 * Codes are signed bytes, one vector a 16-value sub-block (q2_k 0..3,
 * q3_k -4..3, iq4 levels -127..113 through tbl), multiplied directly with
 * the activations (sdot, or smull/smlal pairs of at most 2*127*127).
 * Float work as the reference (lquants.c): per super-block in plain C
 * through lquants_rows.h; iq4_nl four blocks a vector as kernels_neon.h
 * lays it out. */
#ifndef NIBBLE_LQUANTS_NEON_H
#define NIBBLE_LQUANTS_NEON_H

#include "lquants.h"

typedef struct {
    int32x4_t s[4];     /* sub-block scales, 4j .. 4j+3 in s[j] */
    int16x8_t m16[2];   /* q2_k: the 16 mins */
} nbl_scales;

NBK_INLINE int8x16_t nbl_iq4_lut(void) { return vld1q_s8(simd_iq4nl_values); }

/* 16 signed byte scales into sc->s. */
NBK_INLINE void nbl_scales16(int8x16_t v, nbl_scales *sc)
{
    int16x8_t lo = vmovl_s8(vget_low_s8(v)), hi = vmovl_high_s8(v);
    sc->s[0] = vmovl_s16(vget_low_s16(lo));
    sc->s[1] = vmovl_high_s16(lo);
    sc->s[2] = vmovl_s16(vget_low_s16(hi));
    sc->s[3] = vmovl_high_s16(hi);
}

/* Low 2-bit codes: sub-block i = 8h + 2k + s is bits 2k, 2k+1 of
 * qs[32h + 16s .. 32h + 16s + 15]. */
NBK_INLINE void nbl_low2(const uint8_t *qs, uint8x16_t w[16])
{
    const uint8x16_t m3 = vdupq_n_u8(3);
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < 2; s++) {
            uint8x16_t q = vld1q_u8(qs + 32 * h + 16 * s);
            w[8 * h + s] = vandq_u8(q, m3);
            w[8 * h + 2 + s] = vandq_u8(vshrq_n_u8(q, 2), m3);
            w[8 * h + 4 + s] = vandq_u8(vshrq_n_u8(q, 4), m3);
            w[8 * h + 6 + s] = vshrq_n_u8(q, 6);
        }
}

/* The signed codes of an i-quant super-block (iquants.h), 16 values a
 * vector: two grid entries of simd_iq_sub side by side, each group's sign
 * byte repeated over its 8 bytes and tested against bit j of byte j
 * (0xff where set), then (g ^ m) - m negates where the mask is set. iq1
 * codes are 8 * grid byte plus a delta of +-1, the group's mask or 1.
 * The codes equal simd_iq_expand's, so every sum does too. */
NBK_INLINE void nbl_iq_codes(int type, const unsigned char *x, int8x16_t v[16])
{
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t bits = vld1q_u8(bit);
    for (int i = 0; i < 8; i++) {
        uint64_t g[4];
        uint32_t s = simd_iq_sub(type, x, i, g);
        for (int h = 0; h < 2; h++) {
            int8x16_t q = vcombine_s8(vcreate_s8(g[2 * h]), vcreate_s8(g[2 * h + 1]));
            uint8x16_t sb = vcombine_u8(vdup_n_u8((uint8_t)(s >> (16 * h))), vdup_n_u8((uint8_t)(s >> (16 * h + 8))));
            if (type == SIMD_IQ1_S || type == SIMD_IQ1_M) {
                int8x16_t delta = vreinterpretq_s8_u8(vorrq_u8(sb, vdupq_n_u8(1)));
                v[2 * i + h] = vaddq_s8(vshlq_n_s8(q, 3), delta);
            } else {
                int8x16_t m = vreinterpretq_s8_u8(vtstq_u8(sb, bits));
                v[2 * i + h] = vsubq_s8(veorq_s8(q, m), m);
            }
        }
    }
}

NBK_INLINE void nbl_prep(int type, const unsigned char *x, nbk_codes *w, nbl_scales *sc, float *d, float *dmin)
{
    if (type == SIMD_Q2_K) {
        const simd_block_q2_k *b = (const simd_block_q2_k *)x;
        uint8x16_t raw = vld1q_u8(b->scales);
        nbl_scales16(vreinterpretq_s8_u8(vandq_u8(raw, vdupq_n_u8(0x0f))), sc);
        uint8x16_t m = vshrq_n_u8(raw, 4);
        sc->m16[0] = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(m)));
        sc->m16[1] = vreinterpretq_s16_u16(vmovl_high_u8(m));
        uint8x16_t u[16];
        nbl_low2(b->qs, u);
        for (int i = 0; i < 16; i++)
            w->v[i] = vreinterpretq_s8_u8(u[i]);
        *d = nbk_h2f(b->d);
        *dmin = nbk_h2f(b->dmin);
    } else if (type == SIMD_Q3_K) {
        const simd_block_q3_k *b = (const simd_block_q3_k *)x;
        int8_t s[16];
        simd_q3k_scales(b->scales, s);
        nbl_scales16(vsubq_s8(vld1q_s8(s), vdupq_n_s8(32)), sc);
        uint8x16_t u[16];
        nbl_low2(b->qs, u);
        const uint8x16_t hm[2] = {vld1q_u8(b->hmask), vld1q_u8(b->hmask + 16)};
        for (int i = 0; i < 16; i++) {
            /* bit 4h+k of hmask[16s + l], h = i/8, k = (i/2)%4, s = i%2 */
            uint8x16_t on = vtstq_u8(hm[i & 1], vdupq_n_u8((uint8_t)(1u << (4 * (i >> 3) + ((i >> 1) & 3)))));
            uint8x16_t c = vorrq_u8(u[i], vandq_u8(on, vdupq_n_u8(4)));
            w->v[i] = vsubq_s8(vreinterpretq_s8_u8(c), vdupq_n_s8(4));
        }
        *d = nbk_h2f(b->d);
        *dmin = 0;
    } else if (simd_is_iquant(type)) {
        int8_t s[16];
        *d = simd_iq_scales(type, x, s);
        nbl_iq_codes(type, x, w->v);
        nbl_scales16(vld1q_s8(s), sc);
        *dmin = 0;
    } else {
        const simd_block_iq4_xs *b = (const simd_block_iq4_xs *)x;
        const int8x16_t lut = nbl_iq4_lut();
        int8_t s[16];
        for (int j = 0; j < 8; j++) {
            uint8x16_t q = vld1q_u8(b->qs + 16 * j);
            w->v[2 * j] = vqtbl1q_s8(lut, vandq_u8(q, vdupq_n_u8(0x0f)));
            w->v[2 * j + 1] = vqtbl1q_s8(lut, vshrq_n_u8(q, 4));
            s[2 * j] = s[2 * j + 1] = (int8_t)(simd_iq4xs_scale(b, j) - 32);
        }
        nbl_scales16(vld1q_s8(s), sc);
        *d = nbk_h2f(b->d);
        *dmin = 0;
    }
}

/* sumi (and q2_k's summ) of one token; bounds as in lquants_x86.h. */
NBK_INLINE void nbl_sums(int type, const nbk_codes *w, const nbl_scales *sc, const simd_block_q8k *y, int32_t *sumi,
                         int32_t *summ)
{
    int32x4_t acc = vdupq_n_s32(0);
    for (int j = 0; j < 4; j++) {
        int32x4_t p[4];
        for (int i = 0; i < 4; i++)
            p[i] = nbk_dot16(vdupq_n_s32(0), w->v[4 * j + i], vld1q_s8(y->qs + 16 * (4 * j + i)));
        int32x4_t tot = vpaddq_s32(vpaddq_s32(p[0], p[1]), vpaddq_s32(p[2], p[3]));
        acc = vmlaq_s32(acc, tot, sc->s[j]);
    }
    *sumi = vaddvq_s32(acc);
    *summ = 0;
    if (type == SIMD_Q2_K) {
        int16x8_t b0 = vld1q_s16(y->bsums), b1 = vld1q_s16(y->bsums + 8);
        int32x4_t mm = vmull_s16(vget_low_s16(b0), vget_low_s16(sc->m16[0]));
        mm = vmlal_high_s16(mm, b0, sc->m16[0]);
        mm = vmlal_s16(mm, vget_low_s16(b1), vget_low_s16(sc->m16[1]));
        mm = vmlal_high_s16(mm, b1, sc->m16[1]);
        *summ = vaddvq_s32(mm);
    }
}

NBK_INLINE size_t nbl_bytes(int type)
{
    return type == SIMD_Q2_K        ? sizeof(simd_block_q2_k)
           : type == SIMD_Q3_K      ? sizeof(simd_block_q3_k)
           : type == SIMD_IQ4_XS    ? sizeof(simd_block_iq4_xs)
                                    : simd_iq_bytes(type);
}

#include "lquants_rows.h"

/* ---- iq4_nl: blocks of 32 against q8a, as mxfp4_neon.h ---- */

#define NBL_NL_BS sizeof(simd_block_iq4_nl)

NB_INLINE void nbl_nl_group4(const unsigned char *wb, const char *a, size_t astride, size_t b, int nt,
                             float32x4_t acc[])
{
    const int8x16_t lut = nbl_iq4_lut();
    int8x16_t w[4][2];
    uint16_t h[4];
    for (int k = 0; k < 4; k++) {
        const unsigned char *blk = wb + (size_t)k * NBL_NL_BS;
        uint8x16_t qs = vld1q_u8(blk + 2);
        w[k][0] = vqtbl1q_s8(lut, vandq_u8(qs, vdupq_n_u8(0x0f)));
        w[k][1] = vqtbl1q_s8(lut, vshrq_n_u8(qs, 4));
        memcpy(&h[k], blk, 2);
    }
    const float32x4_t dw = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
    nb_tokens4(w, dw, dw, 0, a, astride, b, nt, acc);
}

NB_GROUP4_DOTS(nbl_nl_dot, nbl_nl_group4, NBL_NL_BS)

void NBL_SET_FN(simd_kernel_set *s)
{
    nbl_set_dots(s);
    s->dot[SIMD_IQ4_NL] = nbl_nl_dot;
    s->dot_batch[SIMD_IQ4_NL] = nbl_nl_dot_batch;
    s->dot_rows[SIMD_IQ4_NL] = nbl_nl_dot_rows;
}

#endif
