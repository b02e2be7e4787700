/* The menus: model files (the .gguf files in the configured folders,
 * each described by the engine, plus "Open a file by path..."), kernel
 * sets and threads, and the path prompt. A kind of menu is a row of a
 * table (title, what fills it, what Enter does, what Left/Right do);
 * the list itself (selection, scrolling, the error above it) is drawn
 * and driven the same for each. A failed load comes back to the model
 * menu with the reason above the list (tui.c). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "catalog.h"
#include "text.h"
#include "tui_internal.h"

struct tui_menu {
    const char *title;
    void (*fill)(tui *t);
    void (*choose)(tui *t, const mitem *it);
    /* Left/Right (hi 256) or -/+ (no upper bound) on a row; NULL: nothing */
    void (*step)(tui *t, const mitem *it, int dir, int hi);
    /* a character key of its own on a row (NULL: none); 1 if taken */
    int (*key)(tui *t, const mitem *it, uint32_t c);
};

#define BY_PATH (-2)   /* models menu: the row that opens the path prompt */
#define THREADS_ROW (-1) /* kernels menu: the threads row */
#define LOOKUP_ROW (-3)  /* kernels menu: prompt lookup length */
#define DRAFT_ROW (-4)   /* kernels menu: the draft model on or off */
#define MAX_FILES 500

static void menu_add(tui *t, const char *text, const char *note, const char *path, int enabled, int kernel)
{
    mitem *v = realloc(t->items, (size_t)(t->nitems + 1) * sizeof *v);
    if (!v)
        return;
    t->items = v;
    mitem *it = &v[t->nitems++];
    snprintf(it->text, sizeof it->text, "%s", text);
    snprintf(it->note, sizeof it->note, "%s", note ? note : "");
    snprintf(it->path, sizeof it->path, "%s", path ? path : "");
    it->enabled = enabled;
    it->kernel = kernel;
}

static void menu_open(tui *t, const tui_menu *m)
{
    free(t->items);
    t->items = NULL;
    t->nitems = 0;
    t->sel = t->mtop = 0;
    t->menu = m;
    t->view = &tui_view_menu;
    m->fill(t);
    t->dirty = 1;
}

/* ---- model files ---- */

static int by_path(const void *a, const void *b) { return strcmp(((const mitem *)a)->path, ((const mitem *)b)->path); }

/* the .gguf files of one folder, sorted by name */
static void add_folder(tui *t, const char *dir)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return;
    int first = t->nitems;
    struct dirent *de;
    while ((de = readdir(dp)) && t->nitems < MAX_FILES) {
        size_t len = strlen(de->d_name);
        if (len < 6 || strcmp(de->d_name + len - 5, ".gguf"))
            continue;
        char path[2048], note[256];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        eng_model_file_describe(path, note, sizeof note);
        int cur = !strcmp(path, t->ch->st.model_path);
        char text[600];
        snprintf(text, sizeof text, "%s %s", cur ? "*" : " ", de->d_name);
        menu_add(t, text, note, path, 1, 0);
    }
    closedir(dp);
    qsort(t->items + first, (size_t)(t->nitems - first), sizeof *t->items, by_path);
}

static void models_fill(tui *t)
{
    for (int d = 0; d < t->ch->n_dirs; d++)
        add_folder(t, t->ch->model_dirs[d]);
    if (!t->nitems)
        menu_add(t, "  (no .gguf files in the model folders; set model_dirs in nibble.ini)", NULL, NULL, 0, 0);
    menu_add(t, "  Open a file by path...", NULL, NULL, 1, BY_PATH);
    while (t->sel < t->nitems - 1 && !t->items[t->sel].enabled)
        t->sel++;
    /* the cursor starts on the model in use (or being opened) */
    const char *now = t->ch->loading ? t->ch->loading_path : t->ch->have_model ? t->ch->st.model_path : "";
    for (int i = 0; *now && i < t->nitems; i++)
        if (t->items[i].path[0] && !strcmp(t->items[i].path, now))
            t->sel = i;
}

static void models_choose(tui *t, const mitem *it)
{
    t->menu_err[0] = 0;
    if (it->kernel == BY_PATH) {
        t->view = &tui_view_path;
        ui_editor_clear(t->path_ed);
        return;
    }
    ui_chat_load_model(t->ch, it->path);
    t->menu_load = 1;
    t->view = &tui_view_input;
}

/* ---- kernel sets and threads ---- */

static void threads_refresh(tui *t)
{
    const eng_state *st = &t->ch->st;
    for (int i = 0; i < t->nitems; i++) {
        mitem *it = &t->items[i];
        if (it->kernel == THREADS_ROW) {
            snprintf(it->text, sizeof it->text, "  Threads: %d", t->threads_sel);
            snprintf(it->note, sizeof it->note, "(\u2190\u2192 change, Enter applies; now %d)", st->threads);
        } else if (it->kernel == LOOKUP_ROW) {
            char now[16];
            snprintf(now, sizeof now, st->lookup ? "%d" : "off", st->lookup);
            if (t->lookup_sel)
                snprintf(it->text, sizeof it->text, "  Prompt lookup: %d tokens", t->lookup_sel);
            else
                snprintf(it->text, sizeof it->text, "  Prompt lookup: off");
            snprintf(it->note, sizeof it->note, "(\u2190\u2192 change, Enter applies; now %s)", now);
        } else if (it->kernel == DRAFT_ROW) {
            snprintf(it->text, sizeof it->text, "  Draft model: %s", st->draft[0] ? "on" : "off");
            snprintf(it->note, sizeof it->note, "(Enter turns it %s) %s", st->draft[0] ? "off" : "on",
                     eng_path_base(it->path));
        }
    }
}

static void kernels_fill(tui *t)
{
    t->menu_err[0] = 0;
    for (int k = 0; k < eng_kernel_count(); k++) {
        eng_kernel_desc kd;
        eng_kernel_describe(k, &kd);
        int cur = !strcmp(kd.name, t->ch->st.kernel);
        char text[128], note[256];
        snprintf(text, sizeof text, "%s %-14s", cur ? "*" : " ", kd.name);
        snprintf(note, sizeof note, "%s", kd.usable ? (cur ? "in use" : "usable") : kd.why);
        menu_add(t, text, note, NULL, kd.usable, k);
        if (cur)
            t->sel = t->nitems - 1;
    }
    t->threads_sel = t->ch->st.threads > 0 ? t->ch->st.threads : 1;
    menu_add(t, "", NULL, NULL, 1, THREADS_ROW);
    /* speculative decoding, as /lookup and /draft: the lookup length, and
     * the draft model when one is loaded or configured for this model */
    t->lookup_sel = t->ch->st.lookup;
    menu_add(t, "", NULL, NULL, t->ch->have_model, LOOKUP_ROW);
    const char *draft = ui_chat_draft_known(t->ch);
    if (draft)
        menu_add(t, "", NULL, draft, t->ch->have_model, DRAFT_ROW);
    threads_refresh(t);
}

static void kernels_choose(tui *t, const mitem *it)
{
    const eng_state *st = &t->ch->st;
    if (it->kernel == THREADS_ROW)
        ui_chat_set_threads(t->ch, t->threads_sel);
    else if (it->kernel == LOOKUP_ROW)
        ui_chat_set_spec(t->ch, st->draft, t->lookup_sel);
    else if (it->kernel == DRAFT_ROW)
        ui_chat_set_spec(t->ch, st->draft[0] ? NULL : it->path, st->lookup);
    else {
        eng_kernel_desc kd;
        if (!eng_kernel_describe(it->kernel, &kd))
            ui_chat_set_kernel(t->ch, kd.name);
    }
    t->view = &tui_view_input;
}

static void kernels_step(tui *t, const mitem *it, int dir, int hi)
{
    if (it->kernel == LOOKUP_ROW) {
        t->lookup_sel += dir;
        t->lookup_sel = t->lookup_sel < 0 ? 0 : t->lookup_sel > 64 ? 64 : t->lookup_sel;
        threads_refresh(t);
        return;
    }
    if (it->kernel != THREADS_ROW)
        return;
    t->threads_sel += dir;
    if (t->threads_sel < 1)
        t->threads_sel = 1;
    if (hi && t->threads_sel > hi)
        t->threads_sel = hi;
    threads_refresh(t);
}

static const tui_menu menu_models = {" Models  (Enter opens, Esc closes) ", models_fill, models_choose, NULL, NULL};
static const tui_menu menu_kernels = {" Kernel sets and threads, speculation  (Enter picks, \u2190\u2192 changes) ", kernels_fill,
                                      kernels_choose, kernels_step, NULL};

void tui_menu_models(tui *t) { menu_open(t, &menu_models); }

/* ---- saved conversations ---- */

static void convs_fill(tui *t)
{
    ui_conv *v;
    int n = ui_chat_convs(t->ch, &v);
    n = ui_conv_filter(v, n, t->conv_query);
    for (int i = 0; i < n; i++) {
        char when[32] = "", text[640], note[256];
        time_t tt = (time_t)v[i].mtime;
        struct tm tm;
        if (localtime_r(&tt, &tm))
            strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
        snprintf(text, sizeof text, "%-20.20s %s %-12.12s %3d", v[i].name, when,
                 v[i].error[0] ? "(unreadable)" : v[i].model[0] ? v[i].model : "-", v[i].turns);
        snprintf(note, sizeof note, "%s%s", v[i].error[0] ? v[i].error : v[i].first,
                 !strcmp(v[i].name, t->ch->name) ? "  (open)" : "");
        menu_add(t, text, note, v[i].name, !v[i].error[0], 0);
    }
    free(v);
    if (!t->nitems)
        menu_add(t, t->conv_query[0] ? "  (no conversation has that; / searches again)" : "  (no saved conversations yet)",
                 NULL, NULL, 0, 0);
    snprintf(t->menu_err, sizeof t->menu_err, "%s%s", t->conv_query[0] ? "search: " : "", t->conv_query);
}

static void convs_choose(tui *t, const mitem *it)
{
    eng_err e = {{0}};
    t->menu_err[0] = 0;
    t->view = &tui_view_input;
    if (ui_chat_open(t->ch, it->path, &e))
        ui_chat_error(t->ch, "cannot open '%s': %s", it->path, e.msg);
    t->scroll = 0;
}

static int convs_key(tui *t, const mitem *it, uint32_t c)
{
    if (t->conv_confirm) { /* the answer to "delete it?" */
        t->conv_confirm = 0;
        if (c == 'y' || c == 'Y') {
            eng_err e = {{0}};
            if (ui_chat_conv_delete(t->ch, t->conv_sel, &e))
                tui_set_status(t, e.msg);
            else
                tui_set_status(t, "deleted");
            int sel = t->sel;
            tui_menu_convs(t);
            t->sel = sel < t->nitems ? sel : t->nitems - 1;
        } else
            t->menu_err[0] = 0;
        return 1;
    }
    if (c == '/') {
        t->prompt = PROMPT_SEARCH;
        ui_editor_clear(t->path_ed);
        ui_editor_insert(t->path_ed, t->conv_query, strlen(t->conv_query));
        t->view = &tui_view_path;
        return 1;
    }
    if (!it->path[0])
        return c == 'd' || c == 'r';
    if (c == 'd') {
        snprintf(t->conv_sel, sizeof t->conv_sel, "%.127s", it->path);
        snprintf(t->menu_err, sizeof t->menu_err, "Delete '%.127s' for good? y deletes, any other key keeps it", it->path);
        t->conv_confirm = 1;
        return 1;
    }
    if (c == 'r') {
        snprintf(t->conv_sel, sizeof t->conv_sel, "%.127s", it->path);
        t->prompt = PROMPT_RENAME;
        ui_editor_clear(t->path_ed);
        ui_editor_insert(t->path_ed, it->path, strlen(it->path));
        t->view = &tui_view_path;
        return 1;
    }
    return 0;
}

static const tui_menu menu_convs = {" Conversations  (Enter opens, r renames, d deletes, / searches) ", convs_fill,
                                    convs_choose, NULL, convs_key};

void tui_menu_convs(tui *t)
{
    t->conv_confirm = 0;
    menu_open(t, &menu_convs);
}
void tui_menu_kernels(tui *t) { menu_open(t, &menu_kernels); }

/* ---- the list: drawing and keys ---- */

/* The box and the error above its content; returns the first free row. */
static int draw_frame(tui *t, const char *title, int *x, int *w, int *y, int *h)
{
    *w = t->W - 10 > 100 ? 100 : t->W - 10, *h = t->H - 6;
    *y = 3, *x = (t->W - *w) / 2;
    tui_box(t, *y, *x, *h, *w, title);
    int row = *y + 1;
    if (t->menu_err[0]) {
        attron(tui_pair(t, C_ERR) | A_BOLD);
        ui_line ls[4];
        size_t n = ui_wrap(t->menu_err, strlen(t->menu_err), *w - 4, 1, ls, 4);
        for (size_t i = 0; i < n && i < 3; i++)
            tui_put(row++, *x + 2, *w - 4, t->menu_err + ls[i].start, ls[i].end - ls[i].start);
        attroff(tui_pair(t, C_ERR) | A_BOLD);
        row++;
    }
    return row;
}

static void draw_menu(tui *t)
{
    int x, w, y, h;
    int row = draw_frame(t, t->menu->title, &x, &w, &y, &h);
    int avail = y + h - 1 - row;
    if (t->sel < t->mtop)
        t->mtop = t->sel;
    if (t->sel >= t->mtop + avail)
        t->mtop = t->sel - avail + 1;
    for (int i = t->mtop; i < t->nitems && row < y + h - 1; i++, row++) {
        mitem *it = &t->items[i];
        int sel = i == t->sel;
        int a = sel ? (A_REVERSE | tui_pair(t, C_SEL)) : it->enabled ? 0 : (tui_pair(t, C_DIM) | A_DIM);
        attron(a);
        mvhline(row, x + 1, ' ', w - 2);
        int used = tui_putz(row, x + 2, w - 4, it->text);
        if (it->note[0] && used + 3 < w - 4)
            tui_putz(row, x + 4 + used, w - 6 - used, it->note);
        attroff(a);
    }
}

static void menu_choose(tui *t)
{
    if (t->sel < 0 || t->sel >= t->nitems)
        return;
    mitem *it = &t->items[t->sel];
    if (!it->enabled) {
        tui_set_status(t, "not available here");
        return;
    }
    t->menu->choose(t, it);
}

static void menu_step(tui *t, int dir, int hi)
{
    if (t->menu->step)
        t->menu->step(t, &t->items[t->sel], dir, hi);
}

int tui_menu_fkeys(tui *t, int fn, uint32_t c)
{
    if (!fn || (c != KEY_F(2) && c != KEY_F(3) && c != KEY_F(7) && c != KEY_F(10)))
        return 0;
    if (c == KEY_F(10))
        t->view = &tui_view_input;
    else
        tui_key_common(t, fn, c);
    return 1;
}

static void menu_key(tui *t, int fn, uint32_t c, int alt)
{
    (void)alt;
    if (fn) {
        switch (c) {
        case KEY_UP: if (t->sel > 0) t->sel--; return;
        case KEY_DOWN: if (t->sel < t->nitems - 1) t->sel++; return;
        case KEY_PPAGE: t->sel = t->sel > 10 ? t->sel - 10 : 0; return;
        case KEY_NPAGE: t->sel = t->sel + 10 < t->nitems ? t->sel + 10 : t->nitems - 1; return;
        case KEY_ENTER: menu_choose(t); return;
        case KEY_LEFT: menu_step(t, -1, 256); return;
        case KEY_RIGHT: menu_step(t, +1, 256); return;
        }
        return;
    }
    if (t->menu->key && t->sel >= 0 && t->sel < t->nitems && t->menu->key(t, &t->items[t->sel], c))
        return;
    switch (c) {
    case 27: case 'q': t->menu_err[0] = 0; t->view = &tui_view_input; return;
    case '\r': case '\n': menu_choose(t); return;
    case 'k': if (t->sel > 0) t->sel--; return;
    case 'j': if (t->sel < t->nitems - 1) t->sel++; return;
    case '+': menu_step(t, +1, 0); return;
    case '-': menu_step(t, -1, 0); return;
    }
}

const tui_view tui_view_menu = {"menu", tui_menu_fkeys, menu_key, draw_menu, TUI_CURSOR_NONE};

/* ---- the path prompt ---- */

static void draw_path(tui *t)
{
    int x, w, y, h;
    static const char *const title[] = {" Open a model file ", " Rename a conversation ", " Search conversations "};
    static const char *const ask[] = {"Path of a .gguf file (Enter opens, Esc goes back):",
                                      "New name (letters, digits, - _ .; Enter renames, Esc goes back):",
                                      "Words in the name, model or first line (Enter searches; empty: all):"};
    int row = draw_frame(t, title[t->prompt], &x, &w, &y, &h);
    tui_putz(row++, x + 2, w - 4, ask[t->prompt]);
    const char *p = ui_editor_text(t->path_ed);
    size_t len = strlen(p);
    int cols = w - 6;
    size_t start = 0;
    while (ui_width(p + start, len - start) > cols - 1)
        start++;
    attron(A_REVERSE);
    mvhline(row, x + 2, ' ', w - 4);
    tui_put(row, x + 3, cols, p + start, len - start);
    attroff(A_REVERSE);
    /* the cursor stays here (TUI_CURSOR_VIEW) */
    move(row, x + 3 + ui_width(p + start, ui_editor_cursor(t->path_ed) - start));
}

static void path_key(tui *t, int fn, uint32_t c, int alt)
{
    (void)alt;
    ui_editor *pe = t->path_ed;
    if (fn) {
        switch (c) {
        case KEY_ENTER: break;
        case KEY_BACKSPACE: ui_editor_backspace(pe); return;
        case KEY_LEFT: ui_editor_left(pe); return;
        case KEY_RIGHT: ui_editor_right(pe); return;
        case KEY_HOME: ui_editor_home(pe); return;
        case KEY_END: ui_editor_end(pe); return;
        case KEY_DC: ui_editor_delete(pe); return;
        default: return;
        }
    }
    if ((fn || c == '\r' || c == '\n') && t->prompt != PROMPT_PATH) {
        const char *s = ui_editor_text(pe);
        if (t->prompt == PROMPT_SEARCH)
            snprintf(t->conv_query, sizeof t->conv_query, "%s", s);
        else {
            eng_err e = {{0}};
            if (ui_chat_conv_rename(t->ch, t->conv_sel, s, &e)) {
                snprintf(t->menu_err, sizeof t->menu_err, "%s", e.msg);
                return;
            }
            tui_set_status(t, "renamed");
        }
        t->prompt = PROMPT_PATH;
        tui_menu_convs(t);
        return;
    }
    if (!fn && c == 27 && t->prompt != PROMPT_PATH) {
        t->prompt = PROMPT_PATH;
        tui_menu_convs(t);
        return;
    }
    if (fn || c == '\r' || c == '\n') { /* fn here: KEY_ENTER */
        if (ui_editor_len(pe)) {
            ui_chat_load_model(t->ch, ui_editor_text(pe));
            t->menu_load = 1;
            t->view = &tui_view_input;
        }
        return;
    }
    switch (c) {
    case 27: tui_menu_models(t); return;
    case 127: case 8: ui_editor_backspace(pe); return;
    case 21: ui_editor_kill_start(pe); return;
    }
    if (c >= 0x20)
        tui_insert_char(pe, c);
}

const tui_view tui_view_path = {"path", tui_menu_fkeys, path_key, draw_path, TUI_CURSOR_VIEW};
