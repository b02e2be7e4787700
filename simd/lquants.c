/* q2_k, q3_k, iq4_nl and iq4_xs in plain C: what a block means
 * (dequant), the reference quantizers (with optional importance), the
 * scalar dots every kernel set reproduces bit for bit, and the choice of
 * each set's kernels. Layouts: simd.h; float order of the dots:
 * lquants.h. */
#include "lquants.h"
#include "kquants.h"
#include "iquants.h"

#include <math.h>
#include <string.h>

#define QKK SIMD_QKK
#define NSTEP 10

/* ggml's kvalues_iq4nl (ggml/src/ggml-common.h, MIT licence): the levels
 * of the non-linear 4-bit types, a data table the format defines. */
const int8_t simd_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static inline int qround(float v, int lo, int hi)
{
    if (!(v > (float)lo))
        return lo;
    if (v >= (float)hi)
        return hi;
    return simd_rint_small(v);
}

/* q2_k / q3_k: the 2 low bits of value v (see simd_block_q2_k). */
static inline int low2(const uint8_t *qs, int v)
{
    return (qs[32 * (v >> 7) + (v & 31)] >> (2 * ((v >> 5) & 3))) & 3;
}

/* q3_k: the signed level (-4..3) of value v. */
static inline int q3_level(const simd_block_q3_k *b, int v)
{
    int bit = (b->hmask[v & 31] >> (4 * (v >> 7) + ((v >> 5) & 3))) & 1;
    return low2(b->qs, v) - (bit ? 0 : 4);
}

/* ---- dequantize ---- */

void simd_deq_q2_k(const void *src, float *dst, size_t n)
{
    const simd_block_q2_k *b = src;
    for (size_t i = 0; i < n / QKK; i++, dst += QKK) {
        float d = simd_f16_to_f32(b[i].d), dmin = simd_f16_to_f32(b[i].dmin);
        for (int j = 0; j < 16; j++) {
            float dl = d * (float)(b[i].scales[j] & 0x0f), ml = dmin * (float)(b[i].scales[j] >> 4);
            for (int v = 16 * j; v < 16 * j + 16; v++)
                dst[v] = dl * (float)low2(b[i].qs, v) - ml;
        }
    }
}

void simd_deq_q3_k(const void *src, float *dst, size_t n)
{
    const simd_block_q3_k *b = src;
    for (size_t i = 0; i < n / QKK; i++, dst += QKK) {
        float d = simd_f16_to_f32(b[i].d);
        int8_t sc[16];
        simd_q3k_scales(b[i].scales, sc);
        for (int j = 0; j < 16; j++) {
            float dl = d * (float)(sc[j] - 32);
            for (int v = 16 * j; v < 16 * j + 16; v++)
                dst[v] = dl * (float)q3_level(&b[i], v);
        }
    }
}

void simd_deq_iq4_nl(const void *src, float *dst, size_t n)
{
    const simd_block_iq4_nl *b = src;
    for (size_t i = 0; i < n / SIMD_QK; i++, dst += SIMD_QK) {
        float d = simd_f16_to_f32(b[i].d);
        for (int j = 0; j < 16; j++) {
            dst[j] = d * (float)simd_iq4nl_values[b[i].qs[j] & 0x0f];
            dst[j + 16] = d * (float)simd_iq4nl_values[b[i].qs[j] >> 4];
        }
    }
}

void simd_deq_iq4_xs(const void *src, float *dst, size_t n)
{
    const simd_block_iq4_xs *b = src;
    for (size_t i = 0; i < n / QKK; i++, dst += QKK) {
        float d = simd_f16_to_f32(b[i].d);
        for (int j = 0; j < 8; j++) {
            float dl = d * (float)(simd_iq4xs_scale(&b[i], j) - 32);
            const uint8_t *q = b[i].qs + 16 * j;
            for (int l = 0; l < 16; l++) {
                dst[32 * j + l] = dl * (float)simd_iq4nl_values[q[l] & 0x0f];
                dst[32 * j + 16 + l] = dl * (float)simd_iq4nl_values[q[l] >> 4];
            }
        }
    }
}

/* ---- quantization ---- */

/* v rounded to f16 as stored, and back. */
static float f16_round(float v, simd_f16 *stored)
{
    *stored = simd_f32_to_f16(v);
    return simd_f16_to_f32(*stored);
}

void simd_quant_q2_k_imp(const float *src, void *dst, size_t n, const float *imp)
{
    simd_block_q2_k *b = dst;
    for (size_t i = 0; i < n / QKK; i++, src += QKK) {
        float w[QKK], a[16], m[16], amax = 0, mmax = 0;
        simd_kq_weights(src, imp ? imp + i * QKK : NULL, QKK, w);
        for (int j = 0; j < 16; j++) {
            simd_kq_fit_asym(src + 16 * j, w + 16 * j, 16, 3, &a[j], &m[j]);
            if (a[j] > amax) amax = a[j];
            if (m[j] > mmax) mmax = m[j];
        }
        float d = f16_round(amax / 15, &b[i].d), dmin = f16_round(mmax / 15, &b[i].dmin);
        memset(b[i].qs, 0, sizeof b[i].qs);
        for (int j = 0; j < 16; j++) {
            int sc = d > 0 ? qround(a[j] / d, 0, 15) : 0, mq = dmin > 0 ? qround(m[j] / dmin, 0, 15) : 0;
            b[i].scales[j] = (uint8_t)(sc | mq << 4);
            float ds = d * (float)sc, ms = dmin * (float)mq;
            for (int v = 16 * j; v < 16 * j + 16; v++) {
                int l = ds > 0 ? qround((src[v] + ms) / ds, 0, 3) : 0;
                b[i].qs[32 * (v >> 7) + (v & 31)] |= (uint8_t)(l << (2 * ((v >> 5) & 3)));
            }
        }
    }
}

void simd_quant_q3_k_imp(const float *src, void *dst, size_t n, const float *imp)
{
    simd_block_q3_k *b = dst;
    for (size_t i = 0; i < n / QKK; i++, src += QKK) {
        float w[QKK], a[16], amax = 0, big = 0;
        simd_kq_weights(src, imp ? imp + i * QKK : NULL, QKK, w);
        for (int j = 0; j < 16; j++) {
            a[j] = simd_kq_fit_sym(src + 16 * j, w + 16 * j, 16, 4, 3);
            if (fabsf(a[j]) > amax) {
                amax = fabsf(a[j]);
                big = a[j];
            }
        }
        /* the largest scale maps to -32, the longer side of 6 signed bits */
        float d = f16_round(big / -32.0f, &b[i].d);
        memset(b[i].hmask, 0, sizeof b[i].hmask);
        memset(b[i].qs, 0, sizeof b[i].qs);
        memset(b[i].scales, 0, sizeof b[i].scales);
        for (int j = 0; j < 16; j++) {
            int l = d != 0 ? qround(a[j] / d, -32, 31) : 0;
            int u = l + 32;
            if (j < 8)
                b[i].scales[j] |= (uint8_t)(u & 0x0f);
            else
                b[i].scales[j - 8] |= (uint8_t)((u & 0x0f) << 4);
            b[i].scales[8 + (j & 3)] |= (uint8_t)((u >> 4) << (2 * (j >> 2)));
            float ds = d * (float)l;
            for (int v = 16 * j; v < 16 * j + 16; v++) {
                int q = (ds != 0 ? qround(src[v] / ds, -4, 3) : 0) + 4; /* 0..7 */
                int k = (v >> 5) & 3, h = v >> 7;
                b[i].qs[32 * h + (v & 31)] |= (uint8_t)((q & 3) << (2 * k));
                b[i].hmask[v & 31] |= (uint8_t)((q >> 2) << (4 * h + k));
            }
        }
    }
}

/* Index of the iq4 level nearest t (ties to the lower one). */
static int iq4_index(float t)
{
    int lo = 0, hi = 15;
    if (!(t > simd_iq4nl_values[0]))
        return 0;
    if (t >= simd_iq4nl_values[15])
        return 15;
    while (hi - lo > 1) { /* values[lo] < t <= values[hi] */
        int mid = (lo + hi) / 2;
        if (t > simd_iq4nl_values[mid])
            lo = mid;
        else
            hi = mid;
    }
    return t - simd_iq4nl_values[lo] <= simd_iq4nl_values[hi] - t ? lo : hi;
}

/* Fit x[i] ~ a * values[L[i]] (n <= 32) minimising sum w*err^2: the
 * largest |x| is tried at each of the NSTEP levels nearest either end of
 * the table, and with kmin < 0 also -kmin steps beyond either end (the
 * largest value then clips to the end level, the others landing nearer
 * theirs), the other values then taking their nearest levels and a the
 * least-squares scale for those levels. Returns a (0 for an all-zero x). */
static float fit_iq4(const float *x, const float *w, int n, int kmin)
{
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (!(amax > 0))
        return 0;
    double best = -1;
    float a_best = max / (float)simd_iq4nl_values[0];
    for (int side = 0; side < 2; side++)
        for (int k = kmin; k <= NSTEP; k++) {
            float top = side ? (float)simd_iq4nl_values[15] - (float)k : (float)simd_iq4nl_values[0] + (float)k;
            float is = top / max;
            double sxl = 0, sll = 0;
            for (int i = 0; i < n; i++) {
                int l = simd_iq4nl_values[iq4_index(x[i] * is)];
                sxl += (double)w[i] * x[i] * l;
                sll += (double)w[i] * l * l;
            }
            if (sll > 0 && sxl * sxl / sll > best) {
                best = sxl * sxl / sll;
                a_best = (float)(sxl / sll);
            }
        }
    return a_best;
}

/* The codes of 32 values at scale ds, packed as iq4_nl's qs. */
static void iq4_pack(const float *x, float ds, uint8_t qs[16])
{
    for (int j = 0; j < 16; j++) {
        int lo = ds != 0 ? iq4_index(x[j] / ds) : 8, hi = ds != 0 ? iq4_index(x[j + 16] / ds) : 8;
        qs[j] = (uint8_t)(lo | hi << 4);
    }
}

/* With importance the iq4 types weigh by the importance alone (the
 * diagonal of the input's second moments: what an error costs the
 * matmul's output, in expectation), not llama.cpp's imp * sqrt(sigma2 +
 * x^2), and their fits may clip a block's largest value by up to IQ4_CLIP
 * steps. Measured on tiny256 synth models (docs/QUANTIZATION.md): iq4_xs's
 * importance-weighted error per tensor 1-3% below llama-quantize's (0-1.6%
 * above before), mean KL over 8 seeds 0.0842 -> 0.0800 (llama.cpp's
 * 0.0835); iq4_nl 0.0896 -> 0.0852 over 4 seeds. Returns whether w holds
 * importance (a block of zero importance is weighed as without). */
#define IQ4_CLIP 7
static int iq4_weights(const float *x, const float *imp, int n, float *w)
{
    int weighted = 0;
    if (imp)
        for (int k = 0; k < n; k++)
            weighted |= imp[k] > 0;
    if (!weighted) {
        simd_kq_weights(x, NULL, n, w);
        return 0;
    }
    for (int k = 0; k < n; k++)
        w[k] = imp[k] > 0 ? imp[k] : 0;
    return 1;
}

void simd_quant_iq4_nl_imp(const float *src, void *dst, size_t n, const float *imp)
{
    simd_block_iq4_nl *b = dst;
    for (size_t i = 0; i < n / SIMD_QK; i++, src += SIMD_QK) {
        float w[SIMD_QK];
        int weighted = iq4_weights(src, imp ? imp + i * SIMD_QK : NULL, SIMD_QK, w);
        float d = f16_round(fit_iq4(src, w, SIMD_QK, weighted ? -IQ4_CLIP : 0), &b[i].d);
        iq4_pack(src, d, b[i].qs);
    }
}

/* With importance: the super-block scale refitted to the codes and
 * sub-block scales chosen (least sum w*(x - d*l*value)^2), kept when its
 * f16 lowers that sum. */
static void iq4_xs_refit(simd_block_iq4_xs *b, const float *x, const float *w)
{
    float d = simd_f16_to_f32(b->d);
    double sqx = 0, sq2 = 0;
    for (int j = 0; j < 8; j++) {
        int l = ((b->scales_l[j >> 1] >> (4 * (j & 1))) & 0x0f) | (((b->scales_h >> (2 * j)) & 3) << 4);
        l -= 32;
        for (int k = 0; k < 32; k++) {
            uint8_t c = b->qs[16 * j + (k & 15)];
            double q = (double)l * simd_iq4nl_values[k < 16 ? c & 0x0f : c >> 4];
            sqx += w[32 * j + k] * q * x[32 * j + k];
            sq2 += w[32 * j + k] * q * q;
        }
    }
    if (!(sq2 > 0))
        return;
    simd_f16 n16 = simd_f32_to_f16((float)(sqx / sq2));
    double dn = simd_f16_to_f32(n16);
    /* sum w (x - d q)^2 = sxx - 2 d sqx + d^2 sq2 */
    if (dn * dn * sq2 - 2 * dn * sqx < (double)d * d * sq2 - 2 * (double)d * sqx)
        b->d = n16;
}

void simd_quant_iq4_xs_imp(const float *src, void *dst, size_t n, const float *imp)
{
    simd_block_iq4_xs *b = dst;
    for (size_t i = 0; i < n / QKK; i++, src += QKK) {
        float w[QKK], a[8], amax = 0, big = 0;
        int weighted = iq4_weights(src, imp ? imp + i * QKK : NULL, QKK, w);
        for (int j = 0; j < 8; j++) {
            a[j] = fit_iq4(src + 32 * j, w + 32 * j, 32, weighted ? -IQ4_CLIP : 0);
            if (fabsf(a[j]) > amax) {
                amax = fabsf(a[j]);
                big = a[j];
            }
        }
        float d = f16_round(big / -32.0f, &b[i].d);
        b[i].scales_h = 0;
        memset(b[i].scales_l, 0, sizeof b[i].scales_l);
        for (int j = 0; j < 8; j++) {
            int l = d != 0 ? qround(a[j] / d, -32, 31) : 0, u = l + 32;
            b[i].scales_l[j >> 1] |= (uint8_t)((u & 0x0f) << (4 * (j & 1)));
            b[i].scales_h |= (uint16_t)((u >> 4) << (2 * j));
            iq4_pack(src + 32 * j, d * (float)l, b[i].qs + 16 * j);
        }
        if (weighted && d != 0)
            iq4_xs_refit(b + i, src, w);
    }
}

void simd_quant_q2_k(const float *src, void *dst, size_t n) { simd_quant_q2_k_imp(src, dst, n, NULL); }
void simd_quant_q3_k(const float *src, void *dst, size_t n) { simd_quant_q3_k_imp(src, dst, n, NULL); }
void simd_quant_iq4_nl(const float *src, void *dst, size_t n) { simd_quant_iq4_nl_imp(src, dst, n, NULL); }
void simd_quant_iq4_xs(const float *src, void *dst, size_t n) { simd_quant_iq4_xs_imp(src, dst, n, NULL); }

/* ---- scalar dots: the definition of the float order ---- */

static float dot_q2_k(size_t n, const void *w, const void *a)
{
    const simd_block_q2_k *x = w;
    const simd_block_q8k *y = a;
    float acc[8] = {0};
    for (size_t b = 0; b < n / QKK; b++) {
        int32_t sumi = 0, summ = 0;
        for (int j = 0; j < 16; j++) {
            int32_t s = 0;
            for (int v = 16 * j; v < 16 * j + 16; v++)
                s += low2(x[b].qs, v) * y[b].qs[v];
            sumi += (x[b].scales[j] & 0x0f) * s;
            summ += (x[b].scales[j] >> 4) * y[b].bsums[j];
        }
        acc[b & 7] += (simd_f16_to_f32(x[b].d) * y[b].d) * (float)sumi -
                      (simd_f16_to_f32(x[b].dmin) * y[b].d) * (float)summ;
    }
    return simd_reduce8(acc);
}

static float dot_q3_k(size_t n, const void *w, const void *a)
{
    const simd_block_q3_k *x = w;
    const simd_block_q8k *y = a;
    float acc[8] = {0};
    for (size_t b = 0; b < n / QKK; b++) {
        int8_t sc[16];
        simd_q3k_scales(x[b].scales, sc);
        int32_t sumi = 0;
        for (int j = 0; j < 16; j++) {
            int32_t s = 0;
            for (int v = 16 * j; v < 16 * j + 16; v++)
                s += q3_level(&x[b], v) * y[b].qs[v];
            sumi += (sc[j] - 32) * s;
        }
        acc[b & 7] += (simd_f16_to_f32(x[b].d) * y[b].d) * (float)sumi;
    }
    return simd_reduce8(acc);
}

static float dot_iq4_xs(size_t n, const void *w, const void *a)
{
    const simd_block_iq4_xs *x = w;
    const simd_block_q8k *y = a;
    float acc[8] = {0};
    for (size_t b = 0; b < n / QKK; b++) {
        int32_t sumi = 0;
        for (int j = 0; j < 8; j++) {
            const uint8_t *q = x[b].qs + 16 * j;
            const int8_t *v = y[b].qs + 32 * j;
            int32_t s = 0;
            for (int l = 0; l < 16; l++)
                s += simd_iq4nl_values[q[l] & 0x0f] * v[l] + simd_iq4nl_values[q[l] >> 4] * v[l + 16];
            sumi += (simd_iq4xs_scale(&x[b], j) - 32) * s;
        }
        acc[b & 7] += (simd_f16_to_f32(x[b].d) * y[b].d) * (float)sumi;
    }
    return simd_reduce8(acc);
}

static float dot_iq4_nl(size_t n, const void *w, const void *a)
{
    const simd_block_iq4_nl *x = w;
    const simd_block_q8a *y = a;
    float acc[8] = {0};
    for (size_t b = 0; b < n / SIMD_QK; b++) {
        int32_t s = 0;
        for (int j = 0; j < 16; j++)
            s += simd_iq4nl_values[x[b].qs[j] & 0x0f] * y[b].qs[j] + simd_iq4nl_values[x[b].qs[j] >> 4] * y[b].qs[j + 16];
        acc[b & 7] += (simd_f16_to_f32(x[b].d) * y[b].d) * (float)s;
    }
    return simd_reduce8(acc);
}

SIMD_DOT_FORMS(dot_q2_k)
SIMD_DOT_FORMS(dot_q3_k)
SIMD_DOT_FORMS(dot_iq4_xs)
SIMD_DOT_FORMS(dot_iq4_nl)

void simd_set_lquants(enum simd_kernel k, simd_kernel_set *s)
{
    SIMD_PUT_DOTS(s, SIMD_Q2_K, dot_q2_k);
    SIMD_PUT_DOTS(s, SIMD_Q3_K, dot_q3_k);
    SIMD_PUT_DOTS(s, SIMD_IQ4_XS, dot_iq4_xs);
    SIMD_PUT_DOTS(s, SIMD_IQ4_NL, dot_iq4_nl);
    simd_set_iquants_scalar(s); /* the i-quants below 4 bits (iquants.c) */
    switch (k) {
#if defined(NIBBLE_X86_SETS)
    case SIMD_K_AVX2: simd_set_lquants_avx2(s); break;
    case SIMD_K_AVXVNNI: simd_set_lquants_avxvnni(s); break;
    case SIMD_K_AVX512VNNI: simd_set_lquants_avx512vnni(s); break;
    case SIMD_K_AVXVNNIINT8: simd_set_lquants_avxvnniint8(s); break;
#endif
#if defined(NIBBLE_NEON_SET)
    case SIMD_K_NEON: simd_set_lquants_neon(s); break;
#endif
#if defined(NIBBLE_NEON_DOTPROD_SET)
    case SIMD_K_NEON_DOTPROD: simd_set_lquants_neon_dotprod(s); break;
#endif
    default: break;
    }
}
