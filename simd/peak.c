/* The int8 and float multiply-add peaks of a kernel set (`nibble bench
 * --peak`): the instruction the set's int8 dot products are built on, and
 * the float multiply-add its attention is built on, each issued in
 * independent chains on operands held in registers, so nothing but the
 * core's execution ports limits it. Prefill is measured against these:
 * the matrix products at the int8 rate, attention at the float one.
 *
 * Each set's loop is compiled for that set's ISA with a target attribute
 * (this file has no ISA flags of its own, like dispatch.c), and runs only
 * when that set is the installed one, which simd_kernel_select checks
 * against the CPU. An empty asm statement makes the shared operand look
 * new on every iteration, so the compiler can neither hoist the products
 * out of the loop nor fold the chains into one. */
#include <stdint.h>

#include "simd.h"

#if defined(__GNUC__)
#define PEAK_OPAQUE(v, cons) __asm__ volatile("" : "+" cons(v))
#else
#define PEAK_OPAQUE(v, cons) ((void)0)
#endif

/* The scalar set: plain C, four products a step. The sums wrap (unsigned):
 * a long run passes 2^31, where a signed one would be undefined. */
static uint64_t peak_scalar(long iters, int32_t *sink)
{
    uint32_t acc[4] = {0, 0, 0, 0};
    int8_t a = 3, b[4] = {5, 7, 11, 13};
    for (long i = 0; i < iters; i++) {
        PEAK_OPAQUE(a, "r");
        for (int c = 0; c < 4; c++)
            acc[c] += (uint32_t)((int32_t)a * b[c]);
    }
    *sink = (int32_t)(acc[0] ^ acc[1] ^ acc[2] ^ acc[3]);
    return (uint64_t)iters * 4;
}

#if defined(NIBBLE_X86_SETS)
#include <immintrin.h>

/* AVX2: maddubs (u8 x s8 pairs to s16), madd with ones (to s32), add: 32
 * products per three instructions. The product does not involve the
 * accumulator, so each chain needs its own operand. */
#define PEAK_AVX2_CHAINS 6
__attribute__((target("avx2"))) static uint64_t peak_avx2(long iters, int32_t *sink)
{
    __m256i a = _mm256_set1_epi8(3), one = _mm256_set1_epi16(1), acc[PEAK_AVX2_CHAINS], b[PEAK_AVX2_CHAINS];
    for (int c = 0; c < PEAK_AVX2_CHAINS; c++) {
        acc[c] = _mm256_setzero_si256();
        b[c] = _mm256_set1_epi8((char)(c + 1));
    }
    for (long i = 0; i < iters; i++) {
        PEAK_OPAQUE(a, "x");
        for (int c = 0; c < PEAK_AVX2_CHAINS; c++)
            acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b[c]), one));
    }
    __m256i s = acc[0];
    for (int c = 1; c < PEAK_AVX2_CHAINS; c++)
        s = _mm256_xor_si256(s, acc[c]);
    *sink = _mm256_extract_epi32(s, 0);
    return (uint64_t)iters * PEAK_AVX2_CHAINS * 32;
}

/* AVX-VNNI (the VEX form): vpdpbusd on 256 bits, 32 products each. */
#define PEAK_VNNI_CHAINS 10
__attribute__((target("avx2,avxvnni"))) static uint64_t peak_avxvnni(long iters, int32_t *sink)
{
    __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(5), acc[PEAK_VNNI_CHAINS];
    for (int c = 0; c < PEAK_VNNI_CHAINS; c++)
        acc[c] = _mm256_setzero_si256();
    for (long i = 0; i < iters; i++) {
        PEAK_OPAQUE(a, "x");
        for (int c = 0; c < PEAK_VNNI_CHAINS; c++)
            acc[c] = _mm256_dpbusd_avx_epi32(acc[c], a, b);
    }
    __m256i s = acc[0];
    for (int c = 1; c < PEAK_VNNI_CHAINS; c++)
        s = _mm256_xor_si256(s, acc[c]);
    *sink = _mm256_extract_epi32(s, 0);
    return (uint64_t)iters * PEAK_VNNI_CHAINS * 32;
}

/* AVX-512 VNNI: vpdpbusd on 512 bits, 64 products each. */
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static uint64_t peak_avx512vnni(long iters, int32_t *sink)
{
    __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(5), acc[PEAK_VNNI_CHAINS];
    for (int c = 0; c < PEAK_VNNI_CHAINS; c++)
        acc[c] = _mm512_setzero_si512();
    for (long i = 0; i < iters; i++) {
        PEAK_OPAQUE(a, "v");
        for (int c = 0; c < PEAK_VNNI_CHAINS; c++)
            acc[c] = _mm512_dpbusd_epi32(acc[c], a, b);
    }
    __m512i s = acc[0];
    for (int c = 1; c < PEAK_VNNI_CHAINS; c++)
        s = _mm512_xor_si512(s, acc[c]);
    *sink = _mm512_reduce_add_epi32(s);
    return (uint64_t)iters * PEAK_VNNI_CHAINS * 64;
}
#endif

#if defined(NIBBLE_NEON_SET)
#include <arm_neon.h>

/* NEON: smull (s8 x s8 to s16, 8 products) and sadalp into s32. */
#define PEAK_NEON_CHAINS 6
static uint64_t peak_neon(long iters, int32_t *sink)
{
    int8x8_t a = vdup_n_s8(3), b[PEAK_NEON_CHAINS];
    int32x4_t acc[PEAK_NEON_CHAINS];
    for (int c = 0; c < PEAK_NEON_CHAINS; c++) {
        acc[c] = vdupq_n_s32(0);
        b[c] = vdup_n_s8((int8_t)(c + 1));
    }
    for (long i = 0; i < iters; i++) {
        PEAK_OPAQUE(a, "w");
        for (int c = 0; c < PEAK_NEON_CHAINS; c++)
            acc[c] = vpadalq_s16(acc[c], vmull_s8(a, b[c]));
    }
    int32x4_t s = acc[0];
    for (int c = 1; c < PEAK_NEON_CHAINS; c++)
        s = veorq_s32(s, acc[c]);
    *sink = vgetq_lane_s32(s, 0);
    return (uint64_t)iters * PEAK_NEON_CHAINS * 8;
}
#endif

#if defined(NIBBLE_NEON_DOTPROD_SET)
/* NEON dot product: sdot, 16 products each. */
#define PEAK_DOT_CHAINS 8
__attribute__((target("arch=armv8.2-a+dotprod"))) static uint64_t peak_neon_dotprod(long iters, int32_t *sink)
{
    int8x16_t a = vdupq_n_s8(3), b = vdupq_n_s8(5);
    int32x4_t acc[PEAK_DOT_CHAINS];
    for (int c = 0; c < PEAK_DOT_CHAINS; c++)
        acc[c] = vdupq_n_s32(0);
    for (long i = 0; i < iters; i++) {
        PEAK_OPAQUE(a, "w");
        for (int c = 0; c < PEAK_DOT_CHAINS; c++)
            acc[c] = vdotq_s32(acc[c], a, b);
    }
    int32x4_t s = acc[0];
    for (int c = 1; c < PEAK_DOT_CHAINS; c++)
        s = veorq_s32(s, acc[c]);
    *sink = vgetq_lane_s32(s, 0);
    return (uint64_t)iters * PEAK_DOT_CHAINS * 16;
}
#endif

/* The float multiply-add peak: the instruction attention's score and V
 * sums are built on (simd/attn*.c: FMA on x86, fmla on Arm), in
 * PEAK_FMA_CHAINS independent chains, each longer than the instruction's
 * latency is deep. Every chain multiplies by a value just under one and
 * adds a small one, so it stays finite and normal. */
#define PEAK_FMA_CHAINS 12

/* The scalar set: plain C. Whether the compiler fuses the multiply and
 * the add is its choice; either way it is the rate plain C gets. */
static uint64_t fpeak_scalar(long iters, float *sink)
{
    float acc[8], a = 0.999f, b = 0.001f, s = 0.0f;
    for (int c = 0; c < 8; c++)
        acc[c] = (float)(c + 1);
    for (long i = 0; i < iters; i++) {
        PEAK_OPAQUE(a, "r");
        for (int c = 0; c < 8; c++)
            acc[c] = acc[c] * a + b;
    }
    for (int c = 0; c < 8; c++)
        s += acc[c];
    *sink = s;
    return (uint64_t)iters * 8;
}

#if defined(NIBBLE_X86_SETS)
/* Every x86 set but avx512vnni: vfmadd on 256 bits, 8 each. */
__attribute__((target("avx2,fma"))) static uint64_t fpeak_avx2(long iters, float *sink)
{
    __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(0.001f), acc[PEAK_FMA_CHAINS];
    for (int c = 0; c < PEAK_FMA_CHAINS; c++)
        acc[c] = _mm256_set1_ps((float)(c + 1));
    for (long i = 0; i < iters; i++) {
        PEAK_OPAQUE(a, "x");
        for (int c = 0; c < PEAK_FMA_CHAINS; c++)
            acc[c] = _mm256_fmadd_ps(acc[c], a, b);
    }
    __m256 s = acc[0];
    for (int c = 1; c < PEAK_FMA_CHAINS; c++)
        s = _mm256_add_ps(s, acc[c]);
    *sink = _mm256_cvtss_f32(s);
    return (uint64_t)iters * PEAK_FMA_CHAINS * 8;
}

/* avx512vnni: vfmadd on 512 bits, 16 each (its attention's width). */
__attribute__((target("avx512f"))) static uint64_t fpeak_avx512(long iters, float *sink)
{
    __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(0.001f), acc[PEAK_FMA_CHAINS];
    for (int c = 0; c < PEAK_FMA_CHAINS; c++)
        acc[c] = _mm512_set1_ps((float)(c + 1));
    for (long i = 0; i < iters; i++) {
        PEAK_OPAQUE(a, "v");
        for (int c = 0; c < PEAK_FMA_CHAINS; c++)
            acc[c] = _mm512_fmadd_ps(acc[c], a, b);
    }
    __m512 s = acc[0];
    for (int c = 1; c < PEAK_FMA_CHAINS; c++)
        s = _mm512_add_ps(s, acc[c]);
    *sink = _mm512_reduce_add_ps(s);
    return (uint64_t)iters * PEAK_FMA_CHAINS * 16;
}
#endif

#if defined(NIBBLE_NEON_SET)
/* Both Arm sets: fmla on 128 bits, 4 each. */
static uint64_t fpeak_neon(long iters, float *sink)
{
    float32x4_t a = vdupq_n_f32(0.999f), b = vdupq_n_f32(0.001f), acc[PEAK_FMA_CHAINS];
    for (int c = 0; c < PEAK_FMA_CHAINS; c++)
        acc[c] = vdupq_n_f32((float)(c + 1));
    for (long i = 0; i < iters; i++) {
        PEAK_OPAQUE(a, "w");
        for (int c = 0; c < PEAK_FMA_CHAINS; c++)
            acc[c] = vfmaq_f32(b, acc[c], a);
    }
    float32x4_t s = acc[0];
    for (int c = 1; c < PEAK_FMA_CHAINS; c++)
        s = vaddq_f32(s, acc[c]);
    *sink = vgetq_lane_f32(s, 0);
    return (uint64_t)iters * PEAK_FMA_CHAINS * 4;
}
#endif

uint64_t simd_fma_peak_run(long iters, float *sink)
{
    switch (simd_kernel_current()) {
#if defined(NIBBLE_X86_SETS)
    case SIMD_K_AVX2:
    case SIMD_K_AVXVNNI:
    case SIMD_K_AVXVNNIINT8: return fpeak_avx2(iters, sink);
    case SIMD_K_AVX512VNNI: return fpeak_avx512(iters, sink);
#endif
#if defined(NIBBLE_NEON_SET)
    case SIMD_K_NEON:
    case SIMD_K_NEON_DOTPROD: return fpeak_neon(iters, sink);
#endif
    default: return fpeak_scalar(iters, sink);
    }
}

uint64_t simd_int8_peak_run(long iters, int32_t *sink)
{
    switch (simd_kernel_current()) {
#if defined(NIBBLE_X86_SETS)
    case SIMD_K_AVX2: return peak_avx2(iters, sink);
    case SIMD_K_AVXVNNI:
    case SIMD_K_AVXVNNIINT8: /* its vpdpbssd has vpdpbusd's width and ports, and every CPU with it has AVX-VNNI */
        return peak_avxvnni(iters, sink);
    case SIMD_K_AVX512VNNI: return peak_avx512vnni(iters, sink);
#endif
#if defined(NIBBLE_NEON_SET)
    case SIMD_K_NEON: return peak_neon(iters, sink);
#endif
#if defined(NIBBLE_NEON_DOTPROD_SET)
    case SIMD_K_NEON_DOTPROD: return peak_neon_dotprod(iters, sink);
#endif
    default: return peak_scalar(iters, sink);
    }
}
