/* nibble template: render a chat template over a conversation, exactly
 * as the chat would (and as Hugging Face transformers does), and print
 * only the rendered text. For checking a model's template and comparing
 * with the reference renderer (bench/template_conformance.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "gguf.h"
#include "jinja.h"
#include "tokenizer.h"

static const char usage[] =
    "usage: nibble template [-m MODEL | --file T.jinja] --messages M.json [options]\n"
    "\n"
    "Render a chat template (Jinja, as models ship it in tokenizer.chat_template)\n"
    "over a conversation and print exactly the rendered text on stdout.\n"
    "M.json is a JSON array of {\"role\": ..., \"content\": ...} objects; other keys\n"
    "(tool_calls, reasoning_content, ...) reach the template as they are.\n"
    "\n"
    "  -m, --model MODEL        take the template, BOS and EOS from this GGUF\n"
    "      --file T.jinja       the template from a file (overrides the model's)\n"
    "      --messages M.json    the conversation (required)\n"
    "      --bos S, --eos S     bos_token / eos_token (default: the model's, else \"\")\n"
    "      --no-generation-prompt   add_generation_prompt = false (default true)\n"
    "      --var KEY=JSON       one more variable, e.g. --var enable_thinking=false\n"
    "                           or --var 'tools=[...]' (repeatable)\n"
    "\n"
    "tools and documents are none unless given with --var. A template error\n"
    "(raise_exception, a type error, a runaway loop) exits 1 with one message.\n";

int cmd_template(int argc, char **argv)
{
    const char *file = NULL, *messages = NULL, *bos = NULL, *eos = NULL, *model = NULL;
    int no_gen = 0;
    /* --var may repeat: take those out before the one parser sees the rest */
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    const char **vars = calloc((size_t)argc + 1, sizeof *vars);
    if (!rest || !vars) {
        free(rest);
        free(vars);
        fprintf(stderr, "nibble template: out of memory\n");
        return 1;
    }
    int nrest = 0, nvars = 0;
    for (int i = 0; i < argc; i++) {
        if (i >= 2 && !strcmp(argv[i], "--var")) {
            if (i + 1 >= argc) {
                free(rest);
                free(vars);
                return app_usage_error("template", "--var", "", "needs KEY=JSON");
            }
            vars[nvars++] = argv[++i];
        } else if (i >= 2 && !strncmp(argv[i], "--var=", 6))
            vars[nvars++] = argv[i] + 6;
        else
            rest[nrest++] = argv[i];
    }
    const app_flag flags[] = {
        APP_FLAG("-m", "--model", APP_STR, &model),
        APP_FLAG("--file", NULL, APP_STR, &file),
        APP_FLAG("--messages", NULL, APP_STR, &messages),
        APP_FLAG("--bos", NULL, APP_STR, &bos),
        APP_FLAG("--eos", NULL, APP_STR, &eos),
        APP_FLAG("--no-generation-prompt", NULL, APP_ON, &no_gen),
        APP_FLAG_END,
    };
    const app_cmd cmd = {.name = "template", .usage = usage, .flags = flags, .required = "--messages"};
    int r = app_parse(nrest, rest, 2, &cmd, NULL, NULL, NULL);
    int rc = 1;
    char *src = NULL, *msgs = NULL, *json = NULL, *out = NULL, *model_tmpl = NULL, *mbos = NULL, *meos = NULL;
    eng_gguf *g = NULL;
    eng_jinja *t = NULL;
    eng_err e = {{0}};
    size_t n = 0;
    if (r) {
        rc = app_parse_status(r);
        goto done;
    }
    for (int i = 0; i < nvars; i++) {
        const char *eq = strchr(vars[i], '=');
        if (!eq || eq == vars[i]) {
            rc = app_usage_error("template", "--var", vars[i], "expected KEY=JSON");
            goto done;
        }
    }
    if (!file && !model) {
        rc = app_usage_error("template", "--file", "", "give a template with --file or a model with -m");
        goto done;
    }
    if (model) {
        eng_tok *tk = NULL;
        eng_str jt;
        if (eng_gguf_open(model, &g, &e)) {
            fprintf(stderr, "nibble template: %s: %s\n", model, e.msg);
            goto done;
        }
        if (!file) {
            if (eng_gguf_get_str(g, "tokenizer.chat_template", &jt, NULL) || !jt.len) {
                fprintf(stderr, "nibble template: %s: the model has no chat template (tokenizer.chat_template)\n",
                        model);
                goto done;
            }
            model_tmpl = malloc(jt.len + 1);
            if (!model_tmpl)
                goto oom;
            memcpy(model_tmpl, jt.ptr, jt.len);
            model_tmpl[jt.len] = 0;
            n = jt.len;
        }
        if (eng_tok_from_gguf(g, &tk, &e) == 0) {
            int32_t ids[2] = {eng_tok_bos(tk), eng_tok_eos(tk)};
            char **dst[2] = {&mbos, &meos};
            for (int k = 0; k < 2; k++)
                if (ids[k] >= 0) {
                    eng_str s = eng_tok_text(tk, ids[k]);
                    *dst[k] = malloc(s.len + 1);
                    if (*dst[k]) {
                        memcpy(*dst[k], s.ptr, s.len);
                        (*dst[k])[s.len] = 0;
                    }
                }
            eng_tok_free(tk);
        }
    }
    if (file) {
        if (app_read_text(file, &src, &n, &e)) {
            fprintf(stderr, "nibble template: %s\n", e.msg);
            goto done;
        }
    } else {
        src = model_tmpl;
        model_tmpl = NULL;
    }
    size_t mn;
    if (app_read_text(messages, &msgs, &mn, &e)) {
        fprintf(stderr, "nibble template: %s\n", e.msg);
        goto done;
    }
    if (eng_jinja_parse(src, n, &t, &e)) {
        fprintf(stderr, "nibble template: %s: %s\n", file ? file : "the model's template", e.msg);
        goto done;
    }
    /* the variables, as one JSON object */
    size_t jn = 0, jcap = 0;
    const char *b = bos ? bos : mbos ? mbos : "", *s_eos = eos ? eos : meos ? meos : "";
#define PUT(str) do { size_t k_ = strlen(str); if (jn + k_ + 1 > jcap) { jcap = (jn + k_ + 1) * 2; char *p_ = realloc(json, jcap); if (!p_) goto oom; json = p_; } memcpy(json + jn, str, k_); jn += k_; json[jn] = 0; } while (0)
    PUT("{\"messages\": ");
    PUT(msgs);
    PUT(", \"tools\": null, \"documents\": null, \"add_generation_prompt\": ");
    PUT(no_gen ? "false" : "true");
    PUT(", \"bos_token\": ");
    if (eng_jinja_json_str(&json, &jn, &jcap, b))
        goto oom;
    PUT(", \"eos_token\": ");
    if (eng_jinja_json_str(&json, &jn, &jcap, s_eos))
        goto oom;
    for (int i = 0; i < nvars; i++) {
        const char *eq = strchr(vars[i], '=');
        char key[256];
        size_t kl = (size_t)(eq - vars[i]);
        if (kl >= sizeof key)
            kl = sizeof key - 1;
        memcpy(key, vars[i], kl);
        key[kl] = 0;
        PUT(", ");
        if (eng_jinja_json_str(&json, &jn, &jcap, key))
            goto oom;
        PUT(": ");
        PUT(eq + 1);
    }
    PUT("}");
#undef PUT
    size_t len;
    int x = eng_jinja_render(t, json, NULL, &out, &len, &e);
    if (x == ENG_EINVAL) {
        fprintf(stderr, "nibble template: %s (check %s and the --var values)\n", e.msg, messages);
        goto done;
    }
    if (x) {
        fprintf(stderr, "nibble template: %s: %s\n", file ? file : "the model's template", e.msg);
        goto done;
    }
    fwrite(out, 1, len, stdout);
    rc = fflush(stdout) ? 1 : 0;
    goto done;
oom:
    fprintf(stderr, "nibble template: out of memory\n");
done:
    eng_jinja_free(t);
    eng_gguf_close(g);
    free(src);
    free(msgs);
    free(json);
    free(out);
    free(model_tmpl);
    free(mbos);
    free(meos);
    free(rest);
    free(vars);
    return rc;
}
