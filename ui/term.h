/* What the curses screen needs from the operating system that curses
 * does not give it, in one small interface: saving the terminal and
 * putting it back on a fatal signal, the quit signals, waiting for a key
 * and the engine's queue together, bracketed paste and a temporary file
 * for stderr. One file per system: term_posix.c (with ncursesw) and
 * term_win.c (the Windows console, with PDCurses); the screen's files
 * (tui_screen.c, tui_draw.c, tui_keys.c) keep only the few differences
 * between the two curses libraries. */
#ifndef NIBBLE_UI_TERM_H
#define NIBBLE_UI_TERM_H

#include <signal.h>
#include <stdio.h>

#include "engine.h"

/* Before curses starts: remember the terminal's modes (termios; the
 * console modes on Windows) and install the signal handlers: SIGINT,
 * SIGTERM (and SIGHUP, Ctrl+Break where they exist) only set the flag
 * ui_term_quit_asked() reads (the screen then saves the reply so far,
 * puts the terminal back and ends with the signal's status); SIGSEGV,
 * SIGABRT, ... put the terminal back and let the signal kill the process. */
void ui_term_begin(void);
/* After endwin: the quit handlers that were there before ui_term_begin. */
void ui_term_end(void);
/* The quit signal that came (its number), 0 if none. */
int ui_term_quit_asked(void);
/* The flag behind it, for ui_chat.cancel (long actions stop early). */
const volatile sig_atomic_t *ui_term_quit_flag(void);

/* Ask the terminal to mark pasted text (bracketed paste, ESC[200~ ...
 * ESC[201~) or to stop. Where keys cannot carry the marks (the Windows
 * console) it does nothing and the paste arrives as typed keys. */
void ui_term_paste(int on);

enum { UI_TERM_KEYS = 1, UI_TERM_TIMEOUT = 2, UI_TERM_HUP = 4 };
/* Wait at most ms milliseconds (-1: no limit) for a key on the terminal
 * or an event on the engine's queue. Returns a mask: UI_TERM_KEYS when
 * keys may wait (read them with a non-blocking get_wch; a resize comes that
 * way too), UI_TERM_TIMEOUT when the time ran out, UI_TERM_HUP when the
 * terminal went away; -1 when waiting failed. */
int ui_term_wait(eng_engine *en, int ms);

/* A temporary file, deleted when closed, to hold stderr while curses owns
 * the screen; NULL if none can be made (stderr is then left alone). */
FILE *ui_term_tmpfile(void);

#endif
