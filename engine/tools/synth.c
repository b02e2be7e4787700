#include "synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "quantize.h"
#include "simd.h"

static const eng_synth_shape shapes[] = {
    {"stories", "llama", 64, 5, 8, 4, 172, 512, 8, 2048, 10000.0f, 1, "the embedded stories260K model's shape", 0, 0, 0, 0, 0.0f, 0},
    {"smol135", "llama", 576, 30, 9, 3, 1536, 49152, 64, 2048, 10000.0f, 1, "SmolLM2-135M", 0, 0, 0, 0, 0.0f, 0},
    {"qwen05", "qwen2", 896, 24, 14, 2, 4864, 151936, 64, 4096, 1000000.0f, 1, "Qwen2.5-0.5B", 0, 0, 0, 0, 0.0f, 0},
    {"llama1b", "llama", 2048, 16, 32, 8, 8192, 128256, 64, 4096, 500000.0f, 1, "Llama-3.2-1B", 0, 0, 0, 0, 0.0f, 0},
    {"qwen3-06", "qwen3", 1024, 28, 16, 8, 3072, 151936, 128, 4096, 1000000.0f, 1, "Qwen3-0.6B", 0, 0, 0, 0, 0.0f, 0},
    {"phi3-mini", "phi3", 3072, 32, 32, 32, 8192, 32064, 96, 4096, 10000.0f, 0, "Phi-3-mini-4k", 0, 0, 0, 0, 0.0f, 0},
    {"gpt2", "gpt2", 768, 12, 12, 12, 3072, 50257, 64, 1024, 0.0f, 1, "GPT-2 124M", 0, 0, 0, 0, 0.0f, 0},
    {"tiny", "llama", 128, 2, 4, 2, 256, 384, 32, 512, 10000.0f, 0, "a tiny model for cross-checks", 0, 0, 0, 0, 0.0f, 0},
    {"tiny256", "llama", 256, 2, 4, 2, 512, 512, 64, 512, 10000.0f, 0, "a tiny model whose rows fit K-quant blocks", 0, 0, 0, 0, 0.0f, 0},
    {"qwen3-30b-a3b", "qwen3moe", 2048, 48, 32, 4, 6144, 151936, 128, 40960, 1000000.0f, 0, "Qwen3-30B-A3B",
     128, 8, 768, 0, 0.0f, 0},
    {"gpt-oss-20b", "gpt-oss", 2880, 24, 64, 8, 2880, 201088, 64, 131072, 150000.0f, 0, "gpt-oss-20b",
     32, 4, 2880, 128, 32.0f, 4096},
    {"tiny-moe", "qwen3moe", 128, 2, 4, 2, 256, 384, 32, 512, 1000000.0f, 0, "a tiny qwen3moe: 8 experts, 2 a token",
     8, 2, 64, 0, 0.0f, 0},
    {"tiny-oss", "gpt-oss", 128, 4, 4, 2, 128, 384, 32, 512, 150000.0f, 0,
     "a tiny gpt-oss: 8 experts, 2 a token, window 8", 8, 2, 96, 8, 32.0f, 4096},
    {"gemma2-2b", "gemma2", 2304, 26, 8, 4, 9216, 256000, 256, 8192, 10000.0f, 1, "Gemma-2-2B", 0, 0, 0, 4096, 0.0f, 0},
    {"gemma3-1b", "gemma3", 1152, 26, 4, 1, 6912, 262144, 256, 32768, 1000000.0f, 1, "Gemma-3-1B", 0, 0, 0, 512, 0.0f, 0},
    {"gemma3-270m", "gemma3", 640, 18, 4, 1, 2048, 262144, 256, 32768, 1000000.0f, 1, "Gemma-3-270M",
     0, 0, 0, 512, 0.0f, 0},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, NULL, 0, 0, 0, 0, 0.0f, 0},
};

const eng_synth_shape *eng_synth_shapes(void) { return shapes; }

const eng_synth_shape *eng_synth_find(const char *name)
{
    for (const eng_synth_shape *s = shapes; s->name; s++)
        if (!strcmp(s->name, name))
            return s;
    return NULL;
}

/* ---- seeded normal numbers ---- */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t next64(rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* An approximately normal number: the sum of four uniforms, rescaled
 * (cheap, and the exact distribution does not matter here). */
static float gauss(rng *r)
{
    float s = 0;
    for (int i = 0; i < 4; i++)
        s += (float)(next64(r) >> 40) * (1.0f / 16777216.0f);
    return (s - 2.0f) * 1.7320508f;
}

/* ---- building the file ---- */

typedef struct builder {
    eng_gguf_writer *w;
    void **bufs;
    size_t n_bufs;
    rng r;
    int type;
    int failed;
    const eng_qtarget *mix; /* or NULL */
    uint32_t n_layers;
    int has_output;
    int moe;                /* a mixture of experts: mxfp4 only for the experts */
} builder;

static void *keep(builder *b, size_t n)
{
    void *p = malloc(n ? n : 1);
    void **nb = p ? realloc(b->bufs, (b->n_bufs + 1) * sizeof *nb) : NULL;
    if (!nb) {
        free(p);
        b->failed = 1;
        return NULL;
    }
    b->bufs = nb;
    b->bufs[b->n_bufs++] = p;
    return p;
}

/* A tensor of rows x cols with values std * N(0,1) + mean, stored as type
 * (or f16 where rows do not fit type's blocks; q8_0 for the embedding and
 * output of mxfp4 files); vectors are always f32. */
static void tensor_nd(builder *b, const char *name, uint32_t cols, uint32_t rows, uint32_t n, float std, float mean,
                      int is_vec)
{
    if (b->failed)
        return;
    uint32_t n_dims = is_vec ? (rows > 1 ? 2 : 1) : n > 1 ? 3 : 2;
    uint64_t ne[3] = {cols, rows, n};
    int type = is_vec ? SIMD_F32 : b->type;
    if (!is_vec && b->mix) {
        int planned, fallback;
        type = eng_quant_plan(b->mix, name, n_dims, ne, SIMD_F32, b->n_layers, b->has_output, &planned, &fallback);
    }
    if (type == SIMD_MXFP4 && b->moe && !strstr(name, "_exps."))
        type = SIMD_Q8_0;
    if (strstr(name, "ffn_gate_inp."))
        type = SIMD_F32;
    /* mxfp4 files keep the embedding and the output at 8 bits, as
     * llama.cpp's gpt-oss files keep everything but the expert matrices
     * out of MXFP4: these two see every token and every logit */
    if (type == SIMD_MXFP4 && (!strcmp(name, "token_embd.weight") || !strcmp(name, "output.weight")))
        type = SIMD_Q8_0;
    const simd_traits *tr = simd_type_traits(type);
    if (!tr || !tr->quant || cols % tr->block) {
        type = SIMD_F16;
        tr = simd_type_traits(type);
    }
    size_t rb = simd_row_bytes(type, cols), all = (size_t)rows * n;
    char *data = keep(b, rb * all);
    float *row = malloc(cols * sizeof *row);
    if (!data || !row) {
        free(row);
        b->failed = 1;
        return;
    }
    for (size_t i = 0; i < all; i++) {
        for (uint32_t j = 0; j < cols; j++)
            row[j] = std * gauss(&b->r) + mean;
        tr->quant(row, data + i * rb, cols);
    }
    free(row);
    if (eng_gguf_writer_tensor(b->w, name, type, n_dims, ne, data))
        b->failed = 1;
}

static void tensor(builder *b, const char *name, uint32_t cols, uint32_t rows, float std, float mean, int is_vec)
{
    tensor_nd(b, name, cols, is_vec ? 1 : rows, 1, std, mean, is_vec);
}

static void mat(builder *b, const char *name, uint32_t cols, uint32_t rows)
{
    /* std 1/sqrt(cols) keeps activations of order 1 through every layer */
    tensor(b, name, cols, rows, 1.0f / sqrtf((float)cols), 0.0f, 0);
}

static void vec(builder *b, const char *name, uint32_t n, float mean, float std)
{
    tensor(b, name, n, 1, std, mean, 1);
}

/* n experts' matrices of rows x cols, one 3-D tensor. */
static void experts(builder *b, const char *name, uint32_t cols, uint32_t rows, uint32_t n)
{
    tensor_nd(b, name, cols, rows, n, 1.0f / sqrtf((float)cols), 0.0f, 0);
}

/* A rows x len table of f32 (the experts' biases). */
static void table(builder *b, const char *name, uint32_t len, uint32_t rows, float std)
{
    tensor_nd(b, name, len, rows, 1, std, 0.0f, 1);
}

/* A SentencePiece-style vocabulary: <unk> <s> </s>, the 256 byte tokens,
 * then made-up pieces, so that llama.cpp accepts the file. */
static void vocab(builder *b, uint32_t n)
{
    char **tok = calloc(n, sizeof *tok);
    float *score = malloc(n * sizeof *score);
    int32_t *type = malloc(n * sizeof *type);
    if (!tok || !score || !type) {
        b->failed = 1;
        free(tok);
        free(score);
        free(type);
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        char buf[32];
        if (i == 0) snprintf(buf, sizeof buf, "<unk>");
        else if (i == 1) snprintf(buf, sizeof buf, "<s>");
        else if (i == 2) snprintf(buf, sizeof buf, "</s>");
        else if (i < 259) snprintf(buf, sizeof buf, "<0x%02X>", i - 3);
        else snprintf(buf, sizeof buf, "\xe2\x96\x81w%u", i - 259); /* "▁w<i>" */
        tok[i] = strdup(buf);
        if (!tok[i])
            b->failed = 1;
        score[i] = i < 259 ? 0.0f : -(float)(i - 259);
        type[i] = i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1;
    }
    if (!b->failed) {
        eng_gguf_writer_str(b->w, "tokenizer.ggml.model", "llama");
        eng_gguf_writer_arr_str(b->w, "tokenizer.ggml.tokens", (const char *const *)tok, n);
        eng_gguf_writer_arr(b->w, "tokenizer.ggml.scores", GGUF_F32, score, n);
        eng_gguf_writer_arr(b->w, "tokenizer.ggml.token_type", GGUF_I32, type, n);
        eng_gguf_writer_u32(b->w, "tokenizer.ggml.bos_token_id", 1);
        eng_gguf_writer_u32(b->w, "tokenizer.ggml.eos_token_id", 2);
        eng_gguf_writer_u32(b->w, "tokenizer.ggml.unknown_token_id", 0);
        eng_gguf_writer_bool(b->w, "tokenizer.ggml.add_bos_token", 1);
    }
    for (uint32_t i = 0; i < n; i++)
        free(tok[i]);
    free(tok);
    free(score);
    free(type);
}

int eng_synth_write(const eng_synth_shape *s, const eng_synth_opts *o, const char *path, eng_err *e)
{
    const char *arch = o->arch ? o->arch : s->arch;
    /* gemma2 always ties its output to the embeddings (llama.cpp loads no
     * output.weight for it and refuses a file that has one) */
    int tied = s->tied || !strcmp(arch, "gemma2");
    const char *known[] = {"llama", "qwen2", "qwen3", "phi3", "gpt2", "gemma2", "gemma3"};
    int ok = 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        ok |= !strcmp(arch, known[i]);
    if (s->n_expert) {
        /* the experts' tensors belong to the shape's own family */
        if (strcmp(arch, s->arch))
            return eng_errf(e, ENG_EINVAL, "shape '%s' is a mixture of experts of architecture %s only", s->name,
                            s->arch);
        ok = 1;
    }
    if (!ok)
        return eng_errf(e, ENG_EINVAL, "unknown architecture '%s' (llama, qwen2, qwen3, phi3, gpt2, gemma2, gemma3)", arch);
    uint32_t n_layers = o->n_layers ? o->n_layers : s->n_layers;
    if (n_layers > 1024)
        return eng_errf(e, ENG_EINVAL, "%u layers: at most 1024", n_layers);
    const simd_traits *tr = simd_type_traits(o->type);
    if (!tr || !tr->quant)
        return eng_errf(e, ENG_EINVAL, "cannot write weights of type %s", simd_type_name(o->type));
    builder b = {eng_gguf_writer_new(), NULL, 0, {o->seed * 0x2545f4914f6cdd1dull + 1}, o->type, 0, o->mix,
                 n_layers, !tied, s->n_expert != 0};
    if (!b.w)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    int gpt2 = !strcmp(arch, "gpt2"), qwen2 = !strcmp(arch, "qwen2"), qwen3 = !strcmp(arch, "qwen3");
    int phi3 = !strcmp(arch, "phi3"), oss = !strcmp(arch, "gpt-oss"), gemma3 = !strcmp(arch, "gemma3");
    int gemma2 = !strcmp(arch, "gemma2"), gemma = gemma2 || gemma3;
    qwen3 |= !strcmp(arch, "qwen3moe"); /* q/k norms */
    uint32_t hd = s->head_dim, nq = s->n_heads * hd, nkv = s->n_kv_heads * hd, dim = s->dim;
    char key[128];
#define KEY(k) (snprintf(key, sizeof key, "%s." k, arch), key)
    eng_gguf_writer_str(b.w, "general.architecture", arch);
    if (o->n_layers)
        snprintf(key, sizeof key, "synth-%s-%uL-%s", s->name, n_layers, o->mix ? o->mix->name : tr->name);
    else
        snprintf(key, sizeof key, "synth-%s-%s", s->name, o->mix ? o->mix->name : tr->name);
    eng_gguf_writer_str(b.w, "general.name", key);
    if (o->mix)
        eng_gguf_writer_u32(b.w, "general.file_type", o->mix->file_type);
    eng_gguf_writer_u32(b.w, KEY("context_length"), s->ctx);
    eng_gguf_writer_u32(b.w, KEY("embedding_length"), dim);
    eng_gguf_writer_u32(b.w, KEY("block_count"), n_layers);
    eng_gguf_writer_u32(b.w, KEY("feed_forward_length"), s->ffn);
    eng_gguf_writer_u32(b.w, KEY("attention.head_count"), s->n_heads);
    eng_gguf_writer_u32(b.w, KEY("attention.head_count_kv"), s->n_kv_heads);
    if (hd * s->n_heads != dim) {
        eng_gguf_writer_u32(b.w, KEY("attention.key_length"), hd);
        eng_gguf_writer_u32(b.w, KEY("attention.value_length"), hd);
    }
    if (gpt2) {
        eng_gguf_writer_f32(b.w, KEY("attention.layer_norm_epsilon"), 1e-5f);
    } else {
        eng_gguf_writer_f32(b.w, KEY("attention.layer_norm_rms_epsilon"), gemma ? 1e-6f : 1e-5f);
        eng_gguf_writer_u32(b.w, KEY("rope.dimension_count"), hd);
        eng_gguf_writer_f32(b.w, KEY("rope.freq_base"), s->rope_base);
    }
    if (s->n_expert) {
        eng_gguf_writer_u32(b.w, KEY("expert_count"), s->n_expert);
        eng_gguf_writer_u32(b.w, KEY("expert_used_count"), s->n_expert_used);
        eng_gguf_writer_u32(b.w, KEY("expert_feed_forward_length"), s->expert_ffn);
    }
    if (s->window && !gemma)
        eng_gguf_writer_u32(b.w, KEY("attention.sliding_window"), s->window);
    if (s->yarn > 0) {
        eng_gguf_writer_str(b.w, KEY("rope.scaling.type"), "yarn");
        eng_gguf_writer_f32(b.w, KEY("rope.scaling.factor"), s->yarn);
        eng_gguf_writer_u32(b.w, KEY("rope.scaling.original_context_length"), s->yarn_ctx);
    }
    if (gemma3) {
        /* Gemma 3's local layers: a window, a period of 6 (5 local, 1
         * global), base 10000 for the local layers' RoPE */
        eng_gguf_writer_u32(b.w, KEY("attention.sliding_window"), s->window ? s->window : 16);
        eng_gguf_writer_u32(b.w, KEY("attention.sliding_window_pattern"), s->window || n_layers >= 6 ? 6 : 2);
        eng_gguf_writer_f32(b.w, KEY("rope.freq_base_swa"), 10000.0f);
    }
    if (gemma2) {
        /* Gemma 2: every other layer local (the even ones; no pattern key,
         * as its converter writes none), its two soft-caps as Google's
         * configs set them */
        eng_gguf_writer_u32(b.w, KEY("attention.sliding_window"), s->window ? s->window : 16);
        eng_gguf_writer_f32(b.w, KEY("attn_logit_softcapping"), 50.0f);
        eng_gguf_writer_f32(b.w, KEY("final_logit_softcapping"), 30.0f);
    }
    eng_gguf_writer_u32(b.w, "nibble.synth.seed", (uint32_t)o->seed);
    vocab(&b, s->n_vocab);
    /* embeddings of std 1 so that logits spread and greedy choices are
     * clear, not ties decided by rounding; gemma3 scales its embeddings
     * by sqrt(dim) on the way in, so its rows are that much smaller and,
     * tied, the final norm's weights sqrt(dim) larger, for logits spread
     * as widely as the other families' */
    tensor(&b, "token_embd.weight", dim, s->n_vocab, gemma ? 1.0f / sqrtf((float)dim) : 1.0f, 0.0f, 0);
    if (gpt2)
        tensor(&b, "position_embd.weight", dim, s->ctx, 0.3f, 0.0f, 0);
    int small_out = gemma && tied;
    float out_g = small_out ? sqrtf((float)dim) : 1.0f;
    vec(&b, "output_norm.weight", dim, out_g, 0.1f * out_g);
    if (gpt2)
        vec(&b, "output_norm.bias", dim, 0.0f, 0.1f);
    if (!tied)
        tensor(&b, "output.weight", dim, s->n_vocab, 3.0f / sqrtf((float)dim), 0.0f, 0);
    for (uint32_t l = 0; l < n_layers && !b.failed; l++) {
        char n[96];
#define NAME(x) (snprintf(n, sizeof n, "blk.%u." x, l), n)
        vec(&b, NAME("attn_norm.weight"), dim, 1.0f, 0.1f);
        vec(&b, oss ? NAME("post_attention_norm.weight") : NAME("ffn_norm.weight"), dim, 1.0f, 0.1f);
        if (gpt2) {
            vec(&b, NAME("attn_norm.bias"), dim, 0.0f, 0.1f);
            vec(&b, NAME("ffn_norm.bias"), dim, 0.0f, 0.1f);
        }
        if (gpt2 || phi3) {
            mat(&b, NAME("attn_qkv.weight"), dim, nq + 2 * nkv);
            if (gpt2)
                vec(&b, NAME("attn_qkv.bias"), nq + 2 * nkv, 0.0f, 0.1f);
        } else {
            mat(&b, NAME("attn_q.weight"), dim, nq);
            mat(&b, NAME("attn_k.weight"), dim, nkv);
            mat(&b, NAME("attn_v.weight"), dim, nkv);
            if (qwen2 || oss) {
                vec(&b, NAME("attn_q.bias"), nq, 0.0f, 0.1f);
                vec(&b, NAME("attn_k.bias"), nkv, 0.0f, 0.1f);
                vec(&b, NAME("attn_v.bias"), nkv, 0.0f, 0.1f);
            }
        }
        if (qwen3 || gemma3) {
            vec(&b, NAME("attn_q_norm.weight"), hd, 1.0f, 0.1f);
            vec(&b, NAME("attn_k_norm.weight"), hd, 1.0f, 0.1f);
        }
        mat(&b, NAME("attn_output.weight"), nq, dim);
        if (gemma) {
            vec(&b, NAME("post_attention_norm.weight"), dim, 1.0f, 0.1f);
            vec(&b, NAME("post_ffw_norm.weight"), dim, 1.0f, 0.1f);
        }
        if (gpt2 || oss)
            vec(&b, NAME("attn_output.bias"), dim, 0.0f, 0.1f);
        if (oss) /* sink logits of the order of the scores, so that they matter */
            vec(&b, NAME("attn_sinks.weight"), s->n_heads, 0.0f, 1.0f);
        if (s->n_expert) {
            uint32_t ne = s->n_expert, ff = s->expert_ffn;
            /* a router of std 1 per logit, so that tokens pick different experts */
            tensor(&b, NAME("ffn_gate_inp.weight"), dim, ne, 1.0f / sqrtf((float)dim) * 2.0f, 0.0f, 0);
            experts(&b, NAME("ffn_gate_exps.weight"), dim, ff, ne);
            experts(&b, NAME("ffn_up_exps.weight"), dim, ff, ne);
            experts(&b, NAME("ffn_down_exps.weight"), ff, dim, ne);
            if (oss) {
                vec(&b, NAME("ffn_gate_inp.bias"), ne, 0.0f, 0.3f);
                table(&b, NAME("ffn_gate_exps.bias"), ff, ne, 0.1f);
                table(&b, NAME("ffn_up_exps.bias"), ff, ne, 0.1f);
                table(&b, NAME("ffn_down_exps.bias"), dim, ne, 0.1f);
            }
        } else if (gpt2) {
            mat(&b, NAME("ffn_up.weight"), dim, s->ffn);
            vec(&b, NAME("ffn_up.bias"), s->ffn, 0.0f, 0.1f);
        } else if (phi3) {
            mat(&b, NAME("ffn_up.weight"), dim, 2 * s->ffn);
        } else {
            mat(&b, NAME("ffn_gate.weight"), dim, s->ffn);
            mat(&b, NAME("ffn_up.weight"), dim, s->ffn);
        }
        if (!s->n_expert)
            mat(&b, NAME("ffn_down.weight"), s->ffn, dim);
        if (gpt2)
            vec(&b, NAME("ffn_down.bias"), dim, 0.0f, 0.1f);
#undef NAME
        if (o->verbose)
            fprintf(stderr, "\rsynth: layer %u/%u", l + 1, n_layers);
    }
#undef KEY
    if (o->verbose)
        fprintf(stderr, "\n");
    int r = b.failed ? eng_errf(e, ENG_ENOMEM, "out of memory building the model") : eng_gguf_writer_save(b.w, path, e);
    eng_gguf_writer_free(b.w);
    for (size_t i = 0; i < b.n_bufs; i++)
        free(b.bufs[i]);
    free(b.bufs);
    return r;
}
