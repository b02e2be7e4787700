#include "chat.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "catalog.h"
#include "files.h"
#include "port.h"
#include "sys.h"
#include "think.h"
#include "utf8.h"

#define SAVE_EVERY_MS 500
#define EXT ".nbj"

double ui_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static const char help[] =
    "Commands:\n"
    "  /new              start a new conversation; the last one stays saved\n"
    "  /reset            the same (both keep the system prompt)\n"
    "  /regen            answer the last message again\n"
    "  /edit [TEXT]      change the last message and answer again (F8; the old\n"
    "                    branch stays in the journal); TEXT: send it at once\n"
    "  /stop             stop the reply (also Esc or Ctrl+C)\n"
    "  /system TEXT      set the system prompt (empty: none)\n"
    "  /think on|off     enable_thinking for the model's chat template\n"
    "  /set KEY VALUE    temp, top_k, top_p, min_p, repeat_penalty, repeat_last_n,\n"
    "                    max_tokens, seed\n"
    "  /model PATH       open another model file\n"
    "  /kernel NAME      switch kernel set (/kernels lists them)\n"
    "  /threads N        worker threads\n"
    "  /draft FILE|off   speculative decoding with a smaller draft model of the same\n"
    "                    vocabulary (the replies stay exactly the model's); also F3\n"
    "  /lookup N|off     speculative decoding by prompt lookup (n-grams of N tokens)\n"
    "                    The speed row shows Decode N (plain P) Accept A%: N given,\n"
    "                    P plain decoding's tok/s (see docs/TUI.md), A drafts kept\n"
    "  /save [NAME]      save now (NAME: rename this conversation's file; asks\n"
    "                    before overwriting another conversation of that name)\n"
    "  /rename NAME      rename this conversation\n"
    "  /load NAME        bring back a saved conversation and its model\n"
    "  /list [WORDS]     saved conversations, newest first (WORDS: search)\n"
    "  /export FILE.md   write this conversation as markdown\n"
    "  /copy [code [N]]  the last reply (or its Nth code block) to the clipboard\n"
    "  /help             this list          /quit  leave\n";

const char *ui_chat_help(void) { return help; }

static void mark_changed(ui_chat *ch, unsigned what) { ch->changed |= what; }

static void add_notice(ui_chat *ch, int error, const char *fmt, va_list ap)
{
    char buf[2048];
    vsnprintf(buf, sizeof buf, fmt, ap);
    int i = eng_journal_add(ch->doc, ENG_J_NOTICE, buf);
    if (i >= 0) {
        ch->doc->e[i].transient = 1;
        if (error)
            eng_journal_meta(ch->doc, (size_t)i, "level", "error");
    }
    mark_changed(ch, UI_CH_DOC);
}

void ui_chat_notice(ui_chat *ch, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_notice(ch, 0, fmt, ap);
    va_end(ap);
}

void ui_chat_error(ui_chat *ch, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_notice(ch, 1, fmt, ap);
    va_end(ap);
}

int ui_chat_is_error(const ui_chat *ch, size_t i)
{
    const char *lv = eng_journal_get_meta(ch->doc, i, "level");
    return lv && !strcmp(lv, "error");
}

/* ---- journal ---- */

static void conv_dir(const ui_chat *ch, char *buf, size_t n) { snprintf(buf, n, "%s/conversations", ch->data_dir); }

static void set_name(ui_chat *ch, const char *name)
{
    snprintf(ch->name, sizeof ch->name, "%s", name);
    char dir[1100];
    conv_dir(ch, dir, sizeof dir);
    snprintf(ch->jpath, sizeof ch->jpath, "%s/%s%s", dir, name, EXT);
}

/* 1 when the document holds a message of the user (what makes a
 * conversation worth a file). */
static int has_messages(const eng_journal *j)
{
    for (size_t i = 0; i < j->n; i++)
        if (j->e[i].kind == ENG_J_USER)
            return 1;
    return 0;
}

static int save_now(ui_chat *ch)
{
    if (!ch->data_dir[0])
        return 0;
    if (!ch->on_disk && !has_messages(ch->doc)) {
        /* nothing said yet: no file (a launch, /reset or a notice alone
         * must not leave empty conversations behind) */
        ch->unsaved = 0;
        return 0;
    }
    eng_err e = {{0}};
    char dir[1100];
    conv_dir(ch, dir, sizeof dir);
    int rc = eng_mkdirs(dir, &e);
    if (!rc)
        rc = eng_journal_save(ch->doc, ch->jpath, &e);
    ch->last_save_ms = ui_now_ms();
    if (rc) {
        if (strcmp(ch->last_error, e.msg)) {
            snprintf(ch->last_error, sizeof ch->last_error, "%s", e.msg);
            ui_chat_error(ch, "cannot save the conversation: %s", e.msg);
        }
        return rc;
    }
    ch->unsaved = 0;
    ch->on_disk = 1;
    return 0;
}

static void flush_gen(ui_chat *ch);

void ui_chat_tick(ui_chat *ch)
{
    if (ch->gen_pending && ui_now_ms() >= ch->gen_due)
        flush_gen(ch);
    if (ch->unsaved && ui_now_ms() - ch->last_save_ms >= SAVE_EVERY_MS)
        save_now(ch);
}

int ui_chat_timeout(const ui_chat *ch)
{
    double left = -1;
    if (ch->unsaved)
        left = SAVE_EVERY_MS - (ui_now_ms() - ch->last_save_ms);
    if (ch->gen_pending) {
        double g = ch->gen_due - ui_now_ms();
        left = left < 0 || g < left ? g : left;
    }
    if (!ch->unsaved && !ch->gen_pending)
        return -1;
    return left < 0 ? 0 : (int)left + 1;
}

static int valid_name(const char *s)
{
    if (!*s || *s == '.' || strlen(s) > 100)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '-' ||
              *s == '_' || *s == '.'))
            return 0;
    return 1;
}

typedef struct named {
    char *name;
    long long mtime_ns; /* to the nanosecond where the system keeps it: a
                         * conversation written in the same second as
                         * another still sorts as the newer one */
} named;

static int by_mtime(const void *a, const void *b)
{
    const named *x = a, *y = b;
    if (x->mtime_ns != y->mtime_ns)
        return x->mtime_ns < y->mtime_ns ? 1 : -1;
    return strcmp(y->name, x->name);
}

int ui_chat_list(const ui_chat *ch, char ***names)
{
    *names = NULL;
    char dir[1100];
    conv_dir(ch, dir, sizeof dir);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    named *v = NULL;
    int n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len <= strlen(EXT) || strcmp(de->d_name + len - strlen(EXT), EXT))
            continue;
        char path[1400];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (stat(path, &sb) || !S_ISREG(sb.st_mode))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            named *nv = realloc(v, (size_t)cap * sizeof *nv);
            if (!nv)
                break;
            v = nv;
        }
        v[n].name = malloc(len - strlen(EXT) + 1);
        if (!v[n].name)
            break;
        memcpy(v[n].name, de->d_name, len - strlen(EXT));
        v[n].name[len - strlen(EXT)] = 0;
        v[n].mtime_ns = nb_mtime_ns(path, &sb);
        n++;
    }
    closedir(d);
    qsort(v, (size_t)n, sizeof *v, by_mtime);
    char **out = malloc(((size_t)n + 1) * sizeof *out);
    for (int i = 0; i < n; i++) {
        if (out)
            out[i] = v[i].name;
        else
            free(v[i].name);
    }
    free(v);
    *names = out;
    return out ? n : 0;
}

static void conv_path(const ui_chat *ch, const char *name, char *buf, size_t n)
{
    char dir[1100];
    conv_dir(ch, dir, sizeof dir);
    snprintf(buf, n, "%s/%s%s", dir, name, EXT);
}

static int conv_exists(const ui_chat *ch, const char *name)
{
    char path[1400];
    struct stat sb;
    conv_path(ch, name, path, sizeof path);
    return stat(path, &sb) == 0;
}

/* A new conversation's name: its start time, with -2, -3 ... when that
 * name is taken (two /new in one second must not share a file). */
static void fresh_name(ui_chat *ch)
{
    char base[64], name[96];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(base, sizeof base, "%Y%m%d-%H%M%S", &tm);
    snprintf(name, sizeof name, "%s", base);
    for (int k = 2; conv_exists(ch, name) && k < 10000; k++)
        snprintf(name, sizeof name, "%s-%d", base, k);
    set_name(ch, name);
    ch->on_disk = 0;
}

/* The model file of a conversation: that of its last reply that was not
 * replaced (replies record it as provenance), or NULL. */
static const char *conv_model_file(const eng_journal *j, const char **name)
{
    for (size_t i = j->n; i-- > 0;) {
        if (j->e[i].kind != ENG_J_ASSISTANT)
            continue;
        const char *sup = eng_journal_get_meta(j, i, "superseded");
        if (sup && !strcmp(sup, "1"))
            continue;
        const char *f = eng_journal_get_meta(j, i, "model_file");
        if (f && *f) {
            if (name)
                *name = eng_journal_get_meta(j, i, "model");
            return f;
        }
    }
    return NULL;
}

static void summarize(ui_conv *c, const eng_journal *j)
{
    c->turns = 0;
    c->first[0] = c->model[0] = c->model_file[0] = 0;
    for (size_t i = 0; i < j->n; i++) {
        if (j->e[i].kind != ENG_J_USER)
            continue;
        if (!c->turns++) {
            size_t k = strcspn(j->e[i].text, "\n");
            if (k >= sizeof c->first)
                k = sizeof c->first - 1;
            memcpy(c->first, j->e[i].text, k);
            c->first[k] = 0;
        }
    }
    const char *mname = NULL, *mf = conv_model_file(j, &mname);
    if (mf) {
        snprintf(c->model_file, sizeof c->model_file, "%s", mf);
        snprintf(c->model, sizeof c->model, "%s", mname && *mname ? mname : eng_path_base(mf));
    }
}

int ui_chat_convs(const ui_chat *ch, ui_conv **out)
{
    *out = NULL;
    char **names;
    int n = ui_chat_list(ch, &names);
    ui_conv *v = n ? calloc((size_t)n, sizeof *v) : NULL;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (v) {
            ui_conv *c = &v[k++];
            char path[1400];
            struct stat sb;
            snprintf(c->name, sizeof c->name, "%s", names[i]);
            conv_path(ch, names[i], path, sizeof path);
            if (stat(path, &sb) == 0)
                c->mtime = (long long)sb.st_mtime;
            eng_journal *j = NULL;
            eng_err e = {{0}};
            if (eng_journal_load(path, &j, &e) == 0) {
                summarize(c, j);
                eng_journal_free(j);
            } else
                snprintf(c->error, sizeof c->error, "%.159s", e.msg);
        }
        free(names[i]);
    }
    free(names);
    *out = v;
    return k;
}

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* needle in hay, ASCII letters in any case (other bytes as they are) */
static int contains_nocase(const char *hay, const char *needle)
{
    size_t m = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < m && hay[i] && lower((unsigned char)hay[i]) == lower((unsigned char)needle[i]))
            i++;
        if (i == m)
            return 1;
    }
    return m == 0;
}

int ui_conv_filter(ui_conv *v, int n, const char *q)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!q || !*q || contains_nocase(v[i].name, q) || contains_nocase(v[i].model, q) ||
            contains_nocase(v[i].first, q))
            v[k++] = v[i];
    return k;
}

static void on_event(ui_chat *ch, eng_event *ev);

/* Hand the document's live turns (not notices, not superseded ones) to
 * the engine from a clean start; the number handed. */
static int replay_turns(ui_chat *ch)
{
    eng_journal *j = ch->doc;
    eng_engine_send_simple(ch->en, ENG_CMD_RESET, NULL, 0);
    eng_engine_send_simple(ch->en, ENG_CMD_SET_SYSTEM, j->system ? j->system : "", 0);
    int turns = 0;
    for (size_t i = 0; i < j->n; i++) {
        eng_jentry *x = &j->e[i];
        if (ch->cancel && *ch->cancel) { /* SIGTERM and the like: leave now */
            ui_chat_notice(ch, "interrupted; part of the conversation was not restored");
            break;
        }
        if (x->kind == ENG_J_NOTICE || x->transient) /* transient: a refused message */
            continue;
        const char *sup = eng_journal_get_meta(j, i, "superseded");
        if (sup && !strcmp(sup, "1"))
            continue;
        eng_cmd c = {.type = ENG_CMD_ADD_TURN, .n = x->kind == ENG_J_USER ? ENG_ROLE_USER : ENG_ROLE_ASSISTANT};
        c.text = malloc(x->len + 1);
        if (!c.text)
            break;
        memcpy(c.text, x->text, x->len + 1);
        /* A long conversation has more turns than the command queue holds:
         * while it is full, take the engine's events (so it can go on) and
         * try again, for up to ten seconds. */
        int rc;
        double t0 = ui_now_ms();
        while ((rc = eng_engine_send(ch->en, &c)) == ENG_EAGAIN && ui_now_ms() - t0 < 10000 &&
               !(ch->cancel && *ch->cancel)) {
            eng_event ev;
            if (eng_engine_poll(ch->en, &ev, 10) == 0) {
                on_event(ch, &ev);
                eng_event_free(&ev);
            }
        }
        if (rc) {
            eng_cmd_free(&c);
            ui_chat_notice(ch, "the engine is busy; part of the conversation was not restored");
            break;
        }
        turns++;
    }
    return turns;
}

/* Replace the document with a saved one and hand its turns to the engine.
 * keep_notes: the notices shown so far (at start: config warnings, why
 * the conversation's model is not reopened) follow the restored turns. */
static int restore(ui_chat *ch, const char *name, int keep_notes, eng_err *e)
{
    char path[1400];
    conv_path(ch, name, path, sizeof path);
    eng_journal *j;
    int rc = eng_journal_load(path, &j, e);
    if (rc)
        return rc;
    if (ch->unsaved)
        save_now(ch); /* the conversation being left keeps what it had */
    for (size_t i = 0; keep_notes && i < ch->doc->n; i++) {
        const eng_jentry *x = &ch->doc->e[i];
        if (x->kind != ENG_J_NOTICE || !x->transient)
            continue;
        int k = eng_journal_add(j, ENG_J_NOTICE, x->text);
        if (k < 0)
            continue;
        j->e[k].transient = 1;
        if (ui_chat_is_error(ch, i))
            eng_journal_meta(j, (size_t)k, "level", "error");
    }
    eng_journal_free(ch->doc);
    ch->doc = j;
    ch->doc_gen++;
    ch->reply = -1;
    set_name(ch, name);
    ch->on_disk = 1;
    ch->editing = -1;
    int turns = replay_turns(ch);
    ui_chat_notice(ch, "resumed '%s' (%d turns)", name, turns);
    mark_changed(ch, UI_CH_DOC);
    return 0;
}

/* The model a restored conversation was made with: reopen it when it is
 * not the one loaded (or being loaded), or say why not. keep: a model the
 * user named (-m) that wins over the conversation's. */
static void reopen_model(ui_chat *ch, const char *keep)
{
    const char *mname = NULL, *mf = conv_model_file(ch->doc, &mname);
    if (!mf)
        return;
    const char *now = ch->loading ? ch->loading_path : ch->have_model ? ch->st.model_path : "";
    if (!strcmp(mf, now))
        return;
    if (keep) {
        ui_chat_notice(ch, "this conversation was with %s; continuing with %s (-m)", eng_path_base(mf),
                       eng_path_base(keep));
        return;
    }
    struct stat sb;
    if (stat(mf, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        ui_chat_error(ch, "this conversation's model %s is gone (%s)%s%s", mf, strerror(errno),
                      *now ? "; continuing with " : "", *now ? eng_path_base(now) : "");
        return;
    }
    ui_chat_notice(ch, "reopening this conversation's model, %s", eng_path_base(mf));
    ui_chat_load_model(ch, mf);
}

int ui_chat_open(ui_chat *ch, const char *name, eng_err *e)
{
    if (!valid_name(name))
        return eng_errf(e, ENG_EINVAL, "'%s' is not a conversation name", name);
    if (ch->busy)
        return eng_errf(e, ENG_EINVAL, "a reply is running; stop it first");
    int rc = restore(ch, name, 0, e);
    if (!rc)
        reopen_model(ch, NULL);
    return rc;
}

void ui_chat_new(ui_chat *ch)
{
    if (ch->busy)
        ui_chat_stop(ch); /* its DONE finds no reply to finish: ch->reply is cleared */
    if (ch->unsaved || ch->reply >= 0) {
        if (ch->reply >= 0)
            ch->doc->e[ch->reply].partial = 1;
        save_now(ch); /* the old conversation keeps everything it had */
    }
    ch->reply = -1;
    ch->editing = -1;
    ch->orphan = ch->busy;
    eng_engine_send_simple(ch->en, ENG_CMD_RESET, NULL, 0);
    eng_journal_clear(ch->doc);
    ch->doc_gen++;
    fresh_name(ch);
    ch->unsaved = 0;
    ch->stats.ctx_used = 0;
    mark_changed(ch, UI_CH_DOC | UI_CH_STATS);
}

int ui_chat_conv_rename(ui_chat *ch, const char *from, const char *to, eng_err *e)
{
    if (!valid_name(from) || !valid_name(to))
        return eng_errf(e, ENG_EINVAL, "use letters, digits, '-', '_' and '.' for the name");
    if (!strcmp(from, to))
        return 0;
    if (conv_exists(ch, to))
        return eng_errf(e, ENG_EINVAL, "'%s' already exists", to);
    int open_one = !strcmp(from, ch->name);
    char a[1400], b[1400];
    conv_path(ch, from, a, sizeof a);
    conv_path(ch, to, b, sizeof b);
    if (open_one && !ch->on_disk) {
        set_name(ch, to); /* not written yet: only its name changes */
        return 0;
    }
    if (rename(a, b))
        return eng_errf(e, ENG_EIO, "cannot rename %s: %s", a, strerror(errno));
    if (open_one)
        set_name(ch, to);
    return 0;
}

int ui_chat_conv_delete(ui_chat *ch, const char *name, eng_err *e)
{
    if (!valid_name(name))
        return eng_errf(e, ENG_EINVAL, "'%s' is not a conversation name", name);
    char p[1400];
    conv_path(ch, name, p, sizeof p);
    if (remove(p))
        return eng_errf(e, ENG_EIO, "cannot delete %s: %s", p, strerror(errno));
    if (!strcmp(name, ch->name)) {
        ch->on_disk = 0;
        ch->unsaved = 0;
        ui_chat_new(ch);
    }
    return 0;
}

/* The conversation as markdown: a heading a turn, the replies as they
 * came (they are markdown already), notices as quotes. */
int ui_chat_export(const ui_chat *ch, const char *path, eng_err *e)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
#define PUT(str, len)                                                                                              \
    do {                                                                                                           \
        size_t l_ = (len);                                                                                         \
        if (n + l_ + 1 > cap) {                                                                                    \
            while (n + l_ + 1 > cap)                                                                               \
                cap *= 2;                                                                                          \
            char *nb_ = realloc(buf, cap);                                                                         \
            if (!nb_) {                                                                                            \
                free(buf);                                                                                         \
                return eng_errf(e, ENG_ENOMEM, "out of memory");                                                   \
            }                                                                                                      \
            buf = nb_;                                                                                             \
        }                                                                                                          \
        memcpy(buf + n, (str), l_);                                                                                \
        n += l_;                                                                                                   \
    } while (0)
#define PUTS(str) PUT((str), strlen(str))
    PUTS("# ");
    PUTS(ch->name);
    PUTS("\n\n");
    if (ch->doc->system) {
        PUTS("*System:* ");
        PUTS(ch->doc->system);
        PUTS("\n\n");
    }
    for (size_t i = 0; i < ch->doc->n; i++) {
        const eng_jentry *x = &ch->doc->e[i];
        if (x->transient)
            continue;
        const char *sup = eng_journal_get_meta(ch->doc, i, "superseded");
        if (x->kind == ENG_J_USER) {
            PUTS("## You\n\n");
            PUT(x->text, x->len);
            PUTS("\n\n");
        } else if (x->kind == ENG_J_ASSISTANT) {
            const char *m = eng_journal_get_meta(ch->doc, i, "model");
            PUTS("## ");
            PUTS(m && *m ? m : "Reply");
            if (sup && !strcmp(sup, "1"))
                PUTS(" (replaced)");
            if (x->partial)
                PUTS(" (cut short)");
            PUTS("\n\n");
            /* thinking as a block that viewers (GitHub, GitLab, most
             * editors' previews) show folded, and plain text still reads */
            ui_think th;
            char label[96];
            ui_think_split(x->text, x->len, &th);
            if (th.found && ui_chat_think_label(ch, i, label, sizeof label)) {
                PUTS("<details>\n<summary>Thinking (");
                PUTS(label);
                PUTS(")</summary>\n\n");
                PUT(x->text + th.t0, th.t1 - th.t0);
                PUTS("\n\n</details>\n\n");
            }
            PUT(x->text + th.a0, th.a1 - th.a0);
            PUTS("\n\n");
        } else {
            PUTS("> ");
            PUT(x->text, x->len);
            PUTS("\n\n");
        }
    }
#undef PUTS
#undef PUT
    int rc = eng_write_atomic(path, buf, n, e);
    free(buf);
    return rc;
}

/* ---- engine events ---- */

static void send_spec(ui_chat *ch, const char *draft, int lookup, int draft_max);

/* A reply's provenance as journal fields: each either a string as it is
 * or a number printed with its format. */
typedef struct meta_field {
    const char *key;
    const char *str; /* NULL: num with fmt */
    const char *fmt;
    double num;
} meta_field;

static void put_meta(ui_chat *ch, int idx, const meta_field *f, size_t n)
{
    char b[64];
    for (size_t i = 0; i < n; i++) {
        const char *v = f[i].str;
        if (!v) {
            snprintf(b, sizeof b, f[i].fmt, f[i].num);
            v = b;
        }
        eng_journal_meta(ch->doc, (size_t)idx, f[i].key, v);
    }
}

/* What the reply is made with (REPLY's state). Integers go through the
 * double exactly; the seed (64 bits) does not, so it is a string. */
static void reply_meta(ui_chat *ch, int idx, const eng_state *st)
{
    const eng_sampler_params *sp = &st->gen.sp;
    char seed[24];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)sp->seed);
    const meta_field f[] = {
        {"model", st->model_name, NULL, 0},   {"model_file", st->model_path, NULL, 0},
        {"model_hash", st->fingerprint, NULL, 0}, {"weight_type", st->weight_type, NULL, 0},
        {"template", st->tmpl, NULL, 0},      {"kernel", st->kernel, NULL, 0},
        {"threads", NULL, "%.0f", st->threads}, {"temp", NULL, "%.6g", sp->temp},
        {"top_k", NULL, "%.0f", sp->top_k},   {"top_p", NULL, "%.6g", sp->top_p},
        {"min_p", NULL, "%.6g", sp->min_p},   {"repeat_penalty", NULL, "%.6g", sp->repeat_penalty},
        {"repeat_last_n", NULL, "%.0f", sp->repeat_last_n}, {"seed", seed, NULL, 0},
        {"max_tokens", NULL, "%.0f", st->gen.max_tokens},
    };
    put_meta(ch, idx, f, sizeof f / sizeof *f);
    if (st->draft[0] || st->lookup) { /* speculative decoding: what drafted */
        const meta_field g[] = {
            {"lookup", NULL, "%.0f", st->lookup}, {"draft_max", NULL, "%.0f", st->draft_max}, {"draft", st->draft, NULL, 0},
        };
        put_meta(ch, idx, g, sizeof g / sizeof *g - !st->draft[0]); /* no draft model: no "draft" */
    }
}

/* How the reply went (DONE's figures). */
static void done_meta(ui_chat *ch, int idx, const eng_event *ev)
{
    const eng_stats *s = &ev->stats;
    const meta_field f[] = {
        {"tokens", NULL, "%.0f", s->n_gen},          {"decode_tps", NULL, "%.2f", s->decode_tps},
        {"prefill_tps", NULL, "%.2f", s->prefill_tps}, {"prompt_tokens", NULL, "%.0f", s->n_prompt},
        {"ttft_ms", NULL, "%.1f", s->ttft_ms},       {"gen_ms", NULL, "%.1f", s->gen_ms},
        {"end", eng_done_name(ev->code), NULL, 0},
    };
    put_meta(ch, idx, f, sizeof f / sizeof *f);
    if (s->accept >= 0) { /* speculative: share of drafted tokens kept */
        const meta_field g[] = {{"accept", NULL, "%.3f", s->accept}, {"checks", NULL, "%.0f", s->checks}};
        put_meta(ch, idx, g, 2);
        if (ch->plain_tps > 0) { /* the plain rate it is compared with (the meters' "plain") */
            const meta_field h[] = {{"plain_tps", NULL, "%.2f", ch->plain_tps}};
            put_meta(ch, idx, h, 1);
        }
    }
}

static void take_stats(ui_chat *ch, const eng_stats *s)
{
    ch->stats = *s;
    if (s->plain_tps > 0)
        ch->plain_tps = s->plain_tps;
    if (s->prefill_tps > 0)
        ch->prefill_tps = s->prefill_tps;
    if (s->ttft_ms > 0)
        ch->ttft_ms = s->ttft_ms;
    if (s->decode_tps > 0) {
        ch->decode_tps = s->decode_tps;
        if (ch->nspark == UI_SPARK) {
            memmove(ch->spark, ch->spark + 1, (UI_SPARK - 1) * sizeof *ch->spark);
            ch->nspark--;
        }
        ch->spark[ch->nspark++] = (float)s->decode_tps;
    }
    mark_changed(ch, UI_CH_STATS);
}

/* Speculation turned on, off or changed (/draft, /lookup, F3, a model's
 * config): said once, as the engine now runs it. */
static void spec_changed(ui_chat *ch, const eng_state *a, const eng_state *b)
{
    if (!strcmp(a->draft, b->draft) && a->lookup == b->lookup && a->draft_max == b->draft_max)
        return;
    if (!b->draft[0] && !b->lookup)
        ui_chat_notice(ch, "speculative decoding off");
    else
        ui_chat_notice(ch, "speculative decoding on:%s%s%s%.0d, up to %d tokens a check", b->draft[0] ? " draft " : "",
                       b->draft[0] ? eng_path_base(b->draft) : "", b->lookup ? " lookup " : "", b->lookup,
                       b->draft_max);
}

static void on_loaded(ui_chat *ch, const eng_state *st)
{
    ch->loading = 0;
    ch->have_model = 1;
    ch->load_error = 0;
    ch->prog_active = 0;
    ch->stats.ctx_used = 0;
    /* the speeds and the sparkline were another model's: start over */
    ch->nspark = 0;
    ch->decode_tps = ch->prefill_tps = ch->ttft_ms = ch->plain_tps = 0;
    if (st) { /* NULL only when the engine ran out of memory */
        ch->st = *st;
        ch->gen = st->gen;
        ch->gen_pending = 0; /* the loaded model's own settings win */
        /* the new model's own settings, kept back until it loaded (a
         * failed load leaves the old model's as they were) */
        if (ch->load_set.tmpl[0] && !strcmp(st->model_path, ch->loading_path)) {
            if (ch->load_set.kernel[0])
                ui_chat_set_kernel(ch, ch->load_set.kernel);
            ui_chat_set_gen(ch, &ch->load_set.gen);
        }
        ch->stats.ctx_size = st->ctx_size;
        char kv[64] = "";
        if (strcmp(st->cache_k, "f16") || strcmp(st->cache_v, "f16")) {
            char b[32];
            eng_format_bytes((double)st->kv_bytes, b, sizeof b);
            snprintf(kv, sizeof kv, ", KV cache %s/%s %s", st->cache_k, st->cache_v, b);
        }
        ui_chat_notice(ch, "loaded %s: %s (%s, %s, %s template, context %u%s)", eng_path_base(st->model_path),
                       st->model_name, st->arch, st->weight_type, st->tmpl, st->ctx_size, kv);
        /* its configured speculation: the LOAD turned any other off */
        const ui_model_settings *sp = &ch->spec_set;
        int mine = !strcmp(st->model_path, ch->loading_path);
        snprintf(ch->spec_for, sizeof ch->spec_for, "%s", mine ? st->model_path : "");
        snprintf(ch->draft_last, sizeof ch->draft_last, "%s", mine ? sp->draft : "");
        if ((sp->draft[0] || sp->lookup) && mine) {
            ui_chat_notice(ch, "config: speculative decoding for %s:%s%s%s%.0d", eng_path_base(st->model_path),
                           sp->draft[0] ? " draft " : "", sp->draft, sp->lookup ? " lookup " : "", sp->lookup);
            ch->spec_cfg = 1;
            send_spec(ch, sp->draft, sp->lookup, sp->draft_max);
        }
    }
    mark_changed(ch, UI_CH_STATE | UI_CH_PROGRESS);
}

/* Which engine notices belong to the conversation's story and are saved
 * with it: a context shift changes what the model remembers, so a reader
 * of the saved conversation needs it; the rest are about this session. */
static int notice_kept(int code) { return code == ENG_NOTICE_CONTEXT_SHIFT; }

/* After the reply grew by piece: when its thinking has just ended, the
 * tokens so far are the thinking's ("think_tokens", the label's figure).
 * Every form's end is a tag ending in '>', so the reply is looked at
 * again only when such a piece came (or while it is short enough to be
 * only a start). */
static void think_ended(ui_chat *ch, const char *piece)
{
    const eng_jentry *x = &ch->doc->e[ch->reply];
    if (ch->reply_thought || (!strchr(piece, '>') && x->len > 64))
        return;
    ui_think th;
    ui_think_split(x->text, x->len, &th);
    if (!th.found || th.open)
        return;
    char b[16];
    snprintf(b, sizeof b, "%u", (unsigned)ch->reply_tokens);
    eng_journal_meta(ch->doc, (size_t)ch->reply, "think_tokens", b);
    ch->reply_thought = 1;
}

int ui_chat_think_label(const ui_chat *ch, size_t i, char *buf, size_t cap)
{
    if (i >= ch->doc->n || ch->doc->e[i].kind != ENG_J_ASSISTANT)
        return 0;
    const eng_jentry *x = &ch->doc->e[i];
    ui_think th;
    ui_think_split(x->text, x->len, &th);
    if (!th.found)
        return 0;
    int writing = ch->reply == (int)i && th.open;
    const char *tok = eng_journal_get_meta(ch->doc, i, "think_tokens");
    char *end;
    unsigned long k = tok ? strtoul(tok, &end, 10) : 0;
    if (writing && ch->reply_tokens)
        snprintf(buf, cap, "thinking\u2026 %u tokens", (unsigned)ch->reply_tokens);
    else if (writing)
        snprintf(buf, cap, "thinking\u2026 %zu words", ui_think_words(x->text + th.t0, th.t1 - th.t0));
    else if (tok && *tok && !*end)
        snprintf(buf, cap, "thought for %lu tokens%s", k, th.open ? " (cut short)" : "");
    else
        snprintf(buf, cap, "thought for %zu words%s", ui_think_words(x->text + th.t0, th.t1 - th.t0),
                 th.open ? " (cut short)" : "");
    return 1;
}

static void on_event(ui_chat *ch, eng_event *ev)
{
    switch (ev->type) {
    case ENG_EV_LOADED:
        on_loaded(ch, ev->state);
        break;
    case ENG_EV_STATE:
        if (!ev->state)
            break;
        if (ch->have_model) {
            char path[sizeof ch->st.model_path];
            memcpy(path, ch->st.model_path, sizeof path);
            spec_changed(ch, &ch->st, ev->state);
            ch->st = *ev->state;
            /* STATE carries runtime settings; the model fields are the same */
            memcpy(ch->st.model_path, path, sizeof path);
        }
        if (ev->state->draft[0]) /* the menu can turn this one back on */
            snprintf(ch->draft_last, sizeof ch->draft_last, "%s", ev->state->draft);
        if (!ch->gen_pending) /* else the slider's newer value stays shown */
            ch->gen = ev->state->gen;
        mark_changed(ch, UI_CH_STATE);
        break;
    case ENG_EV_PROGRESS: {
        if (!ch->prog_active || ch->prog_stage != (int)ev->progress.stage)
            ch->prog_t0 = ui_now_ms();
        ch->prog_active = ev->progress.fraction < 1.0 || ev->progress.stage == ENG_STAGE_LOAD;
        ch->prog_stage = (int)ev->progress.stage;
        ch->prog_frac = ev->progress.fraction;
        ch->prog_eta = ev->progress.eta_s;
        if (ev->progress.stage == ENG_STAGE_PREFILL) {
            /* the gauges move while a long prompt is read, not only at
             * its first reply token */
            ch->stats.ctx_used = ev->progress.ctx_used;
            if (ev->progress.tps > 0)
                ch->prefill_tps = ev->progress.tps;
            mark_changed(ch, UI_CH_STATS);
        }
        mark_changed(ch, UI_CH_PROGRESS);
        break;
    }
    case ENG_EV_REPLY: {
        if (ch->orphan)
            break;
        int i = eng_journal_add(ch->doc, ENG_J_ASSISTANT, "");
        ch->reply_tokens = 0;
        ch->reply_thought = 0;
        if (i >= 0) {
            ch->reply = i;
            ch->doc->e[i].partial = 1;
            if (ev->state)
                reply_meta(ch, i, ev->state);
        }
        if (ev->state)
            ch->st.gen = ev->state->gen;
        ch->unsaved = 1;
        mark_changed(ch, UI_CH_DOC);
        break;
    }
    case ENG_EV_TOKEN:
        if (ch->reply >= 0 && ev->text) {
            eng_journal_append(ch->doc, (size_t)ch->reply, ev->text, strlen(ev->text));
            ch->reply_tokens = ev->n_tokens;
            ch->unsaved = 1;
            think_ended(ch, ev->text);
        }
        ch->prog_active = 0;
        mark_changed(ch, UI_CH_DOC);
        break;
    case ENG_EV_MARK:
        if (ch->reply >= 0 && ev->text) {
            eng_journal_mark(ch->doc, (size_t)ch->reply, ev->mark_token, ev->text);
            ch->unsaved = 1;
        }
        mark_changed(ch, UI_CH_DOC);
        break;
    case ENG_EV_STATS:
        take_stats(ch, &ev->stats);
        break;
    case ENG_EV_DONE:
        take_stats(ch, &ev->stats);
        if (ev->stats.accept < 0 && ev->stats.decode_tps > 0 && ev->stats.n_gen >= 8)
            ch->plain_tps = ev->stats.decode_tps; /* a plain reply: the rate speculation is measured against */
        if (ch->reply >= 0) {
            ch->doc->e[ch->reply].partial = 0;
            done_meta(ch, ch->reply, ev);
        }
        ch->reply = -1;
        ch->busy = 0;
        ch->orphan = 0;
        ch->prog_active = 0;
        flush_gen(ch); /* a slider still settling applies from the next reply */
        save_now(ch);
        mark_changed(ch, UI_CH_DOC | UI_CH_PROGRESS);
        if (ch->pending_load[0]) {
            char p[sizeof ch->pending_load];
            memcpy(p, ch->pending_load, sizeof p);
            ch->pending_load[0] = 0;
            ui_chat_load_model(ch, p);
        }
        break;
    case ENG_EV_ERROR:
        if (ev->code == ENG_CMD_LOAD) {
            ch->loading = 0;
            ch->load_error = 1;
            ch->prog_active = 0;
            ui_chat_error(ch, "cannot load %s: %s%s", ch->loading_path, ev->text ? ev->text : "?",
                           ch->have_model ? " (the previous model stays)" : "");
            mark_changed(ch, UI_CH_PROGRESS | UI_CH_STATE);
        } else if (ev->err == ENG_ETOOLONG) {
            /* refused: the message leaves the conversation (it is not in
             * the model's either) and goes back to the user */
            for (size_t i = ch->doc->n; i-- > 0;)
                if (ch->doc->e[i].kind == ENG_J_USER) {
                    ch->doc->e[i].transient = 1;
                    eng_journal_meta(ch->doc, i, "refused", "1");
                    free(ch->refused);
                    ch->refused = strdup(ch->doc->e[i].text);
                    break;
                }
            ui_chat_error(ch, "%s", ev->text ? ev->text : "the message does not fit the context");
            if (!ch->orphan)
                ch->busy = 0;
            ch->unsaved = 1;
        } else if (ev->code == ENG_CMD_SET_SPEC && ch->spec_cfg) {
            /* the config's draft is missing or does not fit this model: the
             * chat goes on, with the lookup alone if one was configured */
            ch->spec_cfg = 0;
            const ui_model_settings *sp = &ch->spec_set;
            ui_chat_error(ch, "config: the draft model for %s is not used: %s; %s", eng_path_base(ch->st.model_path),
                          ev->text ? ev->text : "?",
                          sp->lookup ? "prompt lookup alone" : "plain decoding");
            if (sp->lookup)
                send_spec(ch, NULL, sp->lookup, sp->draft_max);
        } else {
            ui_chat_error(ch, "error: %s", ev->text ? ev->text : "?");
            /* refused before a reply began: no DONE follows */
            if ((ev->code == ENG_CMD_SUBMIT || ev->code == ENG_CMD_REGENERATE) && ch->reply < 0 && !ch->orphan)
                ch->busy = 0;
        }
        snprintf(ch->last_error, sizeof ch->last_error, "%s", ev->text ? ev->text : "");
        break;
    case ENG_EV_NOTICE:
        if (ev->text) {
            int i = eng_journal_add(ch->doc, ENG_J_NOTICE, ev->text);
            if (i >= 0 && !notice_kept(ev->code))
                ch->doc->e[i].transient = 1;
            ch->unsaved = 1;
        }
        mark_changed(ch, UI_CH_DOC);
        break;
    }
}

int ui_chat_pump(ui_chat *ch)
{
    int n = 0;
    eng_event ev;
    while (eng_engine_poll(ch->en, &ev, 0) == 0) {
        on_event(ch, &ev);
        eng_event_free(&ev);
        n++;
    }
    return n;
}

/* ---- actions ---- */

static int send(ui_chat *ch, eng_cmd *c)
{
    int rc = eng_engine_send(ch->en, c);
    if (rc) {
        eng_cmd_free(c);
        ui_chat_notice(ch, "the engine is busy; try again");
    }
    return rc;
}

void ui_chat_stop(ui_chat *ch)
{
    if (ch->busy || ch->loading)
        eng_engine_send_simple(ch->en, ENG_CMD_STOP, NULL, 0);
}

int ui_chat_is_yes(const char *line)
{
    while (*line == ' ' || *line == '\t')
        line++;
    size_t n = strlen(line);
    while (n && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r' || line[n - 1] == '\n'))
        n--;
    return (n == 1 && lower((unsigned char)line[0]) == 'y') ||
           (n == 3 && lower((unsigned char)line[0]) == 'y' && lower((unsigned char)line[1]) == 'e' &&
            lower((unsigned char)line[2]) == 's');
}

void ui_chat_answer(ui_chat *ch, int yes)
{
    if (!ch->ask[0])
        return;
    char to[sizeof ch->ask_name];
    memcpy(to, ch->ask_name, sizeof to);
    ch->ask[0] = ch->ask_name[0] = 0;
    if (!yes) {
        ui_chat_notice(ch, "/save: '%s' kept as it was; this conversation is still '%s'", to, ch->name);
        return;
    }
    /* The conversation is written over the other file (a temporary file
     * renamed over it: the other stays whole until the new one is in
     * place); then its old file, if it had one, goes, as a rename would. */
    char from[sizeof ch->name], from_path[sizeof ch->jpath];
    memcpy(from, ch->name, sizeof from);
    memcpy(from_path, ch->jpath, sizeof from_path);
    int was_on_disk = ch->on_disk;
    set_name(ch, to);
    if (save_now(ch)) { /* it said why; the other file is as it was */
        set_name(ch, from);
        ch->on_disk = was_on_disk;
        ch->unsaved = 1;
        return;
    }
    if (was_on_disk && remove(from_path) && errno != ENOENT)
        ui_chat_error(ch, "/save: cannot remove the old file %s: %s", from_path, strerror(errno));
    ui_chat_notice(ch, "saved as '%s', over the other conversation of that name (%s)", ch->name, ch->jpath);
}

void ui_chat_end_reply(ui_chat *ch, int wait_ms, int cut)
{
    int r = ch->reply;
    if (cut)
        ch->pending_load[0] = 0; /* we are leaving: no model to open */
    if (!ch->busy)
        return;
    ui_chat_stop(ch);
    double t0 = ui_now_ms();
    while (ch->busy && ui_now_ms() - t0 < wait_ms) {
        eng_event ev;
        if (eng_engine_poll(ch->en, &ev, 10) == 0) {
            on_event(ch, &ev);
            eng_event_free(&ev);
        }
    }
    /* DONE cleared the mark: a reply a signal ended did not end as
     * the model or the user chose, so it is kept as cut short */
    if (cut && r >= 0 && (size_t)r < ch->doc->n && ch->doc->e[r].kind == ENG_J_ASSISTANT) {
        ch->doc->e[r].partial = 1;
        ch->unsaved = 1;
    }
}

void ui_chat_regen(ui_chat *ch)
{
    if (ch->busy || !ch->have_model) {
        ui_chat_notice(ch, ch->busy ? "a reply is running; stop it first" : "no model is loaded");
        return;
    }
    if (!has_messages(ch->doc)) {
        ui_chat_notice(ch, "nothing to answer again: no message yet");
        return;
    }
    /* the old reply stays visible, marked as replaced */
    for (size_t i = ch->doc->n; i-- > 0;) {
        eng_jentry *x = &ch->doc->e[i];
        if (x->kind == ENG_J_USER)
            break;
        if (x->kind == ENG_J_ASSISTANT) {
            eng_journal_meta(ch->doc, i, "superseded", "1");
            break;
        }
    }
    if (eng_engine_send_simple(ch->en, ENG_CMD_REGENERATE, NULL, 0) == 0)
        ch->busy = 1;
    mark_changed(ch, UI_CH_DOC);
}

void ui_chat_set_gen(ui_chat *ch, const eng_gen_params *g)
{
    eng_cmd c = {.type = ENG_CMD_SET_SAMPLER, .gen = *g};
    ch->gen = *g;
    ch->gen_pending = 0;
    send(ch, &c);
    mark_changed(ch, UI_CH_STATE);
}

void ui_chat_set_gen_soon(ui_chat *ch, const eng_gen_params *g)
{
    if (!ch->busy) {
        ui_chat_set_gen(ch, g);
        return;
    }
    ch->gen = *g;
    ch->gen_pending = 1;
    ch->gen_due = ui_now_ms() + UI_GEN_SETTLE_MS;
    mark_changed(ch, UI_CH_STATE);
}

static void flush_gen(ui_chat *ch)
{
    if (ch->gen_pending) {
        eng_gen_params g = ch->gen;
        ui_chat_set_gen(ch, &g);
    }
}

void ui_chat_set_kernel(ui_chat *ch, const char *name)
{
    eng_engine_send_simple(ch->en, ENG_CMD_SET_KERNEL, name, 0);
}

void ui_chat_set_threads(ui_chat *ch, int n) { eng_engine_send_simple(ch->en, ENG_CMD_SET_THREADS, NULL, n); }

static void send_spec(ui_chat *ch, const char *draft, int lookup, int draft_max)
{
    eng_cmd c = {.type = ENG_CMD_SET_SPEC, .n = lookup, .n2 = draft_max};
    if (draft && *draft) {
        size_t n = strlen(draft);
        if (!(c.text = malloc(n + 1))) {
            ui_chat_notice(ch, "out of memory");
            return;
        }
        memcpy(c.text, draft, n + 1);
    }
    if (eng_engine_send(ch->en, &c)) {
        eng_cmd_free(&c);
        ui_chat_notice(ch, "the engine is busy: try again");
    }
}

void ui_chat_set_spec(ui_chat *ch, const char *draft, int lookup)
{
    ch->spec_cfg = 0; /* the user's own choice now */
    int dmax = ch->st.draft_max;
    if (!dmax && !strcmp(ch->spec_for, ch->st.model_path))
        dmax = ch->spec_set.draft_max; /* off now: back on with the configured length */
    send_spec(ch, draft, lookup, dmax);
}

const char *ui_chat_draft_known(const ui_chat *ch)
{
    if (!ch->have_model)
        return NULL;
    if (ch->st.draft[0])
        return ch->st.draft;
    if (ch->draft_last[0])
        return ch->draft_last;
    return NULL;
}

void ui_chat_load_model(ui_chat *ch, const char *path)
{
    if (ch->busy) {
        /* the reply runs to its end (a file that turns out not to load
         * must not cost it); the switch follows */
        snprintf(ch->pending_load, sizeof ch->pending_load, "%s", path);
        ui_chat_notice(ch, "%s opens when this reply ends (Esc stops it now)", eng_path_base(path));
        return;
    }
    ui_model_settings s;
    memset(&s, 0, sizeof s);
    s.gen = ch->gen;
    snprintf(s.tmpl, sizeof s.tmpl, "auto");
    if (ch->settings)
        ch->settings(ch->settings_ud, path, &s);
    ch->load_set = s; /* sent once it has loaded (on_loaded) */
    ch->spec_set = s;
    if (!ch->have_model) {
        /* nothing to keep: the first model's settings go first, so its
         * first reply has them even if LOADED is not yet taken */
        if (s.kernel[0])
            ui_chat_set_kernel(ch, s.kernel);
        ui_chat_set_gen(ch, &s.gen);
        ch->load_set.tmpl[0] = 0;
    }
    if (s.system[0] && !ch->doc->system) {
        eng_journal_set_system(ch->doc, s.system);
        eng_engine_send_simple(ch->en, ENG_CMD_SET_SYSTEM, s.system, 0);
    }
    eng_cmd c = {.type = ENG_CMD_LOAD, .n = s.n_ctx, .n2 = s.threads};
    snprintf(c.name, sizeof c.name, "%s", s.tmpl);
    snprintf(c.kv_type[0], sizeof c.kv_type[0], "%s", s.cache_k);
    snprintf(c.kv_type[1], sizeof c.kv_type[1], "%s", s.cache_v);
    c.text = malloc(strlen(path) + 1);
    if (!c.text)
        return;
    strcpy(c.text, path);
    snprintf(ch->loading_path, sizeof ch->loading_path, "%s", path);
    if (send(ch, &c) == 0) {
        ch->loading = 1;
        ch->prog_active = 1;
        ch->prog_frac = 0;
        ch->prog_eta = 0;
        ch->prog_t0 = ui_now_ms();
        ch->prog_stage = ENG_STAGE_LOAD;
        mark_changed(ch, UI_CH_PROGRESS);
    }
}

static int superseded(const eng_journal *j, size_t i)
{
    const char *sup = eng_journal_get_meta(j, i, "superseded");
    return sup && !strcmp(sup, "1");
}

const char *ui_chat_edit(ui_chat *ch, int back)
{
    if (ch->busy) {
        ui_chat_notice(ch, "a reply is running; stop it (Esc) before editing a message");
        return NULL;
    }
    /* the live user messages, last first */
    int from = (int)ch->doc->n, want = back;
    if (back < 0) {
        if (ch->editing < 0)
            want = 1;
        else {
            from = ch->editing;
            want = 1;
        }
    }
    int k = 0;
    for (int i = from; i-- > 0;) {
        if (ch->doc->e[i].kind != ENG_J_USER || ch->doc->e[i].transient || superseded(ch->doc, (size_t)i))
            continue;
        if (++k == want) {
            ch->editing = i;
            mark_changed(ch, UI_CH_DOC);
            return ch->doc->e[i].text;
        }
    }
    if (ch->editing >= 0 && back < 0) /* already at the first: stay on it */
        return ch->doc->e[ch->editing].text;
    ui_chat_notice(ch, k ? "there is no earlier message to edit" : "no message to edit yet");
    return NULL;
}

void ui_chat_edit_cancel(ui_chat *ch)
{
    if (ch->editing >= 0)
        mark_changed(ch, UI_CH_DOC);
    ch->editing = -1;
}

const char *ui_chat_editing_text(const ui_chat *ch)
{
    return ch->editing >= 0 && (size_t)ch->editing < ch->doc->n ? ch->doc->e[ch->editing].text : NULL;
}

/* The message being edited and all after it become an earlier branch:
 * kept in the journal, superseded, out of the model's context; the
 * engine starts again from the turns before it (the KV cache keeps their
 * common prefix, so little is read again). */
static void branch_at(ui_chat *ch, size_t at)
{
    int users = 0;
    for (size_t i = at; i < ch->doc->n; i++) {
        if (ch->doc->e[i].kind == ENG_J_NOTICE || superseded(ch->doc, i))
            continue;
        if (ch->doc->e[i].kind == ENG_J_USER && !ch->doc->e[i].transient)
            users++;
        eng_journal_meta(ch->doc, i, "superseded", "1");
    }
    eng_engine_send_simple(ch->en, ENG_CMD_DROP_TURNS, NULL, users);
    ch->unsaved = 1;
}

static void submit(ui_chat *ch, const char *text)
{
    if (!ch->have_model) {
        ui_chat_notice(ch, ch->loading ? "the model is still loading" : "no model is loaded: F2 or /model PATH");
        return;
    }
    if (ch->busy) {
        ui_chat_notice(ch, "a reply is running; wait or stop it (Esc)");
        return;
    }
    if (!eng_utf8_valid(text, strlen(text))) {
        /* kept out of the conversation too: its journal would not load */
        ui_chat_error(ch, "the message is not valid UTF-8; nothing was sent");
        return;
    }
    int edited = ch->editing;
    if (edited >= 0 && (size_t)edited < ch->doc->n) {
        branch_at(ch, (size_t)edited);
        ch->editing = -1;
    }
    eng_cmd c = {.type = ENG_CMD_SUBMIT};
    c.text = malloc(strlen(text) + 1);
    if (!c.text)
        return;
    strcpy(c.text, text);
    if (send(ch, &c))
        return;
    int u = eng_journal_add(ch->doc, ENG_J_USER, text);
    if (u >= 0 && edited >= 0) {
        /* the message it replaces, as the how-manieth user message (doc
         * indices move: transient notices are not saved) */
        int nth = 0;
        for (int i = 0; i <= edited; i++)
            nth += ch->doc->e[i].kind == ENG_J_USER;
        char b[32];
        snprintf(b, sizeof b, "%d", nth);
        eng_journal_meta(ch->doc, (size_t)u, "edit_of", b);
    }
    ch->busy = 1;
    save_now(ch);
    mark_changed(ch, UI_CH_DOC);
}

static int set_key(ui_chat *ch, const char *key, const char *val)
{
    eng_gen_params g = ch->gen;
    char *end;
    double v = strtod(val, &end);
    if (end == val || *end)
        return -1;
    if (!strcmp(key, "temp") || !strcmp(key, "temperature"))
        g.sp.temp = (float)v;
    else if (!strcmp(key, "top_k") || !strcmp(key, "top-k"))
        g.sp.top_k = (int32_t)v;
    else if (!strcmp(key, "top_p") || !strcmp(key, "top-p"))
        g.sp.top_p = (float)v;
    else if (!strcmp(key, "min_p") || !strcmp(key, "min-p"))
        g.sp.min_p = (float)v;
    else if (!strcmp(key, "repeat_penalty") || !strcmp(key, "repeat-penalty") || !strcmp(key, "repeat"))
        g.sp.repeat_penalty = (float)v;
    else if (!strcmp(key, "repeat_last_n") || !strcmp(key, "repeat-last-n"))
        g.sp.repeat_last_n = (int32_t)v;
    else if (!strcmp(key, "max_tokens") || !strcmp(key, "max-tokens") || !strcmp(key, "n"))
        g.max_tokens = (int32_t)v;
    else if (!strcmp(key, "seed"))
        g.sp.seed = (uint64_t)v;
    else
        return -2;
    const char *bad = eng_sampler_check(&g.sp);
    if (bad) {
        ui_chat_notice(ch, "/set: %s", bad);
        return -3; /* said why; nothing changed */
    }
    ui_chat_set_gen(ch, &g);
    return 0;
}

static void list_kernels(ui_chat *ch)
{
    char buf[1024];
    size_t u = 0;
    for (int k = 0; k < eng_kernel_count() && u < sizeof buf; k++) {
        eng_kernel_desc kd;
        eng_kernel_describe(k, &kd);
        u += (size_t)snprintf(buf + u, sizeof buf - u, "\n  %s %-13s %s", !strcmp(kd.name, ch->st.kernel) ? "*" : " ",
                              kd.name, kd.usable ? "usable" : kd.why);
    }
    ui_chat_notice(ch, "kernel sets (* in use):%s", buf);
}

/* ---- /copy ---- */

char *ui_osc52(const char *text, size_t n)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t m = (n + 2) / 3 * 4;
    char *out = malloc(m + 16);
    if (!out)
        return NULL;
    size_t u = (size_t)sprintf(out, "\033]52;c;");
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
        out[u++] = b64[v >> 18 & 63];
        out[u++] = b64[v >> 12 & 63];
        out[u++] = i + 1 < n ? b64[v >> 6 & 63] : '=';
        out[u++] = i + 2 < n ? b64[v & 63] : '=';
    }
    out[u++] = '\a';
    out[u] = 0;
    return out;
}

/* The last reply that was not replaced, or -1. */
static int last_reply(const ui_chat *ch)
{
    for (size_t i = ch->doc->n; i-- > 0;) {
        if (ch->doc->e[i].kind != ENG_J_ASSISTANT)
            continue;
        const char *sup = eng_journal_get_meta(ch->doc, i, "superseded");
        if (!(sup && !strcmp(sup, "1")))
            return (int)i;
    }
    return -1;
}

/* The want-th fenced code block (``` or ~~~ lines) of s, 1-based, or the
 * last when want is 0: its body into *start / *len. Returns how many
 * blocks s has. An unclosed last block runs to the end (a reply cut short). */
static int code_block(const char *s, int want, const char **start, size_t *len)
{
    int k = 0;
    const char *p = s, *body = NULL;
    char fence = 0;
    *start = NULL;
    *len = 0;
    while (*p) {
        const char *eol = strchr(p, '\n');
        const char *next = eol ? eol + 1 : p + strlen(p);
        const char *q = p;
        while (*q == ' ' && q - p < 4)
            q++;
        int is_fence = (q[0] == '`' || q[0] == '~') && q[1] == q[0] && q[2] == q[0];
        if (is_fence && !fence) {
            fence = q[0];
            body = next;
        } else if (is_fence && q[0] == fence) {
            k++;
            if (!want || k == want)
                *start = body, *len = (size_t)(p - body);
            fence = 0;
        }
        p = next;
    }
    if (fence) {
        k++;
        if (!want || k == want)
            *start = body, *len = strlen(body);
    }
    if (*len && (*start)[*len - 1] == '\n')
        (*len)--;
    return k;
}

static void copy_cmd(ui_chat *ch, const char *arg)
{
    int r = last_reply(ch);
    if (r < 0) {
        ui_chat_notice(ch, "/copy: no reply yet");
        return;
    }
    int code = !strncmp(arg, "code", 4) && (!arg[4] || arg[4] == ' ');
    long want = 0;
    if (code) {
        char *end;
        want = strtol(arg + 4, &end, 10);
        while (*end == ' ')
            end++;
        if (*end || want < 0) {
            ui_chat_notice(ch, "usage: /copy code [N] (N: the block's number, 1 first; none: the last)");
            return;
        }
    } else if (*arg) {
        ui_chat_notice(ch, "usage: /copy (the last reply) or /copy code [N]");
        return;
    }
    /* the answer: a thinking block is not part of what one copies */
    ui_think th;
    ui_think_split(ch->doc->e[r].text, ch->doc->e[r].len, &th);
    char *answer = malloc(th.a1 - th.a0 + 1);
    if (!answer) {
        ui_chat_error(ch, "/copy: out of memory");
        return;
    }
    memcpy(answer, ch->doc->e[r].text + th.a0, th.a1 - th.a0);
    answer[th.a1 - th.a0] = 0;
    const char *s = answer;
    size_t n = th.a1 - th.a0;
    if (code) {
        int k = code_block(answer, (int)want, &s, &n);
        if (!s) {
            if (k)
                ui_chat_notice(ch, "/copy code: the last reply has %d code block%s", k, k == 1 ? "" : "s");
            else
                ui_chat_notice(ch, "/copy code: the last reply has no code block");
            free(answer);
            return;
        }
    }
    free(ch->clip);
    ch->clip = malloc(n + 1);
    if (ch->clip) {
        memcpy(ch->clip, s, n);
        ch->clip[n] = 0;
        ui_chat_notice(ch, "copied %zu bytes through the terminal (OSC 52). If the clipboard did not take them, "
                           "the terminal does not allow it (in tmux: set -g set-clipboard on); select with the mouse "
                           "instead",
                       n);
    }
    free(answer);
}

enum ui_action ui_chat_input(ui_chat *ch, const char *text)
{
    if (text[0] != '/' || text[1] == '/') {
        submit(ch, text[0] == '/' ? text + 1 : text); /* "//x" sends "/x" */
        return UI_ACT_NONE;
    }
    char cmd[32];
    size_t n = strcspn(text + 1, " \t\n");
    snprintf(cmd, sizeof cmd, "%.*s", (int)(n < 31 ? n : 31), text + 1);
    const char *arg = text + 1 + n;
    while (*arg == ' ' || *arg == '\t')
        arg++;
    if (strcmp(cmd, "edit")) /* an edit ends at any other command */
        ui_chat_edit_cancel(ch);
    if (!strcmp(cmd, "quit") || !strcmp(cmd, "exit") || !strcmp(cmd, "q"))
        return UI_ACT_QUIT;
    if (!strcmp(cmd, "help") || !strcmp(cmd, "?"))
        return UI_ACT_HELP;
    if (!strcmp(cmd, "reset") || !strcmp(cmd, "new")) {
        char old[sizeof ch->name];
        int kept = ch->on_disk || has_messages(ch->doc);
        snprintf(old, sizeof old, "%s", ch->name);
        ui_chat_new(ch);
        if (kept && ch->data_dir[0])
            ui_chat_notice(ch, "new conversation%s; the last one stays saved as '%s' (/load %s)",
                           ch->doc->system ? " (the system prompt stays)" : "", old, old);
        else
            ui_chat_notice(ch, "new conversation%s", ch->doc->system ? " (the system prompt stays)" : "");
    } else if (!strcmp(cmd, "regen") || !strcmp(cmd, "regenerate"))
        ui_chat_regen(ch);
    else if (!strcmp(cmd, "edit")) {
        /* /edit: the last message into the input (the screen; line mode
         * shows it); /edit TEXT: TEXT replaces the last message at once */
        const char *was = ui_chat_edit(ch, 1);
        if (!was)
            return UI_ACT_NONE;
        if (*arg) {
            submit(ch, arg);
            if (ch->editing >= 0) /* not sent (no model, bad UTF-8): no edit */
                ui_chat_edit_cancel(ch);
            return UI_ACT_NONE;
        }
        return UI_ACT_EDIT;
    }
    else if (!strcmp(cmd, "stop"))
        ui_chat_stop(ch);
    else if (!strcmp(cmd, "system")) {
        eng_journal_set_system(ch->doc, arg);
        eng_engine_send_simple(ch->en, ENG_CMD_SET_SYSTEM, arg, 0);
        ui_chat_notice(ch, *arg ? "system prompt set (from the next reply)" : "system prompt removed");
        ch->unsaved = 1;
    } else if (!strcmp(cmd, "think")) {
        /* enable_thinking reaches the model's own (Jinja) chat template */
        int on = !strcmp(arg, "on") ? 1 : !strcmp(arg, "off") ? 0 : !strcmp(arg, "default") ? -1 : -2;
        if (on == -2)
            ui_chat_notice(ch, "usage: /think on|off|default (enable_thinking for the chat template)");
        else {
            eng_engine_send_simple(ch->en, ENG_CMD_SET_THINKING, NULL, on);
            ui_chat_notice(ch, "thinking %s (from the next reply%s)", on < 0 ? "as the template decides" : arg,
                           strcmp(ch->st.tmpl, "jinja") ? "; only a model's own chat template reads it" : "");
        }
    } else if (!strcmp(cmd, "set")) {
        char key[32], val[64];
        if (sscanf(arg, "%31s %63s", key, val) != 2)
            ui_chat_notice(ch, "usage: /set KEY VALUE (temp, top_k, top_p, min_p, repeat_penalty, "
                               "repeat_last_n, max_tokens, seed)");
        else {
            int r = set_key(ch, key, val);
            if (r == -1)
                ui_chat_notice(ch, "/set %s: '%s' is not a number", key, val);
            else if (r == -2)
                ui_chat_notice(ch, "/set: unknown key '%s'", key);
            else if (r == 0)
                ui_chat_notice(ch, "%s = %s", key, val);
        }
    } else if (!strcmp(cmd, "model")) {
        if (!*arg)
            ui_chat_notice(ch, "usage: /model PATH");
        else
            ui_chat_load_model(ch, arg);
    } else if (!strcmp(cmd, "kernel")) {
        if (!*arg)
            list_kernels(ch);
        else
            ui_chat_set_kernel(ch, arg);
    } else if (!strcmp(cmd, "kernels"))
        list_kernels(ch);
    else if (!strcmp(cmd, "draft")) {
        if (!*arg)
            ui_chat_notice(ch, "usage: /draft FILE|off (now: %s)", ch->st.draft[0] ? ch->st.draft : "off");
        else
            ui_chat_set_spec(ch, strcmp(arg, "off") ? arg : NULL, ch->st.lookup);
    } else if (!strcmp(cmd, "lookup")) {
        char *end;
        long n = strtol(arg, &end, 10);
        if (!strcmp(arg, "off"))
            ui_chat_set_spec(ch, ch->st.draft, 0);
        else if (end == arg || *end || n < 1 || n > 64)
            ui_chat_notice(ch, "usage: /lookup N|off (N: 1..64 tokens; now: %d)", ch->st.lookup);
        else
            ui_chat_set_spec(ch, ch->st.draft, (int)n);
    } else if (!strcmp(cmd, "threads")) {
        char *end;
        long t = strtol(arg, &end, 10);
        if (end == arg || *end || t < 0 || t > 256)
            ui_chat_notice(ch, "usage: /threads N (1..256, 0: all cores)");
        else
            ui_chat_set_threads(ch, (int)t);
    } else if (!strcmp(cmd, "save")) {
        eng_err e = {{0}};
        if (!ch->data_dir[0])
            ui_chat_notice(ch, "nothing is saved: no data folder");
        else if (*arg && !valid_name(arg))
            ui_chat_notice(ch, "/save: use letters, digits, '-', '_' and '.' for the name");
        else if (!has_messages(ch->doc) && !ch->on_disk)
            ui_chat_notice(ch, "nothing to save yet: the file is made at the first message");
        else if (*arg && strcmp(arg, ch->name) && conv_exists(ch, arg)) {
            /* another conversation has that name: ask before replacing it */
            snprintf(ch->ask_name, sizeof ch->ask_name, "%s", arg);
            snprintf(ch->ask, sizeof ch->ask, "overwrite '%s' (another saved conversation) with this one? [y/N]", arg);
        } else if (*arg && ui_chat_conv_rename(ch, ch->name, arg, &e))
            ui_chat_error(ch, "/save %s: %s", arg, e.msg);
        else if (save_now(ch) == 0)
            ui_chat_notice(ch, "saved as '%s' (%s)", ch->name, ch->jpath);
    } else if (!strcmp(cmd, "load")) {
        eng_err e = {{0}};
        if (!*arg || !valid_name(arg))
            ui_chat_notice(ch, "usage: /load NAME (/list shows the names)");
        else if (ch->busy)
            ui_chat_notice(ch, "a reply is running; stop it first");
        else if (ui_chat_open(ch, arg, &e))
            ui_chat_error(ch, "cannot load '%s': %s", arg, e.msg);
    } else if (!strcmp(cmd, "list")) {
        ui_conv *v;
        int k = ui_chat_convs(ch, &v);
        k = ui_conv_filter(v, k, arg);
        char buf[4000];
        size_t u = 0;
        buf[0] = 0;
        for (int i = 0; i < k && i < 20 && u < sizeof buf - 1; i++) {
            char when[32] = "";
            time_t tt = (time_t)v[i].mtime;
            struct tm tm;
            if (localtime_r(&tt, &tm))
                strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
            u += (size_t)snprintf(buf + u, sizeof buf - u, "\n  %-20s %s  %-14.14s %3d  %.40s%s", v[i].name, when,
                                  v[i].error[0] ? "(unreadable)" : v[i].model[0] ? v[i].model : "-", v[i].turns,
                                  v[i].error[0] ? v[i].error : v[i].first,
                                  !strcmp(v[i].name, ch->name) ? "  (this one)" : "");
        }
        free(v);
        if (*arg)
            ui_chat_notice(ch, k ? "conversations with '%s', newest first:%s%s" : "no conversation has '%s'%s%s", arg,
                           buf, k > 20 ? "\n  ..." : "");
        else
            ui_chat_notice(ch, k ? "saved conversations, newest first (name, date, model, turns, first line):%s%s"
                                 : "no saved conversations yet%s%s",
                           buf, k > 20 ? "\n  ..." : "");
    } else if (!strcmp(cmd, "export")) {
        eng_err e = {{0}};
        if (!*arg)
            ui_chat_notice(ch, "usage: /export FILE.md");
        else if (ui_chat_export(ch, arg, &e))
            ui_chat_error(ch, "/export: %s", e.msg);
        else
            ui_chat_notice(ch, "written to %s", arg);
    } else if (!strcmp(cmd, "copy"))
        copy_cmd(ch, arg);
    else if (!strcmp(cmd, "rename")) {
        eng_err e = {{0}};
        if (!*arg)
            ui_chat_notice(ch, "usage: /rename NAME (this conversation's new name)");
        else if (ui_chat_conv_rename(ch, ch->name, arg, &e))
            ui_chat_error(ch, "/rename: %s", e.msg);
        else
            ui_chat_notice(ch, "this conversation is now '%s'", ch->name);
    } else
        ui_chat_notice(ch, "unknown command /%s; /help lists them", cmd);
    return UI_ACT_NONE;
}

/* ---- setup ---- */

int ui_chat_init(ui_chat *ch, eng_engine *en, const ui_chat_opts *o, eng_err *e)
{
    memset(ch, 0, sizeof *ch);
    ch->editing = -1;
    ch->en = en;
    ch->reply = -1;
    ch->settings = o->settings;
    ch->settings_ud = o->settings_ud;
    ch->model_dirs = o->model_dirs;
    ch->n_dirs = o->n_dirs;
    ch->doc = eng_journal_new();
    if (!ch->doc)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    ch->gen = eng_gen_defaults();
    if (o->data_dir)
        snprintf(ch->data_dir, sizeof ch->data_dir, "%s", o->data_dir);
    /* a new conversation is named by its start time */
    fresh_name(ch);
    if (ch->data_dir[0]) { /* what saves killed midway left (NAME.nbj.tmp.PID) */
        char dir[1100];
        conv_dir(ch, dir, sizeof dir);
        eng_journal_clean_tmp(dir);
    }
    /* the conversation first (its model may be the one to open), then the
     * model, then the turns */
    eng_journal *conv = NULL; /* read for its model only */
    char want[128] = "";
    if (o->resume && ch->data_dir[0]) {
        if (*o->resume)
            snprintf(want, sizeof want, "%s", o->resume);
        else {
            /* the newest conversation that has a message: a file with none
             * (an older build wrote them at every launch) is no conversation */
            ui_conv *v;
            int k = ui_chat_convs(ch, &v);
            for (int i = 0; i < k && !want[0]; i++)
                if (v[i].turns > 0)
                    snprintf(want, sizeof want, "%s", v[i].name);
            free(v);
            if (!want[0])
                ui_chat_notice(ch, "--resume: no saved conversation yet; starting a new one");
        }
    }
    const char *model = o->model;
    char conv_model[1024] = "";
    if (want[0]) {
        char path[1400];
        eng_err re = {{0}};
        conv_path(ch, want, path, sizeof path);
        if (!valid_name(want))
            ui_chat_error(ch, "--resume: '%s' is not a conversation name", want), want[0] = 0;
        else if (eng_journal_load(path, &conv, &re))
            ui_chat_error(ch, "--resume: %s", re.msg), want[0] = 0;
        else {
            const char *mf = conv_model_file(conv, NULL);
            struct stat sb;
            if (mf && !(o->model_given && model)) {
                if (stat(mf, &sb) == 0 && S_ISREG(sb.st_mode))
                    snprintf(conv_model, sizeof conv_model, "%s", mf), model = conv_model;
                else
                    ui_chat_error(ch, "--resume: this conversation's model %s is gone (%s)%s%s", mf, strerror(errno),
                                  model ? "; continuing with " : "", model ? eng_path_base(model) : "");
            } else if (mf && model && strcmp(mf, model))
                ui_chat_notice(ch, "this conversation was with %s; continuing with %s (-m)", eng_path_base(mf),
                               eng_path_base(model));
            eng_journal_free(conv);
        }
    }
    if (model)
        ui_chat_load_model(ch, model);
    if (want[0]) {
        eng_err re = {{0}};
        if (restore(ch, want, 1, &re))
            ui_chat_error(ch, "--resume: %s", re.msg);
    }
    ch->unsaved = 0;
    return 0;
}

void ui_chat_close(ui_chat *ch)
{
    if (ch->unsaved)
        save_now(ch);
    eng_journal_free(ch->doc);
    ch->doc = NULL;
    free(ch->refused);
    ch->refused = NULL;
    free(ch->clip);
    ch->clip = NULL;
}
