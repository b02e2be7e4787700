/* The worker pool. A job is split into parts (fn's ith = 0..nth-1), and
 * every participant, the caller included, claims parts one at a time from
 * a shared counter until none are left; the caller then waits only for
 * parts already claimed. So a worker that is slow to wake, or has lost its
 * core to another process, costs nothing: the caller runs its part too.
 * (A fixed part per thread made a 2-thread decode on a busy 2-core machine
 * 3x slower than 1 thread: each matmul waited for a descheduled worker.)
 *
 * A worker can still lose its core in the middle of a part it claimed,
 * and then the caller waits for it until the scheduler runs it again (a
 * time slice, milliseconds, on a machine with more runnable threads than
 * cores). So the caller times its own share and its wait: a wait well past
 * its own share is a stall, after which it runs the next jobs alone (the
 * workers go to sleep), a number that doubles with each further stall and
 * halves with each job the workers help with in time. A busy machine then
 * costs about what one thread costs instead of a collapse; a quiet one
 * keeps both threads.
 *
 * The counter is one 64-bit word: job number (32 bits), part count (16),
 * next part (16). A compare-and-swap that takes a part succeeds only on
 * the current job's word, and the caller does not return (nor touch the
 * job's fields) until every taken part is done, so fn and arg read after
 * a successful claim are that job's. */
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* How long a worker spins on the generation counter before it sleeps: long
 * enough to bridge the gap between two matmuls of one token. */
#define SPIN_ROUNDS 4000
/* A wait for the workers longer than the caller's own share plus this is
 * a stall (ns): far above a part's length in a healthy job, far below a
 * scheduler time slice. */
#define STALL_NS 200000
/* Jobs run alone after the first stall, and the most after many. */
#define SOLO_MIN 16u
#define SOLO_MAX 4096u

typedef struct worker {
    struct eng_pool *pool;
    pthread_t thread;
} worker;

struct eng_pool {
    int n;
    worker *w;
    eng_pool_fn fn;       /* the current job; written before `parts` */
    void *arg;
    int nth;
    uint32_t job;         /* caller only: number of the current job */
    _Atomic uint64_t parts; /* job << 32 | count << 16 | next */
    atomic_int done;      /* parts of the current job finished */
    atomic_uint gen;      /* bumped for each job: what sleeping workers wait on */
    atomic_int quit;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    atomic_int sleepers;  /* workers waiting on wake (changed under mu) */
    uint32_t solo_left;   /* caller only: jobs to run alone before trying the workers again */
    uint32_t solo_next;   /* caller only: solo_left after the next stall */
    uint64_t stalls;      /* caller only: stalls seen (for tests and tuning) */
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Claim and run parts of the current job until none are left. */
static void run_parts(eng_pool *p)
{
    uint64_t w = atomic_load_explicit(&p->parts, memory_order_acquire);
    for (;;) {
        unsigned next = (unsigned)(w & 0xffff), count = (unsigned)(w >> 16 & 0xffff);
        if (next >= count)
            return;
        if (!atomic_compare_exchange_weak_explicit(&p->parts, &w, w + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        p->fn(p->arg, (int)next, p->nth);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
        w = atomic_load_explicit(&p->parts, memory_order_acquire);
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    eng_pool *p = w->pool;
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen) {
            if (++spins < SPIN_ROUNDS) {
                cpu_relax();
                continue;
            }
            /* sleepers goes up before gen is read again (both seq_cst),
             * and the caller bumps gen before it reads sleepers: one of
             * the two sees the other, so no wake-up is lost */
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while ((g = atomic_load(&p->gen)) == seen)
                pthread_cond_wait(&p->wake, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
            break;
        }
        seen = g;
        if (atomic_load_explicit(&p->quit, memory_order_acquire))
            return NULL;
        run_parts(p);
    }
}

eng_pool *eng_pool_new(int n_threads)
{
    if (n_threads < 1)
        n_threads = 1;
    eng_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->n = n_threads;
    p->solo_next = SOLO_MIN;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    if (n_threads > 1) {
        p->w = calloc((size_t)n_threads, sizeof *p->w);
        if (!p->w) {
            eng_pool_free(p);
            return NULL;
        }
        for (int i = 1; i < n_threads; i++) {
            p->w[i].pool = p;
            if (pthread_create(&p->w[i].thread, NULL, worker_main, &p->w[i]) != 0) {
                p->n = i; /* the ones started so far get stopped by free */
                eng_pool_free(p);
                return NULL;
            }
        }
    }
    return p;
}

void eng_pool_free(eng_pool *p)
{
    if (!p)
        return;
    if (p->n > 1) {
        atomic_store(&p->quit, 1);
        pthread_mutex_lock(&p->mu);
        atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
        for (int i = 1; i < p->n; i++)
            pthread_join(p->w[i].thread, NULL);
    }
    free(p->w);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    free(p);
}

int eng_pool_threads(const eng_pool *p) { return p->n; }

void eng_pool_run(eng_pool *p, eng_pool_fn fn, void *arg) { eng_pool_run_parts(p, fn, arg, p->n); }

void eng_pool_run_parts(eng_pool *p, eng_pool_fn fn, void *arg, int nth)
{
    if (nth < 1)
        nth = 1;
    if (nth > 0xffff)
        nth = 0xffff;
    if (p->n == 1 || p->solo_left) {
        if (p->solo_left)
            p->solo_left--;
        for (int i = 0; i < nth; i++)
            fn(arg, i, nth);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    p->nth = nth;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    p->job++;
    atomic_store_explicit(&p->parts, (uint64_t)p->job << 32 | (uint64_t)nth << 16, memory_order_release);
    atomic_fetch_add(&p->gen, 1);
    if (atomic_load(&p->sleepers)) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    int64_t t0 = now_ns();
    run_parts(p);
    if (atomic_load_explicit(&p->done, memory_order_acquire) >= nth) {
        p->solo_next = p->solo_next / 2 > SOLO_MIN ? p->solo_next / 2 : SOLO_MIN;
        return;
    }
    int64_t t1 = now_ns();
    int spins = 0;
    while (atomic_load_explicit(&p->done, memory_order_acquire) < nth)
        if (++spins < SPIN_ROUNDS)
            cpu_relax();
        else
            sched_yield();
    int64_t t2 = now_ns();
    if (t2 - t1 > (t1 - t0) + STALL_NS) {
        p->stalls++;
        p->solo_left = p->solo_next;
        p->solo_next = p->solo_next * 2 < SOLO_MAX ? p->solo_next * 2 : SOLO_MAX;
    } else {
        p->solo_next = p->solo_next / 2 > SOLO_MIN ? p->solo_next / 2 : SOLO_MIN;
    }
}

unsigned long long eng_pool_stalls(const eng_pool *p) { return (unsigned long long)p->stalls; }
