/* CPU feature detection. Built WITHOUT any ISA flags (and outside LTO), so
 * it runs on every CPU the binary starts on; it only asks, never executes,
 * the instructions it reports.
 *
 * A feature counts only when the CPU has it (cpuid) AND the OS saves the
 * registers it uses across context switches (XCR0 read with XGETBV): a
 * kernel using YMM/ZMM on an OS that does not save them would see its
 * registers clobbered, or fault.
 *
 * On AArch64 the CPU's ID registers are not readable from user space
 * everywhere, so the OS is asked: the hwcaps in the auxiliary vector on
 * Linux, sysctl on macOS. The OS lists a feature only when it supports
 * it, so there is no separate register-state check. */
#if defined(__APPLE__) && !defined(_DARWIN_C_SOURCE)
#define _DARWIN_C_SOURCE 1 /* sysctlbyname under _POSIX_C_SOURCE */
#endif
#include "simd_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define NB_CPU_X86 1
#include <cpuid.h>
#if defined(__APPLE__)
#include <sys/sysctl.h>
#endif
#endif

#if defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#define NB_CPU_ARM 1
#if defined(__linux__)
#include <sys/auxv.h>
/* the bits of AT_HWCAP, as in the kernel's uapi asm/hwcap.h, for libcs
 * whose headers lack them */
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1ul << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1ul << 20)
#endif
#elif defined(__APPLE__)
#include <sys/sysctl.h>
#endif
#endif

/* Bit 31 marks the cache as filled (every real feature mask is < 2^31). */
#define CACHE_VALID (1u << 31)
static _Atomic unsigned cached;
static _Atomic unsigned disabled; /* test hook: features to pretend absent */

#ifdef NB_CPU_X86

typedef struct {
    unsigned a, b, c, d;
} regs4;

static regs4 cpuid(unsigned leaf, unsigned sub)
{
    regs4 r = {0, 0, 0, 0};
    __cpuid_count(leaf, sub, r.a, r.b, r.c, r.d);
    return r;
}

/* XGETBV(0) = XCR0, the state components the OS context-switches. Spelt
 * as bytes so no -mxsave is needed; valid only when CPUID says OSXSAVE. */
static unsigned long long xgetbv0(void)
{
    unsigned lo, hi;
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
    return (unsigned long long)hi << 32 | lo;
}

static unsigned detect(void)
{
    unsigned f = 0;
    unsigned maxleaf = cpuid(0, 0).a;
    if (maxleaf < 1)
        return 0;
    regs4 l1 = cpuid(1, 0);
    int osxsave = (l1.c >> 27) & 1;
    unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
    /* XCR0 bits: 1 SSE, 2 AVX (upper YMM), 5 opmask, 6 ZMM0-15 upper
     * halves, 7 ZMM16-31. */
    if ((xcr0 & 0x6) == 0x6)
        f |= SIMD_CPU_OS_YMM;
    if ((xcr0 & 0xe6) == 0xe6)
        f |= SIMD_CPU_OS_ZMM;
#if defined(__APPLE__)
    /* macOS turns the AVX-512 state on at a thread's first use, so XCR0
     * may not show it yet; the kernel says whether it will */
    if ((xcr0 & 0x6) == 0x6 && !(f & SIMD_CPU_OS_ZMM)) {
        int on = 0;
        size_t len = sizeof on;
        if (sysctlbyname("hw.optional.avx512f", &on, &len, NULL, 0) == 0 && on)
            f |= SIMD_CPU_OS_ZMM;
    }
#endif
    if ((l1.c >> 28) & 1) f |= SIMD_CPU_AVX;
    if ((l1.c >> 12) & 1) f |= SIMD_CPU_FMA;
    if ((l1.c >> 29) & 1) f |= SIMD_CPU_F16C;
    if (maxleaf >= 7) {
        regs4 l7 = cpuid(7, 0);
        if ((l7.b >> 5) & 1) f |= SIMD_CPU_AVX2;
        if ((l7.b >> 16) & 1) f |= SIMD_CPU_AVX512F;
        if ((l7.b >> 30) & 1) f |= SIMD_CPU_AVX512BW;
        if ((l7.b >> 31) & 1) f |= SIMD_CPU_AVX512VL;
        if ((l7.c >> 11) & 1) f |= SIMD_CPU_AVX512VNNI;
        if (l7.a >= 1) { /* sub-leaf 1 exists */
            regs4 l71 = cpuid(7, 1);
            if ((l71.a >> 4) & 1) f |= SIMD_CPU_AVXVNNI;
            if ((l71.d >> 4) & 1) f |= SIMD_CPU_AVXVNNIINT8;
        }
    }
    return f;
}

static void cpu_names(char vendor[13], char brand[49])
{
    regs4 r = cpuid(0, 0);
    memcpy(vendor, &r.b, 4);
    memcpy(vendor + 4, &r.d, 4);
    memcpy(vendor + 8, &r.c, 4);
    vendor[12] = 0;
    brand[0] = 0;
    if (cpuid(0x80000000u, 0).a >= 0x80000004u) {
        for (unsigned i = 0; i < 3; i++) {
            r = cpuid(0x80000002u + i, 0);
            memcpy(brand + 16 * i, &r, 16);
        }
        brand[48] = 0;
    }
}

#elif defined(NB_CPU_ARM)

static unsigned detect(void)
{
    unsigned f = 0;
#if defined(__linux__)
    unsigned long hw = getauxval(AT_HWCAP);
    if (hw & HWCAP_ASIMD) f |= SIMD_CPU_ASIMD;
    if (hw & HWCAP_ASIMDDP) f |= SIMD_CPU_ASIMDDP;
#elif defined(__APPLE__)
    f |= SIMD_CPU_ASIMD; /* every Apple arm64 CPU has it */
    int on = 0;
    size_t len = sizeof on;
    if (sysctlbyname("hw.optional.arm.FEAT_DotProd", &on, &len, NULL, 0) == 0 && on)
        f |= SIMD_CPU_ASIMDDP;
#else
    /* no query wired up: Advanced SIMD is part of every AArch64 ABI in
     * use, the dot product is assumed absent */
    f |= SIMD_CPU_ASIMD;
#endif
    return f;
}

/* vendor: empty; brand: the marketing name where the OS gives one */
static void cpu_names(char vendor[13], char brand[49])
{
    vendor[0] = brand[0] = 0;
#if defined(__APPLE__)
    size_t len = 49;
    if (sysctlbyname("machdep.cpu.brand_string", brand, &len, NULL, 0) != 0)
        brand[0] = 0;
    brand[48] = 0;
#endif
}

#else

static unsigned detect(void) { return 0; }
static void cpu_names(char vendor[13], char brand[49]) { vendor[0] = brand[0] = 0; }

#endif

unsigned simd_cpu_features(void)
{
    unsigned f = atomic_load_explicit(&cached, memory_order_relaxed);
    if (!(f & CACHE_VALID)) {
        f = detect() | CACHE_VALID;
        atomic_store_explicit(&cached, f, memory_order_relaxed);
    }
    return f & ~CACHE_VALID & ~atomic_load_explicit(&disabled, memory_order_relaxed);
}

void simd_cpu_disable(unsigned mask) { atomic_store_explicit(&disabled, mask, memory_order_relaxed); }

static const struct {
    unsigned bit;
    const char *name;
} feature_names[] = {
    {SIMD_CPU_AVX, "avx"},
    {SIMD_CPU_AVX2, "avx2"},
    {SIMD_CPU_FMA, "fma"},
    {SIMD_CPU_F16C, "f16c"},
    {SIMD_CPU_AVX512F, "avx512f"},
    {SIMD_CPU_AVX512BW, "avx512bw"},
    {SIMD_CPU_AVX512VL, "avx512vl"},
    {SIMD_CPU_AVX512VNNI, "avx512vnni"},
    {SIMD_CPU_AVXVNNI, "avxvnni"},
    {SIMD_CPU_AVXVNNIINT8, "avxvnniint8"},
};

static const struct {
    unsigned bit;
    const char *name;
} arm_feature_names[] = {
    {SIMD_CPU_ASIMD, "asimd"},
    {SIMD_CPU_ASIMDDP, "asimddp"},
};

/* Appends to buf at *len, never past n-1, always NUL-terminated. */
static void append(char *buf, size_t n, size_t *len, const char *s)
{
    if (*len + 1 >= n)
        return;
    int w = snprintf(buf + *len, n - *len, "%s", s);
    if (w > 0)
        *len += (size_t)w < n - *len ? (size_t)w : n - *len - 1;
}

void simd_cpu_describe(char *buf, size_t n)
{
    if (!buf || n == 0)
        return;
    buf[0] = 0;
    size_t len = 0;
#ifdef NB_CPU_X86
    char vendor[13], brand[49];
    cpu_names(vendor, brand);
    (void)arm_feature_names;
    const char *b = brand;
    while (*b == ' ')
        b++;
    char trimmed[49];
    snprintf(trimmed, sizeof trimmed, "%s", b);
    for (size_t i = strlen(trimmed); i > 0 && trimmed[i - 1] == ' '; i--)
        trimmed[i - 1] = 0;
    append(buf, n, &len, "x86-64 ");
    append(buf, n, &len, *trimmed ? trimmed : "(no brand string)");
    append(buf, n, &len, " [");
    append(buf, n, &len, vendor);
    append(buf, n, &len, "]:");
    unsigned f = simd_cpu_features();
    for (size_t i = 0; i < sizeof feature_names / sizeof feature_names[0]; i++) {
        append(buf, n, &len, (f & feature_names[i].bit) ? " " : " -");
        append(buf, n, &len, feature_names[i].name);
    }
    append(buf, n, &len, "; OS saves");
    append(buf, n, &len, (f & SIMD_CPU_OS_YMM) ? " ymm" : " -ymm");
    append(buf, n, &len, (f & SIMD_CPU_OS_ZMM) ? " zmm" : " -zmm");
#elif defined(NB_CPU_ARM)
    char vendor[13], brand[49];
    cpu_names(vendor, brand);
    (void)feature_names;
    append(buf, n, &len, "aarch64");
    if (*brand) {
        append(buf, n, &len, " ");
        append(buf, n, &len, brand);
    }
    append(buf, n, &len, ":");
    unsigned f = simd_cpu_features();
    for (size_t i = 0; i < sizeof arm_feature_names / sizeof arm_feature_names[0]; i++) {
        append(buf, n, &len, (f & arm_feature_names[i].bit) ? " " : " -");
        append(buf, n, &len, arm_feature_names[i].name);
    }
#else
    (void)cpu_names;
    (void)feature_names;
    (void)arm_feature_names;
    append(buf, n, &len, "neither x86-64 nor aarch64: no CPU feature detection in this build");
#endif
}
