/* A bounded FIFO of fixed-size messages between two threads: mutex +
 * condition variables, plus a file descriptor that is readable while the
 * queue holds messages, so a thread that also waits on a terminal can put
 * both in one poll() and never spin.
 *
 * Messages are copied in and out by value. A message that points to heap
 * memory hands that memory over: the sender allocates, the receiver frees
 * (eng_queue_free runs the drop function on what nobody received). */
#ifndef NIBBLE_ENG_QUEUE_H
#define NIBBLE_ENG_QUEUE_H

#include <stddef.h>

#include "err.h"

typedef struct eng_queue eng_queue;

/* cap messages of elem_size bytes each. drop (may be NULL) frees the
 * payload of a message left in the queue when it is freed. */
int eng_queue_new(size_t elem_size, size_t cap, void (*drop)(void *msg), eng_queue **out, eng_err *e);
/* Runs drop on every message still queued. Accepts NULL. Both threads
 * must be done with the queue. */
void eng_queue_free(eng_queue *q);

/* Append a copy of msg. wait_ms: -1 waits for room, 0 never waits, else
 * waits that long. Returns 0, ENG_EAGAIN when full (nothing was copied,
 * the caller still owns the payload) or ENG_ECLOSED. */
int eng_queue_push(eng_queue *q, const void *msg, int wait_ms);
/* Take the oldest message into *msg. Same wait_ms; ENG_EAGAIN when
 * empty, ENG_ECLOSED when closed and empty. */
int eng_queue_pop(eng_queue *q, void *msg, int wait_ms);
/* Messages queued now (a snapshot). */
size_t eng_queue_count(eng_queue *q);
/* Wake every waiter; pushes fail from now on, pops drain what is left. */
void eng_queue_close(eng_queue *q);
/* Readable (poll POLLIN) exactly while the queue is not empty or has
 * been closed; never read it yourself. -1 on Windows, where a console or
 * pipe cannot share a poll() with it: use eng_queue_wait there. */
int eng_queue_fd(const eng_queue *q);
/* Wait until the queue holds a message or is closed (1), or wait_ms
 * passed (0); -1 waits without end. Takes nothing. For the one thread
 * that pops. */
int eng_queue_wait(eng_queue *q, int wait_ms);

enum { ENG_EAGAIN = -20, ENG_ECLOSED = -21 };

#endif
