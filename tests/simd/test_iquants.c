/* The i-quants below 4 bits: iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s,
 * iq1_s, iq1_m (simd/iquants.c, the expansion in iquants.h, each set's
 * lquants_*.h):
 *  - dequantization of hand-made blocks against literal numbers worked
 *    out by hand from the format (grid entry, sign bits, scale nibble);
 *  - dequantization of random blocks against a decoder written here
 *    from ggml's definition of each format, in ggml's own float steps
 *    (db = d * (0.5 + s) * 0.25, then * grid * sign, ...), bit for bit:
 *    it shares only the grid tables (data) with the code under test;
 *  - the scalar dots against double precision on the dequantized values;
 *  - every kernel set this CPU runs (and avxvnniint8 with its instruction
 *    emulated) gives the scalar dots' bits for dot, dot_batch and
 *    dot_rows, on random bytes (every index, sign and scale), extreme f16
 *    scales and many lengths, row and token counts and strides. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "lquants.h"
#include "testutil.h"

#ifdef NIBBLE_TEST_VNNIINT8_EMUL
void simd_set_lquants_avxvnniint8_emul(simd_kernel_set *s);
#endif

#define TR_SEED 0x697175616e74ull
#include "testrand.h"
#include "setcheck.h"

#define NTYPES 7
static const int types[NTYPES] = {SIMD_IQ2_XXS, SIMD_IQ2_XS, SIMD_IQ2_S, SIMD_IQ3_XXS,
                                  SIMD_IQ3_S,   SIMD_IQ1_S,  SIMD_IQ1_M};


/* ---- an independent decoder, from ggml's definitions ---- */

/* byte j of a grid entry */
static int gbyte(uint64_t e, int j) { return (int)((e >> (8 * j)) & 0xff); }
/* the sign byte of a 7-bit index: bit 7 set when the 7 bits have odd parity */
static unsigned ksign(unsigned i)
{
    unsigned n = 0;
    for (int b = 0; b < 7; b++)
        n += (i >> b) & 1;
    return i | (n & 1) << 7;
}
static float sgn(unsigned s, int j) { return s & (1u << j) ? -1.f : 1.f; }
static unsigned u16at(const uint8_t *p) { return p[0] | (unsigned)p[1] << 8; }
static uint32_t u32at(const uint8_t *p) { return u16at(p) | (uint32_t)u16at(p + 2) << 16; }

static void ref_decode(int type, const uint8_t *p, float *y)
{
    switch (type) {
    case SIMD_IQ2_XXS: { /* d, then per 32 values: 4 grid indices, u32 of signs and scale */
        float d = simd_f16_to_f32((simd_f16)u16at(p));
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = p + 2 + 8 * ib;
            uint32_t u = u32at(q + 4);
            float db = d * (0.5f + (float)(u >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++) {
                unsigned s = ksign((u >> (7 * l)) & 127);
                for (int j = 0; j < 8; j++)
                    *y++ = db * (float)gbyte(simd_iq2xxs_grid[q[l]], j) * sgn(s, j);
            }
        }
        break;
    }
    case SIMD_IQ2_XS: { /* d, 32 u16 (9-bit index, 7-bit sign index), 8 scale bytes */
        float d = simd_f16_to_f32((simd_f16)u16at(p));
        for (int ib = 0; ib < 8; ib++) {
            uint8_t sc = p[66 + ib];
            for (int l = 0; l < 4; l++) {
                float db = d * (0.5f + (float)(l < 2 ? sc & 15 : sc >> 4)) * 0.25f;
                unsigned v = u16at(p + 2 + 2 * (4 * ib + l));
                for (int j = 0; j < 8; j++)
                    *y++ = db * (float)gbyte(simd_iq2xs_grid[v & 511], j) * sgn(ksign(v >> 9), j);
            }
        }
        break;
    }
    case SIMD_IQ2_S: { /* d, 32 index bytes, 32 sign bytes, 8 qh, 8 scales */
        float d = simd_f16_to_f32((simd_f16)u16at(p));
        const uint8_t *qs = p + 2, *signs = p + 34, *qh = p + 66, *sc = p + 74;
        for (int ib = 0; ib < 8; ib++)
            for (int l = 0; l < 4; l++) {
                float db = d * (0.5f + (float)(l < 2 ? sc[ib] & 15 : sc[ib] >> 4)) * 0.25f;
                unsigned idx = qs[4 * ib + l] + 256 * ((qh[ib] >> (2 * l)) & 3);
                for (int j = 0; j < 8; j++)
                    *y++ = db * (float)gbyte(simd_iq2s_grid[idx], j) * sgn(signs[4 * ib + l], j);
            }
        break;
    }
    case SIMD_IQ3_XXS: { /* d, 64 index bytes, 8 u32 of signs and scales */
        float d = simd_f16_to_f32((simd_f16)u16at(p));
        for (int ib = 0; ib < 8; ib++) {
            uint32_t u = u32at(p + 2 + 64 + 4 * ib);
            float db = d * (0.5f + (float)(u >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++) {
                unsigned s = ksign((u >> (7 * l)) & 127);
                const uint8_t *q = p + 2 + 8 * ib + 2 * l;
                for (int j = 0; j < 4; j++) {
                    y[j] = db * (float)gbyte(simd_iq3xxs_grid[q[0]], j) * sgn(s, j);
                    y[j + 4] = db * (float)gbyte(simd_iq3xxs_grid[q[1]], j) * sgn(s, j + 4);
                }
                y += 8;
            }
        }
        break;
    }
    case SIMD_IQ3_S: { /* d, 64 index bytes, 8 qh, 32 signs, 4 scales */
        float d = simd_f16_to_f32((simd_f16)u16at(p));
        const uint8_t *qs = p + 2, *qh = p + 66, *signs = p + 74, *sc = p + 106;
        for (int ib = 0; ib < 8; ib++) {
            float db = d * (float)(1 + 2 * ((sc[ib / 2] >> (4 * (ib % 2))) & 15));
            for (int l = 0; l < 4; l++) {
                unsigned i1 = qs[8 * ib + 2 * l] + 256 * ((qh[ib] >> (2 * l)) & 1);
                unsigned i2 = qs[8 * ib + 2 * l + 1] + 256 * ((qh[ib] >> (2 * l + 1)) & 1);
                for (int j = 0; j < 4; j++) {
                    y[j] = db * (float)gbyte(simd_iq3s_grid[i1], j) * sgn(signs[4 * ib + l], j);
                    y[j + 4] = db * (float)gbyte(simd_iq3s_grid[i2], j) * sgn(signs[4 * ib + l], j + 4);
                }
                y += 8;
            }
        }
        break;
    }
    case SIMD_IQ1_S: { /* d, 32 index bytes, 8 u16 qh */
        float d = simd_f16_to_f32((simd_f16)u16at(p));
        for (int ib = 0; ib < 8; ib++) {
            unsigned h = u16at(p + 34 + 2 * ib);
            float dl = d * (float)(2 * ((h >> 12) & 7) + 1), delta = h & 0x8000 ? -0.125f : 0.125f;
            for (int l = 0; l < 4; l++) {
                unsigned idx = p[2 + 4 * ib + l] + 256 * ((h >> (3 * l)) & 7);
                for (int j = 0; j < 8; j++)
                    *y++ = dl * ((float)(int8_t)gbyte(simd_iq1s_grid[idx], j) + delta);
            }
        }
        break;
    }
    default: { /* iq1_m: 32 index bytes, 16 qh, 8 scale bytes (4 u16 whose top nibbles are d) */
        const uint8_t *qs = p, *qh = p + 32, *scb = p + 48;
        unsigned sc[4];
        for (int k = 0; k < 4; k++)
            sc[k] = u16at(scb + 2 * k);
        unsigned dh = 0;
        for (int k = 0; k < 4; k++)
            dh |= (sc[k] >> 12) << (4 * k);
        float d = simd_f16_to_f32((simd_f16)dh);
        for (int ib = 0; ib < 8; ib++)
            for (int l = 0; l < 4; l++) {
                unsigned sh = 6 * (ib % 2) + (l < 2 ? 0 : 3);
                float dl = d * (float)(2 * ((sc[ib / 2] >> sh) & 7) + 1);
                unsigned h = qh[2 * ib + l / 2] >> (l % 2 ? 4 : 0);
                unsigned idx = qs[4 * ib + l] + 256 * (h & 7);
                float delta = h & 8 ? -0.125f : 0.125f;
                for (int j = 0; j < 8; j++)
                    *y++ = dl * ((float)(int8_t)gbyte(simd_iq1s_grid[idx], j) + delta);
            }
        break;
    }
    }
}

/* ---- known blocks, worked out by hand ---- */

static void known(void)
{
    float y[256];
    uint8_t b[128];
    const simd_f16 one = simd_f32_to_f16(1.0f); /* 0x3c00 */

    /* iq2_xxs: index 0 is eight 8s; sign index 0 is no signs; s 0 -> 1/8:
     * every value 8/8 = 1. Block 0, group 0 sign index 1 -> sign byte
     * 0x81 (odd parity adds bit 7): values 0 and 7 are -1. Block 1: s 15
     * -> 31/8, group index 1 = 0x...082b: value 0 is 43, so 43*31/8. */
    memset(b, 0, sizeof b);
    memcpy(b, &one, 2);
    b[2 + 4] = 1;                /* u of block 0: sign index 1 for group 0 */
    b[2 + 8] = 1;                /* block 1, group 0: grid index 1 */
    b[2 + 8 + 7] = 0xf0;         /* block 1: s = 15 */
    simd_type_traits(SIMD_IQ2_XXS)->dequant(b, y, 256);
    CHECK(y[0] == -1.0f && y[1] == 1.0f && y[7] == -1.0f && y[8] == 1.0f && y[255] == 1.0f);
    CHECKF(y[32] == 43.0f * 31.0f / 8.0f && y[33] == 31.0f, "iq2_xxs: %g %g", (double)y[32], (double)y[33]);

    /* iq2_xs: qs[5] = index 1 | sign index 3 (bits 0,1; even parity) ->
     * values 40, 41 negative, value 40 is 43; scales[1] high nibble 2 ->
     * values 48..63 at 5/8; values 32..47 at 1/8 */
    memset(b, 0, sizeof b);
    memcpy(b, &one, 2);
    b[2 + 2 * 5] = 1;
    b[2 + 2 * 5 + 1] = 3 << 1;
    b[66 + 1] = 0x20;
    simd_type_traits(SIMD_IQ2_XS)->dequant(b, y, 256);
    CHECKF(y[40] == -43.0f / 8 && y[41] == -1.0f && y[42] == 1.0f && y[48] == 5.0f, "iq2_xs: %g %g %g %g",
           (double)y[40], (double)y[41], (double)y[42], (double)y[48]);

    /* iq2_s: group 1 of block 0: qs[1] = 1 with qh[0] bits 2-3 = 1 ->
     * index 257; explicit sign byte 0x02 -> value 9 negative */
    memset(b, 0, sizeof b);
    memcpy(b, &one, 2);
    b[2 + 1] = 1;
    b[66] = 1 << 2;
    b[34 + 1] = 0x02;
    simd_type_traits(SIMD_IQ2_S)->dequant(b, y, 256);
    {
        float want[8];
        for (int j = 0; j < 8; j++)
            want[j] = (float)gbyte(simd_iq2s_grid[257], j) / 8.0f * (j == 1 ? -1.f : 1.f);
        for (int j = 0; j < 8; j++)
            CHECKF(y[8 + j] == want[j], "iq2_s x[%d] = %g, want %g", 8 + j, (double)y[8 + j], (double)want[j]);
    }
    CHECK(simd_iq2s_grid[0] == 0x0808080808080808u && y[0] == 1.0f);

    /* iq3_xxs: index 0 is four 4s; s 0 -> 1/4: value 1. Index 5 is
     * 0x04040c3e: value 0 is 62 -> 62/4 = 15.5 */
    memset(b, 0, sizeof b);
    memcpy(b, &one, 2);
    b[2 + 1] = 5; /* second half of group 0 */
    simd_type_traits(SIMD_IQ3_XXS)->dequant(b, y, 256);
    CHECKF(y[0] == 1.0f && y[4] == 15.5f && y[5] == 3.0f && y[7] == 1.0f, "iq3_xxs: %g %g %g", (double)y[0],
           (double)y[4], (double)y[5]);

    /* iq3_s: index 0 is four 1s, s 0 -> 1: value 1; index 4 (0x0101010f)
     * at value 4 -> 15; scales[0] high nibble 3 -> block 1 at 7; signs[4]
     * bit 0 -> value 32 is -7 */
    memset(b, 0, sizeof b);
    memcpy(b, &one, 2);
    b[2 + 1] = 4;
    b[106] = 0x30;
    b[74 + 4] = 1;
    simd_type_traits(SIMD_IQ3_S)->dequant(b, y, 256);
    CHECKF(y[0] == 1.0f && y[4] == 15.0f && y[32] == -7.0f && y[33] == 7.0f, "iq3_s: %g %g %g", (double)y[4],
           (double)y[32], (double)y[33]);

    /* iq1_s: index 0 is eight -1s; s 0, delta +1/8: -0.875. Block 1 with
     * qh = 0x8000 | s 2 << 12: (2*2+1) * (-1 - 1/8) = -5.625 */
    memset(b, 0, sizeof b);
    memcpy(b, &one, 2);
    b[34 + 2 + 1] = 0x80 | 0x20;
    simd_type_traits(SIMD_IQ1_S)->dequant(b, y, 256);
    CHECKF(y[0] == -0.875f && y[32] == -5.625f, "iq1_s: %g %g", (double)y[0], (double)y[32]);

    /* iq1_m: d = 1.0 (0x3c00) spread over the top nibbles: sc[3] 0x3...,
     * sc[2] 0xc..., others 0. Group 1 of block 0: qh[0] bit 7 -> delta
     * -1/8; its first value -1 - 1/8 = -1.125; sc[0] bits 3-5 = 1 ->
     * values 16..31 at 3: -1 + 1/8 = -0.875 * 3 */
    memset(b, 0, sizeof b);
    b[48 + 5] = 0xc0;
    b[48 + 7] = 0x30;
    b[32] = 0x80;
    b[48] = 1 << 3;
    simd_type_traits(SIMD_IQ1_M)->dequant(b, y, 256);
    CHECKF(y[0] == -0.875f && y[8] == -1.125f && y[16] == -2.625f, "iq1_m: %g %g %g", (double)y[0], (double)y[8],
           (double)y[16]);
}

/* ---- random blocks against the decoder ---- */

#define MAXB 40 /* super-blocks per row */
static int extreme;

/* nb random super-blocks of type at w: every byte random but the f16
 * scale, picked (for iq1_m spread over its scales' top nibbles) */
static void fill_blocks(int type, unsigned char *w, size_t nb)
{
    const size_t bs = simd_type_traits(type)->bytes;
    for (size_t b = 0; b < nb; b++) {
        unsigned char *blk = w + b * bs;
        for (size_t i = 0; i < bs; i++)
            blk[i] = (unsigned char)rnd();
        uint16_t d = sc_pick_f16(extreme);
        if (type == SIMD_IQ1_M)
            for (int k = 0; k < 4; k++)
                blk[48 + 2 * k + 1] = (unsigned char)((blk[48 + 2 * k + 1] & 0x0f) | ((d >> (4 * k)) & 15) << 4);
        else
            memcpy(blk, &d, 2);
    }
}

static void check_decode(void)
{
    static unsigned char w[MAXB * 128];
    static float y[MAXB * 256], want[256];
    for (int ti = 0; ti < NTYPES; ti++) {
        const simd_traits *t = simd_type_traits(types[ti]);
        for (int round = 0; round < 4; round++) {
            extreme = round & 1;
            fill_blocks(types[ti], w, MAXB);
            t->dequant(w, y, MAXB * 256);
            for (size_t b = 0; b < MAXB; b++) {
                ref_decode(types[ti], w + b * t->bytes, want);
                for (int v = 0; v < 256; v++)
                    if (!sc_same(y[b * 256 + v], want[v])) {
                        CHECKF(0, "%s block %zu x[%d] = %a, want %a", t->name, b, v, (double)y[b * 256 + v],
                               (double)want[v]);
                        goto next;
                    }
            }
        }
    next:;
    }
}

/* ---- scalar dots against double precision ---- */

#define N (MAXB * 256)
static float act[N], deqa[N], y[N];
static unsigned char qbuf[MAXB * 128], abuf[MAXB * 300];

static void check_dots(void)
{
    for (size_t i = 0; i < N; i++)
        act[i] = gauss();
    enum simd_kernel cur = simd_kernel_current();
    simd_kernel_select(SIMD_K_SCALAR);
    for (int ti = 0; ti < NTYPES; ti++) {
        const simd_traits *t = simd_type_traits(types[ti]);
        CHECK(t->act == SIMD_ACT_Q8K && t->dot && t->dot_batch && t->dot_rows);
        if (!t->dot)
            continue;
        simd_act_quant(t->act, act, abuf, N);
        const simd_block_q8k *a = (const simd_block_q8k *)abuf;
        for (size_t i = 0; i < N; i++)
            deqa[i] = a[i / 256].d * a[i / 256].qs[i % 256];
        extreme = 0;
        fill_blocks(types[ti], qbuf, MAXB);
        t->dequant(qbuf, y, N);
        for (size_t n = 256; n <= N; n += 256 * 13) {
            double ref = 0, mag = 0;
            for (size_t i = 0; i < n; i++) {
                ref += (double)y[i] * deqa[i];
                mag += fabs((double)y[i] * deqa[i]);
            }
            float got = t->dot(n, qbuf, abuf);
            CHECKF(fabs(got - ref) <= 1e-5 * mag + 1e-12, "%s n=%zu: %g vs %g", t->name, n, (double)got, ref);
        }
    }
    simd_kernel_select(cur);
}

/* ---- every set against the scalar kernels, bit for bit ---- */

static void fill_rows(int type, size_t n, int ext)
{
    extreme = ext;
    for (int r = 0; r < SC_MAXR; r++)
        fill_blocks(type, sc_w[r], n / 256);
    sc_fill_acts(SIMD_ACT_Q8K, n, ext, 32);
}

static size_t row_length(int type, size_t round)
{
    static const size_t blocks[] = {1, 2, 3, 7, 8, 9, 17, 40};
    (void)type;
    return blocks[round] * 256;
}

static void check_all_sets(void)
{
    const sc_suite suite = {"iquants", types, NTYPES, 8, row_length, fill_rows, 7};
    simd_kernel_set ref;
    memset(&ref, 0, sizeof ref);
    simd_set_lquants(SIMD_K_SCALAR, &ref);
#ifdef NIBBLE_TEST_VNNIINT8_EMUL
    sc_check_all_sets(&suite, &ref, simd_set_lquants_avxvnniint8_emul);
#else
    sc_check_all_sets(&suite, &ref, NULL);
#endif
}

int main(void)
{
    simd_init();
    static const struct { int type; const char *name; uint32_t bytes; } layout[NTYPES] = {
        {SIMD_IQ2_XXS, "iq2_xxs", 66}, {SIMD_IQ2_XS, "iq2_xs", 74}, {SIMD_IQ2_S, "iq2_s", 82},
        {SIMD_IQ3_XXS, "iq3_xxs", 98}, {SIMD_IQ3_S, "iq3_s", 110},  {SIMD_IQ1_S, "iq1_s", 50},
        {SIMD_IQ1_M, "iq1_m", 56}};
    for (int k = 0; k < NTYPES; k++) {
        const simd_traits *t = simd_type_traits(layout[k].type);
        CHECKF(t && !strcmp(t->name, layout[k].name) && t->block == 256 && t->bytes == layout[k].bytes &&
                   t->dequant && t->dot,
               "%s row", layout[k].name);
    }
    /* the parity rule of the 7-bit sign indices, on ggml's listed first row */
    static const unsigned first[16] = {0, 129, 130, 3, 132, 5, 6, 135, 136, 9, 10, 139, 12, 141, 142, 15};
    for (unsigned i = 0; i < 16; i++)
        CHECK(ksign(i) == first[i]);
    for (unsigned i = 0; i < 128; i++) /* the table behind simd_iq_ksign */
        CHECKF(simd_iq_ksign(i) == ksign(i), "simd_iq_ksigns[%u]", i);
    for (unsigned i = 0; i < 128; i++) /* its +-1 byte form */
        for (unsigned j = 0; j < 8; j++)
            CHECKF((uint8_t)(simd_iq_ksigns_pm1[i] >> (8 * j)) == ((ksign(i) >> j) & 1 ? 0xffu : 0x01u),
                   "simd_iq_ksigns_pm1[%u] byte %u", i, j);
    known();
    check_decode();
    check_dots();
    check_all_sets();
    return tu_result("test_iquants");
}
