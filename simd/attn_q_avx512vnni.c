/* Attention over a q8_0/q4_0 cache for the avx512vnni set: the block dots
 * by the EVEX vpdpbusd on 256-bit vectors (AVX-512 VNNI with VL, which
 * every such CPU has, unlike AVX-VNNI). The form is attn_q_x86.h's; the
 * integer sums, hence the bits, are the AVX2 form's. */
#include <immintrin.h>

#define ATTNQ_PREP(kv) kv = _mm256_xor_si256(kv, _mm256_set1_epi8(-128))
#define ATTNQ_ACC(is, kv, bq) _mm256_dpbusd_epi32(is, kv, bq)
#define ATTNQ_FIX(is, sum) _mm256_sub_epi32(is, _mm256_set1_epi32(128 * (sum)))
#define ATTNQ_ENTRY simd_attn_q_avx512vnni
#include "attn_q_x86.h"
