/* engine/engine: the engine thread driven only through its queues, on the
 * embedded stories model: a bad file gives an error and the engine goes
 * on; a reply streams; a kernel switch and regenerate at temperature 0
 * repeats it exactly; a sampler change mid-reply is marked; STOP ends a
 * reply within a token and keeps its text; a small context shifts out old
 * turns and says so (by its notice code). Events carry the state only in
 * LOADED, STATE and REPLY, and errors say by code which command failed
 * and why. Run under ThreadSanitizer too (-DNIBBLE_TSAN=ON). */
#include <math.h>

#include "engine.h"
#include "eta.h"
#include "simd.h"
#include "testutil.h"
#include "utf8.h"

static eng_engine *en;
static int misplaced_state; /* events with state missing where it belongs, or present where not */

typedef struct got {
    char text[16384];
    size_t len;
    int n[ENG_EV_REPLY + 1]; /* events taken, by type */
    int done_reason, notices_ctx, notices_tmpl, states;
    int reply_open;      /* a REPLY came and none of its tokens yet */
    int shift_late;      /* context notices between a REPLY and its first token
                          * (the turns dropped for it are said before it) */
    double load_frac;    /* largest load-progress fraction seen */
    uint32_t prefill_ctx; /* largest context fill a prefill progress reported */
    double prefill_tps;  /* and its prompt rate then */
    int prefill_prog;    /* prefill progress events */
    uint32_t mark_at;
    char last_error[512];
    int last_err_cmd, last_err;
    eng_state st;        /* from the last LOADED, STATE or REPLY */
    float accept;        /* DONE's speculative acceptance (-1: off) */
} got;

/* Take events until want (a type) arrives or the time is up. Tokens are
 * collected into g. stop_after: send STOP once that many tokens came. */
static int run_until(got *g, enum eng_ev_type want, int timeout_ms, int stop_after, int set_after)
{
    int tokens = 0;
    for (int waited = 0; waited < timeout_ms;) {
        eng_event ev;
        int rc = eng_engine_poll(en, &ev, 50);
        if (rc == ENG_EAGAIN) {
            waited += 50;
            continue;
        }
        if (rc)
            return 0;
        enum eng_ev_type t = ev.type;
        if (t >= ENG_EV_LOADED && t <= ENG_EV_REPLY)
            g->n[t]++;
        int wants_state = t == ENG_EV_LOADED || t == ENG_EV_STATE || t == ENG_EV_REPLY;
        if (wants_state != (ev.state != NULL))
            misplaced_state++;
        if (wants_state && ev.state) {
            g->st = *ev.state;
            g->states++;
        }
        if (t == ENG_EV_REPLY)
            g->reply_open = 1;
        if (t == ENG_EV_TOKEN || t == ENG_EV_DONE)
            g->reply_open = 0;
        switch (t) {
        case ENG_EV_TOKEN:
            CHECK(ev.text && eng_utf8_valid(ev.text, strlen(ev.text)));
            if (ev.text && g->len + strlen(ev.text) < sizeof g->text) {
                memcpy(g->text + g->len, ev.text, strlen(ev.text));
                g->len += strlen(ev.text);
                g->text[g->len] = 0;
            }
            tokens++;
            if (tokens == set_after) {
                eng_cmd c = {.type = ENG_CMD_SET_SAMPLER};
                c.gen.sp = eng_sampler_defaults();
                c.gen.sp.temp = 0.5f;
                c.gen.max_tokens = 0;
                CHECK(eng_engine_send(en, &c) == 0);
            }
            if (tokens == stop_after)
                CHECK(eng_engine_send_simple(en, ENG_CMD_STOP, NULL, 0) == 0);
            break;
        case ENG_EV_DONE:
            g->done_reason = ev.code;
            g->accept = ev.stats.accept;
            break;
        case ENG_EV_ERROR:
            snprintf(g->last_error, sizeof g->last_error, "%s", ev.text ? ev.text : "");
            g->last_err_cmd = ev.code;
            g->last_err = ev.err;
            break;
        case ENG_EV_NOTICE:
            CHECK(ev.text && ev.text[0]); /* the code decides; the text is for display */
            if (ev.code == ENG_NOTICE_CONTEXT_SHIFT) {
                g->notices_ctx++;
                g->shift_late += g->reply_open;
            }
            else if (ev.code == ENG_NOTICE_TMPL_NONE || ev.code == ENG_NOTICE_TMPL_UNRECOGNISED)
                g->notices_tmpl++;
            break;
        case ENG_EV_MARK:
            g->mark_at = ev.mark_token;
            break;
        case ENG_EV_PROGRESS:
            if (ev.progress.stage == ENG_STAGE_LOAD && ev.progress.fraction > g->load_frac)
                g->load_frac = ev.progress.fraction;
            if (ev.progress.stage == ENG_STAGE_PREFILL) {
                g->prefill_prog++;
                CHECK(ev.progress.ctx_used >= g->prefill_ctx && ev.progress.eta_s >= 0);
                g->prefill_ctx = ev.progress.ctx_used;
                g->prefill_tps = ev.progress.tps;
            }
            break;
        default:
            break;
        }
        eng_event_free(&ev);
        if (t == want)
            return 1;
    }
    return 0;
}

static void set_gen(float temp, int max_tokens)
{
    eng_cmd c = {.type = ENG_CMD_SET_SAMPLER};
    c.gen.sp = eng_sampler_defaults();
    c.gen.sp.temp = temp;
    c.gen.sp.seed = 7;
    c.gen.max_tokens = max_tokens;
    CHECK(eng_engine_send(en, &c) == 0);
}

static void load(const char *path, int n_ctx, int threads)
{
    eng_cmd c = {.type = ENG_CMD_LOAD, .n = n_ctx, .n2 = threads};
    c.text = strdup(path);
    snprintf(c.name, sizeof c.name, "auto");
    CHECK(eng_engine_send(en, &c) == 0);
}

/* The prefill ETA against a known cost: a token at position x takes
 * 1 ms + 2 us * x (attention grows with the keys before it). From the
 * first tenth of a 3000-token prompt the estimate of the rest is within
 * 2%, where the rate so far (the old estimate) says well under two thirds. */
static void check_eta(void)
{
    eng_eta f = {0};
    double a = 1e-3, b = 2e-6, spent = 0;
    int x = 0;
    for (; x < 320; x += 32) {
        eng_eta_add(&f, x + 16, a + b * (x + 16));
        spent += 32 * (a + b * (x + 16));
    }
    double exact = 0;
    for (int p = x; p < 3000; p++)
        exact += a + b * p;
    double est = eng_eta_left(&f, x, 3000), old = spent / x * (3000 - x);
    CHECKF(fabs(est - exact) < 0.02 * exact, "ETA %.3f s, exact %.3f s", est, exact);
    CHECKF(old < 0.67 * exact, "the rate so far says %.3f s of %.3f s", old, exact);
    /* a slow first chunk (cold caches) is no trend: never a negative slope */
    eng_eta g = {0};
    eng_eta_add(&g, 16, 5 * a);
    for (int c = 48; c < 320; c += 32)
        eng_eta_add(&g, c, a);
    double e2 = eng_eta_left(&g, 320, 3000);
    CHECKF(e2 >= a * (3000 - 320) * 0.99, "ETA %.3f s with a cold first chunk", e2);
    CHECK(eng_eta_left(&(eng_eta){0}, 0, 100) == 0); /* nothing measured yet */
}

int main(void)
{
    char model[4096];
    if (!tu_asset("stories260K.gguf", model))
        return TU_SKIP;
    check_eta();
    simd_init();
    eng_err e;
    CHECK(eng_engine_start(&en, &e) == 0);
    int long_wait = 60000;

    /* no model yet: a message is refused, not crashed on */
    got g0 = {0};
    CHECK(eng_engine_send_simple(en, ENG_CMD_SUBMIT, "hello", 0) == 0);
    CHECK(run_until(&g0, ENG_EV_ERROR, long_wait, 0, 0));
    CHECK(g0.last_err_cmd == ENG_CMD_SUBMIT && g0.last_err == ENG_ENOMODEL);

    /* a file that is not a model */
    got g1 = {0};
    load("/nonexistent/model.gguf", 0, 1);
    CHECK(run_until(&g1, ENG_EV_ERROR, long_wait, 0, 0));
    CHECK(g1.n[ENG_EV_LOADED] == 0 && g1.last_error[0]);
    CHECK(g1.last_err_cmd == ENG_CMD_LOAD && g1.last_err == ENG_EIO);

    got g2 = {0};
    load(model, 0, 1);
    CHECK(run_until(&g2, ENG_EV_LOADED, long_wait, 0, 0));
    CHECKF(g2.load_frac == 1.0, "load progress reached %g", g2.load_frac); /* the bar ends full */
    CHECK(g2.n[ENG_EV_LOADED] == 1 && g2.states == 1 && !strcmp(g2.st.model_path, model) && g2.st.ctx_size > 0);
    CHECK(g2.st.gen.max_tokens == eng_gen_defaults().max_tokens); /* the engine starts at the defaults */
    CHECK(g2.st.gen.sp.temp == eng_sampler_defaults().temp && g2.st.gen.sp.top_k == eng_sampler_defaults().top_k);

    /* a reply at temperature 0 */
    set_gen(0, 48);
    got a = {0};
    CHECK(eng_engine_send_simple(en, ENG_CMD_SUBMIT, "Once upon a time", 0) == 0);
    CHECK(run_until(&a, ENG_EV_DONE, long_wait, 0, 0));
    CHECK(a.n[ENG_EV_REPLY] == 1 && a.len > 20 && a.n[ENG_EV_ERROR] == 0);
    CHECK(a.st.gen.sp.temp == 0 && a.st.gen.max_tokens == 48 && a.st.gen.sp.seed == 7); /* REPLY's provenance */
    CHECK(a.done_reason == ENG_DONE_MAX_TOKENS || a.done_reason == ENG_DONE_EOG);

    /* defect 8 of the chat screen: a long prompt's progress says how full
     * the context is and the prompt rate so far, before the first token */
    {
        char longp[4000] = "";
        for (int i = 0; i < 30; i++)
            strcat(longp, " The little dog ran to the park and played.");
        got p = {0};
        set_gen(0, 1);
        CHECK(eng_engine_send_simple(en, ENG_CMD_SUBMIT, longp, 0) == 0);
        CHECK(run_until(&p, ENG_EV_DONE, long_wait, 0, 0));
        CHECKF(p.prefill_prog >= 1 && p.prefill_ctx > 300 && p.prefill_tps > 0, "%d events, ctx %u, %g tok/s",
               p.prefill_prog, p.prefill_ctx, p.prefill_tps);
        CHECK(eng_engine_send_simple(en, ENG_CMD_RESET, NULL, 0) == 0);
        set_gen(0, 48);
        CHECK(eng_engine_send_simple(en, ENG_CMD_SUBMIT, "Once upon a time", 0) == 0);
        got again = {0};
        CHECK(run_until(&again, ENG_EV_DONE, long_wait, 0, 0));
        CHECK(!strcmp(again.text, a.text));
    }

    /* another kernel set (scalar runs everywhere), two threads, regenerate */
    CHECK(eng_engine_send_simple(en, ENG_CMD_SET_KERNEL, "scalar", 0) == 0);
    CHECK(eng_engine_send_simple(en, ENG_CMD_SET_THREADS, NULL, 2) == 0);
    got b = {0};
    CHECK(eng_engine_send_simple(en, ENG_CMD_REGENERATE, NULL, 0) == 0);
    CHECK(run_until(&b, ENG_EV_DONE, long_wait, 0, 0));
    CHECKF(b.len == a.len && !strcmp(a.text, b.text), "\n first: %s\n regen: %s", a.text, b.text);
    CHECK(!strcmp(b.st.kernel, "scalar") && b.st.threads == 2 && b.states == 3); /* STATE, STATE, REPLY */
    CHECK(eng_engine_send_simple(en, ENG_CMD_SET_KERNEL, "no-such-set", 0) == 0);
    got bk = {0};
    CHECK(run_until(&bk, ENG_EV_ERROR, long_wait, 0, 0));
    CHECK(bk.last_err_cmd == ENG_CMD_SET_KERNEL && bk.last_err == ENG_EINVAL);
    CHECK(strstr(bk.last_error, "no-such-set")); /* the message names what was asked */

    /* speculative decoding (issue 23): prompt lookup, then the model as
     * its own draft, give the same greedy reply; REPLY's state says how
     * it was drafted, DONE the share of drafts kept; a bad draft file is
     * an error that keeps what was on; off is plain again */
    {
        CHECK(a.accept < 0); /* plain */
        eng_cmd sc = {.type = ENG_CMD_SET_SPEC, .n = 2, .n2 = 6};
        CHECK(eng_engine_send(en, &sc) == 0);
        got s1 = {0};
        CHECK(eng_engine_send_simple(en, ENG_CMD_REGENERATE, NULL, 0) == 0);
        CHECK(run_until(&s1, ENG_EV_DONE, long_wait, 0, 0));
        CHECKF(!strcmp(a.text, s1.text), "\n plain: %s\nlookup: %s", a.text, s1.text);
        CHECK(s1.st.lookup == 2 && s1.st.draft_max == 6 && s1.st.draft[0] == 0 && s1.accept >= 0);
        eng_cmd sd = {.type = ENG_CMD_SET_SPEC, .text = strdup(model), .n = 0, .n2 = 4};
        CHECK(eng_engine_send(en, &sd) == 0);
        got s2 = {0};
        CHECK(eng_engine_send_simple(en, ENG_CMD_REGENERATE, NULL, 0) == 0);
        CHECK(run_until(&s2, ENG_EV_DONE, long_wait, 0, 0));
        CHECKF(!strcmp(a.text, s2.text), "\n plain: %s\n draft: %s", a.text, s2.text);
        CHECKF(!strcmp(s2.st.draft, model) && s2.st.lookup == 0 && s2.accept == 1.0f, "draft '%s', accept %g",
               s2.st.draft, s2.accept);
        eng_cmd bad = {.type = ENG_CMD_SET_SPEC, .text = strdup("/nonexistent/draft.gguf"), .n = 3};
        CHECK(eng_engine_send(en, &bad) == 0);
        got s3 = {0};
        CHECK(run_until(&s3, ENG_EV_ERROR, long_wait, 0, 0));
        CHECK(s3.last_err_cmd == ENG_CMD_SET_SPEC && strstr(s3.last_error, "draft model"));
        eng_cmd off = {.type = ENG_CMD_SET_SPEC};
        CHECK(eng_engine_send(en, &off) == 0);
        got s4 = {0};
        CHECK(eng_engine_send_simple(en, ENG_CMD_REGENERATE, NULL, 0) == 0);
        CHECK(run_until(&s4, ENG_EV_DONE, long_wait, 0, 0));
        CHECK(!strcmp(a.text, s4.text) && s4.st.draft[0] == 0 && s4.st.lookup == 0 && s4.accept < 0);
    }

    /* mid-reply: a sampler change is marked at its token, STOP keeps text */
    set_gen(0.8f, 0);
    CHECK(eng_engine_send_simple(en, ENG_CMD_SET_DELAY, NULL, 5) == 0);
    got c = {0};
    CHECK(eng_engine_send_simple(en, ENG_CMD_SUBMIT, " The dog", 0) == 0);
    CHECK(run_until(&c, ENG_EV_DONE, long_wait, 12, 4));
    CHECK(c.done_reason == ENG_DONE_STOPPED);
    CHECK(c.n[ENG_EV_MARK] == 1 && c.mark_at >= 4 && c.mark_at <= 6);
    CHECK(c.len > 0);
    CHECK(eng_engine_send_simple(en, ENG_CMD_SET_DELAY, NULL, 0) == 0);

    /* a small context: old turns are shifted out, with a notice */
    got d = {0};
    load(model, 64, 1);
    CHECK(run_until(&d, ENG_EV_LOADED, long_wait, 0, 0));
    set_gen(0, 24);
    for (int i = 0; i < 5; i++) {
        CHECK(eng_engine_send_simple(en, ENG_CMD_SUBMIT, " Once upon a time there was a cat.", 0) == 0);
        CHECK(run_until(&d, ENG_EV_DONE, long_wait, 0, 0));
    }
    CHECK(d.notices_ctx >= 1);
    CHECKF(d.shift_late == 0, "%d context notices came after the reply they made room for", d.shift_late);
    CHECKF(d.n[ENG_EV_ERROR] == 0, "%s", d.last_error);
    CHECK(d.n[ENG_EV_DONE] == 5);
    CHECK(d.st.ctx_size == 64);
    CHECK(!strcmp(d.st.cache_k, "f16") && !strcmp(d.st.cache_v, "f16") && d.st.kv_bytes > 0);
    {
        /* the same with q8_0 keys and q4_0 values: the replies and the
         * context shifts run on it, LOADED names it, and its bytes are
         * the blocks' share of f16's (34 + 18 of 128 a 32-value row pair) */
        got q = {0};
        eng_cmd c = {.type = ENG_CMD_LOAD, .n = 64, .n2 = 1};
        c.text = strdup(model);
        snprintf(c.name, sizeof c.name, "auto");
        snprintf(c.kv_type[0], sizeof c.kv_type[0], "q8_0");
        snprintf(c.kv_type[1], sizeof c.kv_type[1], "q4_0");
        CHECK(eng_engine_send(en, &c) == 0);
        CHECK(run_until(&q, ENG_EV_LOADED, long_wait, 0, 0));
        CHECK(!strcmp(q.st.cache_k, "q8_0") && !strcmp(q.st.cache_v, "q4_0"));
        CHECKF(q.st.kv_bytes * 128 == d.st.kv_bytes * 52, "kv bytes %llu, f16 %llu", (unsigned long long)q.st.kv_bytes,
               (unsigned long long)d.st.kv_bytes);
        for (int i = 0; i < 4; i++) {
            CHECK(eng_engine_send_simple(en, ENG_CMD_SUBMIT, " Once upon a time there was a cat.", 0) == 0);
            CHECK(run_until(&q, ENG_EV_DONE, long_wait, 0, 0));
        }
        CHECKF(q.n[ENG_EV_ERROR] == 0, "%s", q.last_error);
        CHECK(q.notices_ctx >= 1 && q.len > 0);
        /* an unknown type: refused, naming the allowed ones */
        eng_cmd b = {.type = ENG_CMD_LOAD, .n = 64, .n2 = 1};
        b.text = strdup(model);
        snprintf(b.kv_type[1], sizeof b.kv_type[1], "q5_0");
        CHECK(eng_engine_send(en, &b) == 0);
        got e = {0};
        CHECK(run_until(&e, ENG_EV_ERROR, long_wait, 0, 0));
        CHECKF(e.last_err_cmd == ENG_CMD_LOAD && e.last_err == ENG_EINVAL &&
                   strstr(e.last_error, "unknown V cache type 'q5_0' (allowed: f16, q8_0, q4_0)"),
               "%s", e.last_error);
        load(model, 64, 1); /* back to f16 for what follows */
        got f = {0};
        CHECK(run_until(&f, ENG_EV_LOADED, long_wait, 0, 0));
        CHECK(!strcmp(f.st.cache_k, "f16"));
    }
    /* the stories model has no chat template: said after LOADED, so it may come with the next reply */
    CHECK(g2.notices_tmpl + a.notices_tmpl == 1 && d.notices_tmpl == 1);


    /* reset, then resume-style turns, then one more reply */
    CHECK(eng_engine_send_simple(en, ENG_CMD_RESET, NULL, 0) == 0);
    eng_cmd t1 = {.type = ENG_CMD_ADD_TURN, .n = ENG_ROLE_USER, .text = strdup("Lily had a ball.")};
    CHECK(eng_engine_send(en, &t1) == 0);
    got h = {0};
    CHECK(eng_engine_send_simple(en, ENG_CMD_SUBMIT, " She", 0) == 0);
    CHECK(run_until(&h, ENG_EV_DONE, long_wait, 0, 0));
    CHECK(h.n[ENG_EV_ERROR] == 0 && h.len > 0);
    CHECKF(misplaced_state == 0, "%d events with state where it does not belong", misplaced_state);

    eng_engine_stop(en);
    return tu_result("test_engine");
}
