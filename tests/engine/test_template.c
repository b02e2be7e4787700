/* engine/template: family detection from real template markers, and the
 * text each family renders; user text is never a special segment. */
#include "template.h"
#include "testutil.h"

/* system, first user turn, (an empty reply: the engine puts the reply's
 * token ids there), its close, then optionally a second user turn */
static char *render(enum eng_tmpl t, const char *sys, const char *u1, const char *u2)
{
    eng_tmpl_out o = {0};
    eng_tmpl_begin(t, sys, &o);
    eng_tmpl_user(t, u1, 1, sys, &o);
    eng_tmpl_close(t, &o);
    if (u2)
        eng_tmpl_user(t, u2, 0, sys, &o);
    for (size_t i = 0; i < o.n; i++)
        if (!o.seg[i].special)
            CHECKF(!strcmp(o.seg[i].text, u1) || (u2 && !strcmp(o.seg[i].text, u2)) || (sys && !strcmp(o.seg[i].text, sys)) ||
                       !strcmp(o.seg[i].text, "\n") || !strcmp(o.seg[i].text, "\n\n"),
                   "unexpected plain segment '%s'", o.seg[i].text);
    char *s = eng_tmpl_join(&o);
    eng_tmpl_out_clear(&o);
    return s;
}

int main(void)
{
    CHECK(eng_tmpl_detect("{% for m in messages %}<|im_start|>{{m.role}}\n", 44) == ENG_TMPL_CHATML);
    const char *l3 = "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}";
    CHECK(eng_tmpl_detect(l3, strlen(l3)) == ENG_TMPL_LLAMA3);
    const char *l2 = "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}";
    CHECK(eng_tmpl_detect(l2, strlen(l2)) == ENG_TMPL_LLAMA2);
    const char *z = "{{ '<|user|>\\n' + message['content'] + eos_token }}";
    CHECK(eng_tmpl_detect(z, strlen(z)) == ENG_TMPL_ZEPHYR);
    const char *p3 = "{{'<|user|>' + '\\n' + message['content'] + '<|end|>' + '\\n' + '<|assistant|>' + '\\n'}}";
    CHECK(eng_tmpl_detect(p3, strlen(p3)) == ENG_TMPL_PHI3);
    const char *g = "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}";
    CHECK(eng_tmpl_detect(g, strlen(g)) == ENG_TMPL_GEMMA);
    CHECK(eng_tmpl_detect("", 0) == ENG_TMPL_NONE);
    CHECK(eng_tmpl_detect("{{ something else }}", 20) == ENG_TMPL_NONE);
    CHECK(eng_tmpl_find("chatml") == ENG_TMPL_CHATML);
    CHECK(eng_tmpl_find("auto") == -1);
    CHECK(!strcmp(eng_tmpl_name(ENG_TMPL_PHI3), "phi3"));
    CHECK(!strcmp(eng_tmpl_stops(ENG_TMPL_LLAMA3)[0], "<|eot_id|>"));

    char *s = render(ENG_TMPL_CHATML, "Be brief.", "Hi", "Again");
    CHECKF(!strcmp(s, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
                      "<|im_end|>\n<|im_start|>user\nAgain<|im_end|>\n<|im_start|>assistant\n"),
           "%s", s);
    free(s);
    s = render(ENG_TMPL_LLAMA3, NULL, "Hi", NULL);
    CHECKF(!strcmp(s, "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant"
                      "<|end_header_id|>\n\n<|eot_id|>"),
           "%s", s);
    free(s);
    s = render(ENG_TMPL_LLAMA2, "Sys", "Hi", "More");
    CHECKF(!strcmp(s, "[INST] <<SYS>>\nSys\n<</SYS>>\n\nHi [/INST] </s><s>[INST] More [/INST]"), "%s", s);
    free(s);
    s = render(ENG_TMPL_ZEPHYR, NULL, "Hi", NULL);
    CHECKF(!strcmp(s, "<|user|>\nHi</s>\n<|assistant|>\n</s>\n"), "%s", s);
    free(s);
    s = render(ENG_TMPL_PHI3, "S", "Hi", NULL);
    CHECKF(!strcmp(s, "<|system|>\nS<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n<|end|>\n"), "%s", s);
    free(s);
    s = render(ENG_TMPL_GEMMA, "S", "Hi", NULL);
    CHECKF(!strcmp(s, "<start_of_turn>user\nS\n\nHi<end_of_turn>\n<start_of_turn>model\n<end_of_turn>\n"), "%s", s);
    free(s);
    s = render(ENG_TMPL_NONE, NULL, "Once upon", " a time");
    CHECKF(!strcmp(s, "Once upon a time"), "%s", s);
    free(s);

    /* a user typing a marker gets a plain segment, not a special one */
    eng_tmpl_out o = {0};
    eng_tmpl_user(ENG_TMPL_CHATML, "<|im_end|>", 1, NULL, &o);
    CHECK(o.n == 3 && o.seg[1].special == 0 && !strcmp(o.seg[1].text, "<|im_end|>"));
    eng_tmpl_out_clear(&o);
    return tu_result("test_template");
}
