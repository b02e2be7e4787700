/* A naive double-precision reference of the llama / qwen2 decoder forward
 * pass, for tests only. It shares no code with engine/: weights come in as
 * plain float arrays (already dequantized by the caller), every sum and
 * product is done in double, one position and one head at a time, so
 * what it computes can be read straight off the source.
 *
 * Matrices are row-major [out][in], which is also the GGUF layout of a
 * tensor with ne = {in, out}: row r is in contiguous values. */
#ifndef NIBBLE_TEST_REF_LLAMA_H
#define NIBBLE_TEST_REF_LLAMA_H

#include <stdint.h>

typedef struct ref_llama_cfg {
    int n_vocab, dim, n_layers;
    int n_heads, n_kv_heads, head_dim; /* n_heads a multiple of n_kv_heads */
    int ffn;                           /* hidden width of the gated MLP */
    int rope_dims;                     /* rotated dims at the start of each head (even, <= head_dim) */
    int rope_neox;                     /* 1: pairs (i, i + rope_dims/2); 0: pairs (2i, 2i+1) */
    double rope_base;                  /* theta_i = (pos / rope_factor) * base^(-2i/rope_dims) */
    double rope_factor;                /* linear position scaling; 1 = none */
    double norm_eps;                   /* RMSNorm: x / sqrt(mean(x^2) + eps) */
    /* 1: model int8 activations, as matmuls with q8_0/q4_0 weights see
     * them: every matmul input whose length is a multiple of 32 is first
     * rounded, per block of 32, to a multiple of amax/127 (amax: the
     * block's largest |value|; ties to even). 0: exact inputs. */
    int act_q8;
} ref_llama_cfg;

typedef struct ref_llama_layer {
    const float *attn_norm;        /* [dim] */
    const float *wq;               /* [n_heads*head_dim][dim] */
    const float *wk, *wv;          /* [n_kv_heads*head_dim][dim] */
    const float *bq, *bk, *bv;     /* biases of q, k, v, or NULL (none) */
    const float *wo;               /* [dim][n_heads*head_dim] */
    const float *ffn_norm;         /* [dim] */
    const float *w_gate, *w_up;    /* [ffn][dim] */
    const float *w_down;           /* [dim][ffn] */
} ref_llama_layer;

typedef struct ref_llama_weights {
    const float *tok_embd;         /* [n_vocab][dim] */
    const ref_llama_layer *layers; /* n_layers of them */
    const float *out_norm;         /* [dim] */
    const float *output;           /* [n_vocab][dim]; may be tok_embd (tied) */
} ref_llama_weights;

/* Run tokens[0..n) at positions 0..n-1 and write every position's logits
 * to logits[t * n_vocab + v]. All pointers are borrowed. Returns 0, or -1
 * for a bad configuration, a token out of range or no memory. */
int ref_llama_forward(const ref_llama_cfg *c, const ref_llama_weights *w, const int32_t *tokens, int n,
                      double *logits);

/* Rotate the first rope_dims values of one head vector x in place for
 * position pos (see ref_llama_cfg for the layout and frequencies). */
void ref_llama_rope(double *x, int rope_dims, int neox, double pos, double base, double factor);

#endif
