/* Block formats: dequantization and reference round-to-nearest
 * quantization, plain C. These define what each format means; every
 * kernel set is tested against them. */
#include "simd_internal.h"
#include "kquants.h"
#include "mxfp4.h"
#include "lquants.h"
#include "iquants_quant.h"

#include <math.h>
#include <string.h>

/* ---- dequantize ---- */

static void deq_f32(const void *src, float *dst, size_t n) { memcpy(dst, src, n * sizeof(float)); }

static void deq_f16(const void *src, float *dst, size_t n)
{
    const simd_f16 *s = src;
    for (size_t i = 0; i < n; i++)
        dst[i] = simd_f16_to_f32(s[i]);
}

static void deq_bf16(const void *src, float *dst, size_t n)
{
    const simd_bf16 *s = src;
    for (size_t i = 0; i < n; i++)
        dst[i] = simd_bf16_to_f32(s[i]);
}

static void deq_q8_0(const void *src, float *dst, size_t n)
{
    const simd_block_q8_0 *b = src;
    for (size_t i = 0; i < n / SIMD_QK; i++) {
        float d = simd_f16_to_f32(b[i].d);
        for (int j = 0; j < SIMD_QK; j++)
            dst[i * SIMD_QK + j] = d * (float)b[i].qs[j];
    }
}

static void deq_q4_0(const void *src, float *dst, size_t n)
{
    const simd_block_q4_0 *b = src;
    for (size_t i = 0; i < n / SIMD_QK; i++) {
        float d = simd_f16_to_f32(b[i].d);
        float *y = dst + i * SIMD_QK;
        for (int j = 0; j < SIMD_QK / 2; j++) {
            y[j] = d * (float)((b[i].qs[j] & 0x0f) - 8);
            y[j + 16] = d * (float)((b[i].qs[j] >> 4) - 8);
        }
    }
}

static void deq_q4_1(const void *src, float *dst, size_t n)
{
    const simd_block_q4_1 *b = src;
    for (size_t i = 0; i < n / SIMD_QK; i++) {
        float d = simd_f16_to_f32(b[i].d), m = simd_f16_to_f32(b[i].m);
        float *y = dst + i * SIMD_QK;
        for (int j = 0; j < SIMD_QK / 2; j++) {
            y[j] = d * (float)(b[i].qs[j] & 0x0f) + m;
            y[j + 16] = d * (float)(b[i].qs[j] >> 4) + m;
        }
    }
}

/* The 5th bit of value j lives in bit j of the little-endian qh word. */
static inline uint32_t qh_word(const uint8_t qh[4])
{
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

static void deq_q5_0(const void *src, float *dst, size_t n)
{
    const simd_block_q5_0 *b = src;
    for (size_t i = 0; i < n / SIMD_QK; i++) {
        float d = simd_f16_to_f32(b[i].d);
        uint32_t qh = qh_word(b[i].qh);
        float *y = dst + i * SIMD_QK;
        for (int j = 0; j < SIMD_QK / 2; j++) {
            int lo = (b[i].qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
            int hi = (b[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            y[j] = d * (float)(lo - 16);
            y[j + 16] = d * (float)(hi - 16);
        }
    }
}

static void deq_q5_1(const void *src, float *dst, size_t n)
{
    const simd_block_q5_1 *b = src;
    for (size_t i = 0; i < n / SIMD_QK; i++) {
        float d = simd_f16_to_f32(b[i].d), m = simd_f16_to_f32(b[i].m);
        uint32_t qh = qh_word(b[i].qh);
        float *y = dst + i * SIMD_QK;
        for (int j = 0; j < SIMD_QK / 2; j++) {
            int lo = (b[i].qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
            int hi = (b[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            y[j] = d * (float)lo + m;
            y[j + 16] = d * (float)hi + m;
        }
    }
}

/* ---- reference quantization (round to nearest) ---- */

static void q_f32(const float *src, void *dst, size_t n) { memcpy(dst, src, n * sizeof(float)); }

static void q_f16(const float *src, void *dst, size_t n)
{
    simd_f16 *d = dst;
    for (size_t i = 0; i < n; i++)
        d[i] = simd_f32_to_f16(src[i]);
}

static void q_bf16(const float *src, void *dst, size_t n)
{
    simd_bf16 *d = dst;
    for (size_t i = 0; i < n; i++)
        d[i] = simd_f32_to_bf16(src[i]);
}

static void q_q8_0(const float *src, void *dst, size_t n)
{
    simd_block_q8_0 *b = dst;
    for (size_t i = 0; i < n / SIMD_QK; i++) {
        const float *x = src + i * SIMD_QK;
        float amax = 0;
        for (int j = 0; j < SIMD_QK; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = simd_f32_to_f16(d);
        for (int j = 0; j < SIMD_QK; j++)
            b[i].qs[j] = (int8_t)lrintf(x[j] * id);
    }
}

/* q4_0: the value of largest magnitude maps to -8, so the full 16 levels
 * are used on the side where it lies. */
static void q_q4_0(const float *src, void *dst, size_t n)
{
    simd_block_q4_0 *b = dst;
    for (size_t i = 0; i < n / SIMD_QK; i++) {
        const float *x = src + i * SIMD_QK;
        float amax = 0, max = 0;
        for (int j = 0; j < SIMD_QK; j++)
            if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
        float d = max / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = simd_f32_to_f16(d);
        for (int j = 0; j < SIMD_QK / 2; j++) {
            int lo = (int)(x[j] * id + 8.5f), hi = (int)(x[j + 16] * id + 8.5f);
            lo = lo > 15 ? 15 : lo < 0 ? 0 : lo;
            hi = hi > 15 ? 15 : hi < 0 ? 0 : hi;
            b[i].qs[j] = (uint8_t)(lo | hi << 4);
        }
    }
}

static void minmax(const float *x, float *mn, float *mx)
{
    *mn = *mx = x[0];
    for (int j = 1; j < SIMD_QK; j++) {
        if (x[j] < *mn) *mn = x[j];
        if (x[j] > *mx) *mx = x[j];
    }
}

static void q_q4_1(const float *src, void *dst, size_t n)
{
    simd_block_q4_1 *b = dst;
    for (size_t i = 0; i < n / SIMD_QK; i++) {
        const float *x = src + i * SIMD_QK;
        float mn, mx;
        minmax(x, &mn, &mx);
        float d = (mx - mn) / 15.0f, id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = simd_f32_to_f16(d);
        b[i].m = simd_f32_to_f16(mn);
        for (int j = 0; j < SIMD_QK / 2; j++) {
            int lo = (int)((x[j] - mn) * id + 0.5f), hi = (int)((x[j + 16] - mn) * id + 0.5f);
            lo = lo > 15 ? 15 : lo;
            hi = hi > 15 ? 15 : hi;
            b[i].qs[j] = (uint8_t)(lo | hi << 4);
        }
    }
}

static void put_qh(uint8_t qh[4], uint32_t w)
{
    for (int k = 0; k < 4; k++)
        qh[k] = (uint8_t)(w >> (8 * k));
}

static void q_q5_0(const float *src, void *dst, size_t n)
{
    simd_block_q5_0 *b = dst;
    for (size_t i = 0; i < n / SIMD_QK; i++) {
        const float *x = src + i * SIMD_QK;
        float amax = 0, max = 0;
        for (int j = 0; j < SIMD_QK; j++)
            if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
        float d = max / -16.0f, id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = simd_f32_to_f16(d);
        uint32_t qh = 0;
        for (int j = 0; j < SIMD_QK / 2; j++) {
            int lo = (int)(x[j] * id + 16.5f), hi = (int)(x[j + 16] * id + 16.5f);
            lo = lo > 31 ? 31 : lo < 0 ? 0 : lo;
            hi = hi > 31 ? 31 : hi < 0 ? 0 : hi;
            b[i].qs[j] = (uint8_t)((lo & 0x0f) | (hi & 0x0f) << 4);
            qh |= (uint32_t)(lo >> 4) << j | (uint32_t)(hi >> 4) << (j + 16);
        }
        put_qh(b[i].qh, qh);
    }
}

static void q_q5_1(const float *src, void *dst, size_t n)
{
    simd_block_q5_1 *b = dst;
    for (size_t i = 0; i < n / SIMD_QK; i++) {
        const float *x = src + i * SIMD_QK;
        float mn, mx;
        minmax(x, &mn, &mx);
        float d = (mx - mn) / 31.0f, id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = simd_f32_to_f16(d);
        b[i].m = simd_f32_to_f16(mn);
        uint32_t qh = 0;
        for (int j = 0; j < SIMD_QK / 2; j++) {
            int lo = (int)((x[j] - mn) * id + 0.5f), hi = (int)((x[j + 16] - mn) * id + 0.5f);
            lo = lo > 31 ? 31 : lo;
            hi = hi > 31 ? 31 : hi;
            b[i].qs[j] = (uint8_t)((lo & 0x0f) | (hi & 0x0f) << 4);
            qh |= (uint32_t)(lo >> 4) << j | (uint32_t)(hi >> 4) << (j + 16);
        }
        put_qh(b[i].qh, qh);
    }
}

/* ---- quantization with an importance per value ----
 * The scale (and minimum) of each block from the weighted search the K
 * types use (simd_kq_fit_sym / simd_kq_fit_affine, weights
 * simd_kq_weights), rounded to f16 as stored; the levels then rounded
 * against the stored values, so what is written is what was measured. */

static inline int iround(float v, int lo, int hi)
{
    if (!(v > (float)lo))
        return lo;
    if (v >= (float)hi)
        return hi;
    return simd_rint_small(v);
}

/* x ~ d * L, L in -nneg..npos: d into *d16, the levels into L. */
static void imp_sym(const float *x, const float *imp, int nneg, int npos, simd_f16 *d16, int L[SIMD_QK])
{
    float w[SIMD_QK];
    simd_kq_weights(x, imp, SIMD_QK, w);
    *d16 = simd_f32_to_f16(simd_kq_fit_sym(x, w, SIMD_QK, nneg, npos));
    float d = simd_f16_to_f32(*d16);
    for (int j = 0; j < SIMD_QK; j++)
        L[j] = d != 0 ? iround(x[j] / d, -nneg, npos) : 0;
}

/* x ~ d * L + m, L in 0..nmax: d and m into *d16, *m16, the levels into L. */
static void imp_affine(const float *x, const float *imp, int nmax, simd_f16 *d16, simd_f16 *m16, int L[SIMD_QK])
{
    float w[SIMD_QK], a, m;
    simd_kq_weights(x, imp, SIMD_QK, w);
    simd_kq_fit_affine(x, w, SIMD_QK, nmax, &a, &m);
    *d16 = simd_f32_to_f16(a);
    *m16 = simd_f32_to_f16(-m);
    float d = simd_f16_to_f32(*d16), mn = simd_f16_to_f32(*m16);
    for (int j = 0; j < SIMD_QK; j++)
        L[j] = d > 0 ? iround((x[j] - mn) / d, 0, nmax) : 0;
}

static void qi_q8_0(const float *src, void *dst, size_t n, const float *imp)
{
    simd_block_q8_0 *b = dst;
    int L[SIMD_QK];
    for (size_t i = 0; i < n / SIMD_QK; i++) {
        imp_sym(src + i * SIMD_QK, imp + i * SIMD_QK, 127, 127, &b[i].d, L);
        for (int j = 0; j < SIMD_QK; j++)
            b[i].qs[j] = (int8_t)L[j];
    }
}

static void qi_q4_0(const float *src, void *dst, size_t n, const float *imp)
{
    simd_block_q4_0 *b = dst;
    int L[SIMD_QK];
    for (size_t i = 0; i < n / SIMD_QK; i++) {
        imp_sym(src + i * SIMD_QK, imp + i * SIMD_QK, 8, 7, &b[i].d, L);
        for (int j = 0; j < SIMD_QK / 2; j++)
            b[i].qs[j] = (uint8_t)((L[j] + 8) | (L[j + 16] + 8) << 4);
    }
}

static void qi_q4_1(const float *src, void *dst, size_t n, const float *imp)
{
    simd_block_q4_1 *b = dst;
    int L[SIMD_QK];
    for (size_t i = 0; i < n / SIMD_QK; i++) {
        imp_affine(src + i * SIMD_QK, imp + i * SIMD_QK, 15, &b[i].d, &b[i].m, L);
        for (int j = 0; j < SIMD_QK / 2; j++)
            b[i].qs[j] = (uint8_t)(L[j] | L[j + 16] << 4);
    }
}

/* q5_0 / q5_1: the low nibbles into qs, the fifth bits into qh. */
static void put_q5(const int L[SIMD_QK], uint8_t qs[16], uint8_t qh[4])
{
    uint32_t h = 0;
    for (int j = 0; j < SIMD_QK / 2; j++) {
        qs[j] = (uint8_t)((L[j] & 0x0f) | (L[j + 16] & 0x0f) << 4);
        h |= (uint32_t)(L[j] >> 4) << j | (uint32_t)(L[j + 16] >> 4) << (j + 16);
    }
    put_qh(qh, h);
}

static void qi_q5_0(const float *src, void *dst, size_t n, const float *imp)
{
    simd_block_q5_0 *b = dst;
    int L[SIMD_QK];
    for (size_t i = 0; i < n / SIMD_QK; i++) {
        imp_sym(src + i * SIMD_QK, imp + i * SIMD_QK, 16, 15, &b[i].d, L);
        for (int j = 0; j < SIMD_QK; j++)
            L[j] += 16;
        put_q5(L, b[i].qs, b[i].qh);
    }
}

static void qi_q5_1(const float *src, void *dst, size_t n, const float *imp)
{
    simd_block_q5_1 *b = dst;
    int L[SIMD_QK];
    for (size_t i = 0; i < n / SIMD_QK; i++) {
        imp_affine(src + i * SIMD_QK, imp + i * SIMD_QK, 31, &b[i].d, &b[i].m, L);
        put_q5(L, b[i].qs, b[i].qh);
    }
}

/* ---- activations ---- */

size_t simd_act_row_bytes(enum simd_act act, size_t n)
{
    switch (act) {
    case SIMD_ACT_F32: return n * sizeof(float);
    case SIMD_ACT_Q8: return (n / SIMD_QK) * sizeof(simd_block_q8a);
    case SIMD_ACT_Q8K: return (n / SIMD_QKK) * sizeof(simd_block_q8k);
    default: return 0;
    }
}

/* q8a: scale d = amax/127 (a division, not a multiplication by 1/127),
 * q = x * (1/d) rounded half to even (lrintf in the default rounding mode,
 * which is what vector converts do too). NaN inputs are ignored by amax.
 * So that every input has one defined answer (and kernels may rely on
 * |q| <= 127), x * (1/d) is first made total: NaN -> 0, then clamped to
 * [-127, 127]; for finite inputs with a normal d this changes nothing. */
void simd_q8a_quant_ref(const float *x, void *dst, size_t n)
{
    simd_block_q8a *b = dst;
    for (size_t i = 0; i < n / SIMD_QK; i++) {
        const float *v = x + i * SIMD_QK;
        float amax = 0;
        for (int j = 0; j < SIMD_QK; j++)
            amax = fmaxf(amax, fabsf(v[j]));
        float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
        int32_t sum = 0;
        for (int j = 0; j < SIMD_QK; j++) {
            float t = v[j] * id;
            if (isnan(t))
                t = 0;
            t = t > 127.0f ? 127.0f : t < -127.0f ? -127.0f : t;
            int q = (int)lrintf(t);
            b[i].qs[j] = (int8_t)q;
            sum += q;
        }
        b[i].d = d;
        b[i].sum = sum;
    }
}

void simd_act_quant(enum simd_act act, const float *x, void *dst, size_t n)
{
    switch (act) {
    case SIMD_ACT_F32: memcpy(dst, x, n * sizeof(float)); break;
    case SIMD_ACT_Q8: simd_table.q8a_quant(x, dst, n); break;
    case SIMD_ACT_Q8K: simd_table.q8k_quant(x, dst, n); break;
    default: break;
    }
}

/* ---- the table ---- */

/* The type rows of the dispatch table (simd_internal.h); their kernel
 * slots (dot, dot_batch, dot_rows, dot_packed), like the table's set-wide
 * kernels, are filled by simd_init from the installed set. */
#define TRAITS(NAME, BLOCK, BYTES, ACT, DEQ, Q) \
    {.name = NAME, .block = BLOCK, .bytes = BYTES, .act = ACT, .dequant = DEQ, .quant = Q}
#define TRAITS_I(NAME, BLOCK, BYTES, ACT, DEQ, Q, QI)                                                      \
    {.name = NAME, .block = BLOCK, .bytes = BYTES, .act = ACT, .dequant = DEQ, .quant = Q, .quant_imp = QI}
simd_dispatch simd_table = {.type = {
    [SIMD_F32] = TRAITS("f32", 1, 4, SIMD_ACT_F32, deq_f32, q_f32),
    [SIMD_F16] = TRAITS("f16", 1, 2, SIMD_ACT_F32, deq_f16, q_f16),
    [SIMD_BF16] = TRAITS("bf16", 1, 2, SIMD_ACT_F32, deq_bf16, q_bf16),
    [SIMD_Q8_0] = TRAITS_I("q8_0", 32, 34, SIMD_ACT_Q8, deq_q8_0, q_q8_0, qi_q8_0),
    [SIMD_Q4_0] = TRAITS_I("q4_0", 32, 18, SIMD_ACT_Q8, deq_q4_0, q_q4_0, qi_q4_0),
    [SIMD_Q4_1] = TRAITS_I("q4_1", 32, 20, SIMD_ACT_Q8, deq_q4_1, q_q4_1, qi_q4_1),
    [SIMD_Q5_0] = TRAITS_I("q5_0", 32, 22, SIMD_ACT_Q8, deq_q5_0, q_q5_0, qi_q5_0),
    [SIMD_Q5_1] = TRAITS_I("q5_1", 32, 24, SIMD_ACT_Q8, deq_q5_1, q_q5_1, qi_q5_1),
    /* MXFP4 (mxfp4.c): dot kernels from simd_set_mxfp4 */
    [SIMD_MXFP4] = TRAITS("mxfp4", 32, 17, SIMD_ACT_Q8, simd_deq_mxfp4, simd_quant_mxfp4),
    /* q2_k, q3_k, iq4_nl, iq4_xs (lquants.c): dot kernels from simd_set_lquants */
    [SIMD_Q2_K] = TRAITS_I("q2_k", 256, 84, SIMD_ACT_Q8K, simd_deq_q2_k, simd_quant_q2_k, simd_quant_q2_k_imp),
    [SIMD_Q3_K] = TRAITS_I("q3_k", 256, 110, SIMD_ACT_Q8K, simd_deq_q3_k, simd_quant_q3_k, simd_quant_q3_k_imp),
    [SIMD_IQ4_NL] = TRAITS_I("iq4_nl", 32, 18, SIMD_ACT_Q8, simd_deq_iq4_nl, simd_quant_iq4_nl, simd_quant_iq4_nl_imp),
    [SIMD_IQ4_XS] = TRAITS_I("iq4_xs", 256, 136, SIMD_ACT_Q8K, simd_deq_iq4_xs, simd_quant_iq4_xs, simd_quant_iq4_xs_imp),
    /* the i-quants below 4 bits (iquants.c reads them, iquants_quant.c
     * writes them): dot kernels from simd_set_lquants */
    [SIMD_IQ2_XXS] = TRAITS_I("iq2_xxs", 256, 66, SIMD_ACT_Q8K, simd_deq_iq2_xxs, simd_quant_iq2_xxs, simd_quant_iq2_xxs_imp),
    [SIMD_IQ2_XS] = TRAITS_I("iq2_xs", 256, 74, SIMD_ACT_Q8K, simd_deq_iq2_xs, simd_quant_iq2_xs, simd_quant_iq2_xs_imp),
    [SIMD_IQ2_S] = TRAITS_I("iq2_s", 256, 82, SIMD_ACT_Q8K, simd_deq_iq2_s, simd_quant_iq2_s, simd_quant_iq2_s_imp),
    [SIMD_IQ3_XXS] = TRAITS_I("iq3_xxs", 256, 98, SIMD_ACT_Q8K, simd_deq_iq3_xxs, simd_quant_iq3_xxs, simd_quant_iq3_xxs_imp),
    [SIMD_IQ3_S] = TRAITS_I("iq3_s", 256, 110, SIMD_ACT_Q8K, simd_deq_iq3_s, simd_quant_iq3_s, simd_quant_iq3_s_imp),
    [SIMD_IQ1_S] = TRAITS_I("iq1_s", 256, 50, SIMD_ACT_Q8K, simd_deq_iq1_s, simd_quant_iq1_s, simd_quant_iq1_s_imp),
    [SIMD_IQ1_M] = TRAITS_I("iq1_m", 256, 56, SIMD_ACT_Q8K, simd_deq_iq1_m, simd_quant_iq1_m, simd_quant_iq1_m_imp),
    /* Known to the reader (so `info` names them) but without kernels yet:
     * a model using them is refused at load with the type's name. */
    [SIMD_Q8_1] = TRAITS("q8_1", 32, 36, SIMD_ACT_NONE, NULL, NULL),
    [SIMD_Q4_K] = TRAITS_I("q4_k", 256, 144, SIMD_ACT_Q8K, simd_deq_q4_k, simd_quant_q4_k, simd_quant_q4_k_imp),
    [SIMD_Q5_K] = TRAITS_I("q5_k", 256, 176, SIMD_ACT_Q8K, simd_deq_q5_k, simd_quant_q5_k, simd_quant_q5_k_imp),
    [SIMD_Q6_K] = TRAITS_I("q6_k", 256, 210, SIMD_ACT_Q8K, simd_deq_q6_k, simd_quant_q6_k, simd_quant_q6_k_imp),
    [SIMD_Q8_K] = TRAITS("q8_k", 256, 292, SIMD_ACT_NONE, NULL, NULL),
    [SIMD_I8] = TRAITS("i8", 1, 1, SIMD_ACT_NONE, NULL, NULL),
    [SIMD_I16] = TRAITS("i16", 1, 2, SIMD_ACT_NONE, NULL, NULL),
    [SIMD_I32] = TRAITS("i32", 1, 4, SIMD_ACT_NONE, NULL, NULL),
    [SIMD_I64] = TRAITS("i64", 1, 8, SIMD_ACT_NONE, NULL, NULL),
    [SIMD_F64] = TRAITS("f64", 1, 8, SIMD_ACT_NONE, NULL, NULL),
}};
#undef TRAITS
#undef TRAITS_I

const simd_traits *simd_type_traits(int type)
{
    if (type < 0 || type >= SIMD_TYPE_COUNT || !simd_table.type[type].name)
        return NULL;
    return &simd_table.type[type];
}

const char *simd_type_name(int type)
{
    const simd_traits *t = simd_type_traits(type);
    return t ? t->name : "?";
}

size_t simd_row_bytes(int type, uint64_t n)
{
    const simd_traits *t = simd_type_traits(type);
    if (!t || n % t->block)
        return 0;
    return (size_t)(n / t->block) * t->bytes;
}
