/* Kernel-set selection. Built without any ISA flags, so it runs on every
 * CPU the binary can start on. */
#include "simd_internal.h"
#include "kquants.h"
#include "mxfp4.h"
#include "lquants.h"
#include "act.h"
#include "attn.h"
#include "attn_q.h"

#include <string.h>

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
        dot_batch_generic(simd_table.type[T].dot, n, w, a, as, nt, o, os);                          \
    }                                                                                           \
    static void rows_##T(size_t n, const void *w, size_t ws, size_t nr, const void *a, size_t as, \
                         size_t nt, float *o, size_t os)                                        \
    {                                                                                           \
        simd_dot_batch_fn b = simd_table.type[T].dot_batch;                                         \
        for (size_t r = 0; r < nr; r++)                                                         \
            b(n, (const char *)w + r * ws, a, as, nt, o + r, os);                               \
    }
BATCH_FOR(SIMD_F32)
BATCH_FOR(SIMD_F16)
BATCH_FOR(SIMD_BF16)
BATCH_FOR(SIMD_Q8_0)
BATCH_FOR(SIMD_Q4_0)
BATCH_FOR(SIMD_Q4_1)
BATCH_FOR(SIMD_Q5_0)
BATCH_FOR(SIMD_Q5_1)
BATCH_FOR(SIMD_Q4_K)
BATCH_FOR(SIMD_Q5_K)
BATCH_FOR(SIMD_Q6_K)

static const simd_dot_batch_fn generic_batch[SIMD_TYPE_COUNT] = {
    [SIMD_F32] = batch_SIMD_F32,   [SIMD_F16] = batch_SIMD_F16,   [SIMD_BF16] = batch_SIMD_BF16,
    [SIMD_Q8_0] = batch_SIMD_Q8_0, [SIMD_Q4_0] = batch_SIMD_Q4_0, [SIMD_Q4_1] = batch_SIMD_Q4_1,
    [SIMD_Q5_0] = batch_SIMD_Q5_0, [SIMD_Q5_1] = batch_SIMD_Q5_1,
    [SIMD_Q4_K] = batch_SIMD_Q4_K, [SIMD_Q5_K] = batch_SIMD_Q5_K, [SIMD_Q6_K] = batch_SIMD_Q6_K,
};

/* Fallback row form: dot_batch once per row. */
static const simd_dot_rows_fn generic_rows[SIMD_TYPE_COUNT] = {
    [SIMD_F32] = rows_SIMD_F32,   [SIMD_F16] = rows_SIMD_F16,   [SIMD_BF16] = rows_SIMD_BF16,
    [SIMD_Q8_0] = rows_SIMD_Q8_0, [SIMD_Q4_0] = rows_SIMD_Q4_0, [SIMD_Q4_1] = rows_SIMD_Q4_1,
    [SIMD_Q5_0] = rows_SIMD_Q5_0, [SIMD_Q5_1] = rows_SIMD_Q5_1,
    [SIMD_Q4_K] = rows_SIMD_Q4_K, [SIMD_Q5_K] = rows_SIMD_Q5_K, [SIMD_Q6_K] = rows_SIMD_Q6_K,
};

static void install(const simd_kernel_set *set)
{
    simd_kernel_set s;
    memset(&s, 0, sizeof s); /* the scalar fillers set only the types they have kernels for */
    simd_set_scalar(&s);
    simd_set_kquants_scalar(&s); /* K-quant dots (kquants.c) until a set has its own */
    /* the chosen set overrides what it provides */
    if (set->q8a_quant) s.q8a_quant = set->q8a_quant;
    if (set->q8k_quant) s.q8k_quant = set->q8k_quant;
    if (set->dot_f32) s.dot_f32 = set->dot_f32;
    s.attn = set->attn ? set->attn : simd_attn_ref;
    s.attn_tile = set->attn_tile ? set->attn_tile : simd_attn_tile_ref;
    s.attn_q = set->attn_q ? set->attn_q : simd_attn_q_ref;
    s.attn_merge = set->attn_merge ? set->attn_merge : simd_attn_merge_ref;
    s.silu_mul = set->silu_mul ? set->silu_mul : simd_silu_mul_ref;
    s.gelu = set->gelu ? set->gelu : simd_gelu_ref;
    s.swiglu_oai = set->swiglu_oai ? set->swiglu_oai : simd_swiglu_oai_ref;
    s.f16_row = set->f16_row ? set->f16_row : simd_f32_to_f16_row_ref;
    s.deq_f16_row = set->deq_f16_row ? set->deq_f16_row : simd_deq_f16_row_ref;
    for (int t = 0; t < SIMD_TYPE_COUNT; t++) {
        if (set->dot[t]) s.dot[t] = set->dot[t];
        s.dot_batch[t] = set->dot_batch[t] ? set->dot_batch[t] : generic_batch[t];
        s.dot_rows[t] = set->dot_rows[t] ? set->dot_rows[t] : generic_rows[t];
        s.dot_packed[t] = simd_pack_has_layout(t) ? set->dot_packed[t] : NULL;
    }
    simd_table.q8a_quant = s.q8a_quant;
    simd_table.q8k_quant = s.q8k_quant;
    simd_table.dot_f32 = s.dot_f32;
    simd_table.attn = s.attn;
    simd_table.attn_tile = s.attn_tile;
    simd_table.attn_q = s.attn_q;
    simd_table.attn_merge = s.attn_merge;
    simd_table.silu_mul = s.silu_mul;
    simd_table.gelu = s.gelu;
    simd_table.swiglu_oai = s.swiglu_oai;
    simd_table.f16_row = s.f16_row;
    simd_table.deq_f16_row = s.deq_f16_row;
    /* a type without a dot kernel gets none of the other forms either */
    for (int t = 0; t < SIMD_TYPE_COUNT; t++) {
        simd_traits *row = &simd_table.type[t];
        row->dot = s.dot[t];
        row->dot_batch = s.dot[t] ? s.dot_batch[t] : NULL;
        row->dot_rows = s.dot[t] ? s.dot_rows[t] : NULL;
        row->dot_packed = s.dot[t] ? s.dot_packed[t] : NULL;
    }
}

simd_kernel_set simd_installed_set(void)
{
    if (!initialised)
        simd_init();
    simd_kernel_set s = {
        .q8a_quant = simd_table.q8a_quant, .q8k_quant = simd_table.q8k_quant, .dot_f32 = simd_table.dot_f32,
        .attn = simd_table.attn,           .attn_tile = simd_table.attn_tile, .attn_q = simd_table.attn_q,
        .attn_merge = simd_table.attn_merge, .silu_mul = simd_table.silu_mul, .gelu = simd_table.gelu,
        .swiglu_oai = simd_table.swiglu_oai, .f16_row = simd_table.f16_row,
        .deq_f16_row = simd_table.deq_f16_row,
    };
    for (int t = 0; t < SIMD_TYPE_COUNT; t++) {
        s.dot[t] = simd_table.type[t].dot;
        s.dot_batch[t] = simd_table.type[t].dot_batch;
        s.dot_rows[t] = simd_table.type[t].dot_rows;
        s.dot_packed[t] = simd_table.type[t].dot_packed;
    }
    return s;
}

/* What each set needs, in the order the reasons are reported. */
typedef struct {
    unsigned bit;
    const char *why;
} need;

static const need needs_avx2[] = {
    {SIMD_CPU_AVX, "CPU lacks AVX"},   {SIMD_CPU_AVX2, "CPU lacks AVX2"},
    {SIMD_CPU_FMA, "CPU lacks FMA"},   {SIMD_CPU_F16C, "CPU lacks F16C"},
    {SIMD_CPU_OS_YMM, "OS does not save AVX (YMM) registers"},
};
static const need needs_avx512[] = {
    {SIMD_CPU_AVX512F, "CPU lacks AVX-512F"},
    {SIMD_CPU_AVX512BW, "CPU lacks AVX-512BW"},
    {SIMD_CPU_AVX512VL, "CPU lacks AVX-512VL"},
    {SIMD_CPU_AVX512VNNI, "CPU lacks AVX-512 VNNI"},
    {SIMD_CPU_OS_ZMM, "OS does not save AVX-512 (ZMM and mask) registers"},
};

static const char *missing(const need *n, size_t count, unsigned have)
{
    for (size_t i = 0; i < count; i++)
        if (!(have & n[i].bit))
            return n[i].why;
    return NULL;
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The sets built into this binary (CMake defines the NIBBLE_*_SET(S)
 * macros for the files it compiles); the scalar set needs no filler. */
static void (*const fillers[SIMD_K_COUNT])(simd_kernel_set *) = {
    [SIMD_K_SCALAR] = NULL,
#if defined(NIBBLE_X86_SETS)
    [SIMD_K_AVX2] = simd_set_avx2,
    [SIMD_K_AVXVNNI] = simd_set_avxvnni,
    [SIMD_K_AVX512VNNI] = simd_set_avx512vnni,
    [SIMD_K_AVXVNNIINT8] = simd_set_avxvnniint8,
#endif
#if defined(NIBBLE_NEON_SET)
    [SIMD_K_NEON] = simd_set_neon,
#endif
#if defined(NIBBLE_NEON_DOTPROD_SET)
    [SIMD_K_NEON_DOTPROD] = simd_set_neon_dotprod,
#endif
};

/* Their K-quant kernels (kquants_x86.h / kquants_neon.h), built into the
 * same files. */
static void (*const kfillers[SIMD_K_COUNT])(simd_kernel_set *) = {
    [SIMD_K_SCALAR] = NULL,
#if defined(NIBBLE_X86_SETS)
    [SIMD_K_AVX2] = simd_set_kquants_avx2,
    [SIMD_K_AVXVNNI] = simd_set_kquants_avxvnni,
    [SIMD_K_AVX512VNNI] = simd_set_kquants_avx512vnni,
    [SIMD_K_AVXVNNIINT8] = simd_set_kquants_avxvnniint8,
#endif
#if defined(NIBBLE_NEON_SET)
    [SIMD_K_NEON] = simd_set_kquants_neon,
#endif
#if defined(NIBBLE_NEON_DOTPROD_SET)
    [SIMD_K_NEON_DOTPROD] = simd_set_kquants_neon_dotprod,
#endif
};

#if defined(__x86_64__) || defined(_M_X64)
#define ARCH_X86 1
#else
#define ARCH_X86 0
#endif
#if defined(__aarch64__) || defined(_M_ARM64)
#define ARCH_ARM 1
#else
#define ARCH_ARM 0
#endif

static int is_x86_set(enum simd_kernel k)
{
    return k == SIMD_K_AVX2 || k == SIMD_K_AVXVNNI || k == SIMD_K_AVX512VNNI || k == SIMD_K_AVXVNNIINT8;
}

static int is_arm_set(enum simd_kernel k) { return k == SIMD_K_NEON || k == SIMD_K_NEON_DOTPROD; }

/* Why set k cannot run here, or NULL if it can. */
static const char *unsupported(enum simd_kernel k)
{
    if ((unsigned)k >= SIMD_K_COUNT)
        return "unknown kernel set";
    if (k == SIMD_K_SCALAR)
        return NULL;
    if ((is_x86_set(k) && !ARCH_X86) || (is_arm_set(k) && !ARCH_ARM))
        return "not built for this architecture";
    if (!fillers[k])
        return "not built into this version of nibble";
    unsigned have = simd_cpu_features();
    if (is_arm_set(k)) {
        if (!(have & SIMD_CPU_ASIMD))
            return "CPU lacks Advanced SIMD (asimd)";
        if (k == SIMD_K_NEON_DOTPROD && !(have & SIMD_CPU_ASIMDDP))
            return "CPU lacks the dot product instructions (asimddp)";
        return NULL;
    }
    const char *why = missing(needs_avx2, COUNT(needs_avx2), have);
    if (why)
        return why;
    switch (k) {
    case SIMD_K_AVXVNNI:
        return have & SIMD_CPU_AVXVNNI ? NULL : "CPU lacks AVX-VNNI";
    case SIMD_K_AVXVNNIINT8:
        return have & SIMD_CPU_AVXVNNIINT8 ? NULL : "CPU lacks AVX-VNNI-INT8";
    case SIMD_K_AVX512VNNI:
        return missing(needs_avx512, COUNT(needs_avx512), have);
    default:
        return NULL;
    }
}

const char *simd_kernel_name(enum simd_kernel k)
{
    return (unsigned)k < SIMD_K_COUNT ? kernel_names[k] : "?";
}

int simd_kernel_find(const char *name)
{
    if (!name)
        return -1;
    for (int k = 0; k < SIMD_K_COUNT; k++)
        if (strcmp(name, kernel_names[k]) == 0)
            return k;
    return -1;
}

int simd_kernel_supported(enum simd_kernel k, const char **why)
{
    const char *w = unsupported(k);
    if (w && why)
        *why = w;
    return w == NULL;
}

int simd_kernel_select(enum simd_kernel k)
{
    if (!simd_kernel_supported(k, NULL))
        return -1;
    simd_kernel_set set;
    memset(&set, 0, sizeof set);
    if (fillers[k])
        fillers[k](&set);
    if (kfillers[k])
        kfillers[k](&set);
    simd_set_mxfp4(k, &set); /* every set's MXFP4 kernels, scalar included (mxfp4.c) */
    simd_set_lquants(k, &set); /* q2_k, q3_k, iq4_nl, iq4_xs (lquants.c) */
    simd_set_attn(k, &set);  /* attention (attn.c) */
    simd_set_act(k, &set);   /* element-wise activations (act.c) */
    install(&set);
    current = k;
    initialised = 1;
    return 0;
}

enum simd_kernel simd_kernel_current(void) { return current; }

/* Fastest first (measured with nibble_kbench, see bench/kernels_bench.c):
 * 512-bit VNNI, then the 256-bit VNNI forms, then plain AVX2. */
static const enum simd_kernel preference[] = {
    SIMD_K_AVX512VNNI, SIMD_K_AVXVNNIINT8, SIMD_K_AVXVNNI, SIMD_K_AVX2,
    SIMD_K_NEON_DOTPROD, SIMD_K_NEON,
};

void simd_init(void)
{
    if (initialised)
        return;
    enum simd_kernel best = SIMD_K_SCALAR;
    for (size_t i = 0; i < COUNT(preference); i++)
        if (simd_kernel_supported(preference[i], NULL)) {
            best = preference[i];
            break;
        }
    simd_kernel_select(best);
}

float simd_dot_f32(size_t n, const float *a, const float *b)
{
    if (!initialised)
        simd_init();
    return simd_table.dot_f32(n, a, b);
}

void simd_attn_chunk(const simd_attn_args *a)
{
    if (!initialised)
        simd_init();
    simd_table.attn(a);
}

void simd_attn_tile(const simd_attn_args *a, size_t nt, size_t qtstride, size_t ptstride, float *kvbuf)
{
    if (!initialised)
        simd_init();
    simd_table.attn_tile(a, nt, qtstride, ptstride, kvbuf);
}

void simd_attn_merge(size_t hd, size_t nchunks, const float *part, size_t cstride, float *out)
{
    if (!initialised)
        simd_init();
    simd_table.attn_merge(hd, nchunks, part, cstride, NULL, out);
}

void simd_attn_merge_sink(size_t hd, size_t nchunks, const float *part, size_t cstride, float sink, float *out)
{
    if (!initialised)
        simd_init();
    simd_table.attn_merge(hd, nchunks, part, cstride, &sink, out);
}

void simd_attn_q_tile(const simd_attn_q_args *a, size_t nt, size_t qtstride, size_t ptstride)
{
    if (!initialised)
        simd_init();
    simd_table.attn_q(a, nt, qtstride, ptstride);
}

void simd_f32_to_f16_row(const float *src, simd_f16 *dst, size_t n)
{
    if (!initialised)
        simd_init();
    simd_table.f16_row(src, dst, n);
}

void simd_deq_f16_row(int type, const void *blocks, size_t n, simd_f16 *dst)
{
    if (!initialised)
        simd_init();
    simd_table.deq_f16_row(type, blocks, n, dst);
}

void simd_silu_mul(float *g, const float *u, size_t n)
{
    if (!initialised)
        simd_init();
    simd_table.silu_mul(g, u, n);
}

void simd_gelu(float *g, size_t n)
{
    if (!initialised)
        simd_init();
    simd_table.gelu(g, n);
}

void simd_swiglu_oai(float *g, const float *u, size_t n, float alpha, float limit)
{
    if (!initialised)
        simd_init();
    simd_table.swiglu_oai(g, u, n, alpha, limit);
}
