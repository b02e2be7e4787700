#include "session.h"

#include "model.h"

#include <stdlib.h>
#include <string.h>

struct eng_session {
    eng_model *m;
    eng_ctx *ctx;
    eng_sampler *smp;
    int32_t *hist;   /* tokens in the context, n_ctx */
    float *logits;   /* after the last fed token */
    int have_logits;
    int32_t *tokbuf; /* scratch for tokenizing */
    size_t tokcap;
};

int eng_session_new(eng_model *m, uint32_t n_ctx, int n_threads, const eng_sampler_params *sp, eng_session **out,
                    eng_err *e)
{
    eng_ctx_opts o = {.n_ctx = n_ctx, .n_threads = n_threads};
    return eng_session_new_opts(m, &o, sp, out, e);
}

int eng_session_new_opts(eng_model *m, const eng_ctx_opts *o, const eng_sampler_params *sp, eng_session **out,
                         eng_err *e)
{
    *out = NULL;
    const char *bad = eng_sampler_check(sp);
    if (bad)
        return eng_errf(e, ENG_EINVAL, "%s", bad);
    eng_session *s = calloc(1, sizeof *s);
    if (!s)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    s->m = m;
    int r = eng_ctx_new_opts(m, o, &s->ctx, e);
    if (r) {
        free(s);
        return r;
    }
    uint32_t nv = eng_model_get_info(m)->n_vocab;
    s->smp = eng_sampler_new(nv, sp);
    s->hist = malloc(eng_ctx_size(s->ctx) * sizeof *s->hist);
    s->logits = malloc(nv * sizeof *s->logits);
    if (!s->smp || !s->hist || !s->logits) {
        eng_session_free(s);
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    }
    *out = s;
    return 0;
}

void eng_session_free(eng_session *s)
{
    if (!s)
        return;
    eng_ctx_free(s->ctx);
    eng_sampler_free(s->smp);
    free(s->hist);
    free(s->logits);
    free(s->tokbuf);
    free(s);
}

int eng_session_feed(eng_session *s, const int32_t *tokens, uint32_t n, eng_err *e)
{
    uint32_t pos = eng_ctx_pos(s->ctx);
    if (n == 0)
        return 0;
    int r = eng_ctx_eval(s->ctx, tokens, n, s->logits, 0, e);
    uint32_t now = eng_ctx_pos(s->ctx);
    memcpy(s->hist + pos, tokens, (now - pos) * sizeof *tokens);
    if (r == ENG_ESTOPPED) {
        /* a partial prompt leaves no usable logits: drop it */
        eng_ctx_truncate(s->ctx, pos);
        s->have_logits = 0;
        return eng_errf(e, ENG_ESTOPPED, "stopped");
    }
    if (r == 0)
        s->have_logits = 1;
    return r;
}

int eng_session_feed_text(eng_session *s, const char *text, int add_bos, eng_err *e)
{
    const eng_tok *tk = eng_model_tok(s->m);
    size_t len = strlen(text);
    int n = eng_tok_encode(tk, text, len, add_bos, 0, s->tokbuf, s->tokcap);
    if (n < 0)
        return eng_errf(e, n, "cannot tokenize the text");
    if ((size_t)n > s->tokcap) {
        int32_t *b = realloc(s->tokbuf, (size_t)n * sizeof *b);
        if (!b)
            return eng_errf(e, ENG_ENOMEM, "out of memory");
        s->tokbuf = b;
        s->tokcap = (size_t)n;
        n = eng_tok_encode(tk, text, len, add_bos, 0, s->tokbuf, s->tokcap);
    }
    return eng_session_feed(s, s->tokbuf, (uint32_t)n, e);
}

int eng_session_next(eng_session *s, int32_t *tok, eng_err *e)
{
    if (!s->have_logits)
        return eng_errf(e, ENG_EINVAL, "nothing to continue from: feed a prompt first");
    uint32_t pos = eng_ctx_pos(s->ctx);
    int32_t t = eng_sampler_sample(s->smp, s->logits, s->hist, pos);
    *tok = t;
    if (eng_tok_is_eog(eng_model_tok(s->m), t))
        return 1;
    if (pos >= eng_ctx_size(s->ctx))
        return eng_errf(e, ENG_EINVAL, "context full (%u tokens)", pos);
    return eng_session_feed(s, &t, 1, e);
}

int eng_session_feed_all(eng_session *s, const int32_t *tokens, uint32_t n, float *all_logits, eng_err *e)
{
    uint32_t pos = eng_ctx_pos(s->ctx);
    if (n == 0)
        return eng_errf(e, ENG_EINVAL, "no tokens to evaluate");
    int r = eng_ctx_eval(s->ctx, tokens, n, all_logits, 1, e);
    if (r) {
        eng_ctx_truncate(s->ctx, pos);
        s->have_logits = 0;
        return r;
    }
    memcpy(s->hist + pos, tokens, n * sizeof *tokens);
    memcpy(s->logits, all_logits + (size_t)(n - 1) * eng_model_get_info(s->m)->n_vocab,
           eng_model_get_info(s->m)->n_vocab * sizeof *s->logits);
    s->have_logits = 1;
    return 0;
}

uint32_t eng_session_keep(eng_session *s, uint32_t pos, const float *logits)
{
    uint32_t now = eng_ctx_truncate(s->ctx, pos);
    s->have_logits = now == pos && logits;
    if (s->have_logits && logits != s->logits)
        memcpy(s->logits, logits, eng_model_get_info(s->m)->n_vocab * sizeof *s->logits);
    return now;
}

eng_model *eng_session_model(eng_session *s) { return s->m; }

void eng_session_rewind(eng_session *s, uint32_t pos)
{
    eng_ctx_truncate(s->ctx, pos);
    s->have_logits = 0;
}

uint32_t eng_session_pos(const eng_session *s) { return eng_ctx_pos(s->ctx); }
uint32_t eng_session_ctx_size(const eng_session *s) { return eng_ctx_size(s->ctx); }
const int32_t *eng_session_tokens(const eng_session *s) { return s->hist; }
eng_sampler *eng_session_sampler(eng_session *s) { return s->smp; }
eng_ctx *eng_session_ctx(eng_session *s) { return s->ctx; }
const float *eng_session_logits(const eng_session *s) { return s->have_logits ? s->logits : NULL; }
