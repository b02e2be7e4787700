/* Use everything an opened GGUF file offers — every key formatted (also
 * into a buffer too short), read as every scalar type, its string and the
 * last element of its array; every tensor's first and last byte and its
 * lookup by name — so a sanitizer sees any pointer the reader got wrong.
 * Returns a sum of what it read, for the caller to keep. Shared by the
 * mutation test and the GGUF fuzz target. */
#ifndef NIBBLE_GGUF_WALK_H
#define NIBBLE_GGUF_WALK_H

#include <string.h>

#include "gguf.h"

static inline unsigned gguf_walk(const eng_gguf *g)
{
    char buf[256];
    unsigned sum = 0;
    eng_err e;
    for (uint64_t i = 0; i < eng_gguf_n_kv(g); i++) {
        const char *key = eng_gguf_kv_key(g, i);
        eng_gguf_kv_format(g, i, buf, sizeof buf);
        sum += (unsigned)strlen(buf);
        eng_gguf_kv_format(g, i, buf, 9); /* cut short */
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
            sum += (unsigned char)s.ptr[s.len - 1];
        enum eng_gguf_vtype t;
        uint64_t n;
        const void *data;
        if (eng_gguf_get_arr(g, key, -1, &t, &n, &data, &e) == 0 && n) {
            if (t == GGUF_STRING) {
                eng_str a = eng_gguf_arr_str(g, key, n - 1);
                if (a.len)
                    sum += (unsigned char)a.ptr[a.len - 1];
            } else {
                sum += (unsigned)eng_gguf_arr_i64(t, data, n - 1);
                sum += (unsigned)(eng_gguf_arr_f64(t, data, 0) != 0);
            }
        }
    }
    for (uint64_t i = 0; i < eng_gguf_n_tensors(g); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        const uint8_t *p = t->data;
        sum += p[0] + p[t->size - 1] + t->n_dims;
        sum += eng_gguf_tensor_find(g, t->name) == t;
    }
    return sum;
}

#endif
