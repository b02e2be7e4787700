/* act.h's activations built with AVX2 (8 lanes; every x86 set but
 * avx512vnni). */
#include "act.h"

void simd_silu_mul_avx2(float *g, const float *u, size_t n) { act_silu_mul(g, u, n); }
void simd_gelu_avx2(float *g, size_t n) { act_gelu(g, n); }
void simd_swiglu_oai_avx2(float *g, const float *u, size_t n, float alpha, float limit)
{
    act_swiglu_oai(g, u, n, alpha, limit);
}

#include <immintrin.h>

/* Eight values a conversion (vcvtps2ph, round to nearest even: IEEE's
 * conversion, as simd_f32_to_f16 does it in integer steps, subnormal
 * halves and overflow to infinity included); eight that hold a NaN, and
 * the tail, go through simd_f32_to_f16, whose NaN keeps no payload. */
void simd_f32_to_f16_row_f16c(const float *src, simd_f16 *dst, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(src + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q))) {
            for (size_t j = i; j < i + 8; j++)
                dst[j] = simd_f32_to_f16(src[j]);
            continue;
        }
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    for (; i < n; i++)
        dst[i] = simd_f32_to_f16(src[i]);
}

/* Eight products d * q to halves, as simd_f32_to_f16 gives each. */
static inline void deq8(__m256 d, __m256i q, simd_f16 *dst)
{
    __m256 x = _mm256_mul_ps(d, _mm256_cvtepi32_ps(q));
    if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q))) { /* an infinite scale times 0 */
        float y[8];
        _mm256_storeu_ps(y, x);
        for (int j = 0; j < 8; j++)
            dst[j] = simd_f32_to_f16(y[j]);
        return;
    }
    _mm_storeu_si128((__m128i *)dst, _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

void simd_deq_f16_row_f16c(int type, const void *blocks, size_t n, simd_f16 *dst)
{
    for (size_t b = 0; b < n / SIMD_QK; b++, dst += SIMD_QK) {
        if (type == SIMD_Q8_0) {
            const simd_block_q8_0 *q = (const simd_block_q8_0 *)blocks + b;
            __m256 d = _mm256_set1_ps(simd_f16_to_f32(q->d));
            for (int j = 0; j < SIMD_QK; j += 8)
                deq8(d, _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q->qs + j))), dst + j);
        } else {
            const simd_block_q4_0 *q = (const simd_block_q4_0 *)blocks + b;
            __m256 d = _mm256_set1_ps(simd_f16_to_f32(q->d));
            __m128i raw = _mm_loadu_si128((const __m128i *)q->qs), m = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
            __m128i lo = _mm_sub_epi8(_mm_and_si128(raw, m), eight);
            __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(raw, 4), m), eight);
            deq8(d, _mm256_cvtepi8_epi32(lo), dst);
            deq8(d, _mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)), dst + 8);
            deq8(d, _mm256_cvtepi8_epi32(hi), dst + 16);
            deq8(d, _mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)), dst + 24);
        }
    }
}
