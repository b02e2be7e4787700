/* Private to engine/: the loaded model's layout, shared by the loader and
 * the forward pass. */
#ifndef NIBBLE_ENG_MODEL_INTERNAL_H
#define NIBBLE_ENG_MODEL_INTERNAL_H

#include <stdatomic.h>

#include "model.h"
#include "simd.h"

/* A weight matrix of rows x cols (cols = the GGUF ne[0]), used in place
 * from the mapping. A fused tensor (phi3's qkv, gpt2's qkv, phi3's
 * gate+up) is seen as several weights over row ranges of one tensor. */
typedef struct eng_weight {
    const void *data;
    int type;
    uint32_t rows, cols;
    size_t row_bytes;
    enum simd_act act; /* activation format its dot kernel takes */
    /* rows 0 .. packed_rows-1 (a multiple of SIMD_PACK_ROWS) again in the
     * packed form (simd.h), for sets with a dot_packed kernel (packed
     * NULL when the weight is not packed). data stays valid for every
     * row. Read packed_rows with acquire order (engine/wpack.c). */
    const void *packed;
    _Atomic uint32_t packed_rows; /* grows while a background thread packs */
} eng_weight;

enum eng_norm { ENG_NORM_RMS, ENG_NORM_LAYER };
enum eng_ffn { ENG_FFN_SWIGLU, ENG_FFN_GELU };

typedef struct eng_layer {
    uint32_t n_heads, n_kv_heads, ffn; /* may differ per layer (pruned models) */
    const float *attn_norm, *attn_norm_b, *ffn_norm, *ffn_norm_b; /* dim */
    const float *q_norm, *k_norm;      /* head_dim, per-head RMSNorm (qwen3) */
    const float *bq, *bk, *bv, *bo;    /* optional biases */
    const float *b_up, *b_down;        /* optional FFN biases (gpt2) */
    eng_weight wq, wk, wv, wo;
    eng_weight w_gate, w_up, w_down;   /* w_gate unused for GELU */
} eng_layer;

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
    eng_layer *layers;
    uint32_t max_q, max_kv, max_ffn; /* widest layer: n_heads*hd, n_kv*hd, ffn */
    size_t kv_floats;      /* K (or V) cache values per position, all layers */
    void **owned;          /* buffers converted at load */
    size_t n_owned;
    int load_quant;        /* eng_model_opts.quantize_type (0: none) */
    void (*progress)(void *user, double fraction); /* eng_model_opts.progress */
    void *progress_user;
    uint32_t n_load_quant; /* matrices converted by it */
    struct eng_packer *packer; /* the packed copies and their thread (wpack.c) */
    int no_pack;               /* eng_model_opts.no_pack */
};

/* An observer of the forward pass: called on the calling thread before
 * each matmul group with the group's first weight (w identifies the
 * layer and role: compare with the model's eng_layer fields) and its nt
 * input rows of cols floats (borrowed for the call). For activation
 * statistics (AWQ); NULL to stop. */
/* Pack every matrix the active kernel set reads faster packed (engine/
 * wpack.c): on a background thread, or before returning if background is
 * 0. Only fails for lack of memory (then nothing is packed). */
int eng_model_pack_start(eng_model *m, int background, eng_err *e);
/* Stop the packing thread and free the copies (eng_model_close). */
void eng_model_pack_free(eng_model *m);

typedef void (*eng_mm_observer)(void *user, const eng_weight *w, const float *x, uint32_t nt, uint32_t cols);
void eng_ctx_set_observer(eng_ctx *c, eng_mm_observer fn, void *user);

#endif
