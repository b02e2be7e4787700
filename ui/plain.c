/* Line mode: for scripts, pipes and dumb terminals. Reads lines, prints
 * replies as they stream, and runs the same slash commands as the screen.
 * A script is played one line per turn: the next line waits for the
 * reply before it. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _WIN32
#include <pthread.h>
#else
#include <fcntl.h>
#include <poll.h>
#endif

#include "ui.h"

#ifdef _WIN32
/* Windows cannot poll() a console or pipe together with the engine's
 * queue: a thread reads stdin into this inbox, and the loop waits on the
 * engine's queue in short steps, looking into the inbox between them. */
static struct {
    pthread_mutex_t mu;
    char *buf;
    size_t n, cap;
    int eof;
} inbox = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0};

static void *inbox_reader(void *arg)
{
    (void)arg;
    char b[4096];
    for (;;) {
        int got = read(0, b, sizeof b);
        pthread_mutex_lock(&inbox.mu);
        if (got > 0 && inbox.n + (size_t)got > inbox.cap) {
            size_t nc = (inbox.n + (size_t)got) * 2;
            char *nb = realloc(inbox.buf, nc);
            if (nb) {
                inbox.buf = nb;
                inbox.cap = nc;
            } else {
                got = -1;
            }
        }
        if (got > 0) {
            memcpy(inbox.buf + inbox.n, b, (size_t)got);
            inbox.n += (size_t)got;
        } else if (got == 0 || errno != EINTR) {
            inbox.eof = 1;
        }
        int done = inbox.eof;
        pthread_mutex_unlock(&inbox.mu);
        if (done)
            return NULL;
    }
}

/* Move what the reader got into in[nin..]; 1 if bytes came or the end
 * was seen, 0 if nothing new, -1 out of memory. */
static int inbox_take(char **in, size_t *nin, size_t *cap, int *eof)
{
    pthread_mutex_lock(&inbox.mu);
    int r = 0;
    if (inbox.n) {
        if (*nin + inbox.n + 1 > *cap) {
            size_t nc = (*nin + inbox.n + 1) * 2;
            char *b = realloc(*in, nc);
            if (!b) {
                pthread_mutex_unlock(&inbox.mu);
                return -1;
            }
            *in = b;
            *cap = nc;
        }
        memcpy(*in + *nin, inbox.buf, inbox.n);
        *nin += inbox.n;
        inbox.n = 0;
        r = 1;
    }
    if (inbox.eof && !*eof) {
        *eof = 1;
        r = 1;
    }
    pthread_mutex_unlock(&inbox.mu);
    return r;
}
#endif

/* got_term: the signal that asks us to leave (SIGTERM, SIGHUP, SIGPIPE
 * when the reader of stdout went away), 0 if none */
static volatile sig_atomic_t got_int, got_term;

#ifndef _WIN32
/* The self-pipe: on_sig writes a byte so that a poll() entered after the
 * loop last looked at the flags still wakes. Without it a signal that
 * lands while the loop prints (a /load of thousands of turns) was only
 * seen at the next event, and an idle chat waited in poll() for ever. */
static int sig_pipe[2] = {-1, -1};
#endif

static void on_sig(int sig)
{
    if (sig == SIGINT)
        got_int = 1;
    else
        got_term = sig;
#ifndef _WIN32
    if (sig_pipe[1] >= 0) {
        int e = errno; /* a handler must leave errno as it found it */
        ssize_t w = write(sig_pipe[1], "s", 1); /* full pipe: a wake-up is pending anyway */
        (void)w;
        errno = e;
    }
#endif
}

typedef struct printer {
    size_t entry, off; /* what of the document is on the screen already */
    const eng_journal *doc; /* which document that was */
} printer;

/* Print what the document gained since last time. */
static void show(ui_chat *ch, printer *p)
{
    eng_journal *d = ch->doc;
    if (p->entry > d->n || p->doc != d) { /* the document was replaced (/reset, /load) */
        p->entry = 0;
        p->off = 0;
        p->doc = d;
    }
    while (p->entry < d->n) {
        eng_jentry *x = &d->e[p->entry];
        if (x->kind == ENG_J_ASSISTANT) {
            if (p->off < x->len) {
                ui_term_write_from(stdout, x->text, p->off, x->len); /* what came before is context */
                fflush(stdout);
                p->off = x->len;
            }
            if (ch->busy && (int)p->entry == ch->reply)
                return; /* still streaming */
            if (x->partial)
                fprintf(stderr, "\n(this reply was cut short)");
            const char *tok = eng_journal_get_meta(d, p->entry, "tokens");
            const char *tps = eng_journal_get_meta(d, p->entry, "decode_tps");
            const char *end = eng_journal_get_meta(d, p->entry, "end");
            printf("\n");
            fflush(stdout);
            if (tok)
                ui_term_printf(stderr, "[%s tokens, %s tok/s, %s]\n", tok, tps ? tps : "?", end ? end : "?");
        } else if (x->kind == ENG_J_NOTICE) {
            ui_term_printf(stderr, "(%s)\n", x->text);
        } else if (!isatty(0)) {
            ui_term_printf(stdout, "> %s\n", x->text); /* a script's line, so the transcript reads */
            fflush(stdout);
        }
        p->entry++;
        p->off = 0;
    }
}

/* Take the first line of in[0..*nin) (all of it when no newline is
 * left) and run it. Returns 1 to quit, 0 to go on, -1 out of memory. */
static int run_line(ui_chat *ch, char *in, size_t *nin)
{
    char *nl = memchr(in, '\n', *nin);
    size_t len = nl ? (size_t)(nl - in) : *nin;
    char *line = malloc(len + 1);
    if (!line)
        return -1;
    memcpy(line, in, len);
    line[len] = 0;
    if (len && line[len - 1] == '\r')
        line[len - 1] = 0;
    size_t used = nl ? len + 1 : len;
    memmove(in, in + used, *nin - used);
    *nin -= used;
    int quit = 0;
    if (ch->ask[0]) { /* this line answers the question asked (/save over another) */
        if (!isatty(0))
            ui_term_printf(stderr, "%s\n", line); /* a script's answer, so the transcript reads */
        ui_chat_answer(ch, ui_chat_is_yes(line));
    } else if (line[0]) {
        enum ui_action a = ui_chat_input(ch, line);
        if (a == UI_ACT_QUIT)
            quit = 1;
        else if (a == UI_ACT_HELP)
            fputs(ui_chat_help(), stderr);
        else if (a == UI_ACT_EDIT) /* no input to fill here: the next line replaces it */
            ui_term_printf(stderr, "(editing: %s)\n(the next line you type replaces it; a command cancels)\n",
                           ui_chat_editing_text(ch) ? ui_chat_editing_text(ch) : "");
    }
    free(line);
    return quit;
}

int ui_plain_run(ui_chat *ch, const ui_opts *o)
{
#ifdef _WIN32
    /* Ctrl+C and Ctrl+Break reach the C runtime as SIGINT (no SIGHUP) */
    signal(SIGINT, on_sig);
    signal(SIGTERM, on_sig);
    pthread_t rd;
    if (pthread_create(&rd, NULL, inbox_reader, NULL) == 0)
        pthread_detach(rd); /* may sit in read() until the process ends */
    else
        inbox.eof = 1;
#else
    if (sig_pipe[0] < 0 && pipe(sig_pipe) == 0)
        for (int i = 0; i < 2; i++) {
            fcntl(sig_pipe[i], F_SETFL, fcntl(sig_pipe[i], F_GETFL) | O_NONBLOCK);
            fcntl(sig_pipe[i], F_SETFD, FD_CLOEXEC);
        }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sig;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    /* a closed pipe (| head) must not kill us mid-reply: writes fail
     * with EPIPE instead, and the reply so far is saved on the way out */
    sigaction(SIGPIPE, &sa, NULL);
#endif
    ch->cancel = &got_term;
    (void)o;
    printer p = {0, 0, NULL};
    char *in = NULL;     /* bytes read, not yet a whole line */
    size_t nin = 0, cap = 0;
    int eof = 0, prompt = 1, quit = 0;
    int tty = isatty(0) && isatty(1);
    int last_int_idle = 0;
    while (!quit && !got_term) {
        ui_chat_pump(ch);
        show(ch, &p);
        ui_chat_tick(ch);
        if (got_int) {
            got_int = 0;
            if (ch->busy || ch->loading)
                ui_chat_stop(ch);
            else if (last_int_idle || !tty)
                break;
            else {
                fprintf(stderr, "\n(Ctrl+C again or /quit to leave)\n");
                last_int_idle = 1;
                prompt = 1;
            }
        }
        /* a whole line waiting and the engine free: run it */
        if (!ch->busy && !ch->loading && nin && (eof || memchr(in, '\n', nin))) {
            int rc = run_line(ch, in, &nin);
            if (rc < 0)
                break;
            quit = rc;
            last_int_idle = 0;
            prompt = 1;
            if (ch->ask[0]) { /* the next line is the answer */
                show(ch, &p);
                ui_term_printf(stderr, "%s ", ch->ask);
                fflush(stderr);
                prompt = 0;
            }
            continue;
        }
        if (eof && !nin && !ch->busy && !ch->loading) {
            if (ch->ask[0]) { /* no answer came: nothing is overwritten */
                fputs("\n", stderr);
                ui_chat_answer(ch, 0);
                show(ch, &p);
            }
            break;
        }
        if (prompt && tty && !ch->busy && !ch->loading) {
            show(ch, &p);
            fputs("> ", stdout);
            fflush(stdout);
            prompt = 0;
        }
#ifdef _WIN32
        int took = eof ? 0 : inbox_take(&in, &nin, &cap, &eof);
        if (took < 0)
            break;
        if (!took) {
            int to = ui_chat_timeout(ch);
            eng_engine_wait(ch->en, to < 0 || to > 15 ? 15 : to);
        }
#else
        /* stdin last, so that nf leaves it out at end of input */
        struct pollfd fds[3] = {{eng_engine_fd(ch->en), POLLIN, 0}, {sig_pipe[0], POLLIN, 0}, {0, POLLIN, 0}};
        int nf = eof ? 2 : 3;
        int to = ui_chat_timeout(ch);
        if (poll(fds, (nfds_t)nf, to) < 0 && errno != EINTR)
            break;
        if (fds[1].revents & POLLIN) { /* a signal came: the flags say which; empty the pipe */
            char drain[64];
            while (read(sig_pipe[0], drain, sizeof drain) > 0)
                ;
        }
        if (nf == 3 && (fds[2].revents & (POLLIN | POLLHUP | POLLERR))) {
            if (nin + 4096 + 1 > cap) {
                cap = (nin + 4096 + 1) * 2;
                char *b = realloc(in, cap);
                if (!b)
                    break;
                in = b;
            }
            ssize_t got = read(0, in + nin, 4096);
            if (got > 0)
                nin += (size_t)got;
            else if (got == 0 || (errno != EINTR && errno != EAGAIN))
                eof = 1;
        }
#endif
    }
    /* let a reply that is still running end cleanly; one a signal ended
     * is kept as cut short */
    if (ch->busy) {
        ui_chat_end_reply(ch, 2000, got_term != 0);
        show(ch, &p);
    }
    if (tty && prompt == 0 && !got_term)
        fputs("\n", stdout);
    free(in);
    ch->cancel = NULL;
    return got_term ? 128 + got_term : 0;
}
