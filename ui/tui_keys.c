/* Keys: reading what the terminal sends (wide characters, Esc+key as
 * Alt+key, resize; on Windows PDCurses' own codes for the keypad and
 * Alt keys, and the clipboard on Ctrl+V), the keys taken before any view
 * (Ctrl+C, F10 on a too-small screen), then the view in charge
 * (t->view->key). The F-keys, pages and wheel of the main screen are
 * here too: the views that have them call tui_key_common. */
#include <stdint.h>
#include <stdio.h>
#include <wchar.h>

#include "keyseq.h"
#include "text.h"
#include "tui_internal.h"

int tui_key_common(tui *t, int fn, uint32_t c)
{
    if (!fn)
        return 0;
    switch (c) {
    case KEY_F(1): tui_help_open(t); return 1;
    case KEY_F(2): t->menu_err[0] = 0; tui_menu_models(t); return 1;
    case KEY_F(3): t->menu_err[0] = 0; tui_menu_kernels(t); return 1;
    case KEY_F(4): t->view = t->view == &tui_view_sliders ? &tui_view_input : &tui_view_sliders; return 1;
    case KEY_F(5): ui_chat_regen(t->ch); t->scroll = 0; return 1;
    case KEY_F(6): ui_chat_input(t->ch, "/save"); return 1;
    case KEY_F(7): t->conv_query[0] = 0; tui_menu_convs(t); return 1;
    case KEY_F(8): /* edit the last message; again: the one before */
        if (ui_chat_edit(t->ch, t->ch->editing >= 0 ? -1 : 1))
            tui_edit_show(t);
        return 1;
    case KEY_F(9): ui_chat_stop(t->ch); return 1;
    case KEY_F(10): tui_ask_quit(t); return 1;
    case KEY_PPAGE: tui_page(t, +1); return 1;
    case KEY_NPAGE: tui_page(t, -1); return 1;
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

int tui_key_main(tui *t, int fn, uint32_t c) { return !t->pasting && tui_key_common(t, fn, c); }

/* Ctrl+C: stop a reply; on an idle, empty prompt twice quits */
static void ctrl_c(tui *t)
{
    if (t->ch->busy || t->ch->loading) {
        ui_chat_stop(t->ch);
        tui_set_status(t, "stopped; the text so far stays");
    } else if (t->view != &tui_view_input) {
        t->view = &tui_view_input;
    } else if (ui_editor_len(t->ed)) {
        /* the draft goes into the history, so Up brings it back */
        ui_editor_history_add(t->ed, ui_editor_text(t->ed));
        ui_editor_clear(t->ed);
        ui_chat_edit_cancel(t->ch);
        t->paste_guard = 0;
        tui_set_status(t, "draft cleared; Up brings it back");
    } else if (ui_now_ms() - t->ctrl_c_ms < 3000) {
        t->quit = 1;
    } else {
        t->ctrl_c_ms = ui_now_ms();
        tui_set_status(t, "press Ctrl+C again to quit");
    }
}

/* A key: fn set, c is a KEY_ code; else c is a character (code point). */
static void handle_key(tui *t, int fn, uint32_t c, int alt)
{
    t->dirty = 1;
    if (!fn && c == 3) {
        ctrl_c(t);
        return;
    }
    if (t->W < MIN_W || t->H < MIN_H) {
        if (fn && c == KEY_F(10))
            t->quit = 1;
        return;
    }
    if (t->view->shared && t->view->shared(t, fn, c))
        return;
    t->view->key(t, fn, c, alt);
}

#ifdef PDCURSES
/* The Windows console sends Alt+key and the keypad's keys as keys of
 * PDCurses' own, where a terminal sends Esc then the key, or the plain
 * key: make them what the handlers know. The keypad's arrows (NumLock
 * off; also what wine's console gives for every arrow key) are KEY_A2
 * ... not KEY_UP. Returns 1 if *c is now an Alt+key. */
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
        tui_set_status(t, "the clipboard holds no text");
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
        tui_set_status(t, "out of memory for the paste");
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

static void resized(tui *t)
{
    int oldw = t->W;
#ifdef PDCURSES
    resize_term(0, 0); /* PDCurses takes the console's new size only when asked */
#endif
    getmaxyx(stdscr, t->H, t->W);
    if (oldw != t->W && t->W >= MIN_W && t->H >= MIN_H)
        tui_keep_anchor(t, tui_conv_rows(t));
    t->dirty = 1;
}

/* A decoded sequence as the key code the views know; 0: none. */
static int seq_code(enum ui_key k)
{
    switch (k) {
    case UI_K_UP: return KEY_UP;
    case UI_K_DOWN: return KEY_DOWN;
    case UI_K_LEFT: return KEY_LEFT;
    case UI_K_RIGHT: return KEY_RIGHT;
    case UI_K_WORD_LEFT: return K_WORD_LEFT;
    case UI_K_WORD_RIGHT: return K_WORD_RIGHT;
    case UI_K_HOME: return KEY_HOME;
    case UI_K_END: return KEY_END;
    case UI_K_INS: return KEY_IC;
    case UI_K_DEL: return KEY_DC;
    case UI_K_PGUP: return KEY_PPAGE;
    case UI_K_PGDN: return KEY_NPAGE;
    case UI_K_BTAB: return KEY_BTAB;
    case UI_K_ENTER: return KEY_ENTER;
    case UI_K_PASTE_BEGIN: return K_PASTE_BEGIN;
    case UI_K_PASTE_END: return K_PASTE_END;
    default:
        if (k >= UI_K_F1 && k <= UI_K_F12)
            return KEY_F(1 + (k - UI_K_F1));
        return 0;
    }
}

void tui_keys_define(void)
{
#ifdef NCURSES_VERSION
    static const struct {
        const char *seq;
        int code;
    } defs[] = {
        {"\033[1;5D", K_WORD_LEFT}, {"\033[1;5C", K_WORD_RIGHT}, /* xterm, screen, tmux */
        {"\033[1;3D", K_WORD_LEFT}, {"\033[1;3C", K_WORD_RIGHT}, /* Alt+arrows */
        {"\033[5D", K_WORD_LEFT},   {"\033[5C", K_WORD_RIGHT},   /* older xterm */
        {"\033Od", K_WORD_LEFT},    {"\033Oc", K_WORD_RIGHT},    /* rxvt */
        {"\033[1~", KEY_HOME},      {"\033[4~", KEY_END},        /* screen, tmux, linux */
        {"\033[7~", KEY_HOME},      {"\033[8~", KEY_END},        /* rxvt */
        {"\033[H", KEY_HOME},       {"\033[F", KEY_END},         /* xterm */
        {"\033OH", KEY_HOME},       {"\033OF", KEY_END},         /* xterm, application mode */
    };
    for (size_t i = 0; i < sizeof defs / sizeof *defs; i++)
        define_key(defs[i].seq, defs[i].code);
#endif
}

/* After Esc came '[' or 'O' (seq[0]): read the rest of a terminal
 * sequence and hand its key on; a sequence for no key we use is dropped,
 * never typed. Esc '[' alone is Alt+'['. */
static void read_seq(tui *t, uint32_t first)
{
    uint32_t seq[32];
    size_t n = 1, used = 0;
    seq[0] = first;
    enum ui_key k;
    while ((k = ui_keyseq(seq, n, &used)) == UI_K_MORE && n < sizeof seq / sizeof *seq) {
        uint32_t c;
        timeout(30); /* the rest of a sequence comes in the same write */
        int r = get_key(&c);
        nodelay(stdscr, TRUE);
        if (r != OK)
            break;
        seq[n++] = c;
    }
    if (k == UI_K_MORE) {
        if (n == 1)
            handle_key(t, 0, first, 1); /* Alt+[ or Alt+O */
        return;                         /* a torn sequence: dropped */
    }
    int code = seq_code(k);
    if (code)
        handle_key(t, 1, (uint32_t)code, 0);
    /* a character that ended the sequence without belonging to it */
    for (size_t i = used ? used : 1; i < n; i++)
        handle_key(t, 0, seq[i], 0);
}

void tui_read_keys(tui *t)
{
    for (;;) {
        uint32_t c;
        int r = get_key(&c);
        if (r == ERR)
            return;
        int fn = r == KEY_CODE_YES;
        if (fn && c == KEY_RESIZE) {
            resized(t);
            continue;
        }
        int alt = 0;
#ifdef PDCURSES
        alt = pdc_key(&fn, &c);
        if (!fn && c == 22 && t->view == &tui_view_input) {
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
            if (r2 == OK && (c2 == '[' || c2 == 'O')) {
                read_seq(t, c2);
                continue;
            }
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
