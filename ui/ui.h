/* The two front ends of the chat. Both run on the calling thread until
 * the user quits and return the process exit status. */
#ifndef NIBBLE_UI_UI_H
#define NIBBLE_UI_UI_H

#include "chat.h"

typedef struct ui_opts {
    int color;           /* 0: monochrome even if the terminal has colours */
    int mouse;           /* 1: mouse wheel scrolls */
    const char *history; /* input history file, NULL: none */
} ui_opts;

/* Line mode: stdin lines in, replies on stdout, notices on stderr. */
int ui_plain_run(ui_chat *ch, const ui_opts *o);
/* The curses screen. Restores the terminal on every way out; what was
 * written to stderr meanwhile is shown after. Returns 1 without touching
 * the terminal if curses cannot start (the caller may fall back). */
int ui_tui_run(ui_chat *ch, const ui_opts *o); /* only with NIBBLE_HAVE_TUI */

#endif
