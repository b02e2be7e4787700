/* Private to simd/: the entry of the SIMD forms of attention over a
 * quantized cache (simd_attn_q_tile; attn_q_x86.h, attn_q_neon.h),
 * written once: the chunk's blocks are unpacked once into the buffer
 * (attn_q.h), then each token's query heads go through the set's
 * q_heads ATTN_HB at a time, the last few with a constant count so that
 * each form is unrolled. Heads are independent, so the grouping changes
 * no bits.
 *
 * The including file defines, before including it:
 *   ATTNQ_ENTRY              the name of the function it defines
 *   ATTNQ_KT                 K's codes interleaved (1) or as rows (0):
 *                            attnq_koff's kt, the layout its scores read
 *   q_heads(a, b, qt, part, h0, nh)
 *                            nh heads from h0 of one token (its query
 *                            blocks qt, its rows part) */
#ifndef NIBBLE_ATTN_Q_DRIVER_H
#define NIBBLE_ATTN_Q_DRIVER_H

void ATTNQ_ENTRY(const simd_attn_q_args *a, size_t nt, size_t qtstride, size_t ptstride)
{
    attnq_buf b = attnq_unpack_chunk(a, ATTNQ_KT);
    for (size_t t = 0; t < nt; t++) {
        const simd_block_q8a *qt = a->q + t * qtstride;
        float *part = a->part + t * ptstride;
        size_t h = 0;
        for (; h + ATTN_HB <= a->nq; h += ATTN_HB)
            q_heads(a, &b, qt, part, h, ATTN_HB);
        switch (a->nq - h) {
        case 3: q_heads(a, &b, qt, part, h, 3); break;
        case 2: q_heads(a, &b, qt, part, h, 2); break;
        case 1: q_heads(a, &b, qt, part, h, 1); break;
        default: break;
        }
    }
}

#endif
