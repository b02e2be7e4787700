/* Private to simd/: attention over a q8_0/q4_0 cache (simd_attn_q_tile)
 * for the x86 sets, written once. The including file is built with its
 * set's flags and defines, before including it:
 *   ATTNQ_PREP(kv)      once per vector of K codes, before the heads use it
 *   ATTNQ_ACC(is, kv, bq)  is + each lane's four K codes times the four
 *                       query codes bq (the same in every lane)
 *   ATTNQ_FIX(is, sum)  the exact block sums from is (sum: the query
 *                       block's sum of codes)
 *                       (AVX2: |k| times sign(q, k) by maddubs + madd,
 *                       each pair sum at most 2 * 128 * 127, inside int16;
 *                       VNNI: dpbusd of k + 128, unsigned, against q,
 *                       then 128 * sum taken off)
 *   ATTNQ_ENTRY         the name of the function it defines (attn_q_driver.h).
 * Bit-identical to simd_attn_q_ref:
 *  - scores: eight positions at a time, one per lane, four heads at a
 *    time (each K vector loaded once for them); a block's integer dot is
 *    exact however it is summed, then each lane takes the reference's
 *    float steps, (float)isum * (dk * dq) added block by block, then the
 *    scale;
 *  - max, exp and sum: attn_x86.h's, as for the f16 cache;
 *  - the V sum: columns 16 at a time (64 on AVX-512), positions in
 *    order, over V's values as floats (unpacked once a chunk, each
 *    block's codes by vector steps that give the reference's bytes). */
#ifndef NIBBLE_ATTN_Q_X86_H
#define NIBBLE_ATTN_Q_X86_H

#include <immintrin.h>

#include "attn.h"
#include "attn_q_codes_x86.h"

static inline __attribute__((always_inline)) void attnq_x86_store_codes(int type, const void *blk, int8_t *c)
{
    _mm256_storeu_si256((__m256i *)c, attnq_x86_codes(type, blk));
}

/* d * code for the 32 codes, 8 at a time (each product exact) */
static inline __attribute__((always_inline)) void attnq_x86_values(int type, const void *blk, float d, float *y)
{
    __m256 v[4];
    attnq_x86_floats(type, blk, d, v);
    for (int i = 0; i < 4; i++)
        _mm256_storeu_ps(y + 8 * i, v[i]);
}

#define ATTNQ_H2F(h) _cvtsh_ss(h)
#define ATTNQ_CODES attnq_x86_store_codes
#define ATTNQ_VALUES attnq_x86_values
#include "attn_q.h"
#include "attn_x86.h"

/* Scores of nh heads (query blocks q[h], scores into s[h]) for positions
 * p..p+m-1 (p a multiple of 8, m <= 8), from K interleaved (attnq_koff):
 * each 32-byte group holds four codes of eight positions, one position
 * a lane, so each step is one vector of dot products against the query's
 * four codes broadcast, and a block's eight steps leave each lane its
 * position's exact integer sum. Lanes past m are never stored. */
AI void q_scores(const attnq_buf *b, size_t hd, const simd_block_q8a *const *q, int nh, size_t p, int m,
                 float scale, float *const *s)
{
    __m256 acc[ATTN_HB];
    for (int h = 0; h < nh; h++)
        acc[h] = _mm256_setzero_ps();
    for (size_t i = 0; i < hd / 32; i++) {
        const int8_t *k = b->kc + attnq_koff(1, hd, p, i, 0);
        __m256i is[ATTN_HB];
        for (int h = 0; h < nh; h++)
            is[h] = _mm256_setzero_si256();
        for (int g = 0; g < 8; g++) {
            __m256i kv = _mm256_loadu_si256((const __m256i *)(k + 32 * g));
            ATTNQ_PREP(kv);
            ATTN_KEEP(kv);
            for (int h = 0; h < nh; h++) {
                int32_t qw;
                memcpy(&qw, q[h][i].qs + 4 * g, 4);
                is[h] = ATTNQ_ACC(is[h], kv, _mm256_set1_epi32(qw));
            }
        }
        __m256 kd = _mm256_loadu_ps(b->kd + i * SIMD_ATTN_CHUNK + p);
        for (int h = 0; h < nh; h++) {
            __m256 f = _mm256_mul_ps(kd, set1(q[h][i].d));
            __m256i t = ATTNQ_FIX(is[h], q[h][i].sum);
            acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t), f, acc[h]);
        }
    }
    for (int h = 0; h < nh; h++) {
        __m256 sv = _mm256_mul_ps(acc[h], set1(scale));
        if (m == 8) {
            _mm256_storeu_ps(s[h] + p, sv);
        } else {
            float tmp[8];
            _mm256_storeu_ps(tmp, sv);
            memcpy(s[h] + p, tmp, (size_t)m * sizeof(float));
        }
    }
}

#if defined(__AVX512VNNI__)
/* q_scores for sixteen positions p..p+m-1 (p a multiple of 16, m <= 16)
 * on 512-bit vectors (the avx512vnni build): the 32 bytes of positions
 * p..p+7 and those of p+8..p+15 (attnq_koff: 256 bytes on) are the two
 * halves of one vector, so each vpdpbusd covers sixteen positions, and
 * every lane takes q_scores's integer and float steps: the same bits.
 * Lanes past m are never stored. */
AI void q_scores16(const attnq_buf *b, size_t hd, const simd_block_q8a *const *q, int nh, size_t p, int m,
                   float scale, float *const *s)
{
    __m512 acc[ATTN_HB];
    for (int h = 0; h < nh; h++)
        acc[h] = _mm512_setzero_ps();
    for (size_t i = 0; i < hd / 32; i++) {
        const int8_t *k = b->kc + attnq_koff(1, hd, p, i, 0);
        __m512i is[ATTN_HB];
        for (int h = 0; h < nh; h++)
            is[h] = _mm512_setzero_si512();
        for (int g = 0; g < 8; g++) {
            __m256i lo = _mm256_loadu_si256((const __m256i *)(k + 32 * g));
            __m256i hi = _mm256_loadu_si256((const __m256i *)(k + 256 + 32 * g));
            __m512i kv = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1),
                                          _mm512_set1_epi8(-128));
            ATTN_KEEP(kv);
            for (int h = 0; h < nh; h++) {
                int32_t qw;
                memcpy(&qw, q[h][i].qs + 4 * g, 4);
                is[h] = _mm512_dpbusd_epi32(is[h], kv, _mm512_set1_epi32(qw));
            }
        }
        __m512 kd = _mm512_loadu_ps(b->kd + i * SIMD_ATTN_CHUNK + p);
        for (int h = 0; h < nh; h++) {
            __m512 f = _mm512_mul_ps(kd, _mm512_set1_ps(q[h][i].d));
            __m512i t = _mm512_sub_epi32(is[h], _mm512_set1_epi32(128 * q[h][i].sum));
            acc[h] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), f, acc[h]);
        }
    }
    __mmask16 mk = (__mmask16)(m >= 16 ? 0xffff : (1u << m) - 1);
    for (int h = 0; h < nh; h++)
        _mm512_mask_storeu_ps(s[h] + p, mk, _mm512_mul_ps(acc[h], _mm512_set1_ps(scale)));
}
#endif

/* The V sum of nh heads (weights e[h]) for columns d0..d0+15, positions
 * 0..n-1 in order, into o[h] (from 0). */
AI void q_vsum(const attnq_buf *b, size_t hd, size_t n, const float *const *e, int nh, size_t d0, float *const *o)
{
    __m256 acc[ATTN_HB][2];
    for (int h = 0; h < nh; h++)
        acc[h][0] = acc[h][1] = _mm256_setzero_ps();
    const float *vf = b->vf + d0;
    for (size_t p = 0; p < n; p++, vf += hd) {
        __m256 v0 = _mm256_loadu_ps(vf), v1 = _mm256_loadu_ps(vf + 8);
        ATTN_KEEP(v0);
        ATTN_KEEP(v1);
        for (int h = 0; h < nh; h++) {
            __m256 w = _mm256_broadcast_ss(e[h] + p);
            ATTN_KEEP(w);
            acc[h][0] = madd(acc[h][0], w, v0);
            acc[h][1] = madd(acc[h][1], w, v1);
        }
    }
    for (int h = 0; h < nh; h++) {
        _mm256_storeu_ps(o[h] + d0, acc[h][0]);
        _mm256_storeu_ps(o[h] + d0 + 8, acc[h][1]);
    }
}

#if defined(__AVX512F__)
/* q_vsum on 512-bit vectors (the avx512vnni set's build), columns d0 ..
 * d0+16*nc-1, a vector of 16 each: each lane takes the same steps in the
 * same order, so the bits are q_vsum's; a row of 64 columns is read once
 * per pass of the heads, for half the multiplies and adds. */
AI void q_vsum512(const attnq_buf *b, size_t hd, size_t n, const float *const *e, int nh, size_t d0, int nc,
                  float *const *o)
{
    __m512 acc[ATTN_HB][4];
    for (int h = 0; h < nh; h++)
        for (int c = 0; c < nc; c++)
            acc[h][c] = _mm512_setzero_ps();
    const float *vf = b->vf + d0;
    for (size_t p = 0; p < n; p++, vf += hd) {
        __m512 v[4];
        for (int c = 0; c < nc; c++) {
            v[c] = _mm512_loadu_ps(vf + 16 * c);
            ATTN_KEEP(v[c]);
        }
        for (int h = 0; h < nh; h++) {
            __m512 w = _mm512_set1_ps(e[h][p]);
            ATTN_KEEP(w);
            for (int c = 0; c < nc; c++)
                acc[h][c] = _mm512_fmadd_ps(w, v[c], acc[h][c]);
        }
    }
    for (int h = 0; h < nh; h++)
        for (int c = 0; c < nc; c++)
            _mm512_storeu_ps(o[h] + d0 + 16 * c, acc[h][c]);
}
#endif

/* nh heads from h0 of one token (query blocks qt, rows part). */
AI void q_heads(const simd_attn_q_args *a, const attnq_buf *b, const simd_block_q8a *qt, float *part, size_t h0,
                int nh)
{
    size_t hd = a->hd, n = a->n;
    const simd_block_q8a *q[ATTN_HB];
    const float *e[ATTN_HB];
    float *o[ATTN_HB], *s[ATTN_HB];
    for (int i = 0; i < nh; i++) {
        s[i] = a->scratch + (h0 + i) * n;
        q[i] = qt + (h0 + i) * a->qstride;
    }
#if defined(__AVX512VNNI__)
    for (size_t p = 0; p < n; p += 16)
        q_scores16(b, hd, q, nh, p, n - p < 16 ? (int)(n - p) : 16, a->scale, s);
#else
    for (size_t p = 0; p < n; p += 8)
        q_scores(b, hd, q, nh, p, n - p < 8 ? (int)(n - p) : 8, a->scale, s);
#endif
    float mx[ATTN_HB], sum[ATTN_HB];
    for (int i = 0; i < nh; i++) {
        if (a->softcap > 0)
            attn_softcap(s[i], n, a->softcap);
        o[i] = part + (h0 + i) * a->pstride + 2;
        o[i][-2] = mx[i] = attn_max(s[i], n);
        e[i] = s[i];
    }
    attn_exp_rows(s, nh, n, mx, sum);
    for (int i = 0; i < nh; i++)
        o[i][-1] = sum[i];
#if defined(__AVX512F__)
    size_t d = 0;
    for (; d + 64 <= hd; d += 64)
        q_vsum512(b, hd, n, e, nh, d, 4, o);
    for (; d < hd; d += 16)
        q_vsum512(b, hd, n, e, nh, d, 1, o);
#else
    for (size_t d = 0; d < hd; d += 16)
        q_vsum(b, hd, n, e, nh, d, o);
#endif
}

#define ATTNQ_KT 1 /* K interleaved: q_scores16 and q_scores read it so */
#include "attn_q_driver.h"

#endif
