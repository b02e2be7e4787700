/* The neon kernel set: baseline AArch64 Advanced SIMD, no extra compiler
 * flags. Bit-identical to the scalar set: see kernels_neon.h for how. */
#include <arm_neon.h>

/* Widening multiplies: the low and high 8 bytes of each half-block go
 * through smull/smlal into int16, two products per lane (at most
 * 2*128*127 = 32512, so no overflow), then pairwise into int32. */
static inline __attribute__((always_inline)) int32x4_t nb_bdot(int8x16_t w0, int8x16_t w1, int8x16_t a0,
                                                               int8x16_t a1)
{
    int16x8_t p = vmull_s8(vget_low_s8(w0), vget_low_s8(a0));
    p = vmlal_s8(p, vget_low_s8(w1), vget_low_s8(a1));
    int16x8_t q = vmull_high_s8(w0, a0);
    q = vmlal_high_s8(q, w1, a1);
    return vpadalq_s16(vpaddlq_s16(p), q);
}

#define NB_SET_FN simd_set_neon
#include "kernels_neon.h"

#define NBK_SET_FN simd_set_kquants_neon
#include "kquants_neon.h"
#define NB_MXFP4_SET_FN simd_set_mxfp4_neon
#include "mxfp4_neon.h"
#define NBL_SET_FN simd_set_lquants_neon
#include "lquants_neon.h"
