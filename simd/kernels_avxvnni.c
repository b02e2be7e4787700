/* The avxvnni kernel set: AVX2 plus AVX-VNNI (the VEX-encoded vpdpbusd of
 * Alder Lake and later, Zen 5); built with -mavx2 -mfma -mf16c -mavxvnni.
 * Bit-identical to the scalar set: see kernels_x86.h for how. */
#include "kernels_x86.h"

/* vpdpbusd: four u8 x s8 products added into each int32, in one
 * instruction and without intermediate saturation. */
NB_INLINE __m256i nb_dot_us(__m256i u, __m256i s)
{
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
}

/* s8 weights made unsigned by flipping the sign bit (w ^ 0x80 = w + 128),
 * so the total is sum(w*a) + 128*sum(a); nb_step8 subtracts 128 times
 * the activation block's sum. One xor instead of two vpsignb. */
NB_INLINE __m256i nb_dot_q8(__m256i w, __m256i a)
{
    return nb_dot_us(_mm256_xor_si256(w, _mm256_set1_epi8((char)0x80)), a);
}

#define NB_Q8_BIAS_SHIFT 7

/* packed rows (pack_x86.h): vpdpbusd on 8 rows in the lanes, the 4
 * activation bytes broadcast to every lane */
NB_INLINE __m256i nbp_dot(__m256i acc, __m256i u, const unsigned char *p)
{
    return _mm256_dpbusd_avx_epi32(acc, u, _mm256_set1_epi32((int)nb_ld32(p)));
}
NB_INLINE __m256i nbp_q8w(__m256i v) { return _mm256_xor_si256(v, _mm256_set1_epi8((char)0x80)); }
NB_INLINE __m256i nbp_dotq8(__m256i acc, __m256i w, const unsigned char *p) { return nbp_dot(acc, w, p); }
#define NBP_Q8_BIAS_SHIFT 7
#include "pack_x86.h"

#define NB_SET_FN simd_set_avxvnni
#include "kernels_x86_q.h"

#define NBK_SET_FN simd_set_kquants_avxvnni
#include "kquants_x86.h"
#define NB_MXFP4_SET_FN simd_set_mxfp4_avxvnni
#include "mxfp4_x86.h"
#define NBL_SET_FN simd_set_lquants_avxvnni
#include "lquants_x86.h"
