/* Calibration text run through nibble's own forward pass, with an
 * observer on every matmul: what AWQ (awq.c), GPTQ (gptq.c), importance
 * matrices (imatrix.c) and structured pruning (prune.c) all gather their
 * statistics from. Private to nibble_tools. */
#ifndef NIBBLE_TOOLS_CALIB_H
#define NIBBLE_TOOLS_CALIB_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "model.h"
#include "model_layout.h"

/* The largest calibration file read (a calibration needs a few thousand
 * tokens; this only bounds what a wrong path can make us read). */
#define TOOLS_CALIB_MAX_BYTES ((size_t)256 << 20)

/* The tokens of a calibration text, with BOS where the model wants one:
 * the file at path (read as eng_read_file reads a user's file), or when
 * path is NULL the len bytes at text. At most max_tok are kept; fewer
 * than min_tok is an error whose message starts with who (e.g. "AWQ").
 * On success *ids (the caller frees) holds *n_tok tokens. */
int tools_calib_tokens(const eng_model *m, const char *path, const char *text, size_t len, uint32_t min_tok,
                       uint32_t max_tok, const char *who, int32_t **ids, uint32_t *n_tok, eng_err *e);

/* Run ids[0..n_tok) through m in windows of n_ctx tokens, each started
 * as a sequence is (its first token replaced by BOS for the run, then
 * restored), on `threads` threads, with fn(user, ...) seeing every
 * matmul's input. After each window, progress (optional) gets
 * p0 + span * (share of the tokens done) and "calibration". */
int tools_calib_run(eng_model *m, int32_t *ids, uint32_t n_tok, uint32_t n_ctx, int threads, eng_mm_observer fn,
                    void *user, void (*progress)(void *puser, double frac, const char *what), void *puser, double p0,
                    double span, eng_err *e);

/* The pass of tools_calib_run with every choice: */
typedef struct tools_calib_pass {
    int threads;
    eng_mm_observer fn;          /* every matmul's input (NULL: none) */
    void *user;
    eng_expert_observer xfn;     /* every expert's input (NULL: none) */
    void *xuser;
    int all_logits;              /* compute every position's logits (in pieces
                                  * of 64 tokens), so the output matrix is
                                  * observed for all of them, not only the last */
    void (*progress)(void *puser, double frac, const char *what);
    void *puser;
    double p0, span;
} tools_calib_pass;
int tools_calib_run_pass(eng_model *m, int32_t *ids, uint32_t n_tok, uint32_t n_ctx, const tools_calib_pass *p,
                         eng_err *e);

/* Two models side by side (the float model and a quantized one made from
 * it, same shapes): each window of ids runs through mf, then through mq,
 * so that an observer can keep the float model's inputs of a window and
 * compare the quantized model's with them (normfit.c, gptq.c's --asym). */
typedef struct tools_calib_pair {
    int threads;
    void (*window)(void *user);  /* before each window's first run (NULL: none) */
    eng_mm_observer on_float;    /* mf's matmul inputs */
    eng_mm_observer on_quant;    /* then mq's */
    void *user;
    void (*progress)(void *puser, double frac, const char *what);
    void *puser;
    double p0, span;
    const char *what;            /* progress's label */
} tools_calib_pair;
int tools_calib_pair_run(eng_model *mf, eng_model *mq, int32_t *ids, uint32_t n_tok, uint32_t n_ctx,
                         const tools_calib_pair *p, eng_err *e);

/* Rows i0..i1 of the side-by-side sums of nt tokens of width d: the lower
 * triangle of Hq += xq xq^T, the full row of C += xq xf^T, and (Hf not
 * NULL) the lower triangle of Hf += xf xf^T; each entry summed in token
 * order, so any split of the rows gives the same bytes
 * (tools_mirror_lower completes Hq and Hf). */
void tools_pair_sums(double *Hq, double *C, double *Hf, const float *xq, const float *xf, uint32_t nt, uint32_t d,
                     uint32_t i0, uint32_t i1);

/* The name of weight w for statistics files: the GGUF tensor its rows lie
 * in (so a fused qkv or a tied output keeps its file's name), else, for a
 * buffer the loader made, "blk.L.role" (or role when l < 0). */
void tools_weight_name(const eng_model *m, const eng_weight *w, int l, const char *role, char *out, size_t cap);

/* Copy the lower triangle of the n x n row-major h (a sum of outer
 * products kept there while summing) into its upper one. */
void tools_mirror_lower(double *h, uint32_t n);

/* Lower Cholesky factor of the n x n row-major a in place (the upper
 * triangle is left as is); -1 if a is not positive definite. */
int tools_chol_lower(double *a, uint32_t n);

#endif
