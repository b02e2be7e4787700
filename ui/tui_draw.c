/* Drawing for the curses screen: the primitives every part uses (text
 * clipped to columns, bars, boxes, strings kept for one frame), the
 * screen's layout (header, conversation | side panel, input, key bar,
 * then the view in charge over it) and the F-key bar. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"
#include "tui_internal.h"

int tui_pair(tui *t, int p) { return t->color ? COLOR_PAIR(p) : 0; }

int tui_put(int y, int x, int cols, const char *s, size_t n)
{
    int used = 0, w, cp;
    move(y, x);
    for (size_t i = 0; i < n;) {
        size_t len = ui_char(s, n, i, &w, &cp);
        if (used + w > cols)
            break;
        if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0))
            addch('?');
        else if (ui_invisible(s, i, cp)) { /* bidi and zero-width: shown, never obeyed */
            char e[16];
            snprintf(e, sizeof e, "\\u%04x", (unsigned)cp);
            addstr(e);
        }
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

int tui_putz(int y, int x, int cols, const char *s) { return tui_put(y, x, cols, s, strlen(s)); }

void tui_fill(int y, int x, int cols, int attr)
{
    attron(attr);
    mvhline(y, x, ' ', cols);
    attroff(attr);
}

void tui_bar(tui *t, int y, int x, int cols, double f, int warn)
{
    if (cols < 3)
        return;
    int inner = cols - 2, full = (int)(f * inner + 0.5);
    if (full > inner)
        full = inner;
    if (full < 0)
        full = 0;
    mvaddch(y, x, '[');
    attron(tui_pair(t, warn ? C_WARN : C_BAR) | A_BOLD);
    for (int i = 0; i < full; i++)
        addch('|');
    attroff(tui_pair(t, warn ? C_WARN : C_BAR) | A_BOLD);
    for (int i = full; i < inner; i++)
        addch(' ');
    addch(']');
}

void tui_box(tui *t, int y, int x, int h, int w, const char *title)
{
    for (int r = 0; r < h; r++)
        mvhline(y + r, x, ' ', w);
    attron(tui_pair(t, C_METER));
    mvhline(y, x, ACS_HLINE, w);
    mvhline(y + h - 1, x, ACS_HLINE, w);
    mvvline(y, x, ACS_VLINE, h);
    mvvline(y, x + w - 1, ACS_VLINE, h);
    mvaddch(y, x, ACS_ULCORNER);
    mvaddch(y, x + w - 1, ACS_URCORNER);
    mvaddch(y + h - 1, x, ACS_LLCORNER);
    mvaddch(y + h - 1, x + w - 1, ACS_LRCORNER);
    attroff(tui_pair(t, C_METER));
    attron(A_BOLD);
    tui_putz(y, x + 2, w - 4, title);
    attroff(A_BOLD);
}

const char *tui_frame_keep(tui *t, char *s)
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

void tui_frame_free(tui *t)
{
    for (int i = 0; i < t->nframe; i++)
        free(t->frame_bufs[i]);
    t->nframe = 0;
}

void tui_set_status(tui *t, const char *msg)
{
    snprintf(t->status, sizeof t->status, "%s", msg);
    t->status_ms = ui_now_ms();
    t->dirty = 1;
}

/* rows: title, two meter rows, a rule; then the conversation down to the
 * rule above the input, the input, the key bar */
int tui_conv_rows(tui *t) { return t->H - 1 - tui_input_rows(t) - 1 - 4; }

static void draw_fkeys(tui *t)
{
    /* from 100 columns: Ctrl+T too (the thinking; its fold lines name it) */
    static const char *widest[][2] = {{"F1", "Help"},  {"F2", "Models"}, {"F3", "Kernel"}, {"F4", "Sampler"},
                                      {"F5", "Regen"}, {"F7", "Chats"},  {"F8", "Edit"},   {"F9", "Stop"},
                                      {"^T", "Think"}, {"F10", "Quit"}};
    static const char *wide[][2] = {{"F1", "Help"},  {"F2", "Models"}, {"F3", "Kernel"}, {"F4", "Sampler"},
                                    {"F5", "Regen"}, {"F7", "Chats"},  {"F8", "Edit"},   {"F9", "Stop"},
                                    {"F10", "Quit"}};
    /* 80-89 columns: all but Edit; below 80: the keys one needs to find
     * the rest (F1 lists them) */
    static const char *mid[][2] = {{"F1", "Help"},  {"F2", "Models"}, {"F3", "Kernel"}, {"F4", "Sampler"},
                                   {"F5", "Regen"}, {"F7", "Chats"},  {"F9", "Stop"},   {"F10", "Quit"}};
    static const char *narrow[][2] = {{"F1", "Help"}, {"F2", "Models"}, {"F4", "Sampler"}, {"F10", "Quit"}};
    int nar = t->W < 80;
    const char *(*keys)[2] = nar ? narrow : t->W < 90 ? mid : t->W < 100 ? wide : widest;
    size_t nkeys = nar          ? sizeof narrow / sizeof narrow[0]
                   : t->W < 90  ? sizeof mid / sizeof mid[0]
                   : t->W < 100 ? sizeof wide / sizeof wide[0]
                                : sizeof widest / sizeof widest[0];
    int y = t->H - 1, x = 0;
    move(y, 0);
    tui_fill(y, 0, t->W, tui_pair(t, C_FLABEL));
    for (size_t i = 0; i < nkeys && x < t->W - 10; i++) {
        attron(tui_pair(t, C_FKEY) | (t->color ? 0 : A_BOLD));
        mvaddstr(y, x, keys[i][0]);
        attroff(tui_pair(t, C_FKEY) | (t->color ? 0 : A_BOLD));
        x += (int)strlen(keys[i][0]);
        attron(tui_pair(t, C_FLABEL) | (t->color ? 0 : A_REVERSE));
        /* at least one blank after a label: "F4Sampler" must not run into "F5" */
        int lw = (int)strlen(keys[i][1]) + 1 > 7 || nar ? (int)strlen(keys[i][1]) + 1 : 7;
        mvprintw(y, x, "%-*s", lw, keys[i][1]);
        attroff(tui_pair(t, C_FLABEL) | (t->color ? 0 : A_REVERSE));
        x += lw;
    }
}

/* The message, wrapped to the width there is. */
static void draw_too_small(tui *t)
{
    char b[192];
    snprintf(b, sizeof b, "nibble needs at least %dx%d; this terminal is %dx%d. Enlarge the window, or F10 to quit.",
             MIN_W, MIN_H, t->W, t->H);
    ui_line ls[32];
    size_t n = ui_wrap(b, strlen(b), t->W > 1 ? t->W : 1, 1, ls, 32);
    if (n > 32)
        n = 32;
    int y = (t->H - (int)n) / 2;
    if (y < 0)
        y = 0;
    for (size_t i = 0; i < n && y + (int)i < t->H; i++)
        tui_put(y + (int)i, 0, t->W, b + ls[i].start, ls[i].end - ls[i].start);
    curs_set(0);
    refresh();
}

void tui_draw(tui *t)
{
    getmaxyx(stdscr, t->H, t->W);
    erase();
    tui_frame_free(t);
    if (t->W < MIN_W || t->H < MIN_H) {
        draw_too_small(t);
        return;
    }
    tui_draw_header(t);
    int irows = tui_input_rows(t);
    int itop = t->H - 1 - irows;
    int ctop = 4, crows = itop - 1 - ctop;
    attron(tui_pair(t, C_DIM));
    mvhline(3, 0, ACS_HLINE, t->W);
    attroff(tui_pair(t, C_DIM));
    tui_draw_conv(t, ctop, crows);
    tui_draw_side(t, ctop, crows);
    int cy = 0, cx = 0;
    tui_draw_input(t, itop, irows, &cy, &cx);
    draw_fkeys(t);
    if (t->view->draw)
        t->view->draw(t);
    if (t->view->cursor == TUI_CURSOR_VIEW)
        getyx(stdscr, cy, cx);
    curs_set(t->view->cursor != TUI_CURSOR_NONE);
    if (t->view->cursor != TUI_CURSOR_NONE)
        move(cy, cx);
    refresh();
}
