/* The row drivers of the K-quant dots (q4_k, q5_k, q6_k against q8k
 * activations), shared by kquants_x86.h and kquants_neon.h: the loop over
 * super-blocks, the float accumulation and the tiling of rows and tokens
 * are the same on every set; only the expansion of a weight block and its
 * integer sums are ISA code. The including header defines, before it
 * includes this:
 *
 *   NBK_INLINE, NBK_MAXT, NBK_ROW_TILE;
 *   nbk_codes          a weight super-block's expanded codes;
 *   nbk_q45_scales     q4_k/q5_k scales and mins in the set's form;
 *   nbk_q6_scales      q6_k scales in the set's form;
 *   nbk_h2f(h)         f16 to float, exact;
 *   nbk_q45_prep(five, scales, qs, qh, *codes, *sc)
 *   nbk_q45_sums(*codes, *sc, y, *sumi, *summ)
 *   nbk_q6_prep(x, *codes, *sc)
 *   int32_t nbk_q6_sum(*codes, *sc, y)
 *
 * and after it calls nbk_set_dots(s) from its NBK_SET_FN.
 *
 * Float work per super-block and token is the reference's (kquants.c),
 *     acc[b & 7] += (d_w * d_a) * (float)sumi [- (dmin_w * d_a) * (float)summ]
 * in plain scalar C, the 8 lanes combined by simd_reduce8, so results are
 * the scalar set's bits when the integer sums are exact. */
#ifndef NIBBLE_KQUANTS_ROWS_H
#define NIBBLE_KQUANTS_ROWS_H

/* One weight row of nb super-blocks (type q4_k, q5_k or q6_k) against nt
 * (1..NBK_MAXT, a constant after inlining) token rows at a + t*as; result
 * of token t to out[t*os]. */
NBK_INLINE void nbk_row(int type, size_t nb, const void *wrow, const char *a, size_t as, int nt, float *out,
                        size_t os)
{
    float acc[NBK_MAXT][8];
    memset(acc, 0, sizeof acc);
    for (size_t b = 0; b < nb; b++) {
        const simd_block_q8k *y[NBK_MAXT];
        for (int t = 0; t < nt; t++)
            y[t] = (const simd_block_q8k *)(a + t * as) + b;
        nbk_codes w;
        if (type == SIMD_Q6_K) {
            const simd_block_q6_k *x = (const simd_block_q6_k *)wrow + b;
            nbk_q6_scales sc;
            nbk_q6_prep(x, &w, &sc);
            float d = nbk_h2f(x->d);
            for (int t = 0; t < nt; t++) {
                int32_t sumi = nbk_q6_sum(&w, &sc, y[t]);
                acc[t][b & 7] += (d * y[t]->d) * (float)sumi;
            }
        } else {
            const uint8_t *scales, *qs, *qh = NULL;
            simd_f16 d16, m16;
            if (type == SIMD_Q4_K) {
                const simd_block_q4_k *x = (const simd_block_q4_k *)wrow + b;
                scales = x->scales, qs = x->qs, d16 = x->d, m16 = x->dmin;
            } else {
                const simd_block_q5_k *x = (const simd_block_q5_k *)wrow + b;
                scales = x->scales, qs = x->qs, qh = x->qh, d16 = x->d, m16 = x->dmin;
            }
            nbk_q45_scales sc;
            nbk_q45_prep(type == SIMD_Q5_K, scales, qs, qh, &w, &sc);
            float d = nbk_h2f(d16), dmin = nbk_h2f(m16);
            for (int t = 0; t < nt; t++) {
                int32_t sumi, summ;
                nbk_q45_sums(&w, &sc, y[t], &sumi, &summ);
                acc[t][b & 7] += (d * y[t]->d) * (float)sumi - (dmin * y[t]->d) * (float)summ;
            }
        }
    }
    for (int t = 0; t < nt; t++)
        out[t * os] = simd_reduce8(acc[t]);
}

/* The tiling shared by every row driver (this file's, lquants_rows.h's and
 * iquants_x86.h's): NAME(type, n, w, ws, nr, a, as, nt, out, os) runs nr
 * rows ws bytes apart against nt tokens through ROW, a one-row function of
 * nbk_row's signature. Up to NBK_MAXT tokens share each expansion of a
 * block, ROW called with a constant token count so it unrolls; with more
 * tokens than that, rows go in tiles of NBK_ROW_TILE so a tile stays in
 * cache over the token passes. A macro rather than a function taking ROW
 * by pointer, so that every ROW is inlined with its constant count. */
#define NBK_DEFINE_ROWS(NAME, ROW)                                                                        \
    NBK_INLINE void NAME(int type, size_t n, const void *w, size_t ws, size_t nr, const void *a, size_t as, \
                         size_t nt, float *out, size_t os)                                                 \
    {                                                                                                      \
        const size_t nb = n / SIMD_QKK;                                                                    \
        const size_t tile = nt > NBK_MAXT ? NBK_ROW_TILE : nr;                                             \
        for (size_t r0 = 0; r0 < nr; r0 += tile) {                                                         \
            size_t rn = nr - r0 < tile ? nr - r0 : tile;                                                   \
            for (size_t t0 = 0; t0 < nt; t0 += NBK_MAXT) {                                                 \
                const char *at = (const char *)a + t0 * as;                                                \
                size_t k = nt - t0 < NBK_MAXT ? nt - t0 : NBK_MAXT;                                        \
                for (size_t r = r0; r < r0 + rn; r++) {                                                    \
                    const char *wr = (const char *)w + r * ws;                                             \
                    float *o = out + t0 * os + r;                                                          \
                    switch (k) {                                                                           \
                    case 1: ROW(type, nb, wr, at, as, 1, o, os); break;                                    \
                    case 2: ROW(type, nb, wr, at, as, 2, o, os); break;                                    \
                    case 3: ROW(type, nb, wr, at, as, 3, o, os); break;                                    \
                    default: ROW(type, nb, wr, at, as, NBK_MAXT, o, os); break;                            \
                    }                                                                                      \
                }                                                                                          \
            }                                                                                              \
        }                                                                                                  \
    }

/* A type's three entry points, NAME (dot), NAME##_batch and NAME##_rows,
 * from a driver's ROWS (made by NBK_DEFINE_ROWS) and its ROW. */
#define NBK_DEFINE_DOTS(NAME, TYPE, ROWS, ROW)                                                          \
    static void NAME##_rows(size_t n, const void *w, size_t ws, size_t nr, const void *a, size_t as,    \
                            size_t nt, float *out, size_t os)                                           \
    {                                                                                                   \
        ROWS(TYPE, n, w, ws, nr, a, as, nt, out, os);                                                   \
    }                                                                                                   \
    static float NAME(size_t n, const void *w, const void *a)                                           \
    {                                                                                                   \
        float r;                                                                                        \
        ROW(TYPE, n / SIMD_QKK, w, a, 0, 1, &r, 0);                                                     \
        return r;                                                                                       \
    }                                                                                                   \
    static void NAME##_batch(size_t n, const void *w, const void *a, size_t as, size_t nt, float *out,  \
                             size_t os)                                                                 \
    {                                                                                                   \
        ROWS(TYPE, n, w, 0, 1, a, as, nt, out, os);                                                     \
    }

NBK_DEFINE_ROWS(nbk_rows, nbk_row)
NBK_DEFINE_DOTS(nbk_dot_q4_k, SIMD_Q4_K, nbk_rows, nbk_row)
NBK_DEFINE_DOTS(nbk_dot_q5_k, SIMD_Q5_K, nbk_rows, nbk_row)
NBK_DEFINE_DOTS(nbk_dot_q6_k, SIMD_Q6_K, nbk_rows, nbk_row)

/* The three types' dot, dot_batch and dot_rows into s. */
static void nbk_set_dots(simd_kernel_set *s)
{
    s->dot[SIMD_Q4_K] = nbk_dot_q4_k;
    s->dot_batch[SIMD_Q4_K] = nbk_dot_q4_k_batch;
    s->dot_rows[SIMD_Q4_K] = nbk_dot_q4_k_rows;
    s->dot[SIMD_Q5_K] = nbk_dot_q5_k;
    s->dot_batch[SIMD_Q5_K] = nbk_dot_q5_k_batch;
    s->dot_rows[SIMD_Q5_K] = nbk_dot_q5_k_rows;
    s->dot[SIMD_Q6_K] = nbk_dot_q6_k;
    s->dot_batch[SIMD_Q6_K] = nbk_dot_q6_k_batch;
    s->dot_rows[SIMD_Q6_K] = nbk_dot_q6_k_rows;
}

#endif
