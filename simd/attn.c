/* Attention in plain C: the chunk reference, the tile reference and the
 * merge of chunks every kernel set reproduces bit for bit (the orders are
 * the ones documented at simd_attn_chunk and simd_attn_tile in simd.h),
 * and the choice of each set's form. */
#include "attn.h"
#include "attn_q.h"

#include <math.h>

float simd_attn_exp(float x) { return attn_exp(x); }

/* o[d] = the sum over positions in order of s[p] * v_p[d], each term
 * fused into the sum (both references') */
static void ref_vsum(const simd_attn_args *a, const float *s, float *o)
{
    for (size_t d = 0; d < a->hd; d++)
        o[d] = 0.0f;
    for (size_t p = 0; p < a->n; p++) {
        const simd_f16 *v = a->v + p * a->kvstride;
        for (size_t d = 0; d < a->hd; d++)
            o[d] = attn_fma(s[p], simd_f16_to_f32(v[d]), o[d]);
    }
}

void simd_attn_ref(const simd_attn_args *a)
{
    size_t hd = a->hd, n = a->n;
    for (size_t h = 0; h < a->nq; h++) {
        const float *q = a->q + h * a->qstride;
        float *s = a->scratch + h * n, *row = a->part + h * a->pstride, *o = row + 2;
        for (size_t p = 0; p < n; p++) {
            const simd_f16 *k = a->k + p * a->kvstride;
            float acc[8] = {0};
            for (size_t i = 0; i < hd; i++)
                acc[i & 7] = attn_fma(q[i], simd_f16_to_f32(k[i]), acc[i & 7]);
            s[p] = simd_reduce8(acc) * a->scale;
        }
        attn_ref_softmax(s, n, a->softcap, row);
        ref_vsum(a, s, o);
    }
}

void simd_attn_tile_ref(const simd_attn_args *a, size_t nt, size_t qtstride, size_t ptstride, float *kvbuf)
{
    size_t hd = a->hd, n = a->n;
    for (size_t t = 0; t < nt; t++)
        for (size_t h = 0; h < a->nq; h++) {
            const float *q = a->q + t * qtstride + h * a->qstride;
            float *s = a->scratch + h * n, *row = a->part + t * ptstride + h * a->pstride;
            for (size_t p = 0; p < n; p++) {
                /* K transposed: value i at k[i * ktstride]; as rows (ktstride 0): at k[i] */
                const simd_f16 *k = a->ktstride ? a->k + p : a->k + p * a->kvstride;
                size_t step = a->ktstride ? a->ktstride : 1;
                float acc = 0.0f; /* one sum, d in order: positions fill the lanes */
                for (size_t i = 0; i < hd; i++)
                    acc = attn_fma(q[i], simd_f16_to_f32(k[i * step]), acc);
                s[p] = acc * a->scale;
            }
            attn_ref_softmax(s, n, a->softcap, row);
            ref_vsum(a, s, row + 2);
        }
    (void)kvbuf;
}

void simd_attn_merge_ref(size_t hd, size_t nchunks, const float *part, size_t cstride, const float *sink,
                         float *out)
{
    float mx = sink ? *sink : -INFINITY, sum = 0.0f;
    for (size_t c = 0; c < nchunks; c++)
        if (part[c * cstride] > mx)
            mx = part[c * cstride];
    for (size_t d = 0; d < hd; d++)
        out[d] = 0.0f;
    for (size_t c = 0; c < nchunks; c++) {
        const float *row = part + c * cstride;
        float f = attn_exp(row[0] - mx);
        sum += row[1] * f;
        for (size_t d = 0; d < hd; d++)
            out[d] += row[2 + d] * f;
    }
    if (sink)
        sum += attn_exp(*sink - mx); /* the sink's share, last */
    float inv = 1.0f / sum;
    for (size_t d = 0; d < hd; d++)
        out[d] = out[d] * inv;
}

void simd_set_attn(enum simd_kernel k, simd_kernel_set *s)
{
    s->attn = simd_attn_ref;
    s->attn_tile = simd_attn_tile_ref;
    s->attn_merge = simd_attn_merge_ref;
    s->attn_q = simd_attn_q_ref;
#if defined(NIBBLE_X86_SETS)
    if (k == SIMD_K_AVX2 || k == SIMD_K_AVXVNNI || k == SIMD_K_AVX512VNNI || k == SIMD_K_AVXVNNIINT8) {
        s->attn = k == SIMD_K_AVX512VNNI ? simd_attn_avx512 : simd_attn_avx2;
        s->attn_tile = k == SIMD_K_AVX512VNNI ? simd_attn_tile_avx512 : simd_attn_tile_avx2;
        s->attn_merge = simd_attn_merge_avx2;
        /* avxvnniint8's check does not promise AVX-VNNI: it takes AVX2's */
        s->attn_q = k == SIMD_K_AVXVNNI      ? simd_attn_q_avxvnni
                    : k == SIMD_K_AVX512VNNI ? simd_attn_q_avx512vnni
                                             : simd_attn_q_avx2;
    }
#endif
#if defined(NIBBLE_NEON_SET)
    if (k == SIMD_K_NEON || k == SIMD_K_NEON_DOTPROD) {
        s->attn = simd_attn_neon;
        s->attn_tile = simd_attn_tile_neon;
        s->attn_q = simd_attn_q_neon;
    }
#endif
#if defined(NIBBLE_NEON_DOTPROD_SET)
    if (k == SIMD_K_NEON_DOTPROD)
        s->attn_q = simd_attn_q_neon_dotprod;
#endif
    (void)k;
}
