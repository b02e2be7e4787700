/* The input editor view: the prompt line(s) at the bottom (1 to
 * INPUT_MAX_ROWS rows, with the status message on the rule above), the
 * readline keys, bracketed paste (pasted text is inserted as typed, and
 * a paste into an empty prompt is a message even if it starts with '/'),
 * and sending a line to the chat. */
#include <stdlib.h>
#include <string.h>

#include "text.h"
#include "tui_internal.h"

int tui_input_rows(tui *t)
{
    int r, c;
    ui_line tmp[64];
    int n = (int)ui_editor_layout(t->ed, t->W - 3, tmp, 64, &r, &c);
    if (n < 1)
        n = 1;
    return n > INPUT_MAX_ROWS ? INPUT_MAX_ROWS : n;
}

void tui_draw_input(tui *t, int top, int rows, int *cy, int *cx)
{
    attron(tui_pair(t, C_DIM));
    mvhline(top - 1, 0, ACS_HLINE, t->W);
    attroff(tui_pair(t, C_DIM));
    if (t->status[0] && ui_now_ms() - t->status_ms < 4000) {
        attron(tui_pair(t, C_NOTE) | A_BOLD);
        tui_putz(top - 1, 2, t->W - 4, t->status);
        attroff(tui_pair(t, C_NOTE) | A_BOLD);
    }
    size_t cap = 256;
    ui_line *ls = malloc(cap * sizeof *ls);
    if (!ls)
        return;
    int r = 0, c = 0;
    int n = (int)ui_editor_layout(t->ed, t->W - 3, ls, cap, &r, &c);
    int first = r >= rows ? r - rows + 1 : 0;
    const char *txt = ui_editor_text(t->ed);
    attron(tui_pair(t, C_USER) | A_BOLD);
    mvaddstr(top, 0, t->ch->busy ? "\u2026" : t->ch->editing >= 0 ? "\u270e" : ">");
    attroff(tui_pair(t, C_USER) | A_BOLD);
    for (int i = 0; i < rows && first + i < n && first + i < (int)cap; i++)
        tui_put(top + i, 2, t->W - 3, txt + ls[first + i].start, ls[first + i].end - ls[first + i].start);
    if (!ui_editor_len(t->ed)) {
        attron(tui_pair(t, C_DIM));
        tui_putz(top, 2, t->W - 3,
                 t->ch->busy  ? "(Esc stops the reply; sliders apply at once)"
                 : t->W >= 86 ? "Type a message; Enter sends, Alt+Enter or Ctrl+J adds a line, /help lists commands"
                              : "Enter sends, Alt+Enter or Ctrl+J adds a line, /help lists commands");
        attroff(tui_pair(t, C_DIM));
    }
    *cy = top + r - first;
    *cx = 2 + c;
    free(ls);
}

void tui_utf8_put(char *b, size_t *n, uint32_t c)
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

void tui_insert_char(ui_editor *ed, uint32_t c)
{
    char b[8];
    size_t n = 0;
    tui_utf8_put(b, &n, c);
    ui_editor_insert(ed, b, n);
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
    else if (a == UI_ACT_HELP)
        tui_help_open(t);
    else if (a == UI_ACT_EDIT)
        tui_edit_show(t);
}

void tui_edit_show(tui *t)
{
    const char *was = ui_chat_editing_text(t->ch);
    if (!was)
        return;
    ui_editor_set(t->ed, was);
    t->view = &tui_view_input;
    tui_set_status(t, "editing: Enter sends it as a new branch (the old one stays saved), Esc cancels, "
                      "F8 an earlier message");
}

/* inside a bracketed paste: everything is text until its end mark */
static void key_pasting(tui *t, int fn, uint32_t c)
{
    if (fn && c == K_PASTE_END) {
        t->pasting = 0;
        return;
    }
    if (fn)
        return;
    if (c == '\r')
        c = '\n';
    if (c == '\t' || c == '\n' || c >= 0x20)
        tui_insert_char(t->ed, c);
}

static void key_fn(tui *t, uint32_t c)
{
    ui_editor *ed = t->ed;
    int w = t->W - 3;
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
    case K_WORD_LEFT: ui_editor_word_left(ed); return;
    case K_WORD_RIGHT: ui_editor_word_right(ed); return;
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
    case KEY_BTAB: t->view = &tui_view_sliders; return;
    }
}

static void key_alt(tui *t, uint32_t c)
{
    ui_editor *ed = t->ed;
    switch (c) {
    case '\r': case '\n': ui_editor_insert(ed, "\n", 1); return;
    case 'b': ui_editor_word_left(ed); return;
    case 'f': ui_editor_word_right(ed); return;
    case 127: case 8: ui_editor_kill_word(ed); return;
    }
}

static void key_char(tui *t, uint32_t c)
{
    ui_editor *ed = t->ed;
    int w = t->W - 3;
    switch (c) {
    case '\r': send_input(t); return;
    case '\n': ui_editor_insert(ed, "\n", 1); return; /* Ctrl+J */
    case '\t': t->view = &tui_view_sliders; return;
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
    case 20: tui_think_toggle(t); return;   /* Ctrl+T: a reply's thinking */
    }
    if (c >= 0x20)
        tui_insert_char(ed, c);
}

static void input_key(tui *t, int fn, uint32_t c, int alt)
{
    if (t->pasting) {
        key_pasting(t, fn, c);
        return;
    }
    if (!fn && c == 27 && !alt) {
        if (t->ch->busy)
            ui_chat_stop(t->ch);
        else if (t->ch->editing >= 0) { /* the edit is dropped, the message stays */
            ui_chat_edit_cancel(t->ch);
            ui_editor_clear(t->ed);
            tui_set_status(t, "edit cancelled");
        }
        return;
    }
    if (fn)
        key_fn(t, c);
    else if (alt)
        key_alt(t, c);
    else
        key_char(t, c);
}

const tui_view tui_view_input = {"input", tui_key_main, input_key, NULL, TUI_CURSOR_INPUT};
