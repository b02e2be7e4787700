/* K-quants (simd/kquants.c) and the writable types of the table:
 *  - quantize -> dequantize error of every writable type within its bound
 *    (relative RMS error on Gaussian rows with a few outliers);
 *  - q4_k/q5_k/q6_k dots equal the double-precision dot of the
 *    dequantized weights and activations (the integer sums are exact,
 *    so only float rounding may differ);
 *  - edge rows (zeros, a constant, all negative, one spike) round-trip
 *    sensibly;
 *  - every kernel set this CPU runs (and the avxvnniint8 set with its
 *    instruction emulated) gives the scalar dots' bits for dot, dot_batch
 *    and dot_rows, on random bit patterns (every code, every scale and
 *    min, int8 scales down to -128), extreme f16 scales and activation
 *    blocks from zero to near FLT_MAX, over many lengths, row and token
 *    counts and output strides. */
#include <math.h>
#include <stdint.h>

#include "kquants.h"
#include "simd.h"
#include "testutil.h"

#ifdef NIBBLE_TEST_VNNIINT8_EMUL
void simd_set_kquants_avxvnniint8_emul(simd_kernel_set *s);
#endif

#define N 4096

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static float normal(void) /* Box-Muller: a true Gaussian */
{
    double u = urand() + 1e-12, v = urand();
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}

static unsigned char qbuf[N * 4], abuf[N * 2];
static float x[N], y[N], act[N], deqa[N];

/* bound on the relative RMS error of each type on this data (about 1.2x
 * what the quantizers reach; K types must beat the 32-block types of
 * the same width) */
static const struct { int type; double bound; } bounds[] = {
    {SIMD_F16, 0.0003}, {SIMD_BF16, 0.0021}, {SIMD_Q8_0, 0.008}, {SIMD_Q6_K, 0.024},
    {SIMD_Q5_1, 0.05},  {SIMD_Q5_0, 0.062},  {SIMD_Q5_K, 0.048}, {SIMD_Q4_1, 0.105},
    {SIMD_Q4_0, 0.125}, {SIMD_Q4_K, 0.095},
};

/* ---- every set against the scalar kernels, bit for bit ---- */

#define TR_SEED 0x6b71756e74ull
#include "testrand.h"
#define brnd rnd
#include "setcheck.h"

#define MAXB 48 /* super-blocks per row */

static int extreme; /* this round uses the extreme classes */
/* Random weight rows of type: every byte random, then the f16 scales. */
static void fill_weights(int type, size_t nb)
{
    const size_t bs = simd_type_traits(type)->bytes;
    for (int r = 0; r < SC_MAXR; r++)
        for (size_t b = 0; b < nb; b++) {
            unsigned char *blk = sc_w[r] + b * bs;
            for (size_t i = 0; i < bs; i++)
                blk[i] = (unsigned char)brnd();
            uint16_t d = sc_pick_f16(extreme), m = sc_pick_f16(extreme);
            if (type == SIMD_Q6_K) {
                memcpy(blk + offsetof(simd_block_q6_k, d), &d, 2);
            } else {
                memcpy(blk, &d, 2);
                memcpy(blk + 2, &m, 2);
            }
        }
}

static void fill_rows(int type, size_t n, int ext)
{
    extreme = ext;
    fill_weights(type, n / 256);
    sc_fill_acts(SIMD_ACT_Q8K, n, ext, 256);
}

static size_t row_length(int type, size_t round)
{
    static const size_t blocks[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 24, 43, MAXB};
    (void)type;
    return blocks[round] * 256;
}

static void check_all_sets(void)
{
    static const int ktypes[] = {SIMD_Q4_K, SIMD_Q5_K, SIMD_Q6_K};
    const sc_suite suite = {"K-quants", ktypes, 3, 12, row_length, fill_rows, 8};
    simd_kernel_set ref;
    memset(&ref, 0, sizeof ref);
    simd_set_scalar(&ref);
    simd_set_kquants_scalar(&ref);
#ifdef NIBBLE_TEST_VNNIINT8_EMUL
    sc_check_all_sets(&suite, &ref, simd_set_kquants_avxvnniint8_emul);
#else
    sc_check_all_sets(&suite, &ref, NULL);
#endif
}

int main(void)
{
    simd_init();
    check_all_sets();
    for (size_t i = 0; i < N; i++) {
        x[i] = normal() * 0.02f;
        if (i % 509 == 7)
            x[i] *= 8; /* outliers, as real weights have */
        act[i] = normal();
    }
    for (size_t k = 0; k < sizeof bounds / sizeof bounds[0]; k++) {
        const simd_traits *t = simd_type_traits(bounds[k].type);
        CHECK(t && t->quant && t->dequant);
        if (!t || !t->quant || !t->dequant)
            continue;
        t->quant(x, qbuf, N);
        t->dequant(qbuf, y, N);
        double r = tu_rel_rms(x, y, N);
        printf("%-5s rel. RMS error %.5f (bound %.3f)\n", t->name, r, bounds[k].bound);
        CHECKF(r < bounds[k].bound, "%s: %g", t->name, r);
    }

    /* dots of the K types against q8k activations */
    simd_act_quant(SIMD_ACT_Q8K, act, abuf, N);
    const simd_block_q8k *ab = (const simd_block_q8k *)abuf;
    for (size_t b = 0; b < N / 256; b++) {
        int s16 = 0;
        for (int j = 0; j < 256; j++) {
            deqa[b * 256 + j] = ab[b].d * ab[b].qs[j];
            s16 += ab[b].qs[j];
            if (j % 16 == 15) {
                CHECK(ab[b].bsums[j / 16] == s16);
                s16 = 0;
            }
        }
    }
    CHECK(tu_rel_rms(act, deqa, N) < 0.01);
    const int ktypes[] = {SIMD_Q4_K, SIMD_Q5_K, SIMD_Q6_K};
    for (int k = 0; k < 3; k++) {
        const simd_traits *t = simd_type_traits(ktypes[k]);
        CHECK(t->act == SIMD_ACT_Q8K && t->dot && t->dot_batch);
        if (!t->dot)
            continue;
        t->quant(x, qbuf, N);
        t->dequant(qbuf, y, N);
        for (size_t n = 256; n <= N; n *= 4) {
            double ref = 0, mag = 0;
            for (size_t i = 0; i < n; i++) {
                ref += (double)y[i] * deqa[i];
                mag += fabs((double)y[i] * deqa[i]);
            }
            float got = t->dot(n, qbuf, abuf);
            CHECKF(fabs(got - ref) <= 1e-5 * mag + 1e-9, "%s n=%zu: %g vs %g", t->name, n, got, ref);
        }
        /* the batch form gives the same bits */
        float o[2];
        t->dot_batch(N, qbuf, abuf, simd_act_row_bytes(SIMD_ACT_Q8K, N), 1, o, 1);
        CHECK(o[0] == t->dot(N, qbuf, abuf));
        /* every kernel set the CPU runs gives the scalar set's bits */
        enum simd_kernel cur = simd_kernel_current();
        simd_kernel_select(SIMD_K_SCALAR);
        float ref_bits = simd_type_traits(ktypes[k])->dot(N, qbuf, abuf);
        for (int s = 0; s < SIMD_K_COUNT; s++)
            if (simd_kernel_supported((enum simd_kernel)s, NULL)) {
                simd_kernel_select((enum simd_kernel)s);
                CHECKF(simd_type_traits(ktypes[k])->dot(N, qbuf, abuf) == ref_bits, "%s on %s", t->name,
                       simd_kernel_name((enum simd_kernel)s));
            }
        simd_kernel_select(cur);
    }

    /* edge rows */
    float e[256], d[256];
    for (int k = 0; k < 3; k++) {
        const simd_traits *t = simd_type_traits(ktypes[k]);
        memset(e, 0, sizeof e);
        t->quant(e, qbuf, 256);
        t->dequant(qbuf, d, 256);
        for (int i = 0; i < 256; i++)
            CHECKF(d[i] == 0, "%s zeros", t->name);
        for (int i = 0; i < 256; i++)
            e[i] = -0.5f - 0.001f * i; /* all negative */
        t->quant(e, qbuf, 256);
        t->dequant(qbuf, d, 256);
        CHECKF(tu_rel_rms(e, d, 256) < 0.05, "%s negative: %g", t->name, tu_rel_rms(e, d, 256));
        for (int i = 0; i < 256; i++)
            e[i] = 0.25f; /* constant */
        t->quant(e, qbuf, 256);
        t->dequant(qbuf, d, 256);
        CHECKF(tu_rel_rms(e, d, 256) < 0.02, "%s constant: %g", t->name, tu_rel_rms(e, d, 256));
        memset(e, 0, sizeof e);
        e[100] = 3.0f; /* one spike */
        t->quant(e, qbuf, 256);
        t->dequant(qbuf, d, 256);
        CHECKF(fabsf(d[100] - 3.0f) < 0.03f && fabsf(d[5]) < 1e-3f, "%s spike: %g %g", t->name, d[100], d[5]);
    }
    return tu_result("test_kquants");
}
