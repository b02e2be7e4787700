/* Pieces shared by the x86 kernel files. Each kernels_<set>.c includes this
 * under its own ISA flags (at least AVX2 + F16C), so the same source
 * compiles to that set's encodings; nothing here is compiled on its own.
 *
 * How the sets stay bit-identical to kernels_scalar.c:
 *  - integer block sums are exact, so any instruction sequence that gets
 *    the right integer is fine;
 *  - the float work per block is done per lane exactly as the reference
 *    writes it: (d_w * d_a) first, then times (float)isum, then added to
 *    an 8-lane accumulator whose lane l takes blocks b = l (mod 8) in
 *    increasing b. Eight consecutive blocks therefore fill one vector, one
 *    block per lane;
 *  - the lanes are combined by simd_reduce8, the same function the
 *    reference calls;
 *  - no FMA: the project builds with -ffp-contract=off and no code here
 *    asks for a fused multiply-add.
 * Missing blocks (a row whose block count is not a multiple of 8) fill
 * their lanes with zeros, never read from memory: isum = 0, d_w = 0 and
 * d_a = 0, so their term is (0*0)*0 = +0, and adding +0 to an accumulator
 * that started at +0 changes nothing (such an accumulator can never be -0
 * under round-to-nearest). */
#ifndef NIBBLE_KERNELS_X86_H
#define NIBBLE_KERNELS_X86_H

#include "kernels_common.h"
#include "reduce_x86.h"

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

/* Tokens per register-blocked batch step: the weights of a block are
 * expanded once for this many activation rows. 4 fits AVX2's 16 vector
 * registers; 8 measured no better with AVX-512's 32. NB_BATCH_DRIVER
 * assumes 4. */
#define NB_MAXT 4

/* ---- float rows ---- */

NB_INLINE float nb_reduce(__m256 acc)
{
    float l[8];
    _mm256_storeu_ps(l, acc);
    return simd_reduce8(l);
}

/* ---- float-activation dots (F32 / F16 / BF16 weights) ----
 * Element i's product goes to lane i mod 8: one vector of 8 elements at a
 * time, acc = acc + w*a, which is the reference loop eight lanes wide. */

NB_INLINE __m256 nb_wload8(int type, const void *w, size_t i)
{
    switch (type) {
    case SIMD_F16:
        /* vcvtph2ps is exact (subnormals too; NaN comes out quiet, as
         * simd_f16_to_f32 gives it) */
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const simd_f16 *)w + i)));
    case SIMD_BF16: {
        __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const simd_bf16 *)w + i)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
    }
    default:
        return _mm256_loadu_ps((const float *)w + i);
    }
}

/* nt (1..NB_MAXT, a constant after inlining) activation rows at a +
 * t*astride bytes; out[t*ostride]. */
NB_INLINE void nb_frows(int type, size_t n, const void *w, const char *a, size_t astride, int nt,
                        float *out, size_t ostride)
{
    __m256 acc[NB_MAXT];
    for (int t = 0; t < nt; t++)
        acc[t] = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 wv = nb_wload8(type, w, i);
        for (int t = 0; t < nt; t++) {
            __m256 av = _mm256_loadu_ps((const float *)(a + t * astride) + i);
            acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(wv, av));
        }
    }
    if (i < n) { /* the last n mod 8 elements, zero-padded */
        size_t r = n - i;
        unsigned char wb[32] = {0};
        memcpy(wb, (const unsigned char *)w + i * nb_welem(type), r * nb_welem(type));
        __m256 wv = nb_wload8(type, wb, 0);
        for (int t = 0; t < nt; t++) {
            float ab[8] = {0};
            memcpy(ab, (const float *)(a + t * astride) + i, r * sizeof(float));
            acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(wv, _mm256_loadu_ps(ab)));
        }
    }
    for (int t = 0; t < nt; t++)
        out[t * ostride] = nb_reduce(acc[t]);
}

/* Batch driver: tokens NB_MAXT at a time, then the rest, each call with
 * a constant token count so the inner loops unroll. */
#define NB_BATCH_DRIVER(ROWS, TYPE, n, w, a, as, nt, out, os)                                      \
    do {                                                                                           \
        size_t t_ = 0;                                                                             \
        for (; t_ + NB_MAXT <= (nt); t_ += NB_MAXT)                                                \
            ROWS(TYPE, n, w, (const char *)(a) + t_ * (as), as, NB_MAXT, (out) + t_ * (os), os);   \
        switch ((nt) - t_) {                                                                       \
        case 3: ROWS(TYPE, n, w, (const char *)(a) + t_ * (as), as, 3, (out) + t_ * (os), os); break; \
        case 2: ROWS(TYPE, n, w, (const char *)(a) + t_ * (as), as, 2, (out) + t_ * (os), os); break; \
        case 1: ROWS(TYPE, n, w, (const char *)(a) + t_ * (as), as, 1, (out) + t_ * (os), os); break; \
        default: break;                                                                            \
        }                                                                                          \
    } while (0)

static float nb_dot_f32(size_t n, const float *a, const float *b)
{
    float r;
    nb_frows(SIMD_F32, n, a, (const char *)b, 0, 1, &r, 0);
    return r;
}

#define NB_FDOT(NAME, TYPE)                                                                    \
    static float NAME(size_t n, const void *w, const void *a)                                  \
    {                                                                                          \
        float r;                                                                               \
        nb_frows(TYPE, n, w, a, 0, 1, &r, 0);                                                  \
        return r;                                                                              \
    }                                                                                          \
    static void NAME##_batch(size_t n, const void *w, const void *a, size_t as, size_t nt,     \
                             float *out, size_t os)                                            \
    {                                                                                          \
        NB_BATCH_DRIVER(nb_frows, TYPE, n, w, a, as, nt, out, os);                              \
    }
NB_FDOT(nb_dot_w_f32, SIMD_F32)
NB_FDOT(nb_dot_w_f16, SIMD_F16)
NB_FDOT(nb_dot_w_bf16, SIMD_BF16)

/* ---- float weights, several rows and tokens at once (dot_rows) ----
 * A batch (prefill, a speculative check) multiplies each row by many
 * tokens. nb_frows keeps one row's vector for up to NB_MAXT tokens and
 * adds each token's 8 lanes by simd_reduce8 through memory, which on
 * short rows (a tiny model's 64 columns) costs as much as the products.
 * Here a tile of NR rows by NT tokens keeps NR*NT accumulators, each
 * row's vector and each token's vector loaded once per 8 columns, and
 * x86_reduce8x8 adds 8 accumulators' lanes at once in simd_reduce8's
 * tree. Each accumulator is the reference's 8 lanes for its (row, token)
 * (lane = column mod 8, columns in order, started at +0), so the bits are
 * nb_frows'. */

/* Widest tile: with AVX-512's 32 vector registers, 2 rows by 8 tokens
 * (16 accumulators, 8 token vectors, a row vector); with AVX2's 16, 2 by 4. */
#ifdef __AVX512F__
#define NB_FT_MAXT 8
#define NB_FT_WIDE(TYPE) NB_FT_PASS(TYPE, 2, 8)
#else
#define NB_FT_MAXT 4
#define NB_FT_WIDE(TYPE)
#endif

/* Rows w, w + ws (nr of them) by tokens a, a + as (nt of them), nr*nt a
 * multiple of 8, both constants after inlining; out[t*os + r]. */
NB_INLINE void nb_ftile(int type, size_t n, const char *w, size_t ws, const char *a, size_t as, int nr, int nt,
                        float *out, size_t os)
{
    __m256 acc[16], av[NB_FT_MAXT];
    for (int i = 0; i < nr * nt; i++)
        acc[i] = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int t = 0; t < nt; t++)
            av[t] = _mm256_loadu_ps((const float *)(a + t * as) + i);
        for (int r = 0; r < nr; r++) {
            __m256 wv = nb_wload8(type, w + r * ws, i);
            for (int t = 0; t < nt; t++)
                acc[r * nt + t] = _mm256_add_ps(acc[r * nt + t], _mm256_mul_ps(wv, av[t]));
        }
    }
    if (i < n) { /* the last n mod 8 columns, zero-padded as nb_frows pads them */
        size_t rest = n - i;
        for (int t = 0; t < nt; t++) {
            float ab[8] = {0};
            memcpy(ab, (const float *)(a + t * as) + i, rest * sizeof(float));
            av[t] = _mm256_loadu_ps(ab);
        }
        for (int r = 0; r < nr; r++) {
            unsigned char wb[32] = {0};
            memcpy(wb, w + r * ws + i * nb_welem(type), rest * nb_welem(type));
            __m256 wv = nb_wload8(type, wb, 0);
            for (int t = 0; t < nt; t++)
                acc[r * nt + t] = _mm256_add_ps(acc[r * nt + t], _mm256_mul_ps(wv, av[t]));
        }
    }
    for (int g = 0; g < nr * nt; g += 8) {
        float s[8];
        _mm256_storeu_ps(s, x86_reduce8x8(acc + g));
        for (int j = 0; j < 8; j++)
            out[(size_t)((g + j) % nt) * os + (size_t)((g + j) / nt)] = s[j];
    }
}

/* Rows r0.. of the float weights by tokens [t0, t0 + nt) in tiles of NT
 * tokens (NR = 8 / NT or 16 / NT rows); the rows left over, one by one. */
#define NB_FT_PASS(TYPE, NR, NT)                                                                          \
    for (; nt - t0 >= (NT); t0 += (NT)) {                                                                 \
        size_t r_ = 0;                                                                                    \
        for (; r_ + (NR) <= nr; r_ += (NR))                                                               \
            nb_ftile(TYPE, n, (const char *)w + r_ * ws, ws, (const char *)a + t0 * as, as, NR, NT,       \
                     out + t0 * os + r_, os);                                                             \
        for (; r_ < nr; r_++)                                                                             \
            NB_BATCH_DRIVER(nb_frows, TYPE, n, (const char *)w + r_ * ws, (const char *)a + t0 * as, as,  \
                            NT, out + t0 * os + r_, os);                                                  \
    }

/* dot_rows of a float type: tiles over tokens while two or more are left;
 * a single token (decode, or a batch's last) goes row by row as before. */
#define NB_FROWS(NAME, TYPE)                                                                              \
    static void NAME##_rows(size_t n, const void *w, size_t ws, size_t nr, const void *a, size_t as,     \
                            size_t nt, float *out, size_t os)                                             \
    {                                                                                                     \
        size_t t0 = 0;                                                                                    \
        NB_FT_WIDE(TYPE)                                                                                  \
        NB_FT_PASS(TYPE, 2, 4)                                                                            \
        NB_FT_PASS(TYPE, 4, 2)                                                                            \
        for (size_t r_ = 0; t0 < nt && r_ < nr; r_++)                                                     \
            NAME##_batch(n, (const char *)w + r_ * ws, (const char *)a + t0 * as, as, nt - t0,            \
                         out + t0 * os + r_, os);                                                         \
    }
NB_FROWS(nb_dot_w_f32, SIMD_F32)
NB_FROWS(nb_dot_w_f16, SIMD_F16)
NB_FROWS(nb_dot_w_bf16, SIMD_BF16)

/* ---- activation quantization (q8a, q8k), byte for byte the references ---- */

/* Largest |x| of the values in m's lanes seen so far, m starting at +0:
 * max_ps(a, b) returns b when either is NaN, so with the running max as
 * b a NaN input is skipped, as fmaxf skips it. */
NB_INLINE __m256 nb_absmax(__m256 m, __m256 x) { return _mm256_max_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), m); }

/* The largest lane of m (no NaN left, so the order is free). */
NB_INLINE float nb_hmax(__m256 m)
{
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

/* 32 values xv times id, made total (NaN -> 0, clamped to +-127) and
 * rounded half to even (vector converts round as lrintf does): the codes
 * to qs, the sums of codes 0-15 and 16-31 to s[0] and s[1]. */
NB_INLINE void nb_quant32(const __m256 xv[4], __m256 vid, int8_t *qs, int32_t s[2])
{
    const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    __m256i q[4];
    for (int j = 0; j < 4; j++) {
        __m256 t = _mm256_mul_ps(xv[j], vid);
        t = _mm256_and_ps(t, _mm256_cmp_ps(t, t, _CMP_ORD_Q)); /* NaN -> 0 */
        t = _mm256_min_ps(_mm256_max_ps(t, lo), hi);
        q[j] = _mm256_cvtps_epi32(t);
    }
    /* dwords 0, 1 of h: the two halves' sums (pairs within 128-bit lanes,
     * then the lanes) */
    __m256i h = _mm256_hadd_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    h = _mm256_hadd_epi32(h, h);
    __m128i h4 = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    s[0] = _mm_cvtsi128_si32(h4);
    s[1] = _mm_extract_epi32(h4, 1);
    /* packs work within 128-bit lanes: the dwords come out as
     * q0[0:4] q1[0:4] q2[0:4] q3[0:4] | q0[4:8] q1[4:8] q2[4:8] q3[4:8] */
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)qs, p);
}

static void nb_q8a_quant(const float *x, void *dst, size_t n)
{
    simd_block_q8a *out = dst;
    for (size_t i = 0; i < n / SIMD_QK; i++) {
        const float *v = x + i * SIMD_QK;
        __m256 xv[4], m = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            xv[j] = _mm256_loadu_ps(v + 8 * j);
            m = nb_absmax(m, xv[j]);
        }
        float amax = nb_hmax(m);
        float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
        int32_t s[2];
        nb_quant32(xv, _mm256_set1_ps(id), out[i].qs, s);
        out[i].d = d;
        out[i].sum = s[0] + s[1];
    }
}

static void nb_q8k_quant(const float *x, void *dst, size_t n)
{
    simd_block_q8k *out = dst;
    for (size_t i = 0; i < n / SIMD_QKK; i++, x += SIMD_QKK) {
        __m256 m[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int j = 0; j < SIMD_QKK / 8; j++)
            m[j & 3] = nb_absmax(m[j & 3], _mm256_loadu_ps(x + 8 * j));
        float amax = nb_hmax(_mm256_max_ps(_mm256_max_ps(m[0], m[1]), _mm256_max_ps(m[2], m[3])));
        float id = amax != 0 ? 127.0f / amax : 0.0f, d = id != 0 ? 1.0f / id : amax / 127.0f;
        const __m256 vid = _mm256_set1_ps(id);
        for (int k = 0; k < SIMD_QKK / SIMD_QK; k++) {
            __m256 xv[4];
            for (int j = 0; j < 4; j++)
                xv[j] = _mm256_loadu_ps(x + SIMD_QK * k + 8 * j);
            int32_t s[2];
            nb_quant32(xv, vid, out[i].qs + SIMD_QK * k, s);
            out[i].bsums[2 * k] = (int16_t)s[0];
            out[i].bsums[2 * k + 1] = (int16_t)s[1];
        }
        out[i].d = d;
    }
}

/* ---- pieces of the quantized dots ---- */

/* The weight types store unsigned codes q and mean q - bias; the dot
 * kernels multiply the unsigned codes and subtract bias * (sum of the
 * activation block) from the block's integer sum. Returns log2(bias), or
 * -1 for no bias. (q8_0's codes are signed: a set may still bias them,
 * see NB_Q8_BIAS_SHIFT.) */
NB_INLINE int nb_bias_shift(int type)
{
    switch (type) {
    case SIMD_Q4_0: return 3; /* 8 */
    case SIMD_Q5_0: return 4; /* 16 */
    default: return -1;
    }
}

/* 32 nibbles from 16 bytes, in value order: low nibbles are x[0..15],
 * high nibbles x[16..31]. */
NB_INLINE __m256i nb_nib32(const unsigned char *qs)
{
    __m128i t = _mm_loadu_si128((const __m128i *)qs);
    __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
}

/* 0x10 in byte j where bit j of the little-endian 32-bit qh is set: each
 * byte gets the qh byte holding its bit (shuffle), every other bit is
 * forced on (or), and a byte equal to 0xff had its bit set (cmpeq). */
NB_INLINE __m256i nb_bits32(const unsigned char *qh)
{
    __m256i v = _mm256_set1_epi32((int)nb_ld32(qh));
    v = _mm256_shuffle_epi8(v, _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2,
                                                2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    v = _mm256_or_si256(v, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfeLL));
    v = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(-1));
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* One weight block as 32 bytes in activation order: signed codes for
 * q8_0, unsigned codes 0..15 / 0..31 for the others. */
NB_INLINE __m256i nb_wexp(int type, const unsigned char *blk)
{
    switch (type) {
    case SIMD_Q8_0:
        return _mm256_loadu_si256((const __m256i *)(blk + offsetof(simd_block_q8_0, qs)));
    case SIMD_Q4_0:
        return nb_nib32(blk + offsetof(simd_block_q4_0, qs));
    case SIMD_Q4_1:
        return nb_nib32(blk + offsetof(simd_block_q4_1, qs));
    case SIMD_Q5_0:
        return _mm256_or_si256(nb_nib32(blk + offsetof(simd_block_q5_0, qs)),
                               nb_bits32(blk + offsetof(simd_block_q5_0, qh)));
    default:
        return _mm256_or_si256(nb_nib32(blk + offsetof(simd_block_q5_1, qs)),
                               nb_bits32(blk + offsetof(simd_block_q5_1, qh)));
    }
}

/* d (f16 at offset 0) of 8 consecutive blocks, as floats (exact). */
NB_INLINE __m256 nb_wd8(const unsigned char *blk, size_t bs)
{
    __m128i h = _mm_setr_epi16((short)nb_ld16(blk), (short)nb_ld16(blk + bs), (short)nb_ld16(blk + 2 * bs),
                               (short)nb_ld16(blk + 3 * bs), (short)nb_ld16(blk + 4 * bs),
                               (short)nb_ld16(blk + 5 * bs), (short)nb_ld16(blk + 6 * bs),
                               (short)nb_ld16(blk + 7 * bs));
    return _mm256_cvtph_ps(h);
}

/* d and m (adjacent f16s at offset 0) of 8 consecutive blocks. The pairs
 * are loaded as 32-bit words in the order 0 1 4 5 | 2 3 6 7 so that one
 * shuffle per 128-bit lane splits them into d0..d7 and m0..m7. */
NB_INLINE void nb_wdm8(const unsigned char *blk, size_t bs, __m256 *d, __m256 *m)
{
    __m128i p = _mm_setr_epi32((int)nb_ld32(blk), (int)nb_ld32(blk + bs), (int)nb_ld32(blk + 4 * bs),
                               (int)nb_ld32(blk + 5 * bs));
    __m128i q = _mm_setr_epi32((int)nb_ld32(blk + 2 * bs), (int)nb_ld32(blk + 3 * bs),
                               (int)nb_ld32(blk + 6 * bs), (int)nb_ld32(blk + 7 * bs));
    __m256 x = _mm256_cvtph_ps(p); /* d0 m0 d1 m1 | d4 m4 d5 m5 */
    __m256 y = _mm256_cvtph_ps(q); /* d2 m2 d3 m3 | d6 m6 d7 m7 */
    *d = _mm256_shuffle_ps(x, y, _MM_SHUFFLE(2, 0, 2, 0));
    *m = _mm256_shuffle_ps(x, y, _MM_SHUFFLE(3, 1, 3, 1));
}

/* Weight scales of the first m < 8 blocks, zeros in the other lanes (the
 * part-filled group at the end of a row). */
NB_INLINE void nb_wscales_part(int type, const unsigned char *blk, size_t bs, int m, __m256 *d, __m256 *mw)
{
    uint16_t h[16] = {0};
    for (int k = 0; k < m; k++) {
        h[k] = nb_ld16(blk + (size_t)k * bs);
        h[8 + k] = nb_ld16(blk + (size_t)k * bs + 2);
    }
    *d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
    *mw = nb_has_min(type) ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + 8))) : _mm256_setzero_ps();
}

/* Activation scales and sums, copied once per call out of the 40-byte
 * blocks into plain arrays (d[t][k], sum[t][k] for block s0+k of token
 * t), so a group of 8 blocks reads them with one load each instead of
 * gathering them for every weight row. Past the segment's last block the
 * arrays hold zeros up to a multiple of 16: a part-filled group reads
 * d_a = 0 and sum = 0 there, and with d_w = 0 and isum = 0 its extra
 * lanes add (0*0)*0 = +0, which changes nothing (see the top). Rows
 * longer than NB_SC_MAXB blocks are done in segments of that many. */
#define NB_SC_MAXB 1024
typedef struct nb_scales {
    float d[NB_MAXT][NB_SC_MAXB];
    int32_t s[NB_MAXT][NB_SC_MAXB];
} nb_scales;

NB_INLINE void nb_fill_scales(nb_scales *sc, const char *a, size_t astride, int nt, size_t s0, size_t s1)
{
    size_t len = s1 - s0, pad = (len + 15) & ~(size_t)15;
    for (int t = 0; t < nt; t++) {
        const simd_block_q8a *y = (const simd_block_q8a *)(a + t * astride) + s0;
        for (size_t k = 0; k < len; k++) {
            sc->d[t][k] = y[k].d;
            sc->s[t][k] = y[k].sum;
        }
        for (size_t k = len; k < pad; k++) {
            sc->d[t][k] = 0.0f;
            sc->s[t][k] = 0;
        }
    }
}

/* acc + (d_w * d_a) * isum (+ (m_w * d_a) * asum), lane by lane, in the
 * reference's order. */
NB_INLINE __m256 nb_fstep(__m256 acc, __m256 dw, __m256 da, __m256i isum)
{
    return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(isum)));
}

NB_INLINE __m256 nb_fstep_min(__m256 acc, __m256 dw, __m256 mw, __m256 da, __m256i isum, __m256i asum)
{
    __m256 t = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(isum));
    __m256 u = _mm256_mul_ps(_mm256_mul_ps(mw, da), _mm256_cvtepi32_ps(asum));
    return _mm256_add_ps(acc, _mm256_add_ps(t, u));
}

/* The integer sums of q8_0, q4_0, q5_0 carry a bias times the activation
 * block's sum (see nb_bias_shift): take it off. */
NB_INLINE __m256i nb_unbias(int type, int q8_bias_shift, __m256i isum, __m256i asum)
{
    int sh = type == SIMD_Q8_0 ? q8_bias_shift : nb_bias_shift(type);
    return sh >= 0 ? _mm256_sub_epi32(isum, _mm256_slli_epi32(asum, sh)) : isum;
}

/* One 8-block float step for one token, given all scales. */
NB_INLINE __m256 nb_step8(int type, int q8_bias_shift, __m256 acc, __m256 dw, __m256 mw, __m256 da, __m256i isum,
                          __m256i asum)
{
    isum = nb_unbias(type, q8_bias_shift, isum, asum);
    if (nb_has_min(type))
        return nb_fstep_min(acc, dw, mw, da, isum, asum);
    return nb_fstep(acc, dw, da, isum);
}

#endif
