/* Private to simd/: the low-bit K-quants (q2_k, q3_k) and the non-linear
 * 4-bit types (iq4_nl, iq4_xs), layouts in simd.h (ggml's).
 *
 * Dots keep every integer sum exact and do the float work once per block,
 * in the order every kernel set follows (lquants.c is the definition):
 *   q2_k:   acc[b & 7] += (d_w * d_a) * (float)sumi - (dmin_w * d_a) * (float)summ
 *           sumi = sum_j sc_j * (q . a)_j, summ = sum_j m_j * bsum_j
 *   q3_k:   acc[b & 7] += (d_w * d_a) * (float)sumi,  sumi = sum_j (sc_j - 32) * (q . a)_j
 *   iq4_xs: the same with (ls_j - 32) and the iq4 levels, sub-blocks of 32
 *   iq4_nl: acc[b & 7] += (d_w * d_a) * (float)isum against q8a blocks of 32
 * with b the block index and the 8 lanes combined by simd_reduce8. */
#ifndef NIBBLE_SIMD_LQUANTS_H
#define NIBBLE_SIMD_LQUANTS_H

#include "simd_internal.h"
#include "iquants.h"

void simd_deq_q2_k(const void *src, float *dst, size_t n);
void simd_deq_q3_k(const void *src, float *dst, size_t n);
void simd_deq_iq4_nl(const void *src, float *dst, size_t n);
void simd_deq_iq4_xs(const void *src, float *dst, size_t n);

/* Quantize n values (a multiple of the block). imp, when given, holds one
 * importance per column (n of them, as an importance matrix gives): the
 * scale searches minimise sum imp[i] * (sigma2 + x[i]^2)^(1/2) * err^2;
 * without it each value weighs rms + |x[i]|. */
void simd_quant_q2_k_imp(const float *src, void *dst, size_t n, const float *imp);
void simd_quant_q3_k_imp(const float *src, void *dst, size_t n, const float *imp);
void simd_quant_iq4_nl_imp(const float *src, void *dst, size_t n, const float *imp);
void simd_quant_iq4_xs_imp(const float *src, void *dst, size_t n, const float *imp);
void simd_quant_q2_k(const float *src, void *dst, size_t n);
void simd_quant_q3_k(const float *src, void *dst, size_t n);
void simd_quant_iq4_nl(const float *src, void *dst, size_t n);
void simd_quant_iq4_xs(const float *src, void *dst, size_t n);

/* q3_k's 16 six-bit scales, unpacked (0..63, meaning sc - 32). */
static inline void simd_q3k_scales(const uint8_t p[12], int8_t sc[16])
{
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? p[j] & 0x0f : p[j - 8] >> 4;
        int hi = (p[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
        sc[j] = (int8_t)(lo | hi << 4);
    }
}

/* iq4_xs's 8 six-bit scales (0..63, meaning ls - 32). */
static inline int simd_iq4xs_scale(const simd_block_iq4_xs *b, int j)
{
    return ((b->scales_l[j >> 1] >> (4 * (j & 1))) & 0x0f) | ((b->scales_h >> (2 * j)) & 3) << 4;
}

/* Put set k's dots of the four types and of the i-quants below 4 bits
 * (iquants.h) into s: the scalar ones, then the
 * set's own. Called by simd_kernel_select for every set. */
void simd_set_lquants(enum simd_kernel k, simd_kernel_set *s);

/* Each SIMD set's own (lquants_x86.h, lquants_neon.h, built into the
 * set's file). */
void simd_set_lquants_avx2(simd_kernel_set *s);
void simd_set_lquants_avxvnni(simd_kernel_set *s);
void simd_set_lquants_avx512vnni(simd_kernel_set *s);
void simd_set_lquants_avxvnniint8(simd_kernel_set *s);
void simd_set_lquants_neon(simd_kernel_set *s);
void simd_set_lquants_neon_dotprod(simd_kernel_set *s);

#endif
