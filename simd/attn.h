/* Private to simd/: the pieces of attention (simd_attn_chunk, simd_attn_tile in simd.h) that
 * every kernel set shares, so they compute it with the same operations.
 *
 * The exp is defined here, not taken from libm, because every set must
 * give the same bits: e^x = 2^n * P(r), with
 *     n = x*log2(e) rounded to nearest-even (by adding and subtracting
 *         1.5*2^23, so plain float adds do the rounding),
 *     r = (x - n*LN2_HI) - n*LN2_LO   (Cody-Waite: n*LN2_HI is exact),
 *     P(r) = Taylor series to r^7 in Horner form, one multiply then one
 *         add per step (no FMA),
 *     2^n built from its exponent bits.
 * Defined for the arguments attention gives it, x <= 0: anything that is
 * not >= ATTN_EXP_MIN (so NaN too) gives +0, and x > 0 is taken as 0.
 * Relative error is a few float ulps; e^0 is exactly 1. */
#ifndef NIBBLE_ATTN_H
#define NIBBLE_ATTN_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "simd_internal.h"

#define ATTN_EXP_MIN (-87.0f) /* below: 0; from here 2^n is a normal float */
#define ATTN_LOG2E 1.44269504088896341f
#define ATTN_ROUND 12582912.0f      /* 1.5 * 2^23 */
#define ATTN_LN2_HI 0.693145751953125f /* 12 significant bits: n*LN2_HI is exact for |n| < 2^11 */
#define ATTN_LN2_LO 1.428606765330187e-06f
#define ATTN_C7 1.98412698e-4f /* 1/5040 */
#define ATTN_C6 1.38888889e-3f /* 1/720 */
#define ATTN_C5 8.33333333e-3f /* 1/120 */
#define ATTN_C4 4.16666667e-2f /* 1/24 */
#define ATTN_C3 1.66666667e-1f /* 1/6 */
#define ATTN_C2 0.5f

/* 2^n * P(r) for x in [ATTN_EXP_MIN, 0]: the arithmetic of attn_exp,
 * without its checks (act.h wraps it in selects instead). */
static inline float attn_exp_core(float x)
{
    float t = x * ATTN_LOG2E + ATTN_ROUND;
    float n = t - ATTN_ROUND;
    float r = x - n * ATTN_LN2_HI;
    r = r - n * ATTN_LN2_LO;
    float p = ATTN_C7;
    p = p * r + ATTN_C6;
    p = p * r + ATTN_C5;
    p = p * r + ATTN_C4;
    p = p * r + ATTN_C3;
    p = p * r + ATTN_C2;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float s;
    memcpy(&s, &bits, 4);
    return p * s;
}

/* The reference form of the exp; the SIMD forms repeat it lane by lane. */
static inline float attn_exp(float x)
{
    if (!(x >= ATTN_EXP_MIN))
        return 0.0f;
    return attn_exp_core(x < 0.0f ? x : 0.0f);
}

/* x * y + z rounded once, as a fused multiply-add instruction gives it:
 * the multiply-add of the plain-C references (scores and V sums), so they
 * give the bits of the SIMD forms' FMAs on every compiler and CPU. Where
 * the build has a hardware FMA (__FP_FAST_FMAF: Arm, x86 with -mfma) it
 * is that instruction. Elsewhere: the product of two floats is exact in
 * double (48 significant bits, far from overflow and underflow), the sum
 * with z is rounded to double and its error found exactly (Knuth's
 * two-sum), the double is then set to the odd one of its two neighbours
 * when inexact, and that rounds to the correct float: rounding to odd with
 * 29 spare bits leaves no double rounding. No libm call, whose fmaf is
 * not correctly rounded everywhere. Inf and NaN come out of the double
 * arithmetic as they do from the instruction. */
static inline float attn_fma(float x, float y, float z)
{
#if defined(__FP_FAST_FMAF)
    return __builtin_fmaf(x, y, z);
#else
    double p = (double)x * (double)y, zd = (double)z;
    double s = p + zd;
    double b = s - p;
    double e = (p - (s - b)) + (zd - b);
    if (e != 0.0 && s == s && s - s == 0.0) { /* inexact, s finite */
        uint64_t bits;
        memcpy(&bits, &s, sizeof bits);
        if (!(bits & 1)) { /* even: take the neighbour toward s + e */
            bits += (e > 0.0) == (s > 0.0) ? 1 : (uint64_t)-1;
            memcpy(&s, &bits, sizeof bits);
        }
    }
    return (float)s;
#endif
}

#define ATTN_HB 4  /* query heads per pass of the SIMD forms: K and V rows read once for them */
#define ATTN_VT 32 /* positions per tile of their V sum */

void simd_attn_ref(const simd_attn_args *a);
/* simd_attn_merge (sink NULL) and simd_attn_merge_sink (*sink) in plain C,
 * and the x86 sets' form (AVX2: eight columns and eight chunks' exps at a
 * time, each lane in the reference's order). */
void simd_attn_merge_ref(size_t hd, size_t nchunks, const float *part, size_t cstride, const float *sink,
                         float *out);
void simd_attn_merge_avx2(size_t hd, size_t nchunks, const float *part, size_t cstride, const float *sink,
                          float *out);
/* The SIMD forms: one for every x86 set (AVX2 instructions, which they all
 * have), one for both Arm sets. */
void simd_attn_avx2(const simd_attn_args *a);
void simd_attn_avx512(const simd_attn_args *a); /* the avx512vnni set's: a 512-bit V sum */
void simd_attn_neon(const simd_attn_args *a);

/* The tile (simd_attn_tile) in plain C: its order (simd.h), every set's
 * reference; it reads the cache where it lies (kvbuf unused) and takes
 * a->scratch for a row's scores. */
void simd_attn_tile_ref(const simd_attn_args *a, size_t nt, size_t qtstride, size_t ptstride, float *kvbuf);
/* The tile forms (attn_tile_driver.h): AVX2 for the x86 sets, AVX-512 for
 * avx512vnni, NEON for both Arm sets. */
void simd_attn_tile_avx2(const simd_attn_args *a, size_t nt, size_t qtstride, size_t ptstride, float *kvbuf);
void simd_attn_tile_avx512(const simd_attn_args *a, size_t nt, size_t qtstride, size_t ptstride, float *kvbuf);
void simd_attn_tile_neon(const simd_attn_args *a, size_t nt, size_t qtstride, size_t ptstride, float *kvbuf);

/* Put set k's attention into s (the reference for scalar). */
void simd_set_attn(enum simd_kernel k, simd_kernel_set *s);

/* Gemma 2's attention soft-cap: cap * tanh(s / cap) for each score, with
 * tanh from attn_exp (tanh|y| = (1 - e^-2|y|) / (1 + e^-2|y|)), so every
 * set gives the same bits; NaN stays NaN (passed over as before). */
static inline void attn_softcap(float *s, size_t n, float cap)
{
    float inv = 1.0f / cap;
    for (size_t p = 0; p < n; p++) {
        float y = s[p] * inv;
        if (y != y)
            continue;
        float ay = y < 0 ? -y : y;
        float t = attn_exp(-2.0f * ay);
        float th = (1.0f - t) / (1.0f + t);
        s[p] = (y < 0 ? -th : th) * cap;
    }
}

/* The reference's steps after the scores of one head (the order simd.h
 * documents at simd_attn_chunk): the soft-cap, the max (NaN passed
 * over), s[p] = exp(s[p] - max), and row[0] = max, row[1] = the sum of
 * s in eight lanes (lane p mod 8) reduced by simd_reduce8. Both plain-C
 * references (attn.c, attn_q.c) take it, so they cannot drift apart. */
static inline void attn_ref_softmax(float *s, size_t n, float softcap, float *row)
{
    if (softcap > 0)
        attn_softcap(s, n, softcap);
    float mx = -INFINITY;
    for (size_t p = 0; p < n; p++)
        if (s[p] > mx)
            mx = s[p];
    float lanes[8] = {0};
    for (size_t p = 0; p < n; p++) {
        s[p] = attn_exp(s[p] - mx);
        lanes[p & 7] += s[p];
    }
    row[0] = mx;
    row[1] = simd_reduce8(lanes);
}

#endif
