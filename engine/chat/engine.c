/* The engine thread. Everything below eng_engine_* runs on that thread
 * only; the queues are the only things the front end touches.
 *
 * The conversation is kept as turns (text, and for replies the token ids
 * the model produced). Before each reply the whole conversation is
 * rendered through the chat template into token ids and compared with
 * what the KV cache holds; only the tokens after the common prefix are
 * fed. That one mechanism covers a new turn, regenerate, a changed system
 * prompt, a resumed conversation, a different model and the context
 * shift (drop the oldest turns, re-prefill). */
#include "engine.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bytes.h"
#include "eta.h"
#include "harmony.h"
#include "jinja.h"
#include "mem.h"
#include "model.h"
#include "queue.h"
#include "session.h"
#include "spec.h"
#include "simd.h"
#include "template.h"
#include "utf8.h"

#define CMDQ_CAP 64
#define EVQ_CAP 256
/* Prefill tokens between command checks: whole multiples of CHUNK up to
 * CHUNK_MAX (the forward pass's batch: each weight is read once per
 * chunk), as many as take about CHUNK_MS at the rate of the chunk before,
 * so Stop acts within about CHUNK_MS on a slow model and a fast one reads
 * the prompt in full batches. */
#define CHUNK 32
#define CHUNK_MAX 128
#define CHUNK_MS 200.0
#define STATS_EVERY_MS 250

struct eng_engine {
    eng_queue *cmdq, *evq;
    pthread_t th;
};

typedef struct turn {
    int role;
    char *text;
    size_t len, cap;
    int32_t *toks;    /* reply tokens as generated (NULL: tokenize text) */
    uint32_t ntok;
    size_t tokcap;
    int closed;       /* reply finished: the template's end-of-turn follows */
} turn;

typedef struct run {
    eng_engine *en;
    eng_model *m;
    eng_session *s;
    const eng_tok *tk;
    enum eng_tmpl tmpl;
    int tmpl_from_file;
    eng_jinja *jinja;   /* the chat template run as Jinja; NULL: the family's layout (tmpl) */
    char *tmpl_src;     /* SET_CHAT_TEMPLATE: used instead of the file's at the next LOAD */
    char *bos_text, *eos_text; /* bos_token / eos_token for the template */
    int thinking;       /* enable_thinking: 1, 0, -1 not passed */
    int32_t stop_ids[8];
    int n_stop;
    char *system;
    turn *turns;
    size_t nturns, capturns;
    eng_gen_params gen;
    eng_state st;       /* what LOADED / STATE / REPLY report */
    int32_t *buf;       /* rendered conversation */
    size_t nbuf, capbuf;
    eng_cmd pending[8]; /* commands that wait for the reply to end */
    int npending;
    int quit;
    int delay_ms;
    double prefill_tps;
    uint32_t last_prefill;
    /* speculative decoding (SET_SPEC): the draft model, the speculation
     * over r->s (freed before the session), and this reply's figures */
    eng_model *draft;
    eng_spec *spec;
    char draft_path[1024];
    int lookup, draft_max;
    uint64_t spec_drafted0, spec_accepted0, spec_steps0;
    /* the plain decode rate while speculating: the checks that drafted
     * nothing are plain decode steps (one token through the model), timed
     * since speculation was turned on */
    double plain_ms;
    uint32_t plain_n;
} run;

/* ---- messages ---- */

void eng_cmd_free(eng_cmd *c)
{
    if (c) {
        free(c->text);
        c->text = NULL;
    }
}

void eng_event_free(eng_event *ev)
{
    if (ev) {
        free(ev->text);
        free(ev->state);
        ev->text = NULL;
        ev->state = NULL;
    }
}

const char *eng_done_name(int reason)
{
    switch (reason) {
    case ENG_DONE_EOG: return "end of turn";
    case ENG_DONE_STOPPED: return "stopped";
    case ENG_DONE_MAX_TOKENS: return "length limit";
    case ENG_DONE_CONTEXT: return "context full";
    case ENG_DONE_ERROR: return "error";
    default: return "?";
    }
}

const char *eng_stage_name(int stage)
{
    switch (stage) {
    case ENG_STAGE_LOAD: return "load";
    case ENG_STAGE_PREFILL: return "prefill";
    default: return "?";
    }
}

eng_gen_params eng_gen_defaults(void)
{
    eng_gen_params g = {.sp = eng_sampler_defaults(), .max_tokens = 512};
    return g;
}

static void drop_cmd(void *p) { eng_cmd_free(p); }
static void drop_ev(void *p) { eng_event_free(p); }

static char *dup0(const char *s) { return s ? eng_strndup(s, strlen(s)) : NULL; }

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Send an event; it blocks while the front end is behind (backpressure)
 * and drops the payload once the front end has gone. */
static void emit(run *r, eng_event *ev)
{
    if (eng_queue_push(r->en->evq, ev, -1))
        eng_event_free(ev);
}

/* Send ev with its text formatted from fmt. */
static void emit_fmt(run *r, eng_event *ev, const char *fmt, va_list ap)
{
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    ev->text = dup0(buf);
    emit(r, ev);
}

/* ERROR: cmd is the command type that failed, err its ENG_E* code. */
static void emit_error(run *r, int cmd, int err, const char *fmt, ...) ENG_PRINTF(4, 5);
static void emit_error(run *r, int cmd, int err, const char *fmt, ...)
{
    eng_event ev = {.type = ENG_EV_ERROR, .code = cmd, .err = err};
    va_list ap;
    va_start(ap, fmt);
    emit_fmt(r, &ev, fmt, ap);
    va_end(ap);
}

static void emit_notice(run *r, enum eng_notice code, const char *fmt, ...) ENG_PRINTF(3, 4);
static void emit_notice(run *r, enum eng_notice code, const char *fmt, ...)
{
    eng_event ev = {.type = ENG_EV_NOTICE, .code = (int)code};
    va_list ap;
    va_start(ap, fmt);
    emit_fmt(r, &ev, fmt, ap);
    va_end(ap);
}

static void fill_state(run *r)
{
    eng_state *st = &r->st;
    snprintf(st->kernel, sizeof st->kernel, "%s", simd_kernel_name(simd_kernel_current()));
    st->threads = r->s ? eng_ctx_threads(eng_session_ctx(r->s)) : 0;
    st->ctx_size = r->s ? eng_session_ctx_size(r->s) : 0;
    for (int w = 0; w < 2; w++)
        snprintf(w ? st->cache_v : st->cache_k, sizeof st->cache_k, "%s",
                 eng_kv_type_name(r->s ? eng_ctx_kv_type(eng_session_ctx(r->s), w) : ENG_KV_F16));
    st->kv_bytes = r->s ? eng_ctx_kv_bytes(eng_session_ctx(r->s)) : 0;
    st->gen = r->gen;
    st->has_system = r->system && *r->system;
    snprintf(st->tmpl, sizeof st->tmpl, "%s", r->jinja ? "jinja" : eng_tmpl_name(r->tmpl));
    st->tmpl_from_file = r->tmpl_from_file;
    st->thinking = r->thinking;
    snprintf(st->draft, sizeof st->draft, "%s", r->draft_path);
    st->lookup = r->spec ? r->lookup : 0;
    st->draft_max = r->spec ? r->draft_max : 0;
}

/* LOADED, STATE or REPLY with a copy of the state, which the message
 * owns; without memory for it the event still goes, with state NULL, so
 * the front end's view of what runs (loaded, busy) stays right. */
static void emit_state(run *r, enum eng_ev_type type)
{
    fill_state(r);
    eng_event ev = {.type = type, .state = malloc(sizeof *ev.state)};
    if (ev.state)
        *ev.state = r->st;
    emit(r, &ev);
}

static void stats_now(run *r, eng_stats *st)
{
    st->accept = -1;
    if (r->spec) {
        const eng_spec_stats *ss = eng_spec_get_stats(r->spec);
        uint64_t d = ss->drafted - r->spec_drafted0, a = ss->accepted - r->spec_accepted0;
        st->accept = d ? (float)((double)a / (double)d) : 0;
        st->checks = (uint32_t)(ss->steps - r->spec_steps0);
        st->plain_tps = r->plain_n >= 4 && r->plain_ms > 0 ? r->plain_n / (r->plain_ms / 1e3) : 0;
    }
    st->ctx_used = r->s ? eng_session_pos(r->s) : 0;
    st->ctx_size = r->s ? eng_session_ctx_size(r->s) : 0;
    st->prefill_tps = r->prefill_tps;
    st->n_prompt = r->last_prefill;
}

/* ---- conversation ---- */

static void turn_free(turn *t)
{
    free(t->text);
    free(t->toks);
}

static int turn_add(run *r, int role, const char *text)
{
    if (eng_reserve(&r->turns, &r->capturns, r->nturns + 1, sizeof *r->turns, 16))
        return ENG_ENOMEM;
    turn *t = &r->turns[r->nturns];
    memset(t, 0, sizeof *t);
    t->role = role;
    t->len = text ? strlen(text) : 0;
    t->cap = t->len + 1;
    t->text = eng_strndup(text ? text : "", t->len);
    if (!t->text)
        return ENG_ENOMEM;
    t->closed = role == ENG_ROLE_ASSISTANT;
    r->nturns++;
    return 0;
}

static int turn_append(turn *t, const char *s, size_t n, int32_t tok)
{
    if (eng_reserve(&t->text, &t->cap, t->len + n + 1, 1, 0))
        return ENG_ENOMEM;
    memcpy(t->text + t->len, s, n);
    t->len += n;
    t->text[t->len] = 0;
    if (eng_reserve(&t->toks, &t->tokcap, (size_t)t->ntok + 1, sizeof *t->toks, 64))
        return ENG_ENOMEM;
    t->toks[t->ntok++] = tok;
    return 0;
}

static void turns_drop_front(run *r, size_t k)
{
    if (!k)
        return;
    for (size_t i = 0; i < k; i++)
        turn_free(&r->turns[i]);
    memmove(r->turns, r->turns + k, (r->nturns - k) * sizeof *r->turns);
    r->nturns -= k;
}

static void turns_clear(run *r) { turns_drop_front(r, r->nturns); }

static int buf_reserve(run *r, size_t extra)
{
    return eng_reserve(&r->buf, &r->capbuf, r->nbuf + extra, sizeof *r->buf, 0);
}

/* Tokenize one piece onto the render buffer. */
static int encode_into(run *r, const char *text, int special, int *bos)
{
    size_t len = strlen(text);
    if (!len && !*bos)
        return 0;
    for (;;) {
        int n = eng_tok_encode(r->tk, text, len, *bos, special, r->buf + r->nbuf, r->capbuf - r->nbuf);
        if (n < 0)
            return n;
        if ((size_t)n <= r->capbuf - r->nbuf) {
            r->nbuf += (size_t)n;
            *bos = 0;
            return 0;
        }
        if (buf_reserve(r, (size_t)n))
            return ENG_ENOMEM;
    }
}

static int encode_segs(run *r, eng_tmpl_out *o, int *bos)
{
    int rc = 0;
    for (size_t i = 0; i < o->n && !rc; i++)
        rc = encode_into(r, o->seg[i].text, o->seg[i].special, bos);
    eng_tmpl_out_clear(o);
    return rc;
}

/* Append s to the growable text *b. */
static int put(char **b, size_t *n, size_t *cap, const char *s)
{
    size_t k = strlen(s);
    if (*n + k + 1 > *cap) {
        size_t c = (*n + k + 1) * 2;
        char *p = realloc(*b, c);
        if (!p)
            return ENG_ENOMEM;
        *b = p;
        *cap = c;
    }
    memcpy(*b + *n, s, k + 1);
    *n += k;
    return 0;
}

/* A gpt-oss reply as its template wants it back: the harmony messages in
 * the reply's text split into the final channel's text (content) and the
 * analysis channel's (thinking), as transformers users pass them; the
 * template refuses content with channel tags in it. Returns 1 and the two
 * spans (s offsets; a missing one is empty) when the text has channels,
 * else 0. */
static int harmony_split(const char *s, size_t n, size_t span[4])
{
    size_t i = eng_find(s, n, 0, "<|channel|>");
    if (i == n)
        return 0;
    span[0] = span[1] = span[2] = span[3] = 0;
    eng_harmony_msg m;
    while (i < n && eng_harmony_msg_at(s, n, i, &m)) {
        const char *name = s + m.name0;
        size_t len = m.name1 - m.name0;
        if (len >= 5 && !memcmp(name, "final", 5))
            span[0] = m.body0, span[1] = m.body1;
        else if (len >= 8 && !memcmp(name, "analysis", 8))
            span[2] = m.body0, span[3] = m.body1;
        i = eng_find(s, n, m.body1, "<|channel|>");
    }
    return 1;
}

/* Append s[a..b) as a JSON string. */
static int put_json_span(char **b, size_t *n, size_t *cap, const char *s, size_t a, size_t e)
{
    char *t = malloc(e - a + 1);
    if (!t)
        return ENG_ENOMEM;
    memcpy(t, s + a, e - a);
    t[e - a] = 0;
    int rc = eng_jinja_json_str(b, n, cap, t);
    free(t);
    return rc;
}

/* The template's variables as transformers passes them: the system
 * prompt and turns [0, k) as messages, add_generation_prompt, the BOS
 * and EOS texts, tools and documents none, and enable_thinking when set. */
static char *conv_json(run *r, size_t k, int gen)
{
    char *b = NULL;
    size_t n = 0, cap = 0;
    int rc = put(&b, &n, &cap, "{\"messages\": [");
    int first = 1;
    if (!rc && r->system && *r->system) {
        rc = put(&b, &n, &cap, "{\"role\": \"system\", \"content\": ");
        rc = rc ? rc : eng_jinja_json_str(&b, &n, &cap, r->system);
        rc = rc ? rc : put(&b, &n, &cap, "}");
        first = 0;
    }
    for (size_t i = 0; i < k && !rc; i++) {
        turn *t = &r->turns[i];
        rc = put(&b, &n, &cap, first ? "{\"role\": " : ", {\"role\": ");
        first = 0;
        rc = rc ? rc : put(&b, &n, &cap, t->role == ENG_ROLE_USER ? "\"user\"" : "\"assistant\"");
        rc = rc ? rc : put(&b, &n, &cap, ", \"content\": ");
        size_t hs[4];
        if (t->role == ENG_ROLE_ASSISTANT && t->text && harmony_split(t->text, t->len, hs)) {
            rc = rc ? rc : put_json_span(&b, &n, &cap, t->text, hs[0], hs[1]);
            if (hs[3] > hs[2]) {
                rc = rc ? rc : put(&b, &n, &cap, ", \"thinking\": ");
                rc = rc ? rc : put_json_span(&b, &n, &cap, t->text, hs[2], hs[3]);
            }
        } else
            rc = rc ? rc : eng_jinja_json_str(&b, &n, &cap, t->text ? t->text : "");
        rc = rc ? rc : put(&b, &n, &cap, "}");
    }
    rc = rc ? rc : put(&b, &n, &cap, "], \"tools\": null, \"documents\": null, \"add_generation_prompt\": ");
    rc = rc ? rc : put(&b, &n, &cap, gen ? "true" : "false");
    rc = rc ? rc : put(&b, &n, &cap, ", \"bos_token\": ");
    rc = rc ? rc : eng_jinja_json_str(&b, &n, &cap, r->bos_text ? r->bos_text : "");
    rc = rc ? rc : put(&b, &n, &cap, ", \"eos_token\": ");
    rc = rc ? rc : eng_jinja_json_str(&b, &n, &cap, r->eos_text ? r->eos_text : "");
    if (!rc && r->thinking >= 0)
        rc = put(&b, &n, &cap, r->thinking ? ", \"enable_thinking\": true" : ", \"enable_thinking\": false");
    rc = rc ? rc : put(&b, &n, &cap, "}");
    if (rc) {
        free(b);
        return NULL;
    }
    return b;
}

/* Render turns [0, upto) with the Jinja template: the whole conversation
 * as text, tokenized with special tokens parsed. A reply still being
 * written (the last turn, not closed) follows the generation prompt as
 * its tokens. ENG_EFORMAT with e filled when the template fails. */
static int render_jinja(run *r, size_t upto, eng_err *e)
{
    size_t k = upto;
    turn *open = NULL;
    if (k && r->turns[k - 1].role == ENG_ROLE_ASSISTANT && !r->turns[k - 1].closed)
        open = &r->turns[--k];
    int bos = 1, rc = 0;
    r->nbuf = 0;
    if (buf_reserve(r, 256))
        return ENG_ENOMEM;
    if (k) { /* with no turn yet, only BOS: templates may refuse an empty conversation */
        char *json = conv_json(r, k, r->turns[k - 1].role == ENG_ROLE_USER), *text = NULL;
        if (!json)
            return ENG_ENOMEM;
        size_t len;
        rc = eng_jinja_render(r->jinja, json, NULL, &text, &len, e);
        free(json);
        if (rc)
            return rc;
        /* the template wrote BOS itself: the tokenizer must not add another */
        if (r->bos_text && *r->bos_text && !strncmp(text, r->bos_text, strlen(r->bos_text)))
            bos = 0;
        rc = encode_into(r, text, 1, &bos);
        free(text);
    } else
        rc = encode_into(r, "", 0, &bos);
    if (!rc && open) {
        if (open->toks && open->ntok) {
            if (buf_reserve(r, open->ntok))
                return ENG_ENOMEM;
            memcpy(r->buf + r->nbuf, open->toks, open->ntok * sizeof *open->toks);
            r->nbuf += open->ntok;
        } else if (open->len)
            rc = encode_into(r, open->text, 0, &bos);
    }
    return rc;
}

static void emit_notice(run *r, enum eng_notice code, const char *fmt, ...);
static void emit_state(run *r, enum eng_ev_type type);

/* Render turns [0, upto) into r->buf. */
static int render(run *r, size_t upto)
{
    if (r->jinja) {
        eng_err e = {{0}};
        int rc = render_jinja(r, upto, &e);
        if (rc != ENG_EFORMAT && rc != ENG_EINVAL)
            return rc;
        /* a template that fails (raise_exception, a bound exceeded) is not
         * used again: the detected family's layout takes over */
        emit_notice(r, ENG_NOTICE_TMPL_ERROR, "the chat template failed (%s); using the %s layout instead", e.msg,
                    eng_tmpl_name(r->tmpl));
        eng_jinja_free(r->jinja);
        r->jinja = NULL;
        emit_state(r, ENG_EV_STATE);
    }
    eng_tmpl_out o = {0};
    int bos = 1, rc;
    r->nbuf = 0;
    if (buf_reserve(r, 256))
        return ENG_ENOMEM;
    if (eng_tmpl_begin(r->tmpl, r->system, &o) || (rc = encode_segs(r, &o, &bos)) != 0)
        goto fail;
    int first_user = 1;
    for (size_t i = 0; i < upto; i++) {
        turn *t = &r->turns[i];
        if (t->role == ENG_ROLE_USER) {
            if (eng_tmpl_user(r->tmpl, t->text, first_user, r->system, &o) || (rc = encode_segs(r, &o, &bos)))
                goto fail;
            first_user = 0;
            continue;
        }
        if (t->toks && t->ntok) {
            if (buf_reserve(r, t->ntok))
                goto fail;
            memcpy(r->buf + r->nbuf, t->toks, t->ntok * sizeof *t->toks);
            r->nbuf += t->ntok;
        } else if (t->len && (rc = encode_into(r, t->text, 0, &bos)))
            goto fail;
        if (t->closed && (eng_tmpl_close(r->tmpl, &o) || (rc = encode_segs(r, &o, &bos))))
            goto fail;
    }
    return 0;
fail:
    eng_tmpl_out_clear(&o);
    return ENG_ENOMEM;
}

/* ---- commands that may arrive while the engine is busy ---- */

enum { POLL_GO = 0, POLL_STOP = 1 };

static int set_kernel(const char *name, eng_err *e)
{
    int k = simd_kernel_find(name);
    if (k < 0)
        return eng_errf(e, ENG_EINVAL, "unknown kernel set '%s'", name);
    const char *why = NULL;
    if (!simd_kernel_supported((enum simd_kernel)k, &why))
        return eng_errf(e, ENG_EUNSUP, "kernel set %s cannot run here: %s", name, why ? why : "unsupported");
    /* between tokens: no worker is inside a kernel now */
    if (simd_kernel_select((enum simd_kernel)k))
        return eng_errf(e, ENG_EUNSUP, "kernel set %s cannot run here", name);
    return 0;
}

static void describe_sampler_change(const eng_gen_params *a, const eng_gen_params *b, char *buf, size_t n)
{
    size_t u = 0;
    buf[0] = 0;
#define CH(cond, ...) if ((cond) && u < n) u += (size_t)snprintf(buf + u, n - u, __VA_ARGS__)
    CH(a->sp.temp != b->sp.temp, "%stemp %.2f->%.2f", u ? ", " : "", a->sp.temp, b->sp.temp);
    CH(a->sp.top_p != b->sp.top_p, "%stop-p %.2f->%.2f", u ? ", " : "", a->sp.top_p, b->sp.top_p);
    CH(a->sp.top_k != b->sp.top_k, "%stop-k %d->%d", u ? ", " : "", (int)a->sp.top_k, (int)b->sp.top_k);
    CH(a->sp.min_p != b->sp.min_p, "%smin-p %.2f->%.2f", u ? ", " : "", a->sp.min_p, b->sp.min_p);
    CH(a->sp.repeat_penalty != b->sp.repeat_penalty, "%srepeat %.2f->%.2f", u ? ", " : "", a->sp.repeat_penalty,
       b->sp.repeat_penalty);
    CH(a->sp.repeat_last_n != b->sp.repeat_last_n, "%srepeat-last-n %d->%d", u ? ", " : "", (int)a->sp.repeat_last_n,
       (int)b->sp.repeat_last_n);
    CH(a->sp.seed != b->sp.seed, "%sseed %llu", u ? ", " : "", (unsigned long long)b->sp.seed);
    CH(a->max_tokens != b->max_tokens, "%smax tokens %d->%d", u ? ", " : "", (int)a->max_tokens, (int)b->max_tokens);
#undef CH
}

/* Speculation off: the held-back token goes into the cache first, so
 * plain decoding continues from the same place. */
static void spec_off(run *r)
{
    if (r->spec) {
        eng_err e;
        eng_spec_flush(r->spec, &e);
    }
    eng_spec_free(r->spec);
    r->spec = NULL;
    eng_model_close(r->draft);
    r->draft = NULL;
    r->draft_path[0] = 0;
    r->lookup = 0;
}

static int spec_set(run *r, const eng_cmd *c, eng_err *e)
{
    const char *path = c->text && *c->text ? c->text : NULL;
    if (!r->s)
        return eng_errf(e, ENG_ENOMODEL, "no model loaded");
    if (c->n < 0 || c->n > 64 || c->n2 < 0 || c->n2 > ENG_SPEC_MAX)
        return eng_errf(e, ENG_EINVAL, "lookup length must be 0..64 and draft length 0..%d", ENG_SPEC_MAX);
    eng_model *dm = NULL;
    if (path && r->draft && !strcmp(path, r->draft_path)) {
        dm = r->draft; /* the same draft model: keep it */
        r->draft = NULL;
    } else if (path) {
        int rc = eng_model_open(path, &dm, e);
        if (!rc)
            rc = eng_spec_check_vocab(r->m, dm, e);
        if (rc) {
            eng_model_close(dm);
            return eng_err_prefix(e, rc, "draft model");
        }
    }
    spec_off(r);
    if (!dm && !c->n)
        return 0;
    eng_spec_opts o = {.draft = dm, .draft_max = (uint32_t)c->n2, .lookup = (uint32_t)c->n};
    int rc = eng_spec_new(r->s, &o, &r->spec, e);
    if (rc) {
        eng_model_close(dm);
        return rc;
    }
    r->draft = dm;
    snprintf(r->draft_path, sizeof r->draft_path, "%s", path ? path : "");
    r->lookup = c->n;
    r->draft_max = c->n2 ? c->n2 : ENG_SPEC_DEFAULT_MAX;
    r->spec_drafted0 = r->spec_accepted0 = r->spec_steps0 = 0;
    r->plain_ms = 0;
    r->plain_n = 0;
    return 0;
}

/* Apply a command that does not need the engine idle. mid_reply: the
 * token count of the reply in progress, or -1. Returns 1 if handled. */
static int apply_now(run *r, eng_cmd *c, int mid_reply)
{
    eng_err e = {{0}};
    char what[256] = "";
    switch (c->type) {
    case ENG_CMD_SET_SAMPLER: {
        const char *bad = eng_sampler_check(&c->gen.sp);
        if (bad) {
            emit_error(r, c->type, ENG_EINVAL, "sampler: %s", bad);
            break;
        }
        describe_sampler_change(&r->gen, &c->gen, what, sizeof what);
        r->gen = c->gen;
        if (r->s)
            eng_sampler_set(eng_session_sampler(r->s), &r->gen.sp);
        break;
    }
    case ENG_CMD_SET_THREADS: {
        int rc = r->s ? eng_ctx_set_threads(eng_session_ctx(r->s), c->n) : 0;
        if (rc) {
            emit_error(r, c->type, rc, "cannot start %d threads", c->n);
            break;
        }
        snprintf(what, sizeof what, "threads %d", r->s ? eng_ctx_threads(eng_session_ctx(r->s)) : c->n);
        break;
    }
    case ENG_CMD_SET_KERNEL: {
        int rc = set_kernel(c->name, &e);
        if (rc) {
            emit_error(r, c->type, rc, "%s", e.msg);
            break;
        }
        eng_model_kernel_changed(r->m); /* packed copies follow the set */
        snprintf(what, sizeof what, "kernel %s", c->name);
        break;
    }
    case ENG_CMD_SET_DELAY:
        r->delay_ms = c->n < 0 ? 0 : c->n > 10000 ? 10000 : c->n;
        return 1;
    case ENG_CMD_SET_SYSTEM:
        free(r->system);
        r->system = c->text;
        c->text = NULL;
        break;
    case ENG_CMD_SET_CHAT_TEMPLATE:
        free(r->tmpl_src);
        r->tmpl_src = c->text && *c->text ? c->text : NULL;
        if (r->tmpl_src)
            c->text = NULL;
        return 1;
    case ENG_CMD_SET_SPEC: {
        int rc = spec_set(r, c, &e);
        if (rc) {
            emit_error(r, c->type, rc, "%s", e.msg);
            break;
        }
        if (!r->spec)
            snprintf(what, sizeof what, "speculative decoding off");
        else
            snprintf(what, sizeof what, "speculative decoding: %s%s%s%.0d, %d per check", r->draft ? "draft " : "",
                     r->draft ? eng_model_get_info(r->draft)->name : "", r->lookup ? (r->draft ? ", lookup " : "lookup ") : "",
                     r->lookup, r->draft_max);
        break;
    }
    case ENG_CMD_SET_THINKING:
        r->thinking = c->n < 0 ? -1 : c->n > 0;
        snprintf(what, sizeof what, "thinking %s", r->thinking < 0 ? "default" : r->thinking ? "on" : "off");
        break;
    default:
        return 0;
    }
    if (mid_reply >= 0 && what[0]) {
        eng_event ev = {.type = ENG_EV_MARK, .text = dup0(what), .mark_token = (uint32_t)mid_reply};
        emit(r, &ev);
    }
    emit_state(r, ENG_EV_STATE);
    return 1;
}

/* Take every queued command without waiting. Settings apply at once;
 * STOP and QUIT ask the caller to stop; the rest wait in pending (and
 * stop the reply, since they replace it). */
static int poll_cmds(run *r, int mid_reply)
{
    int res = POLL_GO;
    eng_cmd c;
    while (eng_queue_pop(r->en->cmdq, &c, 0) == 0) {
        if (c.type == ENG_CMD_STOP) {
            res = POLL_STOP;
        } else if (c.type == ENG_CMD_QUIT) {
            r->quit = 1;
            res = POLL_STOP;
        } else if (apply_now(r, &c, mid_reply)) {
        } else if (r->npending < (int)(sizeof r->pending / sizeof r->pending[0])) {
            r->pending[r->npending++] = c;
            res = POLL_STOP;
            continue;
        } else
            emit_error(r, c.type, ENG_EBUSY, "busy: command dropped");
        eng_cmd_free(&c);
    }
    return res;
}

/* ---- feeding the rendered conversation ---- */

/* Drop the oldest whole exchanges (keeping the system prompt and the
 * last `keep` turns) until the render is at most `limit` tokens. Returns
 * the number of turns dropped, or a negative code. */
static int shift_context(run *r, size_t limit, size_t keep)
{
    int dropped = 0;
    for (;;) {
        int rc = render(r, r->nturns);
        if (rc)
            return rc;
        if (r->nbuf <= limit || r->nturns <= keep)
            return dropped;
        /* drop up to the next user turn, so an exchange goes as a whole */
        size_t k = 1;
        while (k < r->nturns - keep && r->turns[k].role != ENG_ROLE_USER)
            k++;
        turns_drop_front(r, k);
        dropped += (int)k;
    }
}


/* Make the KV cache hold exactly r->buf[0..nbuf) with logits for the
 * last token. Checks commands between batches; returns ENG_ESTOPPED if
 * asked to stop (the cache keeps a correct prefix). */
static int sync_kv(run *r, int progress, eng_err *e)
{
    eng_session *s = r->s;
    uint32_t pos = eng_session_pos(s);
    const int32_t *h = eng_session_tokens(s);
    size_t common = 0;
    while (common < pos && common < r->nbuf && h[common] == r->buf[common])
        common++;
    if (common == r->nbuf && common == pos && eng_session_logits(s))
        return 0;
    if (common >= r->nbuf)
        common = r->nbuf ? r->nbuf - 1 : 0; /* re-run the last token for its logits */
    if (common < pos || !eng_session_logits(s)) {
        eng_session_rewind(s, (uint32_t)common);
        common = eng_session_pos(s); /* less where a sliding window forgot what common needs */
    }
    if (r->nbuf > eng_session_ctx_size(s))
        return eng_errf(e, ENG_EINVAL, "the conversation (%zu tokens) does not fit the context (%u)", r->nbuf,
                        eng_session_ctx_size(s));
    size_t total = r->nbuf - common, done = 0;
    double t0 = now_ms(), last_prog = t0, t_chunk = t0;
    eng_eta fit = {0};
    size_t chunk = CHUNK;
    while (common + done < r->nbuf) {
        if (poll_cmds(r, -1) == POLL_STOP) {
            r->last_prefill = (uint32_t)done;
            return eng_errf(e, ENG_ESTOPPED, "stopped");
        }
        size_t n = r->nbuf - common - done < chunk ? r->nbuf - common - done : chunk;
        int rc = eng_session_feed(s, r->buf + common + done, (uint32_t)n, e);
        if (rc)
            return rc;
        double t = now_ms();
        eng_eta_add(&fit, (double)(common + done) + n / 2.0, (t - t_chunk) / 1e3 / (double)n);
        size_t next = t > t_chunk ? (size_t)(CHUNK_MS * (double)n / (t - t_chunk)) / CHUNK * CHUNK : CHUNK_MAX;
        chunk = next < CHUNK ? CHUNK : next > CHUNK_MAX ? CHUNK_MAX : next;
        t_chunk = t;
        done += n;
        if (progress && total > CHUNK && (t - last_prog > 100 || done == total)) {
            eng_event ev = {.type = ENG_EV_PROGRESS};
            ev.progress.stage = ENG_STAGE_PREFILL;
            ev.progress.fraction = (double)done / (double)total;
            ev.progress.eta_s = eng_eta_left(&fit, (double)(common + done), (double)r->nbuf);
            ev.progress.ctx_used = (uint32_t)(common + done);
            ev.progress.tps = t > t0 ? (double)done / ((t - t0) / 1e3) : 0;
            emit(r, &ev);
            last_prog = t;
        }
    }
    double dt = now_ms() - t0;
    if (total) {
        r->prefill_tps = dt > 0 ? total / (dt / 1e3) : 0;
        r->last_prefill = (uint32_t)total;
    }
    return 0;
}

/* ---- one reply ---- */

static int is_stop(run *r, int32_t tok)
{
    for (int i = 0; i < r->n_stop; i++)
        if (r->stop_ids[i] == tok)
            return 1;
    return 0;
}

static void send_stats(run *r, enum eng_ev_type type, int code, double t_submit, double t_first, double t_gen0,
                       uint32_t n_gen)
{
    eng_event ev = {.type = type, .code = code};
    stats_now(r, &ev.stats);
    double t = now_ms();
    ev.stats.n_gen = n_gen;
    ev.stats.ttft_ms = t_first > 0 ? t_first - t_submit : 0;
    ev.stats.gen_ms = t_gen0 > 0 ? t - t_gen0 : 0;
    ev.stats.decode_tps = n_gen > 1 && t_first > 0 && t > t_first ? (n_gen - 1) / ((t - t_first) / 1e3) : 0;
    emit(r, &ev);
}

/* Reply bytes on their way to TOKEN events: a character split across
 * tokens is held back until it is whole. */
typedef struct utf8_hold {
    char b[64];
    size_t n;
    uint32_t tokens; /* the reply's tokens so far (TOKEN's n_tokens) */
} utf8_hold;

static void emit_token(run *r, const char *s, size_t n, uint32_t tokens)
{
    eng_event ev = {.type = ENG_EV_TOKEN, .text = eng_strndup(s, n), .n_tokens = tokens};
    emit(r, &ev);
}

/* piece: the bytes of the reply's n_gen-th token */
static void hold_push(run *r, utf8_hold *h, const char *piece, size_t np, uint32_t n_gen)
{
    if (h->n + np > sizeof h->b) {
        emit_token(r, h->b, h->n, h->tokens);
        h->n = 0;
    }
    h->tokens = n_gen;
    if (np <= sizeof h->b) {
        memcpy(h->b + h->n, piece, np);
        h->n += np;
    }
    size_t ok = eng_utf8_complete(h->b, h->n);
    if (ok) {
        emit_token(r, h->b, ok, h->tokens);
        memmove(h->b, h->b + ok, h->n - ok);
        h->n -= ok;
    }
}

/* What is left at the end of a reply goes as it is. */
static void hold_flush(run *r, utf8_hold *h)
{
    if (h->n)
        emit_token(r, h->b, h->n, h->tokens);
    h->n = 0;
}

/* Tokens of the system prompt and the last turn alone, rendered as the
 * template does; -1 if it cannot be rendered. */
static long last_turn_tokens(run *r)
{
    turn *all = r->turns;
    size_t n = r->nturns;
    r->turns = all + n - 1;
    r->nturns = 1;
    int rc = render(r, 1);
    r->turns = all;
    r->nturns = n;
    return rc ? -1 : (long)r->nbuf;
}

/* Answer the last user turn. A message that cannot fit the context even
 * alone is refused before the context shift drops anything: it is taken
 * back and the error says its size (ENG_ETOOLONG, no REPLY, no DONE). */
static void reply(run *r)
{
    eng_err e = {{0}};
    double t_submit = now_ms(), t_first = 0, t_gen0 = 0;
    uint32_t n_gen = 0;
    int reason = ENG_DONE_EOG;
    uint32_t ctx = eng_session_ctx_size(r->s);
    long alone = last_turn_tokens(r);
    if (alone >= (long)ctx) {
        turn_free(&r->turns[r->nturns - 1]);
        r->nturns--;
        emit_error(r, ENG_CMD_SUBMIT, ENG_ETOOLONG,
                   "the message is %ld tokens (with the template and system prompt) and the context holds %u; "
                   "nothing was sent and nothing was forgotten",
                   alone, ctx);
        return;
    }
    /* room for the answer: a quarter of the context, at most max_tokens;
     * the turns that leave are said before REPLY, so the notice stands
     * above the reply it made room for */
    size_t room = ctx / 4;
    if (r->gen.max_tokens > 0 && (size_t)r->gen.max_tokens < room)
        room = (size_t)r->gen.max_tokens;
    int dropped = shift_context(r, ctx - room, 1);
    if (dropped < 0) {
        emit_error(r, ENG_CMD_SUBMIT, ENG_ENOMEM, "out of memory");
        send_stats(r, ENG_EV_DONE, ENG_DONE_ERROR, t_submit, 0, 0, 0);
        return;
    }
    if (dropped > 0)
        emit_notice(r, ENG_NOTICE_CONTEXT_SHIFT,
                    "context full: the oldest %d turn%s left the model's memory (the system prompt stays)", dropped,
                    dropped == 1 ? "" : "s");
    emit_state(r, ENG_EV_REPLY);
    r->last_prefill = 0;
    int rc = sync_kv(r, 1, &e);
    if (rc) {
        if (rc != ENG_ESTOPPED)
            emit_error(r, ENG_CMD_SUBMIT, rc, "%s", e.msg);
        send_stats(r, ENG_EV_DONE, rc == ENG_ESTOPPED ? ENG_DONE_STOPPED : ENG_DONE_ERROR, t_submit, 0, 0, 0);
        return;
    }
    /* the reply's provenance: the tokens evaluated for it (what follows the
     * prefix the cache held), not those fed after it below */
    uint32_t n_prompt = r->last_prefill;
    if (turn_add(r, ENG_ROLE_ASSISTANT, "")) {
        send_stats(r, ENG_EV_DONE, ENG_DONE_ERROR, t_submit, 0, 0, 0);
        return;
    }
    turn *t = &r->turns[r->nturns - 1];
    t->closed = 0;
    utf8_hold pend = {.n = 0};
    /* speculative decoding hands tokens over a few at a time: they wait
     * here (already in the cache, or held back by the eng_spec) */
    int32_t q[ENG_SPEC_MAX + 1];
    uint32_t nq = 0, iq = 0;
    int q_end = 0;
    if (r->spec) {
        eng_spec_drop(r->spec); /* sync_kv made the cache the conversation */
        r->spec_drafted0 = eng_spec_get_stats(r->spec)->drafted;
        r->spec_accepted0 = eng_spec_get_stats(r->spec)->accepted;
        r->spec_steps0 = eng_spec_get_stats(r->spec)->steps;
    }
    t_gen0 = now_ms();
    double last_stats = t_gen0;
    for (;;) {
        if (poll_cmds(r, (int)n_gen) == POLL_STOP) {
            reason = ENG_DONE_STOPPED;
            break;
        }
        t = &r->turns[r->nturns - 1]; /* poll_cmds never adds turns, but stay safe */
        if (r->gen.max_tokens > 0 && n_gen >= (uint32_t)r->gen.max_tokens) {
            reason = ENG_DONE_MAX_TOKENS;
            break;
        }
        if (iq == nq && (r->spec ? eng_spec_pos(r->spec) : eng_session_pos(r->s)) >= ctx) {
            int d = shift_context(r, ctx - ctx / 4, 2);
            if (d <= 0) {
                reason = ENG_DONE_CONTEXT;
                break;
            }
            emit_notice(r, ENG_NOTICE_CONTEXT_SHIFT, "context full: the oldest %d turn%s left the model's memory",
                        d, d == 1 ? "" : "s");
            t = &r->turns[r->nturns - 1];
            rc = sync_kv(r, 1, &e);
            if (r->spec)
                eng_spec_drop(r->spec);
            if (rc) {
                reason = rc == ENG_ESTOPPED ? ENG_DONE_STOPPED : ENG_DONE_ERROR;
                if (rc != ENG_ESTOPPED)
                    emit_error(r, ENG_CMD_SUBMIT, rc, "%s", e.msg);
                break;
            }
        }
        int32_t tok;
        if (iq == nq && r->spec) {
            uint32_t want = ENG_SPEC_MAX + 1;
            if (r->gen.max_tokens > 0 && (uint32_t)r->gen.max_tokens - n_gen < want)
                want = (uint32_t)r->gen.max_tokens - n_gen;
            iq = 0;
            const eng_spec_stats *ss = eng_spec_get_stats(r->spec);
            uint64_t steps0 = ss->steps, drafted0 = ss->drafted;
            double ts = now_ms();
            rc = eng_spec_next(r->spec, want, q, &nq, &e);
            if (ss->steps == steps0 + 1 && ss->drafted == drafted0) { /* nothing drafted: a plain step */
                r->plain_ms += now_ms() - ts;
                r->plain_n++;
            }
            q_end = rc == 1;
            if (rc == 1)
                rc = 0;
        } else if (iq == nq) {
            nq = iq = 0;
            rc = eng_session_next(r->s, &tok, &e);
        } else {
            rc = 0;
        }
        if (rc == 0 && iq < nq) {
            tok = q[iq++];
            if (q_end && iq == nq)
                rc = 1; /* the end-of-turn token, not fed */
        }
        if (rc == 1 || (rc == 0 && is_stop(r, tok))) {
            reason = ENG_DONE_EOG;
            break;
        }
        if (rc < 0) {
            emit_error(r, ENG_CMD_SUBMIT, rc, "%s", e.msg);
            reason = ENG_DONE_ERROR;
            break;
        }
        if (!n_gen)
            t_first = now_ms();
        n_gen++;
        char piece[256];
        size_t np = eng_tok_piece(r->tk, tok, 0, piece, sizeof piece);
        if (np > sizeof piece)
            np = sizeof piece;
        if (turn_append(t, piece, np, tok)) {
            reason = ENG_DONE_ERROR;
            break;
        }
        hold_push(r, &pend, piece, np, n_gen);
        if (r->delay_ms) {
            struct timespec d = {r->delay_ms / 1000, (long)(r->delay_ms % 1000) * 1000000L};
            nanosleep(&d, NULL);
        }
        double tn = now_ms();
        if (tn - last_stats >= STATS_EVERY_MS) {
            send_stats(r, ENG_EV_STATS, 0, t_submit, t_first, t_gen0, n_gen);
            last_stats = tn;
        }
    }
    hold_flush(r, &pend);
    /* the reply stays, finished or not; its end-of-turn goes into the
     * cache now so the next turn only feeds its own tokens (sync_kv also
     * takes back what speculation ran past the reply's end) */
    t->closed = 1;
    if (r->spec)
        eng_spec_drop(r->spec);
    if (!r->quit && render(r, r->nturns) == 0 && r->nbuf <= ctx) {
        eng_err e2;
        sync_kv(r, 0, &e2);
    }
    r->last_prefill = n_prompt;
    send_stats(r, ENG_EV_DONE, reason, t_submit, t_first, t_gen0, n_gen);
}

/* ---- idle commands ---- */

static void fingerprint(const char *path, char *out, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    FILE *f = fopen(path, "rb");
    snprintf(out, n, "?");
    if (!f)
        return;
    long long size = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        size = ftell(f);
    unsigned char *b = malloc(1 << 20);
    if (b && size >= 0) {
        long long offs[3] = {0, size / 2, size - (1 << 20)};
        for (int i = 0; i < 3; i++) {
            long long o = offs[i] < 0 ? 0 : offs[i];
            if (fseek(f, (long)o, SEEK_SET))
                break;
            size_t got = fread(b, 1, 1 << 20, f);
            for (size_t j = 0; j < got; j++)
                h = (h ^ b[j]) * 1099511628211ULL;
        }
        for (int i = 0; i < 8; i++)
            h = (h ^ ((uint64_t)size >> (8 * i) & 0xff)) * 1099511628211ULL;
        snprintf(out, n, "%016llx", (unsigned long long)h);
    }
    free(b);
    fclose(f);
}

/* Load progress as PROGRESS events, at most every 100 ms, with an ETA
 * from the rate so far. */
typedef struct load_prog {
    run *r;
    double t0, last;
} load_prog;

static void on_load_progress(void *user, double fraction)
{
    load_prog *lp = user;
    double t = now_ms();
    if (t - lp->last < 100 && fraction < 1.0)
        return;
    lp->last = t;
    eng_event ev = {.type = ENG_EV_PROGRESS};
    ev.progress.stage = ENG_STAGE_LOAD;
    ev.progress.fraction = fraction;
    ev.progress.eta_s = fraction > 0 ? (t - lp->t0) / 1e3 * (1.0 - fraction) / fraction : 0;
    emit(lp->r, &ev);
}

static void do_load(run *r, eng_cmd *c)
{
    eng_err e = {{0}};
    eng_event ev = {.type = ENG_EV_PROGRESS};
    ev.progress.stage = ENG_STAGE_LOAD;
    emit(r, &ev);
    const char *path = c->text ? c->text : "";
    eng_model *m = NULL;
    eng_session *s = NULL;
    load_prog lp = {r, now_ms(), now_ms()};
    eng_model_opts mo = {.progress = on_load_progress, .progress_user = &lp};
    eng_ctx_opts co = {.n_ctx = (uint32_t)(c->n > 0 ? c->n : 0), .n_threads = c->n2};
    int rc = 0;
    for (int w = 0; w < 2 && !rc; w++) {
        int t = c->kv_type[w][0] ? eng_kv_type_parse(c->kv_type[w]) : ENG_KV_F16;
        if (t < 0)
            rc = eng_errf(&e, ENG_EINVAL, "unknown %s cache type '%.7s' (allowed: %s)", w ? "V" : "K", c->kv_type[w],
                          ENG_KV_TYPE_NAMES);
        *(w ? &co.type_v : &co.type_k) = t;
    }
    if (!rc)
        rc = eng_model_open_opts(path, &mo, &m, &e);
    if (!rc)
        rc = eng_session_new_opts(m, &co, &r->gen.sp, &s, &e);
    if (rc) {
        /* the old model (if any) stays */
        eng_model_close(m);
        emit_error(r, ENG_CMD_LOAD, rc, "%s", e.msg);
        return;
    }
    if (r->spec || r->draft)
        emit_notice(r, ENG_NOTICE_SPEC_OFF, "speculative decoding is off for the new model");
    spec_off(r);
    eng_session_free(r->s);
    eng_model_close(r->m);
    r->m = m;
    r->s = s;
    r->tk = eng_model_tok(m);
    r->prefill_tps = 0;
    r->last_prefill = 0;
    /* a different vocabulary: replies are re-tokenized from their text */
    for (size_t i = 0; i < r->nturns; i++) {
        free(r->turns[i].toks);
        r->turns[i].toks = NULL;
        r->turns[i].ntok = r->turns[i].tokcap = 0;
    }
    const eng_model_info *in = eng_model_get_info(m);
    eng_state *st = &r->st;
    memset(st, 0, sizeof *st);
    snprintf(st->model_path, sizeof st->model_path, "%s", path);
    snprintf(st->model_name, sizeof st->model_name, "%s", in->name);
    snprintf(st->arch, sizeof st->arch, "%s", in->arch);
    snprintf(st->weight_type, sizeof st->weight_type, "%s", simd_type_name(in->main_type));
    st->file_size = in->file_size;
    st->n_params = in->n_params;
    fingerprint(path, st->fingerprint, sizeof st->fingerprint);

    eng_str jt = {0};
    eng_err ig;
    int have_t = eng_gguf_get_str(eng_model_gguf(m), "tokenizer.chat_template", &jt, &ig) == 0 && jt.len;
    enum eng_tmpl detected = have_t ? eng_tmpl_detect(jt.ptr, (size_t)jt.len) : ENG_TMPL_NONE;
    int forced = c->name[0] && strcmp(c->name, "auto") != 0 ? eng_tmpl_find(c->name) : -1;
    if (c->name[0] && strcmp(c->name, "auto") != 0 && forced < 0)
        emit_notice(r, ENG_NOTICE_TMPL_UNKNOWN, "unknown template '%s'; using the model's own", c->name);
    r->tmpl = forced >= 0 ? (enum eng_tmpl)forced : detected;
    r->tmpl_from_file = forced < 0 && detected != ENG_TMPL_NONE;
    /* without a family named, the template itself runs: the one given
     * (--chat-template-file), else the file's */
    eng_jinja_free(r->jinja);
    r->jinja = NULL;
    free(r->bos_text);
    free(r->eos_text);
    r->bos_text = r->eos_text = NULL;
    if (forced < 0 && (r->tmpl_src || have_t)) {
        const char *src = r->tmpl_src ? r->tmpl_src : jt.ptr;
        size_t srclen = r->tmpl_src ? strlen(r->tmpl_src) : (size_t)jt.len;
        eng_err je = {{0}};
        if (eng_jinja_parse(src, srclen, &r->jinja, &je) == 0) {
            r->tmpl_from_file = r->tmpl_src ? 2 : 1;
            if (r->tmpl_src && r->tmpl == ENG_TMPL_NONE)
                r->tmpl = eng_tmpl_detect(src, srclen);
            int32_t ids[2] = {eng_tok_bos(r->tk), eng_tok_eos(r->tk)};
            char **dst[2] = {&r->bos_text, &r->eos_text};
            for (int i = 0; i < 2; i++)
                if (ids[i] >= 0) {
                    eng_str t = eng_tok_text(r->tk, ids[i]);
                    *dst[i] = eng_strndup(t.ptr, t.len);
                }
        } else
            emit_notice(r, ENG_NOTICE_TMPL_ERROR, "the %s chat template cannot be used (%s); using the %s layout",
                        r->tmpl_src ? "given" : "model's", je.msg, eng_tmpl_name(r->tmpl));
    }
    r->n_stop = 0;
    for (const char *const *p = eng_tmpl_stops(r->tmpl); *p && r->n_stop < 8; p++) {
        int32_t id = eng_tok_find(r->tk, *p);
        if (id >= 0)
            r->stop_ids[r->n_stop++] = id;
    }
    emit_state(r, ENG_EV_LOADED);
    if (r->tmpl == ENG_TMPL_NONE && !r->jinja && have_t && !strcmp(in->arch, "gpt-oss"))
        /* the model runs; its chat format (channels, the analysis one
         * being its thinking) is the templates' work, not done yet */
        emit_notice(r, ENG_NOTICE_TMPL_UNRECOGNISED,
                    "gpt-oss's chat format (harmony) comes from its Jinja template, which could not be used "
                    "here, so plain continuation: it continues the text you type");
    else if (r->tmpl == ENG_TMPL_NONE && !r->jinja)
        emit_notice(r, have_t ? ENG_NOTICE_TMPL_UNRECOGNISED : ENG_NOTICE_TMPL_NONE,
                    "%s: it continues the text you type",
                    have_t ? "unrecognised chat template, so plain continuation (set template= in the config)"
                           : "this model has no chat template");
}

static void do_regenerate(run *r)
{
    /* drop the reply (if the last turn is one) and answer the user again */
    if (r->nturns && r->turns[r->nturns - 1].role == ENG_ROLE_ASSISTANT) {
        turn_free(&r->turns[r->nturns - 1]);
        r->nturns--;
    }
    if (!r->nturns || r->turns[r->nturns - 1].role != ENG_ROLE_USER) {
        emit_error(r, ENG_CMD_REGENERATE, ENG_EINVAL, "nothing to regenerate yet");
        return;
    }
    /* rewind to where the user turn began, so its prompt runs in the same
     * batches as the first time and the reply can come out identical */
    if (render(r, r->nturns - 1) == 0 && r->nbuf < eng_session_pos(r->s))
        eng_session_rewind(r->s, (uint32_t)r->nbuf);
    reply(r);
}

static void handle(run *r, eng_cmd *c)
{
    if (apply_now(r, c, -1))
        return;
    switch (c->type) {
    case ENG_CMD_LOAD:
        do_load(r, c);
        break;
    case ENG_CMD_SUBMIT:
        if (!r->s) {
            emit_error(r, c->type, ENG_ENOMODEL, "no model loaded");
            break;
        }
        if (!c->text || !eng_utf8_valid(c->text, strlen(c->text))) {
            emit_error(r, c->type, ENG_EFORMAT, "the message is not valid UTF-8; nothing was sent");
            break;
        }
        if (turn_add(r, ENG_ROLE_USER, c->text)) {
            emit_error(r, c->type, ENG_ENOMEM, "out of memory");
            break;
        }
        reply(r);
        break;
    case ENG_CMD_REGENERATE:
        if (!r->s)
            emit_error(r, c->type, ENG_ENOMODEL, "no model loaded");
        else
            do_regenerate(r);
        break;
    case ENG_CMD_RESET:
        turns_clear(r);
        if (r->s)
            eng_session_rewind(r->s, 0);
        emit_state(r, ENG_EV_STATE);
        break;
    case ENG_CMD_DROP_TURNS: {
        size_t k = r->nturns;
        for (int users = 0; k > 0 && users < c->n;)
            users += r->turns[--k].role == ENG_ROLE_USER;
        while (r->nturns > k)
            turn_free(&r->turns[--r->nturns]);
        break;
    }
    case ENG_CMD_ADD_TURN:
        if (turn_add(r, c->n == ENG_ROLE_ASSISTANT ? ENG_ROLE_ASSISTANT : ENG_ROLE_USER, c->text))
            emit_error(r, c->type, ENG_ENOMEM, "out of memory");
        break;
    case ENG_CMD_STOP:
        break; /* nothing running */
    case ENG_CMD_QUIT:
        r->quit = 1;
        break;
    default:
        break;
    }
}

static void *engine_main(void *arg)
{
    run r;
    memset(&r, 0, sizeof r);
    r.en = arg;
    r.gen = eng_gen_defaults();
    r.tmpl = ENG_TMPL_NONE;
    r.thinking = -1;
    while (!r.quit) {
        eng_cmd c;
        if (r.npending) {
            c = r.pending[0];
            memmove(r.pending, r.pending + 1, (size_t)--r.npending * sizeof *r.pending);
        } else if (eng_queue_pop(r.en->cmdq, &c, -1))
            break; /* closed */
        handle(&r, &c);
        eng_cmd_free(&c);
    }
    for (int i = 0; i < r.npending; i++)
        eng_cmd_free(&r.pending[i]);
    turns_clear(&r);
    free(r.turns);
    free(r.buf);
    free(r.system);
    eng_jinja_free(r.jinja);
    free(r.tmpl_src);
    free(r.bos_text);
    free(r.eos_text);
    spec_off(&r);
    eng_session_free(r.s);
    eng_model_close(r.m);
    eng_queue_close(r.en->evq);
    return NULL;
}

/* ---- front-end side ---- */

int eng_engine_start(eng_engine **out, eng_err *e)
{
    *out = NULL;
    eng_engine *en = calloc(1, sizeof *en);
    if (!en)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    int rc = eng_queue_new(sizeof(eng_cmd), CMDQ_CAP, drop_cmd, &en->cmdq, e);
    if (!rc)
        rc = eng_queue_new(sizeof(eng_event), EVQ_CAP, drop_ev, &en->evq, e);
    if (!rc && pthread_create(&en->th, NULL, engine_main, en))
        rc = eng_errf(e, ENG_ENOMEM, "cannot start the engine thread");
    if (rc) {
        eng_queue_free(en->cmdq);
        eng_queue_free(en->evq);
        free(en);
        return rc;
    }
    *out = en;
    return 0;
}

void eng_engine_stop(eng_engine *en)
{
    if (!en)
        return;
    eng_cmd q = {.type = ENG_CMD_QUIT};
    /* never block on a full event queue: nobody reads it any more */
    eng_queue_close(en->evq);
    if (eng_queue_push(en->cmdq, &q, -1))
        eng_queue_close(en->cmdq);
    pthread_join(en->th, NULL);
    eng_queue_free(en->cmdq);
    eng_queue_free(en->evq);
    free(en);
}

int eng_engine_send(eng_engine *en, eng_cmd *c)
{
    int rc = eng_queue_push(en->cmdq, c, 0);
    if (rc == 0)
        c->text = NULL; /* moved */
    return rc;
}

int eng_engine_send_simple(eng_engine *en, enum eng_cmd_type type, const char *text, int n)
{
    eng_cmd c;
    memset(&c, 0, sizeof c);
    c.type = type;
    c.n = n;
    if (text && (type == ENG_CMD_SET_KERNEL)) {
        snprintf(c.name, sizeof c.name, "%s", text);
    } else if (text && !(c.text = dup0(text)))
        return ENG_ENOMEM;
    int rc = eng_engine_send(en, &c);
    eng_cmd_free(&c);
    return rc;
}

int eng_engine_poll(eng_engine *en, eng_event *ev, int wait_ms) { return eng_queue_pop(en->evq, ev, wait_ms); }

int eng_engine_fd(const eng_engine *en) { return eng_queue_fd(en->evq); }
int eng_engine_wait(eng_engine *en, int wait_ms) { return eng_queue_wait(en->evq, wait_ms); }
