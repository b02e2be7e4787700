/* Speculative decoding (spec.h). One step, with the session's KV cache
 * holding positions 0..pos-1 and the token `pending` sampled but not yet
 * fed:
 *   1. draft up to k tokens d[0..nd) following seq = history + pending,
 *      with their distributions q[i] (one-hot for lookup);
 *   2. feed pending + d as one batch with every position's logits: row i
 *      gives p for d[i], row nd the bonus token's;
 *   3. accept d[i] while u < p(d[i]) / q(d[i]); at the first rejection
 *      draw from max(0, p - q), or after nd acceptances draw the bonus
 *      from p: that token is the new pending;
 *   4. roll back the cache to pos + 1 + accepted (the draft model's to
 *      what it shares with the new sequence).
 * A step that drafts nothing is a plain decode step (a batch of one). */
#include "spec.h"

#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "sampler.h"
#include "tokenizer.h"

struct eng_spec {
    eng_session *t;       /* target (borrowed) */
    eng_session *d;       /* draft model's session, or NULL */
    eng_spec_opts o;
    uint32_t n_vocab, n_ctx;
    int32_t *seq;         /* [n_ctx + 1] the session's tokens, pending, drafts */
    int has_pending;
    float *logits;        /* [ENG_SPEC_MAX + 1][n_vocab] the check's rows */
    float *q;             /* [ENG_SPEC_MAX][n_vocab] the draft model's distributions */
    float *p;             /* [n_vocab] the target's distribution at one position */
    eng_spec_stats st;
};

int eng_spec_check_vocab(const eng_model *target, const eng_model *draft, eng_err *e)
{
    const eng_tok *a = eng_model_tok(target), *b = eng_model_tok(draft);
    uint32_t na = eng_tok_n_vocab(a), nb = eng_tok_n_vocab(b);
    uint32_t n = na < nb ? na : nb;
    for (uint32_t i = 0; i < n; i++) {
        eng_str x = eng_tok_text(a, (int32_t)i), y = eng_tok_text(b, (int32_t)i);
        if (x.len != y.len || memcmp(x.ptr, y.ptr, x.len))
            return eng_errf(e, ENG_EINVAL,
                            "the draft model's vocabulary differs from the model's at token id %u: '%.*s' in the "
                            "model, '%.*s' in the draft",
                            i, (int)(x.len < 64 ? x.len : 64), x.ptr, (int)(y.len < 64 ? y.len : 64), y.ptr);
    }
    if (na != nb)
        return eng_errf(e, ENG_EINVAL,
                        "the draft model's vocabulary has %u tokens, the model's %u (the first %u agree; token id %u "
                        "is only in the %s)",
                        nb, na, n, n, na > nb ? "model" : "draft");
    if (eng_model_get_info(target)->n_vocab != eng_model_get_info(draft)->n_vocab)
        return eng_errf(e, ENG_EINVAL, "the draft model's output has %u logits, the model's %u",
                        eng_model_get_info(draft)->n_vocab, eng_model_get_info(target)->n_vocab);
    return 0;
}

int eng_spec_new(eng_session *s, const eng_spec_opts *o, eng_spec **out, eng_err *e)
{
    *out = NULL;
    if (!o->draft && !o->lookup)
        return eng_errf(e, ENG_EINVAL, "speculation needs a draft model or a lookup length");
    if (o->draft_max > ENG_SPEC_MAX)
        return eng_errf(e, ENG_EINVAL, "draft length %u is over the most, %d", o->draft_max, ENG_SPEC_MAX);
    eng_model *m = eng_session_model(s);
    if (o->draft) {
        int r = eng_spec_check_vocab(m, o->draft, e);
        if (r)
            return r;
    }
    eng_spec *sp = calloc(1, sizeof *sp);
    if (!sp)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    sp->t = s;
    sp->o = *o;
    if (!sp->o.draft_max)
        sp->o.draft_max = ENG_SPEC_DEFAULT_MAX;
    sp->n_vocab = eng_model_get_info(m)->n_vocab;
    sp->n_ctx = eng_session_ctx_size(s);
    sp->seq = malloc(((size_t)sp->n_ctx + 1) * sizeof *sp->seq);
    sp->logits = malloc((size_t)(ENG_SPEC_MAX + 1) * sp->n_vocab * sizeof *sp->logits);
    sp->p = malloc((size_t)sp->n_vocab * sizeof *sp->p);
    if (o->draft)
        sp->q = malloc((size_t)ENG_SPEC_MAX * sp->n_vocab * sizeof *sp->q);
    if (!sp->seq || !sp->logits || !sp->p || (o->draft && !sp->q)) {
        uint32_t nv = sp->n_vocab;
        eng_spec_free(sp);
        return eng_errf(e, ENG_ENOMEM, "out of memory for speculation over %u tokens", nv);
    }
    if (o->draft) {
        /* one thread of its own, then the target's pool (shared again
         * before every use: the target's pool changes with its threads) */
        int r = eng_session_new(o->draft, sp->n_ctx, 1, eng_sampler_get(eng_session_sampler(s)), &sp->d, e);
        if (!r && eng_ctx_share_pool(eng_session_ctx(sp->d), eng_session_ctx(s)))
            r = eng_errf(e, ENG_ENOMEM, "out of memory");
        if (r) {
            r = eng_err_prefix(e, r, "draft model");
            eng_spec_free(sp);
            return r;
        }
    }
    *out = sp;
    return 0;
}

void eng_spec_free(eng_spec *sp)
{
    if (!sp)
        return;
    eng_session_free(sp->d);
    free(sp->seq);
    free(sp->logits);
    free(sp->q);
    free(sp->p);
    free(sp);
}

const eng_spec_stats *eng_spec_get_stats(const eng_spec *sp) { return &sp->st; }
void eng_spec_reset_stats(eng_spec *sp) { memset(&sp->st, 0, sizeof sp->st); }
void eng_spec_drop(eng_spec *sp) { sp->has_pending = 0; }
uint32_t eng_spec_pos(const eng_spec *sp) { return eng_session_pos(sp->t) + (uint32_t)sp->has_pending; }

/* Prompt lookup: the most recent earlier occurrence of the last n tokens
 * of seq[0..len); the k tokens that followed it into d. */
static uint32_t draft_lookup(const int32_t *seq, uint32_t len, uint32_t n, uint32_t k, int32_t *d)
{
    if (n == 0 || len <= n)
        return 0;
    const int32_t *tail = seq + len - n;
    for (uint32_t j = len - n; j-- > 0;) {
        if (seq[j] != tail[0] || memcmp(seq + j, tail, n * sizeof *seq))
            continue;
        /* a match less than k tokens back continues into the draft
         * itself: a repeating stretch is drafted whole */
        for (uint32_t i = 0; i < k; i++) {
            uint32_t src = j + n + i;
            d[i] = src < len ? seq[src] : d[src - len];
        }
        return k;
    }
    return 0;
}

/* The draft model: bring its cache to seq[0..len) (it keeps what it
 * shares with seq), then draw up to k tokens from its distributions
 * (kept in sp->q) into seq[len..] and d. */
static int draft_model(eng_spec *sp, uint32_t len, uint32_t k, int32_t *d, uint32_t *nd, eng_err *e)
{
    eng_session *ds = sp->d;
    *nd = 0;
    if (eng_ctx_share_pool(eng_session_ctx(ds), eng_session_ctx(sp->t)))
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    /* the target's settings, a stream of its own (reseeded only when the
     * target's seed changes) */
    eng_sampler_params p = *eng_sampler_get(eng_session_sampler(sp->t));
    p.seed ^= 0x6a09e667f3bcc908ull;
    eng_sampler *smp = eng_session_sampler(ds);
    eng_sampler_set(smp, &p);
    uint32_t have = eng_session_pos(ds);
    const int32_t *dt = eng_session_tokens(ds);
    uint32_t same = 0;
    while (same < have && same < len && dt[same] == sp->seq[same])
        same++;
    if (same == len && len > 0)
        same = len - 1; /* its logits after seq[len-1] are not kept: run the last token again */
    if (same < have)
        same = eng_session_keep(ds, same, NULL);
    int r = eng_session_feed(ds, sp->seq + same, len - same, e);
    if (r)
        return r;
    const eng_tok *tk = eng_model_tok(eng_session_model(ds));
    for (uint32_t i = 0; i < k; i++) {
        float *q = sp->q + (size_t)i * sp->n_vocab;
        eng_sampler_probs(smp, eng_session_logits(ds), sp->seq, len + i, q);
        int32_t x = eng_sampler_draw(smp, q);
        if (x < 0)
            break;
        d[i] = x;
        sp->seq[len + i] = x;
        *nd = i + 1;
        if (eng_tok_is_eog(tk, x) || i + 1 == k)
            break;
        if ((r = eng_session_feed(ds, &x, 1, e)))
            return r;
    }
    return 0;
}

int eng_spec_flush(eng_spec *sp, eng_err *e)
{
    if (!sp->has_pending)
        return 0;
    uint32_t pos = eng_session_pos(sp->t);
    int r = eng_session_feed(sp->t, &sp->seq[pos], 1, e);
    if (r == 0)
        sp->has_pending = 0;
    return r;
}

int eng_spec_next(eng_spec *sp, uint32_t max, int32_t *out, uint32_t *n_out, eng_err *e)
{
    eng_session *t = sp->t;
    const eng_tok *tk = eng_model_tok(eng_session_model(t));
    eng_sampler *smp = eng_session_sampler(t);
    uint32_t nv = sp->n_vocab, pos = eng_session_pos(t);
    *n_out = 0;
    if (max == 0)
        return eng_errf(e, ENG_EINVAL, "no tokens asked for");
    memcpy(sp->seq, eng_session_tokens(t), pos * sizeof *sp->seq);
    if (!sp->has_pending) {
        /* the first token comes from the logits the session has, as plain */
        const float *l = eng_session_logits(t);
        if (!l)
            return eng_errf(e, ENG_EINVAL, "nothing to continue from: feed a prompt first");
        int32_t x = eng_sampler_sample(smp, l, sp->seq, pos);
        if (eng_tok_is_eog(tk, x)) {
            out[(*n_out)++] = x;
            sp->st.tokens++;
            return 1;
        }
        /* as plain decoding: a token that has no place is not given */
        if (pos >= sp->n_ctx)
            return eng_errf(e, ENG_EINVAL, "context full (%u tokens)", pos);
        out[(*n_out)++] = x;
        sp->st.tokens++;
        sp->seq[pos] = x;
        sp->has_pending = 1;
        return 0;
    }
    if (pos >= sp->n_ctx) /* cannot be: the pending token had a place */
        return eng_errf(e, ENG_EINVAL, "context full (%u tokens)", pos);
    uint32_t k = sp->o.draft_max;
    if (k > max - 1)
        k = max - 1;
    if (k > sp->n_ctx - pos - 1)
        k = sp->n_ctx - pos - 1;
    int32_t d[ENG_SPEC_MAX];
    uint32_t nd = 0, len = pos + 1;
    int onehot = 1;
    if (k && sp->o.lookup)
        nd = draft_lookup(sp->seq, len, sp->o.lookup, k, d);
    if (k && nd == 0 && sp->d) {
        int r = draft_model(sp, len, k, d, &nd, e);
        if (r)
            return r;
        onehot = 0;
    }
    if (nd < sp->o.draft_min)
        nd = 0;
    /* the check: pending and the drafts, every position's logits */
    int32_t batch[ENG_SPEC_MAX + 1];
    batch[0] = sp->seq[pos];
    memcpy(batch + 1, d, nd * sizeof *d);
    memcpy(sp->seq + len, d, nd * sizeof *d);
    int r = eng_session_feed_all(t, batch, nd + 1, sp->logits, e);
    if (r)
        return r;
    uint32_t acc = 0;
    int32_t y = -1;
    int end = 0;
    for (; acc < nd; acc++) {
        eng_sampler_probs(smp, sp->logits + (size_t)acc * nv, sp->seq, len + acc, sp->p);
        int32_t x = d[acc];
        double qx = onehot ? 1.0 : sp->q[(size_t)acc * nv + x];
        /* accept with probability min(1, p(x)/q(x)); q(x) > 0 as x was drawn from q */
        if (eng_sampler_uniform(smp) * qx < sp->p[x]) {
            out[(*n_out)++] = x;
            if (eng_tok_is_eog(tk, x)) {
                end = 1;
                break;
            }
            continue;
        }
        /* rejected: draw from the residual max(0, p - q) */
        if (onehot)
            sp->p[x] = 0;
        else
            for (uint32_t i = 0; i < nv; i++) {
                float rsd = sp->p[i] - sp->q[(size_t)acc * nv + i];
                sp->p[i] = rsd > 0 ? rsd : 0;
            }
        y = eng_sampler_draw(smp, sp->p);
        if (y < 0) { /* p == q up to rounding: then p itself */
            eng_sampler_probs(smp, sp->logits + (size_t)acc * nv, sp->seq, len + acc, sp->p);
            y = eng_sampler_draw(smp, sp->p);
        }
        break;
    }
    if (!end && acc == nd) {
        eng_sampler_probs(smp, sp->logits + (size_t)nd * nv, sp->seq, len + nd, sp->p);
        y = eng_sampler_draw(smp, sp->p);
    }
    sp->st.steps++;
    sp->st.drafted += nd;
    sp->st.accepted += acc + (uint32_t)end;
    /* keep pending and the accepted drafts (an accepted end token is not
     * kept, as plain decoding does not feed it) */
    uint32_t keep = len + acc;
    uint32_t now = eng_session_keep(t, keep, sp->logits + (size_t)acc * nv);
    if (now < keep) {
        /* a sliding window forgot more: evaluate the lost part again */
        if ((r = eng_session_feed(t, sp->seq + now, keep - now, e)))
            return r;
    }
    if (end) {
        sp->has_pending = 0;
        sp->st.tokens += *n_out;
        return 1;
    }
    if (eng_tok_is_eog(tk, y)) {
        out[(*n_out)++] = y;
        sp->st.tokens += *n_out;
        sp->has_pending = 0;
        return 1;
    }
    sp->has_pending = 0;
    if (keep >= sp->n_ctx) {
        /* The cache is full: plain decoding samples this token and then
         * has nowhere to put it, so it never shows it. Neither do we. A
         * caller that shifts the context goes on from fresh logits. */
        sp->st.tokens += *n_out;
        if (*n_out)
            return 0;
        return eng_errf(e, ENG_EINVAL, "context full (%u tokens)", keep);
    }
    out[(*n_out)++] = y;
    sp->st.tokens += *n_out;
    sp->seq[keep] = y;
    sp->has_pending = 1;
    return 0;
}
