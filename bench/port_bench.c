/* nibble_portbench: which of the packed products' float steps share the
 * integer dot product's execution ports (issue 24: how near the int8
 * peak a q4_0 or q8_0 prefill can get with its float order).
 *
 * Per block of 32 columns, a token and 16 rows, the AVX-512 product
 * (simd/pack_x86.h, nbp_pairacc) issues 8 vpdpbusd and then the float
 * steps of its order, term = (d_w * d_a) * (float)isum added to a slot:
 * two vmulps, one vcvtdq2ps and one vaddps. Each test here runs 16
 * independent vpdpbusd a loop (register to register, no memory), alone
 * and then with one kind of those extra instructions, each on its own
 * register, so that only the ports can slow the loop. A kind that leaves
 * the loop's time unchanged runs beside the dot products; one that adds
 * time takes their ports. The last line is the product's own mix (per
 * 16 dot products: 4 vmulps, 2 vcvtdq2ps, 2 vaddps), the rate its inner
 * loop can reach at most.
 *
 * x86-64 with GNU asm only; the 512-bit tests need AVX-512 VNNI, the
 * 256-bit ones AVX-VNNI (ten chains in the 16 VEX registers). Hand-run,
 * not a test: the figures are this machine's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if !(defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)))
int main(void)
{
    fprintf(stderr, "nibble_portbench: x86-64 with GNU asm only\n");
    return 0;
}
#else

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- 512-bit: accumulators zmm0-15, sources zmm30/31, extras zmm16-27,
 * a float operand in zmm29 ---- */
#define Z_DOT(i) "vpdpbusd %%zmm30, %%zmm31, %%zmm" #i "\n\t"
#define Z_DOTS                                                                                                     \
    Z_DOT(0) Z_DOT(1) Z_DOT(2) Z_DOT(3) Z_DOT(4) Z_DOT(5) Z_DOT(6) Z_DOT(7) Z_DOT(8) Z_DOT(9) Z_DOT(10) Z_DOT(11) \
        Z_DOT(12) Z_DOT(13) Z_DOT(14) Z_DOT(15)
#define Z_MUL(i) "vmulps %%zmm29, %%zmm" #i ", %%zmm" #i "\n\t"
#define Z_CVT(i) "vcvtdq2ps %%zmm30, %%zmm" #i "\n\t"
#define Z_ADD(i) "vaddps %%zmm29, %%zmm" #i ", %%zmm" #i "\n\t"
#define Z_FMA(i) "vfmadd231ps %%zmm29, %%zmm29, %%zmm" #i "\n\t"
#define Z_SETUP                                                                                                    \
    "vpternlogd $0xff, %%zmm30, %%zmm30, %%zmm30\n\t"                                                              \
    "vpabsb %%zmm30, %%zmm30\n\t"                                                                                  \
    "vmovdqa64 %%zmm30, %%zmm31\n\t"                                                                               \
    "vcvtdq2ps %%zmm30, %%zmm29\n\t"                                                                               \
    "vmovaps %%zmm29, %%zmm16\n\tvmovaps %%zmm29, %%zmm17\n\tvmovaps %%zmm29, %%zmm18\n\tvmovaps %%zmm29, %%zmm19\n\t" \
    "vmovaps %%zmm29, %%zmm20\n\tvmovaps %%zmm29, %%zmm21\n\tvmovaps %%zmm29, %%zmm22\n\tvmovaps %%zmm29, %%zmm23\n\t"
#define Z_CLOBBER                                                                                                  \
    "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",      \
        "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm29", \
        "xmm30", "xmm31"
#define Z_TEST(NAME, EXTRA)                                                                                        \
    __attribute__((noinline, target(TGT))) static void NAME(long n)                                                \
    {                                                                                                              \
        __asm__ volatile(Z_SETUP "1:\n\t" Z_DOTS EXTRA "dec %0\n\tjnz 1b\n\t" : "+r"(n) : : "cc", Z_CLOBBER);     \
    }
#define TGT "avx512f,avx512bw,avx512vnni" /* the registers past 15 */
Z_TEST(z_alone, "")
Z_TEST(z_mul, Z_MUL(16) Z_MUL(17) Z_MUL(18) Z_MUL(19))
Z_TEST(z_cvt, Z_CVT(16) Z_CVT(17) Z_CVT(18) Z_CVT(19))
Z_TEST(z_add, Z_ADD(16) Z_ADD(17) Z_ADD(18) Z_ADD(19))
Z_TEST(z_fma, Z_FMA(16) Z_FMA(17) Z_FMA(18) Z_FMA(19))
Z_TEST(z_mix, Z_MUL(16) Z_MUL(17) Z_MUL(18) Z_MUL(19) Z_CVT(20) Z_CVT(21) Z_ADD(22) Z_ADD(23))

/* ---- 256-bit VEX: accumulators ymm0-9, sources ymm14/15 (ymm15 also
 * the float operand: its bytes are small positive floats' bits), extras
 * ymm10-13 ---- */
#define Y_DOT(i) "%{vex%} vpdpbusd %%ymm14, %%ymm15, %%ymm" #i "\n\t"
#define Y_DOTS Y_DOT(0) Y_DOT(1) Y_DOT(2) Y_DOT(3) Y_DOT(4) Y_DOT(5) Y_DOT(6) Y_DOT(7) Y_DOT(8) Y_DOT(9)
#define Y_MUL(i) "vmulps %%ymm15, %%ymm" #i ", %%ymm" #i "\n\t"
#define Y_CVT(i) "vcvtdq2ps %%ymm14, %%ymm" #i "\n\t"
#define Y_ADD(i) "vaddps %%ymm15, %%ymm" #i ", %%ymm" #i "\n\t"
#define Y_FMA(i) "vfmadd231ps %%ymm15, %%ymm15, %%ymm" #i "\n\t"
#define Y_SETUP                                                                                                    \
    "vpcmpeqd %%ymm14, %%ymm14, %%ymm14\n\t"                                                                       \
    "vpabsb %%ymm14, %%ymm14\n\t"                                                                                  \
    "vmovdqa %%ymm14, %%ymm15\n\t"                                                                                 \
    "vcvtdq2ps %%ymm14, %%ymm10\n\tvmovaps %%ymm10, %%ymm11\n\tvmovaps %%ymm10, %%ymm12\n\tvmovaps %%ymm10, %%ymm13\n\t"
#define Y_CLOBBER                                                                                                  \
    "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",      \
        "xmm13", "xmm14", "xmm15"
#define Y_TEST(NAME, EXTRA)                                                                                        \
    __attribute__((noinline, target(TGT))) static void NAME(long n)                                                \
    {                                                                                                              \
        __asm__ volatile(Y_SETUP "1:\n\t" Y_DOTS EXTRA "dec %0\n\tjnz 1b\n\t" : "+r"(n) : : "cc", Y_CLOBBER);     \
    }
#undef TGT
#define TGT "avx2,avxvnni"
Y_TEST(y_alone, "")
Y_TEST(y_mul, Y_MUL(10) Y_MUL(11) Y_MUL(12) Y_MUL(13))
Y_TEST(y_cvt, Y_CVT(10) Y_CVT(11) Y_CVT(12) Y_CVT(13))
Y_TEST(y_add, Y_ADD(10) Y_ADD(11) Y_ADD(12) Y_ADD(13))
Y_TEST(y_fma, Y_FMA(10) Y_FMA(11) Y_FMA(12) Y_FMA(13))

typedef struct {
    const char *what;
    void (*fn)(long);
} port_test;

/* Best of r runs, in ns per loop. */
static double best_ns(void (*fn)(long), long n, int r)
{
    double best = 1e30;
    for (int i = 0; i < r; i++) {
        double t0 = now_s();
        fn(n);
        double t = (now_s() - t0) / (double)n * 1e9;
        if (t < best)
            best = t;
    }
    return best;
}

static void run(const char *title, const port_test *t, int nt, long n, int r)
{
    printf("%s\n", title);
    double base = best_ns(t[0].fn, n, r);
    printf("  %-52s %7.3f ns a loop\n", t[0].what, base);
    for (int i = 1; i < nt; i++) {
        double ns = best_ns(t[i].fn, n, r);
        printf("  %-52s %7.3f ns a loop: the dots at %3.0f%% of alone\n", t[i].what, ns, 100.0 * base / ns);
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: nibble_portbench [-i LOOPS] [-r RUNS]\n"
               "  How the packed q4_0/q8_0 products' float steps share the int8 dot product's ports:\n"
               "  16 vpdpbusd a loop (10 on 256 bits), alone and with each extra kind of instruction.\n"
               "  -i LOOPS  loops a run (default 20000000)\n"
               "  -r RUNS   runs of each test, the fastest shown (default 5)\n");
}

int main(int argc, char **argv)
{
    long n = 20000000;
    int r = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 < argc && (!strcmp(argv[i], "-i") || !strcmp(argv[i], "-r"))) {
            char *end;
            long v = strtol(argv[i + 1], &end, 10);
            if (*end || v < 1 || v > 2000000000L) {
                fprintf(stderr, "nibble_portbench: %s wants a positive count, not '%s'\n", argv[i], argv[i + 1]);
                return 2;
            }
            if (argv[i][1] == 'i')
                n = v;
            else
                r = (int)(v > 1000 ? 1000 : v);
            i++;
            continue;
        }
        fprintf(stderr, "nibble_portbench: unknown argument '%s'\n", argv[i]);
        usage(stderr);
        return 2;
    }
    __builtin_cpu_init();
    int ran = 0;
    if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw")) {
        const port_test z[] = {
            {"16 vpdpbusd zmm alone", z_alone},
            {"+ 4 vmulps (the product's two multiplies, 2 groups)", z_mul},
            {"+ 4 vcvtdq2ps", z_cvt},
            {"+ 4 vaddps", z_add},
            {"+ 4 vfmadd231ps", z_fma},
            {"+ the product's mix: 4 vmulps, 2 vcvtdq2ps, 2 vaddps", z_mix},
        };
        run("512 bits (AVX-512 VNNI), one thread:", z, (int)(sizeof z / sizeof z[0]), n, r);
        ran = 1;
    }
    if (__builtin_cpu_supports("avxvnni")) {
        const port_test y[] = {
            {"10 vpdpbusd ymm alone", y_alone},
            {"+ 4 vmulps", y_mul},
            {"+ 4 vcvtdq2ps", y_cvt},
            {"+ 4 vaddps", y_add},
            {"+ 4 vfmadd231ps", y_fma},
        };
        run("256 bits (AVX-VNNI), one thread:", y, (int)(sizeof y / sizeof y[0]), n, r);
        ran = 1;
    }
    if (!ran)
        printf("nibble_portbench: this CPU has neither AVX-512 VNNI nor AVX-VNNI; nothing to measure\n");
    return 0;
}
#endif
