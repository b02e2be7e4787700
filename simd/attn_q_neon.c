/* Attention over a q8_0/q4_0 cache with baseline Advanced SIMD (the neon
 * set's): a block's dot by widening multiplies, two products per int16
 * lane (at most 2 * 127 * 128, inside int16) then pairwise widening adds.
 * The form is attn_q_neon.h's. */
#include <arm_neon.h>

static inline __attribute__((always_inline)) int32x4_t attnq_dot(int8x16_t q0, int8x16_t q1, int8x16_t k0,
                                                                 int8x16_t k1)
{
    int16x8_t a = vmlal_s8(vmull_s8(vget_low_s8(q0), vget_low_s8(k0)), vget_high_s8(q0), vget_high_s8(k0));
    int16x8_t b = vmlal_s8(vmull_s8(vget_low_s8(q1), vget_low_s8(k1)), vget_high_s8(q1), vget_high_s8(k1));
    return vpadalq_s16(vpaddlq_s16(a), b);
}

#define ATTNQ_DOT attnq_dot
#define ATTNQ_ENTRY simd_attn_q_neon
#include "attn_q_neon.h"
