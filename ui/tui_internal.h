/* Private to the curses screen (ui/tui*.c): the one `tui` struct they
 * share, the views (what has the keyboard) and the functions one file
 * lends another. Nothing here is for ui/ outside the screen.
 *
 * Who owns what:
 *   tui.c         ui_tui_run: the loop (wait, take events, keys, redraw)
 *   tui_screen.c  curses up and down, colours, stderr to a file meanwhile
 *   tui_draw.c    drawing primitives, the screen's layout, the key bar
 *   tui_header.c  the title row and the meter rows, laid out from tables
 *   tui_conv.c    the conversation: lines (replies as markdown, their
 *                 thinking folded), scrolling, resize anchor
 *   tui_input.c   the input editor view (typing, sending, bracketed paste)
 *   tui_side.c    the sampler sliders view and the side panel
 *   tui_menu.c    the menus: model files, kernels and threads, path prompt
 *   tui_help.c    the help, quit-confirm and chat-question overlays
 *   tui_keys.c    reading and decoding keys, the keys every view shares
 */
#ifndef NIBBLE_UI_TUI_INTERNAL_H
#define NIBBLE_UI_TUI_INTERNAL_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include <curses.h>

#include "chat.h"
#include "editor.h"
#include "ui.h"

#define SIDE_W 28 /* side panel columns */
#define SIDE_MIN_W 100 /* narrower: the side panel shows only while it has the keyboard (Tab/F4) */
#define MIN_W 40
#define MIN_H 12
#define INPUT_MAX_ROWS 5

/* key codes of our own (define_key) for bracketed paste */
#define K_PASTE_BEGIN (KEY_MAX + 1)
#define K_PASTE_END (KEY_MAX + 2)
/* Ctrl (or Alt) with Left/Right, whichever way the terminal spells it */
#define K_WORD_LEFT (KEY_MAX + 3)
#define K_WORD_RIGHT (KEY_MAX + 4)

/* colour pairs */
enum { C_TITLE = 1, C_METER, C_USER, C_BOT, C_NOTE, C_ERR, C_FKEY, C_FLABEL, C_DIM, C_MARK, C_SEL, C_WARN, C_BAR,
       C_CODE, C_HEAD, C_LINK };

typedef struct tui tui;
typedef struct conv_cache conv_cache; /* tui_conv.c: the replies as last laid out */

/* Where the terminal cursor goes after a frame. */
enum tui_cursor {
    TUI_CURSOR_NONE,  /* hidden */
    TUI_CURSOR_INPUT, /* in the input editor */
    TUI_CURSOR_VIEW   /* where the view's draw left it */
};

/* A view: whatever has the keyboard (the input editor, the sliders, a
 * menu, the help, ...), as htop's Panel classes are: a const table of
 * what it does, one per kind, and `tui.view` points at the one in charge. */
typedef struct tui_view {
    const char *name;
    /* The keys it shares with other views (the main screen's F-keys, the
     * menus' F2 F3 F10), offered first: 1 if c was one; NULL: none. The
     * keys every view has (Ctrl+C, a too-small screen) come before. */
    int (*shared)(tui *t, int fn, uint32_t c);
    /* A key while the view is in charge; fn: c is a KEY_ code, else a
     * code point; alt: it came after Esc. */
    void (*key)(tui *t, int fn, uint32_t c, int alt);
    /* Drawn over the main screen after it; NULL: nothing over it. */
    void (*draw)(tui *t);
    enum tui_cursor cursor;
} tui_view;

extern const tui_view tui_view_input, tui_view_sliders, tui_view_help, tui_view_confirm, tui_view_ask;
extern const tui_view tui_view_menu, tui_view_path;

/* A row of a menu. */
typedef struct mitem {
    char text[640];
    char note[256];
    char path[2048];
    int enabled;
    int kernel; /* kernels menu: kernel id, -1 the threads row, -3 prompt lookup, -4 the draft
                 * model; models: -2 for "by path" */
} mitem;

typedef struct tui_menu tui_menu; /* a kind of menu (tui_menu.c) */

struct tui {
    ui_chat *ch;
    const ui_opts *o;
    ui_editor *ed;
    int W, H;
    int color;
    const tui_view *view; /* never NULL */
    int slider;
    int scroll;       /* lines above the bottom; 0 follows the reply */
    int anchor_entry; /* top line of the view, kept across a resize */
    size_t anchor_off;
    int total_lines;
    conv_cache *cc;   /* owned; tui_conv_free */
    int think_focus;  /* entry whose thinking Ctrl+T just opened or closed: its
                       * fold line goes to the top of the view; -1 none */
    int think_seen;   /* the last entry with a fold line on screen; -1 none */
    int italic;       /* the terminal shows italics (else: underline) */
    /* menu */
    const tui_menu *menu;
    mitem *items;
    int nitems, sel, mtop;
    int help_top; /* first line of the help shown; the help scrolls on small screens */
    char menu_err[512];
    int threads_sel;
    int lookup_sel;   /* kernels menu: the prompt lookup length shown (0: off) */
    ui_editor *path_ed;
    int menu_load; /* a load was started from the menu */
    int prompt;    /* what the prompt asks: PROMPT_PATH, PROMPT_RENAME, PROMPT_SEARCH */
    char conv_query[128]; /* the conversations menu's search ("": all) */
    char conv_sel[128];   /* the conversation the question is about */
    int conv_confirm;     /* 1: "delete it? y/n" is asked */
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
};

/* tui_screen.c: curses set-up and tear-down */
typedef struct tui_screen {
    FILE *errf;    /* stderr's file while curses is up, NULL: stderr left alone */
    int saved_err; /* the real stderr, dup'ed */
} tui_screen;
/* Redirect stderr, start curses in raw mode with colours (t->color) and
 * bracketed paste. Returns 0, or 1 if curses cannot start (the terminal
 * is then as it was, stderr still redirected: tui_screen_end puts it back). */
int tui_screen_begin(tui *t, tui_screen *s);
/* Stop curses (if up), give stderr back and copy to it what was written
 * meanwhile. */
void tui_screen_end(tui *t, tui_screen *s);

/* tui_draw.c: primitives and the frame */
int tui_pair(tui *t, int p);
/* Draw s[0..n) at (y, x) in at most cols columns; returns columns used.
 * Invalid bytes and control characters show as '?', bidi controls and
 * zero-width characters as \u202e (ui_invisible; s[0..i) is their
 * context, so s should start where the text or one of its lines starts). */
int tui_put(int y, int x, int cols, const char *s, size_t n);
int tui_putz(int y, int x, int cols, const char *s);
/* F8 or /edit: the message being edited into the input, with a status */
void tui_edit_show(tui *t);
void tui_fill(int y, int x, int cols, int attr);
/* A bar [|||||     ] of cols columns at fraction f. */
void tui_bar(tui *t, int y, int x, int cols, double f, int warn);
/* A framed box with a title, cleared inside. */
void tui_box(tui *t, int y, int x, int h, int w, const char *title);
/* Keep s (malloc'ed, taken over) until the next frame; returns it, or
 * "" (s freed) when out of memory. */
const char *tui_frame_keep(tui *t, char *s);
void tui_frame_free(tui *t);
void tui_set_status(tui *t, const char *msg);
/* Rows of the conversation on the current screen. */
int tui_conv_rows(tui *t);
void tui_draw(tui *t);

/* tui_header.c */
void tui_draw_header(tui *t);

/* tui_conv.c */
int tui_conv_width(tui *t);
void tui_draw_conv(tui *t, int top, int rows);
/* After a resize: put the line that was on top back on top. */
void tui_keep_anchor(tui *t, int rows);
/* PgUp (+1) / PgDn (-1). */
void tui_page(tui *t, int dir);
/* Ctrl+T: open or close the thinking of the last reply whose fold line is on
 * screen (else of the newest that thought). */
void tui_think_toggle(tui *t);
void tui_conv_free(tui *t);

/* tui_input.c */
int tui_input_rows(tui *t);
void tui_draw_input(tui *t, int top, int rows, int *cy, int *cx);
/* c as UTF-8 into b (4 bytes room) at *n. */
void tui_utf8_put(char *b, size_t *n, uint32_t c);
void tui_insert_char(ui_editor *ed, uint32_t c);

/* tui_side.c */
void tui_draw_side(tui *t, int top, int rows);
/* 1 when the side panel is drawn beside the conversation (wide enough),
 * 0 when it is collapsed (then drawn over the conversation while the
 * sliders have the keyboard). */
int tui_side_docked(const tui *t);

/* tui_menu.c */
/* Open the model files menu (keeps t->menu_err, which says why a load
 * failed) or the kernels and threads menu. */
void tui_menu_models(tui *t);
void tui_menu_kernels(tui *t);
/* The saved conversations: Enter opens, r renames, d deletes (asks
 * first), / searches. */
void tui_menu_convs(tui *t);
enum { PROMPT_PATH, PROMPT_RENAME, PROMPT_SEARCH };

/* The menus' shared keys: F2 and F3 switch menus, F10 closes. */
int tui_menu_fkeys(tui *t, int fn, uint32_t c);

/* tui_help.c */
void tui_help_open(tui *t);
/* F10: quit, or ask first while a reply is being written. */
void tui_ask_quit(tui *t);

/* tui_keys.c */
/* The F-keys, pages and mouse wheel of the main screen; 1 if c was one. */
int tui_key_common(tui *t, int fn, uint32_t c);
/* tui_key_common, but not inside a bracketed paste (a view's `shared`). */
int tui_key_main(tui *t, int fn, uint32_t c);
/* Read every key waiting on the terminal and hand it to the view. */
void tui_read_keys(tui *t);
/* Teach curses the Ctrl+arrow and Home/End spellings of xterm, rxvt,
 * screen and the Linux console, whatever $TERM says (ncurses only). */
void tui_keys_define(void);

#endif
