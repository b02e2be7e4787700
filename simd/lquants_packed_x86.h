/* iq4_xs and iq4_nl on packed weight rows (layout in simd.h and
 * simd/pack.c) for the x86 sets, with row r of a 16-row group in int32
 * lane r as for the K-quants (kquants_packed_x86.h, whose nkp_* vector
 * helpers this uses and which includes it): iq4_xs's block pieces for
 * that header's driver, and iq4_nl's own driver over blocks of 32.
 *
 * A packed block: d (32 bytes), scales_h (32: one uint16 a row),
 * scales_l (one chunk: the row's 4 bytes as a little-endian uint32, so
 * sub-block j's low scale bits are its bits 4j..4j+3), qs (32 chunks).
 * qs chunk 4j+i holds qs bytes 16j+4i..16j+4i+3 of each row: their low
 * nibbles are values 32j+4i.., their high nibbles values 32j+16+4i...
 *
 * Codes become levels by a 16-byte table lookup (vpshufb) of the nibbles:
 *  - vpdpbusd (AVX-512 VNNI, AVX-VNNI) multiplies unsigned by signed
 *    bytes, so the table holds level + 128 (1..241) and the offset
 *    128 * (a's sum over the sub-block) is taken off once per block and
 *    token, through the sub-block scales (as q4_k's mins);
 *  - vpdpbssd (AVX-VNNI-INT8) takes the signed levels as they are;
 *  - plain AVX2 multiplies |level| by a carrying the level's sign
 *    (maddubs pairs at most 2*127*127, no int16 saturation).
 * All three give the same exact integers per lane:
 *   sumi = sum_j (ls_j - 32) * (levels_j . a_j)
 * and then the reference's float step (lquants.c), so the bits are the
 * scalar dot_rows'. Bounds: a biased sub-block dot is at most
 * 32*241*127 < 2^20, times 32, times 8 < 2^31; the true sumi is smaller. */
#ifndef NIBBLE_LQUANTS_PACKED_X86_H
#define NIBBLE_LQUANTS_PACKED_X86_H

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#define NLP_BIAS 1
#elif defined(NBK_DPBSSD)
#define NLP_BIAS 0
#define NLP_SIGNED_DOT 1
#elif defined(__AVXVNNI__)
#define NLP_BIAS 1
#else
#define NLP_BIAS 0
#endif

NBK_INLINE __m128i nlp_table(void)
{
#if NLP_BIAS
    return _mm_setr_epi8(1, 24, 45, 63, 79, 93, 106, 118, (char)129, (char)141, (char)153, (char)166, (char)181,
                         (char)197, (char)217, (char)241);
#else
    return _mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
#endif
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
typedef __m512i nlp_tab;
/* the table's byte for each nibble (0..15) in v */
NBK_INLINE nkp_v nlp_lut(nkp_v v, __m512i t) { return _mm512_shuffle_epi8(t, v); }
NBK_INLINE __m512i nlp_lut_reg(void) { return _mm512_broadcast_i32x4(nlp_table()); }
/* 16 uint16 to the 16 int32 lanes */
NBK_INLINE nkp_v nlp_u16(const void *p) { return _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)); }
NBK_INLINE nkp_v nlp_dot(nkp_v acc, nkp_v c, int32_t a4) { return nkp_dot(acc, c, a4); }
#else
typedef __m256i nlp_tab;
NBK_INLINE nkp_v nlp_lut(nkp_v v, __m256i t)
{
    nkp_v r;
    r.l = _mm256_shuffle_epi8(t, v.l);
    r.h = _mm256_shuffle_epi8(t, v.h);
    return r;
}
NBK_INLINE __m256i nlp_lut_reg(void) { return _mm256_broadcastsi128_si256(nlp_table()); }
NBK_INLINE nkp_v nlp_u16(const void *p)
{
    nkp_v r;
    r.l = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    r.h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p + 1));
    return r;
}
#if NLP_BIAS || defined(NLP_SIGNED_DOT)
NBK_INLINE nkp_v nlp_dot(nkp_v acc, nkp_v c, int32_t a4) { return nkp_dot(acc, c, a4); }
#else
NBK_INLINE __m256i nlp_sdot1(__m256i acc, __m256i c, __m256i a)
{
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(c, c), _mm256_sign_epi8(a, c));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}
NBK_INLINE nkp_v nlp_dot(nkp_v acc, nkp_v c, int32_t a4)
{
    __m256i a = _mm256_set1_epi32(a4);
    nkp_v r;
    r.l = nlp_sdot1(acc.l, c.l, a);
    r.h = nlp_sdot1(acc.h, c.h, a);
    return r;
}
#endif
#endif

typedef struct {
    nkp_v sc[8]; /* ls_j - 32, int32 per lane */
#if NLP_BIAS
    nkp_v sp[4]; /* ls_2k - 32 and ls_2k+1 - 32 as the int16 halves of each lane */
#endif
    nkp_f d;
} nlp_meta;

NBK_INLINE void nlp_meta_iq4_xs(const unsigned char *blk, nlp_meta *m)
{
    nkp_v lo = nkp_load(blk + 64), hi = nlp_u16(blk + 32);
    const nkp_v m4 = nkp_set32(0x0f), m2 = nkp_set32(0x03), off = nkp_set32(32);
    for (int j = 0; j < 8; j++) {
        nkp_v l = nkp_and(j ? nkp_srl32(lo, 4 * j) : lo, m4);
        nkp_v h = nkp_and(j ? nkp_srl32(hi, 2 * j) : hi, m2);
        m->sc[j] = nkp_sub(nkp_or(l, nkp_sll32(h, 4)), off);
    }
#if NLP_BIAS
    const nkp_v low16 = nkp_set32(0xffff);
    for (int k = 0; k < 4; k++)
        m->sp[k] = nkp_or(nkp_and(m->sc[2 * k], low16), nkp_sll32(m->sc[2 * k + 1], 16));
#endif
    m->d = nkp_h2f(blk);
}

/* nt (1..NKP_T) tokens against one packed block; y[t] is token t's q8k
 * block, acc[t] its accumulator slot. */
NBK_INLINE void nlp_block_iq4_xs(const unsigned char *blk, const nlp_meta *m, const simd_block_q8k *const *y, int nt,
                                 float *const *acc)
{
    const unsigned char *qs = blk + 128;
    const nkp_v lo4 = nkp_set8(0x0f);
    const nlp_tab t = nlp_lut_reg();
    nkp_v sumi[NKP_T];
    for (int k = 0; k < nt; k++)
        sumi[k] = nkp_zero();
    for (int j = 0; j < 8; j++) {
        nkp_v dj[NKP_T];
        for (int k = 0; k < nt; k++)
            dj[k] = nkp_zero();
        for (int i = 0; i < 4; i++) {
            nkp_v q = nkp_load(qs + 64 * (4 * j + i));
            nkp_v cl = nlp_lut(nkp_and(q, lo4), t), ch = nlp_lut(nkp_and(nkp_srl16(q, 4), lo4), t);
            for (int k = 0; k < nt; k++) {
                dj[k] = nlp_dot(dj[k], cl, nkp_a4(y[k]->qs + 32 * j + 4 * i));
                dj[k] = nlp_dot(dj[k], ch, nkp_a4(y[k]->qs + 32 * j + 16 + 4 * i));
            }
        }
        for (int k = 0; k < nt; k++)
            sumi[k] = nkp_add(sumi[k], nkp_mul(dj[k], m->sc[j]));
    }
    for (int k = 0; k < nt; k++) {
#if NLP_BIAS
        int32_t p[4];
        nkp_pairs32(y[k], p);
        nkp_v bias = nkp_zero();
        for (int i = 0; i < 4; i++)
            bias = nkp_dotw(bias, m->sp[i], p[i]);
        sumi[k] = nkp_sub(sumi[k], nkp_sll32(bias, 7));
#endif
        nkp_float_step(m->d, NULL, &sumi[k], NULL, y[k]->d, acc[k]);
    }
}

/* ---- q2_k / q3_k (blocks of 256 against q8k, the K-quant driver) ----
 * q2_k packed block: scales (4 chunks at 0), qs (16 chunks at 256), d (32
 * bytes at 1280), dmin (32 at 1312). q3_k: hmask (8 chunks at 0), qs (16
 * chunks at 512), scales (3 chunks at 1536), d (32 bytes at 1728).
 * qs chunk 8h + i holds qs bytes 32h + 4i .. 32h + 4i + 3 of each row;
 * bits 2k, 2k+1 of those bytes are values 128h + 32k + 4i .. +3, in
 * sub-block j = 8h + 2k + i/4. q3_k's high bit of the same values is bit
 * 4h + k of hmask chunk i.
 *
 * Codes are unsigned on every set: q2_k's 0..3 as they are, q3_k's level
 * + 4 (0..7), and q3_k takes 4 * sum_j (sc_j - 32) * bsum_j off per block
 * and token, as lquants_x86.h does. Codes 0..7 are valid bytes for all
 * three products (vpdpbusd's unsigned side, vpdpbssd's signed one, and
 * maddubs pairs of at most 2*7*127), so the signed form that avxvnniint8
 * could use would only trade those 8 int16 pair products per block for a
 * subtraction on each of the block's 64 code vectors. Per lane:
 *   q2_k: sumi = sum_j sc_j * (codes . a)_j,  summ = sum_j m_j * bsum_j
 *         acc += (d * d_a) * (float)sumi - (dmin * d_a) * (float)summ
 *   q3_k: sumi = sum_j (sc_j - 32) * ((codes . a)_j - 4 * bsum_j)
 *         acc += (d * d_a) * (float)sumi
 * which are lquants.c's integers and float steps. Bounds: a sub-block dot
 * is at most 16*7*127, times 32, times 16 < 2^31. */

typedef struct {
    nkp_v sc[16]; /* sub-block scales (low nibbles), int32 per lane */
    nkp_v mp[8];  /* mins m_2k, m_2k+1 as the int16 halves of each lane */
    nkp_f d, dmin;
} nlp_meta2;

typedef struct {
    nkp_v sc[16]; /* sc_j - 32, int32 per lane */
    nkp_v sp[8];  /* sc_2k - 32 and sc_2k+1 - 32 as the int16 halves of each lane */
    nkp_f d;
} nlp_meta3;

NBK_INLINE void nlp_meta_q2_k(const unsigned char *blk, nlp_meta2 *m)
{
    const nkp_v m4 = nkp_set8(0x0f);
    for (int c = 0; c < 4; c++) {
        nkp_v u = nkp_load(blk + 64 * c);
        nkp_v lo = nkp_and(u, m4), hi = nkp_and(nkp_srl16(u, 4), m4);
        for (int k = 0; k < 4; k++)
            m->sc[4 * c + k] = nkp_shuf(lo, nkp_pat_byte(k));
        m->mp[2 * c] = nkp_shuf(hi, nkp_pat_lo16(0));
        m->mp[2 * c + 1] = nkp_shuf(hi, nkp_pat_lo16(2));
    }
    m->d = nkp_h2f(blk + 1280);
    m->dmin = nkp_h2f(blk + 1312);
}

/* The six-bit scales (simd_q3k_scales, lane by lane): chunk u0 holds
 * scales bytes 0-3, u1 4-7, u2 8-11. sc_4g+k has its low 4 bits in byte k
 * of u0 (g = 0), u1 (1), u0's high nibbles (2), u1's (3), and its top 2
 * bits at bits 2g, 2g+1 of byte k of u2. */
NBK_INLINE void nlp_meta_q3_k(const unsigned char *blk, nlp_meta3 *m)
{
    const unsigned char *sb = blk + 1536;
    nkp_v u0 = nkp_load(sb), u1 = nkp_load(sb + 64), u2 = nkp_load(sb + 128);
    const nkp_v m4 = nkp_set8(0x0f), m30 = nkp_set8(0x30), off = nkp_set32(32), low16 = nkp_set32(0xffff);
    const nkp_v lo[4] = {nkp_and(u0, m4), nkp_and(u1, m4), nkp_and(nkp_srl16(u0, 4), m4),
                         nkp_and(nkp_srl16(u1, 4), m4)};
    for (int g = 0; g < 4; g++) {
        /* bits 2g, 2g+1 of each byte to bits 4, 5 (16-bit shifts: the
         * mask keeps bits that stayed within their byte) */
        nkp_v hi = g < 2 ? nkp_sll16(u2, 4 - 2 * g) : g == 2 ? u2 : nkp_srl16(u2, 2);
        nkp_v s = nkp_or(lo[g], nkp_and(hi, m30));
        for (int k = 0; k < 4; k++)
            m->sc[4 * g + k] = nkp_sub(nkp_shuf(s, nkp_pat_byte(k)), off);
    }
    for (int k = 0; k < 8; k++)
        m->sp[k] = nkp_or(nkp_and(m->sc[2 * k], low16), nkp_sll32(m->sc[2 * k + 1], 16));
    m->d = nkp_h2f(blk + 1728);
}

/* nt (1..NKP_T) tokens against one packed q2_k (three = 0) or q3_k block;
 * y[t] is token t's q8k block, acc[t] its accumulator slot. meta is an
 * nlp_meta2 or nlp_meta3. */
NBK_INLINE void nlp_block_q23(int three, const unsigned char *blk, const void *meta, const simd_block_q8k *const *y,
                              int nt, float *const *acc)
{
    const nlp_meta2 *m2 = meta;
    const nlp_meta3 *m3 = meta;
    const unsigned char *hmask = blk, *qs = blk + (three ? 512 : 256);
    nkp_v sumi[NKP_T];
    for (int t = 0; t < nt; t++)
        sumi[t] = nkp_zero();
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++) {
            /* q2_k: the codes of bits 2k, 2k+1 stay where they are, so
             * each is 4^k times the code, and the sub-block's dot is
             * divided by the same power once: it is an exact multiple, so
             * the arithmetic shift is exact (a scaled dot <= 16*192*127).
             * That saves a shift per code vector. Codes up to 192 need
             * vpdpbusd (NKP_U8): vpdpbssd reads bytes signed and maddubs
             * pairs saturate int16 at 2*192*127, so without it k = 3 is
             * moved down by 2 (16 times the code). q3_k keeps its codes
             * at bits 0-2: measured, the scaled form with its high bit
             * merged by vpternlogd ran 25% slower (nibble_kbench,
             * avx512vnni). */
            const int sh = three ? 0 : !NKP_U8 && k == 3 ? 4 : 2 * k;
            const nkp_v lo2 = nkp_set8(3 << sh), bit2 = nkp_set8(0x04);
            for (int s = 0; s < 2; s++) {
                nkp_v dj[NKP_T];
                for (int t = 0; t < nt; t++)
                    dj[t] = nkp_zero();
                for (int i = 4 * s; i < 4 * s + 4; i++) {
                    nkp_v q = nkp_load(qs + 64 * (8 * h + i));
                    const int qsh = 2 * k - sh; /* q's shift: 2k for q3_k, 0 or 2 for q2_k */
                    nkp_v c = nkp_and(qsh ? nkp_srl16(q, qsh) : q, lo2);
                    if (three) {
                        /* bit 4h + k of the hmask byte to bit 2 (it stays
                         * within its byte for these shifts) */
                        nkp_v hm = nkp_load(hmask + 64 * i);
                        int b = 4 * h + k;
                        nkp_v hb = b >= 2 ? nkp_srl16(hm, b - 2) : nkp_sll16(hm, 2 - b);
                        c = nkp_or(c, nkp_and(hb, bit2));
                    }
                    for (int t = 0; t < nt; t++)
                        dj[t] = nkp_dot(dj[t], c, nkp_a4(y[t]->qs + 128 * h + 32 * k + 4 * i));
                }
                const nkp_v sc = three ? m3->sc[8 * h + 2 * k + s] : m2->sc[8 * h + 2 * k + s];
                for (int t = 0; t < nt; t++)
                    sumi[t] = nkp_add(sumi[t], nkp_mul(sh ? nkp_sra32(dj[t], sh) : dj[t], sc));
            }
        }
    for (int t = 0; t < nt; t++) {
        /* the 16 bsums, two to an int32 for the int16 pair products */
        nkp_v bs = nkp_zero();
        for (int k = 0; k < 8; k++) {
            int32_t p2;
            memcpy(&p2, y[t]->bsums + 2 * k, 4);
            bs = nkp_dotw(bs, three ? m3->sp[k] : m2->mp[k], p2);
        }
        if (three) {
            nkp_v s = nkp_sub(sumi[t], nkp_sll32(bs, 2));
            nkp_float_step(m3->d, NULL, &s, NULL, y[t]->d, acc[t]);
        } else {
            nkp_float_step(m2->d, &m2->dmin, &sumi[t], &bs, y[t]->d, acc[t]);
        }
    }
}

/* ---- iq3_s, packed decoded (the K-quant driver) ----
 * simd.h has the layout: nibbles u = (v + 15) / 2 of the levels v, so no
 * grid lookup at run time. u is unsigned 0..15, a valid byte for every
 * set's product (vpdpbusd's unsigned side, vpdpbssd's signed one, maddubs
 * pairs of at most 2*15*127). Per lane, with ls_j = 2 s_j + 1 and S_j the
 * activation's sum over sub-block j (32 values):
 *   sumi = sum_j ls_j * (v . a)_j = 2 * sum_j ls_j * (u . a)_j - 15 * sum_j ls_j * S_j
 *   acc += (d * d_a) * (float)sumi
 * iquants.c's integer and float step. Bounds: (u . a)_j <= 32*15*127,
 * times 31, times 8, times 2 < 2^25. */

typedef struct {
    nkp_v sc[8]; /* ls_j, int32 per lane */
    nkp_v sp[4]; /* ls_2k and ls_2k+1 as the int16 halves of each lane */
    nkp_f d;
} nlp_meta3s;

NBK_INLINE void nlp_meta_iq3_s(const unsigned char *blk, nlp_meta3s *m)
{
    nkp_v u = nkp_load(blk + 32);
    const nkp_v m4 = nkp_set32(0x0f), one = nkp_set32(1);
    for (int j = 0; j < 8; j++)
        m->sc[j] = nkp_or(nkp_sll32(nkp_and(j ? nkp_srl32(u, 4 * j) : u, m4), 1), one);
    for (int k = 0; k < 4; k++)
        m->sp[k] = nkp_or(m->sc[2 * k], nkp_sll32(m->sc[2 * k + 1], 16));
    m->d = nkp_h2f(blk);
}

NBK_INLINE void nlp_block_iq3_s(const unsigned char *blk, const nlp_meta3s *m, const simd_block_q8k *const *y, int nt,
                                float *const *acc)
{
    const unsigned char *qs = blk + 96;
    const nkp_v lo4 = nkp_set8(0x0f);
    nkp_v sumi[NKP_T];
    for (int t = 0; t < nt; t++)
        sumi[t] = nkp_zero();
    for (int j = 0; j < 8; j++) {
        nkp_v dj[NKP_T];
        for (int t = 0; t < nt; t++)
            dj[t] = nkp_zero();
        for (int i = 0; i < 4; i++) {
            nkp_v q = nkp_load(qs + 64 * (4 * j + i));
            nkp_v cl = nkp_and(q, lo4), ch = nkp_and(nkp_srl16(q, 4), lo4);
            for (int t = 0; t < nt; t++) {
                dj[t] = nkp_dot(dj[t], cl, nkp_a4(y[t]->qs + 32 * j + 4 * i));
                dj[t] = nkp_dot(dj[t], ch, nkp_a4(y[t]->qs + 32 * j + 16 + 4 * i));
            }
        }
        for (int t = 0; t < nt; t++)
            sumi[t] = nkp_add(sumi[t], nkp_mul(dj[t], m->sc[j]));
    }
    for (int t = 0; t < nt; t++) {
        int32_t p[4];
        nkp_pairs32(y[t], p);
        nkp_v bias = nkp_zero();
        for (int k = 0; k < 4; k++)
            bias = nkp_dotw(bias, m->sp[k], p[k]);
        /* 2 * sumi - 15 * bias */
        nkp_v s = nkp_sub(nkp_sll32(sumi[t], 1), nkp_sub(nkp_sll32(bias, 4), bias));
        nkp_float_step(m->d, NULL, &s, NULL, y[t]->d, acc[t]);
    }
}

/* ---- iq4_nl: blocks of 32 against q8a ----
 * A packed block: d (32 bytes), qs (4 chunks): chunk i's low nibbles are
 * values 4i.., its high nibbles 16+4i... Per row (lane), token and block
 * the exact isum (with the biased table, less 128 times the activation
 * block's sum), then the reference's float step
 *   acc[b & 7] += (d_w * d_a) * (float)isum
 * and the 8 slots combined as simd_reduce8 does. */

NBK_INLINE void nlp_block_iq4_nl(const unsigned char *blk, nkp_f d, const simd_block_q8a *const *y, int nt,
                                 float *const *acc)
{
    const nkp_v lo4 = nkp_set8(0x0f);
    const nlp_tab t = nlp_lut_reg();
    nkp_v s[NKP_T];
    for (int k = 0; k < nt; k++)
        s[k] = NLP_BIAS ? nkp_set32(-(int32_t)((uint32_t)y[k]->sum << 7)) : nkp_zero();
    for (int i = 0; i < 4; i++) {
        nkp_v q = nkp_load(blk + 32 + 64 * i);
        nkp_v cl = nlp_lut(nkp_and(q, lo4), t), ch = nlp_lut(nkp_and(nkp_srl16(q, 4), lo4), t);
        for (int k = 0; k < nt; k++) {
            s[k] = nlp_dot(s[k], cl, nkp_a4(y[k]->qs + 4 * i));
            s[k] = nlp_dot(s[k], ch, nkp_a4(y[k]->qs + 16 + 4 * i));
        }
    }
    for (int k = 0; k < nt; k++)
        nkp_float_step(d, NULL, &s[k], NULL, y[k]->d, acc[k]);
}

static void nlp_packed_iq4_nl(size_t n, const void *p, size_t ng, const void *a, size_t as, size_t nt, float *out,
                              size_t os)
{
    const size_t nb = n / SIMD_QK, bb = NKP_R * sizeof(simd_block_iq4_nl);
    float acc[NKP_TCHUNK][8][NKP_R];
    for (size_t g = 0; g < ng; g++) {
        const unsigned char *gp = (const unsigned char *)p + g * nb * bb;
        for (size_t t0 = 0; t0 < nt; t0 += NKP_TCHUNK) {
            const size_t tn = nt - t0 < NKP_TCHUNK ? nt - t0 : NKP_TCHUNK;
            const char *at = (const char *)a + t0 * as;
            for (size_t t = 0; t < tn; t++)
                for (int l = 0; l < 8; l++)
                    nkp_fstore(acc[t][l], nkp_fzero());
            for (size_t b = 0; b < nb; b++) {
                const unsigned char *blk = gp + b * bb;
                if (NKP_PF > 0 && (b & 1) == 0)
                    for (size_t o = 0; o < 2 * bb; o += 64)
                        _mm_prefetch((const char *)blk + NKP_PF + o, _MM_HINT_T0);
                nkp_f d = nkp_h2f(blk);
                for (size_t t1 = 0; t1 < tn; t1 += NKP_T) {
                    const simd_block_q8a *y[NKP_T];
                    float *ac[NKP_T];
                    int k = (int)(tn - t1 < NKP_T ? tn - t1 : NKP_T);
                    for (int t = 0; t < k; t++) {
                        y[t] = (const simd_block_q8a *)(at + (t1 + t) * as) + b;
                        ac[t] = acc[t1 + t][b & 7];
                    }
                    NKP_BY_TOKENS(k, nlp_block_iq4_nl(blk, d, y, NKP_K, ac))
                }
            }
            nkp_reduce_store(acc, tn, out + t0 * os + g * NKP_R, os);
        }
    }
}

#endif
