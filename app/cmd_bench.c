/* nibble bench: prompt and decode speed per kernel set and thread count,
 * next to the memory-bandwidth roofline for decode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "bench.h"
#include "model.h"
#include "simd.h"
#include "sys.h"

static const char usage[] =
    "usage: nibble bench [-m MODEL] [-p N] [-n N] [-d N] [-t LIST] [-r N] [--kernel all|LIST] [--json] [--no-load] [--no-pack]\n"
    "       nibble bench --membw [-t LIST]\n"
    "\n"
    "  -p N             prompt tokens for the prefill test, 0 to skip (default 128)\n"
    "  -n N             generated tokens for the decode test, 0 to skip (default 64)\n"
    "  -d N             context depth: run both tests after N tokens already in the\n"
    "                   context (prefilled once, not timed), as llama-bench -d (default 0)\n"
    "  -t LIST          thread counts, e.g. 1,2 (default: physical cores)\n"
    "  -r N             repetitions after one warm-up (default 3)\n"
    "  --kernel LIST    kernel sets, e.g. scalar,avx2, or all usable ones (default: the best)\n"
    "  --json           one JSON object per result line instead of a table\n"
    "  --membw          only measure memory read bandwidth\n"
    "  --no-load        skip the load-time test\n"
    "  --no-pack        keep the weights in the file's layout (no packed copy made at\n"
    "                   load), to compare with the packed kernels\n"
    "\n"
    "Decode is bounded by memory bandwidth: each token reads every weight once.\n"
    "The roofline column is bandwidth / bytes per token; 'of roof' the fraction reached.\n"
    "RSS is the largest resident set after a run (mapped weights included), checked\n"
    "against the budget file + KV cache + 64 MB. Load: open the model and make a\n"
    "context ('open'), then run the first token to its logits ('first token'),\n"
    "best of -r tries with the file in the page cache.\n";

#define MAXLIST 16

static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    while (*s && n < max) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 256)
            return -1;
        out[n++] = (int)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return n;
}

int cmd_bench(int argc, char **argv)
{
    const char *model = NULL, *kernels = NULL, *tlist = NULL;
    int n_prompt = 128, n_gen = 64, n_depth = 0, reps = 3, json = 0, membw_only = 0, load = 1;
    eng_model_opts mo;
    memset(&mo, 0, sizeof mo);
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(a, "-m") && v) { model = v; i++; }
        else if (!strcmp(a, "-p") && v) { n_prompt = atoi(v); i++; }
        else if (!strcmp(a, "-n") && v) { n_gen = atoi(v); i++; }
        else if (!strcmp(a, "-d") && v) { n_depth = atoi(v); i++; }
        else if (!strcmp(a, "-r") && v) { reps = atoi(v); i++; }
        else if (!strcmp(a, "-t") && v) { tlist = v; i++; }
        else if (!strcmp(a, "--kernel") && v) { kernels = v; i++; }
        else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--membw")) membw_only = 1;
        else if (!strcmp(a, "--no-load")) load = 0;
        else if (!strcmp(a, "--no-pack")) mo.no_pack = 1;
        else {
            fprintf(stderr, "nibble bench: unknown option or missing value: %s (see --help)\n", a);
            return 2;
        }
    }
    if (n_prompt < 0 || n_gen < 0 || n_depth < 0 || reps < 1 || n_prompt > 65536 || n_gen > 65536 ||
        n_depth > 65536) {
        fprintf(stderr, "nibble bench: -p, -n and -d must be 0..65536 and -r at least 1\n");
        return 2;
    }
    int threads[MAXLIST], nt = 1;
    threads[0] = eng_physical_cores();
    if (tlist && (nt = parse_list(tlist, threads, MAXLIST)) <= 0) {
        fprintf(stderr, "nibble bench: -t %s: expected thread counts like 1,2\n", tlist);
        return 2;
    }
    simd_init();
    /* the kernel sets to measure, checked before the bandwidth run */
    int ks[SIMD_K_COUNT], nk = 0;
    if (!kernels) {
        ks[nk++] = simd_kernel_current();
    } else {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", kernels);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            if (!strcmp(tok, "all")) {
                for (int k = 0; k < SIMD_K_COUNT; k++)
                    if (simd_kernel_supported((enum simd_kernel)k, NULL) && nk < SIMD_K_COUNT)
                        ks[nk++] = k;
                continue;
            }
            int k = simd_kernel_find(tok);
            const char *why = NULL;
            if (k < 0 || !simd_kernel_supported((enum simd_kernel)k, &why)) {
                if (k < 0) {
                    fprintf(stderr, "nibble bench: kernel set '%s' does not exist; the sets are all", tok);
                    for (int j = 0; j < SIMD_K_COUNT; j++)
                        fprintf(stderr, ", %s", simd_kernel_name((enum simd_kernel)j));
                    fputc('\n', stderr);
                } else
                    fprintf(stderr, "nibble bench: kernel set '%s' cannot run here: %s\n", tok, why);
                return 1;
            }
            if (nk < SIMD_K_COUNT)
                ks[nk++] = k;
        }
    }
    double bw[MAXLIST];
    for (int i = 0; i < nt; i++) {
        bw[i] = eng_bench_membw(threads[i], (size_t)1 << 30);
        if (membw_only || !json)
            fprintf(membw_only ? stdout : stderr, "memory read bandwidth, %d thread%s: %.1f GB/s\n", threads[i],
                    threads[i] > 1 ? "s" : "", bw[i]);
    }
    if (membw_only)
        return 0;
    app_opts o;
    memset(&o, 0, sizeof o);
    o.model = model;
    eng_err e;
    eng_model *m;
    if (eng_model_open_opts(app_model_path(&o), &mo, &m, &e)) {
        fprintf(stderr, "nibble: %s\n", e.msg);
        return 1;
    }
    /* the speed tests measure the packed weights, once they all are */
    eng_model_pack_wait(m);
    const eng_model_info *in = eng_model_get_info(m);
    uint64_t bpt = eng_bench_bytes_per_token(m);
    int status = 0;
    if (load) {
        eng_bench_load lt;
        if (eng_bench_load_time(app_model_path(&o), &mo, threads[0], reps, &lt, &e)) {
            fprintf(stderr, "nibble bench: %s\n", e.msg);
            eng_model_close(m);
            return 1;
        }
        if (json)
            printf("{\"model\": \"%s\", \"file_bytes\": %llu, \"kernel\": \"%s\", \"threads\": %d, "
                   "\"test\": \"load\", \"open_ms\": %.1f, \"first_token_ms\": %.1f}\n",
                   in->name, (unsigned long long)in->file_size, simd_kernel_name(simd_kernel_current()), threads[0],
                   lt.open_ms, lt.first_ms);
        else
            fprintf(stderr, "load, %d thread%s: open %.1f ms, first token %.1f ms (best of %d)\n", threads[0],
                    threads[0] > 1 ? "s" : "", lt.open_ms, lt.first_ms, reps);
    }
    if (!json)
        printf("| model | size | params | type | kernel | threads | test | t/s | roofline t/s | of roof | RSS MB (budget) |\n"
               "|---|---:|---:|---|---|---:|---|---:|---:|---:|---:|\n");
    for (int ki = 0; ki < nk && !status; ki++) {
        simd_kernel_select((enum simd_kernel)ks[ki]);
        /* a set without packed kernels gets the file's layout alone (not
         * both copies resident), one with them a packed model */
        eng_model_kernel_changed(m);
        eng_model_pack_wait(m);
        for (int ti = 0; ti < nt && !status; ti++) {
            eng_bench_stat pp, tg;
            eng_bench_mem mem;
            if (eng_bench_run(m, threads[ti], n_depth, n_prompt, n_gen, reps, &pp, &tg, &mem, &e)) {
                fprintf(stderr, "nibble bench: %s\n", e.msg);
                status = 1;
                break;
            }
            double roof = bw[ti] * 1e9 / (double)bpt;
            int over = mem.rss > mem.budget;
            char rss[64] = "n/a";
            if (mem.rss)
                snprintf(rss, sizeof rss, "%.0f (%.0f)%s", mem.rss / 1048576.0, mem.budget / 1048576.0,
                         over ? " OVER" : "");
            if (over)
                fprintf(stderr, "nibble bench: resident set %.1f MB is over the budget %.1f MB (file %.1f + KV cache "
                        "%.1f + 64)\n", mem.rss / 1048576.0, mem.budget / 1048576.0, in->file_size / 1048576.0,
                        mem.kv_bytes / 1048576.0);
            for (int test = 0; test < 2; test++) {
                const eng_bench_stat *s = test ? &tg : &pp;
                int count = test ? n_gen : n_prompt;
                if (!count)
                    continue;
                /* pp512, tg64; in the table at depth "tg64 @ d512", as
                 * llama-bench writes it (JSON has a depth field instead) */
                char test_id[24], name[48];
                snprintf(test_id, sizeof test_id, "%s%d", test ? "tg" : "pp", count);
                if (n_depth)
                    snprintf(name, sizeof name, "%s @ d%d", test_id, n_depth);
                else
                    snprintf(name, sizeof name, "%s", test_id);
                if (json)
                    printf("{\"model\": \"%s\", \"file_bytes\": %llu, \"params\": %llu, \"type\": \"%s\", "
                           "\"kernel\": \"%s\", \"threads\": %d, \"test\": \"%s\", \"depth\": %d, \"tps\": %.2f, \"sd\": %.2f, "
                           "\"membw_gbs\": %.2f, \"roofline_tps\": %.2f, \"rss_bytes\": %llu, \"kv_bytes\": %llu, "
                           "\"rss_budget_bytes\": %llu}\n",
                           in->name, (unsigned long long)in->file_size, (unsigned long long)in->n_params,
                           simd_type_name(in->main_type), simd_kernel_name((enum simd_kernel)ks[ki]), threads[ti],
                           test_id, n_depth, s->mean, s->sd, bw[ti], test ? roof : 0.0,
                           (unsigned long long)mem.rss, (unsigned long long)mem.kv_bytes,
                           (unsigned long long)mem.budget);
                else if (test)
                    printf("| %s | %.1f MB | %.1f M | %s | %s | %d | %s | %.1f ± %.1f | %.1f | %.0f%% | %s |\n",
                           in->name, in->file_size / 1e6, in->n_params / 1e6, simd_type_name(in->main_type),
                           simd_kernel_name((enum simd_kernel)ks[ki]), threads[ti], name, s->mean, s->sd, roof,
                           100.0 * s->mean / roof, rss);
                else
                    printf("| %s | %.1f MB | %.1f M | %s | %s | %d | %s | %.1f ± %.1f | | | %s |\n", in->name,
                           in->file_size / 1e6, in->n_params / 1e6, simd_type_name(in->main_type),
                           simd_kernel_name((enum simd_kernel)ks[ki]), threads[ti], name, s->mean, s->sd, rss);
                fflush(stdout);
            }
        }
    }
    eng_model_close(m);
    return status;
}
