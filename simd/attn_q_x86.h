/* Private to simd/: attention over a q8_0/q4_0 cache (simd_attn_q_tile)
 * for the x86 sets, written once. The including file is built with its
 * set's flags and defines, before including it:
 *   ATTNQ_DOT(ak, sq)   eight int32 sums of four u8*s8 products each
 *                       (maddubs + madd on AVX2; dpbusd with VNNI)
 *   ATTNQ_ENTRY         the name of the function it defines.
 * Bit-identical to simd_attn_q_ref:
 *  - scores: eight positions at a time, one per lane. A block's integer
 *    dot is exact however it is summed (|k| * sign(q, k): each pair sum
 *    is at most 2 * 128 * 127, inside maddubs's int16); the eight
 *    positions' sums are gathered by horizontal adds, then each lane
 *    takes the reference's float steps, (float)isum * (dk * dq) added
 *    block by block, then the scale;
 *  - max, exp and sum: attn_x86.h's, as for the f16 cache;
 *  - the V sum: columns 16 at a time, positions in order, over V's
 *    values as floats (unpacked once a chunk). */
#ifndef NIBBLE_ATTN_Q_X86_H
#define NIBBLE_ATTN_Q_X86_H

#include <immintrin.h>

#define ATTNQ_H2F(h) _cvtsh_ss(h)
#include "attn_q.h"
#include "attn_x86.h"

/* eight int32 partial sums of the 32 products q[j]*k[j] */
AI __m256i qdot32(__m256i q, __m256i k)
{
    return ATTNQ_DOT(_mm256_sign_epi8(k, k), _mm256_sign_epi8(q, k));
}

/* lane j = the sum of v[j]'s eight lanes (integer adds: exact) */
AI __m256i hsum8x8(const __m256i *v)
{
    __m256i a = _mm256_hadd_epi32(v[0], v[1]), b = _mm256_hadd_epi32(v[2], v[3]);
    __m256i c = _mm256_hadd_epi32(v[4], v[5]), d = _mm256_hadd_epi32(v[6], v[7]);
    __m256i ab = _mm256_hadd_epi32(a, b), cd = _mm256_hadd_epi32(c, d);
    return _mm256_add_epi32(_mm256_permute2x128_si256(ab, cd, 0x20), _mm256_permute2x128_si256(ab, cd, 0x31));
}

/* Scores of query blocks q for positions p..p+m-1 (p a multiple of 8, m <= 8) into s[p..]. */
AI void q_scores(const attnq_buf *b, size_t hd, const simd_block_q8a *q, size_t p, int m, float scale, float *s)
{
    __m256 acc = _mm256_setzero_ps();
    for (size_t i = 0; i < hd / 32; i++) {
        __m256i qv = _mm256_loadu_si256((const __m256i *)q[i].qs), v[8];
        const int8_t *k = b->kc + p * hd + 32 * i;
        for (int j = 0; j < 8; j++)
            v[j] = j < m ? qdot32(qv, _mm256_loadu_si256((const __m256i *)(k + j * hd))) : _mm256_setzero_si256();
        __m256 f = _mm256_mul_ps(_mm256_loadu_ps(b->kd + i * SIMD_ATTN_CHUNK + p), set1(q[i].d));
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(hsum8x8(v)), f));
    }
    __m256 sv = _mm256_mul_ps(acc, set1(scale));
    if (m == 8) {
        _mm256_storeu_ps(s + p, sv);
    } else {
        float tmp[8];
        _mm256_storeu_ps(tmp, sv);
        memcpy(s + p, tmp, (size_t)m * sizeof(float));
    }
}

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
        for (int h = 0; h < nh; h++) {
            __m256 w = _mm256_broadcast_ss(e[h] + p);
            acc[h][0] = madd(acc[h][0], w, v0);
            acc[h][1] = madd(acc[h][1], w, v1);
        }
    }
    for (int h = 0; h < nh; h++) {
        _mm256_storeu_ps(o[h] + d0, acc[h][0]);
        _mm256_storeu_ps(o[h] + d0 + 8, acc[h][1]);
    }
}

/* nh heads from h0 of one token (query blocks qt, rows part). */
AI void q_heads(const simd_attn_q_args *a, const attnq_buf *b, const simd_block_q8a *qt, float *part, size_t h0,
                int nh)
{
    size_t hd = a->hd, n = a->n;
    const float *e[ATTN_HB];
    float *o[ATTN_HB];
    for (int i = 0; i < nh; i++) {
        float *s = a->scratch + (h0 + i) * n;
        const simd_block_q8a *q = qt + (h0 + i) * a->qstride;
        for (size_t p = 0; p < n; p += 8)
            q_scores(b, hd, q, p, n - p < 8 ? (int)(n - p) : 8, a->scale, s);
        if (a->softcap > 0)
            attn_softcap(s, n, a->softcap);
        o[i] = part + (h0 + i) * a->pstride + 2;
        o[i][-2] = attn_max(s, n);
        o[i][-1] = attn_exp_sum(s, n, o[i][-2]);
        e[i] = s;
    }
    for (size_t d = 0; d < hd; d += 16)
        q_vsum(b, hd, n, e, nh, d, o);
}

void ATTNQ_ENTRY(const simd_attn_q_args *a, size_t nt, size_t qtstride, size_t ptstride)
{
    attnq_buf b = attnq_unpack_chunk(a);
    for (size_t t = 0; t < nt; t++) {
        const simd_block_q8a *qt = a->q + t * qtstride;
        float *part = a->part + t * ptstride;
        size_t h = 0;
        for (; h + ATTN_HB <= a->nq; h += ATTN_HB)
            q_heads(a, &b, qt, part, h, ATTN_HB);
        /* the rest with a constant head count, so each form is unrolled */
        switch (a->nq - h) {
        case 3: q_heads(a, &b, qt, part, h, 3); break;
        case 2: q_heads(a, &b, qt, part, h, 2); break;
        case 1: q_heads(a, &b, qt, part, h, 1); break;
        default: break;
        }
    }
}

#endif
