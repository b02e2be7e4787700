/* Private to simd/: the MXFP4 weight type (simd_block_mxfp4 in simd.h).
 *
 * Values as integers: doubling the E2M1 values {0, .5, 1, 1.5, 2, 3, 4, 6}
 * gives the integers {0, 1, 2, 3, 4, 6, 8, 12}, so with the codes read
 * through simd_mxfp4_kv (signed, doubled) a block is
 *     x[j] = simd_e8m0_half(e) * simd_mxfp4_kv[code j]
 * where simd_e8m0_half(e) = 2^(e-128), half the block scale. The integer
 * weights are at most 12 in magnitude, so a block's dot with int8
 * activations is an exact int32 (at most 32*12*127) and the float work is
 * once per block, like every 32-block type:
 *     term = (simd_e8m0_half(e) * d_a) * (float)isum.
 *
 * The exponent byte, at its edges (decided here, as ggml decodes it, so
 * files mean what llama.cpp makes of them):
 *  - e = 0 is 2^-127 (half scale 2^-128, a float subnormal), not zero;
 *  - e = 255 is 2^128 (half scale 2^127), a finite scale: the OCP spec
 *    calls 0xFF NaN, ggml does not. Products may overflow to infinity
 *    (and infinity times an integer sum of 0 is NaN), the same in every
 *    kernel set. The quantizer never writes 255.
 * The sign bit of code 8 is a negative zero: it contributes 0. */
#ifndef NIBBLE_MXFP4_H
#define NIBBLE_MXFP4_H

#include "simd_internal.h"

#include <string.h>

/* E2M1 code -> twice its value */
extern const int8_t simd_mxfp4_kv[16];

/* 2^(e-128) as a float, exactly: the subnormals 2^-128 and 2^-127 for e =
 * 0 and 1, else the normal number with biased exponent e - 1. */
static inline float simd_e8m0_half(uint8_t e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Dequantize / reference round-to-nearest quantize n values (a multiple
 * of 32), for the type table. */
void simd_deq_mxfp4(const void *src, float *dst, size_t n);
void simd_quant_mxfp4(const float *src, void *dst, size_t n);

/* Put set k's MXFP4 dot, dot_batch, dot_rows (and on x86 dot_packed) into s: the scalar ones,
 * then the set's own where it has them. Called by simd_kernel_select for
 * every set, the scalar one included. */
void simd_set_mxfp4(enum simd_kernel k, simd_kernel_set *s);

/* The pieces simd_set_mxfp4 combines (each in its set's file, built with
 * that set's flags; the x86 ones only with NIBBLE_X86_SETS, the Arm ones
 * with NIBBLE_NEON_SET / NIBBLE_NEON_DOTPROD_SET). */
void simd_set_mxfp4_scalar(simd_kernel_set *s);
void simd_set_mxfp4_avx2(simd_kernel_set *s);
void simd_set_mxfp4_avxvnni(simd_kernel_set *s);
void simd_set_mxfp4_avx512vnni(simd_kernel_set *s);
void simd_set_mxfp4_avxvnniint8(simd_kernel_set *s);
void simd_set_mxfp4_neon(simd_kernel_set *s);
void simd_set_mxfp4_neon_dotprod(simd_kernel_set *s);

#endif
