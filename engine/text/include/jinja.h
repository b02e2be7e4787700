/* A sandboxed Jinja interpreter for the chat templates models ship in
 * tokenizer.chat_template. It renders the way Hugging Face transformers
 * does (jinja2's ImmutableSandboxedEnvironment with trim_blocks,
 * lstrip_blocks and loop controls; transformers' tojson, raise_exception
 * and strftime_now), so a conversation reaches the model in the format it
 * was tuned on.
 *
 * A template is untrusted input (it comes inside a stranger's GGUF): it
 * cannot read files or the environment, and every render is bounded in
 * recursion depth, loop steps, memory and output size. A failure is an
 * error naming the template line and the construct, never a crash. */
#ifndef NIBBLE_ENG_JINJA_H
#define NIBBLE_ENG_JINJA_H

#include <stddef.h>

#include "err.h"

typedef struct eng_jinja eng_jinja;

/* Bounds on one render; eng_jinja_limits_default() fills the defaults. */
typedef struct eng_jinja_limits {
    size_t max_output;  /* bytes of rendered text */
    size_t max_memory;  /* bytes of values the render may allocate */
    size_t max_steps;   /* statements and loop iterations executed */
    int max_depth;      /* nested evaluation (macro calls, expressions) */
} eng_jinja_limits;

void eng_jinja_limits_default(eng_jinja_limits *l);

/* Parse a template (len bytes, need not be NUL-terminated). Unknown
 * filters and tests are errors when they run (as jinja2 3 treats them in
 * conditional code), so a template naming one in a branch never taken
 * still renders. On success *out owns the template (free with eng_jinja_free).
 * Errors: ENG_EFORMAT with "line N: ..." in e, ENG_ENOMEM. */
int eng_jinja_parse(const char *src, size_t len, eng_jinja **out, eng_err *e);
void eng_jinja_free(eng_jinja *t);

/* Render with the variables of a JSON object (e.g. {"messages": [...],
 * "add_generation_prompt": true, "bos_token": "<s>"}); NULL means none.
 * On success *out is the NUL-terminated text (caller frees) and *len its
 * length. lim may be NULL for the defaults. Errors: ENG_EINVAL when the
 * variables are not a JSON object, ENG_EFORMAT for a template error
 * (raise_exception, a type error, a bound exceeded) with "line N: ..." in
 * e, ENG_ENOMEM. */
int eng_jinja_render(const eng_jinja *t, const char *vars_json, const eng_jinja_limits *lim, char **out,
                     size_t *len, eng_err *e);

/* Append s as a JSON string literal (quotes included) to the growable
 * buffer *buf of *n bytes used and *cap capacity; for callers that build
 * the variables. Returns 0 or ENG_ENOMEM. */
int eng_jinja_json_str(char **buf, size_t *n, size_t *cap, const char *s);

#endif
