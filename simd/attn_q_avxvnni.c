/* Attention over a q8_0/q4_0 cache with AVX-VNNI (the avxvnni and
 * avxvnniint8 sets'): the block dots by one vpdpbusd each. The form is
 * attn_q_x86.h's; the integer sums, hence the bits, are the AVX2 form's. */
#include <immintrin.h>

#define ATTNQ_DOT(ak, sq) _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), ak, sq)
#define ATTNQ_ENTRY simd_attn_q_avxvnni
#include "attn_q_x86.h"
