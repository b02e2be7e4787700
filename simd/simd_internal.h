/* Private to simd/: the dispatch table and the pieces each kernel set
 * file fills in. */
#ifndef NIBBLE_SIMD_INTERNAL_H
#define NIBBLE_SIMD_INTERNAL_H

#include "simd.h"

#include <float.h>
#include <math.h>

/* One kernel set, as its file fills it in (entries left NULL fall back to
 * the scalar ones); simd_kernel_select copies it into the table. */
typedef struct simd_kernel_set {
    void (*q8a_quant)(const float *x, void *dst, size_t n);
    void (*q8k_quant)(const float *x, void *dst, size_t n); /* optional; else simd_q8k_quant_ref */
    float (*dot_f32)(size_t n, const float *a, const float *b);
    simd_dot_fn dot[SIMD_TYPE_COUNT];
    simd_dot_batch_fn dot_batch[SIMD_TYPE_COUNT];
    simd_dot_rows_fn dot_rows[SIMD_TYPE_COUNT]; /* optional; else dot_batch per row */
    simd_attn_fn attn; /* optional; else the reference (attn.c) */
    simd_attn_tile_fn attn_tile; /* optional; else the tile reference (attn.c) */
    simd_attn_q_fn attn_q;       /* optional; else the reference (attn_q.c) */
    simd_attn_merge_fn attn_merge; /* optional; else the reference (attn.c) */
    simd_dot_packed_fn dot_packed[SIMD_TYPE_COUNT]; /* optional; no fallback */
    void (*silu_mul)(float *g, const float *u, size_t n); /* optional; else act.c's baseline build */
    void (*gelu)(float *g, size_t n);                     /* likewise */
    void (*swiglu_oai)(float *g, const float *u, size_t n, float alpha, float limit); /* likewise */
    void (*f16_row)(const float *src, simd_f16 *dst, size_t n); /* likewise (simd_f32_to_f16_row) */
    void (*deq_f16_row)(int type, const void *blocks, size_t n, simd_f16 *dst); /* likewise */
} simd_kernel_set;

/* The plain-C batch and rows forms of a reference dot NAME(n, w, a):
 * NAME_batch runs it per token, NAME_rows per row (scalar kernels, whose
 * float order the other sets reproduce). */
#define SIMD_DOT_FORMS(NAME)                                                                                 \
    static void NAME##_batch(size_t n, const void *w, const void *a, size_t as, size_t nt, float *out,       \
                             size_t os)                                                                      \
    {                                                                                                        \
        for (size_t t = 0; t < nt; t++)                                                                      \
            out[t * os] = NAME(n, w, (const char *)a + t * as);                                              \
    }                                                                                                        \
    static void NAME##_rows(size_t n, const void *w, size_t ws, size_t nr, const void *a, size_t as,         \
                            size_t nt, float *out, size_t os)                                                \
    {                                                                                                        \
        for (size_t r = 0; r < nr; r++)                                                                      \
            NAME##_batch(n, (const char *)w + r * ws, a, as, nt, out + r, os);                               \
    }

/* Kernel F's three forms (F, F_batch, F_rows) into set s for type T. */
#define SIMD_PUT_DOTS(s, T, F) ((s)->dot[T] = F, (s)->dot_batch[T] = F##_batch, (s)->dot_rows[T] = F##_rows)

/* The dispatch table, simd/'s one global: a row per weight type (its
 * layout, from quants.c, and the installed set's kernels for it) and the
 * installed set's kernels that take no weight type. simd_kernel_select
 * fills the kernel slots; the hot paths read them straight from here
 * (simd_type_traits gives &simd_table.type[t]). */
typedef struct simd_dispatch {
    simd_traits type[SIMD_TYPE_COUNT];
    void (*q8a_quant)(const float *x, void *dst, size_t n);
    void (*q8k_quant)(const float *x, void *dst, size_t n);
    float (*dot_f32)(size_t n, const float *a, const float *b);
    simd_attn_fn attn;
    simd_attn_tile_fn attn_tile;
    simd_attn_q_fn attn_q;
    simd_attn_merge_fn attn_merge;
    void (*silu_mul)(float *g, const float *u, size_t n);
    void (*gelu)(float *g, size_t n);
    void (*swiglu_oai)(float *g, const float *u, size_t n, float alpha, float limit);
    void (*f16_row)(const float *src, simd_f16 *dst, size_t n);
    void (*deq_f16_row)(int type, const void *blocks, size_t n, simd_f16 *dst);
} simd_dispatch;
extern simd_dispatch simd_table;
/* The installed set read back from the table as a kernel set, every
 * fallback filled in (tests check it against the scalar set). */
simd_kernel_set simd_installed_set(void);

void simd_q8a_quant_ref(const float *x, void *dst, size_t n);
/* simd_f32_to_f16_row and simd_deq_f16_row in plain C (convert.c): the
 * scalar set's, and the bits every other set's must give */
void simd_f32_to_f16_row_ref(const float *src, simd_f16 *dst, size_t n);
void simd_deq_f16_row_ref(int type, const void *blocks, size_t n, simd_f16 *dst);
void simd_q8k_quant_ref(const float *x, void *dst, size_t n);
void simd_set_scalar(simd_kernel_set *s);
/* x86 sets (each in its own file, built with its own ISA flags; only
 * present when the compiler targets x86-64). They fill only what they
 * provide. */
void simd_set_avx2(simd_kernel_set *s);
void simd_set_avxvnni(simd_kernel_set *s);
void simd_set_avx512vnni(simd_kernel_set *s);
void simd_set_avxvnniint8(simd_kernel_set *s);
/* Arm sets (kernels_neon.c, kernels_neon_dotprod.c; only when the
 * compiler targets AArch64). */
void simd_set_neon(simd_kernel_set *s);
void simd_set_neon_dotprod(simd_kernel_set *s);

/* CPU features (cpu.c). A bit is set only if the CPU has the feature and,
 * for register state, the OS saves it (XCR0); on Arm, only if the OS
 * reports it (which it does only for state it saves). */
enum {
    SIMD_CPU_AVX = 1u << 0,
    SIMD_CPU_AVX2 = 1u << 1,
    SIMD_CPU_FMA = 1u << 2,
    SIMD_CPU_F16C = 1u << 3,
    SIMD_CPU_AVX512F = 1u << 4,
    SIMD_CPU_AVX512BW = 1u << 5,
    SIMD_CPU_AVX512VL = 1u << 6,
    SIMD_CPU_AVX512VNNI = 1u << 7,
    SIMD_CPU_AVXVNNI = 1u << 8,
    SIMD_CPU_AVXVNNIINT8 = 1u << 9,
    SIMD_CPU_OS_YMM = 1u << 10, /* XCR0 has SSE + AVX state */
    SIMD_CPU_OS_ZMM = 1u << 11, /* XCR0 also has opmask + both ZMM parts */
    /* AArch64 (hwcaps on Linux, sysctl on macOS) */
    SIMD_CPU_ASIMD = 1u << 12,   /* Advanced SIMD (NEON) */
    SIMD_CPU_ASIMDDP = 1u << 13, /* dot product instructions (sdot/udot) */
};
unsigned simd_cpu_features(void);
/* Test hook: pretend the features in mask are absent (0 restores). */
void simd_cpu_disable(unsigned mask);

/* v rounded to the nearest integer, ties to even, as lrintf rounds in
 * the default rounding mode, for |v| < 2^22 (the quantizers' codes, which
 * are clamped first): v + 1.5 * 2^23 lies where floats are whole numbers,
 * so the addition rounds and the subtraction is exact. Inline, where
 * lrintf is a library call that the scale searches make millions of times
 * a second. */
static inline int simd_rint_small(float v)
{
#if FLT_EVAL_METHOD == 0
    const float magic = 12582912.0f;
    return (int)((v + magic) - magic);
#else
    return (int)lrintf(v);
#endif
}

/* The fixed order in which every set combines its 8 float lanes. Lane l
 * holds the sum, in index order, of the terms whose block (or element)
 * index is l mod 8. */
static inline float simd_reduce8(const float acc[8])
{
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

#endif
