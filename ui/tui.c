/* The curses screen (htop-like: one look tells the state).
 *
 *   row 0        title: model, weight type, kernel, threads, template
 *   rows 1-2     meters: context gauge, tok/s, time to first token,
 *                sparkline, memory; a progress bar while loading or
 *                during a long prompt                     (tui_header.c)
 *   middle       conversation (left, tui_conv.c) | sampler sliders
 *                (right, tui_side.c)
 *   bottom       input editor (1-5 rows, tui_input.c), F-key bar
 *   over it      the view in charge: a menu (tui_menu.c), the help or
 *                the quit question (tui_help.c)
 *
 * This file is the loop: wait for the terminal and the engine's queue
 * together (ui_term_wait: poll() on POSIX, short turns on Windows), take
 * every event, handle every key (tui_keys.c), then redraw once if
 * anything is dirty (tui_draw.c). Resize arrives as KEY_RESIZE in that
 * loop; signal handlers only set flags (and, for fatal signals, put the
 * terminal back). Curses set-up and tear-down: tui_screen.c; what the
 * operating system does differently: term.h. The files' shared struct
 * and who owns what: tui_internal.h. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "term.h"
#include "text.h"
#include "tui_internal.h"

/* After the engine's events: a load started from the menu that failed
 * goes back to the model menu, with what went wrong. */
static void after_events(tui *t)
{
    ui_chat *ch = t->ch;
    if (ch->changed) {
        ch->changed = 0;
        t->dirty = 1;
    }
    if (ch->clip) { /* /copy: to the terminal's clipboard, between frames */
        char *seq = ui_osc52(ch->clip, strlen(ch->clip));
        if (seq) {
            fputs(seq, stdout);
            fflush(stdout);
            free(seq);
        }
        free(ch->clip);
        ch->clip = NULL;
    }
    if (ch->ask[0] && t->view != &tui_view_ask) { /* the chat asks before overwriting */
        t->view = &tui_view_ask;
        t->dirty = 1;
    }
    if (ch->refused) { /* a message too long for the context: back to the input to shorten */
        if (!ui_editor_len(t->ed))
            ui_editor_insert(t->ed, ch->refused, strlen(ch->refused));
        free(ch->refused);
        ch->refused = NULL;
    }
    if (ch->load_error && t->menu_load) {
        t->menu_load = 0;
        snprintf(t->menu_err, sizeof t->menu_err, "%s", ch->last_error);
        tui_menu_models(t);
        ch->load_error = 0;
    }
    if (!ch->loading)
        t->menu_load = ch->load_error ? t->menu_load : 0;
}

/* How long to wait for keys or events: the chat's own timers, four
 * frames a second while something moves, the memory meter every 2 s. */
static int wait_ms(tui *t)
{
    ui_chat *ch = t->ch;
    int to = ui_chat_timeout(ch);
    int live = ch->busy || ch->prog_active || (t->status[0] && ui_now_ms() - t->status_ms < 4500);
    if (live && (to < 0 || to > 250))
        to = 250;
    if (to < 0 || to > 2000)
        to = 2000;
    return to;
}

/* Returns 0, or for a signal (or the terminal hanging up) 128 + its number. */
static int loop(tui *t)
{
    ui_chat *ch = t->ch;
    getmaxyx(stdscr, t->H, t->W);
    t->dirty = 1;
    int hup = 0;
    while (!t->quit && !ui_term_quit_asked()) {
        ui_chat_pump(ch);
        after_events(t);
        ui_chat_tick(ch);
        if (t->dirty) {
            tui_draw(t);
            t->dirty = 0;
        }
        int got = ui_term_wait(ch->en, wait_ms(t));
        if (got < 0)
            break;
        if (got & UI_TERM_KEYS)
            tui_read_keys(t); /* also picks up KEY_RESIZE after SIGWINCH */
        if (got & UI_TERM_TIMEOUT)
            t->dirty = 1;
        if (got & UI_TERM_HUP) {
            hup = 1;
            break;
        }
    }
    int sig = ui_term_quit_asked();
#ifdef SIGHUP
    if (!sig && hup)
        sig = SIGHUP; /* the terminal went away: as its SIGHUP would say */
#else
    (void)hup;
#endif
    /* a reply ended by a signal keeps its text so far, marked cut short;
     * F10 mid-reply leaves it as it is (marked cut short too) */
    if (sig)
        ui_chat_end_reply(ch, 2000, 1);
    else
        ui_chat_stop(ch);
    return sig ? 128 + sig : 0;
}

int ui_tui_run(ui_chat *ch, const ui_opts *o)
{
    tui t;
    memset(&t, 0, sizeof t);
    t.ch = ch;
    t.o = o;
    t.view = &tui_view_input;
    t.think_focus = t.think_seen = -1;
    t.ed = ui_editor_new(500);
    t.path_ed = ui_editor_new(1);
    if (!t.ed || !t.path_ed) {
        ui_editor_free(t.ed);
        ui_editor_free(t.path_ed);
        return 1;
    }
    if (o->history)
        ui_editor_history_load(t.ed, o->history);

    tui_screen s;
    int rc = tui_screen_begin(&t, &s);
    if (!rc) {
        ch->cancel = ui_term_quit_flag(); /* a signal during /load ends it early */
        rc = loop(&t);
        ch->cancel = NULL;
    }
    tui_screen_end(&t, &s);
    tui_frame_free(&t);
    tui_conv_free(&t);
    free(t.frame_bufs);
    free(t.items);
    ui_editor_free(t.ed);
    ui_editor_free(t.path_ed);
    return rc;
}
