/* Private to engine/: the loaded model's layout, shared by the loader and
 * the forward pass. */
#ifndef NIBBLE_ENG_MODEL_INTERNAL_H
#define NIBBLE_ENG_MODEL_INTERNAL_H

#include "model.h"
#include "simd.h"

/* A weight matrix of rows x cols (cols = the GGUF ne[0]), used in place
 * from the mapping or from a buffer converted once at load. */
typedef struct eng_weight {
    const void *data;
    int type;
    uint32_t rows, cols;
    size_t row_bytes;
    enum simd_act act; /* activation format its dot kernel takes */
} eng_weight;

typedef struct eng_layer {
    const float *attn_norm, *ffn_norm; /* dim */
    const float *bq, *bk, *bv;         /* optional biases (qwen2) */
    eng_weight wq, wk, wv, wo;
    eng_weight w_gate, w_up, w_down;
} eng_layer;

struct eng_model {
    eng_gguf *gguf;
    eng_model_info info;
    eng_tok *tok;
    eng_weight tok_embd;   /* n_vocab rows of dim; rows are dequantized on lookup */
    eng_weight output;     /* n_vocab rows of dim */
    const float *out_norm; /* dim */
    eng_layer *layers;
    void **owned;          /* buffers converted at load */
    size_t n_owned;
};

#endif
