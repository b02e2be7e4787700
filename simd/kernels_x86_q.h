/* Quantized dots for the x86 sets, eight blocks (one float vector) at a
 * time, and the set table. Included last by each kernels_<set>.c, after
 * kernels_x86.h and after the file has defined its integer primitives:
 *
 *   __m256i nb_dot_us(__m256i u, __m256i s)
 *       u: 32 unsigned bytes (codes 0..31), s: 32 signed activation bytes;
 *       returns 8 int32 whose total is sum(u*s) (how it splits the sum
 *       over lanes is free: only the total is used).
 *   __m256i nb_dot_q8(__m256i w, __m256i a)
 *       signed weight bytes (any value) times activation bytes (|a| <=
 *       127); total is sum(w*a) + 2^NB_Q8_BIAS_SHIFT * sum(a).
 *   NB_Q8_BIAS_SHIFT   -1 when nb_dot_q8 has no bias
 *   NB_SET_FN          the name of the function filling simd_kernel_set
 *   NB_HAVE_GROUP16    optional: the file defines nb_qgroup16 (16 blocks
 *                      at a time, or the first m of them), used for
 *                      the whole row instead of the 8-block loop.
 *
 * Integer sums never overflow: a block's sum is at most 32*255*127. */
#ifndef NIBBLE_KERNELS_X86_Q_H
#define NIBBLE_KERNELS_X86_Q_H

NB_INLINE __m256i nb_bdot(int type, __m256i w, __m256i a)
{
    return type == SIMD_Q8_0 ? nb_dot_q8(w, a) : nb_dot_us(w, a);
}

NB_INLINE __m256i nb_aload(const simd_block_q8a *y) { return _mm256_loadu_si256((const __m256i *)y->qs); }

/* The first m (1..8) of the 8 blocks at wb against nt activation rows
 * (block b of row t at a + t*astride), into acc[t]; the block scales come
 * from sc at index k (block b's place in the current segment). Blocks m..7
 * are absent: nothing of them is read, their integer sums are zero and
 * their scales zero (nb_wscales_part, nb_fill_scales), so their lanes add
 * +0. m is a constant 8 in the body of a row, so those tests vanish.
 *
 * Each block's dot leaves 8 int32 partial sums; they are folded into one
 * sum per block with hadd (pairs of vectors, within 128-bit halves) as
 * soon as two blocks are done, which keeps few vectors live while nt
 * tokens share each expanded weight block. After two rounds the low lane
 * of q[0] holds blocks 0-3's sums over elements 0-3 and its high lane those
 * over elements 4-7; adding the two lanes (permute2x128) finishes them. */
NB_INLINE void nb_qgroup8(int type, const unsigned char *wb, int m, const char *a, size_t astride, size_t b, int nt,
                          const nb_scales *sc, size_t k0, __m256 acc[])
{
    const size_t bs = nb_bbytes(type);
    const __m256i z = _mm256_setzero_si256();
    __m256i q[2][NB_MAXT];
    for (int half = 0; half < 2; half++) {
        __m256i h[2][NB_MAXT];
        for (int p = 0; p < 2; p++) {
            int k = 4 * half + 2 * p;
            __m256i w0 = k < m ? nb_wexp(type, wb + (size_t)k * bs) : z;
            __m256i w1 = k + 1 < m ? nb_wexp(type, wb + (size_t)(k + 1) * bs) : z;
            for (int t = 0; t < nt; t++) {
                const simd_block_q8a *y = (const simd_block_q8a *)(a + t * astride) + b + k;
                __m256i d0 = k < m ? nb_bdot(type, w0, nb_aload(y)) : z;
                __m256i d1 = k + 1 < m ? nb_bdot(type, w1, nb_aload(y + 1)) : z;
                h[p][t] = _mm256_hadd_epi32(d0, d1);
            }
        }
        for (int t = 0; t < nt; t++)
            q[half][t] = _mm256_hadd_epi32(h[0][t], h[1][t]);
    }
    __m256 dw, mw = _mm256_setzero_ps();
    if (m < 8)
        nb_wscales_part(type, wb, bs, m, &dw, &mw);
    else if (nb_has_min(type))
        nb_wdm8(wb, bs, &dw, &mw);
    else
        dw = nb_wd8(wb, bs);
    /* q[0]: blocks 0-3 (low 128-bit lane: first halves, high: second
     * halves), q[1]: blocks 4-7 */
    for (int t = 0; t < nt; t++) {
        __m256i isum = _mm256_add_epi32(_mm256_permute2x128_si256(q[0][t], q[1][t], 0x20),
                                        _mm256_permute2x128_si256(q[0][t], q[1][t], 0x31));
        __m256 da = _mm256_loadu_ps(&sc->d[t][k0]);
        __m256i as = _mm256_loadu_si256((const __m256i *)&sc->s[t][k0]);
        acc[t] = nb_step8(type, NB_Q8_BIAS_SHIFT, acc[t], dw, mw, da, isum, as);
    }
}

/* Blocks s0..s1-1 of one weight row (s0 a multiple of 16) against nt
 * tokens, scales already in sc for that segment. */
NB_INLINE void nb_qseg(int type, const unsigned char *w, size_t s0, size_t s1, const char *a, size_t astride, int nt,
                       const nb_scales *sc, __m256 acc[])
{
    const size_t bs = nb_bbytes(type);
    size_t b = s0;
#ifdef NB_HAVE_GROUP16
    for (; b + 16 <= s1; b += 16)
        nb_qgroup16(type, w + b * bs, 16, a, astride, b, nt, sc, b - s0, acc);
    if (b < s1 && (nt == 1 || s1 - b > 8)) { /* a short tail with several tokens: the 8-block path */
        nb_qgroup16(type, w + b * bs, (int)(s1 - b), a, astride, b, nt, sc, b - s0, acc);
        return;
    }
#endif
    for (; b + 8 <= s1; b += 8)
        nb_qgroup8(type, w + b * bs, 8, a, astride, b, nt, sc, b - s0, acc);
    if (b < s1)
        nb_qgroup8(type, w + b * bs, (int)(s1 - b), a, astride, b, nt, sc, b - s0, acc);
}

/* rn rows (ws bytes apart) against nt tokens (a constant after inlining),
 * out[t*os + r]. */
NB_INLINE void nb_qtile(int type, size_t nb, const unsigned char *w, size_t ws, size_t rn, const char *a,
                        size_t astride, int nt, float *out, size_t os, nb_scales *sc)
{
    __m256 acc[NB_MAXT];
    if (nb <= NB_SC_MAXB) {
        nb_fill_scales(sc, a, astride, nt, 0, nb);
        for (size_t r = 0; r < rn; r++) {
            for (int t = 0; t < nt; t++)
                acc[t] = _mm256_setzero_ps();
            nb_qseg(type, w + r * ws, 0, nb, a, astride, nt, sc, acc);
            for (int t = 0; t < nt; t++)
                out[t * os + r] = nb_reduce(acc[t]);
        }
        return;
    }
    for (size_t r = 0; r < rn; r++) {
        for (int t = 0; t < nt; t++)
            acc[t] = _mm256_setzero_ps();
        for (size_t s0 = 0; s0 < nb; s0 += NB_SC_MAXB) {
            size_t s1 = nb - s0 < NB_SC_MAXB ? nb : s0 + NB_SC_MAXB;
            nb_fill_scales(sc, a, astride, nt, s0, s1);
            nb_qseg(type, w + r * ws, s0, s1, a, astride, nt, sc, acc);
        }
        for (int t = 0; t < nt; t++)
            out[t * os + r] = nb_reduce(acc[t]);
    }
}

/* Rows per tile when the tokens take several passes: the tile's weights
 * stay in cache while each group of NB_MAXT tokens goes over them. */
#define NB_ROW_TILE 16

NB_INLINE void nb_qrows(int type, size_t n, const void *w, size_t ws, size_t nr, const void *a, size_t astride,
                        size_t nt, float *out, size_t os)
{
#ifdef NB_LANE_ROWS
    if (NB_LANE_ROWS(type, n, w, ws, nr, a, astride, nt, out, os))
        return;
#endif
    nb_scales sc;
    const size_t nb = n / SIMD_QK;
    const size_t tile = nt > NB_MAXT ? NB_ROW_TILE : nr;
    for (size_t r0 = 0; r0 < nr; r0 += tile) {
        size_t rn = nr - r0 < tile ? nr - r0 : tile;
        const unsigned char *wr = (const unsigned char *)w + r0 * ws;
        for (size_t t0 = 0; t0 < nt; t0 += NB_MAXT) {
            const char *at = (const char *)a + t0 * astride;
            float *o = out + t0 * os + r0;
            switch (nt - t0 < NB_MAXT ? nt - t0 : NB_MAXT) {
            case 1: nb_qtile(type, nb, wr, ws, rn, at, astride, 1, o, os, &sc); break;
            case 2: nb_qtile(type, nb, wr, ws, rn, at, astride, 2, o, os, &sc); break;
            case 3: nb_qtile(type, nb, wr, ws, rn, at, astride, 3, o, os, &sc); break;
            default: nb_qtile(type, nb, wr, ws, rn, at, astride, NB_MAXT, o, os, &sc); break;
            }
        }
    }
}

/* dot and dot_batch of a type from its NAME##_rows (one row; one row
 * against nt tokens) */
#define NB_ROW_ENTRIES(NAME)                                                                   \
    static float NAME(size_t n, const void *w, const void *a)                                  \
    {                                                                                          \
        float r;                                                                               \
        NAME##_rows(n, w, 0, 1, a, 0, 1, &r, 0);                                               \
        return r;                                                                              \
    }                                                                                          \
    static void NAME##_batch(size_t n, const void *w, const void *a, size_t as, size_t nt,     \
                             float *out, size_t os)                                            \
    {                                                                                          \
        NAME##_rows(n, w, 0, 1, a, as, nt, out, os);                                           \
    }

/* The dots of a type whose blocks of 32 go eight at a time through its
 * own GROUP8 (same arguments as nb_qgroup8 without the type; BS bytes a
 * block): NAME, NAME##_batch and NAME##_rows, tiled as nb_qrows tiles
 * (mxfp4_x86.h and lquants_x86.h's iq4_nl use it). */
#define NB_GROUP8_DOTS(NAME, GROUP8, BS)                                                       \
    NB_INLINE void NAME##_tile(size_t nb, const unsigned char *w, size_t ws, size_t rn,        \
                               const char *a, size_t astride, int nt, float *out, size_t os,   \
                               nb_scales *sc)                                                  \
    {                                                                                          \
        __m256 acc[NB_MAXT];                                                                   \
        for (size_t r = 0; r < rn; r++) {                                                      \
            for (int t = 0; t < nt; t++)                                                       \
                acc[t] = _mm256_setzero_ps();                                                  \
            for (size_t s0 = 0; s0 < nb; s0 += NB_SC_MAXB) {                                   \
                size_t s1 = nb - s0 < NB_SC_MAXB ? nb : s0 + NB_SC_MAXB;                       \
                if (r == 0 || nb > NB_SC_MAXB) /* one segment: filled once for all rows */     \
                    nb_fill_scales(sc, a, astride, nt, s0, s1);                                \
                const unsigned char *wr = w + r * ws;                                          \
                size_t b = s0;                                                                 \
                for (; b + 8 <= s1; b += 8)                                                    \
                    GROUP8(wr + b * (BS), 8, a, astride, b, nt, sc, b - s0, acc);              \
                if (b < s1)                                                                    \
                    GROUP8(wr + b * (BS), (int)(s1 - b), a, astride, b, nt, sc, b - s0, acc);  \
            }                                                                                  \
            for (int t = 0; t < nt; t++)                                                       \
                out[t * os + r] = nb_reduce(acc[t]);                                           \
        }                                                                                      \
    }                                                                                          \
    static void NAME##_rows(size_t n, const void *w, size_t ws, size_t nr, const void *a,     \
                            size_t astride, size_t nt, float *out, size_t os)                  \
    {                                                                                          \
        nb_scales sc;                                                                          \
        const size_t nb = n / SIMD_QK;                                                         \
        const size_t tile = nt > NB_MAXT ? NB_ROW_TILE : nr;                                   \
        for (size_t r0 = 0; r0 < nr; r0 += tile) {                                             \
            size_t rn = nr - r0 < tile ? nr - r0 : tile;                                       \
            const unsigned char *wr = (const unsigned char *)w + r0 * ws;                      \
            for (size_t t0 = 0; t0 < nt; t0 += NB_MAXT) {                                      \
                const char *at = (const char *)a + t0 * astride;                               \
                float *o = out + t0 * os + r0;                                                 \
                switch (nt - t0 < NB_MAXT ? nt - t0 : NB_MAXT) {                               \
                case 1: NAME##_tile(nb, wr, ws, rn, at, astride, 1, o, os, &sc); break;        \
                case 2: NAME##_tile(nb, wr, ws, rn, at, astride, 2, o, os, &sc); break;        \
                case 3: NAME##_tile(nb, wr, ws, rn, at, astride, 3, o, os, &sc); break;        \
                default: NAME##_tile(nb, wr, ws, rn, at, astride, NB_MAXT, o, os, &sc); break; \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    NB_ROW_ENTRIES(NAME)

#define NB_QDOT(NAME, TYPE)                                                                    \
    static void NAME##_rows(size_t n, const void *w, size_t ws, size_t nr, const void *a,     \
                            size_t as, size_t nt, float *out, size_t os)                       \
    {                                                                                          \
        nb_qrows(TYPE, n, w, ws, nr, a, as, nt, out, os);                                      \
    }                                                                                          \
    NB_ROW_ENTRIES(NAME)
NB_QDOT(nb_dot_q8_0, SIMD_Q8_0)
NB_QDOT(nb_dot_q4_0, SIMD_Q4_0)
NB_QDOT(nb_dot_q4_1, SIMD_Q4_1)
NB_QDOT(nb_dot_q5_0, SIMD_Q5_0)
NB_QDOT(nb_dot_q5_1, SIMD_Q5_1)

void NB_SET_FN(simd_kernel_set *s)
{
    s->q8a_quant = nb_q8a_quant;
    s->q8k_quant = nb_q8k_quant;
    s->dot_f32 = nb_dot_f32;
#define NB_PUT(T, F)             \
    s->dot[T] = F;               \
    s->dot_batch[T] = F##_batch;
#define NB_PUTQ(T, F)            \
    NB_PUT(T, F)                 \
    s->dot_rows[T] = F##_rows;
    NB_PUTQ(SIMD_F32, nb_dot_w_f32)
    NB_PUTQ(SIMD_F16, nb_dot_w_f16)
    NB_PUTQ(SIMD_BF16, nb_dot_w_bf16)
    NB_PUTQ(SIMD_Q8_0, nb_dot_q8_0)
    NB_PUTQ(SIMD_Q4_0, nb_dot_q4_0)
    NB_PUTQ(SIMD_Q4_1, nb_dot_q4_1)
    NB_PUTQ(SIMD_Q5_0, nb_dot_q5_0)
    NB_PUTQ(SIMD_Q5_1, nb_dot_q5_1)
#ifdef NB_PACKED_FILL
    NB_PACKED_FILL(s); /* packed-row dots (pack_x86.h) */
#endif
#undef NB_PUTQ
#undef NB_PUT
}

#endif
