/* Private to simd/: writing ggml's i-quants below 4 bits (iq2_xxs, iq2_xs,
 * iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m; layouts in simd.h, reading in
 * iquants.h). The one part of simd/ that allocates: the search tables
 * below are built from the grids on first use. */
#ifndef NIBBLE_SIMD_IQUANTS_QUANT_H
#define NIBBLE_SIMD_IQUANTS_QUANT_H

#include "simd_internal.h"

/* Quantize n values (a multiple of 256) of one row. imp, when given,
 * holds one importance per value (an importance matrix's columns): every
 * search minimises sum imp[i] * sqrt(sigma2 + x[i]^2) * err[i]^2, sigma2
 * twice the super-block's mean square; without it each value weighs
 * rms + |x[i]| (simd_kq_weights). ggml refuses iq2_xxs, iq2_xs, iq1_s and
 * iq1_m without an importance matrix; these functions do not (the tests
 * compare both), the file tool does (engine/tools/quantize.c). */
void simd_quant_iq2_xxs_imp(const float *src, void *dst, size_t n, const float *imp);
void simd_quant_iq2_xs_imp(const float *src, void *dst, size_t n, const float *imp);
void simd_quant_iq2_s_imp(const float *src, void *dst, size_t n, const float *imp);
void simd_quant_iq3_xxs_imp(const float *src, void *dst, size_t n, const float *imp);
void simd_quant_iq3_s_imp(const float *src, void *dst, size_t n, const float *imp);
void simd_quant_iq1_s_imp(const float *src, void *dst, size_t n, const float *imp);
void simd_quant_iq1_m_imp(const float *src, void *dst, size_t n, const float *imp);
void simd_quant_iq2_xxs(const float *src, void *dst, size_t n);
void simd_quant_iq2_xs(const float *src, void *dst, size_t n);
void simd_quant_iq2_s(const float *src, void *dst, size_t n);
void simd_quant_iq3_xxs(const float *src, void *dst, size_t n);
void simd_quant_iq3_s(const float *src, void *dst, size_t n);
void simd_quant_iq1_s(const float *src, void *dst, size_t n);
void simd_quant_iq1_m(const float *src, void *dst, size_t n);

/* The search tables of a type's grid, for the tests: 0 when every grid
 * point's byte values are the type's levels and map back to the point
 * itself, and every other level vector has a non-empty neighbour list of
 * grid points; -1 if building failed (out of memory) or a check fails.
 * *n_lists gets the number of neighbour lists, *n_entries their total
 * length. */
int simd_iq_quant_check(int type, size_t *n_lists, size_t *n_entries);

#endif
