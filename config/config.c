#include "config.h"
#include "files.h" /* eng_path_base, eng_read_file */

#include <errno.h>
#include <stddef.h>
#ifdef NIBBLE_HAVE_INIH
#include <ini.h>
#define parse_stream ini_parse_stream
#else
#include "inifile.h" /* inih's behaviour, our code (Windows; no inih) */
#define parse_stream cfg_ini_parse_stream
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

void cfg_defaults(cfg_config *c)
{
    memset(c, 0, sizeof *c);
    c->color = 1;
    c->mouse = 0; /* off: drag-select and copy stay the terminal's */
    /* the engine's sampler defaults (engine/sampler/sampler.c), repeated here
     * because config/ stands alone */
    c->v.temp = 0.8f;
    c->v.top_k = 40;
    c->v.top_p = 0.95f;
    c->v.min_p = 0.05f;
    c->v.repeat_penalty = 1.0f;
    c->v.repeat_last_n = 64;
    c->v.max_tokens = 512;
    snprintf(c->v.tmpl, sizeof c->v.tmpl, "auto");
    c->v.thinking = -1;
}

int cfg_abs_path(const char *p)
{
#ifdef _WIN32
    if (((p[0] >= 'A' && p[0] <= 'Z') || (p[0] >= 'a' && p[0] <= 'z')) && p[1] == ':' &&
        (p[2] == '\\' || p[2] == '/'))
        return 1;
    if (p[0] == '\\')
        return 1;
#endif
    return p[0] == '/';
}

void cfg_default_path(char *buf, size_t n)
{
    const char *x = getenv("XDG_CONFIG_HOME"), *h = getenv("HOME");
    if (x && !cfg_abs_path(x))
        x = NULL; /* the XDG spec: a relative path is invalid and is ignored */
#ifdef _WIN32
    const char *a = getenv("APPDATA"); /* C:\Users\NAME\AppData\Roaming */
    if (!(x && *x) && a && *a) {
        snprintf(buf, n, "%s\\nibble\\nibble.ini", a);
        return;
    }
#endif
    if (x && *x)
        snprintf(buf, n, "%s/nibble/nibble.ini", x);
    else if (h && *h)
        snprintf(buf, n, "%s/.config/nibble/nibble.ini", h);
    else if (n)
        buf[0] = 0;
}

typedef struct parse {
    cfg_config *c;
    const char *name;    /* file name for warnings */
    const char *p;       /* rest of the text */
    int lineno;
} parse;

#ifdef __MINGW32__ /* its C99 printf, see engine/base/include/err.h */
static void warn(parse *ps, const char *fmt, ...) __attribute__((format(gnu_printf, 2, 3)));
#else
static void warn(parse *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#endif
static void warn(parse *ps, const char *fmt, ...)
{
    if (ps->c->n_warn >= CFG_MAX_WARN)
        return;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(ps->c->warn[ps->c->n_warn++], sizeof ps->c->warn[0], "%s:%d: %s", ps->name, ps->lineno, msg);
}

/* inih's reader: one physical line per call, so inih's line count and
 * ours agree. Also catches what inih would drop silently. */
static char *reader(char *str, int num, void *stream)
{
    parse *ps = stream;
    if (!*ps->p)
        return NULL;
    const char *nl = strchr(ps->p, '\n');
    size_t len = nl ? (size_t)(nl - ps->p) + 1 : strlen(ps->p);
    ps->lineno++;
    size_t keep = len < (size_t)num - 1 ? len : (size_t)num - 2;
    memcpy(str, ps->p, keep);
    if (keep < len) {
        warn(ps, "line longer than %d characters; cut", num - 2);
        str[keep++] = '\n';
    }
    str[keep] = 0;
    ps->p += len;
    /* a line inih cannot read: no '=' and not a section or comment */
    const char *s = str;
    while (*s == ' ' || *s == '\t' || *s == '\r')
        s++;
    if (*s && *s != '\n' && *s != ';' && *s != '#' && *s != '[' && !strchr(s, '=') && !strchr(s, ':'))
        warn(ps, "expected 'key = value', a [section] or a comment; line ignored");
    else if (*s == '[' && !strchr(s, ']'))
        warn(ps, "section header without ']'; settings below go to the previous section");
    return str;
}

/* The numeric settings of cfg_values: where each goes, its range, and
 * what the warning for a bad value says it should be. */
typedef struct num_key {
    const char *key;
    unsigned bit;
    int is_float;
    size_t off; /* of a float or an int in cfg_values */
    double lo, hi;
    const char *what;
} num_key;

static const num_key num_keys[] = {
    {"temp", CFG_TEMP, 1, offsetof(cfg_values, temp), 0, 100, "a temperature in 0..100"},
    {"top_p", CFG_TOP_P, 1, offsetof(cfg_values, top_p), 1e-6f, 1, "in (0, 1]"},
    {"min_p", CFG_MIN_P, 1, offsetof(cfg_values, min_p), 0, 0.999f, "in [0, 1)"},
    {"repeat_penalty", CFG_REPEAT_PENALTY, 1, offsetof(cfg_values, repeat_penalty), 1e-6f, 10, "in (0, 10]"},
    {"top_k", CFG_TOP_K, 0, offsetof(cfg_values, top_k), 0, 1000000, "0 (off) or a count"},
    {"repeat_last_n", CFG_REPEAT_LAST_N, 0, offsetof(cfg_values, repeat_last_n), 0, 1 << 20, "a count"},
    {"max_tokens", CFG_MAX_TOKENS, 0, offsetof(cfg_values, max_tokens), 0, 1 << 20, "a count (0: no limit)"},
    {"threads", CFG_THREADS, 0, offsetof(cfg_values, threads), 0, 256, "a thread count in 0..256 (0: all cores)"},
    {"ctx_size", CFG_CTX, 0, offsetof(cfg_values, ctx), 0, 1 << 20, "a context size (0: the model's)"},
    {"lookup", CFG_LOOKUP, 0, offsetof(cfg_values, lookup), 0, 64, "an n-gram length in 1..64, or 0 (off)"},
    {"draft_max", CFG_DRAFT_MAX, 0, offsetof(cfg_values, draft_max), 1, 31, "a count of tokens in 1..31"},
};

/* Parse val for k into v; -1 (nothing stored) if it is not a number in
 * k's range. */
static int set_number(const num_key *k, cfg_values *v, const char *val)
{
    char *end;
    errno = 0;
    void *dst = (char *)v + k->off;
    if (k->is_float) {
        float f = strtof(val, &end);
        if (errno || end == val || *end || !(f >= (float)k->lo && f <= (float)k->hi))
            return -1;
        *(float *)dst = f;
    } else {
        long n = strtol(val, &end, 10);
        if (errno || end == val || *end || n < (long)k->lo || n > (long)k->hi)
            return -1;
        *(int *)dst = (int)n;
    }
    return 0;
}

/* A setting of cfg_values; 0 if the key is not one, 1 if set, -1 if bad. */
static int set_value(parse *ps, cfg_values *v, const char *key, const char *val)
{
    for (size_t i = 0; i < sizeof num_keys / sizeof num_keys[0]; i++) {
        const num_key *k = &num_keys[i];
        if (strcmp(key, k->key))
            continue;
        if (set_number(k, v, val)) {
            warn(ps, "%s: '%s' is not %s; default kept", key, val, k->what);
            return -1;
        }
        v->set |= k->bit;
        return 1;
    }
    if (!strcmp(key, "seed")) {
        char *end;
        errno = 0;
        unsigned long long s = strtoull(val, &end, 10);
        if (errno || end == val || *end || val[0] == '-') {
            warn(ps, "seed: '%s' is not a non-negative integer; default kept", val);
            return -1;
        }
        v->seed = s;
        v->set |= CFG_SEED;
        return 1;
    }
    if (!strcmp(key, "kernel") || !strcmp(key, "template")) {
        int k = !strcmp(key, "kernel");
        char *dst = k ? v->kernel : v->tmpl;
        size_t cap = k ? sizeof v->kernel : sizeof v->tmpl;
        if (strlen(val) >= cap || !*val) {
            warn(ps, "%s: '%s' is not a %s name; default kept", key, val, key);
            return -1;
        }
        memcpy(dst, val, strlen(val) + 1);
        v->set |= k ? CFG_KERNEL : CFG_TEMPLATE;
        return 1;
    }
    if (!strcmp(key, "cache_type_k") || !strcmp(key, "cache_type_v")) {
        int k = key[11] == 'k';
        /* the engine's names (model.h's ENG_KV_TYPE_NAMES; config does not link the engine) */
        if (strcmp(val, "f16") && strcmp(val, "q8_0") && strcmp(val, "q4_0")) {
            warn(ps, "%s: '%s' is not a cache type (f16, q8_0, q4_0); f16 kept", key, val);
            return -1;
        }
        memcpy(k ? v->cache_k : v->cache_v, val, strlen(val) + 1);
        v->set |= k ? CFG_CACHE_K : CFG_CACHE_V;
        return 1;
    }
    if (!strcmp(key, "draft")) {
        if (!*val || strlen(val) >= sizeof v->draft) {
            warn(ps, "draft: '%.60s' is not a model file name; no draft model", val);
            return -1;
        }
        memcpy(v->draft, val, strlen(val) + 1);
        v->set |= CFG_DRAFT;
        return 1;
    }
    if (!strcmp(key, "system")) {
        snprintf(v->system, sizeof v->system, "%s", val);
        v->set |= CFG_SYSTEM;
        return 1;
    }
    if (!strcmp(key, "enable_thinking")) {
        if (!strcasecmp(val, "true") || !strcasecmp(val, "on") || !strcasecmp(val, "yes") || !strcmp(val, "1"))
            v->thinking = 1;
        else if (!strcasecmp(val, "false") || !strcasecmp(val, "off") || !strcasecmp(val, "no") || !strcmp(val, "0"))
            v->thinking = 0;
        else if (!strcasecmp(val, "default"))
            v->thinking = -1;
        else {
            warn(ps, "enable_thinking: '%s' is not on, off or default; default kept", val);
            return -1;
        }
        v->set |= CFG_THINKING;
        return 1;
    }
    return 0;
}

static int handler(void *user, const char *section, const char *key, const char *val)
{
    parse *ps = user;
    cfg_config *c = ps->c;
    if (!strncmp(section, "model:", 6)) {
        const char *name = section + 6;
        cfg_model *m = NULL;
        for (int i = 0; i < c->n_models; i++)
            if (!strcmp(c->models[i].name, name))
                m = &c->models[i];
        if (!m) {
            if (c->n_models == CFG_MAX_MODELS || !*name || strlen(name) >= sizeof m->name) {
                warn(ps, "[%s]: too many model sections or a bad name; ignored", section);
                return 1;
            }
            m = &c->models[c->n_models++];
            memset(m, 0, sizeof *m);
            snprintf(m->name, sizeof m->name, "%s", name);
        }
        if (!set_value(ps, &m->v, key, val))
            warn(ps, "unknown key '%s' in [%s]; ignored", key, section);
        return 1;
    }
    if (!strcmp(key, "draft")) {
        /* a draft model pairs with one model: it must share its vocabulary */
        warn(ps, "draft belongs in a [model:NAME] section (the model it drafts for); ignored");
        return 1;
    }
    if (!strcmp(section, "sampler")) {
        if (!set_value(ps, &c->v, key, val))
            warn(ps, "unknown key '%s' in [sampler]; ignored", key);
        return 1;
    }
    if (strcmp(section, "chat") && strcmp(section, "")) {
        warn(ps, "unknown section [%s]; '%s' ignored", section, key);
        return 1;
    }
    if (!strcmp(key, "model")) {
        snprintf(c->model, sizeof c->model, "%s", val);
    } else if (!strcmp(key, "model_dirs")) {
        /* colon-separated, like PATH */
        c->n_dirs = 0;
        const char *p = val;
        while (*p && c->n_dirs < CFG_MAX_DIRS) {
            size_t n = strcspn(p, ":");
            if (n && n < sizeof c->model_dirs[0]) {
                memcpy(c->model_dirs[c->n_dirs], p, n);
                c->model_dirs[c->n_dirs++][n] = 0;
            }
            p += n;
            if (*p)
                p++;
        }
    } else if (!strcmp(key, "color") || !strcmp(key, "mouse")) {
        int *dst = !strcmp(key, "color") ? &c->color : &c->mouse;
        if (!strcasecmp(val, "auto") || !strcasecmp(val, "on") || !strcasecmp(val, "yes") || !strcmp(val, "1"))
            *dst = 1;
        else if (!strcasecmp(val, "never") || !strcasecmp(val, "off") || !strcasecmp(val, "no") || !strcmp(val, "0"))
            *dst = 0;
        else
            warn(ps, "%s: '%s' is not on/off; default kept", key, val);
    } else if (!set_value(ps, &c->v, key, val))
        warn(ps, "unknown key '%s'; ignored", key);
    return 1;
}

int cfg_load_string(cfg_config *c, const char *text, const char *name)
{
    parse ps = {c, name, text, 0};
    parse_stream(reader, &ps, handler, &ps);
    return 0;
}

static void warn_file(cfg_config *c, const char *fmt, ...) ENG_PRINTF(2, 3);
static void warn_file(cfg_config *c, const char *fmt, ...)
{
    if (c->n_warn >= CFG_MAX_WARN)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->warn[c->n_warn++], sizeof c->warn[0], fmt, ap);
    va_end(ap);
}

int cfg_load(cfg_config *c, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0 && errno == ENOENT)
        return 1;
    char *buf = NULL;
    size_t len = 0;
    eng_err e = {{0}};
    if (eng_read_file(path, CFG_MAX_BYTES, &buf, &len, &e)) {
        /* a folder, FIFO, device, or too large: said, never silently skipped */
        warn_file(c, "%.200s; defaults used", e.msg);
        return 0;
    }
    /* A NUL byte would end the text early and drop the rest of the file
     * without a word: each line that holds one is blanked and named. */
    int lineno = 1;
    char *line = buf;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && buf[i] != '\n')
            continue;
        char *end = buf + i;
        if (memchr(line, 0, (size_t)(end - line))) {
            warn_file(c, "%.200s:%d: a NUL byte; line ignored", path, lineno);
            memset(line, ' ', (size_t)(end - line));
        }
        lineno++;
        line = end + 1;
    }
    cfg_load_string(c, buf, path);
    free(buf);
    return 0;
}

static void overlay(cfg_values *dst, const cfg_values *src)
{
    unsigned s = src->set;
    if (s & CFG_TEMP) dst->temp = src->temp;
    if (s & CFG_TOP_K) dst->top_k = src->top_k;
    if (s & CFG_TOP_P) dst->top_p = src->top_p;
    if (s & CFG_MIN_P) dst->min_p = src->min_p;
    if (s & CFG_REPEAT_PENALTY) dst->repeat_penalty = src->repeat_penalty;
    if (s & CFG_REPEAT_LAST_N) dst->repeat_last_n = src->repeat_last_n;
    if (s & CFG_MAX_TOKENS) dst->max_tokens = src->max_tokens;
    if (s & CFG_THREADS) dst->threads = src->threads;
    if (s & CFG_CTX) dst->ctx = src->ctx;
    if (s & CFG_SEED) dst->seed = src->seed;
    if (s & CFG_KERNEL) memcpy(dst->kernel, src->kernel, sizeof dst->kernel);
    if (s & CFG_TEMPLATE) memcpy(dst->tmpl, src->tmpl, sizeof dst->tmpl);
    if (s & CFG_SYSTEM) memcpy(dst->system, src->system, sizeof dst->system);
    if (s & CFG_THINKING) dst->thinking = src->thinking;
    if (s & CFG_DRAFT) memcpy(dst->draft, src->draft, sizeof dst->draft);
    if (s & CFG_LOOKUP) dst->lookup = src->lookup;
    if (s & CFG_DRAFT_MAX) dst->draft_max = src->draft_max;
    if (s & CFG_CACHE_K) memcpy(dst->cache_k, src->cache_k, sizeof dst->cache_k);
    if (s & CFG_CACHE_V) memcpy(dst->cache_v, src->cache_v, sizeof dst->cache_v);
    dst->set |= s;
}

void cfg_for_model(const cfg_config *c, const char *path, cfg_values *out)
{
    *out = c->v;
    const char *base = path ? eng_path_base(path) : NULL;
    for (int i = 0; path && i < c->n_models; i++)
        if (!strcmp(c->models[i].name, base) || !strcmp(c->models[i].name, path)) {
            overlay(out, &c->models[i].v);
            break;
        }
}
