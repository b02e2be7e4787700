/* The curses screen's set-up and tear-down: stderr goes to a temporary
 * file while curses owns the terminal (shown after, as htop's CRT.c does
 * for its debug output), curses in raw mode with keypad, colours and
 * bracketed paste, and the terminal put back on every way out (exit
 * through atexit; fatal signals through term.h).
 *
 * Curses: ncursesw (POSIX) or PDCurses with PDC_WIDE and PDC_FORCE_UTF8
 * (the Windows console); the differences are the blocks marked
 * NCURSES_VERSION. */
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "term.h"
#include "tui_internal.h"

static int curses_up;

static void restore_at_exit(void)
{
    if (curses_up) {
        ui_term_paste(0);
        endwin();
        curses_up = 0;
    }
}

static void colors(tui *t)
{
    /* NO_COLOR (no-color.org): set and not empty means no colours */
    const char *nc = getenv("NO_COLOR");
    t->color = t->o->color && has_colors() && !(nc && *nc);
#ifdef A_ITALIC
    t->italic = (term_attrs() & A_ITALIC) != 0;
#endif
    if (!t->color)
        return;
    start_color();
    use_default_colors();
    init_pair(C_TITLE, COLOR_BLACK, COLOR_CYAN);
    init_pair(C_METER, COLOR_CYAN, -1);
    init_pair(C_USER, COLOR_GREEN, -1);
    init_pair(C_BOT, -1, -1);
    init_pair(C_NOTE, COLOR_YELLOW, -1);
    init_pair(C_ERR, COLOR_RED, -1);
    init_pair(C_FKEY, -1, -1);
    init_pair(C_FLABEL, COLOR_BLACK, COLOR_CYAN);
    init_pair(C_DIM, COLOR_BLUE, -1);
    init_pair(C_MARK, COLOR_MAGENTA, -1);
    init_pair(C_SEL, COLOR_BLACK, COLOR_YELLOW);
    init_pair(C_WARN, COLOR_RED, -1);
    init_pair(C_BAR, COLOR_GREEN, -1);
    /* code: light grey on dark grey where there are 256 colours, white on
     * black otherwise; readable on dark and light backgrounds alike */
    if (COLORS >= 256)
        init_pair(C_CODE, 252, 236);
    else
        init_pair(C_CODE, COLOR_WHITE, COLOR_BLACK);
    init_pair(C_HEAD, COLOR_MAGENTA, -1);
    init_pair(C_LINK, COLOR_CYAN, -1);
}

int tui_screen_begin(tui *t, tui_screen *s)
{
    /* stderr goes to a file while curses owns the screen */
    fflush(stderr);
    s->errf = ui_term_tmpfile();
    s->saved_err = -1;
    if (s->errf) {
        s->saved_err = dup(2);
        dup2(fileno(s->errf), 2);
    }
    ui_term_begin();
    atexit(restore_at_exit);

    /* characters only: numbers keep the C locale's decimal point */
    setlocale(LC_CTYPE, "");
    if (!newterm(NULL, stdout, stdin))
        return 1;
    curses_up = 1;
#ifdef NCURSES_VERSION
    ESCDELAY = 25; /* PDCurses: the console's Esc key is a key, not a prefix to time */
#endif
    raw();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    nodelay(stdscr, TRUE);
    colors(t);
    if (t->o->mouse)
        mousemask(BUTTON4_PRESSED | BUTTON5_PRESSED, NULL);
#ifdef NCURSES_VERSION
    /* bracketed paste: the terminal's marks become two keys of our own */
    define_key("\033[200~", K_PASTE_BEGIN);
    define_key("\033[201~", K_PASTE_END);
    tui_keys_define();
    ui_term_paste(1);
#endif
    return 0;
}

void tui_screen_end(tui *t, tui_screen *s)
{
    if (curses_up) {
        ui_term_paste(0);
        if (t->o->mouse)
            mousemask(0, NULL);
        endwin();
        curses_up = 0;
    }
    ui_term_end();
    /* give stderr back and show what was written meanwhile */
    if (s->errf) {
        fflush(stderr);
        dup2(s->saved_err, 2);
        close(s->saved_err);
        rewind(s->errf);
        char buf[4096];
        size_t got;
        while ((got = fread(buf, 1, sizeof buf, s->errf)) > 0)
            fwrite(buf, 1, got, stderr);
        fclose(s->errf);
        s->errf = NULL;
    }
}
