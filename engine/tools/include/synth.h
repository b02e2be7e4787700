/* Synthetic models: a real model's shape with seeded random weights,
 * written as GGUF that nibble and llama.cpp both load. For benchmarks and
 * cross-checks, where only the shape and the arithmetic matter. */
#ifndef NIBBLE_ENG_SYNTH_H
#define NIBBLE_ENG_SYNTH_H

#include <stdint.h>

#include "err.h"

typedef struct eng_synth_shape {
    const char *name;   /* "smol135", ... */
    const char *arch;   /* default architecture */
    uint32_t dim, n_layers, n_heads, n_kv_heads, ffn, n_vocab, head_dim, ctx;
    float rope_base;
    int tied;           /* output matrix tied to the embedding */
    const char *about;
    /* mixture of experts (0 for dense shapes): experts, experts a token
     * runs, rows of one expert's FFN (ffn is then the dense width the
     * file states) */
    uint32_t n_expert, n_expert_used, expert_ffn;
    /* sliding window: gpt-oss's even layers; gemma3's local layers (0 for
     * gemma3: 16, with every second layer global where the shape has fewer
     * than 6 layers, so that short cross-check prompts run past it) */
    uint32_t window;
    float yarn;         /* gpt-oss: YaRN factor over yarn_ctx positions (0: none) */
    uint32_t yarn_ctx;
} eng_synth_shape;

/* The known shapes, NULL-name terminated. */
const eng_synth_shape *eng_synth_shapes(void);
const eng_synth_shape *eng_synth_find(const char *name);

struct eng_qtarget;

typedef struct eng_synth_opts {
    const char *arch;   /* NULL: the shape's; "llama", "qwen2", "qwen3", "phi3", "gpt2", "gemma3" (dense
                         * shapes); a mixture-of-experts shape keeps its own */
    int type;           /* weight type of the matrices (enum simd_type) */
    uint64_t seed;
    int verbose;        /* progress on stderr */
    /* non-NULL: a quantize mix (q4_k_m, q5_k_m) whose per-tensor plan
     * (eng_quant_plan: output q6_k, attn_v/ffn_down q6_k in the layers
     * that get more bits, fallbacks for rows that do not fit) replaces
     * type for the matrices; general.file_type is the mix's */
    const struct eng_qtarget *mix;
    /* 0: the shape's layers; else this many (a shorter model of the same
     * widths, for quick runs) */
    uint32_t n_layers;
} eng_synth_opts;

/* Write the model to path (through a temporary file). Matrices whose rows
 * do not fit the type's block fall back to f16 (with a mix: as
 * eng_quant_plan says). Under mxfp4, a mixture of experts keeps only its
 * experts in MXFP4 and its other matrices in q8_0 (llama.cpp's
 * MXFP4_MOE files); routers stay f32 in every type, as llama.cpp's
 * quantizer leaves them. */
int eng_synth_write(const eng_synth_shape *shape, const eng_synth_opts *o, const char *path, eng_err *e);

#endif
