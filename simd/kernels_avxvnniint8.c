/* The avxvnniint8 kernel set: AVX2 plus AVX-VNNI-INT8 (vpdpbssd: s8 x s8
 * products, four into each int32; Sierra Forest, Lunar Lake, Arrow Lake
 * and later). Built with -mavx2 -mfma -mf16c, plus -mavxvnniint8 when the
 * compiler has it. Bit-identical to the scalar set: see kernels_x86.h.
 *
 * Compilers before GCC 13 / Clang 16 have no -mavxvnniint8, so without it
 * the instruction is written out as bytes (inline asm below), which any
 * assembler accepts. tests/simd checks with objdump that the library holds
 * a VEX-encoded vpdpbssd. With NB_VNNIINT8_EMULATE the instruction is
 * replaced by an AVX2 equivalent, so that the rest of this file can be
 * tested on CPUs without it (the test builds it under another name). */
#include "kernels_x86.h"

#if defined(NB_VNNIINT8_EMULATE)

/* acc + sum of the four s8 x s8 products of each dword: sign-extend the
 * even and the odd bytes to int16 and let vpmaddwd add the pairs. */
NB_INLINE __m256i nb_dpbssd(__m256i acc, __m256i a, __m256i b)
{
    __m256i ae = _mm256_srai_epi16(_mm256_slli_epi16(a, 8), 8), ao = _mm256_srai_epi16(a, 8);
    __m256i be = _mm256_srai_epi16(_mm256_slli_epi16(b, 8), 8), bo = _mm256_srai_epi16(b, 8);
    return _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(ae, be), _mm256_madd_epi16(ao, bo)));
}

#elif defined(__AVXVNNIINT8__)

NB_INLINE __m256i nb_dpbssd(__m256i acc, __m256i a, __m256i b) { return _mm256_dpbssd_epi32(acc, a, b); }

#else

/* vpdpbssd ymm_acc, ymm_a, ymm_b = VEX.256.F2.0F38.W0 50 /r, spelt as bytes.
 * The register numbers the compiler picked are recovered inside the
 * assembler: nb_ymmnum compares the operand text ("%ymm3") against
 * %ymm0..%ymm15 and sets a symbol to the match. The 3-byte VEX prefix:
 *   C4, [~R ~X ~B m-mmmm=00010 (0F38)], [W=0 ~vvvv L=1 pp=11 (F2)],
 * then opcode 50 and ModRM 11 reg rm (register-direct). Only ymm0-15 can be
 * named this way; the file is built without AVX-512, so "x" operands are
 * always among them. The macros are defined and purged inside each asm
 * statement, so nothing depends on the order the compiler emits them. */
NB_INLINE __m256i nb_dpbssd(__m256i acc, __m256i a, __m256i b)
{
    __asm__(".macro nb_ymmnum sym, reg\n\t"
            ".irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n\t"
            ".ifc \\reg,%%ymm\\i\n\t"
            ".set \\sym, \\i\n\t"
            ".endif\n\t"
            ".endr\n\t"
            ".endm\n\t"
            "nb_ymmnum .Lnb_dst, %0\n\t"
            "nb_ymmnum .Lnb_src1, %1\n\t"
            "nb_ymmnum .Lnb_src2, %2\n\t"
            ".byte 0xc4\n\t"
            ".byte ((~.Lnb_dst & 8) << 4) | 0x40 | ((~.Lnb_src2 & 8) << 2) | 0x02\n\t"
            ".byte ((~.Lnb_src1 & 15) << 3) | 0x07\n\t"
            ".byte 0x50\n\t"
            ".byte 0xc0 | ((.Lnb_dst & 7) << 3) | (.Lnb_src2 & 7)\n\t"
            ".purgem nb_ymmnum"
            : "+x"(acc)
            : "x"(a), "x"(b));
    return acc;
}

#endif

/* vpdpbssd is signed x signed: the weight codes 0..31 are valid s8, and
 * q8_0 needs no bias. */
NB_INLINE __m256i nb_dot_us(__m256i u, __m256i s) { return nb_dpbssd(_mm256_setzero_si256(), u, s); }
NB_INLINE __m256i nb_dot_q8(__m256i w, __m256i a) { return nb_dpbssd(_mm256_setzero_si256(), w, a); }

#define NB_Q8_BIAS_SHIFT (-1)

/* packed rows (pack_x86.h): vpdpbssd on 8 rows in the lanes; codes 0..31
 * and q8_0's signed codes are both valid s8, so q8_0 needs no bias */
NB_INLINE __m256i nbp_dot(__m256i acc, __m256i u, const unsigned char *p)
{
    return nb_dpbssd(acc, u, _mm256_set1_epi32((int)nb_ld32(p)));
}
NB_INLINE __m256i nbp_q8w(__m256i v) { return v; }
NB_INLINE __m256i nbp_dotq8(__m256i acc, __m256i w, const unsigned char *p) { return nbp_dot(acc, w, p); }
#define NBP_Q8_BIAS_SHIFT (-1)
#include "pack_x86.h"

#ifdef NB_VNNIINT8_EMULATE
#define NB_SET_FN simd_set_avxvnniint8_emul
#else
#define NB_SET_FN simd_set_avxvnniint8
#endif
#include "kernels_x86_q.h"

#ifdef NB_VNNIINT8_EMULATE
#define NBK_SET_FN simd_set_kquants_avxvnniint8_emul
#else
#define NBK_SET_FN simd_set_kquants_avxvnniint8
#endif
#define NBK_DPBSSD nb_dpbssd
#include "kquants_x86.h"
#ifdef NB_VNNIINT8_EMULATE
#define NB_MXFP4_SET_FN simd_set_mxfp4_avxvnniint8_emul
#else
#define NB_MXFP4_SET_FN simd_set_mxfp4_avxvnniint8
#endif
#include "mxfp4_x86.h"
#ifdef NB_VNNIINT8_EMULATE
#define NBL_SET_FN simd_set_lquants_avxvnniint8_emul
#else
#define NBL_SET_FN simd_set_lquants_avxvnniint8
#endif
#include "lquants_x86.h"
