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

#endif
