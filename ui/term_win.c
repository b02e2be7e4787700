/* ui/term.h on the Windows console (PDCurses' wincon port). The console
 * cannot be poll()ed together with the engine's queue, so the wait takes
 * turns in short steps: the engine's queue (eng_engine_wait), then the
 * console input handle, as line mode's loop does (ui/plain.c). PDCurses
 * reads the console itself; a non-blocking get_wch after a wake-up drains
 * what came, including resize and mouse records it does not pass on. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <windows.h>

#include "term.h"

/* how long one side of the wait may hold up the other, in ms */
#define STEP_MS 15

static volatile sig_atomic_t sig_quit;
static DWORD saved_in_mode, saved_out_mode;
static int have_in_mode, have_out_mode;
static void (*old_int)(int), (*old_term)(int);
#ifdef SIGBREAK
static void (*old_break)(int);
#endif

static void on_fatal(int sig)
{
    /* the console's modes as they were (echo, line input, Ctrl+C), then die */
    if (have_in_mode)
        SetConsoleMode(GetStdHandle(STD_INPUT_HANDLE), saved_in_mode);
    if (have_out_mode)
        SetConsoleMode(GetStdHandle(STD_OUTPUT_HANDLE), saved_out_mode);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void on_quit_sig(int sig)
{
    sig_quit = sig;
    signal(sig, on_quit_sig); /* the C runtime resets the handler before calling it */
}

void ui_term_begin(void)
{
    have_in_mode = GetConsoleMode(GetStdHandle(STD_INPUT_HANDLE), &saved_in_mode) != 0;
    have_out_mode = GetConsoleMode(GetStdHandle(STD_OUTPUT_HANDLE), &saved_out_mode) != 0;
    /* raw() makes Ctrl+C a key; these come from outside (Ctrl+Break,
     * closing the window reaches the runtime as SIGBREAK/SIGINT) */
    old_int = signal(SIGINT, on_quit_sig);
    old_term = signal(SIGTERM, on_quit_sig);
#ifdef SIGBREAK
    old_break = signal(SIGBREAK, on_quit_sig);
#endif
    signal(SIGSEGV, on_fatal);
    signal(SIGABRT, on_fatal);
    signal(SIGFPE, on_fatal);
    signal(SIGILL, on_fatal);
}

void ui_term_end(void)
{
    signal(SIGINT, old_int == SIG_ERR ? SIG_DFL : old_int);
    signal(SIGTERM, old_term == SIG_ERR ? SIG_DFL : old_term);
#ifdef SIGBREAK
    signal(SIGBREAK, old_break == SIG_ERR ? SIG_DFL : old_break);
#endif
}

int ui_term_quit_asked(void) { return (int)sig_quit; }

const volatile sig_atomic_t *ui_term_quit_flag(void) { return &sig_quit; }

/* PDCurses reads the console's key records, which carry no paste marks:
 * a paste arrives as typed keys (tui_keys.c gives Ctrl+V a paste of its own). */
void ui_term_paste(int on) { (void)on; }

int ui_term_wait(eng_engine *en, int ms)
{
    HANDLE in = GetStdHandle(STD_INPUT_HANDLE);
    ULONGLONG t0 = GetTickCount64();
    for (;;) {
        int left = STEP_MS;
        if (ms >= 0) {
            ULONGLONG el = GetTickCount64() - t0;
            if (el >= (ULONGLONG)ms)
                return UI_TERM_KEYS | UI_TERM_TIMEOUT;
            if ((ULONGLONG)ms - el < (ULONGLONG)left)
                left = (int)((ULONGLONG)ms - el);
        }
        if (eng_engine_wait(en, left) > 0)
            return UI_TERM_KEYS; /* keys are cheap to look for: also read them */
        DWORD w = in ? WaitForSingleObject(in, 0) : WAIT_FAILED;
        if (w == WAIT_OBJECT_0)
            return UI_TERM_KEYS;
        if (w == WAIT_FAILED)
            return UI_TERM_KEYS | UI_TERM_HUP; /* no console to read any more */
    }
}

/* tmpfile() of the Windows C runtime creates its file in the root of the
 * current drive, which users may not write to: a file in %TEMP% instead,
 * opened with msvcrt's "D" (deleted when closed). */
FILE *ui_term_tmpfile(void)
{
    char dir[MAX_PATH + 1], path[MAX_PATH + 16];
    DWORD n = GetTempPathA(sizeof dir, dir);
    if (n == 0 || n > sizeof dir || !GetTempFileNameA(dir, "nib", 0, path))
        return NULL;
    FILE *f = fopen(path, "w+bD");
    if (!f)
        DeleteFileA(path);
    return f;
}
