/* Attention over a q8_0/q4_0 cache in plain C: the reference every set
 * reproduces bit for bit (the order is the one documented at
 * simd_attn_q_args in simd.h). */
#include "attn_q.h"

/* One token's heads over the unpacked chunk b. */
static void ref_token(const simd_attn_q_args *a, const attnq_buf *b, const simd_block_q8a *qt, float *part)
{
    size_t hd = a->hd, n = a->n, nb = hd / 32;
    for (size_t h = 0; h < a->nq; h++) {
        const simd_block_q8a *q = qt + h * a->qstride;
        float *s = a->scratch + h * n, *row = part + h * a->pstride, *o = row + 2;
        for (size_t p = 0; p < n; p++) {
            float acc = 0.0f;
            for (size_t i = 0; i < nb; i++) {
                int32_t isum = 0;
                for (int j = 0; j < SIMD_QK; j++)
                    isum += (int32_t)q[i].qs[j] * b->kc[attnq_koff(0, hd, p, i, (size_t)j)];
                acc = attn_fma((float)isum, b->kd[i * SIMD_ATTN_CHUNK + p] * q[i].d, acc);
            }
            s[p] = acc * a->scale;
        }
        attn_ref_softmax(s, n, a->softcap, row);
        for (size_t d = 0; d < hd; d++)
            o[d] = 0.0f;
        for (size_t p = 0; p < n; p++)
            for (size_t d = 0; d < hd; d++)
                o[d] = attn_fma(s[p], b->vf[p * hd + d], o[d]);
    }
}

void simd_attn_q_ref(const simd_attn_q_args *a, size_t nt, size_t qtstride, size_t ptstride)
{
    attnq_buf b = attnq_unpack_chunk(a, 0);
    for (size_t t = 0; t < nt; t++)
        ref_token(a, &b, a->q + t * qtstride, a->part + t * ptstride);
}
