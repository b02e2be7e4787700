/* Speculative decoding over a session: a cheap drafter guesses the next
 * few tokens, the session's model checks them all in one batched forward
 * pass, and the guesses it agrees with are kept. Two drafters: a second,
 * smaller model with the same vocabulary (its own KV cache, run on the
 * target's worker pool), and prompt lookup (the tokens that followed the
 * last earlier occurrence of the conversation's final n-gram).
 *
 * The output is exactly plain decoding's: greedy gives the same tokens;
 * with sampling, a draft token x is accepted with probability
 * min(1, p(x)/q(x)) and a rejection draws from max(0, p - q) normalised,
 * where p and q are the target's and the drafter's final distributions
 * after the session's whole sampler chain (q is one-hot for lookup), so
 * every token has plain sampling's distribution. Random numbers come from
 * the session's seeded sampler (the draft model's draws from a stream
 * seeded from the same seed), so seeded runs repeat. */
#ifndef NIBBLE_ENG_SPEC_H
#define NIBBLE_ENG_SPEC_H

#include <stdint.h>

#include "err.h"
#include "session.h"

/* The most tokens one step drafts: the check of pending + drafts runs as
 * one batch of the forward pass (32 positions), which is also how far
 * back a sliding-window layer's ring can always be rolled back. */
#define ENG_SPEC_MAX 31
#define ENG_SPEC_DEFAULT_MAX 8

typedef struct eng_spec_opts {
    eng_model *draft;   /* draft model (borrowed; outlives the eng_spec), or NULL */
    uint32_t draft_max; /* tokens drafted per step, 1..ENG_SPEC_MAX (0: ENG_SPEC_DEFAULT_MAX) */
    uint32_t draft_min; /* a shorter draft is not checked: a plain step instead (0: any) */
    uint32_t lookup;    /* prompt lookup with n-grams of this many tokens (0: off); tried before the model */
} eng_spec_opts;

typedef struct eng_spec_stats {
    uint64_t steps;    /* batched checks (one target forward pass each) */
    uint64_t drafted;  /* draft tokens checked */
    uint64_t accepted; /* of those, kept */
    uint64_t tokens;   /* tokens produced */
} eng_spec_stats;

typedef struct eng_spec eng_spec;

/* The draft model must share the target's vocabulary: the same count and
 * the same text for every id. Otherwise ENG_EINVAL with a message naming
 * the first differing id and both texts. */
int eng_spec_check_vocab(const eng_model *target, const eng_model *draft, eng_err *e);
/* Speculation over the session (borrowed; outlives the eng_spec). At
 * least one drafter (draft or lookup) must be given. Makes the draft
 * model's context (the session's size) on the session's worker pool. */
int eng_spec_new(eng_session *s, const eng_spec_opts *o, eng_spec **out, eng_err *e);
void eng_spec_free(eng_spec *sp);

/* The next tokens, at most max (>= 1), into out; *n_out says how many.
 * Needs logits in the session (a prompt fed, as eng_session_next). The
 * last token produced is held back, not yet in the KV cache: it goes in
 * with the next step's check, or with eng_spec_flush, which must run
 * before the session is used by anything else. Returns 1 if the last
 * token ends the turn (end-of-generation; it is not fed), 0 otherwise,
 * or a negative code (context full, stopped). */
int eng_spec_next(eng_spec *sp, uint32_t max, int32_t *out, uint32_t *n_out, eng_err *e);
/* Where the next token goes: the session's position plus the held-back
 * token. At the context size the context is full, as eng_session_pos at
 * it is for plain decoding: a further call gives an end-of-turn token or
 * fails with "context full" and gives nothing, as eng_session_next does.
 * A step never gives a token that plain decoding would sample at a full
 * context and drop (it may then give fewer tokens than it checked). */
uint32_t eng_spec_pos(const eng_spec *sp);
/* Feed the held-back token, leaving the session as plain decoding would
 * (the token in the cache, its logits current). Nothing to do: 0. */
int eng_spec_flush(eng_spec *sp, eng_err *e);
/* Forget the held-back token (the session was rewound or reset). */
void eng_spec_drop(eng_spec *sp);
const eng_spec_stats *eng_spec_get_stats(const eng_spec *sp);
void eng_spec_reset_stats(eng_spec *sp);

#endif
