/* libFuzzer target for the Jinja interpreter: the input is a template,
 * then (after a NUL byte, if any) the variables as JSON. Parsing and
 * rendering must end without a crash, with output or an error, within
 * the small bounds set here; a fixed conversation is used when the input
 * gives no variables. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jinja.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char conversation[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\\n\"},"
    " {\"role\": \"assistant\", \"content\": \"<think>x</think>Hello\"}, {\"role\": \"user\", \"content\": \"\\u00e9\"}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"tools\": null}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 16384)
        return 0;
    const char *src = (const char *)data;
    const uint8_t *nul = memchr(data, 0, size);
    size_t tlen = nul ? (size_t)(nul - data) : size;
    char *vars = NULL;
    if (nul) {
        size_t vlen = size - tlen - 1;
        vars = malloc(vlen + 1);
        if (!vars)
            return 0;
        memcpy(vars, nul + 1, vlen);
        vars[vlen] = 0;
    }
    eng_jinja_limits lim = {.max_output = 1 << 20, .max_memory = 32 << 20, .max_steps = 200000, .max_depth = 200};
    eng_jinja *t = NULL;
    eng_err e;
    if (eng_jinja_parse(src, tlen, &t, &e) == 0) {
        char *out = NULL;
        size_t len = 0;
        int rc = eng_jinja_render(t, vars ? vars : conversation, &lim, &out, &len, &e);
        if (rc == 0 && (!out || len > lim.max_output))
            abort(); /* success means text within the bound */
        if (rc != 0 && (out || !e.msg[0]))
            abort(); /* failure means no text and a message */
        free(out);
        eng_jinja_free(t);
    } else if (t || !e.msg[0])
        abort();
    free(vars);
    return 0;
}
