/* nibble ppl: perplexity of a model on a text, and with --kl-base the KL
 * divergence from a base model, top-1 agreement and the change in
 * perplexity (engine/tools/ppl.c; llama-perplexity's method). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "ppl.h"

static const char usage[] =
    "usage: nibble ppl [-m MODEL] -f TEXT [-c CTX] [--chunks N] [--kl-base BASE.gguf] [-ctk T] [-ctv T] [--json] [-t N]\n"
    "\n"
    "Perplexity as llama-perplexity measures it: the text is tokenized once\n"
    "(BOS first), cut into windows of CTX tokens (default 512), each window\n"
    "starts with BOS and only its second half is scored.\n"
    "\n"
    "  -c CTX             window size (default 512, at most the model's context)\n"
    "  --chunks N         use only the first N windows\n"
    "  --kl-base BASE     also measure against BASE (e.g. the F32 model): mean\n"
    "                     KL divergence, top-1 agreement and the change in ppl\n"
    "  -ctk, --cache-type-k T, -ctv, --cache-type-v T\n"
    "                     MODEL's K / V cache type: f16 (default), q8_0, q4_0\n"
    "                     (BASE keeps f16: --kl-base MODEL -ctk q4_0 measures\n"
    "                     what the quantized cache costs)\n"
    "  --json             one JSON object on stdout instead of text\n"
    "  --quantize TYPE    quantize MODEL's float weights on load (q8_0, q4_k, ...)\n"
    "  --kernel K, -t N   kernel set and threads\n"
    "Progress and an ETA go to stderr.\n";

static void on_progress(void *user, uint32_t done, uint32_t total, double ppl)
{
    char what[48];
    snprintf(what, sizeof what, "%u/%u windows, ppl %.4f", done, total, ppl);
    app_progress(user, (double)done / total, what);
}

int cmd_ppl(int argc, char **argv)
{
    const char *base_path = NULL;
    int chunks = 0, json = 0;
    const app_flag own[] = {APP_FLAG("--kl-base", NULL, APP_STR, &base_path),
                            APP_FLAG("--chunks", NULL, APP_INT, &chunks, .min = 1, .max = INT_MAX),
                            APP_FLAG("--json", NULL, APP_ON, &json),
                            APP_FLAG_END};
    const app_cmd cmd = {.name = "ppl", .usage = usage, .flags = own, .required = "-f"};
    app_opts o;
    int st = app_parse(argc, argv, 2, &cmd, &o, NULL, NULL);
    if (st)
        return app_parse_status(st);
    char *text = NULL;
    if (!app_prompt(&o, &text))
        return 1;
    size_t len = strlen(text);
    if (len == 0) {
        fprintf(stderr, "nibble ppl: %s is empty\n", o.prompt_file);
        free(text);
        return 1;
    }
    eng_err e;
    eng_model *m = NULL, *b = NULL;
    const char *path = app_model_path(&o);
    if (app_model_open(&o, path, &m, &e) || (base_path && eng_model_open(base_path, &b, &e))) {
        fprintf(stderr, "nibble ppl: %s\n", e.msg);
        eng_model_close(m);
        free(text);
        return 1;
    }
    app_bar bar = {.label = "ppl", .quiet = o.quiet};
    eng_ppl_opts po = {.n_ctx = (uint32_t)o.n_ctx, .max_chunks = (uint32_t)chunks, .threads = o.threads, .base = b,
                       .type_k = o.cache_type_k, .type_v = o.cache_type_v,
                       .progress = on_progress, .user = &bar};
    eng_ppl_result r;
    int rc = eng_ppl_run(m, text, len, &po, &r, &e);
    free(text);
    eng_model_close(m);
    eng_model_close(b);
    if (rc) {
        fprintf(stderr, "nibble ppl: %s\n", e.msg);
        return 1;
    }
    if (json) {
        printf("{\"model\": \"%s\", \"text_tokens\": %llu, \"n_ctx\": %u, \"chunks\": %u, \"scored\": %llu, "
               "\"ppl\": %.6f, \"ppl_err\": %.6f, \"seconds\": %.3f, \"type_k\": \"%s\", \"type_v\": \"%s\"",
               path, (unsigned long long)r.n_text_tokens, r.n_ctx, r.n_chunks, (unsigned long long)r.n_scored, r.ppl,
               r.ppl_err, r.seconds, eng_kv_type_name(o.cache_type_k), eng_kv_type_name(o.cache_type_v));
        if (r.has_base)
            printf(", \"base\": \"%s\", \"base_ppl\": %.6f, \"delta_ppl\": %.6f, \"kl\": %.8f, \"kl_err\": %.8f, "
                   "\"kl_p99\": %.6f, \"kl_max\": %.6f, \"top1\": %.6f",
                   base_path, r.base_ppl, r.ppl - r.base_ppl, r.kl, r.kl_err, r.kl_p99, r.kl_max, r.top1);
        printf("}\n");
        return 0;
    }
    printf("%s: %llu tokens, %u windows of %u, %llu scored (%.1f s, %.0f tok/s)\n", path,
           (unsigned long long)r.n_text_tokens, r.n_chunks, r.n_ctx, (unsigned long long)r.n_scored, r.seconds,
           r.seconds > 0 ? (double)r.n_chunks * r.n_ctx / r.seconds : 0.0);
    printf("Final estimate: PPL = %.4f +/- %.5f\n", r.ppl, r.ppl_err);
    if (r.has_base) {
        printf("base %s: PPL = %.4f +/- %.5f\n", base_path, r.base_ppl, r.base_ppl_err);
        printf("delta PPL        %+.4f (%+.3f%%)\n", r.ppl - r.base_ppl, 100 * (r.ppl / r.base_ppl - 1));
        printf("mean KL          %.6f +/- %.6f nats (99%%: %.5f, max %.5f)\n", r.kl, r.kl_err, r.kl_p99, r.kl_max);
        printf("same top-1       %.2f%%\n", 100 * r.top1);
    }
    return 0;
}
