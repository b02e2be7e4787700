/* The row driver of the q2_k, q3_k, iq4_xs and i-quant (iquants.h) dots
 * (against q8k), shared
 * by lquants_x86.h and lquants_neon.h, as kquants_rows.h is for the other
 * K types: the loop over super-blocks, the float accumulation and the
 * tiling of rows and tokens are the same on every set. The including
 * header defines, before it includes this, NBK_INLINE, NBK_MAXT,
 * NBK_ROW_TILE, NBK_DEFINE_ROWS and NBK_DEFINE_DOTS (from its kquants
 * header and kquants_rows.h), nbk_codes, and
 *
 *   nbl_scales
 *   nbl_prep(type, block, *codes, *scales, *d, *dmin)
 *   nbl_sums(type, *codes, *scales, y, *sumi, *summ)
 *   size_t nbl_bytes(type)
 *
 * Float work per super-block and token is the reference's (lquants.c),
 *     acc[b & 7] += (d_w * d_a) * (float)sumi [- (dmin_w * d_a) * (float)summ]
 * (the second product for q2_k only; an i-quant's d_w is simd_iq_expand's),
 * in plain scalar C, the 8 lanes
 * combined by simd_reduce8. */
#ifndef NIBBLE_LQUANTS_ROWS_H
#define NIBBLE_LQUANTS_ROWS_H

/* One weight row of nb super-blocks against nt (1..NBK_MAXT, a constant
 * after inlining) token rows at a + t*as; token t's result to out[t*os]. */
NBK_INLINE void nbl_row(int type, size_t nb, const void *wrow, const char *a, size_t as, int nt, float *out,
                        size_t os)
{
    const size_t bs = nbl_bytes(type);
    float acc[NBK_MAXT][8];
    memset(acc, 0, sizeof acc);
    for (size_t b = 0; b < nb; b++) {
        nbk_codes w;
        nbl_scales sc;
        float d, dmin;
        nbl_prep(type, (const unsigned char *)wrow + b * bs, &w, &sc, &d, &dmin);
        for (int t = 0; t < nt; t++) {
            const simd_block_q8k *y = (const simd_block_q8k *)(a + t * as) + b;
            int32_t sumi, summ;
            nbl_sums(type, &w, &sc, y, &sumi, &summ);
            if (type == SIMD_Q2_K)
                acc[t][b & 7] += (d * y->d) * (float)sumi - (dmin * y->d) * (float)summ;
            else
                acc[t][b & 7] += (d * y->d) * (float)sumi;
        }
    }
    for (int t = 0; t < nt; t++)
        out[t * os] = simd_reduce8(acc[t]);
}

/* nr rows against nt tokens, tiled as nbk_rows is (kquants_rows.h). */
NBK_DEFINE_ROWS(nbl_rows, nbl_row)
NBK_DEFINE_DOTS(nbl_dot_q2_k, SIMD_Q2_K, nbl_rows, nbl_row)
NBK_DEFINE_DOTS(nbl_dot_q3_k, SIMD_Q3_K, nbl_rows, nbl_row)
NBK_DEFINE_DOTS(nbl_dot_iq4_xs, SIMD_IQ4_XS, nbl_rows, nbl_row)
NBK_DEFINE_DOTS(nbl_dot_iq2_xxs, SIMD_IQ2_XXS, nbl_rows, nbl_row)
NBK_DEFINE_DOTS(nbl_dot_iq2_xs, SIMD_IQ2_XS, nbl_rows, nbl_row)
NBK_DEFINE_DOTS(nbl_dot_iq2_s, SIMD_IQ2_S, nbl_rows, nbl_row)
NBK_DEFINE_DOTS(nbl_dot_iq3_xxs, SIMD_IQ3_XXS, nbl_rows, nbl_row)
NBK_DEFINE_DOTS(nbl_dot_iq3_s, SIMD_IQ3_S, nbl_rows, nbl_row)
NBK_DEFINE_DOTS(nbl_dot_iq1_s, SIMD_IQ1_S, nbl_rows, nbl_row)
NBK_DEFINE_DOTS(nbl_dot_iq1_m, SIMD_IQ1_M, nbl_rows, nbl_row)

static void nbl_set_dots(simd_kernel_set *s)
{
    SIMD_PUT_DOTS(s, SIMD_Q2_K, nbl_dot_q2_k);
    SIMD_PUT_DOTS(s, SIMD_Q3_K, nbl_dot_q3_k);
    SIMD_PUT_DOTS(s, SIMD_IQ4_XS, nbl_dot_iq4_xs);
    SIMD_PUT_DOTS(s, SIMD_IQ2_XXS, nbl_dot_iq2_xxs);
    SIMD_PUT_DOTS(s, SIMD_IQ2_XS, nbl_dot_iq2_xs);
    SIMD_PUT_DOTS(s, SIMD_IQ2_S, nbl_dot_iq2_s);
    SIMD_PUT_DOTS(s, SIMD_IQ3_XXS, nbl_dot_iq3_xxs);
    SIMD_PUT_DOTS(s, SIMD_IQ3_S, nbl_dot_iq3_s);
    SIMD_PUT_DOTS(s, SIMD_IQ1_S, nbl_dot_iq1_s);
    SIMD_PUT_DOTS(s, SIMD_IQ1_M, nbl_dot_iq1_m);
}

#endif
