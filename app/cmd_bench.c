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
#include "spec.h"

static const char usage[] =
    "usage: nibble bench [-m MODEL] [-p N] [-n N] [-d N] [-t LIST] [-ctk LIST] [-ctv LIST] [-r N] [--kernel all|LIST]\n"
    "                    [--json] [--no-load] [--no-pack] [--peak]\n"
    "       nibble bench --membw [-t LIST]\n"
    "\n"
    "  -p N             prompt tokens for the prefill test, 0 to skip (default 128)\n"
    "  -n N             generated tokens for the decode test, 0 to skip (default 64)\n"
    "  -d N             context depth: run both tests after N tokens already in the\n"
    "                   context (prefilled once, not timed), as llama-bench -d (default 0)\n"
    "  -t LIST          thread counts, e.g. 1,2 (default: physical cores)\n"
    "  -ctk LIST, -ctv LIST\n"
    "                   K and V cache types, e.g. f16,q8_0,q4_0 (default f16): every\n"
    "                   pair is measured, as llama-bench -ctk/-ctv; the table's test\n"
    "                   cell names the pair, and JSON has type_k, type_v always\n"
    "  -r N             repetitions after one warm-up (default 3)\n"
    "  --kernel LIST    kernel sets, e.g. scalar,avx2, or all usable ones (default: the best)\n"
    "  --json           one JSON object per result line instead of a table\n"
    "  --membw          only measure memory read bandwidth\n"
    "  --peak           also measure the kernel set's int8 and float peaks (its\n"
    "                   dot-product and multiply-add instructions, and its q8_0\n"
    "                   kernel on weights in cache) and show prefill against them:\n"
    "                   the pp rows' roofline is then the time a prompt token's\n"
    "                   multiply-adds take at those peaks\n"
    "  --no-load        skip the load-time test\n"
    "  --no-pack        keep the weights in the file's layout (no packed copy made at\n"
    "                   load), to compare with the packed kernels\n"
    "  --model-draft FILE  also measure speculative decoding with this draft model\n"
    "  --lookup N       also measure speculative decoding by prompt lookup (n-grams of N)\n"
    "  --draft-max N    tokens drafted per check, 1..31 (default 8)\n"
    "  --draft-min N    shorter drafts are not checked (default 0)\n"
    "  --spec-prompt FILE  the text both speculative rows continue (default: two\n"
    "                   sentences written six times, a prompt the continuation repeats)\n"
    "\n"
    "Decode is bounded by memory bandwidth: each token reads every weight once.\n"
    "The roofline column is bandwidth / bytes per token: the weights, and the K and V\n"
    "rows a step halfway through the test reads (depth + n/2 positions, in the cache's\n"
    "types); 'of roof' the fraction reached.\n"
    "Prefill is bounded by arithmetic instead: with --peak its roofline is one over\n"
    "the time of a prompt token's matrix products at the set's int8 multiply-add\n"
    "instruction issued back to back (for a float model, its own kernel's rate on\n"
    "weights in cache) plus its attention at the float multiply-add instruction's\n"
    "rate (the scores at the int8 one where K and V are both quantized): the scores\n"
    "and V sums of its query heads over the positions it sees at -d, on average over\n"
    "the -p tokens.\n"
    "RSS is the largest resident set after a run (mapped weights included), checked\n"
    "against the budget file + KV cache + 64 MB + what a layout decoded at load adds\n"
    "(iq3_s's, 22% of its matrices) (+ the draft model's file). Load: open the model\n"
    "and make a context ('open'), then run the first token to its logits ('first token'),\n"
    "best of -r tries with the file in the page cache.\n"
    "With --model-draft or --lookup, two more rows decode -n tokens greedily from a\n"
    "text prompt, plainly ('tgN text') and speculatively ('tgN spec'), in turns; t/s\n"
    "counts the tokens produced (so 'of roof' may pass 100%), and 'accept' the share\n"
    "of drafted tokens the model kept. The two must produce the same tokens.\n";

/* the default text of the speculative rows: two sentences six times, a
 * prompt whose continuation repeats it (on the embedded model, too) */
#define SPEC_LINE "Lily saw a big red ball in the park. She ran to the ball and picked it up. "
static const char spec_text[] = SPEC_LINE SPEC_LINE SPEC_LINE SPEC_LINE SPEC_LINE SPEC_LINE;

#define MAXLIST 16

/* Cache type names ("f16,q8_0") into out; how many, or -1. */
static int parse_kv_list(const char *s, int *out, int max)
{
    char buf[256];
    int n = 0;
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (n == max || (out[n] = eng_kv_type_parse(tok)) < 0)
            return -1;
        n++;
    }
    return n;
}

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

/* The kernel sets named in list ("all": every usable one), into ks;
 * returns how many, or -1 after a message. */
static int pick_kernels(const char *list, int ks[SIMD_K_COUNT])
{
    int nk = 0;
    if (!list) {
        ks[nk++] = simd_kernel_current();
        return nk;
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (!strcmp(tok, "all")) {
            for (int k = 0; k < SIMD_K_COUNT; k++)
                if (simd_kernel_supported((enum simd_kernel)k, NULL) && nk < SIMD_K_COUNT)
                    ks[nk++] = k;
            continue;
        }
        int k = simd_kernel_find(tok);
        const char *why = NULL;
        if (k < 0) {
            fprintf(stderr, "nibble bench: kernel set '%s' does not exist; the sets are all", tok);
            for (int j = 0; j < SIMD_K_COUNT; j++)
                fprintf(stderr, ", %s", simd_kernel_name((enum simd_kernel)j));
            fputc('\n', stderr);
            return -1;
        }
        if (!simd_kernel_supported((enum simd_kernel)k, &why)) {
            fprintf(stderr, "nibble bench: kernel set '%s' cannot run here: %s\n", tok, why);
            return -1;
        }
        if (nk < SIMD_K_COUNT)
            ks[nk++] = k;
    }
    return nk;
}

/* What one kernel set and thread count measured. */
typedef struct result {
    const eng_model_info *in;
    int kernel, threads, depth, json;
    int type_k, type_v, kvcol; /* the cache types; kvcol: the table shows them (-ctk or -ctv given) */
    double bw, roof; /* GB/s; tokens/s the bandwidth allows */
    double peak, peak_roof; /* --peak: int8 GMAC/s in cache; prompt tokens/s it allows (0: not measured) */
    double fpeak, mm_gmacs; /* --peak: float GMAC/s; the rate the matrix products' ceiling is */
    eng_bench_mem mem;
    char rss[64];    /* "MB (budget MB)" for the table */
} result;

/* One line of the table or one JSON object: test 0 prefill, 1 decode. */
static void print_result(const result *r, int test, int count, const eng_bench_stat *s)
{
    const eng_model_info *in = r->in;
    const char *kname = simd_kernel_name((enum simd_kernel)r->kernel), *type = simd_type_name(in->main_type);
    /* pp512, tg64; in the table at depth "tg64 @ d512", as llama-bench
     * writes it (JSON has a depth field instead) */
    char test_id[24], name[48];
    snprintf(test_id, sizeof test_id, "%s%d", test ? "tg" : "pp", count);
    if (r->depth)
        snprintf(name, sizeof name, "%s @ d%d", test_id, r->depth);
    else
        snprintf(name, sizeof name, "%s", test_id);
    if (r->kvcol && !r->json) /* the K/V column, after threads */
        snprintf(name + strlen(name), sizeof name - strlen(name), "  (KV %s/%s)", eng_kv_type_name(r->type_k),
                 eng_kv_type_name(r->type_v));
    if (r->json)
        printf("{\"model\": \"%s\", \"file_bytes\": %llu, \"params\": %llu, \"type\": \"%s\", "
               "\"kernel\": \"%s\", \"threads\": %d, \"test\": \"%s\", \"depth\": %d, \"tps\": %.2f, \"sd\": %.2f, "
               "\"membw_gbs\": %.2f, \"roofline_tps\": %.2f, \"rss_bytes\": %llu, \"kv_bytes\": %llu, "
               "\"rss_budget_bytes\": %llu, \"peak_gmacs\": %.6g, \"type_k\": \"%s\", \"type_v\": \"%s\", "
               "\"kv_read_bytes\": %llu}\n",
               in->name, (unsigned long long)in->file_size, (unsigned long long)in->n_params, type, kname, r->threads,
               test_id, r->depth, s->mean, s->sd, r->bw, test ? r->roof : r->peak_roof, (unsigned long long)r->mem.rss,
               (unsigned long long)r->mem.kv_bytes, (unsigned long long)r->mem.budget, r->peak,
               eng_kv_type_name(r->type_k), eng_kv_type_name(r->type_v), (unsigned long long)r->mem.kv_read_bytes);
    else if (test)
        printf("| %s | %.1f MB | %.1f M | %s | %s | %d | %s | %.1f ± %.1f | %.1f | %.0f%% | %s |\n", in->name,
               in->file_size / 1e6, in->n_params / 1e6, type, kname, r->threads, name, s->mean, s->sd, r->roof,
               100.0 * s->mean / r->roof, r->rss);
    else if (r->peak_roof > 0)
        printf("| %s | %.1f MB | %.1f M | %s | %s | %d | %s | %.1f ± %.1f | %.1f peak | %.0f%% | %s |\n", in->name,
               in->file_size / 1e6, in->n_params / 1e6, type, kname, r->threads, name, s->mean, s->sd, r->peak_roof,
               100.0 * s->mean / r->peak_roof, r->rss);
    else
        printf("| %s | %.1f MB | %.1f M | %s | %s | %d | %s | %.1f ± %.1f | | | %s |\n", in->name, in->file_size / 1e6,
               in->n_params / 1e6, type, kname, r->threads, name, s->mean, s->sd, r->rss);
    fflush(stdout);
}

/* The speculative rows: plain greedy decode of the text, then the same
 * with the drafter (t/s = tokens produced per second), and acceptance. */
static void print_spec(const result *r, int count, const char *drafter, const eng_bench_spec_result *sr)
{
    const eng_model_info *in = r->in;
    const char *kname = simd_kernel_name((enum simd_kernel)r->kernel), *type = simd_type_name(in->main_type);
    double accept = sr->drafted ? (double)sr->accepted / (double)sr->drafted : 0;
    double per_check = sr->checks ? (double)(sr->spec.reps * count) / (double)sr->checks : 0;
    for (int row = 0; row < 2; row++) {
        const eng_bench_stat *s = row ? &sr->spec : &sr->plain;
        char test_id[24];
        snprintf(test_id, sizeof test_id, "tg%d-%s", count, row ? "spec" : "text");
        if (r->json) {
            printf("{\"model\": \"%s\", \"file_bytes\": %llu, \"params\": %llu, \"type\": \"%s\", "
                   "\"kernel\": \"%s\", \"threads\": %d, \"test\": \"%s\", \"depth\": %u, \"tps\": %.2f, "
                   "\"sd\": %.2f, \"membw_gbs\": %.2f, \"roofline_tps\": %.2f",
                   in->name, (unsigned long long)in->file_size, (unsigned long long)in->n_params, type, kname,
                   r->threads, test_id, sr->prompt_tokens, s->mean, s->sd, r->bw, r->roof);
            if (row)
                printf(", \"drafter\": \"%s\", \"accept\": %.4f, \"drafted\": %llu, \"accepted\": %llu, "
                       "\"checks\": %llu, \"tokens_per_check\": %.3f, \"plain_tps\": %.2f, \"speedup\": %.3f",
                       drafter, accept, (unsigned long long)sr->drafted, (unsigned long long)sr->accepted,
                       (unsigned long long)sr->checks, per_check, sr->plain.mean,
                       sr->plain.mean > 0 ? s->mean / sr->plain.mean : 0.0);
            printf("}\n");
        } else {
            printf("| %s | %.1f MB | %.1f M | %s | %s | %d | %s | %.1f ± %.1f | %.1f | %.0f%% | |\n", in->name,
                   in->file_size / 1e6, in->n_params / 1e6, type, kname, r->threads, test_id, s->mean, s->sd,
                   r->roof, 100.0 * s->mean / r->roof);
        }
    }
    if (!r->json)
        printf("\nspeculative (%s), %d threads: %.2fx plain decode of the same text; %.0f%% of %llu drafted tokens "
               "accepted, %.2f tokens per check of the model\n\n",
               drafter, r->threads, sr->plain.mean > 0 ? sr->spec.mean / sr->plain.mean : 0.0, 100.0 * accept,
               (unsigned long long)sr->drafted, per_check);
    fflush(stdout);
}

/* The load-time test: one line on stderr, or a JSON object. */
static int bench_load(const char *path, const eng_model_opts *mo, const eng_model_info *in, int threads, int reps,
                      int json)
{
    eng_bench_load lt;
    eng_err e;
    if (eng_bench_load_time(path, mo, threads, reps, &lt, &e)) {
        fprintf(stderr, "nibble bench: %s\n", e.msg);
        return 1;
    }
    if (json)
        printf("{\"model\": \"%s\", \"file_bytes\": %llu, \"kernel\": \"%s\", \"threads\": %d, "
               "\"test\": \"load\", \"open_ms\": %.1f, \"first_token_ms\": %.1f}\n",
               in->name, (unsigned long long)in->file_size, simd_kernel_name(simd_kernel_current()), threads,
               lt.open_ms, lt.first_ms);
    else
        fprintf(stderr, "load, %d thread%s: open %.1f ms, first token %.1f ms (best of %d)\n", threads,
                threads > 1 ? "s" : "", lt.open_ms, lt.first_ms, reps);
    return 0;
}

int cmd_bench(int argc, char **argv)
{
    const char *model = NULL, *kernels = NULL, *tlist = NULL, *draft_path = NULL, *spec_file = NULL;
    const char *ctk = NULL, *ctv = NULL;
    int draft_max = ENG_SPEC_DEFAULT_MAX, draft_min = 0, lookup = 0;
    int n_prompt = 128, n_gen = 64, n_depth = 0, reps = 3, json = 0, membw_only = 0, load = 1, peak = 0;
    eng_model_opts mo;
    memset(&mo, 0, sizeof mo);
    const app_flag own[] = {APP_FLAG("-m", NULL, APP_STR, &model),
                            APP_FLAG("-p", NULL, APP_INT, &n_prompt, .min = 0, .max = 65536),
                            APP_FLAG("-n", NULL, APP_INT, &n_gen, .min = 0, .max = 65536),
                            APP_FLAG("-d", NULL, APP_INT, &n_depth, .min = 0, .max = 65536),
                            APP_FLAG("-r", NULL, APP_INT, &reps, .min = 1, .max = 1000000),
                            APP_FLAG("-t", NULL, APP_STR, &tlist),
                            APP_FLAG("-ctk", "--cache-type-k", APP_STR, &ctk),
                            APP_FLAG("-ctv", "--cache-type-v", APP_STR, &ctv),
                            APP_FLAG("--kernel", NULL, APP_STR, &kernels),
                            APP_FLAG("--json", NULL, APP_ON, &json),
                            APP_FLAG("--membw", NULL, APP_ON, &membw_only),
                            APP_FLAG("--peak", NULL, APP_ON, &peak),
                            APP_FLAG("--no-load", NULL, APP_OFF, &load),
                            APP_FLAG("--no-pack", NULL, APP_ON, &mo.no_pack),
                            APP_FLAG("--model-draft", NULL, APP_STR, &draft_path),
                            APP_FLAG("--lookup", NULL, APP_INT, &lookup, .min = 1, .max = 64),
                            APP_FLAG("--draft-max", NULL, APP_INT, &draft_max, .min = 1, .max = ENG_SPEC_MAX),
                            APP_FLAG("--draft-min", NULL, APP_INT, &draft_min, .min = 0, .max = ENG_SPEC_MAX),
                            APP_FLAG("--spec-prompt", NULL, APP_STR, &spec_file),
                            APP_FLAG_END};
    const app_cmd cmd = {.name = "bench", .usage = usage, .flags = own};
    int st = app_parse(argc, argv, 2, &cmd, NULL, NULL, NULL);
    if (st)
        return app_parse_status(st);
    int threads[MAXLIST], nt = 1;
    threads[0] = eng_physical_cores();
    if (tlist && (nt = parse_list(tlist, threads, MAXLIST)) <= 0)
        return app_usage_error("bench", "-t", tlist, "expected thread counts like 1,2");
    int tks[ENG_KV_COUNT] = {ENG_KV_F16}, tvs[ENG_KV_COUNT] = {ENG_KV_F16}, ntk = 1, ntv = 1;
    if (ctk && (ntk = parse_kv_list(ctk, tks, ENG_KV_COUNT)) <= 0)
        return app_usage_error("bench", "-ctk", ctk, "expected cache types like f16,q8_0 (allowed: " ENG_KV_TYPE_NAMES ")");
    if (ctv && (ntv = parse_kv_list(ctv, tvs, ENG_KV_COUNT)) <= 0)
        return app_usage_error("bench", "-ctv", ctv, "expected cache types like f16,q8_0 (allowed: " ENG_KV_TYPE_NAMES ")");
    simd_init();
    /* the kernel sets to measure, checked before the bandwidth run */
    int ks[SIMD_K_COUNT], nk = pick_kernels(kernels, ks);
    if (nk < 0)
        return 1;
    double bw[MAXLIST];
    for (int i = 0; i < nt; i++) {
        bw[i] = eng_bench_membw(threads[i], (size_t)1 << 30);
        if (membw_only || !json)
            fprintf(membw_only ? stdout : stderr, "memory read bandwidth, %d thread%s: %.1f GB/s\n", threads[i],
                    threads[i] > 1 ? "s" : "", bw[i]);
    }
    if (membw_only)
        return 0;
    const char *path = app_model_path(&(app_opts){.model = model});
    eng_err e;
    eng_model *m;
    if (eng_model_open_opts(path, &mo, &m, &e)) {
        fprintf(stderr, "nibble: %s\n", e.msg);
        return 1;
    }
    /* the speed tests measure the packed weights, once they all are */
    eng_model_pack_wait(m);
    eng_model *dm = NULL;
    char *spec_owned = NULL;
    const char *spec_prompt = spec_text;
    int spec_on = draft_path || lookup;
    if (spec_file && !(spec_prompt = app_prompt(&(app_opts){.prompt_file = spec_file}, &spec_owned))) {
        eng_model_close(m);
        return 1;
    }
    if (draft_path) {
        if (eng_model_open_opts(draft_path, &mo, &dm, &e) == 0)
            eng_model_pack_wait(dm);
        else {
            fprintf(stderr, "nibble bench: draft model: %s\n", e.msg);
            free(spec_owned);
            eng_model_close(m);
            return 1;
        }
    }
    char drafter[200];
    snprintf(drafter, sizeof drafter, "%s%s%s", dm ? "draft " : "", dm ? eng_model_get_info(dm)->name : "",
             lookup ? (dm ? " + lookup" : "lookup") : "");
    if (lookup)
        snprintf(drafter + strlen(drafter), sizeof drafter - strlen(drafter), " %d", lookup);
    result r = {.in = eng_model_get_info(m), .depth = n_depth, .json = json, .kvcol = ctk || ctv};
    uint64_t bpt = eng_bench_bytes_per_token(m);
    int status = load ? bench_load(path, &mo, r.in, threads[0], reps, json) : 0;
    if (!json && !status)
        printf("| model | size | params | type | kernel | threads | test | t/s | roofline t/s | of roof | RSS MB (budget) |\n"
               "|---|---:|---:|---|---|---:|---|---:|---:|---:|---:|\n");
    for (int ki = 0; ki < nk && !status; ki++) {
        simd_kernel_select((enum simd_kernel)ks[ki]);
        /* a set without packed kernels gets the file's layout alone (not
         * both copies resident), one with them a packed model */
        eng_model_kernel_changed(m);
        eng_model_pack_wait(m);
        if (dm) {
            eng_model_kernel_changed(dm);
            eng_model_pack_wait(dm);
        }
        for (int ti = 0; ti < nt * ntk * ntv && !status; ti++) {
            eng_bench_stat pp, tg;
            r.type_k = tks[ti / ntv % ntk];
            r.type_v = tvs[ti % ntv];
            if (eng_bench_run_kv(m, threads[ti / (ntk * ntv)], r.type_k, r.type_v, n_depth, n_prompt, n_gen, reps, &pp,
                                 &tg, &r.mem, &e)) {
                fprintf(stderr, "nibble bench: %s\n", e.msg);
                status = 1;
                break;
            }
            /* rows per (threads, K type, V type); the peak once per thread count */
            int first = ti % (ntk * ntv) == 0;
            r.kernel = ks[ki];
            r.threads = threads[ti / (ntk * ntv)];
            r.bw = bw[ti / (ntk * ntv)];
            r.roof = r.bw * 1e9 / (double)(bpt + r.mem.kv_read_bytes);
            if (first)
                r.peak = r.peak_roof = r.fpeak = r.mm_gmacs = 0;
            uint64_t macs = eng_bench_macs_per_prompt_token(m);
            uint64_t attn = eng_bench_attn_macs_per_prompt_token(m, (uint32_t)n_depth, (uint32_t)n_prompt);
            double q8 = 0, own = 0;
            if (peak && first && (r.peak = eng_bench_int8_peak(r.threads)) > 0) {
                r.fpeak = eng_bench_fma_peak(r.threads);
                q8 = eng_bench_peak(SIMD_Q8_0, r.threads);
                own = eng_bench_peak(r.in->main_type, r.threads);
                /* a float model's products are float ones: its own kernel's rate is its ceiling */
                const simd_traits *mt = simd_type_traits(r.in->main_type);
                r.mm_gmacs = mt && mt->act == SIMD_ACT_F32 && own > 0 ? own : r.peak;
            }
            if (r.peak > 0 && r.fpeak > 0 && macs) {
                /* attention's scores at the int8 peak where the engine
                 * takes them as int8 dot products, else at the float one;
                 * its V sums always float */
                int int8_scores = eng_kv_int8_scores(r.in->head_dim, r.type_k, r.type_v);
                double ns = macs / r.mm_gmacs + attn / (int8_scores ? r.peak : r.fpeak) + attn / r.fpeak;
                r.peak_roof = 1e9 / ns;
            }
            if (peak && first && r.peak > 0) {
                /* rates to six figures: a slow set's (scalar under a
                 * sanitizer, 0.08 G/s) would lose several percent to two
                 * decimals, and the roofline could not be checked from them */
                if (json)
                    printf("{\"model\": \"%s\", \"kernel\": \"%s\", \"threads\": %d, \"test\": \"peak\", "
                           "\"peak_gmacs\": %.6g, \"fma_gmacs\": %.6g, \"q8_0_gmacs\": %.6g, \"type\": \"%s\", "
                           "\"type_gmacs\": %.6g, \"macs_per_token\": %llu, \"attn_macs_per_token\": %llu, "
                           "\"roofline_tps\": %.2f}\n",
                           r.in->name, simd_kernel_name((enum simd_kernel)ks[ki]), r.threads, r.peak, r.fpeak, q8,
                           simd_type_name(r.in->main_type), own, (unsigned long long)macs, (unsigned long long)attn,
                           r.peak_roof);
                else
                    fprintf(stderr, "peak, %s, %d thread%s: int8 %.1f G multiply-adds/s, float %.1f; in-cache kernels: "
                            "q8_0 %.1f, %s %.1f; per prompt token %.1f M in the matrices, %.1f M in attention's "
                            "scores and as many in its V sums (pp%d at depth %d): %.1f prompt tokens/s at most (%s/%s cache)\n",
                            simd_kernel_name((enum simd_kernel)ks[ki]), r.threads, r.threads > 1 ? "s" : "", r.peak,
                            r.fpeak, q8, simd_type_name(r.in->main_type), own, macs / 1e6, attn / 1e6, n_prompt,
                            n_depth, r.peak_roof, eng_kv_type_name(r.type_k), eng_kv_type_name(r.type_v));
            }
            if (dm) /* the draft model is resident too */
                r.mem.budget += eng_model_get_info(dm)->file_size;
            int over = r.mem.rss > r.mem.budget;
            snprintf(r.rss, sizeof r.rss, "n/a");
            if (r.mem.rss)
                snprintf(r.rss, sizeof r.rss, "%.0f (%.0f)%s", r.mem.rss / 1048576.0, r.mem.budget / 1048576.0,
                         over ? " OVER" : "");
            if (over)
                fprintf(stderr, "nibble bench: resident set %.1f MB is over the budget %.1f MB (file %.1f + KV cache "
                        "%.1f + 64 + decoded layouts %.1f%s)\n", r.mem.rss / 1048576.0, r.mem.budget / 1048576.0,
                        r.in->file_size / 1048576.0, r.mem.kv_bytes / 1048576.0, r.mem.pack_extra / 1048576.0,
                        dm ? " + the draft model's file" : "");
            if (n_prompt)
                print_result(&r, 0, n_prompt, &pp);
            if (n_gen)
                print_result(&r, 1, n_gen, &tg);
            if (n_gen && spec_on) {
                eng_bench_spec_opts so = {.prompt = spec_prompt, .draft = dm, .draft_max = (uint32_t)draft_max,
                                          .draft_min = (uint32_t)draft_min, .lookup = (uint32_t)lookup,
                                          .n_gen = n_gen, .reps = reps, .n_threads = r.threads};
                eng_bench_spec_result sr;
                if (eng_bench_spec(m, &so, &sr, &e)) {
                    fprintf(stderr, "nibble bench: speculative decoding: %s\n", e.msg);
                    status = 1;
                    break;
                }
                print_spec(&r, n_gen, drafter, &sr);
                if (!sr.same) {
                    fprintf(stderr, "nibble bench: the speculative tokens differ from plain greedy decoding's\n");
                    status = 1;
                }
            }
        }
    }
    if (!json && !status && r.mem.kv_full_bytes > r.mem.kv_bytes)
        printf("\nKV cache %.1f MB: the sliding-window layers keep only their window (%.1f MB if every layer kept "
               "every position)\n", r.mem.kv_bytes / 1048576.0, r.mem.kv_full_bytes / 1048576.0);
    eng_model_close(dm);
    eng_model_close(m);
    free(spec_owned);
    return status;
}
