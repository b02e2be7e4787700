/* gpt-oss's harmony messages, read from a reply's text (its tags are
 * shown there: tok_vocab.c marks them TT_SHOW). A reply is one or more
 *   <|channel|>NAME<|message|>TEXT END
 * where END is <|end|>, <|return|> or <|call|>, or the <|start|> of the
 * next message (which may carry "<|start|>assistant" before its
 * <|channel|>). The engine splits past replies into the template's
 * content and thinking with it; the screen finds the thinking to fold. */
#ifndef NIBBLE_ENG_HARMONY_H
#define NIBBLE_ENG_HARMONY_H

#include <stddef.h>

typedef struct eng_harmony_msg {
    size_t name0, name1; /* the channel's name ("analysis", "final", "commentary to=...") */
    size_t body0, body1; /* the text; body1 = n while it is still being written */
    size_t after;        /* where what follows it starts (past its end tag) */
    int ended;           /* an END closed it */
} eng_harmony_msg;

/* The end of a message's text that starts at from: the offset of the
 * first END at or after it, or n; *after (if not NULL) is past that tag
 * (at it for <|start|>, which belongs to the next message). */
size_t eng_harmony_end(const char *s, size_t n, size_t from, size_t *after);

/* The message whose <|channel|> tag is at s[at]: 1 with *m, or 0 when
 * there is no such tag there or its header has no <|message|> yet. */
int eng_harmony_msg_at(const char *s, size_t n, size_t at, eng_harmony_msg *m);

#endif
