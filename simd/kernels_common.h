/* Private to simd/: the pieces of the kernel headers that no instruction
 * set changes (kernels_x86.h, kernels_neon.h): unaligned little loads and
 * the sizes and traits of the legacy block types, as inline functions a
 * constant type folds away. Nothing here is compiled on its own. */
#ifndef NIBBLE_KERNELS_COMMON_H
#define NIBBLE_KERNELS_COMMON_H

#include "simd_internal.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define NB_INLINE static inline __attribute__((always_inline))

NB_INLINE uint16_t nb_ld16(const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

NB_INLINE uint32_t nb_ld32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* bytes of one weight value in a float row: f32 4, f16 and bf16 2 */
NB_INLINE size_t nb_welem(int type) { return type == SIMD_F32 ? 4 : 2; }

/* bytes of one block of a 32-value block type */
NB_INLINE size_t nb_bbytes(int type)
{
    switch (type) {
    case SIMD_Q8_0: return sizeof(simd_block_q8_0);
    case SIMD_Q4_0: return sizeof(simd_block_q4_0);
    case SIMD_Q4_1: return sizeof(simd_block_q4_1);
    case SIMD_Q5_0: return sizeof(simd_block_q5_0);
    case SIMD_MXFP4: return sizeof(simd_block_mxfp4);
    default: return sizeof(simd_block_q5_1);
    }
}

/* Where a 4- or 5-bit legacy block keeps its low nibbles (*qs) and its
 * fifth bits (*qh; 0 for the 4-bit types). */
NB_INLINE void nb_code_offsets(int type, size_t *qs, size_t *qh)
{
    *qh = 0;
    switch (type) {
    case SIMD_Q4_0: *qs = offsetof(simd_block_q4_0, qs); break;
    case SIMD_Q4_1: *qs = offsetof(simd_block_q4_1, qs); break;
    case SIMD_Q5_0: *qs = offsetof(simd_block_q5_0, qs); *qh = offsetof(simd_block_q5_0, qh); break;
    default: *qs = offsetof(simd_block_q5_1, qs); *qh = offsetof(simd_block_q5_1, qh); break;
    }
}

/* the types whose blocks carry a minimum beside the scale */
NB_INLINE int nb_has_min(int type) { return type == SIMD_Q4_1 || type == SIMD_Q5_1; }

#endif
