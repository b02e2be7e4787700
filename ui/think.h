/* A reply's thinking and its answer, found in the reply's text as the
 * model wrote it (the stored text stays that, raw). No terminal, no
 * markdown: the screen folds the thinking, /copy and /export take the
 * answer, and line mode can use it too.
 *
 * Three forms are read:
 *   <think> THINKING </think> ANSWER     (Qwen3, DeepSeek-R1, QwQ, ...)
 *   THINKING </think> ANSWER             (the template put the <think>
 *                                         into the prompt, as
 *                                         DeepSeek-R1's does: found only
 *                                         once </think> has come)
 *   <|channel|>analysis<|message|> THINKING <|end|>
 *   <|start|>assistant<|channel|>final<|message|> ANSWER <|return|>
 *                                         (gpt-oss's harmony channels,
 *                                         when the markers are in the text)
 * The first only at the start of the reply (blanks before it allowed);
 * an opening without its end yet is thinking still going on. */
#ifndef NIBBLE_UI_THINK_H
#define NIBBLE_UI_THINK_H

#include <stddef.h>

typedef struct ui_think {
    int found;      /* 0: no thinking; the answer is the whole text */
    int open;       /* the thinking has not ended (being written, or cut short) */
    size_t t0, t1;  /* the thinking's bytes, tags and markers left out */
    size_t a0, a1;  /* the answer's bytes (blanks after the thinking left out) */
} ui_think;

/* Split s[0..n). Never fails; any bytes are taken. */
void ui_think_split(const char *s, size_t n, ui_think *out);

/* Words (runs of non-blank bytes) in s[0..n): the size of a thinking
 * whose token count was not recorded. */
size_t ui_think_words(const char *s, size_t n);

#endif
