/* nibble_attnbench: one decode step's attention over one layer's cache,
 * as forward.c runs it on one thread (every kv head, chunk by chunk,
 * the query heads of a kv head together), for each kernel set this CPU
 * runs but scalar: an f16 cache as forward.c keeps it (K transposed per
 * chunk, simd_attn_tile), the same values as rows through
 * simd_attn_chunk (the f16 decode form before the transposed K; still a
 * quantized K's, whose halves come as rows), and a q8_0
 * cache (simd_attn_q_tile). With -t NT, a prefill tile instead: NT tokens that
 * all see the whole depth, each chunk once for them (simd_attn_tile,
 * simd_attn_q_tile with nt = NT), as forward.c's att_tile runs the
 * chunks below a batch's diagonal; the rate is the score and V products
 * (2 * NT * heads * depth * head size multiply-adds) per second.
 * The cache is small enough to stay in L2/L3, so this times the kernels'
 * arithmetic, not memory; each figure is the fastest of -i runs, which a
 * busy machine disturbs least. Compare builds by running each in turns.
 * With -l L there are L such caches (layers), each run takes the next, so
 * with enough of them (a model's layer count) the cache comes from memory
 * as in a decode step. -hm 1 lays each kv head's rows one after the other
 * (forward.c's layout); 0, the rows of all kv heads side by side for each
 * position (the layout before it); the transposed K is always forward.c's.
 *
 *   nibble_attnbench [-d DEPTH] [-hd HEAD] [-g QHEADS_PER_KV] [-kv KVHEADS] [-i RUNS] [-t NT] [-l LAYERS] [-hm 0|1]
 * (defaults: qwen05's shape, 64 / 7 / 2, depth 4096, 300 runs; -t: 1
 * token, the decode step, 0 runs the decode form; 1 layer; -hm 1) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "simd.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static float val(size_t i, unsigned mul) { return (float)((i * mul) % 1000u) / 1000.0f - 0.5f; }

int main(int argc, char **argv)
{
    size_t depth = 4096, hd = 64, grp = 7, nkv = 2, runs = 300, nt = 0, layers = 1, hm = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        size_t v = (size_t)strtoul(argv[i + 1], NULL, 10);
        if (!strcmp(argv[i], "-d"))
            depth = v;
        else if (!strcmp(argv[i], "-hd"))
            hd = v;
        else if (!strcmp(argv[i], "-g"))
            grp = v;
        else if (!strcmp(argv[i], "-kv"))
            nkv = v;
        else if (!strcmp(argv[i], "-i"))
            runs = v;
        else if (!strcmp(argv[i], "-t"))
            nt = v;
        else if (!strcmp(argv[i], "-l"))
            layers = v;
        else if (!strcmp(argv[i], "-hm"))
            hm = v;
    }
    if (depth < 1 || depth > (1u << 20) || hd < 32 || hd % 32 || hd > 512 || grp < 1 || grp > 64 || nkv < 1 ||
        nkv > 64 || runs < 1 || nt > 256 || layers < 1 || layers > 256 || hm > 1 ||
        (double)layers * (double)depth * (double)(nkv * hd) > (double)(1u << 30)) {
        fprintf(stderr, "usage: nibble_attnbench [-d 1..1048576] [-hd 32k] [-g 1..64] [-kv 1..64] [-i N] [-t 0..256] "
                        "[-l 1..256] [-hm 0|1] (at most 2^30 cache values)\n");
        return 2;
    }
    simd_init();
    size_t kvs = nkv * hd, nb = hd / 32, row = hd + 2, nch = (depth + SIMD_ATTN_CHUNK - 1) / SIMD_ATTN_CHUNK;
    size_t rb = simd_row_bytes(SIMD_Q8_0, kvs), bb = rb / (kvs / 32);
    /* a layer's K (and V): depth rows of kvs halves, or rb bytes for q8_0 */
    size_t lk = depth * kvs, lq = depth * rb;
    simd_f16 *k = malloc(layers * lk * sizeof *k), *v = malloc(layers * lk * sizeof *v);
    simd_f16 *kt = malloc(layers * lk * sizeof *kt); /* per kv head, chunk by chunk: [hd][positions] */
    size_t ntq = nt ? nt : 1, tokrows = nch * grp * row; /* a token's chunk rows */
    float *tmp = malloc(kvs * sizeof *tmp), *q = malloc(ntq * grp * hd * sizeof *q);
    unsigned char *kq = malloc(layers * lq), *vq = malloc(layers * lq);
    simd_block_q8a *qq = malloc(ntq * grp * nb * sizeof *qq);
    float *part = malloc(ntq * tokrows * sizeof *part), *sc = malloc(grp * SIMD_ATTN_CHUNK * sizeof *sc);
    void *buf = malloc(SIMD_ATTN_Q_BUF(hd));
    float *kvbuf = malloc(SIMD_ATTN_TILE_BUF(hd) * sizeof *kvbuf);
    if (!k || !v || !kt || !tmp || !q || !kq || !vq || !qq || !part || !sc || !buf || !kvbuf) {
        fprintf(stderr, "nibble_attnbench: out of memory\n");
        return 1;
    }
    /* head g's rows from position p: where they start, and the step from
     * one row to the next (halves for f16, bytes for q8_0) */
    size_t rbh = nb * bb, hstep = hm ? hd : kvs, qstep = hm ? rbh : rb;
#define KV_AT(p, g) (hm ? ((g) * depth + (p)) * hd : (p) * kvs + (g) * hd)
#define KQ_AT(p, g) (hm ? ((g) * depth + (p)) * rbh : (p) * rb + (g) * rbh)
    /* the transposed K of head g's chunk from p0 (a multiple of
     * SIMD_ATTN_CHUNK), and its row stride: the chunk's positions */
#define KT_AT(p0, g) (((g) * depth + (p0)) * hd)
#define KT_STRIDE(p0) (depth - (p0) < SIMD_ATTN_CHUNK ? depth - (p0) : SIMD_ATTN_CHUNK)
    for (size_t p = 0; p < depth; p++)
        for (int w = 0; w < 2; w++) {
            for (size_t i = 0; i < kvs; i++)
                tmp[i] = val(p * kvs + i, w ? 40503u : 2654435761u);
            for (size_t g = 0; g < nkv; g++) {
                size_t p0 = p - p % SIMD_ATTN_CHUNK;
                for (size_t i = 0; i < hd; i++) {
                    (w ? v : k)[KV_AT(p, g) + i] = simd_f32_to_f16(tmp[g * hd + i]);
                    if (!w)
                        kt[KT_AT(p0, g) + i * KT_STRIDE(p0) + p % SIMD_ATTN_CHUNK] = simd_f32_to_f16(tmp[g * hd + i]);
                }
                simd_type_traits(SIMD_Q8_0)->quant(tmp + g * hd, (w ? vq : kq) + KQ_AT(p, g), hd);
            }
        }
    for (size_t l = 1; l < layers; l++) {
        memcpy(k + l * lk, k, lk * sizeof *k);
        memcpy(kt + l * lk, kt, lk * sizeof *kt);
        memcpy(v + l * lk, v, lk * sizeof *v);
        memcpy(kq + l * lq, kq, lq);
        memcpy(vq + l * lq, vq, lq);
    }
    for (size_t i = 0; i < ntq * grp * hd; i++)
        q[i] = val(i, 7919u);
    simd_act_quant(SIMD_ACT_Q8, q, qq, ntq * grp * hd);
    if (nt)
        printf("prefill tile of %zu tokens, one layer: depth %zu, head %zu, %zu query heads on each of %zu kv "
               "heads, fastest of %zu runs\n",
               nt, depth, hd, grp, nkv, runs);
    else
        printf("decode attention, one layer: depth %zu, head %zu, %zu query heads on each of %zu kv heads, "
               "fastest of %zu runs\n",
               depth, hd, grp, nkv, runs);
    printf("%zu layer%s in turn (%.1f MB of f16 cache), %s\n", layers, layers > 1 ? "s" : "",
           (double)(layers * lk * 2 * sizeof *k) / 1e6,
           hm ? "each kv head's rows contiguous" : "each position's kv heads side by side");
    for (int ks = 0; ks < SIMD_K_COUNT; ks++) {
        /* scalar: the reference, far too slow to time this way */
        if (ks == SIMD_K_SCALAR || !simd_kernel_supported((enum simd_kernel)ks, NULL) ||
            simd_kernel_select((enum simd_kernel)ks))
            continue;
        double best[3] = {1e30, 1e30, 1e30};
        for (size_t r = 0; r < runs; r++)
            for (int mode = 0; mode < 3; mode++) { /* in turns, so load hits all alike */
                const simd_f16 *kl = k + r % layers * lk, *vl = v + r % layers * lk, *ktl = kt + r % layers * lk;
                const unsigned char *kql = kq + r % layers * lq, *vql = vq + r % layers * lq;
                double t0 = now();
                for (size_t g = 0; g < nkv; g++)
                    for (size_t c = 0; c < nch; c++) {
                        size_t p0 = c * SIMD_ATTN_CHUNK, n = depth - p0 < SIMD_ATTN_CHUNK ? depth - p0 : SIMD_ATTN_CHUNK;
                        if (mode == 2) { /* q8_0: a tile of nt tokens, or the decode step's one */
                            simd_attn_q_args a = {.hd = hd, .nq = grp, .n = n, .q = qq, .qstride = nb,
                                                  .ktype = SIMD_Q8_0, .vtype = SIMD_Q8_0,
                                                  .k = kql + KQ_AT(p0, g), .v = vql + KQ_AT(p0, g),
                                                  .kstride = qstep, .vstride = qstep, .scale = 0.125f,
                                                  .part = part + c * grp * row, .pstride = row, .scratch = sc,
                                                  .buf = buf};
                            simd_attn_q_tile(&a, nt ? nt : 1, nt ? grp * nb : 0, nt ? tokrows : 0);
                        } else {
                            simd_attn_args a = {.hd = hd, .nq = grp, .n = n, .q = q, .qstride = hd,
                                                .k = kl + KV_AT(p0, g), .v = vl + KV_AT(p0, g),
                                                .kvstride = hstep, .scale = 0.125f, .part = part + c * grp * row,
                                                .pstride = row, .scratch = sc};
                            if (mode == 0) { /* forward.c's: K transposed, the tile's order */
                                a.k = ktl + KT_AT(p0, g);
                                a.ktstride = KT_STRIDE(p0);
                                simd_attn_tile(&a, nt ? nt : 1, grp * hd, tokrows, kvbuf);
                            } else if (nt) { /* the rows through the tile's conversion: not a form any more */
                                continue;
                            } else {
                                simd_attn_chunk(&a);
                            }
                        }
                    }
                double t = now() - t0;
                if (t < best[mode])
                    best[mode] = t;
            }
        double macs = 2.0 * (double)ntq * (double)(grp * nkv) * (double)depth * (double)hd;
        printf("%-12s f16 cache %8.3f ms (%6.2f GMAC/s)", simd_kernel_name((enum simd_kernel)ks), best[0] * 1e3,
               macs / best[0] * 1e-9);
        if (!nt)
            printf("   f16 rows, chunk form %8.3f ms (%6.2f GMAC/s)", best[1] * 1e3, macs / best[1] * 1e-9);
        printf("   q8_0 cache %8.3f ms (%6.2f GMAC/s)\n", best[2] * 1e3, macs / best[2] * 1e-9);
    }
    simd_init();
    free(k); free(kt); free(v); free(tmp); free(q); free(kq); free(vq); free(qq); free(part); free(sc); free(buf); free(kvbuf);
    return 0;
}
