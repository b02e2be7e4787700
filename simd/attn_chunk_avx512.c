/* Attention over one chunk of an f16 cache (simd_attn_chunk) for the
 * avx512vnni set: attn_chunk_x86.h's form built with AVX-512, so its V sum
 * takes 64 columns a pass on 512-bit vectors; the bits are the AVX2
 * form's and the reference's. */
#define ATTN_ENTRY simd_attn_avx512
#include "attn_chunk_x86.h"
