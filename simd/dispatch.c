/* Kernel-set selection. Built without any ISA flags, so it runs on every
 * CPU the binary can start on. */
#include "simd_internal.h"

#include <string.h>

simd_kernel_set simd_active;
static enum simd_kernel current = SIMD_K_SCALAR;
static int initialised;

static const char *const kernel_names[SIMD_K_COUNT] = {
    "scalar", "avx2", "avxvnni", "avx512vnni", "avxvnniint8", "neon", "neon-dotprod",
};

/* Fallback batch form: one dot per token. A set that can keep weights in
 * registers across tokens installs its own. */
static void dot_batch_generic(simd_dot_fn dot, size_t n, const void *w, const void *a, size_t astride,
                              size_t nt, float *out, size_t ostride)
{
    for (size_t t = 0; t < nt; t++)
        out[t * ostride] = dot(n, w, (const char *)a + t * astride);
}

#define BATCH_FOR(T)                                                                            \
    static void batch_##T(size_t n, const void *w, const void *a, size_t as, size_t nt, float *o, \
                          size_t os)                                                            \
    {                                                                                           \
        dot_batch_generic(simd_active.dot[T], n, w, a, as, nt, o, os);                          \
    }
BATCH_FOR(SIMD_F32)
BATCH_FOR(SIMD_F16)
BATCH_FOR(SIMD_BF16)
BATCH_FOR(SIMD_Q8_0)
BATCH_FOR(SIMD_Q4_0)
BATCH_FOR(SIMD_Q4_1)
BATCH_FOR(SIMD_Q5_0)
BATCH_FOR(SIMD_Q5_1)

static const simd_dot_batch_fn generic_batch[SIMD_TYPE_COUNT] = {
    [SIMD_F32] = batch_SIMD_F32,   [SIMD_F16] = batch_SIMD_F16,   [SIMD_BF16] = batch_SIMD_BF16,
    [SIMD_Q8_0] = batch_SIMD_Q8_0, [SIMD_Q4_0] = batch_SIMD_Q4_0, [SIMD_Q4_1] = batch_SIMD_Q4_1,
    [SIMD_Q5_0] = batch_SIMD_Q5_0, [SIMD_Q5_1] = batch_SIMD_Q5_1,
};

static void install(const simd_kernel_set *set)
{
    simd_kernel_set s;
    simd_set_scalar(&s);
    /* the chosen set overrides what it provides */
    if (set->q8a_quant) s.q8a_quant = set->q8a_quant;
    if (set->dot_f32) s.dot_f32 = set->dot_f32;
    for (int t = 0; t < SIMD_TYPE_COUNT; t++) {
        if (set->dot[t]) s.dot[t] = set->dot[t];
        s.dot_batch[t] = set->dot_batch[t] ? set->dot_batch[t] : generic_batch[t];
    }
    simd_active = s;
    for (int t = 0; t < SIMD_TYPE_COUNT; t++) {
        simd_table[t].dot = s.dot[t];
        simd_table[t].dot_batch = s.dot[t] ? s.dot_batch[t] : NULL;
    }
}

const char *simd_kernel_name(enum simd_kernel k)
{
    return (unsigned)k < SIMD_K_COUNT ? kernel_names[k] : "?";
}

int simd_kernel_find(const char *name)
{
    for (int k = 0; k < SIMD_K_COUNT; k++)
        if (strcmp(name, kernel_names[k]) == 0)
            return k;
    return -1;
}

int simd_kernel_supported(enum simd_kernel k, const char **why)
{
    if (k == SIMD_K_SCALAR)
        return 1;
    if (why)
        *why = (unsigned)k < SIMD_K_COUNT ? "not built into this version of nibble" : "unknown kernel set";
    return 0;
}

int simd_kernel_select(enum simd_kernel k)
{
    if (!simd_kernel_supported(k, NULL))
        return -1;
    simd_kernel_set empty;
    memset(&empty, 0, sizeof empty);
    install(&empty);
    current = k;
    initialised = 1;
    return 0;
}

enum simd_kernel simd_kernel_current(void) { return current; }

void simd_init(void)
{
    if (initialised)
        return;
    enum simd_kernel best = SIMD_K_SCALAR;
    for (int k = SIMD_K_COUNT - 1; k > SIMD_K_SCALAR; k--)
        if (simd_kernel_supported((enum simd_kernel)k, NULL)) {
            best = (enum simd_kernel)k;
            break;
        }
    simd_kernel_select(best);
}

float simd_dot_f32(size_t n, const float *a, const float *b)
{
    if (!initialised)
        simd_init();
    return simd_active.dot_f32(n, a, b);
}
