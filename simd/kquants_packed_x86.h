/* K-quant dots on packed weight rows (q4_k, q5_k, q6_k; layout in simd.h
 * and simd/pack.c) for the x86 kernel sets. Included by kquants_x86.h,
 * so it sees the set's ISA flags and NBK_DPBSSD.
 *
 * A packed group holds 16 rows block by block; a 64-byte chunk of a
 * field is 4 bytes of each of the 16 rows. With row r in int32 lane r
 * (one zmm, or two ymm of 8 lanes each under AVX2), one vpdpbusd of a
 * chunk's codes against 4 activation bytes broadcast gives every row's
 * partial sum of those 4 values in its own lane: no horizontal sums, and
 * the same activation bytes serve all 16 rows.
 *
 * Per super-block and token, in each lane (= row), exactly as kquants.c:
 *   sumi = sum_j sc_j * (codes_j . a_j)          (int32, exact)
 *   summ = sum_j m_j * (a's sum over sub-block j) (q4_k/q5_k, exact)
 *   acc[b & 7] += (d * d_a) * (float)sumi - (dmin * d_a) * (float)summ
 * and the 8 accumulators are combined as simd_reduce8 does. Integer sums
 * are exact whatever their order, and the float steps are the reference's
 * operations in its order, lane by lane (no FMA: the project builds with
 * -ffp-contract=off), so results are the scalar dot_rows' bits.
 *
 * Loop order: cache blocks of groups and tokens (below), in them tokens
 * in chunks of NKP_TCHUNK (their float accumulators live on the stack),
 * then groups, then super-blocks; a block's scales are
 * decoded once for the chunk's tokens, which take it NKP_T at a time, so
 * each 64-byte chunk of codes is loaded and unpacked once per NKP_T
 * tokens while it sits in L1. */
#ifndef NIBBLE_KQUANTS_PACKED_X86_H
#define NIBBLE_KQUANTS_PACKED_X86_H

#define NKP_R SIMD_PACK_ROWS /* rows (lanes) per group */
#define NKP_TCHUNK 16        /* tokens whose accumulators are kept at once */
/* Software prefetch distance in bytes (0: off), as pack_x86.h's NBP_PF. */
#ifndef NKP_PF
#define NKP_PF 8192
#endif
/* Bytes of weights and of activations one cache block keeps, as
 * pack_x86.h's NBP_L2W and NBP_L2A. */
#ifndef NKP_L2W
#define NKP_L2W (192 * 1024)
#endif
#ifndef NKP_L2A
#define NKP_L2A (192 * 1024)
#endif

/* ---- 16 int32 / float lanes: one zmm, or a pair of ymm ---- */

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)

#define NKP_T 8 /* tokens per pass over a chunk of codes */
#define NKP_U8 1 /* nkp_dot is vpdpbusd: codes may be any unsigned byte */
typedef __m512i nkp_v;
typedef __m512 nkp_f;

NBK_INLINE nkp_v nkp_load(const void *p) { return _mm512_loadu_si512(p); }
NBK_INLINE nkp_v nkp_zero(void) { return _mm512_setzero_si512(); }
NBK_INLINE nkp_v nkp_set8(int c) { return _mm512_set1_epi8((char)c); }
NBK_INLINE nkp_v nkp_set32(int32_t c) { return _mm512_set1_epi32(c); }
NBK_INLINE nkp_v nkp_and(nkp_v a, nkp_v b) { return _mm512_and_si512(a, b); }
NBK_INLINE nkp_v nkp_or(nkp_v a, nkp_v b) { return _mm512_or_si512(a, b); }
NBK_INLINE nkp_v nkp_add(nkp_v a, nkp_v b) { return _mm512_add_epi32(a, b); }
NBK_INLINE nkp_v nkp_sub(nkp_v a, nkp_v b) { return _mm512_sub_epi32(a, b); }
NBK_INLINE nkp_v nkp_mul(nkp_v a, nkp_v b) { return _mm512_mullo_epi32(a, b); }
NBK_INLINE nkp_v nkp_srl16(nkp_v a, int s) { return _mm512_srli_epi16(a, (unsigned)s); }
NBK_INLINE nkp_v nkp_sll16(nkp_v a, int s) { return _mm512_slli_epi16(a, (unsigned)s); }
NBK_INLINE nkp_v nkp_sra16(nkp_v a, int s) { return _mm512_srai_epi16(a, (unsigned)s); }
NBK_INLINE nkp_v nkp_srl32(nkp_v a, int s) { return _mm512_srli_epi32(a, (unsigned)s); }
NBK_INLINE nkp_v nkp_sll32(nkp_v a, int s) { return _mm512_slli_epi32(a, (unsigned)s); }
NBK_INLINE nkp_v nkp_sra32(nkp_v a, int s) { return _mm512_srai_epi32(a, (unsigned)s); }
/* bytes picked within each 128-bit lane by a 16-byte pattern (vpshufb) */
NBK_INLINE nkp_v nkp_shuf(nkp_v a, __m128i pat) { return _mm512_shuffle_epi8(a, _mm512_broadcast_i32x4(pat)); }
/* acc + per int32: 4 u8 codes x the 4 s8 activation bytes in a4 */
NBK_INLINE nkp_v nkp_dot(nkp_v acc, nkp_v u, int32_t a4) { return _mm512_dpbusd_epi32(acc, u, _mm512_set1_epi32(a4)); }
/* acc + per int32: 2 int16 x the 2 int16 in p2 */
NBK_INLINE nkp_v nkp_dotw(nkp_v acc, nkp_v w, int32_t p2) { return _mm512_dpwssd_epi32(acc, w, _mm512_set1_epi32(p2)); }
NBK_INLINE nkp_f nkp_h2f(const void *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
NBK_INLINE nkp_f nkp_cvt(nkp_v a) { return _mm512_cvtepi32_ps(a); }
NBK_INLINE nkp_f nkp_fset(float c) { return _mm512_set1_ps(c); }
NBK_INLINE nkp_f nkp_fzero(void) { return _mm512_setzero_ps(); }
NBK_INLINE nkp_f nkp_fmul(nkp_f a, nkp_f b) { return _mm512_mul_ps(a, b); }
NBK_INLINE nkp_f nkp_fadd(nkp_f a, nkp_f b) { return _mm512_add_ps(a, b); }
NBK_INLINE nkp_f nkp_fsub(nkp_f a, nkp_f b) { return _mm512_sub_ps(a, b); }
NBK_INLINE nkp_f nkp_fload(const float *p) { return _mm512_loadu_ps(p); }
NBK_INLINE void nkp_fstore(float *p, nkp_f a) { _mm512_storeu_ps(p, a); }

#else

/* AVX2 (and the VEX VNNI sets): rows 0-7 in l, 8-15 in h. A chunk's 64
 * bytes are rows 0..15 in order, so its low 32 bytes are rows 0-7. */
#define NKP_T 2
/* codes may be any unsigned byte only under vpdpbusd: vpdpbssd reads
 * them signed, and maddubs saturates pairs at int16 */
#if defined(__AVXVNNI__) && !defined(NBK_DPBSSD)
#define NKP_U8 1
#else
#define NKP_U8 0
#endif
typedef struct {
    __m256i l, h;
} nkp_v;
typedef struct {
    __m256 l, h;
} nkp_f;

#define NKP_2(expr_l, expr_h) \
    nkp_v r_;                 \
    r_.l = (expr_l);          \
    r_.h = (expr_h);          \
    return r_
#define NKP_2F(expr_l, expr_h) \
    nkp_f r_;                  \
    r_.l = (expr_l);           \
    r_.h = (expr_h);           \
    return r_

NBK_INLINE nkp_v nkp_load(const void *p)
{
    NKP_2(_mm256_loadu_si256((const __m256i *)p), _mm256_loadu_si256((const __m256i *)p + 1));
}
NBK_INLINE nkp_v nkp_zero(void) { NKP_2(_mm256_setzero_si256(), _mm256_setzero_si256()); }
NBK_INLINE nkp_v nkp_set8(int c) { NKP_2(_mm256_set1_epi8((char)c), _mm256_set1_epi8((char)c)); }
NBK_INLINE nkp_v nkp_set32(int32_t c) { NKP_2(_mm256_set1_epi32(c), _mm256_set1_epi32(c)); }
NBK_INLINE nkp_v nkp_and(nkp_v a, nkp_v b) { NKP_2(_mm256_and_si256(a.l, b.l), _mm256_and_si256(a.h, b.h)); }
NBK_INLINE nkp_v nkp_or(nkp_v a, nkp_v b) { NKP_2(_mm256_or_si256(a.l, b.l), _mm256_or_si256(a.h, b.h)); }
NBK_INLINE nkp_v nkp_add(nkp_v a, nkp_v b) { NKP_2(_mm256_add_epi32(a.l, b.l), _mm256_add_epi32(a.h, b.h)); }
NBK_INLINE nkp_v nkp_sub(nkp_v a, nkp_v b) { NKP_2(_mm256_sub_epi32(a.l, b.l), _mm256_sub_epi32(a.h, b.h)); }
NBK_INLINE nkp_v nkp_mul(nkp_v a, nkp_v b) { NKP_2(_mm256_mullo_epi32(a.l, b.l), _mm256_mullo_epi32(a.h, b.h)); }
NBK_INLINE nkp_v nkp_srl16(nkp_v a, int s) { NKP_2(_mm256_srli_epi16(a.l, s), _mm256_srli_epi16(a.h, s)); }
NBK_INLINE nkp_v nkp_sll16(nkp_v a, int s) { NKP_2(_mm256_slli_epi16(a.l, s), _mm256_slli_epi16(a.h, s)); }
NBK_INLINE nkp_v nkp_sra16(nkp_v a, int s) { NKP_2(_mm256_srai_epi16(a.l, s), _mm256_srai_epi16(a.h, s)); }
NBK_INLINE nkp_v nkp_srl32(nkp_v a, int s) { NKP_2(_mm256_srli_epi32(a.l, s), _mm256_srli_epi32(a.h, s)); }
NBK_INLINE nkp_v nkp_sll32(nkp_v a, int s) { NKP_2(_mm256_slli_epi32(a.l, s), _mm256_slli_epi32(a.h, s)); }
NBK_INLINE nkp_v nkp_sra32(nkp_v a, int s) { NKP_2(_mm256_srai_epi32(a.l, s), _mm256_srai_epi32(a.h, s)); }
NBK_INLINE nkp_v nkp_shuf(nkp_v a, __m128i pat)
{
    __m256i p = _mm256_broadcastsi128_si256(pat);
    NKP_2(_mm256_shuffle_epi8(a.l, p), _mm256_shuffle_epi8(a.h, p));
}
/* acc + sums of 4 u8 x s8 products per int32 (codes <= 63, so the
 * maddubs pairs stay within 2*63*127 and never saturate; vpdpbssd reads
 * codes 0..63 as the same s8 values) */
NBK_INLINE __m256i nkp_dot1(__m256i acc, __m256i u, __m256i s)
{
#if defined(NBK_DPBSSD)
    return NBK_DPBSSD(acc, u, s);
#elif defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}
NBK_INLINE nkp_v nkp_dot(nkp_v acc, nkp_v u, int32_t a4)
{
    __m256i s = _mm256_set1_epi32(a4);
    NKP_2(nkp_dot1(acc.l, u.l, s), nkp_dot1(acc.h, u.h, s));
}
NBK_INLINE nkp_v nkp_dotw(nkp_v acc, nkp_v w, int32_t p2)
{
    __m256i s = _mm256_set1_epi32(p2);
    NKP_2(_mm256_add_epi32(acc.l, _mm256_madd_epi16(w.l, s)), _mm256_add_epi32(acc.h, _mm256_madd_epi16(w.h, s)));
}
NBK_INLINE nkp_f nkp_h2f(const void *p)
{
    NKP_2F(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p + 1)));
}
NBK_INLINE nkp_f nkp_cvt(nkp_v a) { NKP_2F(_mm256_cvtepi32_ps(a.l), _mm256_cvtepi32_ps(a.h)); }
NBK_INLINE nkp_f nkp_fset(float c) { NKP_2F(_mm256_set1_ps(c), _mm256_set1_ps(c)); }
NBK_INLINE nkp_f nkp_fzero(void) { NKP_2F(_mm256_setzero_ps(), _mm256_setzero_ps()); }
NBK_INLINE nkp_f nkp_fmul(nkp_f a, nkp_f b) { NKP_2F(_mm256_mul_ps(a.l, b.l), _mm256_mul_ps(a.h, b.h)); }
NBK_INLINE nkp_f nkp_fadd(nkp_f a, nkp_f b) { NKP_2F(_mm256_add_ps(a.l, b.l), _mm256_add_ps(a.h, b.h)); }
NBK_INLINE nkp_f nkp_fsub(nkp_f a, nkp_f b) { NKP_2F(_mm256_sub_ps(a.l, b.l), _mm256_sub_ps(a.h, b.h)); }
NBK_INLINE nkp_f nkp_fload(const float *p) { NKP_2F(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)); }
NBK_INLINE void nkp_fstore(float *p, nkp_f a)
{
    _mm256_storeu_ps(p, a.l);
    _mm256_storeu_ps(p + 8, a.h);
}
#undef NKP_2
#undef NKP_2F

#endif

NBK_INLINE int32_t nkp_a4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* byte patterns for nkp_shuf, per int32 lane (0x80 gives a zero byte):
 * byte k of the lane to its low byte, the rest zero */
NBK_INLINE __m128i nkp_pat_byte(int k)
{
    return _mm_setr_epi8((char)k, -128, -128, -128, (char)(4 + k), -128, -128, -128, (char)(8 + k), -128, -128, -128,
                         (char)(12 + k), -128, -128, -128);
}
/* bytes k, k+1 of the lane to the high bytes of its two int16 halves */
NBK_INLINE __m128i nkp_pat_hi16(int k)
{
    return _mm_setr_epi8(-128, (char)k, -128, (char)(k + 1), -128, (char)(4 + k), -128, (char)(5 + k), -128,
                         (char)(8 + k), -128, (char)(9 + k), -128, (char)(12 + k), -128, (char)(13 + k));
}
/* bytes k, k+1 of the lane to the low bytes of its two int16 halves */
NBK_INLINE __m128i nkp_pat_lo16(int k)
{
    return _mm_setr_epi8((char)k, -128, (char)(k + 1), -128, (char)(4 + k), -128, (char)(5 + k), -128,
                         (char)(8 + k), -128, (char)(9 + k), -128, (char)(12 + k), -128, (char)(13 + k), -128);
}

/* A q8k block's sums over 32-value sub-blocks, two to an int32 for the
 * int16 pair products: p[k] = S_2k | S_2k+1 << 16, S_j = bsums[2j] +
 * bsums[2j+1] (|S_j| <= 32*127, so the int16 packing is exact). */
NBK_INLINE void nkp_pairs32(const simd_block_q8k *y, int32_t p[4])
{
    __m256i s = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), _mm256_set1_epi16(1));
    __m256i w = _mm256_packs_epi32(s, s); /* per 128-bit half: S S S S again */
    p[0] = _mm256_extract_epi32(w, 0);
    p[1] = _mm256_extract_epi32(w, 1);
    p[2] = _mm256_extract_epi32(w, 4);
    p[3] = _mm256_extract_epi32(w, 5);
}

/* What one packed super-block of 16 rows contributes to nt tokens' float
 * accumulators: sumi (and summ) per lane from the type's integer kernel,
 * then the reference's float step. acc[t] points at token t's 8 slots of
 * 16 floats; slot is b & 7. */
NBK_INLINE void nkp_float_step(nkp_f dv, const nkp_f *mv, const nkp_v *sumi, const nkp_v *summ, float d_a,
                               float *acc)
{
    nkp_f da = nkp_fset(d_a);
    nkp_f x = nkp_fmul(nkp_fmul(dv, da), nkp_cvt(*sumi));
    if (mv)
        x = nkp_fsub(x, nkp_fmul(nkp_fmul(*mv, da), nkp_cvt(*summ)));
    nkp_fstore(acc, nkp_fadd(nkp_fload(acc), x));
}

/* ---- q4_k / q5_k ----
 * Per block: d (32 bytes), dmin (32), scales (3 chunks), [q5_k: qh, 8
 * chunks], qs (32 chunks). qs chunk 8p+i holds bytes 4i..4i+3 of the
 * 32-byte run of sub-blocks 2p (low nibbles) and 2p+1 (high); qh chunk i
 * the 5th bits of values 4i..4i+3 of every sub-block, bit j for
 * sub-block j. */

typedef struct {
    nkp_v sc[8]; /* sub-block scales, int32 per lane */
    nkp_v mp[4]; /* mins m_2k, m_2k+1 as the int16 halves of each lane */
    nkp_f d, dmin;
} nkp_meta45;

/* Unpack the 16 rows' six-bit scales and mins (the per-row bit layout is
 * in simd_block_q4_k; here each lane does it for its row). */
NBK_INLINE void nkp_meta_q45(const unsigned char *blk, nkp_meta45 *m)
{
    nkp_v u0 = nkp_load(blk + 64), u1 = nkp_load(blk + 128), u2 = nkp_load(blk + 192);
    const nkp_v m6 = nkp_set8(0x3f), m4 = nkp_set8(0x0f), m2 = nkp_set8(0x03);
    nkp_v s_lo = nkp_and(u0, m6), m_lo = nkp_and(u1, m6);
    nkp_v s_hi = nkp_or(nkp_and(u2, m4), nkp_sll32(nkp_and(nkp_srl32(u0, 6), m2), 4));
    nkp_v m_hi = nkp_or(nkp_and(nkp_srl32(u2, 4), m4), nkp_sll32(nkp_and(nkp_srl32(u1, 6), m2), 4));
    for (int j = 0; j < 4; j++) {
        m->sc[j] = nkp_shuf(s_lo, nkp_pat_byte(j));
        m->sc[4 + j] = nkp_shuf(s_hi, nkp_pat_byte(j));
    }
    m->mp[0] = nkp_shuf(m_lo, nkp_pat_lo16(0));
    m->mp[1] = nkp_shuf(m_lo, nkp_pat_lo16(2));
    m->mp[2] = nkp_shuf(m_hi, nkp_pat_lo16(0));
    m->mp[3] = nkp_shuf(m_hi, nkp_pat_lo16(2));
    m->d = nkp_h2f(blk);
    m->dmin = nkp_h2f(blk + 32);
}

/* Codes of sub-block j = 2p + s for values 4i..4i+3: qs chunk q (already
 * loaded), q5_k's 5th bit from qh chunk h. */
NBK_INLINE nkp_v nkp_codes45(int five, nkp_v q, nkp_v h, int j)
{
    const nkp_v lo4 = nkp_set8(0x0f);
    nkp_v c = nkp_and(j & 1 ? nkp_srl16(q, 4) : q, lo4);
    if (five) {
        /* bit j of each byte to bit 4; 16-bit shifts are safe as the
         * mask keeps only bits that came from the same byte */
        nkp_v b = j <= 4 ? nkp_sll16(h, 4 - j) : nkp_srl16(h, j - 4);
        c = nkp_or(c, nkp_and(b, nkp_set8(0x10)));
    }
    return c;
}

/* nt (1..NKP_T, a constant after inlining) tokens against one packed
 * block: y[t] is token t's q8k block. Bounds: a sub-block dot is at most
 * 32*31*127, times 63, times 8 < 2^31; summ <= 8*63*32*127. */
NBK_INLINE void nkp_block45(int five, const unsigned char *blk, const nkp_meta45 *m, const simd_block_q8k *const *y,
                            int nt, float *const *acc)
{
    const unsigned char *qh = blk + 256, *qs = blk + (five ? 768 : 256);
    nkp_v sumi[NKP_T], summ[NKP_T];
    for (int t = 0; t < nt; t++)
        sumi[t] = nkp_zero();
    for (int j = 0; j < 8; j++) {
        nkp_v dj[NKP_T];
        for (int t = 0; t < nt; t++)
            dj[t] = nkp_zero();
        for (int i = 0; i < 8; i++) {
            nkp_v q = nkp_load(qs + 64 * (8 * (j >> 1) + i));
            nkp_v c = nkp_codes45(five, q, five ? nkp_load(qh + 64 * i) : q, j);
            for (int t = 0; t < nt; t++)
                dj[t] = nkp_dot(dj[t], c, nkp_a4(y[t]->qs + 32 * j + 4 * i));
        }
        for (int t = 0; t < nt; t++)
            sumi[t] = nkp_add(sumi[t], nkp_mul(dj[t], m->sc[j]));
    }
    for (int t = 0; t < nt; t++) {
        int32_t p[4];
        nkp_pairs32(y[t], p);
        summ[t] = nkp_zero();
        for (int k = 0; k < 4; k++)
            summ[t] = nkp_dotw(summ[t], m->mp[k], p[k]);
        nkp_float_step(m->d, &m->dmin, &sumi[t], &summ[t], y[t]->d, acc[t]);
    }
}

/* ---- q6_k ----
 * Per block: ql (32 chunks), qh (16 chunks), scales (4 chunks), d (32
 * bytes). Value 128h + 32k + l (see q6_level in kquants.c) has its low 4
 * bits in ql chunk 16h + 8(k&1) + l/4 (low nibble for k < 2, high for
 * k >= 2) and its top 2 bits at bits 2k, 2k+1 of qh chunk 8h + l/4.
 * Sub-block j = 8h + 2k + s covers l = 16s .. 16s+15. */

typedef struct {
    nkp_v sc[16]; /* int8 scales sign-extended to int32 */
    nkp_v sp[8];  /* scales 2k, 2k+1 as the int16 halves of each lane */
    nkp_f d;
} nkp_meta6;

NBK_INLINE void nkp_meta_q6(const unsigned char *blk, nkp_meta6 *m)
{
    for (int c = 0; c < 4; c++) {
        nkp_v u = nkp_load(blk + 3072 + 64 * c);
        for (int k = 0; k < 4; k++)
            m->sc[4 * c + k] = nkp_sra32(nkp_sll32(u, 24 - 8 * k), 24);
        m->sp[2 * c] = nkp_sra16(nkp_shuf(u, nkp_pat_hi16(0)), 8);
        m->sp[2 * c + 1] = nkp_sra16(nkp_shuf(u, nkp_pat_hi16(2)), 8);
    }
    m->d = nkp_h2f(blk + 3328);
}

/* sumi = sum_j sc_j * (codes . a)_j - 32 * sum_j sc_j * bsum_j, which is
 * sum_j sc_j * ((q - 32) . a)_j. Bounds: a sub-block dot <= 16*63*127,
 * times 128, times 16 < 2^31, and the bias is smaller. */
/* A block's sums for nt tokens made into float terms: minus 32 times
 * sum_j sc_j * bsum_j (the codes' offset), then the reference's float step. */
NBK_INLINE void nkp_finish6(const nkp_meta6 *m, const simd_block_q8k *const *y, int nt, const nkp_v *sumi,
                            float *const *acc)
{
    for (int t = 0; t < nt; t++) {
        nkp_v bias = nkp_zero();
        for (int k = 0; k < 8; k++) {
            int32_t p2;
            memcpy(&p2, y[t]->bsums + 2 * k, 4);
            bias = nkp_dotw(bias, m->sp[k], p2);
        }
        nkp_v s = nkp_sub(sumi[t], nkp_sll32(bias, 5));
        nkp_float_step(m->d, NULL, &s, NULL, y[t]->d, acc[t]);
    }
}

#if defined(__AVX512F__)
/* A few tokens (decode) on AVX-512: each ql and qh chunk is loaded once
 * and gives the codes of all four k (the loop below loads qh four times
 * and ql twice), and vpternlogd merges a code's two parts in one step:
 * with qh pre-masked to the pairs that are not shifted into a code's bits
 * 6-7, (lo & 0x0f) | (hi & ~0x0f) is the code, whatever the shifts bring
 * into the bits that the select takes from the other operand. The sums
 * are the same integers, so the bits are the same. */
#define NKP6_FEW 2
NBK_INLINE nkp_v nkp_sel0f(nkp_v lo, nkp_v hi) /* bits 0-3 from lo, 4-7 from hi */
{
    return _mm512_ternarylogic_epi32(_mm512_set1_epi8(0x0f), lo, hi, 0xca); /* a ? b : c, bitwise */
}
NBK_INLINE void nkp_block6_few(const unsigned char *blk, const nkp_meta6 *m, const simd_block_q8k *const *y, int nt,
                               float *const *acc)
{
    const unsigned char *ql = blk, *qh = blk + 2048;
    const nkp_v m33 = nkp_set8(0x33), mcc = nkp_set8((char)0xcc);
    nkp_v sumi[NKP6_FEW];
    for (int t = 0; t < nt; t++)
        sumi[t] = nkp_zero();
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < 2; s++) {
            nkp_v dj[4][NKP6_FEW];
            for (int k = 0; k < 4; k++)
                for (int t = 0; t < nt; t++)
                    dj[k][t] = nkp_zero();
            for (int i = 4 * s; i < 4 * s + 4; i++) {
                nkp_v a = nkp_load(ql + 64 * (16 * h + i)), b = nkp_load(ql + 64 * (16 * h + 8 + i));
                nkp_v hb = nkp_load(qh + 64 * (8 * h + i));
                /* bits 0-1 and 4-5 (k = 0, 2), bits 2-3 and 6-7 (k = 1, 3) */
                nkp_v h02 = nkp_and(hb, m33), h13 = nkp_and(hb, mcc);
                nkp_v c[4];
                c[0] = nkp_sel0f(a, nkp_sll16(h02, 4));
                c[1] = nkp_sel0f(b, nkp_sll16(h13, 2));
                c[2] = nkp_sel0f(nkp_srl16(a, 4), h02);
                c[3] = nkp_sel0f(nkp_srl16(b, 4), nkp_srl16(h13, 2));
                for (int k = 0; k < 4; k++)
                    for (int t = 0; t < nt; t++)
                        dj[k][t] = nkp_dot(dj[k][t], c[k], nkp_a4(y[t]->qs + 128 * h + 32 * k + 4 * i));
            }
            for (int k = 0; k < 4; k++)
                for (int t = 0; t < nt; t++)
                    sumi[t] = nkp_add(sumi[t], nkp_mul(dj[k][t], m->sc[8 * h + 2 * k + s]));
        }
    nkp_finish6(m, y, nt, sumi, acc);
}
#endif

NBK_INLINE void nkp_block6(const unsigned char *blk, const nkp_meta6 *m, const simd_block_q8k *const *y, int nt,
                           float *const *acc)
{
#if defined(__AVX512F__)
    if (nt <= NKP6_FEW) {
        nkp_block6_few(blk, m, y, nt, acc);
        return;
    }
#endif
    const unsigned char *ql = blk, *qh = blk + 2048;
    const nkp_v lo4 = nkp_set8(0x0f), top = nkp_set8(0x30);
    nkp_v sumi[NKP_T];
    for (int t = 0; t < nt; t++)
        sumi[t] = nkp_zero();
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int s = 0; s < 2; s++) {
                nkp_v dj[NKP_T];
                for (int t = 0; t < nt; t++)
                    dj[t] = nkp_zero();
                for (int i = 4 * s; i < 4 * s + 4; i++) {
                    nkp_v l = nkp_load(ql + 64 * (16 * h + 8 * (k & 1) + i));
                    nkp_v hb = nkp_load(qh + 64 * (8 * h + i));
                    /* low 4 bits, and bits 2k, 2k+1 of hb moved to 4, 5
                     * (16-bit shifts: the masks keep bits of one byte) */
                    nkp_v lo = nkp_and(k < 2 ? l : nkp_srl16(l, 4), lo4);
                    nkp_v hi = 2 * k <= 4 ? nkp_sll16(hb, 4 - 2 * k) : nkp_srl16(hb, 2 * k - 4);
                    nkp_v c = nkp_or(lo, nkp_and(hi, top));
                    for (int t = 0; t < nt; t++)
                        dj[t] = nkp_dot(dj[t], c, nkp_a4(y[t]->qs + 128 * h + 32 * k + 4 * i));
                }
                for (int t = 0; t < nt; t++)
                    sumi[t] = nkp_add(sumi[t], nkp_mul(dj[t], m->sc[8 * h + 2 * k + s]));
            }
    nkp_finish6(m, y, nt, sumi, acc);
}

/* CALL with NKP_K the constant k (1..NKP_T): each token count its own
 * unrolled copy of the block kernel the call names. */
#if NKP_T > 2
#define NKP_BY_TOKENS(k, CALL)                                                                                        \
    switch (k) {                                                                                                     \
    case 1: { enum { NKP_K = 1 }; CALL; } break;                                                                     \
    case 2: { enum { NKP_K = 2 }; CALL; } break;                                                                     \
    case 3: { enum { NKP_K = 3 }; CALL; } break;                                                                     \
    case 4: { enum { NKP_K = 4 }; CALL; } break;                                                                     \
    case 5: { enum { NKP_K = 5 }; CALL; } break;                                                                     \
    case 6: { enum { NKP_K = 6 }; CALL; } break;                                                                     \
    case 7: { enum { NKP_K = 7 }; CALL; } break;                                                                     \
    default: { enum { NKP_K = NKP_T }; CALL; } break;                                                                \
    }
#else
#define NKP_BY_TOKENS(k, CALL)                                                                                        \
    switch (k) {                                                                                                     \
    case 1: { enum { NKP_K = 1 }; CALL; } break;                                                                     \
    default: { enum { NKP_K = NKP_T }; CALL; } break;                                                                \
    }
#endif

/* The 8 slot rows of each of tn tokens combined as simd_reduce8 does, lane
 * by lane, to out + t * os. */
NBK_INLINE void nkp_reduce_store(float (*acc)[8][NKP_R], size_t tn, float *out, size_t os)
{
    for (size_t t = 0; t < tn; t++) {
        nkp_f r = nkp_fadd(nkp_fadd(nkp_fadd(nkp_fload(acc[t][0]), nkp_fload(acc[t][4])),
                                    nkp_fadd(nkp_fload(acc[t][2]), nkp_fload(acc[t][6]))),
                           nkp_fadd(nkp_fadd(nkp_fload(acc[t][1]), nkp_fload(acc[t][5])),
                                    nkp_fadd(nkp_fload(acc[t][3]), nkp_fload(acc[t][7]))));
        nkp_fstore(out + t * os, r);
    }
}

/* ---- iq4_xs, q2_k, q3_k, iq3_s (same driver, their own block pieces) ---- */

#include "lquants_packed_x86.h"

/* ---- driver ---- */

/* One block of one group for nt tokens (1..NKP_T), by type. */
NBK_INLINE void nkp_block(int type, const unsigned char *blk, const void *meta, const simd_block_q8k *const *y, int nt,
                          float *const *acc)
{
    if (type == SIMD_IQ4_XS)
        nlp_block_iq4_xs(blk, meta, y, nt, acc);
    else if (type == SIMD_IQ3_S)
        nlp_block_iq3_s(blk, meta, y, nt, acc);
    else if (type == SIMD_Q2_K || type == SIMD_Q3_K)
        nlp_block_q23(type == SIMD_Q3_K, blk, meta, y, nt, acc);
    else if (type == SIMD_Q6_K)
        nkp_block6(blk, meta, y, nt, acc);
    else
        nkp_block45(type == SIMD_Q5_K, blk, meta, y, nt, acc);
}

NBK_INLINE void nkp_packed(int type, size_t n, const void *p, size_t ng, const void *a, size_t as, size_t nt,
                           float *out, size_t os)
{
    const size_t nb = n / SIMD_QKK;
    const size_t bb = type == SIMD_IQ3_S ? SIMD_PACK_IQ3S_BLOCK
                      : NKP_R * (type == SIMD_Q6_K    ? sizeof(simd_block_q6_k)
                               : type == SIMD_Q5_K  ? sizeof(simd_block_q5_k)
                               : type == SIMD_IQ4_XS ? sizeof(simd_block_iq4_xs)
                               : type == SIMD_Q2_K  ? sizeof(simd_block_q2_k)
                               : type == SIMD_Q3_K  ? sizeof(simd_block_q3_k)
                                                     : sizeof(simd_block_q4_k));
    float acc[NKP_TCHUNK][8][NKP_R];
    /* Cache blocks: gblk groups (about NKP_L2W bytes) against a chunk of
     * tokens (about NKP_L2A bytes of activations), each pass of NKP_TCHUNK
     * tokens inside them, so the weights come from memory once per call
     * and not once per NKP_TCHUNK tokens (a 512-token prompt read each
     * matrix 32 times). Per (group, token) the blocks are still taken in
     * order: the same bits. */
    size_t gblk = NKP_L2W / (nb * bb > 0 ? nb * bb : 1), tchunk = NKP_L2A / (as ? as : 1);
    gblk = gblk ? gblk : 1;
    tchunk = tchunk < NKP_TCHUNK ? NKP_TCHUNK : tchunk / NKP_TCHUNK * NKP_TCHUNK;
    for (size_t g0 = 0; g0 < ng; g0 += gblk)
    for (size_t c0 = 0; c0 < nt; c0 += tchunk)
    for (size_t t0 = c0; t0 < nt && t0 < c0 + tchunk; t0 += NKP_TCHUNK) {
        const size_t tend = c0 + tchunk < nt ? c0 + tchunk : nt;
        const size_t tn = tend - t0 < NKP_TCHUNK ? tend - t0 : NKP_TCHUNK;
        const char *at = (const char *)a + t0 * as;
        for (size_t g = g0; g < ng && g < g0 + gblk; g++) {
            const unsigned char *gp = (const unsigned char *)p + g * nb * bb;
            for (size_t t = 0; t < tn; t++)
                for (int l = 0; l < 8; l++)
                    nkp_fstore(acc[t][l], nkp_fzero());
            for (size_t b = 0; b < nb; b++) {
                const unsigned char *blk = gp + b * bb;
                /* NKP_PF bytes ahead, across the end of the group: the
                 * next group follows it in memory, so the stream does not
                 * restart cold at each group (a prefetch past the end of
                 * the matrix reads nothing and cannot fault) */
                if (NKP_PF > 0)
                    for (size_t o = 0; o < bb; o += 64)
                        _mm_prefetch((const char *)blk + NKP_PF + o, _MM_HINT_T0);
                union {
                    nkp_meta45 m45;
                    nkp_meta6 m6;
                    nlp_meta m4x;
                    nlp_meta2 m2;
                    nlp_meta3 m3;
                    nlp_meta3s m3s;
                } meta;
                if (type == SIMD_IQ4_XS)
                    nlp_meta_iq4_xs(blk, &meta.m4x);
                else if (type == SIMD_IQ3_S)
                    nlp_meta_iq3_s(blk, &meta.m3s);
                else if (type == SIMD_Q2_K)
                    nlp_meta_q2_k(blk, &meta.m2);
                else if (type == SIMD_Q3_K)
                    nlp_meta_q3_k(blk, &meta.m3);
                else if (type == SIMD_Q6_K)
                    nkp_meta_q6(blk, &meta.m6);
                else
                    nkp_meta_q45(blk, &meta.m45);
                for (size_t t1 = 0; t1 < tn; t1 += NKP_T) {
                    const simd_block_q8k *y[NKP_T];
                    float *ac[NKP_T];
                    int k = (int)(tn - t1 < NKP_T ? tn - t1 : NKP_T);
                    for (int t = 0; t < k; t++) {
                        y[t] = (const simd_block_q8k *)(at + (t1 + t) * as) + b;
                        ac[t] = acc[t1 + t][b & 7];
                    }
                    NKP_BY_TOKENS(k, nkp_block(type, blk, &meta, y, NKP_K, ac))
                }
            }
            nkp_reduce_store(acc, tn, out + t0 * os + g * NKP_R, os);
        }
    }
}

#define NKP_KPACKED(NAME, TYPE)                                                                                 \
    static void NAME(size_t n, const void *p, size_t ng, const void *a, size_t as, size_t nt, float *out, \
                     size_t os)                                                                                 \
    {                                                                                                           \
        nkp_packed(TYPE, n, p, ng, a, as, nt, out, os);                                                         \
    }
NKP_KPACKED(nkp_packed_q4_k, SIMD_Q4_K)
NKP_KPACKED(nkp_packed_q5_k, SIMD_Q5_K)
NKP_KPACKED(nkp_packed_q6_k, SIMD_Q6_K)
#undef NKP_KPACKED

#endif
