/* Every kernel set against the scalar kernels, bit for bit: the driver
 * test_kquants, test_lquants and test_iquants share. A test describes its
 * types and how to fill random weight and activation rows (a sc_suite);
 * sc_check_all_sets then runs every set this CPU supports (and an
 * emulated one when given) through dot, dot_batch and dot_rows over each
 * round's row length, every token count up to SC_MAXT, row and token
 * counts around the kernels' steps and output strides with gaps that must
 * stay untouched, and fails on the first result whose bits differ from
 * the scalar set's (NaN matches any NaN).
 *
 * Include once, after testrand.h (whose numbers sc_fill_acts draws). */
#ifndef NIBBLE_SETCHECK_H
#define NIBBLE_SETCHECK_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "simd.h"
#include "simd_internal.h"
#include "testutil.h"

#define SC_MAXR 19         /* weight rows */
#define SC_MAXT 11         /* token rows */
#define SC_ROWB (48 * 210) /* bytes per weight row: 48 q6_k super-blocks the most */
#define SC_ACTB (40 * 400) /* bytes per activation row */

/* The rows the suite's fill writes: weights sc_w[r], activations sc_a[t]. */
static unsigned char sc_w[SC_MAXR][SC_ROWB];
static unsigned char sc_a[SC_MAXT][SC_ACTB];
static float sc_ref[SC_MAXT][SC_MAXR], sc_out[SC_MAXT * SC_MAXR * 3];

typedef struct {
    const char *what; /* the summary line's name for the types */
    const int *types;
    int ntypes;
    size_t rounds;
    /* round's row length in values for type */
    size_t (*length)(int type, size_t round);
    /* n values of type in each of sc_w's SC_MAXR rows, and n activations
     * (the type's partner format) in each of sc_a's SC_MAXT rows; extreme:
     * use the extreme scales and activation classes */
    void (*fill)(int type, size_t n, int extreme);
    int finite_tenths; /* at least this many tenths of the scalar results finite */
} sc_suite;

static int sc_same(float a, float b)
{
    uint32_t u, v;
    memcpy(&u, &a, 4);
    memcpy(&v, &b, 4);
    return u == v || (isnan(a) && isnan(b));
}

/* n activations in each of sc_a's rows, quantized to act, in classes of
 * blk (32 or 256) values: plain uniform, or with extreme set a class drawn
 * per block: zeros, tiny (subnormal), huge (overflowing in token 0), one
 * outlier, all +-2 (every code at its largest), or plain. */
static void sc_fill_acts(enum simd_act act, size_t n, int extreme, size_t blk)
{
    static float xf[SC_ACTB];
    for (int t = 0; t < SC_MAXT; t++) {
        for (size_t b = 0; b < n / blk; b++) {
            int cls = extreme ? (int)rndn(8) : 7;
            for (size_t i = 0; i < blk; i++) {
                float v = unif();
                switch (cls) {
                case 0: v = 0; break;
                case 1: v *= 1e-40f; break;
                case 2: v *= t == 0 ? 1.5e38f : 1e30f; break;
                case 3: v = i == blk / 4 - 1 ? 1000.0f : v * 1e-3f; break;
                case 4: v = v < 0 ? -2.0f : 2.0f; break;
                default: break;
                }
                xf[b * blk + i] = v;
            }
        }
        simd_act_quant(act, xf, sc_a[t], n);
    }
}

/* An f16 scale: mostly ordinary, and with extreme set now and then zero,
 * the largest finite, subnormal, negative or one. */
static uint16_t sc_pick_f16(int extreme)
{
    static const uint16_t special[] = {0x0000, 0x7bff, 0x0001, 0x03ff, 0x8400, 0x3c00, 0xfbff};
    if (extreme && rndn(8) == 0)
        return special[rndn(sizeof special / sizeof special[0])];
    return simd_f32_to_f16((float)((double)rndn(2000) * 1e-5 + 1e-6));
}

/* One round of one type: 0 when every form agrees with sc_ref. */
static int sc_check_round(const char *name, const char *tn, int type, size_t n, const simd_kernel_set *ks)
{
    const size_t ws = SC_ROWB, as = SC_ACTB;
    for (int r = 0; r < SC_MAXR; r++)
        for (int t = 0; t < SC_MAXT; t++) {
            float got = ks->dot[type](n, sc_w[r], sc_a[t]);
            if (!sc_same(got, sc_ref[t][r])) {
                CHECKF(0, "%s %s dot n=%zu r=%d t=%d: %a vs %a", name, tn, n, r, t, (double)got,
                       (double)sc_ref[t][r]);
                return -1;
            }
        }
    /* dot_batch: every token count, output stride 3 */
    for (size_t nt = 1; nt <= SC_MAXT; nt++) {
        int r = (int)(nt % SC_MAXR);
        ks->dot_batch[type](n, sc_w[r], sc_a, as, nt, sc_out, 3);
        for (size_t t = 0; t < nt; t++)
            if (!sc_same(sc_out[t * 3], sc_ref[t][r])) {
                CHECKF(0, "%s %s dot_batch n=%zu nt=%zu t=%zu: %a vs %a", name, tn, n, nt, t, (double)sc_out[t * 3],
                       (double)sc_ref[t][r]);
                return -1;
            }
    }
    /* dot_rows: row and token counts around the steps, out[t*os + r] */
    static const size_t nrs[] = {1, 2, 5, 16, 17, 19}, nts[] = {1, 3, 4, 5, 8, 9, 11};
    for (size_t i = 0; i < sizeof nrs / sizeof nrs[0]; i++)
        for (size_t j = 0; j < sizeof nts / sizeof nts[0]; j++) {
            size_t nr = nrs[i], nt = nts[j], os = nr + 2;
            for (size_t k = 0; k < nt * os; k++)
                sc_out[k] = -1.0f;
            ks->dot_rows[type](n, sc_w, ws, nr, sc_a, as, nt, sc_out, os);
            for (size_t t = 0; t < nt; t++)
                for (size_t r = 0; r < os; r++) {
                    float want = r < nr ? sc_ref[t][r] : -1.0f;
                    if (!sc_same(sc_out[t * os + r], want)) {
                        CHECKF(0, "%s %s dot_rows n=%zu nr=%zu nt=%zu (t=%zu r=%zu): %a vs %a", name, tn, n, nr, nt, t,
                               r, (double)sc_out[t * os + r], (double)want);
                        return -1;
                    }
                }
        }
    return 0;
}

/* Set ks (called name) against ref over every type and round of s. */
static void sc_check_set(const sc_suite *s, const char *name, const simd_kernel_set *ks, const simd_kernel_set *ref)
{
    int fails = tu_failures;
    long finite = 0, total = 0;
    for (int ti = 0; ti < s->ntypes; ti++) {
        const int type = s->types[ti];
        const char *tn = simd_type_name(type);
        if (!ks->dot[type] || !ks->dot_batch[type] || !ks->dot_rows[type]) {
            CHECKF(0, "%s: no %s kernels", name, tn);
            continue;
        }
        for (size_t round = 0; round < s->rounds; round++) {
            const size_t n = s->length(type, round);
            s->fill(type, n, (int)(round & 1));
            for (int r = 0; r < SC_MAXR; r++)
                for (int t = 0; t < SC_MAXT; t++) {
                    sc_ref[t][r] = ref->dot[type](n, sc_w[r], sc_a[t]);
                    finite += isfinite(sc_ref[t][r]) != 0;
                    total++;
                }
            sc_check_round(name, tn, type, n, ks);
        }
    }
    /* the extremes must not turn most results into inf/NaN, where the
     * comparison is weaker */
    CHECKF(finite * 10 > total * s->finite_tenths, "%s: only %ld of %ld results finite", name, finite, total);
    printf("%-22s %s %s\n", name, s->what, tu_failures == fails ? "bit-identical to scalar" : "DIFFER");
}

/* Every set this CPU supports against ref (a SIMD set must bring its own
 * kernels for every type of s, not the scalar ones), then the emulated
 * set emul fills, when not NULL and AVX2 runs; the selected set is
 * restored. */
static void sc_check_all_sets(const sc_suite *s, const simd_kernel_set *ref, void (*emul)(simd_kernel_set *))
{
    enum simd_kernel cur = simd_kernel_current();
    int tested = 0;
    for (int k = 0; k < SIMD_K_COUNT; k++) {
        const char *why = NULL, *name = simd_kernel_name((enum simd_kernel)k);
        if (!simd_kernel_supported((enum simd_kernel)k, &why)) {
            printf("%-22s skipped: %s\n", name, why ? why : "?");
            continue;
        }
        CHECK(simd_kernel_select((enum simd_kernel)k) == 0);
        simd_kernel_set copy = simd_installed_set();
        if (k != SIMD_K_SCALAR)
            for (int ti = 0; ti < s->ntypes; ti++)
                CHECKF(copy.dot[s->types[ti]] != ref->dot[s->types[ti]], "%s has no %s kernel of its own", name,
                       simd_type_name(s->types[ti]));
        sc_check_set(s, name, &copy, ref);
        tested++;
    }
    CHECK(tested >= 2 || !simd_kernel_supported(SIMD_K_AVX2, NULL));
    if (emul && simd_kernel_supported(SIMD_K_AVX2, NULL)) {
        simd_kernel_set e;
        memset(&e, 0, sizeof e);
        emul(&e);
        sc_check_set(s, "avxvnniint8 (emulated)", &e, ref);
    }
    simd_kernel_select(cur);
}

#endif
