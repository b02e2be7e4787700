/* The attention tile (simd_attn_tile) with AVX-512 (built with -mavx512f
 * -mavx512dq; the avx512vnni set's). Bit-identical to simd_attn_ref, as
 * attn_avx2.c is, with vectors twice as wide:
 *  - scores: the reference's 8 lanes of a position (lane = d mod 8) are
 *    half a vector, so one vector holds two positions: K is converted
 *    into kvbuf with positions 2i and 2i+1 side by side, 16 floats for
 *    each 8 columns, and a query's 8 columns are broadcast to both
 *    halves; four such vectors give eight positions, whose lanes
 *    x86_reduce8x8 combines in simd_reduce8's order;
 *  - four heads go together, so each K vector is loaded once for them
 *    and each V row once for them (64 columns a pass);
 *  - the max, the exp and the sum are attn_x86.h's.
 * Lanes of a position past n hold zeros and are never stored.
 * (A layout with a position per lane, lanes l and l+4 in the halves,
 * needs no transpose but one accumulator per lane pair: at three query
 * rows by sixteen positions it loads a vector per multiply and was
 * 0.7x this form on four heads, 0.96x on seven.) */
#include "attn_x86.h"

#define HB 4 /* heads per pass */

/* K: 8-column blocks of position pairs (see above) at kf; V: rows of hd
 * floats at kf + SIMD_ATTN_CHUNK * hd. Positions n .. n rounded up to 8
 * of K are zeros. */
static void convert(const simd_attn_args *a, float *kf)
{
    size_t hd = a->hd, n = a->n, nb = hd / 8, n8 = (n + 7) & ~(size_t)7;
    float *vf = kf + SIMD_ATTN_CHUNK * hd;
    for (size_t p = 0; p < n8; p += 2) {
        /* rows past n are not read (nor pointed at) */
        const simd_f16 *k0 = p < n ? a->k + p * a->kvstride : NULL;
        const simd_f16 *k1 = p + 1 < n ? a->k + (p + 1) * a->kvstride : NULL;
        float *dst = kf + p / 2 * nb * 16;
        for (size_t b = 0; b < nb; b++, dst += 16) {
            __m128i lo = k0 ? _mm_loadu_si128((const __m128i *)(k0 + 8 * b)) : _mm_setzero_si128();
            __m128i hi = k1 ? _mm_loadu_si128((const __m128i *)(k1 + 8 * b)) : _mm_setzero_si128();
            _mm512_storeu_ps(dst, _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1)));
        }
    }
    for (size_t p = 0; p < n; p++)
        for (size_t d = 0; d < hd; d += 8)
            _mm256_storeu_ps(vf + p * hd + d, ldh(a->v + p * a->kvstride + d));
}

/* Scores of nh heads (queries q[i], scores into s[i]) for positions
 * p..p+m-1, p a multiple of 8, m <= 8. */
static inline __attribute__((always_inline)) void scores8(const float *kf, size_t hd, float scale,
                                                          const float *const *q, int nh, size_t p, int m,
                                                          float *const *s)
{
    size_t nb = hd / 8;
    const float *k = kf + p / 2 * nb * 16;
    __m512 acc[HB][4];
    for (int i = 0; i < nh; i++)
        for (int j = 0; j < 4; j++)
            acc[i][j] = _mm512_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        __m512 kv[4];
        for (int j = 0; j < 4; j++) {
            kv[j] = _mm512_loadu_ps(k + (j * nb + b) * 16);
            ATTN_KEEP(kv[j]);
        }
        for (int i = 0; i < nh; i++) {
            __m512 qv = _mm512_broadcast_f32x8(_mm256_loadu_ps(q[i] + 8 * b));
            ATTN_KEEP(qv);
            for (int j = 0; j < 4; j++)
                acc[i][j] = _mm512_add_ps(acc[i][j], _mm512_mul_ps(qv, kv[j]));
        }
    }
    for (int i = 0; i < nh; i++) {
        __m256 l[8];
        for (int j = 0; j < 4; j++) {
            l[2 * j] = _mm512_castps512_ps256(acc[i][j]);
            l[2 * j + 1] = _mm512_extractf32x8_ps(acc[i][j], 1);
        }
        __m256 sv = _mm256_mul_ps(x86_reduce8x8(l), set1(scale));
        if (m == 8) {
            _mm256_storeu_ps(s[i] + p, sv);
        } else {
            float tmp[8];
            _mm256_storeu_ps(tmp, sv);
            memcpy(s[i] + p, tmp, (size_t)m * sizeof(float));
        }
    }
}

/* The V sum of nh heads for the 16 columns from d0 (the first 8 only
 * when half), positions in order; o[i] starts at 0. */
static inline __attribute__((always_inline)) void vsum16(const float *vf, size_t hd, size_t n,
                                                         const float *const *e, int nh, size_t d0, int half,
                                                         float *const *o)
{
    __mmask16 mk = half ? 0x00ff : 0xffff;
    __m512 acc[HB];
    for (int i = 0; i < nh; i++)
        acc[i] = _mm512_setzero_ps();
    const float *v = vf + d0;
    for (size_t p = 0; p < n; p++, v += hd) {
        __m512 vv = _mm512_maskz_loadu_ps(mk, v);
        for (int i = 0; i < nh; i++)
            acc[i] = _mm512_add_ps(acc[i], _mm512_mul_ps(_mm512_set1_ps(e[i][p]), vv));
    }
    for (int i = 0; i < nh; i++)
        _mm512_mask_storeu_ps(o[i] + d0, mk, acc[i]);
}

/* The V sum of nh heads for the 16 * nc columns from d0 (nc <= 4): each
 * row's vectors are loaded once for the heads and each weight broadcast
 * once for the nc vectors. */
static inline __attribute__((always_inline)) void vsum64(const float *vf, size_t hd, size_t n,
                                                         const float *const *e, int nh, size_t d0, int nc,
                                                         float *const *o)
{
    __m512 acc[HB][4];
    for (int i = 0; i < nh; i++)
        for (int c = 0; c < nc; c++)
            acc[i][c] = _mm512_setzero_ps();
    const float *v = vf + d0;
    for (size_t p = 0; p < n; p++, v += hd) {
        __m512 vv[4];
        for (int c = 0; c < nc; c++) {
            vv[c] = _mm512_loadu_ps(v + 16 * c);
            ATTN_KEEP(vv[c]);
        }
        for (int i = 0; i < nh; i++) {
            __m512 w = _mm512_set1_ps(e[i][p]);
            ATTN_KEEP(w);
            for (int c = 0; c < nc; c++)
                acc[i][c] = _mm512_add_ps(acc[i][c], _mm512_mul_ps(w, vv[c]));
        }
    }
    for (int i = 0; i < nh; i++)
        for (int c = 0; c < nc; c++)
            _mm512_storeu_ps(o[i] + d0 + 16 * c, acc[i][c]);
}

/* nh heads from h0 of one token (queries q, rows part). */
static inline __attribute__((always_inline)) void heads(const simd_attn_args *a, const float *kf,
                                                        const float *q, float *part, size_t h0, int nh)
{
    size_t hd = a->hd, n = a->n;
    const float *vf = kf + SIMD_ATTN_CHUNK * hd, *qs[HB], *e[HB];
    float *s[HB], *o[HB];
    for (int i = 0; i < nh; i++) {
        qs[i] = q + (h0 + i) * a->qstride;
        s[i] = a->scratch + (h0 + i) * n;
        e[i] = s[i];
        o[i] = part + (h0 + i) * a->pstride + 2;
    }
    for (size_t p = 0; p < n; p += 8)
        scores8(kf, hd, a->scale, qs, nh, p, n - p < 8 ? (int)(n - p) : 8, s);
    for (int i = 0; i < nh; i++) {
        if (a->softcap > 0)
            attn_softcap(s[i], n, a->softcap);
        o[i][-2] = attn_max(s[i], n);
        o[i][-1] = attn_exp_sum(s[i], n, o[i][-2]);
    }
    size_t d = 0;
    for (; d + 64 <= hd; d += 64)
        vsum64(vf, hd, n, e, nh, d, 4, o);
    for (; d + 32 <= hd; d += 32)
        vsum64(vf, hd, n, e, nh, d, 2, o);
    for (; d < hd; d += 16)
        vsum16(vf, hd, n, e, nh, d, hd - d < 16, o);
}

void simd_attn_tile_avx512(const simd_attn_args *a, size_t nt, size_t qtstride, size_t ptstride, float *kvbuf)
{
    if (a->hd % 8) {
        simd_attn_tile_chunks(a, nt, qtstride, ptstride, kvbuf);
        return;
    }
    convert(a, kvbuf);
    for (size_t t = 0; t < nt; t++) {
        const float *q = a->q + t * qtstride;
        float *part = a->part + t * ptstride;
        size_t h = 0;
        for (; h + HB <= a->nq; h += HB)
            heads(a, kvbuf, q, part, h, HB);
        switch (a->nq - h) {
        case 3: heads(a, kvbuf, q, part, h, 3); break;
        case 2: heads(a, kvbuf, q, part, h, 2); break;
        case 1: heads(a, kvbuf, q, part, h, 1); break;
        default: break;
        }
    }
}
