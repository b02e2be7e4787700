/* nibble chat: wires the config file, the flags, the engine thread and a
 * front end (the curses screen, or line mode for --plain and pipes), then
 * tears them down in reverse. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app.h"
#include "chat.h"
#include "config.h"
#include "engine.h"
#include "simd.h"
#include "ui.h"

static const char usage[] =
    "usage: nibble [chat] [-m MODEL] [options]\n"
    "\n"
    "Chat with a model in a full-screen terminal UI (line mode when stdin or\n"
    "stdout is not a terminal, or with --plain). F1 in the chat lists the keys.\n"
    "\n"
    "Chat options:\n"
    "  --plain              line mode: read lines, print replies\n"
    "  --resume [NAME]      continue the latest saved conversation (or NAME)\n"
    "  --system TEXT        system prompt\n"
    "  --template NAME      auto, none, chatml, llama3, llama2, zephyr, phi3, gemma\n"
    "  --config PATH        config file (default $XDG_CONFIG_HOME/nibble/nibble.ini)\n"
    "  --no-config          ignore the config file\n"
    "  -n N                 longest reply in tokens (0: no limit)\n"
    "Model and sampler options are those of 'nibble run': -t, -c, --kernel,\n"
    "--temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n, --seed.\n"
    "\n"
    "Slash commands: /help /reset /regen /stop /system /set /model /kernel\n"
    "/threads /save /load /list /quit. Conversations are saved as they go under\n"
    "$XDG_DATA_HOME/nibble/conversations (see docs/TUI.md).\n";

/* Which sampler/model flags the command line gave, so they win over the
 * config file. */
typedef struct given {
    unsigned set; /* CFG_* bits */
    int model;
} given;

static void scan_given(int argc, char **argv, int first, given *g)
{
    static const char *const with_value[] = {"-m", "--model", "-p", "--prompt", "-f", "--file", "-n", "--n-predict",
                                             "-t", "--threads", "-c", "--ctx-size", "--kernel", "--temp", "--top-k",
                                             "--top-p", "--min-p", "--repeat-penalty", "--repeat-last-n", "-s",
                                             "--seed", NULL};
    memset(g, 0, sizeof *g);
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        int takes = 0;
        for (const char *const *w = with_value; *w; w++)
            if (!strcmp(a, *w))
                takes = 1;
#define IS(x, y) (!strcmp(a, x) || !strcmp(a, y))
        if (IS("-m", "--model")) g->model = 1;
        else if (IS("-n", "--n-predict")) g->set |= CFG_MAX_TOKENS;
        else if (IS("-t", "--threads")) g->set |= CFG_THREADS;
        else if (IS("-c", "--ctx-size")) g->set |= CFG_CTX;
        else if (IS("--kernel", "--kernel")) g->set |= CFG_KERNEL;
        else if (IS("--temp", "--temp")) g->set |= CFG_TEMP;
        else if (IS("--top-k", "--top-k")) g->set |= CFG_TOP_K;
        else if (IS("--top-p", "--top-p")) g->set |= CFG_TOP_P;
        else if (IS("--min-p", "--min-p")) g->set |= CFG_MIN_P;
        else if (IS("--repeat-penalty", "--repeat-penalty")) g->set |= CFG_REPEAT_PENALTY;
        else if (IS("--repeat-last-n", "--repeat-last-n")) g->set |= CFG_REPEAT_LAST_N;
        else if (IS("-s", "--seed")) g->set |= CFG_SEED;
#undef IS
        if (takes)
            i++;
    }
}

typedef struct wiring {
    cfg_config cfg;
    app_opts o;
    given g;
    const char *tmpl_flag, *system_flag;
} wiring;

/* The settings for a model: config, its [model:NAME] section, then flags. */
static void settings_for(void *ud, const char *path, ui_model_settings *out)
{
    wiring *w = ud;
    cfg_values v;
    cfg_for_model(&w->cfg, path, &v);
    unsigned f = w->g.set;
    eng_gen_params *g = &out->gen;
    g->sp.temp = f & CFG_TEMP ? w->o.sp.temp : v.temp;
    g->sp.top_k = f & CFG_TOP_K ? w->o.sp.top_k : v.top_k;
    g->sp.top_p = f & CFG_TOP_P ? w->o.sp.top_p : v.top_p;
    g->sp.min_p = f & CFG_MIN_P ? w->o.sp.min_p : v.min_p;
    g->sp.repeat_penalty = f & CFG_REPEAT_PENALTY ? w->o.sp.repeat_penalty : v.repeat_penalty;
    g->sp.repeat_last_n = f & CFG_REPEAT_LAST_N ? w->o.sp.repeat_last_n : v.repeat_last_n;
    g->sp.seed = f & CFG_SEED ? w->o.sp.seed : (v.set & CFG_SEED) ? v.seed : w->o.sp.seed;
    g->max_tokens = f & CFG_MAX_TOKENS ? (w->o.n_predict < 0 ? 0 : w->o.n_predict) : v.max_tokens;
    out->threads = f & CFG_THREADS ? w->o.threads : v.threads;
    out->n_ctx = f & CFG_CTX ? (int)w->o.n_ctx : v.ctx;
    snprintf(out->kernel, sizeof out->kernel, "%s", f & CFG_KERNEL ? w->o.kernel : v.kernel);
    snprintf(out->tmpl, sizeof out->tmpl, "%s", w->tmpl_flag ? w->tmpl_flag : v.tmpl);
    snprintf(out->system, sizeof out->system, "%s", w->system_flag ? w->system_flag : v.system);
}

static void expand_home(const char *in, char *out, size_t n)
{
    const char *h = getenv("HOME");
    if (in[0] == '~' && (in[1] == '/' || !in[1]) && h)
        snprintf(out, n, "%.400s%.600s", h, in + 1);
    else
        snprintf(out, n, "%s", in);
}

int cmd_chat(int argc, char **argv, int first)
{
    static wiring w;
    memset(&w, 0, sizeof w);
    int plain = 0, no_config = 0, delay = 0;
    const char *resume = NULL, *config_path = NULL;
    /* take the chat-only flags out; the rest are the common ones */
    char **rest = malloc(((size_t)argc + 1) * sizeof *rest);
    if (!rest)
        return 1;
    int nrest = 0;
    for (int i = 0; i < first; i++)
        rest[nrest++] = argv[i];
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            free(rest);
            return 0;
        }
        if (!strcmp(a, "--plain"))
            plain = 1;
        else if (!strcmp(a, "--no-config"))
            no_config = 1;
        else if (!strcmp(a, "--resume")) {
            resume = "";
            if (v && v[0] != '-') {
                resume = v;
                i++;
            }
        } else if (!strcmp(a, "--template") || !strcmp(a, "--system") || !strcmp(a, "--config") ||
                   !strcmp(a, "--debug-token-delay")) {
            if (!v) {
                fprintf(stderr, "nibble chat: %s needs a value (see 'nibble chat --help')\n", a);
                free(rest);
                return 2;
            }
            if (!strcmp(a, "--template"))
                w.tmpl_flag = v;
            else if (!strcmp(a, "--system"))
                w.system_flag = v;
            else if (!strcmp(a, "--config"))
                config_path = v;
            else
                delay = atoi(v);
            i++;
        } else
            rest[nrest++] = argv[i];
    }
    rest[nrest] = NULL;
    int r = app_parse(nrest, rest, first, &w.o, NULL, NULL, "chat");
    if (!r)
        scan_given(nrest, rest, first, &w.g);
    free(rest);
    if (r)
        return r;
    if (app_apply_kernel(&w.o))
        return 1;

    cfg_defaults(&w.cfg);
    char cpath[1200];
    if (config_path)
        snprintf(cpath, sizeof cpath, "%s", config_path);
    else
        cfg_default_path(cpath, sizeof cpath);
    if (!no_config && cpath[0] && cfg_load(&w.cfg, cpath) == 1 && config_path)
        fprintf(stderr, "nibble: %s: no such file; defaults used\n", cpath);
    for (int i = 0; i < w.cfg.n_warn; i++)
        fprintf(stderr, "nibble: warning: %s\n", w.cfg.warn[i]);

    /* the model: -m, else the config's, else the embedded one */
    char model[1200];
    if (!w.g.model && w.cfg.model[0])
        expand_home(w.cfg.model, model, sizeof model);
    else
        snprintf(model, sizeof model, "%s", app_model_path(&w.o));

    /* where conversations and the input history live */
    char data[1100] = "", hist[1200] = "";
    const char *xd = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
#ifdef _WIN32
    const char *lad = getenv("LOCALAPPDATA"); /* C:\Users\NAME\AppData\Local */
    if (!(xd && *xd) && lad && *lad)
        xd = lad;
#endif
    if (xd && *xd)
        snprintf(data, sizeof data, "%s/nibble", xd);
    else if (home && *home)
        snprintf(data, sizeof data, "%s/.local/share/nibble", home);
    if (data[0]) {
        eng_err de;
        if (eng_mkdirs(data, &de))
            fprintf(stderr, "nibble: %s; nothing will be saved\n", de.msg), data[0] = 0;
        else
            snprintf(hist, sizeof hist, "%s/history", data);
    }

    /* the model menu lists the configured folders and the embedded model's */
    static char dirs[CFG_MAX_DIRS + 1][1024];
    static const char *dirp[CFG_MAX_DIRS + 1];
    int nd = 0;
    for (int i = 0; i < w.cfg.n_dirs; i++) {
        expand_home(w.cfg.model_dirs[i], dirs[nd], sizeof dirs[nd]);
        dirp[nd] = dirs[nd];
        nd++;
    }
    {
        const char *def = app_model_path(&(app_opts){0});
        const char *slash = strrchr(def, '/');
        if (slash && nd <= CFG_MAX_DIRS) {
            snprintf(dirs[nd], sizeof dirs[nd], "%.*s", (int)(slash - def), def);
            int dup = 0;
            for (int i = 0; i < nd; i++)
                dup |= !strcmp(dirs[i], dirs[nd]);
            if (!dup) {
                dirp[nd] = dirs[nd];
                nd++;
            }
        }
    }

    eng_err e = {{0}};
    eng_engine *en;
    if (eng_engine_start(&en, &e)) {
        fprintf(stderr, "nibble: %s\n", e.msg);
        return 1;
    }
    if (delay > 0)
        eng_engine_send_simple(en, ENG_CMD_SET_DELAY, NULL, delay);
    ui_chat ch;
    ui_chat_opts co = {
        .data_dir = data[0] ? data : NULL,
        .resume = resume,
        .model = model,
        .settings = settings_for,
        .settings_ud = &w,
        .model_dirs = dirp,
        .n_dirs = nd,
    };
    if (ui_chat_init(&ch, en, &co, &e)) {
        fprintf(stderr, "nibble: %s\n", e.msg);
        eng_engine_stop(en);
        return 1;
    }
    for (int i = 0; i < w.cfg.n_warn; i++)
        ui_chat_notice(&ch, "config: %s", w.cfg.warn[i]);
    ui_opts uo = {.color = w.cfg.color, .mouse = w.cfg.mouse, .history = hist[0] ? hist : NULL};
    int tty = isatty(0) && isatty(1);
    int status;
    if (plain || !tty)
        status = ui_plain_run(&ch, &uo);
    else {
#ifdef NIBBLE_HAVE_TUI
        status = ui_tui_run(&ch, &uo);
        if (status == 1) {
            fprintf(stderr, "nibble: cannot start the full-screen UI (TERM=%s); line mode\n",
                    getenv("TERM") ? getenv("TERM") : "");
            status = ui_plain_run(&ch, &uo);
        }
#else
        fprintf(stderr, "nibble: this build has no full-screen chat (built with NIBBLE_TUI=OFF, "
                        "without curses); line mode, as with --plain\n");
        status = ui_plain_run(&ch, &uo);
#endif
    }
    ui_chat_close(&ch);
    eng_engine_stop(en);
    return status;
}
