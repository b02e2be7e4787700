/* The prefill ETA. A token's time grows with its position (its attention
 * reads every key before it), so a rate taken from the first chunks of a
 * long prompt promises too little: fit seconds per token
 * y = a + b * position by least squares over the chunks so far, and sum
 * it over the positions still to come. Header-only: the engine thread
 * uses it, and the test checks it against known costs. */
#ifndef NIBBLE_ENGINE_ETA_H
#define NIBBLE_ENGINE_ETA_H

typedef struct eng_eta {
    double n, sx, sy, sxx, sxy;
} eng_eta;

/* one chunk: its middle position x, its seconds per token y */
static inline void eng_eta_add(eng_eta *f, double x, double y)
{
    f->n += 1;
    f->sx += x;
    f->sy += y;
    f->sxx += x * x;
    f->sxy += x * y;
}

/* seconds for the positions [from, to); 0 before the first chunk */
static inline double eng_eta_left(const eng_eta *f, double from, double to)
{
    if (f->n < 1 || to <= from)
        return 0;
    double mean_x = f->sx / f->n, mean_y = f->sy / f->n, b = 0;
    double var = f->sxx / f->n - mean_x * mean_x;
    if (f->n >= 3 && var > 1e-9)
        b = (f->sxy / f->n - mean_x * mean_y) / var;
    if (b < 0) /* a slow first chunk (cold caches) is not a trend */
        b = 0;
    double a = mean_y - b * mean_x;
    if (a < 0)
        a = 0;
    return (to - from) * (a + b * (from + to - 1) / 2);
}

#endif
