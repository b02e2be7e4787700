/* The chat with a Jinja template given by file (SET_CHAT_TEMPLATE, as
 * --chat-template-file sends it) on the embedded model: every turn
 * renders the whole conversation, and the second turn evaluates only
 * the tokens after what the KV cache already holds (the DONE event's
 * n_prompt, the reply's provenance). A template that fails at render
 * time gives a notice and the chat goes on with the family's layout. */
#include <string.h>

#include "engine.h"
#include "gguf.h"
#include "jinja.h"
#include "simd.h"
#include "testutil.h"
#include "tokenizer.h"

static eng_engine *en;

typedef struct got {
    char text[4096];
    size_t len;
    uint32_t n_prompt;
    int done, tmpl_errors;
    eng_state st;
} got;

static int run_until(got *g, enum eng_ev_type want)
{
    for (int waited = 0; waited < 60000;) {
        eng_event ev;
        int rc = eng_engine_poll(en, &ev, 50);
        if (rc == ENG_EAGAIN) {
            waited += 50;
            continue;
        }
        if (rc)
            return 0;
        enum eng_ev_type t = ev.type;
        if (ev.state)
            g->st = *ev.state;
        if (t == ENG_EV_TOKEN && ev.text && g->len + strlen(ev.text) < sizeof g->text) {
            memcpy(g->text + g->len, ev.text, strlen(ev.text));
            g->len += strlen(ev.text);
            g->text[g->len] = 0;
        }
        if (t == ENG_EV_DONE) {
            g->n_prompt = ev.stats.n_prompt;
            g->done = ev.code;
        }
        if (t == ENG_EV_NOTICE && ev.code == ENG_NOTICE_TMPL_ERROR)
            g->tmpl_errors++;
        if (t == ENG_EV_ERROR)
            fprintf(stderr, "engine error: %s\n", ev.text ? ev.text : "");
        eng_event_free(&ev);
        if (t == want)
            return 1;
    }
    return 0;
}

static const char tmpl[] = "{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content | trim }}\n{% endfor %}"
                           "{% if add_generation_prompt %}assistant:{% endif %}";

/* tokens of the template rendered over the conversation (JSON messages) */
static int tokens_of(const eng_tok *tk, const char *src, const char *messages, int gen, int32_t *out, size_t cap)
{
    eng_jinja *t;
    eng_err e;
    char vars[8192], *text;
    size_t len;
    snprintf(vars, sizeof vars, "{\"messages\": %s, \"add_generation_prompt\": %s, \"bos_token\": \"<s>\"}", messages,
             gen ? "true" : "false");
    if (eng_jinja_parse(src, strlen(src), &t, &e) || eng_jinja_render(t, vars, NULL, &text, &len, &e)) {
        fprintf(stderr, "render: %s\n", e.msg);
        return -1;
    }
    eng_jinja_free(t);
    int n = eng_tok_encode(tk, text, len, 0, 1, out, cap);
    free(text);
    return n;
}

static void send_template(const char *src)
{
    eng_cmd c = {.type = ENG_CMD_SET_CHAT_TEMPLATE, .text = strdup(src)};
    CHECK(eng_engine_send(en, &c) == 0);
}

static void load(const char *path)
{
    eng_cmd c = {.type = ENG_CMD_LOAD, .n = 512};
    c.text = strdup(path);
    snprintf(c.name, sizeof c.name, "auto");
    CHECK(eng_engine_send(en, &c) == 0);
}

int main(void)
{
    char model[4096];
    if (!tu_asset("stories260K.gguf", model))
        return TU_SKIP;
    simd_init();
    eng_err e;
    CHECK(eng_engine_start(&en, &e) == 0);
    eng_cmd sc = {.type = ENG_CMD_SET_SAMPLER};
    sc.gen.sp = eng_sampler_defaults();
    sc.gen.sp.temp = 0;
    sc.gen.max_tokens = 12;
    CHECK(eng_engine_send(en, &sc) == 0);
    send_template(tmpl);
    load(model);
    got g0 = {0};
    CHECK(run_until(&g0, ENG_EV_LOADED));
    CHECK(!strcmp(g0.st.tmpl, "jinja") && g0.st.tmpl_from_file == 2);

    const char *u1 = "Once upon a time there was a cat.", *u2 = "The cat was happy.";
    got g1 = {0}, g2 = {0};
    CHECK(eng_engine_send_simple(en, ENG_CMD_SUBMIT, u1, 0) == 0);
    CHECK(run_until(&g1, ENG_EV_DONE));
    CHECK(g1.done == ENG_DONE_EOG || g1.done == ENG_DONE_MAX_TOKENS);
    CHECK(!strcmp(g1.st.tmpl, "jinja"));
    CHECK(eng_engine_send_simple(en, ENG_CMD_SUBMIT, u2, 0) == 0);
    CHECK(run_until(&g2, ENG_EV_DONE));

    /* what the second turn had to evaluate: the render after it, less
     * what it shares with the render the first reply left in the cache */
    eng_gguf *gg;
    eng_tok *tk = NULL;
    CHECK(eng_gguf_open(model, &gg, &e) == 0 && eng_tok_from_gguf(gg, &tk, &e) == 0);
    eng_gguf_close(gg);
    char m1[12288], m2[12288], a1[4096];
    size_t k = 0;
    for (size_t i = 0; i < g1.len && k + 8 < sizeof a1; i++) { /* the reply as a JSON string body */
        char ch = g1.text[i];
        if (ch == '"' || ch == '\\')
            a1[k++] = '\\', a1[k++] = ch;
        else if (ch == '\n')
            a1[k++] = '\\', a1[k++] = 'n';
        else if ((unsigned char)ch >= 0x20)
            a1[k++] = ch;
    }
    a1[k] = 0;
    snprintf(m1, sizeof m1, "[{\"role\": \"user\", \"content\": \"%s\"}, {\"role\": \"assistant\", \"content\": \"%s\"}]",
             u1, a1);
    snprintf(m2, sizeof m2,
             "[{\"role\": \"user\", \"content\": \"%s\"}, {\"role\": \"assistant\", \"content\": \"%s\"}, "
             "{\"role\": \"user\", \"content\": \"%s\"}]",
             u1, a1, u2);
    int32_t t1[1024], t2[1024];
    int n1 = tokens_of(tk, tmpl, m1, 0, t1, 1024), n2 = tokens_of(tk, tmpl, m2, 1, t2, 1024);
    CHECK(n1 > 0 && n2 > n1);
    int common = 0;
    while (common < n1 && common < n2 && t1[common] == t2[common])
        common++;
    CHECKF(g2.n_prompt == (uint32_t)(n2 - common), "second turn evaluated %u tokens, want %d (of %d)", g2.n_prompt,
           n2 - common, n2);
    CHECKF(g2.n_prompt < (uint32_t)n2 / 2, "second turn re-evaluated %u of %d tokens", g2.n_prompt, n2);

    /* a gpt-oss reply (harmony messages, their tags in its text) goes back
     * to the template split as transformers users pass it: the final
     * channel as content, the analysis channel as thinking; its template
     * refuses content with channel tags in it */
    static const char harmony_tmpl[] =
        "{{ bos_token }}{% for m in messages %}{% if m.role == 'assistant' %}"
        "{% if '<|channel|>' in m.content %}{{ raise_exception('channel tags in content') }}{% endif %}"
        "A[{{ m.thinking if m.thinking is defined else '-' }}|{{ m.content }}]"
        "{% else %}U[{{ m.content }}]{% endif %}{% endfor %}{% if add_generation_prompt %}A[{% endif %}";
    static const struct {
        const char *reply, *want;
    } hcases[] = {
        {"<|channel|>analysis<|message|>Think it over.<|end|><|start|>assistant<|channel|>final<|message|>The answer.",
         "[{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"The answer.\", "
         "\"thinking\": \"Think it over.\"}, {\"role\": \"user\", \"content\": \"Next\"}]"},
        /* stopped while thinking: no answer yet */
        {"<|channel|>analysis<|message|>Half a thou",
         "[{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"\", "
         "\"thinking\": \"Half a thou\"}, {\"role\": \"user\", \"content\": \"Next\"}]"},
        /* no channels: the text as it is */
        {"A plain reply.", "[{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": "
                           "\"A plain reply.\"}, {\"role\": \"user\", \"content\": \"Next\"}]"},
    };
    for (size_t i = 0; i < sizeof hcases / sizeof hcases[0]; i++) {
        send_template(harmony_tmpl);
        load(model);
        got gl = {0}, gh = {0};
        CHECK(run_until(&gl, ENG_EV_LOADED));
        CHECK(eng_engine_send_simple(en, ENG_CMD_RESET, NULL, 0) == 0);
        eng_cmd at = {.type = ENG_CMD_ADD_TURN, .n = ENG_ROLE_USER, .text = strdup("Hi")};
        CHECK(eng_engine_send(en, &at) == 0);
        eng_cmd ar = {.type = ENG_CMD_ADD_TURN, .n = ENG_ROLE_ASSISTANT, .text = strdup(hcases[i].reply)};
        CHECK(eng_engine_send(en, &ar) == 0);
        CHECK(eng_engine_send_simple(en, ENG_CMD_SUBMIT, "Next", 0) == 0);
        CHECK(run_until(&gh, ENG_EV_DONE));
        int32_t th[1024];
        int nh = tokens_of(tk, harmony_tmpl, hcases[i].want, 1, th, 1024);
        CHECKF(gh.tmpl_errors == 0 && !strcmp(gh.st.tmpl, "jinja"), "harmony case %zu: %d template errors, %s", i,
               gh.tmpl_errors, gh.st.tmpl);
        CHECKF(nh > 0 && gh.n_prompt == (uint32_t)nh, "harmony case %zu: evaluated %u tokens, the split render has %d",
               i, gh.n_prompt, nh);
    }
    eng_tok_free(tk);

    /* a template that fails when it runs: a notice, and the reply still comes */
    send_template("{% if messages|length > 0 %}{{ raise_exception('this template refuses') }}{% endif %}");
    load(model);
    got g3 = {0}, g4 = {0};
    CHECK(run_until(&g3, ENG_EV_LOADED));
    CHECK(eng_engine_send_simple(en, ENG_CMD_SUBMIT, "Hello", 0) == 0);
    CHECK(run_until(&g4, ENG_EV_DONE));
    CHECK(g4.tmpl_errors == 1 && g4.done != ENG_DONE_ERROR);
    CHECK(strcmp(g4.st.tmpl, "jinja") != 0);

    /* a template that does not parse: a notice at load */
    send_template("{% for %}");
    load(model);
    got g5 = {0};
    CHECK(run_until(&g5, ENG_EV_LOADED));
    CHECK(g5.tmpl_errors == 1 && strcmp(g5.st.tmpl, "jinja") != 0);
    /* enable_thinking reaches the template (/think and the config key send
     * SET_THINKING): this template refuses only when it is passed as false */
    send_template("{% if enable_thinking is defined and not enable_thinking %}{{ raise_exception('thinking off') }}"
                  "{% endif %}{% for m in messages %}{{ m.content }}\n{% endfor %}");
    load(model);
    got g6 = {0};
    CHECK(run_until(&g6, ENG_EV_LOADED));
    static const int modes[] = {-1, 1, 0}, want_err[] = {0, 0, 1};
    for (int i = 0; i < 3; i++) {
        eng_cmd tc = {.type = ENG_CMD_SET_THINKING, .n = modes[i]};
        CHECK(eng_engine_send(en, &tc) == 0);
        got gt = {0};
        CHECK(eng_engine_send_simple(en, ENG_CMD_SUBMIT, "Hello", 0) == 0);
        CHECK(run_until(&gt, ENG_EV_DONE));
        CHECKF(gt.tmpl_errors == want_err[i], "enable_thinking %d: %d template errors, want %d", modes[i],
               gt.tmpl_errors, want_err[i]);
        CHECKF(want_err[i] || !strcmp(gt.st.tmpl, "jinja"), "enable_thinking %d: template %s", modes[i], gt.st.tmpl);
    }
    eng_engine_stop(en);
    return tu_result("test_chat_jinja");
}
