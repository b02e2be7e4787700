/* Weight packing at load (engine/model/wpack.c) changes no result: a model
 * opened with its weights packed gives the logits of the same model
 * opened without, bit for bit, for a prompt in one batch and token by
 * token, on 1, 2 and 3 threads (the pool's row split must respect the
 * 16-row groups), with an output matrix whose rows end in a partial group
 * (those rows stay in the file's layout), and after switching to a
 * kernel set that reads only plain rows.
 *
 * Where the active set has no packed kernel for a type, a stand-in is
 * installed for the test (unpack the groups, then the set's dot_rows), so
 * the engine's side is checked on every machine. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "model.h"
#include "model_internal.h"
#include "quantize.h"
#include "simd.h"
#include "simd_internal.h"
#include "synth.h"
#include "testutil.h"

#define N_PROMPT 40 /* more than one batch of 32 (run's n_batch) */
#define N_STEP 6    /* then token by token */
#define N_CTX 64

/* ---- the stand-in packed kernel ---- */

static simd_dot_rows_fn standin_rows[SIMD_TYPE_COUNT];
static int standin_type;

static void standin(size_t n, const void *p, size_t ng, const void *a, size_t astride, size_t nt, float *out,
                    size_t ostride)
{
    int type = standin_type;
    size_t rb = simd_row_bytes(type, n);
    unsigned char *rows = malloc(SIMD_PACK_ROWS * rb);
    if (!rows)
        abort();
    for (size_t g = 0; g < ng; g++) {
        simd_unpack(type, n, (const char *)p + g * simd_pack_group_bytes(type, n), 1, rows, rb);
        standin_rows[type](n, rows, rb, SIMD_PACK_ROWS, a, astride, nt, out + g * SIMD_PACK_ROWS, ostride);
    }
    free(rows);
}

/* Give types without a packed kernel in the active set the stand-in
 * (one type at a time: the stand-in reads the type from a global).
 * Returns 1 if the real kernel is used. */
static int ensure_packed_kernel(int type)
{
    if (simd_table.type[type].dot_packed)
        return 1;
    standin_rows[type] = simd_table.type[type].dot_rows;
    standin_type = type;
    simd_table.type[type].dot_packed = standin;
    return 0;
}

/* ---- runs ---- */

static int run(eng_model *m, int threads, const int32_t *toks, float *logits, size_t nv)
{
    eng_err e = {{0}};
    eng_ctx *c = NULL;
    eng_ctx_opts o = {.n_ctx = N_CTX, .n_threads = threads, .n_batch = 32}; /* N_PROMPT crosses a batch */
    int rc = eng_ctx_new_opts(m, &o, &c, &e);
    CHECKF(rc == 0, "ctx: %s", e.msg);
    if (rc)
        return rc;
    rc = eng_ctx_eval(c, toks, N_PROMPT, logits, 1, &e);
    for (int t = 0; t < N_STEP && rc == 0; t++)
        rc = eng_ctx_eval(c, toks + N_PROMPT + t, 1, logits + (size_t)(N_PROMPT + t) * nv, 0, &e);
    CHECKF(rc == 0, "eval: %s", e.msg);
    eng_ctx_free(c);
    return rc;
}

static void check_type(const char *dir, const char *tname, int tied)
{
    /* vocab 500: the output matrix ends in a partial group of 4 rows.
     * Tied: the output is the embedding, whose rows then come out of the
     * packed copy (tokens 496-499 from the file). */
    eng_synth_shape shape = {"wpack", "llama", 256, 2, 4, 2, 512, 500, 64, 256, 10000.0f, tied, "test", 0, 0, 0, 0, 0.0f, 0};
    eng_synth_opts so = {.seed = 7};
    const eng_qtarget *mix = eng_qtarget_find(tname);
    if (mix && mix->more_bits_type >= 0) {
        so.mix = mix;
        so.type = mix->type;
    } else {
        for (int t = 0; t < SIMD_TYPE_COUNT; t++)
            if (simd_type_traits(t) && simd_type_traits(t)->name && !strcmp(simd_type_traits(t)->name, tname))
                so.type = t;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/nibble_wpack_XXXXXX", dir);
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    close(fd);
    eng_err e = {{0}};
    int rc = eng_synth_write(&shape, &so, path, &e);
    CHECKF(rc == 0, "%s: synth: %s", tname, e.msg);
    if (rc) {
        unlink(path);
        return;
    }
    enum simd_kernel best = simd_kernel_current();
    int real[SIMD_TYPE_COUNT] = {0};
    int main_type = so.type;
    real[main_type] = ensure_packed_kernel(main_type);

    eng_model_opts plain = {.no_pack = 1};
    eng_model *mp = NULL, *mq = NULL;
    CHECKF(eng_model_open_opts(path, &plain, &mq, &e) == 0, "%s: open unpacked: %s", tname, e.msg);
    CHECKF(eng_model_open_opts(path, NULL, &mp, &e) == 0, "%s: open packed: %s", tname, e.msg);
    if (mp && mq) {
        /* logits while the packing thread is still at work (in whatever
         * state it is: the result must not depend on it) */
        int32_t toks[N_PROMPT + N_STEP];
        for (int i = 0; i < N_PROMPT + N_STEP; i++)
            toks[i] = (int32_t)((i * 37 + 11) % 500);
        toks[5] = 498; /* a row past the last whole group */
        size_t nv = 500, nl = (size_t)(N_PROMPT + N_STEP) * nv;
        float *a = calloc(nl, sizeof *a), *b = calloc(nl, sizeof *b);
        if (a && b && run(mq, 2, toks, a, nv) == 0) {
            eng_model *mr = NULL;
            CHECKF(eng_model_open_opts(path, NULL, &mr, &e) == 0, "%s: open: %s", tname, e.msg);
            if (mr && run(mr, 2, toks, b, nv) == 0)
                CHECKF(memcmp(a, b, nl * sizeof *a) == 0, "%s: logits while packing differ", tname);
            eng_model_close(mr); /* stops its packing thread */
        }
        eng_model_pack_wait(mp);
        /* what was packed: the main type's matrices, the output's whole
         * groups only (its type may differ: a mix's q6_k) */
        int packed = 0, npl = 0;
        for (uint32_t l = 0; l < mp->info.n_layers; l++) {
            const eng_layer *L = &mp->layers[l];
            const eng_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
            for (size_t i = 0; i < sizeof ws / sizeof *ws; i++) {
                packed += ws[i]->packed != NULL;
                npl += ws[i]->type == main_type;
                if (ws[i]->packed)
                    CHECK(atomic_load(&ws[i]->packed_rows) == ws[i]->rows);
            }
            CHECK(mq->layers[l].wq.packed == NULL);
        }
        CHECKF(packed >= npl && packed > 0, "%s: %d matrices packed, %d of the main type", tname, packed, npl);
        /* the bytes a packed layout holds beyond the file's: iq3_s's
         * decoded levels (16 rows of 256 values: SIMD_PACK_IQ3S_BLOCK
         * bytes against 16 file blocks), nothing for the other types;
         * whole groups of 16 rows only (the output's 496 of 500) */
        uint64_t extra = 0;
        for (uint32_t l = 0; l <= mp->info.n_layers; l++) {
            const eng_layer *L = &mp->layers[l < mp->info.n_layers ? l : 0];
            const eng_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
            const eng_weight *out1[] = {&mp->output};
            const eng_weight *const *set = l < mp->info.n_layers ? ws : out1;
            size_t n = l < mp->info.n_layers ? sizeof ws / sizeof *ws : 1;
            for (size_t i = 0; i < n; i++)
                if (set[i]->packed && set[i]->type == SIMD_IQ3_S)
                    extra += (uint64_t)(set[i]->rows / 16) * (set[i]->cols / 256) *
                             (SIMD_PACK_IQ3S_BLOCK - 16 * sizeof(simd_block_iq3_s));
        }
        CHECKF(eng_model_pack_extra_bytes(mp) == extra, "%s: packed layouts' extra bytes %llu, expected %llu", tname,
               (unsigned long long)eng_model_pack_extra_bytes(mp), (unsigned long long)extra);
        CHECK(eng_model_pack_extra_bytes(mq) == 0);
        if (mp->output.packed)
            CHECKF(atomic_load(&mp->output.packed_rows) == 496, "%s: output packed_rows %u", tname,
                   atomic_load(&mp->output.packed_rows));
        for (int th = 1; th <= 3 && a && b; th++) {
            memset(a, 0, nl * sizeof *a);
            memset(b, 0xff, nl * sizeof *b);
            if (run(mq, th, toks, a, nv) || run(mp, th, toks, b, nv))
                continue;
            CHECKF(memcmp(a, b, nl * sizeof *a) == 0, "%s: %d thread(s): packed logits differ (%s kernel)", tname,
                   th, real[main_type] ? "real" : "stand-in");
        }
        /* a set without packed kernels reads the plain rows, which the
         * packing left in place */
        CHECK(simd_kernel_select(SIMD_K_SCALAR) == 0);
        if (a && b) {
            memset(b, 0xff, nl * sizeof *b);
            if (run(mp, 2, toks, b, nv) == 0) {
                float *c = calloc(nl, sizeof *c);
                if (c && run(mq, 2, toks, c, nv) == 0)
                    CHECKF(memcmp(b, c, nl * sizeof *b) == 0, "%s: scalar set on a packed model differs", tname);
                free(c);
            }
        }
        /* told of the switch, the model drops the copies the scalar set
         * cannot read (else the file's pages come back beside them), and
         * packs anew when a set that reads them returns */
        eng_model_kernel_changed(mp);
        int left = mp->output.packed != NULL;
        for (uint32_t l = 0; l < mp->info.n_layers; l++)
            left += mp->layers[l].wq.packed != NULL || mp->layers[l].w_down.packed != NULL;
        CHECKF(left == 0 && mp->packer == NULL, "%s: %d packed copies kept under the scalar set", tname, left);
        if (a && b) {
            memset(b, 0xff, nl * sizeof *b);
            if (run(mp, 2, toks, b, nv) == 0)
                CHECKF(memcmp(a, b, nl * sizeof *a) == 0, "%s: logits differ after the copies were dropped", tname);
        }
        simd_kernel_select(best);
        ensure_packed_kernel(main_type);
        eng_model_kernel_changed(mp);
        eng_model_pack_wait(mp);
        int again = 0;
        for (uint32_t l = 0; l < mp->info.n_layers; l++)
            again += mp->layers[l].w_down.packed != NULL &&
                     atomic_load(&mp->layers[l].w_down.packed_rows) == mp->layers[l].w_down.rows;
        CHECKF(again > 0, "%s: nothing packed again after the switch back", tname);
        if (a && b) {
            memset(b, 0xff, nl * sizeof *b);
            if (run(mp, 2, toks, b, nv) == 0)
                CHECKF(memcmp(a, b, nl * sizeof *a) == 0, "%s: logits differ after packing again", tname);
        }
        free(a);
        free(b);
        printf("%-7s %2d matrices packed, output %s%s, %s kernel: same logits\n", tname, packed,
               mp->output.packed ? "packed (496 of 500 rows)" : "plain", tied ? " and tied" : "",
               real[main_type] ? "real" : "stand-in");
    }
    
    eng_model_close(mp);
    eng_model_close(mq);
    unlink(path);
}

int main(void)
{
    simd_init();
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir)
        dir = "/tmp";
    static const char *const types[] = {"q4_0", "q8_0", "q5_0", "q4_1", "q5_1", "mxfp4", "q4_k_m", "iq3_s"};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        check_type(dir, types[i], (int)(i % 2));
    return tu_result("test_wpack");
}
