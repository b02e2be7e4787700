/* The worker pool. A job is a range of units 0..n-1 (a parts job is one
 * unit per part). Each participant owns a contiguous slice of the range
 * (the caller the first) and takes from its front, half of what is left
 * each time, down to the job's chunk; a participant whose slice is empty
 * takes from the back of another's, chunk by chunk. So each thread mostly
 * streams through one contiguous piece of a matrix (every fresh start
 * costs a kernel its prefetch ramp), and the last pieces still balance.
 * A worker that is slow to wake, or has lost its core to another
 * process, costs nothing: the others take its slice. The caller then
 * waits only for units already taken.
 * (A fixed part per thread made a 2-thread decode on a busy 2-core machine
 * 3x slower than 1 thread: each matmul waited for a descheduled worker.)
 *
 * A worker can still lose its core in the middle of a piece it took, and
 * then the caller waits for it until the scheduler runs it again (a time
 * slice, milliseconds, on a machine with more runnable threads than
 * cores). So the caller times its own share and its wait: a wait well past
 * its own share is a stall, after which it runs the next jobs alone (the
 * workers go to sleep), a number that doubles with each further stall and
 * halves with each job the workers help with in time. A busy machine then
 * costs about what one thread costs instead of a collapse; a quiet one
 * keeps both threads.
 *
 * A slice is one 64-bit word: job number (20 bits), front (22), back
 * (22). A compare-and-swap that takes units succeeds only on the current
 * job's word, and the caller does not return (nor touch the job's fields)
 * until every taken unit is done, so the job fields read after a
 * successful take are that job's. */
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
    int self; /* index of this worker's slice */
} worker;

/* One participant's slice, alone in its cache line (64 bytes apart). */
typedef struct slice {
    _Atomic uint64_t w; /* job << 44 | front << 22 | back */
    char pad[56];
} slice;

#define JOB_BITS 20
#define POS_BITS 22
#define POS_MASK ((UINT64_C(1) << POS_BITS) - 1)
#define JOB_MASK ((UINT64_C(1) << JOB_BITS) - 1)

struct eng_pool {
    int n;
    worker *w;
    slice *sl;            /* [n] */
    /* the current job, written before the slices */
    eng_pool_fn fn;       /* a parts job: fn(arg, unit, nth) for each unit */
    eng_pool_range_fn rfn; /* a range job: rfn(arg, begin, end) */
    void *arg;
    int nth;
    /* fewest units taken at once: atomic as a participant reads it before
     * its take, when the caller may already be writing the next job's
     * (that take then fails on the job number) */
    _Atomic uint32_t chunk;
    atomic_uint done;     /* units of the current job finished */
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

/* Take units from slice i of job `job` (the low JOB_BITS of the caller's
 * count): from the front (its owner) or the back (any other). Returns
 * the count taken and sets *begin; 0 when the slice is empty or belongs
 * to another job. */
static uint32_t take(eng_pool *p, int i, uint64_t job, int front, uint32_t *begin)
{
    uint64_t w = atomic_load_explicit(&p->sl[i].w, memory_order_acquire);
    for (;;) {
        uint32_t f = (uint32_t)(w >> POS_BITS & POS_MASK), b = (uint32_t)(w & POS_MASK);
        if (w >> (2 * POS_BITS) != job || f >= b)
            return 0;
        uint32_t left = b - f, chunk = atomic_load_explicit(&p->chunk, memory_order_relaxed);
        uint32_t k = left / 2 > chunk ? left / 2 : chunk < left ? chunk : left;
        uint64_t nw = front ? w + ((uint64_t)k << POS_BITS) : w - k;
        if (atomic_compare_exchange_weak_explicit(&p->sl[i].w, &w, nw, memory_order_acq_rel,
                                                  memory_order_acquire)) {
            *begin = front ? f : b - k;
            return k;
        }
    }
}

/* Run units of the current job as participant `self` until none are left
 * to take: its own slice first, then the others'. `job` is the job this
 * participant was woken for; a later job's slices refuse its takes. */
static _Thread_local int pool_self;

int eng_pool_self(void) { return pool_self; }

static void run_units(eng_pool *p, int self, uint64_t job)
{
    uint32_t begin, k;
    pool_self = self;
    for (int i = 0; i < p->n; i++) {
        int s = (self + i) % p->n;
        while ((k = take(p, s, job, s == self, &begin)) != 0) {
            if (p->rfn)
                p->rfn(p->arg, begin, begin + k);
            else
                for (uint32_t u = begin; u < begin + k; u++)
                    p->fn(p->arg, (int)u, p->nth);
            atomic_fetch_add_explicit(&p->done, k, memory_order_release);
        }
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
        /* the job number goes with gen: bumped together by the caller */
        run_units(p, w->self, (uint64_t)g & JOB_MASK);
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
        p->sl = calloc((size_t)n_threads, sizeof *p->sl);
        if (!p->w || !p->sl) {
            eng_pool_free(p);
            return NULL;
        }
        for (int i = 1; i < n_threads; i++) {
            p->w[i].pool = p;
            p->w[i].self = i;
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
    free(p->sl);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    free(p);
}

int eng_pool_threads(const eng_pool *p) { return p->n; }

void eng_pool_run(eng_pool *p, eng_pool_fn fn, void *arg) { eng_pool_run_parts(p, fn, arg, p->n); }

/* The job (fn or rfn with arg) over units 0..n-1 (n <= POS_MASK). */
static void run_job(eng_pool *p, eng_pool_fn fn, eng_pool_range_fn rfn, void *arg, int nth, uint32_t n,
                    uint32_t chunk)
{
    if (p->n == 1 || p->solo_left) {
        pool_self = 0;
        if (p->solo_left)
            p->solo_left--;
        if (rfn)
            rfn(arg, 0, n);
        else
            for (int i = 0; i < nth; i++)
                fn(arg, i, nth);
        return;
    }
    p->fn = fn;
    p->rfn = rfn;
    p->arg = arg;
    p->nth = nth;
    atomic_store_explicit(&p->chunk, chunk ? chunk : 1, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    /* the job's number is the value gen takes (only this thread bumps gen
     * while the pool lives); the slices are in place before gen moves */
    unsigned g = atomic_load_explicit(&p->gen, memory_order_relaxed) + 1;
    uint64_t job = (uint64_t)g & JOB_MASK;
    for (int i = 0; i < p->n; i++) {
        uint64_t f = (uint64_t)n * (uint64_t)i / (uint64_t)p->n, b = (uint64_t)n * (uint64_t)(i + 1) / (uint64_t)p->n;
        atomic_store_explicit(&p->sl[i].w, job << (2 * POS_BITS) | f << POS_BITS | b, memory_order_release);
    }
    atomic_store(&p->gen, g);
    if (atomic_load(&p->sleepers)) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    int64_t t0 = now_ns();
    run_units(p, 0, job);
    if (atomic_load_explicit(&p->done, memory_order_acquire) >= n) {
        p->solo_next = p->solo_next / 2 > SOLO_MIN ? p->solo_next / 2 : SOLO_MIN;
        return;
    }
    int64_t t1 = now_ns();
    int spins = 0;
    while (atomic_load_explicit(&p->done, memory_order_acquire) < n)
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

void eng_pool_run_parts(eng_pool *p, eng_pool_fn fn, void *arg, int nth)
{
    if (nth < 1)
        nth = 1;
    if (nth > 0xffff)
        nth = 0xffff;
    run_job(p, fn, NULL, arg, nth, (uint32_t)nth, 1);
}

void eng_pool_run_range(eng_pool *p, eng_pool_range_fn fn, void *arg, uint32_t n, uint32_t chunk)
{
    if (n == 0)
        return;
    if (n > ENG_POOL_MAX_UNITS)
        n = ENG_POOL_MAX_UNITS;
    run_job(p, NULL, fn, arg, 0, n, chunk);
}

unsigned long long eng_pool_stalls(const eng_pool *p) { return (unsigned long long)p->stalls; }
