/* Attention over a q8_0/q4_0 cache for the neon-dotprod set: a block's
 * dot by two sdot (built with -march=armv8.2-a+dotprod). The form is
 * attn_q_neon.h's; the integer sums, hence the bits, are the neon form's. */
#include <arm_neon.h>

#define ATTNQ_DOT(q0, q1, k0, k1) vdotq_s32(vdotq_s32(vdupq_n_s32(0), q0, k0), q1, k1)
#define ATTNQ_ENTRY simd_attn_q_neon_dotprod
#include "attn_q_neon.h"
