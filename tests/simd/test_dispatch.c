/* Kernel-set selection: names, the reasons given for sets this CPU cannot
 * run, refusing to force them, the choice simd_init makes, the CPU line. */
#include <stdint.h>

#include "simd_internal.h"
#include "testutil.h"

static int contains(const char *s, const char *part) { return s && strstr(s, part) != NULL; }

static int is_x86(enum simd_kernel k)
{
    return k == SIMD_K_AVX2 || k == SIMD_K_AVXVNNI || k == SIMD_K_AVX512VNNI || k == SIMD_K_AVXVNNIINT8;
}

/* Set k must be refused, with a reason containing `reason`, and selecting
 * it must fail and leave the current set alone. */
static void check_refused(enum simd_kernel k, const char *reason)
{
    const char *why = NULL;
    CHECKF(!simd_kernel_supported(k, &why), "%s should be unsupported", simd_kernel_name(k));
    CHECKF(contains(why, reason), "%s: reason \"%s\", want \"%s\"", simd_kernel_name(k), why ? why : "(none)",
           reason);
    enum simd_kernel before = simd_kernel_current();
    CHECKF(simd_kernel_select(k) == -1, "forcing %s should fail", simd_kernel_name(k));
    CHECK(simd_kernel_current() == before);
}

/* Feature flags the kernel lists in /proc/cpuinfo must be seen by the
 * detection too (Linux only; a kernel may know fewer flags than the CPU
 * has, so only one direction is checked). The line is "flags" on x86 and
 * "Features" on Arm; under qemu-user the file is the host's, whose line
 * has the other name, so the check is then skipped. */
#if defined(__x86_64__)
#define CPUINFO_KEY "flags"
static const struct {
    const char *flag;
    unsigned bit;
} cpuinfo_map[] = {
    {"avx2", SIMD_CPU_AVX2},         {"fma", SIMD_CPU_FMA},           {"f16c", SIMD_CPU_F16C},
    {"avx512f", SIMD_CPU_AVX512F},   {"avx512bw", SIMD_CPU_AVX512BW}, {"avx512vl", SIMD_CPU_AVX512VL},
    {"avx512_vnni", SIMD_CPU_AVX512VNNI}, {"avx_vnni", SIMD_CPU_AVXVNNI},
};
#elif defined(__aarch64__)
#define CPUINFO_KEY "Features"
static const struct {
    const char *flag;
    unsigned bit;
} cpuinfo_map[] = {
    {"asimd", SIMD_CPU_ASIMD},
    {"asimddp", SIMD_CPU_ASIMDDP},
};
#endif

/* One dispatch table: the public trait rows are simd_table's rows, every
 * set installs into them and into the set-wide slots beside them, and the
 * public entry points call through those slots. */
static int stub_calls;
static float stub_dot_f32(size_t n, const float *a, const float *b)
{
    (void)a, (void)b;
    stub_calls++;
    return (float)n;
}

static void check_one_table(void)
{
    for (int k = 0; k < SIMD_K_COUNT; k++) {
        if (!simd_kernel_supported((enum simd_kernel)k, NULL))
            continue;
        CHECK(simd_kernel_select((enum simd_kernel)k) == 0);
        const char *name = simd_kernel_name((enum simd_kernel)k);
        CHECKF(simd_table.q8a_quant && simd_table.q8k_quant && simd_table.dot_f32 && simd_table.attn &&
                   simd_table.silu_mul && simd_table.gelu,
               "%s left a set-wide slot empty", name);
        simd_kernel_set s = simd_installed_set();
        for (int t = 0; t < SIMD_TYPE_COUNT; t++) {
            const simd_traits *tr = simd_type_traits(t);
            CHECKF(!tr || tr == &simd_table.type[t], "%s: the traits of type %d are not the table's row", name, t);
            if (!tr)
                continue;
            /* a type with a dot kernel has every plain form; one without has none */
            CHECKF(!tr->dot == !tr->dot_batch && !tr->dot == !tr->dot_rows, "%s: %s has only some kernel forms",
                   name, tr->name);
            CHECKF(tr->dot || !tr->dot_packed, "%s: %s is packed without a dot", name, tr->name);
            CHECKF(s.dot[t] == tr->dot && s.dot_rows[t] == tr->dot_rows && s.dot_packed[t] == tr->dot_packed,
                   "%s: the installed set read back differs for %s", name, tr->name);
        }
        CHECK(simd_type_traits(SIMD_Q4_0)->dot && simd_type_traits(SIMD_Q4_K)->dot);
        CHECK(s.q8a_quant == simd_table.q8a_quant && s.attn == simd_table.attn);
    }
    /* the entry point reads the table's slot */
    float (*saved)(size_t, const float *, const float *) = simd_table.dot_f32;
    simd_table.dot_f32 = stub_dot_f32;
    float x[8] = {0};
    CHECK(simd_dot_f32(8, x, x) == 8.0f && stub_calls == 1);
    simd_table.dot_f32 = saved;
}

#ifdef CPUINFO_KEY
static void check_against_cpuinfo(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    static char line[1 << 16];
    int found = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, CPUINFO_KEY, strlen(CPUINFO_KEY)) == 0) {
            found = 1;
            break;
        }
    fclose(f);
    if (!found)
        return;
    unsigned have = simd_cpu_features();
    for (size_t i = 0; i < sizeof cpuinfo_map / sizeof cpuinfo_map[0]; i++) {
        char word[64];
        snprintf(word, sizeof word, " %s", cpuinfo_map[i].flag);
        const char *p = line;
        int listed = 0;
        size_t len = strlen(word);
        while ((p = strstr(p, word)) != NULL) {
            if (p[len] == ' ' || p[len] == '\n' || p[len] == 0) {
                listed = 1;
                break;
            }
            p += len;
        }
        if (listed)
            CHECKF(have & cpuinfo_map[i].bit, "/proc/cpuinfo lists %s but detection missed it",
                   cpuinfo_map[i].flag);
    }
}
#endif

int main(void)
{
    /* simd_init picks the first supported set in the documented order */
    simd_init();
    static const enum simd_kernel pref[] = {SIMD_K_AVX512VNNI, SIMD_K_AVXVNNIINT8, SIMD_K_AVXVNNI,
                                            SIMD_K_AVX2,       SIMD_K_NEON_DOTPROD, SIMD_K_NEON};
    enum simd_kernel best = SIMD_K_SCALAR;
    for (size_t i = 0; i < sizeof pref / sizeof pref[0]; i++)
        if (simd_kernel_supported(pref[i], NULL)) {
            best = pref[i];
            break;
        }
    CHECKF(simd_kernel_current() == best, "simd_init picked %s, want %s", simd_kernel_name(simd_kernel_current()),
           simd_kernel_name(best));
    simd_init(); /* idempotent */
    CHECK(simd_kernel_current() == best);

    /* names */
    for (int k = 0; k < SIMD_K_COUNT; k++) {
        const char *name = simd_kernel_name((enum simd_kernel)k);
        CHECK(strcmp(name, "?") != 0);
        CHECK(simd_kernel_find(name) == k);
    }
    CHECK(simd_kernel_find("avx512vnni") == SIMD_K_AVX512VNNI);
    CHECK(simd_kernel_find("neon-dotprod") == SIMD_K_NEON_DOTPROD);
    CHECK(simd_kernel_find("nope") == -1);
    CHECK(simd_kernel_find("") == -1);
    CHECK(simd_kernel_find("AVX2") == -1);
    CHECK(simd_kernel_find("avx2 ") == -1);
    CHECK(simd_kernel_find(NULL) == -1);
    CHECK(strcmp(simd_kernel_name(SIMD_K_COUNT), "?") == 0);
    CHECK(strcmp(simd_kernel_name((enum simd_kernel)-1), "?") == 0);

    /* out of range and scalar */
    check_refused(SIMD_K_COUNT, "unknown kernel set");
    check_refused((enum simd_kernel)-1, "unknown kernel set");
    const char *why = "untouched";
    CHECK(simd_kernel_supported(SIMD_K_SCALAR, &why) == 1);
    CHECK(strcmp(why, "untouched") == 0); /* no reason when supported */
    CHECK(simd_kernel_supported(SIMD_K_SCALAR, NULL) == 1);

    /* every refusal names something; every accepted set installs */
    for (int k = 0; k < SIMD_K_COUNT; k++) {
        why = NULL;
        if (simd_kernel_supported((enum simd_kernel)k, &why)) {
            CHECK(simd_kernel_select((enum simd_kernel)k) == 0);
            CHECK(simd_kernel_current() == (enum simd_kernel)k);
            printf("%-13s usable\n", simd_kernel_name((enum simd_kernel)k));
        } else {
            CHECK(why && *why);
            printf("%-13s refused: %s\n", simd_kernel_name((enum simd_kernel)k), why ? why : "");
            check_refused((enum simd_kernel)k, why ? why : "");
        }
    }

#if defined(__x86_64__)
    check_refused(SIMD_K_NEON, "not built for this architecture");
    check_refused(SIMD_K_NEON_DOTPROD, "not built for this architecture");
    check_against_cpuinfo();
    if (simd_kernel_supported(SIMD_K_AVX2, NULL)) {
        /* pretend features are missing: each set names what it lacks */
        simd_cpu_disable(SIMD_CPU_AVXVNNI);
        check_refused(SIMD_K_AVXVNNI, "CPU lacks AVX-VNNI");
        simd_cpu_disable(SIMD_CPU_AVXVNNIINT8);
        check_refused(SIMD_K_AVXVNNIINT8, "CPU lacks AVX-VNNI-INT8");
        simd_cpu_disable(SIMD_CPU_AVX512VNNI);
        check_refused(SIMD_K_AVX512VNNI, "CPU lacks AVX-512 VNNI");
        simd_cpu_disable(SIMD_CPU_AVX512BW);
        check_refused(SIMD_K_AVX512VNNI, "CPU lacks AVX-512BW");
        simd_cpu_disable(SIMD_CPU_OS_ZMM);
        check_refused(SIMD_K_AVX512VNNI, "OS does not save AVX-512");
        simd_cpu_disable(SIMD_CPU_OS_YMM);
        for (int k = 0; k < SIMD_K_COUNT; k++)
            if (is_x86((enum simd_kernel)k))
                check_refused((enum simd_kernel)k, "OS does not save AVX");
        simd_cpu_disable(SIMD_CPU_AVX2 | SIMD_CPU_AVX512F);
        for (int k = 0; k < SIMD_K_COUNT; k++)
            if (is_x86((enum simd_kernel)k))
                check_refused((enum simd_kernel)k, "CPU lacks AVX2");
        simd_cpu_disable(SIMD_CPU_F16C);
        check_refused(SIMD_K_AVX2, "CPU lacks F16C");
        simd_cpu_disable(0);
        CHECK(simd_kernel_supported(SIMD_K_AVX2, NULL));
        CHECK(simd_kernel_select(SIMD_K_AVX2) == 0);
    } else {
        printf("(this CPU has no AVX2: forced-feature checks skipped)\n");
    }
#elif defined(__aarch64__)
    for (int k = 0; k < SIMD_K_COUNT; k++)
        if (is_x86((enum simd_kernel)k))
            check_refused((enum simd_kernel)k, "not built for this architecture");
    check_against_cpuinfo();
    if (simd_kernel_supported(SIMD_K_NEON, NULL)) {
        /* pretend features are missing: each set names what it lacks */
        const char *dp_why = NULL;
        /* a compiler without +dotprod builds only the baseline set */
        int dp_built = simd_kernel_supported(SIMD_K_NEON_DOTPROD, &dp_why) || !contains(dp_why, "not built");
        simd_cpu_disable(SIMD_CPU_ASIMDDP);
        if (dp_built)
            check_refused(SIMD_K_NEON_DOTPROD, "CPU lacks the dot product instructions (asimddp)");
        CHECK(simd_kernel_supported(SIMD_K_NEON, NULL));
        simd_cpu_disable(SIMD_CPU_ASIMD);
        check_refused(SIMD_K_NEON, "CPU lacks Advanced SIMD");
        if (dp_built)
            check_refused(SIMD_K_NEON_DOTPROD, "CPU lacks Advanced SIMD");
        simd_cpu_disable(0);
        CHECK(simd_kernel_select(SIMD_K_NEON) == 0);
    } else {
        printf("(neon not usable here: forced-feature checks skipped)\n");
    }
#endif

    /* the CPU line: one line, NUL-terminated, truncated safely */
    char buf[512];
    memset(buf, 'x', sizeof buf);
    simd_cpu_describe(buf, sizeof buf);
    CHECK(memchr(buf, 0, sizeof buf) != NULL);
    CHECK(strlen(buf) > 0);
    CHECK(strchr(buf, '\n') == NULL);
    printf("cpu: %s\n", buf);
    char small[12];
    memset(small, 'x', sizeof small);
    simd_cpu_describe(small, sizeof small);
    CHECK(strlen(small) == sizeof small - 1 && strncmp(small, buf, sizeof small - 1) == 0);
    char one[1] = {'x'};
    simd_cpu_describe(one, 1);
    CHECK(one[0] == 0);
    simd_cpu_describe(NULL, 0); /* no crash */

    check_one_table();
    CHECK(simd_kernel_select(SIMD_K_SCALAR) == 0);
    CHECK(simd_kernel_current() == SIMD_K_SCALAR);
    return tu_result("test_dispatch");
}
