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

#include "attn_q_block.h"
#include "attn_q_codes_x86.h"

/* Eight values to halves by one conversion (vcvtps2ph, round to nearest
 * even: IEEE's conversion, as simd_f32_to_f16 does it in integer steps,
 * subnormal halves and overflow to infinity included); eight that hold a
 * NaN go through simd_f32_to_f16, whose NaN keeps no payload. */
static inline void cvt8(__m256 x, simd_f16 *dst)
{
    if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q))) {
        float y[8];
        _mm256_storeu_ps(y, x);
        for (int j = 0; j < 8; j++)
            dst[j] = simd_f32_to_f16(y[j]);
        return;
    }
    _mm_storeu_si128((__m128i *)dst, _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

/* cvt8 eight at a time; the tail through simd_f32_to_f16 */
void simd_f32_to_f16_row_f16c(const float *src, simd_f16 *dst, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        cvt8(_mm256_loadu_ps(src + i), dst + i);
    for (; i < n; i++)
        dst[i] = simd_f32_to_f16(src[i]);
}

/* Each block's codes as one vector (attn_q_codes_x86.h), then eight
 * products d * code a conversion (an infinite scale times 0 is the NaN
 * cvt8 hands to simd_f32_to_f16). */
void simd_deq_f16_row_f16c(int type, const void *blocks, size_t n, simd_f16 *dst)
{
    for (size_t b = 0; b < n / SIMD_QK; b++, dst += SIMD_QK) {
        const void *blk = attnq_block(type, blocks, b);
        __m256 v[4];
        attnq_x86_floats(type, blk, attnq_scale(type, blk), v);
        for (int i = 0; i < 4; i++)
            cvt8(v[i], dst + 8 * i);
    }
}
