/* engine/queue: FIFO order, the bound, timeouts, the wake descriptor and
 * eng_queue_wait (which must agree), close, payload hand-over, and two
 * threads hammering it (run under ThreadSanitizer with -DNIBBLE_TSAN=ON).
 * Windows has no descriptor: there eng_queue_wait alone. Also the engine's
 * events as the queue carries them: small, their text and state handed
 * over and freed by whoever holds the message last (leaks show under
 * -DNIBBLE_SANITIZE=ON). */
#include <pthread.h>
#ifndef _WIN32
#include <poll.h>
#endif
#include <stdint.h>

#include "engine.h"
#include "queue.h"
#include "testutil.h"

typedef struct msg {
    int seq;
    char *payload;
} msg;

static int dropped;
static void drop(void *p)
{
    msg *m = p;
    free(m->payload);
    dropped++;
}

/* Whether a message waits (or the queue closed), asked both ways. */
static int readable(eng_queue *q)
{
    int w = eng_queue_wait(q, 0);
#ifndef _WIN32
    struct pollfd p = {eng_queue_fd(q), POLLIN, 0};
    int polled = poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
    CHECKF(w == polled, "eng_queue_wait says %d, poll says %d", w, polled);
#endif
    return w;
}

#define N_MSGS 20000

static void *producer(void *arg)
{
    eng_queue *q = arg;
    for (int i = 0; i < N_MSGS; i++) {
        msg m = {i, malloc(8)};
        snprintf(m.payload, 8, "%d", i % 1000);
        if (eng_queue_push(q, &m, -1))
            free(m.payload);
    }
    return NULL;
}

static void drop_event(void *p) { eng_event_free(p); }

/* Events through a queue as the engine sends them: the fixed part is
 * small (the state is a pointer), payloads arrive intact and are freed
 * by the receiver, or by the queue for what nobody took. */
static void check_events(void)
{
    CHECKF(sizeof(eng_event) <= 96, "sizeof(eng_event) = %zu", sizeof(eng_event));
    CHECK(sizeof(eng_event) * 8 < sizeof(eng_state));
    eng_err e;
    eng_queue *q;
    CHECK(eng_queue_new(sizeof(eng_event), 8, drop_event, &q, &e) == 0);
    eng_event tok = {.type = ENG_EV_TOKEN, .text = strdup("once")};
    eng_event prog = {.type = ENG_EV_PROGRESS};
    prog.progress.stage = ENG_STAGE_PREFILL;
    prog.progress.fraction = 0.25;
    eng_event st = {.type = ENG_EV_STATE, .state = calloc(1, sizeof(eng_state))};
    snprintf(st.state->kernel, sizeof st.state->kernel, "scalar");
    st.state->gen = eng_gen_defaults();
    eng_event notice = {.type = ENG_EV_NOTICE, .code = ENG_NOTICE_CONTEXT_SHIFT, .text = strdup("context full")};
    CHECK(eng_queue_push(q, &tok, 0) == 0);
    CHECK(eng_queue_push(q, &prog, 0) == 0);
    CHECK(eng_queue_push(q, &st, 0) == 0);
    CHECK(eng_queue_push(q, &notice, 0) == 0);
    eng_event out;
    CHECK(eng_queue_pop(q, &out, 0) == 0);
    CHECK(out.type == ENG_EV_TOKEN && out.text && !strcmp(out.text, "once") && !out.state);
    eng_event_free(&out);
    CHECK(!out.text && !out.state);
    CHECK(eng_queue_pop(q, &out, 0) == 0);
    CHECK(out.type == ENG_EV_PROGRESS && out.progress.stage == ENG_STAGE_PREFILL && out.progress.fraction == 0.25);
    CHECK(!strcmp(eng_stage_name(out.progress.stage), "prefill"));
    CHECK(eng_queue_pop(q, &out, 0) == 0);
    CHECK(out.type == ENG_EV_STATE && out.state && !strcmp(out.state->kernel, "scalar"));
    CHECK(out.state && out.state->gen.max_tokens == eng_gen_defaults().max_tokens);
    eng_event_free(&out);
    eng_queue_free(q); /* the notice nobody took: its text goes with the queue */
}

int main(void)
{
    check_events();
    eng_err e;
    eng_queue *q;
    CHECK(eng_queue_new(0, 4, NULL, &q, &e) == ENG_EINVAL);
    CHECK(eng_queue_new(sizeof(msg), 3, drop, &q, &e) == 0);
#ifdef _WIN32
    CHECK(eng_queue_fd(q) == -1);
#else
    CHECK(eng_queue_fd(q) >= 0);
#endif
    CHECK(!readable(q));
    CHECK(eng_queue_wait(q, 30) == 0); /* times out */
    msg m = {0, NULL}, out;
    CHECK(eng_queue_pop(q, &out, 0) == ENG_EAGAIN);
    CHECK(eng_queue_pop(q, &out, 30) == ENG_EAGAIN); /* times out */
    for (int i = 0; i < 3; i++) {
        m.seq = i;
        CHECK(eng_queue_push(q, &m, 0) == 0);
        CHECK(readable(q));
    }
    CHECK(eng_queue_count(q) == 3);
    CHECK(eng_queue_push(q, &m, 0) == ENG_EAGAIN);  /* bounded */
    CHECK(eng_queue_push(q, &m, 20) == ENG_EAGAIN);
    for (int i = 0; i < 3; i++) {
        CHECK(eng_queue_pop(q, &out, 0) == 0);
        CHECK(out.seq == i); /* FIFO */
    }
    CHECK(!readable(q)); /* empty again: the descriptor is quiet */
    /* wrap-around keeps order */
    for (int round = 0; round < 10; round++) {
        for (int i = 0; i < 2; i++) {
            m.seq = round * 2 + i;
            CHECK(eng_queue_push(q, &m, 0) == 0);
        }
        for (int i = 0; i < 2; i++) {
            CHECK(eng_queue_pop(q, &out, 0) == 0);
            CHECK(out.seq == round * 2 + i);
        }
    }
    /* messages left behind are dropped by free */
    m.payload = malloc(4);
    CHECK(eng_queue_push(q, &m, 0) == 0);
    dropped = 0;
    eng_queue_free(q);
    CHECK(dropped == 1);

    /* close wakes a waiting popper and fails later pushes */
    CHECK(eng_queue_new(sizeof(msg), 2, drop, &q, &e) == 0);
    m.payload = NULL;
    CHECK(eng_queue_push(q, &m, 0) == 0);
    eng_queue_close(q);
    CHECK(eng_queue_push(q, &m, 0) == ENG_ECLOSED);
    CHECK(eng_queue_pop(q, &out, 0) == 0); /* what was queued still comes out */
    CHECK(eng_queue_pop(q, &out, -1) == ENG_ECLOSED);
    CHECK(readable(q));
    CHECK(eng_queue_wait(q, -1) == 1); /* closed: never blocks */
    eng_queue_free(q);

    /* two threads: a small queue forces both to wait on each other */
    CHECK(eng_queue_new(sizeof(msg), 8, drop, &q, &e) == 0);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, producer, q) == 0);
    int next = 0, bad = 0;
    while (next < N_MSGS) {
        /* wait like the UI does: poll the descriptor (eng_queue_wait
         * every other turn, and on Windows), then take */
#ifndef _WIN32
        if (next % 2) {
            struct pollfd p = {eng_queue_fd(q), POLLIN, 0};
            poll(&p, 1, 1000);
        } else
#endif
            eng_queue_wait(q, 1000);
        while (eng_queue_pop(q, &out, 0) == 0) {
            if (out.seq != next || atoi(out.payload) != next % 1000)
                bad++;
            free(out.payload);
            next++;
        }
    }
    pthread_join(th, NULL);
    CHECK(bad == 0);
    CHECK(eng_queue_count(q) == 0);
    eng_queue_free(q);
    return tu_result("test_queue");
}
