/* A naive double-precision reference of the decoder forward pass of the
 * families the engine runs (llama, qwen2, qwen3, phi3, gpt2), for tests
 * only. It shares no code with engine/: weights come in as
 * plain float arrays (already dequantized by the caller), every sum and
 * product is done in double, one position and one head at a time, so
 * what it computes can be read straight off the source.
 *
 * Matrices are row-major [out][in], which is also the GGUF layout of a
 * tensor with ne = {in, out}: row r is in contiguous values. A fused GGUF
 * tensor (phi3's and gpt2's attn_qkv, phi3's gate+up ffn_up) is passed as
 * pointers to its row ranges: the reference knows nothing of fusing.
 *
 * What each family uses (all optional fields NULL / 0 otherwise):
 *  - llama: RMSNorm, adjacent-pair RoPE, SwiGLU; Llama 3 adds rope_freqs.
 *  - qwen2: rope_neox, q/k/v biases.
 *  - qwen3: rope_neox, q_norm/k_norm, head_dim != dim / n_heads.
 *  - phi3: rope_neox (fusing is the caller's business).
 *  - gpt2: layer_norm (+ every norm's bias), gelu with b_up/b_down, bo,
 *    q/k/v biases, learned positions (pos_embd), rope_dims 0.
 *  - gemma3: rope_neox, q_norm/k_norm, embd_scale, attn_scale, geglu,
 *    attn_post_norm/ffn_post_norm, layer_window with rope_base_local,
 *    logit_softcap.
 * Per-layer head counts and FFN widths (pruned models) go in layer_*. */
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
    /* 1: K and V round to IEEE halves (to nearest, ties to even; beyond
     * the largest half to infinity) before attention reads them, as the
     * engine's f16 cache holds them. 0: exact. */
    int kv_f16;
    /* Per-layer sizes, each n_layers long, or NULL: n_heads, n_kv_heads,
     * ffn in every layer. A layer with 0 heads has no attention block (its
     * kv heads must be 0 too), one with 0 ffn no feed-forward block. */
    const int *layer_heads, *layer_kv_heads, *layer_ffn;
    /* rope_dims/2 divisors of the pair frequencies (Llama 3 rope_freqs):
     * theta_i = (pos / rope_factor) * base^(-2i/rope_dims) / rope_freqs[i] */
    const float *rope_freqs;
    int layer_norm; /* 1: LayerNorm (x - mean) / sqrt(var + eps) * w + b, else RMSNorm */
    int gelu;       /* 1: FFN is down(gelu_tanh(up(h) + b_up)) + b_down, no gate */
    int geglu;      /* 1: FFN is down(gelu_tanh(gate(h)) * up(h)) */
    double embd_scale;    /* token embeddings times this; 0: 1 */
    double attn_scale;    /* attention scores q.k times this; 0: 1/sqrt(head_dim) */
    double logit_softcap; /* logits become c * tanh(logit / c); 0: none */
    /* n_layers windows or NULL: a layer with window w > 0 lets position t
     * see positions t-w+1 .. t only, and rotates with rope_base_local and
     * no position scaling (rope_freqs do not apply to it) */
    const int *layer_window;
    double rope_base_local;
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
    /* other families; NULL: none */
    const float *attn_norm_b, *ffn_norm_b; /* [dim] LayerNorm biases */
    const float *q_norm, *k_norm;  /* [head_dim] per-head RMSNorm of q and k after the
                                      projection (and bias), before RoPE */
    const float *bo;               /* [dim] attention output bias */
    const float *b_up;             /* [ffn] */
    const float *b_down;           /* [dim] */
    const float *attn_post_norm, *ffn_post_norm; /* [dim] RMSNorm of the block's output
                                                    before the residual add */
} ref_llama_layer;

typedef struct ref_llama_weights {
    const float *tok_embd;         /* [n_vocab][dim] */
    const ref_llama_layer *layers; /* n_layers of them */
    const float *out_norm;         /* [dim] */
    const float *output;           /* [n_vocab][dim]; may be tok_embd (tied) */
    const float *out_norm_b;       /* [dim] or NULL */
    const float *pos_embd;         /* [n_pos][dim] learned positions added to the
                                      token embeddings, or NULL */
    int n_pos;                     /* rows of pos_embd: the longest sequence */
} ref_llama_weights;

/* Run tokens[0..n) at positions 0..n-1 and write every position's logits
 * to logits[t * n_vocab + v]. All pointers are borrowed. Returns 0, or -1
 * for a bad configuration, a token out of range or no memory. */
int ref_llama_forward(const ref_llama_cfg *c, const ref_llama_weights *w, const int32_t *tokens, int n,
                      double *logits);

/* ref_llama_forward that also writes, for each position t, tie_margin[t]:
 * with act_q8, the smallest distance, in int8 steps, of any rounded matmul
 * input computed at position t (any layer) from a rounding tie; 0.5 when
 * there is none or without act_q8. Where it is tiny, float arithmetic may
 * round that input the other way, and that position and every later one
 * may then differ from the reference by the effect of one step.
 * tie_margin may be NULL. */
int ref_llama_forward_margins(const ref_llama_cfg *c, const ref_llama_weights *w, const int32_t *tokens, int n,
                              double *logits, double *tie_margin);

/* Rotate the first rope_dims values of one head vector x in place for
 * position pos (see ref_llama_cfg for the layout and frequencies). */
void ref_llama_rope(double *x, int rope_dims, int neox, double pos, double base, double factor);
/* The same with rope_dims/2 frequency divisors (NULL: all 1). */
void ref_llama_rope_freqs(double *x, int rope_dims, int neox, double pos, double base, double factor,
                          const float *freqs);

/* GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
double ref_gelu(double x);

#endif
