/* Writing the i-quants below 4 bits (simd/iquants_quant.c), read back
 * through the existing reader (the type table's dequant):
 *  - the search tables: every grid point maps to itself, every other
 *    level vector has neighbours;
 *  - Gaussian rows with outliers: each type's relative RMS error under a
 *    stated bound, below a stated multiple of the reference quantizer of
 *    a larger type (q3_k for iq3, q2_k for iq2 and iq1), and the types in
 *    order of size (more bits, less error);
 *  - importance: with a heavy-tailed importance per column, the weighted
 *    error of the weighted search is below 0.9x the unweighted one's, and
 *    below the error of the same importance given to the wrong columns;
 *  - edge rows (zeros, a constant, a spike, tiny and large values): zeros
 *    stay exact, nothing decodes to NaN or infinity, a spike keeps its
 *    sign and most of its size;
 *  - the same bytes on a second run (no state carried between rows);
 *  - (POSIX) two threads whose first quantization builds the tables at
 *    the same time get the bytes a single thread gets (the TSan build
 *    checks the once-only build). */
#include <math.h>
#include <stdint.h>
#ifndef _WIN32
#include <pthread.h>
#endif

#include "iquants_quant.h"
#include "simd.h"
#include "testutil.h"

enum { N = 4096, ROWS = 8 };

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static float gauss(void) { return (float)(sqrt(-2 * log(urand() + 1e-12)) * cos(6.283185307 * urand())); }

/* the seven types, smallest first; bound: relative RMS error on Gaussian
 * rows; ref, ratio: the larger type whose reference quantizer's error
 * times ratio bounds this type's (measured values in the comments, on
 * this test's rows) */
static const struct {
    int type;
    double bound;
    int ref;
    double ratio;
} types[] = {
    {SIMD_IQ1_S, 0.60, SIMD_Q2_K, 1.95},
    {SIMD_IQ1_M, 0.56, SIMD_Q2_K, 1.75},
    {SIMD_IQ2_XXS, 0.45, SIMD_Q2_K, 1.45},
    {SIMD_IQ2_XS, 0.38, SIMD_Q2_K, 1.18},
    {SIMD_IQ2_S, 0.35, SIMD_Q2_K, 1.08},
    {SIMD_IQ3_XXS, 0.23, SIMD_Q3_K, 1.18},
    {SIMD_IQ3_S, 0.20, SIMD_Q3_K, 1.00},
};
#define NT (sizeof types / sizeof types[0])

static float x[ROWS][N], y[N];
static unsigned char q[N * 2], q2[N * 2];

static double rel_err(int type, int rows, const float *imp, double *werr)
{
    const simd_traits *tr = simd_type_traits(type);
    double e = 0, s = 0, we = 0;
    for (int r = 0; r < rows; r++) {
        if (imp)
            tr->quant_imp(x[r], q, N, imp);
        else
            tr->quant(x[r], q, N);
        tr->dequant(q, y, N);
        for (int i = 0; i < N; i++) {
            double d = (double)y[i] - x[r][i];
            e += d * d;
            s += (double)x[r][i] * x[r][i];
            we += (imp ? imp[i] : 1.0) * d * d;
        }
    }
    if (werr)
        *werr = we;
    return sqrt(e / s);
}

#ifndef _WIN32
static float trow[2][N];
static unsigned char tout[2][N];

static void *first_use(void *arg)
{
    int k = (int)(intptr_t)arg;
    simd_type_traits(k ? SIMD_IQ2_XS : SIMD_IQ1_M)->quant(trow[k], tout[k], N);
    return NULL;
}

/* before any other use of the tables */
static void test_threads(void)
{
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < N; i++)
            trow[k][i] = sinf(0.37f * (float)i + (float)k) * (i % 7 == 0 ? 3.0f : 1.0f); /* (leaves rng's draws alone) */
    pthread_t th[2];
    int ok[2];
    for (int k = 0; k < 2; k++)
        ok[k] = pthread_create(&th[k], NULL, first_use, (void *)(intptr_t)k) == 0;
    for (int k = 0; k < 2; k++)
        if (ok[k])
            pthread_join(th[k], NULL);
    CHECK(ok[0] && ok[1]);
    for (int k = 0; k < 2; k++) {
        const simd_traits *tr = simd_type_traits(k ? SIMD_IQ2_XS : SIMD_IQ1_M);
        tr->quant(trow[k], q, N);
        CHECKF(!memcmp(q, tout[k], N / 256 * tr->bytes), "%s: a thread's first use wrote other bytes", tr->name);
    }
}
#endif

static void test_tables(void)
{
    for (size_t k = 0; k < NT; k++) {
        size_t nl = 0, ne = 0;
        int r = simd_iq_quant_check(types[k].type, &nl, &ne);
        CHECKF(r == 0, "%s: search tables", simd_type_name(types[k].type));
        printf("%-8s %zu neighbour lists, %zu entries\n", simd_type_name(types[k].type), nl, ne);
    }
    size_t nl, ne;
    CHECK(simd_iq_quant_check(SIMD_Q4_0, &nl, &ne) == -1);
}

static void test_error(void)
{
    for (int r = 0; r < ROWS; r++)
        for (int i = 0; i < N; i++)
            x[r][i] = gauss() * (urand() < 0.02 ? 5.0f : 1.0f) * 0.02f;
    double prev = 1e9;
    for (size_t k = 0; k < NT; k++) {
        const simd_traits *tr = simd_type_traits(types[k].type);
        CHECKF(tr->quant && tr->quant_imp && tr->block == 256, "%s: no quantizer", tr->name);
        if (!tr->quant || !tr->quant_imp)
            continue;
        double e = rel_err(types[k].type, ROWS, NULL, NULL), eref = rel_err(types[k].ref, ROWS, NULL, NULL);
        printf("%-8s rel. RMS error %.4f (bound %.2f); %s's %.4f, ratio %.3f (bound %.2f)\n", tr->name, e,
               types[k].bound, simd_type_name(types[k].ref), eref, e / eref, types[k].ratio);
        CHECKF(e < types[k].bound, "%s: error %g", tr->name, e);
        CHECKF(e < types[k].ratio * eref, "%s: error %g against %s's %g", tr->name, e, simd_type_name(types[k].ref),
               eref);
        CHECKF(e < prev, "%s: error %g not below the smaller type's %g", tr->name, e, prev);
        prev = e;
        /* a second run writes the same bytes */
        tr->quant(x[0], q, N);
        tr->quant(x[1], q2, N);
        tr->quant(x[0], q2, N);
        CHECKF(!memcmp(q, q2, N / 256 * tr->bytes), "%s: not deterministic", tr->name);
    }
}

static void test_importance(void)
{
    static float imp[N], wrong[N];
    for (int i = 0; i < N; i++)
        imp[i] = (float)pow(10.0, 4 * urand() - 2);
    for (int i = 0; i < N; i++)
        wrong[i] = imp[(i + 977) % N];
    for (size_t k = 0; k < NT; k++) {
        int t = types[k].type;
        double e_plain, e_imp, e_wrong;
        /* the weighted error of each, under the true importance */
        const simd_traits *tr = simd_type_traits(t);
        e_plain = 0, e_imp = 0, e_wrong = 0;
        for (int r = 0; r < ROWS; r++) {
            const float *which[3] = {NULL, imp, wrong};
            double *acc[3] = {&e_plain, &e_imp, &e_wrong};
            for (int m = 0; m < 3; m++) {
                if (which[m])
                    tr->quant_imp(x[r], q, N, which[m]);
                else
                    tr->quant(x[r], q, N);
                tr->dequant(q, y, N);
                for (int i = 0; i < N; i++)
                    *acc[m] += imp[i] * ((double)y[i] - x[r][i]) * ((double)y[i] - x[r][i]);
            }
        }
        printf("%-8s importance-weighted error: weighted search %.3f of the unweighted, misplaced importance %.3f\n",
               tr->name, e_imp / e_plain, e_wrong / e_plain);
        CHECKF(e_imp < 0.9 * e_plain, "%s: %g vs %g unweighted", tr->name, e_imp, e_plain);
        CHECKF(e_imp < 0.9 * e_wrong, "%s: %g vs %g misplaced", tr->name, e_imp, e_wrong);
    }
}

static void test_edges(void)
{
    static float row[N];
    for (size_t k = 0; k < NT; k++) {
        const simd_traits *tr = simd_type_traits(types[k].type);
        for (int c = 0; c < 6; c++) {
            for (int i = 0; i < N; i++)
                row[i] = c == 0 ? 0.0f
                       : c == 1 ? 0.5f
                       : c == 2 ? (i == 300 ? -3.0f : 0.0f)
                       : c == 3 ? 1e-30f * gauss()
                       : c == 4 ? 1000.0f * gauss()
                                : (i & 1 ? -0.25f : 0.25f);
            tr->quant(row, q, N);
            tr->dequant(q, y, N);
            int bad = 0;
            double e = 0, s = 0;
            for (int i = 0; i < N; i++) {
                bad += !isfinite(y[i]);
                e += ((double)y[i] - row[i]) * ((double)y[i] - row[i]);
                s += (double)row[i] * row[i];
            }
            CHECKF(!bad, "%s row %d: %d values not finite", tr->name, c, bad);
            if (c == 0)
                CHECKF(e == 0, "%s: zeros decode to non-zeros", tr->name);
            if (c == 2)
                CHECKF(y[300] < -1.0f, "%s: spike -3 decodes to %g", tr->name, y[300]);
            if (c == 1 || c == 4 || c == 5)
                CHECKF(e < 0.5 * s, "%s row %d: relative square error %g", tr->name, c, e / s);
        }
    }
}

int main(void)
{
    simd_init();
#ifndef _WIN32
    test_threads();
#endif
    test_tables();
    test_error();
    test_importance();
    test_edges();
    return tu_result("test_iquants_quant");
}
