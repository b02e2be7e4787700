/* MXFP4 dots for the x86 sets (plain rows here; the packed-row form,
 * 16 rows in the lanes, is pack_x86.h's nbp_mxfp4). Included at the end of each kernels_<set>.c,
 * after kernels_x86.h and kernels_x86_q.h, with NB_MXFP4_SET_FN naming the
 * function that installs them; it uses the set's integer primitive
 *     __m256i nb_dot_us(__m256i u, __m256i s)   (u: bytes 0..31)
 * and the shared float pieces (nb_fstep, nb_reduce, nb_scales).
 *
 * Weights as bytes: one vpshufb looks the 32 codes of a block up in a
 * 16-byte table. The table holds the doubled E2M1 values plus 16
 * (4..28), unsigned bytes that every set's nb_dot_us takes (vpmaddubsw,
 * vpdpbusd, and vpdpbssd, for which they are also valid signed bytes), so
 * the integer sum comes out as isum + 16 * asum, and 16 times the
 * activation block's exact sum (simd_block_q8a.sum) is taken off again.
 *
 * Float work: per block (2^(e-128) * d_a) * (float)isum into lane b mod 8,
 * eight blocks per vector, as kernels_x86.h explains for the other types;
 * lanes of missing blocks at the end of a row get d_w = 0, d_a = 0 and
 * isum = 0, so they add +0. */
#ifndef NIBBLE_MXFP4_X86_H
#define NIBBLE_MXFP4_X86_H

#include "mxfp4.h"

#define NB_MX_BS sizeof(simd_block_mxfp4)

/* the 32 codes of the block at blk, in activation order, as table bytes */
NB_INLINE __m256i nb_mx_wexp(const unsigned char *blk)
{
    const __m256i lut = _mm256_setr_epi8(16, 17, 18, 19, 20, 22, 24, 28, 16, 15, 14, 13, 12, 10, 8, 4, 16, 17, 18,
                                         19, 20, 22, 24, 28, 16, 15, 14, 13, 12, 10, 8, 4);
    return _mm256_shuffle_epi8(lut, nb_nib32(blk + offsetof(simd_block_mxfp4, qs)));
}

/* 2^(e-128) for eight exponents (0..255 in each int32 lane), exactly as
 * simd_e8m0_half: (e-1) << 23 for e >= 2, 0x200000 << e for e = 0, 1. */
NB_INLINE __m256 nb_mx_scale(__m256i e)
{
    __m256i big = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    __m256i small = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(small, big, _mm256_cmpgt_epi32(e, _mm256_set1_epi32(1))));
}

/* Scales of the first m (1..8) blocks at wb, zero in the other lanes.
 * Built in registers (no array stored and reloaded as a vector, which
 * stalls store forwarding); nothing past block m-1 is read. */
NB_INLINE __m256 nb_mx_wscales(const unsigned char *wb, int m)
{
#define NB_MX_E(k) (k < m ? (int)wb[(k) * NB_MX_BS] : 0)
    __m256 s = nb_mx_scale(_mm256_setr_epi32(NB_MX_E(0), NB_MX_E(1), NB_MX_E(2), NB_MX_E(3), NB_MX_E(4),
                                             NB_MX_E(5), NB_MX_E(6), NB_MX_E(7)));
#undef NB_MX_E
    if (m == 8)
        return s;
    __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(m), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_and_ps(s, _mm256_castsi256_ps(live));
}

/* The first m (1..8) of the 8 blocks at wb against blocks b.. of nt
 * activation rows, into acc[t]; activation scales and sums from sc at
 * k0. The per-block int32 partial sums are folded with two rounds of
 * hadd, as nb_qgroup8 does (see kernels_x86_q.h). */
NB_INLINE void nb_mx_group8(const unsigned char *wb, int m, const char *a, size_t astride, size_t b, int nt,
                            const nb_scales *sc, size_t k0, __m256 acc[])
{
    const __m256i z = _mm256_setzero_si256();
    __m256i q[2][NB_MAXT];
    for (int half = 0; half < 2; half++) {
        __m256i h[2][NB_MAXT];
        for (int p = 0; p < 2; p++) {
            int k = 4 * half + 2 * p;
            __m256i w0 = k < m ? nb_mx_wexp(wb + (size_t)k * NB_MX_BS) : z;
            __m256i w1 = k + 1 < m ? nb_mx_wexp(wb + (size_t)(k + 1) * NB_MX_BS) : z;
            for (int t = 0; t < nt; t++) {
                const simd_block_q8a *y = (const simd_block_q8a *)(a + t * astride) + b + k;
                __m256i d0 = k < m ? nb_dot_us(w0, _mm256_loadu_si256((const __m256i *)y[0].qs)) : z;
                __m256i d1 = k + 1 < m ? nb_dot_us(w1, _mm256_loadu_si256((const __m256i *)y[1].qs)) : z;
                h[p][t] = _mm256_hadd_epi32(d0, d1);
            }
        }
        for (int t = 0; t < nt; t++)
            q[half][t] = _mm256_hadd_epi32(h[0][t], h[1][t]);
    }
    __m256 dw = nb_mx_wscales(wb, m);
    for (int t = 0; t < nt; t++) {
        __m256i isum = _mm256_add_epi32(_mm256_permute2x128_si256(q[0][t], q[1][t], 0x20),
                                        _mm256_permute2x128_si256(q[0][t], q[1][t], 0x31));
        __m256i as = _mm256_loadu_si256((const __m256i *)&sc->s[t][k0]);
        isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(as, 4));
        acc[t] = nb_fstep(acc[t], dw, _mm256_loadu_ps(&sc->d[t][k0]), isum);
    }
}

NB_GROUP8_DOTS(nb_mx_dot, nb_mx_group8, NB_MX_BS)

void NB_MXFP4_SET_FN(simd_kernel_set *s)
{
    s->dot[SIMD_MXFP4] = nb_mx_dot;
    s->dot_batch[SIMD_MXFP4] = nb_mx_dot_batch;
    s->dot_rows[SIMD_MXFP4] = nb_mx_dot_rows;
    s->dot_packed[SIMD_MXFP4] = nbp_mxfp4; /* packed rows: pack_x86.h */
}

#endif
