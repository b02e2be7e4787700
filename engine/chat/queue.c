#include "queue.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifndef _WIN32
#include <fcntl.h>
#include <unistd.h>
#endif

struct eng_queue {
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    unsigned char *buf; /* cap slots of elem bytes, a ring */
    size_t elem, cap, head, count;
    int closed;
    int fds[2];         /* pipe: one byte in it while count > 0 (-1 on Windows) */
    void (*drop)(void *);
};

/* The descriptor: a pipe, one byte in it while the queue is not empty.
 * Windows has none (waiters use eng_queue_wait): fds stay -1. */
#ifndef _WIN32
static void set_flags(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    fl = fcntl(fd, F_GETFD);
    if (fl >= 0)
        fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
}

static void wake_set(eng_queue *q, const char *why)
{
    ssize_t w = write(q->fds[1], why, 1);
    (void)w;
}

static void wake_clear(eng_queue *q)
{
    char b[16];
    while (read(q->fds[0], b, sizeof b) > 0) {
    }
}
#else
static void wake_set(eng_queue *q, const char *why) { (void)q, (void)why; }
static void wake_clear(eng_queue *q) { (void)q; }
#endif

int eng_queue_new(size_t elem_size, size_t cap, void (*drop)(void *), eng_queue **out, eng_err *e)
{
    *out = NULL;
    if (!elem_size || !cap || cap > SIZE_MAX / elem_size)
        return eng_errf(e, ENG_EINVAL, "queue: bad size %zu x %zu", cap, elem_size);
    eng_queue *q = calloc(1, sizeof *q);
    if (!q)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    q->buf = malloc(elem_size * cap);
    if (!q->buf) {
        free(q);
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    }
#ifdef _WIN32
    q->fds[0] = q->fds[1] = -1;
#else
    if (pipe(q->fds)) {
        int err = errno;
        free(q->buf);
        free(q);
        return eng_errf(e, ENG_EIO, "queue: pipe: %s", strerror(err));
    }
    set_flags(q->fds[0]);
    set_flags(q->fds[1]);
#endif
    q->elem = elem_size;
    q->cap = cap;
    q->drop = drop;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->not_empty, NULL);
    pthread_cond_init(&q->not_full, NULL);
    *out = q;
    return 0;
}

void eng_queue_free(eng_queue *q)
{
    if (!q)
        return;
    for (; q->count; q->count--) {
        if (q->drop)
            q->drop(q->buf + q->head * q->elem);
        q->head = (q->head + 1) % q->cap;
    }
#ifndef _WIN32
    close(q->fds[0]);
    close(q->fds[1]);
#endif
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->not_empty);
    pthread_cond_destroy(&q->not_full);
    free(q->buf);
    free(q);
}

/* Absolute CLOCK_REALTIME deadline wait_ms from now. */
static struct timespec deadline(int wait_ms)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += wait_ms / 1000;
    t.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* Wait on cv until cond holds, the queue closes, or the time is up.
 * Returns 0 when cond holds. Called with the mutex held. */
#define WAIT_UNTIL(q, cv, cond, wait_ms)                                                   \
    do {                                                                                   \
        struct timespec dl_ = deadline((wait_ms) > 0 ? (wait_ms) : 0);                     \
        while (!(cond) && !(q)->closed && (wait_ms) != 0) {                                \
            if ((wait_ms) < 0)                                                             \
                pthread_cond_wait(&(cv), &(q)->mu);                                        \
            else if (pthread_cond_timedwait(&(cv), &(q)->mu, &dl_) == ETIMEDOUT)           \
                break;                                                                     \
        }                                                                                  \
    } while (0)

int eng_queue_push(eng_queue *q, const void *msg, int wait_ms)
{
    pthread_mutex_lock(&q->mu);
    WAIT_UNTIL(q, q->not_full, q->count < q->cap, wait_ms);
    int r = 0;
    if (q->closed)
        r = ENG_ECLOSED;
    else if (q->count == q->cap)
        r = ENG_EAGAIN;
    else {
        memcpy(q->buf + ((q->head + q->count) % q->cap) * q->elem, msg, q->elem);
        if (q->count++ == 0)
            wake_set(q, "m"); /* empty -> not empty: make the descriptor readable */
        pthread_cond_signal(&q->not_empty);
    }
    pthread_mutex_unlock(&q->mu);
    return r;
}

int eng_queue_pop(eng_queue *q, void *msg, int wait_ms)
{
    pthread_mutex_lock(&q->mu);
    WAIT_UNTIL(q, q->not_empty, q->count > 0, wait_ms);
    int r = 0;
    if (q->count == 0)
        r = q->closed ? ENG_ECLOSED : ENG_EAGAIN;
    else {
        memcpy(msg, q->buf + q->head * q->elem, q->elem);
        q->head = (q->head + 1) % q->cap;
        if (--q->count == 0 && !q->closed)
            wake_clear(q);
        pthread_cond_signal(&q->not_full);
    }
    pthread_mutex_unlock(&q->mu);
    return r;
}

int eng_queue_wait(eng_queue *q, int wait_ms)
{
    pthread_mutex_lock(&q->mu);
    WAIT_UNTIL(q, q->not_empty, q->count > 0, wait_ms);
    int r = q->count > 0 || q->closed;
    pthread_mutex_unlock(&q->mu);
    return r;
}

size_t eng_queue_count(eng_queue *q)
{
    pthread_mutex_lock(&q->mu);
    size_t n = q->count;
    pthread_mutex_unlock(&q->mu);
    return n;
}

void eng_queue_close(eng_queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = 1;
    /* a closed queue counts as readable so a poller notices */
    if (q->count == 0)
        wake_set(q, "c");
    pthread_cond_broadcast(&q->not_empty);
    pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->mu);
}

int eng_queue_fd(const eng_queue *q) { return q->fds[0]; }
