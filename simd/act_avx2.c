/* act.h's activations built with AVX2 (8 lanes; every x86 set but
 * avx512vnni). */
#include "act.h"

void simd_silu_mul_avx2(float *g, const float *u, size_t n) { act_silu_mul(g, u, n); }
void simd_gelu_avx2(float *g, size_t n) { act_gelu(g, n); }
void simd_swiglu_oai_avx2(float *g, const float *u, size_t n, float alpha, float limit)
{
    act_swiglu_oai(g, u, n, alpha, limit);
}
