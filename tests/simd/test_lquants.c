/* q2_k, q3_k, iq4_nl and iq4_xs (simd/lquants.c and each set's
 * lquants_*.h):
 *  - dequantization of hand-made blocks: each value's code placed where
 *    ggml's format puts it (written here from the layout's words, not
 *    from lquants.c), the expected value worked out from the codes and
 *    scales, plus a few values checked against literal numbers;
 *  - the reference quantizers: error within bound on Gaussian rows, edge
 *    rows (zeros, a constant, a spike), and an importance that weighs
 *    some columns lowers their error;
 *  - the scalar dots against double precision on the dequantized values;
 *  - every kernel set this CPU runs (and avxvnniint8 with its instruction
 *    emulated) gives the scalar dots' bits for dot, dot_batch and
 *    dot_rows, on random bytes (every code and scale), extreme f16 scales
 *    and many lengths, row and token counts and strides. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "lquants.h"
#include "testutil.h"

#ifdef NIBBLE_TEST_VNNIINT8_EMUL
void simd_set_lquants_avxvnniint8_emul(simd_kernel_set *s);
#endif

#define TR_SEED 0x6c7175616e74ull
#include "testrand.h"
#include "setcheck.h"


static const int kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* ---- known blocks ---- */

/* q2_k: value v = 128h + 32k + 16s + l is bits 2k..2k+1 of
 * qs[32h + 16s + l]; sub-block v/16 has scale scales[j] & 15 and min
 * scales[j] >> 4; x = d*sc*q - dmin*m. */
static void known_q2_k(void)
{
    simd_block_q2_k b;
    memset(&b, 0, sizeof b);
    int code[256];
    for (int v = 0; v < 256; v++) {
        code[v] = (v * 7 + v / 16) & 3;
        int h = v / 128, k = (v / 32) % 4, s = (v / 16) % 2, l = v % 16;
        b.qs[32 * h + 16 * s + l] |= (uint8_t)(code[v] << (2 * k));
    }
    for (int j = 0; j < 16; j++)
        b.scales[j] = (uint8_t)((j + 1) % 16 | (15 - j) << 4);
    b.d = simd_f32_to_f16(0.5f);
    b.dmin = simd_f32_to_f16(0.25f);
    float y[256];
    simd_type_traits(SIMD_Q2_K)->dequant(&b, y, 256);
    for (int v = 0; v < 256; v++) {
        int j = v / 16;
        float want = 0.5f * (float)((j + 1) % 16) * (float)code[v] - 0.25f * (float)(15 - j);
        CHECKF(y[v] == want, "q2_k x[%d] = %g, want %g", v, (double)y[v], (double)want);
    }
    /* literal: v = 200 (h 1, k 2, s 0, l 8): code (1400+12)&3 = 0, sub-block
     * 12: 0.5*13*0 - 0.25*3 */
    CHECK(y[200] == -0.75f);
}

/* q3_k: low bits as q2_k; q = low - 4 unless bit 4h+k of hmask[v % 32] is
 * set; sc[j] 6 bits: low nibble in scales[j] (j < 8) or high nibble of
 * scales[j-8], top 2 bits at bit 2*(j/4) of scales[8 + j%4];
 * x = d*(sc-32)*q. */
static void known_q3_k(void)
{
    simd_block_q3_k b;
    memset(&b, 0, sizeof b);
    int q[256], sc[16];
    for (int v = 0; v < 256; v++) {
        q[v] = (v * 5 + v / 32) % 8 - 4; /* -4..3 */
        int h = v / 128, k = (v / 32) % 4, s = (v / 16) % 2, l = v % 16;
        int low = q[v] >= 0 ? q[v] : q[v] + 4, hbit = q[v] >= 0;
        b.qs[32 * h + 16 * s + l] |= (uint8_t)(low << (2 * k));
        b.hmask[v % 32] |= (uint8_t)(hbit << (4 * h + k));
    }
    for (int j = 0; j < 16; j++) {
        sc[j] = (j * 13 + 5) % 64;
        if (j < 8)
            b.scales[j] |= (uint8_t)(sc[j] & 15);
        else
            b.scales[j - 8] |= (uint8_t)((sc[j] & 15) << 4);
        b.scales[8 + j % 4] |= (uint8_t)((sc[j] >> 4) << (2 * (j / 4)));
    }
    b.d = simd_f32_to_f16(0.125f);
    float y[256];
    simd_type_traits(SIMD_Q3_K)->dequant(&b, y, 256);
    for (int v = 0; v < 256; v++) {
        float want = 0.125f * (float)(sc[v / 16] - 32) * (float)q[v];
        CHECKF(y[v] == want, "q3_k x[%d] = %g, want %g", v, (double)y[v], (double)want);
    }
    /* literal: v = 0: q = -4, sc[0] = 5: 0.125 * -27 * -4 */
    CHECK(y[0] == 13.5f);
}

/* iq4_nl: x[j] = d * kv[qs[j] & 15], x[j+16] = d * kv[qs[j] >> 4]. */
static void known_iq4_nl(void)
{
    simd_block_iq4_nl b;
    for (int j = 0; j < 16; j++)
        b.qs[j] = (uint8_t)(j | (15 - j) << 4);
    b.d = simd_f32_to_f16(2.0f);
    float y[32];
    simd_type_traits(SIMD_IQ4_NL)->dequant(&b, y, 32);
    for (int j = 0; j < 16; j++) {
        CHECKF(y[j] == 2.0f * (float)kv[j], "iq4_nl x[%d] = %g", j, (double)y[j]);
        CHECKF(y[j + 16] == 2.0f * (float)kv[15 - j], "iq4_nl x[%d] = %g", j + 16, (double)y[j + 16]);
    }
    CHECK(y[0] == -254.0f && y[16] == 226.0f);
}

/* iq4_xs: ls[j] low 4 bits in nibble j%2 of scales_l[j/2], top 2 bits at
 * bit 2j of scales_h; sub-block j's 32 values are the nibbles of
 * qs[16j..16j+15] (low: first 16); x = d*(ls-32)*kv[code]. */
static void known_iq4_xs(void)
{
    simd_block_iq4_xs b;
    memset(&b, 0, sizeof b);
    int ls[8], code[256];
    for (int j = 0; j < 8; j++) {
        ls[j] = (j * 23 + 3) % 64;
        b.scales_l[j / 2] |= (uint8_t)((ls[j] & 15) << (4 * (j % 2)));
        b.scales_h |= (uint16_t)((ls[j] >> 4) << (2 * j));
    }
    for (int v = 0; v < 256; v++) {
        code[v] = (v * 11 + v / 32) % 16;
        int j = v / 32, i = v % 32;
        b.qs[16 * j + i % 16] |= (uint8_t)(code[v] << (i < 16 ? 0 : 4));
    }
    b.d = simd_f32_to_f16(0.0625f);
    float y[256];
    simd_type_traits(SIMD_IQ4_XS)->dequant(&b, y, 256);
    for (int v = 0; v < 256; v++) {
        float want = 0.0625f * (float)(ls[v / 32] - 32) * (float)kv[code[v]];
        CHECKF(y[v] == want, "iq4_xs x[%d] = %g, want %g", v, (double)y[v], (double)want);
    }
    /* literal: v = 0: ls 3, code 0: 0.0625 * -29 * -127 */
    CHECK(y[0] == 230.1875f);
}

/* ---- quantizers ---- */

#define N 4096
static float x[N], y[N], act[N], deqa[N];
static unsigned char qbuf[N * 2], abuf[N * 2];

static void check_quantizers(void)
{
    /* bounds about 1.2x what the quantizers reach on this data */
    static const struct { int type; double bound; } bounds[] = {
        {SIMD_Q2_K, 0.36}, {SIMD_Q3_K, 0.20}, {SIMD_IQ4_NL, 0.105}, {SIMD_IQ4_XS, 0.105},
    };
    for (size_t i = 0; i < N; i++) {
        x[i] = gauss() * 0.02f;
        if (i % 509 == 7)
            x[i] *= 8;
    }
    for (size_t k = 0; k < sizeof bounds / sizeof bounds[0]; k++) {
        const simd_traits *t = simd_type_traits(bounds[k].type);
        t->quant(x, qbuf, N);
        t->dequant(qbuf, y, N);
        double r = tu_rel_rms(x, y, N);
        printf("%-7s rel. RMS error %.5f (bound %.3f)\n", t->name, r, bounds[k].bound);
        CHECKF(r < bounds[k].bound, "%s: %g", t->name, r);

        float e[256], d[256];
        memset(e, 0, sizeof e);
        t->quant(e, qbuf, 256);
        t->dequant(qbuf, d, 256);
        for (int i = 0; i < 256; i++)
            CHECKF(d[i] == 0, "%s zeros: x[%d] = %g", t->name, i, (double)d[i]);
        for (int i = 0; i < 256; i++)
            e[i] = 0.25f;
        t->quant(e, qbuf, 256);
        t->dequant(qbuf, d, 256);
        CHECKF(tu_rel_rms(e, d, 256) < 0.05, "%s constant: %g", t->name, tu_rel_rms(e, d, 256));
        memset(e, 0, sizeof e);
        e[100] = 3.0f;
        t->quant(e, qbuf, 256);
        t->dequant(qbuf, d, 256);
        CHECKF(fabsf(d[100] - 3.0f) < 0.1f && fabsf(d[5]) < 0.05f, "%s spike: %g %g", t->name, (double)d[100],
               (double)d[5]);
    }

    /* importance: columns 0 mod 4 weigh 100 times more; their error must
     * fall and stay below the others' */
    static float imp[N];
    for (size_t i = 0; i < N; i++)
        imp[i] = i % 4 == 0 ? 100.0f : 1.0f;
    void (*qi[4])(const float *, void *, size_t, const float *) = {simd_quant_q2_k_imp, simd_quant_q3_k_imp,
                                                                   simd_quant_iq4_nl_imp, simd_quant_iq4_xs_imp};
    static const int qt[4] = {SIMD_Q2_K, SIMD_Q3_K, SIMD_IQ4_NL, SIMD_IQ4_XS};
    for (int k = 0; k < 4; k++) {
        const simd_traits *t = simd_type_traits(qt[k]);
        double e_plain = 0, e_imp = 0, e_rest = 0;
        qi[k](x, qbuf, N, NULL);
        t->dequant(qbuf, y, N);
        for (size_t i = 0; i < N; i += 4)
            e_plain += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        qi[k](x, qbuf, N, imp);
        t->dequant(qbuf, y, N);
        for (size_t i = 0; i < N; i++) {
            double d2 = ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
            if (i % 4 == 0)
                e_imp += d2;
            else
                e_rest += d2 / 3;
        }
        printf("%-7s important columns' error %.3g -> %.3g (others %.3g)\n", t->name, e_plain, e_imp, e_rest);
        CHECKF(e_imp < 0.9 * e_plain && e_imp < e_rest, "%s: importance ignored", t->name);
    }
}

/* ---- scalar dots against double precision ---- */

static void check_dots(void)
{
    static const int qt[4] = {SIMD_Q2_K, SIMD_Q3_K, SIMD_IQ4_NL, SIMD_IQ4_XS};
    for (size_t i = 0; i < N; i++)
        act[i] = gauss();
    enum simd_kernel cur = simd_kernel_current();
    simd_kernel_select(SIMD_K_SCALAR);
    for (int k = 0; k < 4; k++) {
        const simd_traits *t = simd_type_traits(qt[k]);
        CHECK(t->dot && t->dot_batch && t->dot_rows);
        if (!t->dot)
            continue;
        simd_act_quant(t->act, act, abuf, N);
        /* the activations as the kernels see them */
        if (t->act == SIMD_ACT_Q8K) {
            const simd_block_q8k *a = (const simd_block_q8k *)abuf;
            for (size_t i = 0; i < N; i++)
                deqa[i] = a[i / 256].d * a[i / 256].qs[i % 256];
        } else {
            const simd_block_q8a *a = (const simd_block_q8a *)abuf;
            for (size_t i = 0; i < N; i++)
                deqa[i] = a[i / 32].d * a[i / 32].qs[i % 32];
        }
        t->quant(x, qbuf, N);
        t->dequant(qbuf, y, N);
        for (size_t n = 256; n <= N; n *= 4) {
            double ref = 0, mag = 0;
            for (size_t i = 0; i < n; i++) {
                ref += (double)y[i] * deqa[i];
                mag += fabs((double)y[i] * deqa[i]);
            }
            float got = t->dot(n, qbuf, abuf);
            CHECKF(fabs(got - ref) <= 1e-5 * mag + 1e-9, "%s n=%zu: %g vs %g", t->name, n, (double)got, ref);
        }
    }
    simd_kernel_select(cur);
}

/* ---- every set against the scalar kernels, bit for bit ---- */

#define MAXB 40 /* super-blocks per row */
static int extreme;

/* offsets of the f16 scales in a block */
static void f16_offsets(int type, size_t *o1, size_t *o2)
{
    switch (type) {
    case SIMD_Q2_K: *o1 = offsetof(simd_block_q2_k, d), *o2 = offsetof(simd_block_q2_k, dmin); break;
    case SIMD_Q3_K: *o1 = *o2 = offsetof(simd_block_q3_k, d); break;
    default: *o1 = *o2 = 0; break;
    }
}

static void fill_weights(int type, size_t nb)
{
    const size_t bs = simd_type_traits(type)->bytes;
    size_t o1, o2;
    f16_offsets(type, &o1, &o2);
    for (int r = 0; r < SC_MAXR; r++)
        for (size_t b = 0; b < nb; b++) {
            unsigned char *blk = sc_w[r] + b * bs;
            for (size_t i = 0; i < bs; i++)
                blk[i] = (unsigned char)rnd();
            uint16_t d = sc_pick_f16(extreme), m = sc_pick_f16(extreme);
            memcpy(blk + o2, &m, 2);
            memcpy(blk + o1, &d, 2);
        }
}

static void fill_rows(int type, size_t n, int ext)
{
    const simd_traits *tr = simd_type_traits(type);
    extreme = ext;
    fill_weights(type, n / tr->block);
    sc_fill_acts(tr->act, n, ext, 32);
}

static size_t row_length(int type, size_t round)
{
    static const size_t blocks[] = {1, 2, 3, 7, 8, 9, 17, 40};
    /* iq4_nl: 8 blocks of 32 per "super-block" step, and odd counts */
    return type == SIMD_IQ4_NL ? (blocks[round] * 8 + round % 3) * 32 : blocks[round] * 256;
}

static void check_all_sets(void)
{
    static const int types[] = {SIMD_Q2_K, SIMD_Q3_K, SIMD_IQ4_XS, SIMD_IQ4_NL};
    const sc_suite suite = {"lquants", types, 4, 8, row_length, fill_rows, 7};
    simd_kernel_set ref;
    memset(&ref, 0, sizeof ref);
    simd_set_lquants(SIMD_K_SCALAR, &ref);
#ifdef NIBBLE_TEST_VNNIINT8_EMUL
    sc_check_all_sets(&suite, &ref, simd_set_lquants_avxvnniint8_emul);
#else
    sc_check_all_sets(&suite, &ref, NULL);
#endif
}

/* simd_rint_small, the quantizers' inline rounding, against lrintf in
 * the default rounding mode: every half step (the ties go to even) and
 * nearby values over the codes' range, and a few large ones. */
static void check_rint_small(void)
{
    int bad = 0;
    for (int k = -2 * 300; k <= 2 * 300; k++) {
        float h = 0.5f * (float)k;
        const float v[3] = {h, nextafterf(h, -INFINITY), nextafterf(h, INFINITY)};
        for (int i = 0; i < 3; i++)
            bad += simd_rint_small(v[i]) != (int)lrintf(v[i]);
    }
    const float big[] = {4194303.5f, -4194303.5f, 1048576.5f, -2097151.5f, 1e-30f, -0.0f};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
        bad += simd_rint_small(big[i]) != (int)lrintf(big[i]);
    CHECKF(bad == 0, "simd_rint_small differs from lrintf on %d values", bad);
}

int main(void)
{
    simd_init();
    check_rint_small();
    const struct { int type; uint32_t block, bytes; } layout[] = {
        {SIMD_Q2_K, 256, 84}, {SIMD_Q3_K, 256, 110}, {SIMD_IQ4_NL, 32, 18}, {SIMD_IQ4_XS, 256, 136}};
    for (int k = 0; k < 4; k++) {
        const simd_traits *t = simd_type_traits(layout[k].type);
        CHECK(t && t->block == layout[k].block && t->bytes == layout[k].bytes && t->dequant && t->quant && t->dot);
    }
    known_q2_k();
    known_q3_k();
    known_iq4_nl();
    known_iq4_xs();
    check_quantizers();
    check_dots();
    check_all_sets();
    return tu_result("test_lquants");
}
