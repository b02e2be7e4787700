/* Hessians of attn_v's rows from the attention's probabilities, for GPTQ
 * (--attn-rows; gptq.c): the calibration pass's q/k/v inputs of one
 * window are kept, the layer's attention recomputed from them with the
 * float weights (checked against the attention output the forward pass
 * hands to attn_output), and for each kv head h
 *   H_h = sum over positions t and the query heads sharing h of
 *         xbar xbar^T,  xbar = sum_{s <= t} p_{t,s} x_s
 * (p the head's probabilities, x the q/k/v input): an error e in a row of
 * attn_v moves that output coordinate of o_t = sum_s p_{t,s} v_s by
 * e . xbar_t, while the shared H weighs e . x_t, the value's own error.
 * Every row of the head shares H_h. Per-row Hessians for attn_k and
 * attn_q from the same probabilities (how a row's error moves the scores
 * and through the softmax the output) were built and measured, and did
 * not lower the held-out KL (docs/QUANTIZATION.md): not kept.
 * The sums run a head a task on the pool, each in window and position
 * order, so they do not depend on the thread count. Private to
 * nibble_tools. */
#ifndef NIBBLE_TOOLS_ATTN_ROWS_H
#define NIBBLE_TOOLS_ATTN_ROWS_H

#include <stdint.h>

#include "model.h"
#include "model_layout.h"
#include "pool.h"

typedef struct tools_attn tools_attn;

/* Whether layer l of m can get the attn_v Hessians: grouped heads, no
 * per-head norms, sinks, window or YaRN (the caller checks that q, k and
 * v are tensors of their own). */
int tools_attn_supported(const eng_model *m, uint32_t l);
/* Bytes tools_attn_new holds for layer l while loaded (the Hessians,
 * q/k/v's weights as floats and the window's buffers). */
uint64_t tools_attn_bytes(const eng_model *m, uint32_t l, uint32_t n_ctx);
/* For layer l (tools_attn_supported), calibration windows of n_ctx
 * tokens over n_tok tokens (tools_calib_run's cut): the Hessians zeroed,
 * the weights read as floats. NULL when out of memory or the weights
 * cannot be read as floats. */
tools_attn *tools_attn_new(const eng_model *m, uint32_t l, uint32_t n_tok, uint32_t n_ctx);
/* The q/k/v input rows of the next nt tokens (nt x dim floats). */
void tools_attn_input(tools_attn *a, const float *x, uint32_t nt);
/* The attention output rows of the same tokens (attn_output's input, nt x
 * n_heads*head_dim); when a window is complete its Hessians are summed
 * (on pool's threads, or the caller's when NULL). 0, or ENG_ENOMEM. */
int tools_attn_output(tools_attn *a, const float *o, uint32_t nt, eng_pool *pool);
/* After the pass: mirror the sums. Returns the relative RMS difference of
 * the recomputed attention output from the forward pass's (a wrong
 * recomputation, e.g. a family's own score scale, shows as a large one). */
double tools_attn_finish(tools_attn *a);
/* attn_v's Hessians: n_kv_heads x dim x dim doubles, one for each run of
 * *per = head_dim rows of the *rows = n_kv_heads * head_dim. Valid until
 * tools_attn_free. */
const double *tools_attn_v_hessians(const tools_attn *a, uint32_t *rows, uint32_t *per);
void tools_attn_free(tools_attn *a);

#endif
