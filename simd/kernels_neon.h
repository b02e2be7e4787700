/* Pieces shared by the two Arm kernel files. kernels_neon.c (baseline
 * AArch64 Advanced SIMD, no extra flags) and kernels_neon_dotprod.c (built
 * with -march=armv8.2-a+dotprod) each define one integer primitive and
 * the set's name, then include this file, so the same source compiles
 * once per set with that set's flags; nothing here is compiled on its
 * own.
 *
 *   int32x4_t nb_bdot(int8x16_t w0, int8x16_t w1, int8x16_t a0, int8x16_t a1)
 *       one 32-value block: w0/a0 values 0-15, w1/a1 values 16-31, all
 *       signed (|w| <= 128, |a| <= 127); returns 4 int32 whose total is
 *       sum(w*a) (how the total is split over the lanes is free).
 *   NB_SET_FN  the name of the function filling simd_kernel_set.
 *
 * How the sets stay bit-identical to kernels_scalar.c (the same rules the
 * x86 sets follow, see kernels_x86.h):
 *  - integer block sums are exact, so any instruction sequence that gets
 *    the right integer will do;
 *  - the reference's 8 float lanes live in two float32x4_t, lanes 0-3 and
 *    4-7. Quantized rows go four blocks at a time: blocks b..b+3 with
 *    b = 0 (mod 8) into the first vector, b = 4 (mod 8) into the second,
 *    one block per lane, each lane doing (d_w * d_a) * (float)isum
 *    [+ (m_w * d_a) * (float)asum] and then the add, as the reference
 *    writes it. Float rows go 8 elements at a time, element i in lane
 *    i mod 8;
 *  - nb_reduce combines the lanes in simd_reduce8's order;
 *  - no FMA: the build uses -ffp-contract=off (the GCC/Clang intrinsics
 *    for add and multiply are plain C operators, which that flag keeps
 *    apart) and nothing here asks for vfma/vmla;
 *  - f16 weights are widened with FCVTL (vcvt_f32_f16), which is exact,
 *    subnormals included; bf16 by a 16-bit shift.
 * Rows that end inside a step are finished with zero padding: every
 * padded term is +0 (zero scale times zero), and adding +0 changes no
 * accumulator. */
#ifndef NIBBLE_KERNELS_NEON_H
#define NIBBLE_KERNELS_NEON_H

#include "kernels_common.h"

#include <arm_neon.h>
#include <stddef.h>
#include <string.h>

/* Tokens that share one expansion of a weight block in the batched
 * kernels. With 4, four expanded blocks (8 registers) and 2 accumulators
 * per token stay well inside the 32 vector registers. */
#define NB_MAXT 4

NB_INLINE uint64_t nb_ld64(const void *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* simd_reduce8 on lanes {lo, hi}: lo+hi gives l0+l4, l1+l5, l2+l6,
 * l3+l7; adding its halves gives (l0+l4)+(l2+l6) and (l1+l5)+(l3+l7);
 * the last add joins those two, exactly the reference's tree. */
NB_INLINE float nb_reduce(float32x4_t lo, float32x4_t hi)
{
    float32x4_t s = vaddq_f32(lo, hi);
    float32x2_t h = vadd_f32(vget_low_f32(s), vget_high_f32(s));
    return vget_lane_f32(h, 0) + vget_lane_f32(h, 1);
}

/* ---- float-activation dots (F32 / F16 / BF16 weights) ---- */

/* Weights i..i+7 as floats: lanes 0-3 in *lo, 4-7 in *hi. */
NB_INLINE void nb_wload8(int type, const void *w, size_t i, float32x4_t *lo, float32x4_t *hi)
{
    switch (type) {
    case SIMD_F16: {
        float16x8_t h = vreinterpretq_f16_u16(vld1q_u16((const uint16_t *)w + i));
        *lo = vcvt_f32_f16(vget_low_f16(h));
        *hi = vcvt_high_f32_f16(h);
        break;
    }
    case SIMD_BF16: {
        uint16x8_t h = vld1q_u16((const uint16_t *)w + i);
        *lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
        *hi = vreinterpretq_f32_u32(vshll_high_n_u16(h, 16));
        break;
    }
    default:
        *lo = vld1q_f32((const float *)w + i);
        *hi = vld1q_f32((const float *)w + i + 4);
        break;
    }
}

/* nt (1..NB_MAXT, a constant after inlining) activation rows at a +
 * t*astride bytes, results to out[t*ostride]. */
NB_INLINE void nb_frows(int type, size_t n, const void *w, const char *a, size_t astride, int nt, float *out,
                        size_t ostride)
{
    float32x4_t lo[NB_MAXT], hi[NB_MAXT];
    for (int t = 0; t < nt; t++)
        lo[t] = hi[t] = vdupq_n_f32(0.0f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        float32x4_t w0, w1;
        nb_wload8(type, w, i, &w0, &w1);
        for (int t = 0; t < nt; t++) {
            const float *ap = (const float *)(a + t * astride) + i;
            lo[t] = vaddq_f32(lo[t], vmulq_f32(w0, vld1q_f32(ap)));
            hi[t] = vaddq_f32(hi[t], vmulq_f32(w1, vld1q_f32(ap + 4)));
        }
    }
    if (i < n) { /* the last n mod 8 elements, both sides zero-padded */
        size_t r = n - i;
        unsigned char wb[32] = {0};
        memcpy(wb, (const unsigned char *)w + i * nb_welem(type), r * nb_welem(type));
        float32x4_t w0, w1;
        nb_wload8(type, wb, 0, &w0, &w1);
        for (int t = 0; t < nt; t++) {
            float ab[8] = {0};
            memcpy(ab, (const float *)(a + t * astride) + i, r * sizeof(float));
            lo[t] = vaddq_f32(lo[t], vmulq_f32(w0, vld1q_f32(ab)));
            hi[t] = vaddq_f32(hi[t], vmulq_f32(w1, vld1q_f32(ab + 4)));
        }
    }
    for (int t = 0; t < nt; t++)
        out[t * ostride] = nb_reduce(lo[t], hi[t]);
}

/* Batch driver: tokens NB_MAXT at a time, then the rest, each call with a
 * literal token count so the per-token loops unroll. */
#define NB_BATCH(ROWS, TYPE, n, w, a, as, nt, out, os)                                                \
    do {                                                                                              \
        const char *a_ = (const char *)(a);                                                           \
        size_t t_ = 0;                                                                                \
        for (; t_ + NB_MAXT <= (nt); t_ += NB_MAXT)                                                   \
            ROWS(TYPE, n, w, a_ + t_ * (as), as, NB_MAXT, (out) + t_ * (os), os);                     \
        switch ((nt) - t_) {                                                                          \
        case 3: ROWS(TYPE, n, w, a_ + t_ * (as), as, 3, (out) + t_ * (os), os); break;                \
        case 2: ROWS(TYPE, n, w, a_ + t_ * (as), as, 2, (out) + t_ * (os), os); break;                \
        case 1: ROWS(TYPE, n, w, a_ + t_ * (as), as, 1, (out) + t_ * (os), os); break;                \
        default: break;                                                                               \
        }                                                                                             \
    } while (0)

static float nb_dot_f32(size_t n, const float *a, const float *b)
{
    float r;
    nb_frows(SIMD_F32, n, a, (const char *)b, 0, 1, &r, 0);
    return r;
}

#define NB_FDOT(NAME, TYPE)                                                                       \
    static float NAME(size_t n, const void *w, const void *a)                                     \
    {                                                                                             \
        float r;                                                                                  \
        nb_frows(TYPE, n, w, a, 0, 1, &r, 0);                                                     \
        return r;                                                                                 \
    }                                                                                             \
    static void NAME##_batch(size_t n, const void *w, const void *a, size_t as, size_t nt, float *out, \
                             size_t os)                                                           \
    {                                                                                             \
        NB_BATCH(nb_frows, TYPE, n, w, a, as, nt, out, os);                                       \
    }
NB_FDOT(nb_dot_w_f32, SIMD_F32)
NB_FDOT(nb_dot_w_f16, SIMD_F16)
NB_FDOT(nb_dot_w_bf16, SIMD_BF16)

/* ---- activation quantization (q8a, q8k), byte for byte the references ---- */

/* x with NaN lanes replaced by +0 (a NaN is the one value unequal to
 * itself). */
NB_INLINE float32x4_t nb_nan_to_zero(float32x4_t x)
{
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(x), vceqq_f32(x, x)));
}

/* m with |x| folded in: the reference's fmaxf skips NaN inputs, so they
 * become +0 first, after which max is order-free (every value is >= +0). */
NB_INLINE float32x4_t nb_absmax(float32x4_t m, float32x4_t x) { return vmaxq_f32(m, nb_nan_to_zero(vabsq_f32(x))); }

/* 32 values xv times id, made total (NaN -> 0, clamped to +-127) and
 * rounded to nearest, ties to even (lrintf): the codes to qs, the sums of
 * codes 0-15 and 16-31 to s[0] and s[1]. */
NB_INLINE void nb_quant32(const float32x4_t xv[8], float32x4_t vid, int8_t *qs, int32_t s[2])
{
    const float32x4_t lo = vdupq_n_f32(-127.0f), hi = vdupq_n_f32(127.0f);
    int32x4_t q[8];
    for (int j = 0; j < 8; j++) {
        float32x4_t t = nb_nan_to_zero(vmulq_f32(xv[j], vid));
        t = vminq_f32(vmaxq_f32(t, lo), hi);
        q[j] = vcvtnq_s32_f32(t);
    }
    s[0] = vaddvq_s32(vaddq_s32(vaddq_s32(q[0], q[1]), vaddq_s32(q[2], q[3])));
    s[1] = vaddvq_s32(vaddq_s32(vaddq_s32(q[4], q[5]), vaddq_s32(q[6], q[7])));
    /* |q| <= 127: plain narrowing keeps every value */
    for (int h = 0; h < 2; h++) {
        const int32x4_t *p = q + 4 * h;
        int16x8_t a = vcombine_s16(vmovn_s32(p[0]), vmovn_s32(p[1]));
        int16x8_t b = vcombine_s16(vmovn_s32(p[2]), vmovn_s32(p[3]));
        vst1q_s8(qs + 16 * h, vcombine_s8(vmovn_s16(a), vmovn_s16(b)));
    }
}

static void nb_q8a_quant(const float *x, void *dst, size_t n)
{
    simd_block_q8a *out = dst;
    for (size_t i = 0; i < n / SIMD_QK; i++) {
        const float *v = x + i * SIMD_QK;
        float32x4_t xv[8], m = vdupq_n_f32(0.0f);
        for (int j = 0; j < 8; j++) {
            xv[j] = vld1q_f32(v + 4 * j);
            m = nb_absmax(m, xv[j]);
        }
        float amax = vmaxvq_f32(m);
        float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
        int32_t s[2];
        nb_quant32(xv, vdupq_n_f32(id), out[i].qs, s);
        out[i].d = d;
        out[i].sum = s[0] + s[1];
    }
}

static void nb_q8k_quant(const float *x, void *dst, size_t n)
{
    simd_block_q8k *out = dst;
    for (size_t i = 0; i < n / SIMD_QKK; i++, x += SIMD_QKK) {
        float32x4_t m[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
        for (int j = 0; j < SIMD_QKK / 4; j++)
            m[j & 3] = nb_absmax(m[j & 3], vld1q_f32(x + 4 * j));
        float amax = vmaxvq_f32(vmaxq_f32(vmaxq_f32(m[0], m[1]), vmaxq_f32(m[2], m[3])));
        float id = amax != 0 ? 127.0f / amax : 0.0f, d = id != 0 ? 1.0f / id : amax / 127.0f;
        const float32x4_t vid = vdupq_n_f32(id);
        for (int k = 0; k < SIMD_QKK / SIMD_QK; k++) {
            float32x4_t xv[8];
            for (int j = 0; j < 8; j++)
                xv[j] = vld1q_f32(x + SIMD_QK * k + 4 * j);
            int32_t s[2];
            nb_quant32(xv, vid, out[i].qs + SIMD_QK * k, s);
            out[i].bsums[2 * k] = (int16_t)s[0];
            out[i].bsums[2 * k + 1] = (int16_t)s[1];
        }
        out[i].d = d;
    }
}

/* ---- quantized dots ---- */

/* 0xff in byte j of the result where bit j (of 16) of the 32-bit word
 * held in v is set, starting at bit 8*first_byte: each byte takes a copy
 * of the qh byte holding its bit (table lookup) and tests its own bit. */
NB_INLINE uint8x16_t nb_bits16(uint8x16_t v, int first_byte)
{
    static const uint8_t ix[2][16] = {{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
                                      {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3}};
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    return vtstq_u8(vqtbl1q_u8(v, vld1q_u8(ix[first_byte / 2])), vld1q_u8(bit));
}

/* One weight block as signed values in activation order (w0: values
 * 0-15, w1: 16-31): q8_0's codes, q4_0's code - 8, q5_0's code - 16,
 * q4_1's and q5_1's codes (0..31, the minimum is a separate term).
 * Subtracting the offsets here keeps the integer sum exactly the
 * reference's, with no correction afterwards. */
NB_INLINE void nb_wexp(int type, const unsigned char *blk, int8x16_t *w0, int8x16_t *w1)
{
    if (type == SIMD_Q8_0) {
        const int8_t *q = (const int8_t *)(blk + offsetof(simd_block_q8_0, qs));
        *w0 = vld1q_s8(q);
        *w1 = vld1q_s8(q + 16);
        return;
    }
    size_t o, oh;
    nb_code_offsets(type, &o, &oh);
    const uint8x16_t qs = vld1q_u8(blk + o);
    uint8x16_t lo = vandq_u8(qs, vdupq_n_u8(0x0f)), hi = vshrq_n_u8(qs, 4);
    if (type == SIMD_Q5_0 || type == SIMD_Q5_1) {
        const uint8x16_t v = vreinterpretq_u8_u32(vdupq_n_u32(nb_ld32(blk + oh)));
        const uint8x16_t blo = nb_bits16(v, 0), bhi = nb_bits16(v, 2), b5 = vdupq_n_u8(0x10);
        if (type == SIMD_Q5_0) {
            /* code - 16 = nibble - (16 where the 5th bit is clear),
             * modulo 256, read back as signed */
            lo = vsubq_u8(lo, vbicq_u8(b5, blo));
            hi = vsubq_u8(hi, vbicq_u8(b5, bhi));
        } else {
            lo = vorrq_u8(lo, vandq_u8(b5, blo));
            hi = vorrq_u8(hi, vandq_u8(b5, bhi));
        }
    } else if (type == SIMD_Q4_0) {
        lo = vsubq_u8(lo, vdupq_n_u8(8));
        hi = vsubq_u8(hi, vdupq_n_u8(8));
    }
    *w0 = vreinterpretq_s8_u8(lo);
    *w1 = vreinterpretq_s8_u8(hi);
}

/* d (and m: the f16 right after d) of 4 consecutive blocks, as floats. */
NB_INLINE void nb_wscales4(int type, const unsigned char *blk, size_t bs, float32x4_t *d, float32x4_t *m)
{
    if (nb_has_min(type)) {
        /* d in the low half of each 32-bit word, m in the high half */
        uint32x4_t p = vdupq_n_u32(nb_ld32(blk));
        p = vsetq_lane_u32(nb_ld32(blk + bs), p, 1);
        p = vsetq_lane_u32(nb_ld32(blk + 2 * bs), p, 2);
        p = vsetq_lane_u32(nb_ld32(blk + 3 * bs), p, 3);
        *d = vcvt_f32_f16(vreinterpret_f16_u16(vmovn_u32(p)));
        *m = vcvt_f32_f16(vreinterpret_f16_u16(vshrn_n_u32(p, 16)));
        return;
    }
    uint16x4_t h = vdup_n_u16(nb_ld16(blk));
    h = vset_lane_u16(nb_ld16(blk + bs), h, 1);
    h = vset_lane_u16(nb_ld16(blk + 2 * bs), h, 2);
    h = vset_lane_u16(nb_ld16(blk + 3 * bs), h, 3);
    *d = vcvt_f32_f16(vreinterpret_f16_u16(h));
    *m = vdupq_n_f32(0.0f);
}

/* d and sum of 4 consecutive activation blocks: {d, sum} is the first 64
 * bits of each; unzipping the 32-bit halves separates them. */
NB_INLINE void nb_act4(const simd_block_q8a *y, float32x4_t *d, int32x4_t *s)
{
    uint32x4_t p01 = vcombine_u32(vcreate_u32(nb_ld64(&y[0])), vcreate_u32(nb_ld64(&y[1])));
    uint32x4_t p23 = vcombine_u32(vcreate_u32(nb_ld64(&y[2])), vcreate_u32(nb_ld64(&y[3])));
    *d = vreinterpretq_f32_u32(vuzp1q_u32(p01, p23));
    *s = vreinterpretq_s32_u32(vuzp2q_u32(p01, p23));
}

/* Four expanded weight blocks w (scales dw, minimums mw if has_min)
 * against blocks b..b+3 of nt activation rows, each row's terms added to
 * acc[t]: lane k takes block k's (dw * da) * isum, plus (mw * da) * sum
 * with minimums. The legacy types (nb_qgroup4) and the table types
 * (NB_GROUP4_DOTS's groups) share it. */
NB_INLINE void nb_tokens4(int8x16_t w[4][2], float32x4_t dw, float32x4_t mw, int has_min, const char *a,
                          size_t astride, size_t b, int nt, float32x4_t acc[])
{
    for (int t = 0; t < nt; t++) {
        const simd_block_q8a *y = (const simd_block_q8a *)(a + t * astride) + b;
        int32x4_t s[4];
        for (int k = 0; k < 4; k++)
            s[k] = nb_bdot(w[k][0], w[k][1], vld1q_s8(y[k].qs), vld1q_s8(y[k].qs + 16));
        /* two rounds of pairwise adds leave block k's total in lane k */
        int32x4_t isum = vpaddq_s32(vpaddq_s32(s[0], s[1]), vpaddq_s32(s[2], s[3]));
        float32x4_t da;
        int32x4_t as;
        nb_act4(y, &da, &as);
        float32x4_t term = vmulq_f32(vmulq_f32(dw, da), vcvtq_f32_s32(isum));
        if (has_min)
            term = vaddq_f32(term, vmulq_f32(vmulq_f32(mw, da), vcvtq_f32_s32(as)));
        acc[t] = vaddq_f32(acc[t], term);
    }
}

/* Blocks 0..3 of the weight blocks at wb against blocks b..b+3 of nt
 * activation rows, added to acc[t] (the lanes 0-3 or 4-7 vector, chosen
 * by the caller from b mod 8). */
NB_INLINE void nb_qgroup4(int type, const unsigned char *wb, const char *a, size_t astride, size_t b, int nt,
                          float32x4_t acc[])
{
    const size_t bs = nb_bbytes(type);
    int8x16_t w[4][2];
    for (int k = 0; k < 4; k++)
        nb_wexp(type, wb + (size_t)k * bs, &w[k][0], &w[k][1]);
    float32x4_t dw, mw;
    nb_wscales4(type, wb, bs, &dw, &mw);
    nb_tokens4(w, dw, mw, nb_has_min(type), a, astride, b, nt, acc);
}

/* The last m < 4 blocks, copied next to zero blocks. */
NB_INLINE void nb_qtail(int type, const unsigned char *wb, size_t m, const char *a, size_t astride, size_t b,
                        int nt, float32x4_t acc[])
{
    const size_t bs = nb_bbytes(type);
    unsigned char wbuf[4 * sizeof(simd_block_q8_0)];
    simd_block_q8a abuf[NB_MAXT][4];
    memset(wbuf, 0, sizeof wbuf);
    memset(abuf, 0, sizeof abuf);
    memcpy(wbuf, wb, m * bs);
    for (int t = 0; t < nt; t++)
        memcpy(abuf[t], (const simd_block_q8a *)(a + t * astride) + b, m * sizeof(simd_block_q8a));
    nb_qgroup4(type, wbuf, (const char *)abuf, sizeof abuf[0], 0, nt, acc);
}

NB_INLINE void nb_qrows(int type, size_t n, const void *w, const char *a, size_t astride, int nt, float *out,
                        size_t ostride)
{
    const size_t nb = n / SIMD_QK, bs = nb_bbytes(type);
    const unsigned char *wp = w;
    float32x4_t acc[2][NB_MAXT]; /* [0]: lanes 0-3, [1]: lanes 4-7 */
    for (int t = 0; t < nt; t++)
        acc[0][t] = acc[1][t] = vdupq_n_f32(0.0f);
    size_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        nb_qgroup4(type, wp + b * bs, a, astride, b, nt, acc[0]);
        nb_qgroup4(type, wp + (b + 4) * bs, a, astride, b + 4, nt, acc[1]);
    }
    if (b + 4 <= nb) {
        nb_qgroup4(type, wp + b * bs, a, astride, b, nt, acc[0]);
        b += 4;
    }
    if (b < nb) /* b is 0 or 4 mod 8 here */
        nb_qtail(type, wp + b * bs, nb - b, a, astride, b, nt, acc[(b / 4) & 1]);
    for (int t = 0; t < nt; t++)
        out[t * ostride] = nb_reduce(acc[0][t], acc[1][t]);
}

/* The dots of a type whose blocks of 32 go four at a time through its own
 * GROUP4 (wb, a, astride, b, nt, acc: blocks b..b+3 into the lanes of
 * acc[t]; BS bytes a block), laid out as nb_qrows lays out the others:
 * blocks 0 mod 8 into acc[0], 4 mod 8 into acc[1], a row's last 1..3
 * blocks through zeroed copies (a zero weight block and a zero activation
 * block add +0). Defines NAME, NAME##_batch and NAME##_rows
 * (mxfp4_neon.h and lquants_neon.h's iq4_nl use it). */
#define NB_GROUP4_DOTS(NAME, GROUP4, BS)                                                          \
    NB_INLINE void NAME##_tail(const unsigned char *wb, size_t m, const char *a, size_t astride,  \
                               size_t b, int nt, float32x4_t acc[])                               \
    {                                                                                             \
        unsigned char wbuf[4 * (BS)];                                                             \
        simd_block_q8a abuf[NB_MAXT][4];                                                          \
        memset(wbuf, 0, sizeof wbuf);                                                             \
        memset(abuf, 0, sizeof abuf);                                                             \
        memcpy(wbuf, wb, m * (BS));                                                               \
        for (int t = 0; t < nt; t++)                                                              \
            memcpy(abuf[t], (const simd_block_q8a *)(a + t * astride) + b,                        \
                   m * sizeof(simd_block_q8a));                                                   \
        GROUP4(wbuf, (const char *)abuf, sizeof abuf[0], 0, nt, acc);                             \
    }                                                                                             \
    NB_INLINE void NAME##_qrows(int unused, size_t n, const void *w, const char *a, size_t astride, \
                                int nt, float *out, size_t ostride)                               \
    {                                                                                             \
        (void)unused;                                                                             \
        const size_t nb = n / SIMD_QK;                                                            \
        const unsigned char *wp = w;                                                              \
        float32x4_t acc[2][NB_MAXT];                                                              \
        for (int t = 0; t < nt; t++)                                                              \
            acc[0][t] = acc[1][t] = vdupq_n_f32(0.0f);                                            \
        size_t b = 0;                                                                             \
        for (; b + 8 <= nb; b += 8) {                                                             \
            GROUP4(wp + b * (BS), a, astride, b, nt, acc[0]);                                     \
            GROUP4(wp + (b + 4) * (BS), a, astride, b + 4, nt, acc[1]);                           \
        }                                                                                         \
        if (b + 4 <= nb) {                                                                        \
            GROUP4(wp + b * (BS), a, astride, b, nt, acc[0]);                                     \
            b += 4;                                                                               \
        }                                                                                         \
        if (b < nb)                                                                               \
            NAME##_tail(wp + b * (BS), nb - b, a, astride, b, nt, acc[(b / 4) & 1]);              \
        for (int t = 0; t < nt; t++)                                                              \
            out[t * ostride] = nb_reduce(acc[0][t], acc[1][t]);                                   \
    }                                                                                             \
    static float NAME(size_t n, const void *w, const void *a)                                     \
    {                                                                                             \
        float r;                                                                                  \
        NAME##_qrows(0, n, w, a, 0, 1, &r, 0);                                                    \
        return r;                                                                                 \
    }                                                                                             \
    static void NAME##_batch(size_t n, const void *w, const void *a, size_t as, size_t nt,        \
                             float *out, size_t os)                                               \
    {                                                                                             \
        NB_BATCH(NAME##_qrows, 0, n, w, a, as, nt, out, os);                                      \
    }                                                                                             \
    static void NAME##_rows(size_t n, const void *w, size_t ws, size_t nr, const void *a,         \
                            size_t as, size_t nt, float *out, size_t os)                          \
    {                                                                                             \
        for (size_t r = 0; r < nr; r++)                                                           \
            NAME##_batch(n, (const char *)w + r * ws, a, as, nt, out + r, os);                    \
    }

#define NB_QDOT(NAME, TYPE)                                                                       \
    static float NAME(size_t n, const void *w, const void *a)                                     \
    {                                                                                             \
        float r;                                                                                  \
        nb_qrows(TYPE, n, w, a, 0, 1, &r, 0);                                                     \
        return r;                                                                                 \
    }                                                                                             \
    static void NAME##_batch(size_t n, const void *w, const void *a, size_t as, size_t nt, float *out, \
                             size_t os)                                                           \
    {                                                                                             \
        NB_BATCH(nb_qrows, TYPE, n, w, a, as, nt, out, os);                                       \
    }
NB_QDOT(nb_dot_q8_0, SIMD_Q8_0)
NB_QDOT(nb_dot_q4_0, SIMD_Q4_0)
NB_QDOT(nb_dot_q4_1, SIMD_Q4_1)
NB_QDOT(nb_dot_q5_0, SIMD_Q5_0)
NB_QDOT(nb_dot_q5_1, SIMD_Q5_1)

void NB_SET_FN(simd_kernel_set *s)
{
    s->q8a_quant = nb_q8a_quant;
    s->q8k_quant = nb_q8k_quant;
    s->dot_f32 = nb_dot_f32;
#define NB_PUT(T, F)   \
    s->dot[T] = F;     \
    s->dot_batch[T] = F##_batch;
    NB_PUT(SIMD_F32, nb_dot_w_f32)
    NB_PUT(SIMD_F16, nb_dot_w_f16)
    NB_PUT(SIMD_BF16, nb_dot_w_bf16)
    NB_PUT(SIMD_Q8_0, nb_dot_q8_0)
    NB_PUT(SIMD_Q4_0, nb_dot_q4_0)
    NB_PUT(SIMD_Q4_1, nb_dot_q4_1)
    NB_PUT(SIMD_Q5_0, nb_dot_q5_0)
    NB_PUT(SIMD_Q5_1, nb_dot_q5_1)
#undef NB_PUT
}

#endif
