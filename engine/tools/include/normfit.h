/* Norm gains refitted to a quantized model ("norm tweaking" in closed
 * form). An RMSNorm's gain stays f32 in a quantized GGUF, so once the
 * matrices it feeds are quantized it is free to change: attn_norm feeds
 * attn_q/k/v, ffn_norm feeds ffn_gate/up. With the gain g0 * s the
 * quantized model's layer computes Wq diag(s) zq, zq its own input (the
 * quantized layers before it have moved it), and the float model's W z;
 * s minimising sum ||W z - Wq diag(s) zq||^2 over a calibration text is
 * least squares in the dim factors (eng_gptq_fit_gain with the cross sums
 * sum zq z^T). Both models run the text window by window side by side;
 * the gains of a group of layers are fitted together, and the next group
 * sees them (a group: as many layers as fit max_bytes). */
#ifndef NIBBLE_ENG_NORMFIT_H
#define NIBBLE_ENG_NORMFIT_H

#include <stdint.h>

#include "err.h"

typedef struct eng_normfit_opts {
    const char *calib_path;  /* calibration text */
    uint32_t max_tokens;     /* tokens used (0: 4096) */
    uint32_t n_ctx;          /* window (0: 256) */
    int threads;             /* the forward passes' */
    uint64_t max_bytes;      /* sums held at once (0: 1 GB): 6 dim^2 doubles a layer */
    void (*progress)(void *user, double frac, const char *what);
    void *user;
} eng_normfit_opts;

typedef struct eng_normfit_report {
    uint32_t n_fit;          /* gains changed */
    uint32_t n_skipped;      /* gains left (not f32, or their matrices not quantized) */
    uint32_t rounds;         /* layer groups (two calibration passes each) */
    double ratio;            /* mean loss after the fit as a share of before */
} eng_normfit_report;

/* Refit the attn_norm and ffn_norm gains of the quantized GGUF at
 * quant_path (made from float_path; same shapes) in place: only those
 * f32 tensors' bytes change. Errors: a model cannot be opened, the two
 * differ in shape, too few tokens, the file cannot be written (it may
 * then hold some gains fitted: the caller should drop it), ENG_ENOMEM. */
int eng_normfit_run(const char *float_path, const char *quant_path, const eng_normfit_opts *o,
                    eng_normfit_report *rep, eng_err *e);

/* Norm gains fitted to quantized matrices ("norm tweaking", closed form).
 * An RMSNorm's gain g0 feeds matrices W_1..W_m through z = g0 * xhat,
 * and stays f32 in the file, so after the matrices are quantized it can
 * be refitted: with g = g0 * s the quantized layer computes Wq diag(s) z,
 * and sum_k wt_k sum_r ||(w_r - wq_r o s)^T z||^2 over the calibration
 * tokens is s^T A s - 2 b^T s + c with A = sum wt_k (Wq_k^T Wq_k) o H_k
 * and b = diag(sum wt_k Wq_k^T W_k H_k): least squares in s alone. */
typedef struct eng_gain_mat {
    const float *w;        /* rows x cols: the float matrix (the target) */
    const float *wq;       /* rows x cols: its quantized values */
    uint32_t rows;
    const double *H;       /* cols x cols: the Hessian of its input z */
    const double *row_h;   /* NULL or rows x cols x cols, one per row (replacing H) */
    const float *col;      /* NULL or cols factors the matrix's columns were scaled
                            * by (AWQ): it meets z / col, its Hessian is H / (col col^T) */
    const double *cross;   /* NULL, or the quantized model's own inputs: H is then
                            * sum zq zq^T, cross sum zq z^T and h_fp sum z z^T */
    const double *h_fp;
} eng_gain_mat;

typedef struct eng_gain_opts {
    double ridge;          /* + ridge * mean(diag A) * ||s - 1||^2 (0: none; raised
                            * from 1e-6 tenfold while A is not positive definite) */
    int per_matrix;        /* weigh each matrix by 1 / its float output energy
                            * sum_r w_r^T H w_r (else each alike) */
} eng_gain_opts;

/* Into s (cols values) the factors minimising the loss above over the
 * n_mats matrices (all cols wide); *loss0 / *loss1 (may be NULL) get the
 * loss at s = 1 and at the solution (never above loss0: s stays 1 where
 * the solve would not lower it). Returns 0; ENG_EFORMAT when no ridge up
 * to 10 makes A definite (s is then 1); ENG_ENOMEM. */
int eng_normfit_gain(uint32_t cols, const eng_gain_mat *m, uint32_t n_mats, const eng_gain_opts *o, double *s,
                     double *loss0, double *loss1);

#endif
