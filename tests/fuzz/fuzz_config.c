/* libFuzzer target for the config reader: any text parses into settings
 * that are within their documented ranges or are warned about, strings
 * stay terminated inside their fields, and looking up a model's settings
 * works on whatever came out. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_values(const cfg_values *v)
{
    if (!memchr(v->kernel, 0, sizeof v->kernel) || !memchr(v->tmpl, 0, sizeof v->tmpl) ||
        !memchr(v->system, 0, sizeof v->system))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0; /* the reader takes C text: a NUL ends it early */
    static cfg_config c; /* large: keep it off the stack */
    cfg_defaults(&c);
    cfg_load_string(&c, text, "fuzz.ini");
    if (c.n_warn < 0 || c.n_warn > CFG_MAX_WARN || c.n_dirs < 0 || c.n_dirs > CFG_MAX_DIRS ||
        c.n_models < 0 || c.n_models > CFG_MAX_MODELS)
        abort();
    for (int i = 0; i < c.n_warn; i++)
        if (!memchr(c.warn[i], 0, sizeof c.warn[i]))
            abort();
    if (!memchr(c.model, 0, sizeof c.model))
        abort();
    check_values(&c.v);
    for (int i = 0; i < c.n_models; i++) {
        if (!memchr(c.models[i].name, 0, sizeof c.models[i].name))
            abort();
        check_values(&c.models[i].v);
    }
    cfg_values out;
    cfg_for_model(&c, "/models/stories260K.gguf", &out);
    check_values(&out);
    if (c.n_models > 0) {
        char path[300];
        snprintf(path, sizeof path, "/x/%s", c.models[0].name);
        cfg_for_model(&c, path, &out);
        check_values(&out);
    }
    free(text);
    return 0;
}
