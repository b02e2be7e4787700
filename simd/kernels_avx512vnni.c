/* The avx512vnni kernel set: AVX-512 F/BW/VL + VNNI (Ice Lake and later,
 * Zen 4 and later); built with -mavx512f -mavx512bw -mavx512vl
 * -mavx512vnni -mfma -mf16c. Bit-identical to the scalar set: see
 * kernels_x86.h for how.
 *
 * The integer work runs on 512-bit vectors, two blocks per vector, sixteen
 * blocks per step; the float work stays eight lanes wide, because lane l
 * of the accumulator must take blocks b = l (mod 8) in increasing order:
 * a step adds blocks b..b+7, then b+8..b+15. */
#include "kernels_x86.h"

/* 256-bit forms (EVEX vpdpbusd) for the 8-block steps at the end of a row;
 * same meaning as in kernels_avxvnni.c. */
NB_INLINE __m256i nb_dot_us(__m256i u, __m256i s)
{
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}

NB_INLINE __m256i nb_dot_q8(__m256i w, __m256i a)
{
    return nb_dot_us(_mm256_xor_si256(w, _mm256_set1_epi8((char)0x80)), a);
}

#define NB_Q8_BIAS_SHIFT 7

/* Blocks k and k+1 (bytes bs apart) as 64 bytes in activation order:
 * block k in the low half, k+1 in the high half, codes as nb_wexp. */
NB_INLINE __m512i nb_wexp2(int type, const unsigned char *blk, size_t bs)
{
    if (type == SIMD_Q8_0) {
        const size_t o = offsetof(simd_block_q8_0, qs);
        __m256i lo = _mm256_loadu_si256((const __m256i *)(blk + o));
        __m256i hi = _mm256_loadu_si256((const __m256i *)(blk + bs + o));
        return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
    size_t o, oh;
    nb_code_offsets(type, &o, &oh);
    /* t = qs_k | qs_k+1; z = t | t>>4 = [lo_k lo_k+1 hi_k hi_k+1] as
     * 128-bit chunks; reorder the chunks to [lo_k hi_k lo_k+1 hi_k+1] */
    __m256i t = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(blk + o))),
                                        _mm_loadu_si128((const __m128i *)(blk + bs + o)), 1);
    __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(t), _mm256_srli_epi16(t, 4), 1);
    z = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
    z = _mm512_and_si512(z, _mm512_set1_epi8(0x0f));
    if (type == SIMD_Q5_0 || type == SIMD_Q5_1) {
        /* the two qh words are exactly a 64-bit byte mask: bit j says
         * byte j gets its 5th bit (adding 16 to a nibble is or-ing it) */
        __mmask64 k = (__mmask64)nb_ld32(blk + oh) | (__mmask64)nb_ld32(blk + bs + oh) << 32;
        z = _mm512_mask_add_epi8(z, k, z, _mm512_set1_epi8(0x10));
    }
    return z;
}

NB_INLINE __m512i nb_aload2(const simd_block_q8a *y)
{
    __m256i lo = _mm256_loadu_si256((const __m256i *)y[0].qs);
    __m256i hi = _mm256_loadu_si256((const __m256i *)y[1].qs);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

NB_INLINE __m512i nb_bdot2(int type, __m512i w, __m512i a)
{
    if (type == SIMD_Q8_0)
        w = _mm512_xor_si512(w, _mm512_set1_epi8((char)0x80));
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, a);
}

/* Scales of 16 consecutive weight blocks without 16 scalar inserts: the
 * f16 d (and m) of 4 blocks lie within 128 bytes, so one two-source word
 * permute picks them out of two loads; four such, blended, give d0..d15
 * in words 0-15 and m0..m15 in words 16-31. The index: word k*bs/2 (d of
 * block k of the four), +1 for m; repeated so every group's result
 * already sits in its own positions. The second load is masked to the
 * words the permute uses, so nothing past the 16th block is read. */
#define NB_IX(h)                                                                                    \
    {                                                                                               \
        0, h, 2 * h, 3 * h, 0, h, 2 * h, 3 * h, 0, h, 2 * h, 3 * h, 0, h, 2 * h, 3 * h, 1, h + 1,   \
            2 * h + 1, 3 * h + 1, 1, h + 1, 2 * h + 1, 3 * h + 1, 1, h + 1, 2 * h + 1, 3 * h + 1, 1, \
            h + 1, 2 * h + 1, 3 * h + 1                                                             \
    }
static const short nb_ix_q8_0[32] = NB_IX(17), nb_ix_q4_0[32] = NB_IX(9), nb_ix_q4_1[32] = NB_IX(10),
                   nb_ix_q5_0[32] = NB_IX(11), nb_ix_q5_1[32] = NB_IX(12);
#undef NB_IX

/* For m < 16 (the last group of a row) nothing at or past block m is
 * read: each load is masked to the bytes of blocks 0..m-1, so the lanes
 * of the absent blocks pick zeros. */
NB_INLINE __mmask64 nb_bytes_mask(long cnt)
{
    return cnt <= 0 ? 0 : cnt >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << cnt) - 1;
}

NB_INLINE void nb_wscales16(int type, const unsigned char *wb, int m, __m256 dw[2], __m256 mw[2])
{
    const size_t bs = nb_bbytes(type);
    const short *ix = type == SIMD_Q8_0 ? nb_ix_q8_0 : type == SIMD_Q4_0 ? nb_ix_q4_0 : type == SIMD_Q4_1 ? nb_ix_q4_1
                      : type == SIMD_Q5_0 ? nb_ix_q5_0 : nb_ix_q5_1;
    const __m512i idx = _mm512_loadu_si512(ix);
    const int last = 3 * (int)(bs / 2) + nb_has_min(type); /* last word used */
    const __mmask32 km = last >= 32 ? (__mmask32)((1ull << (last - 31)) - 1) : 0;
    __m512i r = _mm512_setzero_si512();
    for (int j = 0; j < 4; j++) {
        const unsigned char *p = wb + (size_t)(4 * j) * bs;
        __m512i za, zb;
        if (m == 16) {
            za = _mm512_loadu_si512(p);
            zb = km ? _mm512_maskz_loadu_epi16(km, p + 64) : _mm512_setzero_si512();
        } else {
            long left = (long)((size_t)m * bs) - (long)(4 * j) * (long)bs; /* bytes of blocks < m from p */
            za = _mm512_maskz_loadu_epi8(nb_bytes_mask(left), p);
            zb = km ? _mm512_maskz_loadu_epi8(nb_bytes_mask(left - 64) & nb_bytes_mask(2 * (last - 31)), p + 64)
                    : _mm512_setzero_si512();
        }
        __m512i g = _mm512_permutex2var_epi16(za, idx, zb);
        r = j == 0 ? g : _mm512_mask_blend_epi16((__mmask32)(0x000f000fu << (4 * j)), r, g);
    }
    dw[0] = _mm256_cvtph_ps(_mm512_castsi512_si128(r));
    dw[1] = _mm256_cvtph_ps(_mm512_extracti32x4_epi32(r, 1));
    if (nb_has_min(type)) {
        mw[0] = _mm256_cvtph_ps(_mm512_extracti32x4_epi32(r, 2));
        mw[1] = _mm256_cvtph_ps(_mm512_extracti32x4_epi32(r, 3));
    } else {
        mw[0] = mw[1] = _mm256_setzero_ps();
    }
}

/* Blocks b..b+15. Each dpbusd leaves a block's sum spread over 8 int32 (two
 * 128-bit chunks); three rounds of (shuffle, shuffle, add) fold sixteen
 * such blocks into one vector with one sum per lane:
 *  1. pairs of vectors, chunk-wise: v[p] chunk c = block 4p+c (4 lanes)
 *  2. unpack 32-bit within chunks: two blocks per chunk, 2 lanes each
 *  3. unpack 64-bit: chunk c holds blocks c, 4+c, 8+c, 12+c, 1 lane each
 * and one permute puts block L in lane L. */
/* Blocks k, k+1 of which only the first c (0..2) exist: the absent ones
 * read nothing and are zero (so are their dots). */
NB_INLINE __m512i nb_wexp2m(int type, const unsigned char *blk, size_t bs, int c)
{
    return c >= 2 ? nb_wexp2(type, blk, bs) : c == 1 ? _mm512_zextsi256_si512(nb_wexp(type, blk)) : _mm512_setzero_si512();
}

NB_INLINE __m512i nb_aload2m(const simd_block_q8a *y, int c)
{
    return c >= 2 ? nb_aload2(y) : c == 1 ? _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)y->qs)) : _mm512_setzero_si512();
}

/* m (1..16; a constant 16 in the body of a row) of the blocks exist: the
 * others are zeros throughout, as in nb_qgroup8. */
NB_INLINE void nb_qgroup16(int type, const unsigned char *wb, int m, const char *a, size_t astride, size_t b, int nt,
                           const nb_scales *sc, size_t k0, __m256 acc[])
{
    const size_t bs = nb_bbytes(type);
    __m512i v[4][NB_MAXT];
    for (int p = 0; p < 4; p++) {
        int c0 = m - 4 * p, c1 = m - 4 * p - 2;
        __m512i w0 = nb_wexp2m(type, wb + (size_t)(4 * p) * bs, bs, c0);
        __m512i w1 = nb_wexp2m(type, wb + (size_t)(4 * p + 2) * bs, bs, c1);
        for (int t = 0; t < nt; t++) {
            const simd_block_q8a *y = (const simd_block_q8a *)(a + t * astride) + b + 4 * p;
            __m512i z0 = nb_bdot2(type, w0, nb_aload2m(y, c0));
            __m512i z1 = nb_bdot2(type, w1, nb_aload2m(y + 2, c1));
            v[p][t] = _mm512_add_epi32(_mm512_shuffle_i32x4(z0, z1, _MM_SHUFFLE(2, 0, 2, 0)),
                                       _mm512_shuffle_i32x4(z0, z1, _MM_SHUFFLE(3, 1, 3, 1)));
        }
    }
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    __m256i lo[NB_MAXT], hi[NB_MAXT];
    for (int t = 0; t < nt; t++) {
        __m512i x01 = _mm512_add_epi32(_mm512_unpacklo_epi32(v[0][t], v[1][t]),
                                       _mm512_unpackhi_epi32(v[0][t], v[1][t]));
        __m512i x23 = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2][t], v[3][t]),
                                       _mm512_unpackhi_epi32(v[2][t], v[3][t]));
        __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi64(x01, x23), _mm512_unpackhi_epi64(x01, x23));
        u = _mm512_permutexvar_epi32(order, u);
        lo[t] = _mm512_castsi512_si256(u);
        hi[t] = _mm512_extracti64x4_epi64(u, 1);
    }
    __m256 dw[2], mw[2];
    nb_wscales16(type, wb, m, dw, mw);
    for (int t = 0; t < nt; t++) {
        const float *da = &sc->d[t][k0];
        const int32_t *as = &sc->s[t][k0];
        acc[t] = nb_step8(type, NB_Q8_BIAS_SHIFT, acc[t], dw[0], mw[0], _mm256_loadu_ps(da), lo[t],
                          _mm256_loadu_si256((const __m256i *)as));
        acc[t] = nb_step8(type, NB_Q8_BIAS_SHIFT, acc[t], dw[1], mw[1], _mm256_loadu_ps(da + 8), hi[t],
                          _mm256_loadu_si256((const __m256i *)(as + 8)));
    }
}

/* ---- prefill: sixteen rows in the lanes ----
 *
 * With many tokens per call, the blocks-in-lanes form above spends most
 * of its time folding each block's 8 or 16 partial int32 sums into one.
 * Here the sixteen lanes of a vector are sixteen weight rows instead:
 * dword k of block b of each row is put in lane r of V[k] (loads and a
 * transpose, once per block for all tokens), and dpbusd(V[k], dword k of the token's block
 * broadcast) leaves in lane r row r's partial sum over those 4 bytes;
 * eight such (k = 0..7) give the exact block sum of all sixteen rows with
 * no horizontal work at all.
 *
 * The float order is unchanged: each (row, token) keeps its own 8
 * accumulators, acc[t][b mod 8] lane r, fed blocks in increasing b with
 * the reference's term (d_w*d_a)*isum [+ (m_w*d_a)*asum]; the tile of
 * accumulators (tokens x 8 x 16 rows) lives in an L1-sized buffer, and at
 * the end simd_reduce8's order is applied lane-wise, sixteen rows at once.
 * Rows past nr (the last tile) are masked out of the gathers, read
 * nothing and are not stored. */

#define NB_LT 32     /* tokens per pass over a row tile */
#define NB_PRE 8192  /* per-(token, block) constants cached at once */

/* Per (block, token): the integer bias to start the block sum at, -bias *
 * asum (q8_0: +128 from the xor; q4_0: 8; q5_0: 16), or, for the types
 * with a minimum, (float)asum's bits. */
NB_INLINE void nb_lane_pre(int type, int32_t *pre, const char *a, size_t astride, int nt, size_t s0, size_t s1)
{
    int sh = type == SIMD_Q8_0 ? 7 : nb_bias_shift(type);
    for (size_t b = s0; b < s1; b++)
        for (int t = 0; t < nt; t++) {
            int32_t s = ((const simd_block_q8a *)(a + (size_t)t * astride))[b].sum;
            int32_t *d = &pre[(b - s0) * (size_t)nt + (size_t)t];
            if (nb_has_min(type)) {
                float f = (float)s;
                memcpy(d, &f, 4);
            } else {
                *d = -(int32_t)((uint32_t)s << sh);
            }
        }
}

/* 4x4 transposes of dwords within each 128-bit chunk: if L[j] chunk i
 * holds row 4i+j's dwords 0..3, V[k] dword 4i+j (lane r = 4i+j) is row
 * r's dword k. */
NB_INLINE void nb_tr4(const __m512i L[4], __m512i V[4])
{
    __m512i t0 = _mm512_unpacklo_epi32(L[0], L[1]), t1 = _mm512_unpackhi_epi32(L[0], L[1]);
    __m512i t2 = _mm512_unpacklo_epi32(L[2], L[3]), t3 = _mm512_unpackhi_epi32(L[2], L[3]);
    V[0] = _mm512_unpacklo_epi64(t0, t2);
    V[1] = _mm512_unpackhi_epi64(t0, t2);
    V[2] = _mm512_unpacklo_epi64(t1, t3);
    V[3] = _mm512_unpackhi_epi64(t1, t3);
}

/* 16 bytes at p0, p1, p2, p3 as the four 128-bit chunks of a vector. */
NB_INLINE __m512i nb_ld4x16(const unsigned char *p0, const unsigned char *p1, const unsigned char *p2,
                            const unsigned char *p3)
{
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)p0));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)p1), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)p2), 2);
    return _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)p3), 3);
}

/* Block b of 16 rows (row r's block at rp[r]; rows past the tile point
 * at zeros and are never stored), transposed: V[k] lane r = row r's
 * codes 4k..4k+3 as unsigned bytes (q8_0 biased by 128), dw / mw lane r =
 * its scales (from a gather at wb + lane index, masked to the tile's
 * rows). The codes are loaded 16 bytes a row, 4 rows a vector, and
 * transposed with unpacks: cheaper than gathering them. */
NB_INLINE void nb_lane_wblock(int type, const unsigned char *const rp[16], const unsigned char *wb, __m512i vidx,
                              __mmask16 km, __m512i V[8], __m512 *dw, __m512 *mw)
{
    const __m512i z = _mm512_setzero_si512();
    __m512i h = _mm512_mask_i32gather_epi32(z, km, vidx, wb, 1); /* d (and m) */
    *dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h));
    *mw = nb_has_min(type) ? _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h, 16))) : _mm512_setzero_ps();
    __m512i L[4], H[4];
    if (type == SIMD_Q8_0) {
        const size_t o = offsetof(simd_block_q8_0, qs);
        for (int j = 0; j < 4; j++) {
            __m512i A = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(rp[j] + o))),
                                           _mm256_loadu_si256((const __m256i *)(rp[4 + j] + o)), 1);
            __m512i B = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(rp[8 + j] + o))),
                _mm256_loadu_si256((const __m256i *)(rp[12 + j] + o)), 1);
            L[j] = _mm512_shuffle_i32x4(A, B, _MM_SHUFFLE(2, 0, 2, 0));
            H[j] = _mm512_shuffle_i32x4(A, B, _MM_SHUFFLE(3, 1, 3, 1));
        }
        nb_tr4(L, V);
        nb_tr4(H, V + 4);
        for (int k = 0; k < 8; k++)
            V[k] = _mm512_xor_si512(V[k], _mm512_set1_epi8((char)0x80));
        return;
    }
    size_t o, oh;
    nb_code_offsets(type, &o, &oh);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    for (int j = 0; j < 4; j++) {
        __m512i g = nb_ld4x16(rp[j] + o, rp[4 + j] + o, rp[8 + j] + o, rp[12 + j] + o);
        L[j] = _mm512_and_si512(g, m4);
        H[j] = _mm512_and_si512(_mm512_srli_epi16(g, 4), m4);
    }
    nb_tr4(L, V);
    nb_tr4(H, V + 4);
    if (type == SIMD_Q5_0 || type == SIMD_Q5_1) {
        /* value j's 5th bit is bit j of qh: V[k] byte i (value 4k+i) takes
         * bit 4(k&1)+i of qh byte k>>1, copied to all four bytes of the
         * dword by a shuffle and picked out by a test */
        __m512i qh = _mm512_mask_i32gather_epi32(z, km, vidx, wb + oh, 1);
        const __m512i bit = _mm512_set1_epi32(0x08040201);
        const __m512i base = _mm512_setr_epi32(0, 0x04040404, 0x08080808, 0x0c0c0c0c, 0, 0x04040404, 0x08080808,
                                               0x0c0c0c0c, 0, 0x04040404, 0x08080808, 0x0c0c0c0c, 0, 0x04040404,
                                               0x08080808, 0x0c0c0c0c);
        for (int k = 0; k < 8; k++) {
            __m512i sel = _mm512_shuffle_epi8(qh, _mm512_add_epi32(base, _mm512_set1_epi32((k >> 1) * 0x01010101)));
            __mmask64 on = _mm512_test_epi8_mask(sel, (k & 1) ? _mm512_slli_epi32(bit, 4) : bit);
            V[k] = _mm512_mask_add_epi8(V[k], on, V[k], _mm512_set1_epi8(0x10));
        }
    }
}

/* Rows r0..r0+rn-1 (rn <= 16) against tokens 0..nt-1 (nt <= NB_LT). */
NB_INLINE void nb_lane_tile(int type, size_t nb, const unsigned char *w, size_t ws, int rn, const char *a,
                            size_t astride, int nt, float *out, size_t os, int32_t *pre, size_t seg, int pre_done,
                            float (*acc)[8][16])
{
    const size_t bs = nb_bbytes(type);
    const __m512i vidx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32((int)ws));
    const __mmask16 km = (__mmask16)((1u << rn) - 1);
    /* rows past the tile read a zero block (larger than any type's)
     * instead of memory past the matrix */
    static const unsigned char zeros[64] __attribute__((aligned(64)));
    const unsigned char *rp[16];
    for (int t = 0; t < nt; t++)
        for (int l = 0; l < 8; l++)
            _mm512_store_ps(acc[t][l], _mm512_setzero_ps());
    for (size_t s0 = 0; s0 < nb; s0 += seg) {
        size_t s1 = nb - s0 < seg ? nb : s0 + seg;
        if (!pre_done)
            nb_lane_pre(type, pre, a, astride, nt, s0, s1);
        for (size_t b = s0; b < s1; b++) {
            __m512i V[8];
            __m512 dw, mw;
            for (int r = 0; r < 16; r++)
                rp[r] = r < rn ? w + (size_t)r * ws + b * bs : zeros;
            nb_lane_wblock(type, rp, w + b * bs, vidx, km, V, &dw, &mw);
            const int32_t *pb = pre + (b - s0) * (size_t)nt;
            float(*al)[16];
            for (int t = 0; t < nt; t++) {
                const simd_block_q8a *y = (const simd_block_q8a *)(a + (size_t)t * astride) + b;
                __m512i i0 = nb_has_min(type) ? _mm512_setzero_si512() : _mm512_set1_epi32(pb[t]);
                __m512i i1 = _mm512_setzero_si512();
                for (int k = 0; k < 8; k += 2) {
                    i0 = _mm512_dpbusd_epi32(i0, V[k], _mm512_set1_epi32((int)nb_ld32((const unsigned char *)y->qs + 4 * k)));
                    i1 = _mm512_dpbusd_epi32(i1, V[k + 1],
                                             _mm512_set1_epi32((int)nb_ld32((const unsigned char *)y->qs + 4 * k + 4)));
                }
                __m512 da = _mm512_set1_ps(y->d);
                __m512 term = _mm512_mul_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(_mm512_add_epi32(i0, i1)));
                if (nb_has_min(type)) {
                    float af;
                    memcpy(&af, &pb[t], 4);
                    term = _mm512_add_ps(term, _mm512_mul_ps(_mm512_mul_ps(mw, da), _mm512_set1_ps(af)));
                }
                al = acc[t];
                _mm512_store_ps(al[b & 7], _mm512_add_ps(_mm512_load_ps(al[b & 7]), term));
            }
        }
    }
    for (int t = 0; t < nt; t++) {
        float(*al)[16] = acc[t];
        __m512 r = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_load_ps(al[0]), _mm512_load_ps(al[4])),
                                               _mm512_add_ps(_mm512_load_ps(al[2]), _mm512_load_ps(al[6]))),
                                 _mm512_add_ps(_mm512_add_ps(_mm512_load_ps(al[1]), _mm512_load_ps(al[5])),
                                               _mm512_add_ps(_mm512_load_ps(al[3]), _mm512_load_ps(al[7]))));
        _mm512_mask_storeu_ps(out + (size_t)t * os, km, r);
    }
}

NB_INLINE void nb_lane_rows(int type, size_t n, const void *w, size_t ws, size_t nr, const void *a, size_t astride,
                            size_t nt, float *out, size_t os)
{
    float acc[NB_LT][8][16] __attribute__((aligned(64)));
    int32_t pre[NB_PRE];
    const size_t nb = n / SIMD_QK;
    for (size_t t0 = 0; t0 < nt; t0 += NB_LT) {
        int tn = (int)(nt - t0 < NB_LT ? nt - t0 : NB_LT);
        const char *at = (const char *)a + t0 * astride;
        size_t seg = NB_PRE / (size_t)tn;
        int pre_done = nb <= seg;
        if (pre_done)
            nb_lane_pre(type, pre, at, astride, tn, 0, nb);
        for (size_t r0 = 0; r0 < nr; r0 += 16) {
            int rn = (int)(nr - r0 < 16 ? nr - r0 : 16);
            nb_lane_tile(type, nb, (const unsigned char *)w + r0 * ws, ws, rn, at, astride, tn, out + t0 * os + r0, os,
                         pre, seg, pre_done, acc);
        }
    }
}

/* The lane form pays when the transposed weights serve enough tokens and
 * rows (measured: with one token it loses in a real model, where its 16
 * interleaved row streams defeat the hardware prefetch); the row stride
 * must fit the gathers' int32 offsets. */
#define NB_LANE_ROWS(type, n, w, ws, nr, a, as, nt, out, os)                                                       \
    ((nt) >= 4 && (nr) >= 8 && (ws) <= (size_t)0x7fffffff / 16 ? (nb_lane_rows(type, n, w, ws, nr, a, as, nt, out, os), 1) : 0)

/* ---- packed rows (pack_x86.h): sixteen rows in the lanes of a zmm ---- */
#define NBP_W 16
typedef __m512i nbp_vi;
typedef __m512 nbp_vf;
NB_INLINE nbp_vi nbp_ldi(const unsigned char *p) { return _mm512_loadu_si512(p); }
NB_INLINE nbp_vi nbp_and8(nbp_vi v, int c) { return _mm512_and_si512(v, _mm512_set1_epi8((char)c)); }
NB_INLINE nbp_vi nbp_srl4(nbp_vi v) { return _mm512_srli_epi16(v, 4); }
NB_INLINE nbp_vi nbp_addi(nbp_vi a, nbp_vi b) { return _mm512_add_epi32(a, b); }
NB_INLINE nbp_vi nbp_zeroi(void) { return _mm512_setzero_si512(); }
NB_INLINE nbp_vi nbp_set1i(int32_t v) { return _mm512_set1_epi32(v); }
/* the 4 activation bytes as a {1to16} broadcast operand of vpdpbusd */
NB_INLINE nbp_vi nbp_dot(nbp_vi acc, nbp_vi u, const unsigned char *p)
{
    return _mm512_dpbusd_epi32(acc, u, _mm512_set1_epi32((int)nb_ld32(p)));
}
/* q8_0 codes made unsigned by flipping the sign bit (+128 each) */
NB_INLINE nbp_vi nbp_q8w(nbp_vi v) { return _mm512_xor_si512(v, _mm512_set1_epi8((char)0x80)); }
NB_INLINE nbp_vi nbp_dotq8(nbp_vi acc, nbp_vi w, const unsigned char *p) { return nbp_dot(acc, w, p); }
#define NBP_Q8_BIAS_SHIFT 7
/* The qh byte holding the bits of chunk c (byte 2*hi + c/2 of each lane's
 * dword) copied to all four bytes of the dword; byte i then tests bit
 * 4*(c&1) + i, and a set bit adds 16 to that byte's code. */
NB_INLINE nbp_vi nbp_bit5(nbp_vi v, nbp_vi qh, int c, int hi)
{
    int j = 2 * hi + (c >> 1);
    const __m512i base = _mm512_setr_epi32(0, 0x04040404, 0x08080808, 0x0c0c0c0c, 0, 0x04040404, 0x08080808,
                                           0x0c0c0c0c, 0, 0x04040404, 0x08080808, 0x0c0c0c0c, 0, 0x04040404,
                                           0x08080808, 0x0c0c0c0c);
    __m512i s = _mm512_shuffle_epi8(qh, _mm512_add_epi32(base, _mm512_set1_epi32(j * 0x01010101)));
    __mmask64 on = _mm512_test_epi8_mask(s, _mm512_set1_epi32((int)(0x08040201u << (4 * (c & 1)))));
    return _mm512_mask_add_epi8(v, on, v, _mm512_set1_epi8(0x10));
}
NB_INLINE nbp_vf nbp_cvtph(const unsigned char *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
NB_INLINE nbp_vi nbp_lut(nbp_vi v, __m128i t) { return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(t), v); }
/* (e-1) << 23 for e >= 2, else the subnormal 0x200000 << e */
NB_INLINE nbp_vf nbp_e8m0(const unsigned char *p)
{
    __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
    __m512i big = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    __m512i small = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(e, _mm512_set1_epi32(1)), small, big));
}
NB_INLINE nbp_vf nbp_cvtf(nbp_vi v) { return _mm512_cvtepi32_ps(v); }
NB_INLINE nbp_vf nbp_mulf(nbp_vf a, nbp_vf b) { return _mm512_mul_ps(a, b); }
NB_INLINE nbp_vf nbp_addf(nbp_vf a, nbp_vf b) { return _mm512_add_ps(a, b); }
NB_INLINE nbp_vf nbp_zerof(void) { return _mm512_setzero_ps(); }
NB_INLINE nbp_vf nbp_set1f(float v) { return _mm512_set1_ps(v); }
NB_INLINE void nbp_storef(float *p, nbp_vf v) { _mm512_storeu_ps(p, v); }
#include "pack_x86.h"

#define NB_HAVE_GROUP16 1
#define NB_SET_FN simd_set_avx512vnni
#include "kernels_x86_q.h"

#define NBK_SET_FN simd_set_kquants_avx512vnni
#include "kquants_x86.h"
#define NB_MXFP4_SET_FN simd_set_mxfp4_avx512vnni
#include "mxfp4_x86.h"
#define NBL_SET_FN simd_set_lquants_avx512vnni
#include "lquants_x86.h"
