/* engine/tools/quantize.c, the K-quant forward path and `nibble quantize`:
 *  - F32 -> f32 keeps every tensor's bytes and every metadata key;
 *  - every target: each tensor within its type's error bound of the
 *    original, the plan's types (mixes, output rule, fallbacks) and the
 *    file type recorded;
 *  - a K-quant model (a synth model whose rows fit 256) runs, and its
 *    logits are close to those of its dequantized f32 twin;
 *  - bad input: unknown type, quantized input without
 *    --allow-requantize, unwritable output (no OUT and no temporary file
 *    left behind), too-short calibration text. */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"
#include "model.h"
#include "quantize.h"
#include "simd.h"
#include "synth.h"
#include "testutil.h"

static char dir[256];

static const char *tmp(const char *name)
{
    return tu_path(dir, name);
}

/* Bound on one tensor's relative RMS error for the type it was written in. */
static double bound_of(int type)
{
    switch (type) {
    case SIMD_F32: return 0;
    case SIMD_F16: return 0.001;
    case SIMD_BF16: return 0.006;
    case SIMD_Q8_0: return 0.01;
    case SIMD_Q6_K: return 0.03;
    case SIMD_Q5_K: case SIMD_Q5_1: case SIMD_Q5_0: return 0.07;
    case SIMD_Q3_K: return 0.2;
    case SIMD_Q2_K: return 0.36;
    /* the i-quants below 4 bits without importance (test_iquants_quant
     * measures 0.16-0.56 on Gaussian rows) */
    case SIMD_IQ3_S: return 0.2;
    case SIMD_IQ3_XXS: return 0.26;
    case SIMD_IQ2_S: return 0.36;
    case SIMD_IQ2_XS: return 0.4;
    case SIMD_IQ2_XXS: return 0.46;
    case SIMD_IQ1_M: return 0.56;
    case SIMD_IQ1_S: return 0.62;
    default: return 0.14; /* 4-bit types */
    }
}

static float *dequant_all(const eng_gguf_tensor *t)
{
    size_t n = (size_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    float *v = malloc(n * sizeof *v);
    simd_type_traits(t->type)->dequant(t->data, v, n);
    return v;
}

/* Quantize src to every target and check each tensor of the result. */
static int file_exists(const char *p);

static void check_targets(const char *src_arg, const char *tag)
{
    char src[512];
    snprintf(src, sizeof src, "%s", src_arg); /* tmp() reuses its buffers */
    eng_err e;
    eng_gguf *g0;
    CHECK(eng_gguf_open(src, &g0, &e) == 0);
    uint32_t n_layers = 0;
    CHECK(eng_gguf_get_u32(g0, "llama.block_count", &n_layers, NULL) == 0);
    for (const eng_qtarget *t = eng_qtargets(); t->name; t++) {
        char name[64];
        snprintf(name, sizeof name, "%s_%s.gguf", tag, t->name);
        eng_quant_opts o = {.target = t};
        eng_quant_report rep;
        int r = eng_quantize_file(src, tmp(name), &o, &rep, &e);
        /* the types that need an importance matrix are refused without
         * one, unless every matrix falls back to a type that does not */
        int needs = 0;
        for (uint64_t i = 0; i < eng_gguf_n_tensors(g0); i++) {
            const eng_gguf_tensor *a = eng_gguf_tensor_at(g0, i);
            int planned, fb;
            needs |= eng_quant_needs_imatrix(eng_quant_plan(t, a->name, a->n_dims, a->ne, a->type, n_layers, 1,
                                                            &planned, &fb));
        }
        if (needs) {
            CHECKF(r == ENG_EINVAL && strstr(e.msg, "need an importance matrix") && strstr(e.msg, "--imatrix"),
                   "%s: %d %s", t->name, r, r ? e.msg : "");
            CHECK(!file_exists(tmp(name)));
            continue;
        }
        CHECKF(r == 0, "%s: %s", t->name, e.msg);
        if (r)
            continue;
        eng_gguf *g;
        CHECK(eng_gguf_open(tmp(name), &g, &e) == 0);
        uint32_t ft = 99;
        eng_str qt;
        CHECK(eng_gguf_get_u32(g, "general.file_type", &ft, NULL) == 0 && ft == t->file_type);
        CHECK(eng_gguf_get_str(g, "nibble.quantize.type", &qt, NULL) == 0 && qt.len == strlen(t->name));
        double worst = 0;
        for (uint64_t i = 0; i < eng_gguf_n_tensors(g0); i++) {
            const eng_gguf_tensor *a = eng_gguf_tensor_at(g0, i), *b = eng_gguf_tensor_find(g, a->name);
            CHECK(b != NULL);
            if (!b)
                continue;
            CHECK(b->ne[0] == a->ne[0] && b->ne[1] == a->ne[1]);
            if (a->n_dims >= 2 && !t->fake_bits) {
                int planned, fb;
                int want = eng_quant_plan(t, a->name, a->n_dims, a->ne, a->type, n_layers, 1, &planned, &fb);
                CHECKF(b->type == want, "%s %s: %s, plan %s", t->name, a->name, simd_type_name(b->type),
                       simd_type_name(want));
            }
            float *x = dequant_all(a), *y = dequant_all(b);
            double err = tu_rel_rms(x, y, (size_t)(a->ne[0] * a->ne[1]));
            double bound = t->fake_bits ? (t->fake_bits == 8 ? 0.01 : t->fake_bits == 4 ? 0.14 : 0.8) : bound_of(b->type);
            CHECKF(err <= bound, "%s %s (%s): error %g > %g", t->name, a->name, simd_type_name(b->type), err, bound);
            if (err > worst)
                worst = err;
            free(x);
            free(y);
        }
        printf("%s %-7s %8llu bytes, %llu fallbacks, worst tensor error %.4f\n", tag, t->name,
               (unsigned long long)rep.out_bytes, (unsigned long long)rep.n_fallbacks, worst);
        eng_gguf_close(g);
    }
    eng_gguf_close(g0);
}

/* logits of n tokens from a model file */
static float *logits_of(const char *path, const int32_t *ids, uint32_t n, uint32_t *nv)
{
    eng_err e;
    eng_model *m;
    eng_ctx *c;
    if (eng_model_open(path, &m, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return NULL;
    }
    *nv = eng_model_get_info(m)->n_vocab;
    float *l = malloc((size_t)n * *nv * sizeof *l);
    if (eng_ctx_new(m, 64, 1, &c, &e) || eng_ctx_eval(c, ids, n, l, 1, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        free(l);
        l = NULL;
    }
    eng_ctx_free(c);
    eng_model_close(m);
    return l;
}

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static int count_files(const char *d)
{
    DIR *dp = opendir(d);
    int n = 0;
    struct dirent *de;
    while (dp && (de = readdir(dp)))
        n += de->d_name[0] != '.';
    if (dp)
        closedir(dp);
    return n;
}

/* The q4_k_m plan, tensor by tensor, as llama.cpp's llama-quantize
 * assigns it (24 layers: more bits in 0-2, 21-23 and 5, 8, ..., 20). */
static void check_q4_k_m_plan(void)
{
    const eng_qtarget *t = eng_qtarget_find("Q4_K_M");
    CHECK(t && t->file_type == 15);
    if (!t)
        return;
    static const struct {
        const char *name;
        uint64_t ne0;
        int has_output, want;
    } cases[] = {
        {"output.weight", 1024, 1, SIMD_Q6_K},
        {"token_embd.weight", 1024, 1, SIMD_Q4_K},
        {"token_embd.weight", 1024, 0, SIMD_Q6_K},  /* tied: it is the output */
        {"token_embd.weight", 896, 0, SIMD_Q8_0},   /* q6_k does not fit: q8_0 */
        {"blk.0.attn_v.weight", 1024, 1, SIMD_Q6_K},
        {"blk.2.attn_v.weight", 1024, 1, SIMD_Q6_K},
        {"blk.3.attn_v.weight", 1024, 1, SIMD_Q4_K},
        {"blk.4.attn_v.weight", 1024, 1, SIMD_Q4_K},
        {"blk.5.attn_v.weight", 1024, 1, SIMD_Q6_K},
        {"blk.20.ffn_down.weight", 4864, 1, SIMD_Q6_K},
        {"blk.19.ffn_down.weight", 4864, 1, SIMD_Q4_K},
        {"blk.21.ffn_down.weight", 4864, 1, SIMD_Q6_K},
        {"blk.7.attn_q.weight", 1024, 1, SIMD_Q4_K},
        {"blk.7.attn_q.weight", 896, 1, SIMD_Q5_0},  /* rows of 896: q4_k -> q5_0 */
        {"blk.0.attn_v.weight", 896, 1, SIMD_Q8_0},  /* q6_k -> q8_0 */
        {"blk.7.attn_qkv.weight", 3072, 1, SIMD_Q5_K},
        {"blk.7.ffn_gate.weight", 1024, 1, SIMD_Q4_K},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t ne[2] = {cases[i].ne0, 64};
        int planned, fb;
        int got = eng_quant_plan(t, cases[i].name, 2, ne, SIMD_F32, 24, cases[i].has_output, &planned, &fb);
        CHECKF(got == cases[i].want, "q4_k_m %s [%llu]: %s, want %s", cases[i].name, (unsigned long long)cases[i].ne0,
               simd_type_name(got), simd_type_name(cases[i].want));
    }
}

/* The low-bit mixes, 24 layers. */
static void check_low_mix_plans(void)
{
    static const struct {
        const char *target, *name;
        uint64_t ne0;
        int want;
    } cases[] = {
        {"q2_k", "blk.3.attn_q.weight", 1024, SIMD_Q2_K},
        {"q2_k", "blk.3.attn_v.weight", 1024, SIMD_Q3_K},
        {"q2_k", "blk.3.attn_output.weight", 1024, SIMD_Q3_K},
        {"q2_k", "blk.3.ffn_down.weight", 4864, SIMD_Q3_K},
        {"q2_k", "output.weight", 1024, SIMD_Q6_K},
        {"q2_k", "blk.3.attn_q.weight", 896, SIMD_Q4_0}, /* rows of 896: q2_k -> q4_0 */
        {"q3_k_s", "blk.0.attn_v.weight", 1024, SIMD_Q3_K},
        {"q3_k_s", "blk.0.ffn_down.weight", 1024, SIMD_Q3_K},
        {"q3_k_m", "blk.1.attn_v.weight", 1024, SIMD_Q5_K},
        {"q3_k_m", "blk.2.attn_v.weight", 1024, SIMD_Q4_K},
        {"q3_k_m", "blk.0.ffn_down.weight", 4864, SIMD_Q5_K},
        {"q3_k_m", "blk.1.ffn_down.weight", 4864, SIMD_Q4_K},
        {"q3_k_m", "blk.9.attn_output.weight", 1024, SIMD_Q4_K},
        {"q3_k_m", "blk.9.ffn_gate.weight", 1024, SIMD_Q3_K},
        {"q3_k_m", "blk.9.attn_q.weight", 896, SIMD_Q4_0},
        {"q3_k_l", "blk.9.attn_v.weight", 1024, SIMD_Q5_K},
        {"q3_k_l", "blk.9.ffn_down.weight", 1024, SIMD_Q5_K},
        {"q3_k_l", "blk.9.attn_qkv.weight", 3072, SIMD_Q4_K},
        {"q3_k_l", "blk.9.ffn_up.weight", 1024, SIMD_Q3_K},
        {"iq4_xs", "blk.2.ffn_down.weight", 4864, SIMD_Q5_K},
        {"iq4_xs", "blk.3.ffn_down.weight", 4864, SIMD_IQ4_XS},
        {"iq4_xs", "blk.3.attn_q.weight", 896, SIMD_IQ4_NL}, /* iq4_xs -> iq4_nl */
        {"iq4_xs", "output.weight", 1024, SIMD_Q6_K},
        {"iq4_nl", "blk.3.attn_q.weight", 896, SIMD_IQ4_NL},
        {"iq4_nl", "blk.0.ffn_down.weight", 4864, SIMD_Q5_K},
        /* the i-quant mixes (llama.cpp's rules with an importance matrix) */
        {"iq2_xxs", "blk.3.attn_q.weight", 1024, SIMD_IQ2_XXS},
        {"iq2_xxs", "blk.3.attn_v.weight", 1024, SIMD_Q2_K},
        {"iq2_xxs", "blk.2.ffn_down.weight", 4864, SIMD_Q2_K},
        {"iq2_xxs", "blk.3.ffn_down.weight", 4864, SIMD_IQ2_XXS},
        {"iq2_xxs", "blk.3.attn_output.weight", 1024, SIMD_IQ2_XXS},
        {"iq2_xxs", "token_embd.weight", 1024, SIMD_Q2_K},
        {"iq2_xxs", "output.weight", 1024, SIMD_Q5_K},
        {"iq2_xxs", "blk.3.attn_q.weight", 896, SIMD_IQ4_NL}, /* every i-quant -> iq4_nl */
        {"iq2_xxs", "blk.3.attn_q.weight", 48, SIMD_F16},     /* ... and f16 below 32 */
        {"iq2_xs", "blk.3.attn_v.weight", 1024, SIMD_Q2_K},
        {"iq2_xs", "blk.3.ffn_up.weight", 1024, SIMD_IQ2_XS},
        {"iq1_s", "blk.3.attn_output.weight", 1024, SIMD_IQ2_XXS},
        {"iq1_s", "blk.3.attn_k.weight", 1024, SIMD_IQ1_S},
        {"iq1_s", "token_embd.weight", 1024, SIMD_Q2_K},
        {"iq1_m", "blk.3.attn_output.weight", 1024, SIMD_IQ2_XXS},
        {"iq1_m", "blk.0.ffn_down.weight", 4864, SIMD_Q2_K},
        {"iq1_m", "blk.9.ffn_gate.weight", 1024, SIMD_IQ1_M},
        {"iq2_s", "blk.3.attn_v.weight", 1024, SIMD_IQ3_S},
        {"iq2_s", "blk.3.attn_output.weight", 1024, SIMD_IQ3_S},
        {"iq2_s", "blk.2.ffn_down.weight", 4864, SIMD_IQ3_S},
        {"iq2_s", "blk.3.ffn_down.weight", 4864, SIMD_IQ2_S},
        {"iq2_m", "token_embd.weight", 1024, SIMD_IQ3_S},
        {"iq2_m", "output.weight", 1024, SIMD_Q5_K},
        {"iq3_xxs", "blk.3.attn_q.weight", 1024, SIMD_IQ2_S},
        {"iq3_xxs", "blk.3.attn_k.weight", 1024, SIMD_IQ2_S},
        {"iq3_xxs", "blk.3.attn_v.weight", 1024, SIMD_IQ3_XXS},
        {"iq3_xxs", "blk.3.attn_output.weight", 1024, SIMD_IQ3_S},
        {"iq3_xxs", "blk.3.ffn_down.weight", 4864, SIMD_IQ3_XXS},
        {"iq3_xxs", "token_embd.weight", 1024, SIMD_IQ3_S},
        {"iq3_xxs", "output.weight", 1024, SIMD_Q5_K},
        {"iq3_s", "blk.0.attn_v.weight", 1024, SIMD_IQ3_S},
        {"iq3_s", "token_embd.weight", 1024, SIMD_IQ3_S},
        {"iq3_s", "output.weight", 1024, SIMD_Q6_K},
        {"iq3_xs", "blk.3.attn_q.weight", 1024, SIMD_IQ3_XXS},
        {"iq3_xs", "blk.3.ffn_gate.weight", 1024, SIMD_IQ3_XXS},
        {"iq3_xs", "blk.20.ffn_up.weight", 1024, SIMD_IQ3_XXS},
        {"iq3_xs", "blk.21.ffn_up.weight", 1024, SIMD_IQ3_S}, /* last eighth */
        {"iq3_xs", "blk.2.ffn_gate.weight", 1024, SIMD_IQ3_S}, /* first eighth */
        {"iq3_xs", "blk.3.attn_v.weight", 1024, SIMD_IQ3_S},
        {"iq3_m", "blk.3.attn_v.weight", 1024, SIMD_Q4_K},
        {"iq3_m", "blk.3.attn_output.weight", 1024, SIMD_Q4_K},
        {"iq3_m", "blk.3.attn_qkv.weight", 3072, SIMD_Q4_K},
        {"iq3_m", "blk.2.ffn_down.weight", 4864, SIMD_Q4_K},
        {"iq3_m", "blk.3.ffn_down.weight", 4864, SIMD_IQ3_S},
        {"iq3_m", "output.weight", 1024, SIMD_Q6_K},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const eng_qtarget *t = eng_qtarget_find(cases[i].target);
        CHECK(t != NULL);
        if (!t)
            continue;
        uint64_t ne[2] = {cases[i].ne0, 64};
        int planned, fb;
        int got = eng_quant_plan(t, cases[i].name, 2, ne, SIMD_F32, 24, 1, &planned, &fb);
        CHECKF(got == cases[i].want, "%s %s [%llu]: %s, want %s", cases[i].target, cases[i].name,
               (unsigned long long)cases[i].ne0, simd_type_name(got), simd_type_name(cases[i].want));
    }
    const struct { const char *name; uint32_t ft; } fts[] = {
        {"q2_k", 10},    {"q3_k_s", 11},  {"q3_k_m", 12}, {"q3_k_l", 13}, {"iq4_nl", 25}, {"iq4_xs", 30},
        {"iq2_xxs", 19}, {"iq2_xs", 20},  {"iq3_xs", 22}, {"iq3_xxs", 23}, {"iq1_s", 24}, {"iq3_s", 26},
        {"iq3_m", 27},   {"iq2_s", 29},   {"iq2_m", 29},  {"iq1_m", 31}};
    for (int ty = 0; ty < 40; ty++)
        CHECKF(eng_quant_needs_imatrix(ty) == (ty == SIMD_IQ2_XXS || ty == SIMD_IQ2_XS || ty == SIMD_IQ1_S ||
                                               ty == SIMD_IQ1_M),
               "needs_imatrix(%s)", simd_type_name(ty));
    for (size_t i = 0; i < sizeof fts / sizeof fts[0]; i++)
        CHECKF(eng_qtarget_find(fts[i].name) && eng_qtarget_find(fts[i].name)->file_type == fts[i].ft, "%s file type",
               fts[i].name);
}

int main(void)
{
    check_q4_k_m_plan();
    check_low_mix_plans();
    const char *assets = getenv("NIBBLE_ASSETS");
    char model[4096];
    snprintf(model, sizeof model, "%s/stories260K.gguf", assets ? assets : "assets");
    snprintf(dir, sizeof dir, "/tmp/nibble_test_quantize_%d", (int)getpid());
    mkdir(dir, 0700);
    eng_err e;

    /* f32 round trip: byte-identical tensors, every key kept */
    {
        eng_quant_opts o = {.target = eng_qtarget_find("F32")};
        CHECK(o.target != NULL);
        CHECK(eng_quantize_file(model, tmp("rt.gguf"), &o, NULL, &e) == 0);
        eng_gguf *a, *b;
        CHECK(eng_gguf_open(model, &a, &e) == 0);
        CHECK(eng_gguf_open(tmp("rt.gguf"), &b, &e) == 0);
        CHECK(eng_gguf_n_tensors(a) == eng_gguf_n_tensors(b));
        for (uint64_t i = 0; i < eng_gguf_n_tensors(a); i++) {
            const eng_gguf_tensor *x = eng_gguf_tensor_at(a, i), *y = eng_gguf_tensor_find(b, x->name);
            CHECK(y && y->type == x->type && y->size == x->size && !memcmp(x->data, y->data, (size_t)x->size));
        }
        for (uint64_t i = 0; i < eng_gguf_n_kv(a); i++) {
            const char *k = eng_gguf_kv_key(a, i);
            int64_t j = eng_gguf_find(b, k);
            CHECKF(j >= 0, "key %s lost", k);
            if (j >= 0 && strcmp(k, "general.alignment")) {
                char va[256], vb[256];
                eng_gguf_kv_format(a, i, va, sizeof va);
                eng_gguf_kv_format(b, (uint64_t)j, vb, sizeof vb);
                CHECKF(!strcmp(va, vb), "key %s: %s vs %s", k, va, vb);
            }
        }
        eng_gguf_close(a);
        eng_gguf_close(b);
    }

    /* every target on the embedded model (K types fall back there) and on
     * a synth model whose rows fit 256 */
    check_targets(model, "stories");
    eng_synth_opts so = {.type = SIMD_F32, .seed = 7};
    CHECK(eng_synth_write(eng_synth_find("tiny256"), &so, tmp("k.gguf"), &e) == 0);
    check_targets(tmp("k.gguf"), "tiny256");
    {
        eng_gguf *g;
        CHECK(eng_gguf_open(tmp("tiny256_q4_k_m.gguf"), &g, &e) == 0);
        CHECK(eng_gguf_tensor_find(g, "blk.0.attn_q.weight")->type == SIMD_Q4_K);
        CHECK(eng_gguf_tensor_find(g, "blk.1.attn_v.weight")->type == SIMD_Q6_K); /* last eighth */
        CHECK(eng_gguf_tensor_find(g, "blk.1.ffn_down.weight")->type == SIMD_Q6_K);
        CHECK(eng_gguf_tensor_find(g, "blk.0.ffn_down.weight")->type == SIMD_Q4_K);
        CHECK(eng_gguf_tensor_find(g, "output.weight")->type == SIMD_Q6_K);
        eng_gguf_close(g);
    }

    /* a Q4_K model runs, close to its dequantized f32 twin */
    {
        eng_quant_opts o = {.target = eng_qtarget_find("f32")};
        CHECK(eng_quantize_file(tmp("tiny256_q4_k.gguf"), tmp("twin.gguf"), &o, NULL, &e) != 0); /* refused */
        o.allow_requantize = 1;
        CHECK(eng_quantize_file(tmp("tiny256_q4_k.gguf"), tmp("twin.gguf"), &o, NULL, &e) == 0);
        int32_t ids[48];
        for (int i = 0; i < 48; i++)
            ids[i] = (int32_t)((i * 37 + 11) % 500);
        uint32_t nv = 0;
        float *lq = logits_of(tmp("tiny256_q4_k.gguf"), ids, 48, &nv), *lf = logits_of(tmp("twin.gguf"), ids, 48, &nv);
        CHECK(lq && lf);
        if (lq && lf) {
            double err = tu_rel_rms(lf, lq, (size_t)48 * nv);
            printf("q4_k vs its f32 twin: logits rel. RMS difference %.5f\n", err);
            CHECK(err < 0.03); /* activations are int8 per 256: small, not zero */
            CHECK(err > 0);
        }
        free(lq);
        free(lf);
    }

    /* bad input */
    {
        CHECK(eng_qtarget_find("q3_k_xl") == NULL && eng_qtarget_find("") == NULL && eng_qtarget_find(NULL) == NULL);
        CHECK(eng_qtarget_find("Q4_K_M") != NULL);
        eng_quant_opts o = {.target = eng_qtarget_find("q4_0")};
        CHECK(eng_quantize_file(tmp("stories_q8_0.gguf"), tmp("re.gguf"), &o, NULL, &e) == ENG_EINVAL);
        CHECK(strstr(e.msg, "already quantized") && strstr(e.msg, "--allow-requantize"));
        CHECK(!file_exists(tmp("re.gguf")));
        char sub[512];
        snprintf(sub, sizeof sub, "%s/ro", dir);
        mkdir(sub, 0500);
        char out[600];
        snprintf(out, sizeof out, "%s/out.gguf", sub);
        if (geteuid() != 0) { /* root writes anywhere */
            CHECK(eng_quantize_file(model, out, &o, NULL, &e) == ENG_EIO);
            CHECK(count_files(sub) == 0);
        }
        snprintf(out, sizeof out, "%s/no/such/dir/out.gguf", dir);
        CHECK(eng_quantize_file(model, out, &o, NULL, &e) == ENG_EIO);
        CHECK(strstr(e.msg, "cannot write") != NULL);
        CHECK(eng_quantize_file(tmp("missing.gguf"), tmp("x.gguf"), &o, NULL, &e) != 0);
        CHECK(!file_exists(tmp("x.gguf")));
        rmdir(sub);
    }

    /* the command line: usage errors and messages */
    const char *bin = getenv("NIBBLE_BIN");
    if (bin && *bin) {
        char cmd[10000];
        snprintf(cmd, sizeof cmd, "%s quantize %s %s q9_9 2>%s", bin, model, tmp("c.gguf"), tmp("err.txt"));
        int st = system(cmd);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
        char *msg = tu_read(tmp("err.txt"), NULL);
        CHECK(msg && strstr(msg, "unknown type 'q9_9'") && strstr(msg, "q4_k_m"));
        free(msg);
        snprintf(cmd, sizeof cmd, "%s quantize %s %s q4_0 -q 2>%s", bin, tmp("stories_q4_0.gguf"), tmp("c.gguf"),
                 tmp("err.txt"));
        st = system(cmd);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1 && !file_exists(tmp("c.gguf")));
        snprintf(cmd, sizeof cmd, "%s quantize %s %s q4_0 -q --allow-requantize 2>%s", bin, tmp("stories_q4_0.gguf"),
                 tmp("c.gguf"), tmp("err.txt"));
        st = system(cmd);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && file_exists(tmp("c.gguf")));
        msg = tu_read(tmp("err.txt"), NULL);
        CHECK(msg && strstr(msg, "requantizing"));
        free(msg);
        snprintf(cmd, sizeof cmd, "printf 'Once' > %s && %s quantize %s %s q4_0 -q --awq %s 2>%s", tmp("short.txt"),
                 bin, model, tmp("d.gguf"), tmp("short.txt"), tmp("err.txt"));
        st = system(cmd);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1 && !file_exists(tmp("d.gguf")));
        msg = tu_read(tmp("err.txt"), NULL);
        CHECK(msg && strstr(msg, "calibration text has"));
        free(msg);
        /* export-ollama: the GGUF copied, a Modelfile in Ollama's syntax */
        snprintf(cmd, sizeof cmd, "%s export-ollama %s %s --template chatml --name story >/dev/null", bin, model,
                 tmp("ollama"));
        st = system(cmd);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        msg = tu_read(tmp("ollama/Modelfile"), NULL);
        CHECK(msg && strstr(msg, "FROM ./story.gguf") && strstr(msg, "TEMPLATE \"\"\"") &&
              strstr(msg, "{{ .Content }}<|im_end|>") && strstr(msg, "PARAMETER stop \"<|im_end|>\"") &&
              strstr(msg, "PARAMETER temperature"));
        free(msg);
        size_t la = 0, lb = 0;
        char *fa = tu_read(model, &la), *fb = tu_read(tmp("ollama/story.gguf"), &lb);
        CHECK(fa && fb && la == lb && !memcmp(fa, fb, la));
        free(fa);
        free(fb);
        snprintf(cmd, sizeof cmd, "%s export-ollama %s %s >/dev/null", bin, model, tmp("ollama2"));
        st = system(cmd);
        msg = tu_read(tmp("ollama2/Modelfile"), NULL);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && msg && strstr(msg, "TEMPLATE \"\"\"{{ .Prompt }}\"\"\""));
        free(msg);
        snprintf(cmd, sizeof cmd, "%s ppl -m %s -f %s 2>%s", bin, model, tmp("short.txt"), tmp("err.txt"));
        st = system(cmd);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
        msg = tu_read(tmp("err.txt"), NULL);
        CHECK(msg && strstr(msg, "one window of"));
        free(msg);
    }

    snprintf(model, sizeof model, "rm -rf %s", dir);
    if (!tu_failures && system(model) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return tu_result("test_quantize");
}
