/* nibble_kpack: plain rows (dot_rows) against packed rows (dot_packed)
 * for one type and kernel set, single thread. Run by hand:
 *
 *   nibble_kpack [-n COLS] [-r ROWS] [-b TOKENS] [-t TYPES] [-k SET] [-i ITERS]
 *
 * ROWS is rounded down to whole groups of 16. The two forms run
 * alternately (plain, packed, plain, packed ...) so both see the same
 * machine load; each figure is the best of ITERS runs, as GB/s of weights
 * streamed (matrix bytes / time) and, for TOKENS > 1, tokens per second
 * per GB of weights' equivalent (GB/s x TOKENS). A matrix bigger than
 * the last-level cache measures memory; a small one, the kernel in cache.
 * Both results are compared bit for bit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "simd.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static unsigned long long rng = 88172645463325252ULL;
static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static int in_list(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == len && strncmp(p, name, l) == 0)
            return 1;
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    size_t n = 2048, rows = 2048, nt = 1;
    int iters = 10;
    const char *types = "q4_k,q6_k", *set = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "-n") && v) n = strtoull(v, NULL, 10), i++;
        else if (!strcmp(argv[i], "-r") && v) rows = strtoull(v, NULL, 10), i++;
        else if (!strcmp(argv[i], "-b") && v) nt = strtoull(v, NULL, 10), i++;
        else if (!strcmp(argv[i], "-i") && v) iters = atoi(v), i++;
        else if (!strcmp(argv[i], "-t") && v) types = v, i++;
        else if (!strcmp(argv[i], "-k") && v) set = v, i++;
        else {
            fprintf(stderr, "usage: %s [-n COLS] [-r ROWS] [-b TOKENS] [-t TYPES] [-k SET] [-i ITERS]\n", argv[0]);
            return 2;
        }
    }
    rows = rows / SIMD_PACK_ROWS * SIMD_PACK_ROWS;
    if (n == 0 || n % 256 || rows == 0 || nt == 0 || iters < 1) {
        fprintf(stderr, "COLS must be a positive multiple of 256, ROWS at least 16, TOKENS and ITERS positive\n");
        return 2;
    }
    simd_init();
    if (set) {
        int k = simd_kernel_find(set);
        const char *why = NULL;
        if (k < 0 || !simd_kernel_supported((enum simd_kernel)k, &why)) {
            fprintf(stderr, "kernel set %s: %s\n", set, k < 0 ? "unknown" : why);
            return 2;
        }
        simd_kernel_select((enum simd_kernel)k);
    }
    printf("set %s, matrix %zu x %zu, %zu token(s), best of %d, one thread\n",
           simd_kernel_name(simd_kernel_current()), rows, n, nt, iters);
    printf("%-6s %10s %12s %10s %12s %8s %6s\n", "type", "MB", "rows GB/s", "tok/s", "packed GB/s", "tok/s", "same");
    float *src = malloc(n * sizeof(float)), *x = malloc(n * nt * sizeof(float));
    float *y0 = malloc(rows * nt * sizeof(float)), *y1 = malloc(rows * nt * sizeof(float));
    if (!src || !x || !y0 || !y1)
        return 1;
    for (size_t i = 0; i < n * nt; i++)
        x[i] = frand();
    for (int type = 0; type < SIMD_TYPE_COUNT; type++) {
        const simd_traits *tr = simd_type_traits(type);
        if (!tr || !tr->name || !tr->quant || !in_list(types, tr->name))
            continue;
        if (!tr->dot_packed) {
            printf("%-6s no packed kernel in this set\n", tr->name);
            continue;
        }
        size_t rb = simd_row_bytes(type, n), ab = simd_act_row_bytes(tr->act, n);
        size_t ng = rows / SIMD_PACK_ROWS;
        unsigned char *w = malloc(rb * rows), *p = malloc(rb * rows), *a = malloc(ab * nt);
        if (!w || !p || !a)
            return 1;
        for (size_t r = 0; r < rows; r++) {
            for (size_t i = 0; i < n; i++)
                src[i] = frand() * 0.05f;
            tr->quant(src, w + r * rb, n);
        }
        simd_pack(type, n, w, rb, ng, p);
        for (size_t t = 0; t < nt; t++)
            simd_act_quant(tr->act, x + t * n, a + t * ab, n);
        double b0 = 1e30, b1 = 1e30;
        for (int it = 0; it < iters; it++) {
            double t0 = now();
            tr->dot_rows(n, w, rb, rows, a, ab, nt, y0, rows);
            double t1 = now();
            tr->dot_packed(n, p, ng, a, ab, nt, y1, rows);
            double t2 = now();
            if (t1 - t0 < b0) b0 = t1 - t0;
            if (t2 - t1 < b1) b1 = t2 - t1;
        }
        double gb = (double)rb * (double)rows / 1e9;
        printf("%-6s %10.1f %12.2f %10.1f %12.2f %8.1f %6s\n", tr->name, gb * 1e3, gb / b0, (double)nt / b0,
               gb / b1, (double)nt / b1, memcmp(y0, y1, rows * nt * sizeof(float)) == 0 ? "yes" : "NO");
        free(w);
        free(p);
        free(a);
    }
    free(src);
    free(x);
    free(y0);
    free(y1);
    return 0;
}
