/* Finding a reply's thinking: see think.h for the forms read. */
#include "think.h"

#include <string.h>

#include "bytes.h"
#include "harmony.h"

/* 1 if s[i..n) starts with pat (then *i moves past it). */
static int take(const char *s, size_t n, size_t *i, const char *pat)
{
    size_t m = strlen(pat);
    if (n - *i < m || memcmp(s + *i, pat, m))
        return 0;
    *i += m;
    return 1;
}

static int blank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

static size_t skip_blanks(const char *s, size_t n, size_t i)
{
    while (i < n && blank(s[i]))
        i++;
    return i;
}

/* The answer after the thinking ended at i: blanks left out. */
static void answer_from(const char *s, size_t n, size_t i, ui_think *o)
{
    o->a0 = skip_blanks(s, n, i);
    o->a1 = n;
}

/* harmony: the analysis message whose <|channel|> tag is at c */
static void harmony(const char *s, size_t n, size_t c, ui_think *o)
{
    o->found = 1;
    eng_harmony_msg m;
    if (!eng_harmony_msg_at(s, n, c, &m)) { /* its header is still coming */
        o->open = 1;
        o->t0 = o->t1 = o->a0 = o->a1 = n;
        return;
    }
    o->t0 = m.body0;
    o->t1 = m.body1;
    if (!m.ended) {
        o->open = 1;
        o->a0 = o->a1 = n;
        return;
    }
    /* the next message: <|start|>assistant<|channel|>final<|message|> ANSWER <|return|> */
    size_t a = skip_blanks(s, n, m.after);
    take(s, n, &a, "<|start|>assistant");
    if (a < n && s[a] == '<' && eng_find(s, n, a, "<|channel|>") == a) {
        eng_harmony_msg f;
        if (eng_harmony_msg_at(s, n, a, &f))
            o->a0 = f.body0, o->a1 = f.body1;
        else /* its header is still coming */
            o->a0 = o->a1 = n;
        return;
    }
    o->a0 = a;
    o->a1 = eng_harmony_end(s, n, a, NULL);
}

void ui_think_split(const char *s, size_t n, ui_think *o)
{
    memset(o, 0, sizeof *o);
    o->a1 = n;
    size_t i = skip_blanks(s, n, 0);
    size_t h = i;
    take(s, n, &h, "<|start|>assistant");
    size_t c = h;
    if (take(s, n, &h, "<|channel|>analysis")) {
        harmony(s, n, c, o);
        return;
    }
    if (take(s, n, &i, "<think>")) {
        o->found = 1;
        o->t0 = i;
        o->t1 = eng_find(s, n, i, "</think>");
        if (o->t1 == n) {
            o->open = 1;
            o->a0 = n;
            return;
        }
        answer_from(s, n, o->t1 + strlen("</think>"), o);
        return;
    }
    /* the <think> was in the prompt: only an end, with no start before it */
    size_t e = eng_find(s, n, 0, "</think>");
    if (e < n && eng_find(s, e, 0, "<think>") == e) {
        o->found = 1;
        o->t0 = 0;
        o->t1 = e;
        answer_from(s, n, e + strlen("</think>"), o);
    }
}

size_t ui_think_words(const char *s, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (!blank(s[i]) && (i == 0 || blank(s[i - 1])))
            w++;
    return w;
}
