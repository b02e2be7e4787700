/* Command-line options, named as llama.cpp names them where it has them. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app.h"
#include "config.h" /* CFG_* marks of the flags that override the config file */
#include "files.h"
#include "ui.h"  /* ui_term_printf: names from the command line may hold control characters */
#include "simd.h"

#ifdef __linux__
#include <unistd.h>
#elif defined(_WIN32)
#include <windows.h>
#elif defined(__APPLE__)
#include <mach-o/dyld.h>
#include <stdint.h>
#endif

int app_usage_error(const char *cmd, const char *flag, const char *val, const char *why)
{
    ui_term_printf(stderr, "nibble %s: %s %s: %s (see 'nibble %s --help')\n", cmd, flag, val ? val : "", why, cmd);
    return 2;
}

static int to_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static int to_float(const char *s, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !isfinite(v)) /* not NaN, not inf */
        return -1;
    *out = v;
    return 0;
}

static int to_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

/* The flags of app_opts, with o's fields as destinations. The CFG_* marks
 * let the chat tell a flag from a config file setting. */
#define N_COMMON 23 /* entries of common_flags' table, the end included */
static void common_flags(app_opts *o, app_flag *f)
{
    const app_flag t[] = {
        APP_FLAG("-m", "--model", APP_STR, &o->model),
        APP_FLAG("-p", "--prompt", APP_STR, &o->prompt),
        APP_FLAG("-f", "--file", APP_STR, &o->prompt_file),
        APP_FLAG("-n", "--n-predict", APP_INT, &o->n_predict, .min = -1, .max = INT_MAX,
                 .why = "expected a count (-1 for no limit)", .mark = CFG_MAX_TOKENS),
        APP_FLAG("-t", "--threads", APP_INT, &o->threads, .min = 1, .max = 256,
                 .why = "expected a thread count in 1..256", .mark = CFG_THREADS),
        APP_FLAG("-c", "--ctx-size", APP_INT, &o->n_ctx, .min = 0, .max = 1 << 20,
                 .why = "expected a context size (0 for the model's)", .mark = CFG_CTX),
        APP_FLAG("--kernel", NULL, APP_STR, &o->kernel, .mark = CFG_KERNEL),
        APP_FLAG("-ctk", "--cache-type-k", APP_KV, &o->cache_type_k, .mark = CFG_CACHE_K),
        APP_FLAG("-ctv", "--cache-type-v", APP_KV, &o->cache_type_v, .mark = CFG_CACHE_V),
        APP_FLAG("--quantize", NULL, APP_STR, &o->quantize),
        APP_FLAG("--temp", NULL, APP_FLOAT, &o->sp.temp, .mark = CFG_TEMP),
        APP_FLAG("--top-k", NULL, APP_INT, &o->sp.top_k, .min = 0, .max = INT_MAX,
                 .why = "expected 0 (off) or a count", .mark = CFG_TOP_K),
        APP_FLAG("--top-p", NULL, APP_FLOAT, &o->sp.top_p, .mark = CFG_TOP_P),
        APP_FLAG("--min-p", NULL, APP_FLOAT, &o->sp.min_p, .mark = CFG_MIN_P),
        APP_FLAG("--repeat-penalty", NULL, APP_FLOAT, &o->sp.repeat_penalty, .mark = CFG_REPEAT_PENALTY),
        APP_FLAG("--repeat-last-n", NULL, APP_INT, &o->sp.repeat_last_n, .min = 0, .max = INT_MAX,
                 .why = "expected a count", .mark = CFG_REPEAT_LAST_N),
        APP_FLAG("-s", "--seed", APP_U64, &o->sp.seed, .mark = CFG_SEED),
        APP_FLAG("--no-bos", NULL, APP_ON, &o->no_bos),
        APP_FLAG("--pieces", NULL, APP_ON, &o->pieces),
        APP_FLAG("--cpu", NULL, APP_ON, &o->cpu),
        APP_FLAG("--ids", NULL, APP_ON, &o->print_ids),
        APP_FLAG("-q", "--quiet", APP_ON, &o->quiet),
        APP_FLAG_END,
    };
    _Static_assert(sizeof t / sizeof t[0] == N_COMMON, "N_COMMON is the size of the table");
    memcpy(f, t, sizeof t);
}

static int is_flag(const app_flag *f, const char *a)
{
    return a && (!strcmp(f->name, a) || (f->alias && !strcmp(f->alias, a)));
}

static const app_flag *find_flag(const app_flag *t, const char *a)
{
    for (; t && t->name; t++)
        if (is_flag(t, a))
            return t;
    return NULL;
}

static void print_usage(const app_cmd *cmd, FILE *f)
{
    if (cmd->usage_fn)
        cmd->usage_fn(f);
    else
        fputs(cmd->usage, f);
}

/* Apply flag f found at argv[*i]; advances *i past a value it takes.
 * Returns 0, -1 for help, 2 after a message. */
static int apply(const app_cmd *cmd, const app_flag *f, int argc, char **argv, int *i, app_opts *o)
{
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (o)
        o->given |= f->mark;
    switch (f->kind) {
    case APP_ON:
    case APP_OFF:
        *(int *)f->dst = f->kind == APP_ON;
        return 0;
    case APP_HELP:
        print_usage(cmd, stdout);
        return -1;
    case APP_OPTSTR:
        *(const char **)f->dst = v && v[0] != '-' ? v : "";
        *i += v && v[0] != '-';
        return 0;
    default:
        break;
    }
    if (!v)
        return app_usage_error(cmd->name, a, "", "needs a value");
    ++*i;
    const char *why = f->why;
    char range[96];
    switch (f->kind) {
    case APP_STR:
        *(const char **)f->dst = v;
        return 0;
    case APP_KV:
        if ((*(int *)f->dst = eng_kv_type_parse(v)) >= 0)
            return 0;
        return app_usage_error(cmd->name, a, v, "unknown cache type (allowed: " ENG_KV_TYPE_NAMES ")");
    case APP_INT:
        if (!to_int(v, f->min, f->max, f->dst))
            return 0;
        snprintf(range, sizeof range, "expected a whole number in %ld..%ld", f->min, f->max);
        return app_usage_error(cmd->name, a, v, why ? why : range);
    case APP_FLOAT:
        return to_float(v, f->dst) ? app_usage_error(cmd->name, a, v, why ? why : "expected a finite number") : 0;
    default: /* APP_U64 */
        return to_u64(v, f->dst) ? app_usage_error(cmd->name, a, v, why ? why : "expected a non-negative integer") : 0;
    }
}

/* Select o->kernel if set; prints an error and returns 1 if impossible. */
static int apply_kernel(const app_opts *o)
{
    simd_init();
    if (!o->kernel)
        return 0;
    int k = simd_kernel_find(o->kernel);
    if (k < 0) {
        fprintf(stderr, "nibble: unknown kernel set '%s' (one of:", o->kernel);
        for (int i = 0; i < SIMD_K_COUNT; i++)
            fprintf(stderr, " %s", simd_kernel_name((enum simd_kernel)i));
        fprintf(stderr, ")\n");
        return 1;
    }
    const char *why = NULL;
    if (!simd_kernel_supported((enum simd_kernel)k, &why)) {
        fprintf(stderr, "nibble: kernel set '%s' cannot run here: %s\n", o->kernel, why ? why : "unsupported");
        return 1;
    }
    simd_kernel_select((enum simd_kernel)k);
    return 0;
}

int app_parse(int argc, char **argv, int first, const app_cmd *cmd, app_opts *o, const char **pos, int *npos)
{
    /* help wins wherever it stands, even where a value was expected */
    for (int i = first; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            print_usage(cmd, stdout);
            return -1;
        }
    app_flag common[N_COMMON];
    if (o) {
        memset(o, 0, sizeof *o);
        o->n_predict = -1;
        o->sp = eng_sampler_defaults();
        o->sp.seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
        common_flags(o, common);
    }
    int np = 0, required = !cmd->required;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        const app_flag *f = find_flag(cmd->flags, a);
        if (!f && o)
            f = find_flag(common, a);
        if (f) {
            int r = apply(cmd, f, argc, argv, &i, o);
            if (r)
                return r;
            required |= is_flag(f, cmd->required);
        } else if (a[0] == '-' && a[1])
            return app_usage_error(cmd->name, a, "", "unknown option");
        else if (np < cmd->max_pos)
            pos[np++] = a;
        else
            return app_usage_error(cmd->name, a, "", "unexpected argument");
    }
    if (npos)
        *npos = np;
    if (np < cmd->min_pos) {
        print_usage(cmd, stderr);
        return 2;
    }
    if (!required) {
        fprintf(stderr, "nibble %s: %s is required (see 'nibble %s --help')\n", cmd->name, cmd->required, cmd->name);
        return 2;
    }
    const char *why = o ? eng_sampler_check(&o->sp) : NULL;
    if (why) { /* a value each flag took, out of range together: no one flag to name */
        fprintf(stderr, "nibble %s: %s (see 'nibble %s --help')\n", cmd->name, why, cmd->name);
        return 2;
    }
    return o ? apply_kernel(o) : 0;
}

/* Directory of the running executable, or "" if unknown. */
static void exe_dir(char *buf, size_t n)
{
    buf[0] = 0;
#ifdef __linux__
    ssize_t len = readlink("/proc/self/exe", buf, n - 1);
    if (len <= 0) {
        buf[0] = 0;
        return;
    }
    buf[len] = 0;
    char *slash = strrchr(buf, '/');
    if (slash)
        *slash = 0;
#elif defined(_WIN32)
    DWORD len = GetModuleFileNameA(NULL, buf, (DWORD)n);
    if (len == 0 || len >= n) {
        buf[0] = 0;
        return;
    }
    char *slash = strrchr(buf, '\\'), *fwd = strrchr(buf, '/');
    if (fwd > slash)
        slash = fwd;
    if (slash)
        *slash = 0;
#elif defined(__APPLE__)
    uint32_t size = (uint32_t)n;
    if (_NSGetExecutablePath(buf, &size) != 0) {
        buf[0] = 0;
        return;
    }
    char *slash = strrchr(buf, '/');
    if (slash)
        *slash = 0;
#else
    (void)n;
#endif
}

#define DEFAULT_MODEL "stories260K.gguf"

const char *app_model_path(const app_opts *o)
{
    static char path[4096];
    if (o->model)
        return o->model;
    const char *env = getenv("NIBBLE_DEFAULT_MODEL");
    if (env && *env)
        return env;
    char dir[3000];
    exe_dir(dir, sizeof dir);
    /* installed: <prefix>/bin/nibble and <prefix>/share/nibble/; build tree: the same shape */
    const char *rel[] = {"/../share/nibble/" DEFAULT_MODEL, "/" DEFAULT_MODEL};
    for (size_t i = 0; dir[0] && i < sizeof rel / sizeof rel[0]; i++) {
        snprintf(path, sizeof path, "%s%s", dir, rel[i]);
        FILE *f = fopen(path, "rb");
        if (f) {
            fclose(f);
            return path;
        }
    }
#ifdef NIBBLE_SOURCE_ASSETS
    snprintf(path, sizeof path, "%s/%s", NIBBLE_SOURCE_ASSETS, DEFAULT_MODEL);
    return path;
#else
    return DEFAULT_MODEL;
#endif
}

const char *app_prompt(const app_opts *o, char **owned)
{
    *owned = NULL;
    if (!o->prompt_file)
        return o->prompt ? o->prompt : "";
    char *buf = NULL;
    size_t len = 0;
    eng_err e = {{0}};
    if (app_read_text(o->prompt_file, &buf, &len, &e)) {
        ui_term_printf(stderr, "nibble: %s\n", e.msg);
        return NULL;
    }
    *owned = buf;
    return buf;
}

int app_read_text(const char *path, char **out, size_t *len, eng_err *e)
{
    int rc = eng_read_file(path, APP_PROMPT_MAX, out, len, e);
    if (rc)
        return rc;
    if (strlen(*out) != *len) {
        free(*out);
        *out = NULL;
        return eng_errf(e, ENG_EFORMAT, "%s: contains a NUL byte; not a text file", path);
    }
    return 0;
}
