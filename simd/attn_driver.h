/* Private to simd/: the loops of the SIMD attention forms (attn_avx2.c,
 * attn_neon.c) over heads, positions and column tiles, written once; each
 * form brings the vector primitives, which keep simd_attn_ref's order of
 * float operations lane by lane.
 *
 * The including file defines, before including it:
 *   ATTN_SB                          positions one attn_scores call takes
 *   attn_scores(a, q, p, m, s)       scores of query q for positions
 *                                    p..p+m-1 (1 <= m <= ATTN_SB) into s[p..]
 *   attn_max(s, n)                   largest of s[0..n), NaN passed over
 *   attn_exp_rows(s, nr, n, mx, sum) for each of nr rows s[i]:
 *                                    s[i][p] = exp(s[i][p] - mx[i]), sum[i]
 *                                    as simd_attn_ref's lanes[p & 7] give it
 *   attn_vsum(a, e, nh, width, d0, p0, p1, o)
 *                                    the V sum of nh heads for columns
 *                                    d0..d0+width-1 (16 or 8) and positions
 *                                    [p0, p1), added to o[h] (started at 0
 *                                    when p0 is 0), positions in order
 *   ATTN_ENTRY                       the name of the simd_attn_* it defines
 * and may define ATTN_SCORES_HEADS, then giving
 *   attn_scores_heads(a, q, nh, p, m, s)  attn_scores for the nh heads
 *                                    q[i] into s[i] at once
 * and gets ATTN_ENTRY(const simd_attn_args *). */
#ifndef NIBBLE_ATTN_DRIVER_H
#define NIBBLE_ATTN_DRIVER_H

/* Rows are hd halves, kvstride apart (the kv heads of a position sit
 * side by side), so each head reads strided rows the hardware prefetcher
 * follows late: the K rows ATTN_PF_K positions ahead of the scores, and
 * the V rows of the same positions (read in the V sum right after, and
 * one chunk's V fits in L1), are asked for in advance. No effect on the
 * result. */
#define ATTN_PF_K 16
static inline __attribute__((always_inline)) void attn_prefetch(const simd_attn_args *a, size_t p)
{
    size_t bytes = a->hd * sizeof(simd_f16);
    const char *v = (const char *)(a->v + p * a->kvstride);
    for (size_t b = 0; b < bytes; b += 64)
        __builtin_prefetch(v + b);
    if (p + ATTN_PF_K < a->n) {
        const char *k = (const char *)(a->k + (p + ATTN_PF_K) * a->kvstride);
        for (size_t b = 0; b < bytes; b += 64)
            __builtin_prefetch(k + b);
    }
}

/* nh (1..ATTN_HB) heads starting at head h0 */
static inline __attribute__((always_inline)) void attn_heads(const simd_attn_args *a, size_t h0, int nh)
{
    const float *q[ATTN_HB], *e[ATTN_HB];
    float *o[ATTN_HB];
    for (int i = 0; i < nh; i++) {
        q[i] = a->q + (h0 + i) * a->qstride;
        e[i] = a->scratch + (h0 + i) * a->n;
        o[i] = a->part + (h0 + i) * a->pstride + 2;
    }
    size_t n = a->n, p = 0;
    for (; p + ATTN_SB <= n; p += ATTN_SB) {
        for (size_t j = 0; j < ATTN_SB; j++)
            attn_prefetch(a, p + j);
#ifdef ATTN_SCORES_HEADS
        attn_scores_heads(a, q, nh, p, ATTN_SB, (float *const *)e);
#else
        for (int i = 0; i < nh; i++)
            attn_scores(a, q[i], p, ATTN_SB, (float *)e[i]);
#endif
    }
#ifdef ATTN_SCORES_HEADS
    if (p < n)
        attn_scores_heads(a, q, nh, p, (int)(n - p), (float *const *)e);
#else
    if (p < n)
        for (int i = 0; i < nh; i++)
            attn_scores(a, q[i], p, (int)(n - p), (float *)e[i]);
#endif
    if (a->softcap > 0)
        for (int i = 0; i < nh; i++)
            attn_softcap((float *)e[i], n, a->softcap);
    float mx[ATTN_HB], sum[ATTN_HB];
    for (int i = 0; i < nh; i++)
        o[i][-2] = mx[i] = attn_max(e[i], n);
    attn_exp_rows((float *const *)e, nh, n, mx, sum);
    for (int i = 0; i < nh; i++)
        o[i][-1] = sum[i];
    /* V in tiles of ATTN_VT positions, every column of a tile before the
     * next tile: the tile's rows come from memory once and stay in L1 for
     * the other column chunks */
    for (size_t p0 = 0; p0 < n; p0 += ATTN_VT) {
        size_t p1 = p0 + ATTN_VT < n ? p0 + ATTN_VT : n, d = 0;
#if defined(__AVX512F__)
        for (; d + 64 <= a->hd; d += 64)
            attn_vsum64(a, e, nh, d, p0, p1, o);
#endif
        for (; d + 16 <= a->hd; d += 16)
            attn_vsum(a, e, nh, 16, d, p0, p1, o);
        if (d < a->hd) /* hd is a multiple of 8 */
            attn_vsum(a, e, nh, 8, d, p0, p1, o);
    }
}

void ATTN_ENTRY(const simd_attn_args *a)
{
    if (a->hd % 8) {
        simd_attn_ref(a);
        return;
    }
    size_t h = 0;
    for (; h + ATTN_HB <= a->nq; h += ATTN_HB)
        attn_heads(a, h, ATTN_HB);
    /* the rest with a constant head count, so each form is unrolled */
    switch (a->nq - h) {
    case 3: attn_heads(a, h, 3); break;
    case 2: attn_heads(a, h, 2); break;
    case 1: attn_heads(a, h, 1); break;
    default: break;
    }
}

#endif
