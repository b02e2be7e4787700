/* The avx512vnni kernel set: AVX-512 F/BW/VL + VNNI (Ice Lake and later,
 * Zen 4 and later); built with -mavx512f -mavx512bw -mavx512vl
 * -mavx512vnni -mfma -mf16c. Bit-identical to the scalar set: see
 * kernels_x86.h for how.
 *
 * The integer work runs on 512-bit vectors, two blocks per vector, sixteen
 * blocks per step; the float work stays eight lanes wide, because lane l
 * of the accumulator must take blocks b = l (mod 8) in increasing order:
 * a step adds blocks b..b+7, then b+8..b+15. */
#include "kernels_x86.h"

/* 256-bit forms (EVEX vpdpbusd) for the 8-block steps at the end of a row;
 * same meaning as in kernels_avxvnni.c. */
NB_INLINE __m256i nb_dot_us(__m256i u, __m256i s)
{
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}

NB_INLINE __m256i nb_dot_q8(__m256i w, __m256i a)
{
    return nb_dot_us(_mm256_xor_si256(w, _mm256_set1_epi8((char)0x80)), a);
}

#define NB_Q8_BIAS_SHIFT 7

/* Blocks k and k+1 (bytes bs apart) as 64 bytes in activation order:
 * block k in the low half, k+1 in the high half, codes as nb_wexp. */
NB_INLINE __m512i nb_wexp2(int type, const unsigned char *blk, size_t bs)
{
    if (type == SIMD_Q8_0) {
        const size_t o = offsetof(simd_block_q8_0, qs);
        __m256i lo = _mm256_loadu_si256((const __m256i *)(blk + o));
        __m256i hi = _mm256_loadu_si256((const __m256i *)(blk + bs + o));
        return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
    size_t o, oh = 0;
    switch (type) {
    case SIMD_Q4_0: o = offsetof(simd_block_q4_0, qs); break;
    case SIMD_Q4_1: o = offsetof(simd_block_q4_1, qs); break;
    case SIMD_Q5_0: o = offsetof(simd_block_q5_0, qs); oh = offsetof(simd_block_q5_0, qh); break;
    default: o = offsetof(simd_block_q5_1, qs); oh = offsetof(simd_block_q5_1, qh); break;
    }
    /* t = qs_k | qs_k+1; z = t | t>>4 = [lo_k lo_k+1 hi_k hi_k+1] as
     * 128-bit chunks; reorder the chunks to [lo_k hi_k lo_k+1 hi_k+1] */
    __m256i t = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(blk + o))),
                                        _mm_loadu_si128((const __m128i *)(blk + bs + o)), 1);
    __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(t), _mm256_srli_epi16(t, 4), 1);
    z = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
    z = _mm512_and_si512(z, _mm512_set1_epi8(0x0f));
    if (type == SIMD_Q5_0 || type == SIMD_Q5_1) {
        /* the two qh words are exactly a 64-bit byte mask: bit j says
         * byte j gets its 5th bit (adding 16 to a nibble is or-ing it) */
        __mmask64 k = (__mmask64)nb_ld32(blk + oh) | (__mmask64)nb_ld32(blk + bs + oh) << 32;
        z = _mm512_mask_add_epi8(z, k, z, _mm512_set1_epi8(0x10));
    }
    return z;
}

NB_INLINE __m512i nb_aload2(const simd_block_q8a *y)
{
    __m256i lo = _mm256_loadu_si256((const __m256i *)y[0].qs);
    __m256i hi = _mm256_loadu_si256((const __m256i *)y[1].qs);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

NB_INLINE __m512i nb_bdot2(int type, __m512i w, __m512i a)
{
    if (type == SIMD_Q8_0)
        w = _mm512_xor_si512(w, _mm512_set1_epi8((char)0x80));
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, a);
}

/* Scales of 16 consecutive weight blocks without 16 scalar inserts: the
 * f16 d (and m) of 4 blocks lie within 128 bytes, so one two-source word
 * permute picks them out of two loads; four such, blended, give d0..d15
 * in words 0-15 and m0..m15 in words 16-31. The index: word k*bs/2 (d of
 * block k of the four), +1 for m; repeated so every group's result
 * already sits in its own positions. The second load is masked to the
 * words the permute uses, so nothing past the 16th block is read. */
#define NB_IX(h)                                                                                    \
    {                                                                                               \
        0, h, 2 * h, 3 * h, 0, h, 2 * h, 3 * h, 0, h, 2 * h, 3 * h, 0, h, 2 * h, 3 * h, 1, h + 1,   \
            2 * h + 1, 3 * h + 1, 1, h + 1, 2 * h + 1, 3 * h + 1, 1, h + 1, 2 * h + 1, 3 * h + 1, 1, \
            h + 1, 2 * h + 1, 3 * h + 1                                                             \
    }
static const short nb_ix_q8_0[32] = NB_IX(17), nb_ix_q4_0[32] = NB_IX(9), nb_ix_q4_1[32] = NB_IX(10),
                   nb_ix_q5_0[32] = NB_IX(11), nb_ix_q5_1[32] = NB_IX(12);
#undef NB_IX

NB_INLINE void nb_wscales16(int type, const unsigned char *wb, __m256 dw[2], __m256 mw[2])
{
    const size_t bs = nb_bbytes(type);
    const short *ix = type == SIMD_Q8_0 ? nb_ix_q8_0 : type == SIMD_Q4_0 ? nb_ix_q4_0 : type == SIMD_Q4_1 ? nb_ix_q4_1
                      : type == SIMD_Q5_0 ? nb_ix_q5_0 : nb_ix_q5_1;
    const __m512i idx = _mm512_loadu_si512(ix);
    const int last = 3 * (int)(bs / 2) + nb_has_min(type); /* last word used */
    const __mmask32 km = last >= 32 ? (__mmask32)((1ull << (last - 31)) - 1) : 0;
    __m512i r = _mm512_setzero_si512();
    for (int j = 0; j < 4; j++) {
        const unsigned char *p = wb + (size_t)(4 * j) * bs;
        __m512i za = _mm512_loadu_si512(p);
        __m512i zb = km ? _mm512_maskz_loadu_epi16(km, p + 64) : _mm512_setzero_si512();
        __m512i g = _mm512_permutex2var_epi16(za, idx, zb);
        r = j == 0 ? g : _mm512_mask_blend_epi16((__mmask32)(0x000f000fu << (4 * j)), r, g);
    }
    dw[0] = _mm256_cvtph_ps(_mm512_castsi512_si128(r));
    dw[1] = _mm256_cvtph_ps(_mm512_extracti32x4_epi32(r, 1));
    if (nb_has_min(type)) {
        mw[0] = _mm256_cvtph_ps(_mm512_extracti32x4_epi32(r, 2));
        mw[1] = _mm256_cvtph_ps(_mm512_extracti32x4_epi32(r, 3));
    } else {
        mw[0] = mw[1] = _mm256_setzero_ps();
    }
}

/* Blocks b..b+15. Each dpbusd leaves a block's sum spread over 8 int32 (two
 * 128-bit chunks); three rounds of (shuffle, shuffle, add) fold sixteen
 * such blocks into one vector with one sum per lane:
 *  1. pairs of vectors, chunk-wise: v[p] chunk c = block 4p+c (4 lanes)
 *  2. unpack 32-bit within chunks: two blocks per chunk, 2 lanes each
 *  3. unpack 64-bit: chunk c holds blocks c, 4+c, 8+c, 12+c, 1 lane each
 * and one permute puts block L in lane L. */
NB_INLINE void nb_qgroup16(int type, const unsigned char *wb, const char *a, size_t astride, size_t b, int nt,
                           const nb_scales *sc, size_t k0, __m256 acc[])
{
    const size_t bs = nb_bbytes(type);
    __m512i v[4][NB_MAXT];
    for (int p = 0; p < 4; p++) {
        __m512i w0 = nb_wexp2(type, wb + (size_t)(4 * p) * bs, bs);
        __m512i w1 = nb_wexp2(type, wb + (size_t)(4 * p + 2) * bs, bs);
        for (int t = 0; t < nt; t++) {
            const simd_block_q8a *y = (const simd_block_q8a *)(a + t * astride) + b + 4 * p;
            __m512i z0 = nb_bdot2(type, w0, nb_aload2(y));
            __m512i z1 = nb_bdot2(type, w1, nb_aload2(y + 2));
            v[p][t] = _mm512_add_epi32(_mm512_shuffle_i32x4(z0, z1, _MM_SHUFFLE(2, 0, 2, 0)),
                                       _mm512_shuffle_i32x4(z0, z1, _MM_SHUFFLE(3, 1, 3, 1)));
        }
    }
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    __m256i lo[NB_MAXT], hi[NB_MAXT];
    for (int t = 0; t < nt; t++) {
        __m512i x01 = _mm512_add_epi32(_mm512_unpacklo_epi32(v[0][t], v[1][t]),
                                       _mm512_unpackhi_epi32(v[0][t], v[1][t]));
        __m512i x23 = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2][t], v[3][t]),
                                       _mm512_unpackhi_epi32(v[2][t], v[3][t]));
        __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi64(x01, x23), _mm512_unpackhi_epi64(x01, x23));
        u = _mm512_permutexvar_epi32(order, u);
        lo[t] = _mm512_castsi512_si256(u);
        hi[t] = _mm512_extracti64x4_epi64(u, 1);
    }
    __m256 dw[2], mw[2];
    nb_wscales16(type, wb, dw, mw);
    for (int t = 0; t < nt; t++) {
        const float *da = &sc->d[t][k0];
        const int32_t *as = &sc->s[t][k0];
        acc[t] = nb_step8(type, NB_Q8_BIAS_SHIFT, acc[t], dw[0], mw[0], _mm256_loadu_ps(da), lo[t],
                          _mm256_loadu_si256((const __m256i *)as));
        acc[t] = nb_step8(type, NB_Q8_BIAS_SHIFT, acc[t], dw[1], mw[1], _mm256_loadu_ps(da + 8), hi[t],
                          _mm256_loadu_si256((const __m256i *)(as + 8)));
    }
}

#define NB_HAVE_GROUP16 1
#define NB_SET_FN simd_set_avx512vnni
#include "kernels_x86_q.h"
#define NB_MXFP4_SET_FN simd_set_mxfp4_avx512vnni
#include "mxfp4_x86.h"
