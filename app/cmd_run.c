/* nibble run: load, prefill the prompt, stream the continuation to stdout
 * (whole UTF-8 characters only), timings to stderr. To a terminal, the
 * control characters a model writes are shown as escapes (ui_term_write);
 * to a pipe or file the bytes are written as they are. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app.h"
#include "session.h"
#include "spec.h"
#include "ui.h"
#include "simd.h"
#include "utf8.h"

static const char usage[] =
    "usage: nibble run [-m MODEL] [-p PROMPT | -f FILE] [options]\n"
    "\n"
    "Continue PROMPT with the model and print the continuation to stdout;\n"
    "load time, prefill and decode speed go to stderr.\n"
    "\n"
    "  -m, --model FILE       GGUF model (default: the embedded stories260K)\n"
    "  -p, --prompt TEXT      prompt (default: empty, start from BOS)\n"
    "  -f, --file FILE        read the prompt from FILE\n"
    "  -n, --n-predict N      tokens to generate (default -1: until end of text)\n"
    "  -c, --ctx-size N       context size (default: the model's, at most 4096)\n"
    "  -ctk, --cache-type-k T K cache type: f16 (default), q8_0 (about half the\n"
    "                         memory), q4_0 (about a quarter)\n"
    "  -ctv, --cache-type-v T V cache type: the same\n"
    "  -t, --threads N        worker threads (default: physical cores)\n"
    "      --kernel NAME      force a kernel set (see 'nibble info --cpu')\n"
    "      --quantize TYPE    quantize float weights as they load (q8_0, q4_0, q4_k, ...)\n"
    "      --temp T           temperature, 0 = greedy (default 0.8)\n"
    "      --top-k K          keep the K most likely tokens, 0 = off (default 40)\n"
    "      --top-p P          keep the smallest set with probability >= P (default 0.95)\n"
    "      --min-p P          drop tokens below P x the top probability (default 0.05)\n"
    "      --repeat-penalty R penalise recent tokens, 1 = off (default 1.0)\n"
    "      --repeat-last-n N  how many recent tokens the penalty sees (default 64)\n"
    "  -s, --seed S           random seed (default: from the clock)\n"
    "      --model-draft FILE speculative decoding with a smaller draft model of the\n"
    "                         same vocabulary: it guesses, the model checks the guesses\n"
    "                         in one batched pass; the output is exactly the model's\n"
    "      --draft-max N      tokens drafted per check, 1..31 (default 8)\n"
    "      --draft-min N      check drafts of at least N tokens, else decode plainly (default 0)\n"
    "      --lookup N         speculative decoding by prompt lookup: draft what followed\n"
    "                         the last earlier occurrence of the last N tokens (before\n"
    "                         the draft model, if both are given)\n"
    "      --no-bos           do not put BOS before the prompt\n"
    "      --ids              print the prompt's and the generated token ids, not text\n"
    "  -q, --quiet            no timings on stderr\n";

/* speculative decoding (spec.h): --model-draft, --draft-max, --draft-min, --lookup */
static const char *draft_path;
static int draft_max = ENG_SPEC_DEFAULT_MAX, draft_min, lookup;
static const app_flag run_flags[] = {
    APP_FLAG("--model-draft", NULL, APP_STR, &draft_path),
    APP_FLAG("--draft-max", NULL, APP_INT, &draft_max, .min = 1, .max = ENG_SPEC_MAX),
    APP_FLAG("--draft-min", NULL, APP_INT, &draft_min, .min = 0, .max = ENG_SPEC_MAX),
    APP_FLAG("--lookup", NULL, APP_INT, &lookup, .min = 1, .max = 64),
    APP_FLAG_END};
static const app_cmd run_cmd = {.name = "run", .usage = usage, .flags = run_flags};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Output with UTF-8 hold-back: bytes of an unfinished character wait for
 * the next token. b[0..ctx) is the last character already written, kept
 * as the context of the next (a zero-width joiner after an emoji stays,
 * after ASCII it is shown: ui_invisible). */
typedef struct outbuf {
    char b[256];
    size_t n, ctx;
} outbuf;

static void out_write(outbuf *o, size_t end)
{
    ui_term_write_from(stdout, o->b, o->ctx, end);
    if (end > o->ctx) { /* the last character written becomes the context */
        size_t last = end - 1;
        while (last > o->ctx && end - last < 4 && ((unsigned char)o->b[last] & 0xC0) == 0x80)
            last--;
        memmove(o->b, o->b + last, o->n - last);
        o->n -= last;
        o->ctx = end - last;
    }
}

static void out_put(outbuf *o, const char *s, size_t n, int flush)
{
    while (n > 0) {
        size_t room = sizeof o->b - o->n, take = n < room ? n : room;
        memcpy(o->b + o->n, s, take);
        o->n += take;
        s += take;
        n -= take;
        size_t ok = o->ctx + eng_utf8_complete(o->b + o->ctx, o->n - o->ctx);
        if (ok == o->ctx && o->n == sizeof o->b)
            ok = o->n; /* cannot happen with valid text; never stall */
        out_write(o, ok);
    }
    if (flush)
        out_write(o, o->n);
    fflush(stdout);
}

int cmd_run(int argc, char **argv)
{
    app_opts o;
    int r = app_parse(argc, argv, 2, &run_cmd, &o, NULL, NULL);
    if (r)
        return app_parse_status(r);
    char *owned;
    const char *prompt = app_prompt(&o, &owned);
    if (!prompt)
        return 1;
    if (!eng_utf8_valid(prompt, strlen(prompt))) {
        fprintf(stderr, "nibble run: the prompt is not valid UTF-8\n");
        free(owned);
        return 1;
    }
    const char *path = app_model_path(&o);
    eng_err e = {{0}};
    double t0 = now_s();
    eng_model *m = NULL;
    if (app_model_open(&o, path, &m, &e)) {
        ui_term_printf(stderr, "nibble: %s\n", e.msg);
        free(owned);
        return 1;
    }
    eng_session *s = NULL;
    eng_ctx_opts co = {.n_ctx = (uint32_t)o.n_ctx, .n_threads = o.threads, .type_k = o.cache_type_k,
                       .type_v = o.cache_type_v};
    if (eng_session_new_opts(m, &co, &o.sp, &s, &e)) {
        ui_term_printf(stderr, "nibble: %s\n", e.msg);
        eng_model_close(m);
        free(owned);
        return 1;
    }
    eng_model *dm = NULL;
    eng_spec *spec = NULL;
    if (draft_path && eng_model_open(draft_path, &dm, &e)) {
        ui_term_printf(stderr, "nibble: draft model: %s\n", e.msg);
        eng_session_free(s);
        eng_model_close(m);
        free(owned);
        return 1;
    }
    eng_spec_opts so = {.draft = dm, .draft_max = (uint32_t)draft_max, .draft_min = (uint32_t)draft_min,
                        .lookup = (uint32_t)lookup};
    if ((dm || lookup) && eng_spec_new(s, &so, &spec, &e)) {
        ui_term_printf(stderr, "nibble: %s\n", e.msg);
        eng_session_free(s);
        eng_model_close(dm);
        eng_model_close(m);
        free(owned);
        return 1;
    }
    double t_load = now_s() - t0;
    const eng_tok *tk = eng_model_tok(m);
    int status = 0;
    t0 = now_s();
    if (eng_session_feed_text(s, prompt, !o.no_bos, &e)) {
        ui_term_printf(stderr, "nibble: %s\n", e.msg);
        status = 1;
    }
    double t_prompt = now_s() - t0;
    uint32_t n_prompt = eng_session_pos(s);
    if (o.print_ids && !status) {
        printf("prompt:");
        for (uint32_t i = 0; i < n_prompt; i++)
            printf(" %d", eng_session_tokens(s)[i]);
        printf("\ngenerated:");
    }
    outbuf ob = {{0}, 0, 0};
    int n_gen = 0;
    const char *why = "limit";
    t0 = now_s();
    while (!status && (o.n_predict < 0 || n_gen < o.n_predict)) {
        int32_t toks[ENG_SPEC_MAX + 1];
        uint32_t got = 1;
        if ((spec ? eng_spec_pos(spec) : eng_session_pos(s)) >= eng_session_ctx_size(s)) {
            why = "context full";
            break;
        }
        if (spec) {
            uint32_t want = o.n_predict < 0 ? ENG_SPEC_MAX + 1 : (uint32_t)(o.n_predict - n_gen);
            r = eng_spec_next(spec, want, toks, &got, &e);
        } else {
            r = eng_session_next(s, &toks[0], &e);
        }
        if (r < 0) {
            ui_term_printf(stderr, "\nnibble: %s\n", e.msg);
            status = 1;
            break;
        }
        /* the end-of-text token is not shown */
        for (uint32_t i = 0; i < got - (r == 1); i++) {
            if (o.print_ids) {
                printf(" %d", toks[i]);
            } else {
                char piece[256];
                size_t n = eng_tok_piece(tk, toks[i], 0, piece, sizeof piece);
                out_put(&ob, piece, n < sizeof piece ? n : sizeof piece, 0);
            }
            n_gen++;
        }
        if (r == 1) {
            why = "end of text";
            break;
        }
    }
    double t_gen = now_s() - t0;
    out_put(&ob, "", 0, 1);
    if (o.print_ids && !status)
        printf("\n");
    else if (isatty_stdout())
        fputc('\n', stdout);
    if (!o.quiet && !status) {
        const eng_model_info *in = eng_model_get_info(m);
        ui_term_printf(stderr, /* the model's name is the file's to choose */
                "\nnibble: %s (%s, %s kernels, %d threads): load %.1f ms | prompt %u tokens, %.1f tok/s | "
                "generated %d tokens, %.1f tok/s | stop: %s\n",
                in->name, simd_type_name(in->main_type), simd_kernel_name(simd_kernel_current()),
                eng_ctx_threads(eng_session_ctx(s)), t_load * 1e3, n_prompt, n_prompt / (t_prompt > 0 ? t_prompt : 1e-9),
                n_gen, n_gen / (t_gen > 0 ? t_gen : 1e-9), why);
        if (spec) {
            const eng_spec_stats *st = eng_spec_get_stats(spec);
            ui_term_printf(stderr, "nibble: speculative (%s%s%s): %llu checks, %llu of %llu drafted tokens accepted "
                           "(%.0f%%), %.2f tokens per check\n",
                           dm ? "draft " : "", dm ? eng_model_get_info(dm)->name : "", lookup ? (dm ? ", lookup" : "lookup") : "",
                           (unsigned long long)st->steps, (unsigned long long)st->accepted,
                           (unsigned long long)st->drafted, st->drafted ? 100.0 * st->accepted / st->drafted : 0.0,
                           st->steps ? (double)st->tokens / st->steps : 0.0);
        }
    }
    eng_spec_free(spec);
    eng_model_close(dm);
    eng_session_free(s);
    eng_model_close(m);
    free(owned);
    return status;
}
