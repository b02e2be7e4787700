/* q2_k, q3_k, iq4_xs (against q8k) and iq4_nl (against q8a) dots for the
 * x86 sets. Included at the end of each kernels_<set>.c, after
 * kernels_x86.h and kquants_x86.h (whose pieces it uses: nbk_dot,
 * nbk_fold4, nbk_hsum2, nb_nib32, nb_fill_scales ...), with
 * NBL_SET_FN naming the function that installs the kernels.
 *
 * A super-block is expanded to 8 vectors of 32 codes in activation order
 * (vector g holds values 32g .. 32g+31, so sub-block 2g of 16 values is
 * its low 128-bit half and 2g+1 its high half), and its 16 sub-block
 * scales are laid out as nbk_fold4 leaves the half sums (as q6_k's).
 * Codes: q2_k 0..3 and q3_k q+4 (0..7) as unsigned bytes for nbk_dot,
 * q3_k's bias 4 * sum_j sc_j * bsum_j taken off after; iq4 levels are
 * signed (-127..113), multiplied as |w| * (a with w's sign) (pairs at
 * most 2*127*127, no int16 saturation), or directly by vpdpbssd.
 *
 * Float work is the reference's (lquants.c) in plain scalar C per
 * super-block, and for iq4_nl eight blocks a vector as kernels_x86.h
 * explains, so the bits are the scalar set's. */
#ifndef NIBBLE_LQUANTS_X86_H
#define NIBBLE_LQUANTS_X86_H

#include "lquants.h"

/* 8 int32 whose total is sum(w * a) for signed bytes w (|w| <= 127). */
NBK_INLINE __m256i nbl_sdot(__m256i w, __m256i a)
{
#if defined(NBK_DPBSSD)
    return NBK_DPBSSD(_mm256_setzero_si256(), w, a);
#else
    return nbk_dot(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
#endif
}

NBK_INLINE __m256i nbl_iq4_lut(void)
{
    return _mm256_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113, -127, -104, -83,
                            -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
}

typedef struct {
    __m256i sx, sy; /* sub-block scales in nbk_fold4's lane order */
    __m256i m16;    /* q2_k: mins, q3_k: scales, as 16 int16 (for the bsums) */
} nbl_scales;

/* 16 signed byte scales, one per sub-block, into sx / sy (and their int16
 * copy into m16 when wanted). */
NBK_INLINE void nbl_scales16(__m128i s, nbl_scales *sc)
{
    __m128i o = _mm_shuffle_epi8(s, _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15));
    sc->sx = _mm256_cvtepi8_epi32(o);
    sc->sy = _mm256_cvtepi8_epi32(_mm_srli_si128(o, 8));
}

/* Low 2-bit codes of q2_k / q3_k: qs[32h + l] bits 2k, 2k+1 are value
 * 128h + 32k + l. */
NBK_INLINE void nbl_low2(const uint8_t *qs, __m256i w[8])
{
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        __m256i q = nbk_load(qs + 32 * h);
        w[4 * h] = _mm256_and_si256(q, m3);
        w[4 * h + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 2), m3);
        w[4 * h + 2] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m3);
        w[4 * h + 3] = _mm256_and_si256(_mm256_srli_epi16(q, 6), m3);
    }
}

/* The signed codes of an i-quant super-block (iquants.h), sub-block i in
 * v[i]: its four grid entries (simd_iq_sub) side by side, and the sign
 * bytes spread so that byte j of the vector sees sign byte j / 8, whose
 * bit j % 8 becomes a 0xff mask by and + compare against that bit, then
 * +-1 for vpsignb. iq1 codes are 8 * grid byte (a 16-bit shift with the
 * bits that cross into the next byte masked off) plus a delta of +-1, the
 * mask or 1. The codes equal simd_iq_expand's, so every sum does too. */
NBK_INLINE void nbl_iq_codes(int type, const unsigned char *x, __m256i v[8])
{
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                                            3, 3, 3, 3, 3, 3, 3);
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201u), one = _mm256_set1_epi8(1);
    for (int i = 0; i < 8; i++) {
        uint64_t g[4];
        uint32_t s = simd_iq_sub(type, x, i, g);
        __m256i q = _mm256_set_epi64x((long long)g[3], (long long)g[2], (long long)g[1], (long long)g[0]);
        __m256i sv = _mm256_shuffle_epi8(_mm256_set1_epi32((int)s), spread);
        if (type == SIMD_IQ1_S || type == SIMD_IQ1_M) {
            __m256i c8 = _mm256_and_si256(_mm256_slli_epi16(q, 3), _mm256_set1_epi8((char)0xf8));
            v[i] = _mm256_add_epi8(c8, _mm256_or_si256(sv, one));
        } else {
            __m256i m = _mm256_cmpeq_epi8(_mm256_and_si256(sv, bits), bits);
            v[i] = _mm256_sign_epi8(q, _mm256_or_si256(m, one));
        }
    }
}

/* Expand super-block x of type into w and sc; its f16 scales as floats. */
NBK_INLINE void nbl_prep(int type, const unsigned char *x, nbk_codes *w, nbl_scales *sc, float *d, float *dmin)
{
    if (type == SIMD_Q2_K) {
        const simd_block_q2_k *b = (const simd_block_q2_k *)x;
        __m128i raw = _mm_loadu_si128((const __m128i *)b->scales);
        const __m128i m4 = _mm_set1_epi8(0x0f);
        nbl_scales16(_mm_and_si128(raw, m4), sc);
        sc->m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), m4));
        nbl_low2(b->qs, w->v);
        *d = nbk_h2f(b->d);
        *dmin = nbk_h2f(b->dmin);
    } else if (type == SIMD_Q3_K) {
        const simd_block_q3_k *b = (const simd_block_q3_k *)x;
        int8_t s[16];
        simd_q3k_scales(b->scales, s);
        __m128i sv = _mm_sub_epi8(_mm_loadu_si128((const __m128i *)s), _mm_set1_epi8(32));
        nbl_scales16(sv, sc);
        sc->m16 = _mm256_cvtepi8_epi16(sv);
        nbl_low2(b->qs, w->v);
        /* the high bit: bit 4h+k of hmask[l] for vector 4h+k, to 4 */
        __m256i hm = nbk_load(b->hmask);
        const __m256i one = _mm256_set1_epi8(1);
        for (int g = 0; g < 8; g++) {
            __m256i bit = _mm256_and_si256(_mm256_srli_epi16(hm, g), one);
            w->v[g] = _mm256_or_si256(w->v[g], _mm256_slli_epi16(bit, 2));
        }
        *d = nbk_h2f(b->d);
        *dmin = 0;
    } else if (simd_is_iquant(type)) {
        int8_t s[16];
        *d = simd_iq_scales(type, x, s);
        nbl_iq_codes(type, x, w->v);
        nbl_scales16(_mm_loadu_si128((const __m128i *)s), sc);
        sc->m16 = _mm256_setzero_si256();
        *dmin = 0;
    } else {
        const simd_block_iq4_xs *b = (const simd_block_iq4_xs *)x;
        const __m256i lut = nbl_iq4_lut();
        for (int j = 0; j < 8; j++)
            w->v[j] = _mm256_shuffle_epi8(lut, nb_nib32(b->qs + 16 * j));
        int l[8];
        for (int j = 0; j < 8; j++)
            l[j] = simd_iq4xs_scale(b, j) - 32;
        /* sub-blocks 2j and 2j+1 (the halves of vector j) share ls_j */
        sc->sx = _mm256_setr_epi32(l[0], l[1], l[2], l[3], l[0], l[1], l[2], l[3]);
        sc->sy = _mm256_setr_epi32(l[4], l[5], l[6], l[7], l[4], l[5], l[6], l[7]);
        sc->m16 = _mm256_setzero_si256();
        *d = nbk_h2f(b->d);
        *dmin = 0;
    }
}

/* sumi (and q2_k's summ) of one token. Bounds: a 16-value sum is at most
 * 16*127*127 (iq4), times 32, times 16 < 2^31. */
NBK_INLINE void nbl_sums(int type, const nbk_codes *w, const nbl_scales *sc, const simd_block_q8k *y, int32_t *sumi,
                         int32_t *summ)
{
    __m256i v[8];
    for (int g = 0; g < 8; g++) {
        __m256i a = nbk_load(y->qs + 32 * g);
        v[g] = type == SIMD_IQ4_XS || simd_is_iquant(type) ? nbl_sdot(w->v[g], a) : nbk_dot(w->v[g], a);
    }
    __m256i s = _mm256_add_epi32(_mm256_mullo_epi32(nbk_fold4(v[0], v[1], v[2], v[3]), sc->sx),
                                 _mm256_mullo_epi32(nbk_fold4(v[4], v[5], v[6], v[7]), sc->sy));
    __m256i m = type == SIMD_IQ4_XS || simd_is_iquant(type) ? _mm256_setzero_si256() : _mm256_madd_epi16(nbk_load(y->bsums), sc->m16);
    int32_t a, b;
    nbk_hsum2(s, m, &a, &b);
    *sumi = type == SIMD_Q3_K ? a - 4 * b : a;
    *summ = type == SIMD_Q2_K ? b : 0;
}

NBK_INLINE size_t nbl_bytes(int type)
{
    return type == SIMD_Q2_K        ? sizeof(simd_block_q2_k)
           : type == SIMD_Q3_K      ? sizeof(simd_block_q3_k)
           : type == SIMD_IQ4_XS    ? sizeof(simd_block_iq4_xs)
                                    : simd_iq_bytes(type);
}

#include "lquants_rows.h"

/* ---- iq4_nl: blocks of 32 against q8a ---- */

#define NBL_NL_BS sizeof(simd_block_iq4_nl)

/* The first m (1..8) of the 8 blocks at wb against blocks b.. of nt
 * activation rows, into acc[t] (the per-block sums folded as
 * kernels_x86_q.h's nb_qgroup8 does). */
NB_INLINE void nbl_nl_group8(const unsigned char *wb, int m, const char *a, size_t astride, size_t b, int nt,
                             const nb_scales *sc, size_t k0, __m256 acc[])
{
    const __m256i z = _mm256_setzero_si256(), lut = nbl_iq4_lut();
    __m256i q[2][NB_MAXT];
    for (int half = 0; half < 2; half++) {
        __m256i h[2][NB_MAXT];
        for (int p = 0; p < 2; p++) {
            int k = 4 * half + 2 * p;
            __m256i w0 = k < m ? _mm256_shuffle_epi8(lut, nb_nib32(wb + (size_t)k * NBL_NL_BS + 2)) : z;
            __m256i w1 = k + 1 < m ? _mm256_shuffle_epi8(lut, nb_nib32(wb + (size_t)(k + 1) * NBL_NL_BS + 2)) : z;
            for (int t = 0; t < nt; t++) {
                const simd_block_q8a *y = (const simd_block_q8a *)(a + t * astride) + b + k;
                __m256i d0 = k < m ? nbl_sdot(w0, _mm256_loadu_si256((const __m256i *)y[0].qs)) : z;
                __m256i d1 = k + 1 < m ? nbl_sdot(w1, _mm256_loadu_si256((const __m256i *)y[1].qs)) : z;
                h[p][t] = _mm256_hadd_epi32(d0, d1);
            }
        }
        for (int t = 0; t < nt; t++)
            q[half][t] = _mm256_hadd_epi32(h[0][t], h[1][t]);
    }
    __m256 dw, mw;
    if (m < 8)
        nb_wscales_part(SIMD_IQ4_NL, wb, NBL_NL_BS, m, &dw, &mw);
    else
        dw = nb_wd8(wb, NBL_NL_BS);
    for (int t = 0; t < nt; t++) {
        __m256i isum = _mm256_add_epi32(_mm256_permute2x128_si256(q[0][t], q[1][t], 0x20),
                                        _mm256_permute2x128_si256(q[0][t], q[1][t], 0x31));
        acc[t] = nb_fstep(acc[t], dw, _mm256_loadu_ps(&sc->d[t][k0]), isum);
    }
}

NB_GROUP8_DOTS(nbl_nl_dot, nbl_nl_group8, NBL_NL_BS)

#include "iquants_x86.h"

/* iq4_xs on packed rows: kquants_packed_x86.h's driver with
 * lquants_packed_x86.h's block pieces */
static void nbl_packed_iq4_xs(size_t n, const void *p, size_t ng, const void *a, size_t as, size_t nt, float *out,
                              size_t os)
{
    nkp_packed(SIMD_IQ4_XS, n, p, ng, a, as, nt, out, os);
}
static void nbl_packed_q2_k(size_t n, const void *p, size_t ng, const void *a, size_t as, size_t nt, float *out,
                            size_t os)
{
    nkp_packed(SIMD_Q2_K, n, p, ng, a, as, nt, out, os);
}
static void nbl_packed_q3_k(size_t n, const void *p, size_t ng, const void *a, size_t as, size_t nt, float *out,
                            size_t os)
{
    nkp_packed(SIMD_Q3_K, n, p, ng, a, as, nt, out, os);
}
static void nbl_packed_iq3_s(size_t n, const void *p, size_t ng, const void *a, size_t as, size_t nt, float *out,
                             size_t os)
{
    nkp_packed(SIMD_IQ3_S, n, p, ng, a, as, nt, out, os);
}

void NBL_SET_FN(simd_kernel_set *s)
{
    nbl_set_dots(s);
    nbi_set_dots(s); /* the i-quants below 4 bits: iquants_x86.h's driver */
    s->dot_packed[SIMD_IQ4_XS] = nbl_packed_iq4_xs;
    s->dot_packed[SIMD_Q2_K] = nbl_packed_q2_k;
    s->dot_packed[SIMD_Q3_K] = nbl_packed_q3_k;
    s->dot_packed[SIMD_IQ4_NL] = nlp_packed_iq4_nl; /* lquants_packed_x86.h */
    s->dot_packed[SIMD_IQ3_S] = nbl_packed_iq3_s; /* decoded at pack time: simd.h */
    s->dot[SIMD_IQ4_NL] = nbl_nl_dot;
    s->dot_batch[SIMD_IQ4_NL] = nbl_nl_dot_batch;
    s->dot_rows[SIMD_IQ4_NL] = nbl_nl_dot_rows;
}

#endif
