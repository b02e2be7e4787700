/* nibble_spec_cost: what one speculative check costs against plain decode
 * steps, on one model at one context depth. A check runs k tokens through
 * the model in one batch with every position's logits (as spec.c does);
 * plain decoding runs them one at a time. Both start from the same cache
 * (rolled back after each try), and each time is the least of many tries,
 * so a busy machine moves it little. When a k-token batch costs about k
 * steps, no drafter can make decoding much faster on that model, however
 * well it guesses: the ceiling is k / (batch / step).
 *
 *   nibble_spec_cost MODEL [DEPTH] [THREADS]
 *
 * DEPTH: tokens in the cache before the check (default 256), from a text
 * that repeats; THREADS: worker threads (default 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model.h"
#include "session.h"
#include "simd.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define LINE "Lily saw a big red ball in the park. She ran to the ball and picked it up. "
#define TRIES 200

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: nibble_spec_cost MODEL [DEPTH] [THREADS]\n");
        return 2;
    }
    int depth = argc > 2 ? atoi(argv[2]) : 256, threads = argc > 3 ? atoi(argv[3]) : 1;
    simd_init();
    eng_model *m = NULL;
    eng_session *s = NULL;
    eng_err e;
    if (eng_model_open(argv[1], &m, &e)) {
        fprintf(stderr, "nibble_spec_cost: %s\n", e.msg);
        return 1;
    }
    eng_sampler_params sp = eng_sampler_defaults();
    sp.temp = 0;
    if (eng_session_new(m, (uint32_t)depth + 64, threads, &sp, &s, &e) || eng_session_feed_text(s, LINE, 1, &e)) {
        fprintf(stderr, "nibble_spec_cost: %s\n", e.msg);
        return 1;
    }
    /* the cache up to DEPTH: the text again and again */
    const int32_t *h = eng_session_tokens(s);
    uint32_t line = eng_session_pos(s) - 1, nv = eng_model_get_info(m)->n_vocab;
    while (eng_session_pos(s) < (uint32_t)depth) {
        int32_t t = h[1 + eng_session_pos(s) % line];
        if (eng_session_feed(s, &t, 1, &e)) {
            fprintf(stderr, "nibble_spec_cost: %s\n", e.msg);
            return 1;
        }
    }
    uint32_t pos = eng_session_pos(s);
    float *logits = malloc((size_t)32 * nv * sizeof *logits);
    int32_t toks[32];
    for (int i = 0; i < 32; i++)
        toks[i] = h[1 + (pos + (uint32_t)i) % line];
    printf("%s, depth %u, %d thread%s; least of %d tries\n", argv[1], pos, threads, threads == 1 ? "" : "s", TRIES);
    printf("%3s %12s %12s %10s %14s\n", "k", "batch us", "k steps us", "step us", "batch / step");
    static const int ks[] = {1, 2, 3, 5, 9, 17, 32};
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
        int k = ks[ki];
        double batch = 1e9, steps = 1e9;
        for (int r = 0; r < TRIES; r++) {
            double t0 = now_s();
            int rc = eng_session_feed_all(s, toks, (uint32_t)k, logits, &e);
            double t1 = now_s();
            eng_session_keep(s, pos, NULL);
            for (int i = 0; !rc && i < k; i++)
                rc = eng_session_feed(s, toks + i, 1, &e);
            double t2 = now_s();
            eng_session_keep(s, pos, NULL);
            if (rc) {
                fprintf(stderr, "nibble_spec_cost: %s\n", e.msg);
                return 1;
            }
            batch = t1 - t0 < batch ? t1 - t0 : batch;
            steps = t2 - t1 < steps ? t2 - t1 : steps;
        }
        printf("%3d %12.1f %12.1f %10.1f %14.2f\n", k, batch * 1e6, steps * 1e6, steps * 1e6 / k, batch / (steps / k));
    }
    free(logits);
    eng_session_free(s);
    eng_model_close(m);
    return 0;
}
