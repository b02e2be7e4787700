/* The i-quants below 4 bits in plain C: what a block means (dequant,
 * through simd_iq_expand) and the scalar dots every kernel set reproduces
 * bit for bit. Layouts: simd.h; expansion and float order: iquants.h. */
#include "iquants.h"

#define QKK SIMD_QKK

static void deq(int type, const void *src, float *dst, size_t n)
{
    const size_t bs = simd_iq_bytes(type);
    for (size_t i = 0; i < n / QKK; i++, dst += QKK) {
        int8_t c[QKK], ls[16];
        float d;
        simd_iq_expand(type, (const unsigned char *)src + i * bs, c, ls, &d);
        for (int j = 0; j < 16; j++) {
            float dl = d * (float)ls[j];
            for (int v = 16 * j; v < 16 * j + 16; v++)
                dst[v] = dl * (float)c[v];
        }
    }
}

void simd_deq_iq2_xxs(const void *src, float *dst, size_t n) { deq(SIMD_IQ2_XXS, src, dst, n); }
void simd_deq_iq2_xs(const void *src, float *dst, size_t n) { deq(SIMD_IQ2_XS, src, dst, n); }
void simd_deq_iq2_s(const void *src, float *dst, size_t n) { deq(SIMD_IQ2_S, src, dst, n); }
void simd_deq_iq3_xxs(const void *src, float *dst, size_t n) { deq(SIMD_IQ3_XXS, src, dst, n); }
void simd_deq_iq3_s(const void *src, float *dst, size_t n) { deq(SIMD_IQ3_S, src, dst, n); }
void simd_deq_iq1_s(const void *src, float *dst, size_t n) { deq(SIMD_IQ1_S, src, dst, n); }
void simd_deq_iq1_m(const void *src, float *dst, size_t n) { deq(SIMD_IQ1_M, src, dst, n); }

/* ---- scalar dots: the definition of the float order ---- */

static float dot(int type, size_t n, const void *w, const void *a)
{
    const size_t bs = simd_iq_bytes(type);
    const simd_block_q8k *y = a;
    float acc[8] = {0};
    for (size_t b = 0; b < n / QKK; b++) {
        int8_t c[QKK], ls[16];
        float d;
        simd_iq_expand(type, (const unsigned char *)w + b * bs, c, ls, &d);
        int32_t sumi = 0;
        for (int j = 0; j < 16; j++) {
            int32_t s = 0;
            for (int v = 16 * j; v < 16 * j + 16; v++)
                s += c[v] * y[b].qs[v];
            sumi += ls[j] * s;
        }
        acc[b & 7] += (d * y[b].d) * (float)sumi;
    }
    return simd_reduce8(acc);
}

#define IQ_FORMS(NAME, TYPE)                                                              \
    static float NAME(size_t n, const void *w, const void *a) { return dot(TYPE, n, w, a); } \
    SIMD_DOT_FORMS(NAME)
IQ_FORMS(dot_iq2_xxs, SIMD_IQ2_XXS)
IQ_FORMS(dot_iq2_xs, SIMD_IQ2_XS)
IQ_FORMS(dot_iq2_s, SIMD_IQ2_S)
IQ_FORMS(dot_iq3_xxs, SIMD_IQ3_XXS)
IQ_FORMS(dot_iq3_s, SIMD_IQ3_S)
IQ_FORMS(dot_iq1_s, SIMD_IQ1_S)
IQ_FORMS(dot_iq1_m, SIMD_IQ1_M)
#undef IQ_FORMS

void simd_set_iquants_scalar(simd_kernel_set *s)
{
    SIMD_PUT_DOTS(s, SIMD_IQ2_XXS, dot_iq2_xxs);
    SIMD_PUT_DOTS(s, SIMD_IQ2_XS, dot_iq2_xs);
    SIMD_PUT_DOTS(s, SIMD_IQ2_S, dot_iq2_s);
    SIMD_PUT_DOTS(s, SIMD_IQ3_XXS, dot_iq3_xxs);
    SIMD_PUT_DOTS(s, SIMD_IQ3_S, dot_iq3_s);
    SIMD_PUT_DOTS(s, SIMD_IQ1_S, dot_iq1_s);
    SIMD_PUT_DOTS(s, SIMD_IQ1_M, dot_iq1_m);
}
