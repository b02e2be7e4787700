/* GGUF reader. It trusts nothing in the file: it walks the header with
 * a bounds-checked cursor, caps every count by what the remaining bytes
 * could hold (so no allocation exceeds a small multiple of the file
 * size), and checks every tensor's shape, type, size and placement
 * before anyone sees it. Typed access to the metadata and its printable
 * form follow. */
#include "gguf_internal.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "port.h"
#include "simd.h"

#define MAX_KEY_LEN 65535u
#define MAX_NAME_LEN 4096u
#define MAX_ALIGN 65536u

/* ---- bounds-checked cursor ---- */

typedef struct cursor {
    const uint8_t *p;
    uint64_t pos, size;
    eng_err *e;
} cursor;

static uint64_t left(const cursor *c) { return c->size - c->pos; }

static int need(cursor *c, uint64_t n, const char *what)
{
    if (n > left(c))
        return eng_errf(c->e, ENG_EFORMAT, "truncated file: %s at byte %llu needs %llu bytes, %llu left", what,
                        (unsigned long long)c->pos, (unsigned long long)n, (unsigned long long)left(c));
    return 0;
}

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static int get32(cursor *c, uint32_t *v, const char *what)
{
    int r = need(c, 4, what);
    if (r) return r;
    *v = rd32(c->p + c->pos);
    c->pos += 4;
    return 0;
}

static int get64(cursor *c, uint64_t *v, const char *what)
{
    int r = need(c, 8, what);
    if (r) return r;
    *v = rd64(c->p + c->pos);
    c->pos += 8;
    return 0;
}

static int getstr(cursor *c, eng_str *s, uint64_t maxlen, const char *what)
{
    uint64_t len;
    int r = get64(c, &len, what);
    if (r) return r;
    if (len > maxlen)
        return eng_errf(c->e, ENG_EFORMAT, "%s: string length %llu is over the limit %llu", what,
                        (unsigned long long)len, (unsigned long long)maxlen);
    if ((r = need(c, len, what))) return r;
    s->ptr = (const char *)c->p + c->pos;
    s->len = len;
    c->pos += len;
    return 0;
}

const size_t eng_gguf_vsize[GGUF_VTYPE_COUNT] = {
    [GGUF_U8] = 1, [GGUF_I8] = 1, [GGUF_U16] = 2, [GGUF_I16] = 2, [GGUF_U32] = 4, [GGUF_I32] = 4,
    [GGUF_F32] = 4, [GGUF_BOOL] = 1, [GGUF_U64] = 8, [GGUF_I64] = 8, [GGUF_F64] = 8,
};

static const char *const vname[GGUF_VTYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};

const char *eng_gguf_vtype_name(int t) { return t >= 0 && t < GGUF_VTYPE_COUNT ? vname[t] : "?"; }


/* A printable copy of an untrusted name for messages. */
static void safe_name(char *dst, size_t cap, const char *s)
{
    size_t j = 0;
    for (size_t i = 0; s[i] && j + 1 < cap; i++)
        dst[j++] = (s[i] >= 32 && s[i] < 127) ? s[i] : '?';
    dst[j] = 0;
}

static int parse_kv(cursor *c, kv *k, uint64_t idx)
{
    char what[160];
    eng_str key;
    snprintf(what, sizeof what, "metadata key #%llu", (unsigned long long)idx);
    int r = getstr(c, &key, MAX_KEY_LEN, what);
    if (r) return r;
    if (key.len == 0)
        return eng_errf(c->e, ENG_EFORMAT, "%s: empty key", what);
    if (memchr(key.ptr, 0, key.len))
        return eng_errf(c->e, ENG_EFORMAT, "%s: key contains a NUL byte", what);
    if (!(k->key = eng_strndup(key.ptr, key.len)))
        return eng_errf(c->e, ENG_ENOMEM, "out of memory");
    char kn[80];
    safe_name(kn, sizeof kn, k->key);
    uint32_t t;
    snprintf(what, sizeof what, "type of metadata key '%s'", kn);
    if ((r = get32(c, &t, what))) return r;
    if (t >= GGUF_VTYPE_COUNT)
        return eng_errf(c->e, ENG_EFORMAT, "metadata key '%s': unknown value type %u", kn, t);
    k->type = (enum eng_gguf_vtype)t;
    snprintf(what, sizeof what, "value of metadata key '%s'", kn);
    if (t == GGUF_STRING) {
        if (!(k->strs = malloc(sizeof *k->strs)))
            return eng_errf(c->e, ENG_ENOMEM, "out of memory");
        k->val = c->p + c->pos;
        return getstr(c, k->strs, UINT64_MAX, what);
    }
    if (t != GGUF_ARRAY) {
        k->val = c->p + c->pos;
        if ((r = need(c, eng_gguf_vsize[t], what))) return r;
        if (t == GGUF_BOOL && k->val[0] > 1)
            return eng_errf(c->e, ENG_EFORMAT, "metadata key '%s': bool value %u is neither 0 nor 1", kn, k->val[0]);
        c->pos += eng_gguf_vsize[t];
        return 0;
    }
    uint32_t at;
    uint64_t n;
    if ((r = get32(c, &at, what))) return r;
    if (at >= GGUF_VTYPE_COUNT)
        return eng_errf(c->e, ENG_EFORMAT, "metadata key '%s': unknown array element type %u", kn, at);
    if (at == GGUF_ARRAY)
        return eng_errf(c->e, ENG_EFORMAT, "metadata key '%s': nested arrays are not supported", kn);
    if ((r = get64(c, &n, what))) return r;
    k->arr_type = (enum eng_gguf_vtype)at;
    k->arr_count = n;
    k->val = c->p + c->pos;
    if (at == GGUF_STRING) {
        /* every element takes at least its 8-byte length */
        if (n > left(c) / 8)
            return eng_errf(c->e, ENG_EFORMAT, "metadata key '%s': array count %llu is larger than the %llu bytes left "
                            "(truncated or corrupt file)", kn, (unsigned long long)n, (unsigned long long)left(c));
        if (n && !(k->strs = malloc(n * sizeof *k->strs)))
            return eng_errf(c->e, ENG_ENOMEM, "out of memory");
        for (uint64_t j = 0; j < n; j++)
            if ((r = getstr(c, &k->strs[j], UINT64_MAX, what))) return r;
        return 0;
    }
    if (n > left(c) / eng_gguf_vsize[at])
        return eng_errf(c->e, ENG_EFORMAT, "metadata key '%s': array count %llu is larger than the %llu bytes left "
                        "(truncated or corrupt file)", kn, (unsigned long long)n, (unsigned long long)left(c));
    if (at == GGUF_BOOL)
        for (uint64_t j = 0; j < n; j++)
            if (k->val[j] > 1)
                return eng_errf(c->e, ENG_EFORMAT, "metadata key '%s': bool array element %llu is %u, neither 0 nor 1",
                                kn, (unsigned long long)j, k->val[j]);
    c->pos += n * eng_gguf_vsize[at];
    return 0;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The name that appears twice among names[0..n), or NULL. Sorting makes
 * a file with a million keys cost n log n compares, not n^2 (a hang).
 * Reorders names. */
static const char *find_dup(const char **names, uint64_t n)
{
    qsort(names, (size_t)n, sizeof *names, cmp_name);
    for (uint64_t i = 1; i < n; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            return names[i];
    return NULL;
}

static const char *tensor_name(const eng_gguf *g, uint64_t i) { return g->tensors[i].name; }

/* An error naming the first of the n names (name_of(g, i)) found twice. */
static int check_unique(const eng_gguf *g, uint64_t n, const char *(*name_of)(const eng_gguf *, uint64_t),
                        const char *what, eng_err *e)
{
    if (n < 2)
        return 0;
    const char **names = malloc((size_t)n * sizeof *names);
    if (!names)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    for (uint64_t i = 0; i < n; i++)
        names[i] = name_of(g, i);
    const char *d = find_dup(names, n);
    int r = 0;
    if (d) {
        char dn[80];
        safe_name(dn, sizeof dn, d);
        r = eng_errf(e, ENG_EFORMAT, "%s '%s' appears twice", what, dn);
    }
    free(names);
    return r;
}

static int cmp_off(const void *a, const void *b)
{
    const eng_gguf_tensor *x = *(const eng_gguf_tensor *const *)a, *y = *(const eng_gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int parse_tensor(eng_gguf *g, cursor *c, eng_gguf_tensor *t, uint64_t idx)
{
    char what[160];
    eng_str name;
    snprintf(what, sizeof what, "name of tensor #%llu", (unsigned long long)idx);
    int r = getstr(c, &name, MAX_NAME_LEN, what);
    if (r) return r;
    if (name.len == 0 || memchr(name.ptr, 0, name.len))
        return eng_errf(c->e, ENG_EFORMAT, "tensor #%llu: empty name or a NUL byte in it", (unsigned long long)idx);
    if (!(t->name = eng_strndup(name.ptr, name.len)))
        return eng_errf(c->e, ENG_ENOMEM, "out of memory");
    char tn[80];
    safe_name(tn, sizeof tn, t->name);
    snprintf(what, sizeof what, "tensor '%s'", tn);
    if ((r = get32(c, &t->n_dims, what))) return r;
    if (t->n_dims == 0 || t->n_dims > ENG_GGUF_MAX_DIMS)
        return eng_errf(c->e, ENG_EFORMAT, "tensor '%s': n_dims %u is outside 1..%d", tn, t->n_dims, ENG_GGUF_MAX_DIMS);
    uint64_t count = 1;
    for (uint32_t d = 0; d < ENG_GGUF_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        if ((r = get64(c, &t->ne[d], what))) return r;
        if (t->ne[d] == 0)
            return eng_errf(c->e, ENG_EFORMAT, "tensor '%s': dimension %u is zero", tn, d);
        if (t->ne[d] > (uint64_t)INT64_MAX / count)
            return eng_errf(c->e, ENG_EFORMAT, "tensor '%s': dimensions overflow (dimension %u = %llu)", tn, d,
                            (unsigned long long)t->ne[d]);
        count *= t->ne[d];
    }
    uint32_t type;
    if ((r = get32(c, &type, what))) return r;
    const simd_traits *tr = simd_type_traits((int)type);
    if (!tr)
        return eng_errf(c->e, ENG_EFORMAT, "tensor '%s': unknown tensor type %u", tn, type);
    t->type = (int)type;
    if (t->ne[0] % tr->block)
        return eng_errf(c->e, ENG_EFORMAT, "tensor '%s': row length %llu is not a multiple of the %s block (%u)", tn,
                        (unsigned long long)t->ne[0], tr->name, tr->block);
    uint64_t blocks = count / tr->block;
    if (blocks > (uint64_t)INT64_MAX / tr->bytes)
        return eng_errf(c->e, ENG_EFORMAT, "tensor '%s': size overflows", tn);
    t->size = blocks * tr->bytes;
    if ((r = get64(c, &t->offset, what))) return r;
    (void)g;
    return 0;
}

static int parse(eng_gguf *g, eng_err *e)
{
    cursor c = {g->base, 0, g->size, e};
    int r;
    if (g->size < 4)
        return eng_errf(e, ENG_EFORMAT, "not a GGUF file: %llu bytes, too short for the magic (truncated file?)",
                        (unsigned long long)g->size);
    if (memcmp(g->base, "GGUF", 4) != 0)
        return eng_errf(e, ENG_EFORMAT, "not a GGUF file (bad magic: the file does not start with \"GGUF\")");
    c.pos = 4;
    if ((r = get32(&c, &g->version, "version"))) return r;
    if (g->version == 1)
        return eng_errf(e, ENG_EUNSUP, "GGUF version 1 is not supported (only 2 and 3); convert the file again");
    if (g->version != 2 && g->version != 3) {
        if (g->version == 0x02000000u || g->version == 0x03000000u)
            return eng_errf(e, ENG_EUNSUP, "big-endian GGUF files are not supported (version field reads %#x)",
                            g->version);
        return eng_errf(e, ENG_EUNSUP, "GGUF version %u is not supported (only 2 and 3)", g->version);
    }
    if ((r = get64(&c, &g->n_tensors, "tensor count"))) return r;
    if ((r = get64(&c, &g->n_kv, "metadata count"))) return r;
    /* smallest key/value: 8-byte key length, 1-byte key, 4-byte type, 1 byte */
    if (g->n_kv > left(&c) / 14)
        return eng_errf(e, ENG_EFORMAT, "metadata count %llu is larger than the %llu bytes left "
                        "(truncated or corrupt file)", (unsigned long long)g->n_kv, (unsigned long long)left(&c));
    if (g->n_kv && !(g->kvs = calloc(g->n_kv, sizeof *g->kvs)))
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    for (uint64_t i = 0; i < g->n_kv; i++)
        if ((r = parse_kv(&c, &g->kvs[i], i))) return r;
    /* smallest tensor info: name length 8 + 1, n_dims 4, one dim 8, type 4,
     * offset 8; checked against what the metadata left */
    if (g->n_tensors > left(&c) / 33)
        return eng_errf(e, ENG_EFORMAT, "tensor count %llu is larger than the %llu bytes left "
                        "(truncated or corrupt file)", (unsigned long long)g->n_tensors, (unsigned long long)left(&c));
    if ((r = check_unique(g, g->n_kv, eng_gguf_kv_key, "metadata key", e))) return r;
    g->alignment = ENG_GGUF_DEFAULT_ALIGN;
    int64_t ai = eng_gguf_find(g, "general.alignment");
    if (ai >= 0) {
        uint32_t a = 0;
        if ((r = eng_gguf_get_u32(g, "general.alignment", &a, e)) != 0) return r < 0 ? r : ENG_EFORMAT;
        if (a == 0 || (a & (a - 1)) || a > MAX_ALIGN)
            return eng_errf(e, ENG_EFORMAT, "general.alignment %u is not a power of two in 1..%u", a, MAX_ALIGN);
        g->alignment = a;
    }
    if (g->n_tensors && !(g->tensors = calloc(g->n_tensors, sizeof *g->tensors)))
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if ((r = parse_tensor(g, &c, &g->tensors[i], i))) return r;
    if ((r = check_unique(g, g->n_tensors, tensor_name, "tensor name", e))) return r;
    uint64_t off = c.pos;
    off = (off + g->alignment - 1) / g->alignment * g->alignment;
    g->data_offset = off;
    if (g->n_tensors == 0)
        return 0;
    if (off > g->size)
        return eng_errf(e, ENG_EFORMAT, "truncated file: the tensor data section would start at byte %llu of %llu",
                        (unsigned long long)off, (unsigned long long)g->size);
    uint64_t avail = g->size - off;
    eng_gguf_tensor **order = malloc(g->n_tensors * sizeof *order);
    if (!order)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    r = 0;
    for (uint64_t i = 0; i < g->n_tensors && !r; i++) {
        eng_gguf_tensor *t = &g->tensors[i];
        char tn[80];
        safe_name(tn, sizeof tn, t->name);
        order[i] = t;
        if (t->offset % g->alignment)
            r = eng_errf(e, ENG_EFORMAT, "tensor '%s': data offset %llu is not aligned to %llu", tn,
                         (unsigned long long)t->offset, (unsigned long long)g->alignment);
        else if (t->offset > avail || t->size > avail - t->offset)
            r = eng_errf(e, ENG_EFORMAT, "tensor '%s': data (offset %llu, %llu bytes) runs past the end of the file", tn,
                         (unsigned long long)t->offset, (unsigned long long)t->size);
        else
            t->data = g->base + off + t->offset;
    }
    if (!r) {
        qsort(order, g->n_tensors, sizeof *order, cmp_off);
        for (uint64_t i = 1; i < g->n_tensors && !r; i++)
            if (order[i - 1]->offset + order[i - 1]->size > order[i]->offset) {
                char a[80], b[80];
                safe_name(a, sizeof a, order[i - 1]->name);
                safe_name(b, sizeof b, order[i]->name);
                r = eng_errf(e, ENG_EFORMAT, "tensors '%s' and '%s' overlap in the file", a, b);
            }
    }
    free(order);
    return r;
}

static int finish_open(eng_gguf *g, eng_gguf **out, eng_err *e)
{
    int r = parse(g, e);
    if (r) {
        eng_gguf_close(g);
        return r;
    }
    *out = g;
    return 0;
}

int eng_gguf_open(const char *path, eng_gguf **out, eng_err *e)
{
    *out = NULL;
    eng_gguf *g = calloc(1, sizeof *g);
    if (!g)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    int r = eng_map_open(&g->map, path, e);
    if (r) {
        free(g);
        return r;
    }
    g->base = g->map.data;
    g->size = g->map.size;
    r = finish_open(g, out, e);
    return r ? eng_err_prefix(e, r, path) : 0;
}

int eng_gguf_open_memory(const void *data, size_t size, eng_gguf **out, eng_err *e)
{
    *out = NULL;
    eng_gguf *g = calloc(1, sizeof *g);
    if (!g)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    g->base = data;
    g->size = size;
    return finish_open(g, out, e);
}

void eng_gguf_close(eng_gguf *g)
{
    if (!g)
        return;
    for (uint64_t i = 0; g->kvs && i < g->n_kv; i++) {
        free(g->kvs[i].key);
        free(g->kvs[i].strs);
    }
    free(g->kvs);
    for (uint64_t i = 0; g->tensors && i < g->n_tensors; i++)
        free((char *)g->tensors[i].name);
    free(g->tensors);
    eng_map_close(&g->map);
    free(g);
}

uint32_t eng_gguf_version(const eng_gguf *g) { return g->version; }
uint64_t eng_gguf_file_size(const eng_gguf *g) { return g->size; }
uint64_t eng_gguf_alignment(const eng_gguf *g) { return g->alignment; }
uint64_t eng_gguf_data_offset(const eng_gguf *g) { return g->data_offset; }
uint64_t eng_gguf_n_kv(const eng_gguf *g) { return g->n_kv; }
const char *eng_gguf_kv_key(const eng_gguf *g, uint64_t i) { return i < g->n_kv ? g->kvs[i].key : NULL; }
enum eng_gguf_vtype eng_gguf_kv_type(const eng_gguf *g, uint64_t i)
{
    return i < g->n_kv ? g->kvs[i].type : GGUF_VTYPE_COUNT;
}
uint64_t eng_gguf_n_tensors(const eng_gguf *g) { return g->n_tensors; }

const eng_gguf_tensor *eng_gguf_tensor_at(const eng_gguf *g, uint64_t i)
{
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const eng_gguf_tensor *eng_gguf_tensor_find(const eng_gguf *g, const char *name)
{
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0)
            return &g->tensors[i];
    return NULL;
}

int64_t eng_gguf_find(const eng_gguf *g, const char *key)
{
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kvs[i].key, key) == 0)
            return (int64_t)i;
    return -1;
}

/* ---- typed access ---- */

/* sets of value types, as bits */
#define T(t) (1u << (t))
#define INT_TYPES (T(GGUF_U8) | T(GGUF_I8) | T(GGUF_U16) | T(GGUF_I16) | T(GGUF_U32) | T(GGUF_I32) | T(GGUF_U64) | T(GGUF_I64))

int64_t eng_gguf_arr_i64(enum eng_gguf_vtype t, const void *data, uint64_t j)
{
    if ((unsigned)t >= GGUF_VTYPE_COUNT || !eng_gguf_vsize[t])
        return 0;
    const uint8_t *p = (const uint8_t *)data + j * eng_gguf_vsize[t];
    switch (t) {
    case GGUF_U8: case GGUF_BOOL: return p[0];
    case GGUF_I8: return (int8_t)p[0];
    case GGUF_U16: return (uint16_t)(p[0] | p[1] << 8);
    case GGUF_I16: return (int16_t)(uint16_t)(p[0] | p[1] << 8);
    case GGUF_U32: return rd32(p);
    case GGUF_I32: return (int32_t)rd32(p);
    case GGUF_U64: { uint64_t v = rd64(p); return v > INT64_MAX ? INT64_MAX : (int64_t)v; }
    case GGUF_I64: return (int64_t)rd64(p);
    case GGUF_F32: case GGUF_F64: {
        /* converting a double outside int64's range is undefined: clamp */
        double d = eng_gguf_arr_f64(t, data, j);
        if (isnan(d)) return 0;
        if (d >= 9223372036854775808.0) return INT64_MAX;
        if (d <= -9223372036854775808.0) return INT64_MIN;
        return (int64_t)d;
    }
    default: return 0;
    }
}

double eng_gguf_arr_f64(enum eng_gguf_vtype t, const void *data, uint64_t j)
{
    if ((unsigned)t >= GGUF_VTYPE_COUNT || !eng_gguf_vsize[t])
        return 0;
    const uint8_t *p = (const uint8_t *)data + j * eng_gguf_vsize[t];
    if (t == GGUF_F32) {
        uint32_t u = rd32(p);
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    if (t == GGUF_F64) {
        uint64_t u = rd64(p);
        double d;
        memcpy(&d, &u, 8);
        return d;
    }
    if (t == GGUF_U64)
        return (double)rd64(p);
    return (double)eng_gguf_arr_i64(t, data, j);
}

static int lookup(const eng_gguf *g, const char *key, const kv **k)
{
    int64_t i = eng_gguf_find(g, key);
    if (i < 0)
        return 1;
    *k = &g->kvs[i];
    return 0;
}

static int wrong(eng_err *e, const char *key, const char *want, const kv *k)
{
    char kn[80];
    safe_name(kn, sizeof kn, key);
    return eng_errf(e, ENG_EFORMAT, "metadata key '%s' has type %s%s%s, expected %s", kn, vname[k->type],
                    k->type == GGUF_ARRAY ? " of " : "", k->type == GGUF_ARRAY ? vname[k->arr_type] : "", want);
}

/* The key's entry in *k if its type is one of the bits in types: 0, or 1
 * when absent, or the error "expected want". */
static int find_as(const eng_gguf *g, const char *key, unsigned types, const char *want, const kv **k, eng_err *e)
{
    if (lookup(g, key, k))
        return 1;
    return (types >> (*k)->type) & 1u ? 0 : wrong(e, key, want, *k);
}

int eng_gguf_get_i64(const eng_gguf *g, const char *key, int64_t *out, eng_err *e)
{
    const kv *k;
    int r = find_as(g, key, INT_TYPES, "an integer", &k, e);
    if (r)
        return r;
    if (k->type == GGUF_U64 && rd64(k->val) > INT64_MAX)
        return eng_errf(e, ENG_EFORMAT, "metadata key '%s': value too large", key);
    *out = eng_gguf_arr_i64(k->type, k->val, 0);
    return 0;
}

int eng_gguf_get_u64(const eng_gguf *g, const char *key, uint64_t *out, eng_err *e)
{
    const kv *k;
    int r = find_as(g, key, INT_TYPES, "an integer", &k, e);
    if (r)
        return r;
    if (k->type == GGUF_U64) {
        *out = rd64(k->val);
        return 0;
    }
    int64_t v = eng_gguf_arr_i64(k->type, k->val, 0);
    if (v < 0)
        return eng_errf(e, ENG_EFORMAT, "metadata key '%s': value %lld is negative", key, (long long)v);
    *out = (uint64_t)v;
    return 0;
}

int eng_gguf_get_u32(const eng_gguf *g, const char *key, uint32_t *out, eng_err *e)
{
    int64_t v = 0;
    int r = eng_gguf_get_i64(g, key, &v, e);
    if (r)
        return r;
    if (v < 0 || v > UINT32_MAX)
        return eng_errf(e, ENG_EFORMAT, "metadata key '%s': value %lld is out of range", key, (long long)v);
    *out = (uint32_t)v;
    return 0;
}

int eng_gguf_get_f64(const eng_gguf *g, const char *key, double *out, eng_err *e)
{
    const kv *k;
    int r = find_as(g, key, INT_TYPES | T(GGUF_F32) | T(GGUF_F64), "a number", &k, e);
    if (r)
        return r;
    double v = eng_gguf_arr_f64(k->type, k->val, 0);
    if (!isfinite(v))
        return eng_errf(e, ENG_EFORMAT, "metadata key '%s': value is not finite", key);
    *out = v;
    return 0;
}

int eng_gguf_get_f32(const eng_gguf *g, const char *key, float *out, eng_err *e)
{
    double v = 0;
    int r = eng_gguf_get_f64(g, key, &v, e);
    if (r)
        return r;
    if (fabs(v) > FLT_MAX)
        return eng_errf(e, ENG_EFORMAT, "metadata key '%s': value %g is out of range for f32", key, v);
    *out = (float)v;
    return 0;
}

int eng_gguf_get_bool(const eng_gguf *g, const char *key, int *out, eng_err *e)
{
    const kv *k;
    int r = find_as(g, key, INT_TYPES | T(GGUF_BOOL), "bool", &k, e);
    if (r)
        return r;
    *out = k->type == GGUF_BOOL ? k->val[0] != 0 : eng_gguf_arr_i64(k->type, k->val, 0) != 0;
    return 0;
}

int eng_gguf_get_str(const eng_gguf *g, const char *key, eng_str *out, eng_err *e)
{
    const kv *k;
    int r = find_as(g, key, T(GGUF_STRING), "string", &k, e);
    if (r)
        return r;
    *out = k->strs[0];
    return 0;
}

int eng_gguf_get_arr(const eng_gguf *g, const char *key, int want, enum eng_gguf_vtype *type, uint64_t *count,
                     const void **data, eng_err *e)
{
    const kv *k;
    if (lookup(g, key, &k))
        return 1;
    if (k->type != GGUF_ARRAY || (want >= 0 && (int)k->arr_type != want)) {
        char w[40];
        snprintf(w, sizeof w, "array of %s", want >= 0 ? eng_gguf_vtype_name(want) : "any");
        return wrong(e, key, w, k);
    }
    if (type) *type = k->arr_type;
    if (count) *count = k->arr_count;
    if (data) *data = k->val;
    return 0;
}

eng_str eng_gguf_arr_str(const eng_gguf *g, const char *key, uint64_t j)
{
    eng_str none = {"", 0};
    const kv *k;
    if (lookup(g, key, &k) || k->type != GGUF_ARRAY || k->arr_type != GGUF_STRING || j >= k->arr_count)
        return none;
    return k->strs[j];
}

const eng_str *eng_gguf_arr_strs(const eng_gguf *g, const char *key, uint64_t *count)
{
    const kv *k;
    *count = 0;
    if (lookup(g, key, &k) || k->type != GGUF_ARRAY || k->arr_type != GGUF_STRING)
        return NULL;
    *count = k->arr_count;
    return k->strs;
}

static void fmt_scalar(enum eng_gguf_vtype t, const void *p, char *buf, size_t n)
{
    if (t == GGUF_F32 || t == GGUF_F64)
        snprintf(buf, n, "%g", eng_gguf_arr_f64(t, p, 0));
    else if (t == GGUF_BOOL)
        snprintf(buf, n, "%s", *(const uint8_t *)p ? "true" : "false");
    else if (t == GGUF_U64)
        snprintf(buf, n, "%llu", (unsigned long long)rd64(p));
    else
        snprintf(buf, n, "%lld", (long long)eng_gguf_arr_i64(t, p, 0));
}

/* Bytes in the valid UTF-8 character at s (n bytes left), or 0 if the
 * bytes there are not one (bad lead or continuation, overlong form,
 * surrogate, above U+10FFFF, or cut short). */
static size_t utf8_char(const unsigned char *s, uint64_t n)
{
    unsigned c = s[0];
    size_t len;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) || (c == 0xf0 && s[1] < 0x90) ||
        (c == 0xf4 && s[1] > 0x8f))
        return 0;
    return len;
}

/* s in quotes for display: at most maxshow characters, newline as \n,
 * other control characters and bytes that are not UTF-8 as '?', cut
 * with "..." where it does not fit. Output is valid UTF-8; needs n >= 8,
 * else it is "". */
static void fmt_str(eng_str s, char *buf, size_t n, size_t maxshow)
{
    if (n == 0)
        return;
    buf[0] = 0;
    if (n < 8)
        return;
    const unsigned char *p = (const unsigned char *)s.ptr;
    size_t j = 0, shown = 0;
    buf[j++] = '"';
    for (uint64_t i = 0; i < s.len;) {
        size_t len = utf8_char(p + i, s.len - i);
        const char *out = (const char *)p + i;
        size_t olen = len;
        if (len == 0) {
            out = "?";
            olen = len = 1;
        } else if (p[i] == '\n') {
            out = "\\n";
            olen = 2;
        } else if (p[i] < 32 || p[i] == 127) {
            out = "?";
        }
        /* keep room for this, "...", the closing quote and the NUL */
        if (shown == maxshow || j + olen + 5 > n) {
            memcpy(buf + j, "...", 3);
            j += 3;
            break;
        }
        memcpy(buf + j, out, olen);
        j += olen;
        i += len;
        shown++;
    }
    buf[j++] = '"';
    buf[j] = 0;
}

void eng_gguf_kv_format(const eng_gguf *g, uint64_t i, char *buf, size_t n)
{
    if (n == 0)
        return;
    buf[0] = 0;
    if (i >= g->n_kv)
        return;
    const kv *k = &g->kvs[i];
    if (k->type == GGUF_STRING) {
        fmt_str(k->strs[0], buf, n, 60);
    } else if (k->type == GGUF_ARRAY) {
        int m = snprintf(buf, n, "[%s x %llu]", vname[k->arr_type], (unsigned long long)k->arr_count);
        if (m < 0 || (size_t)m >= n)
            return; /* cut inside the ASCII summary: still valid text */
        size_t used = (size_t)m;
        uint64_t j = 0;
        for (; j < k->arr_count && j < 4; j++) {
            char el[64];
            if (k->arr_type == GGUF_STRING)
                fmt_str(k->strs[j], el, sizeof el, 16);
            else
                fmt_scalar(k->arr_type, k->val + j * eng_gguf_vsize[k->arr_type], el, sizeof el);
            size_t len = strlen(el);
            /* separator, element, room for a later ", ..." and the NUL */
            if (used + 2 + len + 5 + 1 > n)
                break;
            memcpy(buf + used, j ? ", " : " ", j ? 2 : 1);
            used += j ? 2 : 1;
            memcpy(buf + used, el, len);
            used += len;
            buf[used] = 0;
        }
        if (j < k->arr_count && used + 5 + 1 <= n)
            memcpy(buf + used, j ? ", ...": " ...", j ? 6 : 5);
    } else {
        fmt_scalar(k->type, k->val, buf, n);
    }
}

const char *eng_gguf_ftype_name(uint32_t ftype)
{
    /* llama.cpp's include/llama.h, enum llama_ftype; 4-6 and 33-35 were
     * removed there */
    static const char *const names[] = {
        [0] = "F32",      [1] = "F16",      [2] = "Q4_0",      [3] = "Q4_1",     [7] = "Q8_0",
        [8] = "Q5_0",     [9] = "Q5_1",     [10] = "Q2_K",     [11] = "Q3_K_S",  [12] = "Q3_K_M",
        [13] = "Q3_K_L",  [14] = "Q4_K_S",  [15] = "Q4_K_M",   [16] = "Q5_K_S",  [17] = "Q5_K_M",
        [18] = "Q6_K",    [19] = "IQ2_XXS", [20] = "IQ2_XS",   [21] = "Q2_K_S",  [22] = "IQ3_XS",
        [23] = "IQ3_XXS", [24] = "IQ1_S",   [25] = "IQ4_NL",   [26] = "IQ3_S",   [27] = "IQ3_M",
        [28] = "IQ2_S",   [29] = "IQ2_M",   [30] = "IQ4_XS",   [31] = "IQ1_M",   [32] = "BF16",
        [36] = "TQ1_0",   [37] = "TQ2_0",   [38] = "MXFP4_MOE", [39] = "NVFP4",  [40] = "Q1_0",
        [41] = "Q2_0",
    };
    return ftype < sizeof names / sizeof names[0] ? names[ftype] : NULL;
}

int eng_gguf_main_type(const eng_gguf *g, uint64_t *n_params)
{
    uint64_t per_type[SIMD_TYPE_COUNT] = {0}, all = 0;
    for (uint64_t i = 0; i < eng_gguf_n_tensors(g); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        uint64_t count = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        all += count;
        if (t->n_dims >= 2 && t->type >= 0 && t->type < SIMD_TYPE_COUNT)
            per_type[t->type] += count;
    }
    int best = SIMD_F32;
    for (int t = 0; t < SIMD_TYPE_COUNT; t++)
        if (per_type[t] > per_type[best])
            best = t;
    if (n_params)
        *n_params = all;
    return best;
}
