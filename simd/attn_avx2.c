/* Attention with AVX2 (built with -mavx2 -mfma -mf16c; used by every x86
 * set, since all of them have AVX2): the chunk (attn_chunk_x86.h's form),
 * bit-identical to simd_attn_ref, and the tile below, bit-identical to
 * simd_attn_tile_ref. */
#define ATTN_ENTRY simd_attn_avx2
#include "attn_chunk_x86.h"

/* ---- the tile (simd_attn_tile): attn_tile_driver.h's loops over blocks
 * of query rows, with 16 positions a pass in two vectors (six rows: 12
 * accumulators, the pass's two K vectors and a broadcast fill the 16
 * registers) ---- */

#define TILE_ROWS 6

/* 8 values at p + i: floats, or halves converted (exactly). */
AI __m256 tile_ld8(const void *p, size_t i, int half)
{
    return half ? ldh((const simd_f16 *)p + i) : _mm256_loadu_ps((const float *)p + i);
}

/* Scores of nr rows for positions p < n16: acc[p] += q[d] * kT[d][p],
 * d in order, then * scale; K's row d at k + d*ks (floats, or halves). */
AI void tile_scores(const void *k, size_t ks, int half, size_t hd, size_t n16, float scale, const float *const *q,
                    int nr, float (*s)[SIMD_ATTN_CHUNK])
{
    for (size_t p0 = 0; p0 < n16; p0 += 16) {
        __m256 acc[TILE_ROWS][2];
        for (int i = 0; i < nr; i++)
            acc[i][0] = acc[i][1] = _mm256_setzero_ps();
        for (size_t d = 0, r = p0; d < hd; d++, r += ks) {
            __m256 k0 = tile_ld8(k, r, half), k1 = tile_ld8(k, r + 8, half);
            ATTN_KEEP(k0);
            ATTN_KEEP(k1);
            for (int i = 0; i < nr; i++) {
                __m256 qb = _mm256_broadcast_ss(q[i] + d);
                acc[i][0] = madd(acc[i][0], qb, k0);
                acc[i][1] = madd(acc[i][1], qb, k1);
            }
        }
        for (int i = 0; i < nr; i++) {
            _mm256_storeu_ps(s[i] + p0, _mm256_mul_ps(acc[i][0], set1(scale)));
            _mm256_storeu_ps(s[i] + p0 + 8, _mm256_mul_ps(acc[i][1], set1(scale)));
        }
    }
}

/* The V sum of nr rows for columns [d0, d0 + 8*nv), positions in order,
 * V's row p at v + p*vs. */
AI void tile_vcols(const void *v, size_t vs, int half, size_t n, const float *const *e, int nr, int nv, size_t d0,
                   float *const *o)
{
    __m256 acc[TILE_ROWS][2];
    for (int i = 0; i < nr; i++)
        for (int c = 0; c < nv; c++)
            acc[i][c] = _mm256_setzero_ps();
    for (size_t p = 0, r = d0; p < n; p++, r += vs) {
        __m256 v0 = tile_ld8(v, r, half), v1 = nv > 1 ? tile_ld8(v, r + 8, half) : v0;
        ATTN_KEEP(v0);
        ATTN_KEEP(v1);
        for (int i = 0; i < nr; i++) {
            __m256 w = _mm256_broadcast_ss(e[i] + p);
            acc[i][0] = madd(acc[i][0], w, v0);
            if (nv > 1)
                acc[i][1] = madd(acc[i][1], w, v1);
        }
    }
    for (int i = 0; i < nr; i++)
        for (int c = 0; c < nv; c++)
            _mm256_storeu_ps(o[i] + d0 + 8 * c, acc[i][c]);
}

AI void tile_vsum(const void *v, size_t vs, int half, size_t hd, size_t n, const float *const *e, int nr,
                  float *const *o)
{
    size_t d = 0;
    for (; d + 16 <= hd; d += 16)
        tile_vcols(v, vs, half, n, e, nr, 2, d, o);
    if (d + 8 <= hd) {
        tile_vcols(v, vs, half, n, e, nr, 1, d, o);
        d += 8;
    }
    for (; d < hd; d++) /* the last hd mod 8 columns one at a time, in the same order (never half: hd % 16 == 0 then) */
        for (int i = 0; i < nr; i++) {
            float acc = 0.0f;
            for (size_t p = 0; p < n; p++)
                acc = attn_fma(e[i][p], ((const float *)v)[p * vs + d], acc);
            o[i][d] = acc;
        }
}

#define TILE_ENTRY simd_attn_tile_avx2
#include "attn_tile_driver.h"

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
        __m256 m;
        if (nb == 8) /* built in registers: eight stores and a vector load of them stalled the load */
            m = _mm256_setr_ps(rows[0], rows[cstride], rows[2 * cstride], rows[3 * cstride], rows[4 * cstride],
                               rows[5 * cstride], rows[6 * cstride], rows[7 * cstride]);
        else {
            for (size_t i = 0; i < 8; i++) /* the missing chunks' -inf gives 0, unused */
                f[i] = i < nb ? rows[i * cstride] : -INFINITY;
            m = _mm256_loadu_ps(f);
        }
        _mm256_storeu_ps(f, exp8(_mm256_sub_ps(m, set1(mx))));
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
