/* nibble quantize: a GGUF model to another weight type (engine/tools/quantize.c),
 * optionally activation-aware (engine/tools/awq.c). Also the progress bar the
 * measuring commands share. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _WIN32
#include <windows.h>
#include <psapi.h>
#else
#include <sys/resource.h>
#endif

#include "app.h"
#include "port.h"
#include "awq.h"
#include "gptq.h"
#include "normfit.h"
#include "quantize.h"
#include "simd.h"
#include "sys.h"
#include "files.h"

static const char usage[] =
    "usage: nibble quantize IN.gguf OUT.gguf TYPE [--method rtn|awq|gptq|awq+gptq --calib TEXT]\n"
    "                       [--awq TEXT] [--imatrix FILE] [--no-clip] [--damp R] [--refine N]\n"
    "                       [--ffn-rows] [--attn-rows]\n"
    "                       [--asym [--asym-blend A] [--asym-layers | --asym-once] [--asym-rows]]\n"
    "                       [--hessian-mb N] [--fit-norms]\n"
    "                       [--allow-requantize] [-t N]\n"
    "\n"
    "Write IN's weights as TYPE into OUT (metadata kept; OUT is written to a\n"
    "temporary file and renamed, so a failed run leaves no partial OUT).\n"
    "\n"
    "TYPE: f32 f16 bf16 q8_0 q6_k q5_k_m q5_k q5_1 q5_0 q4_k_m q4_k q4_1 q4_0\n"
    "      iq4_xs iq4_nl q3_k_l q3_k_m q3_k_s q3_k q2_k mxfp4\n"
    "      iq3_m iq3_s iq3_xs iq3_xxs iq2_s (= iq2_m) iq2_xs iq2_xxs iq1_m iq1_s\n"
    "  q4_k_m / q5_k_m keep attn_v and ffn_down at q6_k in the first and last\n"
    "  eighth of the layers and every third layer between (llama.cpp's mixes);\n"
    "  q3_k_m / q3_k_l / q2_k give attn_v, attn_output and ffn_down wider\n"
    "  K types, iq4_xs / iq4_nl give ffn_down q5_k in the first eighth.\n"
    "  The i-quants below 4 bits follow llama.cpp's mixes of the same names\n"
    "  (with an importance matrix): iq2_xxs / iq2_xs / iq1_* give attn_v,\n"
    "  token_embd and the first eighth's ffn_down q2_k (iq1_*: attn_output\n"
    "  iq2_xxs); iq2_s gives those and attn_output iq3_s; iq3_xxs gives\n"
    "  attn_output and token_embd iq3_s, attn_q / attn_k iq2_s; iq3_xs is\n"
    "  iq3_s with iq3_xxs for attn_q, attn_k and the middle layers' ffn_gate /\n"
    "  ffn_up; iq3_m is iq3_s with q4_k for attn_v, attn_output, attn_qkv and\n"
    "  the first eighth's ffn_down; iq3_s is iq3_s throughout. iq2_xxs, iq2_xs,\n"
    "  iq1_s and iq1_m tensors need --imatrix (refused without it, as\n"
    "  llama.cpp does). (docs/QUANTIZATION.md lists the rules.) The output\n"
    "  matrix gets q6_k (q8_0 under q8_0; q5_k under iq3_xxs, iq2_*, iq1_*,\n"
    "  as llama.cpp gives it). Rows that do not fit a type's block\n"
    "  fall back (q4_k->q5_0, q5_k->q5_1, q6_k->q8_0, q2_k/q3_k->q4_0,\n"
    "  iq4_xs and the i-quants below 4 bits->iq4_nl, 32-blocks->f16), and\n"
    "  each fallback is reported. Mixtures of experts: 3-D\n"
    "  expert tensors are quantized like matrices (ffn_down_exps as ffn_down),\n"
    "  routers (ffn_gate_inp) are kept, and MXFP4 tensors (gpt-oss's experts)\n"
    "  are copied as stored unless --allow-requantize is given.\n"
    "\n"
    "  --method M            how weights are rounded (all write standard GGUF):\n"
    "                        rtn       round to nearest (the default)\n"
    "                        awq       activation-aware: scale each layer group's\n"
    "                                  input channels (folded into the norms / v\n"
    "                                  rows / up rows), then clip each row's blocks\n"
    "                                  where that lowers the output error\n"
    "                        gptq      quantize column by column, folding each\n"
    "                                  column's error into the columns left, by the\n"
    "                                  calibration Hessian (dense layer matrices)\n"
    "                        awq+gptq  AWQ's scales, then the GPTQ pass\n"
    "  --calib TEXT          calibration text for awq / gptq / awq+gptq\n"
    "  --awq TEXT            short for --method awq --calib TEXT\n"
    "  --calib-tokens N      calibration tokens to use (default 4096)\n"
    "  --no-clip             no clipping search (AWQ's per block, GPTQ's per block\n"
    "                        scale choice)\n"
    "  --damp R              GPTQ: add R times the mean of the Hessian's diagonal\n"
    "                        to it (default 0.01)\n"
    "  --refine N            GPTQ: after the pass, up to N rounds (default 4; 0\n"
    "                        off) of moving single codes to a neighbouring level\n"
    "                        and refitting q4_0/q5_0/q8_0/iq4_nl block scales,\n"
    "                        kept only where the output error goes down\n"
    "  --ffn-rows            GPTQ: each row of a SwiGLU FFN's ffn_gate and ffn_up\n"
    "                        gets its own Hessian, the calibration tokens weighted\n"
    "                        by how much that row moves silu(gate) * up there\n"
    "                        (2 * ffn * dim^2 doubles a layer, in the budget)\n"
    "  --attn-rows           GPTQ: attn_v's rows get a Hessian per kv head from the\n"
    "                        calibration pass's attention, the inputs averaged by\n"
    "                        each query's attention probabilities (how a value\n"
    "                        row's error reaches the attention's output)\n"
    "                        (n_kv_heads * dim^2 doubles a layer, in the budget)\n"
    "  --asym                GPTQ on the quantized model's own inputs: a first GPTQ\n"
    "                        file (beside OUT, removed after), then stage by stage\n"
    "                        (each layer's q/k/v, attn_output, gate/up, down) the\n"
    "                        float model and that file, every matrix before the\n"
    "                        stage already the final one, run the calibration text\n"
    "                        side by side, and the pass runs again on each matrix's\n"
    "                        inputs there, Hq = sum xq xq^T, aimed at the float\n"
    "                        layer's outputs: target W' = W C^T Hq^-1, C = sum xq x^T\n"
    "                        (per-row Hessians stay the float model's). Four\n"
    "                        calibration passes a layer; about twice GPTQ's CPU\n"
    "  --asym-blend A        --asym's target W + A (W' - W) (default 0.7, chosen on\n"
    "                        held-out text; 0 < A <= 2)\n"
    "  --asym-layers         --asym with a layer's sums taken once, when quantizing\n"
    "                        reaches it (a pass a layer; its later inputs see the\n"
    "                        first file's q/k/v...: worse on held-out text)\n"
    "  --asym-once           --asym with every layer's sums taken at once against\n"
    "                        the first file (one pass; worse: it overshoots)\n"
    "  --asym-rows           --asym with --ffn-rows: gate/up's per-row Hessians\n"
    "                        summed on the quantized inputs (weighted as the float\n"
    "                        ones) and each row its own target map (2 * ffn * dim^2\n"
    "                        doubles more a layer; 3x the per-row sums' CPU)\n"
    "  --fit-norms           after writing OUT, refit each layer's attn_norm and\n"
    "                        ffn_norm gains (f32 in the file) so that the quantized\n"
    "                        model's q/k/v and gate/up outputs, on its own inputs,\n"
    "                        best match the float model's on the calibration text\n"
    "                        (least squares, one factor per channel; both models\n"
    "                        run the text side by side). Any method; needs --calib\n"
    "                        (--calib-tokens, --hessian-mb apply). Only those\n"
    "                        gains change\n"
    "  --hessian-mb N        GPTQ: hold at most N MB of Hessians (default 1024):\n"
    "                        the layers are collected in groups that fit, one\n"
    "                        calibration pass per group\n"
    "  --imatrix FILE        importance matrix ('nibble imatrix' or llama-imatrix,\n"
    "                        GGUF or legacy .dat): every type's scale search then\n"
    "                        minimises the importance-weighted error (with gptq,\n"
    "                        each block's scale search); tensors it has no entry\n"
    "                        for (or of another width) are quantized unweighted,\n"
    "                        with a note (iq2_xxs / iq2_xs / iq1_* ones are refused).\n"
    "                        Recorded in OUT's metadata\n"
    "                        (quantize.imatrix.*) as llama-quantize records it\n"
    "  --allow-requantize    accept an already quantized IN (errors add up); also\n"
    "                        converts MXFP4 tensors, which are otherwise kept\n"
    "  -t N                  threads (default: the physical cores) for the\n"
    "                        calibration pass, the GPTQ pass and every type's\n"
    "                        row quantization; OUT is the same at any count\n"
    "  -q                    no progress bar\n"
    "The method is recorded in OUT's nibble.quantize.method (with '+imatrix'\n"
    "when one is used) and the text's name in nibble.quantize.calibration.\n";

/* ---- progress bar on stderr ---- */

static double now_s(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void app_progress(app_bar *b, double frac, const char *what)
{
    if (b->quiet)
        return;
    if (b->tty == 0)
        b->tty = isatty(fileno(stderr)) ? 1 : -1;
    double t = now_s();
    if (b->start == 0)
        b->start = t;
    if (frac < 1 && (t - b->last < 0.1 || b->tty < 0))
        return; /* not a terminal: only the final line */
    b->last = t;
    int width = 30, fill = (int)(frac * width + 0.5);
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = 0;
    double el = t - b->start, eta = frac > 0.001 ? el / frac - el : 0;
    fprintf(stderr, "\r%s [%s] %3.0f%% %5.1fs", b->label, bar, frac * 100, el);
    if (frac < 1 && frac > 0.001)
        fprintf(stderr, " ETA %4.0fs", eta);
    else
        fprintf(stderr, "          ");
    if (what)
        fprintf(stderr, " %-28.28s", what);
    if (frac >= 1)
        fputc('\n', stderr);
    fflush(stderr);
}

static void on_progress(void *user, uint64_t done, uint64_t total, const char *tensor)
{
    app_progress(user, total ? (double)done / (double)total : 1.0, tensor);
}

static void on_note(void *user, const char *line)
{
    app_bar *b = user;
    if (!b->quiet && b->start && b->tty > 0)
        fputc('\n', stderr); /* leave the bar's line */
    fprintf(stderr, "nibble quantize: %s\n", line);
}

/* --method's names; awq and gptq are bits of the index. */
static const char *const methods[] = {"rtn", "awq", "gptq", "awq+gptq"};

int app_quant_method(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, methods[i]))
            return i;
    return -1;
}

const char *app_quant_method_name(int m, int imatrix)
{
    static const char *const with_imx[] = {"imatrix", "awq+imatrix", "gptq+imatrix", "awq+gptq+imatrix"};
    return m >= 0 && m < 4 ? (imatrix ? with_imx[m] : methods[m]) : "?";
}

int app_quant_prepare(const char *in, const eng_qtarget *t, int method, const app_quant_calib *c, eng_awq **awq,
                      eng_gptq **gptq, eng_quant_opts *o, eng_err *e)
{
    *awq = NULL;
    *gptq = NULL;
    if (method & APP_QM_AWQ) {
        app_bar abar = {.label = c->label_awq, .quiet = c->quiet};
        eng_awq_opts ao = {.target = t, .calib_path = c->path, .max_tokens = (uint32_t)c->tokens,
                           .threads = c->threads, .clip = c->clip && !(method & APP_QM_GPTQ),
                           .progress = app_awq_progress, .user = &abar};
        if (eng_awq_compute(in, &ao, awq, e))
            return 1;
        o->edits = eng_awq_edits(*awq, &o->n_edits);
        if (!c->quiet)
            fprintf(stderr, "awq: %s\n", eng_awq_summary(*awq));
    }
    if (method & APP_QM_GPTQ) {
        app_bar gbar = {.label = c->label_gptq, .quiet = c->quiet};
        eng_gptq_opts go = {.calib_path = c->path, .max_tokens = (uint32_t)c->tokens, .threads = c->threads,
                            .max_bytes = (uint64_t)c->hessian_mb << 20, .ffn_rows = c->ffn_rows,
                            .attn_rows = c->attn_rows, .asym_path = c->asym_path,
                            .asym_blend = c->asym_blend, .asym_seq = c->asym_seq, .asym_rows = c->asym_rows,
                            .progress = app_awq_progress, .user = &gbar};
        if (eng_gptq_collect(in, &go, gptq, e)) {
            eng_awq_free(*awq);
            *awq = NULL;
            return 1;
        }
        o->gptq = *gptq;
        o->gptq_params.clip = c->clip;
        o->gptq_params.damp = c->damp;
        o->gptq_params.refine = c->refine;
        o->gptq_params.threads = c->threads;
    }
    o->fit_norms = c->fit_norms;
    o->method = app_quant_method_name(method, o->imatrix != NULL);
    if (method || c->fit_norms)
        o->calib = eng_path_base(c->path);
    return 0;
}

int cmd_quantize(int argc, char **argv)
{
    const char *pos[3] = {0}, *awq_text = NULL, *calib = NULL, *imx_path = NULL, *mname = NULL;
    int np = 0, allow = 0, quiet = 0, threads = 0, calib_tokens = 4096, no_clip = 0, refine = -1, hessian_mb = 0;
    int ffn_rows = 0, attn_rows = 0, fit_norms = 0, asym = 0, asym_once = 0, asym_layers = 0, asym_rows = 0;
    float damp = 0.01f, asym_blend = APP_ASYM_BLEND;
    const app_flag own[] = {APP_FLAG("--awq", NULL, APP_STR, &awq_text),
                            APP_FLAG("--method", NULL, APP_STR, &mname),
                            APP_FLAG("--calib", NULL, APP_STR, &calib),
                            APP_FLAG("--no-clip", NULL, APP_ON, &no_clip),
                            APP_FLAG("--damp", NULL, APP_FLOAT, &damp),
                            APP_FLAG("--refine", NULL, APP_INT, &refine, .min = 0, .max = 100,
                                     .why = "expected a number of rounds in 0..100"),
                            APP_FLAG("--ffn-rows", NULL, APP_ON, &ffn_rows),
                            APP_FLAG("--attn-rows", NULL, APP_ON, &attn_rows),
                            APP_FLAG("--fit-norms", NULL, APP_ON, &fit_norms),
                            APP_FLAG("--asym", NULL, APP_ON, &asym),
                            APP_FLAG("--asym-blend", NULL, APP_FLOAT, &asym_blend),
                            APP_FLAG("--asym-once", NULL, APP_ON, &asym_once),
                            APP_FLAG("--asym-layers", NULL, APP_ON, &asym_layers),
                            APP_FLAG("--asym-rows", NULL, APP_ON, &asym_rows),
                            APP_FLAG("--hessian-mb", NULL, APP_INT, &hessian_mb, .min = 1, .max = 1 << 20,
                                     .why = "expected megabytes in 1..1048576"),
                            APP_FLAG("--imatrix", NULL, APP_STR, &imx_path),
                            APP_FLAG("--calib-tokens", NULL, APP_INT, &calib_tokens, .min = 16, .max = 1 << 20),
                            APP_FLAG("-t", NULL, APP_INT, &threads, .min = 1, .max = 256,
                                     .why = "expected a thread count in 1..256"),
                            APP_FLAG("--allow-requantize", NULL, APP_ON, &allow),
                            APP_FLAG("-q", "--quiet", APP_ON, &quiet),
                            APP_FLAG_END};
    const app_cmd cmd = {.name = "quantize", .usage = usage, .flags = own, .min_pos = 3, .max_pos = 3};
    int st = app_parse(argc, argv, 2, &cmd, NULL, pos, &np);
    if (st)
        return app_parse_status(st);
    const eng_qtarget *t = eng_qtarget_find(pos[2]);
    if (!t) {
        fprintf(stderr, "nibble quantize: unknown type '%s'; one of:", pos[2]);
        for (const eng_qtarget *q = eng_qtargets(); q->name; q++)
            fprintf(stderr, " %s", q->name);
        fputc('\n', stderr);
        return 2;
    }
    int method = 0;
    if (mname && (method = app_quant_method(mname)) < 0)
        return app_usage_error("quantize", "--method", mname, "expected rtn, awq, gptq or awq+gptq");
    if (awq_text) {
        if (mname && method != APP_QM_AWQ)
            return app_usage_error("quantize", "--awq", awq_text,
                                   "is short for --method awq --calib TEXT; with another --method give --calib");
        if (calib)
            return app_usage_error("quantize", "--awq", awq_text, "already names the calibration text; drop --calib");
        method = APP_QM_AWQ;
        calib = awq_text;
    }
    if (method && !calib)
        return app_usage_error("quantize", "--method", mname, "needs --calib TEXT (the calibration text)");
    if (fit_norms && !calib)
        return app_usage_error("quantize", "--fit-norms", "", "needs --calib TEXT (the calibration text)");
    if (!method && !fit_norms && calib)
        return app_usage_error("quantize", "--calib", calib, "is for --method awq, gptq or awq+gptq, or --fit-norms");
    if (refine >= 0 && !(method & APP_QM_GPTQ)) {
        char v[16];
        snprintf(v, sizeof v, "%d", refine);
        return app_usage_error("quantize", "--refine", v, "is for --method gptq or awq+gptq");
    }
    if (ffn_rows && !(method & APP_QM_GPTQ))
        return app_usage_error("quantize", "--ffn-rows", "", "is for --method gptq or awq+gptq");
    if (attn_rows && !(method & APP_QM_GPTQ))
        return app_usage_error("quantize", "--attn-rows", "", "is for --method gptq or awq+gptq");
    if (asym && !(method & APP_QM_GPTQ))
        return app_usage_error("quantize", "--asym", "", "is for --method gptq or awq+gptq");
    if (!(asym_blend > 0 && asym_blend <= 2)) {
        char v[32];
        snprintf(v, sizeof v, "%g", asym_blend);
        return app_usage_error("quantize", "--asym-blend", v, "expected a blend in (0, 2]");
    }
    if (asym_blend != APP_ASYM_BLEND && !asym)
        return app_usage_error("quantize", "--asym-blend", "", "is for --asym");
    if (asym_once && !asym)
        return app_usage_error("quantize", "--asym-once", "", "is for --asym");
    if (asym_layers && !asym)
        return app_usage_error("quantize", "--asym-layers", "", "is for --asym");
    if (asym_rows && !(asym && ffn_rows))
        return app_usage_error("quantize", "--asym-rows", "", "is for --asym with --ffn-rows");
    if (asym_layers && asym_once)
        return app_usage_error("quantize", "--asym-layers", "", "and --asym-once exclude each other");
    if (refine < 0)
        refine = APP_GPTQ_REFINE;
    if (hessian_mb && !(method & APP_QM_GPTQ) && !fit_norms) {
        char v[16];
        snprintf(v, sizeof v, "%d", hessian_mb);
        return app_usage_error("quantize", "--hessian-mb", v, "is for --method gptq or awq+gptq");
    }
    if (!(damp > 0 && damp <= 10)) {
        char v[32];
        snprintf(v, sizeof v, "%g", damp);
        return app_usage_error("quantize", "--damp", v, "expected a share of the diagonal in (0, 10]");
    }
    if ((method & APP_QM_GPTQ) && (t->fake_bits || t->type == SIMD_F32 || t->type == SIMD_F16 ||
                                   t->type == SIMD_BF16 || t->type == SIMD_MXFP4))
        return app_usage_error("quantize", "--method", mname,
                               t->fake_bits ? "the GPTQ pass writes GGUF block types, not the uniform baseline"
                                            : "the GPTQ pass needs a type with integer codes (q*_0/1, K, iq4)");
    if (!strcmp(pos[0], pos[1])) {
        fprintf(stderr, "nibble quantize: IN and OUT are the same file\n");
        return 2;
    }
    app_bar bar = {.label = "quantize", .quiet = quiet};
    eng_quant_opts o = {.target = t, .allow_requantize = allow, .progress = on_progress, .note = on_note,
                        .user = &bar, .threads = threads ? threads : eng_physical_cores()};
    eng_err e;
    eng_awq *awq = NULL;
    eng_gptq *gptq = NULL;
    eng_imatrix *imx = NULL;
    if (imx_path) {
        if (eng_imatrix_load(imx_path, &imx, &e)) {
            fprintf(stderr, "nibble quantize: %s\n", e.msg);
            return 1;
        }
        o.imatrix = imx;
        o.imatrix_file = imx_path;
        if (!quiet)
            fprintf(stderr, "imatrix: %zu entries from %u chunks in %s\n", eng_imatrix_count(imx),
                    eng_imatrix_chunk_count(imx), imx_path);
    }
    app_quant_calib qc = {.path = calib, .tokens = calib_tokens, .threads = threads, .clip = !no_clip, .damp = damp,
                          .refine = refine, .ffn_rows = ffn_rows, .attn_rows = attn_rows, .hessian_mb = hessian_mb,
                          .fit_norms = fit_norms,
                          .quiet = quiet, .label_awq = "awq     ", .label_gptq = "gptq    "};
    if (app_quant_prepare(pos[0], t, method, &qc, &awq, &gptq, &o, &e)) {
        fprintf(stderr, "nibble quantize: %s\n", e.msg);
        eng_imatrix_free(imx);
        return 1;
    }
    eng_quant_report rep;
    /* --asym: a first GPTQ file beside OUT, the side-by-side sums against
     * it, then the pass again into OUT; the first file is removed */
    char *first = asym ? malloc(strlen(pos[1]) + 16) : NULL;
    if (first)
        snprintf(first, strlen(pos[1]) + 16, "%s.asym-first", pos[1]);
    int r = asym && !first ? eng_errf(&e, ENG_ENOMEM, "out of memory")
                           : eng_quantize_file(pos[0], first ? first : pos[1], &o, &rep, &e);
    if (!r && first) {
        eng_gptq_free(gptq);
        gptq = NULL;
        eng_awq *none = NULL;
        app_quant_calib q2 = qc;
        q2.asym_path = first;
        q2.asym_blend = asym_blend;
        q2.asym_seq = asym_once ? 0 : asym_layers ? 1 : 2;
        q2.asym_rows = asym_rows;
        q2.label_gptq = "asym    ";
        eng_quant_opts o2 = o;
        if (app_quant_prepare(pos[0], t, APP_QM_GPTQ, &q2, &none, &gptq, &o2, &e)) {
            r = 1;
        } else {
            o2.edits = o.edits, o2.n_edits = o.n_edits, o2.method = o.method;
            o2.asym = asym_blend;
            r = eng_quantize_file(pos[0], pos[1], &o2, &rep, &e);
        }
    }
    eng_normfit_report fr = {0};
    if (!r && fit_norms) {
        /* the gains refitted in OUT; a failure drops OUT (it may hold some) */
        app_bar fbar = {.label = "fit     ", .quiet = quiet};
        eng_normfit_opts no = {.calib_path = calib, .max_tokens = (uint32_t)calib_tokens,
                               .threads = threads ? threads : eng_physical_cores(),
                               .max_bytes = (uint64_t)hessian_mb << 20, .progress = app_awq_progress, .user = &fbar};
        if ((r = eng_normfit_run(pos[0], pos[1], &no, &fr, &e)))
            remove(pos[1]);
    }
    eng_awq_free(awq);
    eng_imatrix_free(imx);
    if (r) {
        eng_gptq_free(gptq);
        if (first)
            remove(first);
        free(first);
        if (bar.start && !quiet)
            fputc('\n', stderr);
        fprintf(stderr, "nibble quantize: %s\n", e.msg);
        return 1;
    }
    if (fit_norms)
        fprintf(stderr, "fit-norms: %u norm gains refitted (%u left) in %u round%s; their layers' output error is "
                "%.1f%% of what it was (mean)\n", fr.n_fit, fr.n_skipped, fr.rounds, fr.rounds == 1 ? "" : "s",
                100 * fr.ratio);
    if (gptq)
        fprintf(stderr, "gptq: %llu matrices from Hessians over %u tokens (%u calibration pass%s); their output "
                "error (w-q)^T H (w-q) is %.1f%% of round-to-nearest's (mean)\n", (unsigned long long)rep.n_gptq,
                eng_gptq_tokens(gptq), eng_gptq_groups(gptq), eng_gptq_groups(gptq) == 1 ? "" : "es",
                100 * rep.gptq_ratio);
    if (gptq && attn_rows) {
        uint32_t off;
        double d;
        uint32_t n = eng_gptq_attn_layers(gptq, &off, &d);
        fprintf(stderr, "gptq: attention Hessians in %u layer%s (recomputed attention within %.2g%% of the "
                "forward pass's)", n, n == 1 ? "" : "s", 100 * d);
        if (off)
            fprintf(stderr, "; %u layer%s kept the shared Hessian (the recomputation differed)", off,
                    off == 1 ? "" : "s");
        fputc('\n', stderr);
    }
    eng_gptq_free(gptq);
    if (first)
        remove(first);
    free(first);
    fprintf(stderr, "%s: %s, %.3f MB -> %.3f MB (%.2f bits per weight);", pos[1], t->name,
            rep.in_bytes / 1e6, rep.out_bytes / 1e6,
            rep.n_weights ? 8.0 * (double)rep.out_bytes / (double)rep.n_weights : 0.0);
    for (int k = 0; k < 40; k++)
        if (rep.type_count[k])
            fprintf(stderr, " %s x%llu", simd_type_name(k), (unsigned long long)rep.type_count[k]);
    if (imx_path)
        fprintf(stderr, "; %llu with importance", (unsigned long long)rep.n_weighted);
    fprintf(stderr, "%s\n", rep.n_fallbacks ? " (with fallbacks, see above)" : "");
    return 0;
}

void app_awq_progress(void *user, double frac, const char *what) { app_progress(user, frac, what); }

int app_model_open(const app_opts *o, const char *path, eng_model **m, eng_err *e)
{
    if (!o->quantize)
        return eng_model_open(path, m, e);
    const eng_qtarget *t = eng_qtarget_find(o->quantize);
    if (!t || t->more_bits_type >= 0 || t->mix || t->fake_bits)
        return eng_errf(e, ENG_EINVAL,
                        "--quantize %s: expected one of f16 bf16 q8_0 q6_k q5_k q5_1 q5_0 q4_k q4_1 q4_0 iq4_xs iq4_nl "
                        "q3_k q2_k iq3_s mxfp4",
                        o->quantize);
    eng_model_opts mo = {.quantize_type = t->type};
    double t0 = now_s();
    int r = eng_model_open_opts(path, &mo, m, e);
    if (!r && !o->quiet) {
#ifdef _WIN32
        PROCESS_MEMORY_COUNTERS pm = {.cb = sizeof pm};
        double peak_kb = GetProcessMemoryInfo(GetCurrentProcess(), &pm, sizeof pm) ? pm.PeakWorkingSetSize / 1024.0 : 0;
#else
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        double peak_kb = (double)ru.ru_maxrss;
#endif
        fprintf(stderr, "nibble: quantized %s to %s on load in %.2f s; peak RSS %.1f MB (file %.1f MB)\n", path,
                t->name, now_s() - t0, peak_kb / 1024.0, eng_model_get_info(*m)->file_size / 1e6);
    }
    return r;
}
