#include "template.h"

#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "mem.h"

static const char *const names[ENG_TMPL_COUNT] = {"none", "chatml", "llama3", "llama2", "zephyr", "phi3", "gemma"};

const char *eng_tmpl_name(enum eng_tmpl t)
{
    return (unsigned)t < ENG_TMPL_COUNT ? names[t] : "?";
}

int eng_tmpl_find(const char *name)
{
    for (int i = 0; i < ENG_TMPL_COUNT; i++)
        if (!strcmp(name, names[i]))
            return i;
    return -1;
}

static int has(const char *s, size_t n, const char *needle)
{
    return eng_memmem(s, n, needle, strlen(needle)) != NULL;
}

enum eng_tmpl eng_tmpl_detect(const char *j, size_t n)
{
    if (!j || !n)
        return ENG_TMPL_NONE;
    /* most specific markers first: Phi-3 and Zephyr share <|user|> */
    if (has(j, n, "<|im_start|>"))
        return ENG_TMPL_CHATML;
    if (has(j, n, "<|start_header_id|>"))
        return ENG_TMPL_LLAMA3;
    if (has(j, n, "<start_of_turn>"))
        return ENG_TMPL_GEMMA;
    if (has(j, n, "<|user|>") && has(j, n, "<|end|>"))
        return ENG_TMPL_PHI3;
    if (has(j, n, "<|user|>"))
        return ENG_TMPL_ZEPHYR;
    if (has(j, n, "[INST]"))
        return ENG_TMPL_LLAMA2;
    return ENG_TMPL_NONE;
}

const char *const *eng_tmpl_stops(enum eng_tmpl t)
{
    static const char *const chatml[] = {"<|im_end|>", "<|endoftext|>", NULL};
    static const char *const llama3[] = {"<|eot_id|>", "<|end_of_text|>", NULL};
    static const char *const eos[] = {"</s>", NULL};
    static const char *const phi3[] = {"<|end|>", "<|endoftext|>", NULL};
    static const char *const gemma[] = {"<end_of_turn>", "<eos>", NULL};
    static const char *const none[] = {NULL};
    switch (t) {
    case ENG_TMPL_CHATML: return chatml;
    case ENG_TMPL_LLAMA3: return llama3;
    case ENG_TMPL_LLAMA2:
    case ENG_TMPL_ZEPHYR: return eos;
    case ENG_TMPL_PHI3: return phi3;
    case ENG_TMPL_GEMMA: return gemma;
    default: return none;
    }
}

void eng_tmpl_out_clear(eng_tmpl_out *o)
{
    for (size_t i = 0; i < o->n; i++)
        free(o->seg[i].text);
    free(o->seg);
    memset(o, 0, sizeof *o);
}

/* Append one segment; empty text appends nothing. */
static int add(eng_tmpl_out *o, const char *text, int special)
{
    if (!text || !*text)
        return 0;
    if (eng_reserve(&o->seg, &o->cap, o->n + 1, sizeof *o->seg, 8))
        return -1;
    char *c = eng_strndup(text, strlen(text));
    if (!c)
        return -1;
    o->seg[o->n].text = c;
    o->seg[o->n].special = special;
    o->n++;
    return 0;
}

#define S(x) if (add(o, (x), 1)) return -1
#define U(x) if (add(o, (x), 0)) return -1

int eng_tmpl_begin(enum eng_tmpl t, const char *sys, eng_tmpl_out *o)
{
    if (!sys || !*sys)
        return 0;
    switch (t) {
    case ENG_TMPL_CHATML: S("<|im_start|>system\n"); U(sys); S("<|im_end|>\n"); break;
    case ENG_TMPL_LLAMA3: S("<|start_header_id|>system<|end_header_id|>\n\n"); U(sys); S("<|eot_id|>"); break;
    case ENG_TMPL_ZEPHYR: S("<|system|>\n"); U(sys); S("</s>\n"); break;
    case ENG_TMPL_PHI3: S("<|system|>\n"); U(sys); S("<|end|>\n"); break;
    case ENG_TMPL_LLAMA2: /* folded into the first [INST] */
    case ENG_TMPL_GEMMA:  /* no system role: folded into the first user turn */
        break;
    default: U(sys); U("\n"); break;
    }
    return 0;
}

int eng_tmpl_user(enum eng_tmpl t, const char *text, int first, const char *sys, eng_tmpl_out *o)
{
    int with_sys = first && sys && *sys;
    switch (t) {
    case ENG_TMPL_CHATML: S("<|im_start|>user\n"); U(text); S("<|im_end|>\n<|im_start|>assistant\n"); break;
    case ENG_TMPL_LLAMA3:
        S("<|start_header_id|>user<|end_header_id|>\n\n"); U(text);
        S("<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case ENG_TMPL_LLAMA2:
        if (!first)
            S("<s>");
        if (with_sys) {
            S("[INST] <<SYS>>\n"); U(sys); S("\n<</SYS>>\n\n");
        } else
            S("[INST] ");
        U(text); S(" [/INST]");
        break;
    case ENG_TMPL_ZEPHYR: S("<|user|>\n"); U(text); S("</s>\n<|assistant|>\n"); break;
    case ENG_TMPL_PHI3: S("<|user|>\n"); U(text); S("<|end|>\n<|assistant|>\n"); break;
    case ENG_TMPL_GEMMA:
        S("<start_of_turn>user\n");
        if (with_sys) {
            U(sys); U("\n\n");
        }
        U(text); S("<end_of_turn>\n<start_of_turn>model\n");
        break;
    default: U(text); break;
    }
    return 0;
}

int eng_tmpl_close(enum eng_tmpl t, eng_tmpl_out *o)
{
    switch (t) {
    case ENG_TMPL_CHATML: S("<|im_end|>\n"); break;
    case ENG_TMPL_LLAMA3: S("<|eot_id|>"); break;
    case ENG_TMPL_LLAMA2: S(" </s>"); break;
    case ENG_TMPL_ZEPHYR: S("</s>\n"); break;
    case ENG_TMPL_PHI3: S("<|end|>\n"); break;
    case ENG_TMPL_GEMMA: S("<end_of_turn>\n"); break;
    default: break;
    }
    return 0;
}

char *eng_tmpl_join(const eng_tmpl_out *o)
{
    size_t len = 0;
    for (size_t i = 0; i < o->n; i++)
        len += strlen(o->seg[i].text);
    char *s = malloc(len + 1);
    if (!s)
        return NULL;
    len = 0;
    for (size_t i = 0; i < o->n; i++) {
        size_t k = strlen(o->seg[i].text);
        memcpy(s + len, o->seg[i].text, k);
        len += k;
    }
    s[len] = 0;
    return s;
}
