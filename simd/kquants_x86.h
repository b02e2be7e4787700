/* K-quant dots (q4_k, q5_k, q6_k against q8k activations) for the x86
 * kernel sets. Each kernels_<set>.c includes this once, last, under its
 * own ISA flags (AVX2 + F16C at least), after defining
 *
 *   NBK_SET_FN   the name of the function that puts these kernels into a
 *                simd_kernel_set (declared in kquants.h, called by
 *                dispatch.c after the set's own filler);
 *   NBK_DPBSSD   optional: a function (acc, a, b) -> acc + vpdpbssd(a, b),
 *                for the avxvnniint8 set.
 *
 * The integer product of 32 code bytes (unsigned, 0..63) with 32
 * activation bytes (|a| <= 127) is picked from the compiler's target:
 * EVEX vpdpbusd under AVX-512 VNNI + VL, VEX vpdpbusd under AVX-VNNI,
 * vpdpbssd when NBK_DPBSSD is given (codes 0..63 are valid s8), else
 * vpmaddubsw + vpmaddwd. Each leaves int32 lane i = the sum of the
 * products of bytes 4i..4i+3, so a 128-bit half holds the sum of its
 * 16 values (q6_k's 16-value sub-blocks rely on that).
 *
 * The row driver (kquants_rows.h) is shared with the Arm sets; this file
 * gives it the block expansion and integer sums.
 *
 * Bit-identity with kquants.c: every integer sum is exact (the bounds are
 * noted where they are formed), and the float work per super-block is the
 * reference's expression, written the same way in plain scalar C,
 *     acc[b & 7] += (d_w * d_a) * (float)sumi [- (dmin_w * d_a) * (float)summ]
 * with lanes combined by simd_reduce8. The project builds with
 * -ffp-contract=off, so no FMA is formed. f16 scales are widened with
 * vcvtph2ps, which is exact. */
#ifndef NIBBLE_KQUANTS_X86_H
#define NIBBLE_KQUANTS_X86_H

#include "kquants.h"

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#define NBK_INLINE static inline __attribute__((always_inline))
/* tokens that share one expansion of a weight super-block */
#define NBK_MAXT 4
/* rows per tile when the tokens take several passes over them */
#define NBK_ROW_TILE 16

NBK_INLINE __m256i nbk_dot(__m256i u, __m256i s)
{
#if defined(NBK_DPBSSD)
    return NBK_DPBSSD(_mm256_setzero_si256(), u, s);
#elif defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#elif defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
#else
    /* pairs to int16: at most 2*63*127 = 16002, no saturation */
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

NBK_INLINE float nbk_h2f(simd_f16 h) { return _cvtsh_ss(h); }

/* The totals of a and b (each 8 int32). */
NBK_INLINE void nbk_hsum2(__m256i a, __m256i b, int32_t *ra, int32_t *rb)
{
    __m256i h = _mm256_hadd_epi32(a, b); /* a01 a23 b01 b23 | a45 a67 b45 b67 */
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    s = _mm_hadd_epi32(s, s);
    *ra = _mm_cvtsi128_si32(s);
    *rb = _mm_extract_epi32(s, 1);
}

/* Four vectors to one: lane c (c < 4) is the total of v[c]'s low 128-bit
 * half, lane 4+c that of its high half. */
NBK_INLINE __m256i nbk_fold4(__m256i v0, __m256i v1, __m256i v2, __m256i v3)
{
    return _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
}

/* Eight vectors to one: lane j is the total of v[j]. */
NBK_INLINE __m256i nbk_fold8(const __m256i v[8])
{
    __m256i a = nbk_fold4(v[0], v[1], v[2], v[3]), b = nbk_fold4(v[4], v[5], v[6], v[7]);
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

NBK_INLINE __m256i nbk_load(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* A super-block's codes, 32 per vector: q4_k/q5_k sub-block j in v[j],
 * q6_k values 32g .. 32g+31 in v[g]. */
typedef struct {
    __m256i v[8];
} nbk_codes;

/* ---- q4_k / q5_k: 8 sub-blocks of 32, six-bit scales and mins ---- */

/* The packed scales (see simd_block_q4_k) as sc[0..7] in the int32 lanes
 * of *sc, and the mins as 16 int16 m0 m0 m1 m1 ... m7 m7 in *mm (the
 * pairing of q8k's 16-value bsums). */
NBK_INLINE void nbk_scales_mins(const uint8_t packed[12], __m256i *sc, __m256i *mm)
{
    uint32_t u[3];
    memcpy(u, packed, 12);
    uint32_t s_lo = u[0] & 0x3f3f3f3fu, m_lo = u[1] & 0x3f3f3f3fu;
    uint32_t s_hi = (u[2] & 0x0f0f0f0fu) | ((u[0] >> 6) & 0x03030303u) << 4;
    uint32_t m_hi = ((u[2] >> 4) & 0x0f0f0f0fu) | ((u[1] >> 6) & 0x03030303u) << 4;
    *sc = _mm256_cvtepu8_epi32(_mm_setr_epi32((int)s_lo, (int)s_hi, 0, 0));
    __m128i m = _mm_cvtepu8_epi16(_mm_setr_epi32((int)m_lo, (int)m_hi, 0, 0));
    *mm = _mm256_set_m128i(_mm_unpackhi_epi16(m, m), _mm_unpacklo_epi16(m, m));
}

/* Codes of sub-block j in w[j], in activation order (sub-blocks 2p and
 * 2p+1 are the low and high nibbles of qs[32p .. 32p+31]); q5_k adds bit
 * j of each qh byte as the 5th bit. */
NBK_INLINE void nbk_expand_q45(int five, const uint8_t *qs, const uint8_t *qh, __m256i w[8])
{
    const __m256i lo4 = _mm256_set1_epi8(0x0f);
    __m256i h = five ? nbk_load(qh) : _mm256_setzero_si256();
    for (int p = 0; p < 4; p++) {
        __m256i q = nbk_load(qs + 32 * p);
        w[2 * p] = _mm256_and_si256(q, lo4);
        w[2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), lo4);
        if (five) {
            /* bit k of every byte to 0x10: equal-to-mask compare */
            for (int s = 0; s < 2; s++) {
                const __m256i bit = _mm256_set1_epi8((char)(1 << (2 * p + s)));
                __m256i on = _mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit);
                w[2 * p + s] = _mm256_or_si256(w[2 * p + s], _mm256_and_si256(on, _mm256_set1_epi8(0x10)));
            }
        }
    }
}

typedef struct {
    __m256i sc, mm; /* as nbk_scales_mins leaves them */
} nbk_q45_scales;

NBK_INLINE void nbk_q45_prep(int five, const uint8_t scales[12], const uint8_t *qs, const uint8_t *qh, nbk_codes *w,
                             nbk_q45_scales *s)
{
    nbk_scales_mins(scales, &s->sc, &s->mm);
    nbk_expand_q45(five, qs, qh, w->v);
}

/* sumi = sum_j sc_j * (codes_j . a_j) and summ = sum_j m_j * (a's sum over
 * sub-block j) for one token. Bounds: a sub-block's dot is at most
 * 32*31*127 = 125984, times 63, times 8 < 2^31; summ <= 8*63*32*127. */
NBK_INLINE void nbk_q45_sums(const nbk_codes *w, const nbk_q45_scales *sc, const simd_block_q8k *y, int32_t *sumi,
                             int32_t *summ)
{
    __m256i v[8];
    for (int j = 0; j < 8; j++)
        v[j] = nbk_dot(w->v[j], nbk_load(y->qs + 32 * j));
    __m256i s = _mm256_mullo_epi32(nbk_fold8(v), sc->sc);
    __m256i m = _mm256_madd_epi16(nbk_load(y->bsums), sc->mm);
    nbk_hsum2(s, m, sumi, summ);
}

/* ---- q6_k: 16 sub-blocks of 16, int8 scales, codes 0..63 mean q-32 ---- */

/* Codes of values 32g .. 32g+31 in w[g] (g = 4h + k, see q6_level in
 * kquants.c: low nibbles of ql[64h + 32(k&1) + l], low for k < 2, high
 * for k >= 2; top bits 2k, 2k+1 of qh[32h + l]). */
NBK_INLINE void nbk_expand_q6(const simd_block_q6_k *x, __m256i w[8])
{
    const __m256i lo4 = _mm256_set1_epi8(0x0f), b45 = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; h++) {
        __m256i l0 = nbk_load(x->ql + 64 * h), l1 = nbk_load(x->ql + 64 * h + 32);
        __m256i hb = nbk_load(x->qh + 32 * h);
        /* 16-bit shifts move bits only within their byte once masked */
        w[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(l0, lo4),
                                       _mm256_slli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(0x03)), 4));
        w[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, lo4),
                                       _mm256_slli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(0x0c)), 2));
        w[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), lo4), _mm256_and_si256(hb, b45));
        w[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), lo4),
                                       _mm256_and_si256(_mm256_srli_epi16(hb, 2), b45));
    }
}

/* The 16 scales laid out as nbk_fold4 leaves the sub-block sums of four
 * vectors (sub-blocks 2g in the low half, 2g+1 in the high half):
 * *sx = sc0 sc2 sc4 sc6 sc1 sc3 sc5 sc7, *sy = the same for 8..15; and
 * *s16 = sc0..sc15 as int16 for the bias term. */
NBK_INLINE void nbk_scales_q6(const int8_t scales[16], __m256i *sx, __m256i *sy, __m256i *s16)
{
    __m128i s = _mm_loadu_si128((const __m128i *)scales);
    __m128i o = _mm_shuffle_epi8(s, _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15));
    *sx = _mm256_cvtepi8_epi32(o);
    *sy = _mm256_cvtepi8_epi32(_mm_srli_si128(o, 8));
    *s16 = _mm256_cvtepi8_epi16(s);
}

typedef struct {
    __m256i sx, sy, s16; /* as nbk_scales_q6 leaves them */
} nbk_q6_scales;

NBK_INLINE void nbk_q6_prep(const simd_block_q6_k *x, nbk_codes *w, nbk_q6_scales *s)
{
    nbk_expand_q6(x, w->v);
    nbk_scales_q6(x->scales, &s->sx, &s->sy, &s->s16);
}

/* sumi = sum_j sc_j * sum((q-32) * a) over sub-block j, as
 * sum_j sc_j * (q . a)_j - 32 * sum_j sc_j * bsum_j. Bounds: (q . a)_j <=
 * 16*63*127, times 128, times 16 < 2^31, and so is the bias. */
NBK_INLINE int32_t nbk_q6_sum(const nbk_codes *w, const nbk_q6_scales *sc, const simd_block_q8k *y)
{
    __m256i v[8];
    for (int g = 0; g < 8; g++)
        v[g] = nbk_dot(w->v[g], nbk_load(y->qs + 32 * g));
    __m256i s = _mm256_add_epi32(_mm256_mullo_epi32(nbk_fold4(v[0], v[1], v[2], v[3]), sc->sx),
                                 _mm256_mullo_epi32(nbk_fold4(v[4], v[5], v[6], v[7]), sc->sy));
    __m256i bias = _mm256_madd_epi16(nbk_load(y->bsums), sc->s16);
    int32_t a, b;
    nbk_hsum2(s, bias, &a, &b);
    return a - 32 * b;
}

#include "kquants_rows.h"

#include "kquants_packed_x86.h"

void NBK_SET_FN(simd_kernel_set *s)
{
    nbk_set_dots(s);
    s->dot_packed[SIMD_Q4_K] = nkp_packed_q4_k;
    s->dot_packed[SIMD_Q5_K] = nkp_packed_q5_k;
    s->dot_packed[SIMD_Q6_K] = nkp_packed_q6_k;
}

#endif
