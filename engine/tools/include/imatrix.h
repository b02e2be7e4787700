/* Importance matrices: per input column of each weight matrix, the sum of
 * the squared activations that column met on calibration text and how
 * many rows (tokens) were summed; the same statistics llama.cpp's
 * llama-imatrix collects, in its file formats, so files move between the
 * two tools both ways.
 *
 * An entry is named after the weight tensor ("blk.3.attn_q.weight"); it
 * holds n_mat matrices of n_cols values (n_mat > 1 only for the 3-D expert
 * tensors of a mixture of experts: one per expert, with its own count).
 * The importance of column c of matrix k, as quantizers use it, is
 * sums[k * n_cols + c] / counts[k] (1 where the count is 0: an expert the
 * text never reached, as llama-quantize does).
 *
 * Files:
 *  - GGUF (llama.cpp's current format): general.type = "imatrix",
 *    imatrix.datasets (string array), imatrix.chunk_count and
 *    imatrix.chunk_size (u32); per entry an f32 tensor
 *    "<name>.in_sum2" of [n_cols, n_mat] and an f32 tensor
 *    "<name>.counts" of [1, n_mat];
 *  - the legacy .dat (read only): int32 entry count; per entry an int32
 *    name length, the name, int32 ncall, int32 value count and that many
 *    floats holding (sum / count) * ncall; then optionally int32 chunk
 *    count, int32 length and the dataset name. Read as sums = values and
 *    counts = ncall, which gives the same importance. */
#ifndef NIBBLE_ENG_IMATRIX_H
#define NIBBLE_ENG_IMATRIX_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct eng_imatrix_entry {
    char *name;
    uint32_t n_cols, n_mat;
    float *sums;   /* n_mat * n_cols */
    float *counts; /* n_mat (whole numbers; f32 as the file stores them) */
} eng_imatrix_entry;

typedef struct eng_imatrix eng_imatrix;

/* The collection's options. */
typedef struct eng_imatrix_opts {
    const char *calib_path;  /* calibration text file, or: */
    const char *calib_text;  /* the text itself (calib_len bytes) */
    size_t calib_len;
    uint32_t n_ctx;          /* tokens per chunk (0: 512, llama-imatrix's default) */
    uint32_t max_chunks;     /* 0: every whole chunk of the text */
    int threads;
    int process_output;      /* also the output matrix (llama-imatrix --process-output) */
    const char *dataset;     /* recorded in imatrix.datasets (NULL: calib_path) */
    /* after each chunk: chunks done and of how many */
    void (*progress)(void *user, uint32_t done, uint32_t total);
    void *user;
} eng_imatrix_opts;

/* Run the calibration text through the model at model_path, in chunks of
 * n_ctx tokens each started with BOS (llama-imatrix's chunks), and
 * gather every weight matrix's statistics: attention q/k/v/output, FFN
 * gate/up/down, a mixture of experts' router and each expert's
 * gate/up/down (per expert), and with process_output the output matrix
 * (named token_embd.weight when the model ties it to the embedding).
 * Errors: the model cannot be opened, the text has fewer tokens than one
 * chunk, out of memory. */
int eng_imatrix_collect(const char *model_path, const eng_imatrix_opts *o, eng_imatrix **out, eng_err *e);

/* Read a file in either format (told apart by the GGUF magic). Every
 * field is checked: a bad file gives one message naming what is wrong. */
int eng_imatrix_load(const char *path, eng_imatrix **out, eng_err *e);
/* Write im as llama.cpp's GGUF imatrix (entries sorted by name), through
 * a temporary file renamed into place. */
int eng_imatrix_save(const eng_imatrix *im, const char *path, eng_err *e);
void eng_imatrix_free(eng_imatrix *im);

/* Entries (sorted by name), by index or name (NULL if absent). */
size_t eng_imatrix_count(const eng_imatrix *im);
const eng_imatrix_entry *eng_imatrix_at(const eng_imatrix *im, size_t i);
const eng_imatrix_entry *eng_imatrix_find(const eng_imatrix *im, const char *name);
/* The metadata: chunks the statistics came from, tokens per chunk (0 when
 * unknown: the legacy format), datasets (n of them; borrowed). */
uint32_t eng_imatrix_chunk_count(const eng_imatrix *im);
uint32_t eng_imatrix_chunk_size(const eng_imatrix *im);
const char *const *eng_imatrix_datasets(const eng_imatrix *im, size_t *n);
/* 1 if the file read was the legacy .dat format. */
int eng_imatrix_is_legacy(const eng_imatrix *im);

/* The importance of entry x's matrix k (n_cols values, sums / count; 1
 * where the count is 0) into out. */
void eng_imatrix_importance(const eng_imatrix_entry *x, uint32_t k, float *out);

#endif
