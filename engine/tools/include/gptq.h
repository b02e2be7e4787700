/* GPTQ: quantize a weight matrix column by column, folding each column's
 * rounding error into the columns not yet quantized, weighted by the
 * inverse of the calibration Hessian H = sum over tokens of x x^T (the
 * matrix's inputs), so that the output error ||X W^T - X Q^T|| is what is
 * minimised rather than each weight's own error (Frantar et al., "GPTQ",
 * 2022; the Optimal Brain Quantizer's update with a Cholesky factor).
 *
 * Block formats: GGUF stores a row in blocks of 32 (q4_0 .. q8_0,
 * iq4_nl) or 256 values (the K-quants, iq4_xs) along the columns, each
 * with its own scales. When the pass reaches a block's first column the
 * type's own quantizer (its scale search; the importance-weighted one when
 * importances are given) chooses the block's scales from the weights as
 * the earlier columns' errors have left them; each column is then rounded
 * to the nearest level those scales allow. A weight the pass has not moved
 * keeps the code the quantizer gave it, so with a diagonal H (no error to
 * fold) the result is exactly round-to-nearest.
 *
 * Hessians come from nibble's own forward pass over a calibration text
 * (an observer on every matmul, as for AWQ and importance matrices): one
 * per distinct matmul input (q, k and v share theirs, as do gate and up),
 * named after the tensors that read it. The output is standard GGUF. */
#ifndef NIBBLE_ENG_GPTQ_H
#define NIBBLE_ENG_GPTQ_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct eng_gptq eng_gptq;

typedef struct eng_gptq_opts {
    const char *calib_path;  /* calibration text file, or: */
    const char *calib_text;  /* the text itself (calib_len bytes) */
    size_t calib_len;
    uint32_t max_tokens;     /* calibration tokens used (0: 4096) */
    uint32_t n_ctx;          /* window of the calibration pass (0: 256) */
    int threads;             /* the calibration pass's and the sums' */
    uint64_t max_bytes;      /* Hessians held at once (0: ENG_GPTQ_MAX_BYTES) */
    int ffn_rows;            /* also a Hessian per row of a SwiGLU FFN's gate and up
                              * (eng_gptq_row_hessians): 2 * ffn * dim^2 doubles a layer */
    int attn_rows;           /* also Hessians for attn_v's rows from the attention's
                              * probabilities (eng_gptq_row_hessians):
                              * n_kv_heads * dim^2 doubles a layer */
    /* --asym: a file quantized from this model (a first GPTQ pass). The
     * float model and it then run each calibration window side by side:
     * each input's H becomes the quantized model's Hq = sum xq xq^T, and
     * with C = sum xq x^T (x the float model's input) each matrix's target
     * moves from W to W' = W C^T Hq^-1 (eng_gptq_target), the Q minimising
     * sum ||W x - Q xq||^2 = (Q - W') Hq (Q - W')^T + const. Per-row
     * Hessians (ffn_rows, attn_rows) stay the float model's. The file
     * stays open until eng_gptq_free (asym_seq: it is also written). Costs the
     * sums C (one more cols^2 doubles an input) and a window of float
     * inputs; whole windows only. */
    const char *asym_path;
    double asym_damp;        /* the solve's damping, a share of Hq's mean diagonal (0: 0.01) */
    double asym_blend;       /* a: the target W + a (W' - W) (0: 1) */
    int asym_rows;           /* with ffn_rows: the per-row Hessians summed on the quantized
                              * model's inputs, each token weighted by the float model's
                              * row weights, Hq_i = sum wt_i xq xq^T, and each row's own
                              * target map from C_i = sum wt_i xq x^T (eng_gptq_row_targets):
                              * 2 * ffn * dim^2 doubles more a layer, 3x the per-row sums */
    int asym_seq;            /* 1 layer by layer: a layer's sums are taken when quantizing
                              * reaches it, against asym_path as refreshed by then
                              * (eng_gptq_asym_pending): its earlier layers the final ones;
                              * 2 stage by stage: the same for each of a layer's inputs in
                              * the forward order (q/k/v, attn_output, gate/up, down), so
                              * that a stage's sums also see the layer's finished stages
                              * (the caller converts in eng_gptq_asym_stage's order) */
    void (*progress)(void *user, double frac, const char *what);
    void *user;
} eng_gptq_opts;

/* The default budget of one collection's Hessians (every dense layer
 * matrix's input: cols^2 doubles): the layers are collected in groups
 * that fit it, one calibration pass per group. */
#define ENG_GPTQ_MAX_BYTES ((uint64_t)1 << 30)

/* Prepare the Hessians of every attention and FFN matrix of the dense
 * layers of the model at model_path (expert tensors and the output matrix
 * get none: they are quantized round-to-nearest): the model stays open
 * and the calibration tokens are kept; the layers are cut into groups
 * whose Hessians fit o->max_bytes, and the first group's are collected
 * now (eng_gptq_hessian collects another group's on demand, dropping the
 * one held). Errors: the model cannot be opened, too few tokens,
 * non-finite activations, out of memory. */
int eng_gptq_collect(const char *model_path, const eng_gptq_opts *o, eng_gptq **out, eng_err *e);
/* Into *H the Hessian (cols x cols doubles, row-major, symmetric; valid
 * until the next call or eng_gptq_free) of the tensor called name, or
 * NULL when it has none; *cols gets its width. When the tensor's layer is
 * not in the group held, its group is collected first (a calibration
 * pass); its errors are eng_gptq_collect's. */
int eng_gptq_hessian(eng_gptq *g, const char *name, const double **H, uint32_t *cols, eng_err *e);
/* Into *Hr the per-row Hessians (rows / per x cols x cols doubles, one for
 * each run of *per rows of the tensor's *rows; valid as
 * eng_gptq_hessian's) of the ffn_gate or ffn_up tensor called name when
 * the collection made them (eng_gptq_opts.ffn_rows; SwiGLU layers only),
 * else NULL: row i's sums x x^T over the calibration tokens, each token
 * weighted by the square of how much a unit change of that row's output
 * moves silu(gate_i) * up_i there, so the pass weighs a row's error where
 * the FFN's product feels it (*per = 1). With eng_gptq_opts.attn_rows,
 * for attn_v: each kv head's sum of the inputs averaged by the
 * attention's probabilities, one for the head's *per = head_dim rows
 * (engine/tools/attn_rows.h).
 * Errors: eng_gptq_hessian's. */
int eng_gptq_row_hessians(eng_gptq *g, const char *name, const double **Hr, uint32_t *rows, uint32_t *per,
                          eng_err *e);
/* With asym_path: into *T the target map of the tensor called name (cols
 * x cols doubles, valid as eng_gptq_hessian's), each row w of the tensor
 * to be quantized as T w (T = (1 - a) I + a Hq^-1 C), else NULL. Errors:
 * eng_gptq_hessian's. */
int eng_gptq_target(eng_gptq *g, const char *name, const double **T, eng_err *e);
/* With asym_rows: into *Tr the per-row target maps of the ffn_gate or
 * ffn_up tensor called name (one cols x cols map for each row, as
 * eng_gptq_row_hessians' rows; valid as eng_gptq_hessian's), each row w_i
 * to be quantized as T_i w_i, else NULL. Errors: eng_gptq_hessian's. */
int eng_gptq_row_targets(eng_gptq *g, const char *name, const double **Tr, eng_err *e);
/* T = (Hq + damp * mean(diag Hq) I)^-1 C (n x n each, row-major; the
 * damping raised tenfold, from 1e-6 when 0, while not positive definite;
 * an input Hq never saw keeps T's row of I). Returns 0, ENG_EFORMAT when no
 * damping up to 10^4 x makes it definite (T untouched), or ENG_ENOMEM. */
int eng_gptq_asym_target(uint32_t n, const double *Hq, const double *C, double damp, double *T);
/* With asym_seq: when the tensor called name needs its layer's sums
 * taken (the next eng_gptq_hessian of it runs the pair), the path of the
 * quantized file they are taken against, else NULL. The caller may then
 * close it (eng_gptq_asym_close), write the layers it has finished into
 * it in place (same types and sizes) and reopen it (eng_gptq_asym_open;
 * errors: the file cannot be opened or changed shape). */
const char *eng_gptq_asym_pending(const eng_gptq *g, const char *name);
/* With asym_seq: the collection group whose sums the tensor called name
 * uses (groups are summed in increasing order, each against the file as
 * the groups before it leave it), or -1 when it has none. A caller with
 * asym_seq converts every tensor of a group before any of a later one:
 * with asym_seq 2 a file listing ffn_down before ffn_up (llama's order)
 * must take up first, or down's sums miss the final up. */
long eng_gptq_asym_stage(const eng_gptq *g, const char *name);
void eng_gptq_asym_close(eng_gptq *g);
int eng_gptq_asym_open(eng_gptq *g, eng_err *e);
/* Tokens the Hessians were summed over. */
uint32_t eng_gptq_tokens(const eng_gptq *g);
/* With attn_rows: the layers collected so far whose attention Hessians
 * are in use; *off gets those that fell back to the shared Hessian
 * (unsupported layouts are not counted: their recomputed attention
 * differed from the forward pass's), *err the largest relative RMS
 * difference among the layers in use. */
uint32_t eng_gptq_attn_layers(const eng_gptq *g, uint32_t *off, double *err);
/* Layer groups (calibration passes when every group is asked for). */
uint32_t eng_gptq_groups(const eng_gptq *g);
void eng_gptq_free(eng_gptq *g);

/* Whether the pass can write type (enum simd_type): the types whose
 * levels are a scale times a code table plus an offset per block or
 * sub-block: q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl
 * iq4_xs. */
int eng_gptq_supports(int type);

typedef struct eng_gptq_params {
    double damp;        /* added to H's diagonal, as a share of its mean (0: 0.01) */
    int clip;           /* at each block's start, also try its values clipped to
                         * 1.0 .. 0.5 of their largest magnitude and keep the
                         * scales with the least diag(H)-weighted error */
    const float *col;   /* NULL or cols factors the columns were scaled by (AWQ):
                         * the matrix meets inputs divided by them */
    const float *imp;   /* NULL or cols importances: the block scale search is
                         * the type's importance-weighted one */
    int refine;         /* rounds of the local search after the pass (0: none):
                         * single codes moved to a neighbouring level, and the
                         * f16 scale of q4_0/q5_0/q8_0/iq4_nl blocks refitted,
                         * while (w - q)^T (H + damp) (w - q) goes down */
    const double *row_h; /* NULL or rows / row_h_per x cols x cols: each run of
                         * row_h_per rows' own Hessian (eng_gptq_row_hessians),
                         * replacing H for them (H is used for a run whose own
                         * one is not positive definite) */
    uint32_t row_h_per; /* rows sharing each of row_h's Hessians (0: 1); divides rows */
    int threads;        /* rows quantized at once (0 or 1: on the caller's thread) */
} eng_gptq_params;

typedef struct eng_gptq_stats {
    double err_rtn;     /* sum over rows of (w - q)^T H (w - q), round-to-nearest */
    double err_gptq;    /* the same for the pass's result */
    double damp_used;   /* the damping that made H positive definite */
} eng_gptq_stats;

/* Quantize W (rows x cols floats, row-major; overwritten as scratch) to
 * type into dst (rows * simd_row_bytes(type, cols) bytes) with the
 * Hessian H (cols x cols). stats may be NULL. Returns 0; ENG_EUNSUP if
 * the type is not supported or cols does not fit its block; ENG_EFORMAT
 * if H is not positive definite even with 10000x the damping (dst is then
 * untouched); ENG_ENOMEM. */
int eng_gptq_quant_matrix(int type, float *W, uint32_t rows, uint32_t cols, const double *H,
                          const eng_gptq_params *p, void *dst, eng_gptq_stats *stats);

#endif
