/* Private to simd/: a q8_0/q4_0 block of the KV cache read in plain C,
 * in ggml's order (a q4_0 block's low nibbles are values 0..15, its high
 * ones 16..31, each less 8): what the quantized attention (attn_q.h,
 * whose set forms may replace the unpacking with vectors giving the same
 * bytes) and the cache's conversion to halves (convert.c) share. */
#ifndef NIBBLE_ATTN_Q_BLOCK_H
#define NIBBLE_ATTN_Q_BLOCK_H

#include "simd_internal.h"

/* block b of a row of them, and its scale as a float */
static inline const void *attnq_block(int type, const void *blocks, size_t b)
{
    if (type == SIMD_Q8_0)
        return (const simd_block_q8_0 *)blocks + b;
    return (const simd_block_q4_0 *)blocks + b;
}

static inline float attnq_scale(int type, const void *blk)
{
    return simd_f16_to_f32(type == SIMD_Q8_0 ? ((const simd_block_q8_0 *)blk)->d
                                             : ((const simd_block_q4_0 *)blk)->d);
}

/* value j of a block as its code (-128..127) */
static inline int attnq_code(int type, const void *blk, int j)
{
    if (type == SIMD_Q8_0)
        return ((const simd_block_q8_0 *)blk)->qs[j];
    const uint8_t *qs = ((const simd_block_q4_0 *)blk)->qs;
    return j < SIMD_QK / 2 ? (qs[j] & 0x0f) - 8 : (qs[j - SIMD_QK / 2] >> 4) - 8;
}

/* The default forms of a block's unpacking, one value at a time: its 32
 * codes into c, and its values d * code into y. A set's file may define
 * ATTNQ_CODES and ATTNQ_VALUES (same arguments) with its vectors first;
 * they must give the same bytes, which exact integer and float steps do. */
static inline void attnq_codes(int type, const void *blk, int8_t *c)
{
    for (int j = 0; j < SIMD_QK; j++)
        c[j] = (int8_t)attnq_code(type, blk, j);
}

static inline void attnq_values(int type, const void *blk, float d, float *y)
{
    for (int j = 0; j < SIMD_QK; j++)
        y[j] = d * (float)attnq_code(type, blk, j);
}

#endif
