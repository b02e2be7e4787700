/* Worker pool: n threads (the caller counts as one) run one job at a
 * time, each worker getting its index. Built for many small jobs per
 * token: workers spin briefly on a generation counter before sleeping, so
 * a matmul costs little more than its arithmetic. */
#ifndef NIBBLE_ENG_POOL_H
#define NIBBLE_ENG_POOL_H

typedef struct eng_pool eng_pool;

/* fn(arg, ith, nth) runs once for each ith in 0..nth-1. */
typedef void (*eng_pool_fn)(void *arg, int ith, int nth);

/* A pool of n_threads participants (n_threads-1 new threads). NULL on failure. */
eng_pool *eng_pool_new(int n_threads);
void eng_pool_free(eng_pool *p);
int eng_pool_threads(const eng_pool *p);
/* Run fn on every participant and return when all are done. Not
 * reentrant: one caller thread owns the pool. */
void eng_pool_run(eng_pool *p, eng_pool_fn fn, void *arg);

#endif
