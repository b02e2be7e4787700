/* engine/sampler/sampler.c: each knob's effect on the distribution the
 * sampler draws from, seen through many seeded draws from a known logit
 * vector. Frequencies must match the expected distribution within five
 * standard deviations of a frequency over that many draws, and a token the
 * knob removes must never be drawn. Also: greedy, seeds, eng_sampler_check
 * and eng_sampler_set. */
#include <math.h>

#include "sampler.h"
#include "testutil.h"

#define NV 7
#define DRAWS 40000

/* Logits log(p) for these probabilities, in an order that sorting must
 * fix: best first the ids are 1 (0.30), 3 (0.25), 4 (0.20), 2 (0.10),
 * 6 (0.08), 0 (0.05), 5 (0.02); cumulative 0.30 0.55 0.75 0.85 0.93 0.98 1. */
static const double P[NV] = {0.05, 0.30, 0.10, 0.25, 0.20, 0.02, 0.08};
static float L[NV];

/* every knob off but the temperature */
static eng_sampler_params plain(float temp, uint64_t seed)
{
    eng_sampler_params p = eng_sampler_defaults();
    p.temp = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.seed = seed;
    return p;
}

/* Frequency of each id over DRAWS draws of a new sampler. */
static void draw_freq(const eng_sampler_params *p, const float *logits, uint32_t n, const int32_t *hist,
                      size_t nh, double *freq)
{
    for (uint32_t i = 0; i < n; i++)
        freq[i] = 0;
    eng_sampler *s = eng_sampler_new(n, p);
    CHECK(s != NULL);
    if (!s)
        return;
    for (int d = 0; d < DRAWS; d++) {
        int32_t id = eng_sampler_sample(s, logits, hist, nh);
        CHECKF(id >= 0 && (uint32_t)id < n, "drew id %d of %u", id, n);
        if (id >= 0 && (uint32_t)id < n)
            freq[id] += 1.0 / DRAWS;
    }
    eng_sampler_free(s);
}

/* softmax(l / temp) over the ids with keep[i] set, 0 elsewhere */
static void softmax_kept(const float *l, uint32_t n, double temp, const int *keep, double *out)
{
    double mx = -INFINITY, sum = 0;
    for (uint32_t i = 0; i < n; i++)
        if (keep[i] && l[i] > mx)
            mx = l[i];
    for (uint32_t i = 0; i < n; i++) {
        out[i] = keep[i] ? exp((l[i] - mx) / temp) : 0;
        sum += out[i];
    }
    for (uint32_t i = 0; i < n; i++)
        out[i] /= sum;
}

/* Frequencies against the expected distribution: a removed token never
 * drawn; a kept one within 5 sigma of a binomial frequency over DRAWS
 * (plus one draw for rounding). A fixed seed makes it repeatable; the
 * bound makes it hold for any seed but once in millions. */
static void expect_dist(const char *what, const double *freq, const double *want, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (want[i] == 0) {
            CHECKF(freq[i] == 0, "%s: id %u removed, yet drawn with frequency %.4f", what, i, freq[i]);
            continue;
        }
        double tol = 5 * sqrt(want[i] * (1 - want[i]) / DRAWS) + 1.0 / DRAWS;
        CHECKF(fabs(freq[i] - want[i]) <= tol, "%s: id %u frequency %.4f, want %.4f +- %.4f", what, i, freq[i],
               want[i], tol);
    }
}

/* Draw with p from L and compare with softmax(L / temp) over the ids in
 * kept (a list ended by -1). */
static void check_kept(const char *what, const eng_sampler_params *p, const int *kept)
{
    int keep[NV] = {0};
    for (const int *k = kept; *k >= 0; k++)
        keep[*k] = 1;
    double freq[NV], want[NV];
    softmax_kept(L, NV, p->temp, keep, want);
    draw_freq(p, L, NV, NULL, 0, freq);
    expect_dist(what, freq, want, NV);
}

static int32_t greedy_of(const float *logits, uint32_t n, const int32_t *hist, size_t nh, float penalty,
                         int32_t last_n)
{
    eng_sampler_params p = plain(0, 1);
    p.repeat_penalty = penalty;
    p.repeat_last_n = last_n;
    eng_sampler *s = eng_sampler_new(n, &p);
    CHECK(s != NULL);
    if (!s)
        return -1;
    int32_t id = eng_sampler_sample(s, logits, hist, nh);
    eng_sampler_free(s);
    return id;
}

static void check_greedy(void)
{
    /* temperature 0 is argmax whatever the other knobs and the seed say */
    for (uint64_t seed = 0; seed < 4; seed++) {
        eng_sampler_params p = eng_sampler_defaults();
        p.temp = 0;
        p.seed = seed;
        p.top_k = 3;
        p.top_p = 0.5f;
        p.min_p = 0.5f;
        eng_sampler *s = eng_sampler_new(NV, &p);
        for (int d = 0; d < 50; d++)
            CHECK(eng_sampler_sample(s, L, NULL, 0) == 1);
        eng_sampler_free(s);
    }
    const float tie[4] = {1, 3, 3, 2};
    CHECK(greedy_of(tie, 4, NULL, 0, 1, 0) == 1); /* ties: the lowest id */
    const float nan_first[3] = {NAN, 1, 0};
    CHECK(greedy_of(nan_first, 3, NULL, 0, 1, 0) == 1); /* NaN counts as -inf */
    eng_sampler_params p = plain(-1, 1); /* "0 or less" (check refuses it, sample does not) */
    eng_sampler *s = eng_sampler_new(NV, &p);
    CHECK(eng_sampler_sample(s, L, NULL, 0) == 1);
    eng_sampler_free(s);
}

/* The knobs that cut the candidate list, and temperature, on L: each row
 * says which ids remain; the draws must follow softmax(L / temp) over them. */
#define ALL {0, 1, 2, 3, 4, 5, 6, -1}
static const struct cut {
    const char *what;
    float temp;
    int32_t top_k;
    float top_p, min_p;
    int kept[NV + 1]; /* ended by -1 */
} cuts[] = {
    {"temperature 0.5", 0.5f, 0, 1, 0, ALL},
    {"temperature 1", 1.0f, 0, 1, 0, ALL},
    {"temperature 2", 2.0f, 0, 1, 0, ALL},
    {"temperature 5", 5.0f, 0, 1, 0, ALL},
    {"top-k 1", 1.5f, 1, 1, 0, {1, -1}},
    {"top-k 3", 1.5f, 3, 1, 0, {1, 3, 4, -1}},
    {"top-k n_vocab", 1.5f, NV, 1, 0, ALL},
    {"top-k beyond n_vocab", 1.5f, 1000, 1, 0, ALL},
    /* top-p: the smallest prefix of the sorted ids holding at least p */
    {"top-p 0.2", 1.0f, 0, 0.2f, 0, {1, -1}},
    {"top-p 0.5", 1.0f, 0, 0.5f, 0, {1, 3, -1}},
    {"top-p 0.6", 1.0f, 0, 0.6f, 0, {1, 3, 4, -1}},
    {"top-p 0.96", 1.0f, 0, 0.96f, 0, {1, 3, 4, 2, 6, 0, -1}},
    {"top-p 0.99", 1.0f, 0, 0.99f, 0, ALL},
    /* the mass is measured at temperature 1: at 2 the two best hold only
     * 0.43 of the drawn distribution, yet top-p 0.5 still keeps two */
    {"top-p 0.5 at temperature 2", 2.0f, 0, 0.5f, 0, {1, 3, -1}},
    /* after top-k the mass is that of the kept head: 0.30 0.25 0.20 of 0.75
     * is 0.40 0.33 0.27, so 0.7 needs two where it needs three without */
    {"top-p 0.7", 1.0f, 0, 0.7f, 0, {1, 3, 4, -1}},
    {"top-k 3 then top-p 0.7", 1.0f, 3, 0.7f, 0, {1, 3, -1}},
    /* min-p: below min_p * 0.30 goes */
    {"min-p 0.3", 1.0f, 0, 1, 0.3f, {1, 3, 4, 2, -1}},
    {"min-p 0.5", 1.0f, 0, 1, 0.5f, {1, 3, 4, -1}},
    {"min-p 0.9", 1.0f, 0, 1, 0.9f, {1, -1}},
    {"min-p 0.5 at temperature 3", 3.0f, 0, 1, 0.5f, {1, 3, 4, -1}}, /* at temperature 1 too */
    {"top-p 0.6 then min-p 0.75", 1.0f, 0, 0.6f, 0.75f, {1, 3, -1}}, /* 0.20 < 0.225 */
};

static void check_cuts(void)
{
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        eng_sampler_params p = plain(cuts[i].temp, 100 + i);
        p.top_k = cuts[i].top_k;
        p.top_p = cuts[i].top_p;
        p.min_p = cuts[i].min_p;
        check_kept(cuts[i].what, &p, cuts[i].kept);
    }
}

/* n logits from a fixed LCG, spread over about [-4, 4] */
static void random_logits(float *l, uint32_t n, uint32_t seed)
{
    for (uint32_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        l[i] = (float)((seed >> 8) % 80000) / 10000.0f - 4.0f;
    }
}

/* The k best of a large vocabulary (the heap path of top_sorted): only
 * they are drawn, and each of them is. */
static void check_top_k_large(void)
{
    enum { N = 1000, K = 10 };
    static float l[N];
    random_logits(l, N, 7);
    l[500] = l[501] = 10.0f; /* a tie at the top */
    int best[N] = {0};
    for (int k = 0; k < K; k++) { /* selection: the K largest, ties by lower id */
        int b = -1;
        for (int i = 0; i < N; i++)
            if (!best[i] && (b < 0 || l[i] > l[b]))
                b = i;
        best[b] = 1;
    }
    eng_sampler_params p = plain(100, 5); /* hot: nearly uniform over the kept ten */
    p.top_k = K;
    double freq[N];
    draw_freq(&p, l, N, NULL, 0, freq);
    for (int i = 0; i < N; i++)
        CHECKF(best[i] ? freq[i] > 0 : freq[i] == 0, "top-k %d of %d: id %d (best %d) drawn %.4f", K, N, i,
               best[i], freq[i]);

    /* equal logits: the lowest ids are the best */
    for (int i = 0; i < N; i++)
        l[i] = 0.5f;
    p.top_k = 5;
    draw_freq(&p, l, N, NULL, 0, freq);
    for (int i = 0; i < N; i++)
        CHECKF(i < 5 ? fabs(freq[i] - 0.2) < 0.02 : freq[i] == 0, "top-k 5 of equal logits: id %d drawn %.4f", i,
               freq[i]);
}

/* top-k: ties at the cut keep the lower id, on a small and a large
 * vocabulary */
static void check_top_k(void)
{
    eng_sampler_params p = plain(1.5f, 200);
    const float tie[5] = {0, 2, 1, 1, 1};
    p.top_k = 2;
    double freq[5];
    draw_freq(&p, tie, 5, NULL, 0, freq);
    CHECKF(freq[1] > 0 && freq[2] > 0 && freq[0] + freq[3] + freq[4] == 0, "top-k tie: %.3f %.3f %.3f %.3f %.3f",
           freq[0], freq[1], freq[2], freq[3], freq[4]);
    check_top_k_large();
}

static void check_penalty(void)
{
    /* a positive logit is divided, a negative one multiplied */
    const float pos[3] = {2.0f, 1.5f, 0.5f}, neg[3] = {-1.0f, -1.2f, -3.0f};
    const int32_t h0[1] = {0};
    CHECK(greedy_of(pos, 3, h0, 1, 1.0f, 64) == 0);
    CHECK(greedy_of(pos, 3, h0, 1, 1.5f, 64) == 1);  /* 2 / 1.5 < 1.5 */
    CHECK(greedy_of(neg, 3, h0, 1, 1.5f, 64) == 1);  /* -1 * 1.5 < -1.2 */
    CHECK(greedy_of(neg, 3, h0, 1, 0.5f, 64) == 0);  /* below 1 it favours */
    /* once per distinct token, however often it occurs: 2 / 1.5 > 1.1,
     * but 2 / 1.5^3 would not be */
    const float once[2] = {2.0f, 1.1f};
    const int32_t h000[3] = {0, 0, 0};
    CHECK(greedy_of(once, 2, h000, 3, 1.5f, 64) == 0);
    /* only the last repeat_last_n tokens of the history count */
    const int32_t h022[3] = {0, 2, 2};
    CHECK(greedy_of(pos, 3, h022, 3, 1.5f, 2) == 0);
    CHECK(greedy_of(pos, 3, h022, 3, 1.5f, 3) == 1);
    CHECK(greedy_of(pos, 3, h022, 3, 1.5f, 0) == 0); /* window 0: off */
    CHECK(greedy_of(pos, 3, NULL, 3, 1.5f, 3) == 0); /* no history */
    /* ids outside the vocabulary are ignored (ASan would see a stray write) */
    const int32_t bad[4] = {-1, 3, 1000, INT32_MIN};
    CHECK(greedy_of(pos, 3, bad, 4, 1.5f, 64) == 0);
    /* a penalised token that stays best comes back with its own id */
    const float big[3] = {5.0f, 0.0f, 0.0f};
    CHECK(greedy_of(big, 3, h0, 1, 1.2f, 64) == 0);

    /* the distribution drawn from: softmax of the penalised logits; the
     * caller's logits are left as they were */
    float l[4] = {1.0f, 0.5f, -0.5f, 0.0f};
    const float l0[4] = {1.0f, 0.5f, -0.5f, 0.0f};
    const int32_t h[5] = {3, 0, 2, 0, 2}; /* a window of 4 leaves 3 out */
    static const int all4[4] = {1, 1, 1, 1};
    eng_sampler_params p = plain(1.0f, 500);
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 4;
    double freq[4], want[4];
    const float pen[4] = {0.5f, 0.5f, -1.0f, 0.0f}; /* 1 / 2, -0.5 * 2; 3 is outside the window */
    softmax_kept(pen, 4, 1.0, all4, want);
    draw_freq(&p, l, 4, h, 5, freq);
    expect_dist("repeat penalty 2 over 4", freq, want, 4);
    CHECK(memcmp(l, l0, sizeof l) == 0);
    p.repeat_penalty = 0.5f;
    const float boost[4] = {2.0f, 0.5f, -0.25f, 0.0f};
    softmax_kept(boost, 4, 1.0, all4, want);
    draw_freq(&p, l, 4, h, 5, freq);
    expect_dist("repeat penalty 0.5 over 4", freq, want, 4);
}

static void draws(eng_sampler *s, int n, int32_t *out)
{
    for (int i = 0; i < n; i++)
        out[i] = eng_sampler_sample(s, L, NULL, 0);
}

/* n draws of a new sampler with p */
static void fresh_draws(const eng_sampler_params *p, int n, int32_t *out)
{
    eng_sampler *s = eng_sampler_new(NV, p);
    draws(s, n, out);
    eng_sampler_free(s);
}

static void check_seeds(void)
{
    int32_t a[200], b[200];
    for (uint64_t seed = 0; seed < 3; seed++) {
        eng_sampler_params p = plain(1.0f, seed);
        fresh_draws(&p, 200, a);
        fresh_draws(&p, 200, b);
        CHECKF(memcmp(a, b, sizeof a) == 0, "seed %llu: two streams differ", (unsigned long long)seed);
        p.seed = seed + 1;
        fresh_draws(&p, 200, b);
        CHECKF(memcmp(a, b, sizeof a) != 0, "seeds %llu and %llu give the same stream", (unsigned long long)seed,
               (unsigned long long)seed + 1);
    }
}

static void check_params(void)
{
    eng_sampler_params d = eng_sampler_defaults();
    CHECK(eng_sampler_check(&d) == NULL);
    eng_sampler_params ok = d;
    ok.temp = 0;
    ok.top_k = 0;
    ok.top_p = 1;
    ok.min_p = 0;
    ok.repeat_penalty = 10;
    ok.repeat_last_n = 0;
    CHECK(eng_sampler_check(&ok) == NULL);
    ok.temp = 100;
    ok.repeat_penalty = 0.01f;
    CHECK(eng_sampler_check(&ok) == NULL);

    /* each bad value is refused with a message naming its field */
#define BAD(name, field, value)                                                                          \
    do {                                                                                                 \
        eng_sampler_params q = d;                                                                        \
        q.field = value;                                                                                 \
        const char *m = eng_sampler_check(&q);                                                           \
        CHECKF(m && strstr(m, name), "%s = %g: %s", #field, (double)(value), m ? m : "accepted");        \
    } while (0)
    BAD("temperature", temp, -0.01f);
    BAD("temperature", temp, 100.5f);
    BAD("temperature", temp, NAN);
    BAD("top-k", top_k, -1);
    BAD("top-p", top_p, 0.0f);
    BAD("top-p", top_p, 1.01f);
    BAD("top-p", top_p, NAN);
    BAD("min-p", min_p, -0.01f);
    BAD("min-p", min_p, 1.0f);
    BAD("min-p", min_p, NAN);
    BAD("repeat penalty", repeat_penalty, 0.0f);
    BAD("repeat penalty", repeat_penalty, 10.5f);
    BAD("repeat penalty", repeat_penalty, NAN);
    BAD("repeat window", repeat_last_n, -1);
#undef BAD
}

static void check_set(void)
{
    int32_t a[20], b[20], c[10];
    eng_sampler_params p = plain(1.0f, 7);

    /* same seed: the stream goes on where it was */
    eng_sampler *s = eng_sampler_new(NV, &p);
    fresh_draws(&p, 20, b);
    draws(s, 10, a);
    eng_sampler_set(s, &p);
    draws(s, 10, a + 10);
    CHECK(memcmp(a, b, sizeof a) == 0);

    /* a new seed: the new seed's stream from its start */
    eng_sampler_params q = plain(1.0f, 8);
    eng_sampler_set(s, &q);
    CHECK(eng_sampler_get(s)->seed == 8);
    draws(s, 10, a);
    fresh_draws(&q, 10, c);
    CHECK(memcmp(a, c, sizeof c) == 0);
    /* and back: seed 7 from its start, not from where it was left */
    eng_sampler_set(s, &p);
    draws(s, 10, a);
    CHECK(memcmp(a, b, sizeof c) == 0);

    /* other knobs act at the next draw, without a reseed */
    q = p;
    q.temp = 0;
    eng_sampler_set(s, &q);
    CHECK(eng_sampler_get(s)->temp == 0);
    CHECK(eng_sampler_sample(s, L, NULL, 0) == 1);
    q.temp = 1.0f;
    q.top_k = 1;
    eng_sampler_set(s, &q);
    for (int i = 0; i < 20; i++)
        CHECK(eng_sampler_sample(s, L, NULL, 0) == 1);
    q.top_k = 0;
    q.min_p = 0.9f;
    eng_sampler_set(s, &q);
    for (int i = 0; i < 20; i++)
        CHECK(eng_sampler_sample(s, L, NULL, 0) == 1);
    /* the penalty: 1 drops from log 0.30 to 10 log 0.30, below 3's log 0.25 */
    q.temp = 0;
    q.min_p = 0;
    q.repeat_penalty = 10;
    eng_sampler_set(s, &q);
    const int32_t h1[1] = {1};
    CHECK(eng_sampler_sample(s, L, h1, 1) == 3);
    eng_sampler_free(s);
}

/* Infinite logits: +inf is certain under sampling as under greedy (the
 * softmax would compute inf - inf); all -inf (or NaN) gives the best id,
 * the lowest, not whichever the draw ends on. */
static void check_infinite(void)
{
    const float plus[4] = {0, INFINITY, 1, 0};
    const float none[4] = {-INFINITY, NAN, -INFINITY, -INFINITY};
    for (int with_cuts = 0; with_cuts < 2; with_cuts++) {
        eng_sampler_params p = plain(1.0f, 7);
        if (with_cuts) {
            p.top_k = 3;
            p.top_p = 0.9f;
            p.min_p = 0.05f;
        }
        eng_sampler *s = eng_sampler_new(4, &p);
        CHECK(s != NULL);
        if (!s)
            return;
        int plus_ok = 1, none_ok = 1;
        for (int i = 0; i < 200; i++) {
            plus_ok &= eng_sampler_sample(s, plus, NULL, 0) == 1;
            none_ok &= eng_sampler_sample(s, none, NULL, 0) == 0;
        }
        CHECKF(plus_ok, "a +inf logit is not always drawn (cuts %d)", with_cuts);
        CHECKF(none_ok, "all -inf/NaN logits do not give id 0 (cuts %d)", with_cuts);
        eng_sampler_free(s);
    }
}

int main(void)
{
    for (int i = 0; i < NV; i++)
        L[i] = (float)log(P[i]);
    check_greedy();
    check_cuts();
    check_top_k();
    check_penalty();
    check_seeds();
    check_params();
    check_set();
    check_infinite();
    return tu_result("test_sampler");
}
