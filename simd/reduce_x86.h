/* Private to simd/: eight simd_reduce8 at once, for the x86 files built
 * with AVX2 or wider (attention's scores, the float matmul's tiles). */
#ifndef NIBBLE_REDUCE_X86_H
#define NIBBLE_REDUCE_X86_H

#include <immintrin.h>

/* Lane j of the result = simd_reduce8 of the 8 lanes of a[j]:
 * ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)). */
static inline __attribute__((always_inline)) __m256 x86_reduce8x8(const __m256 a[8])
{
    /* t_j = l_i + l_{i+4}, i = 0..3: positions j and j+4 share a vector */
    __m256 t04 = _mm256_add_ps(_mm256_permute2f128_ps(a[0], a[4], 0x20), _mm256_permute2f128_ps(a[0], a[4], 0x31));
    __m256 t15 = _mm256_add_ps(_mm256_permute2f128_ps(a[1], a[5], 0x20), _mm256_permute2f128_ps(a[1], a[5], 0x31));
    __m256 t26 = _mm256_add_ps(_mm256_permute2f128_ps(a[2], a[6], 0x20), _mm256_permute2f128_ps(a[2], a[6], 0x31));
    __m256 t37 = _mm256_add_ps(_mm256_permute2f128_ps(a[3], a[7], 0x20), _mm256_permute2f128_ps(a[3], a[7], 0x31));
    /* u = (t0 + t2), (t1 + t3) per position: [u0_0 u0_1 u1_0 u1_1 | u4_0 u4_1 u5_0 u5_1] */
    __m256 u0145 = _mm256_add_ps(_mm256_shuffle_ps(t04, t15, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm256_shuffle_ps(t04, t15, _MM_SHUFFLE(3, 2, 3, 2)));
    __m256 u2367 = _mm256_add_ps(_mm256_shuffle_ps(t26, t37, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm256_shuffle_ps(t26, t37, _MM_SHUFFLE(3, 2, 3, 2)));
    /* f = u_0 + u_1, positions 0..7 in order */
    return _mm256_add_ps(_mm256_shuffle_ps(u0145, u2367, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm256_shuffle_ps(u0145, u2367, _MM_SHUFFLE(3, 1, 3, 1)));
}

#endif
