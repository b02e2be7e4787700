/* The element-wise activations, baseline build (act.h), and the choice of
 * each kernel set's build. */
#include "act.h"

void simd_silu_mul_ref(float *g, const float *u, size_t n) { act_silu_mul(g, u, n); }
void simd_gelu_ref(float *g, size_t n) { act_gelu(g, n); }
void simd_swiglu_oai_ref(float *g, const float *u, size_t n, float alpha, float limit)
{
    act_swiglu_oai(g, u, n, alpha, limit);
}

void simd_set_act(enum simd_kernel k, simd_kernel_set *s)
{
    s->silu_mul = simd_silu_mul_ref;
    s->gelu = simd_gelu_ref;
    s->swiglu_oai = simd_swiglu_oai_ref;
    s->f16_row = simd_f32_to_f16_row_ref;
    s->deq_f16_row = simd_deq_f16_row_ref;
#if defined(NIBBLE_X86_SETS)
    if (k != SIMD_K_SCALAR) {
        s->f16_row = simd_f32_to_f16_row_f16c;
        s->deq_f16_row = simd_deq_f16_row_f16c;
    }
    if (k == SIMD_K_AVX2 || k == SIMD_K_AVXVNNI || k == SIMD_K_AVXVNNIINT8) {
        s->silu_mul = simd_silu_mul_avx2;
        s->gelu = simd_gelu_avx2;
        s->swiglu_oai = simd_swiglu_oai_avx2;
    }
    if (k == SIMD_K_AVX512VNNI) {
        s->silu_mul = simd_silu_mul_avx512;
        s->gelu = simd_gelu_avx512;
        s->swiglu_oai = simd_swiglu_oai_avx512;
    }
#endif
    (void)k;
}
