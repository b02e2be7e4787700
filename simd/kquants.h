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
/* The same with an importance per value (NULL: as above): the scale
 * searches minimise sum imp[i] * sqrt(sigma2 + x[i]^2) * err[i]^2
 * (simd_kq_weights). */
void simd_quant_q4_k_imp(const float *src, void *dst, size_t n, const float *imp);
void simd_quant_q5_k_imp(const float *src, void *dst, size_t n, const float *imp);
void simd_quant_q6_k_imp(const float *src, void *dst, size_t n, const float *imp);

/* The weighted scale searches of the K-quant quantizers, for lquants.c:
 * fit x[i] ~ a*L[i] - m with L in 0..nmax, a, m >= 0 (n <= 64), and
 * x[i] ~ a*L[i] with L in -nneg..npos (either sign of a); each minimises
 * sum w[i]*err[i]^2 over a grid of candidate scales. */
void simd_kq_fit_asym(const float *x, const float *w, int n, int nmax, float *a, float *m);
float simd_kq_fit_sym(const float *x, const float *w, int n, int nneg, int npos);
/* As simd_kq_fit_asym with an offset of either sign (q4_1, q5_1 store
 * x = d*q + m with any m). */
void simd_kq_fit_affine(const float *x, const float *w, int n, int nmax, float *a, float *m);
/* The search weights of n values: imp[i] * sqrt(sigma2 + x[i]^2), sigma2
 * twice their mean square, when imp is given and not all zero; else
 * rms + |x[i]|. */
void simd_kq_weights(const float *x, const float *imp, int n, float *w);

/* Put the scalar K-quant dots into a kernel set (entries it already has
 * are kept, so a set with its own K kernels wins). */
void simd_set_kquants_scalar(simd_kernel_set *s);

/* Each SIMD set's own K-quant kernels (kquants_x86.h, kquants_neon.h,
 * included by the set's file): dot, dot_batch and dot_rows of q4_k, q5_k
 * and q6_k, bit-identical to the scalar ones. dispatch.c calls the one of
 * the chosen set after the set's own filler. */
void simd_set_kquants_avx2(simd_kernel_set *s);
void simd_set_kquants_avxvnni(simd_kernel_set *s);
void simd_set_kquants_avx512vnni(simd_kernel_set *s);
void simd_set_kquants_avxvnniint8(simd_kernel_set *s);
void simd_set_kquants_neon(simd_kernel_set *s);
void simd_set_kquants_neon_dotprod(simd_kernel_set *s);

#endif
