/* Attention with AVX2 (built with -mavx2 -mfma -mf16c; used by every x86
 * set, since all of them have AVX2): the chunk (attn_chunk_x86.h's form)
 * and the tile below, bit-identical to simd_attn_ref. */
#define ATTN_ENTRY simd_attn_avx2
#include "attn_chunk_x86.h"

/* ---- the tile (simd_attn_tile): K and V converted to float once, in
 * kvbuf as rows of hd floats, then every token's heads over them with
 * the operations above (a float load gives the same values as ldh of the
 * half it came from) ---- */

/* simd_attn_tile's K and V rows as floats: K at kf, V at kf + n*hd. */
static void tile_convert(const simd_attn_args *a, float *kf)
{
    size_t hd = a->hd, n = a->n;
    float *vf = kf + n * hd;
    for (size_t p = 0; p < n; p++)
        for (size_t d = 0; d < hd; d += 8) {
            _mm256_storeu_ps(kf + p * hd + d, ldh(a->k + p * a->kvstride + d));
            _mm256_storeu_ps(vf + p * hd + d, ldh(a->v + p * a->kvstride + d));
        }
}

/* Scores of head q for positions p..p+m-1 (m <= 8) from float rows. */
AI void tile_scores(const float *kf, size_t hd, float scale, const float *q, size_t p, int m, float *s)
{
    __m256 acc[8];
    const float *k = kf + p * hd;
    for (int j = 0; j < 8; j++)
        acc[j] = _mm256_setzero_ps();
    for (size_t d = 0; d < hd; d += 8) {
        __m256 qv = _mm256_loadu_ps(q + d);
        for (int j = 0; j < 8; j++)
            if (j < m)
                acc[j] = madd(acc[j], qv, _mm256_loadu_ps(k + j * hd + d));
    }
    __m256 sv = _mm256_mul_ps(x86_reduce8x8(acc), set1(scale));
    if (m == 8) {
        _mm256_storeu_ps(s + p, sv);
    } else {
        float tmp[8];
        _mm256_storeu_ps(tmp, sv);
        memcpy(s + p, tmp, (size_t)m * sizeof(float));
    }
}

/* The V sum of nh heads for columns [d0, d0 + 8*nv), every position in
 * order, from float rows; o[h] starts at 0. */
AI void tile_vsum(const float *vf, size_t hd, size_t n, const float *const *e, int nh, int nv, size_t d0,
                  float *const *o)
{
    __m256 acc[ATTN_HB][2];
    for (int i = 0; i < nh; i++)
        for (int c = 0; c < nv; c++)
            acc[i][c] = _mm256_setzero_ps();
    const float *v = vf + d0;
    for (size_t p = 0; p < n; p++, v += hd) {
        __m256 v0 = _mm256_loadu_ps(v), v1 = nv > 1 ? _mm256_loadu_ps(v + 8) : v0;
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

/* nh heads from h0 of one token (queries q, rows part) over float rows. */
AI void tile_heads(const simd_attn_args *a, const float *kf, const float *q, float *part, size_t h0, int nh)
{
    size_t hd = a->hd, n = a->n;
    const float *vf = kf + n * hd, *e[ATTN_HB];
    float *o[ATTN_HB];
    for (int i = 0; i < nh; i++) {
        float *s = a->scratch + (h0 + i) * n;
        const float *qi = q + (h0 + i) * a->qstride;
        for (size_t p = 0; p < n; p += 8)
            tile_scores(kf, hd, a->scale, qi, p, n - p < 8 ? (int)(n - p) : 8, s);
        if (a->softcap > 0)
            attn_softcap(s, n, a->softcap);
        o[i] = part + (h0 + i) * a->pstride + 2;
        o[i][-2] = attn_max(s, n);
        o[i][-1] = attn_exp_sum(s, n, o[i][-2]);
        e[i] = s;
    }
    size_t d = 0;
    for (; d + 16 <= hd; d += 16)
        tile_vsum(vf, hd, n, e, nh, 2, d, o);
    if (d < hd)
        tile_vsum(vf, hd, n, e, nh, 1, d, o);
}

void simd_attn_tile_avx2(const simd_attn_args *a, size_t nt, size_t qtstride, size_t ptstride, float *kvbuf)
{
    if (a->hd % 8) {
        simd_attn_tile_chunks(a, nt, qtstride, ptstride, kvbuf);
        return;
    }
    tile_convert(a, kvbuf);
    for (size_t t = 0; t < nt; t++) {
        const float *q = a->q + t * qtstride;
        float *part = a->part + t * ptstride;
        size_t h = 0;
        for (; h + ATTN_HB <= a->nq; h += ATTN_HB)
            tile_heads(a, kvbuf, q, part, h, ATTN_HB);
        switch (a->nq - h) {
        case 3: tile_heads(a, kvbuf, q, part, h, 3); break;
        case 2: tile_heads(a, kvbuf, q, part, h, 2); break;
        case 1: tile_heads(a, kvbuf, q, part, h, 1); break;
        default: break;
        }
    }
}

/* ---- the merge (simd_attn_merge): eight chunks' exps at a time with
 * exp8 (attn_exp's bits), then each column's terms added in chunk order
 * as the reference adds them, eight columns a vector; out holds the
 * columns' running sums between groups of chunks ---- */

/* out[d0 ..) += rows' acc[d] * f[i] for the nb rows of a group, NC
 * vectors of eight columns at a time. */
AI void merge_cols(const float *part, size_t cstride, size_t nb, const float *f, size_t d, int nc, float *out)
{
    __m256 acc[4];
    for (int j = 0; j < nc; j++)
        acc[j] = _mm256_loadu_ps(out + d + 8 * j);
    for (size_t i = 0; i < nb; i++) {
        const float *row = part + i * cstride + 2 + d;
        __m256 fv = set1(f[i]);
        for (int j = 0; j < nc; j++)
            acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(_mm256_loadu_ps(row + 8 * j), fv));
    }
    for (int j = 0; j < nc; j++)
        _mm256_storeu_ps(out + d + 8 * j, acc[j]);
}

void simd_attn_merge_avx2(size_t hd, size_t nchunks, const float *part, size_t cstride, const float *sink,
                          float *out)
{
    float mx = sink ? *sink : -INFINITY, sum = 0.0f, f[8];
    for (size_t c = 0; c < nchunks; c++)
        if (part[c * cstride] > mx)
            mx = part[c * cstride];
    for (size_t d = 0; d < hd; d++)
        out[d] = 0.0f;
    for (size_t c0 = 0; c0 < nchunks; c0 += 8) {
        const float *rows = part + c0 * cstride;
        size_t nb = nchunks - c0 < 8 ? nchunks - c0 : 8;
        for (size_t i = 0; i < 8; i++) /* the missing chunks' -inf gives 0, unused */
            f[i] = i < nb ? rows[i * cstride] : -INFINITY;
        _mm256_storeu_ps(f, exp8(_mm256_sub_ps(_mm256_loadu_ps(f), set1(mx))));
        for (size_t i = 0; i < nb; i++)
            sum += rows[i * cstride + 1] * f[i];
        size_t d = 0;
        for (; d + 32 <= hd; d += 32)
            merge_cols(rows, cstride, nb, f, d, 4, out);
        for (; d + 8 <= hd; d += 8)
            merge_cols(rows, cstride, nb, f, d, 1, out);
        for (; d < hd; d++)
            for (size_t i = 0; i < nb; i++)
                out[d] += rows[i * cstride + 2 + d] * f[i];
    }
    if (sink)
        sum += attn_exp(*sink - mx);
    __m256 inv = set1(1.0f / sum);
    size_t d = 0;
    for (; d + 8 <= hd; d += 8)
        _mm256_storeu_ps(out + d, _mm256_mul_ps(_mm256_loadu_ps(out + d), inv));
    for (; d < hd; d++)
        out[d] = out[d] * (1.0f / sum);
}
