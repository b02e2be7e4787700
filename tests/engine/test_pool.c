/* The worker pool: every part of every job (and every unit of a range
 * job) runs exactly once whatever the thread, part, unit and chunk
 * counts, jobs see each other's results in order, and a
 * worker that stops inside a part it claimed turns the caller to running
 * jobs alone instead of waiting on every job. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "pool.h"
#include "testutil.h"

#define MAXP 300

typedef struct count_job {
    atomic_int runs[MAXP];
    int nth_seen;
    atomic_int bad_nth;
    long *acc; /* acc[i] += i: parts of one job touch disjoint slots */
} count_job;

static void count_fn(void *arg, int ith, int nth)
{
    count_job *j = arg;
    if (nth != j->nth_seen || ith < 0 || ith >= nth)
        atomic_fetch_add(&j->bad_nth, 1);
    else {
        atomic_fetch_add(&j->runs[ith], 1);
        j->acc[ith] += ith + 1;
    }
}

static void check_counts(int threads)
{
    eng_pool *p = eng_pool_new(threads);
    CHECKF(p && eng_pool_threads(p) == threads, "pool of %d", threads);
    if (!p)
        return;
    static long acc[MAXP];
    memset(acc, 0, sizeof acc);
    const int parts[] = {1, 2, 3, 7, 8, 64, MAXP};
    int jobs = 0;
    for (int round = 0; round < 200; round++)
        for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++) {
            count_job j;
            memset(&j, 0, sizeof j);
            j.nth_seen = parts[k];
            j.acc = acc;
            eng_pool_run_parts(p, count_fn, &j, parts[k]);
            jobs++;
            CHECK(atomic_load(&j.bad_nth) == 0);
            for (int i = 0; i < parts[k]; i++)
                if (atomic_load(&j.runs[i]) != 1) {
                    CHECKF(0, "threads %d, %d parts: part %d ran %d times", threads, parts[k], i,
                           atomic_load(&j.runs[i]));
                    break;
                }
        }
    /* every job's writes are visible to the next job and to the caller */
    for (int i = 0; i < MAXP; i++) {
        long want = 0;
        for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++)
            if (i < parts[k])
                want += 200L * (i + 1);
        CHECKF(acc[i] == want, "threads %d: slot %d holds %ld, want %ld", threads, i, acc[i], want);
    }
    /* eng_pool_run: one part per thread */
    count_job j;
    memset(&j, 0, sizeof j);
    j.nth_seen = threads;
    j.acc = acc;
    eng_pool_run(p, count_fn, &j);
    CHECK(atomic_load(&j.bad_nth) == 0);
    for (int i = 0; i < threads; i++)
        CHECKF(atomic_load(&j.runs[i]) == 1, "eng_pool_run, %d threads: part %d ran %d times", threads, i,
               atomic_load(&j.runs[i]));
    eng_pool_free(p);
}

/* Range jobs: units in [0, n) each covered once, in ranges of at least
 * `chunk` units (the last piece of a slice may be shorter), the whole
 * range on one thread being fine too. */
#define MAXU 5000

typedef struct range_job {
    atomic_int runs[MAXU];
    uint32_t n;
    atomic_int bad;   /* empty or out-of-range ranges */
    atomic_int calls;
} range_job;

static void range_fn(void *arg, uint32_t b, uint32_t e)
{
    range_job *j = arg;
    atomic_fetch_add(&j->calls, 1);
    if (b >= e || e > j->n) {
        atomic_fetch_add(&j->bad, 1);
        return;
    }
    for (uint32_t u = b; u < e; u++)
        atomic_fetch_add(&j->runs[u], 1);
}

static void check_ranges(int threads)
{
    eng_pool *p = eng_pool_new(threads);
    CHECKF(p != NULL, "pool of %d", threads);
    if (!p)
        return;
    static range_job j;
    const uint32_t ns[] = {1, 2, 3, 7, 64, 1000, MAXU};
    const uint32_t chunks[] = {0, 1, 3, 16, 10000};
    for (int round = 0; round < 40; round++)
        for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
            for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
                memset(&j, 0, sizeof j);
                j.n = ns[a];
                eng_pool_run_range(p, range_fn, &j, ns[a], chunks[c]);
                CHECKF(atomic_load(&j.bad) == 0, "threads %d, n %u, chunk %u: %d bad ranges", threads, ns[a],
                       chunks[c], atomic_load(&j.bad));
                for (uint32_t u = 0; u < ns[a]; u++)
                    if (atomic_load(&j.runs[u]) != 1) {
                        CHECKF(0, "threads %d, n %u, chunk %u: unit %u ran %d times", threads, ns[a], chunks[c], u,
                               atomic_load(&j.runs[u]));
                        return;
                    }
                /* pieces shrink by halves to the chunk: a few per thread */
                if (chunks[c] >= 16 && ns[a] <= 64)
                    CHECKF(atomic_load(&j.calls) <= 4 * threads, "threads %d, n %u, chunk %u: %d calls", threads,
                           ns[a], chunks[c], atomic_load(&j.calls));
            }
    /* nothing to do is no call */
    memset(&j, 0, sizeof j);
    eng_pool_run_range(p, range_fn, &j, 0, 1);
    CHECK(atomic_load(&j.calls) == 0);
    eng_pool_free(p);
}

/* A worker that sleeps inside its part, as if it had lost its core. */
typedef struct stall_job {
    pthread_t caller;
    atomic_int worker_parts; /* parts run by a thread other than the caller */
    int sleep_ms;
} stall_job;

static void stall_fn(void *arg, int ith, int nth)
{
    (void)ith;
    (void)nth;
    stall_job *j = arg;
    if (!pthread_equal(pthread_self(), j->caller)) {
        atomic_fetch_add(&j->worker_parts, 1);
        if (j->sleep_ms) {
            struct timespec ts = {0, j->sleep_ms * 1000000L};
            nanosleep(&ts, NULL);
        }
    } else {
        /* give a worker time to claim the other part */
        struct timespec ts = {0, 200000L};
        nanosleep(&ts, NULL);
    }
}

static void check_stall(void)
{
    eng_pool *p = eng_pool_new(2);
    if (!p) {
        CHECK(p);
        return;
    }
    stall_job j;
    memset(&j, 0, sizeof j);
    j.caller = pthread_self();
    j.sleep_ms = 20;
    /* until the worker takes a part (it may be slow to start) */
    for (int i = 0; i < 200 && atomic_load(&j.worker_parts) == 0; i++)
        eng_pool_run_parts(p, stall_fn, &j, 2);
    if (atomic_load(&j.worker_parts) == 0) {
        printf("test_pool: the worker never ran a part (machine too busy?); stall check skipped\n");
        eng_pool_free(p);
        return;
    }
    CHECKF(eng_pool_stalls(p) >= 1, "a 20 ms part in the worker was not seen as a stall");
    /* the next jobs run on the caller alone */
    atomic_store(&j.worker_parts, 0);
    j.sleep_ms = 0;
    for (int i = 0; i < 8; i++)
        eng_pool_run_parts(p, stall_fn, &j, 2);
    CHECKF(atomic_load(&j.worker_parts) == 0, "after a stall a worker still ran %d parts",
           atomic_load(&j.worker_parts));
    eng_pool_free(p);
}

int main(void)
{
    for (int t = 1; t <= 4; t++) {
        check_counts(t);
        check_ranges(t);
    }
    check_stall();
    return tu_result("test_pool");
}
