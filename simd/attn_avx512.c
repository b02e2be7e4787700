/* The attention tile (simd_attn_tile) with AVX-512 (built with -mavx512f
 * -mavx512dq; the avx512vnni set's). Bit-identical to simd_attn_ref, as
 * attn_avx2.c is, with vectors twice as wide:
 *  - scores: K is converted into kvbuf (convert) so that one vector holds
 *    the reference's lanes l and l+4 (lane = d mod 8) of eight positions,
 *    one position a lane; a query row is expanded to match (expand_q), so
 *    the lanes of a position are summed in their own vector lanes in the
 *    reference's order, and simd_reduce8's tree ends in half-vector adds,
 *    with no transpose; sixteen positions by three query rows a pass, so
 *    each K vector is loaded once for the three, each query vector once
 *    for the sixteen positions;
 *  - four heads go together in the V sum, so each V row is loaded once
 *    for them, 64 columns a pass;
 *  - the max, the exp and the sum are attn_x86.h's.
 * Lanes of a position past n hold zeros and are never stored. */
#include "attn_x86.h"

#define HB 4 /* heads per pass */

/* K: for each eight positions g, 8-column block b and l = 0..3, 16
 * floats at kf + ((g * nb + b) * 4 + l) * 16: column 8b+l of positions
 * 8g..8g+7, then column 8b+l+4 of the same positions (the reference's
 * lanes l and l+4 of each). Positions n .. n rounded up to 16 are zeros.
 * V: rows of hd floats at kf + SIMD_ATTN_CHUNK * hd. */
static void convert(const simd_attn_args *a, float *kf)
{
    size_t hd = a->hd, n = a->n, nb = hd / 8, n16 = (n + 15) & ~(size_t)15;
    float *vf = kf + SIMD_ATTN_CHUNK * hd;
    for (size_t p = 0; p < n16; p++) {
        const simd_f16 *k = a->k + p * a->kvstride;
        float *dst = kf + p / 8 * nb * 64 + p % 8;
        for (size_t b = 0; b < nb; b++, dst += 64) {
            float t[8] = {0};
            if (p < n) /* rows past n are not read */
                _mm256_storeu_ps(t, ldh(k + 8 * b));
            for (int r = 0; r < 8; r++)
                dst[(r & 3) * 16 + (r >> 2) * 8] = t[r];
        }
    }
    for (size_t p = 0; p < n; p++)
        for (size_t d = 0; d < hd; d += 8)
            _mm256_storeu_ps(vf + p * hd + d, ldh(a->v + p * a->kvstride + d));
}

/* A query row for scores16: for each 8-column block b and l = 0..3, 16
 * floats: q[8b+l] eight times, then q[8b+l+4] eight times (hd * 2). */
#define QX_MAX 512 /* hd up to this; larger goes by simd_attn_tile_chunks */
static inline void expand_q(const float *q, size_t hd, float *qx)
{
    for (size_t b = 0; b < hd / 8; b++)
        for (int l = 0; l < 4; l++) {
            __m256 lo = _mm256_set1_ps(q[8 * b + (size_t)l]), hi = _mm256_set1_ps(q[8 * b + (size_t)l + 4]);
            _mm512_storeu_ps(qx + (b * 4 + (size_t)l) * 16,
                             _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1));
        }
}

/* Scores of nr query rows (expanded, qx[i]; into s[i]) for positions
 * p..p+m-1, p a multiple of 16, m <= 16. acc[i][g][l] holds the
 * reference's lane l (low half) and lane l+4 (high half) of the eight
 * positions of group g, a position a lane, each summed over the blocks
 * in the reference's order; simd_reduce8's tree is then
 * (a0 + a4) = low + high of acc[.][.][0], and so on, then
 * ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)) as 8-lane adds, then
 * the scale. Each K vector is loaded once for the nr rows. Lanes past m
 * are never stored. */
#define SR 3 /* query rows per pass: 24 accumulators */
static inline __attribute__((always_inline)) void scores16(const float *kf, size_t hd, float scale,
                                                           const float *const *qx, int nr, size_t p, int m,
                                                           float *const *s)
{
    size_t nb = hd / 8;
    const float *k0 = kf + p / 8 * nb * 64, *k1 = k0 + nb * 64;
    __m512 acc[SR][2][4];
    for (int i = 0; i < nr; i++)
        for (int l = 0; l < 4; l++)
            acc[i][0][l] = acc[i][1][l] = _mm512_setzero_ps();
    for (size_t b = 0; b < nb; b++)
        for (int l = 0; l < 4; l++) {
            size_t o = (b * 4 + (size_t)l) * 16;
            __m512 kv0 = _mm512_loadu_ps(k0 + o), kv1 = _mm512_loadu_ps(k1 + o);
            ATTN_KEEP(kv0);
            ATTN_KEEP(kv1);
            for (int i = 0; i < nr; i++) {
                __m512 qv = _mm512_loadu_ps(qx[i] + o);
                ATTN_KEEP(qv);
                acc[i][0][l] = _mm512_add_ps(acc[i][0][l], _mm512_mul_ps(qv, kv0));
                acc[i][1][l] = _mm512_add_ps(acc[i][1][l], _mm512_mul_ps(qv, kv1));
            }
        }
    for (int i = 0; i < nr; i++)
        for (int g = 0; g < 2; g++) {
            int mg = m - 8 * g;
            if (mg <= 0)
                break;
            __m256 x[4];
            for (int l = 0; l < 4; l++)
                x[l] = _mm256_add_ps(_mm512_castps512_ps256(acc[i][g][l]), _mm512_extractf32x8_ps(acc[i][g][l], 1));
            __m256 r = _mm256_add_ps(_mm256_add_ps(x[0], x[2]), _mm256_add_ps(x[1], x[3]));
            r = _mm256_mul_ps(r, set1(scale));
            float *dst = s[i] + p + 8 * g;
            if (mg >= 8) {
                _mm256_storeu_ps(dst, r);
            } else {
                float tmp[8];
                _mm256_storeu_ps(tmp, r);
                memcpy(dst, tmp, (size_t)mg * sizeof(float));
            }
        }
}

/* scores16 for nh (<= HB) heads, SR at a time, positions [0, n) */
static inline __attribute__((always_inline)) void scores(const float *kf, size_t hd, size_t n, float scale,
                                                         const float *const *qx, int nh, float *const *s)
{
    for (size_t p = 0; p < n; p += 16) {
        int m = n - p < 16 ? (int)(n - p) : 16, i = 0;
        for (; i + SR <= nh; i += SR)
            scores16(kf, hd, scale, qx + i, SR, p, m, s + i);
        switch (nh - i) {
        case 2: scores16(kf, hd, scale, qx + i, 2, p, m, s + i); break;
        case 1: scores16(kf, hd, scale, qx + i, 1, p, m, s + i); break;
        default: break;
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
    float qx[HB][2 * QX_MAX];
    const float *qxs[HB];
    for (int i = 0; i < nh; i++) {
        expand_q(qs[i], hd, qx[i]);
        qxs[i] = qx[i];
    }
    scores(kf, hd, n, a->scale, qxs, nh, s);
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
    if (a->hd % 8 || a->hd > QX_MAX) {
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
