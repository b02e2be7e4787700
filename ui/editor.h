/* The input editor: a multi-line UTF-8 buffer with a cursor, readline
 * keys, a kill buffer and a history browsed with Up/Down. No curses here:
 * the screen code maps keys to these calls and draws ui_editor_layout. */
#ifndef NIBBLE_UI_EDITOR_H
#define NIBBLE_UI_EDITOR_H

#include <stddef.h>

#include "text.h"

typedef struct ui_editor ui_editor;

/* hist_max: entries kept in the history (oldest dropped). */
ui_editor *ui_editor_new(size_t hist_max);
void ui_editor_free(ui_editor *ed);

const char *ui_editor_text(const ui_editor *ed); /* NUL-terminated, borrowed */
size_t ui_editor_len(const ui_editor *ed);
size_t ui_editor_cursor(const ui_editor *ed);     /* byte offset */
void ui_editor_set(ui_editor *ed, const char *text); /* cursor to the end */
void ui_editor_clear(ui_editor *ed);

/* Insert bytes at the cursor (a paste may hold newlines). */
int ui_editor_insert(ui_editor *ed, const char *s, size_t n);
void ui_editor_left(ui_editor *ed);
void ui_editor_right(ui_editor *ed);
void ui_editor_word_left(ui_editor *ed);
void ui_editor_word_right(ui_editor *ed);
void ui_editor_home(ui_editor *ed);      /* start of the (logical) line */
void ui_editor_end(ui_editor *ed);
void ui_editor_backspace(ui_editor *ed);
void ui_editor_delete(ui_editor *ed);
void ui_editor_kill_end(ui_editor *ed);  /* Ctrl+K */
void ui_editor_kill_start(ui_editor *ed);/* Ctrl+U */
void ui_editor_kill_word(ui_editor *ed); /* Ctrl+W */
void ui_editor_yank(ui_editor *ed);      /* Ctrl+Y */

/* Up/Down: move between the visual lines of the text at this width; on
 * the first (last) line, step back (forward) through the history.
 * Returns 1 if something changed. */
int ui_editor_up(ui_editor *ed, int width);
int ui_editor_down(ui_editor *ed, int width);

/* Add text to the history (not empty, not equal to the newest entry)
 * and leave history browsing. */
void ui_editor_history_add(ui_editor *ed, const char *text);
size_t ui_editor_history_count(const ui_editor *ed);
const char *ui_editor_history_at(const ui_editor *ed, size_t i); /* 0 = oldest */
/* Load and save the history file (one entry a line, escaped as in the
 * journal); save is atomic. Return 0 or a negative code. */
int ui_editor_history_load(ui_editor *ed, const char *path);
int ui_editor_history_save(const ui_editor *ed, const char *path);

/* The text wrapped at width (character wrap), and the cursor's row and
 * column in it. Returns the number of rows; lines go to out (up to cap). */
size_t ui_editor_layout(const ui_editor *ed, int width, ui_line *out, size_t cap, int *cur_row, int *cur_col);

#endif
