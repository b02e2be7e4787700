/* Mixture-of-experts models (qwen3moe, gpt-oss) in the engine: the same
 * logits, bit for bit, however the work is cut and whichever kernel set
 * runs it.
 *
 * Seeded models of both families (nibble synth's tiny shapes, and wider
 * ones whose rows fit K-quant blocks) in f32, q8_0, q4_0, q4_k and mxfp4
 * (experts in MXFP4, the rest q8_0) run 40 tokens:
 *  - in one call (two batches: the batch's tokens grouped by expert), on 1
 *    and 2 threads (the pool splits across experts and rows),
 *  - token by token (decode: only the selected experts' rows),
 *  - on every kernel set this CPU runs (on Arm under qemu in CI),
 * and every logit must be identical to the first run's: the matmul rows
 * are independent of how they are grouped, the routing and the sums over
 * experts run in one order. gpt-oss's tiny shape has an 8-position
 * window on its even layers, shorter than the 40 tokens, and sinks.
 * Agreement with llama.cpp itself is bench/crosscheck.sh's job
 * (crosscheck_llamacpp). Also: what the loader says about a mixture
 * (experts, active parameters, bytes a token reads) and a clear error for
 * a misshapen expert tensor.
 * `test_moe --quick` (ctest's test_moe_quick, which the aarch64 CI runs
 * under qemu) keeps both families' routing, biases, sinks and window and
 * the f32 and mxfp4 paths on shorter models and 12 tokens. */
#include "gguf.h"
#include "model.h"
#include "model_internal.h"
#include "quantize.h"
#include "simd.h"
#include "synth.h"
#include "testutil.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_TOK 40 /* the most tokens a run evaluates */

static char dir[64];
/* --quick (the aarch64 run under qemu, where the full test took over ten
 * minutes): 12 tokens (still past the 8-position window), two layers (one
 * windowed, one full), f32 and mxfp4 only, no wide K-quant models (their
 * kernels are test_kquants' and test_pack's), and one thread: the pool's
 * spin-waits on 2 threads were what kept it from ending under qemu; 1.4 s
 * there now */
static int quick;
static uint32_t n_tok = N_TOK;

static int type_of(const char *name)
{
    for (int t = 0; t < SIMD_TYPE_COUNT; t++)
        if (simd_type_traits(t) && simd_type_traits(t)->name && !strcmp(simd_type_traits(t)->name, name))
            return t;
    return -1;
}

static const char *tmp(const char *name)
{
    return tu_path(dir, name);
}

/* Logits of all n_tok tokens (n_tok x n_vocab), one call or one at a time. */
static float *run(eng_model *m, const int32_t *toks, int threads, int one_by_one)
{
    eng_err e;
    eng_ctx *c = NULL;
    uint32_t nv = eng_model_get_info(m)->n_vocab;
    float *lg = malloc((size_t)n_tok * nv * sizeof *lg);
    if (!lg || eng_ctx_new(m, 128, threads, &c, &e)) {
        fprintf(stderr, "context: %s\n", lg ? e.msg : "out of memory");
        free(lg);
        return NULL;
    }
    int r = 0;
    if (one_by_one)
        for (uint32_t i = 0; i < n_tok && !r; i++)
            r = eng_ctx_eval(c, toks + i, 1, lg + (size_t)i * nv, 0, &e);
    else
        r = eng_ctx_eval(c, toks, n_tok, lg, 1, &e);
    eng_ctx_free(c);
    if (r) {
        fprintf(stderr, "eval: %s\n", e.msg);
        free(lg);
        return NULL;
    }
    return lg;
}

static void check_model(const eng_synth_shape *s, const char *type)
{
    char path[160], what[96];
    snprintf(what, sizeof what, "%s %s", s->name, type);
    snprintf(path, sizeof path, "%s", tmp("m.gguf"));
    eng_synth_opts o = {.type = type_of(type), .seed = 11, .n_layers = quick ? 2 : 0};
    eng_err e;
    if (eng_synth_write(s, &o, path, &e)) {
        fprintf(stderr, "%s: synth: %s\n", what, e.msg);
        CHECK(0);
        return;
    }
    eng_model *m = NULL;
    if (eng_model_open_opts(path, &(eng_model_opts){.no_pack = 0}, &m, &e)) {
        fprintf(stderr, "%s: open: %s\n", what, e.msg);
        CHECK(0);
        return;
    }
    eng_model_pack_wait(m);
    const eng_model_info *in = eng_model_get_info(m);
    CHECK(in->n_expert == s->n_expert && in->n_expert_used == s->n_expert_used && in->expert_ffn == s->expert_ffn);
    CHECK(in->n_active_params < in->n_params);
    CHECK(in->window == s->window);
    CHECK((in->n_window_layers != 0) == (s->window != 0));
    /* where the set reads the experts' type packed (mxfp4 and the 32-block
     * and K-quant types on x86), the expert tensors are packed, per expert
     * (3-D), whole: the runs below then compare packed experts on the best
     * set against plain rows on the others */
    for (uint32_t l = 0; l < in->n_layers; l++) {
        const eng_experts *x = &eng_model_layer(m, l)->moe;
        const eng_weight *ew[3] = {&x->gate, &x->up, &x->down};
        for (int i = 0; i < 3; i++) {
            int wants = simd_type_traits(ew[i]->type)->dot_packed != NULL;
            uint32_t pr = atomic_load(&ew[i]->packed_rows);
            if (wants && (!ew[i]->packed || pr != ew[i]->rows))
                fprintf(stderr, "%s: layer %u expert tensor %d not packed (%u of %u rows)\n", what, l, i, pr,
                        ew[i]->rows);
            CHECK(!wants || (ew[i]->packed && pr == ew[i]->rows));
        }
    }
    int32_t toks[N_TOK];
    for (uint32_t i = 0; i < n_tok; i++)
        toks[i] = (int32_t)(3 + (i * 7919u + 13) % (in->n_vocab - 3));
    size_t n = (size_t)n_tok * in->n_vocab;
    float *ref = run(m, toks, 1, 0);
    CHECK(ref != NULL);
    if (!ref) {
        eng_model_close(m);
        return;
    }
    int finite = 1;
    for (size_t i = 0; i < n; i++)
        finite &= ref[i] == ref[i] && ref[i] - ref[i] == 0;
    if (!finite)
        fprintf(stderr, "%s: logits that are not finite numbers\n", what);
    CHECK(finite);
    enum simd_kernel best = simd_kernel_current();
    for (int k = -1; k < SIMD_K_COUNT; k++) {
        if (k >= 0 && (k == (int)best || !simd_kernel_supported((enum simd_kernel)k, NULL)))
            continue;
        if (k >= 0) {
            CHECK(simd_kernel_select((enum simd_kernel)k) == 0);
            eng_model_kernel_changed(m);
            eng_model_pack_wait(m);
        }
        /* the best set: threads and decode; the others: one call */
        for (int way = 0; way < (k < 0 ? 3 : 1); way++) {
            if (quick && way == 1)
                continue; /* under qemu the pool's spin-waits crawl (packaging/ci-aarch64.sh) */
            float *lg = run(m, toks, way == 1 ? 2 : 1, way == 2);
            int same = lg && memcmp(lg, ref, n * sizeof *lg) == 0;
            if (!same)
                fprintf(stderr, "%s: logits differ (%s, kernel set %s)\n", what,
                        way == 0 ? "one call" : way == 1 ? "2 threads" : "token by token",
                        simd_kernel_name(simd_kernel_current()));
            CHECK(same);
            free(lg);
        }
    }
    simd_kernel_select(best);
    eng_model_kernel_changed(m);
    free(ref);
    eng_model_close(m);
    printf("%-16s bit-identical: one call,%s token by token, every kernel set\n", what, quick ? "" : " 2 threads,");
}

/* A qwen3moe file whose experts' tensor has a wrong expert count must be
 * refused with the tensor's name. */
static void check_bad_shape(void)
{
    eng_synth_shape s = *eng_synth_find("tiny-moe");
    eng_synth_opts o = {.type = SIMD_F32, .seed = 1};
    eng_err e;
    CHECK(eng_synth_write(&s, &o, tmp("bad.gguf"), &e) == 0);
    /* rewrite expert_count: the tensors keep 8 experts */
    eng_gguf *g = NULL;
    CHECK(eng_gguf_open(tmp("bad.gguf"), &g, &e) == 0);
    eng_gguf_writer *w = eng_gguf_writer_new();
    for (uint64_t i = 0; g && w && i < eng_gguf_n_kv(g); i++)
        if (strcmp(eng_gguf_kv_key(g, i), "qwen3moe.expert_count"))
            CHECK(eng_gguf_writer_copy_kv(w, g, i) == 0);
    eng_gguf_writer_u32(w, "qwen3moe.expert_count", 6);
    for (uint64_t i = 0; g && w && i < eng_gguf_n_tensors(g); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        CHECK(eng_gguf_writer_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data) == 0);
    }
    CHECK(eng_gguf_writer_save(w, tmp("bad2.gguf"), &e) == 0);
    eng_gguf_writer_free(w);
    eng_gguf_close(g);
    eng_model *m = NULL;
    CHECK(eng_model_open(tmp("bad2.gguf"), &m, &e) != 0 && m == NULL);
    CHECK(strstr(e.msg, "ffn_gate_inp") || strstr(e.msg, "_exps"));
    printf("misshapen experts: %s\n", e.msg);
}

/* The type of tensor `name` in file path, or -1. */
static int type_in(const char *path, const char *name)
{
    eng_gguf *g = NULL;
    eng_err e;
    if (eng_gguf_open(path, &g, &e))
        return -1;
    const eng_gguf_tensor *t = eng_gguf_tensor_find(g, name);
    int type = t ? t->type : -1;
    eng_gguf_close(g);
    return type;
}

/* nibble quantize on 3-D expert tensors: quantized like matrices, the
 * router kept, MXFP4 experts copied as stored; the result runs. */
static void check_quantize(void)
{
    eng_err e;
    eng_synth_opts o = {.type = SIMD_F32, .seed = 3};
    CHECK(eng_synth_write(eng_synth_find("tiny-oss"), &o, tmp("q.gguf"), &e) == 0);
    eng_quant_opts qo = {.target = eng_qtarget_find("q4_0")};
    eng_quant_report rep;
    CHECK(eng_quantize_file(tmp("q.gguf"), tmp("q4.gguf"), &qo, &rep, &e) == 0);
    CHECK(type_in(tmp("q4.gguf"), "blk.1.ffn_up_exps.weight") == SIMD_Q4_0);
    CHECK(type_in(tmp("q4.gguf"), "blk.1.ffn_gate_inp.weight") == SIMD_F32);
    /* gpt-oss as shipped: MXFP4 experts, the rest in floats */
    eng_gguf *g = NULL;
    CHECK(eng_gguf_open(tmp("q.gguf"), &g, &e) == 0);
    eng_gguf_writer *w = eng_gguf_writer_new();
    void *bufs[64] = {0};
    int nb = 0;
    for (uint64_t i = 0; g && w && i < eng_gguf_n_kv(g); i++)
        CHECK(eng_gguf_writer_copy_kv(w, g, i) == 0);
    for (uint64_t i = 0; g && w && i < eng_gguf_n_tensors(g); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        const void *data = t->data;
        int type = t->type;
        if (strstr(t->name, "_exps.weight") && nb < 64) {
            uint64_t rows = t->ne[1] * t->ne[2];
            data = bufs[nb++] = malloc(simd_row_bytes(SIMD_MXFP4, t->ne[0]) * rows);
            CHECK(data && eng_quant_rows(SIMD_MXFP4, t->data, (void *)data, rows, t->ne[0]) == 0);
            type = SIMD_MXFP4;
        }
        CHECK(eng_gguf_writer_tensor(w, t->name, type, t->n_dims, t->ne, data) == 0);
    }
    CHECK(eng_gguf_writer_save(w, tmp("mx.gguf"), &e) == 0);
    eng_gguf_writer_free(w);
    eng_gguf_close(g);
    for (int i = 0; i < nb; i++)
        free(bufs[i]);
    /* quantized to q8_0: its MXFP4 tensors stay as they are (no
     * requantizing asked), so it is not refused as already quantized */
    qo.target = eng_qtarget_find("q8_0");
    int r = eng_quantize_file(tmp("mx.gguf"), tmp("mx8.gguf"), &qo, &rep, &e);
    if (r)
        fprintf(stderr, "quantize mxfp4 -> q8_0: %s\n", e.msg);
    CHECK(r == 0);
    CHECK(type_in(tmp("mx8.gguf"), "blk.0.ffn_down_exps.weight") == SIMD_MXFP4);
    CHECK(type_in(tmp("mx8.gguf"), "blk.0.attn_q.weight") == SIMD_Q8_0);
    qo.allow_requantize = 1;
    CHECK(eng_quantize_file(tmp("mx.gguf"), tmp("mx8r.gguf"), &qo, &rep, &e) == 0);
    CHECK(type_in(tmp("mx8r.gguf"), "blk.0.ffn_down_exps.weight") == SIMD_Q8_0);
    eng_model *m = NULL;
    CHECK(eng_model_open(tmp("q4.gguf"), &m, &e) == 0);
    float *lg = m ? run(m, (const int32_t[N_TOK]){1, 5, 9}, 1, 0) : NULL;
    CHECK(lg != NULL);
    free(lg);
    eng_model_close(m);
    /* quantize on load: float experts converted, the router not */
    m = NULL;
    CHECK(eng_model_open_opts(tmp("q.gguf"), &(eng_model_opts){.quantize_type = SIMD_Q8_0}, &m, &e) == 0);
    if (m)
        CHECK(eng_model_get_info(m)->main_type == SIMD_Q8_0);
    eng_model_close(m);
    printf("quantize: 3-D experts quantized, routers kept, MXFP4 kept unless asked\n");
}

int main(int argc, char **argv)
{
    quick = argc > 1 && !strcmp(argv[1], "--quick");
    if (argc > 1 && !quick) {
        fprintf(stderr, "usage: test_moe [--quick]\n");
        return 2;
    }
    n_tok = quick ? 12 : N_TOK;
    simd_init();
    snprintf(dir, sizeof dir, "/tmp/nibble-moe-XXXXXX");
    if (!tu_mkdtemp(dir)) {
        fprintf(stderr, "cannot make a scratch directory\n");
        return 1;
    }
    const char *tiny_types[] = {"f32", "mxfp4", "q8_0", "q4_0"};
    for (size_t i = 0; i < (quick ? 2 : sizeof tiny_types / sizeof *tiny_types); i++) {
        check_model(eng_synth_find("tiny-moe"), tiny_types[i]);
        check_model(eng_synth_find("tiny-oss"), tiny_types[i]);
    }
    if (quick) {
        check_bad_shape();
        check_quantize();
        tu_rmtree(dir);
        return tu_result("test_moe --quick");
    }
    /* rows of 256: K-quant experts */
    eng_synth_shape wide = *eng_synth_find("tiny-moe");
    wide.name = "wide-moe";
    wide.dim = 256;
    wide.expert_ffn = 256;
    wide.head_dim = 64;
    check_model(&wide, "q4_k");
    eng_synth_shape wide_oss = *eng_synth_find("tiny-oss");
    wide_oss.name = "wide-oss";
    wide_oss.dim = 256;
    wide_oss.expert_ffn = 256;
    wide_oss.head_dim = 64;
    check_model(&wide_oss, "q6_k");
    check_bad_shape();
    check_quantize();
    tu_rmtree(dir);
    return tu_result("test_moe");
}
