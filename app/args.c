/* Command-line options, named as llama.cpp names them where it has them. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app.h"
#include "simd.h"

#ifdef __linux__
#include <unistd.h>
#elif defined(_WIN32)
#include <windows.h>
#elif defined(__APPLE__)
#include <mach-o/dyld.h>
#include <stdint.h>
#endif

static int bad(const char *cmd, const char *flag, const char *val, const char *why)
{
    fprintf(stderr, "nibble %s: %s %s: %s (see 'nibble %s --help')\n", cmd, flag, val ? val : "", why, cmd);
    return 2;
}

static int to_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int to_float(const char *s, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || v != v)
        return -1;
    *out = v;
    return 0;
}

int app_take_flags(int argc, char **argv, int first, const app_flag *own, const char *usage, const char *cmd,
                   char ***rest, int *nrest)
{
    char **r = malloc((size_t)(argc + 1) * sizeof *r);
    if (!r)
        return 1;
    int n = 0;
    for (int i = 0; i < first && i < argc; i++)
        r[n++] = argv[i];
    for (int i = first; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            free(r);
            return -1;
        }
        const app_flag *f = own;
        while (f->name && strcmp(f->name, a))
            f++;
        if (!f->name) {
            r[n++] = argv[i];
            continue;
        }
        if (f->on) {
            *f->on = 1;
            continue;
        }
        if (!v) {
            free(r);
            return bad(cmd, a, "", "needs a value");
        }
        i++;
        if (f->str) {
            *f->str = v;
        } else if (to_int(v, f->min, f->max, f->num)) {
            char why[96];
            snprintf(why, sizeof why, "expected a whole number in %ld..%ld", f->min, f->max);
            free(r);
            return bad(cmd, a, v, why);
        }
    }
    *rest = r;
    *nrest = n;
    return 0;
}

int app_parse(int argc, char **argv, int first, app_opts *o, const char **pos, int *npos, const char *cmd)
{
    int maxpos = npos ? *npos : 0, np = 0;
    memset(o, 0, sizeof *o);
    o->n_predict = -1;
    o->sp = eng_sampler_defaults();
    o->sp.seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        float f;
#define NEED() do { if (!v) return bad(cmd, a, "", "needs a value"); i++; } while (0)
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) { NEED(); o->model = v; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { NEED(); o->prompt = v; }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { NEED(); o->prompt_file = v; }
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            NEED();
            if (to_int(v, -1, INT_MAX, &n)) return bad(cmd, a, v, "expected a count (-1 for no limit)");
            o->n_predict = (int)n;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            NEED();
            if (to_int(v, 1, 256, &n)) return bad(cmd, a, v, "expected a thread count in 1..256");
            o->threads = (int)n;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            NEED();
            if (to_int(v, 0, 1 << 20, &n)) return bad(cmd, a, v, "expected a context size (0 for the model's)");
            o->n_ctx = (uint32_t)n;
        } else if (!strcmp(a, "--kernel")) { NEED(); o->kernel = v; }
        else if (!strcmp(a, "--quantize")) { NEED(); o->quantize = v; }
        else if (!strcmp(a, "--temp")) {
            NEED();
            if (to_float(v, &f)) return bad(cmd, a, v, "expected a number");
            o->sp.temp = f;
        } else if (!strcmp(a, "--top-k")) {
            NEED();
            if (to_int(v, 0, INT_MAX, &n)) return bad(cmd, a, v, "expected 0 (off) or a count");
            o->sp.top_k = (int32_t)n;
        } else if (!strcmp(a, "--top-p")) {
            NEED();
            if (to_float(v, &f)) return bad(cmd, a, v, "expected a number");
            o->sp.top_p = f;
        } else if (!strcmp(a, "--min-p")) {
            NEED();
            if (to_float(v, &f)) return bad(cmd, a, v, "expected a number");
            o->sp.min_p = f;
        } else if (!strcmp(a, "--repeat-penalty")) {
            NEED();
            if (to_float(v, &f)) return bad(cmd, a, v, "expected a number");
            o->sp.repeat_penalty = f;
        } else if (!strcmp(a, "--repeat-last-n")) {
            NEED();
            if (to_int(v, 0, INT_MAX, &n)) return bad(cmd, a, v, "expected a count");
            o->sp.repeat_last_n = (int32_t)n;
        } else if (!strcmp(a, "-s") || !strcmp(a, "--seed")) {
            NEED();
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (errno || end == v || *end) return bad(cmd, a, v, "expected a non-negative integer");
            o->sp.seed = s;
            o->seed_set = 1;
        } else if (!strcmp(a, "--no-bos")) o->no_bos = 1;
        else if (!strcmp(a, "--pieces")) o->pieces = 1;
        else if (!strcmp(a, "--cpu")) o->cpu = 1;
        else if (!strcmp(a, "--ids")) o->print_ids = 1;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) o->quiet = 1;
        else if (a[0] == '-' && a[1]) return bad(cmd, a, "", "unknown option");
        else if (np < maxpos) pos[np++] = a;
        else return bad(cmd, a, "", "unexpected argument");
#undef NEED
    }
    if (npos)
        *npos = np;
    const char *why = eng_sampler_check(&o->sp);
    if (why)
        return bad(cmd, "sampler:", "", why);
    return 0;
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

int app_apply_kernel(const app_opts *o)
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

const char *app_prompt(const app_opts *o, char **owned)
{
    *owned = NULL;
    if (!o->prompt_file)
        return o->prompt ? o->prompt : "";
    FILE *f = fopen(o->prompt_file, "rb");
    if (!f) {
        fprintf(stderr, "nibble: %s: %s\n", o->prompt_file, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (len + 1 == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "nibble: %s: out of memory\n", o->prompt_file);
        return NULL;
    }
    buf[len] = 0;
    if (strlen(buf) != len) {
        fprintf(stderr, "nibble: %s: contains a NUL byte; not a text file\n", o->prompt_file);
        free(buf);
        return NULL;
    }
    *owned = buf;
    return buf;
}
