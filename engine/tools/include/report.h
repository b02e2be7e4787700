/* Sweep results: the rows `nibble quant-sweep` measures (quantized,
 * pruned, pruned then quantized, and the unpruned base), written as JSON
 * (one run per line, so runs append to one file) and read back by
 * `nibble report`, which draws them as one self-contained HTML page.
 *
 * The JSON schema (docs/PRUNING.md, "The results file"): each line is
 *   {"schema": "nibble-sweep/1", "model": S, "text": S, "calib": S|null,
 *    "ctx": N, "chunks": N, "threads": N, "base_params": N,
 *    "rows": [ROW, ...]}
 * and each ROW
 *   {"name": S, "kind": "base"|"quant"|"prune", "type": S, "method":
 *    "rtn"|"awq"|"none", "heads": R, "neurons": R, "bytes": N, "params":
 *    N, "bpw": R, "ppl": R, "ppl_err": R, "kl": R, "kl_err": R, "top1":
 *    R, "tok_s": R}
 * Readers ignore keys they do not know. */
#ifndef NIBBLE_ENG_REPORT_H
#define NIBBLE_ENG_REPORT_H

#include <stdio.h>

#include "err.h"

typedef struct eng_result_row {
    char name[48];   /* "q4_0", "heads 0.2", "neurons 0.3 + q4_0" */
    char kind[8];    /* "base", "quant", "prune" (pruned, maybe quantized after) */
    char type[16];   /* weight type of the file ("f32", "q4_0", ...) */
    char method[16]; /* "rtn", "awq", "gptq", "awq+gptq", "none" */
    double heads, neurons; /* pruning shares asked (0: none) */
    double bytes, params, bpw, ppl, ppl_err, kl, kl_err, top1, tok_s;
    int run;         /* index of its run (set by the reader) */
} eng_result_row;

typedef struct eng_result_run {
    char model[256], text[256], calib[256];
    int ctx, chunks, threads;
    double base_params;
} eng_result_run;

/* One run as one JSON line on f. */
void eng_results_write_json(FILE *f, const eng_result_run *run, const eng_result_row *rows, int n);

/* All runs read so far. */
typedef struct eng_results {
    eng_result_run *runs;
    int n_runs;
    eng_result_row *rows;
    int n_rows;
} eng_results;

/* Add every line of a results file's text (len bytes) to r. Errors name
 * the line and what is wrong (bad JSON, wrong schema, a row without a
 * number it needs); nothing of a bad file is kept. */
int eng_results_parse(eng_results *r, const char *text, size_t len, const char *what, eng_err *e);
void eng_results_free(eng_results *r);

/* The dashboard: one HTML page (inline CSS and SVG, a few lines of
 * script to sort the table, nothing fetched). */
int eng_results_html(FILE *f, const eng_results *r, const char *title);

#endif
