/* Measurements behind `nibble bench`: prompt (pp) and decode (tg) speed
 * of a model on a kernel set and thread count, and the machine's memory
 * read bandwidth, which bounds decode speed (the roofline). */
#ifndef NIBBLE_ENG_BENCH_H
#define NIBBLE_ENG_BENCH_H

#include <stdint.h>

#include "model.h"

typedef struct eng_bench_stat {
    double mean, sd;  /* tokens per second over the repetitions */
    int reps;
} eng_bench_stat;

/* Read bandwidth in GB/s with n_threads readers over a buffer of `bytes`
 * (bigger than the caches), best of a few passes. <= 0 on failure. */
double eng_bench_membw(int n_threads, size_t bytes);

/* The int8 multiply-add peak of the active kernel set: its dot-product
 * instruction in independent chains on n_threads threads at once
 * (simd_int8_peak_run), best of a few passes; billions per second. */
double eng_bench_int8_peak(int n_threads);

/* The float multiply-add peak of the active kernel set, as above
 * (simd_fma_peak_run): the instruction its attention's sums run on. */
double eng_bench_fma_peak(int n_threads);

/* The in-cache int8 multiply-add rate of the active kernel set: the
 * weight type's prefill kernel (packed rows where the set has them, else
 * plain rows) over PEAK_ROWS x PEAK_COLS weights that stay in each core's
 * L2, against a batch of prefill's width of int8 activation rows, on
 * n_threads threads at once, best of a few passes. Returns billions of
 * multiply-adds per second (<= 0: the type has no kernel, or no memory):
 * what the type's kernel makes of the instruction peak above. */
double eng_bench_peak(int type, int n_threads);

/* Multiply-adds of one prompt token's matrix products (the weights a
 * token runs, less the embedding table, and less the output matrix,
 * which a prompt runs only for its last token); attention not counted
 * (eng_bench_attn_macs_per_prompt_token). */
uint64_t eng_bench_macs_per_prompt_token(const eng_model *m);

/* Multiply-adds of one prompt token's attention scores, averaged over a
 * prompt of n_prompt tokens after depth already in the context (each
 * token's query heads against every position its layer lets it see:
 * the ones before it and itself, or the layer's window). Its V sums are
 * as many again. */
uint64_t eng_bench_attn_macs_per_prompt_token(const eng_model *m, uint32_t depth, uint32_t n_prompt);

/* eng_model_bytes_per_token (model.h), under the name app/cmd_bench.c
 * calls. */
uint64_t eng_bench_bytes_per_token(const eng_model *m);

/* Memory while the tests ran. */
typedef struct eng_bench_mem {
    uint64_t rss;      /* largest resident set seen after a run (0: cannot be read here) */
    uint64_t kv_bytes; /* the context's K and V caches */
    uint64_t kv_full_bytes; /* the same if every layer kept every position (more where layers have sliding windows) */
    uint64_t budget;   /* what decoding may use: file + KV cache + 64 MB + pack_extra */
    uint64_t pack_extra; /* eng_model_pack_extra_bytes at the run */
    uint64_t kv_read_bytes; /* the K and V bytes one decode step reads halfway through tg (depth +
                             * n_gen/2 positions; a windowed layer at most its ring), for the roofline */
} eng_bench_mem;

/* pp: n_prompt tokens as one prefill; tg: n_gen single-token steps after
 * one warm-up token; both after n_depth tokens already in the context
 * (evaluated once, not timed; 0: from an empty context), so tg at depth
 * measures decode with a long cache to attend to. Token ids are seeded
 * random ids. reps repetitions, after one warm-up run of each. A zero
 * count skips that test. mem (may be NULL) gets the memory figures. */
int eng_bench_run(eng_model *m, int n_threads, int n_depth, int n_prompt, int n_gen, int reps, eng_bench_stat *pp,
                  eng_bench_stat *tg, eng_bench_mem *mem, eng_err *e);
/* eng_bench_run with the K and V caches in these types (enum eng_kv_type). */
int eng_bench_run_kv(eng_model *m, int n_threads, int type_k, int type_v, int n_depth, int n_prompt, int n_gen,
                     int reps, eng_bench_stat *pp, eng_bench_stat *tg, eng_bench_mem *mem, eng_err *e);

/* Load time, as a user waits for it: open path (map, check, build the
 * tokenizer) and make a context of the default size (open_ms), then run
 * the first token, the BOS or id 0, to its logits (first_ms, counted from
 * the start too). Best of reps tries; meant for a file in the page cache,
 * so the first try reads it there. */
typedef struct eng_bench_load {
    double open_ms, first_ms;
} eng_bench_load;
/* mo: the options the model opens with (NULL: defaults) */
int eng_bench_load_time(const char *path, const eng_model_opts *mo, int n_threads, int reps, eng_bench_load *out,
                        eng_err *e);

/* Speculative decoding against plain decoding (issue 23): the prompt
 * text fed once, then greedy decode of n_gen tokens plainly and with the
 * drafter, in turns, reps times after one warm-up of each. tps counts the
 * tokens produced (the effective rate). */
typedef struct eng_bench_spec_opts {
    const char *prompt;    /* text (BOS added) */
    eng_model *draft;      /* draft model, or NULL */
    uint32_t draft_max, draft_min, lookup; /* as eng_spec_opts (spec.h) */
    int n_gen, reps, n_threads;
    uint32_t n_ctx;        /* 0: the model's default */
} eng_bench_spec_opts;
typedef struct eng_bench_spec_result {
    eng_bench_stat plain, spec;       /* tokens per second */
    uint64_t checks, drafted, accepted; /* over the timed speculative runs */
    uint32_t prompt_tokens;
    int same;                          /* the speculative tokens were the plain ones (greedy: must be) */
} eng_bench_spec_result;
int eng_bench_spec(eng_model *m, const eng_bench_spec_opts *o, eng_bench_spec_result *res, eng_err *e);

#endif
