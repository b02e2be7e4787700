/* The i-quant dots below 4 bits (iquants.h) against q8k for the x86 sets.
 * Included by lquants_x86.h (so at the end of each kernels_<set>.c, after
 * kquants_x86.h, whose NBK_INLINE, NBK_MAXT and NBK_ROW_TILE it uses);
 * nbi_set_dots replaces the generic expansion lquants_rows.h would install.
 *
 * A sub-block of 32 values is held as two vectors: q, the magnitudes
 * (the grid bytes as they are, all >= 1 for iq2/iq3; |8g +- 1| for iq1),
 * and s, +1 or -1 per value. The signs go onto the activations, so the
 * products are u8 * s8 pairs with no sign work on the weights per token:
 *     maddubs(q, sign(a, s))   pairs, at most 2 * 62 * 127 < 2^15
 *     madd(.., scales)         times the 16-value sub-block scales (<= 31)
 * summed over the super-block's eight sub-blocks in int32 lanes, then one
 * horizontal total: the same integer sumi as iquants.c's, exactly, so the
 * float step after it (lquants_rows.h's, per super-block and token) gives
 * the scalar set's bits.
 *
 * The grid entries are fetched by vector gathers from indices built in
 * vector registers; the sign fields are either 32 sign bits (iq2_s,
 * iq3_s: a mask, or a byte compare without AVX-512) or 7-bit indices
 * (iq2_xxs, iq2_xs, iq3_xxs) gathered from simd_iq_ksigns_pm1. */
#ifndef NIBBLE_IQUANTS_X86_H
#define NIBBLE_IQUANTS_X86_H

#include "iquants.h"

typedef struct {
    __m256i q[8], s[8], sc[8]; /* sc: the scale of each 16 values as int16 */
} nbi_block;

/* 32 sign bits to +-1 bytes (bit j of s negates byte j). */
NBK_INLINE __m256i nbi_signs32(uint32_t s)
{
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    return _mm256_mask_blend_epi8((__mmask32)s, _mm256_set1_epi8(1), _mm256_set1_epi8(-1));
#else
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                                            3, 3, 3, 3, 3, 3, 3);
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201u);
    __m256i sv = _mm256_shuffle_epi8(_mm256_set1_epi32((int)s), spread);
    __m256i m = _mm256_cmpeq_epi8(_mm256_and_si256(sv, bits), bits);
    return _mm256_or_si256(m, _mm256_set1_epi8(1));
#endif
}

/* Four 7-bit sign indices, bits 7l .. 7l+6 of u, as +-1 bytes. */
NBK_INLINE __m256i nbi_ksigns(uint32_t u)
{
    __m128i i = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)u), _mm_setr_epi32(0, 7, 14, 21)),
                              _mm_set1_epi32(127));
    return _mm256_i32gather_epi64((const long long *)simd_iq_ksigns_pm1, i, 8);
}

NBK_INLINE __m128i nbi_load4(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return _mm_cvtsi32_si128((int)v);
}

NBK_INLINE __m128i nbi_load8(const uint8_t *p) { return _mm_loadl_epi64((const __m128i *)p); }

/* Super-block x of type into e: magnitudes, signs and sub-block scales;
 * returns d (iquants.h). */
NBK_INLINE float nbi_prep(int type, const unsigned char *x, nbi_block *e)
{
    int8_t ls[16];
    const float d = simd_iq_scales(type, x, ls);
    /* scale vector i: ls[2i] in the low 8 int16, ls[2i+1] in the high 8 */
    const __m256i lsv = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ls));
    const __m256i pick = _mm256_setr_epi8(0, -128, 0, -128, 0, -128, 0, -128, 0, -128, 0, -128, 0, -128, 0, -128, 1,
                                          -128, 1, -128, 1, -128, 1, -128, 1, -128, 1, -128, 1, -128, 1, -128);
    for (int i = 0; i < 8; i++)
        e->sc[i] = _mm256_shuffle_epi8(lsv, _mm256_add_epi8(pick, _mm256_set1_epi8((char)(2 * i))));

    const uint8_t *p = x;
    for (int i = 0; i < 8; i++) {
        switch (type) {
        case SIMD_IQ3_S: {
            const simd_block_iq3_s *b = (const simd_block_iq3_s *)x;
            __m256i hi = _mm256_and_si256(_mm256_sllv_epi32(_mm256_set1_epi32(b->qh[i]),
                                                            _mm256_setr_epi32(8, 7, 6, 5, 4, 3, 2, 1)),
                                          _mm256_set1_epi32(256));
            __m256i idx = _mm256_or_si256(_mm256_cvtepu8_epi32(nbi_load8(b->qs + 8 * i)), hi);
            e->q[i] = _mm256_i32gather_epi32((const int *)simd_iq3s_grid, idx, 4);
            e->s[i] = nbi_signs32(simd_iq_le32(b->signs + 4 * i));
            break;
        }
        case SIMD_IQ3_XXS: {
            const simd_block_iq3_xxs *b = (const simd_block_iq3_xxs *)x;
            __m256i idx = _mm256_cvtepu8_epi32(nbi_load8(b->qs + 8 * i));
            e->q[i] = _mm256_i32gather_epi32((const int *)simd_iq3xxs_grid, idx, 4);
            e->s[i] = nbi_ksigns(simd_iq_le32(b->qs + 64 + 4 * i));
            break;
        }
        case SIMD_IQ2_XXS: {
            const uint8_t *q = p + 2 + 8 * i;
            __m128i idx = _mm_cvtepu8_epi32(nbi_load4(q));
            e->q[i] = _mm256_i32gather_epi64((const long long *)simd_iq2xxs_grid, idx, 8);
            e->s[i] = nbi_ksigns(simd_iq_le32(q + 4));
            break;
        }
        case SIMD_IQ2_XS: {
            __m128i v = _mm_cvtepu16_epi32(nbi_load8(p + 2 + 8 * i));
            e->q[i] = _mm256_i32gather_epi64((const long long *)simd_iq2xs_grid,
                                             _mm_and_si128(v, _mm_set1_epi32(511)), 8);
            e->s[i] = _mm256_i32gather_epi64((const long long *)simd_iq_ksigns_pm1, _mm_srli_epi32(v, 9), 8);
            break;
        }
        case SIMD_IQ2_S: {
            const simd_block_iq2_s *b = (const simd_block_iq2_s *)x;
            __m128i hi = _mm_and_si128(_mm_sllv_epi32(_mm_set1_epi32(b->qh[i]), _mm_setr_epi32(8, 6, 4, 2)),
                                       _mm_set1_epi32(0x300));
            __m128i idx = _mm_or_si128(_mm_cvtepu8_epi32(nbi_load4(b->qs + 4 * i)), hi);
            e->q[i] = _mm256_i32gather_epi64((const long long *)simd_iq2s_grid, idx, 8);
            e->s[i] = nbi_signs32(simd_iq_le32(b->qs + 32 + 4 * i));
            break;
        }
        default: { /* iq1_s, iq1_m: signed codes c = 8g +- 1, never 0 */
            uint64_t g[4];
            uint32_t s = simd_iq_sub(type, x, i, g);
            __m256i v = _mm256_set_epi64x((long long)g[3], (long long)g[2], (long long)g[1], (long long)g[0]);
            __m256i c8 = _mm256_and_si256(_mm256_slli_epi16(v, 3), _mm256_set1_epi8((char)0xf8));
            const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2,
                                                    2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
            __m256i dl = _mm256_shuffle_epi8(_mm256_set1_epi32((int)s), spread); /* 0xff: delta -1 */
            __m256i c = _mm256_add_epi8(c8, _mm256_or_si256(dl, _mm256_set1_epi8(1)));
            e->q[i] = _mm256_abs_epi8(c);
            e->s[i] = _mm256_sign_epi8(_mm256_set1_epi8(1), c);
            break;
        }
        }
    }
    return d;
}

/* The sumi of super-block e against one token's q8k block y. */
NBK_INLINE int32_t nbi_sum(const nbi_block *e, const simd_block_q8k *y)
{
    __m256i acc = _mm256_setzero_si256();
    for (int i = 0; i < 8; i++) {
        __m256i a = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(y->qs + 32 * i)), e->s[i]);
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(e->q[i], a), e->sc[i]));
    }
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* One weight row of nb super-blocks against nt (1..NBK_MAXT) token rows
 * at a + t*as; token t's result to out[t*os]. The float order is
 * iquants.c's. */
NBK_INLINE void nbi_row(int type, size_t nb, const void *wrow, const char *a, size_t as, int nt, float *out, size_t os)
{
    const size_t bs = simd_iq_bytes(type);
    float acc[NBK_MAXT][8];
    memset(acc, 0, sizeof acc);
    for (size_t b = 0; b < nb; b++) {
        nbi_block e;
        const float d = nbi_prep(type, (const unsigned char *)wrow + b * bs, &e);
        for (int t = 0; t < nt; t++) {
            const simd_block_q8k *y = (const simd_block_q8k *)(a + t * as) + b;
            acc[t][b & 7] += (d * y->d) * (float)nbi_sum(&e, y);
        }
    }
    for (int t = 0; t < nt; t++)
        out[t * os] = simd_reduce8(acc[t]);
}

/* nr rows against nt tokens, tiled as nbk_rows is (kquants_rows.h). */
NBK_DEFINE_ROWS(nbi_rows, nbi_row)
NBK_DEFINE_DOTS(nbi_dot_iq2_xxs, SIMD_IQ2_XXS, nbi_rows, nbi_row)
NBK_DEFINE_DOTS(nbi_dot_iq2_xs, SIMD_IQ2_XS, nbi_rows, nbi_row)
NBK_DEFINE_DOTS(nbi_dot_iq2_s, SIMD_IQ2_S, nbi_rows, nbi_row)
NBK_DEFINE_DOTS(nbi_dot_iq3_xxs, SIMD_IQ3_XXS, nbi_rows, nbi_row)
NBK_DEFINE_DOTS(nbi_dot_iq3_s, SIMD_IQ3_S, nbi_rows, nbi_row)
NBK_DEFINE_DOTS(nbi_dot_iq1_s, SIMD_IQ1_S, nbi_rows, nbi_row)
NBK_DEFINE_DOTS(nbi_dot_iq1_m, SIMD_IQ1_M, nbi_rows, nbi_row)

static void nbi_set_dots(simd_kernel_set *s)
{
    SIMD_PUT_DOTS(s, SIMD_IQ2_XXS, nbi_dot_iq2_xxs);
    SIMD_PUT_DOTS(s, SIMD_IQ2_XS, nbi_dot_iq2_xs);
    SIMD_PUT_DOTS(s, SIMD_IQ2_S, nbi_dot_iq2_s);
    SIMD_PUT_DOTS(s, SIMD_IQ3_XXS, nbi_dot_iq3_xxs);
    SIMD_PUT_DOTS(s, SIMD_IQ3_S, nbi_dot_iq3_s);
    SIMD_PUT_DOTS(s, SIMD_IQ1_S, nbi_dot_iq1_s);
    SIMD_PUT_DOTS(s, SIMD_IQ1_M, nbi_dot_iq1_m);
}

#endif
