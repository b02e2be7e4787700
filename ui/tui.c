/* The curses screen (htop-like: one look tells the state).
 *
 *   row 0        title: model, weight type, kernel, threads, template
 *   rows 1-2     meters: context gauge, tok/s, time to first token,
 *                sparkline, memory; a progress bar while loading or
 *                during a long prompt
 *   middle       conversation (left) | sampler sliders (right)
 *   bottom       input editor (1-5 rows), F-key bar
 *
 * One loop: wait for the terminal and the engine's queue together
 * (ui_term_wait: poll() on POSIX, short turns on Windows), take every
 * event, handle every key, then redraw once if anything is dirty. Resize
 * arrives as KEY_RESIZE in that loop; signal handlers only set flags (and,
 * for fatal signals, put the terminal back).
 *
 * Curses: ncursesw (POSIX) or PDCurses with PDC_WIDE and PDC_FORCE_UTF8
 * (the Windows console). What the operating system does differently is in
 * term.h; the differences between the two libraries are the blocks marked
 * PDCURSES / NCURSES_VERSION below. */
#include <locale.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <wchar.h>
#include <dirent.h>

#include <curses.h>

#include "editor.h"
#include "sys.h"
#include "catalog.h"
#include "term.h"
#include "text.h"
#include "ui.h"

#define SIDE_W 28        /* side panel columns */
#define MIN_W 80
#define MIN_H 24
#define INPUT_MAX_ROWS 5

/* key codes of our own (define_key) for bracketed paste */
#define K_PASTE_BEGIN (KEY_MAX + 1)
#define K_PASTE_END (KEY_MAX + 2)

enum { C_TITLE = 1, C_METER, C_USER, C_BOT, C_NOTE, C_ERR, C_FKEY, C_FLABEL, C_DIM, C_MARK, C_SEL, C_WARN, C_BAR };
enum focus { F_INPUT, F_SLIDERS, F_MENU, F_HELP, F_CONFIRM };
enum menu_kind { M_MODELS, M_KERNELS, M_PATH };

typedef struct mitem {
    char text[640];
    char note[256];
    char path[2048];
    int enabled;
    int kernel; /* M_KERNELS: kernel id, -1 for the threads row */
} mitem;

typedef struct dline {
    const char *s;  /* bytes to draw */
    size_t n;
    int kind;       /* colour pair */
    int attr;
    int entry;      /* document entry, -1 for spacing */
    size_t off;     /* byte offset in that entry's display text (resize anchor) */
} dline;

typedef struct tui {
    ui_chat *ch;
    const ui_opts *o;
    ui_editor *ed;
    int W, H;
    int color;
    enum focus focus;
    int slider;
    int scroll;          /* lines above the bottom; 0 follows the reply */
    int anchor_entry;    /* top line of the view, kept across a resize */
    size_t anchor_off;
    int total_lines;
    /* menu */
    enum menu_kind menu;
    mitem *items;
    int nitems, sel, mtop;
    int help_top; /* first line of the help shown; the help scrolls on small screens */
    char menu_err[512];
    int threads_sel;
    ui_editor *path_ed;
    int menu_load;       /* a load was started from the menu */
    /* keys */
    int pasting, paste_guard;
    double ctrl_c_ms;
    char status[256];
    double status_ms;
    int quit;
    int dirty;
    /* per frame */
    char **frame_bufs;
    int nframe;
} tui;

/* ---- terminal restore on every way out (fatal signals: term.h) ---- */

static int curses_up;

static void restore_at_exit(void)
{
    if (curses_up) {
        ui_term_paste(0);
        endwin();
        curses_up = 0;
    }
}

/* ---- drawing helpers ---- */

static int pair(tui *t, int p) { return t->color ? COLOR_PAIR(p) : 0; }

/* Draw s[0..n) at (y, x) in at most cols columns; returns columns used.
 * Invalid bytes and control characters show as '?'. */
static int put(int y, int x, int cols, const char *s, size_t n)
{
    int used = 0, w, cp;
    move(y, x);
    for (size_t i = 0; i < n;) {
        size_t len = ui_char(s, n, i, &w, &cp);
        if (used + w > cols)
            break;
        if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0))
            addch('?');
#ifdef PDCURSES
        else if (cp > 0xffff) /* PDCurses' cells hold one UTF-16 unit: no emoji */
            for (int k = 0; k < w; k++)
                addch('?');
#endif
        else if (w > 0 || used > 0)
            addnstr(s + i, (int)len);
        used += w;
        i += len;
    }
    return used;
}

static int putz(int y, int x, int cols, const char *s) { return put(y, x, cols, s, strlen(s)); }

static void fill(int y, int x, int cols, int attr)
{
    attron(attr);
    mvhline(y, x, ' ', cols);
    attroff(attr);
}

static const char *frame_keep(tui *t, char *s)
{
    char **v = realloc(t->frame_bufs, (size_t)(t->nframe + 1) * sizeof *v);
    if (!v) {
        free(s);
        return "";
    }
    t->frame_bufs = v;
    v[t->nframe++] = s;
    return s;
}

static void frame_free(tui *t)
{
    for (int i = 0; i < t->nframe; i++)
        free(t->frame_bufs[i]);
    t->nframe = 0;
}

static void set_status(tui *t, const char *msg)
{
    snprintf(t->status, sizeof t->status, "%s", msg);
    t->status_ms = ui_now_ms();
    t->dirty = 1;
}

/* ---- header ---- */

static void human(double bytes, char *b, size_t n)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (bytes >= 1024 && i < 4) {
        bytes /= 1024;
        i++;
    }
    snprintf(b, n, i ? "%.1f %s" : "%.0f %s", bytes, u[i]);
}

/* A bar [|||||     ] of cols columns at fraction f. */
static void bar(tui *t, int y, int x, int cols, double f, int warn)
{
    if (cols < 3)
        return;
    int inner = cols - 2, full = (int)(f * inner + 0.5);
    if (full > inner)
        full = inner;
    if (full < 0)
        full = 0;
    mvaddch(y, x, '[');
    attron(pair(t, warn ? C_WARN : C_BAR) | A_BOLD);
    for (int i = 0; i < full; i++)
        addch('|');
    attroff(pair(t, warn ? C_WARN : C_BAR) | A_BOLD);
    for (int i = full; i < inner; i++)
        addch(' ');
    addch(']');
}

static void draw_header(tui *t)
{
    ui_chat *ch = t->ch;
    char buf[1024];
    fill(0, 0, t->W, pair(t, C_TITLE) | A_REVERSE * !t->color);
    attron(pair(t, C_TITLE) | A_BOLD | (t->color ? 0 : A_REVERSE));
    if (ch->have_model)
        snprintf(buf, sizeof buf, " nibble  %s  %s %s  kernel %s  %d thread%s  template %s", ch->st.model_name,
                 ch->st.arch, ch->st.weight_type, ch->st.kernel, ch->st.threads, ch->st.threads == 1 ? "" : "s",
                 ch->st.tmpl);
    else
        snprintf(buf, sizeof buf, " nibble  %s", ch->loading ? "loading a model..." : "no model (F2 opens one)");
    putz(0, 0, t->W, buf);
    attroff(pair(t, C_TITLE) | A_BOLD | (t->color ? 0 : A_REVERSE));

    /* row 1: context gauge, speeds */
    int x = 1;
    attron(pair(t, C_METER) | A_BOLD);
    mvaddstr(1, x, "Ctx");
    attroff(pair(t, C_METER) | A_BOLD);
    uint32_t used = ch->stats.ctx_used, size = ch->stats.ctx_size ? ch->stats.ctx_size : ch->st.ctx_size;
    double f = size ? (double)used / size : 0;
    /* a narrow terminal (80 columns) gets a shorter gauge and the speeds
     * without padding, so that all three figures stay on the screen */
    int gw = t->W >= 110 ? 26 : 12;
    bar(t, 1, x + 4, gw, f, f >= 0.8);
    snprintf(buf, sizeof buf, "%u/%u%s", used, size, f >= 0.8 ? " !" : "");
    if (f >= 0.8)
        attron(pair(t, C_WARN) | A_BOLD);
    putz(1, x + gw + 5, 14, buf);
    if (f >= 0.8)
        attroff(pair(t, C_WARN) | A_BOLD);
    int sx = x + gw + 20, room = t->W - sx - 1;
    snprintf(buf, sizeof buf, "Decode %7.1f tok/s   Prefill %7.1f tok/s   TTFT %6.0f ms", ch->decode_tps,
             ch->prefill_tps, ch->ttft_ms);
    if ((int)strlen(buf) > room) /* tenths only below 100 tok/s, where they tell something */
        snprintf(buf, sizeof buf, "Decode %.*f  Prefill %.*f tok/s  TTFT %.0f ms", ch->decode_tps < 100 ? 1 : 0,
                 ch->decode_tps, ch->prefill_tps < 100 ? 1 : 0, ch->prefill_tps, ch->ttft_ms);
    putz(1, sx, room, buf);

    /* row 2: progress, or sparkline + memory */
    if (ch->prog_active) {
        double el = (ui_now_ms() - ch->prog_t0) / 1e3;
        int isload = !strcmp(ch->prog_stage, "load");
        attron(pair(t, C_METER) | A_BOLD);
        mvaddstr(2, x, isload ? "Load" : "Prompt");
        attroff(pair(t, C_METER) | A_BOLD);
        if (isload && ch->prog_frac > 0) {
            bar(t, 2, x + 7, 26, ch->prog_frac, 0);
            snprintf(buf, sizeof buf, "%3.0f%%  ETA %.1f s  %.900s", ch->prog_frac * 100, ch->prog_eta,
                     ch->loading_path);
        } else if (isload) {
            /* before the first layer is checked: a moving block and the time */
            int cols = 26, pos = (int)(el * 8) % (cols - 4);
            mvaddch(2, x + 7, '[');
            for (int i = 0; i < cols - 2; i++)
                addch(i >= pos && i < pos + 3 ? '|' : ' ');
            addch(']');
            snprintf(buf, sizeof buf, "opening %.900s  %.1f s", ch->loading_path, el);
        } else {
            bar(t, 2, x + 7, 26, ch->prog_frac, 0);
            snprintf(buf, sizeof buf, "%3.0f%%  ETA %.1f s", ch->prog_frac * 100, ch->prog_eta);
        }
        putz(2, x + 35, t->W - x - 36, buf);
    } else {
        attron(pair(t, C_METER) | A_BOLD);
        mvaddstr(2, x, "Tok/s");
        attroff(pair(t, C_METER) | A_BOLD);
        static const char *blocks[] = {"\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"};
        float mx = 0;
        for (int i = 0; i < ch->nspark; i++)
            if (ch->spark[i] > mx)
                mx = ch->spark[i];
        move(2, x + 7);
        attron(pair(t, C_BAR));
        for (int i = 0; i < UI_SPARK && i < 32; i++) {
            int k = ch->nspark - 32 + i;
            if (k < 0) {
                addch(' ');
                continue;
            }
            int lvl = mx > 0 ? (int)(ch->spark[k] / mx * 7 + 0.5) : 0;
            addstr(blocks[lvl < 0 ? 0 : lvl > 7 ? 7 : lvl]);
        }
        attroff(pair(t, C_BAR));
        char mem[32];
        human((double)eng_rss_bytes(), mem, sizeof mem);
        snprintf(buf, sizeof buf, "Mem %s   %s", mem,
                 ch->busy ? "replying..." : ch->loading ? "loading..." : "ready");
        putz(2, x + 41, t->W - x - 42, buf);
    }
}

/* ---- conversation ---- */

static int conv_width(tui *t) { return t->W - SIDE_W - 3; }

/* The text an entry shows: replies get their marks inserted. */
static const char *entry_text(tui *t, const eng_jentry *x, size_t *n)
{
    if (!x->nmarks) {
        *n = x->len;
        return x->text;
    }
    size_t cap = x->len + 1;
    for (size_t k = 0; k < x->nmarks; k++)
        cap += strlen(x->marks[k].what) + 16;
    char *b = malloc(cap);
    if (!b) {
        *n = x->len;
        return x->text;
    }
    size_t u = 0, prev = 0;
    for (size_t k = 0; k < x->nmarks; k++) {
        size_t at = x->marks[k].byte > x->len ? x->len : x->marks[k].byte;
        if (at < prev)
            at = prev;
        memcpy(b + u, x->text + prev, at - prev);
        u += at - prev;
        u += (size_t)sprintf(b + u, "\u27e6%s\u27e7", x->marks[k].what);
        prev = at;
    }
    memcpy(b + u, x->text + prev, x->len - prev);
    u += x->len - prev;
    b[u] = 0;
    *n = u;
    return frame_keep(t, b);
}

static int add_line(dline **v, int *n, int *cap, dline l)
{
    if (*n == *cap) {
        int c = *cap ? *cap * 2 : 256;
        dline *nv = realloc(*v, (size_t)c * sizeof *nv);
        if (!nv)
            return -1;
        *v = nv;
        *cap = c;
    }
    (*v)[(*n)++] = l;
    return 0;
}

static int build_lines(tui *t, int width, dline **out)
{
    eng_journal *d = t->ch->doc;
    dline *v = NULL;
    int n = 0, cap = 0;
    for (size_t i = 0; i < d->n; i++) {
        const eng_jentry *x = &d->e[i];
        const char *sup = eng_journal_get_meta(d, i, "superseded");
        int old = sup && !strcmp(sup, "1");
        int kind = x->kind == ENG_J_USER ? C_USER : x->kind == ENG_J_ASSISTANT ? C_BOT : C_NOTE;
        if (x->kind == ENG_J_NOTICE && (!strncmp(x->text, "error", 5) || !strncmp(x->text, "cannot", 6)))
            kind = C_ERR;
        const char *label = x->kind == ENG_J_USER ? "You" : x->kind == ENG_J_ASSISTANT ? (old ? "Reply (replaced)" : "Reply") : NULL;
        if (label) {
            const char *m = eng_journal_get_meta(d, i, "model");
            char *b = malloc(300);
            if (b) {
                snprintf(b, 300, "%s%s%s", label, x->kind == ENG_J_ASSISTANT && m ? " \u00b7 " : "",
                         x->kind == ENG_J_ASSISTANT && m ? m : "");
                const char *s = frame_keep(t, b);
                add_line(&v, &n, &cap, (dline){s, strlen(s), kind, A_BOLD, (int)i, 0});
            }
        }
        size_t tn;
        const char *txt = entry_text(t, x, &tn);
        int indent = label ? 2 : 0;
        if (!label) {
            /* notices: one dim line (or several) with a leading marker */
            char *b = malloc(tn + 8);
            if (b) {
                memcpy(b, "\u2022 ", 4);
                memcpy(b + 4, txt, tn);
                b[tn + 4] = 0;
                txt = frame_keep(t, b);
                tn += 4;
            }
        }
        size_t nl = ui_wrap(txt, tn, width - indent, 1, NULL, 0);
        ui_line *ls = malloc((nl ? nl : 1) * sizeof *ls);
        if (!ls)
            break;
        ui_wrap(txt, tn, width - indent, 1, ls, nl);
        for (size_t k = 0; k < nl; k++) {
            char *b = malloc((size_t)indent + (ls[k].end - ls[k].start) + 1);
            if (!b)
                break;
            memset(b, ' ', (size_t)indent);
            memcpy(b + indent, txt + ls[k].start, ls[k].end - ls[k].start);
            b[indent + ls[k].end - ls[k].start] = 0;
            const char *s = frame_keep(t, b);
            add_line(&v, &n, &cap,
                     (dline){s, strlen(s), kind, old ? A_DIM : 0, (int)i, ls[k].start});
        }
        free(ls);
        if (x->kind == ENG_J_ASSISTANT) {
            /* the footer: how it ended, size, speed, and what made it */
            const char *tok = eng_journal_get_meta(d, i, "tokens");
            char *b = malloc(512);
            if (b) {
                if (x->partial && t->ch->reply == (int)i)
                    snprintf(b, 512, "\u2026 writing");
                else if (x->partial)
                    snprintf(b, 512, "\u2500 cut short (saved while it was being written)");
                else
                    snprintf(b, 512, "\u2500 %s \u00b7 %s tokens \u00b7 %s tok/s \u00b7 %s \u00d7%s \u00b7 temp %s top-p %s top-k %s",
                             eng_journal_get_meta(d, i, "end") ?: "?", tok ? tok : "?",
                             eng_journal_get_meta(d, i, "decode_tps") ?: "?", eng_journal_get_meta(d, i, "kernel") ?: "?",
                             eng_journal_get_meta(d, i, "threads") ?: "?", eng_journal_get_meta(d, i, "temp") ?: "?",
                             eng_journal_get_meta(d, i, "top_p") ?: "?", eng_journal_get_meta(d, i, "top_k") ?: "?");
                const char *s = frame_keep(t, b);
                ui_line fl[4];
                size_t nf = ui_wrap(s, strlen(s), width - 2, 1, fl, 4);
                for (size_t k = 0; k < nf && k < 4; k++) {
                    char *fb = malloc(fl[k].end - fl[k].start + 3);
                    if (!fb)
                        break;
                    fb[0] = fb[1] = ' ';
                    memcpy(fb + 2, s + fl[k].start, fl[k].end - fl[k].start);
                    fb[fl[k].end - fl[k].start + 2] = 0;
                    const char *fs = frame_keep(t, fb);
                    add_line(&v, &n, &cap, (dline){fs, strlen(fs), C_DIM, 0, (int)i, x->len});
                }
            }
        }
        add_line(&v, &n, &cap, (dline){"", 0, 0, 0, -1, 0});
    }
    *out = v;
    return n;
}

static void draw_conv(tui *t, int top, int rows)
{
    int width = conv_width(t);
    dline *v;
    int n = build_lines(t, width, &v);
    /* keep the view still while text arrives below it */
    if (t->scroll > 0 && n > t->total_lines && t->total_lines)
        t->scroll += n - t->total_lines;
    t->total_lines = n;
    int maxscroll = n > rows ? n - rows : 0;
    if (t->scroll > maxscroll)
        t->scroll = maxscroll;
    if (t->scroll < 0)
        t->scroll = 0;
    int first = n - rows - t->scroll;
    if (first < 0)
        first = 0;
    t->anchor_entry = -1;
    for (int r = 0; r < rows && first + r < n; r++) {
        dline *l = &v[first + r];
        if (t->anchor_entry < 0 && l->entry >= 0) {
            t->anchor_entry = l->entry;
            t->anchor_off = l->off;
        }
        int a = pair(t, l->kind) | l->attr;
        attron(a);
        put(top + r, 1, width, l->s, l->n);
        attroff(a);
    }
    if (t->scroll > 0) {
        char b[64];
        snprintf(b, sizeof b, " \u2191 %d more  (End: latest) ", t->scroll);
        attron(pair(t, C_SEL) | A_REVERSE * !t->color);
        putz(top + rows - 1, width - 24, 26, b);
        attroff(pair(t, C_SEL) | A_REVERSE * !t->color);
    }
    free(v);
}

/* After a resize: put the line that was on top back on top. */
static void keep_anchor(tui *t, int rows)
{
    if (t->scroll == 0 || t->anchor_entry < 0)
        return;
    dline *v;
    int n = build_lines(t, conv_width(t), &v);
    int at = -1;
    for (int i = 0; i < n; i++)
        if (v[i].entry == t->anchor_entry && v[i].off <= t->anchor_off)
            at = i;
    free(v);
    frame_free(t);
    if (at >= 0) {
        t->scroll = n - rows - at;
        if (t->scroll < 0)
            t->scroll = 0;
    }
    t->total_lines = n;
}

/* ---- side panel ---- */

typedef struct slider {
    const char *name;
    double lo, hi, step;
    const char *fmt;
} slider;

static const slider sliders[] = {
    {"Temperature", 0, 2, 0.05, "%.2f"}, {"Top-p", 0.05, 1, 0.05, "%.2f"},
    {"Top-k", 0, 200, 5, "%.0f"},        {"Min-p", 0, 0.5, 0.01, "%.2f"},
    {"Repeat penalty", 1, 2, 0.05, "%.2f"}, {"Max tokens", 0, 4096, 32, "%.0f"},
};
#define NSLIDERS (int)(sizeof sliders / sizeof sliders[0])

static double slider_get(const eng_gen_params *g, int i)
{
    switch (i) {
    case 0: return g->sp.temp;
    case 1: return g->sp.top_p;
    case 2: return g->sp.top_k;
    case 3: return g->sp.min_p;
    case 4: return g->sp.repeat_penalty;
    default: return g->max_tokens;
    }
}

static void slider_set(eng_gen_params *g, int i, double v)
{
    switch (i) {
    case 0: g->sp.temp = (float)v; break;
    case 1: g->sp.top_p = (float)v; break;
    case 2: g->sp.top_k = (int32_t)(v + 0.5); break;
    case 3: g->sp.min_p = (float)v; break;
    case 4: g->sp.repeat_penalty = (float)v; break;
    default: g->max_tokens = (int32_t)(v + 0.5); break;
    }
}

static void slider_step(tui *t, int dir)
{
    const slider *s = &sliders[t->slider];
    eng_gen_params g = t->ch->gen;
    double v = slider_get(&g, t->slider) + dir * s->step;
    /* snap to the step grid, so repeated steps stay round */
    v = s->lo + (double)(long)((v - s->lo) / s->step + (dir > 0 ? 0.5 : 0.5)) * s->step;
    if (v < s->lo)
        v = s->lo;
    if (v > s->hi)
        v = s->hi;
    slider_set(&g, t->slider, v);
    ui_chat_set_gen(t->ch, &g);
    char b[96], val[32];
    snprintf(val, sizeof val, s->fmt, v);
    snprintf(b, sizeof b, "%s %s%s", s->name, val, t->ch->busy ? " (from the next token)" : "");
    set_status(t, b);
}

static void draw_side(tui *t, int top, int rows)
{
    int x = t->W - SIDE_W;
    attron(pair(t, C_DIM));
    mvvline(top, x - 1, ACS_VLINE, rows);
    attroff(pair(t, C_DIM));
    int foc = t->focus == F_SLIDERS;
    attron((foc ? pair(t, C_SEL) : pair(t, C_METER)) | A_BOLD);
    putz(top, x + 1, SIDE_W - 2, foc ? "Sampler  (\u2191\u2193 pick, \u2190\u2192 set)" : "Sampler  (Tab/F4)");
    attroff((foc ? pair(t, C_SEL) : pair(t, C_METER)) | A_BOLD);
    int y = top + 2;
    for (int i = 0; i < NSLIDERS && y + 1 < top + rows; i++, y += 3) {
        const slider *s = &sliders[i];
        double v = slider_get(&t->ch->gen, i);
        char val[32], b[64];
        snprintf(val, sizeof val, s->fmt, v);
        if ((i == 2 || i == 5) && v == 0)
            snprintf(val, sizeof val, "off");
        snprintf(b, sizeof b, "%-15s%8s", s->name, val);
        int sel = foc && t->slider == i;
        if (sel)
            attron(A_REVERSE | pair(t, C_SEL));
        putz(y, x + 1, SIDE_W - 2, b);
        if (sel)
            attroff(A_REVERSE | pair(t, C_SEL));
        bar(t, y + 1, x + 1, SIDE_W - 3, (v - s->lo) / (s->hi - s->lo), 0);
    }
    if (y + 2 < top + rows) {
        char b[64];
        snprintf(b, sizeof b, "seed %llu", (unsigned long long)t->ch->gen.sp.seed);
        attron(pair(t, C_DIM));
        putz(y, x + 1, SIDE_W - 2, b);
        attroff(pair(t, C_DIM));
    }
}

/* ---- input and key bar ---- */

static int input_rows(tui *t)
{
    int r, c;
    int n = (int)ui_editor_layout(t->ed, t->W - 3, NULL, 0, &r, &c);
    ui_line tmp[64];
    n = (int)ui_editor_layout(t->ed, t->W - 3, tmp, 64, &r, &c);
    if (n < 1)
        n = 1;
    return n > INPUT_MAX_ROWS ? INPUT_MAX_ROWS : n;
}

static void draw_input(tui *t, int top, int rows, int *cy, int *cx)
{
    attron(pair(t, C_DIM));
    mvhline(top - 1, 0, ACS_HLINE, t->W);
    attroff(pair(t, C_DIM));
    if (t->status[0] && ui_now_ms() - t->status_ms < 4000) {
        attron(pair(t, C_NOTE) | A_BOLD);
        putz(top - 1, 2, t->W - 4, t->status);
        attroff(pair(t, C_NOTE) | A_BOLD);
    }
    size_t cap = 256;
    ui_line *ls = malloc(cap * sizeof *ls);
    if (!ls)
        return;
    int r = 0, c = 0;
    int n = (int)ui_editor_layout(t->ed, t->W - 3, ls, cap, &r, &c);
    int first = r >= rows ? r - rows + 1 : 0;
    const char *txt = ui_editor_text(t->ed);
    attron(pair(t, C_USER) | A_BOLD);
    mvaddstr(top, 0, t->ch->busy ? "\u2026" : ">");
    attroff(pair(t, C_USER) | A_BOLD);
    for (int i = 0; i < rows && first + i < n && first + i < (int)cap; i++)
        put(top + i, 2, t->W - 3, txt + ls[first + i].start, ls[first + i].end - ls[first + i].start);
    if (!ui_editor_len(t->ed)) {
        attron(pair(t, C_DIM));
        putz(top, 2, t->W - 3,
             t->ch->busy  ? "(Esc stops the reply; sliders apply at once)"
             : t->W >= 86 ? "Type a message; Enter sends, Alt+Enter or Ctrl+J adds a line, /help lists commands"
                          : "Enter sends, Alt+Enter or Ctrl+J adds a line, /help lists commands");
        attroff(pair(t, C_DIM));
    }
    *cy = top + r - first;
    *cx = 2 + c;
    free(ls);
}

static void draw_fkeys(tui *t)
{
    static const char *keys[][2] = {{"F1", "Help"},   {"F2", "Models"}, {"F3", "Kernel"}, {"F4", "Sampler"},
                                    {"F5", "Regen"},  {"F6", "Save"},   {"F9", "Stop"},   {"F10", "Quit"}};
    int y = t->H - 1, x = 0;
    move(y, 0);
    fill(y, 0, t->W, pair(t, C_FLABEL));
    for (size_t i = 0; i < sizeof keys / sizeof keys[0] && x < t->W - 10; i++) {
        attron(pair(t, C_FKEY) | (t->color ? 0 : A_BOLD));
        mvaddstr(y, x, keys[i][0]);
        attroff(pair(t, C_FKEY) | (t->color ? 0 : A_BOLD));
        x += (int)strlen(keys[i][0]);
        attron(pair(t, C_FLABEL) | (t->color ? 0 : A_REVERSE));
        /* at least one blank after a label: "F4Sampler" must not run into "F5" */
        int lw = (int)strlen(keys[i][1]) + 1 > 7 ? (int)strlen(keys[i][1]) + 1 : 7;
        mvprintw(y, x, "%-*s", lw, keys[i][1]);
        attroff(pair(t, C_FLABEL) | (t->color ? 0 : A_REVERSE));
        x += lw;
    }
}

/* ---- overlays ---- */

static void box_at(tui *t, int y, int x, int h, int w, const char *title)
{
    for (int r = 0; r < h; r++)
        mvhline(y + r, x, ' ', w);
    attron(pair(t, C_METER));
    mvhline(y, x, ACS_HLINE, w);
    mvhline(y + h - 1, x, ACS_HLINE, w);
    mvvline(y, x, ACS_VLINE, h);
    mvvline(y, x + w - 1, ACS_VLINE, h);
    mvaddch(y, x, ACS_ULCORNER);
    mvaddch(y, x + w - 1, ACS_URCORNER);
    mvaddch(y + h - 1, x, ACS_LLCORNER);
    mvaddch(y + h - 1, x + w - 1, ACS_LRCORNER);
    attroff(pair(t, C_METER));
    attron(A_BOLD);
    putz(y, x + 2, w - 4, title);
    attroff(A_BOLD);
}

static void draw_help(tui *t)
{
    static const char keys[] =
        "Keys:\n"
        "  Enter send   Alt+Enter / Ctrl+J new line   Up/Down history\n"
        "  Ctrl+A/E line start/end  Ctrl+K/U/W kill  Ctrl+Y yank  Alt+B/F word\n"
        "  PgUp/PgDn, mouse wheel scroll; Home/End (empty input) top/latest\n"
        "  Esc or Ctrl+C stop a reply (the text so far stays)\n"
        "  Ctrl+C twice on an empty prompt quits   Tab/F4 sampler sliders\n"
        "  F1 help F2 models F3 kernel+threads F5 regenerate F6 save F9 stop F10 quit\n\n";
    int w = t->W - 8 > 84 ? 84 : t->W - 8, h = t->H - 4;
    int y = 2, x = (t->W - w) / 2;
    char all[4096];
    snprintf(all, sizeof all, "%s%s", keys, ui_chat_help());
    ui_line ls[120];
    int n = (int)ui_wrap(all, strlen(all), w - 4, 1, ls, 120), rows = h - 2;
    if (n > 120)
        n = 120;
    /* longer than the box (80x24 is): it scrolls, and says so */
    int last = n > rows ? n - rows : 0;
    t->help_top = t->help_top < 0 ? 0 : t->help_top > last ? last : t->help_top;
    box_at(t, y, x, h, w, last ? " Help  (\u2191\u2193 PgUp PgDn scroll, other keys close) " : " Help  (any key closes) ");
    for (int i = 0; i < rows && t->help_top + i < n; i++) {
        const ui_line *l = &ls[t->help_top + i];
        put(y + 1 + i, x + 2, w - 4, all + l->start, l->end - l->start);
    }
    if (last) {
        char pos[48];
        snprintf(pos, sizeof pos, " %d-%d of %d ", t->help_top + 1, t->help_top + rows < n ? t->help_top + rows : n, n);
        putz(y + h - 1, x + w - 2 - (int)strlen(pos), (int)strlen(pos), pos);
    }
}

static void draw_menu(tui *t)
{
    int w = t->W - 10 > 100 ? 100 : t->W - 10, h = t->H - 6;
    int y = 3, x = (t->W - w) / 2;
    const char *title = t->menu == M_MODELS ? " Models  (Enter opens, Esc closes) "
                        : t->menu == M_PATH ? " Open a model file "
                                            : " Kernel sets and threads  (Enter picks, \u2190\u2192 threads) ";
    box_at(t, y, x, h, w, title);
    int row = y + 1;
    if (t->menu_err[0]) {
        attron(pair(t, C_ERR) | A_BOLD);
        ui_line ls[4];
        size_t n = ui_wrap(t->menu_err, strlen(t->menu_err), w - 4, 1, ls, 4);
        for (size_t i = 0; i < n && i < 3; i++)
            put(row++, x + 2, w - 4, t->menu_err + ls[i].start, ls[i].end - ls[i].start);
        attroff(pair(t, C_ERR) | A_BOLD);
        row++;
    }
    if (t->menu == M_PATH) {
        putz(row++, x + 2, w - 4, "Path of a .gguf file (Enter opens, Esc goes back):");
        const char *p = ui_editor_text(t->path_ed);
        size_t len = strlen(p);
        int cols = w - 6;
        size_t start = 0;
        while (ui_width(p + start, len - start) > cols - 1)
            start++;
        attron(A_REVERSE);
        mvhline(row, x + 2, ' ', w - 4);
        put(row, x + 3, cols, p + start, len - start);
        attroff(A_REVERSE);
        move(row, x + 3 + ui_width(p + start, ui_editor_cursor(t->path_ed) - start));
        return;
    }
    int avail = y + h - 1 - row;
    if (t->sel < t->mtop)
        t->mtop = t->sel;
    if (t->sel >= t->mtop + avail)
        t->mtop = t->sel - avail + 1;
    for (int i = t->mtop; i < t->nitems && row < y + h - 1; i++, row++) {
        mitem *it = &t->items[i];
        int sel = i == t->sel;
        int a = sel ? (A_REVERSE | pair(t, C_SEL)) : it->enabled ? 0 : (pair(t, C_DIM) | A_DIM);
        attron(a);
        mvhline(row, x + 1, ' ', w - 2);
        int used = putz(row, x + 2, w - 4, it->text);
        if (it->note[0] && used + 3 < w - 4)
            putz(row, x + 4 + used, w - 6 - used, it->note);
        attroff(a);
    }
}

static void draw_confirm(tui *t)
{
    int w = 56, h = 5, y = t->H / 2 - 3, x = (t->W - w) / 2;
    box_at(t, y, x, h, w, " Quit? ");
    putz(y + 2, x + 2, w - 4, "A reply is being written. Quit anyway? (y/n)");
}

static void draw(tui *t)
{
    getmaxyx(stdscr, t->H, t->W);
    erase();
    frame_free(t);
    if (t->W < MIN_W || t->H < MIN_H) {
        char b[128];
        snprintf(b, sizeof b, "nibble needs at least %dx%d; this terminal is %dx%d.", MIN_W, MIN_H, t->W, t->H);
        int y = t->H / 2 - 1;
        putz(y > 0 ? y : 0, 0, t->W, b);
        if (t->H > 2)
            putz(y + 1 > 0 ? y + 1 : 1, 0, t->W, "Enlarge the window, or F10 to quit.");
        curs_set(0);
        refresh();
        return;
    }
    draw_header(t);
    int irows = input_rows(t);
    int itop = t->H - 1 - irows;
    int ctop = 4, crows = itop - 1 - ctop;
    attron(pair(t, C_DIM));
    mvhline(3, 0, ACS_HLINE, t->W);
    attroff(pair(t, C_DIM));
    draw_conv(t, ctop, crows);
    draw_side(t, ctop, crows);
    int cy = 0, cx = 0;
    draw_input(t, itop, irows, &cy, &cx);
    draw_fkeys(t);
    int cursor = t->focus == F_INPUT;
    if (t->focus == F_HELP)
        draw_help(t);
    else if (t->focus == F_MENU) {
        draw_menu(t);
        cursor = t->menu == M_PATH;
        if (cursor)
            getyx(stdscr, cy, cx);
    } else if (t->focus == F_CONFIRM)
        draw_confirm(t);
    curs_set(cursor ? 1 : 0);
    if (cursor)
        move(cy, cx);
    refresh();
}

/* ---- menus ---- */

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

static int by_path(const void *a, const void *b) { return strcmp(((const mitem *)a)->path, ((const mitem *)b)->path); }

static void open_models(tui *t)
{
    free(t->items);
    t->items = NULL;
    t->nitems = 0;
    t->sel = t->mtop = 0;
    t->menu = M_MODELS;
    t->focus = F_MENU;
    for (int d = 0; d < t->ch->n_dirs; d++) {
        const char *dir = t->ch->model_dirs[d];
        DIR *dp = opendir(dir);
        if (!dp)
            continue;
        int first = t->nitems;
        struct dirent *de;
        while ((de = readdir(dp)) && t->nitems < 500) {
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
    if (!t->nitems)
        menu_add(t, "  (no .gguf files in the model folders; set model_dirs in nibble.ini)", NULL, NULL, 0, 0);
    menu_add(t, "  Open a file by path...", NULL, NULL, 1, -2);
    while (t->sel < t->nitems - 1 && !t->items[t->sel].enabled)
        t->sel++;
    t->dirty = 1;
}

static void open_kernels(tui *t)
{
    free(t->items);
    t->items = NULL;
    t->nitems = 0;
    t->sel = t->mtop = 0;
    t->menu = M_KERNELS;
    t->focus = F_MENU;
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
    menu_add(t, "", NULL, NULL, 1, -1);
    t->dirty = 1;
}

static void menu_refresh_threads(tui *t)
{
    for (int i = 0; i < t->nitems; i++)
        if (t->items[i].kernel == -1) {
            snprintf(t->items[i].text, sizeof t->items[i].text, "  Threads: %d", t->threads_sel);
            snprintf(t->items[i].note, sizeof t->items[i].note, "(\u2190\u2192 change, Enter applies; now %d)",
                     t->ch->st.threads);
        }
}

static void menu_choose(tui *t)
{
    if (t->sel < 0 || t->sel >= t->nitems)
        return;
    mitem *it = &t->items[t->sel];
    if (!it->enabled) {
        set_status(t, "not available here");
        return;
    }
    if (t->menu == M_MODELS) {
        if (it->kernel == -2) {
            t->menu = M_PATH;
            ui_editor_clear(t->path_ed);
            t->menu_err[0] = 0;
            return;
        }
        t->menu_err[0] = 0;
        ui_chat_load_model(t->ch, it->path);
        t->menu_load = 1;
        t->focus = F_INPUT;
    } else if (t->menu == M_KERNELS) {
        if (it->kernel == -1)
            ui_chat_set_threads(t->ch, t->threads_sel);
        else
        {
            eng_kernel_desc kd;
            if (!eng_kernel_describe(it->kernel, &kd))
                ui_chat_set_kernel(t->ch, kd.name);
        }
        t->focus = F_INPUT;
    }
}

/* ---- keys ---- */

static void utf8_put(char *b, size_t *n, uint32_t c)
{
    if (c < 0x80)
        b[(*n)++] = (char)c;
    else if (c < 0x800) {
        b[(*n)++] = (char)(0xc0 | (c >> 6));
        b[(*n)++] = (char)(0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
        b[(*n)++] = (char)(0xe0 | (c >> 12));
        b[(*n)++] = (char)(0x80 | ((c >> 6) & 0x3f));
        b[(*n)++] = (char)(0x80 | (c & 0x3f));
    } else {
        b[(*n)++] = (char)(0xf0 | (c >> 18));
        b[(*n)++] = (char)(0x80 | ((c >> 12) & 0x3f));
        b[(*n)++] = (char)(0x80 | ((c >> 6) & 0x3f));
        b[(*n)++] = (char)(0x80 | (c & 0x3f));
    }
}

static void send_input(tui *t)
{
    const char *txt = ui_editor_text(t->ed);
    if (!*txt)
        return;
    char *line = strdup(txt);
    if (!line)
        return;
    ui_editor_history_add(t->ed, line);
    if (t->o->history)
        ui_editor_history_save(t->ed, t->o->history);
    ui_editor_clear(t->ed);
    t->scroll = 0;
    enum ui_action a;
    if (t->paste_guard && line[0] == '/') {
        /* pasted text is a message, never a command */
        char *m = malloc(strlen(line) + 2);
        if (m) {
            m[0] = '/';
            strcpy(m + 1, line);
            a = ui_chat_input(t->ch, m);
            free(m);
        } else
            a = UI_ACT_NONE;
    } else
        a = ui_chat_input(t->ch, line);
    t->paste_guard = 0;
    free(line);
    if (a == UI_ACT_QUIT)
        t->quit = 1;
    else if (a == UI_ACT_HELP) {
        t->focus = F_HELP;
        t->help_top = 0;
    }
}

static void ask_quit(tui *t)
{
    if (t->ch->busy)
        t->focus = F_CONFIRM;
    else
        t->quit = 1;
}

static void page(tui *t, int dir)
{
    int rows = t->H - 1 - input_rows(t) - 1 - 4;
    t->scroll += dir * (rows > 2 ? rows - 2 : 1);
    if (t->scroll < 0)
        t->scroll = 0;
    if (t->scroll > t->total_lines)
        t->scroll = t->total_lines;
}

static int key_common(tui *t, int fn, uint32_t c)
{
    if (!fn)
        return 0;
    switch (c) {
    case KEY_F(1): t->focus = F_HELP; t->help_top = 0; return 1;
    case KEY_F(2): t->menu_err[0] = 0; open_models(t); return 1;
    case KEY_F(3): open_kernels(t); menu_refresh_threads(t); return 1;
    case KEY_F(4): t->focus = t->focus == F_SLIDERS ? F_INPUT : F_SLIDERS; return 1;
    case KEY_F(5): ui_chat_regen(t->ch); t->scroll = 0; return 1;
    case KEY_F(6): ui_chat_input(t->ch, "/save"); return 1;
    case KEY_F(9): ui_chat_stop(t->ch); return 1;
    case KEY_F(10): ask_quit(t); return 1;
    case KEY_PPAGE: page(t, +1); return 1;
    case KEY_NPAGE: page(t, -1); return 1;
    case KEY_MOUSE: {
        MEVENT me;
        if (getmouse(&me) == OK) {
            if (me.bstate & BUTTON4_PRESSED)
                t->scroll += 3;
#ifdef BUTTON5_PRESSED
            else if (me.bstate & BUTTON5_PRESSED)
                t->scroll = t->scroll > 3 ? t->scroll - 3 : 0;
#endif
        }
        return 1;
    }
    }
    return 0;
}

static void key_input(tui *t, int fn, uint32_t c, int alt)
{
    ui_editor *ed = t->ed;
    int w = t->W - 3;
    if (t->pasting) {
        if (fn && c == K_PASTE_END) {
            t->pasting = 0;
            return;
        }
        if (!fn) {
            char b[8];
            size_t n = 0;
            if (c == '\r')
                c = '\n';
            if (c == '\t' || c == '\n' || c >= 0x20) {
                utf8_put(b, &n, c);
                ui_editor_insert(ed, b, n);
            }
        }
        return;
    }
    if (fn) {
        switch (c) {
        case K_PASTE_BEGIN:
            t->pasting = 1;
            if (!ui_editor_len(ed))
                t->paste_guard = 1;
            return;
        case KEY_ENTER: send_input(t); return;
        case KEY_BACKSPACE: ui_editor_backspace(ed); return;
        case KEY_DC: ui_editor_delete(ed); return;
        case KEY_LEFT: ui_editor_left(ed); return;
        case KEY_RIGHT: ui_editor_right(ed); return;
        case KEY_UP: ui_editor_up(ed, w); return;
        case KEY_DOWN: ui_editor_down(ed, w); return;
        case KEY_HOME:
            if (ui_editor_len(ed))
                ui_editor_home(ed);
            else
                t->scroll = t->total_lines;
            return;
        case KEY_END:
            if (ui_editor_len(ed))
                ui_editor_end(ed);
            else
                t->scroll = 0;
            return;
        case KEY_BTAB: t->focus = F_SLIDERS; return;
        }
        return;
    }
    if (alt) {
        switch (c) {
        case '\r': case '\n': ui_editor_insert(ed, "\n", 1); return;
        case 'b': ui_editor_word_left(ed); return;
        case 'f': ui_editor_word_right(ed); return;
        case 127: case 8: ui_editor_kill_word(ed); return;
        }
        return;
    }
    switch (c) {
    case '\r': send_input(t); return;
    case '\n': ui_editor_insert(ed, "\n", 1); return; /* Ctrl+J */
    case '\t': t->focus = F_SLIDERS; return;
    case 127: case 8: ui_editor_backspace(ed); return;
    case 1: ui_editor_home(ed); return;
    case 5: ui_editor_end(ed); return;
    case 2: ui_editor_left(ed); return;
    case 6: ui_editor_right(ed); return;
    case 4: ui_editor_delete(ed); return;
    case 11: ui_editor_kill_end(ed); return;
    case 21: ui_editor_kill_start(ed); if (!ui_editor_len(ed)) t->paste_guard = 0; return;
    case 23: ui_editor_kill_word(ed); return;
    case 25: ui_editor_yank(ed); return;
    case 12: clearok(curscr, TRUE); return; /* Ctrl+L */
    case 16: ui_editor_up(ed, w); return;   /* Ctrl+P */
    case 14: ui_editor_down(ed, w); return; /* Ctrl+N */
    }
    if (c >= 0x20) {
        char b[8];
        size_t n = 0;
        utf8_put(b, &n, c);
        ui_editor_insert(ed, b, n);
    }
}

static void key_sliders(tui *t, int fn, uint32_t c)
{
    if (fn) {
        switch (c) {
        case KEY_UP: t->slider = (t->slider + NSLIDERS - 1) % NSLIDERS; return;
        case KEY_DOWN: t->slider = (t->slider + 1) % NSLIDERS; return;
        case KEY_LEFT: slider_step(t, -1); return;
        case KEY_RIGHT: slider_step(t, +1); return;
        case KEY_BTAB: t->focus = F_INPUT; return;
        }
        return;
    }
    switch (c) {
    case '+': case '=': case 'l': slider_step(t, +1); return;
    case '-': case '_': case 'h': slider_step(t, -1); return;
    case 'k': t->slider = (t->slider + NSLIDERS - 1) % NSLIDERS; return;
    case 'j': t->slider = (t->slider + 1) % NSLIDERS; return;
    case '\t': case '\r': case 27: t->focus = F_INPUT; return;
    }
}

static void key_menu(tui *t, int fn, uint32_t c)
{
    if (t->menu == M_PATH) {
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
        if (!fn && c == 27) {
            open_models(t);
            return;
        }
        if (c == '\r' || c == '\n' || (fn && c == KEY_ENTER)) {
            if (ui_editor_len(pe)) {
                ui_chat_load_model(t->ch, ui_editor_text(pe));
                t->menu_load = 1;
                t->focus = F_INPUT;
            }
            return;
        }
        if (c == 127 || c == 8) {
            ui_editor_backspace(pe);
            return;
        }
        if (c == 21) {
            ui_editor_kill_start(pe);
            return;
        }
        if (c >= 0x20) {
            char b[8];
            size_t n = 0;
            utf8_put(b, &n, c);
            ui_editor_insert(pe, b, n);
        }
        return;
    }
    if (fn) {
        switch (c) {
        case KEY_UP: if (t->sel > 0) t->sel--; return;
        case KEY_DOWN: if (t->sel < t->nitems - 1) t->sel++; return;
        case KEY_PPAGE: t->sel = t->sel > 10 ? t->sel - 10 : 0; return;
        case KEY_NPAGE: t->sel = t->sel + 10 < t->nitems ? t->sel + 10 : t->nitems - 1; return;
        case KEY_ENTER: menu_choose(t); return;
        case KEY_LEFT:
        case KEY_RIGHT:
            if (t->menu == M_KERNELS && t->items[t->sel].kernel == -1) {
                t->threads_sel += c == KEY_RIGHT ? 1 : -1;
                if (t->threads_sel < 1)
                    t->threads_sel = 1;
                if (t->threads_sel > 256)
                    t->threads_sel = 256;
                menu_refresh_threads(t);
            }
            return;
        }
        return;
    }
    switch (c) {
    case 27: case 'q': t->focus = F_INPUT; return;
    case '\r': case '\n': menu_choose(t); return;
    case 'k': if (t->sel > 0) t->sel--; return;
    case 'j': if (t->sel < t->nitems - 1) t->sel++; return;
    case '+': case '-':
        if (t->menu == M_KERNELS && t->items[t->sel].kernel == -1) {
            t->threads_sel += c == '+' ? 1 : -1;
            if (t->threads_sel < 1)
                t->threads_sel = 1;
            menu_refresh_threads(t);
        }
        return;
    }
}

/* A key: fn set, c is a KEY_ code; else c is a character (code point). */
static void handle_key(tui *t, int fn, uint32_t c, int alt)
{
    t->dirty = 1;
    /* Ctrl+C: stop a reply; on an idle, empty prompt twice quits */
    if (!fn && c == 3) {
        if (t->ch->busy || t->ch->loading) {
            ui_chat_stop(t->ch);
            set_status(t, "stopped; the text so far stays");
        } else if (t->focus != F_INPUT) {
            t->focus = F_INPUT;
        } else if (ui_editor_len(t->ed)) {
            ui_editor_clear(t->ed);
            t->paste_guard = 0;
        } else if (ui_now_ms() - t->ctrl_c_ms < 3000) {
            t->quit = 1;
        } else {
            t->ctrl_c_ms = ui_now_ms();
            set_status(t, "press Ctrl+C again to quit");
        }
        return;
    }
    if (t->W < MIN_W || t->H < MIN_H) {
        if (fn && c == KEY_F(10))
            t->quit = 1;
        return;
    }
    switch (t->focus) {
    case F_HELP: {
        /* arrows and pages scroll (draw_help clamps), any other key closes */
        int page = t->H - 8 > 1 ? t->H - 8 : 1;
        int d = !fn ? 0 : c == KEY_DOWN ? 1 : c == KEY_UP ? -1 : c == KEY_NPAGE ? page : c == KEY_PPAGE ? -page : 0;
        if (d)
            t->help_top += d;
        else
            t->focus = F_INPUT;
        return;
    }
    case F_CONFIRM:
        if (!fn && (c == 'y' || c == 'Y'))
            t->quit = 1;
        else
            t->focus = F_INPUT;
        return;
    case F_MENU:
        if (fn && (c == KEY_F(2) || c == KEY_F(3) || c == KEY_F(10))) {
            if (c == KEY_F(10))
                t->focus = F_INPUT;
            else
                key_common(t, fn, c);
            return;
        }
        key_menu(t, fn, c);
        return;
    case F_SLIDERS:
        if (key_common(t, fn, c))
            return;
        key_sliders(t, fn, c);
        return;
    case F_INPUT:
        if (!t->pasting && !fn && c == 27 && !alt) {
            if (t->ch->busy)
                ui_chat_stop(t->ch);
            return;
        }
        if (!t->pasting && key_common(t, fn, c))
            return;
        key_input(t, fn, c, alt);
        return;
    }
}

#ifdef PDCURSES
/* The Windows console sends Alt+key and the keypad's keys as keys of
 * PDCurses' own, where a terminal sends Esc then the key, or the plain
 * key: make them what the handlers above know. The keypad's arrows
 * (NumLock off; also what wine's console gives for every arrow key) are
 * KEY_A2 ... not KEY_UP. Returns 1 if *c is now an Alt+key. */
static int pdc_key(int *fn, uint32_t *c)
{
    if (!*fn)
        return 0;
    uint32_t to = 0;
    int alt = 0, key = 1; /* key: to is a KEY_ code, else a character */
    switch (*c) {
    case KEY_A2: to = KEY_UP; break;
    case KEY_C2: to = KEY_DOWN; break;
    case KEY_B1: to = KEY_LEFT; break;
    case KEY_B3: to = KEY_RIGHT; break;
    case KEY_A1: to = KEY_HOME; break;
    case KEY_C1: to = KEY_END; break;
    case KEY_A3: to = KEY_PPAGE; break;
    case KEY_C3: to = KEY_NPAGE; break;
    case PADSTOP: to = KEY_DC; break;
    default: key = 0;
    }
    if (!key) {
        alt = 1;
        switch (*c) {
        case ALT_ENTER: case ALT_PADENTER: to = '\r'; break;
        case ALT_B: case CTL_LEFT: to = 'b'; break;
        case ALT_F: case CTL_RIGHT: to = 'f'; break;
        case ALT_BKSP: to = 127; break;
        case CTL_ENTER: case CTL_PADENTER: to = '\n'; alt = 0; break; /* a new line, as Ctrl+J */
        case PADENTER: to = '\r'; alt = 0; break;
        case PADSLASH: to = '/'; alt = 0; break;
        case PADSTAR: to = '*'; alt = 0; break;
        case PADMINUS: to = '-'; alt = 0; break;
        case PADPLUS: to = '+'; alt = 0; break;
        default: return 0;
        }
        *fn = 0;
    }
    *c = to;
    return alt;
}

/* Ctrl+V where the console lets it through: the clipboard goes into the
 * input as one paste (its new lines stay new lines, nothing is sent and a
 * leading '/' is text), what bracketed paste gives on a terminal. */
static void paste_clipboard(tui *t)
{
    char *clip = NULL;
    long n = 0;
    if (PDC_getclipboard(&clip, &n) != PDC_CLIP_SUCCESS) {
        set_status(t, "the clipboard holds no text");
        return;
    }
    if (!ui_editor_len(t->ed))
        t->paste_guard = 1;
    long k = 0; /* cleaned in place: CRLF and CR to LF, no other controls */
    for (long i = 0; i < n; i++) {
        char b = clip[i];
        if (b == '\r' && i + 1 < n && clip[i + 1] == '\n')
            continue;
        if (b == '\r')
            b = '\n';
        if ((unsigned char)b < 0x20 && b != '\n' && b != '\t')
            continue;
        clip[k++] = b;
    }
    if (k && ui_editor_insert(t->ed, clip, (size_t)k))
        set_status(t, "out of memory for the paste");
    PDC_freeclipboard(clip);
}
#endif

/* get_wch as a code point. PDCurses on Windows has a 16-bit wint_t and
 * hands a character beyond U+FFFF over as two UTF-16 halves: join them
 * (a half without its partner is dropped). */
static int get_key(uint32_t *c)
{
    wint_t w = 0;
    int r = get_wch(&w);
    *c = (uint32_t)w;
#ifdef PDCURSES
    while (r == OK && *c >= 0xd800 && *c <= 0xdfff) {
        if (*c >= 0xdc00) { /* a low half first: lost */
            r = get_wch(&w);
            *c = (uint32_t)w;
            continue;
        }
        uint32_t hi = *c;
        r = get_wch(&w);
        *c = (uint32_t)w;
        if (r == OK && *c >= 0xdc00 && *c <= 0xdfff)
            *c = 0x10000 + ((hi - 0xd800) << 10) + (*c - 0xdc00);
    }
#endif
    return r;
}

/* Read every key waiting on the terminal. */
static void read_keys(tui *t)
{
    for (;;) {
        uint32_t c;
        int r = get_key(&c);
        if (r == ERR)
            return;
        int fn = r == KEY_CODE_YES;
        if (fn && c == KEY_RESIZE) {
            int oldw = t->W;
#ifdef PDCURSES
            resize_term(0, 0); /* PDCurses takes the console's new size only when asked */
#endif
            getmaxyx(stdscr, t->H, t->W);
            if (oldw != t->W && t->W >= MIN_W && t->H >= MIN_H)
                keep_anchor(t, t->H - 1 - input_rows(t) - 1 - 4);
            t->dirty = 1;
            continue;
        }
        int alt = 0;
#ifdef PDCURSES
        alt = pdc_key(&fn, &c);
        if (!fn && c == 22 && t->focus == F_INPUT) {
            paste_clipboard(t);
            t->dirty = 1;
            continue;
        }
#endif
        if (!fn && c == 27 && !t->pasting) {
            /* Esc followed at once by a key is Alt+key */
            uint32_t c2;
            nodelay(stdscr, TRUE);
            int r2 = get_key(&c2);
            if (r2 == OK) {
                alt = 1;
                c = c2;
            } else if (r2 == KEY_CODE_YES) {
                handle_key(t, 0, 27, 0);
                handle_key(t, 1, c2, 0);
                continue;
            }
        }
        handle_key(t, fn, c, alt);
    }
}

/* ---- setup and the loop ---- */

static void colors(tui *t)
{
    t->color = t->o->color && has_colors();
    if (!t->color)
        return;
    start_color();
    use_default_colors();
    init_pair(C_TITLE, COLOR_BLACK, COLOR_CYAN);
    init_pair(C_METER, COLOR_CYAN, -1);
    init_pair(C_USER, COLOR_GREEN, -1);
    init_pair(C_BOT, -1, -1);
    init_pair(C_NOTE, COLOR_YELLOW, -1);
    init_pair(C_ERR, COLOR_RED, -1);
    init_pair(C_FKEY, -1, -1);
    init_pair(C_FLABEL, COLOR_BLACK, COLOR_CYAN);
    init_pair(C_DIM, COLOR_BLUE, -1);
    init_pair(C_MARK, COLOR_MAGENTA, -1);
    init_pair(C_SEL, COLOR_BLACK, COLOR_YELLOW);
    init_pair(C_WARN, COLOR_RED, -1);
    init_pair(C_BAR, COLOR_GREEN, -1);
}

int ui_tui_run(ui_chat *ch, const ui_opts *o)
{
    tui t;
    memset(&t, 0, sizeof t);
    t.ch = ch;
    t.o = o;
    t.ed = ui_editor_new(500);
    t.path_ed = ui_editor_new(1);
    if (!t.ed || !t.path_ed) {
        ui_editor_free(t.ed);
        ui_editor_free(t.path_ed);
        return 1;
    }
    if (o->history)
        ui_editor_history_load(t.ed, o->history);

    /* stderr goes to a file while curses owns the screen */
    fflush(stderr);
    FILE *errf = ui_term_tmpfile();
    int saved_err = -1;
    if (errf) {
        saved_err = dup(2);
        dup2(fileno(errf), 2);
    }
    ui_term_begin();
    atexit(restore_at_exit);

    int rc = 0;
    /* characters only: numbers keep the C locale's decimal point */
    setlocale(LC_CTYPE, "");
    if (!newterm(NULL, stdout, stdin)) {
        rc = 1;
        goto out;
    }
    curses_up = 1;
#ifdef NCURSES_VERSION
    ESCDELAY = 25; /* PDCurses: the console's Esc key is a key, not a prefix to time */
#endif
    raw();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    nodelay(stdscr, TRUE);
    colors(&t);
    if (o->mouse)
        mousemask(BUTTON4_PRESSED | BUTTON5_PRESSED, NULL);
#ifdef NCURSES_VERSION
    /* bracketed paste: the terminal's marks become two keys of our own */
    define_key("\033[200~", K_PASTE_BEGIN);
    define_key("\033[201~", K_PASTE_END);
    ui_term_paste(1);
#endif
    getmaxyx(stdscr, t.H, t.W);
    t.dirty = 1;
    while (!t.quit && !ui_term_quit_asked()) {
        ui_chat_pump(ch);
        if (ch->changed) {
            ch->changed = 0;
            t.dirty = 1;
        }
        if (ch->load_error && t.menu_load) {
            /* back to the menu, with what went wrong */
            t.menu_load = 0;
            snprintf(t.menu_err, sizeof t.menu_err, "%s", ch->last_error);
            open_models(&t);
            ch->load_error = 0;
        }
        if (!ch->loading)
            t.menu_load = ch->load_error ? t.menu_load : 0;
        ui_chat_tick(ch);
        if (t.dirty) {
            draw(&t);
            t.dirty = 0;
        }
        int to = ui_chat_timeout(ch);
        int live = ch->busy || ch->prog_active || (t.status[0] && ui_now_ms() - t.status_ms < 4500);
        if (live && (to < 0 || to > 250))
            to = 250;
        if (to < 0 || to > 2000)
            to = 2000; /* the memory meter */
        int got = ui_term_wait(ch->en, to);
        if (got < 0)
            break;
        if (got & UI_TERM_KEYS)
            read_keys(&t); /* also picks up KEY_RESIZE after SIGWINCH */
        if (got & UI_TERM_TIMEOUT)
            t.dirty = 1;
        if (got & UI_TERM_HUP)
            break;
    }
    ui_chat_stop(ch);
out:
    if (curses_up) {
        ui_term_paste(0);
        if (o->mouse)
            mousemask(0, NULL);
        endwin();
        curses_up = 0;
    }
    ui_term_end();
    /* give stderr back and show what was written meanwhile */
    if (errf) {
        fflush(stderr);
        dup2(saved_err, 2);
        close(saved_err);
        rewind(errf);
        char buf[4096];
        size_t got;
        while ((got = fread(buf, 1, sizeof buf, errf)) > 0)
            fwrite(buf, 1, got, stderr);
        fclose(errf);
    }
    frame_free(&t);
    free(t.frame_bufs);
    free(t.items);
    ui_editor_free(t.ed);
    ui_editor_free(t.path_ed);
    return rc;
}
