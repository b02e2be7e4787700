/* A session: one conversation's state over a model — its context (KV
 * cache), the tokens in it, the sampler, and the last logits — with the
 * two steps every front end needs: feed tokens, produce the next one. */
#ifndef NIBBLE_ENG_SESSION_H
#define NIBBLE_ENG_SESSION_H

#include <stdint.h>

#include "err.h"
#include "sampler.h"

/* the model and its context (model.h, engine/model), borrowed here; a
 * front end that makes sessions links the model library itself */
typedef struct eng_model eng_model;
typedef struct eng_ctx eng_ctx;

typedef struct eng_session eng_session;

/* n_ctx / n_threads: 0 for the defaults (see eng_ctx_new). The model is
 * borrowed and must outlive the session. */
int eng_session_new(eng_model *m, uint32_t n_ctx, int n_threads, const eng_sampler_params *sp, eng_session **out,
                    eng_err *e);
/* eng_session_new with the context's options (model.h: eng_ctx_opts,
 * the cache types among them). */
typedef struct eng_ctx_opts eng_ctx_opts;
int eng_session_new_opts(eng_model *m, const eng_ctx_opts *o, const eng_sampler_params *sp, eng_session **out,
                         eng_err *e);
void eng_session_free(eng_session *s);

/* Run tokens through the model (prefill), keeping them in the history.
 * Fails with a message if they do not fit in the context. */
int eng_session_feed(eng_session *s, const int32_t *tokens, uint32_t n, eng_err *e);
/* Tokenize text (no BOS unless add_bos) and feed it. */
int eng_session_feed_text(eng_session *s, const char *text, int add_bos, eng_err *e);
/* Sample the next token from the last logits. Returns 1 and *tok if it ends
 * the turn (end-of-generation token, not fed); 0 after feeding it; or a
 * negative code (e.g. the context is full). Needs a prior feed. */
int eng_session_next(eng_session *s, int32_t *tok, eng_err *e);

/* Forget everything from position pos on (0 = all). A model with
 * sliding-window layers may have to forget more (eng_ctx_truncate):
 * eng_session_pos says where the session continues. */
void eng_session_rewind(eng_session *s, uint32_t pos);
uint32_t eng_session_pos(const eng_session *s);

/* For speculative decoding (spec.h): feed n tokens (at least 1) and write
 * every one's logits to all_logits (n x n_vocab floats); the last row
 * becomes the session's logits. On failure nothing is kept. */
int eng_session_feed_all(eng_session *s, const int32_t *tokens, uint32_t n, float *all_logits, eng_err *e);
/* Forget positions >= pos, as eng_session_rewind, and make logits (the
 * n_vocab logits that followed position pos - 1, copied; may be NULL)
 * the session's. Returns the position the session continues from: pos,
 * or less where a sliding window forced more to go (then no logits). */
uint32_t eng_session_keep(eng_session *s, uint32_t pos, const float *logits);
eng_model *eng_session_model(eng_session *s);
uint32_t eng_session_ctx_size(const eng_session *s);
const int32_t *eng_session_tokens(const eng_session *s);
eng_sampler *eng_session_sampler(eng_session *s);
eng_ctx *eng_session_ctx(eng_session *s);
const float *eng_session_logits(const eng_session *s);

#endif
