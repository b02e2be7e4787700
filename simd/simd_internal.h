/* Private to simd/: the dispatch table and the pieces each kernel set
 * file fills in. */
#ifndef NIBBLE_SIMD_INTERNAL_H
#define NIBBLE_SIMD_INTERNAL_H

#include "simd.h"

/* One kernel set: entries left NULL fall back to the scalar ones. */
typedef struct simd_kernel_set {
    void (*q8a_quant)(const float *x, void *dst, size_t n);
    float (*dot_f32)(size_t n, const float *a, const float *b);
    simd_dot_fn dot[SIMD_TYPE_COUNT];
    simd_dot_batch_fn dot_batch[SIMD_TYPE_COUNT];
} simd_kernel_set;

extern simd_traits simd_table[SIMD_TYPE_COUNT];
extern simd_kernel_set simd_active;

void simd_q8a_quant_ref(const float *x, void *dst, size_t n);
void simd_set_scalar(simd_kernel_set *s);

/* The fixed order in which every set combines its 8 float lanes. Lane l
 * holds the sum, in index order, of the terms whose block (or element)
 * index is l mod 8. */
static inline float simd_reduce8(const float acc[8])
{
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

#endif
