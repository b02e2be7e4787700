/* Sampler: repetition penalty over a window, top-k, top-p, min-p,
 * temperature, then a seeded draw; greedy (argmax) when temperature <= 0.
 * Owns its probability buffer; never changes the caller's logits. */
#ifndef NIBBLE_ENG_SAMPLER_H
#define NIBBLE_ENG_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

typedef struct eng_sampler_params {
    float temp;           /* 0 or less: greedy */
    int32_t top_k;        /* 0: off */
    float top_p;          /* 1: off */
    float min_p;          /* 0: off */
    float repeat_penalty; /* 1: off */
    int32_t repeat_last_n;/* window of recent tokens the penalty looks at */
    uint64_t seed;
} eng_sampler_params;

/* Defaults: temp 0.8, top-k 40, top-p 0.95, min-p 0.05, penalty 1.0 over 64. */
eng_sampler_params eng_sampler_defaults(void);
/* NULL-free validation: returns a message for the first bad field, or NULL. */
const char *eng_sampler_check(const eng_sampler_params *p);

typedef struct eng_sampler eng_sampler;

eng_sampler *eng_sampler_new(uint32_t n_vocab, const eng_sampler_params *p);
void eng_sampler_free(eng_sampler *s);
/* New settings take effect at the next draw; the random stream is reseeded
 * only if the seed changed. */
void eng_sampler_set(eng_sampler *s, const eng_sampler_params *p);
const eng_sampler_params *eng_sampler_get(const eng_sampler *s);
/* Pick the next token from n_vocab logits; history holds the n_hist most
 * recent tokens (for the repetition penalty). */
int32_t eng_sampler_sample(eng_sampler *s, const float *logits, const int32_t *history, size_t n_hist);

/* For speculative decoding, which must compare the distributions that
 * eng_sampler_sample draws from: */
/* The final distribution eng_sampler_sample would draw from (after the
 * penalty, top-k, top-p, min-p and temperature) as n_vocab probabilities
 * into probs (zero outside the kept tokens; one-hot at the argmax when
 * greedy). Uses no randomness. */
void eng_sampler_probs(eng_sampler *s, const float *logits, const int32_t *history, size_t n_hist, float *probs);
/* A uniform number in [0, 1) from the sampler's seeded stream. */
double eng_sampler_uniform(eng_sampler *s);
/* Draw an index in proportion to the n_vocab non-negative weights w (they
 * need not sum to 1), from the seeded stream; -1 if no weight is positive. */
int32_t eng_sampler_draw(eng_sampler *s, const float *w);

#endif
