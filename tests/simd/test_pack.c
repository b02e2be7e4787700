/* Packed weight rows (simd/pack.c, layout in simd.h):
 *  - pack then unpack gives the rows back, bytes and padding untouched,
 *    for every type with a layout;
 *  - the layout is the documented one, byte by byte, for every type;
 *  - every kernel set this CPU runs that reads packed rows gives, for
 *    each type it packs, the bits of the scalar set's dot_rows on the
 *    same rows unpacked: random bit patterns with finite f16 scales,
 *    1-3 groups (7 for the longest rows), many lengths, 1..65 tokens (around the x86 kernels'
 *    32-token passes), an output stride wider than the rows; on x86 also
 *    the avxvnniint8 set's kernels with vpdpbssd emulated (built into this
 *    test again, as test_kernels does). */
#include <stdint.h>

#include "simd.h"
#include "testutil.h"
#include "iquants.h"
#include "simd_internal.h"
#ifdef NIBBLE_TEST_VNNIINT8_EMUL
void simd_set_avxvnniint8_emul(simd_kernel_set *s);
void simd_set_kquants_avxvnniint8_emul(simd_kernel_set *s);
void simd_set_mxfp4_avxvnniint8_emul(simd_kernel_set *s);
void simd_set_lquants_avxvnniint8_emul(simd_kernel_set *s);
#endif

#define MAXG 7 /* 1-3 groups everywhere; 7 for long rows, so the x86 cache blocks of groups (about 192 KiB of
                  * weights) split them, with an odd group last */
#define MAXR (MAXG * SIMD_PACK_ROWS)
#define MAXN 4096
#define MAXT 65
#define PAD 8 /* bytes between rows, to catch a kernel reading a row stride */

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t brnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static const int types[] = {SIMD_Q4_0,  SIMD_Q4_1,   SIMD_Q5_0,   SIMD_Q5_1, SIMD_Q8_0, SIMD_Q4_K,  SIMD_Q5_K,
                            SIMD_Q6_K,  SIMD_MXFP4, SIMD_IQ4_XS, SIMD_IQ4_NL, SIMD_Q2_K, SIMD_Q3_K, SIMD_IQ3_S};
#define NTYPES ((int)(sizeof types / sizeof *types))

/* rows with PAD spare bytes each; the packed copy; rows unpacked again */
static unsigned char rows[MAXR * (MAXN * 2 + PAD)], back[MAXR * (MAXN * 2 + PAD)];
static unsigned char packed[MAXR * MAXN * 2];
static unsigned char acts[MAXT * (MAXN * 2 + 64)];
static float got[MAXT * (MAXR + 5)], want[MAXT * (MAXR + 5)];

/* a finite f16 between about 2^-14 and 2^8, either sign */
static uint16_t pick_f16(void)
{
    uint64_t r = brnd();
    return (uint16_t)((r & 0x8000) | ((1 + (r >> 16) % 23) << 10) | ((r >> 32) & 0x3ff));
}

/* every byte random, then each f16 field (every 2-byte field of a block
 * is one) made finite */
static void fill_rows(int type, size_t n, size_t nr, size_t ws)
{
    const simd_traits *t = simd_type_traits(type);
    for (size_t i = 0; i < nr * ws; i++)
        rows[i] = (unsigned char)brnd();
    size_t nb = n / t->block;
    for (size_t r = 0; r < nr; r++)
        for (size_t b = 0; b < nb; b++) {
            unsigned char *blk = rows + r * ws + b * t->bytes;
            uint16_t d[2] = {pick_f16(), pick_f16()};
            switch (type) {
            case SIMD_Q4_0: case SIMD_Q5_0: case SIMD_Q8_0: case SIMD_IQ4_XS: case SIMD_IQ4_NL: case SIMD_IQ3_S: memcpy(blk, d, 2); break;
            case SIMD_Q4_1: case SIMD_Q5_1: case SIMD_Q4_K: case SIMD_Q5_K: memcpy(blk, d, 4); break;
            case SIMD_Q6_K: memcpy(blk + offsetof(simd_block_q6_k, d), d, 2); break;
            case SIMD_Q2_K: memcpy(blk + offsetof(simd_block_q2_k, d), d, 4); break;
            case SIMD_Q3_K: memcpy(blk + offsetof(simd_block_q3_k, d), d, 2); break;
            default: break; /* mxfp4: every exponent byte is a valid scale */
            }
        }
}

static void fill_acts(int type, size_t n, size_t nt, size_t as)
{
    static float x[MAXN];
    for (size_t t = 0; t < nt; t++) {
        for (size_t i = 0; i < n; i++)
            x[i] = (float)((double)(brnd() >> 11) / 9007199254740992.0 * 2 - 1) * (t % 3 == 2 ? 1e-3f : 1.0f);
        simd_act_quant(simd_type_traits(type)->act, x, acts + t * as, n);
    }
}

static void check_roundtrip(void)
{
    static const size_t lens[] = {256, 512, 768, 2048};
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        int type = types[ti];
        CHECKF(simd_pack_has_layout(type), "%s has no packed layout", simd_type_name(type));
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
            size_t n = lens[li], ws = simd_row_bytes(type, n) + PAD;
            for (size_t ng = 1; ng <= MAXG; ng++) {
                size_t nr = ng * SIMD_PACK_ROWS, gb = simd_pack_group_bytes(type, n);
                CHECK(gb == (type == SIMD_IQ3_S ? n / SIMD_QKK * SIMD_PACK_IQ3S_BLOCK
                                                : SIMD_PACK_ROWS * simd_row_bytes(type, n)));
                fill_rows(type, n, nr, ws);
                memset(packed, 0xa5, sizeof packed);
                simd_pack(type, n, rows, ws, ng, packed);
                CHECKF(packed[ng * gb] == 0xa5, "%s: pack wrote past its groups", simd_type_name(type));
                memset(back, 0x5a, sizeof back);
                simd_unpack(type, n, packed, ng, back, ws);
                int same = 1;
                for (size_t r = 0; r < nr; r++) {
                    same &= memcmp(back + r * ws, rows + r * ws, ws - PAD) == 0;
                    same &= back[r * ws + ws - PAD] == 0x5a; /* padding untouched */
                }
                CHECKF(same, "%s n=%zu ng=%zu: unpack(pack(rows)) differs", simd_type_name(type), n, ng);
                /* one row at a time, as the embedding lookup takes it */
                same = 1;
                for (size_t r = 0; r < nr; r++) {
                    memset(back, 0x5a, ws);
                    simd_unpack_row(type, n, packed + r / SIMD_PACK_ROWS * gb, r % SIMD_PACK_ROWS, back);
                    same &= memcmp(back, rows + r * ws, ws - PAD) == 0 && back[ws - PAD] == 0x5a;
                }
                CHECKF(same, "%s n=%zu ng=%zu: simd_unpack_row differs", simd_type_name(type), n, ng);
            }
        }
    }
    CHECK(!simd_pack_has_layout(SIMD_F32) && simd_pack_group_bytes(SIMD_F16, 256) == 0);
}

/* The documented layout, byte by byte, on a few types. */
/* Every byte of every block of two groups where simd.h says it goes:
 * the fields of a block in storage order, a field of s < 4 bytes as 16
 * rows of s bytes, a field of s >= 4 bytes as s/4 chunks of 64 bytes,
 * chunk c holding bytes 4c..4c+3 of rows 0..15. The field sizes are
 * written here from the block structs in simd.h, not taken from pack.c. */
static const struct {
    int type;
    int nf;
    unsigned char size[5];
} layouts[] = {
    {SIMD_Q4_0, 2, {2, 16}},        {SIMD_Q4_1, 3, {2, 2, 16}},          {SIMD_Q5_0, 3, {2, 4, 16}},
    {SIMD_Q5_1, 4, {2, 2, 4, 16}},  {SIMD_Q8_0, 2, {2, 32}},             {SIMD_Q4_K, 4, {2, 2, 12, 128}},
    {SIMD_Q5_K, 5, {2, 2, 12, 32, 128}}, {SIMD_Q6_K, 4, {128, 64, 16, 2}}, {SIMD_MXFP4, 2, {1, 16}},
    {SIMD_IQ4_XS, 4, {2, 2, 4, 128}}, {SIMD_IQ4_NL, 2, {2, 16}},
    {SIMD_Q2_K, 4, {16, 64, 2, 2}},     {SIMD_Q3_K, 4, {32, 64, 12, 2}},
};

static void check_layout(void)
{
    for (int t = 0; t < SIMD_TYPE_COUNT; t++) {
        int listed = 0;
        for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; k++)
            listed |= layouts[k].type == t;
        listed |= t == SIMD_IQ3_S; /* check_layout_iq3_s */
        CHECKF(listed || !simd_pack_has_layout(t), "type %d has a packed layout this test does not know", t);
    }
    for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; k++) {
        int type = layouts[k].type;
        const simd_traits *tr = simd_type_traits(type);
        size_t bytes = 0;
        for (int f = 0; f < layouts[k].nf; f++)
            bytes += layouts[k].size[f];
        CHECKF(bytes == tr->bytes, "%s: fields add up to %zu bytes, the block has %u", tr->name, bytes, tr->bytes);
        size_t n = 2 * (size_t)tr->block, ng = 2, rb = simd_row_bytes(type, n), ws = rb + PAD;
        fill_rows(type, n, ng * 16, ws);
        simd_pack(type, n, rows, ws, ng, packed);
        int bad = 0;
        for (size_t g = 0; g < ng; g++)
            for (size_t b = 0; b < n / tr->block; b++)
                for (size_t r = 0; r < 16; r++) {
                    const unsigned char *src = rows + (g * 16 + r) * ws + b * bytes;
                    const unsigned char *blk = packed + g * 16 * rb + b * 16 * bytes;
                    size_t fo = 0;
                    for (int f = 0; f < layouts[k].nf; f++) {
                        size_t sz = layouts[k].size[f];
                        for (size_t i = 0; i < sz; i++) {
                            size_t at = 16 * fo + (sz < 4 ? r * sz + i : 64 * (i / 4) + 4 * r + i % 4);
                            bad += blk[at] != src[fo + i];
                        }
                        fo += sz;
                    }
                }
        CHECKF(bad == 0, "%s packed layout is not the documented one (%d bytes misplaced)", tr->name, bad);
    }
}

/* iq3_s's decoded layout (simd.h), byte by byte, against the scalar
 * reading of the rows (simd_iq_expand, not pack.c's): d and the scale
 * bytes moved, and each value's code c as the nibble (c + 15) / 2. */
static void check_layout_iq3_s(void)
{
    const size_t n = 512, ng = 2, rb = simd_row_bytes(SIMD_IQ3_S, n), ws = rb + PAD;
    fill_rows(SIMD_IQ3_S, n, ng * 16, ws);
    simd_pack(SIMD_IQ3_S, n, rows, ws, ng, packed);
    int bad = 0;
    for (size_t g = 0; g < ng; g++)
        for (size_t b = 0; b < n / SIMD_QKK; b++)
            for (size_t r = 0; r < 16; r++) {
                const unsigned char *src = rows + (g * 16 + r) * ws + b * sizeof(simd_block_iq3_s);
                const unsigned char *blk = packed + (g * (n / SIMD_QKK) + b) * SIMD_PACK_IQ3S_BLOCK;
                int8_t c[SIMD_QKK], ls[16];
                float d;
                simd_iq_expand(SIMD_IQ3_S, src, c, ls, &d);
                bad += memcmp(blk + 2 * r, src, 2) != 0;
                bad += memcmp(blk + 32 + 4 * r, src + offsetof(simd_block_iq3_s, scales), 4) != 0;
                for (int v = 0; v < SIMD_QKK; v++) {
                    int j = v / 32, hi = v % 32 >= 16, i = (v % 16) / 4;
                    int u = (blk[96 + 64 * (4 * j + i) + 4 * r + v % 4] >> (4 * hi)) & 0x0f;
                    bad += c[v] % 2 == 0 || 2 * u - 15 != c[v];
                }
            }
    CHECKF(bad == 0, "iq3_s packed layout is not the documented one (%d places wrong)", bad);
}

/* The sets checked: each one's dot_packed per type (NULL: it does not read
 * that type packed); k is the set to select while it runs (-1: none). */
#define MAXSETS (SIMD_K_COUNT + 1)
typedef struct {
    const char *name;
    int k;
    simd_dot_packed_fn dp[SIMD_TYPE_COUNT];
    int kernels;
} pset;

/* Every set's dot_packed against the scalar set's dot_rows on the same
 * rows unpacked. The rows, their packing, the activations and the
 * reference are made once per case and every set is checked on them (the
 * reference costs as much as a set: once, not once per set). */
static void check_sets(const pset *sets, int nsets, simd_dot_rows_fn ref[SIMD_TYPE_COUNT])
{
    static const size_t lens32[] = {32, 64, 96, 256, 288, 512, 576, 1024, 1056, 2048, 4096};
    static const size_t lens256[] = {256, 512, 768, 1536, 2048, 4096};
    static const size_t tokens[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 32, 33, 64, 65};
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        int type = types[ti], any = 0;
        const simd_traits *t = simd_type_traits(type);
        for (int i = 0; i < nsets; i++)
            any |= sets[i].dp[type] != NULL;
        if (!any)
            continue;
        int k256 = t->block == 256;
        const size_t *lens = k256 ? lens256 : lens32;
        size_t nl = k256 ? sizeof lens256 / sizeof *lens256 : sizeof lens32 / sizeof *lens32;
        for (size_t li = 0; li < nl; li++) {
            size_t n = lens[li], ws = simd_row_bytes(type, n) + PAD;
            size_t as = simd_act_row_bytes(t->act, n) + 16;
            for (size_t ng = 1; ng <= MAXG; ng = ng == 3 && n >= 2048 ? MAXG : ng + 1) {
                if (ng > 3 && ng < MAXG)
                    break;
                size_t nr = ng * SIMD_PACK_ROWS;
                fill_rows(type, n, nr, ws);
                simd_pack(type, n, rows, ws, ng, packed);
                for (size_t tk = 0; tk < sizeof tokens / sizeof *tokens; tk++) {
                    size_t nt = tokens[tk], os = nr + 5;
                    fill_acts(type, n, nt, as);
                    memset(want, 0xff, sizeof want);
                    CHECK(simd_kernel_select(SIMD_K_SCALAR) == 0);
                    ref[type](n, rows, ws, nr, acts, as, nt, want, os);
                    for (int i = 0; i < nsets; i++) {
                        if (!sets[i].dp[type])
                            continue;
                        if (sets[i].k >= 0)
                            CHECK(simd_kernel_select((enum simd_kernel)sets[i].k) == 0);
                        memset(got, 0xff, sizeof got);
                        sets[i].dp[type](n, packed, ng, acts, as, nt, got, os);
                        CHECKF(memcmp(got, want, nt * os * sizeof *got) == 0,
                               "%s %s n=%zu groups=%zu tokens=%zu: packed dot differs from scalar rows",
                               sets[i].name, simd_type_name(type), n, ng, nt);
                    }
                }
            }
        }
    }
}

static void check_all_sets(void)
{
    enum simd_kernel cur = simd_kernel_current();
    simd_dot_rows_fn ref[SIMD_TYPE_COUNT];
    static pset sets[MAXSETS];
    int nsets = 0;
    CHECK(simd_kernel_select(SIMD_K_SCALAR) == 0);
    for (int t = 0; t < SIMD_TYPE_COUNT; t++)
        ref[t] = simd_type_traits(t) ? simd_type_traits(t)->dot_rows : NULL;
    for (int k = 0; k < SIMD_K_COUNT; k++) {
        const char *why = NULL;
        const char *name = simd_kernel_name((enum simd_kernel)k);
        if (!simd_kernel_supported((enum simd_kernel)k, &why)) {
            printf("%-14s skipped: %s\n", name, why ? why : "?");
            continue;
        }
        CHECK(simd_kernel_select((enum simd_kernel)k) == 0);
        pset *ps = &sets[nsets++];
        ps->name = name;
        ps->k = k;
        for (int ti = 0; ti < NTYPES; ti++) {
            ps->dp[types[ti]] = simd_type_traits(types[ti])->dot_packed;
            ps->kernels += ps->dp[types[ti]] != NULL;
        }
        /* every x86 set reads all the packed types (mxfp4, iq4_xs, iq4_nl,
         * q2_k, q3_k and iq3_s included) */
        int x86 = k == SIMD_K_AVX2 || k == SIMD_K_AVXVNNI || k == SIMD_K_AVX512VNNI || k == SIMD_K_AVXVNNIINT8;
        CHECKF(!x86 || ps->kernels == NTYPES, "%s: %d packed kernels, expected %d", name, ps->kernels, NTYPES);
    }
#ifdef NIBBLE_TEST_VNNIINT8_EMUL
    /* the avxvnniint8 set's packed kernels (32-block types, K-quants,
     * mxfp4, iq4, q2_k and q3_k), vpdpbssd emulated */
    if (simd_kernel_supported(SIMD_K_AVX2, NULL)) {
        simd_kernel_set e;
        memset(&e, 0, sizeof e);
        simd_set_avxvnniint8_emul(&e);
        simd_set_kquants_avxvnniint8_emul(&e);
        simd_set_mxfp4_avxvnniint8_emul(&e);
        simd_set_lquants_avxvnniint8_emul(&e);
        pset *ps = &sets[nsets++];
        ps->name = "avxvnniint8 (emulated)";
        ps->k = SIMD_K_AVX2;
        for (int ti = 0; ti < NTYPES; ti++) {
            ps->dp[types[ti]] = e.dot_packed[types[ti]];
            ps->kernels += ps->dp[types[ti]] != NULL;
        }
        CHECKF(ps->kernels == NTYPES, "avxvnniint8 (emulated): %d packed kernels, expected %d", ps->kernels, NTYPES);
    }
#endif
    check_sets(sets, nsets, ref);
    for (int i = 0; i < nsets; i++)
        printf("%-14s %d packed kernel(s) checked\n", sets[i].name, sets[i].kernels);
    simd_kernel_select(cur);
}

int main(void)
{
    simd_init();
    check_roundtrip();
    check_layout();
    check_layout_iq3_s();
    check_all_sets();
    return tu_result("test_pack");
}
