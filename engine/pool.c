/* The worker pool. A job is split into parts (fn's ith = 0..nth-1), and
 * every participant, the caller included, claims parts one at a time from
 * a shared counter until none are left; the caller then waits only for
 * parts already claimed. So a worker that is slow to wake, or has lost its
 * core to another process, costs nothing: the caller runs its part too.
 * (A fixed part per thread made a 2-thread decode on a busy 2-core machine
 * 3x slower than 1 thread: each matmul waited for a descheduled worker.)
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

/* How long a worker spins on the generation counter before it sleeps: long
 * enough to bridge the gap between two matmuls of one token. */
#define SPIN_ROUNDS 4000

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
    int sleepers;         /* workers waiting on wake (under mu) */
};

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
            pthread_mutex_lock(&p->mu);
            p->sleepers++;
            while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen)
                pthread_cond_wait(&p->wake, &p->mu);
            p->sleepers--;
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
    if (p->n == 1) {
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
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    if (p->sleepers)
        pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    run_parts(p);
    int spins = 0;
    while (atomic_load_explicit(&p->done, memory_order_acquire) < nth)
        if (++spins < SPIN_ROUNDS)
            cpu_relax();
        else
            sched_yield();
}
