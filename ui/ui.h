/* The two front ends of the chat. Both run on the calling thread until
 * the user quits and return the process exit status. */
#ifndef NIBBLE_UI_UI_H
#define NIBBLE_UI_UI_H

#include <stddef.h>
#include <stdio.h>

#include "chat.h"

typedef struct ui_opts {
    int color;           /* 0: monochrome even if the terminal has colours */
    int mouse;           /* 1: mouse wheel scrolls */
    const char *history; /* input history file, NULL: none */
} ui_opts;

/* Line mode: stdin lines in, replies on stdout, notices on stderr.
 * SIGTERM, SIGHUP and SIGPIPE (stdout's reader gone) stop a running reply
 * and end it; then it returns 128 + the signal's number, and the caller,
 * once the conversation is saved (ui_chat_close), should die of that
 * signal (ui_exit_status). */
int ui_plain_run(ui_chat *ch, const ui_opts *o);
/* The process's exit for a front end's status: status itself, or, above
 * 128, death by that signal with its default action (a shell sees 128 +
 * N, a parent WIFSIGNALED). */
int ui_exit_status(int status);
/* The curses screen. Restores the terminal on every way out; what was
 * written to stderr meanwhile is shown after. Returns 0 when the user
 * quit; 128 + N when signal N (SIGTERM, SIGHUP, SIGINT from outside) or
 * the terminal hanging up (as SIGHUP) ended it, the reply in progress
 * stopped and kept, cut short: as for line mode, the caller saves and then
 * dies of that signal (ui_exit_status). Returns 1 without touching the
 * terminal if curses cannot start (the caller may fall back). */
int ui_tui_run(ui_chat *ch, const ui_opts *o); /* only with NIBBLE_HAVE_TUI */

/* Text that came from outside (a model's reply, a conversation or config
 * file, a user's line) goes to a terminal through these (ui/ttyout.c).
 * When f is a terminal, control characters are shown as visible escapes:
 * C0 controls but newline and tab, and DEL, as \xHH; C1 controls
 * (U+0080..U+009F) as \u00HH; bytes that are not UTF-8 as \xHH; the
 * bidi controls and zero-width characters of ui_invisible (text.h) as
 * \uHHHH (U+202E as \u202e; joiners inside emoji sequences and words of
 * scripts that use them stay). So ESC ] (retitle), ESC [ 2 J (clear), CSI
 * as U+009B, a right-to-left override and the like are printed, never
 * obeyed. To a pipe or a file (f not a terminal) the bytes are written as
 * they are: what the caller asked to save. */
void ui_term_write(FILE *f, const char *s, size_t n);
/* The same for s[from..n) of a longer text (a reply as it streams):
 * s[0..from) is read as the context of what follows, not written. */
void ui_term_write_from(FILE *f, const char *s, size_t from, size_t n);
void ui_term_printf(FILE *f, const char *fmt, ...) ENG_PRINTF(2, 3);
int ui_is_terminal(FILE *f);
/* The escaping itself: n bytes of in to out, which holds 6 * n + 1
 * bytes; returns the length written (out is NUL-terminated). _from:
 * in[from..n), with in[0..from) as context; out holds 6 * (n - from) + 1. */
size_t ui_term_escape(const char *in, size_t n, char *out);
size_t ui_term_escape_from(const char *in, size_t from, size_t n, char *out);

#endif
