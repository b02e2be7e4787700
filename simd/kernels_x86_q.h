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
 *                      at a time), used before the 8-block loop.
 *
 * Integer sums never overflow: a block's sum is at most 32*255*127. */
#ifndef NIBBLE_KERNELS_X86_Q_H
#define NIBBLE_KERNELS_X86_Q_H

NB_INLINE __m256i nb_bdot(int type, __m256i w, __m256i a)
{
    return type == SIMD_Q8_0 ? nb_dot_q8(w, a) : nb_dot_us(w, a);
}

NB_INLINE __m256i nb_aload(const simd_block_q8a *y) { return _mm256_loadu_si256((const __m256i *)y->qs); }

/* Blocks b..b+7 of weight row w against nt activation rows, into acc[t].
 * Each block's dot leaves 8 int32 partial sums; they are folded into one
 * sum per block with hadd (pairs of vectors, within 128-bit halves) as
 * soon as two blocks are done, which keeps few vectors live while nt
 * tokens share each expanded weight block. After two rounds the low lane
 * of q[0] holds blocks 0-3's sums over elements 0-3 and its high lane those
 * over elements 4-7; adding the two lanes (permute2x128) finishes them. */
NB_INLINE void nb_qgroup8(int type, const unsigned char *w, size_t b, const char *a, size_t astride, int nt,
                          __m256 acc[])
{
    const size_t bs = nb_bbytes(type);
    const unsigned char *wb = w + b * bs;
    __m256i q[2][NB_MAXT];
    for (int half = 0; half < 2; half++) {
        __m256i h[2][NB_MAXT];
        for (int p = 0; p < 2; p++) {
            int k = 4 * half + 2 * p;
            __m256i w0 = nb_wexp(type, wb + (size_t)k * bs);
            __m256i w1 = nb_wexp(type, wb + (size_t)(k + 1) * bs);
            for (int t = 0; t < nt; t++) {
                const simd_block_q8a *y = (const simd_block_q8a *)(a + t * astride) + b + k;
                h[p][t] = _mm256_hadd_epi32(nb_bdot(type, w0, nb_aload(y)), nb_bdot(type, w1, nb_aload(y + 1)));
            }
        }
        for (int t = 0; t < nt; t++)
            q[half][t] = _mm256_hadd_epi32(h[0][t], h[1][t]);
    }
    /* q[0]: blocks 0-3 (low 128-bit lane: first halves, high: second
     * halves), q[1]: blocks 4-7 */
    __m256i isum[NB_MAXT];
    for (int t = 0; t < nt; t++)
        isum[t] = _mm256_add_epi32(_mm256_permute2x128_si256(q[0][t], q[1][t], 0x20),
                                   _mm256_permute2x128_si256(q[0][t], q[1][t], 0x31));
    nb_finish8(type, NB_Q8_BIAS_SHIFT, wb, a, astride, b, nt, isum, acc);
}

/* The last m < 8 blocks: copied next to zero blocks, whose terms are
 * zeros (see kernels_x86.h). */
NB_INLINE void nb_qtail(int type, const unsigned char *w, size_t b, size_t m, const char *a, size_t astride,
                        int nt, __m256 acc[])
{
    const size_t bs = nb_bbytes(type);
    unsigned char wbuf[8 * sizeof(simd_block_q8_0)];
    simd_block_q8a abuf[NB_MAXT][8];
    memset(wbuf, 0, sizeof wbuf);
    memset(abuf, 0, sizeof abuf);
    memcpy(wbuf, w + b * bs, m * bs);
    for (int t = 0; t < nt; t++)
        memcpy(abuf[t], (const simd_block_q8a *)(a + t * astride) + b, m * sizeof(simd_block_q8a));
    nb_qgroup8(type, wbuf, 0, (const char *)abuf, sizeof abuf[0], nt, acc);
}

NB_INLINE void nb_qrows(int type, size_t n, const void *w, const char *a, size_t astride, int nt, float *out,
                        size_t ostride)
{
    const size_t nb = n / SIMD_QK;
    __m256 acc[NB_MAXT];
    for (int t = 0; t < nt; t++)
        acc[t] = _mm256_setzero_ps();
    size_t b = 0;
#ifdef NB_HAVE_GROUP16
    for (; b + 16 <= nb; b += 16)
        nb_qgroup16(type, w, b, a, astride, nt, acc);
#endif
    for (; b + 8 <= nb; b += 8)
        nb_qgroup8(type, w, b, a, astride, nt, acc);
    if (b < nb)
        nb_qtail(type, w, b, nb - b, a, astride, nt, acc);
    for (int t = 0; t < nt; t++)
        out[t * ostride] = nb_reduce(acc[t]);
}

#define NB_QDOT(NAME, TYPE)                                                                    \
    static float NAME(size_t n, const void *w, const void *a)                                  \
    {                                                                                          \
        float r;                                                                               \
        nb_qrows(TYPE, n, w, a, 0, 1, &r, 0);                                                  \
        return r;                                                                              \
    }                                                                                          \
    static void NAME##_batch(size_t n, const void *w, const void *a, size_t as, size_t nt,     \
                             float *out, size_t os)                                            \
    {                                                                                          \
        NB_BATCH_DRIVER(nb_qrows, TYPE, n, w, a, as, nt, out, os);                              \
    }
NB_QDOT(nb_dot_q8_0, SIMD_Q8_0)
NB_QDOT(nb_dot_q4_0, SIMD_Q4_0)
NB_QDOT(nb_dot_q4_1, SIMD_Q4_1)
NB_QDOT(nb_dot_q5_0, SIMD_Q5_0)
NB_QDOT(nb_dot_q5_1, SIMD_Q5_1)

void NB_SET_FN(simd_kernel_set *s)
{
    s->q8a_quant = nb_q8a_quant;
    s->dot_f32 = nb_dot_f32;
#define NB_PUT(T, F)             \
    s->dot[T] = F;               \
    s->dot_batch[T] = F##_batch;
    NB_PUT(SIMD_F32, nb_dot_w_f32)
    NB_PUT(SIMD_F16, nb_dot_w_f16)
    NB_PUT(SIMD_BF16, nb_dot_w_bf16)
    NB_PUT(SIMD_Q8_0, nb_dot_q8_0)
    NB_PUT(SIMD_Q4_0, nb_dot_q4_0)
    NB_PUT(SIMD_Q4_1, nb_dot_q4_1)
    NB_PUT(SIMD_Q5_0, nb_dot_q5_0)
    NB_PUT(SIMD_Q5_1, nb_dot_q5_1)
#undef NB_PUT
}

#endif
