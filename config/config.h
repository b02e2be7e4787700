/* The configuration file: $XDG_CONFIG_HOME/nibble/nibble.ini (else
 * ~/.config/nibble/nibble.ini), read with inih. config/nibble.ini is the
 * documented default. A bad line never stops the program: it becomes a
 * warning naming the file and line, and that setting keeps its default.
 *
 * Sections: [chat] general settings, [sampler] the sampler, and
 * [model:NAME] overrides for one model file (NAME is the file name, e.g.
 * [model:stories260K.gguf], or a full path). The draft model for
 * speculative decoding is a [model:NAME] key only. */
#ifndef NIBBLE_CFG_CONFIG_H
#define NIBBLE_CFG_CONFIG_H

#include <stddef.h>
#include <stdint.h>

/* Settings that a [model:NAME] section may override. The bit of each
 * field in cfg_values.set says it was given. */
enum {
    CFG_TEMP = 1 << 0, CFG_TOP_K = 1 << 1, CFG_TOP_P = 1 << 2, CFG_MIN_P = 1 << 3,
    CFG_REPEAT_PENALTY = 1 << 4, CFG_REPEAT_LAST_N = 1 << 5, CFG_MAX_TOKENS = 1 << 6,
    CFG_THREADS = 1 << 7, CFG_CTX = 1 << 8, CFG_KERNEL = 1 << 9, CFG_TEMPLATE = 1 << 10,
    CFG_SEED = 1 << 11, CFG_SYSTEM = 1 << 12, CFG_THINKING = 1 << 13, CFG_DRAFT = 1 << 14, CFG_LOOKUP = 1 << 15,
    CFG_DRAFT_MAX = 1 << 16, CFG_CACHE_K = 1 << 17, CFG_CACHE_V = 1 << 18
};

typedef struct cfg_values {
    unsigned set;
    float temp, top_p, min_p, repeat_penalty;
    int top_k, repeat_last_n, max_tokens, threads, ctx;
    uint64_t seed;
    char kernel[24];
    char tmpl[16];
    char system[2048];
    int thinking; /* enable_thinking for the chat template: 1 on, 0 off, -1 not passed (default) */
    /* speculative decoding: the draft model (only in a [model:NAME]
     * section: it must share that model's vocabulary), as written (a
     * relative path is the app's to resolve); the prompt lookup n-gram
     * length (0 off); tokens drafted per check (0: the engine's default) */
    char draft[1024];
    int lookup, draft_max;
    /* the K and V cache types (cache_type_k / cache_type_v): "f16", "q8_0"
     * or "q4_0"; "" when not set (f16) */
    char cache_k[8], cache_v[8];
} cfg_values;

typedef struct cfg_model {
    char name[256];
    cfg_values v;
} cfg_model;

#define CFG_MAX_DIRS 16
#define CFG_MAX_MODELS 32
#define CFG_MAX_WARN 32

typedef struct cfg_config {
    char model[1024];                     /* [chat] model: default model file ("" = embedded) */
    char model_dirs[CFG_MAX_DIRS][1024];  /* [chat] model_dirs: folders the model menu scans */
    int n_dirs;
    int color;                            /* [chat] color: 1 auto, 0 never */
    int mouse;                            /* [chat] mouse: 1 on (wheel scrolls), 0 off */
    cfg_values v;                         /* [chat] + [sampler] */
    cfg_model models[CFG_MAX_MODELS];
    int n_models;
    char warn[CFG_MAX_WARN][256];         /* what was wrong, with file:line */
    int n_warn;
} cfg_config;

/* Built-in defaults (v.set is 0: nothing came from a file). */
void cfg_defaults(cfg_config *c);
/* The config path from the environment; "" if there is no home. A
 * relative XDG_CONFIG_HOME is ignored, as the XDG spec says. */
void cfg_default_path(char *buf, size_t n);
/* 1 if p is an absolute path (XDG variables must be, or are ignored). */
int cfg_abs_path(const char *p);
/* The largest config file read (a larger one is named and not read). */
#define CFG_MAX_BYTES ((size_t)1 << 20)
/* Read path into c (which holds the defaults). A missing file is not an
 * error (returns 1); otherwise 0. Problems go to c->warn: a path that is
 * a folder, FIFO or device, or over CFG_MAX_BYTES, is not read; a line
 * with a NUL byte is ignored (the rest of the file is read). */
int cfg_load(cfg_config *c, const char *path);
/* Parse INI text (for tests); name is used in warnings. */
int cfg_load_string(cfg_config *c, const char *text, const char *name);
/* The settings for a model file: [chat]/[sampler] with the first matching
 * [model:NAME] section laid over them. */
void cfg_for_model(const cfg_config *c, const char *model_path, cfg_values *out);

#endif
