/* Every kernel set this CPU runs gives the scalar set's results bit for bit
 * (dot, dot_batch, q8a_quant, dot_f32), on random rows of every type and
 * awkward lengths, with extreme scales and zeros; the scalar set itself is
 * checked against double precision; the f16/bf16 conversions against a
 * plain reference for all 65536 inputs.
 *
 * "Bit for bit" means memcmp-equal floats; the one allowance is NaN, where
 * both must be NaN but the payload may differ (which operand's NaN an x86
 * instruction passes on depends on operand order, which the compiler may
 * swap for a commutative operation). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "simd_internal.h"
#include "testutil.h"

#ifdef NIBBLE_TEST_VNNIINT8_EMUL
/* kernels_avxvnniint8.c built with vpdpbssd emulated by AVX2 */
void simd_set_avxvnniint8_emul(simd_kernel_set *s);
#endif

#define TR_SEED 0x6e6962626c65ULL
#include "testrand.h"

static int same(float a, float b) { return f32_bits(a) == f32_bits(b) || (isnan(a) && isnan(b)); }

static const int types[] = {SIMD_F32, SIMD_F16, SIMD_BF16, SIMD_Q8_0, SIMD_Q4_0, SIMD_Q4_1, SIMD_Q5_0, SIMD_Q5_1};
#define NTYPES (int)(sizeof types / sizeof types[0])

/* lengths: below, at and around the 8- and 16-block steps, and ones that
 * are not multiples of 256 */
static const size_t qlens[] = {32, 64, 224, 256, 288, 480, 512, 544, 736, 1024, 1056, 4096, 4128, 11008};
static const size_t flens[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 100, 256, 1000, 4096, 4101};
#define MAXN 33024

/* ---- inputs ---- */

enum { ACT_PLAIN, ACT_EXTREME, ACT_NONFINITE };

/* Activations. EXTREME gives each 32-block a class of its own: zeros, an
 * outlier, float subnormals, values near FLT_MAX, exact halves that make
 * x*(1/d) land on .5 (round half to even), or plain; NONFINITE adds NaN
 * and infinities (for q8a_quant only: dots of those are NaN anyway). */
static void make_act(float *x, size_t n, int mode)
{
    for (size_t i = 0; i < n; i++)
        x[i] = gauss();
    if (mode == ACT_PLAIN)
        return;
    for (size_t b = 0; b * 32 < n; b++) {
        float *v = x + b * 32;
        size_t m = n - b * 32 < 32 ? n - b * 32 : 32;
        switch (rndn(mode == ACT_NONFINITE ? 9 : 7)) {
        case 0: for (size_t j = 0; j < m; j++) v[j] = 0.0f * (j & 1 ? -1.0f : 1.0f); break;
        case 1: v[rndn((unsigned)m)] = 1000.0f * gauss(); break;
        case 2: for (size_t j = 0; j < m; j++) v[j] *= 1e-39f; break;
        case 3: for (size_t j = 0; j < m; j++) v[j] *= 1e37f; break;
        case 4: /* amax 127 -> d = 1: the values are their own x*(1/d) */
            for (size_t j = 0; j < m; j++) v[j] = (float)((int)rndn(254) - 127) + 0.5f;
            v[0] = 127.0f;
            break;
        case 5: for (size_t j = 0; j < m; j++) v[j] *= 1e-44f; break; /* d rounds to 0 */
        case 6: break;
        case 7: v[rndn((unsigned)m)] = NAN; break;
        default: v[rndn((unsigned)m)] = rndn(2) ? INFINITY : -INFINITY; break;
        }
    }
}

enum { W_QUANT, W_RAW };

/* A random f16 scale: mostly normal numbers, sometimes zero, subnormal,
 * the largest finite or negative ones. */
static simd_f16 rand_scale(void)
{
    switch (rndn(8)) {
    case 0: return 0;
    case 1: return (simd_f16)(1 + rndn(0x3ff));          /* subnormal */
    case 2: return 0x7bff;                                /* 65504 */
    case 3: return (simd_f16)(0x8000 | (1 + rndn(0x7bff))); /* negative */
    default: return (simd_f16)((1 + rndn(30)) << 10 | rndn(0x400));
    }
}

/* Weight row of n values into buf. QUANT: random floats of a random
 * magnitude through the type's reference quantizer (the usual case).
 * RAW: every code any file could hold, with scales from rand_scale (f16 and
 * bf16 rows get any bit pattern at all, NaN and infinity included). */
static void make_weights(int type, size_t n, int mode, void *buf, float *tmp)
{
    const simd_traits *tr = simd_type_traits(type);
    size_t bytes = simd_row_bytes(type, n);
    if (mode == W_QUANT) {
        static const float mags[] = {1.0f, 1e-3f, 1e3f, 0.02f};
        float mag = mags[rndn(4)];
        for (size_t i = 0; i < n; i++)
            tmp[i] = gauss() * mag;
        tr->quant(tmp, buf, n);
        return;
    }
    unsigned char *p = buf;
    for (size_t i = 0; i < bytes; i++)
        p[i] = (unsigned char)rnd();
    if (type == SIMD_F32) { /* finite, of any exponent */
        float *f = buf;
        for (size_t i = 0; i < n; i++)
            f[i] = ldexpf(unif(), (int)rndn(200) - 100);
        return;
    }
    if (tr->block == 1)
        return;
    for (size_t b = 0; b < n / tr->block; b++) {
        simd_f16 d = rand_scale(), m = rand_scale();
        memcpy(p + b * tr->bytes, &d, 2);
        if (type == SIMD_Q4_1 || type == SIMD_Q5_1)
            memcpy(p + b * tr->bytes + 2, &m, 2);
    }
}

/* ---- the conversions, against plain references ---- */

/* f16 -> f32 by arithmetic on the fields */
static float ref_f16(uint16_t h)
{
    int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    float v;
    if (e == 31) {
        if (m == 0)
            v = INFINITY;
        else /* quiet NaN carrying the payload */
            return bits_f32((uint32_t)sign << 31 | 0x7fc00000u | (uint32_t)m << 13);
    } else if (e == 0)
        v = ldexpf((float)m, -24);
    else
        v = ldexpf((float)(1024 + m), e - 25);
    return sign ? -v : v;
}

/* f32 -> f16 by search: the nearest finite half, ties to the even code;
 * past the largest half (beyond its halfway point to 2^16) infinity. */
static uint16_t ref_to_f16(float f)
{
    if (isnan(f))
        return 0x7e00;
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double a = fabs((double)f);
    if (a >= 65520.0)
        return sign | 0x7c00;
    unsigned lo = 0, hi = 0x7bff; /* largest code with value <= a */
    while (lo < hi) {
        unsigned mid = (lo + hi + 1) / 2;
        if ((double)ref_f16((uint16_t)mid) <= a) lo = mid; else hi = mid - 1;
    }
    double vlo = ref_f16((uint16_t)lo), vhi = lo < 0x7bff ? ref_f16((uint16_t)(lo + 1)) : 65536.0;
    unsigned r = lo;
    if (a - vlo > vhi - a || (a - vlo == vhi - a && (lo & 1)))
        r = lo + 1;
    return (uint16_t)(sign | r);
}

static uint16_t ref_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if (isnan(f))
        return (uint16_t)((u >> 16) | 0x40);
    if (isinf(f))
        return (uint16_t)(u >> 16);
    uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
    double dl = fabs((double)f - (double)bits_f32(lo));
    /* the next bf16 up in magnitude may be infinity: measure to 2^128 */
    double vh = (hi & 0x7fffffffu) == 0x7f800000u ? ldexp(signbit(f) ? -1.0 : 1.0, 128) : (double)bits_f32(hi);
    double dh = fabs(vh - (double)f);
    if (dl < dh || (dl == dh && !((lo >> 16) & 1)))
        return (uint16_t)(lo >> 16);
    return (uint16_t)(hi >> 16);
}

/* Half h's value and, below the largest finite half, the midpoint to the
 * next one (a tie) and a float either side of it, into p: how many. */
static int half_probes(uint32_t h, float *p)
{
    int np = 0;
    float v = simd_f16_to_f32((simd_f16)h);
    p[np++] = v;
    if ((h & 0x7fff) < 0x7bff) {
        float mid = (float)(((double)v + (double)simd_f16_to_f32((simd_f16)(h + 1))) / 2);
        p[np++] = mid;
        p[np++] = nextafterf(mid, 0);
        p[np++] = nextafterf(mid, INFINITY * (h & 0x8000 ? -1 : 1));
    }
    return np;
}

static void check_conversions(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float a = simd_f16_to_f32((simd_f16)h), r = ref_f16((uint16_t)h);
        if (f32_bits(a) != f32_bits(r) && bad++ < 5)
            CHECKF(0, "f16_to_f32(%04x) = %08x, want %08x", h, f32_bits(a), f32_bits(r));
        float b = simd_bf16_to_f32((simd_bf16)h);
        if (f32_bits(b) != h << 16 && bad++ < 5)
            CHECKF(0, "bf16_to_f32(%04x) = %08x", h, f32_bits(b));
    }
    /* f32 -> f16/bf16: every half and bf16 value, the midpoints between
     * neighbours (ties), a float either side of each midpoint, and random
     * floats of every exponent */
    for (uint32_t h = 0; h < 65536; h++) {
        float probes[4];
        int np = half_probes(h, probes);
        for (int i = 0; i < np; i++) {
            uint16_t got = simd_f32_to_f16(probes[i]), want = ref_to_f16(probes[i]);
            if (!isnan(probes[i]) && got != want && bad++ < 5)
                CHECKF(0, "f32_to_f16(%a) = %04x, want %04x", (double)probes[i], got, want);
        }
        uint32_t bits = h << 16;
        float bv = bits_f32(bits), bm = bits_f32(bits | 0x8000), bn = bits_f32(bits | 0x8001);
        float bp[3] = {bv, bm, bn};
        for (int i = 0; i < 3; i++) {
            uint16_t got = simd_f32_to_bf16(bp[i]), want = ref_to_bf16(bp[i]);
            if (got != want && bad++ < 5)
                CHECKF(0, "f32_to_bf16(%08x) = %04x, want %04x", f32_bits(bp[i]), got, want);
        }
    }
    for (int i = 0; i < 200000; i++) {
        float f = bits_f32((uint32_t)rnd());
        if (isnan(f))
            continue;
        uint16_t got = simd_f32_to_f16(f), want = ref_to_f16(f);
        if (got != want && bad++ < 5)
            CHECKF(0, "f32_to_f16(%a) = %04x, want %04x", (double)f, got, want);
        got = simd_f32_to_bf16(f), want = ref_to_bf16(f);
        if (got != want && bad++ < 5)
            CHECKF(0, "f32_to_bf16(%a) = %04x, want %04x", (double)f, got, want);
    }
    /* NaN stays NaN both ways */
    CHECK((simd_f32_to_f16(NAN) & 0x7c00) == 0x7c00 && (simd_f32_to_f16(NAN) & 0x3ff));
    CHECK(isnan(simd_bf16_to_f32(simd_f32_to_bf16(NAN))));
    CHECK(bad == 0);
}

/* The installed set's row conversion (simd_f32_to_f16_row) against
 * simd_f32_to_f16 value by value, bit for bit (NaNs included): every
 * half, the midpoints between neighbours and a float either side, random
 * floats, NaNs with payloads, in rows whose lengths leave every tail. */
static void check_f16_row(const char *set)
{
    static float src[65536 * 4 + 64];
    static simd_f16 got[sizeof src / sizeof src[0]];
    size_t n = 0;
    for (uint32_t h = 0; h < 65536; h++)
        n += (size_t)half_probes(h, src + n);
    for (int i = 0; i < 40; i++)
        src[n++] = bits_f32(i % 2 ? 0x7f800001u + (uint32_t)i * 12345u : 0xffc00000u | (uint32_t)i << 9);
    size_t bad = 0;
    for (size_t len = 1; len <= 17; len++) /* whole vectors and every tail */
        for (size_t i0 = 0; i0 + len <= n; i0 += len * 97 + 1) {
            simd_f32_to_f16_row(src + i0, got, len);
            for (size_t i = 0; i < len; i++)
                if (got[i] != simd_f32_to_f16(src[i0 + i]) && bad++ < 5)
                    CHECKF(0, "%s: f32_to_f16_row(%a) = %04x, want %04x", set, (double)src[i0 + i], got[i],
                           simd_f32_to_f16(src[i0 + i]));
        }
    simd_f32_to_f16_row(src, got, n);
    for (size_t i = 0; i < n; i++)
        if (got[i] != simd_f32_to_f16(src[i]) && bad++ < 5)
            CHECKF(0, "%s: f32_to_f16_row(%a) = %04x, want %04x", set, (double)src[i], got[i],
                   simd_f32_to_f16(src[i]));
    for (int i = 0; i < 100000; i++) {
        src[0] = bits_f32((uint32_t)rnd());
        simd_f32_to_f16_row(src, got, 1);
        if (got[0] != simd_f32_to_f16(src[0]) && bad++ < 5)
            CHECKF(0, "%s: f32_to_f16_row(%a) = %04x, want %04x", set, (double)src[0], got[0],
                   simd_f32_to_f16(src[0]));
    }
    CHECK(bad == 0);
}

/* The installed set's simd_deq_f16_row against the plain-C one, bit for
 * bit, on q8_0 and q4_0 blocks with every code and scales from
 * subnormal to overflowing products, infinite and NaN. */
static void check_deq_f16_row(const char *set)
{
    enum { NB = 64 };
    static simd_block_q8_0 q8[NB];
    static simd_block_q4_0 q4[NB];
    simd_f16 got[NB * SIMD_QK], want[NB * SIMD_QK];
    const simd_f16 scales[] = {0x0001, 0x03ff, 0x0400, 0x1400, 0x3c00, 0xbc01, 0x7bff, 0xfbff, 0x7c00, 0x7e00, 0x0000};
    size_t bad = 0;
    for (int round = 0; round < 200; round++) {
        for (int b = 0; b < NB; b++) {
            simd_f16 d = round % 2 ? scales[(size_t)(round + b) % (sizeof scales / sizeof scales[0])]
                                   : (simd_f16)(rnd() & 0xffff);
            q8[b].d = q4[b].d = d;
            for (int j = 0; j < SIMD_QK; j++)
                q8[b].qs[j] = (int8_t)(rnd() & 0xff);
            for (int j = 0; j < SIMD_QK / 2; j++)
                q4[b].qs[j] = (uint8_t)(rnd() & 0xff);
        }
        for (int t = 0; t < 2; t++) {
            const void *blk = t ? (const void *)q4 : (const void *)q8;
            int type = t ? SIMD_Q4_0 : SIMD_Q8_0;
            size_t n = (size_t)(1 + round % NB) * SIMD_QK;
            simd_deq_f16_row(type, blk, n, got);
            simd_deq_f16_row_ref(type, blk, n, want);
            for (size_t i = 0; i < n; i++)
                if (got[i] != want[i] && bad++ < 5)
                    CHECKF(0, "%s: deq_f16_row(%s) value %zu = %04x, want %04x", set, t ? "q4_0" : "q8_0", i,
                           got[i], want[i]);
        }
    }
    CHECK(bad == 0);
}

/* ---- buffers ---- */

static float xs[MAXN], ys[MAXN], tmp[MAXN];
static unsigned char wbuf[MAXN * 4 + 64];
#define MAXT 9
#define APAD 40 /* activation rows further apart than their size */
static unsigned char acts[MAXT][MAXN * 4 + APAD];
static unsigned char abuf2[MAXN * 4 + 64];

static size_t act_bytes(int type, size_t n) { return simd_act_row_bytes(simd_type_traits(type)->act, n); }

/* ---- the scalar set against double precision ---- */

static void check_reference(const simd_kernel_set *ref)
{
    /* q8a: |q| <= 127, sum right, |d*q - x| <= d/2 (plus rounding of the
     * scale) for finite inputs */
    for (int mode = ACT_PLAIN; mode <= ACT_NONFINITE; mode++) {
        size_t n = 4096;
        make_act(xs, n, mode);
        ref->q8a_quant(xs, wbuf, n);
        const simd_block_q8a *b = (const simd_block_q8a *)wbuf;
        for (size_t i = 0; i < n / 32; i++) {
            int32_t s = 0;
            for (int j = 0; j < 32; j++) {
                s += b[i].qs[j];
                CHECK(b[i].qs[j] >= -127 && b[i].qs[j] <= 127);
                float x = xs[i * 32 + j];
                if (isfinite(x) && isfinite(b[i].d) && b[i].d >= 1e-37f) {
                    double err = fabs((double)b[i].d * b[i].qs[j] - (double)x);
                    if (err > 0.5001 * b[i].d)
                        CHECKF(0, "q8a block %zu: x=%g q=%d d=%g", i, (double)x, b[i].qs[j], (double)b[i].d);
                }
            }
            CHECK(s == b[i].sum);
        }
    }
    /* dots: the scalar result is the exact dot of what the blocks mean, up
     * to float rounding: within 1e-5 of the sum of |products| */
    for (int ti = 0; ti < NTYPES; ti++) {
        int type = types[ti];
        const simd_traits *tr = simd_type_traits(type);
        for (int rep = 0; rep < 4; rep++) {
            size_t n = tr->block == 1 ? flens[rndn(sizeof flens / sizeof flens[0])] : qlens[rndn(14)];
            make_weights(type, n, W_QUANT, wbuf, tmp);
            make_act(xs, n, ACT_PLAIN);
            tr->dequant(wbuf, ys, n);
            double exact = 0, mag = 0;
            if (tr->act == SIMD_ACT_Q8) {
                ref->q8a_quant(xs, acts[0], n);
                const simd_block_q8a *a = (const simd_block_q8a *)acts[0];
                for (size_t i = 0; i < n; i++) {
                    double p = (double)ys[i] * ((double)a[i / 32].d * a[i / 32].qs[i % 32]);
                    exact += p, mag += fabs(p);
                }
            } else {
                memcpy(acts[0], xs, n * 4);
                for (size_t i = 0; i < n; i++) {
                    double p = (double)ys[i] * xs[i];
                    exact += p, mag += fabs(p);
                }
            }
            float got = ref->dot[type](n, wbuf, acts[0]);
            CHECKF(fabs(got - exact) <= 1e-5 * mag + 1e-30, "scalar %s n=%zu: %.9g vs exact %.9g (mag %.3g)",
                   tr->name, n, (double)got, exact, mag);
        }
    }
    /* f32 dot likewise */
    for (int rep = 0; rep < 5; rep++) {
        size_t n = flens[rndn(sizeof flens / sizeof flens[0])];
        make_act(xs, n, ACT_PLAIN);
        make_act(ys, n, ACT_PLAIN);
        double exact = 0, mag = 0;
        for (size_t i = 0; i < n; i++)
            exact += (double)xs[i] * ys[i], mag += fabs((double)xs[i] * ys[i]);
        float got = ref->dot_f32(n, xs, ys);
        CHECKF(fabs(got - exact) <= 1e-5 * mag + 1e-30, "scalar dot_f32 n=%zu", n);
    }
}

/* dot_rows: nr rows (wstride bytes apart, past their size) against nt
 * tokens, up to a prefill batch and past it, at the model row lengths the
 * forward pass uses; every output the scalar dot's, nothing else written.
 * Rows and activations sit in exact-size allocations, so a sanitizer
 * build catches a read past either end. */
#define RMAXT 34
#define RMAXR 37
static void check_rows(const char *name, const simd_kernel_set *ks, const simd_kernel_set *ref)
{
    /* 33024: past the 1024 blocks an x86 set caches scales for at once */
    static const size_t rlens[] = {32, 64, 96, 160, 256, 288, 512, 544, 576, 864, 896, 1536, 2048, 4864, 33024};
    static float want[RMAXR * RMAXT], out[RMAXR * RMAXT * 2 + 8];
    static const size_t frlens[] = {1, 7, 12, 63, 100, 172};
    for (int ti = 0; ti < NTYPES; ti++) {
        int type = types[ti];
        const simd_traits *tr = simd_type_traits(type);
        if (!ks->dot_rows[type])
            continue;
        /* float rows also at lengths that are no multiple of 8 (a tiny
         * model's 172-wide FFN; the x86 tiles pad the last columns) */
        size_t nl = sizeof rlens / sizeof rlens[0], nf = tr->block == 1 ? sizeof frlens / sizeof frlens[0] : 0;
        for (size_t li = 0; li < nl + nf; li++)
            for (int rep = 0; rep < 4; rep++) {
                /* rep 3: many rows and tokens at once (x86 sets put 16
                 * rows in the lanes from 4 tokens up: full and part tiles;
                 * float rows 2 by 8, 2 by 4 or 4 by 2 at once) */
                size_t n = li < nl ? rlens[li] : frlens[li - nl], rb = simd_row_bytes(type, n), ab = act_bytes(type, n);
                size_t nr = rep == 0 || rep == 3 ? 1 + rndn(RMAXR) : 1 + rndn(5);
                size_t nt = rep == 0 ? 1 : rep == 1 ? 1 + rndn(RMAXT) : rep == 2 ? 1 + rndn(8) : 4 + rndn(RMAXT - 3);
                int wmode = rep == 2 ? W_RAW : W_QUANT;
                size_t ws = rb + (rep == 1 ? tr->bytes : 0), as = ab + (rep == 2 ? 0 : APAD);
                unsigned char *w = malloc(ws * (nr - 1) + rb), *a = malloc(as * (nt - 1) + ab);
                if (!w || !a) {
                    CHECK(0);
                    return;
                }
                for (size_t r = 0; r < nr; r++) {
                    make_weights(type, n, wmode, wbuf, tmp);
                    memcpy(w + r * ws, wbuf, rb);
                }
                for (size_t t = 0; t < nt; t++) {
                    make_act(xs, n, wmode == W_QUANT ? ACT_PLAIN : ACT_EXTREME);
                    if (tr->act == SIMD_ACT_Q8)
                        ref->q8a_quant(xs, abuf2, n);
                    else
                        memcpy(abuf2, xs, n * 4);
                    memcpy(a + t * as, abuf2, ab);
                }
                for (size_t r = 0; r < nr; r++)
                    for (size_t t = 0; t < nt; t++) {
                        memcpy(abuf2, a + t * as, ab);
                        want[r * nt + t] = ref->dot[type](n, w + r * ws, abuf2);
                    }
                size_t os = nr + 1 + rndn(3);
                for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
                    out[i] = -1234.5f;
                ks->dot_rows[type](n, w, ws, nr, a, as, nt, out, os);
                int bad = 0;
                for (size_t t = 0; t < nt && !bad; t++)
                    for (size_t r = 0; r < nr && !bad; r++)
                        if (!same(want[r * nt + t], out[t * os + r])) {
                            CHECKF(0, "%s dot_rows %s n=%zu nr=%zu nt=%zu row %zu token %zu: %a vs %a", name,
                                   tr->name, n, nr, nt, r, t, (double)out[t * os + r], (double)want[r * nt + t]);
                            bad = 1;
                        }
                for (size_t i = 0; i < sizeof out / sizeof out[0] && !bad; i++)
                    if (i % os >= nr || i / os >= nt)
                        if (out[i] != -1234.5f) {
                            CHECKF(0, "%s dot_rows %s n=%zu wrote out[%zu]", name, tr->name, n, i);
                            bad = 1;
                        }
                free(w);
                free(a);
            }
    }
}

/* ---- one set against the scalar one ---- */

/* An activation quantizer of the set against the reference on xs[0..n):
 * the same bytes (both outputs start from different fill patterns). */
static void same_quant(const char *set, const char *what, enum simd_act act,
                       void (*ref)(const float *, void *, size_t), void (*got)(const float *, void *, size_t),
                       size_t n, int mode)
{
    size_t bytes = simd_act_row_bytes(act, n);
    memset(wbuf, 0xa5, bytes);
    memset(abuf2, 0x5a, bytes);
    ref(xs, wbuf, n);
    got(xs, abuf2, n);
    CHECKF(memcmp(wbuf, abuf2, bytes) == 0, "%s %s n=%zu mode %d differs", set, what, n, mode);
}

static void check_set(const char *name, const simd_kernel_set *ks, const simd_kernel_set *ref)
{
    int fails_before = tu_failures;
    /* q8a_quant: same bytes */
    for (int mode = ACT_PLAIN; mode <= ACT_NONFINITE; mode++)
        for (size_t li = 0; li < sizeof qlens / sizeof qlens[0]; li++) {
            make_act(xs, qlens[li], mode);
            same_quant(name, "q8a_quant", SIMD_ACT_Q8, ref->q8a_quant, ks->q8a_quant, qlens[li], mode);
        }
    /* q8k_quant: same bytes, also with whole 256-blocks scaled into the
     * extreme ranges (its scale is per 256 values, not per 32) */
    CHECKF(ks->q8k_quant != NULL, "%s has no q8k_quant", name);
    for (int mode = ACT_PLAIN; ks->q8k_quant && mode <= ACT_NONFINITE + 1; mode++)
        for (size_t li = 0; li < sizeof qlens / sizeof qlens[0]; li++) {
            size_t n = qlens[li] / 256 * 256;
            if (!n)
                continue;
            make_act(xs, n, mode > ACT_NONFINITE ? ACT_PLAIN : mode);
            if (mode > ACT_NONFINITE) {
                static const float scale[] = {1.0f, 0.0f, 1e-39f, 1e-44f, 1e37f, 3e38f};
                for (size_t b = 0; b < n / 256; b++) {
                    float f = scale[rndn(sizeof scale / sizeof scale[0])];
                    for (size_t j = 0; j < 256; j++)
                        xs[256 * b + j] *= f;
                }
            }
            same_quant(name, "q8k_quant", SIMD_ACT_Q8K, ref->q8k_quant, ks->q8k_quant, n, mode);
        }
    /* dot_f32 */
    for (size_t li = 0; li < sizeof flens / sizeof flens[0]; li++)
        for (int mode = ACT_PLAIN; mode <= ACT_EXTREME; mode++) {
            size_t n = flens[li];
            make_act(xs, n, mode);
            make_act(ys, n, ACT_PLAIN);
            float r = ref->dot_f32(n, xs, ys), s = ks->dot_f32(n, xs, ys);
            CHECKF(same(r, s), "%s dot_f32 n=%zu: %a vs scalar %a", name, n, (double)s, (double)r);
        }
    /* dot and dot_batch, every type */
    for (int ti = 0; ti < NTYPES; ti++) {
        int type = types[ti];
        const simd_traits *tr = simd_type_traits(type);
        const size_t *lens = tr->block == 1 ? flens : qlens;
        size_t nlens = tr->block == 1 ? sizeof flens / sizeof flens[0] : sizeof qlens / sizeof qlens[0];
        for (size_t li = 0; li < nlens; li++)
            for (int wmode = W_QUANT; wmode <= W_RAW; wmode++) {
                size_t n = lens[li];
                make_weights(type, n, wmode, wbuf, tmp);
                size_t ab = act_bytes(type, n), astride = ab + APAD;
                int nt = 1 + (int)rndn(MAXT);
                for (int t = 0; t < nt; t++) {
                    make_act(xs, n, wmode == W_QUANT ? ACT_PLAIN : ACT_EXTREME);
                    if (tr->act == SIMD_ACT_Q8)
                        ref->q8a_quant(xs, acts[t], n);
                    else
                        memcpy(acts[t], xs, n * 4);
                }
                float want[MAXT];
                for (int t = 0; t < nt; t++) {
                    want[t] = ref->dot[type](n, wbuf, acts[t]);
                    float got = ks->dot[type](n, wbuf, acts[t]);
                    CHECKF(same(want[t], got), "%s dot %s n=%zu mode %d: %a vs scalar %a", name, tr->name, n,
                           wmode, (double)got, (double)want[t]);
                }
                /* the batch reads rows astride bytes apart; copy them so */
                static unsigned char packed[MAXT * (MAXN * 4 + APAD)];
                for (int t = 0; t < nt; t++)
                    memcpy(packed + (size_t)t * astride, acts[t], ab);
                const size_t ostride = 3;
                float out[MAXT * 3];
                for (int i = 0; i < MAXT * 3; i++)
                    out[i] = -1234.5f;
                ks->dot_batch[type](n, wbuf, packed, astride, (size_t)nt, out, ostride);
                for (int t = 0; t < nt; t++)
                    CHECKF(same(want[t], out[t * ostride]), "%s dot_batch %s n=%zu nt=%d token %d: %a vs %a", name,
                           tr->name, n, nt, t, (double)out[t * ostride], (double)want[t]);
                for (int i = 0; i < MAXT * 3; i++)
                    if (i % 3 || i / 3 >= nt)
                        CHECKF(out[i] == -1234.5f, "%s dot_batch %s wrote out[%d]", name, tr->name, i);
            }
    }
    check_rows(name, ks, ref);
    /* the f16 and bf16 conversions inside the dots, for every input: the
     * value times 1 alone in a row, in the vector body (n=8) and the tail
     * (n=1) */
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t w[8] = {(uint16_t)h, 0, 0, 0, 0, 0, 0, 0};
        float one[8] = {1, 0, 0, 0, 0, 0, 0, 0};
        for (int n = 1; n <= 8; n += 7) {
            float r = ref->dot[SIMD_F16](n, w, one), s = ks->dot[SIMD_F16](n, w, one);
            if (!same(r, s)) {
                CHECKF(0, "%s f16 %04x n=%d: %a vs %a", name, h, n, (double)s, (double)r);
                break;
            }
            r = ref->dot[SIMD_BF16](n, w, one), s = ks->dot[SIMD_BF16](n, w, one);
            if (!same(r, s)) {
                CHECKF(0, "%s bf16 %04x n=%d: %a vs %a", name, h, n, (double)s, (double)r);
                break;
            }
        }
    }
    printf("%-22s %s\n", name, tu_failures == fails_before ? "bit-identical to scalar" : "DIFFERS");
}

int main(void)
{
    simd_kernel_set ref;
    memset(&ref, 0, sizeof ref);
    simd_set_scalar(&ref);

    check_conversions();
    check_reference(&ref);

    int tested = 0;
    for (int k = 0; k < SIMD_K_COUNT; k++) {
        const char *why = NULL;
        if (!simd_kernel_supported((enum simd_kernel)k, &why)) {
            printf("%-22s skipped: %s\n", simd_kernel_name((enum simd_kernel)k), why ? why : "?");
            continue;
        }
        CHECK(simd_kernel_select((enum simd_kernel)k) == 0);
        CHECK(simd_kernel_current() == (enum simd_kernel)k);
        /* every type with kernels has each form of them */
        for (int ti = 0; ti < NTYPES; ti++) {
            const simd_traits *tr = simd_type_traits(types[ti]);
            CHECK(tr->dot && tr->dot_batch && tr->dot_rows);
        }
        simd_kernel_set copy = simd_installed_set();
        check_set(simd_kernel_name((enum simd_kernel)k), &copy, &ref);
        check_f16_row(simd_kernel_name((enum simd_kernel)k));
        check_deq_f16_row(simd_kernel_name((enum simd_kernel)k));
        tested++;
    }
#ifdef NIBBLE_TEST_VNNIINT8_EMUL
    if (simd_kernel_supported(SIMD_K_AVX2, NULL)) {
        simd_kernel_set e;
        memset(&e, 0, sizeof e);
        simd_set_avxvnniint8_emul(&e);
        CHECK(e.q8a_quant && e.q8k_quant && e.dot_f32);
        for (int ti = 0; ti < NTYPES; ti++)
            CHECK(e.dot[types[ti]] && e.dot_batch[types[ti]]);
        if (!tu_failures)
            check_set("avxvnniint8 (emulated)", &e, &ref);
    }
#endif
    CHECK(tested >= 1);
    simd_init();
    return tu_result("test_kernels");
}
