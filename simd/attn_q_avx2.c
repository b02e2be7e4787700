/* Attention over a q8_0/q4_0 cache with AVX2 (the avx2 and avxvnniint8
 * sets'): the block dots by abs, sign, maddubs and madd. The form is attn_q_x86.h's. */
#include <immintrin.h>

#define ATTNQ_PREP(kv) __m256i ak = _mm256_abs_epi8(kv)
#define ATTNQ_ACC(is, kv, bq) \
    _mm256_add_epi32(is, _mm256_madd_epi16(_mm256_maddubs_epi16(ak, _mm256_sign_epi8(bq, kv)), _mm256_set1_epi16(1)))
#define ATTNQ_FIX(is, sum) (is)
#define ATTNQ_ENTRY simd_attn_q_avx2
#include "attn_q_x86.h"
