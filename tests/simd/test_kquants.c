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

static double rel_rms(const float *a, const float *b, size_t n)
{
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)a[i] * a[i];
    }
    return s > 0 ? sqrt(e / s) : sqrt(e);
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

static int same_bits(float a, float b)
{
    uint32_t u, v;
    memcpy(&u, &a, 4);
    memcpy(&v, &b, 4);
    return u == v || (isnan(a) && isnan(b));
}

#define MAXB 48  /* super-blocks per row */
#define MAXR 19  /* weight rows */
#define MAXT 11  /* tokens */
#define KROW (MAXB * 210)
static unsigned char kw[MAXR][KROW];
static unsigned char ka[MAXT][MAXB * sizeof(simd_block_q8k)];
static float kref[MAXT][MAXR], kout[MAXT * MAXR * 3];

/* An f16 scale: mostly ordinary, sometimes zero, the largest finite,
 * subnormal or negative. */
static int extreme; /* this round uses the extreme classes */
static uint16_t pick_f16(void)
{
    static const uint16_t special[] = {0x0000, 0x7bff, 0x0001, 0x03ff, 0x8400, 0x3c00, 0xfbff};
    if (extreme && brnd() % 8 == 0)
        return special[brnd() % (sizeof special / sizeof special[0])];
    return simd_f32_to_f16((float)((double)(brnd() % 2000) * 1e-5 + 1e-6));
}

/* Random weight rows of type: every byte random, then the f16 scales. */
static void fill_weights(int type, size_t nb)
{
    const size_t bs = simd_type_traits(type)->bytes;
    for (int r = 0; r < MAXR; r++)
        for (size_t b = 0; b < nb; b++) {
            unsigned char *blk = kw[r] + b * bs;
            for (size_t i = 0; i < bs; i++)
                blk[i] = (unsigned char)brnd();
            uint16_t d = pick_f16(), m = pick_f16();
            if (type == SIMD_Q6_K) {
                memcpy(blk + offsetof(simd_block_q6_k, d), &d, 2);
            } else {
                memcpy(blk, &d, 2);
                memcpy(blk + 2, &m, 2);
            }
        }
}

/* Activation rows through simd_act_quant: each 256-block gets a class:
 * zeros, tiny (subnormal), huge (near FLT_MAX / 2), one outlier, all
 * +-max (every q = +-127), or plain. */
static void fill_acts(size_t n)
{
    static float xf[MAXB * 256];
    for (int t = 0; t < MAXT; t++) {
        for (size_t b = 0; b < n / 256; b++) {
            int cls = extreme ? (int)(brnd() % 8) : 7;
            for (int i = 0; i < 256; i++) {
                float v = (float)((double)(brnd() >> 11) / 9007199254740992.0 * 2 - 1);
                switch (cls) {
                case 0: v = 0; break;
                case 1: v *= 1e-40f; break;
                case 2: v *= t == 0 ? 1.5e38f : 1e30f; break; /* overflows: token 0 only */
                case 3: v = i == 77 ? 1000.0f : v * 1e-3f; break;
                case 4: v = v < 0 ? -2.0f : 2.0f; break;
                default: break;
                }
                xf[b * 256 + i] = v;
            }
        }
        simd_act_quant(SIMD_ACT_Q8K, xf, ka[t], n);
    }
}

static void check_set_k(const char *name, const simd_kernel_set *ks, const simd_kernel_set *ref)
{
    static const size_t blocks[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 24, 43, 48};
    static const int ktypes[] = {SIMD_Q4_K, SIMD_Q5_K, SIMD_Q6_K};
    int fails = tu_failures;
    long finite = 0, total = 0;
    for (int ki = 0; ki < 3; ki++) {
        const int type = ktypes[ki];
        const char *tn = simd_type_name(type);
        if (!ks->dot[type] || !ks->dot_batch[type] || !ks->dot_rows[type]) {
            CHECKF(0, "%s: no %s kernels", name, tn);
            continue;
        }
        for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++) {
            const size_t nb = blocks[bi], n = nb * 256, ws = KROW, as = sizeof ka[0];
            extreme = (int)(bi & 1);
            fill_weights(type, nb);
            fill_acts(n);
            for (int r = 0; r < MAXR; r++)
                for (int t = 0; t < MAXT; t++)
                {
                    kref[t][r] = ref->dot[type](n, kw[r], ka[t]);
                    finite += isfinite(kref[t][r]) != 0;
                    total++;
                }
            /* dot */
            for (int r = 0; r < MAXR; r++)
                for (int t = 0; t < MAXT; t++) {
                    float got = ks->dot[type](n, kw[r], ka[t]);
                    if (!same_bits(got, kref[t][r])) {
                        CHECKF(0, "%s %s dot n=%zu r=%d t=%d: %a vs %a", name, tn, n, r, t, (double)got,
                               (double)kref[t][r]);
                        goto next;
                    }
                }
            /* dot_batch: every token count, output stride 3 */
            for (size_t nt = 1; nt <= MAXT; nt++) {
                int r = (int)(nt % MAXR);
                ks->dot_batch[type](n, kw[r], ka, as, nt, kout, 3);
                for (size_t t = 0; t < nt; t++)
                    if (!same_bits(kout[t * 3], kref[t][r])) {
                        CHECKF(0, "%s %s dot_batch n=%zu nt=%zu t=%zu: %a vs %a", name, tn, n, nt, t,
                               (double)kout[t * 3], (double)kref[t][r]);
                        goto next;
                    }
            }
            /* dot_rows: row and token counts around the steps, out[t*os + r] */
            static const size_t nrs[] = {1, 2, 5, 16, 17, 19}, nts[] = {1, 3, 4, 5, 8, 9, 11};
            for (size_t i = 0; i < sizeof nrs / sizeof nrs[0]; i++)
                for (size_t j = 0; j < sizeof nts / sizeof nts[0]; j++) {
                    size_t nr = nrs[i], nt = nts[j], os = nr + 2;
                    for (size_t k = 0; k < nt * os; k++)
                        kout[k] = -1.0f;
                    ks->dot_rows[type](n, kw, ws, nr, ka, as, nt, kout, os);
                    for (size_t t = 0; t < nt; t++)
                        for (size_t r = 0; r < os; r++) {
                            float want = r < nr ? kref[t][r] : -1.0f;
                            if (!same_bits(kout[t * os + r], want)) {
                                CHECKF(0, "%s %s dot_rows n=%zu nr=%zu nt=%zu (t=%zu r=%zu): %a vs %a", name, tn,
                                       n, nr, nt, t, r, (double)kout[t * os + r], (double)want);
                                goto next;
                            }
                        }
                }
        next:;
        }
    }
    /* the extremes must not turn most results into inf/NaN, where the
     * comparison is weaker */
    CHECKF(finite * 10 > total * 8, "%s: only %ld of %ld results finite", name, finite, total);
    printf("%-22s K-quants %s\n", name, tu_failures == fails ? "bit-identical to scalar" : "DIFFER");
}

static void check_all_sets(void)
{
    simd_kernel_set ref;
    memset(&ref, 0, sizeof ref);
    simd_set_scalar(&ref);
    simd_set_kquants_scalar(&ref);
    enum simd_kernel cur = simd_kernel_current();
    int tested = 0;
    for (int k = 0; k < SIMD_K_COUNT; k++) {
        const char *why = NULL;
        if (!simd_kernel_supported((enum simd_kernel)k, &why)) {
            printf("%-22s skipped: %s\n", simd_kernel_name((enum simd_kernel)k), why ? why : "?");
            continue;
        }
        CHECK(simd_kernel_select((enum simd_kernel)k) == 0);
        simd_kernel_set copy = simd_installed_set();
        /* a SIMD set must bring its own K kernels, not the scalar ones */
        if (k != SIMD_K_SCALAR)
            CHECKF(copy.dot[SIMD_Q4_K] != ref.dot[SIMD_Q4_K] && copy.dot[SIMD_Q6_K] != ref.dot[SIMD_Q6_K],
                   "%s has no K-quant kernels of its own", simd_kernel_name((enum simd_kernel)k));
        check_set_k(simd_kernel_name((enum simd_kernel)k), &copy, &ref);
        tested++;
    }
#ifdef NIBBLE_TEST_VNNIINT8_EMUL
    if (simd_kernel_supported(SIMD_K_AVX2, NULL)) {
        simd_kernel_set e;
        memset(&e, 0, sizeof e);
        simd_set_kquants_avxvnniint8_emul(&e);
        check_set_k("avxvnniint8 (emulated)", &e, &ref);
    }
#endif
    CHECK(tested >= 2 || simd_kernel_supported(SIMD_K_AVX2, NULL) == 0);
    simd_kernel_select(cur);
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
        double r = rel_rms(x, y, N);
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
    CHECK(rel_rms(act, deqa, N) < 0.01);
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
        CHECKF(rel_rms(e, d, 256) < 0.05, "%s negative: %g", t->name, rel_rms(e, d, 256));
        for (int i = 0; i < 256; i++)
            e[i] = 0.25f; /* constant */
        t->quant(e, qbuf, 256);
        t->dequant(qbuf, d, 256);
        CHECKF(rel_rms(e, d, 256) < 0.02, "%s constant: %g", t->name, rel_rms(e, d, 256));
        memset(e, 0, sizeof e);
        e[100] = 3.0f; /* one spike */
        t->quant(e, qbuf, 256);
        t->dequant(qbuf, d, 256);
        CHECKF(fabsf(d[100] - 3.0f) < 0.03f && fabsf(d[5]) < 1e-3f, "%s spike: %g %g", t->name, d[100], d[5]);
    }
    return tu_result("test_kquants");
}
