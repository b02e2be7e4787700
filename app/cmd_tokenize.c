/* nibble tokenize: the ids a prompt becomes, like llama-tokenize. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "gguf.h"
#include "tokenizer.h"
#include "utf8.h"

static const char usage[] =
    "usage: nibble tokenize [-m MODEL] -p TEXT | -f FILE [--pieces] [--no-bos]\n"
    "\n"
    "Print the token ids of TEXT on one line; with --pieces one token a line:\n"
    "id, then the token's text as the vocabulary stores it. Only the model's\n"
    "tokenizer is read, so a vocabulary-only GGUF works too.\n";
static const app_cmd tokenize_cmd = {.name = "tokenize", .usage = usage};

int cmd_tokenize(int argc, char **argv)
{
    app_opts o;
    int r = app_parse(argc, argv, 2, &tokenize_cmd, &o, NULL, NULL);
    if (r)
        return app_parse_status(r);
    char *owned;
    const char *text = app_prompt(&o, &owned);
    if (!text)
        return 1;
    const char *path = app_model_path(&o);
    eng_err e = {{0}};
    eng_gguf *g;
    eng_tok *tk = NULL;
    if (eng_gguf_open(path, &g, &e) || eng_tok_from_gguf(g, &tk, &e)) {
        fprintf(stderr, "nibble: %s%s%s\n", g ? path : "", g ? ": " : "", e.msg);
        eng_gguf_close(g);
        free(owned);
        return 1;
    }
    eng_gguf_close(g);
    size_t len = strlen(text);
    int n = eng_tok_encode(tk, text, len, !o.no_bos, 0, NULL, 0);
    int32_t *ids = n > 0 ? malloc((size_t)n * sizeof *ids) : NULL;
    if (n < 0 || (n > 0 && !ids)) {
        fprintf(stderr, "nibble: cannot tokenize the text\n");
        eng_tok_free(tk);
        free(owned);
        return 1;
    }
    if (n > 0)
        eng_tok_encode(tk, text, len, !o.no_bos, 0, ids, (size_t)n);
    for (int i = 0; i < n; i++) {
        if (o.pieces) {
            eng_str s = eng_tok_text(tk, ids[i]);
            printf("%6d '%.*s'\n", ids[i], (int)s.len, s.ptr);
        } else {
            printf("%s%d", i ? " " : "", ids[i]);
        }
    }
    if (!o.pieces)
        printf("\n");
    free(ids);
    eng_tok_free(tk);
    free(owned);
    return 0;
}
