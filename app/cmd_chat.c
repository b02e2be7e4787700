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
    "  --chat-template-file FILE  run this Jinja chat template instead of the model's\n"
    "  --think on|off       enable_thinking for the model's chat template (/think)\n"
    "  --config PATH        config file (default $XDG_CONFIG_HOME/nibble/nibble.ini)\n"
    "  --no-config          ignore the config file\n"
    "  -n N                 longest reply in tokens (0: no limit)\n"
    "Model and sampler options are those of 'nibble run': -t, -c, --kernel,\n"
    "-ctk/--cache-type-k and -ctv/--cache-type-v (f16, q8_0, q4_0; the KV cache's\n"
    "memory shows on the status row), --temp, --top-k, --top-p, --min-p,\n"
    "--repeat-penalty, --repeat-last-n, --seed.\n"
    "\n"
    "Slash commands: /help /new /regen /stop /system /set /model /kernel\n"
    "/threads /save /rename /load /list /export /copy /quit. Conversations are\n"
    "saved from the first message under $XDG_DATA_HOME/nibble/conversations\n"
    "(see docs/TUI.md).\n";

typedef struct wiring {
    cfg_config cfg;
    app_opts o; /* o.given: the flags that win over the config file */
    const char *tmpl_flag, *system_flag;
} wiring;

/* A [model:NAME] section's draft model: "~/" is the home folder, as for
 * the config's model; any other relative path is taken from the folder
 * of the model it drafts for (they are usually side by side), so it does
 * not depend on where nibble was started. */
static void resolve_draft(const char *draft, const char *model, char *out, size_t n)
{
    const char *h = getenv("HOME");
    const char *slash = model ? strrchr(model, '/') : NULL;
#ifdef _WIN32
    const char *bs = model ? strrchr(model, '\\') : NULL;
    if (bs && (!slash || bs > slash))
        slash = bs;
#endif
    if (!draft[0])
        out[0] = 0;
    else if (draft[0] == '~' && draft[1] == '/' && h)
        snprintf(out, n, "%.400s%.600s", h, draft + 1);
    else if (cfg_abs_path(draft) || !slash)
        snprintf(out, n, "%s", draft);
    else
        snprintf(out, n, "%.*s/%.500s", (int)(slash - model < 500 ? slash - model : 500), model, draft);
}

/* The settings for a model: config, its [model:NAME] section, then flags. */
static void settings_for(void *ud, const char *path, ui_model_settings *out)
{
    wiring *w = ud;
    cfg_values v;
    cfg_for_model(&w->cfg, path, &v);
    unsigned f = w->o.given;
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
    out->n_ctx = f & CFG_CTX ? w->o.n_ctx : v.ctx;
    snprintf(out->cache_k, sizeof out->cache_k, "%s", f & CFG_CACHE_K ? eng_kv_type_name(w->o.cache_type_k) : v.cache_k);
    snprintf(out->cache_v, sizeof out->cache_v, "%s", f & CFG_CACHE_V ? eng_kv_type_name(w->o.cache_type_v) : v.cache_v);
    snprintf(out->kernel, sizeof out->kernel, "%s", f & CFG_KERNEL ? w->o.kernel : v.kernel);
    snprintf(out->tmpl, sizeof out->tmpl, "%s", w->tmpl_flag ? w->tmpl_flag : v.tmpl);
    snprintf(out->system, sizeof out->system, "%s", w->system_flag ? w->system_flag : v.system);
    resolve_draft(v.draft, path, out->draft, sizeof out->draft);
    out->lookup = v.lookup;
    out->draft_max = v.draft_max;
}

static void expand_home(const char *in, char *out, size_t n)
{
    const char *h = getenv("HOME");
    if (in[0] == '~' && (in[1] == '/' || !in[1]) && h)
        snprintf(out, n, "%.400s%.600s", h, in + 1);
    else
        snprintf(out, n, "%s", in);
}

/* The config file as --config and --no-config say: defaults, then the
 * file (path, else the default one) unless no_config; warnings on stderr. */
static void load_config(cfg_config *cfg, const char *path, int no_config)
{
    cfg_defaults(cfg);
    char cpath[1200];
    if (path)
        snprintf(cpath, sizeof cpath, "%s", path);
    else
        cfg_default_path(cpath, sizeof cpath);
    if (!no_config && cpath[0] && cfg_load(cfg, cpath) == 1 && path)
        ui_term_printf(stderr, "nibble: %s: no such file; defaults used\n", cpath);
    for (int i = 0; i < cfg->n_warn; i++) /* they quote the file, which may hold escapes */
        ui_term_printf(stderr, "nibble: warning: %s\n", cfg->warn[i]);
}

int cmd_chat(int argc, char **argv, int first)
{
    static wiring w;
    memset(&w, 0, sizeof w);
    int plain = 0, no_config = 0, delay = 0;
    const char *resume = NULL, *config_path = NULL, *tmpl_file = NULL, *think_flag = NULL;
    const app_flag own[] = {APP_FLAG("--plain", NULL, APP_ON, &plain),
                            APP_FLAG("--no-config", NULL, APP_ON, &no_config),
                            APP_FLAG("--resume", NULL, APP_OPTSTR, &resume),
                            APP_FLAG("--template", NULL, APP_STR, &w.tmpl_flag),
                            APP_FLAG("--chat-template-file", NULL, APP_STR, &tmpl_file),
                            APP_FLAG("--think", NULL, APP_STR, &think_flag),
                            APP_FLAG("--system", NULL, APP_STR, &w.system_flag),
                            APP_FLAG("--config", NULL, APP_STR, &config_path),
                            APP_FLAG("--debug-token-delay", NULL, APP_INT, &delay, .min = 0, .max = 60000),
                            APP_FLAG_END};
    const app_cmd cmd = {.name = "chat", .usage = usage, .flags = own};
    int r = app_parse(argc, argv, first, &cmd, &w.o, NULL, NULL);
    if (r)
        return app_parse_status(r);

    load_config(&w.cfg, config_path, no_config);
    int thinking = w.cfg.v.thinking;
    if (think_flag) {
        if (!strcmp(think_flag, "on"))
            thinking = 1;
        else if (!strcmp(think_flag, "off"))
            thinking = 0;
        else
            return app_usage_error("chat", "--think", think_flag, "expected on or off");
    }
    /* the template file is read now, so a bad path fails before the screen */
    char *tmpl_src = NULL;
    if (tmpl_file) {
        size_t len;
        eng_err te = {{0}};
        if (app_read_text(tmpl_file, &tmpl_src, &len, &te)) {
            ui_term_printf(stderr, "nibble: %s\n", te.msg);
            return 1;
        }
    }

    /* the model: -m, else the config's, else the embedded one */
    char model[1200];
    if (!w.o.model && w.cfg.model[0])
        expand_home(w.cfg.model, model, sizeof model);
    else
        snprintf(model, sizeof model, "%s", app_model_path(&w.o));

    /* where conversations and the input history live */
    char data[1100] = "", hist[1200] = "";
    const char *xd = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    if (xd && *xd && !cfg_abs_path(xd))
        xd = NULL; /* relative: invalid, ignored (the XDG spec) */
#ifdef _WIN32
    const char *lad = getenv("LOCALAPPDATA"); /* C:\Users\NAME\AppData\Local */
    if (!(xd && *xd) && lad && *lad)
        xd = lad;
#endif
    if (xd && *xd)
        snprintf(data, sizeof data, "%s/nibble", xd);
    else if (home && *home)
        snprintf(data, sizeof data, "%s/.local/share/nibble", home);
    const char *nosave = NULL;
    char nosave_buf[600];
    if (data[0]) {
        eng_err de;
        if (eng_mkdirs(data, &de)) {
            snprintf(nosave_buf, sizeof nosave_buf, "%s; conversations will not be saved", de.msg);
            nosave = nosave_buf;
            data[0] = 0;
        } else
            snprintf(hist, sizeof hist, "%s/history", data);
    } else
        nosave = "neither HOME nor XDG_DATA_HOME (absolute) is set: conversations will not be saved";
    if (nosave)
        ui_term_printf(stderr, "nibble: %s\n", nosave);

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
    if (tmpl_src) { /* before the first LOAD, which the chat sends */
        eng_cmd tc = {.type = ENG_CMD_SET_CHAT_TEMPLATE, .text = tmpl_src};
        if (eng_engine_send(en, &tc))
            free(tmpl_src);
    }
    if (thinking >= 0)
        eng_engine_send_simple(en, ENG_CMD_SET_THINKING, NULL, thinking);
    ui_chat ch;
    ui_chat_opts co = {
        .data_dir = data[0] ? data : NULL,
        .resume = resume,
        .model = model,
        .model_given = w.o.model != NULL,
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
    int tty = isatty(0) && isatty(1);
#ifdef NIBBLE_HAVE_TUI
    int screen = tty && !plain;
#else
    int screen = 0;
#endif
    /* on the screen too, since stderr is hidden while curses runs; line
     * mode has them on stderr already, once */
    for (int i = 0; screen && i < w.cfg.n_warn; i++)
        ui_chat_notice(&ch, "config: %s", w.cfg.warn[i]);
    if (nosave && screen)
        ui_chat_notice(&ch, "%s", nosave);
    ui_opts uo = {.color = w.cfg.color, .mouse = w.cfg.mouse, .history = hist[0] ? hist : NULL};
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
    return ui_exit_status(status); /* a signal that ended either front end ends us, now the reply is saved */
}
