/* MXFP4 in plain C: what a block means (dequant), the reference
 * quantizer, the scalar dot every kernel set reproduces bit for bit, and
 * the choice of each set's MXFP4 kernels. See mxfp4.h for the format. */
#include "mxfp4.h"

#include <math.h>

const int8_t simd_mxfp4_kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

void simd_deq_mxfp4(const void *src, float *dst, size_t n)
{
    const simd_block_mxfp4 *b = src;
    for (size_t i = 0; i < n / SIMD_QK; i++) {
        float d = simd_e8m0_half(b[i].e);
        float *y = dst + i * SIMD_QK;
        for (int j = 0; j < SIMD_QK / 2; j++) {
            y[j] = d * (float)simd_mxfp4_kv[b[i].qs[j] & 0x0f];
            y[j + 16] = d * (float)simd_mxfp4_kv[b[i].qs[j] >> 4];
        }
    }
}

/* ---- quantization ----
 * Per block: a scale s = 2^(e-128) (applied to the doubled values), then
 * each value to the nearest of 0, ±1, ±2, ±3, ±4, ±6, ±8, ±12 times s,
 * ties to the even code (even mantissa, as IEEE rounding does).
 * The scale: e_top is the smallest exponent whose largest level 12*s
 * reaches amax (nothing clips); one exponent lower halves every step but
 * clips the values above 12*s. Both are tried and the one with the
 * smaller squared error over the block kept (e_top on a tie). NaN inputs
 * count as 0 and do not raise the scale; infinities take the largest
 * level of the largest exponent written (254, so 255 never appears). */

/* Index 0..7 of the level nearest t >= 0 among 0 1 2 3 4 6 8 12; t at a
 * midpoint goes to the even index. NaN gives 0. */
static int e2m1_index(float t)
{
    static const float mid[7] = {0.5f, 1.5f, 2.5f, 3.5f, 5.0f, 7.0f, 10.0f};
    int i = 0;
    while (i < 7 && (t > mid[i] || (t == mid[i] && (i & 1))))
        i++;
    return i;
}

/* Code of x at half scale s (a power of two, so x / s is exact unless it
 * leaves the float range, where the nearest level is the end one anyway). */
static int e2m1_code(float x, float s)
{
    int i = e2m1_index(fabsf(x) / s);
    return i && x < 0 ? i | 8 : i;
}

static double block_sse(const float *x, float s, uint8_t *codes)
{
    double e = 0;
    for (int j = 0; j < SIMD_QK; j++) {
        int c = e2m1_code(x[j], s);
        codes[j] = (uint8_t)c;
        if (isnan(x[j]))
            continue;
        double d = (double)x[j] - (double)s * simd_mxfp4_kv[c];
        e += isinf(x[j]) ? 0 : d * d; /* an infinity costs the same either way */
    }
    return e;
}

void simd_quant_mxfp4(const float *src, void *dst, size_t n)
{
    simd_block_mxfp4 *b = dst;
    for (size_t i = 0; i < n / SIMD_QK; i++) {
        const float *x = src + i * SIMD_QK;
        float amax = 0;
        for (int j = 0; j < SIMD_QK; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        uint8_t best[SIMD_QK] = {0}, codes[SIMD_QK];
        int e = 0;
        if (amax > 0) {
            /* the largest level 12 * 2^(e-128) >= amax: start near it from
             * the binary exponent, then step to the exact smallest e */
            int top = 254;
            if (!isinf(amax)) { /* (12 * 2^126 overflows to inf: exact enough, as amax is finite) */
                top = 128 + ilogbf(amax) - 3;
                top = top < 0 ? 0 : top > 254 ? 254 : top;
                while (top < 254 && 12.0f * simd_e8m0_half((uint8_t)top) < amax)
                    top++;
                while (top > 0 && 12.0f * simd_e8m0_half((uint8_t)(top - 1)) >= amax)
                    top--;
            }
            double err = block_sse(x, simd_e8m0_half((uint8_t)top), best);
            e = top;
            if (top > 0 && block_sse(x, simd_e8m0_half((uint8_t)(top - 1)), codes) < err) {
                e = top - 1;
                memcpy(best, codes, sizeof best);
            }
        }
        b[i].e = (uint8_t)e;
        for (int j = 0; j < SIMD_QK / 2; j++)
            b[i].qs[j] = (uint8_t)(best[j] | best[j + 16] << 4);
    }
}

/* ---- the scalar dot: the definition of the float order ---- */

static float dot_mxfp4(size_t n, const void *w, const void *a)
{
    const simd_block_mxfp4 *x = w;
    const simd_block_q8a *y = a;
    float acc[8] = {0};
    for (size_t b = 0; b < n / SIMD_QK; b++) {
        int32_t s = 0;
        for (int j = 0; j < SIMD_QK / 2; j++)
            s += simd_mxfp4_kv[x[b].qs[j] & 0x0f] * y[b].qs[j] + simd_mxfp4_kv[x[b].qs[j] >> 4] * y[b].qs[j + 16];
        acc[b & 7] += (simd_e8m0_half(x[b].e) * y[b].d) * (float)s;
    }
    return simd_reduce8(acc);
}

static void dot_mxfp4_batch(size_t n, const void *w, const void *a, size_t astride, size_t nt, float *out,
                            size_t ostride)
{
    for (size_t t = 0; t < nt; t++)
        out[t * ostride] = dot_mxfp4(n, w, (const char *)a + t * astride);
}

static void dot_mxfp4_rows(size_t n, const void *w, size_t wstride, size_t nr, const void *a, size_t astride,
                           size_t nt, float *out, size_t ostride)
{
    for (size_t r = 0; r < nr; r++)
        dot_mxfp4_batch(n, (const char *)w + r * wstride, a, astride, nt, out + r, ostride);
}

void simd_set_mxfp4_scalar(simd_kernel_set *s)
{
    s->dot[SIMD_MXFP4] = dot_mxfp4;
    s->dot_batch[SIMD_MXFP4] = dot_mxfp4_batch;
    s->dot_rows[SIMD_MXFP4] = dot_mxfp4_rows;
}

void simd_set_mxfp4(enum simd_kernel k, simd_kernel_set *s)
{
    simd_set_mxfp4_scalar(s);
    switch (k) {
#if defined(NIBBLE_X86_SETS)
    case SIMD_K_AVX2: simd_set_mxfp4_avx2(s); break;
    case SIMD_K_AVXVNNI: simd_set_mxfp4_avxvnni(s); break;
    case SIMD_K_AVX512VNNI: simd_set_mxfp4_avx512vnni(s); break;
    case SIMD_K_AVXVNNIINT8: simd_set_mxfp4_avxvnniint8(s); break;
#endif
#if defined(NIBBLE_NEON_SET)
    case SIMD_K_NEON: simd_set_mxfp4_neon(s); break;
#endif
#if defined(NIBBLE_NEON_DOTPROD_SET)
    case SIMD_K_NEON_DOTPROD: simd_set_mxfp4_neon_dotprod(s); break;
#endif
    default: break;
    }
}
