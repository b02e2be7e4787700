/* ui/chat: the slash commands as both front ends run them, without a
 * terminal. A ui_chat on the real engine thread and the embedded stories
 * model takes lines through ui_chat_input; events are pumped with the
 * calls the front ends use (eng_engine_wait, ui_chat_pump, ui_chat_tick).
 * Checked: what the engine confirms back (ch.st), what the user sees
 * (notices) and what is kept (the journal, saved under a temporary
 * XDG_DATA_HOME). Run under ThreadSanitizer too (-DNIBBLE_TSAN=ON). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include "chat.h"
#include "testutil.h"

#define LONG_MS 60000

static ui_chat ch;
static eng_engine *en_of_test;
static int load_ctx; /* n_ctx the settings give the next load (0: the model's) */

static const char *spec_draft; /* the draft the settings give spec-target.gguf */
static int spec_lookup;

static void settings(void *ud, const char *path, ui_model_settings *out)
{
    (void)ud;
    out->n_ctx = load_ctx;
    if (strstr(path, "bad")) /* a model with settings of its own (a [model:] section) */
        out->gen.sp.temp = 1.25f;
    if (spec_draft && strstr(path, "spec-target")) { /* [model:spec-target.gguf] draft = ..., lookup = ... */
        snprintf(out->draft, sizeof out->draft, "%s", spec_draft);
        out->lookup = spec_lookup;
        out->draft_max = 5;
    }
}

/* Pump events as a front end does until cond holds; 0 if time ran out. */
static int wait_until(int (*cond)(void))
{
    double t0 = ui_now_ms();
    while (!cond()) {
        if (ui_now_ms() - t0 > LONG_MS)
            return 0;
        int to = ui_chat_timeout(&ch);
        eng_engine_wait(ch.en, to < 0 || to > 50 ? 50 : to);
        ui_chat_pump(&ch);
        ui_chat_tick(&ch);
    }
    return 1;
}

static int idle(void) { return !ch.busy && !ch.loading; }

static uint64_t want_seed;
static int seed_is(void) { return ch.st.gen.sp.seed == want_seed; }

/* Wait until the engine has handled every command sent so far. Commands
 * and events keep their order, so a sampler setting sent now is
 * confirmed (STATE) after all of them: send one with a seed nothing else
 * uses, wait for it, then put the seed back and wait for that. */
static void sync_engine(void)
{
    CHECK(wait_until(idle));
    eng_gen_params g = ch.gen;
    eng_cmd c = {.type = ENG_CMD_SET_SAMPLER, .gen = g};
    c.gen.sp.seed = want_seed = g.sp.seed ^ 0x5eed5eed5eedULL;
    CHECK(eng_engine_send(ch.en, &c) == 0);
    CHECK(wait_until(seed_is));
    c.gen = g;
    want_seed = g.sp.seed;
    CHECK(eng_engine_send(ch.en, &c) == 0);
    CHECK(wait_until(seed_is));
}

static int gen_eq(const eng_gen_params *a, const eng_gen_params *b)
{
    return a->sp.temp == b->sp.temp && a->sp.top_k == b->sp.top_k && a->sp.top_p == b->sp.top_p &&
           a->sp.min_p == b->sp.min_p && a->sp.repeat_penalty == b->sp.repeat_penalty &&
           a->sp.repeat_last_n == b->sp.repeat_last_n && a->sp.seed == b->sp.seed && a->max_tokens == b->max_tokens;
}

static enum ui_action input(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    return ui_chat_input(&ch, line);
}

/* A notice from entry `from` on that contains s (the UI's own words). */
static int notice_since(size_t from, const char *s)
{
    for (size_t i = from; i < ch.doc->n; i++)
        if (ch.doc->e[i].kind == ENG_J_NOTICE && strstr(ch.doc->e[i].text, s))
            return 1;
    return 0;
}

/* The error flag of the notice holding s since from: 1 error, 0 plain,
 * -1 no such notice. */
static int notice_error(size_t from, const char *s)
{
    for (size_t i = from; i < ch.doc->n; i++)
        if (ch.doc->e[i].kind == ENG_J_NOTICE && strstr(ch.doc->e[i].text, s))
            return ui_chat_is_error(&ch, i);
    return -1;
}

static int count_kind(const eng_journal *j, enum eng_jkind k)
{
    int n = 0;
    for (size_t i = 0; i < j->n; i++)
        n += j->e[i].kind == k;
    return n;
}

/* Index of the last entry of kind k, or -1. */
static int last_of(enum eng_jkind k)
{
    for (size_t i = ch.doc->n; i-- > 0;)
        if (ch.doc->e[i].kind == k)
            return (int)i;
    return -1;
}

/* Send a message and wait for the whole reply; its text (static). */
static const char *ask(const char *text)
{
    static char out[4096];
    input("%s", text);
    CHECK(ch.busy);
    CHECK(wait_until(idle));
    int i = last_of(ENG_J_ASSISTANT);
    out[0] = 0;
    if (i >= 0)
        snprintf(out, sizeof out, "%s", ch.doc->e[i].text);
    return out;
}

static const char *meta_of_last_reply(const char *key)
{
    int i = last_of(ENG_J_ASSISTANT);
    return i < 0 ? NULL : eng_journal_get_meta(ch.doc, (size_t)i, key);
}

static int reply_started(void)
{
    int i = last_of(ENG_J_ASSISTANT);
    return ch.reply >= 0 && i == ch.reply && ch.doc->e[i].len > 0;
}

/* ---- the commands ---- */

static void check_set(void)
{
    /* every knob (and the spellings the help and config use), confirmed
     * by the engine's STATE, not just the sliders */
    input("/set temp 0.5");
    input("/set top_k 10");
    input("/set top-p 0.9");
    input("/set min_p 0.1");
    input("/set repeat_penalty 1.1");
    input("/set repeat-last-n 32");
    input("/set max_tokens 40");
    input("/set seed 42");
    sync_engine();
    const eng_gen_params *g = &ch.st.gen;
    CHECKF(g->sp.temp == 0.5f && g->sp.top_k == 10 && g->sp.top_p == 0.9f && g->sp.min_p == 0.1f &&
               g->sp.repeat_penalty == 1.1f && g->sp.repeat_last_n == 32 && g->max_tokens == 40 && g->sp.seed == 42,
           "temp %g top_k %d top_p %g min_p %g repeat %g/%d max %d seed %llu", g->sp.temp, (int)g->sp.top_k,
           g->sp.top_p, g->sp.min_p, g->sp.repeat_penalty, (int)g->sp.repeat_last_n, (int)g->max_tokens,
           (unsigned long long)g->sp.seed);
    CHECK(gen_eq(&ch.gen, &ch.st.gen)); /* the sliders agree */
    input("/set temperature 0.25");
    sync_engine();
    CHECK(ch.st.gen.sp.temp == 0.25f);

    /* bad values: a notice each, nothing sent, nothing changed */
    static const char *const bad[] = {"temp abc", "temp 200",          "temp -1",          "top_k -1",
                                      "top_p 0",  "top_p 1.5",         "min_p 1",          "repeat_penalty 0",
                                      "repeat 11", "repeat_last_n -5", "seed 1x",          "frobs 3"};
    eng_gen_params before = ch.st.gen;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        size_t mark = ch.doc->n;
        input("/set %s", bad[i]);
        CHECKF(ch.doc->n == mark + 1 && ch.doc->e[mark].kind == ENG_J_NOTICE && ch.doc->e[mark].transient,
               "/set %s", bad[i]);
        CHECKF(gen_eq(&ch.gen, &before), "/set %s changed the sliders", bad[i]);
    }
    size_t mark = ch.doc->n;
    input("/set temp");
    CHECK(notice_since(mark, "usage: /set"));
    mark = ch.doc->n;
    input("/set frobs 3");
    CHECK(notice_since(mark, "unknown key 'frobs'"));
    mark = ch.doc->n;
    input("/set temp abc");
    CHECK(notice_since(mark, "not a number"));
    sync_engine();
    CHECK(gen_eq(&ch.st.gen, &before));
}

static void check_kernel_threads(void)
{
    input("/kernel scalar"); /* scalar runs everywhere */
    input("/threads 2");
    sync_engine();
    CHECKF(!strcmp(ch.st.kernel, "scalar") && ch.st.threads == 2, "kernel %s threads %d", ch.st.kernel,
           ch.st.threads);
    size_t mark = ch.doc->n;
    input("/kernel no-such-set");
    sync_engine();
    CHECK(notice_since(mark, "no-such-set") && !strcmp(ch.st.kernel, "scalar"));
    mark = ch.doc->n;
    input("/kernel");
    CHECK(notice_since(mark, "* scalar")); /* the list marks the set in use */
    mark = ch.doc->n;
    input("/kernels");
    CHECK(notice_since(mark, "* scalar"));
    static const char *const bad[] = {"", "x", "-1", "257", "2x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        mark = ch.doc->n;
        input("/threads %s", bad[i]);
        CHECKF(notice_since(mark, "usage: /threads"), "/threads %s", bad[i]);
    }
    sync_engine();
    CHECK(ch.st.threads == 2);
    input("/threads 1");
    sync_engine();
    CHECK(ch.st.threads == 1);
}

static void check_system(void)
{
    size_t mark = ch.doc->n;
    input("/system Be brief.");
    sync_engine();
    CHECK(ch.doc->system && !strcmp(ch.doc->system, "Be brief.") && ch.st.has_system == 1);
    CHECK(notice_since(mark, "system prompt set"));
    mark = ch.doc->n;
    input("/system");
    sync_engine();
    CHECK(!ch.doc->system && ch.st.has_system == 0);
    CHECK(notice_since(mark, "system prompt removed"));
}

/* A reply, /regen (the same text at temperature 0, the old one marked),
 * /reset (the engine forgets: the same question fills the same context),
 * "//x" (sends "/x"). */
static void check_replies(char *first, size_t n)
{
    input("/set temp 0");
    input("/set max_tokens 24");
    const char *a = ask("Once upon a time");
    snprintf(first, n, "%s", a);
    uint32_t used = ch.stats.ctx_used;
    CHECK(strlen(first) > 10 && used > 0);
    CHECK(count_kind(ch.doc, ENG_J_USER) == 1 && count_kind(ch.doc, ENG_J_ASSISTANT) == 1);
    const char *t = meta_of_last_reply("temp"), *k = meta_of_last_reply("kernel");
    CHECK(t && !strcmp(t, "0") && k && !strcmp(k, "scalar")); /* REPLY's provenance */
    static const char *const want[][2] = {{"max_tokens", "24"}, {"top_k", "10"}, {"top_p", "0.9"},
                                          {"seed", "42"},       {"threads", "1"}, {"repeat_last_n", "32"}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const char *v = meta_of_last_reply(want[i][0]);
        CHECKF(v && !strcmp(v, want[i][1]), "%s: %s", want[i][0], v ? v : "(none)");
    }
    char ntok[16];
    snprintf(ntok, sizeof ntok, "%u", ch.stats.n_gen);
    const char *mtok = meta_of_last_reply("tokens"), *end = meta_of_last_reply("end");
    CHECK(mtok && !strcmp(mtok, ntok) && end && !strcmp(end, eng_done_name(ENG_DONE_MAX_TOKENS)));

    int old = last_of(ENG_J_ASSISTANT);
    input("/regen");
    CHECK(ch.busy);
    CHECK(wait_until(idle));
    int now = last_of(ENG_J_ASSISTANT);
    const char *sup = eng_journal_get_meta(ch.doc, (size_t)old, "superseded");
    CHECK(now > old && sup && !strcmp(sup, "1"));
    CHECKF(!strcmp(ch.doc->e[now].text, first), "\n first: %s\n regen: %s", first, ch.doc->e[now].text);
    CHECK(ch.stats.ctx_used == used);

    size_t mark = ch.doc->n;
    input("/reset");
    CHECK(count_kind(ch.doc, ENG_J_USER) == 0 && count_kind(ch.doc, ENG_J_ASSISTANT) == 0);
    CHECK(notice_since(0, "new conversation") && ch.doc->n <= mark);
    CHECKF(!strcmp(ask("Once upon a time"), first), "after /reset the reply changed");
    CHECKF(ch.stats.ctx_used == used, "after /reset the context holds %u tokens, not %u", ch.stats.ctx_used, used);

    /* "//x" sends "/x"; an unknown command sends nothing */
    mark = ch.doc->n;
    input("/frobnicate now");
    CHECK(!ch.busy && ch.doc->n == mark + 1 && notice_since(mark, "unknown command /frobnicate"));
    ask("//x");
    int u = last_of(ENG_J_USER);
    CHECK(u >= 0 && !strcmp(ch.doc->e[u].text, "/x") && last_of(ENG_J_ASSISTANT) > u);
}

/* /stop ends a slow reply early and keeps what was written; /stop while
 * idle does nothing. */
static void check_stop(void)
{
    input("/set max_tokens 0");
    CHECK(eng_engine_send_simple(ch.en, ENG_CMD_SET_DELAY, NULL, 20) == 0);
    input("Once upon a time");
    CHECK(wait_until(reply_started));
    input("/set top_k 5"); /* mid-reply: marked in the reply at its token */
    input("/stop");
    CHECK(wait_until(idle));
    const char *end = meta_of_last_reply("end");
    CHECKF(end && !strcmp(end, eng_done_name(ENG_DONE_STOPPED)), "end: %s", end ? end : "(none)");
    int i = last_of(ENG_J_ASSISTANT);
    CHECK(i >= 0 && ch.doc->e[i].len > 0 && !ch.doc->e[i].partial);
    CHECK(i >= 0 && ch.doc->e[i].nmarks == 1 && ch.doc->e[i].marks[0].token >= 1);
    CHECK(i >= 0 && ch.doc->e[i].nmarks == 1 && ch.doc->e[i].marks[0].what[0]);
    CHECK(eng_engine_send_simple(ch.en, ENG_CMD_SET_DELAY, NULL, 0) == 0);
    size_t mark = ch.doc->n;
    input("/stop");
    sync_engine();
    CHECK(ch.doc->n == mark && idle());
    input("/set max_tokens 24");
}

static int file_exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* /save, /list, /load: a saved conversation comes back, to the engine
 * too (regenerating its reply gives the same text). */
static void check_save_load(const char *data, const char *first)
{
    char path[1400];
    input("/reset");
    ask("Once upon a time");
    size_t mark = ch.doc->n;
    input("/save alpha");
    snprintf(path, sizeof path, "%s/conversations/alpha.nbj", data);
    CHECK(file_exists(path) && !strcmp(ch.name, "alpha") && notice_since(mark, "saved as 'alpha'"));
    mark = ch.doc->n;
    input("/save ../evil");
    CHECK(notice_since(mark, "/save: use letters"));
    snprintf(path, sizeof path, "%s/evil.nbj", data);
    CHECK(!file_exists(path));
    mark = ch.doc->n;
    input("/list");
    CHECK(notice_since(mark, "alpha ") && notice_since(mark, "(this one)"));
    /* another conversation, named: the first keeps its file */
    input("/new");
    ask("Once upon a time there was a dog");
    input("/save beta");
    mark = ch.doc->n;
    input("/list");
    CHECK(notice_since(mark, "alpha ") && notice_since(mark, "beta ") && notice_since(mark, "Once upon a time there was a dog  (this one)"));
    mark = ch.doc->n;
    input("/list dog"); /* a search: only beta has it */
    CHECK(notice_since(mark, "beta ") && !notice_since(mark, "alpha "));
    /* a name that is taken: asked first; no keeps the other as it was */
    char alpha_path[1400];
    snprintf(alpha_path, sizeof alpha_path, "%s/conversations/alpha.nbj", data);
    size_t nb = 0, na = 0;
    char *before = tu_read(alpha_path, &nb);
    mark = ch.doc->n;
    input("/save alpha");
    CHECKF(strstr(ch.ask, "overwrite 'alpha'") && strstr(ch.ask, "[y/N]"), "asked: '%s'", ch.ask);
    CHECK(!strcmp(ch.ask_name, "alpha") && !strcmp(ch.name, "beta"));
    ui_chat_answer(&ch, 0);
    CHECK(!ch.ask[0] && notice_since(mark, "'alpha' kept as it was; this conversation is still 'beta'"));
    CHECK(!strcmp(ch.name, "beta") && file_exists(alpha_path));
    char *after = tu_read(alpha_path, &na);
    CHECK(before && after && nb > 0 && na == nb && !memcmp(before, after, nb));
    free(before);
    free(after);
    /* /save of its own name asks nothing */
    input("/save beta");
    CHECK(!ch.ask[0]);

    input("/reset");
    CHECK(count_kind(ch.doc, ENG_J_ASSISTANT) == 0);
    mark = ch.doc->n;
    input("/load alpha");
    CHECK(notice_since(0, "resumed 'alpha' (2 turns)"));
    CHECK(!strcmp(ch.name, "alpha"));
    int u = last_of(ENG_J_USER), r = last_of(ENG_J_ASSISTANT);
    CHECK(u >= 0 && r > u && !strcmp(ch.doc->e[u].text, "Once upon a time") && !strcmp(ch.doc->e[r].text, first));
    input("/regen");
    CHECK(wait_until(idle));
    r = last_of(ENG_J_ASSISTANT);
    CHECKF(r >= 0 && !strcmp(ch.doc->e[r].text, first), "regenerated after /load: %s", r >= 0 ? ch.doc->e[r].text : "");

    static const char *const bad[] = {"/load", "/load ../x", "/load nosuch"};
    static const char *const says[] = {"usage: /load", "usage: /load", "cannot load 'nosuch'"};
    for (int i = 0; i < 3; i++) {
        mark = ch.doc->n;
        input("%s", bad[i]);
        CHECKF(notice_since(mark, says[i]), "%s", bad[i]);
    }
    CHECK(!strcmp(ch.name, "alpha"));
}

/* A small context: the engine's context-shift notice is saved with the
 * conversation (it changes what the model remembers); its other notices
 * (here: no chat template) are shown and not saved. */
static void check_notices(const char *data)
{
    input("/reset");
    load_ctx = 64;
    ui_chat_load_model(&ch, ch.st.model_path);
    CHECK(wait_until(idle));
    CHECK(ch.have_model && ch.st.ctx_size == 64);
    for (int i = 0; i < 4; i++)
        ask(" Once upon a time there was a cat.");
    int kept = 0, shown = 0;
    for (size_t i = 0; i < ch.doc->n; i++) {
        const eng_jentry *x = &ch.doc->e[i];
        kept += x->kind == ENG_J_NOTICE && !x->transient;
        shown += x->kind == ENG_J_NOTICE && x->transient && strstr(x->text, "no chat template");
    }
    CHECK(kept >= 1 && shown >= 1);
    input("/save small");
    char path[1400];
    snprintf(path, sizeof path, "%s/conversations/small.nbj", data);
    eng_journal *j = NULL;
    eng_err e;
    CHECK(eng_journal_load(path, &j, &e) == 0);
    if (j) {
        CHECKF(count_kind(j, ENG_J_NOTICE) == kept, "saved %d notices, kept %d", count_kind(j, ENG_J_NOTICE), kept);
        for (size_t i = 0; i < j->n; i++)
            if (j->e[i].kind == ENG_J_NOTICE)
                CHECKF(!strncmp(j->e[i].text, "context full", 12), "saved notice: %s", j->e[i].text);
        eng_journal_free(j);
    }
    size_t mark;
    /* defect 4: a message longer than the whole context is refused before
     * any turn is dropped, with its size; it goes back to the input */
    char longmsg[2048] = "";
    for (int i = 0; i < 20; i++)
        strcat(longmsg, "The cat sat on the mat. ");
    mark = ch.doc->n;
    input("%s", longmsg);
    CHECK(wait_until(idle));
    CHECK(notice_since(mark, "context holds 64") && notice_error(mark, "context holds 64") == 1);
    CHECK(!notice_since(mark, "context full"));
    CHECK(last_of(ENG_J_ASSISTANT) < (int)mark); /* no reply started */
    int u = last_of(ENG_J_USER);
    CHECK(u >= 0 && ch.doc->e[u].transient && ch.refused && !strcmp(ch.refused, longmsg));
    free(ch.refused);
    ch.refused = NULL;
    ask(" Once upon a time");
    CHECK(count_kind(ch.doc, ENG_J_ASSISTANT) >= 5);
}

static void check_misc(void)
{
    size_t mark = ch.doc->n;
    CHECK(input("/help") == UI_ACT_HELP && input("/?") == UI_ACT_HELP);
    static const char *const cmds[] = {"/reset", "/regen", "/stop", "/system", "/set", "/model", "/kernel",
                                       "/threads", "/save", "/load", "/list", "/help", "/quit",
                                       "/new", "/rename", "/export", "/copy"};
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        char item[32]; /* listed as a command, not only named in passing */
        snprintf(item, sizeof item, "  %s ", cmds[i]);
        CHECKF(strstr(ui_chat_help(), item), "the help lacks %s", cmds[i]);
    }
    CHECK(input("/quit") == UI_ACT_QUIT && input("/exit") == UI_ACT_QUIT && input("/q") == UI_ACT_QUIT);
    CHECK(ch.doc->n == mark); /* they leave the document alone */
    input("/model");
    CHECK(notice_since(mark, "usage: /model"));
    /* a file that is no model: said so, the loaded one stays */
    char was[sizeof ch.st.model_path];
    snprintf(was, sizeof was, "%s", ch.st.model_path);
    mark = ch.doc->n;
    input("/model /nonexistent/m.gguf");
    CHECK(wait_until(idle));
    CHECK(ch.load_error && ch.have_model && !strcmp(ch.st.model_path, was));
    CHECK(notice_since(mark, "cannot load /nonexistent/m.gguf") && notice_since(mark, "the previous model stays"));
    /* failures are marked as errors (the screen colours them by the mark) */
    CHECK(notice_error(mark, "cannot load /nonexistent/m.gguf") == 1);
    CHECK(notice_error(mark, "usage: /model") == -1);
    mark = ch.doc->n;
    input("/model");
    CHECK(notice_error(mark, "usage: /model") == 0);
}

/* The conversation files in data/conversations. */
static int count_files(const char *data)
{
    char dir[700];
    snprintf(dir, sizeof dir, "%s/conversations", data);
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        n += strstr(de->d_name, ".nbj") != NULL;
    if (d)
        closedir(d);
    return n;
}

/* The saved text of conversation `name` (static), "" if unreadable. */
static const char *saved_text(const char *data, const char *name)
{
    static char all[8192];
    char path[1400];
    snprintf(path, sizeof path, "%s/conversations/%s.nbj", data, name);
    eng_journal *j = NULL;
    eng_err e;
    all[0] = 0;
    if (eng_journal_load(path, &j, &e))
        return all;
    size_t u = 0;
    for (size_t i = 0; i < j->n && u < sizeof all - 1; i++)
        if (j->e[i].kind == ENG_J_USER)
            u += (size_t)snprintf(all + u, sizeof all - u, "%s|", j->e[i].text);
    eng_journal_free(j);
    return all;
}

/* /save NAME over another conversation, answered yes: the other file
 * now holds this conversation, whose old file is gone. */
static void check_save_over(const char *data)
{
    input("/new");
    ask("Once upon a time there was a cat");
    char old[sizeof ch.name], old_path[1400];
    snprintf(old, sizeof old, "%s", ch.name);
    snprintf(old_path, sizeof old_path, "%s/conversations/%s.nbj", data, old);
    CHECK(file_exists(old_path) && strcmp(old, "beta"));
    size_t mark = ch.doc->n;
    input("/save beta");
    CHECK(ch.ask[0] && !strcmp(ch.name, old)); /* nothing done before the answer */
    CHECKF(!strcmp(saved_text(data, "beta"), "Once upon a time there was a dog|"), "beta before: %s",
           saved_text(data, "beta"));
    ui_chat_answer(&ch, 1);
    CHECK(!ch.ask[0] && !strcmp(ch.name, "beta") && notice_since(mark, "saved as 'beta', over the other conversation of that name"));
    CHECKF(!strcmp(saved_text(data, "beta"), "Once upon a time there was a cat|"), "beta after: %s",
           saved_text(data, "beta"));
    CHECK(!file_exists(old_path));
    /* an answer with nothing asked does nothing */
    mark = ch.doc->n;
    ui_chat_answer(&ch, 1);
    CHECK(ch.doc->n == mark);
    /* what line mode takes as yes */
    static const char *const yes[] = {"y", "Y", "yes", " YES \r", "y\n"};
    static const char *const no[] = {"", "n", "no", "yeah", "y y", "ok"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        CHECKF(ui_chat_is_yes(yes[i]), "'%s' is yes", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        CHECKF(!ui_chat_is_yes(no[i]), "'%s' is not yes", no[i]);
}

static void copy_file(const char *from, const char *to, size_t limit)
{
    size_t n;
    char *b = tu_read(from, &n);
    CHECK(b != NULL);
    FILE *f = fopen(to, "wb");
    CHECK(f != NULL);
    if (b && f)
        fwrite(b, 1, n < limit ? n : limit, f);
    if (f)
        fclose(f);
    free(b);
}

static int loaded_path_is(const char *p) { return idle() && ch.have_model && !strcmp(ch.st.model_path, p); }
static const char *want_path;
static int loaded_want(void) { return loaded_path_is(want_path); }

/* Edit and branch: the last message edited and sent again; the old one
 * and its reply stay in the journal as an earlier branch, left out of the
 * model's context (the new reply is the one a conversation without them
 * gives); F8 again walks back; a command or cancel ends an edit. */
static void check_edit(const char *data)
{
    input("/new");
    input("/set temp 0");
    input("/set max_tokens 12");
    CHECK(wait_until(idle));
    /* what ALPHA then GAMMA gives, without BETA */
    ask("ALPHA");
    char want[4096];
    snprintf(want, sizeof want, "%s", ask("GAMMA"));
    input("/new");
    ask("ALPHA");
    ask("BETA");
    size_t mark = ch.doc->n;
    CHECK(input("/edit") == UI_ACT_EDIT && ch.editing >= 0 && !strcmp(ui_chat_editing_text(&ch), "BETA"));
    CHECK(ui_chat_edit(&ch, -1) && !strcmp(ui_chat_editing_text(&ch), "ALPHA")); /* F8 again: one back */
    CHECK(ui_chat_edit(&ch, -1) && !strcmp(ui_chat_editing_text(&ch), "ALPHA")); /* the first stays */
    input("/set temp 0"); /* a command ends the edit */
    CHECK(ch.editing < 0);
    CHECK(ui_chat_edit(&ch, 1) && !strcmp(ui_chat_editing_text(&ch), "BETA"));
    ui_chat_edit_cancel(&ch);
    CHECK(ch.editing < 0);
    CHECK(ui_chat_edit(&ch, 1));
    const char *got = ask("GAMMA");
    CHECKF(!strcmp(got, want), "after the edit: '%s', without BETA: '%s'", got, want);
    CHECK(ch.editing < 0);
    /* BETA and its reply stay, superseded; GAMMA says which message it replaced */
    int beta = -1, gamma = last_of(ENG_J_USER);
    for (size_t i = mark; i-- > 0;)
        if (ch.doc->e[i].kind == ENG_J_USER && !strcmp(ch.doc->e[i].text, "BETA")) {
            beta = (int)i;
            break;
        }
    CHECK(beta >= 0 && eng_journal_get_meta(ch.doc, (size_t)beta, "superseded"));
    CHECK(beta >= 0 && beta + 1 < (int)ch.doc->n && ch.doc->e[beta + 1].kind == ENG_J_ASSISTANT &&
          eng_journal_get_meta(ch.doc, (size_t)beta + 1, "superseded"));
    const char *eo = gamma >= 0 ? eng_journal_get_meta(ch.doc, (size_t)gamma, "edit_of") : NULL;
    CHECKF(eo && !strcmp(eo, "2"), "edit_of %s", eo ? eo : "(none)");
    CHECKF(!strcmp(saved_text(data, ch.name), "ALPHA|BETA|GAMMA|"), "saved: %s", saved_text(data, ch.name));
    /* /edit TEXT at once; the resumed conversation goes on from the new
     * branch: regenerating there gives what a journal holding only the
     * live turns gives (both re-read the replies' text) */
    ask("/edit DELTA");
    CHECKF(!strcmp(saved_text(data, ch.name), "ALPHA|BETA|GAMMA|DELTA|"), "saved: %s", saved_text(data, ch.name));
    eng_journal *live = eng_journal_new();
    for (size_t i = 0; live && i < ch.doc->n; i++) {
        const eng_jentry *x = &ch.doc->e[i];
        if (x->kind != ENG_J_NOTICE && !eng_journal_get_meta(ch.doc, i, "superseded"))
            eng_journal_add(live, x->kind, x->text);
    }
    char path[1400];
    snprintf(path, sizeof path, "%s/conversations/live-only.nbj", data);
    eng_err e = {{0}};
    CHECK(live && eng_journal_save(live, path, &e) == 0);
    eng_journal_free(live);
    char name[128], want2[4096];
    snprintf(name, sizeof name, "%s", ch.name);
    input("/load live-only");
    CHECK(wait_until(idle));
    input("/regen");
    CHECK(wait_until(idle));
    int r = last_of(ENG_J_ASSISTANT);
    snprintf(want2, sizeof want2, "%s", r >= 0 ? ch.doc->e[r].text : "");
    input("/load %s", name);
    CHECK(wait_until(idle));
    input("/regen");
    CHECK(wait_until(idle));
    r = last_of(ENG_J_ASSISTANT);
    CHECKF(r >= 0 && want2[0] && !strcmp(ch.doc->e[r].text, want2), "regenerated after /load: '%s', live turns only: '%s'",
           r >= 0 ? ch.doc->e[r].text : "", want2);
    /* nothing to edit: said, no edit */
    input("/new");
    mark = ch.doc->n;
    CHECK(!ui_chat_edit(&ch, 1) && notice_since(mark, "no message to edit") && ch.editing < 0);
    input("/set temp 0.8");
    input("/set max_tokens 24");
}

/* The conversation store: files are made at the first message, /reset
 * and /new keep the old file, --resume takes the newest conversation that
 * has a message and reopens its model, /load too; a failed model load
 * keeps the old model's settings and a reply running when it was asked
 * for; /export, /rename, deleting. */
static void check_store(const char *data, const char *model, const char *xdg)
{
    char b[1200], bad[1200];
    snprintf(b, sizeof b, "%s/story-b.gguf", xdg);
    snprintf(bad, sizeof bad, "%s/bad-truncated.gguf", xdg);
    copy_file(model, b, (size_t)-1);
    copy_file(model, bad, 5000);
    ui_chat_opts o = {.data_dir = data, .model = model, .settings = settings};

    /* defect 1: ALPHA, BETA, /reset, GAMMA: the first file still has both */
    input("/new");
    load_ctx = 0;
    want_path = model;
    ui_chat_load_model(&ch, model);
    CHECK(wait_until(loaded_want));
    ask("ALPHA");
    ask("BETA");
    char first[128];
    snprintf(first, sizeof first, "%s", ch.name);
    size_t mark = ch.doc->n;
    input("/reset");
    CHECK(strcmp(ch.name, first) && notice_since(0, "stays saved as"));
    ask("GAMMA");
    CHECKF(!strcmp(saved_text(data, first), "ALPHA|BETA|"), "first conversation now: %s", saved_text(data, first));
    CHECKF(!strcmp(saved_text(data, ch.name), "GAMMA|"), "second: %s", saved_text(data, ch.name));

    /* /export writes markdown */
    char md[1300];
    snprintf(md, sizeof md, "%s/out.md", xdg);
    mark = ch.doc->n;
    input("/export %s", md);
    size_t n;
    char *text = tu_read(md, &n);
    CHECK(notice_since(mark, "written to") && text && strstr(text, "## You\n\nGAMMA\n") && !strstr(text, "ALPHA"));
    free(text);

    /* the reply that ends the session is made with story-b */
    CHECK(ch.nspark > 0 && ch.decode_tps > 0);
    want_path = b;
    ui_chat_load_model(&ch, b);
    CHECK(wait_until(loaded_want));
    /* defect 9: the new model's speeds start afresh (no old sparkline scale) */
    CHECK(ch.nspark == 0 && ch.decode_tps == 0 && ch.prefill_tps == 0);
    ask("DELTA");
    char with_b[128];
    snprintf(with_b, sizeof with_b, "%s", ch.name);

    /* defect 5: a model that fails to load leaves the old settings alone */
    float temp = ch.gen.sp.temp;
    CHECK(temp != 1.25f);
    input("/model %s", bad);
    CHECK(wait_until(idle));
    CHECK(ch.load_error && !strcmp(ch.st.model_path, b));
    sync_engine();
    CHECKF(ch.gen.sp.temp == temp && ch.st.gen.sp.temp == temp, "temp %g / %g, was %g", ch.gen.sp.temp,
           ch.st.gen.sp.temp, temp);
    /* ... and asked for during a reply, it lets the reply finish */
    input("/set max_tokens 12");
    CHECK(eng_engine_send_simple(ch.en, ENG_CMD_SET_DELAY, NULL, 10) == 0);
    input("EPSILON");
    CHECK(wait_until(reply_started));
    mark = ch.doc->n;
    input("/model %s", bad);
    CHECK(notice_since(mark, "opens when this reply ends"));
    CHECK(wait_until(idle));
    CHECK(eng_engine_send_simple(ch.en, ENG_CMD_SET_DELAY, NULL, 0) == 0);
    const char *end = meta_of_last_reply("end");
    CHECKF(end && strcmp(end, eng_done_name(ENG_DONE_STOPPED)), "end: %s", end ? end : "(none)");
    CHECK(wait_until(idle) && ch.load_error && !strcmp(ch.st.model_path, b));
    input("/set max_tokens 24");

    /* defect 2: a launch without a message leaves no file */
    ui_chat_close(&ch);
    int files = count_files(data);
    CHECK(ui_chat_init(&ch, en_of_test, &o, &(eng_err){{0}}) == 0);
    CHECK(wait_until(idle));
    double t0 = ui_now_ms();
    while (ui_now_ms() - t0 < 700) { /* past the save timer */
        eng_engine_wait(ch.en, 50);
        ui_chat_pump(&ch);
        ui_chat_tick(&ch);
    }
    input("/reset");
    ui_chat_close(&ch);
    CHECKF(count_files(data) == files, "%d files, were %d", count_files(data), files);
    /* an empty file as older builds left (and a newer one): --resume skips it */
    char empty[1400];
    snprintf(empty, sizeof empty, "%s/conversations/29991231-235959.nbj", data);
    FILE *f = fopen(empty, "w");
    CHECK(f != NULL);
    if (f)
        fputs("nibble-journal 1\n", f), fclose(f);

    /* defect 3: --resume reopens the conversation's model (story-b), not -m's default */
    ui_chat_opts r = o;
    r.resume = "";
    CHECK(ui_chat_init(&ch, en_of_test, &r, &(eng_err){{0}}) == 0);
    want_path = b;
    CHECK(wait_until(loaded_want));
    CHECKF(!strcmp(ch.name, with_b), "resumed %s, not %s", ch.name, with_b);
    CHECK(notice_since(0, "resumed '"));
    ui_chat_close(&ch);
    /* with -m given, -m wins, and that is said */
    r.model_given = 1;
    CHECK(ui_chat_init(&ch, en_of_test, &r, &(eng_err){{0}}) == 0);
    want_path = model;
    CHECK(wait_until(loaded_want));
    CHECK(notice_since(0, "continuing with stories260K.gguf (-m)"));
    /* /load reopens the model too */
    input("/load %s", with_b);
    want_path = b;
    CHECK(wait_until(loaded_want));
    ui_chat_close(&ch);
    /* the model is gone: said, and the default is used. (Windows deletes
     * no file that is mapped: a new empty chat first puts the default
     * model back in the engine, and leaves no file behind.) */
    CHECK(ui_chat_init(&ch, en_of_test, &o, &(eng_err){{0}}) == 0);
    want_path = model;
    CHECK(wait_until(loaded_want));
    ui_chat_close(&ch);
    CHECK(remove(b) == 0);
    r.model_given = 0;
    CHECK(ui_chat_init(&ch, en_of_test, &r, &(eng_err){{0}}) == 0);
    want_path = model;
    CHECK(wait_until(loaded_want));
    CHECK(notice_since(0, "story-b.gguf is gone"));

    /* rename and delete */
    eng_err e = {{0}};
    char gone[128];
    snprintf(gone, sizeof gone, "%s", ch.name);
    CHECK(ui_chat_conv_rename(&ch, ch.name, "renamed", &e) == 0 && !strcmp(ch.name, "renamed"));
    CHECK(strstr(saved_text(data, "renamed"), "DELTA") && !saved_text(data, gone)[0]);
    CHECK(ui_chat_conv_rename(&ch, "renamed", first, &e) != 0); /* taken */
    files = count_files(data);
    CHECK(ui_chat_conv_delete(&ch, first, &e) == 0 && count_files(data) == files - 1);
    CHECK(ui_chat_conv_delete(&ch, "renamed", &e) == 0 && strcmp(ch.name, "renamed") && ch.doc->n == 0);
    remove(empty);
    remove(bad);

    /* /copy: the last reply or one of its code blocks, as OSC 52 */
    char *seq = ui_osc52("hello", 5);
    CHECK(seq && !strcmp(seq, "\033]52;c;aGVsbG8=\a"));
    free(seq);
    seq = ui_osc52("ab", 2);
    CHECK(seq && !strcmp(seq, "\033]52;c;YWI=\a"));
    free(seq);
    char cpath[1400];
    snprintf(cpath, sizeof cpath, "%s/conversations/code.nbj", data);
    f = fopen(cpath, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("nibble-journal 1\nentry user\ntext show me\nentry assistant\n"
              "text Here:\\n```c\\nint x;\\nint y;\\n```\\nand\\n~~~\\necho hi\\n~~~\\n\nend\n", f);
        fclose(f);
    }
    input("/load code");
    input("/copy code 1");
    CHECKF(ch.clip && !strcmp(ch.clip, "int x;\nint y;"), "clip: %s", ch.clip ? ch.clip : "(none)");
    input("/copy code");
    CHECKF(ch.clip && !strcmp(ch.clip, "echo hi"), "clip: %s", ch.clip ? ch.clip : "(none)");
    input("/copy");
    CHECK(ch.clip && !strncmp(ch.clip, "Here:\n```c\nint x;", 17));
    mark = ch.doc->n;
    input("/copy code 3");
    CHECK(notice_since(mark, "has 2 code blocks"));
    mark = ch.doc->n;
    input("/copy frobs");
    CHECK(notice_since(mark, "usage: /copy"));
    free(ch.clip);
    ch.clip = NULL;
    remove(cpath);

    /* a reply that thought: /copy and /copy code take the answer only, the
     * label counts tokens where the journal has them (else words), /export
     * folds the thinking into a <details> block; /load and /new change
     * doc_gen (what the screen's cache of laid-out replies follows) */
    snprintf(cpath, sizeof cpath, "%s/conversations/think.nbj", data);
    f = fopen(cpath, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("nibble-journal 1\nentry user\ntext q\nentry assistant\nmeta think_tokens 17\n"
              "text <think>\\nI ponder ```x``` here\\n</think>\\n\\nThe **answer**:\\n```sh\\nls\\n```\n"
              "entry user\ntext q2\nentry assistant\ntext <think>one two three</think>Short.\nend\n",
              f);
        fclose(f);
    }
    unsigned gen = ch.doc_gen;
    input("/load think");
    CHECK(ch.doc_gen != gen && ch.doc->n >= 4);
    input("/copy");
    CHECKF(ch.clip && !strcmp(ch.clip, "Short."), "clip: %s", ch.clip ? ch.clip : "(none)");
    char lab[96];
    size_t r1 = 1, r2 = 3;
    while (r1 < ch.doc->n && ch.doc->e[r1].kind != ENG_J_ASSISTANT)
        r1++;
    for (r2 = r1 + 1; r2 < ch.doc->n && ch.doc->e[r2].kind != ENG_J_ASSISTANT;)
        r2++;
    CHECK(r2 < ch.doc->n);
    CHECK(ui_chat_think_label(&ch, r1, lab, sizeof lab) && !strcmp(lab, "thought for 17 tokens"));
    CHECK(r2 < ch.doc->n && ui_chat_think_label(&ch, r2, lab, sizeof lab) && !strcmp(lab, "thought for 3 words"));
    CHECK(!ui_chat_think_label(&ch, 0, lab, sizeof lab)); /* the user's entry */
    snprintf(md, sizeof md, "%s/think.md", xdg);
    input("/export %s", md);
    text = tu_read(md, &n);
    CHECKF(text && strstr(text, "<details>\n<summary>Thinking (thought for 17 tokens)</summary>\n\n\nI ponder") &&
               strstr(text, "</details>\n\nThe **answer**:\n```sh\nls\n```\n") && !strstr(text, "<think>"),
           "%s", text ? text : "(none)");
    free(text);
    remove(md);
    /* the last reply without its thinking: its code block is the answer's */
    f = fopen(cpath, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("nibble-journal 1\nentry user\ntext q\nentry assistant\n"
              "text <think>```\\nnot this\\n```</think>A\\n```\\nthis\\n```\nend\n",
              f);
        fclose(f);
    }
    input("/load think");
    input("/copy code");
    CHECKF(ch.clip && !strcmp(ch.clip, "this"), "clip: %s", ch.clip ? ch.clip : "(none)");
    input("/copy");
    CHECKF(ch.clip && !strcmp(ch.clip, "A\n```\nthis\n```"), "clip: %s", ch.clip ? ch.clip : "(none)");
    gen = ch.doc_gen;
    input("/new");
    CHECK(ch.doc_gen != gen);
    free(ch.clip);
    ch.clip = NULL;
    remove(cpath);
}

static int spec_on(void) { return idle() && ch.st.draft_max > 0; }
static int spec_off(void) { return idle() && ch.st.draft_max == 0 && !ch.st.draft[0] && !ch.st.lookup; }

/* A model whose settings name a draft model ([model:X] draft = Y) brings
 * it when it opens; one whose draft is missing or has another vocabulary
 * says so and the chat goes on (with its lookup, if it has one); the
 * next model without one has plain decoding. */
static void check_spec_config(const char *model, const char *xdg)
{
    char target[1200], draft[1200];
    snprintf(target, sizeof target, "%s/spec-target.gguf", xdg);
    snprintf(draft, sizeof draft, "%s/spec-draft.gguf", xdg);
    copy_file(model, target, (size_t)-1);
    copy_file(model, draft, (size_t)-1); /* the model as its own draft: same vocabulary */
    spec_draft = draft;
    spec_lookup = 0;
    want_path = target;
    size_t mark = ch.doc->n;
    ui_chat_load_model(&ch, target);
    CHECK(wait_until(loaded_want));
    CHECK(wait_until(spec_on));
    CHECK(notice_since(mark, "speculative decoding on: draft spec-draft.gguf, up to 5 tokens a check"));
    CHECKF(!strcmp(ch.st.draft, draft) && ch.st.draft_max == 5 && ch.st.lookup == 0, "draft '%s' max %d",
           ch.st.draft, ch.st.draft_max);
    ask("SPEC ONE");
    const char *m = meta_of_last_reply("draft"), *acc = meta_of_last_reply("accept");
    CHECKF(m && !strcmp(m, draft), "provenance draft: %s", m ? m : "(none)");
    CHECKF(acc && !strcmp(acc, "1.000"), "accept %s (the model drafting for itself keeps all)", acc ? acc : "(none)");
    const char *checks = meta_of_last_reply("checks");
    CHECK(checks && atoi(checks) >= 1 && ch.stats.checks == (uint32_t)atoi(checks));
    CHECK(ch.stats.accept == 1.0f);

    /* another model: no draft */
    want_path = model;
    ui_chat_load_model(&ch, model);
    CHECK(wait_until(loaded_want));
    sync_engine();
    CHECK(spec_off());

    /* a missing draft: a clear error naming it, the chat goes on with the lookup */
    char missing[1300];
    snprintf(missing, sizeof missing, "%s/no-such-draft.gguf", xdg);
    spec_draft = missing;
    spec_lookup = 2;
    mark = ch.doc->n;
    want_path = target;
    ui_chat_load_model(&ch, target);
    CHECK(wait_until(loaded_want));
    sync_engine();
    CHECK(wait_until(spec_on));
    CHECK(notice_error(mark, "config: the draft model for spec-target.gguf is not used") == 1 &&
          notice_since(mark, "no-such-draft.gguf: no such file; prompt lookup alone"));
    CHECK(!ch.st.draft[0] && ch.st.lookup == 2);
    CHECK(ch.plain_tps == 0); /* a new model: no plain rate yet */
    input("/set max_tokens 80");
    ask("SPEC TWO");
    CHECK(meta_of_last_reply("lookup") && !strcmp(meta_of_last_reply("lookup"), "2"));
    /* lookup finds nothing at some steps: those are plain steps, timed */
    CHECKF(ch.stats.plain_tps > 0 && ch.plain_tps == ch.stats.plain_tps, "plain %g, stats %g", ch.plain_tps,
           ch.stats.plain_tps);
    CHECK(meta_of_last_reply("plain_tps") && atof(meta_of_last_reply("plain_tps")) > 0);
    /* off: the next reply is plain, and its rate is the plain one */
    mark = ch.doc->n;
    input("/lookup off");
    CHECK(wait_until(spec_off) && notice_since(mark, "speculative decoding off"));
    ask("SPEC PLAIN");
    CHECK(!meta_of_last_reply("lookup") && !meta_of_last_reply("checks") && ch.plain_tps == ch.decode_tps);

    /* a draft with another vocabulary, no lookup: plain decoding, said */
    char tiny[4096];
    if (tu_shared("models/llama-2-tiny-random.gguf", tiny)) {
        spec_draft = tiny;
        spec_lookup = 0;
        mark = ch.doc->n;
        ui_chat_load_model(&ch, model);
        CHECK(wait_until(idle));
        ui_chat_load_model(&ch, target);
        CHECK(wait_until(loaded_want));
        sync_engine();
        CHECK(notice_error(mark, "vocabulary") == 1 && notice_error(mark, "plain decoding") == 1);
        CHECK(spec_off());
        ask("SPEC THREE");
        CHECK(!meta_of_last_reply("draft"));
    }
    spec_draft = NULL;
    want_path = model;
    ui_chat_load_model(&ch, model);
    CHECK(wait_until(loaded_want));
    remove(target);
    remove(draft);
}

int main(void)
{
    char model[4096];
    if (!tu_asset("stories260K.gguf", model))
        return TU_SKIP;

    /* a private XDG_DATA_HOME; the data folder as the app derives it */
    char xdg[512], data[600];
    const char *tmp = getenv("TMPDIR");
    snprintf(xdg, sizeof xdg, "%s/nibble-test-chat-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!tu_mkdtemp(xdg)) {
        fprintf(stderr, "cannot make %s\n", xdg);
        return 1;
    }
#ifdef _WIN32
    _putenv_s("XDG_DATA_HOME", xdg);
#else
    setenv("XDG_DATA_HOME", xdg, 1);
#endif
    snprintf(data, sizeof data, "%s/nibble", getenv("XDG_DATA_HOME"));
    eng_err e = {{0}};
    CHECK(eng_mkdirs(data, &e) == 0);

    eng_engine *en;
    CHECK(eng_engine_start(&en, &e) == 0);
    en_of_test = en;

    /* before any model: the UI refuses what needs one */
    ui_chat_opts o0 = {.data_dir = data};
    CHECK(ui_chat_init(&ch, en, &o0, &e) == 0);
    size_t mark = ch.doc->n;
    input("hello");
    input("/regen");
    CHECK(!ch.busy && notice_since(mark, "no model is loaded") && count_kind(ch.doc, ENG_J_USER) == 0);
    ui_chat_close(&ch);

    ui_chat_opts o = {.data_dir = data, .model = model, .settings = settings};
    CHECK(ui_chat_init(&ch, en, &o, &e) == 0);
    CHECK(ch.loading);
    CHECK(wait_until(idle));
    CHECK(ch.have_model && !strcmp(ch.st.model_path, model));
    /* the sliders start at the engine's defaults, which are the sampler's */
    eng_gen_params d = eng_gen_defaults();
    CHECK(gen_eq(&ch.gen, &d) && gen_eq(&ch.st.gen, &d));
    eng_gen_params sd = {.sp = eng_sampler_defaults(), .max_tokens = d.max_tokens};
    CHECK(gen_eq(&d, &sd));

    check_set();
    check_kernel_threads();
    check_system();
    char first[4096];
    check_replies(first, sizeof first);
    check_stop();
    check_save_load(data, first);
    check_save_over(data);
    check_misc();
    check_notices(data);
    check_edit(data);
    check_store(data, model, xdg);
    check_spec_config(model, xdg);

    ui_chat_close(&ch);
    eng_engine_stop(en);
    CHECK(tu_rmtree(xdg) == 0);
    return tu_result("test_chat");
}
