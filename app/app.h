/* app/: argument parsing and the subcommands. Each command returns the
 * process exit status: 0 ok, 1 failure (a message on stderr), 2 usage. */
#ifndef NIBBLE_APP_H
#define NIBBLE_APP_H

#include <stdint.h>

#include "model.h"
#include "sampler.h"

/* Options shared by the commands that run a model. */
typedef struct app_opts {
    const char *model;      /* -m; NULL: the embedded default */
    const char *prompt;     /* -p */
    const char *prompt_file;/* -f */
    int n_predict;          /* -n; -1: until end of text or context */
    int threads;            /* -t; 0: physical cores */
    uint32_t n_ctx;         /* -c; 0: model default */
    const char *kernel;     /* --kernel */
    int no_bos;             /* --no-bos */
    int pieces;             /* --pieces (tokenize) */
    int cpu;                /* --cpu (info) */
    int quiet;              /* --quiet: no stats on stderr */
    int print_ids;          /* --ids (run): token ids instead of text */
    int seed_set;
    eng_sampler_params sp;
    const char *quantize;   /* --quantize TYPE: convert float weights on load */
} app_opts;

/* Parse argv[first..] into o. Returns 0, or 2 after printing what is wrong.
 * Positional arguments are collected into pos (up to npos). */
int app_parse(int argc, char **argv, int first, app_opts *o, const char **pos, int *npos, const char *cmd);

/* A command's own flag, taken out of argv before app_parse sees the rest:
 * with `str` it takes a string, with `num` a whole number in [min, max],
 * with `on` no value (sets *on to 1). Lists end with a NULL name. */
typedef struct app_flag {
    const char *name;
    const char **str;
    long *num;
    long min, max;
    int *on;
} app_flag;

/* Apply the flags of `own` found in argv[first..]; argv[0..first-1] and
 * every other argument go, in order, to *rest (caller frees) for
 * app_parse. Returns 0; -1 after printing `usage` for -h/--help (the
 * command then exits 0); 2 after a message naming a bad value; 1 when out
 * of memory. */
int app_take_flags(int argc, char **argv, int first, const app_flag *own, const char *usage, const char *cmd,
                   char ***rest, int *nrest);

/* Path of the model to use: o->model, else the embedded default found next
 * to the binary. Never NULL. */
const char *app_model_path(const app_opts *o);
/* Select o->kernel if set; prints an error and returns 1 if impossible. */
int app_apply_kernel(const app_opts *o);
/* The prompt text: -p, or the contents of -f (caller frees *owned). NULL
 * with a message on failure. */
const char *app_prompt(const app_opts *o, char **owned);

int cmd_run(int argc, char **argv);
/* 1 if stdout is a terminal */
int isatty_stdout(void);
/* Console and stream setup Windows needs (UTF-8, binary); nothing elsewhere. */
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
/* Open the model at path honouring o->quantize (quantize on load; says
 * how many matrices it converted and the peak RSS on stderr unless
 * o->quiet). Same contract as eng_model_open. */
int app_model_open(const app_opts *o, const char *path, eng_model **m, eng_err *e);

#endif
