/* Private to simd/: the K-quant formats (q4_k, q5_k, q6_k) and their
 * int8 activation partner (q8k). Reference code, plain C; the table rows
 * in quants.c and the scalar kernel set point here. */
#ifndef NIBBLE_SIMD_KQUANTS_H
#define NIBBLE_SIMD_KQUANTS_H

#include "simd_internal.h"

void simd_deq_q4_k(const void *src, float *dst, size_t n);
void simd_deq_q5_k(const void *src, float *dst, size_t n);
void simd_deq_q6_k(const void *src, float *dst, size_t n);
void simd_quant_q4_k(const float *src, void *dst, size_t n);
void simd_quant_q5_k(const float *src, void *dst, size_t n);
void simd_quant_q6_k(const float *src, void *dst, size_t n);

/* Activation rows for K-quant dots (see simd_block_q8k). */
void simd_q8k_quant_ref(const float *x, void *dst, size_t n);

/* Put the scalar K-quant dots into a kernel set (entries it already has
 * are kept, so a set with its own K kernels wins). */
void simd_set_kquants_scalar(simd_kernel_set *s);

#endif
