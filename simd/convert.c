/* Half-precision conversions in plain C: bit-exact, no F16C needed, so the
 * scalar set runs anywhere and the other sets have a reference to match. */
#include "attn_q_block.h"
#include "simd_internal.h"

#include <string.h>

static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float simd_f16_to_f32(simd_f16 h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0x1f) /* inf / nan; a nan comes out quiet with its payload,
                      * as F16C's vcvtph2ps (and Arm's fcvt) give it */
        return bits_f32(sign | 0x7f800000u | (man << 13) | (man ? 0x00400000u : 0));
    if (exp == 0) {
        if (man == 0)
            return bits_f32(sign);
        /* subnormal: value = man * 2^-24, exact in float */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

simd_f16 simd_f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or nan (keep nan quiet and nonzero) */
        return (simd_f16)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
    if (ax >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
        return (simd_f16)(sign | 0x7c00);
    if (ax < 0x38800000u) { /* below the smallest normal half: subnormal */
        /* value / 2^-24, rounded to nearest even, in float arithmetic
         * (exact: the scaled value has at most 24 significant bits) */
        float v = bits_f32(ax) * 16777216.0f;
        uint32_t m = (uint32_t)v;
        float rem = v - (float)m;
        if (rem > 0.5f || (rem == 0.5f && (m & 1)))
            m++;
        return (simd_f16)(sign | m);
    }
    /* normal: round the 13 dropped mantissa bits to nearest even */
    uint32_t r = ax + 0x0fffu + ((ax >> 13) & 1);
    return (simd_f16)(sign | ((r - 0x38000000u) >> 13));
}

/* In a loop the compiler vectorises: normal halves and zeros (all a
 * cache row or a dequantized block gives but for tiny or huge values) in
 * straight-line integer arithmetic, simd_f32_to_f16's rounding; a row
 * holding any other value is done again by it. (A call a value made a
 * q8_0 K cache beside an f16 V spend half a decode step here.) */
void simd_f32_to_f16_row_ref(const float *src, simd_f16 *dst, size_t n)
{
    uint32_t odd = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t x = f32_bits(src[i]);
        uint32_t ax = x & 0x7fffffffu, r = ax + 0x0fffu + ((ax >> 13) & 1);
        uint32_t h = ((x >> 16) & 0x8000u) | (ax ? (r - 0x38000000u) >> 13 : 0);
        dst[i] = (simd_f16)h;
        odd |= ax && ax - 0x38800000u >= 0x477ff000u - 0x38800000u; /* not a normal half */
    }
    for (size_t i = 0; odd && i < n; i++)
        dst[i] = simd_f32_to_f16(src[i]);
}

float simd_bf16_to_f32(simd_bf16 h) { return bits_f32((uint32_t)h << 16); }

simd_bf16 simd_f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* nan: keep it a quiet nan */
        return (simd_bf16)((x >> 16) | 0x40);
    return (simd_bf16)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

void simd_deq_f16_row_ref(int type, const void *blocks, size_t n, simd_f16 *dst)
{
    float y[SIMD_QK];
    for (size_t b = 0; b < n / SIMD_QK; b++) {
        const void *blk = attnq_block(type, blocks, b);
        attnq_values(type, blk, attnq_scale(type, blk), y);
        simd_f32_to_f16_row_ref(y, dst + b * SIMD_QK, SIMD_QK);
    }
}
