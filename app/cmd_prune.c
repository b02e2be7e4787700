/* nibble prune: remove attention heads and FFN neurons from a model for
 * real (engine/tools/prune.c), optionally quantizing the result in the
 * same run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "awq.h"
#include "files.h"
#include "prune.h"
#include "quantize.h"

static const char usage[] =
    "usage: nibble prune IN.gguf OUT.gguf [--heads R] [--neurons R] [--calib TEXT] [--method LIST]\n"
    "                    [--protect pagerank|none] [--max-per-layer R] [--then TYPE [--awq CALIB]]\n"
    "\n"
    "Remove attention heads and FFN neurons from IN (llama, qwen2, qwen3; float\n"
    "weights) and write the smaller model to OUT: the matrices lose the rows and\n"
    "columns of what was removed, and the per-layer head and FFN counts are\n"
    "stored as arrays. llama models are written as the 'deci' architecture,\n"
    "which llama.cpp loads with per-layer sizes (see docs/PRUNING.md).\n"
    "\n"
    "  --heads R           share of all KV groups (a KV head and the query heads\n"
    "                      sharing it) to remove, 0..1, ranked over all layers\n"
    "  --neurons R         share of each layer's FFN neurons to remove, 0..1,\n"
    "                      ranked within each layer\n"
    "  --method LIST       the scores, comma-separated, one for heads and/or one\n"
    "                      for neurons (default vnorm,wprod):\n"
    "                        vnorm   heads: mean |attention output| x ||W_o columns||\n"
    "                                on --calib\n"
    "                        weight  heads: ||W_v rows|| x ||W_o columns||, weights only\n"
    "                        wprod   neurons: ||gate row|| x ||up row|| x ||down column||\n"
    "                        act     neurons: mean |activation| on --calib\n"
    "  --calib TEXT        calibration text (needed by vnorm with --heads, act with\n"
    "                      --neurons)\n"
    "  --calib-tokens N    calibration tokens used (default 2048)\n"
    "  --protect pagerank|none\n"
    "                      pagerank (default): PageRank over the graph embedding ->\n"
    "                      heads -> MLP -> ... -> output protects the best-ranked\n"
    "                      share of the KV groups (--protect-share, default 0.1)\n"
    "  --protect-share R   share of KV groups the guard protects\n"
    "  --max-per-layer R   most of one layer's KV groups or neurons removed\n"
    "                      (default 0.75); one of each always stays\n"
    "  --then TYPE         quantize the pruned model to TYPE (as nibble quantize)\n"
    "  --awq CALIB         ... with activation-aware scaling on CALIB\n"
    "  -t N                threads for the calibration passes\n"
    "  -q                  no progress bar\n";

static void on_progress(void *user, uint64_t done, uint64_t total, const char *tensor)
{
    app_progress(user, total ? (double)done / (double)total : 1.0, tensor);
}

/* --method LIST: at most one head and one neuron method, by name.
 * 0, or the exit status after a usage message. */
static int methods(const char *list, int *hm, int *nm)
{
    int seen[2] = {0, 0};
    for (const char *p = list;;) {
        const char *end = strchr(p, ',');
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)(end ? (size_t)(end - p) : strlen(p)), p);
        int kind, m;
        if (eng_prune_method_find(name, &kind, &m))
            return app_usage_error("prune", "--method", name,
                                   "unknown method (heads: vnorm, weight; neurons: wprod, act)");
        if (seen[kind]++)
            return app_usage_error("prune", "--method", list,
                                   kind == ENG_PRUNE_KIND_HEADS ? "more than one head method" : "more than one neuron method");
        *(kind == ENG_PRUNE_KIND_HEADS ? hm : nm) = m;
        if (!end)
            return 0;
        p = end + 1;
    }
}

int cmd_prune(int argc, char **argv)
{
    const char *pos[2] = {0}, *calib = NULL, *protect = "pagerank", *then = NULL, *awq = NULL, *method = NULL;
    float heads = 0, neurons = 0, max_per_layer = 0.75f, share = 0.1f;
    int np = 0, quiet = 0, threads = 0, calib_tokens = 2048;
    const app_flag own[] = {APP_FLAG("--heads", NULL, APP_FLOAT, &heads),
                            APP_FLAG("--neurons", NULL, APP_FLOAT, &neurons),
                            APP_FLAG("--calib", NULL, APP_STR, &calib),
                            APP_FLAG("--method", NULL, APP_STR, &method),
                            APP_FLAG("--calib-tokens", NULL, APP_INT, &calib_tokens, .min = 8, .max = 1 << 20),
                            APP_FLAG("--protect", NULL, APP_STR, &protect),
                            APP_FLAG("--protect-share", NULL, APP_FLOAT, &share),
                            APP_FLAG("--max-per-layer", NULL, APP_FLOAT, &max_per_layer),
                            APP_FLAG("--then", NULL, APP_STR, &then),
                            APP_FLAG("--awq", NULL, APP_STR, &awq),
                            APP_FLAG("-t", NULL, APP_INT, &threads, .min = 1, .max = 256,
                                     .why = "expected a thread count in 1..256"),
                            APP_FLAG("-q", "--quiet", APP_ON, &quiet),
                            APP_FLAG_END};
    const app_cmd cmd = {.name = "prune", .usage = usage, .flags = own, .min_pos = 2, .max_pos = 2};
    int st = app_parse(argc, argv, 2, &cmd, NULL, pos, &np);
    if (st)
        return app_parse_status(st);
    char num[32];
    const struct {
        const char *flag;
        float v;
    } shares[] = {{"--heads", heads}, {"--neurons", neurons}, {"--max-per-layer", max_per_layer},
                  {"--protect-share", share}};
    for (size_t i = 0; i < sizeof shares / sizeof shares[0]; i++)
        if (!(shares[i].v >= 0 && shares[i].v <= 1)) {
            snprintf(num, sizeof num, "%g", shares[i].v);
            return app_usage_error("prune", shares[i].flag, num, "expected a share between 0 and 1");
        }
    if (strcmp(protect, "pagerank") && strcmp(protect, "none"))
        return app_usage_error("prune", "--protect", protect, "expected pagerank or none");
    int hm = ENG_PRUNE_HEADS_VNORM, nm = ENG_PRUNE_NEURONS_WPROD;
    if (method && (st = methods(method, &hm, &nm)))
        return st;
    if (heads > 0 && hm == ENG_PRUNE_HEADS_VNORM && !calib)
        return app_usage_error("prune", "--heads", "", "needs --calib TEXT (the vnorm head score comes from a "
                               "calibration run; --method weight needs none)");
    if (neurons > 0 && nm == ENG_PRUNE_NEURONS_ACT && !calib)
        return app_usage_error("prune", "--method", "act", "needs --calib TEXT (activations come from a calibration run)");
    const eng_qtarget *t = NULL;
    if (then && !(t = eng_qtarget_find(then)))
        return app_usage_error("prune", "--then", then, "unknown type (see 'nibble quantize --help')");
    if (awq && !then)
        return app_usage_error("prune", "--awq", awq, "only with --then TYPE");
    if (!strcmp(pos[0], pos[1])) {
        fprintf(stderr, "nibble prune: IN and OUT are the same file\n");
        return 2;
    }
    char tmp[4200];
    const char *pruned = pos[1];
    if (t) {
        snprintf(tmp, sizeof tmp, "%s.pruned.gguf", pos[1]);
        pruned = tmp;
    }
    app_bar bar = {.label = "prune   ", .quiet = quiet};
    eng_prune_opts po = {.heads = heads, .neurons = neurons, .max_per_layer = max_per_layer,
                         .protect = strcmp(protect, "none") ? ENG_PRUNE_PROTECT_PAGERANK : ENG_PRUNE_PROTECT_NONE,
                         .protect_share = share, .head_method = hm, .neuron_method = nm, .calib_path = calib, .calib_tokens = (uint32_t)calib_tokens,
                         .threads = threads, .progress = app_awq_progress, .user = &bar};
    eng_prune_report rep;
    eng_err e;
    if (eng_prune_file(pos[0], pruned, &po, &rep, &e)) {
        fprintf(stderr, "nibble prune: %s\n", e.msg);
        return 1;
    }
    fprintf(stderr,
            "%s: %s -> %s; KV groups %u -> %u (query heads %u -> %u), FFN neurons %llu -> %llu, "
            "parameters %.3f M -> %.3f M (%.1f%%)",
            pruned, rep.arch_in, rep.arch_out, rep.groups_before, rep.groups_after, rep.heads_before,
            rep.heads_after, (unsigned long long)rep.ffn_before, (unsigned long long)rep.ffn_after,
            rep.params_before / 1e6, rep.params_after / 1e6,
            rep.params_before ? 100.0 * rep.params_after / (double)rep.params_before : 0.0);
    if (heads > 0 || neurons > 0)
        fprintf(stderr, "; scores: %s%s%s", heads > 0 ? eng_prune_method_name(ENG_PRUNE_KIND_HEADS, hm) : "",
                heads > 0 && neurons > 0 ? ", " : "", neurons > 0 ? eng_prune_method_name(ENG_PRUNE_KIND_NEURONS, nm) : "");
    if (rep.n_protected)
        fprintf(stderr, "; %u groups protected by PageRank", rep.n_protected);
    fputc('\n', stderr);
    if (rep.groups_short)
        fprintf(stderr, "nibble prune: %u KV groups fewer than asked were removed: the per-layer cap "
                        "(--max-per-layer) and the guard (--protect) left no more\n", rep.groups_short);
    if (!t)
        return 0;
    eng_quant_opts qo = {.target = t, .progress = on_progress, .user = &bar};
    eng_awq *aw = NULL;
    int r = 0;
    if (awq) {
        app_bar ab = {.label = "awq     ", .quiet = quiet};
        eng_awq_opts ao = {.target = t, .calib_path = awq, .threads = threads, .progress = app_awq_progress,
                           .user = &ab};
        if ((r = eng_awq_compute(pruned, &ao, &aw, &e)) == 0) {
            qo.edits = eng_awq_edits(aw, &qo.n_edits);
            qo.method = "awq";
            qo.calib = eng_path_base(awq);
        }
    }
    app_bar qb = {.label = "quantize", .quiet = quiet};
    qo.user = &qb;
    eng_quant_report qr;
    if (!r)
        r = eng_quantize_file(pruned, pos[1], &qo, &qr, &e);
    eng_awq_free(aw);
    remove(pruned);
    if (r) {
        fprintf(stderr, "nibble prune: %s\n", e.msg);
        return 1;
    }
    fprintf(stderr, "%s: %s%s, %.3f MB -> %.3f MB\n", pos[1], t->name, awq ? " (AWQ)" : "", qr.in_bytes / 1e6,
            qr.out_bytes / 1e6);
    return 0;
}
