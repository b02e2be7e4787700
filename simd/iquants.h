/* Private to simd/: ggml's i-quants below 4 bits (iq2_xxs, iq2_xs, iq2_s,
 * iq3_xxs, iq3_s, iq1_s, iq1_m; layouts in simd.h, grids in
 * iquants_grids.c). Read and run only: no quantizer yet.
 *
 * Every kernel set reads a super-block through the same two readers of
 * the layouts below: simd_iq_scales (16 integer scales ls, one per 16
 * values, and a float d) and simd_iq_sub (per sub-block of 32 values its
 * four grid entries and sign bytes). simd_iq_expand turns them into 256
 * signed codes c in plain C (the scalar set and the dequantization); the
 * x86 and Arm sets apply the signs in vector registers (lquants_x86.h,
 * lquants_neon.h) and get the same codes. Together
 *     x[v] = (d * ls[v / 16]) * c[v].
 * The codes are the grid values with their signs (iq2: +-8, 25, 43; iq3_xxs
 * up to +-62; iq3_s +-1..15); iq1 codes are 8 * (grid value + delta),
 * -9..9, so they too are integers. d is the block's f16 scale times the
 * type's power of two (1/8 iq2 and iq1, 1/4 iq3_xxs, 1 iq3_s), which
 * gives ggml's dequantized values bit for bit.
 *
 * Dots against q8k keep every integer sum exact and do the float work once
 * per super-block, in the order every set follows (lquants.h's form):
 *     acc[b & 7] += (d_w * d_a) * (float)sumi,  sumi = sum_j ls_j * (c . a)_j
 * the 8 lanes combined by simd_reduce8. |sumi| <= 256 * 62 * 127 * 31 < 2^31. */
#ifndef NIBBLE_SIMD_IQUANTS_H
#define NIBBLE_SIMD_IQUANTS_H

#include "simd_internal.h"

extern const uint64_t simd_iq2xxs_grid[256];
extern const uint64_t simd_iq2xs_grid[512];
extern const uint64_t simd_iq2s_grid[1024];
extern const uint32_t simd_iq3xxs_grid[256];
extern const uint32_t simd_iq3s_grid[512];
extern const uint64_t simd_iq1s_grid[2048];
extern const uint8_t simd_iq_ksigns[128]; /* see simd_iq_ksign */
extern const uint64_t simd_iq_ksigns_pm1[128]; /* the same as +-1 bytes (iquants_grids.c) */

void simd_deq_iq2_xxs(const void *src, float *dst, size_t n);
void simd_deq_iq2_xs(const void *src, float *dst, size_t n);
void simd_deq_iq2_s(const void *src, float *dst, size_t n);
void simd_deq_iq3_xxs(const void *src, float *dst, size_t n);
void simd_deq_iq3_s(const void *src, float *dst, size_t n);
void simd_deq_iq1_s(const void *src, float *dst, size_t n);
void simd_deq_iq1_m(const void *src, float *dst, size_t n);

/* 1 for the seven types above. */
static inline int simd_is_iquant(int type)
{
    return type == SIMD_IQ2_XXS || type == SIMD_IQ2_XS || type == SIMD_IQ2_S || type == SIMD_IQ3_XXS ||
           type == SIMD_IQ3_S || type == SIMD_IQ1_S || type == SIMD_IQ1_M;
}

static inline size_t simd_iq_bytes(int type)
{
    switch (type) {
    case SIMD_IQ2_XXS: return sizeof(simd_block_iq2_xxs);
    case SIMD_IQ2_XS: return sizeof(simd_block_iq2_xs);
    case SIMD_IQ2_S: return sizeof(simd_block_iq2_s);
    case SIMD_IQ3_XXS: return sizeof(simd_block_iq3_xxs);
    case SIMD_IQ3_S: return sizeof(simd_block_iq3_s);
    case SIMD_IQ1_S: return sizeof(simd_block_iq1_s);
    default: return sizeof(simd_block_iq1_m);
    }
}

/* Little-endian loads from bytes (the block fields' byte order). */
static inline uint32_t simd_iq_le16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static inline uint32_t simd_iq_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The sign byte of a 7-bit index i: i with bit 7 set when i has an odd
 * number of set bits, so that the count over the byte is even. */
static inline unsigned simd_iq_ksign(unsigned i) { return simd_iq_ksigns[i & 127]; }

/* 0xff in byte j where bit j of s is set, else 0x00. The product puts s in
 * every byte; byte j keeps bit j (a single bit, so adding 0x7f sets its
 * top bit exactly when it is non-zero, without a carry out of the byte). */
static inline uint64_t simd_iq_smask(unsigned s)
{
    const uint64_t ones = 0x0101010101010101u;
    uint64_t t = ((uint64_t)s * ones) & 0x8040201008040201u;
    uint64_t h = ((t + 0x7f7f7f7f7f7f7f7fu) | t) & 0x8080808080808080u;
    return (h >> 7) * 0xff;
}

/* The 16 integer sub-block scales ls (one per 16 values) of super-block x
 * of type (simd_is_iquant), and its d (see the top of this file). */
static inline float simd_iq_scales(int type, const void *x, int8_t ls[16])
{
    const uint8_t *p = x;
    switch (type) {
    case SIMD_IQ2_XXS:
    case SIMD_IQ3_XXS: {
        /* the sub-block's 32-bit word: 4 x 7 sign bits, then the scale */
        const uint8_t *u = type == SIMD_IQ2_XXS ? p + 2 + 4 : p + 2 + 64;
        const size_t step = type == SIMD_IQ2_XXS ? 8 : 4;
        for (int i = 0; i < 8; i++)
            ls[2 * i] = ls[2 * i + 1] = (int8_t)(2 * (simd_iq_le32(u + step * i) >> 28) + 1);
        return simd_f16_to_f32((simd_f16)simd_iq_le16(p)) * (type == SIMD_IQ2_XXS ? 0.125f : 0.25f);
    }
    case SIMD_IQ2_XS:
    case SIMD_IQ2_S: {
        const uint8_t *sc = type == SIMD_IQ2_XS ? ((const simd_block_iq2_xs *)x)->scales
                                                : ((const simd_block_iq2_s *)x)->scales;
        for (int i = 0; i < 8; i++) {
            ls[2 * i] = (int8_t)(2 * (sc[i] & 0x0f) + 1);
            ls[2 * i + 1] = (int8_t)(2 * (sc[i] >> 4) + 1);
        }
        return simd_f16_to_f32((simd_f16)simd_iq_le16(p)) * 0.125f;
    }
    case SIMD_IQ3_S: {
        const simd_block_iq3_s *b = x;
        for (int i = 0; i < 8; i++)
            ls[2 * i] = ls[2 * i + 1] = (int8_t)(2 * ((b->scales[i / 2] >> (4 * (i & 1))) & 0x0f) + 1);
        return simd_f16_to_f32(b->d);
    }
    case SIMD_IQ1_S:
        for (int i = 0; i < 8; i++)
            ls[2 * i] = ls[2 * i + 1] = (int8_t)(2 * ((simd_iq_le16(p + 2 + 32 + 2 * i) >> 12) & 7) + 1);
        return simd_f16_to_f32((simd_f16)simd_iq_le16(p)) * 0.125f;
    default: { /* SIMD_IQ1_M: the f16 d is spread over the scales' top nibbles */
        const simd_block_iq1_m *b = x;
        unsigned sc[4];
        for (int k = 0; k < 4; k++)
            sc[k] = simd_iq_le16(b->scales + 2 * k);
        simd_f16 h16 = (simd_f16)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
        for (int i = 0; i < 8; i++) {
            ls[2 * i] = (int8_t)(2 * ((sc[i / 2] >> (6 * (i & 1))) & 7) + 1);
            ls[2 * i + 1] = (int8_t)(2 * ((sc[i / 2] >> (6 * (i & 1) + 3)) & 7) + 1);
        }
        return simd_f16_to_f32(h16) * 0.125f;
    }
    }
}

/* Sub-block i (0..7: values 32i .. 32i+31) of super-block x of type: the
 * grid entries of its four groups of 8 values in g[l] (value 8l + j in
 * byte j; the iq3 types join two 4-value entries), and the return value's
 * byte l says how group l is signed: bit j set negates value j (iq2,
 * iq3), or 0xff where the group's delta is -1/8 and 0 where it is +1/8
 * (iq1, whose grid bytes are signed). The one reading of the layouts that
 * every kernel set's expansion goes through. */
static inline uint32_t simd_iq_sub(int type, const void *x, int i, uint64_t g[4])
{
    const uint8_t *p = x;
    uint32_t s = 0;
    switch (type) {
    case SIMD_IQ2_XXS: {
        const uint8_t *q = p + 2 + 8 * i;
        uint32_t u = simd_iq_le32(q + 4);
        for (int l = 0; l < 4; l++) {
            g[l] = simd_iq2xxs_grid[q[l]];
            s |= simd_iq_ksign(u >> (7 * l)) << (8 * l);
        }
        break;
    }
    case SIMD_IQ2_XS:
        for (int l = 0; l < 4; l++) {
            uint32_t v = simd_iq_le16(p + 2 + 2 * (4 * i + l));
            g[l] = simd_iq2xs_grid[v & 511];
            s |= simd_iq_ksign(v >> 9) << (8 * l);
        }
        break;
    case SIMD_IQ2_S: {
        const simd_block_iq2_s *b = x;
        for (int l = 0; l < 4; l++)
            g[l] = simd_iq2s_grid[b->qs[4 * i + l] | ((unsigned)b->qh[i] << (8 - 2 * l) & 0x300)];
        s = simd_iq_le32(b->qs + 32 + 4 * i);
        break;
    }
    case SIMD_IQ3_XXS: {
        const simd_block_iq3_xxs *b = x;
        const uint8_t *q = b->qs + 8 * i;
        uint32_t u = simd_iq_le32(b->qs + 64 + 4 * i);
        for (int l = 0; l < 4; l++) {
            g[l] = simd_iq3xxs_grid[q[2 * l]] | (uint64_t)simd_iq3xxs_grid[q[2 * l + 1]] << 32;
            s |= simd_iq_ksign(u >> (7 * l)) << (8 * l);
        }
        break;
    }
    case SIMD_IQ3_S: {
        const simd_block_iq3_s *b = x;
        const uint8_t *q = b->qs + 8 * i;
        unsigned h = b->qh[i];
        for (int l = 0; l < 4; l++) {
            unsigned i1 = q[2 * l] | (h << (8 - 2 * l) & 256), i2 = q[2 * l + 1] | (h << (7 - 2 * l) & 256);
            g[l] = simd_iq3s_grid[i1] | (uint64_t)simd_iq3s_grid[i2] << 32;
        }
        s = simd_iq_le32(b->signs + 4 * i);
        break;
    }
    case SIMD_IQ1_S: {
        const simd_block_iq1_s *b = x;
        unsigned h = simd_iq_le16(p + 2 + 32 + 2 * i);
        for (int l = 0; l < 4; l++)
            g[l] = simd_iq1s_grid[b->qs[4 * i + l] | ((h >> (3 * l)) & 7) << 8];
        s = h & 0x8000 ? 0xffffffffu : 0;
        break;
    }
    default: { /* SIMD_IQ1_M */
        const simd_block_iq1_m *b = x;
        for (int l = 0; l < 4; l++) {
            unsigned qh = b->qh[2 * i + l / 2], sh = l & 1 ? 4 : 0;
            g[l] = simd_iq1s_grid[b->qs[4 * i + l] | ((qh >> sh) & 7) << 8];
            s |= (qh & (8u << sh) ? 0xffu : 0) << (8 * l);
        }
        break;
    }
    }
    return s;
}

/* One super-block x of type (simd_is_iquant) as codes, scales and d; see
 * the top of this file. The plain-C form: signs as byte masks, where
 * (g ^ 0xff) + 1 = -g cannot carry since every iq2/iq3 magnitude is >= 1;
 * iq1 codes are 8 * grid value + delta. */
static inline void simd_iq_expand(int type, const void *x, int8_t c[256], int8_t ls[16], float *d)
{
    const int iq1 = type == SIMD_IQ1_S || type == SIMD_IQ1_M;
    *d = simd_iq_scales(type, x, ls);
    for (int i = 0; i < 8; i++) {
        uint64_t g[4];
        uint32_t s = simd_iq_sub(type, x, i, g);
        for (int l = 0; l < 4; l++) {
            int8_t *o = c + 32 * i + 8 * l;
            unsigned sl = (s >> (8 * l)) & 0xff;
            if (iq1) {
                for (int j = 0; j < 8; j++)
                    o[j] = (int8_t)(8 * (int8_t)(uint8_t)(g[l] >> (8 * j)) + (sl ? -1 : 1));
            } else {
                uint64_t m = simd_iq_smask(sl);
                uint64_t v = (g[l] ^ m) + (m & 0x0101010101010101u);
                for (int j = 0; j < 8; j++)
                    o[j] = (int8_t)(uint8_t)(v >> (8 * j));
            }
        }
    }
}

/* Put the scalar dots of the seven types into s (every set starts from
 * them; lquants_x86.h / lquants_neon.h put in their own). */
void simd_set_iquants_scalar(simd_kernel_set *s);

#endif
