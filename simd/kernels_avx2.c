/* The avx2 kernel set (AVX2 + FMA + F16C; built with -mavx2 -mfma -mf16c).
 * Bit-identical to the scalar set: see kernels_x86.h for how. */
#include "kernels_x86.h"

/* u8 x s8 products summed in pairs to int16 (maddubs), then pairs of
 * those to int32 (madd with ones). With u <= 31 and |s| <= 127 the int16
 * pairs cannot saturate. */
NB_INLINE __m256i nb_dot_us(__m256i u, __m256i s)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* s8 x s8 through the u8 x s8 multiply: |w| * (a with w's sign) = w * a.
 * |-128| is 0x80, read as unsigned 128, which is right; the int16 pairs
 * stay within 2*128*127 because activations never reach -128. */
NB_INLINE __m256i nb_dot_q8(__m256i w, __m256i a)
{
    return nb_dot_us(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
}

#define NB_Q8_BIAS_SHIFT (-1)

/* packed rows (pack_x86.h): the same dots on 8 rows in the lanes, the 4
 * activation bytes broadcast to every lane */
NB_INLINE __m256i nbp_dot(__m256i acc, __m256i u, const unsigned char *p)
{
    return _mm256_add_epi32(acc, nb_dot_us(u, _mm256_set1_epi32((int)nb_ld32(p))));
}
NB_INLINE __m256i nbp_q8w(__m256i v) { return v; }
NB_INLINE __m256i nbp_dotq8(__m256i acc, __m256i w, const unsigned char *p)
{
    return _mm256_add_epi32(acc, nb_dot_q8(w, _mm256_set1_epi32((int)nb_ld32(p))));
}
#define NBP_Q8_BIAS_SHIFT (-1)
#include "pack_x86.h"

#define NB_SET_FN simd_set_avx2
#include "kernels_x86_q.h"

#define NBK_SET_FN simd_set_kquants_avx2
#include "kquants_x86.h"
#define NB_MXFP4_SET_FN simd_set_mxfp4_avx2
#include "mxfp4_x86.h"
#define NBL_SET_FN simd_set_lquants_avx2
#include "lquants_x86.h"
