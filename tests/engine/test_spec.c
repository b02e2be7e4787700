/* Speculative decoding (engine/chat/spec.c) on the embedded model:
 * - greedy with a draft model (the embedded model quantized to q8_0 and
 *   q4_0 on load, and a pruned copy that guesses worse), with prompt
 *   lookup, and with both, gives plain greedy's tokens over 500 tokens,
 *   for many prompts, draft lengths and thread counts, and leaves the
 *   session where plain decoding would (flush, then plain steps);
 * - with sampling, the first speculated token's distribution is plain
 *   sampling's (chi-square against the exact distribution), and so is
 *   the second's (chi-square against plain runs), under lookup and under
 *   a draft model that disagrees often, with top-k, top-p, min-p and a
 *   repetition penalty on;
 * - seeded runs repeat; a draft model with another vocabulary is refused
 *   with the first differing id named. */
#include <math.h>

#include "model.h"
#include "prune.h"
#include "session.h"
#include "spec.h"
#include "simd.h"
#include "testutil.h"

static eng_model *load(int qtype)
{
    char buf[4096];
    const char *dir = getenv("NIBBLE_ASSETS");
    snprintf(buf, sizeof buf, "%s/stories260K.gguf", dir ? dir : "assets");
    eng_model_opts mo = {.quantize_type = qtype};
    eng_model *m = NULL;
    eng_err e;
    if (eng_model_open_opts(buf, &mo, &m, &e))
        fprintf(stderr, "%s\n", e.msg);
    return m;
}

#define NGEN 500

static const char *prompts[] = {
    "Once upon a time", "The little dog", "Lily and Tom went to the park. Lily and Tom", "One day, a girl named Sue",
    "The sun was hot. The sun was", "Tim had a red ball. He", "", "Mom said", "A big fish and a small fish. A big fish",
    "They played all day",
};
#define NPROMPTS (int)(sizeof prompts / sizeof prompts[0])

static eng_session *start_ctx(eng_model *m, const char *prompt, const eng_sampler_params *sp, int threads,
                              uint32_t n_ctx)
{
    eng_session *s = NULL;
    eng_err e;
    CHECK(eng_session_new(m, n_ctx, threads, sp, &s, &e) == 0);
    if (s && eng_session_feed_text(s, prompt, 1, &e)) {
        fprintf(stderr, "feed: %s\n", e.msg);
        tu_failures++;
    }
    return s;
}

static eng_session *start(eng_model *m, const char *prompt, const eng_sampler_params *sp, int threads)
{
    return start_ctx(m, prompt, sp, threads, 0);
}

/* plain decoding: up to n tokens (the end token included) */
static int plain(eng_session *s, int n, int32_t *out)
{
    eng_err e;
    int k = 0;
    while (k < n && eng_session_pos(s) < eng_session_ctx_size(s)) {
        int r = eng_session_next(s, &out[k], &e);
        if (r < 0)
            break;
        k++;
        if (r == 1)
            break;
    }
    return k;
}

/* speculative: up to n tokens, asking for at most `chunk` per step */
static int spec(eng_spec *sp, eng_session *s, int n, uint32_t chunk, int32_t *out)
{
    eng_err e;
    int k = 0;
    while (k < n && eng_spec_pos(sp) < eng_session_ctx_size(s)) {
        uint32_t want = (uint32_t)(n - k) < chunk ? (uint32_t)(n - k) : chunk, got = 0;
        int r = eng_spec_next(sp, want, out + k, &got, &e);
        if (r < 0) {
            fprintf(stderr, "spec: %s\n", e.msg);
            tu_failures++;
            break;
        }
        CHECK(got >= 1 && got <= want);
        k += (int)got;
        if (r == 1)
            break;
    }
    return k;
}

static int quick;             /* --quick (the TSan run): fewer prompts and tokens */
static int ngen = NGEN, nprompts = NPROMPTS;
static int32_t ref[NPROMPTS][NGEN]; /* plain greedy of each prompt */
static int nref[NPROMPTS];

static void greedy_refs(eng_model *m)
{
    eng_sampler_params sp = eng_sampler_defaults();
    sp.temp = 0;
    for (int pi = 0; pi < nprompts; pi++) {
        eng_session *s = start(m, prompts[pi], &sp, 1);
        if (s)
            nref[pi] = plain(s, ngen, ref[pi]);
        eng_session_free(s);
    }
}

static void greedy_case(eng_model *m, eng_model *draft, uint32_t lookup, uint32_t dmax, int threads, const char *label,
                        double *accept)
{
    eng_sampler_params sp = eng_sampler_defaults();
    sp.temp = 0;
    uint64_t drafted = 0, accepted = 0;
    for (int pi = 0; pi < nprompts; pi++) {
        int32_t b[NGEN + 40];
        const int32_t *a = ref[pi];
        int na = nref[pi];
        eng_session *s = start(m, prompts[pi], &sp, threads);
        if (!s)
            return;
        eng_spec *x = NULL;
        eng_err e;
        eng_spec_opts o = {.draft = draft, .draft_max = dmax, .lookup = lookup};
        CHECKF(eng_spec_new(s, &o, &x, &e) == 0, "%s", e.msg);
        if (!x) {
            eng_session_free(s);
            return;
        }
        /* chunks of several sizes, so the max cut is exercised */
        int nb = spec(x, s, ngen, pi % 3 == 0 ? 1000 : (uint32_t)(3 + pi), b);
        CHECKF(na == nb, "%s, prompt %d: %d tokens plain, %d speculative", label, pi, na, nb);
        for (int i = 0; i < na && i < nb; i++)
            if (a[i] != b[i]) {
                CHECKF(a[i] == b[i], "%s, prompt %d: token %d is %d plain, %d speculative", label, pi, i, a[i], b[i]);
                break;
            }
        drafted += eng_spec_get_stats(x)->drafted;
        accepted += eng_spec_get_stats(x)->accepted;
        CHECK(eng_spec_get_stats(x)->tokens == (uint64_t)nb);
        eng_spec_free(x);
        eng_session_free(s);
    }
    *accept = drafted ? (double)accepted / (double)drafted : 0;
    printf("%-28s threads %d, draft max %2u: equal to plain greedy, acceptance %.2f over %llu drafted\n", label,
           threads, dmax, *accept, (unsigned long long)drafted);
}

/* After some speculative tokens and a flush, the session continues as
 * plain decoding's would: the next plain tokens are plain greedy's. */
static void flush_case(eng_model *m, eng_model *draft)
{
    eng_sampler_params sp = eng_sampler_defaults();
    sp.temp = 0;
    int32_t a[200], b[200];
    eng_session *s = start(m, prompts[0], &sp, 1);
    int na = plain(s, 200, a);
    eng_session_free(s);
    s = start(m, prompts[0], &sp, 1);
    eng_spec *x = NULL;
    eng_err e;
    eng_spec_opts o = {.draft = draft, .draft_max = 6, .lookup = 2};
    CHECK(eng_spec_new(s, &o, &x, &e) == 0);
    int nb = spec(x, s, 100, 1000, b);
    CHECK(eng_spec_flush(x, &e) == 0);
    /* the cache holds exactly the tokens produced, as after plain decoding */
    CHECK(eng_session_pos(s) == eng_session_pos(s) && memcmp(eng_session_tokens(s) + eng_session_pos(s) - (uint32_t)nb, b,
                                                             (size_t)nb * sizeof *b) == 0);
    nb += plain(s, 100, b + nb);
    CHECK(na == nb);
    CHECK(memcmp(a, b, (size_t)na * sizeof *a) == 0);
    eng_spec_free(x);
    eng_session_free(s);
}

/* Upper tail of chi-square with df degrees at p = 0.001 (Wilson-Hilferty). */
static double chi2_crit(int df)
{
    double z = 3.090, h = 2.0 / (9.0 * df);
    double c = 1 - h + z * sqrt(h);
    return df * c * c * c;
}

#define NRUNS 2000

/* Tokens 1 and 2 of NRUNS seeded runs from prompt: token 0 greedy (so the
 * state the test starts from is fixed), then the sampler sp. With x NULL,
 * plain decoding. */
static void sample_runs(eng_model *m, const char *prompt, const eng_sampler_params *sp, eng_model *draft,
                        uint32_t lookup, uint32_t *c1, uint32_t *c2, uint32_t nv)
{
    eng_sampler_params g = *sp;
    g.temp = 0;
    g.repeat_penalty = 1;
    eng_session *s = start(m, prompt, &g, 1);
    if (!s)
        return;
    uint32_t base = eng_session_pos(s);
    eng_spec *x = NULL;
    eng_err e;
    if (draft || lookup) {
        /* tokens 1 and 2 are the first two checked: two drafted suffice */
        eng_spec_opts o = {.draft = draft, .draft_max = 2, .lookup = lookup};
        CHECKF(eng_spec_new(s, &o, &x, &e) == 0, "%s", e.msg);
    }
    float *keep = malloc(nv * sizeof *keep);
    memcpy(keep, eng_session_logits(s), nv * sizeof *keep);
    for (int run = 0; run < NRUNS; run++) {
        eng_session_keep(s, base, keep);
        if (x)
            eng_spec_drop(x);
        g = *sp;
        g.temp = 0;
        g.repeat_penalty = 1;
        eng_sampler_set(eng_session_sampler(s), &g);
        int32_t t[40];
        int n;
        if (x) {
            uint32_t got;
            CHECK(eng_spec_next(x, 1, t, &got, &e) == 0 && got == 1);
            g = *sp;
            g.seed = 1000 + (uint64_t)run;
            eng_sampler_set(eng_session_sampler(s), &g);
            n = 1;
            while (n < 3) {
                int r = eng_spec_next(x, 3, t + n, &got, &e);
                CHECK(r >= 0);
                n += (int)got;
                if (r != 0)
                    break;
            }
        } else {
            CHECK(eng_session_next(s, &t[0], &e) == 0);
            g = *sp;
            g.seed = 1000 + (uint64_t)run;
            eng_sampler_set(eng_session_sampler(s), &g);
            n = 1 + plain(s, 2, t + 1);
        }
        if (n > 1)
            c1[t[1]]++;
        if (n > 2)
            c2[t[2]]++;
    }
    free(keep);
    /* every run checked drafts: the rule was exercised */
    if (x)
        CHECKF(eng_spec_get_stats(x)->drafted >= NRUNS, "only %llu tokens drafted in %d runs",
               (unsigned long long)eng_spec_get_stats(x)->drafted, NRUNS);
    eng_spec_free(x);
    eng_session_free(s);
}

/* chi-square of counts against expected (both nv long), bins with
 * expected >= 5, the rest pooled; returns the statistic, *df its freedom */
static double chi2_fit(const uint32_t *obs, const double *expct, uint32_t nv, int *df)
{
    double stat = 0, po = 0, pe = 0;
    int bins = 0;
    for (uint32_t i = 0; i < nv; i++) {
        if (expct[i] >= 5) {
            stat += (obs[i] - expct[i]) * (obs[i] - expct[i]) / expct[i];
            bins++;
        } else {
            po += obs[i];
            pe += expct[i];
        }
    }
    if (pe >= 5) {
        stat += (po - pe) * (po - pe) / pe;
        bins++;
    } else if (po > 20) {
        stat += 1e9; /* many draws where almost none were expected */
    }
    *df = bins - 1;
    return stat;
}

/* two samples of equal size: homogeneity, bins with >= 10 together */
static double chi2_two(const uint32_t *a, const uint32_t *b, uint32_t nv, int *df)
{
    double stat = 0, pa = 0, pb = 0;
    int bins = 0;
    for (uint32_t i = 0; i < nv; i++) {
        double s = (double)a[i] + b[i];
        if (s >= 10) {
            stat += ((double)a[i] - b[i]) * ((double)a[i] - b[i]) / s;
            bins++;
        } else {
            pa += a[i];
            pb += b[i];
        }
    }
    if (pa + pb >= 10) {
        stat += (pa - pb) * (pa - pb) / (pa + pb);
        bins++;
    }
    *df = bins - 1;
    return stat;
}

static void sampling_case(eng_model *m, eng_model *draft, uint32_t lookup, const char *prompt,
                          const eng_sampler_params *sp, const char *label)
{
    uint32_t nv = eng_model_get_info(m)->n_vocab;
    uint32_t *c1 = calloc(nv, sizeof *c1), *c2 = calloc(nv, sizeof *c2);
    uint32_t *p1 = calloc(nv, sizeof *p1), *p2 = calloc(nv, sizeof *p2);
    double *ex = calloc(nv, sizeof *ex);
    float *pr = malloc(nv * sizeof *pr);
    /* the exact distribution of token 1: after prompt + greedy token 0 */
    eng_sampler_params g = *sp;
    g.temp = 0;
    g.repeat_penalty = 1;
    eng_session *s = start(m, prompt, &g, 1);
    int32_t t0;
    eng_err e;
    CHECK(eng_session_next(s, &t0, &e) == 0);
    eng_sampler_set(eng_session_sampler(s), sp);
    eng_sampler_probs(eng_session_sampler(s), eng_session_logits(s), eng_session_tokens(s), eng_session_pos(s), pr);
    for (uint32_t i = 0; i < nv; i++)
        ex[i] = pr[i] * (double)NRUNS;
    eng_session_free(s);
    sample_runs(m, prompt, sp, draft, lookup, c1, c2, nv);
    sample_runs(m, prompt, sp, NULL, 0, p1, p2, nv);
    int df1, df2, dfp;
    double x1 = chi2_fit(c1, ex, nv, &df1), x2 = chi2_two(c2, p2, nv, &df2), xp = chi2_fit(p1, ex, nv, &dfp);
    printf("%-34s token 1: chi2 %.1f (df %d, limit %.1f); token 2 vs plain: chi2 %.1f (df %d, limit %.1f)\n", label,
           x1, df1, chi2_crit(df1 > 0 ? df1 : 1), x2, df2, chi2_crit(df2 > 0 ? df2 : 1));
    CHECKF(df1 >= 1 && x1 < chi2_crit(df1), "%s: token 1's distribution is not plain sampling's", label);
    CHECKF(df2 >= 1 && x2 < chi2_crit(df2), "%s: token 2's distribution is not plain sampling's", label);
    /* the plain runs fit too (the test measures what it says) */
    CHECKF(dfp >= 1 && xp < chi2_crit(dfp), "%s: plain sampling does not fit its own distribution", label);
    free(c1); free(c2); free(p1); free(p2); free(ex); free(pr);
}

/* At a context that fills up mid-draft: speculation gives exactly the
 * tokens plain decoding gives before it has no room, not the one more
 * that plain decoding samples at a full cache and drops. Both are called
 * until they refuse (end of turn or "context full"), whatever the
 * position says, and eng_spec_pos agrees with the session's at the end. */
static void ctx_case(eng_model *m, eng_model *draft, uint32_t lookup, uint32_t dmax, uint32_t step, const char *label)
{
    eng_sampler_params sp = eng_sampler_defaults();
    sp.temp = 0;
    const char *prompt = prompts[8]; /* repeats itself: lookup drafts long runs */
    eng_session *s = start(m, prompt, &sp, 1);
    if (!s)
        return;
    uint32_t plen = eng_session_pos(s);
    eng_session_free(s);
    int bad = 0;
    for (uint32_t extra = 1; extra <= 40 && !bad; extra += step) {
        int32_t a[64], b[64];
        int na = 0, nb = 0, r;
        eng_err e;
        s = start_ctx(m, prompt, &sp, 1, plen + extra);
        if (!s)
            return;
        while (na < 50 && (r = eng_session_next(s, &a[na], &e)) >= 0) {
            na++;
            if (r == 1)
                break;
        }
        uint32_t plain_pos = eng_session_pos(s);
        eng_session_free(s);
        s = start_ctx(m, prompt, &sp, 1, plen + extra);
        eng_spec *x = NULL;
        eng_spec_opts o = {.draft = draft, .draft_max = dmax, .lookup = lookup};
        CHECKF(eng_spec_new(s, &o, &x, &e) == 0, "%s", e.msg);
        if (!x) {
            eng_session_free(s);
            return;
        }
        uint32_t got;
        while (nb < 50 && (r = eng_spec_next(x, ENG_SPEC_MAX + 1, b + nb, &got, &e)) >= 0) {
            nb += (int)got;
            if (r == 1)
                break;
        }
        CHECK(eng_spec_flush(x, &e) == 0);
        bad |= na != nb || memcmp(a, b, (size_t)na * sizeof *a) != 0 || eng_session_pos(s) != plain_pos;
        CHECKF(!bad, "%s, context of prompt + %u: %d tokens plain, %d speculative (cache at %u and %u)", label, extra,
               na, nb, plain_pos, eng_session_pos(s));
        eng_spec_free(x);
        eng_session_free(s);
    }
    printf("%-28s full context: equal to plain greedy for contexts of prompt + 1..40 (every %u)\n", label, step);
}

static void repeat_case(eng_model *m, eng_model *draft)
{
    eng_sampler_params sp = eng_sampler_defaults();
    sp.seed = 42;
    int32_t a[120], b[120];
    int n[2];
    for (int k = 0; k < 2; k++) {
        eng_session *s = start(m, prompts[2], &sp, 1);
        eng_spec *x = NULL;
        eng_err e;
        eng_spec_opts o = {.draft = draft, .lookup = 2};
        CHECK(eng_spec_new(s, &o, &x, &e) == 0);
        n[k] = spec(x, s, 120, 1000, k ? b : a);
        eng_spec_free(x);
        eng_session_free(s);
    }
    CHECK(n[0] == n[1] && memcmp(a, b, (size_t)n[0] * sizeof *a) == 0);
}

static void vocab_case(eng_model *m)
{
    char buf[4096];
    if (!tu_shared("models/llama-2-tiny-random.gguf", buf))
        return;
    eng_model *other = NULL;
    eng_err e;
    CHECK(eng_model_open(buf, &other, &e) == 0);
    if (!other)
        return;
    int r = eng_spec_check_vocab(m, other, &e);
    CHECK(r == ENG_EINVAL);
    printf("other vocabulary: %s\n", e.msg);
    CHECK(strstr(e.msg, "token id") != NULL);
    eng_session *s = start(m, "", &(eng_sampler_params){.temp = 0, .top_p = 1, .repeat_penalty = 1}, 1);
    eng_spec *x = NULL;
    eng_spec_opts o = {.draft = other};
    CHECK(eng_spec_new(s, &o, &x, &e) == ENG_EINVAL && x == NULL);
    eng_session_free(s);
    eng_model_close(other);
}

int main(int argc, char **argv)
{
    quick = argc > 1 && !strcmp(argv[1], "--quick");
    if (quick) {
        ngen = 100;
        nprompts = 3;
    }
    simd_init();
    eng_model *m = load(0), *d8 = load(SIMD_Q8_0), *d4 = load(SIMD_Q4_0);
    CHECK(m && d8 && d4);
    if (!m || !d8 || !d4)
        return tu_result("test_spec");
    /* a draft that guesses worse: 70% of each layer's FFN neurons cut */
    /* its own name per mode: ctest -j runs test_spec and test_spec_quick
     * side by side in one folder (and Windows replaces no mapped file) */
    char assets[4096], pruned[64];
    snprintf(pruned, sizeof pruned, "test_spec_pruned%s.gguf", quick ? "_quick" : "");
    const char *dir = getenv("NIBBLE_ASSETS");
    snprintf(assets, sizeof assets, "%s/stories260K.gguf", dir ? dir : "assets");
    eng_prune_opts po = {.neurons = 0.7, .max_per_layer = 0.8, .threads = 1};
    eng_prune_report rep;
    eng_err e;
    eng_model *dp = NULL;
    CHECKF(eng_prune_file(assets, pruned, &po, &rep, &e) == 0, "%s", e.msg);
    CHECKF(eng_model_open(pruned, &dp, &e) == 0, "%s", e.msg);
    double acc;
    greedy_refs(m);
    if (quick) {
        /* the draft model on the target's two-thread pool, rolled back often */
        greedy_case(m, d4, 0, 6, 2, "draft q4_0", &acc);
        greedy_case(m, NULL, 2, 8, 2, "lookup 2", &acc);
        flush_case(m, d4);
        ctx_case(m, NULL, 2, 8, 1, "lookup 2");
        eng_model_close(dp);
        remove(pruned);
        eng_model_close(d4);
        eng_model_close(d8);
        eng_model_close(m);
        return tu_result("test_spec");
    }
    greedy_case(m, d8, 0, 8, 1, "draft q8_0", &acc);
    CHECK(acc > 0.5);
    greedy_case(m, d4, 0, 4, 2, "draft q4_0", &acc);
    greedy_case(m, d4, 0, ENG_SPEC_MAX, 1, "draft q4_0", &acc);
    if (dp) { /* a slow draft that is mostly wrong: the rejection path, on fewer prompts */
        int keep_np = nprompts;
        nprompts = 4;
        greedy_case(m, dp, 0, 3, 2, "draft pruned", &acc);
        nprompts = keep_np;
    }
    greedy_case(m, NULL, 2, 8, 1, "lookup 2", &acc);
    CHECK(acc > 0.2);
    greedy_case(m, NULL, 3, 16, 2, "lookup 3", &acc);
    greedy_case(m, NULL, 1, 8, 1, "lookup 1", &acc);
    greedy_case(m, d4, 2, 8, 1, "lookup 2 then draft q4_0", &acc);
    flush_case(m, d4);
    ctx_case(m, NULL, 2, 8, 1, "lookup 2");
    ctx_case(m, d8, 0, 5, 3, "draft q8_0");
    ctx_case(m, d4, 2, ENG_SPEC_MAX, 4, "lookup 2 then draft q4_0");
    repeat_case(m, d4);
    vocab_case(m);

    eng_sampler_params sp = eng_sampler_defaults(); /* top-k 40, top-p 0.95, min-p 0.05 */
    sp.temp = 1.0f;
    sp.repeat_penalty = 1.3f;
    /* lookup proposes what followed the greedy token 0 in the prompt: one-hot q */
    sampling_case(m, NULL, 1, "the cat sat on the mat. the dog sat on the mat. the", &sp, "lookup 1, temp 1, penalty 1.3");
    eng_sampler_params sp2 = sp;
    sp2.temp = 1.5f;
    sp2.top_k = 0;
    sp2.min_p = 0;
    sp2.top_p = 1;
    sp2.repeat_penalty = 1.0f;
    if (dp)
        sampling_case(m, dp, 0, "Once upon a time, there was a", &sp2, "pruned draft, temp 1.5, no cuts");
    sampling_case(m, dp ? dp : d4, 1, "Lily and Tom went to the park. Lily", &sp, "lookup 1 then draft, defaults");
    eng_model_close(dp);
    remove(pruned);
    eng_model_close(d4);
    eng_model_close(d8);
    eng_model_close(m);
    return tu_result("test_spec");
}
