/* Private to simd/: the loops of the SIMD tile forms (simd_attn_tile in
 * simd.h; attn_avx2.c, attn_avx512.c, attn_neon.c) over blocks of query
 * rows, written once; each form brings the vector primitives, which keep
 * simd_attn_tile_ref's order of float operations lane by lane.
 *
 * The tile's score is one sum per position, d in order, so a vector holds
 * positions, not columns: K comes transposed (column d of every position
 * in one row) and a query row adds broadcast(q[d]) * kT[d][p..p+15] into
 * its accumulators for each d, with no reduction at the end. The rows of
 * a block are any of the tile's tokens x heads (row r: token r / nq,
 * head r % nq), so that each K vector loaded serves TILE_ROWS of them;
 * rows are independent, so the blocking changes no bits.
 *
 * A transposed K (the f16 cache's) and its V are read as halves where
 * they lie, converted as each vector is loaded (half = 1 below; the
 * conversion is exact, so the bits are the same): converting the chunk
 * into floats in kvbuf first cost as much as the arithmetic for one
 * token, and for a batch it was slower too (a chunk's halves are half
 * the bytes to keep in L1; nibble_attnbench -t 32, 1.18x on AVX-512 and
 * AVX2). K as rows (a quantized K's halves) and head sizes that are not
 * whole vectors go through kvbuf (tile_convert). Row blocks are as even
 * as TILE_ROWS allows (7 rows: 4 and 3), since each block reads the
 * chunk again.
 *
 * The including file defines, before including it:
 *   TILE_ROWS                       query rows per block (4..6)
 *   TILE_ENTRY                      the name of the simd_attn_tile_* it defines
 *   TILE_CVT_W, tile_cvt_vec(src, dst)
 *                                   TILE_CVT_W halves at src as floats at dst
 *   tile_k_rows(a, kt, n16)         K given as rows (ktstride 0) into kvbuf
 *                                   transposed: kt[d*SIMD_ATTN_CHUNK + p] =
 *                                   k_p[d] for p < n16, zeros from n on
 *   tile_scores(k, ks, half, hd, n16, scale, q, nr, s)
 *                                   s[i][p] for the nr rows q[i], p < n16, K's
 *                                   row d at k + d*ks: floats (half 0) or halves
 *   tile_vsum(v, vs, half, hd, n, e, nr, o)
 *                                   o[i][d] = the sum over p < n in order of
 *                                   e[i][p] * v_p[d], every d, V's row p at
 *                                   v + p*vs: floats (half 0) or halves
 * and the set's attn_max and attn_exp_rows (attn_x86.h, attn_neon.h). */
#ifndef NIBBLE_ATTN_TILE_DRIVER_H
#define NIBBLE_ATTN_TILE_DRIVER_H

_Static_assert(TILE_ROWS <= ATTN_EXP_ROWS, "attn_exp_rows takes a block's rows at once");

/* n halves at src as floats at dst. */
static inline void tile_cvt_run(const simd_f16 *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + TILE_CVT_W <= n; i += TILE_CVT_W)
        tile_cvt_vec(src + i, dst + i);
    for (; i < n; i++)
        dst[i] = simd_f16_to_f32(src[i]);
}

/* kvbuf: K as kt[d*SIMD_ATTN_CHUNK + p] = k_p[d] for p < n16 (zeros
 * from n on), then V as n rows of hd floats at kt + SIMD_ATTN_CHUNK*hd.
 * The conversion is exact, so the values are the halves' wherever they
 * go. */
static inline void tile_convert(const simd_attn_args *a, float *kt, size_t n16)
{
    size_t hd = a->hd, n = a->n;
    if (a->ktstride) { /* K transposed: row d is n halves */
        for (size_t d = 0; d < hd; d++) {
            float *o = kt + d * SIMD_ATTN_CHUNK;
            tile_cvt_run(a->k + d * a->ktstride, o, n);
            for (size_t p = n; p < n16; p++)
                o[p] = 0.0f;
        }
    } else {
        tile_k_rows(a, kt, n16);
    }
    for (size_t p = 0; p < n; p++)
        tile_cvt_run(a->v + p * a->kvstride, kt + SIMD_ATTN_CHUNK * hd + p * hd, hd);
}

/* nr rows: scores, then the chunk step of simd_attn_chunk for each, then
 * their V sums together (each V row read once for the block); half: K
 * and V read as halves from the cache, else as floats from kvbuf (kt). */
static inline __attribute__((always_inline)) void tile_rows(const simd_attn_args *a, const float *kt, size_t n16,
                                                            const float *const *q, float *const *o, int nr,
                                                            int half)
{
    float s[TILE_ROWS][SIMD_ATTN_CHUNK] __attribute__((aligned(64)));
    const float *e[TILE_ROWS];
    size_t n = a->n;
    if (half)
        tile_scores(a->k, a->ktstride, 1, a->hd, n16, a->scale, q, nr, s);
    else
        tile_scores(kt, SIMD_ATTN_CHUNK, 0, a->hd, n16, a->scale, q, nr, s);
    float *sr[TILE_ROWS], mx[TILE_ROWS], sum[TILE_ROWS];
    for (int i = 0; i < nr; i++) {
        if (a->softcap > 0)
            attn_softcap(s[i], n, a->softcap);
        o[i][-2] = mx[i] = attn_max(s[i], n);
        sr[i] = s[i];
        e[i] = s[i];
    }
    attn_exp_rows(sr, nr, n, mx, sum);
    for (int i = 0; i < nr; i++)
        o[i][-1] = sum[i];
    if (half)
        tile_vsum(a->v, a->kvstride, 1, a->hd, n, e, nr, o);
    else
        tile_vsum(kt + SIMD_ATTN_CHUNK * a->hd, a->hd, 0, a->hd, n, e, nr, o);
}

/* tile_rows with a constant row count, so each form is unrolled. */
static inline __attribute__((always_inline)) void tile_block(const simd_attn_args *a, const float *kt, size_t n16,
                                                             const float *const *q, float *const *o, int nr,
                                                             int half)
{
    switch (nr) {
#if TILE_ROWS > 5
    case 6: tile_rows(a, kt, n16, q, o, 6, half); break;
#endif
#if TILE_ROWS > 4
    case 5: tile_rows(a, kt, n16, q, o, 5, half); break;
#endif
    case 4: tile_rows(a, kt, n16, q, o, 4, half); break;
    case 3: tile_rows(a, kt, n16, q, o, 3, half); break;
    case 2: tile_rows(a, kt, n16, q, o, 2, half); break;
    default: tile_rows(a, kt, n16, q, o, 1, half); break;
    }
}

void TILE_ENTRY(const simd_attn_args *a, size_t nt, size_t qtstride, size_t ptstride, float *kvbuf)
{
    size_t n16 = (a->n + 15) & ~(size_t)15, rows = nt * a->nq;
    size_t blocks = (rows + TILE_ROWS - 1) / TILE_ROWS, per = (rows + blocks - 1) / blocks;
    /* K transposed: the halves where they lie (simd.h: K's rows are read
     * to n rounded up to 16 positions) */
    int half = a->hd % 16 == 0 && a->ktstride;
    if (!half)
        tile_convert(a, kvbuf, n16);
    for (size_t r0 = 0; r0 < rows; r0 += per) {
        int nr = rows - r0 < per ? (int)(rows - r0) : (int)per;
        const float *q[TILE_ROWS];
        float *o[TILE_ROWS];
        for (int i = 0; i < nr; i++) {
            size_t t = (r0 + (size_t)i) / a->nq, h = (r0 + (size_t)i) % a->nq;
            q[i] = a->q + t * qtstride + h * a->qstride;
            o[i] = a->part + t * ptstride + h * a->pstride + 2;
        }
        if (half)
            tile_block(a, kvbuf, n16, q, o, nr, 1);
        else
            tile_block(a, kvbuf, n16, q, o, nr, 0);
    }
}

#endif
