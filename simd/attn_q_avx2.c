/* Attention over a q8_0/q4_0 cache with AVX2 (the avx2 set's): the block
 * dots by maddubs and madd. The form is attn_q_x86.h's. */
#include <immintrin.h>

#define ATTNQ_DOT(ak, sq) _mm256_madd_epi16(_mm256_maddubs_epi16(ak, sq), _mm256_set1_epi16(1))
#define ATTNQ_ENTRY simd_attn_q_avx2
#include "attn_q_x86.h"
