/* ui/term.h on POSIX terminals (Linux, macOS; ncursesw): termios, poll()
 * on the terminal and the engine's descriptor together. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "term.h"

static volatile sig_atomic_t sig_quit;
static struct termios saved_tio;
static int have_tio;
static struct sigaction old_int, old_term, old_hup;

/* what the screen may have switched on: paste marks, mouse, cursor, the
 * alternate screen, attributes */
static const char reset_seq[] = "\033[?2004l\033[?1000l\033[?1002l\033[?1006l\033[?25h\033[?1049l\033[0m";

static void on_fatal(int sig)
{
    /* only async-signal-safe calls: put the terminal back, then die */
    ssize_t w = write(1, reset_seq, sizeof reset_seq - 1);
    (void)w;
    if (have_tio)
        tcsetattr(0, TCSANOW, &saved_tio);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void on_quit_sig(int sig)
{
    sig_quit = sig;
}

void ui_term_begin(void)
{
    if (tcgetattr(0, &saved_tio) == 0)
        have_tio = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_quit_sig;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGHUP, &sa, &old_hup);
    sa.sa_handler = on_fatal;
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGABRT, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    sigaction(SIGFPE, &sa, NULL);
}

void ui_term_end(void)
{
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGHUP, &old_hup, NULL);
}

int ui_term_quit_asked(void) { return (int)sig_quit; }

const volatile sig_atomic_t *ui_term_quit_flag(void) { return &sig_quit; }

void ui_term_paste(int on)
{
    ssize_t w = write(1, on ? "\033[?2004h" : "\033[?2004l", 8);
    (void)w;
}

int ui_term_wait(eng_engine *en, int ms)
{
    struct pollfd fds[2] = {{0, POLLIN, 0}, {eng_engine_fd(en), POLLIN, 0}};
    int pr = poll(fds, 2, ms);
    if (pr < 0)
        return errno == EINTR ? UI_TERM_KEYS : -1; /* a signal: SIGWINCH brings KEY_RESIZE */
    if (pr == 0)
        return UI_TERM_KEYS | UI_TERM_TIMEOUT;
    int r = 0;
    if (fds[0].revents & POLLIN)
        r |= UI_TERM_KEYS;
    if (fds[0].revents & (POLLHUP | POLLERR))
        r |= UI_TERM_HUP;
    return r;
}

FILE *ui_term_tmpfile(void) { return tmpfile(); }
