/* nibble imatrix: importance statistics of a model's weight matrices on a
 * calibration text, written in llama.cpp's GGUF imatrix format
 * (engine/tools/imatrix.c); with --show, a summary of an existing file. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "files.h"
#include "imatrix.h"
#include "ui.h"

static const char usage[] =
    "usage: nibble imatrix [-m MODEL] -f CALIB.txt [-o imatrix.gguf] [--chunks N] [-c CTX] [-t N]\n"
    "       nibble imatrix --show FILE\n"
    "\n"
    "Run CALIB.txt through MODEL and record, for every weight matrix (attention\n"
    "q/k/v/output, FFN gate/up/down, a mixture of experts' router and each\n"
    "expert's gate/up/down), the sum over tokens of each input column's squared\n"
    "activation and the number of tokens: the statistics llama.cpp's llama-imatrix\n"
    "collects, in its GGUF imatrix format, so that 'nibble quantize --imatrix' and\n"
    "llama-quantize --imatrix both read the file (and nibble reads theirs).\n"
    "The text is tokenized once and cut into chunks of CTX tokens, each started\n"
    "with BOS, as llama-imatrix does.\n"
    "\n"
    "  -o FILE             where to write (default imatrix.gguf)\n"
    "  -c CTX              tokens per chunk (default 512)\n"
    "  --chunks N          use at most the first N chunks (default: all whole chunks)\n"
    "  --process-output    also the output matrix (as llama-imatrix --process-output)\n"
    "  --show FILE         print what an imatrix file holds (GGUF or the legacy\n"
    "                      .dat format) instead of collecting\n"
    "  -t N, --kernel K    threads and kernel set for the calibration pass\n"
    "  -q                  no progress bar\n";

static void on_chunk(void *user, uint32_t done, uint32_t total)
{
    char what[48];
    snprintf(what, sizeof what, "%u/%u chunks", done, total);
    app_progress(user, (double)done / total, what);
}

static int show(const char *path)
{
    eng_err e;
    eng_imatrix *im = NULL;
    if (eng_imatrix_load(path, &im, &e)) {
        fprintf(stderr, "nibble imatrix: %s\n", e.msg);
        return 1;
    }
    size_t nd;
    const char *const *ds = eng_imatrix_datasets(im, &nd);
    ui_term_printf(stdout, "%s: %s format, %zu entries, %u chunks of %u tokens\n", path,
                   eng_imatrix_is_legacy(im) ? "legacy .dat" : "GGUF", eng_imatrix_count(im),
                   eng_imatrix_chunk_count(im), eng_imatrix_chunk_size(im));
    for (size_t i = 0; i < nd; i++)
        ui_term_printf(stdout, "dataset: %s\n", ds[i]);
    printf("%-36s %8s %6s %10s %12s %12s\n", "tensor", "columns", "mats", "count", "mean imp", "max imp");
    for (size_t i = 0; i < eng_imatrix_count(im); i++) {
        const eng_imatrix_entry *x = eng_imatrix_at(im, i);
        float *v = malloc((size_t)x->n_cols * sizeof *v);
        if (!v) {
            fprintf(stderr, "nibble imatrix: out of memory\n");
            eng_imatrix_free(im);
            return 1;
        }
        double sum = 0, mx = 0, cnt = 0;
        for (uint32_t k = 0; k < x->n_mat; k++) {
            eng_imatrix_importance(x, k, v);
            cnt += x->counts[k];
            for (uint32_t c = 0; c < x->n_cols; c++) {
                sum += v[c];
                if (v[c] > mx)
                    mx = v[c];
            }
        }
        free(v);
        ui_term_printf(stdout, "%-36s %8u %6u %10.0f %12.5g %12.5g\n", x->name, x->n_cols, x->n_mat, cnt,
                       sum / ((double)x->n_cols * x->n_mat), mx);
    }
    eng_imatrix_free(im);
    return 0;
}

int cmd_imatrix(int argc, char **argv)
{
    const char *outp = "imatrix.gguf", *show_path = NULL;
    int chunks = 0, process_output = 0;
    const app_flag own[] = {APP_FLAG("-o", "--output", APP_STR, &outp),
                            APP_FLAG("--chunks", NULL, APP_INT, &chunks, .min = 1, .max = INT_MAX),
                            APP_FLAG("--process-output", NULL, APP_ON, &process_output),
                            APP_FLAG("--show", NULL, APP_STR, &show_path),
                            APP_FLAG_END};
    const app_cmd cmd = {.name = "imatrix", .usage = usage, .flags = own};
    app_opts o;
    int st = app_parse(argc, argv, 2, &cmd, &o, NULL, NULL);
    if (st)
        return app_parse_status(st);
    if (show_path)
        return show(show_path);
    if (!o.prompt_file)
        return app_usage_error("imatrix", "-f", NULL, "a calibration text file is required");
    if (o.quantize)
        return app_usage_error("imatrix", "--quantize", o.quantize,
                               "statistics are gathered on the model as stored (quantize it afterwards)");
    eng_err e;
    if (eng_check_dest(outp, &e)) {
        fprintf(stderr, "nibble imatrix: %s\n", e.msg);
        return 1;
    }
    const char *path = app_model_path(&o);
    app_bar bar = {.label = "imatrix", .quiet = o.quiet};
    eng_imatrix_opts io = {.calib_path = o.prompt_file, .n_ctx = (uint32_t)o.n_ctx, .max_chunks = (uint32_t)chunks,
                           .threads = o.threads, .process_output = process_output, .progress = on_chunk,
                           .user = &bar};
    eng_imatrix *im = NULL;
    if (eng_imatrix_collect(path, &io, &im, &e) || eng_imatrix_save(im, outp, &e)) {
        fprintf(stderr, "nibble imatrix: %s\n", e.msg);
        eng_imatrix_free(im);
        return 1;
    }
    ui_term_printf(stderr, "%s: %zu entries from %u chunks of %u tokens of %s\n", outp, eng_imatrix_count(im),
                   eng_imatrix_chunk_count(im), eng_imatrix_chunk_size(im), o.prompt_file);
    eng_imatrix_free(im);
    return 0;
}
