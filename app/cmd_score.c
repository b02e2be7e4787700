/* nibble score: teacher forcing. Run a given token sequence through the
 * model and print, for each position, the most likely next token and its
 * log-probability: what cross-checks against other implementations need. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "model.h"

static const char usage[] =
    "usage: nibble score [-m MODEL] --ids \"ID ID ...\" [-t N]\n"
    "\n"
    "Evaluate the token ids in one pass and print one line per position:\n"
    "position, the id there, the most likely next id, its log-probability,\n"
    "and the log-probability of the id that actually follows.\n";

int cmd_score(int argc, char **argv)
{
    const char *ids_arg = NULL, *model = NULL;
    int threads = 0;
    const app_flag own[] = {APP_FLAG("--ids", NULL, APP_STR, &ids_arg),
                            APP_FLAG("-m", NULL, APP_STR, &model),
                            APP_FLAG("-t", NULL, APP_INT, &threads, .min = 1, .max = 256,
                                     .why = "expected a thread count in 1..256"),
                            APP_FLAG_END};
    const app_cmd cmd = {.name = "score", .usage = usage, .flags = own};
    int st = app_parse(argc, argv, 2, &cmd, NULL, NULL, NULL);
    if (st)
        return app_parse_status(st);
    if (!ids_arg) {
        fputs(usage, stderr);
        return 2;
    }
    size_t cap = strlen(ids_arg) / 2 + 1, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    for (const char *p = ids_arg; ids && *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) {
            if (*p == ' ' || *p == ',') { p++; continue; }
            fprintf(stderr, "nibble score: --ids: '%c' is not part of a number\n", *p);
            free(ids);
            return 2;
        }
        if (n < cap)
            ids[n++] = (int32_t)v;
        p = end;
    }
    if (!ids || n == 0) {
        fprintf(stderr, "nibble score: --ids holds no token ids\n");
        free(ids);
        return 2;
    }
    eng_err e;
    eng_model *m;
    eng_ctx *c = NULL;
    if (eng_model_open(app_model_path(&(app_opts){.model = model}), &m, &e)) {
        fprintf(stderr, "nibble: %s\n", e.msg);
        free(ids);
        return 1;
    }
    uint32_t nv = eng_model_get_info(m)->n_vocab;
    float *logits = malloc(n * nv * sizeof *logits);
    int status = 0;
    if (!logits || eng_ctx_new(m, (uint32_t)n, threads, &c, &e) || eng_ctx_eval(c, ids, (uint32_t)n, logits, 1, &e)) {
        fprintf(stderr, "nibble: %s\n", logits ? e.msg : "out of memory");
        status = 1;
    }
    for (size_t i = 0; !status && i < n; i++) {
        const float *l = logits + i * nv;
        uint32_t best = 0;
        for (uint32_t j = 1; j < nv; j++)
            if (l[j] > l[best])
                best = j;
        double sum = 0;
        for (uint32_t j = 0; j < nv; j++)
            sum += exp((double)l[j] - l[best]);
        double lse = l[best] + log(sum);
        printf("%zu %d %u %.6f", i, ids[i], best, l[best] - lse);
        if (i + 1 < n)
            printf(" %.6f", l[ids[i + 1]] - lse);
        printf("\n");
    }
    eng_ctx_free(c);
    eng_model_close(m);
    free(logits);
    free(ids);
    return status;
}
