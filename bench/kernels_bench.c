/* nibble_kbench: per-kernel-set speed of the dot kernels on one
 * matrix-vector product (decode) and one matrix times a small batch of
 * activation rows (prefill), single thread. Run by hand:
 *
 *   nibble_kbench [-n COLS] [-r ROWS] [-b BATCH] [-t TYPES] [-k SETS] [-i ITERS]
 *
 * TYPES and SETS are comma lists (default q8_0,q4_0 and every set this CPU
 * runs). Figures are the best of ITERS runs: GB/s of weights streamed
 * (matrix bytes / time), and for the batch also GB/s "per token" (matrix
 * bytes x BATCH / time, what BATCH separate products would need to match).
 * "rows" columns: the same products through dot_rows, all rows in one
 * call as the forward pass makes them (COLS may be any multiple of 32:
 * 576 and 1536 are SmolLM2-135M's). "packed" columns: the same through
 * dot_packed on the matrix packed once (simd_pack; the first ROWS/16*16
 * rows), for sets that read the type packed, and "-" otherwise; the
 * rows and packed forms run alternately so that their ratio holds on a
 * busy machine. A matrix bigger than the last-level cache measures memory
 * (e.g. -n 2048 -r 65536 -b 1 -t q4_k), a small one the kernel in cache.
 * Also checks every set's output against the scalar set's, bit for bit,
 * dot_rows against dot_batch and dot_packed against dot_rows. */
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

static unsigned long long rng = 12345;
static float frand(void)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static int in_list(const char *list, const char *name)
{
    if (!list)
        return 1;
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
    size_t n = 4096, rows = 4096, batch = 8;
    int iters = 10;
    const char *types = "q8_0,q4_0", *sets = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "-n") && v) n = strtoull(v, NULL, 10), i++;
        else if (!strcmp(argv[i], "-r") && v) rows = strtoull(v, NULL, 10), i++;
        else if (!strcmp(argv[i], "-b") && v) batch = strtoull(v, NULL, 10), i++;
        else if (!strcmp(argv[i], "-i") && v) iters = atoi(v), i++;
        else if (!strcmp(argv[i], "-t") && v) types = v, i++;
        else if (!strcmp(argv[i], "-k") && v) sets = v, i++;
        else {
            fprintf(stderr, "usage: %s [-n COLS] [-r ROWS] [-b BATCH] [-t TYPES] [-k SETS] [-i ITERS]\n", argv[0]);
            return 2;
        }
    }
    if (n % 32 || !rows || !batch || iters < 1) {
        fprintf(stderr, "COLS must be a multiple of 32; ROWS, BATCH, ITERS positive\n");
        return 2;
    }
    char cpu[512];
    simd_cpu_describe(cpu, sizeof cpu);
    printf("cpu: %s\n", cpu);
    printf("matrix %zu x %zu, batch %zu, best of %d, one thread\n\n", rows, n, batch, iters);
    printf("%-6s %-12s %10s %10s %12s %12s %10s %12s %10s %12s %8s\n", "type", "set", "matvec ms", "GB/s",
           "batch ms", "GB/s/token", "rows GB/s", "rowsb GB/s/t", "pk GB/s", "pkb GB/s/t", "same");

    float *x = malloc(n * batch * sizeof(float));
    float *src = malloc(n * sizeof(float));
    /* per row: the matvec result, then the batch's */
    float *y = malloc(rows * (batch + 1) * sizeof(float));
    float *yref = malloc(rows * (batch + 1) * sizeof(float));
    float *yr = malloc(rows * (batch + 1) * sizeof(float)); /* dot_rows: token-major */
    if (!x || !src || !y || !yref || !yr)
        return 1;
    for (size_t i = 0; i < n * batch; i++)
        x[i] = frand();

    for (int type = 0; type < SIMD_TYPE_COUNT; type++) {
        const simd_traits *tr = simd_type_traits(type);
        if (!tr || !tr->quant || !in_list(types, tr->name) || n % tr->block)
            continue;
        size_t rb = simd_row_bytes(type, n), ab = simd_act_row_bytes(tr->act, n);
        unsigned char *w = malloc(rb * rows), *a = malloc(ab * batch);
        size_t ng = rows / 16, gb = simd_pack_group_bytes(type, n);
        unsigned char *pk = gb && ng ? malloc(gb * ng) : NULL;
        if (!w || !a)
            return 1;
        for (size_t r = 0; r < rows; r++) {
            for (size_t i = 0; i < n; i++)
                src[i] = frand() * 0.05f;
            tr->quant(src, w + r * rb, n);
        }
        if (pk)
            simd_pack(type, n, w, rb, ng, pk);
        int have_ref = 0;
        for (int k = 0; k < SIMD_K_COUNT; k++) {
            if (!simd_kernel_supported((enum simd_kernel)k, NULL) || !in_list(sets, simd_kernel_name((enum simd_kernel)k)))
                continue;
            simd_kernel_select((enum simd_kernel)k);
            simd_dot_fn dot = tr->dot;
            simd_dot_batch_fn dotb = tr->dot_batch;
            simd_dot_rows_fn dotr = tr->dot_rows;
            for (size_t t = 0; t < batch; t++)
                simd_act_quant(tr->act, x + t * n, a + t * ab, n);
            double best = 1e30, bestb = 1e30;
            for (int it = 0; it < iters; it++) {
                double t0 = now();
                for (size_t r = 0; r < rows; r++)
                    y[r] = dot(n, w + r * rb, a);
                double t1 = now();
                if (t1 - t0 < best) best = t1 - t0;
            }
            for (int it = 0; it < iters; it++) {
                double t0 = now();
                for (size_t r = 0; r < rows; r++)
                    dotb(n, w + r * rb, a, ab, batch, y + rows + r * batch, 1);
                double t1 = now();
                if (t1 - t0 < bestb) bestb = t1 - t0;
            }
            /* the same two products through dot_rows (all rows in one call,
             * as the forward pass makes it) and, where the set reads the type
             * packed, through dot_packed on the packed matrix: the two
             * alternate, iteration by iteration, so both see the same load
             * on a shared machine. dot_packed must give dot_rows' bits. */
            int packed = pk && tr->dot_packed;
            float *yp = packed ? malloc(rows * (batch + 1) * sizeof(float)) : NULL;
            if (packed && !yp)
                return 1;
            double bestr = 1e30, bestrb = 1e30, bp = 1e30, bpb = 1e30;
            for (int b = 0; b < 2; b++) {
                size_t nt = b ? batch : 1, off = b ? rows : 0;
                double *br = b ? &bestrb : &bestr, *bk = b ? &bpb : &bp;
                for (int it = 0; it < iters; it++) {
                    double t0 = now();
                    dotr(n, w, rb, rows, a, ab, nt, yr + off, rows);
                    double t1 = now();
                    if (packed)
                        tr->dot_packed(n, pk, ng, a, ab, nt, yp + off, rows);
                    double t2 = now();
                    if (t1 - t0 < *br) *br = t1 - t0;
                    if (t2 - t1 < *bk) *bk = t2 - t1;
                }
            }
            int rows_same = memcmp(yr, y, rows * sizeof(float)) == 0;
            for (size_t r = 0; r < rows; r++)
                for (size_t t = 0; t < batch; t++)
                    rows_same &= memcmp(&yr[rows + t * rows + r], &y[rows + r * batch + t], sizeof(float)) == 0;
            char pks[16] = "-", pkbs[16] = "-";
            if (packed) {
                for (size_t t = 0; t <= batch; t++)
                    rows_same &= memcmp(yp + t * rows, yr + t * rows, ng * 16 * sizeof(float)) == 0;
                double pgb = (double)gb * (double)ng / 1e9;
                snprintf(pks, sizeof pks, "%.2f", pgb / bp);
                snprintf(pkbs, sizeof pkbs, "%.2f", pgb * (double)batch / bpb);
                free(yp);
            }
            /* compare with the first set measured (scalar when listed) */
            const char *same = "-";
            size_t bytes = rows * (batch + 1) * sizeof(float);
            if (!have_ref) {
                memcpy(yref, y, bytes);
                have_ref = 1;
            } else {
                same = memcmp(yref, y, bytes) == 0 ? "yes" : "NO";
            }
            if (!rows_same)
                same = "ROWS-NO";
            double gb = (double)rb * (double)rows / 1e9;
            printf("%-6s %-12s %10.3f %10.2f %12.3f %12.2f %10.2f %12.2f %10s %12s %8s\n", tr->name,
                   simd_kernel_name((enum simd_kernel)k), best * 1e3, gb / best, bestb * 1e3,
                   gb * (double)batch / bestb, gb / bestr, gb * (double)batch / bestrb, pks, pkbs, same);
        }
        free(w);
        free(a);
        free(pk);
    }
    /* activation quantization */
    printf("\nq8a_quant of %zu floats:\n", n * batch);
    unsigned char *q = malloc(simd_act_row_bytes(SIMD_ACT_Q8, n * batch));
    for (int k = 0; k < SIMD_K_COUNT; k++) {
        if (!simd_kernel_supported((enum simd_kernel)k, NULL) || !in_list(sets, simd_kernel_name((enum simd_kernel)k)))
            continue;
        simd_kernel_select((enum simd_kernel)k);
        double best = 1e30;
        for (int it = 0; it < iters * 10; it++) {
            double t0 = now();
            simd_act_quant(SIMD_ACT_Q8, x, q, n * batch);
            double t1 = now();
            if (t1 - t0 < best) best = t1 - t0;
        }
        printf("  %-12s %8.2f GB/s of floats\n", simd_kernel_name((enum simd_kernel)k),
               (double)(n * batch * sizeof(float)) / best / 1e9);
    }
    free(q);
    free(x);
    free(src);
    free(y);
    free(yref);
    free(yr);
    return 0;
}
