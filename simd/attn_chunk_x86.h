/* Private to simd/: attention over one chunk of an f16 cache
 * (simd_attn_chunk) for the x86 sets, written once and built twice: with
 * AVX2 (attn_avx2.c, simd_attn_avx2, every x86 set's) and with AVX-512
 * (attn_chunk_avx512.c, simd_attn_avx512, the avx512vnni set's, whose V
 * sum goes 64 columns a pass on 512-bit vectors). The including file
 * defines ATTN_ENTRY, the name of the function it defines.
 * Bit-identical to simd_attn_ref: each float operation below is one the
 * reference does, on the same values, in the same order (see simd.h at
 * simd_attn, attn.h for the exp):
 *  - scores: one accumulator vector per position holds the reference's 8
 *    lanes (lane = d mod 8); eight positions at a time, their lanes are
 *    combined by a transpose whose adds are simd_reduce8's tree;
 *  - exp and the sum: eight positions per vector, position p in lane
 *    p mod 8, as the reference's lanes[p & 7];
 *  - the V sum runs over d in vectors (vertical), positions in order.
 * The loops around these (heads, tiles) are attn_driver.h's. */
#ifndef NIBBLE_ATTN_CHUNK_X86_H
#define NIBBLE_ATTN_CHUNK_X86_H

#include "attn_x86.h"

/* Scores of head q for positions p..p+m-1 (m <= 8) into s[p..]. */
AI void attn_scores(const simd_attn_args *a, const float *q, size_t p, int m, float *s)
{
    __m256 acc[8];
    const simd_f16 *k = a->k + p * a->kvstride;
    for (int j = 0; j < 8; j++)
        acc[j] = _mm256_setzero_ps();
    for (size_t d = 0; d < a->hd; d += 8) {
        __m256 qv = _mm256_loadu_ps(q + d);
        for (int j = 0; j < 8; j++)
            if (j < m)
                acc[j] = madd(acc[j], qv, ldh(k + j * a->kvstride + d));
    }
    __m256 sv = _mm256_mul_ps(x86_reduce8x8(acc), set1(a->scale));
    if (m == 8) {
        _mm256_storeu_ps(s + p, sv);
    } else {
        float tmp[8];
        _mm256_storeu_ps(tmp, sv);
        memcpy(s + p, tmp, (size_t)m * sizeof(float));
    }
}

/* The V sum of nh heads (weights e[h]) for d in [d0, d0+width), width 16 or
 * 8, and positions [p0, p1), in order, added to o[h] (from 0 when p0 is
 * 0), so tiles keep the reference's order. */
AI void attn_vsum(const simd_attn_args *a, const float *const *e, int nh, int width, size_t d0, size_t p0,
                  size_t p1, float *const *o)
{
    const int nv = width / 8;
    __m256 acc[ATTN_HB][2];
    for (int i = 0; i < nh; i++)
        for (int c = 0; c < nv; c++)
            acc[i][c] = p0 ? _mm256_loadu_ps(o[i] + d0 + 8 * c) : _mm256_setzero_ps();
    const simd_f16 *v = a->v + p0 * a->kvstride + d0;
    for (size_t p = p0; p < p1; p++, v += a->kvstride) {
        __m256 v0 = ldh(v), v1 = nv > 1 ? ldh(v + 8) : v0;
        for (int i = 0; i < nh; i++) {
            __m256 w = _mm256_broadcast_ss(e[i] + p);
            acc[i][0] = madd(acc[i][0], w, v0);
            if (nv > 1)
                acc[i][1] = madd(acc[i][1], w, v1);
        }
    }
    for (int i = 0; i < nh; i++)
        for (int c = 0; c < nv; c++)
            _mm256_storeu_ps(o[i] + d0 + 8 * c, acc[i][c]);
}


#if defined(__AVX512F__)
/* attn_vsum for 64 columns [d0, d0+64) on 512-bit vectors (the AVX-512
 * build): each lane takes the same steps in the same order, so the bits
 * are attn_vsum's, with half the multiplies and adds, and a row's 64
 * halves are converted once per pass of the heads. */
AI void attn_vsum64(const simd_attn_args *a, const float *const *e, int nh, size_t d0, size_t p0, size_t p1,
                    float *const *o)
{
    __m512 acc[ATTN_HB][4];
    for (int i = 0; i < nh; i++)
        for (int c = 0; c < 4; c++)
            acc[i][c] = p0 ? _mm512_loadu_ps(o[i] + d0 + 16 * c) : _mm512_setzero_ps();
    const simd_f16 *v = a->v + p0 * a->kvstride + d0;
    for (size_t p = p0; p < p1; p++, v += a->kvstride) {
        __m512 vv[4];
        for (int c = 0; c < 4; c++)
            vv[c] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(v + 16 * c)));
        for (int i = 0; i < nh; i++) {
            __m512 w = _mm512_set1_ps(e[i][p]);
            for (int c = 0; c < 4; c++)
                acc[i][c] = _mm512_fmadd_ps(w, vv[c], acc[i][c]);
        }
    }
    for (int i = 0; i < nh; i++)
        for (int c = 0; c < 4; c++)
            _mm512_storeu_ps(o[i] + d0 + 16 * c, acc[i][c]);
}
#endif

#if defined(__AVX512F__)
/* Scores of nh heads (queries q[i], into s[i]) for positions p..p+m-1
 * (m <= 8) on 512-bit vectors (the AVX-512 build), read from the halves
 * where they lie: a vector holds two positions' eight lanes (lane d mod
 * 8, low half position 2j, high half 2j+1) against a query's eight
 * columns in both halves, so each K row is converted once for all nh
 * heads (attn_scores converts it once per head) and each multiply and
 * add covers two positions. Every lane takes attn_scores's steps in its
 * order, and x86_reduce8x8 combines the eight positions' lanes as there:
 * the same bits. Rows past m are neither read nor stored (their lanes
 * are zeros). */
AI void attn_scores_heads(const simd_attn_args *a, const float *const *q, int nh, size_t p, int m,
                          float *const *s)
{
    __m512 acc[ATTN_HB][4];
    const simd_f16 *k = a->k + p * a->kvstride;
    for (int i = 0; i < nh; i++)
        for (int j = 0; j < 4; j++)
            acc[i][j] = _mm512_setzero_ps();
    for (size_t d = 0; d < a->hd; d += 8) {
        __m512 kv[4];
        for (int j = 0; j < 4; j++) {
            __m128i lo = 2 * j < m ? _mm_loadu_si128((const __m128i *)(k + 2 * j * a->kvstride + d))
                                   : _mm_setzero_si128();
            __m128i hi = 2 * j + 1 < m ? _mm_loadu_si128((const __m128i *)(k + (2 * j + 1) * a->kvstride + d))
                                       : _mm_setzero_si128();
            kv[j] = _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
        }
        for (int i = 0; i < nh; i++) {
            __m256d q8 = _mm256_castps_pd(_mm256_loadu_ps(q[i] + d));
            __m512 qv = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(q8), q8, 1));
            for (int j = 0; j < 4; j++)
                acc[i][j] = _mm512_fmadd_ps(qv, kv[j], acc[i][j]);
        }
    }
    for (int i = 0; i < nh; i++) {
        __m256 l[8];
        for (int j = 0; j < 4; j++) {
            l[2 * j] = _mm512_castps512_ps256(acc[i][j]);
            l[2 * j + 1] = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[i][j]), 1));
        }
        __m256 sv = _mm256_mul_ps(x86_reduce8x8(l), set1(a->scale));
        if (m == 8) {
            _mm256_storeu_ps(s[i] + p, sv);
        } else {
            float tmp[8];
            _mm256_storeu_ps(tmp, sv);
            memcpy(s[i] + p, tmp, (size_t)m * sizeof(float));
        }
    }
}
#define ATTN_SCORES_HEADS 1
#endif

#define ATTN_SB 8
#include "attn_driver.h"

#endif
