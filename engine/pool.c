#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

/* How long a worker spins on the generation counter before it sleeps: long
 * enough to bridge the gap between two matmuls of one token. */
#define SPIN_ROUNDS 4000

typedef struct worker {
    struct eng_pool *pool;
    int ith;
    pthread_t thread;
} worker;

struct eng_pool {
    int n;
    worker *w;
    eng_pool_fn fn;
    void *arg;
    atomic_uint gen;     /* bumped for each job */
    atomic_int pending;  /* workers still running the current job */
    atomic_int quit;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    int sleepers;        /* workers waiting on wake (under mu) */
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
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
        p->fn(p->arg, w->ith, p->n);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel);
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
            p->w[i].ith = i;
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

void eng_pool_run(eng_pool *p, eng_pool_fn fn, void *arg)
{
    if (p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    atomic_store_explicit(&p->pending, p->n - 1, memory_order_release);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    if (p->sleepers)
        pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    fn(arg, 0, p->n);
    int spins = 0;
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0)
        if (++spins < SPIN_ROUNDS)
            cpu_relax();
        else
            sched_yield();
}
