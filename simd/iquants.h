/* Private to simd/: ggml's i-quants below 4 bits (iq2_xxs, iq2_xs, iq2_s,
 * iq3_xxs, iq3_s, iq1_s, iq1_m; layouts in simd.h, grids in
 * iquants_grids.c). Read and run only: no quantizer yet.
 *
 * Every kernel set reads a super-block through one expansion,
 * simd_iq_expand below (plain C, built into each set's file): 256 signed
 * codes c, 16 integer scales ls (one per 16 values) and a float d with
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

/* The sign byte of a 7-bit index: bit 7 makes the count of set bits even. */
static inline unsigned simd_iq_ksign(unsigned i)
{
    unsigned p = i ^ i >> 4;
    p ^= p >> 2;
    p ^= p >> 1;
    return i | (p & 1) << 7;
}

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

/* 8 grid magnitudes g (bytes, each >= 1) with the signs of s, stored as
 * signed codes: where the mask byte is 0xff, (g ^ 0xff) + 1 = -g, which
 * cannot carry since g >= 1. */
static inline void simd_iq_put8(int8_t *c, uint64_t g, unsigned s)
{
    uint64_t m = simd_iq_smask(s);
    uint64_t v = (g ^ m) + (m & 0x0101010101010101u);
    for (int j = 0; j < 8; j++)
        c[j] = (int8_t)(uint8_t)(v >> (8 * j));
}

/* iq1: 8 int8 grid values (-1, 0, 1) plus delta (+-1/8), times 8. */
static inline void simd_iq_put8_iq1(int8_t *c, uint64_t g, int delta)
{
    for (int j = 0; j < 8; j++)
        c[j] = (int8_t)(8 * (int8_t)(uint8_t)(g >> (8 * j)) + delta);
}

/* One super-block x of type (simd_is_iquant) as codes, scales and d; see
 * the top of this file. */
static inline void simd_iq_expand(int type, const void *x, int8_t c[256], int8_t ls[16], float *d)
{
    const uint8_t *p = x;
    switch (type) {
    case SIMD_IQ2_XXS: {
        const simd_block_iq2_xxs *b = x;
        const uint8_t *q = p + 2;
        for (int i = 0; i < 8; i++, q += 8) {
            uint32_t u = simd_iq_le32(q + 4);
            ls[2 * i] = ls[2 * i + 1] = (int8_t)(2 * (u >> 28) + 1);
            for (int l = 0; l < 4; l++)
                simd_iq_put8(c + 32 * i + 8 * l, simd_iq2xxs_grid[q[l]], simd_iq_ksign((u >> (7 * l)) & 127));
        }
        *d = simd_f16_to_f32(b->d) * 0.125f;
        break;
    }
    case SIMD_IQ2_XS: {
        const simd_block_iq2_xs *b = x;
        for (int i = 0; i < 8; i++) {
            ls[2 * i] = (int8_t)(2 * (b->scales[i] & 0x0f) + 1);
            ls[2 * i + 1] = (int8_t)(2 * (b->scales[i] >> 4) + 1);
            for (int l = 0; l < 4; l++) {
                uint32_t v = simd_iq_le16(p + 2 + 2 * (4 * i + l));
                simd_iq_put8(c + 32 * i + 8 * l, simd_iq2xs_grid[v & 511], simd_iq_ksign(v >> 9));
            }
        }
        *d = simd_f16_to_f32(b->d) * 0.125f;
        break;
    }
    case SIMD_IQ2_S: {
        const simd_block_iq2_s *b = x;
        for (int i = 0; i < 8; i++) {
            ls[2 * i] = (int8_t)(2 * (b->scales[i] & 0x0f) + 1);
            ls[2 * i + 1] = (int8_t)(2 * (b->scales[i] >> 4) + 1);
            for (int l = 0; l < 4; l++) {
                unsigned idx = b->qs[4 * i + l] | ((unsigned)b->qh[i] << (8 - 2 * l) & 0x300);
                simd_iq_put8(c + 32 * i + 8 * l, simd_iq2s_grid[idx], b->qs[32 + 4 * i + l]);
            }
        }
        *d = simd_f16_to_f32(b->d) * 0.125f;
        break;
    }
    case SIMD_IQ3_XXS: {
        const simd_block_iq3_xxs *b = x;
        for (int i = 0; i < 8; i++) {
            uint32_t u = simd_iq_le32(b->qs + 64 + 4 * i);
            ls[2 * i] = ls[2 * i + 1] = (int8_t)(2 * (u >> 28) + 1);
            const uint8_t *q = b->qs + 8 * i;
            for (int l = 0; l < 4; l++) {
                uint64_t g = simd_iq3xxs_grid[q[2 * l]] | (uint64_t)simd_iq3xxs_grid[q[2 * l + 1]] << 32;
                simd_iq_put8(c + 32 * i + 8 * l, g, simd_iq_ksign((u >> (7 * l)) & 127));
            }
        }
        *d = simd_f16_to_f32(b->d) * 0.25f;
        break;
    }
    case SIMD_IQ3_S: {
        const simd_block_iq3_s *b = x;
        for (int i = 0; i < 8; i++) {
            ls[2 * i] = ls[2 * i + 1] = (int8_t)(2 * ((b->scales[i / 2] >> (4 * (i & 1))) & 0x0f) + 1);
            const uint8_t *q = b->qs + 8 * i;
            unsigned h = b->qh[i];
            for (int l = 0; l < 4; l++) {
                unsigned i1 = q[2 * l] | (h << (8 - 2 * l) & 256), i2 = q[2 * l + 1] | (h << (7 - 2 * l) & 256);
                uint64_t g = simd_iq3s_grid[i1] | (uint64_t)simd_iq3s_grid[i2] << 32;
                simd_iq_put8(c + 32 * i + 8 * l, g, b->signs[4 * i + l]);
            }
        }
        *d = simd_f16_to_f32(b->d);
        break;
    }
    case SIMD_IQ1_S: {
        const simd_block_iq1_s *b = x;
        for (int i = 0; i < 8; i++) {
            unsigned h = simd_iq_le16(p + 2 + 32 + 2 * i);
            ls[2 * i] = ls[2 * i + 1] = (int8_t)(2 * ((h >> 12) & 7) + 1);
            int delta = h & 0x8000 ? -1 : 1;
            for (int l = 0; l < 4; l++)
                simd_iq_put8_iq1(c + 32 * i + 8 * l, simd_iq1s_grid[b->qs[4 * i + l] | ((h >> (3 * l)) & 7) << 8],
                                 delta);
        }
        *d = simd_f16_to_f32(b->d) * 0.125f;
        break;
    }
    default: { /* SIMD_IQ1_M */
        const simd_block_iq1_m *b = x;
        unsigned sc[4];
        for (int k = 0; k < 4; k++)
            sc[k] = simd_iq_le16(b->scales + 2 * k);
        simd_f16 h16 = (simd_f16)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
        for (int i = 0; i < 8; i++) {
            ls[2 * i] = (int8_t)(2 * ((sc[i / 2] >> (6 * (i & 1))) & 7) + 1);
            ls[2 * i + 1] = (int8_t)(2 * ((sc[i / 2] >> (6 * (i & 1) + 3)) & 7) + 1);
            for (int l = 0; l < 4; l++) {
                unsigned qh = b->qh[2 * i + l / 2], sh = l & 1 ? 4 : 0;
                unsigned idx = b->qs[4 * i + l] | ((qh >> sh) & 7) << 8;
                simd_iq_put8_iq1(c + 32 * i + 8 * l, simd_iq1s_grid[idx], qh & (8u << sh) ? -1 : 1);
            }
        }
        *d = simd_f16_to_f32(h16) * 0.125f;
        break;
    }
    }
}

/* Put the scalar dots of the seven types into s (every set starts from
 * them; lquants_x86.h / lquants_neon.h put in their own). */
void simd_set_iquants_scalar(simd_kernel_set *s);

#endif
