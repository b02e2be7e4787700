/* MXFP4 dots for the Arm sets. Included at the end of kernels_neon.c and
 * kernels_neon_dotprod.c, after kernels_neon.h, with NB_MXFP4_SET_FN
 * naming the function that installs them; it uses the set's signed block
 * dot nb_bdot and the shared pieces (nb_tokens4, nb_reduce, NB_BATCH).
 *
 * Weights as bytes: one table lookup (tbl) per 16 codes turns them into
 * the doubled E2M1 values, signed bytes of at most 12 in magnitude, which
 * nb_bdot multiplies with the activations directly (no bias to undo).
 *
 * Float work as kernels_neon.h lays it out: four blocks per vector, lane k
 * doing (2^(e-128) * d_a) * (float)isum then the add; blocks b = 0 mod 8
 * into the lanes 0-3 vector, b = 4 mod 8 into lanes 4-7. A row's last
 * 1..3 blocks go through zeroed copies: a zero weight block has e = 0
 * (scale 2^-128) but meets a zero activation block (d_a = 0, sum 0), so
 * its lane adds (2^-128 * 0) * 0 = +0. */
#ifndef NIBBLE_MXFP4_NEON_H
#define NIBBLE_MXFP4_NEON_H

#include "mxfp4.h"

#define NB_MX_BS sizeof(simd_block_mxfp4)

/* 2^(e-128) for four exponents, exactly as simd_e8m0_half. */
NB_INLINE float32x4_t nb_mx_scale4(const unsigned char *wb)
{
    uint32x4_t e = vdupq_n_u32(wb[0]);
    e = vsetq_lane_u32(wb[NB_MX_BS], e, 1);
    e = vsetq_lane_u32(wb[2 * NB_MX_BS], e, 2);
    e = vsetq_lane_u32(wb[3 * NB_MX_BS], e, 3);
    uint32x4_t big = vshlq_n_u32(vsubq_u32(e, vdupq_n_u32(1)), 23);
    uint32x4_t small = vshlq_u32(vdupq_n_u32(0x00200000), vreinterpretq_s32_u32(e));
    return vreinterpretq_f32_u32(vbslq_u32(vcgtq_u32(e, vdupq_n_u32(1)), big, small));
}

/* Blocks 0..3 at wb against blocks b..b+3 of nt activation rows, into
 * acc[t] (the caller picks the lanes 0-3 or 4-7 vector). */
NB_INLINE void nb_mx_group4(const unsigned char *wb, const char *a, size_t astride, size_t b, int nt,
                            float32x4_t acc[])
{
    static const int8_t kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    const int8x16_t lut = vld1q_s8(kv);
    int8x16_t w[4][2];
    for (int k = 0; k < 4; k++) {
        uint8x16_t qs = vld1q_u8(wb + (size_t)k * NB_MX_BS + offsetof(simd_block_mxfp4, qs));
        w[k][0] = vqtbl1q_s8(lut, vandq_u8(qs, vdupq_n_u8(0x0f)));
        w[k][1] = vqtbl1q_s8(lut, vshrq_n_u8(qs, 4));
    }
    const float32x4_t dw = nb_mx_scale4(wb);
    nb_tokens4(w, dw, dw, 0, a, astride, b, nt, acc);
}

NB_GROUP4_DOTS(nb_mx_dot, nb_mx_group4, NB_MX_BS)

void NB_MXFP4_SET_FN(simd_kernel_set *s)
{
    s->dot[SIMD_MXFP4] = nb_mx_dot;
    s->dot_batch[SIMD_MXFP4] = nb_mx_dot_batch;
    s->dot_rows[SIMD_MXFP4] = nb_mx_dot_rows;
}

#endif
