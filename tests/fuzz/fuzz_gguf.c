/* libFuzzer target for the GGUF reader: any input must either be refused
 * with a message or open into a file whose every key, value and tensor
 * can be read without touching memory outside the input. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned sink; /* keeps the reads below from being dropped */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    eng_gguf *g = NULL;
    eng_err e;
    if (eng_gguf_open_memory(data, size, &g, &e) != 0)
        return 0;
    char buf[256];
    unsigned acc = 0;
    for (uint64_t i = 0; i < eng_gguf_n_kv(g); i++) {
        const char *key = eng_gguf_kv_key(g, i);
        eng_gguf_kv_format(g, i, buf, sizeof buf);
        acc += (unsigned)strlen(buf);
        eng_gguf_kv_format(g, i, buf, 12); /* cut short */
        uint32_t u32;
        int64_t i64;
        uint64_t u64;
        float f;
        double d;
        int b;
        eng_str s;
        eng_gguf_get_u32(g, key, &u32, &e);
        eng_gguf_get_i64(g, key, &i64, &e);
        eng_gguf_get_u64(g, key, &u64, &e);
        eng_gguf_get_f32(g, key, &f, &e);
        eng_gguf_get_f64(g, key, &d, &e);
        eng_gguf_get_bool(g, key, &b, &e);
        if (eng_gguf_get_str(g, key, &s, &e) == 0 && s.len)
            acc += (unsigned char)s.ptr[s.len - 1];
        enum eng_gguf_vtype t;
        uint64_t n;
        const void *p;
        if (eng_gguf_get_arr(g, key, -1, &t, &n, &p, &e) == 0 && n) {
            if (t == GGUF_STRING) {
                eng_str a = eng_gguf_arr_str(g, key, n - 1);
                if (a.len)
                    acc += (unsigned char)a.ptr[a.len - 1];
            } else {
                acc += (unsigned)eng_gguf_arr_i64(t, p, n - 1);
                acc += eng_gguf_arr_f64(t, p, 0) > 0;
            }
        }
    }
    for (uint64_t i = 0; i < eng_gguf_n_tensors(g); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        const uint8_t *p = t->data;
        acc += p[0] + p[t->size - 1] + t->n_dims;
        acc += eng_gguf_tensor_find(g, t->name) == t;
    }
    sink = acc;
    eng_gguf_close(g);
    return 0;
}
