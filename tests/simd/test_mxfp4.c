/* MXFP4 (simd/mxfp4.c and each set's mxfp4_*.h):
 *  - dequantization of hand-made blocks against values worked out by hand
 *    (nibble order, the E2M1 table, the sign bit, exponents 0, 1, 127,
 *    254 and 255);
 *  - the reference quantizer: every code the nearest level of its block's
 *    scale (ties to the even code), the scale no worse than the two an
 *    exhaustive search says are the candidates, the error within bound,
 *    and zeros, NaN, infinities, subnormals and exact levels handled;
 *  - the scalar dot against double precision;
 *  - every kernel set this CPU runs (and avxvnniint8 with its instruction
 *    emulated) gives the scalar dot's bits for dot, dot_batch and
 *    dot_rows: many lengths, row and token counts, strides, raw blocks
 *    with every exponent byte including 0 and 255 (NaN only where the
 *    scalar result is NaN too). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "mxfp4.h"
#include "testutil.h"

#ifdef NIBBLE_TEST_VNNIINT8_EMUL
void simd_set_avxvnniint8_emul(simd_kernel_set *s);
void simd_set_mxfp4_avxvnniint8_emul(simd_kernel_set *s);
#endif

#define TR_SEED 0x6d78667034ull
#include "testrand.h"

static int same(float a, float b) { return f32_bits(a) == f32_bits(b) || (isnan(a) && isnan(b)); }

/* ---- dequantization of known blocks ---- */

static void check_known_blocks(void)
{
    const simd_traits *tr = simd_type_traits(SIMD_MXFP4);
    CHECK(tr && tr->block == 32 && tr->bytes == 17 && tr->act == SIMD_ACT_Q8 && tr->dequant && tr->quant);
    /* codes j in the low nibbles (x[0..15]), 15-j in the high ones
     * (x[16..31]); e = 127 is scale 1, so x is the E2M1 value itself */
    simd_block_mxfp4 b;
    b.e = 127;
    for (int j = 0; j < 16; j++)
        b.qs[j] = (uint8_t)(j | (15 - j) << 4);
    static const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, 0, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    float y[32];
    tr->dequant(&b, y, 32);
    for (int j = 0; j < 16; j++) {
        CHECKF(y[j] == e2m1[j], "x[%d] = %g, want %g", j, (double)y[j], (double)e2m1[j]);
        CHECKF(y[16 + j] == e2m1[15 - j], "x[%d] = %g, want %g", 16 + j, (double)y[16 + j], (double)e2m1[15 - j]);
    }
    CHECK(!signbit(y[8])); /* code 8, "-0", means 0 */

    /* e = 130: scale 8; code 7 (6) -> 48, code 13 (-3) -> -24 */
    memset(b.qs, 0, sizeof b.qs);
    b.e = 130;
    b.qs[0] = 7 | 13 << 4;
    tr->dequant(&b, y, 32);
    CHECK(y[0] == 48.0f && y[16] == -24.0f && y[1] == 0.0f);

    /* the exponent's edges, in powers of two: code 1 is 0.5, code 7 is 6 */
    struct { uint8_t e, code; float want; } edge[] = {
        {0, 1, ldexpf(1, -128)},        /* 2^-127 * 0.5: a subnormal */
        {0, 7, 3 * ldexpf(1, -126)},    /* 2^-127 * 6 */
        {1, 1, ldexpf(1, -127)},
        {2, 15, -12 * ldexpf(1, -126)}, /* first normal scale */
        {126, 3, 0.75f},
        {254, 1, ldexpf(1, 126)},
        {254, 7, INFINITY},             /* 6 * 2^127 overflows */
        {255, 1, ldexpf(1, 127)},       /* 255 is a finite scale, 2^128 */
        {255, 9, -ldexpf(1, 127)},
        {255, 2, INFINITY},
        {255, 0, 0.0f},
    };
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
        memset(b.qs, 0, sizeof b.qs);
        b.e = edge[i].e;
        b.qs[5] = (uint8_t)(edge[i].code << 4); /* x[21] */
        tr->dequant(&b, y, 32);
        CHECKF(f32_bits(y[21]) == f32_bits(edge[i].want), "e=%u code %u: %a, want %a", edge[i].e, edge[i].code,
               (double)y[21], (double)edge[i].want);
        CHECK(y[5] == 0.0f);
        CHECK(simd_e8m0_half(edge[i].e) == ldexpf(1, edge[i].e - 128));
    }
    /* two blocks: the second's values follow the first's */
    simd_block_mxfp4 two[2] = {{127, {0}}, {128, {0}}};
    two[1].qs[15] = 0x51; /* x[15] = 0.5*2, x[31] = 3*2 */
    float z[64];
    tr->dequant(two, z, 64);
    CHECK(z[47] == 1.0f && z[63] == 6.0f && z[15] == 0.0f);
}

/* ---- the quantizer ---- */

static double level_err(float x, float s, int code)
{
    return fabs((double)x - (double)s * simd_mxfp4_kv[code]);
}

/* Squared error of x at half scale s with the best codes, found by trying
 * all 16 (no reference to the quantizer's own search). */
static double best_sse(const float *x, float s)
{
    double e = 0;
    for (int j = 0; j < 32; j++) {
        if (!isfinite(x[j]))
            continue; /* NaN and infinities are checked by code */
        double m = INFINITY;
        for (int c = 0; c < 16; c++)
            m = fmin(m, level_err(x[j], s, c));
        e += m * m;
    }
    return e;
}

static void check_quant_block(const float *x, const simd_block_mxfp4 *b, const char *what)
{
    float s = simd_e8m0_half(b->e);
    float amax = 0;
    for (int j = 0; j < 32; j++)
        amax = fmaxf(amax, fabsf(x[j]));
    CHECKF(b->e != 255, "%s: exponent 255 written", what);
    int bad = 0;
    for (int j = 0; j < 32 && !bad; j++) {
        int c = j < 16 ? b->qs[j] & 15 : b->qs[j - 16] >> 4;
        if (isnan(x[j])) {
            CHECKF(c == 0, "%s: NaN at %d coded %d", what, j, c);
            continue;
        }
        if (isinf(x[j])) {
            CHECKF(c == (x[j] < 0 ? 15 : 7), "%s: %g coded %d", what, (double)x[j], c);
            continue;
        }
        double e = level_err(x[j], s, c);
        for (int k = 0; k < 16; k++) {
            double ek = level_err(x[j], s, k);
            /* strictly nearer code, or as near with an even index where
             * c's is odd (ties to even), is a failure */
            int kv = simd_mxfp4_kv[k], cv = simd_mxfp4_kv[c];
            if (ek < e || (ek == e && kv != cv && (c & 1) && !(k & 1))) {
                CHECKF(0, "%s: x[%d]=%a at scale %a coded %d, %d is nearer or even", what, j, (double)x[j],
                       (double)s, c, k);
                bad = 1;
                break;
            }
        }
        if (x[j] < 0 && simd_mxfp4_kv[c] == 0)
            CHECKF(c == 0, "%s: negative zero code written", what); /* one code for 0 */
    }
    if (!(amax > 0) || isinf(amax))
        return;
    /* e_top: the smallest exponent with 12 * 2^(e-128) >= amax, by scan */
    int top = 0;
    while (top < 254 && 12.0 * ldexp(1, top - 128) < amax)
        top++;
    double got = best_sse(x, s), want = best_sse(x, simd_e8m0_half((uint8_t)top));
    if (top > 0)
        want = fmin(want, best_sse(x, simd_e8m0_half((uint8_t)(top - 1))));
    CHECKF(b->e == top || b->e + 1 == top, "%s: e=%u, top %d", what, b->e, top);
    CHECKF(got <= want, "%s: error %g, a candidate scale gives %g", what, got, want);
    /* with e_top no value is more than half the widest gap (4 steps) off,
     * and 6 * s_top < amax: per value at most amax/3 */
    if (top > 0 || amax > 6 * ldexp(1, -128)) /* else the smallest scale is too coarse */
        CHECKF(sqrt(got / 32) <= amax / 3, "%s: rms error %g for amax %g", what, sqrt(got / 32), (double)amax);
}

static void check_quant(void)
{
    const simd_traits *tr = simd_type_traits(SIMD_MXFP4);
    enum { N = 8192 };
    static float x[N], y[N];
    static simd_block_mxfp4 q[N / 32];
    double e2 = 0, s2 = 0;
    for (int i = 0; i < N; i++) {
        x[i] = gauss() * 0.02f;
        if (i % 509 == 7)
            x[i] *= 8;
    }
    tr->quant(x, q, N);
    tr->dequant(q, y, N);
    for (int i = 0; i < N / 32; i++)
        check_quant_block(x + 32 * i, &q[i], "gauss");
    for (int i = 0; i < N; i++) {
        e2 += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        s2 += (double)x[i] * x[i];
    }
    /* 4 bits with a power-of-two scale: a little worse than q4_0 (0.125
     * bound in test_kquants on this kind of data); measured 0.121 */
    double rel = sqrt(e2 / s2);
    printf("mxfp4 relative rms error on gaussian rows: %.4f\n", rel);
    CHECKF(rel < 0.14, "relative rms error %g", rel);

    /* blocks with a story each */
    float b[32];
    simd_block_mxfp4 out;
    /* zeros (both signs): e = 0, all codes 0 */
    for (int j = 0; j < 32; j++)
        b[j] = j & 1 ? -0.0f : 0.0f;
    tr->quant(b, &out, 32);
    CHECK(out.e == 0);
    for (int j = 0; j < 16; j++)
        CHECK(out.qs[j] == 0);
    /* the E2M1 levels times 2^-3 (amax 0.75: e = 124) round-trip exactly */
    static const float lv[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    for (int j = 0; j < 32; j++)
        b[j] = lv[j % 8] * (j & 8 ? -0.125f : 0.125f);
    tr->quant(b, &out, 32);
    tr->dequant(&out, y, 32);
    for (int j = 0; j < 32; j++)
        CHECKF(y[j] == b[j], "exact level %d: %g vs %g", j, (double)y[j], (double)b[j]);
    check_quant_block(b, &out, "levels");
    /* midpoints go to the even code: 0.25 between 0 and 0.5 -> 0, 0.75 ->
     * 1, 1.25 -> 1, 2.5 -> 2, 3.5 -> 4, 5 -> 4, -3.5 -> -4 */
    for (int j = 0; j < 32; j++)
        b[j] = 6.0f; /* most at the top: levels E2M1 * 1 (e = 127) */
    b[0] = 0.25f, b[1] = 0.75f, b[2] = 1.25f, b[3] = 2.5f, b[4] = 3.5f, b[5] = 5.0f, b[6] = -7.0f * 0.5f;
    tr->quant(b, &out, 32);
    tr->dequant(&out, y, 32);
    CHECK(out.e == 127); /* 12 * 2^(e-128) >= 6 first at e = 127 */
    check_quant_block(b, &out, "ties");
    static const float tie_want[7] = {0.0f, 1.0f, 1.0f, 2.0f, 4.0f, 4.0f, -4.0f};
    for (int j = 0; j < 7; j++)
        CHECKF(y[j] == tie_want[j], "tie %d: %g -> %g, want %g", j, (double)b[j], (double)y[j], (double)tie_want[j]);
    /* NaN, infinities, subnormals, huge values */
    for (int j = 0; j < 32; j++)
        b[j] = gauss();
    b[3] = NAN;
    tr->quant(b, &out, 32);
    check_quant_block(b, &out, "nan");
    b[9] = INFINITY, b[10] = -INFINITY;
    tr->quant(b, &out, 32);
    CHECK(out.e == 254);
    check_quant_block(b, &out, "inf");
    for (int j = 0; j < 32; j++)
        b[j] = gauss() * 1e-42f;
    tr->quant(b, &out, 32);
    CHECK(out.e == 0);
    check_quant_block(b, &out, "subnormal");
    for (int j = 0; j < 32; j++)
        b[j] = gauss() * 1e38f;
    tr->quant(b, &out, 32);
    check_quant_block(b, &out, "huge");
    b[0] = 3.4e38f;
    tr->quant(b, &out, 32);
    check_quant_block(b, &out, "flt_max");
    /* random magnitudes */
    for (int rep = 0; rep < 2000; rep++) {
        float mag = ldexpf(1, (int)rndn(200) - 100);
        for (int j = 0; j < 32; j++)
            b[j] = gauss() * mag * (rndn(8) ? 1.0f : 10.0f);
        tr->quant(b, &out, 32);
        check_quant_block(b, &out, "random");
        if (tu_failures)
            break;
    }
}

/* ---- dots ---- */

static size_t qbytes(size_t n) { return simd_row_bytes(SIMD_MXFP4, n); }
static size_t abytes(size_t n) { return simd_act_row_bytes(SIMD_ACT_Q8, n); }

/* A weight row: QUANT through the quantizer; RAW random bytes with
 * exponents mostly near 127, sometimes at the edges 0, 1, 254, 255. */
static void make_weights(unsigned char *w, size_t n, int raw, float *tmp)
{
    if (!raw) {
        float mag = ldexpf(1, (int)rndn(24) - 16);
        for (size_t i = 0; i < n; i++)
            tmp[i] = gauss() * mag;
        simd_quant_mxfp4(tmp, w, n);
        return;
    }
    for (size_t i = 0; i < qbytes(n); i++)
        w[i] = (unsigned char)rnd();
    static const uint8_t edges[] = {0, 1, 2, 254, 255};
    for (size_t b = 0; b < n / 32; b++)
        w[b * 17] = rndn(6) ? (uint8_t)(100 + rndn(50)) : edges[rndn(5)];
}

/* Activations through the scalar q8a quantizer, with blocks of zeros,
 * outliers and tiny values mixed in. */
static void make_act(unsigned char *a, size_t n, float *tmp)
{
    for (size_t i = 0; i < n; i++)
        tmp[i] = gauss();
    for (size_t b = 0; b < n / 32; b++) {
        float *v = tmp + 32 * b;
        switch (rndn(6)) {
        case 0: memset(v, 0, 32 * sizeof *v); break;
        case 1: v[rndn(32)] = 1000.0f; break;
        case 2: for (int j = 0; j < 32; j++) v[j] *= 1e-30f; break;
        default: break;
        }
    }
    simd_q8a_quant_ref(tmp, a, n);
}

static void check_reference(const simd_kernel_set *ref)
{
    enum { N = 4096 };
    static unsigned char w[N], a[N * 2];
    static float tmp[N], y[N];
    for (int rep = 0; rep < 20; rep++) {
        size_t n = 32 * (1 + rndn(N / 32));
        make_weights(w, n, 0, tmp);
        make_act(a, n, tmp);
        simd_deq_mxfp4(w, y, n);
        const simd_block_q8a *q = (const simd_block_q8a *)a;
        double exact = 0, mag = 0;
        for (size_t i = 0; i < n; i++) {
            double p = (double)y[i] * ((double)q[i / 32].d * q[i / 32].qs[i % 32]);
            exact += p, mag += fabs(p);
        }
        float got = ref->dot[SIMD_MXFP4](n, w, a);
        CHECKF(fabs(got - exact) <= 1e-5 * mag + 1e-30, "scalar n=%zu: %.9g vs %.9g", n, (double)got, exact);
    }
}

#define RMAXT 34
#define RMAXR 11

static int check_set(const char *name, const simd_kernel_set *ks, const simd_kernel_set *ref)
{
    static const size_t lens[] = {32, 64, 96, 128, 160, 224, 256, 288, 480, 512, 544, 576, 1056, 2048, 4864, 33024};
    static float tmp[33024], want[RMAXR * RMAXT], out[RMAXR * RMAXT * 3 + 8];
    static unsigned char abuf[33024 / 32 * 40];
    int fails = tu_failures;
    for (size_t li = 0; li < sizeof lens / sizeof lens[0] && tu_failures == fails; li++)
        for (int rep = 0; rep < 6 && tu_failures == fails; rep++) {
            size_t n = lens[li], rb = qbytes(n), ab = abytes(n);
            int raw = rep & 1;
            size_t nr = rep < 2 ? 1 : 1 + rndn(RMAXR);
            size_t nt = rep < 2 ? 1 + rndn(3) : 1 + rndn(n > 4096 ? 6 : RMAXT);
            size_t ws = rb + (rep == 3 ? 17 * rndn(3) : 0), as = ab + (rep >= 4 ? 40 : 0);
            /* exact-size allocations: a sanitizer build sees any read past
             * the last row or token */
            unsigned char *w = malloc(ws * (nr - 1) + rb), *a = malloc(as * (nt - 1) + ab);
            if (!w || !a) {
                free(w), free(a);
                CHECK(0);
                return 0;
            }
            for (size_t r = 0; r < nr; r++)
                make_weights(w + r * ws, n, raw, tmp);
            for (size_t t = 0; t < nt; t++)
                make_act(a + t * as, n, tmp);
            for (size_t r = 0; r < nr; r++)
                for (size_t t = 0; t < nt; t++) {
                    memcpy(abuf, a + t * as, ab);
                    want[r * nt + t] = ref->dot[SIMD_MXFP4](n, w + r * ws, abuf);
                    float got = ks->dot[SIMD_MXFP4](n, w + r * ws, a + t * as);
                    if (!same(got, want[r * nt + t])) {
                        CHECKF(0, "%s dot n=%zu raw=%d: %a vs scalar %a", name, n, raw, (double)got,
                               (double)want[r * nt + t]);
                        goto next;
                    }
                }
            /* dot_batch: row 0 against every token, ostride 3 */
            for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
                out[i] = -1234.5f;
            ks->dot_batch[SIMD_MXFP4](n, w, a, as, nt, out, 3);
            for (size_t i = 0; i < nt * 3; i++) {
                if (i % 3 == 0 && !same(out[i], want[i / 3])) {
                    CHECKF(0, "%s dot_batch n=%zu nt=%zu token %zu: %a vs %a", name, n, nt, i / 3, (double)out[i],
                           (double)want[i / 3]);
                    goto next;
                }
                if (i % 3 && out[i] != -1234.5f) {
                    CHECKF(0, "%s dot_batch wrote out[%zu]", name, i);
                    goto next;
                }
            }
            /* dot_rows: every row and token, ostride past nr */
            {
                size_t os = nr + rndn(3);
                for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
                    out[i] = -1234.5f;
                ks->dot_rows[SIMD_MXFP4](n, w, ws, nr, a, as, nt, out, os);
                for (size_t t = 0; t < nt; t++)
                    for (size_t r = 0; r < os; r++) {
                        float o = out[t * os + r];
                        if (r < nr ? !same(o, want[r * nt + t]) : o != -1234.5f) {
                            CHECKF(0, "%s dot_rows n=%zu nr=%zu nt=%zu r=%zu t=%zu: %a vs %a", name, n, nr, nt, r, t,
                                   (double)o, r < nr ? (double)want[r * nt + t] : -1234.5);
                            goto next;
                        }
                    }
                for (size_t i = nt * os; i < sizeof out / sizeof out[0]; i++)
                    if (out[i] != -1234.5f) {
                        CHECKF(0, "%s dot_rows wrote out[%zu]", name, i);
                        goto next;
                    }
            }
        next:
            free(w);
            free(a);
        }
    printf("%-24s mxfp4 %s\n", name, tu_failures == fails ? "bit-identical to scalar" : "DIFFERS");
    return 1;
}

int main(void)
{
    check_known_blocks();
    check_quant();

    simd_kernel_set ref;
    memset(&ref, 0, sizeof ref);
    simd_set_scalar(&ref);
    simd_set_mxfp4_scalar(&ref);
    check_reference(&ref);

    /* an edge block by hand: e = 255 with a nonzero sum is a huge finite
     * product or infinity, with a zero sum NaN (infinity * 0) */
    {
        simd_block_mxfp4 w = {255, {0}};
        simd_block_q8a a;
        float x[32] = {0};
        x[0] = 1.0f;
        simd_q8a_quant_ref(x, &a, 32);
        w.qs[0] = 1; /* 0.5 at x[0]: 2^127 * 1 * (1/127) * 127 */
        float r = ref.dot[SIMD_MXFP4](32, &w, &a);
        CHECKF(r == ldexpf(1, 127) * (1.0f / 127.0f) * 127.0f, "e=255: %a", (double)r);
        w.qs[0] = 7; /* 12 * 2^127 overflows */
        CHECK(isinf(ref.dot[SIMD_MXFP4](32, &w, &a)));
    }

    int tested = 0;
    for (int k = 0; k < SIMD_K_COUNT; k++) {
        const char *why = NULL;
        if (!simd_kernel_supported((enum simd_kernel)k, &why)) {
            printf("%-24s skipped: %s\n", simd_kernel_name((enum simd_kernel)k), why ? why : "?");
            continue;
        }
        CHECK(simd_kernel_select((enum simd_kernel)k) == 0);
        const simd_traits *tr = simd_type_traits(SIMD_MXFP4);
        CHECK(tr->dot && tr->dot_batch && tr->dot_rows);
        /* the x86 and Arm sets bring their own kernels, not the scalar ones */
        if (k != SIMD_K_SCALAR)
            CHECKF(tr->dot != ref.dot[SIMD_MXFP4], "%s has no mxfp4 kernel", simd_kernel_name((enum simd_kernel)k));
        simd_kernel_set copy = simd_installed_set();
        tested += check_set(simd_kernel_name((enum simd_kernel)k), &copy, &ref);
    }
#ifdef NIBBLE_TEST_VNNIINT8_EMUL
    if (simd_kernel_supported(SIMD_K_AVX2, NULL)) {
        simd_kernel_set e;
        memset(&e, 0, sizeof e);
        simd_set_mxfp4_avxvnniint8_emul(&e);
        CHECK(e.dot[SIMD_MXFP4] && e.dot_batch[SIMD_MXFP4] && e.dot_rows[SIMD_MXFP4]);
        check_set("avxvnniint8 (emulated)", &e, &ref);
    }
#endif
    CHECK(tested >= 1);
    return tu_result("test_mxfp4");
}
