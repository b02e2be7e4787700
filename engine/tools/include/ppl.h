/* Perplexity and, against a base model, KL divergence, measured the way
 * llama.cpp's llama-perplexity measures them, so the figures compare:
 * the whole text is tokenized once (BOS first), cut into consecutive
 * windows of n_ctx tokens, each window's first token replaced by BOS and
 * run as one sequence, and only the second half of each window scored
 * (the log-probability of each next token from position n_ctx/2 on). */
#ifndef NIBBLE_ENG_PPL_H
#define NIBBLE_ENG_PPL_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "model.h"

typedef struct eng_ppl_opts {
    uint32_t n_ctx;       /* window; 0: 512, capped at the model's training context */
    uint32_t max_chunks;  /* 0: every whole window in the text */
    int threads;          /* 0: physical cores */
    int type_k, type_v;   /* the model's K and V cache types (enum eng_kv_type; 0: f16); the base's stay f16 */
    eng_model *base;      /* optional: the reference model for KL (same vocabulary), borrowed */
    /* called after each window with windows done / total (optional) */
    void (*progress)(void *user, uint32_t done, uint32_t total, double ppl_so_far);
    void *user;
} eng_ppl_opts;

typedef struct eng_ppl_result {
    uint32_t n_ctx, n_chunks;
    uint64_t n_text_tokens, n_scored;
    double ppl, ppl_err;          /* exp(mean NLL) and its standard error */
    double nll;                   /* mean negative log-likelihood (nats) */
    int has_base;
    double base_ppl, base_ppl_err;
    double kl, kl_err;            /* mean KL(base || model) per scored token (nats), standard error */
    double kl_max, kl_p99;        /* largest and 99th percentile token KL */
    double top1;                  /* fraction of scored tokens whose argmax agrees with the base */
    double seconds;               /* wall time of the evaluation (not the tokenization) */
} eng_ppl_result;

/* Tokenize text with m's tokenizer and measure. Errors: the text is too
 * short for one window (the message says how many tokens it has and
 * needs), the base model's vocabulary differs, out of memory. */
int eng_ppl_run(eng_model *m, const char *text, size_t len, const eng_ppl_opts *o, eng_ppl_result *r, eng_err *e);

#endif
