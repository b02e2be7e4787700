/* Activation-aware weight quantization (AWQ): scale each weight matrix's
 * input channels by s = a^alpha (a: the mean magnitude of that channel's
 * activation on calibration text, alpha searched per layer group on a
 * grid to minimise the quantized group's output error on the recorded
 * activations), and fold 1/s into what produces those activations, so
 * the model computes the same function with weights that quantize
 * better:
 *   q, k, v   <- attn_norm weights (and bias)
 *   gate, up  <- ffn_norm weights (and bias)
 *   output    <- v rows (and bias), s shared by the heads of a kv group
 *   down      <- up rows (and bias) (SwiGLU only)
 * With clip, then (AWQ's auto_clip), per row of each scaled matrix and per
 * block of its type, the values are clipped to the ratio of their largest
 * magnitude, from 1.0 down to 0.5 in steps of 0.05, that gives the least
 * output error on the recorded activations (that block's part of it).
 * The result is a list of tensor edits (quantize.h) the quantizer applies
 * before rounding: a standard GGUF any llama.cpp runs. Activations come
 * from nibble's own forward pass through an observer (eng_ctx_set_observer
 * in engine/model/layout/model_layout.h). */
#ifndef NIBBLE_ENG_AWQ_H
#define NIBBLE_ENG_AWQ_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "quantize.h"

typedef struct eng_awq eng_awq;

typedef struct eng_awq_opts {
    const eng_qtarget *target;  /* the types the search quantizes with */
    const char *calib_path;     /* calibration text file, or: */
    const char *calib_text;     /* the text itself (calib_len bytes) */
    size_t calib_len;
    uint32_t max_tokens;        /* calibration tokens used (0: 4096) */
    uint32_t n_ctx;             /* window for the calibration pass (0: 256) */
    int threads;
    int grid;                   /* alpha steps over [0, 1] (0: 20) */
    int clip;                   /* also search a clip ratio per row and block (auto_clip) */
    void (*progress)(void *user, double frac, const char *what);
    void *user;
} eng_awq_opts;

/* Run the calibration and the search on the model at path. */
int eng_awq_compute(const char *model_path, const eng_awq_opts *o, eng_awq **out, eng_err *e);
/* The edits to hand to eng_quantize_file (owned by a). */
const eng_tensor_edit *eng_awq_edits(const eng_awq *a, size_t *n);
/* One line: groups searched, mean alpha, output error against plain RTN. */
const char *eng_awq_summary(const eng_awq *a);
void eng_awq_free(eng_awq *a);

#endif
