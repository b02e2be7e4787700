/* The loaded model's layout, for tools that work on its weights (AWQ,
 * later pruning): the weight matrices of each layer as the forward pass
 * uses them, and a hook that sees every matmul's input. Only targets
 * that link nibble_model_layout (engine/tools) can include it: running a
 * model (engine/chat, ui/) never needs it. The rest of the model (its
 * packing thread, the buffers it owns) stays private to engine/model. */
#ifndef NIBBLE_ENG_MODEL_LAYOUT_H
#define NIBBLE_ENG_MODEL_LAYOUT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* A weight matrix of rows x cols (cols = the GGUF ne[0]), used in place
 * from the mapping. A fused tensor (phi3's qkv, gpt2's qkv, phi3's
 * gate+up) is seen as several weights over row ranges of one tensor.
 * Row r is the row_bytes at data + r * row_bytes, in type (enum
 * simd_type); tools read those five fields only. */
typedef struct eng_weight {
    const void *data;
    int type;
    uint32_t rows, cols;
    size_t row_bytes;
    /* engine/model's own: */
    int act; /* enum simd_act: activation format its dot kernel takes */
    /* rows 0 .. packed_rows-1 (a multiple of SIMD_PACK_ROWS) again in the
     * packed form (simd.h), for sets with a dot_packed kernel (packed
     * NULL when the weight is not packed). data stays valid for every
     * row. Read packed_rows with acquire order (engine/model/wpack.c). */
    const void *packed;
    _Atomic uint32_t packed_rows; /* grows while a background thread packs */
} eng_weight;

enum eng_norm { ENG_NORM_RMS, ENG_NORM_LAYER };
enum eng_ffn {
    ENG_FFN_SWIGLU,
    ENG_FFN_GELU,
    /* gpt-oss's experts: gate g clamped above at 7, up u to [-7, 7], then
     * g * sigmoid(1.702 g) * (u + 1) */
    ENG_FFN_SWIGLU_OAI,
    /* gelu(gate) * up, GELU's tanh form (gemma3) */
    ENG_FFN_GEGLU,
};

/* How a mixture-of-experts layer turns its router's logits into the
 * weights of the experts it runs (llama.cpp's gating functions). */
enum eng_moe_gating {
    /* softmax over all experts, the top k of those probabilities, then
     * (if the model says so) divided by their sum (qwen3moe) */
    ENG_MOE_SOFTMAX,
    /* the top k logits, then a softmax over those k only (gpt-oss) */
    ENG_MOE_TOPK_SOFTMAX,
};

/* The experts of one layer: three 3-D tensors seen as 2-D weights whose
 * rows are the experts' rows one expert after another (expert e's gate
 * rows are e*ffn .. e*ffn+ffn-1; its down rows e*dim .. e*dim+dim-1),
 * used in place in the file's type (MXFP4 stays MXFP4). */
typedef struct eng_experts {
    uint32_t n, used, ffn;          /* experts, experts a token runs, rows of one expert's gate/up */
    eng_weight router;              /* n rows of dim (ffn_gate_inp) */
    const float *router_b;          /* n, or NULL (gpt-oss) */
    eng_weight gate, up, down;      /* n*ffn rows of dim; n*dim rows of ffn */
    const float *b_gate, *b_up;     /* [n][ffn], or NULL (gpt-oss) */
    const float *b_down;            /* [n][dim], or NULL */
} eng_experts;

typedef struct eng_layer {
    uint32_t n_heads, n_kv_heads, ffn; /* may differ per layer (pruned models) */
    const float *attn_norm, *attn_norm_b, *ffn_norm, *ffn_norm_b; /* dim */
    const float *q_norm, *k_norm;      /* head_dim, per-head RMSNorm (qwen3, gemma3) */
    /* dim, RMSNorm of the attention's and the FFN's output before each
     * joins the residual (gemma3), or NULL */
    const float *attn_post_norm, *ffn_post_norm;
    const float *bq, *bk, *bv, *bo;    /* optional biases */
    const float *b_up, *b_down;        /* optional FFN biases (gpt2) */
    eng_weight wq, wk, wv, wo;
    eng_weight w_gate, w_up, w_down;   /* w_gate unused for GELU; all empty with experts */
    eng_experts moe;                   /* moe.n == 0: a dense FFN */
    const float *sinks;                /* n_heads attention sink logits (gpt-oss), or NULL */
    /* sliding window: a query sees the last `window` positions, and the
     * KV cache keeps only those and a batch (0: all) */
    uint32_t window;
} eng_layer;

/* Layer l (< info n_layers), borrowed from the model (valid until
 * eng_model_close); an observer compares its weights by address. */
const eng_layer *eng_model_layer(const eng_model *m, uint32_t l);
/* The family's normalisation and FFN kind. */
enum eng_norm eng_model_norm(const eng_model *m);
enum eng_ffn eng_model_ffn(const eng_model *m);

/* An observer of the forward pass: called on the calling thread before
 * each matmul group with the group's first weight (w identifies the
 * layer and role: compare with eng_model_layer's fields) and its nt
 * input rows of cols floats (borrowed for the call). For activation
 * statistics (AWQ); NULL to stop. */
typedef void (*eng_mm_observer)(void *user, const eng_weight *w, const float *x, uint32_t nt, uint32_t cols);
void eng_ctx_set_observer(eng_ctx *c, eng_mm_observer fn, void *user);

/* The experts' observer (importance matrices): called on the calling
 * thread for each expert a batch routes tokens to, with the layer's whole
 * expert weight (&moe.gate for the input gate and up share, &moe.down
 * for down's), the expert, and the nt input rows of cols floats that
 * expert multiplies (borrowed for the call). NULL to stop. */
typedef void (*eng_expert_observer)(void *user, const eng_weight *all, uint32_t expert, const float *x, uint32_t nt,
                                    uint32_t cols);
void eng_ctx_set_expert_observer(eng_ctx *c, eng_expert_observer fn, void *user);

/* The output matrix as the forward pass uses it (a copy of the token
 * embedding's weight when the model ties the two); borrowed. */
const eng_weight *eng_model_output(const eng_model *m);

#endif
