/* Worker pool: n threads (the caller counts as one) run one job at a
 * time, split into parts or ranges that the participants take as they go
 * (the caller runs any part no worker has taken, so a descheduled worker
 * does not stall it). Built for many small jobs per token: workers spin
 * briefly on a generation counter before sleeping, so a matmul costs
 * little more than its arithmetic. When a worker that lost its core holds
 * up a job, the caller runs the following jobs alone for a while (see
 * pool.c), so a busy machine does not make more threads slower than one. */
#ifndef NIBBLE_ENG_POOL_H
#define NIBBLE_ENG_POOL_H

#include <stdint.h>

typedef struct eng_pool eng_pool;

/* fn(arg, ith, nth) runs once for each ith in 0..nth-1 (nth = the pool's
 * thread count), never twice at once for one ith, on whichever thread
 * claimed it. */
typedef void (*eng_pool_fn)(void *arg, int ith, int nth);

/* A pool of n_threads participants (n_threads-1 new threads). NULL on failure. */
eng_pool *eng_pool_new(int n_threads);
void eng_pool_free(eng_pool *p);
int eng_pool_threads(const eng_pool *p);
/* Run fn on every participant and return when all are done. Not
 * reentrant: one caller thread owns the pool. */
void eng_pool_run(eng_pool *p, eng_pool_fn fn, void *arg);
/* The same with nth parts (1..65535) instead of one per thread, for a job
 * whose parts share no per-thread state: smaller parts balance better
 * when a thread loses its core for a while. */
void eng_pool_run_parts(eng_pool *p, eng_pool_fn fn, void *arg, int nth);
/* fn(arg, begin, end) on ranges of units that together cover 0..n-1 once
 * (n at most ENG_POOL_MAX_UNITS; more is cut to that): each participant
 * streams through its own contiguous share first, taking bigger pieces
 * first and at least `chunk` units at a time (0 counts as 1), then helps
 * with the others' leftovers. For a job whose cost is spread evenly over
 * the units and that gains from contiguous work (a matmul's rows). */
#define ENG_POOL_MAX_UNITS 4000000u
typedef void (*eng_pool_range_fn)(void *arg, uint32_t begin, uint32_t end);
void eng_pool_run_range(eng_pool *p, eng_pool_range_fn fn, void *arg, uint32_t n, uint32_t chunk);
/* The participant running the current piece of a job (0 the caller,
 * 1..n-1 the workers), for a range job's per-thread scratch: a range fn
 * is never run twice at once by one participant. */
int eng_pool_self(void);
/* Jobs so far where the caller waited for a descheduled worker. */
unsigned long long eng_pool_stalls(const eng_pool *p);

#endif
