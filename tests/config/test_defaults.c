/* The sampler defaults live in three places a user reads and one the
 * program runs: engine/sampler (eng_sampler_defaults, what runs),
 * config/config.c (cfg_defaults: config/ links no engine code, so it
 * keeps its own copy), config/nibble.ini (the documented file) and
 * `nibble run --help`. This test holds them equal, so they cannot drift. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "sampler.h"
#include "testutil.h"

#ifdef _WIN32
#define popen _popen
#define pclose _pclose
#endif

/* config.c against the engine */
static void check_config_defaults(const eng_sampler_params *sp, const cfg_config *c)
{
    CHECKF(c->v.temp == sp->temp, "config temp %g, engine %g", c->v.temp, sp->temp);
    CHECKF(c->v.top_k == sp->top_k, "config top_k %d, engine %d", c->v.top_k, (int)sp->top_k);
    CHECKF(c->v.top_p == sp->top_p, "config top_p %g, engine %g", c->v.top_p, sp->top_p);
    CHECKF(c->v.min_p == sp->min_p, "config min_p %g, engine %g", c->v.min_p, sp->min_p);
    CHECKF(c->v.repeat_penalty == sp->repeat_penalty, "config repeat_penalty %g, engine %g", c->v.repeat_penalty,
           sp->repeat_penalty);
    CHECKF(c->v.repeat_last_n == sp->repeat_last_n, "config repeat_last_n %d, engine %d", c->v.repeat_last_n,
           (int)sp->repeat_last_n);
    CHECK(c->v.set == 0 && !(c->v.set & CFG_SEED));
}

/* nibble.ini shows each default as a commented-out line (";temp = 0.8").
 * Those lines of [chat] and [sampler], uncommented, must read back as
 * the defaults; keys whose line is an example, not the default (model,
 * model_dirs, system, kernel, seed), are left out. */
static void check_ini(const char *path, const cfg_config *def)
{
    char *text = tu_read(path, NULL);
    CHECKF(text != NULL, "cannot read %s", path);
    if (!text)
        return;
    static const char *const examples[] = {"model", "model_dirs", "system", "kernel", "seed", NULL};
    size_t cap = strlen(text) + 2, n = 0; /* lines only shrink; the last may gain its newline */
    char *ini = malloc(cap);
    int in_defaults = 1;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        if (!strncmp(line, "[model:", 7) || !strncmp(line, ";[model:", 8))
            in_defaults = 0; /* examples of per-model settings from here on */
        const char *l = line;
        if (in_defaults && l[0] == ';' && strchr(l, '=')) {
            size_t klen = strcspn(l + 1, " =");
            int example = 0;
            for (const char *const *x = examples; *x; x++)
                example |= strlen(*x) == klen && !strncmp(l + 1, *x, klen);
            if (!example)
                l++;
        }
        if (l[0] != ';' && l[0])
            n += (size_t)snprintf(ini + n, cap - n, "%s\n", l);
        line = nl ? nl + 1 : NULL;
    }
    ini[n] = 0;
    cfg_config c;
    cfg_defaults(&c);
    cfg_load_string(&c, ini, path);
    CHECKF(c.n_warn == 0, "%s: %s", path, c.warn[0]);
    unsigned want = CFG_TEMP | CFG_TOP_K | CFG_TOP_P | CFG_MIN_P | CFG_REPEAT_PENALTY | CFG_REPEAT_LAST_N |
                    CFG_MAX_TOKENS | CFG_THREADS | CFG_CTX | CFG_TEMPLATE;
    CHECKF((c.v.set & want) == want, "%s does not show every default (set 0x%x, want 0x%x)", path, c.v.set, want);
    CHECKF(c.v.temp == def->v.temp, "%s: temp %g, default %g", path, c.v.temp, def->v.temp);
    CHECKF(c.v.top_k == def->v.top_k, "%s: top_k %d, default %d", path, c.v.top_k, def->v.top_k);
    CHECKF(c.v.top_p == def->v.top_p, "%s: top_p %g, default %g", path, c.v.top_p, def->v.top_p);
    CHECKF(c.v.min_p == def->v.min_p, "%s: min_p %g, default %g", path, c.v.min_p, def->v.min_p);
    CHECKF(c.v.repeat_penalty == def->v.repeat_penalty, "%s: repeat_penalty %g, default %g", path,
           c.v.repeat_penalty, def->v.repeat_penalty);
    CHECKF(c.v.repeat_last_n == def->v.repeat_last_n, "%s: repeat_last_n %d, default %d", path, c.v.repeat_last_n,
           def->v.repeat_last_n);
    CHECKF(c.v.max_tokens == def->v.max_tokens, "%s: max_tokens %d, default %d", path, c.v.max_tokens,
           def->v.max_tokens);
    CHECKF(c.v.threads == def->v.threads && c.v.ctx == def->v.ctx, "%s: threads %d ctx_size %d", path, c.v.threads,
           c.v.ctx);
    CHECKF(!strcmp(c.v.tmpl, def->v.tmpl), "%s: template %s, default %s", path, c.v.tmpl, def->v.tmpl);
    CHECKF(c.color == def->color && c.mouse == def->mouse, "%s: color %d mouse %d", path, c.color, c.mouse);
    free(ini);
    free(text);
}

/* The "(default X)" on flag's line of help; -1e30 if the line has none. */
static float help_default(const char *help, const char *flag)
{
    char pat[64];
    snprintf(pat, sizeof pat, " %s ", flag);
    const char *p = strstr(help, pat);
    const char *eol = p ? strchr(p, '\n') : NULL;
    const char *d = p ? strstr(p, "(default ") : NULL;
    if (!d || (eol && d > eol))
        return -1e30f;
    return strtof(d + 9, NULL);
}

/* `nibble run --help` against the engine */
static void check_run_help(const eng_sampler_params *sp)
{
    const char *bin = getenv("NIBBLE_BIN");
    if (!bin) {
        printf("test_defaults: NIBBLE_BIN not set; run --help not checked\n");
        return;
    }
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "\"%s\" run --help", bin);
    FILE *f = popen(cmd, "r");
    CHECKF(f != NULL, "cannot run %s", cmd);
    if (!f)
        return;
    static char help[16384];
    size_t n = fread(help, 1, sizeof help - 1, f);
    help[n] = 0;
    CHECKF(pclose(f) == 0, "%s failed", cmd);
    const struct {
        const char *flag;
        float want;
    } flags[] = {
        {"--temp", sp->temp},
        {"--top-k", (float)sp->top_k},
        {"--top-p", sp->top_p},
        {"--min-p", sp->min_p},
        {"--repeat-penalty", sp->repeat_penalty},
        {"--repeat-last-n", (float)sp->repeat_last_n},
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        float got = help_default(help, flags[i].flag);
        CHECKF(got == flags[i].want, "run --help: %s says default %g, the engine's is %g", flags[i].flag, got,
               flags[i].want);
    }
}

int main(void)
{
    eng_sampler_params sp = eng_sampler_defaults();
    cfg_config def;
    cfg_defaults(&def);
    check_config_defaults(&sp, &def);
    check_ini(NIBBLE_CONFIG_INI, &def);
    check_run_help(&sp);
    return tu_result("test_defaults");
}
