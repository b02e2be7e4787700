/* libFuzzer target for the GGUF reader: any input must either be refused
 * with a message or open into a file whose every key, value and tensor
 * can be read without touching memory outside the input. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gguf.h"
#include "gguf_walk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned sink; /* keeps the reads below from being dropped */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    eng_gguf *g = NULL;
    eng_err e;
    if (eng_gguf_open_memory(data, size, &g, &e) != 0)
        return 0;
    sink = gguf_walk(g);
    eng_gguf_close(g);
    return 0;
}
