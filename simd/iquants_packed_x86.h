/* iq3_s on packed weight rows (layout in simd.h and simd/pack.c) for the
 * AVX-512 VNNI set only, with row r of a 16-row group in int32 lane r as
 * in kquants_packed_x86.h (whose NKP_* sizes and float step this uses;
 * included by lquants_x86.h after it). The AVX2-class sets keep
 * iquants_x86.h's row dot and give no packed kernel, so those sets never
 * pack iq3_s: with 8 lanes a gather fetches half as many grid entries and
 * the per-lane sign work doubles, which is the cost this form removes.
 *
 * A packed block (16 * 110 bytes): d (32 bytes), qs (16 chunks), qh (2),
 * signs (8), scales (1). Sub-block i (values 32i .. 32i+31) reads qs
 * chunks 2i, 2i+1 (grid index m of the sub-block, m = 0..7, is byte m%4
 * of chunk 2i + m/4), bit m of byte i%4 of qh chunk i/4 (the index's
 * bit 8), signs chunk i (bit 4m + j negates value 32i + 4m + j) and
 * bits 4i..4i+3 of the scales chunk (ls_i = 2 s + 1).
 *
 * Per grid index, one vpgatherdd fetches the 4-byte grid entry (four
 * magnitudes 1..15) of the same position in all 16 rows; the row's four
 * sign bits become a byte mask (vptestmb) and the magnitudes are negated
 * under it (masked subtract from zero), giving the signed codes c of
 * iquants.h. vpdpbusd wants its unsigned operand first, so the activation
 * goes in biased, a + 128 (1..255: q8k's |a| <= 127), broadcast, against
 * the signed codes, and 128 * (the codes' sum over the sub-block) comes
 * off once per block through the scales:
 *   sumi = sum_i ls_i * (c_i . (a_i + 128)) - 128 * sum_i ls_i * sum(c_i)
 * exactly iquants.c's integer, since every term is an exact integer:
 * a biased sub-block dot is at most 32 * 15 * 255 < 2^17, times 31,
 * times 8 < 2^25. The codes' sums are taken as bytes first (8 entries of
 * 4 codes: at most 8 * 15 = 120 per byte, no wrap) and then one vpdpbusd
 * against ones. The expansion (gathers, signs, sums) is shared by every
 * token of a pass; each token costs one vpdpbusd per grid entry. The
 * float step is the reference's: acc[b & 7] += (d * d_a) * (float)sumi,
 * the 8 slots combined as simd_reduce8 does, so the bits are the scalar
 * dot_rows'. */
#ifndef NIBBLE_IQUANTS_PACKED_X86_H
#define NIBBLE_IQUANTS_PACKED_X86_H

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#define NIP_HAVE 1

/* a4 (4 activation bytes) biased by 128 each, broadcast */
NBK_INLINE __m512i nip_abias(const int8_t *p)
{
    return _mm512_set1_epi32((int32_t)((uint32_t)nkp_a4(p) ^ 0x80808080u));
}

/* nt (1..NKP_T) tokens against one packed iq3_s block of 16 rows. */
NBK_INLINE void nip_block_iq3_s(const unsigned char *blk, const simd_block_q8k *const *y, int nt, float *const *acc)
{
    const unsigned char *qs = blk + 32, *qh = blk + 32 + 1024, *sg = blk + 32 + 1024 + 128;
    const __m512i sc = _mm512_loadu_si512(blk + 32 + 1024 + 128 + 512);
    const __m512i hi0 = _mm512_loadu_si512(qh), hi1 = _mm512_loadu_si512(qh + 64);
    const __m512i lo8 = _mm512_set1_epi32(0xff), bit8 = _mm512_set1_epi32(0x100);
    const __m512i ones = _mm512_set1_epi8(1), zero = _mm512_setzero_si512();
    __m512i sumi[NKP_T], bias = zero;
    for (int t = 0; t < nt; t++)
        sumi[t] = zero;
    for (int i = 0; i < 8; i++) {
        const __m512i q0 = _mm512_loadu_si512(qs + 128 * i), q1 = _mm512_loadu_si512(qs + 128 * i + 64);
        const __m512i s = _mm512_loadu_si512(sg + 64 * i);
        /* byte i%4 of the qh word at bits 8.. (index bit 8 for m = 0) */
        const int hs = 8 * (i & 3);
        const __m512i h = i < 4 ? hi0 : hi1;
        const __m512i hb = hs <= 8 ? _mm512_slli_epi32(h, (unsigned)(8 - hs)) : _mm512_srli_epi32(h, (unsigned)(hs - 8));
        __m512i dj[NKP_T], csum = zero;
        for (int t = 0; t < nt; t++)
            dj[t] = zero;
        for (int m = 0; m < 8; m++) {
            const __m512i q = m < 4 ? q0 : q1;
            const int qsh = 8 * (m & 3);
            __m512i lo = qsh ? _mm512_srli_epi32(q, (unsigned)qsh) : q;
            __m512i hm = _mm512_and_si512(m ? _mm512_srli_epi32(hb, (unsigned)m) : hb, bit8);
            /* (lo & 0xff) | hm: hm has only bit 8 */
            __m512i idx = _mm512_ternarylogic_epi32(lo8, lo, hm, 0xea);
            __m512i g = _mm512_i32gather_epi32(idx, (const void *)simd_iq3s_grid, 4);
            /* sign bits 4m..4m+3 of the lane: byte m/2, bits 4(m&1)+j
             * for byte j; vpshufb copies byte m/2 of each lane to all four */
            const int sb = m >> 1;
            __m512i sv = _mm512_shuffle_epi8(
                s, _mm512_broadcast_i32x4(_mm_setr_epi8((char)sb, (char)sb, (char)sb, (char)sb, (char)(4 + sb),
                                                        (char)(4 + sb), (char)(4 + sb), (char)(4 + sb), (char)(8 + sb),
                                                        (char)(8 + sb), (char)(8 + sb), (char)(8 + sb), (char)(12 + sb),
                                                        (char)(12 + sb), (char)(12 + sb), (char)(12 + sb))));
            const int b0 = 4 * (m & 1);
            __mmask64 neg = _mm512_test_epi8_mask(sv, _mm512_set1_epi32((int32_t)((1u << b0) | (2u << b0) << 8 |
                                                                                 (4u << b0) << 16 | (8u << b0) << 24)));
            __m512i c = _mm512_mask_sub_epi8(g, neg, zero, g);
            csum = _mm512_add_epi8(csum, c);
            for (int t = 0; t < nt; t++)
                dj[t] = _mm512_dpbusd_epi32(dj[t], nip_abias(y[t]->qs + 32 * i + 4 * m), c);
        }
        const __m512i ls = _mm512_add_epi32(
            _mm512_slli_epi32(_mm512_and_si512(i ? _mm512_srli_epi32(sc, (unsigned)(4 * i)) : sc,
                                               _mm512_set1_epi32(0x0f)), 1),
            _mm512_set1_epi32(1));
        bias = _mm512_add_epi32(bias, _mm512_mullo_epi32(_mm512_dpbusd_epi32(zero, ones, csum), ls));
        for (int t = 0; t < nt; t++)
            sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(dj[t], ls));
    }
    const nkp_f d = nkp_h2f(blk);
    bias = _mm512_slli_epi32(bias, 7);
    for (int t = 0; t < nt; t++) {
        nkp_v s = _mm512_sub_epi32(sumi[t], bias);
        nkp_float_step(d, NULL, &s, NULL, y[t]->d, acc[t]);
    }
}

/* ng groups of 16 packed iq3_s rows against nt tokens (loop order and
 * accumulators as nkp_packed's). */
static void nip_packed_iq3_s(size_t n, const void *p, size_t ng, const void *a, size_t as, size_t nt, float *out,
                             size_t os)
{
    const size_t nb = n / SIMD_QKK, bb = NKP_R * sizeof(simd_block_iq3_s);
    float acc[NKP_TCHUNK][8][NKP_R];
    for (size_t t0 = 0; t0 < nt; t0 += NKP_TCHUNK) {
        const size_t tn = nt - t0 < NKP_TCHUNK ? nt - t0 : NKP_TCHUNK;
        const char *at = (const char *)a + t0 * as;
        for (size_t g = 0; g < ng; g++) {
            const unsigned char *gp = (const unsigned char *)p + g * nb * bb;
            for (size_t t = 0; t < tn; t++)
                for (int l = 0; l < 8; l++)
                    nkp_fstore(acc[t][l], nkp_fzero());
            for (size_t b = 0; b < nb; b++) {
                const unsigned char *blk = gp + b * bb;
                if (NKP_PF > 0)
                    for (size_t o = 0; o < bb; o += 64)
                        _mm_prefetch((const char *)blk + NKP_PF + o, _MM_HINT_T0);
                for (size_t t1 = 0; t1 < tn; t1 += NKP_T) {
                    const simd_block_q8k *y[NKP_T];
                    float *ac[NKP_T];
                    int k = (int)(tn - t1 < NKP_T ? tn - t1 : NKP_T);
                    for (int t = 0; t < k; t++) {
                        y[t] = (const simd_block_q8k *)(at + (t1 + t) * as) + b;
                        ac[t] = acc[t1 + t][b & 7];
                    }
                    switch (k) {
                    case 1: nip_block_iq3_s(blk, y, 1, ac); break;
                    case 2: nip_block_iq3_s(blk, y, 2, ac); break;
                    case 3: nip_block_iq3_s(blk, y, 3, ac); break;
                    case 4: nip_block_iq3_s(blk, y, 4, ac); break;
                    case 5: nip_block_iq3_s(blk, y, 5, ac); break;
                    case 6: nip_block_iq3_s(blk, y, 6, ac); break;
                    case 7: nip_block_iq3_s(blk, y, 7, ac); break;
                    default: nip_block_iq3_s(blk, y, NKP_T, ac); break;
                    }
                }
            }
            /* simd_reduce8, lane by lane */
            for (size_t t = 0; t < tn; t++) {
                nkp_f r = nkp_fadd(nkp_fadd(nkp_fadd(nkp_fload(acc[t][0]), nkp_fload(acc[t][4])),
                                            nkp_fadd(nkp_fload(acc[t][2]), nkp_fload(acc[t][6]))),
                                   nkp_fadd(nkp_fadd(nkp_fload(acc[t][1]), nkp_fload(acc[t][5])),
                                            nkp_fadd(nkp_fload(acc[t][3]), nkp_fload(acc[t][7]))));
                nkp_fstore(out + (t0 + t) * os + g * NKP_R, r);
            }
        }
    }
}

#endif
#endif
