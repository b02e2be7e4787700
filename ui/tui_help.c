/* Three overlays: the help (keys, then the chat's slash commands; it
 * scrolls where it is taller than the box, as at 80x24), the question
 * before quitting while a reply is being written, and the chat's own
 * questions (ui_chat.ask: /save NAME over another conversation). */
#include <stdio.h>
#include <string.h>

#include "text.h"
#include "tui_internal.h"

void tui_help_open(tui *t)
{
    t->view = &tui_view_help;
    t->help_top = 0;
}

static void draw_help(tui *t)
{
    static const char keys[] =
        "Keys:\n"
        "  Enter send   Alt+Enter / Ctrl+J new line   Up/Down history\n"
        "  Ctrl+A/E line start/end  Ctrl+K/U/W kill  Ctrl+Y yank  Alt+B/F word\n"
        "  PgUp/PgDn scroll (and the wheel with mouse = on); Home/End (empty input)\n"
        "  top/latest; Ctrl+Left/Right word\n"
        "  Esc or Ctrl+C stop a reply (the text so far stays)\n"
        "  Ctrl+C twice on an empty prompt quits   Tab/F4 sampler sliders\n"
        "  F1 help F2 models F3 kernel+threads+spec F5 regenerate F6 save\n"
        "  F7 conversations (r rename, d delete, / search) F9 stop F10 quit\n"
        "  F8 edit the last message (again: the one before); Enter sends it as a\n"
        "     new branch, the old one stays in the journal; Esc cancels\n"
        "  Ctrl+T show or fold a reply's thinking (the last one on screen)\n\n";
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
    tui_box(t, y, x, h, w, last ? " Help  (\u2191\u2193 PgUp PgDn scroll, other keys close) " : " Help  (any key closes) ");
    for (int i = 0; i < rows && t->help_top + i < n; i++) {
        const ui_line *l = &ls[t->help_top + i];
        tui_put(y + 1 + i, x + 2, w - 4, all + l->start, l->end - l->start);
    }
    if (last) {
        char pos[48];
        snprintf(pos, sizeof pos, " %d-%d of %d ", t->help_top + 1, t->help_top + rows < n ? t->help_top + rows : n, n);
        tui_putz(y + h - 1, x + w - 2 - (int)strlen(pos), (int)strlen(pos), pos);
    }
}

/* arrows and pages scroll (draw_help clamps), any other key closes */
static void help_key(tui *t, int fn, uint32_t c, int alt)
{
    (void)alt;
    int page = t->H - 8 > 1 ? t->H - 8 : 1;
    int d = !fn ? 0 : c == KEY_DOWN ? 1 : c == KEY_UP ? -1 : c == KEY_NPAGE ? page : c == KEY_PPAGE ? -page : 0;
    if (d)
        t->help_top += d;
    else
        t->view = &tui_view_input;
}

const tui_view tui_view_help = {"help", NULL, help_key, draw_help, TUI_CURSOR_NONE};

void tui_ask_quit(tui *t)
{
    if (t->ch->busy)
        t->view = &tui_view_confirm;
    else
        t->quit = 1;
}

static void draw_confirm(tui *t)
{
    int w = t->W - 2 < 56 ? t->W - 2 : 56, h = 5, y = t->H / 2 - 3, x = (t->W - w) / 2;
    tui_box(t, y, x, h, w, " Quit? ");
    tui_putz(y + 2, x + 2, w - 4, "A reply is being written. Quit anyway? (y/n)");
}

static void confirm_key(tui *t, int fn, uint32_t c, int alt)
{
    (void)alt;
    if (!fn && (c == 'y' || c == 'Y'))
        t->quit = 1;
    else
        t->view = &tui_view_input;
}

const tui_view tui_view_confirm = {"confirm", NULL, confirm_key, draw_confirm, TUI_CURSOR_NONE};

/* The chat asked something (ch->ask): y answers yes, any other key no. */
static void draw_ask(tui *t)
{
    const char *q = t->ch->ask;
    int w = t->W - 2 < 76 ? t->W - 2 : 76, x = (t->W - w) / 2;
    ui_line ls[6];
    int n = (int)ui_wrap(q, strlen(q), w - 4, 1, ls, 6);
    if (n > 6)
        n = 6;
    int h = n + 5, y = (t->H - h) / 2;
    tui_box(t, y, x, h, w, " Confirm ");
    for (int i = 0; i < n; i++)
        tui_put(y + 2 + i, x + 2, w - 4, q + ls[i].start, ls[i].end - ls[i].start);
    tui_putz(y + 3 + n, x + 2, w - 4, "y: yes   any other key: no");
}

static void ask_key(tui *t, int fn, uint32_t c, int alt)
{
    (void)alt;
    ui_chat_answer(t->ch, !fn && (c == 'y' || c == 'Y'));
    t->view = &tui_view_input;
    t->dirty = 1;
}

const tui_view tui_view_ask = {"ask", NULL, ask_key, draw_ask, TUI_CURSOR_NONE};
