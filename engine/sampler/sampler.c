#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct cand {
    float logit;
    int32_t id;
} cand;

struct eng_sampler {
    eng_sampler_params p;
    uint32_t n_vocab;
    uint64_t rng;
    cand *c;     /* candidates, n_vocab */
    float *prob; /* probabilities of the kept candidates */
};

eng_sampler_params eng_sampler_defaults(void)
{
    eng_sampler_params p = {0.8f, 40, 0.95f, 0.05f, 1.0f, 64, 0};
    return p;
}

const char *eng_sampler_check(const eng_sampler_params *p)
{
    if (!(p->temp >= 0 && p->temp <= 100)) return "temperature must be in 0..100";
    if (p->top_k < 0) return "top-k must be 0 (off) or more";
    if (!(p->top_p > 0 && p->top_p <= 1)) return "top-p must be in (0, 1]";
    if (!(p->min_p >= 0 && p->min_p < 1)) return "min-p must be in [0, 1)";
    if (!(p->repeat_penalty > 0 && p->repeat_penalty <= 10)) return "repeat penalty must be in (0, 10]";
    if (p->repeat_last_n < 0) return "repeat window must be 0 or more";
    return NULL;
}

/* splitmix64: small, fast, good enough for sampling, same on every OS */
static uint64_t next64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s) { return (double)(next64(s) >> 11) * (1.0 / 9007199254740992.0); }

eng_sampler *eng_sampler_new(uint32_t n_vocab, const eng_sampler_params *p)
{
    eng_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->n_vocab = n_vocab;
    s->c = malloc(n_vocab * sizeof *s->c);
    s->prob = malloc(n_vocab * sizeof *s->prob);
    if (!s->c || !s->prob) {
        eng_sampler_free(s);
        return NULL;
    }
    s->p = *p;
    s->rng = p->seed;
    return s;
}

void eng_sampler_free(eng_sampler *s)
{
    if (!s)
        return;
    free(s->c);
    free(s->prob);
    free(s);
}

void eng_sampler_set(eng_sampler *s, const eng_sampler_params *p)
{
    if (p->seed != s->p.seed)
        s->rng = p->seed;
    s->p = *p;
}

const eng_sampler_params *eng_sampler_get(const eng_sampler *s) { return &s->p; }

static int by_logit_desc(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit < y->logit ? 1 : -1;
    return x->id - y->id; /* ties: lower id first, so results are stable */
}

/* a worse than b in the candidate order (lower logit, or same logit and higher id) */
static int worse(const cand *a, const cand *b) { return by_logit_desc(a, b) > 0; }

static void sift_down(cand *h, uint32_t k, uint32_t i)
{
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < k && worse(&h[l], &h[m])) m = l;
        if (r < k && worse(&h[r], &h[m])) m = r;
        if (m == i) return;
        cand t = h[i]; h[i] = h[m]; h[m] = t;
        i = m;
    }
}

/* Move the k best candidates to the front, sorted best first (k <= n):
 * a heap of the k best so far, whose root is the worst of them. */
static void top_sorted(cand *c, uint32_t n, uint32_t k)
{
    if (k < n) {
        for (uint32_t i = k / 2; i-- > 0;)
            sift_down(c, k, i);
        for (uint32_t i = k; i < n; i++)
            if (worse(&c[0], &c[i])) {
                c[0] = c[i];
                sift_down(c, k, 0);
            }
    }
    qsort(c, k, sizeof *c, by_logit_desc);
}

/* The sampler chain up to the draw: the kept candidates are s->c[0..keep)
 * with unnormalised weights s->prob[0..keep) summing to *sum. Greedy
 * (temp <= 0) and a non-finite top logit keep one candidate, weight 1. */
static uint32_t kept(eng_sampler *s, const float *logits, const int32_t *history, size_t n_hist, double *sum_out)
{
    const eng_sampler_params *p = &s->p;
    uint32_t n = s->n_vocab;
    for (uint32_t i = 0; i < n; i++) {
        s->c[i].logit = isnan(logits[i]) ? -INFINITY : logits[i];
        s->c[i].id = (int32_t)i;
    }
    if (p->repeat_penalty != 1.0f && p->repeat_last_n > 0 && history) {
        size_t from = n_hist > (size_t)p->repeat_last_n ? n_hist - (size_t)p->repeat_last_n : 0;
        /* each distinct recent token once: mark by negating its id */
        for (size_t h = from; h < n_hist; h++) {
            int32_t id = history[h];
            if (id < 0 || (uint32_t)id >= n || s->c[id].id < 0)
                continue;
            float *l = &s->c[id].logit;
            *l = *l > 0 ? *l / p->repeat_penalty : *l * p->repeat_penalty;
            s->c[id].id = -id - 1;
        }
        for (uint32_t i = 0; i < n; i++)
            if (s->c[i].id < 0)
                s->c[i].id = -s->c[i].id - 1;
    }
    *sum_out = 1;
    if (p->temp <= 0) {
        uint32_t best = 0;
        for (uint32_t i = 1; i < n; i++)
            if (s->c[i].logit > s->c[best].logit)
                best = i;
        s->c[0] = s->c[best];
        s->prob[0] = 1;
        return 1;
    }
    uint32_t k = p->top_k > 0 && (uint32_t)p->top_k < n ? (uint32_t)p->top_k : n;
    top_sorted(s->c, n, k);
    /* softmax at temperature 1 for the top-p / min-p cuts, over the kept head */
    float mx = s->c[0].logit;
    /* +inf: that token is certain (logit - mx would be inf - inf, NaN);
     * -inf: every token is impossible, and the best is as good as any */
    if (!isfinite(mx)) {
        s->prob[0] = 1;
        return 1;
    }
    double sum = 0;
    for (uint32_t i = 0; i < k; i++) {
        s->prob[i] = expf(s->c[i].logit - mx);
        sum += s->prob[i];
    }
    uint32_t keep = k;
    if (p->top_p < 1.0f) {
        double cum = 0;
        for (uint32_t i = 0; i < k; i++) {
            cum += s->prob[i] / sum;
            if (cum >= p->top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    if (p->min_p > 0) {
        /* the top candidate has probability prob[0]/sum; cut below min_p of it */
        for (uint32_t i = 1; i < keep; i++)
            if (s->prob[i] < p->min_p * s->prob[0]) {
                keep = i;
                break;
            }
    }
    /* temperature */
    sum = 0;
    for (uint32_t i = 0; i < keep; i++) {
        s->prob[i] = expf((s->c[i].logit - mx) / p->temp);
        sum += s->prob[i];
    }
    *sum_out = sum;
    return keep;
}

int32_t eng_sampler_sample(eng_sampler *s, const float *logits, const int32_t *history, size_t n_hist)
{
    double sum;
    uint32_t keep = kept(s, logits, history, n_hist, &sum);
    /* greedy and a certain token take no draw (a single kept candidate
     * otherwise still does, so seeded streams stay as they were) */
    if (s->p.temp <= 0 || !isfinite(s->c[0].logit))
        return s->c[0].id;
    double r = uniform(&s->rng) * sum, acc = 0;
    for (uint32_t i = 0; i < keep; i++) {
        acc += s->prob[i];
        if (r < acc)
            return s->c[i].id;
    }
    return s->c[keep - 1].id;
}

void eng_sampler_probs(eng_sampler *s, const float *logits, const int32_t *history, size_t n_hist, float *probs)
{
    double sum;
    uint32_t keep = kept(s, logits, history, n_hist, &sum);
    memset(probs, 0, s->n_vocab * sizeof *probs);
    for (uint32_t i = 0; i < keep; i++)
        probs[s->c[i].id] = (float)(s->prob[i] / sum);
}

double eng_sampler_uniform(eng_sampler *s) { return uniform(&s->rng); }

int32_t eng_sampler_draw(eng_sampler *s, const float *w)
{
    double sum = 0;
    int32_t last = -1;
    for (uint32_t i = 0; i < s->n_vocab; i++)
        if (w[i] > 0) {
            sum += w[i];
            last = (int32_t)i;
        }
    if (last < 0)
        return -1;
    double r = uniform(&s->rng) * sum, acc = 0;
    for (uint32_t i = 0; i < s->n_vocab; i++)
        if (w[i] > 0) {
            acc += w[i];
            if (r < acc)
                return (int32_t)i;
        }
    return last;
}
