/* Quantizing a GGUF model into another GGUF: each weight matrix to a
 * target type (or a mix of types), round to nearest with each format's
 * reference quantizer, optionally after activation-aware scaling (AWQ,
 * see awq.h). Metadata is copied; general.file_type is set as llama.cpp
 * numbers it; keys under nibble.quantize.* record what was done. The file
 * is written through a temporary file and renamed, so a failure never
 * leaves a half-written output. */
#ifndef NIBBLE_ENG_QUANTIZE_H
#define NIBBLE_ENG_QUANTIZE_H

#include <stdint.h>

#include "err.h"
#include "gguf.h"
#include "gptq.h"
#include "imatrix.h"

/* A target: a plain type, or a mix that keeps some tensors wider. */
typedef struct eng_qtarget {
    const char *name;    /* "q4_k_m", ... as the command line spells it */
    int type;            /* base type (enum simd_type) */
    int more_bits_type;  /* mixes: type of attn_v / ffn_down in the layers that get more bits; else -1 */
    uint32_t file_type;  /* llama.cpp's general.file_type (LLAMA_FTYPE_*) */
    int fake_bits;       /* > 0: the per-group asymmetric uniform baseline at this many bits
                          * (groups of 32 along a row, f16 scale and minimum), which GGUF
                          * cannot hold: stored dequantized as f32 ("fake quantization") */
    int mix;             /* enum eng_qmix: the per-tensor rules of the low-bit mixes */
} eng_qtarget;

/* The low-bit mixes' rules (quantize.c says which tensors get what). */
enum eng_qmix {
    ENG_QMIX_NONE = 0,
    ENG_QMIX_Q2_K,   /* q2_k with q3_k for attn_v, attn_output, ffn_down */
    ENG_QMIX_Q3_K_M, /* q3_k with q4_k/q5_k for attn_v, attn_output, ffn_down, attn_qkv */
    ENG_QMIX_Q3_K_L, /* q3_k with q5_k for attn_v, attn_output, ffn_down; q4_k attn_qkv */
    ENG_QMIX_IQ4,    /* iq4_xs / iq4_nl with q5_k for ffn_down in the first eighth of the layers */
    ENG_QMIX_IQ2,    /* iq2_xxs / iq2_xs: q2_k for attn_v, token_embd, ffn_down in the first eighth */
    ENG_QMIX_IQ1,    /* iq1_s / iq1_m: as ENG_QMIX_IQ2, and iq2_xxs for attn_output */
    ENG_QMIX_IQ2_S,  /* iq2_s: iq3_s for attn_v, attn_output, token_embd, ffn_down in the first eighth */
    ENG_QMIX_IQ3_XXS, /* iq3_xxs: iq3_s for attn_output and token_embd, iq2_s for attn_q and attn_k */
    ENG_QMIX_IQ3_XS, /* iq3_s with iq3_xxs for attn_q, attn_k, and ffn_gate/ffn_up in the middle 3/4 */
    ENG_QMIX_IQ3_M,  /* iq3_s with q4_k for attn_v, attn_output, attn_qkv, ffn_down in the first eighth */
};

/* 1 for the types that need an importance matrix to be written (iq2_xxs,
 * iq2_xs, iq1_s, iq1_m, as llama.cpp judges): without one their grids
 * lose too much. */
int eng_quant_needs_imatrix(int type);

/* Every target, NULL-name terminated, and a lookup (case-insensitive;
 * NULL if unknown). */
const eng_qtarget *eng_qtargets(void);
const eng_qtarget *eng_qtarget_find(const char *name);

/* Edits applied to tensors before they are quantized (AWQ's folded
 * scales and clipping): a matrix's columns (input channels, ne[0])
 * multiplied by col[c], its rows by row[r]; a vector's elements by
 * col[i]; then, with clip, the values of each group of clip_group
 * columns of row r clipped to clip[r * (ne[0] / clip_group) + group]
 * times the group's largest magnitude (a ratio, so row factors do not
 * change it). A GPTQ pass ignores clip (it searches its own). */
typedef struct eng_tensor_edit {
    char name[96];
    float *col;  /* NULL or ne[0] factors */
    float *row;  /* NULL or ne[1] factors */
    float *clip; /* NULL or ne[1] * (ne[0] / clip_group) ratios in (0, 1] */
    uint32_t clip_group;
} eng_tensor_edit;

typedef struct eng_quant_opts {
    const eng_qtarget *target;
    int allow_requantize;  /* dequantize already-quantized matrices and quantize again */
    const eng_tensor_edit *edits; /* may be NULL */
    size_t n_edits;
    const char *method;    /* recorded in nibble.quantize.method: "rtn" (default), "awq", "gptq", "awq+gptq",
                            * each with "+imatrix" when one is given */
    const char *calib;     /* recorded in nibble.quantize.calibration (may be NULL) */
    /* importance (may be NULL): each matrix whose entry matches its name
     * and width is quantized with the type's importance-weighted search
     * (simd_traits.quant_imp), the importance divided by the square of an
     * edit's column factor (AWQ's scaled columns meet activations divided
     * by it); a tensor without a matching entry is quantized unweighted,
     * with a note. Recorded as llama-quantize records it:
     * quantize.imatrix.file (imatrix_file), .dataset, .entries_count,
     * .chunks_count. */
    const eng_imatrix *imatrix;
    const char *imatrix_file;
    /* GPTQ (may be NULL): every 2-D matrix with a Hessian of its width,
     * planned as a type eng_gptq_supports, goes through the GPTQ pass
     * (after the edits' column and row factors; its block scales by the
     * importance-weighted search when the imatrix has an entry); the rest
     * round to nearest. gptq_params' col and imp are set per tensor. */
    eng_gptq *gptq;  /* borrowed; collects a layer group's Hessians as asked */
    eng_gptq_params gptq_params;
    /* the caller refits the norm gains after (eng_normfit_run, normfit.h):
     * recorded as nibble.quantize.fit_norms = 1 */
    int fit_norms;
    /* the targets moved to the quantized inputs (eng_gptq_opts.asym_path):
     * the blend, recorded as nibble.quantize.asym (0: none) */
    float asym;
    /* rows quantized at once outside the GPTQ pass (0 or 1: on the
     * caller's thread); the bytes written are the same at any count */
    int threads;
    /* progress: called after each tensor (done, total bytes of input
     * tensors); notes: one line per tensor whose type was changed from
     * the plan (fallbacks), and requantization warnings. Both optional. */
    void (*progress)(void *user, uint64_t done, uint64_t total, const char *tensor);
    void (*note)(void *user, const char *line);
    void *user;
} eng_quant_opts;

typedef struct eng_quant_report {
    uint64_t in_bytes, out_bytes;      /* tensor data */
    uint64_t n_weights;                /* values in all tensors */
    uint64_t n_tensors, n_fallbacks;
    uint64_t type_count[40];           /* tensors written per type */
    uint64_t n_weighted;               /* matrices quantized with an importance */
    uint64_t n_unweighted;             /* quantized matrices without one (an imatrix given) */
    uint64_t n_unused;                 /* imatrix entries that named no tensor */
    uint64_t n_gptq;                   /* matrices through the GPTQ pass */
    double gptq_ratio;                 /* their mean output error (x^T H x) as a share of RTN's */
} eng_quant_report;

/* The type a tensor gets under target t (name, shape, layer count):
 * applies the mix, the output/embedding rule and the fallback for rows
 * that do not fit the block. Returns the type; *fallback = 1 if the
 * planned type did not fit. Vectors (1-D) keep their type. */
int eng_quant_plan(const eng_qtarget *t, const char *name, uint32_t n_dims, const uint64_t *ne, int src_type,
                   uint32_t n_layers, int has_output, int *planned, int *fallback);

/* Quantize in_path into out_path. Errors (e says which): the input
 * cannot be read or is not GGUF, it is already quantized (unless
 * allow_requantize), the output cannot be written, out of memory. */
int eng_quantize_file(const char *in_path, const char *out_path, const eng_quant_opts *o, eng_quant_report *rep,
                      eng_err *e);

/* The uniform baseline on one row of n values: groups of `group`, each
 * min..max in 2^bits - 1 steps (scale and min rounded to f16). */
void eng_fake_quant_row(const float *src, float *dst, size_t n, int bits, int group);

/* Quantize n floats (a whole number of rows of `cols`) to type t into
 * dst (simd_row_bytes(t, cols) per row); for the loader and the sweep. */
int eng_quant_rows(int type, const float *src, void *dst, uint64_t rows, uint64_t cols);

#endif
