/* Attention (simd_attn_chunk + simd_attn_merge, and simd_attn_tile): the reference against a
 * double-precision softmax, its exp against libm, and every kernel set
 * this CPU runs against the reference, bit for bit (chunk rows and merged
 * output), over head sizes, group sizes, context lengths (one chunk and
 * several, tails of every length) and strided caches. Also the gated
 * FFN's simd_silu_mul and GPT-2's simd_gelu, which share the exp. */
#include <math.h>
#include <stdint.h>

#include "act.h"
#include "attn.h"
#include "testutil.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

/* the generator's next state (a 64-bit LCG) */
static uint64_t next_rng(void) { return rng = rng * 6364136223846793005ull + 1442695040888963407ull; }

static float frand(void) /* uniform in [-1, 1) */
{
    return (float)((double)(next_rng() >> 40) / (double)(1ull << 23) - 1.0);
}

static uint32_t next_u32(void) { return (uint32_t)(next_rng() >> 16); }

static int same(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

static void check_exp(void)
{
    CHECK(same(simd_attn_exp(0.0f), 1.0f));
    CHECK(same(simd_attn_exp(-0.0f), 1.0f));
    CHECK(same(simd_attn_exp(-88.0f), 0.0f));
    CHECK(same(simd_attn_exp(-INFINITY), 0.0f));
    CHECK(same(simd_attn_exp(NAN), 0.0f));
    CHECK(same(simd_attn_exp(5.0f), 1.0f)); /* x > 0 is taken as 0 */
    double worst = 0;
    for (int i = 0; i <= 870000; i++) {
        float x = -87.0f * (float)i / 870000.0f;
        double want = exp((double)x), got = simd_attn_exp(x);
        double rel = fabs(got - want) / want;
        if (rel > worst)
            worst = rel;
    }
    CHECKF(worst < 4e-7, "exp relative error %g", worst);
    printf("exp: worst relative error %.2g over [-87, 0]\n", worst);
}

/* The hardware's fused multiply-add, to check attn_fma's plain-C form
 * against: the x86 instruction where the CPU has it (this file is built
 * without -mfma, so attn_fma here is the plain-C form), else libm's fmaf
 * (where the build has a hardware FMA, attn_fma is that instruction). */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
__attribute__((target("fma"))) static float hw_fma(float x, float y, float z)
{
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(x), _mm_set_ss(y), _mm_set_ss(z)));
}
static int have_hw_fma(void) { return __builtin_cpu_supports("fma"); }
#else
static float hw_fma(float x, float y, float z) { return fmaf(x, y, z); }
static int have_hw_fma(void) { return 1; }
#endif

static float bits_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* attn_fma (the references' multiply-add) is x*y + z rounded once: the
 * cases where rounding twice differs (a product on a float midpoint, a
 * z far below it on either side), exact cancellation, subnormal and
 * overflowing results, infinities, and random floats of every exponent. */
static void check_fma(void)
{
    if (!have_hw_fma()) {
        printf("fma: skipped (no hardware FMA to compare with)\n");
        return;
    }
    long cases = 0, bad = 0;
#define FMA_CASE(x, y, z)                                                                                       \
    do {                                                                                                         \
        float want_ = hw_fma((x), (y), (z)), got_ = attn_fma((x), (y), (z));                                     \
        cases++;                                                                                                 \
        if (!(same(want_, got_) || (want_ != want_ && got_ != got_)) && bad++ < 5)                               \
            CHECKF(0, "attn_fma(%a, %a, %a) = %a, want %a", (double)(x), (double)(y), (double)(z), (double)got_, \
                   (double)want_);                                                                               \
    } while (0)
    /* (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24: half an ulp above a float */
    const float a = 1.0f + 0x1p-12f;
    const float zs[] = {0.0f, 0x1p-60f, -0x1p-60f, 0x1p-30f, -0x1p-30f, 0x1p-149f, -0x1p-149f, -1.0f, 1.0f};
    for (size_t i = 0; i < sizeof zs / sizeof *zs; i++) {
        FMA_CASE(a, a, zs[i]);
        FMA_CASE(-a, a, zs[i]);
        FMA_CASE(a, a + 0x1p-23f, zs[i]);
    }
    FMA_CASE(a, a, -(a * a)); /* the product's rounding error, exactly */
    FMA_CASE(0x1p-75f, 0x1p-75f, 0.0f);            /* subnormal result */
    FMA_CASE(0x1.8p-75f, 0x1.8p-75f, -0x1p-149f);  /* near the smallest */
    FMA_CASE(0x1p100f, 0x1p100f, -1.0f);           /* overflows */
    FMA_CASE(0x1.fffffep127f, 1.0f, 0x1p104f);     /* rounds up to inf */
    FMA_CASE(INFINITY, 1.0f, -INFINITY);
    FMA_CASE(INFINITY, 0.0f, 1.0f);
    FMA_CASE(-0.0f, 1.0f, 0.0f);
    FMA_CASE(0.0f, -1.0f, -0.0f);
    for (int i = 0; i < 2000000; i++) {
        uint32_t r = next_u32(), r2 = next_u32(), r3 = next_u32();
        float x = bits_f(r), y = bits_f(r2), z = bits_f(r3);
        if (i & 1) { /* exponents near each other, so products and z overlap and cancel */
            x = bits_f((r & 0x807fffffu) | (uint32_t)(100 + (r >> 27)) << 23);
            y = bits_f((r2 & 0x807fffffu) | (uint32_t)(100 + (r2 >> 27)) << 23);
            z = bits_f((r3 & 0x807fffffu) | (uint32_t)(70 + (r3 >> 26)) << 23);
        }
        FMA_CASE(x, y, z);
    }
#undef FMA_CASE
    printf("fma: %ld cases, %ld differ from the hardware's\n", cases, bad);
}

typedef struct shape {
    size_t hd, nq, n, kvstride;
    float spread; /* score magnitude: large ones make exp underflow */
} shape;

static void fill(float *x, size_t n, float mul)
{
    for (size_t i = 0; i < n; i++)
        x[i] = frand() * mul;
}

/* The cache's halves: random in (-mul, mul), and with sub (variant 1)
 * every 37th a subnormal half, which every set must convert exactly. */
static void fillh(simd_f16 *x, size_t n, float mul, int sub)
{
    for (size_t i = 0; i < n; i++)
        x[i] = sub && i % 37 == 5 ? (simd_f16)((i & 0x8000) | (1 + i % 1000)) : simd_f32_to_f16(frand() * mul);
}

/* > 0: the scores soft-capped (Gemma 2) in attend and check_ref */
static float softcap_now;

/* Attention over n positions the way the engine does it: chunk by chunk
 * (the reference's or the active set's), then one merge per head. part
 * gets every chunk row: chunk c, head h at part + (c*nq + h)*(hd+2). */
static void attend(int ref, size_t hd, size_t nq, size_t n, const float *q, const simd_f16 *k, const simd_f16 *v,
                   size_t kvstride, float *scratch, float *part, float *out)
{
    size_t row = hd + 2, nch = (n + SIMD_ATTN_CHUNK - 1) / SIMD_ATTN_CHUNK;
    for (size_t c = 0; c < nch; c++) {
        size_t p0 = c * SIMD_ATTN_CHUNK, len = n - p0 < SIMD_ATTN_CHUNK ? n - p0 : SIMD_ATTN_CHUNK;
        simd_attn_args a = {hd, nq, len, q, hd, k + p0 * kvstride, v + p0 * kvstride, kvstride,
                            1.0f / sqrtf((float)hd), part + c * nq * row, row, scratch, softcap_now, 0};
        if (ref)
            simd_attn_ref(&a);
        else
            simd_attn_chunk(&a);
    }
    for (size_t h = 0; h < nq; h++)
        if (ref)
            simd_attn_merge_ref(hd, nch, part + h * row, nq * row, NULL, out + h * hd);
        else
            simd_attn_merge(hd, nch, part + h * row, nq * row, out + h * hd);
}

/* The merge on every set against the reference, bit for bit: head sizes
 * with and without a tail of eight, 1..200 chunks (groups of eight and
 * the rest), rows wider than hd + 2, chunks whose scores all underflowed
 * or were all -inf, with and without a sink. */
static void check_merge(void)
{
    enum { MAXHD = 260, MAXC = 200, PAD = 5 };
    const size_t hds[] = {1, 4, 8, 13, 32, 40, 64, 100, 128, 256, 260};
    const size_t ncs[] = {1, 2, 7, 8, 9, 16, 33, 64, 129, 200};
    float *part = malloc((size_t)MAXC * (MAXHD + 2 + PAD) * sizeof *part);
    float ref[MAXHD], got[MAXHD];
    if (!part)
        return;
    for (int k = 0; k < SIMD_K_COUNT; k++) {
        if (!simd_kernel_supported((enum simd_kernel)k, NULL))
            continue;
        CHECK(simd_kernel_select((enum simd_kernel)k) == 0);
        int bad = 0;
        long cases = 0;
        for (size_t i = 0; i < sizeof hds / sizeof *hds && !bad; i++)
            for (size_t j = 0; j < sizeof ncs / sizeof *ncs && !bad; j++)
                for (int sk = 0; sk < 3 && !bad; sk++) {
                    size_t hd = hds[i], nc = ncs[j], cs = hd + 2 + (j & 1 ? PAD : 0);
                    for (size_t c = 0; c < nc; c++) {
                        float *row = part + c * cs;
                        /* maxima spread wide, so some chunks weigh 0 */
                        row[0] = c % 11 == 4 ? -INFINITY : frand() * (c % 3 ? 3.0f : 120.0f);
                        row[1] = row[0] == -INFINITY ? 0.0f : 1.0f + 60.0f * (frand() + 1.0f);
                        fill(row + 2, hd, 2.0f);
                    }
                    float sink = sk == 2 ? 50.0f * frand() : -INFINITY;
                    simd_attn_merge_ref(hd, nc, part, cs, sk ? &sink : NULL, ref);
                    memset(got, 0xff, sizeof got);
                    if (sk)
                        simd_attn_merge_sink(hd, nc, part, cs, sink, got);
                    else
                        simd_attn_merge(hd, nc, part, cs, got);
                    for (size_t d = 0; d < hd && !bad; d++)
                        if (!same(ref[d], got[d])) {
                            CHECKF(0, "%s merge hd=%zu chunks=%zu sink=%d: out[%zu] %a vs reference %a",
                                   simd_kernel_name((enum simd_kernel)k), hd, nc, sk, d, (double)got[d],
                                   (double)ref[d]);
                            bad = 1;
                        }
                    cases++;
                }
        if (!bad)
            printf("%-14s merge bit-identical to the reference (%ld cases)\n", simd_kernel_name((enum simd_kernel)k),
                   cases);
    }
    simd_init();
    free(part);
}

/* the reference against a softmax in double */
static void check_ref(const shape *s, const float *q, const simd_f16 *k, const simd_f16 *v, float *scratch,
                      float *out)
{
    float *part = malloc(s->nq * (s->hd + 2) * ((s->n + SIMD_ATTN_CHUNK - 1) / SIMD_ATTN_CHUNK) * sizeof *part);
    attend(1, s->hd, s->nq, s->n, q, k, v, s->kvstride, scratch, part, out);
    free(part);
    float scale = 1.0f / sqrtf((float)s->hd);
    double *w = malloc(s->n * sizeof *w);
    for (size_t h = 0; h < s->nq; h++) {
        double mx = -INFINITY, sum = 0;
        for (size_t p = 0; p < s->n; p++) {
            double d = 0;
            for (size_t i = 0; i < s->hd; i++)
                d += (double)q[h * s->hd + i] * simd_f16_to_f32(k[p * s->kvstride + i]);
            w[p] = d * scale;
            if (softcap_now > 0)
                w[p] = softcap_now * tanh(w[p] / softcap_now);
            mx = w[p] > mx ? w[p] : mx;
        }
        for (size_t p = 0; p < s->n; p++)
            sum += w[p] = exp(w[p] - mx);
        for (size_t d = 0; d < s->hd; d++) {
            double o = 0, mag = 0;
            for (size_t p = 0; p < s->n; p++) {
                double vd = simd_f16_to_f32(v[p * s->kvstride + d]);
                o += w[p] / sum * vd;
                mag += w[p] / sum * fabs(vd);
            }
            CHECKF(fabs(out[h * s->hd + d] - o) <= 1e-5 * mag + 1e-30, "ref hd=%zu n=%zu h=%zu d=%zu: %g vs %g",
                   s->hd, s->n, h, d, out[h * s->hd + d], o);
        }
    }
    free(w);
}

static float silu1(float x, float u)
{
    simd_silu_mul(&x, &u, 1);
    return x;
}

static float gelu1(float x)
{
    simd_gelu(&x, 1);
    return x;
}

/* simd_silu_mul: special values, accuracy against double precision, and
 * the vectorized loop against one element at a time (the compiler's
 * vector body and its scalar tail must give the same bits). */
static void check_silu(void)
{
    CHECK(same(silu1(0.0f, 1.0f), 0.0f));
    CHECK(isnan(silu1(NAN, 1.0f)));
    CHECK(isnan(silu1(-INFINITY, 1.0f)));
    CHECK(silu1(INFINITY, 2.0f) == INFINITY);
    CHECK(silu1(100.0f, 1.0f) == 100.0f);
    CHECK(silu1(-100.0f, 1.0f) == 0.0f);
    double worst = 0;
    for (int i = -2000000; i <= 2000000; i++) {
        float x = (float)i * 4.5e-5f, u = 1.0f + 0.25f * frand();
        double want = (double)x / (1.0 + exp(-(double)x)) * u, got = silu1(x, u);
        double err = fabs(got - want) / (fabs(want) + 1e-30);
        if (fabs(want) > 1e-30 && err > worst)
            worst = err;
    }
    CHECKF(worst < 2e-6, "silu relative error %g", worst);
    printf("silu: worst relative error %.2g over [-90, 90]\n", worst);
    CHECK(same(gelu1(0.0f), 0.0f));
    CHECK(isnan(gelu1(NAN)));
    CHECK(gelu1(1e13f) == 1e13f && gelu1(INFINITY) == INFINITY);
    CHECK(gelu1(-1e13f) == 0.0f);
    worst = 0;
    for (int i = -1000000; i <= 1000000; i++) {
        float x = (float)i * 1e-5f;
        double y = 0.7978845608028654 * ((double)x + 0.044715 * (double)x * x * x);
        /* 0.5 x (1 + tanh y) in that form cancels to nothing below x = -6
         * even in double: the same value as x / (1 + e^-2y) */
        double want = (double)x / (1.0 + exp(-2.0 * y)), got = gelu1(x);
        double err = fabs(got - want) / (fabs(want) + 1e-30);
        if (fabs(want) > 1e-30 && err > worst)
            worst = err;
    }
    /* float rounding of y is magnified by the slope of the sigmoid's tail */
    CHECKF(worst < 2e-5, "gelu relative error %g", worst);
    printf("gelu: worst relative error %.2g over [-10, 10]\n", worst);
    /* every set's build against the baseline one, bit for bit; within a
     * set, the vector body against the same values one at a time (its
     * scalar tail) */
    enum { N = 203 };
    float x[N], u[N], g[N], want[N];
    const float specials[] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 87.5f, -87.5f, 1e-40f, -1e-40f, 1e30f};
    for (int k = 0; k < SIMD_K_COUNT; k++) {
        if (!simd_kernel_supported((enum simd_kernel)k, NULL))
            continue;
        CHECK(simd_kernel_select((enum simd_kernel)k) == 0);
        int bad = 0;
        for (size_t n = 1; n <= N && !bad; n += n < 40 ? 1 : 27) {
            for (size_t i = 0; i < n; i++) {
                x[i] = i % 7 == 3 ? specials[(i / 7) % 10] : 20.0f * frand();
                u[i] = frand();
            }
            memcpy(want, x, n * sizeof *want);
            simd_silu_mul_ref(want, u, n);
            memcpy(g, x, n * sizeof *g);
            simd_silu_mul(g, u, n);
            for (size_t i = 0; i < n && !bad; i++) {
                float one = silu1(x[i], u[i]);
                if (!same(g[i], want[i]) || !same(one, want[i])) {
                    CHECKF(0, "%s silu n=%zu i=%zu x=%a: %a in the loop, %a alone, %a baseline",
                           simd_kernel_name((enum simd_kernel)k), n, i, (double)x[i], (double)g[i], (double)one,
                           (double)want[i]);
                    bad = 1;
                }
            }
            memcpy(want, x, n * sizeof *want);
            simd_gelu_ref(want, n);
            memcpy(g, x, n * sizeof *g);
            simd_gelu(g, n);
            for (size_t i = 0; i < n && !bad; i++) {
                float one = gelu1(x[i]);
                if (!same(g[i], want[i]) || !same(one, want[i])) {
                    CHECKF(0, "%s gelu n=%zu i=%zu x=%a: %a in the loop, %a alone, %a baseline",
                           simd_kernel_name((enum simd_kernel)k), n, i, (double)x[i], (double)g[i], (double)one,
                           (double)want[i]);
                    bad = 1;
                }
            }
        }
        if (!bad)
            printf("%-14s silu, gelu bit-identical to the baseline build\n", simd_kernel_name((enum simd_kernel)k));
    }
}

static float oai1(float g, float u)
{
    simd_swiglu_oai(&g, &u, 1, 1.702f, 7.0f);
    return g;
}

/* gpt-oss's clamped SwiGLU: the clamps, accuracy against double, and
 * every set's build against the baseline bit for bit; the attention
 * merge with a sink: no sink (-inf) is the plain merge to the bit, and a
 * sink takes its share of the softmax. */
static void check_oai(void)
{
    CHECK(isnan(oai1(NAN, 1.0f)) && isnan(oai1(1.0f, NAN)));
    CHECK(same(oai1(100.0f, 0.0f), oai1(7.0f, 0.0f)));   /* gate clamped above */
    CHECK(same(oai1(1.0f, 100.0f), oai1(1.0f, 7.0f)));   /* up clamped to [-7, 7] */
    CHECK(same(oai1(1.0f, -100.0f), oai1(1.0f, -7.0f)));
    CHECK(oai1(-100.0f, 3.0f) == 0.0f);                   /* no clamp below for the gate */
    double worst = 0;
    for (int i = -400000; i <= 400000; i++) {
        float g = (float)i * 2.5e-5f, u = 8.0f * frand();
        double x = g < 7.0f ? g : 7.0, y = u > 7.0f ? 7.0 : u < -7.0f ? -7.0 : u;
        double want = x / (1.0 + exp(-1.702 * x)) * (y + 1.0), got = oai1(g, u);
        double err = fabs(got - want) / (fabs(want) + 1e-30);
        if (fabs(want) > 1e-20 && err > worst)
            worst = err;
    }
    /* (y + 1) near 0 magnifies the rounding of y + 1 itself */
    CHECKF(worst < 1e-4, "swiglu_oai relative error %g", worst);
    printf("swiglu_oai: worst relative error %.2g over [-10, 10]\n", worst);
    enum { N = 203 };
    float x[N], u[N], g[N], want[N];
    const float specials[] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 7.0f, -7.0f, 1e-40f, 60.0f, -60.0f};
    for (int k = 0; k < SIMD_K_COUNT; k++) {
        if (!simd_kernel_supported((enum simd_kernel)k, NULL))
            continue;
        CHECK(simd_kernel_select((enum simd_kernel)k) == 0);
        int bad = 0;
        for (size_t n = 1; n <= N && !bad; n += n < 40 ? 1 : 27) {
            for (size_t i = 0; i < n; i++) {
                x[i] = i % 7 == 3 ? specials[(i / 7) % 10] : 20.0f * frand();
                u[i] = i % 5 == 2 ? specials[(i / 5) % 10] : 10.0f * frand();
            }
            memcpy(want, x, n * sizeof *want);
            simd_swiglu_oai_ref(want, u, n, 1.702f, 7.0f);
            memcpy(g, x, n * sizeof *g);
            simd_swiglu_oai(g, u, n, 1.702f, 7.0f);
            for (size_t i = 0; i < n && !bad; i++)
                if (!same(g[i], want[i]) || !same(oai1(x[i], u[i]), want[i])) {
                    CHECKF(0, "%s swiglu_oai n=%zu i=%zu: %a, baseline %a", simd_kernel_name((enum simd_kernel)k),
                           n, i, (double)g[i], (double)want[i]);
                    bad = 1;
                }
        }
        if (!bad)
            printf("%-14s swiglu_oai bit-identical to the baseline build\n", simd_kernel_name((enum simd_kernel)k));
    }
    simd_init();
    /* merge with a sink: three chunk rows of hd 4 */
    enum { HD = 4, NC = 3 };
    float part[NC * (HD + 2)], a[HD], b[HD];
    for (int c = 0; c < NC; c++) {
        part[c * (HD + 2)] = frand();            /* max */
        part[c * (HD + 2) + 1] = 1.0f + frand() * 0.5f; /* sum */
        for (int d = 0; d < HD; d++)
            part[c * (HD + 2) + 2 + d] = frand();
    }
    simd_attn_merge(HD, NC, part, HD + 2, a);
    simd_attn_merge_sink(HD, NC, part, HD + 2, -INFINITY, b);
    CHECK(memcmp(a, b, sizeof a) == 0);
    float sink = 0.7f;
    simd_attn_merge_sink(HD, NC, part, HD + 2, sink, b);
    double den = exp((double)sink), num[HD] = {0};
    for (int c = 0; c < NC; c++) {
        double f = exp((double)part[c * (HD + 2)]);
        den += part[c * (HD + 2) + 1] * f;
        for (int d = 0; d < HD; d++)
            num[d] += part[c * (HD + 2) + 2 + d] * f;
    }
    for (int d = 0; d < HD; d++)
        CHECKF(fabs(b[d] - num[d] / den) < 1e-5, "merge with sink: %g, want %g", (double)b[d], num[d] / den);
    printf("attention merge with a sink: as the softmax with one more logit\n");
}

/* simd_attn_tile (many tokens over one chunk, or one: the halves read
 * where they lie) on every set against simd_attn_tile_ref, bit for bit:
 * head sizes (multiples of 16, of 8 only, odd ones; the AVX-512 V sum's
 * 64-, 32- and masked passes), group sizes (GQA), chunk lengths below and
 * at SIMD_ATTN_CHUNK, 1..13 tokens (blocks of rows across tokens and
 * heads, and their rests), K transposed with the cache's row stride and
 * with a chunk's own (NaN everywhere else, so a form that used a value
 * past n would show it) and as rows, strided V with subnormal halves and underflowing
 * weights, soft-capped scores. Each token's row, merged (with a sink too), is then
 * held to a softmax in double: |out - exact| <= 1e-5 times the weighted
 * magnitude of V, the chunk reference's bound in check_ref. The tile's
 * order is not the chunk's: on these inputs some rows must differ from
 * simd_attn_ref's (else this test would not see which order a set took). */
static void check_tile(void)
{
    const size_t hds[] = {8, 24, 64, 72, 80, 96, 128, 6, 13, 1};
    const size_t nqs[] = {1, 3, 4, 5, 7};
    const size_t ns[] = {1, 7, 8, 9, 17, 33, 63, 64};
    const size_t nts[] = {1, 2, 5, 13};
    enum { MAXHD = 128, MAXNQ = 7, MAXT = 13, N = SIMD_ATTN_CHUNK, EXTRA = 24 };
    size_t row = MAXHD + 2, kvs = 3 * MAXHD + EXTRA;
    float *q = malloc(MAXT * (MAXNQ * MAXHD + 5) * sizeof *q), *sc = malloc(MAXNQ * N * sizeof *sc);
    float *want = malloc(MAXT * (MAXNQ * row + 3) * sizeof *want);
    float *got = malloc(MAXT * (MAXNQ * row + 3) * sizeof *got);
    float *kvbuf = malloc(SIMD_ATTN_TILE_BUF(MAXHD) * sizeof *kvbuf), out[MAXHD];
    simd_f16 *k = malloc(N * kvs * sizeof *k), *v = malloc(N * kvs * sizeof *v);
    /* K transposed, as the tile takes it, and the 16 halves a row may be
     * read past its n-th position (simd.h) */
    size_t ktn = MAXHD * (N + 3) + 16;
    simd_f16 *kt = malloc(ktn * sizeof *kt);
    double *w = malloc(N * sizeof *w);
    if (!q || !sc || !want || !got || !kvbuf || !k || !v || !kt || !w) {
        CHECK(0);
        return;
    }
    double worst = 0;
    long differ = 0; /* rows of the tile reference not those of simd_attn_ref */
    for (int kset = 0; kset < SIMD_K_COUNT; kset++) {
        const char *name = simd_kernel_name((enum simd_kernel)kset);
        if (!simd_kernel_supported((enum simd_kernel)kset, NULL))
            continue;
        CHECK(simd_kernel_select((enum simd_kernel)kset) == 0);
        int before = tu_failures;
        long cases = 0;
        for (size_t i = 0; i < sizeof hds / sizeof *hds; i++)
            for (size_t j = 0; j < sizeof nqs / sizeof *nqs; j++)
                for (size_t l = 0; l < sizeof ns / sizeof *ns; l++)
                    for (size_t m = 0; m < sizeof nts / sizeof *nts; m++)
                        for (int variant = 0; variant < 3; variant++) {
                            size_t hd = hds[i], nq = nqs[j], n = ns[l], nt = nts[m];
                            size_t kvstride = variant ? 3 * hd + EXTRA : hd, qts = nq * hd + 5, pts = nq * row + 3;
                            float spread = variant ? 40.0f : 1.0f;
                            softcap_now = variant == 2 ? 5.0f : 0.0f;
                            fill(q, nt * qts, spread);
                            fillh(k, n * kvstride, 1.0f, variant);
                            fillh(v, n * kvstride, 1.0f, variant);
                            const simd_f16 *kk = k + (variant ? hd : 0), *vv = v + (variant ? 2 * hd : 0);
                            /* K transposed with the cache's stride (SIMD_ATTN_CHUNK) or a
                             * shorter chunk's odd one; the soft-capped variant as rows */
                            size_t kts = variant == 2 ? 0 : variant ? n + 3 : SIMD_ATTN_CHUNK;
                            for (size_t x = 0; x < ktn; x++) /* NaN wherever no K value lies */
                                kt[x] = 0x7e00;
                            for (size_t p = 0; p < n; p++)
                                for (size_t d = 0; d < hd; d++)
                                    kt[d * kts + p] = kk[p * kvstride + d];
                            const simd_f16 *ka = kts ? kt : kk;
                            simd_attn_args a = {hd, nq, n, q, hd, ka, vv, kvstride, 1.0f / sqrtf((float)hd), want,
                                                row, sc, softcap_now, kts};
                            memset(want, 0xff, nt * pts * sizeof *want);
                            simd_attn_tile_ref(&a, nt, qts, pts, NULL);
                            if (kset == 0) { /* the chunk's order, token by token (K as rows) */
                                a.k = kk;
                                for (size_t t = 0; t < nt; t++) {
                                    a.q = q + t * qts;
                                    a.part = got + t * pts;
                                    simd_attn_ref(&a);
                                    for (size_t h = 0; h < nq; h++)
                                        differ += memcmp(got + t * pts + h * row, want + t * pts + h * row,
                                                         (hd + 2) * sizeof *got) != 0;
                                }
                            }
                            memset(got, 0xff, nt * pts * sizeof *got);
                            a.q = q;
                            a.k = ka;
                            a.part = got;
                            simd_attn_tile(&a, nt, qts, pts, kvbuf);
                            int bad = 0;
                            for (size_t t = 0; t < nt && !bad; t++)
                                for (size_t h = 0; h < nq && !bad; h++)
                                    for (size_t x = 0; x < hd + 2 && !bad; x++) {
                                        size_t at = t * pts + h * row + x;
                                        if (!same(want[at], got[at])) {
                                            CHECKF(0, "%s tile hd=%zu nq=%zu n=%zu nt=%zu variant %d: token %zu "
                                                      "head %zu float %zu %a vs reference %a",
                                                   name, hd, nq, n, nt, variant, t, h, x, (double)got[at],
                                                   (double)want[at]);
                                            bad = 1;
                                        }
                                    }
                            cases++;
                            if (kset != 0 || variant == 1)
                                continue;
                            /* against double, with and without a sink */
                            double scale = 1.0 / sqrt((double)hd);
                            for (size_t t = 0; t < nt; t++)
                                for (size_t h = 0; h < nq; h++)
                                    for (int sink = 0; sink < 2; sink++) {
                                        const float *qh = q + t * qts + h * hd;
                                        float sv = 0.3f;
                                        if (sink)
                                            simd_attn_merge_sink(hd, 1, got + t * pts + h * row, row, sv, out);
                                        else
                                            simd_attn_merge(hd, 1, got + t * pts + h * row, row, out);
                                        double mx = sink ? sv : -INFINITY, sum = 0;
                                        for (size_t p = 0; p < n; p++) {
                                            double d = 0;
                                            for (size_t e = 0; e < hd; e++)
                                                d += (double)qh[e] * simd_f16_to_f32(kk[p * kvstride + e]);
                                            w[p] = d * (double)(float)scale;
                                            if (softcap_now > 0)
                                                w[p] = softcap_now * tanh(w[p] / softcap_now);
                                            mx = w[p] > mx ? w[p] : mx;
                                        }
                                        for (size_t p = 0; p < n; p++)
                                            sum += w[p] = exp(w[p] - mx);
                                        if (sink)
                                            sum += exp(sv - mx);
                                        for (size_t d = 0; d < hd; d++) {
                                            double o = 0, mag = 0;
                                            for (size_t p = 0; p < n; p++) {
                                                double vd = simd_f16_to_f32(vv[p * kvstride + d]);
                                                o += w[p] / sum * vd;
                                                mag += w[p] / sum * fabs(vd);
                                            }
                                            double err = fabs(out[d] - o) / (mag + 1e-30);
                                            if (err > worst)
                                                worst = err;
                                            CHECKF(fabs(out[d] - o) <= 1e-5 * mag + 1e-30,
                                                   "tile vs double hd=%zu nq=%zu n=%zu sink %d: %g vs %g", hd, nq,
                                                   n, sink, (double)out[d], o);
                                        }
                                    }
                        }
        printf("%-14s attention tile %s (%ld cases)\n", name, tu_failures == before ? "bit-identical" : "DIFFERS",
               cases);
    }
    softcap_now = 0;
    printf("attention tile vs double: worst error %.2g of the weighted |V|; %ld rows not the chunk's\n", worst,
           differ);
    CHECKF(differ > 0, "the tile reference gave the chunk reference's bits on every row");
    simd_init();
    free(q); free(sc); free(want); free(got); free(kvbuf); free(k); free(kt); free(v); free(w);
}

int main(void)
{
    simd_init();
    check_exp();
    check_fma();
    check_silu();
    check_oai();
    check_merge();
    check_tile();
    const size_t hds[] = {8, 16, 24, 40, 64, 72, 128, 6};
    const size_t nqs[] = {1, 2, 3, 4, 5, 7, 8, 9};
    const size_t ns[] = {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 128, 257};
    enum { MAXHD = 128, MAXNQ = 9, MAXN = 257, STRIDE_EXTRA = 24 };
    size_t part_floats = MAXNQ * (MAXHD + 2) * ((MAXN + SIMD_ATTN_CHUNK - 1) / SIMD_ATTN_CHUNK);
    float *part = malloc(part_floats * sizeof *part), *part2 = malloc(part_floats * sizeof *part2);
    float *q = malloc(MAXNQ * MAXHD * sizeof *q);
    simd_f16 *k = malloc(MAXN * (3 * MAXHD + STRIDE_EXTRA) * sizeof *k);
    simd_f16 *v = malloc(MAXN * (3 * MAXHD + STRIDE_EXTRA) * sizeof *v);
    float *sc = malloc(MAXNQ * MAXN * sizeof *sc), *sc2 = malloc(MAXNQ * MAXN * sizeof *sc2);
    float *ref = malloc(MAXNQ * MAXHD * sizeof *ref), *got = malloc(MAXNQ * MAXHD * sizeof *got);
    if (!q || !k || !v || !sc || !sc2 || !ref || !got || !part || !part2)
        return 1;
    /* the reference is attention, in one chunk and in several; soft-capped
     * too, with scores large enough that the cap bends them */
    for (int cap = 0; cap < 2; cap++)
        for (size_t i = 0; i < sizeof hds / sizeof *hds; i++)
            for (size_t n = 50; n < 300; n += 200) {
                shape s = {hds[i], 3, n, hds[i] * 2 + 8, cap ? 12.0f : 4.0f};
                softcap_now = cap ? 5.0f : 0.0f;
                fill(q, s.nq * s.hd, s.spread);
                fillh(k, s.n * s.kvstride, 1.0f, 0);
                fillh(v, s.n * s.kvstride, 1.0f, 0);
                check_ref(&s, q, k, v, sc, ref);
            }
    softcap_now = 0;
    /* every set against it */
    for (int kset = 0; kset < SIMD_K_COUNT; kset++) {
        const char *why = NULL, *name = simd_kernel_name((enum simd_kernel)kset);
        if (!simd_kernel_supported((enum simd_kernel)kset, &why)) {
            printf("%-14s skipped: %s\n", name, why ? why : "?");
            continue;
        }
        CHECK(simd_kernel_select((enum simd_kernel)kset) == 0);
        int before = tu_failures;
        long cases = 0;
        for (size_t i = 0; i < sizeof hds / sizeof *hds; i++)
            for (size_t j = 0; j < sizeof nqs / sizeof *nqs; j++)
                for (size_t l = 0; l < sizeof ns / sizeof *ns; l++)
                    for (int variant = 0; variant < 3; variant++) {
                        size_t hd = hds[i];
                        /* variant 2: as 1, soft-capped (every set the same bits) */
                        softcap_now = variant == 2 ? 5.0f : 0.0f;
                        /* variant 1: the kv head inside a wider row, and
                         * big scores, so most weights underflow to 0 */
                        shape s = {hd, nqs[j], ns[l], variant ? 3 * hd + STRIDE_EXTRA : hd,
                                   variant ? 40.0f : 1.0f};
                        fill(q, s.nq * hd, s.spread);
                        fillh(k, s.n * s.kvstride, 1.0f, variant);
                        fillh(v, s.n * s.kvstride, 1.0f, variant);
                        const simd_f16 *kk = k + (variant ? hd : 0), *vv = v + (variant ? 2 * hd : 0);
                        size_t np = s.nq * (hd + 2) * ((s.n + SIMD_ATTN_CHUNK - 1) / SIMD_ATTN_CHUNK);
                        attend(1, hd, s.nq, s.n, q, kk, vv, s.kvstride, sc, part, ref);
                        memset(got, 0xff, s.nq * hd * sizeof *got);
                        memset(part2, 0xff, np * sizeof *part2);
                        attend(0, hd, s.nq, s.n, q, kk, vv, s.kvstride, sc2, part2, got);
                        for (size_t x = 0; x < np; x++)
                            if (!same(part[x], part2[x])) {
                                CHECKF(0, "%s hd=%zu nq=%zu n=%zu stride=%zu: chunk row float %zu %a vs scalar %a",
                                       name, hd, s.nq, s.n, s.kvstride, x, (double)part2[x], (double)part[x]);
                                break;
                            }
                        for (size_t x = 0; x < s.nq * hd; x++)
                            if (!same(ref[x], got[x])) {
                                CHECKF(0, "%s hd=%zu nq=%zu n=%zu stride=%zu: out[%zu] %a vs scalar %a", name, hd,
                                       s.nq, s.n, s.kvstride, x, (double)got[x], (double)ref[x]);
                                break;
                            }
                        cases++;
                    }
        printf("%-14s attention %s (%ld cases)\n", name, tu_failures == before ? "bit-identical" : "DIFFERS",
               cases);
    }
    free(q); free(k); free(v); free(sc); free(sc2); free(ref); free(got); free(part); free(part2);
    return tu_result("test_attn");
}
