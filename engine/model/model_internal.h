/* Private to engine/model: the model struct (what the loader fills and
 * the forward pass reads: the layout of model_layout.h plus the buffers
 * converted at load and the packing state), shared by model.c, forward.c
 * and wpack.c. */
#ifndef NIBBLE_ENG_MODEL_INTERNAL_H
#define NIBBLE_ENG_MODEL_INTERNAL_H

#include "model.h"
#include "model_layout.h"
#include "simd.h"

struct eng_model {
    eng_gguf *gguf;
    eng_model_info info;
    enum eng_norm norm;
    enum eng_ffn ffn_kind;
    eng_tok *tok;
    eng_weight tok_embd;   /* n_vocab rows of dim; rows are dequantized on lookup */
    eng_weight pos_embd;   /* ctx_train rows of dim (gpt2), else data NULL */
    eng_weight output;     /* n_vocab rows of dim */
    const float *out_norm, *out_norm_b; /* dim */
    const float *rope_freqs; /* rope_dims/2 frequency divisors (Llama 3), or NULL */
    /* YaRN (info.rope_yarn > 0): the training context the ramp is measured
     * against, and the extra factor on cos/sin (rope.scaling.attn_factor) */
    uint32_t yarn_orig_ctx;
    float rope_attn_factor;
    enum eng_moe_gating gating; /* mixture of experts: how the router's logits weigh the experts */
    int moe_norm;               /* ENG_MOE_SOFTMAX: divide the top k weights by their sum */
    uint8_t *swa;               /* [n_layers] 1: the layer has the sliding window (gpt-oss, gemma3), or NULL */
    /* the family's hooks in the one forward pass (1, 0 or NULL: none) */
    float embd_scale;      /* token embeddings times this (gemma3: sqrt(dim)) */
    float attn_scale;      /* attention scores times this (1/sqrt(head_dim) unless the family says) */
    float logit_softcap;   /* logits c * tanh(logit / c), or 0 */
    float attn_softcap;    /* attention scores c * tanh(score / c), or 0 (gemma2) */
    int rope_local;        /* windowed layers rotate with rope_base_local, unscaled (gemma3) */
    float rope_base_local;
    eng_layer *layers;
    uint32_t max_q, max_kv, max_ffn; /* widest layer: n_heads*hd, n_kv*hd, ffn */
    void **owned;          /* buffers converted at load */
    size_t n_owned;
    int load_quant;        /* eng_model_opts.quantize_type (0: none) */
    void (*progress)(void *user, double fraction); /* eng_model_opts.progress */
    void *progress_user;
    uint32_t n_load_quant; /* matrices converted by it */
    struct eng_packer *packer; /* the packed copies and their thread (wpack.c) */
    int no_pack;               /* eng_model_opts.no_pack */
};

/* Pack every matrix the active kernel set reads faster packed (engine/
 * wpack.c): on a background thread, or before returning if background is
 * 0. Only fails for lack of memory (then nothing is packed). */
int eng_model_pack_start(eng_model *m, int background, eng_err *e);
/* Stop the packing thread and free the copies (eng_model_close). */
void eng_model_pack_free(eng_model *m);

#endif
