/* GGUF writer: key/values and tensor descriptions gathered in memory,
 * then one pass that writes header, padding and tensor data (aligned to
 * WRITE_ALIGN) to a temporary file renamed over the target. */
#include "gguf_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "mem.h"
#include "simd.h"

typedef struct wbuf {
    uint8_t *p;
    size_t len, cap;
    int failed;
} wbuf;

static void wput(wbuf *b, const void *src, size_t n)
{
    if (b->failed || n == 0)
        return;
    if (eng_reserve(&b->p, &b->cap, b->len + n, 1, 4096)) {
        b->failed = 1;
        return;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void w32(wbuf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    wput(b, x, 4);
}

static void w64(wbuf *b, uint64_t v)
{
    w32(b, (uint32_t)v);
    w32(b, (uint32_t)(v >> 32));
}

static void wstr(wbuf *b, const char *s, uint64_t n)
{
    w64(b, n);
    wput(b, s, (size_t)n);
}

typedef struct wtensor {
    char *name;
    int type;
    uint32_t n_dims;
    uint64_t ne[ENG_GGUF_MAX_DIMS];
    const void *data;
    uint64_t size, offset;
} wtensor;

struct eng_gguf_writer {
    wbuf kv;
    uint64_t n_kv;
    wtensor *t;
    size_t n_t, cap_t;
};

eng_gguf_writer *eng_gguf_writer_new(void) { return calloc(1, sizeof(eng_gguf_writer)); }

void eng_gguf_writer_free(eng_gguf_writer *w)
{
    if (!w)
        return;
    free(w->kv.p);
    for (uint64_t i = 0; i < w->n_t; i++)
        free(w->t[i].name);
    free(w->t);
    free(w);
}

/* The writer sets general.alignment itself (to the alignment it pads
 * to); a second copy from the caller would make the file invalid. */
static int reserved(const char *key) { return strcmp(key, "general.alignment") == 0; }

static int kv_head(eng_gguf_writer *w, const char *key, enum eng_gguf_vtype t)
{
    wstr(&w->kv, key, strlen(key));
    w32(&w->kv, (uint32_t)t);
    w->n_kv++;
    return w->kv.failed ? ENG_ENOMEM : 0;
}

/* The typed setters are eng_gguf_writer_scalar with the type spelled
 * out (it writes little-endian and checks the bool). */
int eng_gguf_writer_u32(eng_gguf_writer *w, const char *key, uint32_t v)
{
    return eng_gguf_writer_scalar(w, key, GGUF_U32, &v);
}

int eng_gguf_writer_i32(eng_gguf_writer *w, const char *key, int32_t v)
{
    return eng_gguf_writer_scalar(w, key, GGUF_I32, &v);
}

int eng_gguf_writer_f32(eng_gguf_writer *w, const char *key, float v)
{
    return eng_gguf_writer_scalar(w, key, GGUF_F32, &v);
}

int eng_gguf_writer_bool(eng_gguf_writer *w, const char *key, int v)
{
    uint8_t b = v ? 1 : 0;
    return eng_gguf_writer_scalar(w, key, GGUF_BOOL, &b);
}

int eng_gguf_writer_str(eng_gguf_writer *w, const char *key, const char *v)
{
    if (reserved(key))
        return 0;
    kv_head(w, key, GGUF_STRING);
    wstr(&w->kv, v, strlen(v));
    return w->kv.failed ? ENG_ENOMEM : 0;
}

static void put_elems(wbuf *b, enum eng_gguf_vtype t, const void *data, uint64_t n)
{
    /* host values to little-endian, element by element */
    const uint8_t *p = data;
    for (uint64_t j = 0; j < n; j++, p += eng_gguf_vsize[t]) {
        switch (eng_gguf_vsize[t]) {
        case 1: wput(b, p, 1); break;
        case 2: { uint16_t v; memcpy(&v, p, 2); uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)}; wput(b, x, 2); break; }
        case 4: { uint32_t v; memcpy(&v, p, 4); w32(b, v); break; }
        default: { uint64_t v; memcpy(&v, p, 8); w64(b, v); break; }
        }
    }
}

int eng_gguf_writer_scalar(eng_gguf_writer *w, const char *key, enum eng_gguf_vtype t, const void *v)
{
    if ((unsigned)t >= GGUF_VTYPE_COUNT || t == GGUF_STRING || t == GGUF_ARRAY)
        return ENG_EINVAL;
    if (t == GGUF_BOOL && *(const uint8_t *)v > 1)
        return ENG_EINVAL;
    if (reserved(key))
        return 0;
    kv_head(w, key, t);
    put_elems(&w->kv, t, v, 1);
    return w->kv.failed ? ENG_ENOMEM : 0;
}

int eng_gguf_writer_arr(eng_gguf_writer *w, const char *key, enum eng_gguf_vtype t, const void *data, uint64_t n)
{
    if ((unsigned)t >= GGUF_VTYPE_COUNT || t == GGUF_STRING || t == GGUF_ARRAY)
        return ENG_EINVAL;
    if (reserved(key))
        return 0;
    kv_head(w, key, GGUF_ARRAY);
    w32(&w->kv, (uint32_t)t);
    w64(&w->kv, n);
    put_elems(&w->kv, t, data, n);
    return w->kv.failed ? ENG_ENOMEM : 0;
}

int eng_gguf_writer_arr_str(eng_gguf_writer *w, const char *key, const char *const *v, uint64_t n)
{
    if (reserved(key))
        return 0;
    kv_head(w, key, GGUF_ARRAY);
    w32(&w->kv, GGUF_STRING);
    w64(&w->kv, n);
    for (uint64_t j = 0; j < n; j++)
        wstr(&w->kv, v[j], strlen(v[j]));
    return w->kv.failed ? ENG_ENOMEM : 0;
}

int eng_gguf_writer_copy_kv(eng_gguf_writer *w, const eng_gguf *g, uint64_t i)
{
    return eng_gguf_writer_copy_kv_as(w, g, i, NULL);
}

int eng_gguf_writer_copy_kv_as(eng_gguf_writer *w, const eng_gguf *g, uint64_t i, const char *key)
{
    if (i >= g->n_kv)
        return ENG_EINVAL;
    const kv *k = &g->kvs[i];
    if (reserved(k->key) || (key && reserved(key)))
        return 0;
    kv_head(w, key ? key : k->key, k->type);
    if (k->type == GGUF_STRING) {
        wstr(&w->kv, k->strs[0].ptr, k->strs[0].len);
    } else if (k->type == GGUF_ARRAY) {
        w32(&w->kv, (uint32_t)k->arr_type);
        w64(&w->kv, k->arr_count);
        if (k->arr_type == GGUF_STRING)
            for (uint64_t j = 0; j < k->arr_count; j++)
                wstr(&w->kv, k->strs[j].ptr, k->strs[j].len);
        else
            wput(&w->kv, k->val, (size_t)(k->arr_count * eng_gguf_vsize[k->arr_type]));
    } else {
        wput(&w->kv, k->val, eng_gguf_vsize[k->type]);
    }
    return w->kv.failed ? ENG_ENOMEM : 0;
}

int eng_gguf_writer_tensor(eng_gguf_writer *w, const char *name, int type, uint32_t n_dims, const uint64_t *ne,
                           const void *data)
{
    if (n_dims == 0 || n_dims > ENG_GGUF_MAX_DIMS || !simd_type_traits(type))
        return ENG_EINVAL;
    if (eng_reserve(&w->t, &w->cap_t, w->n_t + 1, sizeof *w->t, 16))
        return ENG_ENOMEM;
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    if (!(t->name = eng_strndup(name, strlen(name))))
        return ENG_ENOMEM;
    t->type = type;
    t->n_dims = n_dims;
    uint64_t rows = 1;
    for (uint32_t d = 0; d < ENG_GGUF_MAX_DIMS; d++) {
        t->ne[d] = d < n_dims ? ne[d] : 1;
        if (d > 0)
            rows *= t->ne[d];
    }
    size_t rb = simd_row_bytes(type, t->ne[0]);
    if (!rb) {
        free(t->name);
        return ENG_EINVAL;
    }
    t->size = rb * rows;
    t->data = data;
    w->n_t++;
    return 0;
}

#define WRITE_ALIGN 64

int eng_gguf_writer_save(eng_gguf_writer *w, const char *path, eng_err *e)
{
    wbuf h = {0};
    wput(&h, "GGUF", 4);
    w32(&h, 3);
    w64(&h, w->n_t);
    w64(&h, w->n_kv + 1);
    wstr(&h, "general.alignment", strlen("general.alignment"));
    w32(&h, GGUF_U32);
    w32(&h, WRITE_ALIGN);
    wput(&h, w->kv.p, w->kv.len);
    uint64_t off = 0;
    for (uint64_t i = 0; i < w->n_t; i++) {
        wtensor *t = &w->t[i];
        wstr(&h, t->name, strlen(t->name));
        w32(&h, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++)
            w64(&h, t->ne[d]);
        w32(&h, (uint32_t)t->type);
        t->offset = off;
        w64(&h, off);
        off += (t->size + WRITE_ALIGN - 1) / WRITE_ALIGN * WRITE_ALIGN;
    }
    static const uint8_t zeros[WRITE_ALIGN];
    wput(&h, zeros, (WRITE_ALIGN - h.len % WRITE_ALIGN) % WRITE_ALIGN);
    if (h.failed || w->kv.failed) {
        free(h.p);
        return eng_errf(e, ENG_ENOMEM, "out of memory while writing %s", path);
    }
    eng_afile a;
    int r = eng_afile_open(&a, path, 0644, e);
    if (r) {
        free(h.p);
        return r;
    }
    int ok = fwrite(h.p, 1, h.len, a.f) == h.len;
    for (uint64_t i = 0; ok && i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        ok = fwrite(t->data, 1, (size_t)t->size, a.f) == t->size;
        size_t pad = (size_t)((WRITE_ALIGN - t->size % WRITE_ALIGN) % WRITE_ALIGN);
        if (ok && pad)
            ok = fwrite(zeros, 1, pad, a.f) == pad;
    }
    free(h.p);
    if (!ok) {
        int err = errno;
        eng_afile_abort(&a);
        return eng_errf(e, ENG_EIO, "%s: cannot write: %s", path, strerror(err));
    }
    return eng_afile_commit(&a, e);
}
