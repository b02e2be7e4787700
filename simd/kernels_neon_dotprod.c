/* The neon-dotprod kernel set: Advanced SIMD plus the Armv8.2 dot product
 * instructions (FEAT_DotProd: Cortex-A55/A76 and later, Neoverse, Apple
 * M1 and later); built with -march=armv8.2-a+dotprod. Bit-identical to
 * the scalar set: see kernels_neon.h for how. */
#include <arm_neon.h>

/* sdot: each int32 lane gains the sum of four int8 x int8 products, with
 * no intermediate rounding or saturation. */
static inline __attribute__((always_inline)) int32x4_t nb_bdot(int8x16_t w0, int8x16_t w1, int8x16_t a0,
                                                               int8x16_t a1)
{
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, a0), w1, a1);
}

#define NB_SET_FN simd_set_neon_dotprod
#include "kernels_neon.h"

#define NBK_SET_FN simd_set_kquants_neon_dotprod
#include "kquants_neon.h"
#define NB_MXFP4_SET_FN simd_set_mxfp4_neon_dotprod
#include "mxfp4_neon.h"
#define NBL_SET_FN simd_set_lquants_neon_dotprod
#include "lquants_neon.h"
