/* Files of the i-quants below 4 bits written by eng_quantize_file, on the
 * tiny256 synth model (rows of 256 and 512, so no fallback) with an
 * importance matrix collected here:
 *  - iq2_xxs, iq2_xs, iq1_s and iq1_m are refused without an importance
 *    matrix, and with one that lacks the tensor, naming it; no file is
 *    left behind;
 *  - with one, every target writes a file whose tensors have the planned
 *    types, that loads and runs: perplexity and KL to the f32 model finite,
 *    and the KL growing as the files shrink (iq3_s < iq2_s < iq2_xxs <
 *    iq1_s), so a broken type (whose KL would be huge) fails;
 *  - a model whose rows fit no 256-block (the embedded one) gets iq4_nl
 *    under every i-quant target, with no importance matrix needed;
 *  - the file is the same byte for byte at 1, 2 and 5 threads, for the
 *    i-quants, the K-quants and the 32-blocks, with and without the
 *    importance matrix (5 threads share tiny256's 8-slice matrices
 *    unevenly). */
#include "gguf.h"
#include "imatrix.h"
#include "model.h"
#include "ppl.h"
#include "quantize.h"
#include "simd.h"
#include "synth.h"
#include "testutil.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char dir[64];

static const char *tmp(const char *name)
{
    return tu_path(dir, name);
}

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static const char story[] =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine. "
    "One day, she saw a big red ball in the park. She ran to get it, but a dog got there first. "
    "The dog and Lily played with the ball all day. They were very happy and became good friends. "
    "Tom had a toy car. He liked to push it around the house. His mom said, \"Tom, be careful!\" "
    "Tom did not listen. The car hit the wall and broke. Tom was sad, but his mom helped him fix it. ";

static int quantize_t(const char *in, const char *out, const char *type, const eng_imatrix *im, int threads,
                      eng_quant_report *rep, eng_err *e)
{
    eng_quant_opts o = {.target = eng_qtarget_find(type), .imatrix = im, .imatrix_file = "t.imatrix",
                        .threads = threads};
    return eng_quantize_file(in, out, &o, rep, e);
}

static int quantize(const char *in, const char *out, const char *type, const eng_imatrix *im, eng_quant_report *rep,
                    eng_err *e)
{
    return quantize_t(in, out, type, im, 1, rep, e);
}

/* The same bytes from `type` at 1, 2 and 5 threads. */
static void check_threads(const char *model, const char *type, const eng_imatrix *im)
{
    eng_err e;
    eng_quant_report rep;
    char *one = NULL;
    size_t n1 = 0;
    const int counts[] = {1, 2, 5};
    for (int k = 0; k < 3; k++) {
        int r = quantize_t(model, tmp("thr.gguf"), type, im, counts[k], &rep, &e);
        CHECKF(r == 0, "%s at %d threads: %s", type, counts[k], r ? e.msg : "");
        size_t n = 0;
        char *b = r ? NULL : tu_read(tmp("thr.gguf"), &n);
        CHECK(b != NULL);
        if (k == 0)
            one = b, n1 = n;
        else {
            CHECKF(b && one && n == n1 && !memcmp(b, one, n), "%s%s: %d threads wrote other bytes than 1", type,
                   im ? " with importance" : "", counts[k]);
            free(b);
        }
    }
    free(one);
    remove(tmp("thr.gguf"));
}

/* KL of the model at path to base over text; -1 on failure */
static double kl_of(const char *path, eng_model *base, const char *text, double *ppl)
{
    eng_err e;
    eng_model *m = NULL;
    eng_ppl_result r;
    eng_ppl_opts po = {.n_ctx = 64, .max_chunks = 8, .threads = 1, .base = base};
    if (eng_model_open(path, &m, &e) || eng_ppl_run(m, text, strlen(text), &po, &r, &e)) {
        fprintf(stderr, "%s: %s\n", path, e.msg);
        eng_model_close(m);
        return -1;
    }
    eng_model_close(m);
    *ppl = r.ppl;
    return r.kl;
}

static void test_tiny256(void)
{
    eng_err e;
    char model[256], text[8192] = "";
    snprintf(model, sizeof model, "%s", tmp("t256.gguf"));
    eng_synth_opts so = {.type = SIMD_F32, .seed = 11};
    CHECK(eng_synth_write(eng_synth_find("tiny256"), &so, model, &e) == 0);
    for (int i = 0; i < 10; i++)
        strcat(text, story);
    eng_imatrix *im = NULL;
    eng_imatrix_opts io = {.calib_text = text, .calib_len = strlen(text), .n_ctx = 64, .max_chunks = 8, .threads = 1,
                           .dataset = "story"};
    CHECK(eng_imatrix_collect(model, &io, &im, &e) == 0);
    if (!im)
        return;

    /* the thread count changes nothing */
    const char *thr_types[] = {"iq3_s", "iq2_xs", "iq1_m", "q4_k_m", "iq4_xs", "q2_k", "q4_0"};
    for (int i = 0; i < 7; i++)
        check_threads(model, thr_types[i], im);
    check_threads(model, "iq3_xxs", NULL);
    check_threads(model, "q3_k_m", NULL);

    /* refusals */
    const char *need[] = {"iq2_xxs", "iq2_xs", "iq1_s", "iq1_m"};
    for (int i = 0; i < 4; i++) {
        eng_quant_report rep;
        int r = quantize(model, tmp("no.gguf"), need[i], NULL, &rep, &e);
        CHECKF(r == ENG_EINVAL && strstr(e.msg, "need an importance matrix") && strstr(e.msg, "--imatrix"), "%s: %s",
               need[i], r ? e.msg : "written");
        CHECK(!exists(tmp("no.gguf")));
    }
    {
        /* an importance matrix naming only one tensor: the others are refused by name */
        eng_gguf_writer *w = eng_gguf_writer_new();
        static float ones[256];
        for (int i = 0; i < 256; i++)
            ones[i] = 1;
        uint64_t n256 = 256, n1 = 1;
        eng_gguf_writer_str(w, "general.type", "imatrix");
        eng_gguf_writer_tensor(w, "blk.0.attn_q.weight.in_sum2", SIMD_F32, 1, &n256, ones);
        eng_gguf_writer_tensor(w, "blk.0.attn_q.weight.counts", SIMD_F32, 1, &n1, ones);
        CHECK(eng_gguf_writer_save(w, tmp("one.gguf"), &e) == 0);
        eng_gguf_writer_free(w);
        eng_imatrix *one = NULL;
        CHECK(eng_imatrix_load(tmp("one.gguf"), &one, &e) == 0);
        eng_quant_report rep;
        int r = quantize(model, tmp("no.gguf"), "iq2_xs", one, &rep, &e);
        CHECKF(r == ENG_EINVAL && strstr(e.msg, "no entry") && strstr(e.msg, "'blk.0.attn_k.weight'") &&
                   strstr(e.msg, "t.imatrix"),
               "%s", r ? e.msg : "written");
        CHECK(!exists(tmp("no.gguf")));
        eng_imatrix_free(one);
    }

    /* every i-quant target with the importance matrix */
    eng_model *base = NULL;
    CHECK(eng_model_open(model, &base, &e) == 0);
    eng_gguf *g0 = NULL;
    CHECK(eng_gguf_open(model, &g0, &e) == 0);
    const char *targets[] = {"iq3_m", "iq3_s", "iq3_xs", "iq3_xxs", "iq2_s", "iq2_xs", "iq2_xxs", "iq1_m", "iq1_s"};
    double kl[9];
    for (int k = 0; k < 9 && base && g0; k++) {
        char out[64];
        snprintf(out, sizeof out, "%s.gguf", targets[k]);
        eng_quant_report rep;
        kl[k] = -1;
        int r = quantize(model, tmp(out), targets[k], im, &rep, &e);
        CHECKF(r == 0, "%s: %s", targets[k], r ? e.msg : "");
        if (r)
            continue;
        const eng_qtarget *t = eng_qtarget_find(targets[k]);
        CHECKF(rep.n_fallbacks == 0 && rep.n_weighted > 0 && rep.type_count[t->type] > 0, "%s", targets[k]);
        eng_gguf *g = NULL;
        CHECK(eng_gguf_open(tmp(out), &g, &e) == 0);
        for (uint64_t i = 0; g && i < eng_gguf_n_tensors(g0); i++) {
            const eng_gguf_tensor *a = eng_gguf_tensor_at(g0, i), *b = eng_gguf_tensor_find(g, a->name);
            int planned, fb;
            int want = eng_quant_plan(t, a->name, a->n_dims, a->ne, a->type, 2,
                                      eng_gguf_tensor_find(g0, "output.weight") != NULL, &planned, &fb);
            CHECKF(b && b->type == want, "%s %s: %s, want %s", targets[k], a->name, b ? simd_type_name(b->type) : "none",
                   simd_type_name(want));
        }
        eng_gguf_close(g);
        double ppl = 0;
        kl[k] = kl_of(tmp(out), base, text, &ppl);
        printf("%-8s %8llu bytes, KL to f32 %.4f, ppl %.1f\n", targets[k], (unsigned long long)rep.out_bytes, kl[k], ppl);
        CHECKF(kl[k] > 0 && isfinite(kl[k]) && isfinite(ppl), "%s: KL %g", targets[k], kl[k]);
    }
    /* iq3_s 1, iq2_s 4, iq2_xxs 6, iq1_s 8 */
    CHECKF(kl[1] < kl[4] && kl[4] < kl[6] && kl[6] < kl[8], "KL not growing as the files shrink: %g %g %g %g", kl[1],
           kl[4], kl[6], kl[8]);
    eng_gguf_close(g0);
    eng_model_close(base);
    eng_imatrix_free(im);
}

static void test_fallback(void)
{
    char buf[4096];
    const char *model = tu_asset("stories260K.gguf", buf);
    eng_err e;
    const char *targets[] = {"iq3_s", "iq2_xxs", "iq1_m"};
    for (int k = 0; k < 3; k++) {
        eng_quant_report rep;
        int r = quantize(model, tmp("fb.gguf"), targets[k], NULL, &rep, &e);
        CHECKF(r == 0, "%s: %s", targets[k], r ? e.msg : "");
        int iq = 0;
        for (int t = SIMD_IQ2_XXS; t <= SIMD_IQ1_M; t++)
            iq += t != SIMD_IQ4_NL && t != SIMD_IQ4_XS && rep.type_count[t];
        CHECKF(!r && rep.n_fallbacks > 0 && rep.type_count[SIMD_IQ4_NL] > 0 && !iq, "%s: %llu fallbacks", targets[k],
               (unsigned long long)rep.n_fallbacks);
    }
}

int main(void)
{
    simd_init();
    if (!tu_scratch(dir, sizeof dir, "test_iquant_file"))
        return 1;
    test_tiny256();
    test_fallback();
    tu_rmtree(dir);
    return tu_result("test_iquant_file");
}
