/* app/: argument parsing and the subcommands. Each command returns the
 * process exit status: 0 ok, 1 failure (a message on stderr), 2 usage. */
#ifndef NIBBLE_APP_H
#define NIBBLE_APP_H

#include <stdint.h>
#include <stdio.h>

#include "model.h"
#include "sampler.h"

/* Options shared by the commands that run a model. */
typedef struct app_opts {
    const char *model;      /* -m; NULL: the embedded default */
    const char *prompt;     /* -p */
    const char *prompt_file;/* -f */
    int n_predict;          /* -n; -1: until end of text or context */
    int threads;            /* -t; 0: physical cores */
    int n_ctx;              /* -c; 0: model default */
    const char *kernel;     /* --kernel */
    int no_bos;             /* --no-bos */
    int pieces;             /* --pieces (tokenize) */
    int cpu;                /* --cpu (info) */
    int quiet;              /* --quiet: no stats on stderr */
    int print_ids;          /* --ids (run): token ids instead of text */
    unsigned given;         /* CFG_* bits (config.h) of the flags given, so they win over the config file */
    eng_sampler_params sp;
    const char *quantize;   /* --quantize TYPE: convert float weights on load */
    int cache_type_k;       /* -ctk / --cache-type-k: enum eng_kv_type (0: f16) */
    int cache_type_v;       /* -ctv / --cache-type-v */
} app_opts;

/* How a flag takes its value. */
enum app_flag_kind {
    APP_STR,    /* a string: dst is const char ** */
    APP_OPTSTR, /* a string that may be left out (taken only if the next argument does not start with '-'); "" if so */
    APP_INT,    /* a whole number in [min, max]: dst is int * */
    APP_FLOAT,  /* a number: dst is float * */
    APP_U64,    /* a non-negative integer: dst is uint64_t * */
    APP_ON,     /* no value: *(int *)dst = 1 */
    APP_OFF,    /* no value: *(int *)dst = 0 */
    APP_HELP,   /* no value: print the usage to stdout, as -h does */
    APP_KV,     /* a KV cache type name (f16, q8_0, q4_0): dst is int *, enum eng_kv_type */
};

/* One flag of a command. Tables end with a NULL name. */
typedef struct app_flag {
    const char *name, *alias; /* "-m" and "--model"; alias may be NULL */
    enum app_flag_kind kind;
    void *dst;
    long min, max;            /* APP_INT's range */
    const char *why;          /* a bad value's message; NULL: what the kind expects */
    unsigned mark;            /* OR-ed into app_opts.given when the flag is seen */
} app_flag;

/* A table row: APP_FLAG("-n", "--n-predict", APP_INT, &n, .min = 0, .max = 9)
 * (the fields after dst by name, as needed); a table ends with
 * APP_FLAG_END. */
#define APP_FLAG(NAME, ALIAS, KIND, DST, ...) {.name = NAME, .alias = ALIAS, .kind = KIND, .dst = DST, __VA_ARGS__}
#define APP_FLAG_END {.name = NULL}

/* A subcommand's command line. */
typedef struct app_cmd {
    const char *name;          /* "bench": messages read "nibble bench: ..." */
    const char *usage;         /* printed for -h / --help */
    void (*usage_fn)(FILE *f); /* instead of usage, when the text is computed */
    const app_flag *flags;     /* the command's own flags; NULL for none */
    int min_pos, max_pos;      /* positional arguments it needs and takes */
    const char *required;      /* a flag that must be given ("-f"), or NULL */
} app_cmd;

/* The one flag parser. Parses argv[first..] against cmd->flags and, when
 * o is not NULL, the model and sampler flags of app_opts (o is reset to
 * its defaults first; the sampler's values are checked at the end).
 * Positional arguments go to pos (at most cmd->max_pos), their count to
 * *npos (may be NULL when max_pos is 0). An unknown flag, a missing or
 * bad value, or one positional argument too many prints one message
 * "nibble CMD: FLAG VALUE: WHY (see 'nibble CMD --help')" and returns 2;
 * fewer than cmd->min_pos prints the usage to stderr and returns 2;
 * without cmd->required: "nibble CMD: FLAG is required (see ...)", 2.
 * With o, the kernel set o->kernel is then selected (simd_init first):
 * 1 after a message if it does not exist or cannot run here.
 * -h or --help anywhere prints the usage to stdout and returns -1 (the
 * command then exits 0). Otherwise 0. */
int app_parse(int argc, char **argv, int first, const app_cmd *cmd, app_opts *o, const char **pos, int *npos);
/* The exit status for app_parse's result r (nonzero): 0 after help, else r. */
static inline int app_parse_status(int r) { return r < 0 ? 0 : r; }
/* The usage error the parser gives, for a command's own checks after it:
 * prints "nibble CMD: FLAG VALUE: WHY (see 'nibble CMD --help')", returns 2. */
int app_usage_error(const char *cmd, const char *flag, const char *val, const char *why);

/* Path of the model to use: o->model, else the embedded default found next
 * to the binary. Never NULL. */
const char *app_model_path(const app_opts *o);
/* The prompt text: -p, or the contents of -f (caller frees *owned): a
 * regular file of at most APP_PROMPT_MAX bytes, no NUL byte (a folder,
 * FIFO or device is refused, see eng_read_file). NULL with a message on
 * failure. */
#define APP_PROMPT_MAX ((size_t)64 << 20)
const char *app_prompt(const app_opts *o, char **owned);
/* A text file a user names (prompt, chat template, messages, results):
 * eng_read_file's checks with APP_PROMPT_MAX, and a NUL byte in it makes
 * it not text (ENG_EFORMAT naming the path). *out (caller frees) is
 * NUL-terminated; NULL on failure. */
int app_read_text(const char *path, char **out, size_t *len, eng_err *e);

int cmd_run(int argc, char **argv);
/* 1 if stdout is a terminal */
int isatty_stdout(void);
/* Console and stream setup Windows needs (UTF-8, binary); elsewhere, a file
 * size limit makes writes fail (EFBIG) instead of killing nibble (SIGXFSZ). */
void app_platform_init(void);
int cmd_info(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_chat(int argc, char **argv, int first);
int cmd_synth(int argc, char **argv);
int cmd_score(int argc, char **argv);
int cmd_bench(int argc, char **argv);
/* Weight type id from a name such as "q8_0" (any case), or -1. */
int app_type_from_name(const char *name);

/* issue 5: quantize, measure, export */
int cmd_quantize(int argc, char **argv);
int cmd_ppl(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_export(int argc, char **argv);
/* issue 20: structured pruning and the results dashboard */
int cmd_prune(int argc, char **argv);
int cmd_report(int argc, char **argv);
/* issue 17: chat templates */
int cmd_template(int argc, char **argv);
/* issue 21: importance matrices */
int cmd_imatrix(int argc, char **argv);

/* A progress bar on stderr (redrawn at most 10 times a second, with an
 * ETA); label and quiet set by the caller, the rest zero. */
typedef struct app_bar {
    const char *label;
    int quiet;
    double start, last;
    int tty; /* 0 unknown, 1 stderr is a terminal, -1 not */
} app_bar;
void app_progress(app_bar *b, double frac, const char *what);
/* app_progress with a void * bar, for engine callbacks */
void app_awq_progress(void *user, double frac, const char *what);
/* quantize and quant-sweep's methods (--method): the index of
 * rtn, awq, gptq, awq+gptq, whose bits say which passes run. */
enum { APP_QM_AWQ = 1, APP_QM_GPTQ = 2 };
/* The index of a method's name, or -1. */
int app_quant_method(const char *name);
/* What nibble.quantize.method records for method m (with an imatrix:
 * "+imatrix" added, plain "imatrix" for rtn). */
const char *app_quant_method_name(int m, int imatrix);
/* The calibration side of a method. */
/* GPTQ's default rounds of the local search after the pass (--refine) */
#define APP_GPTQ_REFINE 4
/* --asym's default blend of the target, chosen on held-out text (docs/QUANTIZATION.md) */
#define APP_ASYM_BLEND 0.7f
typedef struct app_quant_calib {
    const char *path;   /* calibration text */
    int tokens, threads, clip, quiet;
    int refine;         /* GPTQ: rounds of the local search after the pass */
    int ffn_rows;       /* GPTQ: per-row Hessians for SwiGLU gate/up (--ffn-rows) */
    int attn_rows;      /* GPTQ: per-row Hessians for attn_q/k/v (--attn-rows) */
    int hessian_mb;     /* GPTQ: Hessians held at once, MB (0: the default) */
    int fit_norms;      /* refit the norm gains to the quantized matrices (--fit-norms;
                         * collects Hessians when the method has none) */
    float damp;
    const char *asym_path; /* GPTQ: the first pass's file, for --asym (NULL: none) */
    float asym_blend;      /* --asym's blend a (0: 1) */
    int asym_seq;          /* --asym: 0 at once, 1 layer by layer, 2 stage by stage (eng_gptq_opts) */
    int asym_rows;         /* --asym-rows: per-row sums on the quantized inputs (eng_gptq_opts) */
    const char *label_awq, *label_gptq; /* progress bar labels */
} app_quant_calib;
struct eng_awq;
struct eng_gptq;
struct eng_quant_opts;
struct eng_qtarget;
/* Run the method's calibration passes for quantizing in to t (AWQ's
 * search, GPTQ's Hessians) and set o's edits, gptq, method and calib;
 * *awq and *gptq (NULL when not run) are the caller's to free after
 * eng_quantize_file. Returns 0, or 1 with e set. */
int app_quant_prepare(const char *in, const struct eng_qtarget *t, int method, const app_quant_calib *c,
                      struct eng_awq **awq, struct eng_gptq **gptq, struct eng_quant_opts *o, eng_err *e);
/* Open the model at path honouring o->quantize (quantize on load; says
 * how many matrices it converted and the peak RSS on stderr unless
 * o->quiet). Same contract as eng_model_open. */
int app_model_open(const app_opts *o, const char *path, eng_model **m, eng_err *e);

#endif
