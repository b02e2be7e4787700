/* Private to simd/: the AVX2 pieces of attention that the x86 forms
 * (attn_avx2.c, attn_avx512.c) share: the exp eight lanes at a time
 * (sixteen in the AVX-512 builds), the eight-position lane reduction,
 * the max and the exp-and-sum of rows of scores, the tile's steps into
 * kvbuf (eight halves to floats, K's rows transposed). Each keeps
 * simd_attn_ref's order of float operations lane by lane (attn_avx2.c
 * says how). Included by files built with AVX2 or AVX-512 flags only. */
#ifndef NIBBLE_ATTN_X86_H
#define NIBBLE_ATTN_X86_H

#include "attn.h"
#include "reduce_x86.h"

#include <immintrin.h>
#include <math.h>

#define AI static inline __attribute__((always_inline))

/* GCC folds a vector that several multiplies use into each of them as a
 * memory operand, loading it once per use, so a loop meant to read each
 * vector once for many heads runs at the rate of the load ports: this
 * empty asm makes the vector a register value there (no instruction, no
 * effect on any result). */
#define ATTN_KEEP(x) __asm__("" : "+v"(x))

AI __m256 set1(float f) { return _mm256_set1_ps(f); }
/* acc + a * b rounded once (attn_fma's bits in each lane) */
AI __m256 madd(__m256 acc, __m256 a, __m256 b) { return _mm256_fmadd_ps(a, b, acc); }
/* eight cache halves as floats (exact, as simd_f16_to_f32) */
AI __m256 ldh(const simd_f16 *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

/* attn_exp, eight lanes at a time */
AI __m256 exp8(__m256 x)
{
    __m256 keep = _mm256_cmp_ps(x, set1(ATTN_EXP_MIN), _CMP_GE_OQ); /* false for NaN */
    x = _mm256_min_ps(x, _mm256_setzero_ps());                       /* x < 0 ? x : 0 */
    __m256 t = _mm256_add_ps(_mm256_mul_ps(x, set1(ATTN_LOG2E)), set1(ATTN_ROUND));
    __m256 n = _mm256_sub_ps(t, set1(ATTN_ROUND));
    __m256 r = _mm256_sub_ps(x, _mm256_mul_ps(n, set1(ATTN_LN2_HI)));
    r = _mm256_sub_ps(r, _mm256_mul_ps(n, set1(ATTN_LN2_LO)));
    __m256 p = set1(ATTN_C7);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(ATTN_C6));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(ATTN_C5));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(ATTN_C4));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(ATTN_C3));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(ATTN_C2));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(1.0f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(1.0f));
    /* lanes that are dropped may hold garbage exponents: masked below */
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), keep);
}

#if defined(__AVX512F__)
/* exp8 on sixteen lanes (the AVX-512 builds): each lane takes exp8's
 * steps on the same value, so the bits are the same; the dropped lanes
 * are zeroed by the mask, as exp8's and-mask zeroes them. */
AI __m512 exp16(__m512 x)
{
    __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(ATTN_EXP_MIN), _CMP_GE_OQ); /* false for NaN */
    x = _mm512_min_ps(x, _mm512_setzero_ps());
    __m512 t = _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(ATTN_LOG2E)), _mm512_set1_ps(ATTN_ROUND));
    __m512 n = _mm512_sub_ps(t, _mm512_set1_ps(ATTN_ROUND));
    __m512 r = _mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(ATTN_LN2_HI)));
    r = _mm512_sub_ps(r, _mm512_mul_ps(n, _mm512_set1_ps(ATTN_LN2_LO)));
    __m512 p = _mm512_set1_ps(ATTN_C7);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(ATTN_C6));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(ATTN_C5));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(ATTN_C4));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(ATTN_C3));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(ATTN_C2));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mov_ps(keep, _mm512_mul_ps(p, _mm512_castsi512_ps(e)));
}
#endif

/* r[j] = column j of the 8x8 block whose rows were r[0..7]. */
AI void transpose8(__m256 r[8])
{
    __m256 t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) { /* rows 4i..4i+3: u[4i + c] holds columns c and c + 4 */
        u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
    }
    for (int c = 0; c < 4; c++) {
        r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        r[c + 4] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
}

/* Eight halves at src as floats at dst (exact, as simd_f16_to_f32): the
 * step of the tile's runs into kvbuf (attn_tile_driver.h's tile_convert). */
#define TILE_CVT_W 8
AI void tile_cvt_vec(const simd_f16 *src, float *dst) { _mm256_storeu_ps(dst, ldh(src)); }

/* K given as rows (ktstride 0) into kvbuf transposed, eight positions by
 * eight columns at a time: kt[d*SIMD_ATTN_CHUNK + p] = k_p[d] for p < n16,
 * zeros from n on. */
static inline void tile_k_rows(const simd_attn_args *a, float *kt, size_t n16)
{
    size_t hd = a->hd, n = a->n, d8 = hd & ~(size_t)7, p = 0;
    for (; p < n; p += 8) {
        const simd_f16 *k[8]; /* rows past n are neither read nor pointed at */
        for (int j = 0; j < 8; j++)
            k[j] = p + (size_t)j < n ? a->k + (p + (size_t)j) * a->kvstride : NULL;
        for (size_t d = 0; d < d8; d += 8) {
            __m256 r[8];
            for (int j = 0; j < 8; j++)
                r[j] = k[j] ? ldh(k[j] + d) : _mm256_setzero_ps();
            transpose8(r);
            for (int j = 0; j < 8; j++)
                _mm256_storeu_ps(kt + (d + (size_t)j) * SIMD_ATTN_CHUNK + p, r[j]);
        }
        for (size_t d = d8; d < hd; d++)
            for (int j = 0; j < 8; j++)
                kt[d * SIMD_ATTN_CHUNK + p + (size_t)j] = k[j] ? simd_f16_to_f32(k[j][d]) : 0.0f;
    }
    for (; p < n16; p += 8) /* p is n rounded up to 8 here */
        for (size_t d = 0; d < hd; d++)
            _mm256_storeu_ps(kt + d * SIMD_ATTN_CHUNK + p, _mm256_setzero_ps());
}

/* Largest score, NaN passed over (max_ps(s, m) is s > m ? s : m). */
static inline float attn_max(const float *s, size_t n)
{
    __m256 mv = set1(-INFINITY);
    size_t p = 0;
    for (; p + 8 <= n; p += 8)
        mv = _mm256_max_ps(_mm256_loadu_ps(s + p), mv);
    float l[8], mx = -INFINITY;
    _mm256_storeu_ps(l, mv);
    for (int i = 0; i < 8; i++)
        if (l[i] > mx)
            mx = l[i];
    for (; p < n; p++)
        if (s[p] > mx)
            mx = s[p];
    return mx;
}

/* Rows an attn_exp_rows call takes at most (the forms' row blocks and
 * head groups). */
#define ATTN_EXP_ROWS 8
_Static_assert(ATTN_HB <= ATTN_EXP_ROWS, "attn_exp_rows takes a pass's heads at once");

/* For each of nr rows: s[i][p] = exp(s[i][p] - mx[i]) for p < n, sum[i]
 * their sum (lane p mod 8, added in increasing p, then simd_reduce8).
 * The exp is a chain of about twenty dependent steps, so one row at a
 * time left the multiply and add ports idle between its few vectors;
 * here the rows' vectors are interleaved (all rows at p before any at
 * p + 16), so their chains overlap. Each row's values and sum are
 * computed in the same order as alone: the bits do not depend on nr. */
AI void attn_exp_rows(float *const *s, int nr, size_t n, const float *mx, float *sum)
{
    __m256 acc[ATTN_EXP_ROWS];
    for (int i = 0; i < nr; i++)
        acc[i] = _mm256_setzero_ps();
    size_t p = 0;
#if defined(__AVX512F__)
    /* sixteen exps at a time; the two halves are added to the eight lanes
     * one after the other, positions p..p+7 then p+8..p+15, the order of
     * the loop below */
    for (; p + 16 <= n; p += 16)
        for (int i = 0; i < nr; i++) {
            __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(s[i] + p), _mm512_set1_ps(mx[i])));
            _mm512_storeu_ps(s[i] + p, e);
            acc[i] = _mm256_add_ps(acc[i], _mm512_castps512_ps256(e));
            acc[i] = _mm256_add_ps(acc[i], _mm256_castsi256_ps(_mm512_extracti64x4_epi64(_mm512_castps_si512(e), 1)));
        }
#endif
    for (; p + 8 <= n; p += 8)
        for (int i = 0; i < nr; i++) {
            __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s[i] + p), set1(mx[i])));
            _mm256_storeu_ps(s[i] + p, e);
            acc[i] = _mm256_add_ps(acc[i], e);
        }
    for (int i = 0; i < nr; i++) {
        if (p < n) { /* padding lanes are -inf: exp gives +0, which adds nothing */
            float tmp[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
            memcpy(tmp, s[i] + p, (n - p) * sizeof(float));
            __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(tmp), set1(mx[i])));
            _mm256_storeu_ps(tmp, e);
            memcpy(s[i] + p, tmp, (n - p) * sizeof(float));
            acc[i] = _mm256_add_ps(acc[i], e);
        }
        float l[8];
        _mm256_storeu_ps(l, acc[i]);
        sum[i] = simd_reduce8(l);
    }
}

#endif
