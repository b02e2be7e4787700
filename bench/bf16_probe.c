/* nibble_bf16probe: does this CPU's vdpbf16ps (AVX512-BF16) give the bits
 * of a plain-C form that every kernel set could reproduce? (issue 24: a
 * bf16 dot product for attention's scores is only usable if the other
 * sets can match it bit for bit.)
 *
 * The form tested: per 32-bit lane, with the pair's products exact (two
 * bf16 significands of 8 bits fit a float's 24),
 *   acc = flush(fma(a_even, b_even, flush(fma(a_odd, b_odd, acc))))
 * where flush() turns a subnormal result into a zero of its sign, and
 * subnormal inputs count as zero: the odd pair first, each step rounded
 * to nearest even. Other orders are counted beside it, so a CPU that
 * differs shows which one it follows. Random lanes cover products near
 * each other in size (cancellation) and far apart; fixed cases cover
 * subnormals, infinities and NaN.
 *
 * Hand-run, not a test; exits 0 when every lane matches the form, 1 when
 * one does not, 0 with a message on a CPU without AVX512-BF16. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !(defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)))
int main(void)
{
    fprintf(stderr, "nibble_bf16probe: x86-64 with GCC or Clang only\n");
    return 0;
}
#else
#include <immintrin.h>

static float bf2f(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float daz(float x) { return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x; }

/* the form above */
static float form(float acc, float ao, float bo, float ae, float be)
{
    acc = daz(fmaf(daz(ao), daz(bo), daz(acc)));
    return daz(fmaf(daz(ae), daz(be), acc));
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* a random bf16 with its exponent within span of 1.0 */
static uint16_t rand_bf16(int span)
{
    unsigned e = (unsigned)(127 + (int)(next() % (uint64_t)(2 * span + 1)) - span);
    return (uint16_t)((next() & 1) << 15 | e << 7 | (next() & 0x7f));
}

__attribute__((target("avx512f,avx512bf16"))) static void dp16(const float *acc, const uint16_t *a,
                                                                const uint16_t *b, float *out)
{
    __m512bh va, vb;
    memcpy(&va, a, 64);
    memcpy(&vb, b, 64);
    _mm512_storeu_ps(out, _mm512_dpbf16_ps(_mm512_loadu_ps(acc), va, vb));
}

int main(void)
{
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512bf16")) {
        printf("nibble_bf16probe: this CPU has no AVX512-BF16; nothing to probe\n");
        return 0;
    }
    long n = 0, same = 0, even_first = 0, pair_sum = 0;
    for (int it = 0; it < 200000; it++) {
        uint16_t a[32], b[32];
        float acc[16], out[16];
        int span = it % 3 == 0 ? 2 : it % 3 == 1 ? 10 : 30;
        for (int i = 0; i < 32; i++) {
            a[i] = rand_bf16(span);
            b[i] = rand_bf16(span);
        }
        for (int i = 0; i < 16; i++) /* near minus the even product half the time: cancellation */
            acc[i] = it & 1 ? bf2f(rand_bf16(span)) * (float)(1 + next() % 1000)
                            : -(bf2f(a[2 * i]) * bf2f(b[2 * i])) * (next() & 1 ? 1.0f : 1.0000001f);
        dp16(acc, a, b, out);
        for (int i = 0; i < 16; i++, n++) {
            float ae = bf2f(a[2 * i]), be = bf2f(b[2 * i]), ao = bf2f(a[2 * i + 1]), bo = bf2f(b[2 * i + 1]);
            same += fbits(form(acc[i], ao, bo, ae, be)) == fbits(out[i]);
            even_first += fbits(form(acc[i], ae, be, ao, bo)) == fbits(out[i]);
            pair_sum += fbits(acc[i] + (ae * be + ao * bo)) == fbits(out[i]);
        }
    }
    /* fixed cases: {acc, a_odd, b_odd, a_even, b_even} as floats that are bf16 */
    static const float cases[][5] = {
        {0.0f, 0x1p-70f, 0x1p-70f, 0.0f, 0.0f},         /* a product below the normal range */
        {0x1p-130f, 0.0f, 0.0f, 0.0f, 0.0f},            /* a subnormal acc */
        {1.0f, 0x1p-127f, 0x1p100f, 0.0f, 0.0f},        /* a subnormal input */
        {0x1p-126f, -0x1p-126f, 0.5f, 0.0f, 0.0f},      /* a subnormal result */
        {0.0f, 0x1p100f, 0x1p100f, 0.0f, 0.0f},         /* overflow */
        {0.0f, INFINITY, 1.0f, -INFINITY, 1.0f},        /* inf - inf */
        {-0.0f, 0.0f, 1.0f, -0.0f, 1.0f},               /* signed zeros */
        {1.0f, NAN, 1.0f, 0.0f, 0.0f},                  /* NaN */
    };
    long fixed = 0, fixed_same = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint16_t a[32] = {0}, b[32] = {0};
        float acc[16] = {0}, out[16];
        acc[0] = cases[c][0];
        a[1] = (uint16_t)(fbits(cases[c][1]) >> 16);
        b[1] = (uint16_t)(fbits(cases[c][2]) >> 16);
        a[0] = (uint16_t)(fbits(cases[c][3]) >> 16);
        b[0] = (uint16_t)(fbits(cases[c][4]) >> 16);
        dp16(acc, a, b, out);
        float f = form(acc[0], cases[c][1], cases[c][2], cases[c][3], cases[c][4]);
        int ok = fbits(f) == fbits(out[0]) || (isnan(f) && isnan(out[0]));
        fixed++;
        fixed_same += ok;
        if (!ok)
            printf("  case %zu: vdpbf16ps %a, the form %a\n", c, (double)out[0], (double)f);
    }
    printf("random lanes: %ld; the form (odd pair first): %ld; even pair first: %ld; pair summed first: %ld\n", n,
           same, even_first, pair_sum);
    printf("fixed cases: %ld of %ld match the form\n", fixed_same, fixed);
    int all = same == n && fixed_same == fixed;
    printf("%s\n", all ? "vdpbf16ps gives the form's bits here" : "vdpbf16ps differs from the form here");
    return all ? 0 : 1;
}
#endif
