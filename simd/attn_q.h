/* Private to simd/: what the forms of attention over a quantized cache
 * (simd_attn_q_tile in simd.h) share: the layout of the caller's buffer,
 * the unpacking of a chunk's blocks into it, and the steps after the
 * scores, which are attn.h's.
 *
 * The buffer (SIMD_ATTN_Q_BUF(hd) bytes), for nb = hd/32 and N =
 * SIMD_ATTN_CHUNK:
 *   kd  float [nb][N]   K scales, block-major, so that eight positions'
 *                       scales of a block load as one vector; positions
 *                       n .. N-1 are zeros
 *   vf  float [N][hd]   V's values dv * code: exact in float (an f16
 *                       scale times a code of at most 8 bits)
 *   kc  int8  [N*hd]    K codes, in rows or interleaved (attnq_koff)
 * A q4_0 block's codes come out as nibble - 8, low nibbles first (ggml's
 * order: qs[j] low is value j, high is value j+16), a q8_0 block's as
 * they are. Unpacking is exact, so where and how it runs changes no bit.
 * Each set's file compiles it with its own flags (ATTNQ_H2F: its exact
 * half-to-float, inline, so no call leaves the vector code). */
#ifndef NIBBLE_ATTN_Q_H
#define NIBBLE_ATTN_Q_H

#include "attn.h"
#include "attn_q_block.h"

#ifndef ATTNQ_H2F
#define ATTNQ_H2F simd_f16_to_f32
#endif

typedef struct attnq_buf {
    float *kd, *vf;
    int8_t *kc;
} attnq_buf;

static inline attnq_buf attnq_layout(void *buf, size_t hd)
{
    attnq_buf b;
    b.kd = (float *)buf;
    b.vf = b.kd + hd / 32 * SIMD_ATTN_CHUNK;
    b.kc = (int8_t *)(b.vf + SIMD_ATTN_CHUNK * hd);
    return b;
}

#ifndef ATTNQ_CODES
#define ATTNQ_CODES attnq_codes
#endif
#ifndef ATTNQ_VALUES
#define ATTNQ_VALUES attnq_values
#endif

/* Where code j of block i of position p goes in kc: rows (position p's
 * codes in column order) or, with kt, eight positions interleaved four
 * codes at a time (block i, positions 8g..8g+7: for each group of four
 * codes, 32 bytes holding those four codes of the eight positions), the
 * layout in which one vector of dot products covers eight positions. */
static inline size_t attnq_koff(int kt, size_t hd, size_t p, size_t i, size_t j)
{
    if (!kt)
        return p * hd + i * SIMD_QK + j;
    return ((i * (SIMD_ATTN_CHUNK / 8) + p / 8) * 8 + j / 4) * 32 + (p % 8) * 4 + j % 4;
}

/* The rows are strided (a position's kv heads sit side by side), which
 * the hardware prefetcher follows late, and the unpacking is the only
 * reader of the cache: the rows ATTNQ_PF positions ahead are asked for
 * while a row is unpacked, past the chunk's end too (the next chunk's
 * first rows, where a task goes on; a prefetch of any address is only a
 * hint and never faults). No effect on the result. */
#define ATTNQ_PF 16
static inline void attnq_prefetch(const unsigned char *r, size_t bytes)
{
    __builtin_prefetch(r);
    __builtin_prefetch(r + bytes - 1);
}

/* The chunk's K and V into the buffer (layout above; kt: attnq_koff). */
static inline attnq_buf attnq_unpack_chunk(const simd_attn_q_args *a, int kt)
{
    size_t hd = a->hd, nb = hd / 32, n = a->n;
    size_t kb = a->ktype == SIMD_Q8_0 ? sizeof(simd_block_q8_0) : sizeof(simd_block_q4_0);
    size_t vb = a->vtype == SIMD_Q8_0 ? sizeof(simd_block_q8_0) : sizeof(simd_block_q4_0);
    attnq_buf b = attnq_layout(a->buf, hd);
    for (size_t p = 0; p < n; p++) {
        const unsigned char *kr = (const unsigned char *)a->k + p * a->kstride;
        const unsigned char *vr = (const unsigned char *)a->v + p * a->vstride;
        attnq_prefetch(kr + ATTNQ_PF * a->kstride, nb * kb);
        attnq_prefetch(vr + ATTNQ_PF * a->vstride, nb * vb);
        for (size_t i = 0; i < nb; i++) {
            const void *kblk = kr + i * kb, *vblk = vr + i * vb;
            float *vf = b.vf + p * hd + i * SIMD_QK;
            b.kd[i * SIMD_ATTN_CHUNK + p] = ATTNQ_H2F(*(const simd_f16 *)kblk); /* d is each block's first field */
            float dv = ATTNQ_H2F(*(const simd_f16 *)vblk);
            int8_t codes[SIMD_QK];
            if (!kt) {
                ATTNQ_CODES(a->ktype, kblk, b.kc + attnq_koff(0, hd, p, i, 0));
            } else {
                ATTNQ_CODES(a->ktype, kblk, codes);
                for (int j = 0; j < SIMD_QK; j += 4)
                    memcpy(b.kc + attnq_koff(kt, hd, p, i, (size_t)j), codes + j, 4);
            }
            ATTNQ_VALUES(a->vtype, vblk, dv, vf);
        }
    }
    for (size_t i = 0; i < nb; i++)
        for (size_t p = n; p < SIMD_ATTN_CHUNK; p++)
            b.kd[i * SIMD_ATTN_CHUNK + p] = 0.0f;
    return b;
}

void simd_attn_q_ref(const simd_attn_q_args *a, size_t nt, size_t qtstride, size_t ptstride);
/* The SIMD forms (attn_q_x86.h, attn_q_neon.h): one x86 form built three
 * times, with maddubs (avx2, avxvnniint8), AVX-VNNI's dpbusd (avxvnni) and
 * AVX-512 VNNI's (avx512vnni); NEON with widening multiplies (neon) and
 * with sdot (neon-dotprod). */
void simd_attn_q_avx2(const simd_attn_q_args *a, size_t nt, size_t qtstride, size_t ptstride);
void simd_attn_q_avxvnni(const simd_attn_q_args *a, size_t nt, size_t qtstride, size_t ptstride);
void simd_attn_q_avx512vnni(const simd_attn_q_args *a, size_t nt, size_t qtstride, size_t ptstride);
void simd_attn_q_neon(const simd_attn_q_args *a, size_t nt, size_t qtstride, size_t ptstride);
void simd_attn_q_neon_dotprod(const simd_attn_q_args *a, size_t nt, size_t qtstride, size_t ptstride);

#endif
