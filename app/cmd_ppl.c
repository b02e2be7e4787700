/* nibble ppl: perplexity of a model on a text, and with --kl-base the KL
 * divergence from a base model, top-1 agreement and the change in
 * perplexity (engine/ppl.c; llama-perplexity's method). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "ppl.h"

static const char usage[] =
    "usage: nibble ppl [-m MODEL] -f TEXT [-c CTX] [--chunks N] [--kl-base BASE.gguf] [--json] [-t N]\n"
    "\n"
    "Perplexity as llama-perplexity measures it: the text is tokenized once\n"
    "(BOS first), cut into windows of CTX tokens (default 512), each window\n"
    "starts with BOS and only its second half is scored.\n"
    "\n"
    "  -c CTX             window size (default 512, at most the model's context)\n"
    "  --chunks N         use only the first N windows\n"
    "  --kl-base BASE     also measure against BASE (e.g. the F32 model): mean\n"
    "                     KL divergence, top-1 agreement and the change in ppl\n"
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
    long chunks = 0;
    int json = 0;
    /* our own flags first; the rest go to the shared parser */
    const app_flag own[] = {{"--kl-base", &base_path, NULL, 0, 0, NULL},
                            {"--chunks", NULL, &chunks, 1, INT_MAX, NULL},
                            {"--json", NULL, NULL, 0, 0, &json},
                            {NULL, NULL, NULL, 0, 0, NULL}};
    char **rest;
    int nrest;
    int took = app_take_flags(argc, argv, 2, own, usage, "ppl", &rest, &nrest);
    if (took)
        return took < 0 ? 0 : took;
    app_opts o;
    int st = app_parse(nrest, rest, 2, &o, NULL, NULL, "ppl");
    free(rest);
    if (st)
        return st;
    if (!o.prompt_file) {
        fprintf(stderr, "nibble ppl: -f TEXT is required (see --help)\n");
        return 2;
    }
    if (app_apply_kernel(&o))
        return 1;
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
    eng_ppl_opts po = {.n_ctx = o.n_ctx, .max_chunks = (uint32_t)chunks, .threads = o.threads, .base = b,
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
               "\"ppl\": %.6f, \"ppl_err\": %.6f, \"seconds\": %.3f",
               path, (unsigned long long)r.n_text_tokens, r.n_ctx, r.n_chunks, (unsigned long long)r.n_scored, r.ppl,
               r.ppl_err, r.seconds);
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
