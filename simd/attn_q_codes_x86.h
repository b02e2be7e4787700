/* Private to simd/: a q8_0/q4_0 cache block's codes as one AVX2 vector
 * and its values as four,
 * for the x86 forms of the quantized attention (attn_q_x86.h) and of the
 * cache's conversion to halves (act_avx2.c). Included by files built with
 * AVX2 flags only. */
#ifndef NIBBLE_ATTN_Q_CODES_X86_H
#define NIBBLE_ATTN_Q_CODES_X86_H

#include <immintrin.h>

#include "simd_internal.h"

/* A block's 32 codes as one vector: q8_0's as they are, q4_0's low
 * nibbles then high ones, less 8 (attnq_code's order). */
static inline __attribute__((always_inline)) __m256i attnq_x86_codes(int type, const void *blk)
{
    if (type == SIMD_Q8_0)
        return _mm256_loadu_si256((const __m256i *)((const simd_block_q8_0 *)blk)->qs);
    __m128i x = _mm_loadu_si128((const __m128i *)((const simd_block_q4_0 *)blk)->qs);
    __m128i m = _mm_set1_epi8(0x0f);
    __m256i c = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(x, 4), m), _mm_and_si128(x, m));
    return _mm256_sub_epi8(c, _mm256_set1_epi8(8));
}

/* The block's 32 values (code times d) as four vectors of eight, in
 * attnq_code's order: the codes above widened a group of eight at a time
 * and multiplied by d (each product exact: a code's 8 bits times a
 * half's 11). */
static inline __attribute__((always_inline)) void attnq_x86_floats(int type, const void *blk, float d,
                                                                    __m256 out[4])
{
    __m256i c = attnq_x86_codes(type, blk);
    __m256 dv = _mm256_set1_ps(d);
    __m128i h[2] = {_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1)};
    for (int i = 0; i < 2; i++) {
        out[2 * i] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(h[i])), dv);
        out[2 * i + 1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(h[i], 8))), dv);
    }
}

#endif
