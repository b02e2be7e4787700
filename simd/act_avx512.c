/* act.h's activations built with AVX-512 (16 lanes; the avx512vnni set). */
#include "act.h"

void simd_silu_mul_avx512(float *g, const float *u, size_t n) { act_silu_mul(g, u, n); }
void simd_gelu_avx512(float *g, size_t n) { act_gelu(g, n); }
void simd_swiglu_oai_avx512(float *g, const float *u, size_t n, float alpha, float limit)
{
    act_swiglu_oai(g, u, n, alpha, limit);
}
