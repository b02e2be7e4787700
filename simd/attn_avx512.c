/* The attention tile (simd_attn_tile) with AVX-512 (built with -mavx512f
 * -mavx512dq; the avx512vnni set's): attn_tile_driver.h's loops with
 * sixteen positions a vector, bit-identical to simd_attn_tile_ref, as
 * attn_avx2.c's form is:
 *  - scores: up to four vectors (64 positions) a row; six rows a block,
 *    so each K vector is loaded once for six rows (24 accumulators, the
 *    four K vectors and a broadcast: 29 of the 32 registers);
 *  - the V sum: the same six rows, 64 columns a pass;
 *  - the max, the exp and the sum are attn_x86.h's.
 * Lanes of a position past n hold zeros and are never used. K and V are
 * read from kvbuf's floats, or (half) from the cache's halves. */
#include "attn_x86.h"

#define TILE_ROWS 6

/* 16 values at p: floats, or halves converted (exactly). */
AI __m512 tile_ld16(const void *p, size_t i, int half)
{
    if (half)
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const simd_f16 *)p + i)));
    return _mm512_loadu_ps((const float *)p + i);
}

/* Scores of nr rows for positions p < 16*nv, K's row d at k + d*ks. */
AI void tile_scores_nv(const void *k, size_t ks, int half, size_t hd, float scale, const float *const *q, int nr,
                       int nv, float (*s)[SIMD_ATTN_CHUNK])
{
    __m512 acc[TILE_ROWS][4];
    for (int i = 0; i < nr; i++)
        for (int j = 0; j < nv; j++)
            acc[i][j] = _mm512_setzero_ps();
    for (size_t d = 0, r = 0; d < hd; d++, r += ks) {
        __m512 kv[4];
        for (int j = 0; j < nv; j++) {
            kv[j] = tile_ld16(k, r + 16 * (size_t)j, half);
            ATTN_KEEP(kv[j]);
        }
        for (int i = 0; i < nr; i++) {
            __m512 qb = _mm512_set1_ps(q[i][d]);
            ATTN_KEEP(qb);
            for (int j = 0; j < nv; j++)
                acc[i][j] = _mm512_fmadd_ps(qb, kv[j], acc[i][j]);
        }
    }
    __m512 sc = _mm512_set1_ps(scale);
    for (int i = 0; i < nr; i++)
        for (int j = 0; j < nv; j++)
            _mm512_storeu_ps(s[i] + 16 * j, _mm512_mul_ps(acc[i][j], sc));
}

AI void tile_scores(const void *k, size_t ks, int half, size_t hd, size_t n16, float scale, const float *const *q,
                    int nr, float (*s)[SIMD_ATTN_CHUNK])
{
    switch (n16 / 16) {
    case 4: tile_scores_nv(k, ks, half, hd, scale, q, nr, 4, s); break;
    case 3: tile_scores_nv(k, ks, half, hd, scale, q, nr, 3, s); break;
    case 2: tile_scores_nv(k, ks, half, hd, scale, q, nr, 2, s); break;
    default: tile_scores_nv(k, ks, half, hd, scale, q, nr, 1, s); break;
    }
}

/* The V sum of nr rows for the 16*nc columns from d0 (nc <= 4), V's row
 * p at v + p*vs, the last vector's lanes cut to the mask `last` (all 16
 * when half: hd is a multiple of 16 then); each V vector is loaded once
 * for the rows and each weight broadcast once for the vectors. */
AI void tile_vcols(const void *v, size_t vs, int half, size_t n, const float *const *e, int nr, int nc,
                   __mmask16 last, size_t d0, float *const *o)
{
    __m512 acc[TILE_ROWS][4];
    for (int i = 0; i < nr; i++)
        for (int c = 0; c < nc; c++)
            acc[i][c] = _mm512_setzero_ps();
    for (size_t p = 0, r = d0; p < n; p++, r += vs) {
        __m512 vv[4];
        for (int c = 0; c < nc; c++) {
            vv[c] = half || c < nc - 1 ? tile_ld16(v, r + 16 * (size_t)c, half)
                                       : _mm512_maskz_loadu_ps(last, (const float *)v + r + 16 * c);
            ATTN_KEEP(vv[c]);
        }
        for (int i = 0; i < nr; i++) {
            __m512 w = _mm512_set1_ps(e[i][p]);
            ATTN_KEEP(w);
            for (int c = 0; c < nc; c++)
                acc[i][c] = _mm512_fmadd_ps(w, vv[c], acc[i][c]);
        }
    }
    for (int i = 0; i < nr; i++)
        for (int c = 0; c < nc; c++)
            if (c == nc - 1)
                _mm512_mask_storeu_ps(o[i] + d0 + 16 * c, last, acc[i][c]);
            else
                _mm512_storeu_ps(o[i] + d0 + 16 * c, acc[i][c]);
}

AI void tile_vsum(const void *v, size_t vs, int half, size_t hd, size_t n, const float *const *e, int nr,
                  float *const *o)
{
    size_t d = 0;
    for (; d + 64 <= hd; d += 64)
        tile_vcols(v, vs, half, n, e, nr, 4, 0xffff, d, o);
    if (d == hd)
        return;
    size_t rest = hd - d;
    __mmask16 last = rest % 16 ? (__mmask16)((1u << rest % 16) - 1) : 0xffff;
    switch ((rest + 15) / 16) {
    case 3: tile_vcols(v, vs, half, n, e, nr, 3, last, d, o); break;
    case 2: tile_vcols(v, vs, half, n, e, nr, 2, last, d, o); break;
    default: tile_vcols(v, vs, half, n, e, nr, 1, last, d, o); break;
    }
}

#define TILE_ENTRY simd_attn_tile_avx512
#include "attn_tile_driver.h"
