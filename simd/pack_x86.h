/* Packed-row dots (dot_packed) for the 32-block types on x86: q8_0, q4_0,
 * q4_1, q5_0, q5_1 and mxfp4 (this last one installed by mxfp4_x86.h). Included by each kernels_<set>.c after kernels_x86.h,
 * once the file has defined the vector primitives below; written once on
 * those, so the AVX-512 set (16 rows in a zmm) and the AVX2-class sets (8
 * rows in a ymm, the group taken in two halves) share every line.
 *
 * The packed layout (simd.h, pack.c) keeps a group of 16 rows in one
 * stream: per block, each 2-byte field is 16 f16s in row order, and each
 * 4-byte chunk c of qs (or qh) is 16 dwords, row r's in dword r. So one
 * vector load gives, in lane r, 4 code bytes of row r: the lanes ARE the
 * rows, and vpdpbusd against the activation's 4 matching bytes
 * (broadcast) adds each row's 4 products into its own lane. Eight such
 * (k = 0..7: codes of elements 4k..4k+3) give each row's exact block sum,
 * with no horizontal work.
 *
 * Float order (kernels_scalar.c): per (row, token, block) the term
 * (d_w*d_a)*(float)isum [+ (m_w*d_a)*(float)asum], added to the
 * accumulator of slot b mod 8, blocks in increasing b, the 8 slots
 * combined as simd_reduce8 does. Here acc[b mod 8] is a vector whose lane
 * r is row r's slot, so all of that is vertical and the same bits come out.
 *
 * Primitives a set defines (NBP_W lanes, rows in lanes):
 *   NBP_W                 8 or 16
 *   nbp_vi, nbp_vf        integer / float vector of NBP_W 32-bit lanes
 *   nbp_ldi(p)            NBP_W*4 bytes
 *   nbp_and8(v, c)        v & c in every byte
 *   nbp_srl4(v)           v >> 4 in 16-bit lanes (then masked by the caller)
 *   nbp_addi, nbp_zeroi, nbp_set1i
 *   nbp_dot(acc, u, p)    acc + per lane sum of 4 u8 (u) x 4 s8 (at p, broadcast)
 *   nbp_q8w(v)            q8_0 code bytes made ready for nbp_dotq8
 *   nbp_dotq8(acc, w, p)  acc + per lane sum of 4 codes x 4 s8 at p, plus
 *                         2^NBP_Q8_BIAS_SHIFT * their sum (-1: no bias)
 *   nbp_bit5(v, qh, c, hi) v with 0x10 added to byte i of lane r when bit
 *                         16*hi + 4c + i of qh lane r is set (q5 types)
 *   nbp_cvtph(p)          NBP_W f16 at p to floats (exact)
 *   nbp_lut(v, t)         byte i of v (0..15) replaced by byte v_i of the
 *                         16-byte table t (vpshufb in each 128-bit lane)
 *   nbp_e8m0(p)           NBP_W E8M0 bytes at p to 2^(e-128), exactly as
 *                         simd_e8m0_half (mxfp4.h)
 *   nbp_cvtf, nbp_mulf, nbp_addf, nbp_zerof, nbp_set1f, nbp_storef
 */
#ifndef NIBBLE_PACK_X86_H
#define NIBBLE_PACK_X86_H

/* Software prefetch distance of the decode loop, in bytes ahead of the
 * 8 blocks being read. The hardware prefetcher alone left a q4_0 matrix
 * larger than L3 at ~22 GB/s; 8 KiB ahead gave ~40 (nibble_kbench -n 2048
 * -r 32768 -b 1, this Zen 5 machine; 4 KiB ~36, 16 KiB ~40 but noisier).
 * 0 turns it off. */
#ifndef NBP_PF
#define NBP_PF 8192
#endif

#ifndef NBP_W
/* The AVX2-class sets: 8 rows in the lanes of a ymm, a group in two
 * halves (rows 0-7, then 8-15: the second pass finds the group in cache).
 * Each set file still defines nbp_dot, nbp_q8w, nbp_dotq8 and
 * NBP_Q8_BIAS_SHIFT (its own integer dot). */
#define NBP_W 8
typedef __m256i nbp_vi;
typedef __m256 nbp_vf;
NB_INLINE nbp_vi nbp_ldi(const unsigned char *p) { return _mm256_loadu_si256((const __m256i *)p); }
NB_INLINE nbp_vi nbp_and8(nbp_vi v, int c) { return _mm256_and_si256(v, _mm256_set1_epi8((char)c)); }
NB_INLINE nbp_vi nbp_srl4(nbp_vi v) { return _mm256_srli_epi16(v, 4); }
NB_INLINE nbp_vi nbp_addi(nbp_vi a, nbp_vi b) { return _mm256_add_epi32(a, b); }
NB_INLINE nbp_vi nbp_zeroi(void) { return _mm256_setzero_si256(); }
NB_INLINE nbp_vi nbp_set1i(int32_t v) { return _mm256_set1_epi32(v); }
/* as the AVX-512 form (kernels_avx512vnni.c), with the test done as
 * (s & bit) == bit, which leaves 0xff in the bytes to get 16 */
NB_INLINE nbp_vi nbp_bit5(nbp_vi v, nbp_vi qh, int c, int hi)
{
    int j = 2 * hi + (c >> 1);
    const __m256i base = _mm256_setr_epi32(0, 0x04040404, 0x08080808, 0x0c0c0c0c, 0, 0x04040404, 0x08080808,
                                           0x0c0c0c0c);
    __m256i s = _mm256_shuffle_epi8(qh, _mm256_add_epi32(base, _mm256_set1_epi32(j * 0x01010101)));
    __m256i bit = _mm256_set1_epi32((int)(0x08040201u << (4 * (c & 1))));
    __m256i on = _mm256_cmpeq_epi8(_mm256_and_si256(s, bit), bit);
    return _mm256_or_si256(v, _mm256_and_si256(on, _mm256_set1_epi8(0x10)));
}
NB_INLINE nbp_vf nbp_cvtph(const unsigned char *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
NB_INLINE nbp_vi nbp_lut(nbp_vi v, __m128i t) { return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(t), v); }
/* (e-1) << 23 for e >= 2, else the subnormal 0x200000 << e */
NB_INLINE nbp_vf nbp_e8m0(const unsigned char *p)
{
    __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    __m256i big = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    __m256i small = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(small, big, _mm256_cmpgt_epi32(e, _mm256_set1_epi32(1))));
}
NB_INLINE nbp_vf nbp_cvtf(nbp_vi v) { return _mm256_cvtepi32_ps(v); }
NB_INLINE nbp_vf nbp_mulf(nbp_vf a, nbp_vf b) { return _mm256_mul_ps(a, b); }
NB_INLINE nbp_vf nbp_addf(nbp_vf a, nbp_vf b) { return _mm256_add_ps(a, b); }
NB_INLINE nbp_vf nbp_zerof(void) { return _mm256_setzero_ps(); }
NB_INLINE nbp_vf nbp_set1f(float v) { return _mm256_set1_ps(v); }
NB_INLINE void nbp_storef(float *p, nbp_vf v) { _mm256_storeu_ps(p, v); }
#endif

/* MXFP4 codes as unsigned bytes: the doubled E2M1 values plus 16 (4..28;
 * mxfp4_x86.h does the same for plain rows), valid u8 for vpdpbusd and
 * vpmaddubsw and valid s8 for vpdpbssd. The 16 is taken off as 16 times
 * the activation block's sum, like q5_0's bias. */
#define NBP_MX_BIAS_SHIFT 4
NB_INLINE __m128i nbp_mx_table(void)
{
    return _mm_setr_epi8(16, 17, 18, 19, 20, 22, 24, 28, 16, 15, 14, 13, 12, 10, 8, 4);
}

/* Byte offsets of the fields inside one packed block of a group (16 rows),
 * for the part of the rows (half h of NBP_W lanes) a vector holds. */
typedef struct {
    size_t d, m, qh, qs; /* m, qh: 0 when absent */
} nbp_offs;

NB_INLINE nbp_offs nbp_layout(int type, int h)
{
    nbp_offs o = {0, 0, 0, 0};
    size_t f = (size_t)h * NBP_W * 2, c = (size_t)h * NBP_W * 4; /* f16 field / chunk offset of half h */
    o.d = f;
    switch (type) {
    case SIMD_Q4_1: o.m = 32 + f; o.qs = 64 + c; break;
    case SIMD_Q5_0: o.qh = 32 + c; o.qs = 96 + c; break;
    case SIMD_Q5_1: o.m = 32 + f; o.qh = 64 + c; o.qs = 128 + c; break;
    case SIMD_MXFP4: o.d = (size_t)h * NBP_W; o.qs = 16 + c; break; /* one exponent byte per row */
    default: o.qs = 32 + c; break; /* q4_0, q8_0 */
    }
    return o;
}

/* One packed block: W[k] lane r = row r's codes of elements 4k..4k+3 (as
 * the set's dot wants them), dw / mw lane r = its scales. */
NB_INLINE void nbp_wblock(int type, const unsigned char *blk, int h, nbp_vi W[8], nbp_vf *dw, nbp_vf *mw)
{
    const nbp_offs o = nbp_layout(type, h);
    if (type == SIMD_MXFP4) {
        /* chunk c as q4_0's, each nibble then looked up */
        const __m128i lut = nbp_mx_table();
        *dw = nbp_e8m0(blk + o.d);
        *mw = nbp_zerof();
        for (int c = 0; c < 4; c++) {
            nbp_vi q = nbp_ldi(blk + o.qs + (size_t)c * 64);
            W[c] = nbp_lut(nbp_and8(q, 0x0f), lut);
            W[4 + c] = nbp_lut(nbp_and8(nbp_srl4(q), 0x0f), lut);
        }
        return;
    }
    *dw = nbp_cvtph(blk + o.d);
    *mw = nb_has_min(type) ? nbp_cvtph(blk + o.m) : nbp_zerof();
    if (type == SIMD_Q8_0) {
        for (int k = 0; k < 8; k++)
            W[k] = nbp_q8w(nbp_ldi(blk + o.qs + (size_t)k * 64));
        return;
    }
    /* chunk c: low nibbles are elements 4c..4c+3, high ones 16+4c.. */
    for (int c = 0; c < 4; c++) {
        nbp_vi q = nbp_ldi(blk + o.qs + (size_t)c * 64);
        W[c] = nbp_and8(q, 0x0f);
        W[4 + c] = nbp_and8(nbp_srl4(q), 0x0f);
    }
    if (type == SIMD_Q5_0 || type == SIMD_Q5_1) {
        nbp_vi qh = nbp_ldi(blk + o.qh);
        for (int c = 0; c < 4; c++) {
            W[c] = nbp_bit5(W[c], qh, c, 0);
            W[4 + c] = nbp_bit5(W[4 + c], qh, c, 1);
        }
    }
}

/* The term of one token's block for every row in the lanes. */
NB_INLINE nbp_vf nbp_term(int type, const nbp_vi W[8], nbp_vf dw, nbp_vf mw, const simd_block_q8a *y)
{
    const unsigned char *q = (const unsigned char *)y->qs;
    int sh = type == SIMD_Q8_0 ? NBP_Q8_BIAS_SHIFT : type == SIMD_MXFP4 ? NBP_MX_BIAS_SHIFT : nb_bias_shift(type);
    /* the codes carry a bias (q4_0: +8, q5_0 and mxfp4: +16, q8_0: the set's): start
     * the sum at -bias * sum(a) */
    nbp_vi i0 = sh >= 0 ? nbp_set1i(-(int32_t)((uint32_t)y->sum << sh)) : nbp_zeroi();
    nbp_vi i1 = nbp_zeroi();
    for (int k = 0; k < 8; k += 2) {
        if (type == SIMD_Q8_0) {
            i0 = nbp_dotq8(i0, W[k], q + 4 * k);
            i1 = nbp_dotq8(i1, W[k + 1], q + 4 * k + 4);
        } else {
            i0 = nbp_dot(i0, W[k], q + 4 * k);
            i1 = nbp_dot(i1, W[k + 1], q + 4 * k + 4);
        }
    }
    nbp_vf da = nbp_set1f(y->d);
    nbp_vf t = nbp_mulf(nbp_mulf(dw, da), nbp_cvtf(nbp_addi(i0, i1)));
    if (nb_has_min(type))
        t = nbp_addf(t, nbp_mulf(nbp_mulf(mw, da), nbp_set1f((float)y->sum)));
    return t;
}

NB_INLINE nbp_vf nbp_reduce8(const nbp_vf a[8])
{
    return nbp_addf(nbp_addf(nbp_addf(a[0], a[4]), nbp_addf(a[2], a[6])),
                    nbp_addf(nbp_addf(a[1], a[5]), nbp_addf(a[3], a[7])));
}

/* Decode: one group (half h), one token; the 8 accumulators stay in
 * registers (blocks taken 8 at a time so each has a fixed slot). */
NB_INLINE void nbp_group1(int type, size_t nb, const unsigned char *g, int h, const simd_block_q8a *y, float *out)
{
    const size_t pb = SIMD_PACK_ROWS * nb_bbytes(type); /* bytes of one packed block */
    nbp_vf acc[8];
    for (int k = 0; k < 8; k++)
        acc[k] = nbp_zerof();
    size_t b = 0;
    for (; b + 8 <= nb; b += 8) {
#if NBP_PF
        for (size_t o = 0; o < 8 * pb; o += 64)
            _mm_prefetch((const char *)g + b * pb + NBP_PF + o, _MM_HINT_T0);
#endif
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            nbp_vi W[8];
            nbp_vf dw, mw;
            nbp_wblock(type, g + (b + k) * pb, h, W, &dw, &mw);
            acc[k] = nbp_addf(acc[k], nbp_term(type, W, dw, mw, y + b + k));
        }
    }
#pragma GCC unroll 8
    for (int k = 0; k < 7; k++) {
        if (b + (size_t)k >= nb)
            break;
        nbp_vi W[8];
        nbp_vf dw, mw;
        nbp_wblock(type, g + (b + k) * pb, h, W, &dw, &mw);
        acc[k] = nbp_addf(acc[k], nbp_term(type, W, dw, mw, y + b + k));
    }
    nbp_storef(out, nbp_reduce8(acc));
}

/* Prefill: a register tile of NBP_RT tokens against one group (half h).
 *
 * The float order puts block b of a row and token into slot b mod 8, and
 * the 8 slots are independent sums until simd_reduce8. So the tile takes
 * the slots one at a time: for slot k it walks blocks k, k+8, k+16, ...,
 * keeping each token's running slot sum in a register for the whole walk
 * (tn float vectors), and per block one integer chain per token (tn more).
 * Only the 8 finished slot sums per token go to memory (sl), so a block
 * costs 8 integer dots and 4 float ops per token, with no accumulator
 * loads or stores; the block's codes are unpacked once for the tn tokens.
 * Same terms, same slots, same order as the scalar reference: the same
 * bits. tn is a constant at every call site, so the loops unroll and the
 * arrays become registers. */
/* Bytes of weights and of activations one cache block of the batched
 * form keeps (together well inside a 1 MiB L2; a 512 KiB L2 still holds
 * them). */
#ifndef NBP_L2W
#define NBP_L2W (192 * 1024)
#endif
#ifndef NBP_L2A
#define NBP_L2A (192 * 1024)
#endif

#ifndef NBP_RT
#define NBP_RT (NBP_W == 16 ? 8 : 4) /* 32 zmm / 16 ymm: tokens per tile */
#endif

NB_INLINE void nbp_tile(int type, size_t nb, const unsigned char *g, int h, const char *a, size_t as, int tn,
                        float *out, size_t os)
{
    const size_t pb = SIMD_PACK_ROWS * nb_bbytes(type);
    const int sh = type == SIMD_Q8_0 ? NBP_Q8_BIAS_SHIFT : type == SIMD_MXFP4 ? NBP_MX_BIAS_SHIFT : nb_bias_shift(type);
    nbp_vf sl[NBP_RT][8];
    for (int k = 0; k < 8; k++) {
        nbp_vf f[NBP_RT];
#pragma GCC unroll 8
        for (int t = 0; t < tn; t++)
            f[t] = nbp_zerof();
        for (size_t b = (size_t)k; b < nb; b += 8) {
            nbp_vi W[8];
            nbp_vf dw, mw;
            nbp_wblock(type, g + b * pb, h, W, &dw, &mw);
            const char *ab = a + b * sizeof(simd_block_q8a);
            nbp_vi s[NBP_RT];
#pragma GCC unroll 8
            for (int t = 0; t < tn; t++) {
                const simd_block_q8a *y = (const simd_block_q8a *)(ab + (size_t)t * as);
                s[t] = sh >= 0 ? nbp_set1i(-(int32_t)((uint32_t)y->sum << sh)) : nbp_zeroi();
            }
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++)
#pragma GCC unroll 8
                for (int t = 0; t < tn; t++) {
                    const unsigned char *q = (const unsigned char *)(ab + (size_t)t * as) + offsetof(simd_block_q8a, qs);
                    s[t] = type == SIMD_Q8_0 ? nbp_dotq8(s[t], W[j], q + 4 * j) : nbp_dot(s[t], W[j], q + 4 * j);
                }
#pragma GCC unroll 8
            for (int t = 0; t < tn; t++) {
                const simd_block_q8a *y = (const simd_block_q8a *)(ab + (size_t)t * as);
                nbp_vf da = nbp_set1f(y->d);
                nbp_vf term = nbp_mulf(nbp_mulf(dw, da), nbp_cvtf(s[t]));
                if (nb_has_min(type))
                    term = nbp_addf(term, nbp_mulf(nbp_mulf(mw, da), nbp_set1f((float)y->sum)));
                f[t] = nbp_addf(f[t], term);
            }
        }
#pragma GCC unroll 8
        for (int t = 0; t < tn; t++)
            sl[t][k] = f[t];
    }
    for (int t = 0; t < tn; t++)
        nbp_storef(out + (size_t)t * os, nbp_reduce8(sl[t]));
}

/* The other prefill form: one group against tn <= NBP_TT tokens with the
 * accumulators acc[t][slot] in L1, each block's codes unpacked once for
 * all tn tokens. Measured on this machine (qwen05 pp512, one thread) it
 * beats the register tile for the 4- and 5-bit types, whose unpacking is
 * dearer than the accumulator traffic (q4_0 -2%, q5_0 -12% with the
 * tile), while q8_0 gains 13% from the tile; both give the same bits.
 * (On AVX-512, q8_0 now takes nbp_pairacc below; the tile serves the
 * 16-register sets.) */
#define NBP_TT 32

NB_INLINE void nbp_groupacc(int type, size_t nb, const unsigned char *g, int h, const char *a, size_t as, int tn,
                            float *out, size_t os, nbp_vf (*acc)[8])
{
    const size_t pb = SIMD_PACK_ROWS * nb_bbytes(type);
    for (int t = 0; t < tn; t++)
        for (int k = 0; k < 8; k++)
            acc[t][k] = nbp_zerof();
    for (size_t b = 0; b < nb; b++) {
        nbp_vi W[8];
        nbp_vf dw, mw;
        nbp_wblock(type, g + b * pb, h, W, &dw, &mw);
        const char *ab = a + b * sizeof(simd_block_q8a);
        for (int t = 0; t < tn; t++) {
            const simd_block_q8a *y = (const simd_block_q8a *)(ab + (size_t)t * as);
            acc[t][b & 7] = nbp_addf(acc[t][b & 7], nbp_term(type, W, dw, mw, y));
        }
    }
    for (int t = 0; t < tn; t++)
        nbp_storef(out + (size_t)t * os, nbp_reduce8(acc[t]));
}

/* The accumulator form on two sets of rows at once (AVX-512: two groups,
 * 32 rows), used for q4_0 and q8_0: each activation dword is
 * broadcast once and feeds both sets' vpdpbusd, so a product needs half a
 * load where nbp_groupacc needs one, and the bias and scale broadcasts are
 * shared too. The two blocks' codes are unpacked once for tn <= NBP_PT
 * tokens (16 vectors of codes: only the 32-register set has room). Each
 * set's terms, slots and order are nbp_groupacc's: the same bits.
 * Measured in thread CPU time (machine at load 13-18), old and new in
 * turns: q4_0 +3% to +25% with 32 tokens a pass (16: less); q5_0 -3% with
 * 16, its qh unpacking of two blocks being dearer, so it keeps
 * nbp_groupacc. Q8_0 moved here from the register tile (nbp_tile): the
 * tile reads 544 bytes of weights and 8 tokens' blocks per 64 vpdpbusd,
 * walking both 8 blocks apart; on the model's shapes (a group of 8192
 * columns is 136 KiB, 8 tokens' rows 80 KiB: neither stays in the 48 KiB
 * L1) that is about 27 bytes a cycle from L2 at the VNNI rate. Here a
 * block pair is read in order and used for 32 tokens, each broadcast feeds
 * two vpdpbusd, and the accumulators are the only L1 traffic: nibble_kbench
 * -t q8_0 -k avx512vnni, old and new in turns, +10% at -n 2048 -r 256 -b 64,
 * +15-30% at -n 8192 -r 2048 -b 256 (docs/BENCHMARKS.md). */
#ifndef NBP_PT
#define NBP_PT 32
#endif
#ifndef NBP_PAIR
#define NBP_PAIR 1
#endif
#ifndef NBP_Q8PAIR
#define NBP_Q8PAIR 1 /* 0: q8_0 takes the register tile, as the 16-register sets do */
#endif

NB_INLINE void nbp_pairacc(int type, size_t nb, const unsigned char *ga, const unsigned char *gb, const char *a,
                           size_t as, int tn, float *outa, float *outb, size_t os, nbp_vf (*acc)[2][8])
{
    const size_t pb = SIMD_PACK_ROWS * nb_bbytes(type);
    const int sh = type == SIMD_Q8_0 ? NBP_Q8_BIAS_SHIFT : type == SIMD_MXFP4 ? NBP_MX_BIAS_SHIFT : nb_bias_shift(type);
    for (int t = 0; t < tn; t++)
        for (int k = 0; k < 8; k++)
            acc[t][0][k] = acc[t][1][k] = nbp_zerof();
    for (size_t b = 0; b < nb; b++) {
        nbp_vi WA[8], WB[8];
        nbp_vf dwa, mwa, dwb, mwb;
        nbp_wblock(type, ga + b * pb, 0, WA, &dwa, &mwa);
        nbp_wblock(type, gb + b * pb, 0, WB, &dwb, &mwb);
        const char *ab = a + b * sizeof(simd_block_q8a);
        const int k = (int)(b & 7);
        for (int t = 0; t < tn; t++) {
            const simd_block_q8a *y = (const simd_block_q8a *)(ab + (size_t)t * as);
            const unsigned char *q = (const unsigned char *)y->qs;
            /* two integer chains a set (even and odd j), added at the end:
             * exact, so the same sums, with half the dependent vpdpbusd */
            nbp_vi sa = sh >= 0 ? nbp_set1i(-(int32_t)((uint32_t)y->sum << sh)) : nbp_zeroi();
            nbp_vi sb = sa, sa1 = nbp_zeroi(), sb1 = nbp_zeroi();
#pragma GCC unroll 8
            for (int j = 0; j < 8; j += 2) {
                sa = type == SIMD_Q8_0 ? nbp_dotq8(sa, WA[j], q + 4 * j) : nbp_dot(sa, WA[j], q + 4 * j);
                sb = type == SIMD_Q8_0 ? nbp_dotq8(sb, WB[j], q + 4 * j) : nbp_dot(sb, WB[j], q + 4 * j);
                sa1 = type == SIMD_Q8_0 ? nbp_dotq8(sa1, WA[j + 1], q + 4 * j + 4)
                                        : nbp_dot(sa1, WA[j + 1], q + 4 * j + 4);
                sb1 = type == SIMD_Q8_0 ? nbp_dotq8(sb1, WB[j + 1], q + 4 * j + 4)
                                        : nbp_dot(sb1, WB[j + 1], q + 4 * j + 4);
            }
            sa = nbp_addi(sa, sa1);
            sb = nbp_addi(sb, sb1);
            nbp_vf da = nbp_set1f(y->d);
            nbp_vf ta = nbp_mulf(nbp_mulf(dwa, da), nbp_cvtf(sa));
            nbp_vf tb = nbp_mulf(nbp_mulf(dwb, da), nbp_cvtf(sb));
            if (nb_has_min(type)) {
                nbp_vf fs = nbp_set1f((float)y->sum);
                ta = nbp_addf(ta, nbp_mulf(nbp_mulf(mwa, da), fs));
                tb = nbp_addf(tb, nbp_mulf(nbp_mulf(mwb, da), fs));
            }
            acc[t][0][k] = nbp_addf(acc[t][0][k], ta);
            acc[t][1][k] = nbp_addf(acc[t][1][k], tb);
        }
    }
    for (int t = 0; t < tn; t++) {
        nbp_storef(outa + (size_t)t * os, nbp_reduce8(acc[t][0]));
        nbp_storef(outb + (size_t)t * os, nbp_reduce8(acc[t][1]));
    }
}

/* tn <= NBP_RT tokens, each tile size its own unrolled copy. */
NB_INLINE void nbp_groupn(int type, size_t nb, const unsigned char *g, int h, const char *a, size_t as, int tn,
                          float *out, size_t os)
{
    switch (tn) {
    case NBP_RT: nbp_tile(type, nb, g, h, a, as, NBP_RT, out, os); break;
#if NBP_RT > 4
    case 7: nbp_tile(type, nb, g, h, a, as, 7, out, os); break;
    case 6: nbp_tile(type, nb, g, h, a, as, 6, out, os); break;
    case 5: nbp_tile(type, nb, g, h, a, as, 5, out, os); break;
    case 4: nbp_tile(type, nb, g, h, a, as, 4, out, os); break;
#endif
    case 3: nbp_tile(type, nb, g, h, a, as, 3, out, os); break;
    case 2: nbp_tile(type, nb, g, h, a, as, 2, out, os); break;
    default: nbp_tile(type, nb, g, h, a, as, 1, out, os); break;
    }
}

NB_INLINE void nbp_dot_packed(int type, size_t n, const void *p, size_t ng, const void *a, size_t as, size_t nt,
                              float *out, size_t os)
{
    const size_t nb = n / SIMD_QK, gbytes = SIMD_PACK_ROWS * nb * nb_bbytes(type);
    const unsigned char *g = p;
    if (nt == 1) {
        for (size_t i = 0; i < ng; i++, g += gbytes)
            for (int h = 0; h < SIMD_PACK_ROWS / NBP_W; h++)
                nbp_group1(type, nb, g, h, a, out + i * SIMD_PACK_ROWS + (size_t)h * NBP_W);
        return;
    }
#if NBP_W == 16 && NBP_PAIR
    if (type == SIMD_Q4_0 || (NBP_Q8PAIR && type == SIMD_Q8_0)) {
        /* pairs of groups against chunks of tokens, blocked for L2 as below */
        nbp_vf acc[NBP_PT][2][8];
        size_t gblk = NBP_L2W / gbytes, tchunk = NBP_L2A / (as ? as : 1);
        gblk = gblk < 2 ? 2 : gblk & ~(size_t)1;
        tchunk = tchunk < NBP_PT ? NBP_PT : tchunk / NBP_PT * NBP_PT;
        for (size_t i0 = 0; i0 < ng; i0 += gblk) {
            size_t i1 = i0 + gblk < ng ? i0 + gblk : ng;
            for (size_t c0 = 0; c0 < nt; c0 += tchunk) {
                size_t c1 = c0 + tchunk < nt ? c0 + tchunk : nt;
                for (size_t t0 = c0; t0 < c1; t0 += NBP_PT) {
                    int tn = (int)(c1 - t0 < NBP_PT ? c1 - t0 : NBP_PT);
                    const char *at = (const char *)a + t0 * as;
                    size_t i = i0;
                    for (; i + 2 <= i1; i += 2)
                        nbp_pairacc(type, nb, g + i * gbytes, g + (i + 1) * gbytes, at, as, tn,
                                    out + t0 * os + i * SIMD_PACK_ROWS, out + t0 * os + (i + 1) * SIMD_PACK_ROWS, os,
                                    acc);
                    if (i < i1) /* an odd last group */
                        nbp_groupacc(type, nb, g + i * gbytes, 0, at, as, tn, out + t0 * os + i * SIMD_PACK_ROWS, os,
                                     (nbp_vf(*)[8])acc);
                }
            }
        }
        return;
    }
#endif
    if (type != SIMD_Q8_0) {
        nbp_vf acc[NBP_TT][8];
        for (size_t i = 0; i < ng; i++, g += gbytes)
            for (size_t t0 = 0; t0 < nt; t0 += NBP_TT) {
                int tn = (int)(nt - t0 < NBP_TT ? nt - t0 : NBP_TT);
                for (int h = 0; h < SIMD_PACK_ROWS / NBP_W; h++)
                    nbp_groupacc(type, nb, g, h, (const char *)a + t0 * as, as, tn,
                                 out + t0 * os + i * SIMD_PACK_ROWS + (size_t)h * NBP_W, os, acc);
            }
        return;
    }
    /* Cache blocking: a block of groups (about NBP_L2W bytes of weights)
     * against a chunk of tokens (about NBP_L2A bytes of activations), so
     * both stay in L2 while every tile of the pair runs. Without it a long
     * prompt's activations (512 tokens of a 4864-column row: 6 MB) were
     * streamed from L3 once per group of 16 rows. */
    size_t gblk = NBP_L2W / gbytes, tchunk = NBP_L2A / (as ? as : 1);
    gblk = gblk ? gblk : 1;
    tchunk = tchunk < NBP_RT ? NBP_RT : tchunk / NBP_RT * NBP_RT;
    for (size_t i0 = 0; i0 < ng; i0 += gblk) {
        size_t i1 = i0 + gblk < ng ? i0 + gblk : ng;
        for (size_t c0 = 0; c0 < nt; c0 += tchunk) {
            size_t c1 = c0 + tchunk < nt ? c0 + tchunk : nt;
            for (size_t i = i0; i < i1; i++)
                for (size_t t0 = c0; t0 < c1; t0 += NBP_RT) {
                    int tn = (int)(c1 - t0 < NBP_RT ? c1 - t0 : NBP_RT);
                    for (int h = 0; h < SIMD_PACK_ROWS / NBP_W; h++)
                        nbp_groupn(type, nb, g + i * gbytes, h, (const char *)a + t0 * as, as, tn,
                                   out + t0 * os + i * SIMD_PACK_ROWS + (size_t)h * NBP_W, os);
                }
        }
    }
}

#define NBP_DEF(NAME, TYPE)                                                                                   \
    static void NAME(size_t n, const void *p, size_t ng, const void *a, size_t as, size_t nt, float *out,    \
                     size_t os)                                                                               \
    {                                                                                                         \
        nbp_dot_packed(TYPE, n, p, ng, a, as, nt, out, os);                                                   \
    }
NBP_DEF(nbp_q8_0, SIMD_Q8_0)
NBP_DEF(nbp_q4_0, SIMD_Q4_0)
NBP_DEF(nbp_q4_1, SIMD_Q4_1)
NBP_DEF(nbp_q5_0, SIMD_Q5_0)
NBP_DEF(nbp_q5_1, SIMD_Q5_1)
NBP_DEF(nbp_mxfp4, SIMD_MXFP4) /* installed with the set's other MXFP4 kernels (mxfp4_x86.h) */
#undef NBP_DEF

static void nbp_fill(simd_kernel_set *s)
{
    s->dot_packed[SIMD_Q8_0] = nbp_q8_0;
    s->dot_packed[SIMD_Q4_0] = nbp_q4_0;
    s->dot_packed[SIMD_Q4_1] = nbp_q4_1;
    s->dot_packed[SIMD_Q5_0] = nbp_q5_0;
    s->dot_packed[SIMD_Q5_1] = nbp_q5_1;
}
#define NB_PACKED_FILL nbp_fill

#endif
