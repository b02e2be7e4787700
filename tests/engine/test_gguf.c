/* GGUF reader and writer: a round trip through every metadata value type
 * and the tensor types nibble writes, the typed getters and their errors,
 * kv formatting, copy_kv, and the two real models in ../shared.
 *
 * `test_gguf --write-corpus DIR` also writes the fuzz seed files
 * (tests/fuzz/corpus/gguf/) and exits. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "simd.h"
#include "testutil.h"

/* ---- helpers ---- */

static char tmpdir[1024];

static const char *tmp_path(const char *name, char *buf)
{
    snprintf(buf, 4096, "%s/%s", tmpdir, name);
    return buf;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
    /* xorshift64*: fixed seed, so every run writes the same bytes */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static int has(const char *msg, const char *word) { return strstr(msg, word) != NULL; }

/* Is s (NUL-terminated) valid UTF-8? */
static int utf8_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p, n;
        if (c < 0x80) { p++; continue; }
        if (c >= 0xc2 && c <= 0xdf) n = 1;
        else if (c >= 0xe0 && c <= 0xef) n = 2;
        else if (c >= 0xf0 && c <= 0xf4) n = 3;
        else return 0;
        for (unsigned i = 1; i <= n; i++)
            if ((p[i] & 0xc0) != 0x80)
                return 0;
        if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] > 0x9f) || (c == 0xf0 && p[1] < 0x90) ||
            (c == 0xf4 && p[1] > 0x8f))
            return 0;
        p += n + 1;
    }
    return 1;
}

static int str_eq(eng_str s, const char *want) { return s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0; }

/* ---- the round-trip file ---- */

/* Scalars of every numeric type, written with eng_gguf_writer_scalar. */
static const uint8_t v_u8 = 200;
static const int8_t v_i8 = -5;
static const uint16_t v_u16 = 60000;
static const int16_t v_i16 = -30000;
static const uint32_t v_u32 = 4000000000u;
static const int32_t v_i32 = -2000000000;
static const float v_f32 = 1.5f;
static const uint8_t v_bool = 1;
static const uint64_t v_u64 = UINT64_MAX;
static const int64_t v_i64 = -((int64_t)1 << 50) - 7;
static const double v_f64 = 2.5;
static const double v_f64_big = 1e300;

/* Arrays of every element type. */
static const uint8_t a_u8[5] = {1, 2, 3, 4, 255};
static const int8_t a_i8[3] = {-128, 0, 127};
static const uint16_t a_u16[3] = {0, 1, 65535};
static const int16_t a_i16[3] = {-32768, 5, 32767};
static const uint32_t a_u32[3] = {0, 7, UINT32_MAX};
static const int32_t a_i32[3] = {1, 2, 3};
static const float a_f32[4] = {0.5f, -1.25f, 1e30f, 0.0f};
static const uint8_t a_bool[3] = {1, 0, 1};
static const uint64_t a_u64[2] = {UINT64_MAX, 42};
static const int64_t a_i64[2] = {INT64_MIN, INT64_MAX};
static const double a_f64[2] = {-0.125, 1e-300};
static const char *const a_str[3] = {"a", "", "\xe2\x96\x81hello"};

typedef struct arr_case {
    const char *key;
    enum eng_gguf_vtype type;
    const void *data;
    uint64_t n;
    size_t esize;
} arr_case;

static const arr_case arrs[] = {
    {"arr.u8", GGUF_U8, a_u8, 5, 1},      {"arr.i8", GGUF_I8, a_i8, 3, 1},
    {"arr.u16", GGUF_U16, a_u16, 3, 2},   {"arr.i16", GGUF_I16, a_i16, 3, 2},
    {"arr.u32", GGUF_U32, a_u32, 3, 4},   {"arr.i32", GGUF_I32, a_i32, 3, 4},
    {"arr.f32", GGUF_F32, a_f32, 4, 4},   {"arr.bool", GGUF_BOOL, a_bool, 3, 1},
    {"arr.u64", GGUF_U64, a_u64, 2, 8},   {"arr.i64", GGUF_I64, a_i64, 2, 8},
    {"arr.f64", GGUF_F64, a_f64, 2, 8},   {"arr.empty_u8", GGUF_U8, a_u8, 0, 1},
    {"arr.empty_f64", GGUF_F64, a_f64, 0, 8},
};
#define N_ARRS (sizeof arrs / sizeof arrs[0])

typedef struct tensor_case {
    char name[32];
    int type;
    uint32_t n_dims;
    uint64_t ne[4];
    uint8_t *data;
    size_t size;
} tensor_case;

static const int ttypes[5] = {SIMD_F32, SIMD_F16, SIMD_BF16, SIMD_Q8_0, SIMD_Q4_0};
static tensor_case tcases[20];

static void make_tensors(void)
{
    for (int ti = 0; ti < 5; ti++) {
        const simd_traits *tr = simd_type_traits(ttypes[ti]);
        for (uint32_t nd = 1; nd <= 4; nd++) {
            tensor_case *t = &tcases[ti * 4 + nd - 1];
            snprintf(t->name, sizeof t->name, "blk.%d.%s.d%u", ti, tr->name, nd);
            t->type = ttypes[ti];
            t->n_dims = nd;
            uint64_t rows = 1;
            for (uint32_t d = 0; d < 4; d++) {
                t->ne[d] = d >= nd ? 1 : d == 0 ? tr->block * (uint64_t)(1 + (ti + nd) % 3) : 1 + (uint64_t)((d + ti) % 3);
                if (d > 0)
                    rows *= t->ne[d];
            }
            t->size = simd_row_bytes(t->type, t->ne[0]) * rows;
            t->data = malloc(t->size);
            for (size_t i = 0; i < t->size; i++)
                t->data[i] = (uint8_t)rng();
        }
    }
}

static void free_tensors(void)
{
    for (int i = 0; i < 20; i++)
        free(tcases[i].data);
}

static eng_gguf_writer *make_writer(void)
{
    eng_gguf_writer *w = eng_gguf_writer_new();
    int r = 0;
    r |= eng_gguf_writer_scalar(w, "s.u8", GGUF_U8, &v_u8);
    r |= eng_gguf_writer_scalar(w, "s.i8", GGUF_I8, &v_i8);
    r |= eng_gguf_writer_scalar(w, "s.u16", GGUF_U16, &v_u16);
    r |= eng_gguf_writer_scalar(w, "s.i16", GGUF_I16, &v_i16);
    r |= eng_gguf_writer_scalar(w, "s.u32", GGUF_U32, &v_u32);
    r |= eng_gguf_writer_scalar(w, "s.i32", GGUF_I32, &v_i32);
    r |= eng_gguf_writer_scalar(w, "s.f32", GGUF_F32, &v_f32);
    r |= eng_gguf_writer_scalar(w, "s.bool", GGUF_BOOL, &v_bool);
    r |= eng_gguf_writer_scalar(w, "s.u64", GGUF_U64, &v_u64);
    r |= eng_gguf_writer_scalar(w, "s.i64", GGUF_I64, &v_i64);
    r |= eng_gguf_writer_scalar(w, "s.f64", GGUF_F64, &v_f64);
    r |= eng_gguf_writer_scalar(w, "s.f64big", GGUF_F64, &v_f64_big);
    r |= eng_gguf_writer_u32(w, "w.u32", 123456);
    r |= eng_gguf_writer_i32(w, "w.i32", -77);
    r |= eng_gguf_writer_i32(w, "w.i32pos", 77);
    r |= eng_gguf_writer_f32(w, "w.f32", -0.75f);
    r |= eng_gguf_writer_bool(w, "w.false", 0);
    r |= eng_gguf_writer_bool(w, "w.true", 5); /* any non-zero is true */
    r |= eng_gguf_writer_str(w, "general.architecture", "llama");
    r |= eng_gguf_writer_str(w, "str.empty", "");
    r |= eng_gguf_writer_str(w, "str.newline", "two\nlines");
    r |= eng_gguf_writer_str(w, "str.utf8", "caf\xc3\xa9 \xe2\x96\x81 \xf0\x9f\x98\x80");
    for (size_t i = 0; i < N_ARRS; i++)
        r |= eng_gguf_writer_arr(w, arrs[i].key, arrs[i].type, arrs[i].data, arrs[i].n);
    r |= eng_gguf_writer_arr_str(w, "arr.str", a_str, 3);
    r |= eng_gguf_writer_arr_str(w, "arr.empty_str", a_str, 0);
    CHECK(r == 0);
    /* the writer owns general.alignment: a caller's value is dropped */
    CHECK(eng_gguf_writer_u32(w, "general.alignment", 8) == 0);
    /* arguments it refuses */
    CHECK(eng_gguf_writer_arr(w, "bad", GGUF_STRING, a_u8, 1) == ENG_EINVAL);
    CHECK(eng_gguf_writer_arr(w, "bad", GGUF_ARRAY, a_u8, 1) == ENG_EINVAL);
    CHECK(eng_gguf_writer_scalar(w, "bad", GGUF_STRING, &v_u8) == ENG_EINVAL);
    uint8_t two = 2;
    CHECK(eng_gguf_writer_scalar(w, "bad", GGUF_BOOL, &two) == ENG_EINVAL);
    uint64_t ne[1] = {33};
    CHECK(eng_gguf_writer_tensor(w, "bad", SIMD_Q8_0, 1, ne, a_u8) == ENG_EINVAL);
    CHECK(eng_gguf_writer_tensor(w, "bad", 4, 1, ne, a_u8) == ENG_EINVAL);
    CHECK(eng_gguf_writer_tensor(w, "bad", SIMD_F32, 0, ne, a_u8) == ENG_EINVAL);
    CHECK(eng_gguf_writer_tensor(w, "bad", SIMD_F32, 5, ne, a_u8) == ENG_EINVAL);
    for (int i = 0; i < 20; i++) {
        tensor_case *t = &tcases[i];
        CHECK(eng_gguf_writer_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data) == 0);
    }
    return w;
}

/* ---- checks on the read-back file ---- */

static void check_scalars(const eng_gguf *g)
{
    eng_err e = {{0}};
    uint32_t u32 = 0;
    int64_t i64 = 0;
    uint64_t u64 = 0;
    float f = 0;
    double d = 0;
    int b = -1;
    eng_str s = {0};

    /* exact values through the widest getter of their kind */
    CHECK(eng_gguf_get_i64(g, "s.u8", &i64, &e) == 0 && i64 == 200);
    CHECK(eng_gguf_get_i64(g, "s.i8", &i64, &e) == 0 && i64 == -5);
    CHECK(eng_gguf_get_i64(g, "s.u16", &i64, &e) == 0 && i64 == 60000);
    CHECK(eng_gguf_get_i64(g, "s.i16", &i64, &e) == 0 && i64 == -30000);
    CHECK(eng_gguf_get_i64(g, "s.u32", &i64, &e) == 0 && i64 == 4000000000ll);
    CHECK(eng_gguf_get_i64(g, "s.i32", &i64, &e) == 0 && i64 == -2000000000ll);
    CHECK(eng_gguf_get_i64(g, "s.i64", &i64, &e) == 0 && i64 == v_i64);
    CHECK(eng_gguf_get_u64(g, "s.u64", &u64, &e) == 0 && u64 == UINT64_MAX);
    CHECK(eng_gguf_get_u64(g, "s.u32", &u64, &e) == 0 && u64 == 4000000000ull);
    CHECK(eng_gguf_get_f32(g, "s.f32", &f, &e) == 0 && f == 1.5f);
    CHECK(eng_gguf_get_f64(g, "s.f64", &d, &e) == 0 && d == 2.5);
    CHECK(eng_gguf_get_f64(g, "s.f64big", &d, &e) == 0 && d == 1e300);
    CHECK(eng_gguf_get_bool(g, "s.bool", &b, &e) == 0 && b == 1);
    CHECK(eng_gguf_get_u32(g, "w.u32", &u32, &e) == 0 && u32 == 123456);
    CHECK(eng_gguf_get_i64(g, "w.i32", &i64, &e) == 0 && i64 == -77);
    CHECK(eng_gguf_get_f32(g, "w.f32", &f, &e) == 0 && f == -0.75f);
    CHECK(eng_gguf_get_bool(g, "w.false", &b, &e) == 0 && b == 0);
    CHECK(eng_gguf_get_bool(g, "w.true", &b, &e) == 0 && b == 1);
    CHECK(eng_gguf_get_str(g, "general.architecture", &s, &e) == 0 && str_eq(s, "llama"));
    CHECK(eng_gguf_get_str(g, "str.empty", &s, &e) == 0 && s.len == 0);
    CHECK(eng_gguf_get_str(g, "str.newline", &s, &e) == 0 && str_eq(s, "two\nlines"));
    CHECK(eng_gguf_get_str(g, "str.utf8", &s, &e) == 0 && str_eq(s, "caf\xc3\xa9 \xe2\x96\x81 \xf0\x9f\x98\x80"));

    /* the types each key was written with */
    static const struct { const char *key; enum eng_gguf_vtype t; } types[] = {
        {"s.u8", GGUF_U8}, {"s.i8", GGUF_I8}, {"s.u16", GGUF_U16}, {"s.i16", GGUF_I16},
        {"s.u32", GGUF_U32}, {"s.i32", GGUF_I32}, {"s.f32", GGUF_F32}, {"s.bool", GGUF_BOOL},
        {"s.u64", GGUF_U64}, {"s.i64", GGUF_I64}, {"s.f64", GGUF_F64}, {"w.u32", GGUF_U32},
        {"w.i32", GGUF_I32}, {"w.f32", GGUF_F32}, {"w.true", GGUF_BOOL}, {"str.empty", GGUF_STRING},
        {"arr.str", GGUF_ARRAY}, {"arr.empty_u8", GGUF_ARRAY}, {"general.alignment", GGUF_U32},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        int64_t k = eng_gguf_find(g, types[i].key);
        CHECKF(k >= 0, "%s missing", types[i].key);
        if (k >= 0)
            CHECKF(eng_gguf_kv_type(g, (uint64_t)k) == types[i].t, "%s has type %s", types[i].key,
                   eng_gguf_vtype_name(eng_gguf_kv_type(g, (uint64_t)k)));
    }

    /* integer conversions: accepted when the value fits, else an error
     * that names the key */
    CHECK(eng_gguf_get_u32(g, "s.u8", &u32, &e) == 0 && u32 == 200);
    CHECK(eng_gguf_get_u32(g, "s.u16", &u32, &e) == 0 && u32 == 60000);
    CHECK(eng_gguf_get_u32(g, "s.u32", &u32, &e) == 0 && u32 == 4000000000u);
    CHECK(eng_gguf_get_u32(g, "w.i32pos", &u32, &e) == 0 && u32 == 77);
    static const char *const neg[] = {"s.i8", "s.i16", "s.i32", "s.i64"};
    for (int i = 0; i < 4; i++) {
        u32 = 99;
        e.msg[0] = 0;
        CHECKF(eng_gguf_get_u32(g, neg[i], &u32, &e) == ENG_EFORMAT && has(e.msg, neg[i]) && u32 == 99, "%s: %s",
               neg[i], e.msg);
        u64 = 99;
        CHECKF(eng_gguf_get_u64(g, neg[i], &u64, &e) == ENG_EFORMAT && has(e.msg, neg[i]) && u64 == 99, "%s: %s",
               neg[i], e.msg);
    }
    CHECK(eng_gguf_get_u32(g, "s.u64", &u32, &e) == ENG_EFORMAT && has(e.msg, "s.u64"));
    CHECK(eng_gguf_get_i64(g, "s.u64", &i64, &e) == ENG_EFORMAT && has(e.msg, "s.u64"));
    /* floats from integers, bools from integers */
    CHECK(eng_gguf_get_f32(g, "s.i16", &f, &e) == 0 && f == -30000.0f);
    CHECK(eng_gguf_get_f64(g, "s.u64", &d, &e) == 0 && d == 18446744073709551615.0);
    CHECK(eng_gguf_get_f32(g, "s.f64", &f, &e) == 0 && f == 2.5f);
    CHECK(eng_gguf_get_bool(g, "s.u8", &b, &e) == 0 && b == 1);
    f = 7;
    CHECKF(eng_gguf_get_f32(g, "s.f64big", &f, &e) == ENG_EFORMAT && has(e.msg, "s.f64big") && f == 7, "%s", e.msg);

    /* wrong types: ENG_EFORMAT naming the key and the type found */
#define WRONG(call, key, found)                                                                           \
    do {                                                                                                  \
        e.msg[0] = 0;                                                                                     \
        int r_ = (call);                                                                                  \
        CHECKF(r_ == ENG_EFORMAT && has(e.msg, "'" key "'") && has(e.msg, found), "%s -> %d %s", #call, r_, e.msg); \
    } while (0)
    WRONG(eng_gguf_get_u32(g, "s.f32", &u32, &e), "s.f32", "f32");
    WRONG(eng_gguf_get_i64(g, "general.architecture", &i64, &e), "general.architecture", "string");
    WRONG(eng_gguf_get_u64(g, "arr.u64", &u64, &e), "arr.u64", "array of u64");
    WRONG(eng_gguf_get_f32(g, "str.empty", &f, &e), "str.empty", "string");
    WRONG(eng_gguf_get_f64(g, "s.bool", &d, &e), "s.bool", "bool");
    WRONG(eng_gguf_get_bool(g, "s.f32", &b, &e), "s.f32", "f32");
    WRONG(eng_gguf_get_str(g, "s.u32", &s, &e), "s.u32", "u32");
    WRONG(eng_gguf_get_str(g, "arr.str", &s, &e), "arr.str", "array of string");
#undef WRONG
    u32 = 5;
    CHECK(eng_gguf_get_u32(g, "s.bool", &u32, &e) == ENG_EFORMAT && u32 == 5); /* output kept */

    /* absent keys: 1, output untouched */
    u32 = 17;
    f = 3;
    s.len = 9;
    CHECK(eng_gguf_find(g, "no.such.key") == -1);
    CHECK(eng_gguf_get_u32(g, "no.such.key", &u32, &e) == 1 && u32 == 17);
    CHECK(eng_gguf_get_f32(g, "no.such.key", &f, &e) == 1 && f == 3);
    CHECK(eng_gguf_get_str(g, "no.such.key", &s, &e) == 1 && s.len == 9);
    CHECK(eng_gguf_get_arr(g, "no.such.key", -1, NULL, NULL, NULL, &e) == 1);
    CHECK(eng_gguf_get_u32(g, "general.alignment", &u32, &e) == 0 && u32 == 64);
}

static void check_arrays(const eng_gguf *g)
{
    eng_err e = {{0}};
    for (size_t i = 0; i < N_ARRS; i++) {
        const arr_case *a = &arrs[i];
        enum eng_gguf_vtype t = GGUF_VTYPE_COUNT;
        uint64_t n = 99;
        const void *data = NULL;
        int r = eng_gguf_get_arr(g, a->key, (int)a->type, &t, &n, &data, &e);
        CHECKF(r == 0 && t == a->type && n == a->n, "%s: r=%d type %d n %llu", a->key, r, t, (unsigned long long)n);
        if (r || n != a->n)
            continue;
        CHECKF(n == 0 || memcmp(data, a->data, n * a->esize) == 0, "%s: elements differ", a->key);
        for (uint64_t j = 0; j < n; j++) {
            const uint8_t *src = (const uint8_t *)a->data + j * a->esize;
            double want = 0;
            switch (a->type) {
            case GGUF_U8: case GGUF_BOOL: want = *src; break;
            case GGUF_I8: want = *(const int8_t *)src; break;
            case GGUF_U16: want = *(const uint16_t *)(const void *)src; break;
            case GGUF_I16: want = *(const int16_t *)(const void *)src; break;
            case GGUF_U32: want = *(const uint32_t *)(const void *)src; break;
            case GGUF_I32: want = *(const int32_t *)(const void *)src; break;
            case GGUF_F32: want = *(const float *)(const void *)src; break;
            case GGUF_U64: want = (double)*(const uint64_t *)(const void *)src; break;
            case GGUF_I64: want = (double)*(const int64_t *)(const void *)src; break;
            case GGUF_F64: want = *(const double *)(const void *)src; break;
            default: break;
            }
            CHECKF(eng_gguf_arr_f64(t, data, j) == want, "%s[%llu]", a->key, (unsigned long long)j);
        }
        /* any element type with want = -1; a different one is an error
         * naming the key */
        CHECK(eng_gguf_get_arr(g, a->key, -1, &t, &n, &data, &e) == 0 && t == a->type);
        int other = a->type == GGUF_F32 ? GGUF_I32 : GGUF_F32;
        e.msg[0] = 0;
        r = eng_gguf_get_arr(g, a->key, other, &t, &n, &data, &e);
        CHECKF(r == ENG_EFORMAT && has(e.msg, a->key) && has(e.msg, eng_gguf_vtype_name(other)), "%s: %d %s", a->key,
               r, e.msg);
    }
    /* exact integers through arr_i64 */
    const void *data;
    enum eng_gguf_vtype t;
    uint64_t n;
    CHECK(eng_gguf_get_arr(g, "arr.i64", GGUF_I64, &t, &n, &data, &e) == 0);
    CHECK(eng_gguf_arr_i64(t, data, 0) == INT64_MIN && eng_gguf_arr_i64(t, data, 1) == INT64_MAX);
    CHECK(eng_gguf_get_arr(g, "arr.u64", GGUF_U64, &t, &n, &data, &e) == 0);
    CHECK(eng_gguf_arr_i64(t, data, 0) == INT64_MAX); /* clamped */
    CHECK(eng_gguf_arr_i64(t, data, 1) == 42);
    CHECK(eng_gguf_get_arr(g, "arr.u32", GGUF_U32, &t, &n, &data, &e) == 0);
    CHECK(eng_gguf_arr_i64(t, data, 2) == UINT32_MAX);
    CHECK(eng_gguf_get_arr(g, "arr.f32", GGUF_F32, &t, &n, &data, &e) == 0);
    /* 1e30 does not fit an int64: clamped, not undefined behaviour */
    CHECK(eng_gguf_arr_i64(t, data, 2) == INT64_MAX);
    CHECK(eng_gguf_arr_i64(t, data, 1) == -1);

    /* string arrays */
    CHECK(eng_gguf_get_arr(g, "arr.str", GGUF_STRING, &t, &n, NULL, &e) == 0 && n == 3);
    for (uint64_t j = 0; j < 3; j++)
        CHECK(str_eq(eng_gguf_arr_str(g, "arr.str", j), a_str[j]));
    CHECK(eng_gguf_arr_str(g, "arr.str", 3).len == 0);         /* out of range */
    CHECK(eng_gguf_arr_str(g, "arr.u8", 0).len == 0);          /* not strings */
    CHECK(eng_gguf_arr_str(g, "no.such.key", 0).len == 0);
    CHECK(eng_gguf_get_arr(g, "arr.empty_str", GGUF_STRING, &t, &n, NULL, &e) == 0 && n == 0);
    CHECK(eng_gguf_arr_str(g, "arr.empty_str", 0).len == 0);
    /* a scalar is not an array */
    e.msg[0] = 0;
    CHECK(eng_gguf_get_arr(g, "s.u8", -1, &t, &n, &data, &e) == ENG_EFORMAT && has(e.msg, "s.u8"));
}

static void check_format(const eng_gguf *g)
{
    static const struct { const char *key, *want; } fmt[] = {
        {"s.u8", "200"},
        {"s.i8", "-5"},
        {"s.u16", "60000"},
        {"s.i16", "-30000"},
        {"s.u32", "4000000000"},
        {"s.i32", "-2000000000"},
        {"s.f32", "1.5"},
        {"s.bool", "true"},
        {"w.false", "false"},
        {"s.u64", "18446744073709551615"},
        {"s.i64", "-1125899906842631"},
        {"s.f64", "2.5"},
        {"general.architecture", "\"llama\""},
        {"str.empty", "\"\""},
        {"str.newline", "\"two\\nlines\""},
        {"str.utf8", "\"caf\xc3\xa9 \xe2\x96\x81 \xf0\x9f\x98\x80\""},
        {"arr.i32", "[i32 x 3] 1, 2, 3"},
        {"arr.u8", "[u8 x 5] 1, 2, 3, 4, ..."},
        {"arr.bool", "[bool x 3] true, false, true"},
        {"arr.f64", "[f64 x 2] -0.125, 1e-300"},
        {"arr.empty_u8", "[u8 x 0]"},
        {"arr.empty_str", "[string x 0]"},
        {"arr.str", "[string x 3] \"a\", \"\", \"\xe2\x96\x81hello\""},
    };
    char buf[256];
    for (size_t i = 0; i < sizeof fmt / sizeof fmt[0]; i++) {
        int64_t k = eng_gguf_find(g, fmt[i].key);
        CHECKF(k >= 0, "%s missing", fmt[i].key);
        if (k < 0)
            continue;
        eng_gguf_kv_format(g, (uint64_t)k, buf, sizeof buf);
        CHECKF(strcmp(buf, fmt[i].want) == 0, "%s formats as [%s], want [%s]", fmt[i].key, buf, fmt[i].want);
    }
    /* every key into every small buffer: always terminated, never past n
     * (the heap buffer is exactly n bytes, so ASan sees any overrun), and
     * always valid UTF-8 even when a character is cut */
    for (uint64_t k = 0; k < eng_gguf_n_kv(g); k++) {
        for (size_t n = 1; n <= 48; n++) {
            char *b = malloc(n);
            memset(b, 'X', n);
            eng_gguf_kv_format(g, k, b, n);
            CHECKF(memchr(b, 0, n) != NULL, "key %s, n %zu: not terminated", eng_gguf_kv_key(g, k), n);
            if (memchr(b, 0, n))
                CHECKF(utf8_ok(b), "key %s, n %zu: not UTF-8: %s", eng_gguf_kv_key(g, k), n, b);
            free(b);
        }
        char one = 'X';
        eng_gguf_kv_format(g, k, &one, 0); /* n == 0 writes nothing */
        CHECK(one == 'X');
    }
    /* out of range indexes are harmless */
    buf[0] = 'X';
    eng_gguf_kv_format(g, eng_gguf_n_kv(g), buf, sizeof buf);
    CHECK(buf[0] == 0);
    CHECK(eng_gguf_kv_key(g, eng_gguf_n_kv(g)) == NULL);
    CHECK(eng_gguf_tensor_at(g, eng_gguf_n_tensors(g)) == NULL);
}

/* Tensors of g equal tcases, data included, aligned to 64. */
static void check_tensors(const eng_gguf *g, int mapped)
{
    CHECK(eng_gguf_n_tensors(g) == 20);
    CHECK(eng_gguf_alignment(g) == 64);
    CHECK(eng_gguf_data_offset(g) % 64 == 0);
    for (int i = 0; i < 20 && i < (int)eng_gguf_n_tensors(g); i++) {
        const tensor_case *c = &tcases[i];
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, (uint64_t)i);
        CHECKF(strcmp(t->name, c->name) == 0, "tensor %d is %s, want %s", i, t->name, c->name);
        CHECKF(t->type == c->type && t->n_dims == c->n_dims, "%s: type %d dims %u", c->name, t->type, t->n_dims);
        for (int d = 0; d < 4; d++)
            CHECKF(t->ne[d] == c->ne[d], "%s: ne[%d] = %llu, want %llu", c->name, d, (unsigned long long)t->ne[d],
                   (unsigned long long)c->ne[d]);
        CHECKF(t->size == c->size, "%s: size %llu want %zu", c->name, (unsigned long long)t->size, c->size);
        CHECKF(t->offset % 64 == 0, "%s: offset %llu", c->name, (unsigned long long)t->offset);
        if (mapped)
            CHECKF((uintptr_t)t->data % 64 == 0, "%s: data pointer %p not aligned to 64", c->name, t->data);
        CHECKF(t->size == c->size && memcmp(t->data, c->data, c->size) == 0, "%s: data differs", c->name);
        CHECK(eng_gguf_tensor_find(g, c->name) == t);
    }
    CHECK(eng_gguf_tensor_find(g, "no.such.tensor") == NULL);
}

static void test_round_trip(void)
{
    char path[4096], path2[4096];
    eng_err e = {{0}};
    make_tensors();
    eng_gguf_writer *w = make_writer();
    CHECKF(eng_gguf_writer_save(w, tmp_path("all.gguf", path), &e) == 0, "%s", e.msg);
    eng_gguf_writer_free(w);
    /* the temporary file is gone after the rename */
    char tmpname[4200];
    snprintf(tmpname, sizeof tmpname, "%s.tmp", path);
    CHECK(access(tmpname, F_OK) != 0);

    eng_gguf *g = NULL;
    int r = eng_gguf_open(path, &g, &e);
    CHECKF(r == 0 && g, "open: %s", e.msg);
    if (!g)
        return;
    CHECK(eng_gguf_version(g) == 3);
    /* written keys plus general.alignment (the caller's one dropped) */
    CHECK(eng_gguf_n_kv(g) == 22 + N_ARRS + 2 + 1);
    CHECK(strcmp(eng_gguf_kv_key(g, 0), "general.alignment") == 0);
    size_t flen = 0;
    char *bytes = tu_read(path, &flen);
    CHECK(bytes && eng_gguf_file_size(g) == flen);
    check_scalars(g);
    check_arrays(g);
    check_format(g);
    check_tensors(g, 1);

    /* the same bytes through open_memory (from a 64-aligned buffer) */
    void *mem = NULL;
#ifdef _WIN32
    if (bytes && (mem = _aligned_malloc(flen + 1, 64)) != NULL) {
#else
    if (bytes && posix_memalign(&mem, 64, flen + 1) == 0) {
#endif
        memcpy(mem, bytes, flen);
        eng_gguf *m = NULL;
        CHECKF(eng_gguf_open_memory(mem, flen, &m, &e) == 0, "%s", e.msg);
        if (m) {
            check_scalars(m);
            check_tensors(m, 1);
            eng_gguf_close(m);
        }
#ifdef _WIN32
        _aligned_free(mem);
#else
        free(mem);
#endif
    }

    /* copy_kv of every key and every tensor gives the same file again */
    w = eng_gguf_writer_new();
    for (uint64_t i = 0; i < eng_gguf_n_kv(g); i++)
        CHECK(eng_gguf_writer_copy_kv(w, g, i) == 0);
    CHECK(eng_gguf_writer_copy_kv(w, g, eng_gguf_n_kv(g)) == ENG_EINVAL);
    for (uint64_t i = 0; i < eng_gguf_n_tensors(g); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        CHECK(eng_gguf_writer_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data) == 0);
    }
    r = eng_gguf_writer_save(w, tmp_path("copy.gguf", path2), &e);
    CHECKF(r == 0, "save copy: %s", e.msg);
    eng_gguf_writer_free(w);
    size_t clen = 0;
    char *cbytes = tu_read(path2, &clen);
    CHECKF(cbytes && clen == flen && memcmp(cbytes, bytes, flen) == 0, "copy differs from the original (%zu vs %zu bytes)",
           clen, flen);
    eng_gguf *c = NULL;
    CHECKF(eng_gguf_open(path2, &c, &e) == 0, "open copy: %s", e.msg);
    if (c) {
        CHECK(eng_gguf_n_kv(c) == eng_gguf_n_kv(g));
        check_scalars(c);
        check_arrays(c);
        check_tensors(c, 1);
        eng_gguf_close(c);
    }
    free(cbytes);
    free(bytes);
    eng_gguf_close(g);
    remove(path);
    remove(path2);

    /* saving into a folder that does not exist fails cleanly */
    w = eng_gguf_writer_new();
    eng_gguf_writer_u32(w, "x", 1);
    char bad[4200];
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.gguf", tmpdir);
    e.msg[0] = 0;
    CHECK(eng_gguf_writer_save(w, bad, &e) == ENG_EIO && has(e.msg, "x.gguf"));
    eng_gguf_writer_free(w);
    free_tensors();
}

/* A file with no tensors and no keys of its own is still valid. */
static void test_empty(void)
{
    char path[4096];
    eng_err e = {{0}};
    eng_gguf_writer *w = eng_gguf_writer_new();
    CHECK(eng_gguf_writer_save(w, tmp_path("empty.gguf", path), &e) == 0);
    eng_gguf_writer_free(w);
    eng_gguf *g = NULL;
    CHECKF(eng_gguf_open(path, &g, &e) == 0, "%s", e.msg);
    if (g) {
        CHECK(eng_gguf_n_tensors(g) == 0 && eng_gguf_n_kv(g) == 1);
        eng_gguf_close(g);
    }
    remove(path);
    eng_gguf_close(NULL);
    eng_gguf_writer_free(NULL);
}

/* ---- real models ---- */

static void walk_all(const eng_gguf *g)
{
    char buf[512];
    for (uint64_t i = 0; i < eng_gguf_n_kv(g); i++) {
        eng_gguf_kv_format(g, i, buf, sizeof buf);
        CHECKF(strlen(buf) < sizeof buf && utf8_ok(buf), "%s formats badly", eng_gguf_kv_key(g, i));
    }
}

static uint64_t n_elems(const eng_gguf_tensor *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }

static void check_u32(const eng_gguf *g, const char *key, uint32_t want)
{
    eng_err e = {{0}};
    uint32_t v = 0;
    int r = eng_gguf_get_u32(g, key, &v, &e);
    CHECKF(r == 0 && v == want, "%s = %u (r %d %s), want %u", key, v, r, e.msg, want);
}

/* The llama.* hyper-parameters of a model, in the order the keys are
 * listed (name, value) until a NULL name. */
typedef struct u32_key {
    const char *key;
    uint32_t want;
} u32_key;

static void check_u32s(const eng_gguf *g, const u32_key *keys)
{
    for (; keys->key; keys++)
        check_u32(g, keys->key, keys->want);
}

static void check_str(const eng_gguf *g, const char *key, const char *want)
{
    eng_err e = {{0}};
    eng_str s = {0};
    int r = eng_gguf_get_str(g, key, &s, &e);
    CHECKF(r == 0 && str_eq(s, want), "%s (r %d %s), want %s", key, r, e.msg, want);
}

static void check_vocab(const eng_gguf *g, uint64_t n_vocab)
{
    eng_err e = {{0}};
    enum eng_gguf_vtype t;
    uint64_t n = 0;
    const void *data;
    CHECK(eng_gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_STRING, &t, &n, NULL, &e) == 0 && n == n_vocab);
    CHECK(eng_gguf_get_arr(g, "tokenizer.ggml.scores", GGUF_F32, &t, &n, &data, &e) == 0 && n == n_vocab);
    CHECK(eng_gguf_get_arr(g, "tokenizer.ggml.token_type", GGUF_I32, &t, &n, &data, &e) == 0 && n == n_vocab);
    CHECK(str_eq(eng_gguf_arr_str(g, "tokenizer.ggml.tokens", 0), "<unk>"));
    CHECK(str_eq(eng_gguf_arr_str(g, "tokenizer.ggml.tokens", 1), "<s>"));
    CHECK(str_eq(eng_gguf_arr_str(g, "tokenizer.ggml.tokens", 2), "</s>"));
    CHECK(str_eq(eng_gguf_arr_str(g, "tokenizer.ggml.tokens", 3), "<0x00>"));
    CHECK(str_eq(eng_gguf_arr_str(g, "tokenizer.ggml.tokens", 258), "<0xFF>"));
    /* reading the scores as the wrong element type names the key */
    e.msg[0] = 0;
    CHECK(eng_gguf_get_arr(g, "tokenizer.ggml.scores", GGUF_I32, &t, &n, &data, &e) == ENG_EFORMAT &&
          has(e.msg, "tokenizer.ggml.scores"));
    check_u32(g, "tokenizer.ggml.bos_token_id", 1);
    check_u32(g, "tokenizer.ggml.eos_token_id", 2);
    check_u32(g, "tokenizer.ggml.unknown_token_id", 0);
    check_str(g, "tokenizer.ggml.model", "llama");
    check_str(g, "general.architecture", "llama");
    float eps = 0;
    CHECK(eng_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &eps, &e) == 0 && fabsf(eps - 1e-5f) < 1e-9f);
}

/* Copy a whole model through the writer and compare the result. */
static void copy_model(const eng_gguf *g, const char *name)
{
    char path[4096];
    eng_err e = {{0}};
    eng_gguf_writer *w = eng_gguf_writer_new();
    for (uint64_t i = 0; i < eng_gguf_n_kv(g); i++)
        CHECK(eng_gguf_writer_copy_kv(w, g, i) == 0);
    for (uint64_t i = 0; i < eng_gguf_n_tensors(g); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        CHECK(eng_gguf_writer_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data) == 0);
    }
    CHECKF(eng_gguf_writer_save(w, tmp_path(name, path), &e) == 0, "%s", e.msg);
    eng_gguf_writer_free(w);
    eng_gguf *c = NULL;
    CHECKF(eng_gguf_open(path, &c, &e) == 0, "%s", e.msg);
    if (!c)
        return;
    CHECK(eng_gguf_alignment(c) == 64);
    /* same keys and values (plus general.alignment if g had none) */
    uint64_t extra = eng_gguf_find(g, "general.alignment") < 0;
    CHECK(eng_gguf_n_kv(c) == eng_gguf_n_kv(g) + extra);
    char a[512], b[512];
    for (uint64_t i = 0; i < eng_gguf_n_kv(g); i++) {
        const char *key = eng_gguf_kv_key(g, i);
        if (strcmp(key, "general.alignment") == 0)
            continue;
        int64_t j = eng_gguf_find(c, key);
        CHECKF(j >= 0, "%s lost", key);
        if (j < 0)
            continue;
        CHECK(eng_gguf_kv_type(c, (uint64_t)j) == eng_gguf_kv_type(g, i));
        eng_gguf_kv_format(g, i, a, sizeof a);
        eng_gguf_kv_format(c, (uint64_t)j, b, sizeof b);
        CHECKF(strcmp(a, b) == 0, "%s: %s vs %s", key, a, b);
        enum eng_gguf_vtype t1, t2;
        uint64_t n1, n2;
        const void *d1, *d2;
        if (eng_gguf_get_arr(g, key, -1, &t1, &n1, &d1, NULL) == 0) {
            CHECK(eng_gguf_get_arr(c, key, -1, &t2, &n2, &d2, NULL) == 0 && t1 == t2 && n1 == n2);
            if (t1 == GGUF_STRING) {
                for (uint64_t k = 0; k < n1; k++) {
                    eng_str s1 = eng_gguf_arr_str(g, key, k), s2 = eng_gguf_arr_str(c, key, k);
                    if (s1.len != s2.len || memcmp(s1.ptr, s2.ptr, s1.len)) {
                        CHECKF(0, "%s[%llu] differs", key, (unsigned long long)k);
                        break;
                    }
                }
            } else if (t1 == t2 && n1 == n2 && n1) {
                double x = eng_gguf_arr_f64(t1, d1, n1 - 1), y = eng_gguf_arr_f64(t2, d2, n2 - 1);
                CHECK(x == y || (isnan(x) && isnan(y)));
            }
        }
    }
    CHECK(eng_gguf_n_tensors(c) == eng_gguf_n_tensors(g));
    for (uint64_t i = 0; i < eng_gguf_n_tensors(g) && i < eng_gguf_n_tensors(c); i++) {
        const eng_gguf_tensor *x = eng_gguf_tensor_at(g, i), *y = eng_gguf_tensor_at(c, i);
        CHECKF(strcmp(x->name, y->name) == 0 && x->type == y->type && x->n_dims == y->n_dims &&
                   memcmp(x->ne, y->ne, sizeof x->ne) == 0 && x->size == y->size &&
                   memcmp(x->data, y->data, x->size) == 0,
               "tensor %s differs after the copy", x->name);
        CHECK((uintptr_t)y->data % 64 == 0);
    }
    eng_gguf_close(c);
    remove(path);
}

/* A model file from ../shared/models, opened, with its header checked
 * against what SOURCES.md's copy holds; NULL (nothing checked) where
 * ../shared is absent. */
static eng_gguf *open_shared(const char *name, uint64_t size, uint64_t n_kv, uint64_t n_tensors)
{
    char buf[4096];
    const char *path = tu_shared(name, buf);
    if (!path)
        return NULL;
    eng_err e = {{0}};
    eng_gguf *g = NULL;
    CHECKF(eng_gguf_open(path, &g, &e) == 0, "%s: %s", name, e.msg);
    if (!g)
        return NULL;
    CHECK(eng_gguf_version(g) == 3);
    CHECKF(eng_gguf_file_size(g) == size, "%s: %llu bytes", name, (unsigned long long)eng_gguf_file_size(g));
    CHECKF(eng_gguf_n_kv(g) == n_kv, "%s: %llu keys", name, (unsigned long long)eng_gguf_n_kv(g));
    CHECKF(eng_gguf_n_tensors(g) == n_tensors, "%s: %llu tensors", name, (unsigned long long)eng_gguf_n_tensors(g));
    return g;
}

static void test_stories(void)
{
    eng_gguf *g = open_shared("models/stories260K.gguf", 1185376, 19, 48);
    if (!g)
        return;
    eng_err e = {{0}};
    CHECK(eng_gguf_alignment(g) == ENG_GGUF_DEFAULT_ALIGN);
    uint64_t params = 0;
    for (uint64_t i = 0; i < eng_gguf_n_tensors(g); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        CHECKF(t->type == SIMD_F32, "%s is %s", t->name, simd_type_name(t->type));
        CHECK(t->size == n_elems(t) * 4);
        CHECK((uintptr_t)t->data % eng_gguf_alignment(g) == 0);
        params += n_elems(t);
    }
    CHECKF(params == 292800, "%llu parameters", (unsigned long long)params);
    const eng_gguf_tensor *t = eng_gguf_tensor_find(g, "token_embd.weight");
    CHECK(t && t->n_dims == 2 && t->ne[0] == 64 && t->ne[1] == 512);
    t = eng_gguf_tensor_find(g, "blk.4.ffn_down.weight");
    CHECK(t && t->n_dims == 2 && t->ne[0] == 172 && t->ne[1] == 64);
    t = eng_gguf_tensor_find(g, "blk.0.attn_k.weight");
    CHECK(t && t->ne[0] == 64 && t->ne[1] == 32); /* GQA: 4 kv heads of 8 */
    CHECK(eng_gguf_tensor_find(g, "output_norm.weight") && eng_gguf_tensor_find(g, "output.weight"));
    for (int l = 0; l < 5; l++) {
        static const char *const parts[9] = {"attn_q", "attn_k", "attn_v", "attn_output", "attn_norm",
                                             "ffn_gate", "ffn_down", "ffn_up", "ffn_norm"};
        for (int p = 0; p < 9; p++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, parts[p]);
            CHECKF(eng_gguf_tensor_find(g, name) != NULL, "%s missing", name);
        }
    }
    check_str(g, "general.name", "llama");
    check_u32s(g, (const u32_key[]){{"llama.context_length", 2048},
                                    {"llama.embedding_length", 64},
                                    {"llama.feed_forward_length", 172},
                                    {"llama.block_count", 5},
                                    {"llama.attention.head_count", 8},
                                    {"llama.attention.head_count_kv", 4},
                                    {"llama.rope.dimension_count", 8},
                                    {NULL, 0}});
    CHECK(eng_gguf_find(g, "llama.rope.freq_base") < 0);
    CHECK(eng_gguf_find(g, "tokenizer.chat_template") < 0);
    check_vocab(g, 512);
    /* merges scored 0..-252 after the 259 fixed tokens */
    enum eng_gguf_vtype ty;
    uint64_t n;
    const void *sc;
    if (eng_gguf_get_arr(g, "tokenizer.ggml.scores", GGUF_F32, &ty, &n, &sc, &e) == 0 && n == 512)
        CHECK(eng_gguf_arr_f64(ty, sc, 511) == -252.0);
    walk_all(g);
    copy_model(g, "stories_copy.gguf");
    eng_gguf_close(g);
}

static void test_tiny_random(void)
{
    eng_gguf *g = open_shared("models/llama-2-tiny-random.gguf", 1750560, 18, 12);
    if (!g)
        return;
    int n_f16 = 0, n_f32 = 0;
    uint64_t params = 0;
    for (uint64_t i = 0; i < eng_gguf_n_tensors(g); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        if (t->type == SIMD_F16) {
            n_f16++;
            CHECK(t->size == n_elems(t) * 2);
        } else if (t->type == SIMD_F32) {
            n_f32++;
            CHECKF(t->n_dims == 1 && strstr(t->name, "norm"), "F32 tensor %s", t->name);
        }
        CHECK((uintptr_t)t->data % eng_gguf_alignment(g) == 0);
        params += n_elems(t);
    }
    CHECK(n_f16 == 9 && n_f32 == 3);
    CHECKF(params == 513048, "%llu parameters", (unsigned long long)params);
    const eng_gguf_tensor *t = eng_gguf_tensor_find(g, "token_embd.weight");
    CHECK(t && t->type == SIMD_F16 && t->ne[0] == 8 && t->ne[1] == 32000);
    check_str(g, "general.name", "LLaMA v2");
    check_u32(g, "general.file_type", 1);
    check_u32s(g, (const u32_key[]){{"llama.context_length", 4096},
                                    {"llama.embedding_length", 8},
                                    {"llama.block_count", 1},
                                    {"llama.feed_forward_length", 32},
                                    {"llama.attention.head_count", 2},
                                    {"llama.attention.head_count_kv", 2},
                                    {"llama.rope.dimension_count", 4},
                                    {NULL, 0}});
    check_vocab(g, 32000);
    walk_all(g);
    copy_model(g, "tiny_copy.gguf");
    eng_gguf_close(g);
}

/* ---- fuzz seeds ---- */

static int save_seed(eng_gguf_writer *w, const char *dir, const char *name)
{
    char path[4096];
    eng_err e;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int r = eng_gguf_writer_save(w, path, &e);
    eng_gguf_writer_free(w);
    if (r)
        fprintf(stderr, "%s\n", e.msg);
    return r;
}

/* Small valid files covering every value type and every tensor type
 * nibble writes; each well under 4 KB. */
static int write_corpus(const char *dir)
{
    static const uint8_t d[256];
    int r = 0;
    eng_gguf_writer *w = eng_gguf_writer_new();
    eng_gguf_writer_str(w, "general.architecture", "llama");
    r |= save_seed(w, dir, "kv_only.gguf");

    w = eng_gguf_writer_new();
    eng_gguf_writer_scalar(w, "a", GGUF_U8, &v_u8);
    eng_gguf_writer_scalar(w, "b", GGUF_I8, &v_i8);
    eng_gguf_writer_scalar(w, "c", GGUF_U16, &v_u16);
    eng_gguf_writer_scalar(w, "d", GGUF_I16, &v_i16);
    eng_gguf_writer_scalar(w, "e", GGUF_U32, &v_u32);
    eng_gguf_writer_scalar(w, "f", GGUF_I32, &v_i32);
    eng_gguf_writer_scalar(w, "g", GGUF_F32, &v_f32);
    eng_gguf_writer_scalar(w, "h", GGUF_BOOL, &v_bool);
    eng_gguf_writer_scalar(w, "i", GGUF_U64, &v_u64);
    eng_gguf_writer_scalar(w, "j", GGUF_I64, &v_i64);
    eng_gguf_writer_scalar(w, "k", GGUF_F64, &v_f64);
    eng_gguf_writer_str(w, "l", "caf\xc3\xa9");
    eng_gguf_writer_arr(w, "m", GGUF_I32, a_i32, 3);
    eng_gguf_writer_arr(w, "n", GGUF_F32, a_f32, 4);
    eng_gguf_writer_arr(w, "o", GGUF_U8, a_u8, 0);
    eng_gguf_writer_arr_str(w, "tokenizer.ggml.tokens", a_str, 3);
    uint64_t ne1[1] = {4};
    eng_gguf_writer_tensor(w, "t", SIMD_F32, 1, ne1, d);
    r |= save_seed(w, dir, "all_values.gguf");

    w = eng_gguf_writer_new();
    eng_gguf_writer_str(w, "general.architecture", "llama");
    for (int i = 0; i < 5; i++) {
        const simd_traits *tr = simd_type_traits(ttypes[i]);
        uint64_t ne[4] = {tr->block, 1 + (uint64_t)(i % 2), 1, 1};
        char name[32];
        snprintf(name, sizeof name, "%s.weight", tr->name);
        eng_gguf_writer_tensor(w, name, ttypes[i], 1 + (uint32_t)(i % 4), ne, d);
    }
    r |= save_seed(w, dir, "tensor_types.gguf");

    w = eng_gguf_writer_new();
    uint64_t ne4[4] = {2, 3, 2, 2};
    eng_gguf_writer_tensor(w, "a", SIMD_F16, 4, ne4, d);
    eng_gguf_writer_tensor(w, "b", SIMD_BF16, 2, ne4, d);
    r |= save_seed(w, dir, "dims4.gguf");

    /* a version 2 file: the layout is the same, only the number differs */
    char path[4096];
    size_t len = 0;
    snprintf(path, sizeof path, "%s/all_values.gguf", dir);
    uint8_t *b = (uint8_t *)tu_read(path, &len);
    if (b && len > 8) {
        b[4] = 2;
        snprintf(path, sizeof path, "%s/version2.gguf", dir);
        FILE *f = fopen(path, "wb");
        r |= !f || fwrite(b, 1, len, f) != len;
        if (f)
            fclose(f);
    }
    free(b);
    printf("wrote the fuzz seeds to %s\n", dir);
    return r ? 1 : 0;
}

/* general.file_type names, llama.cpp's numbers (include/llama.h) */
static void test_ftype_names(void)
{
    static const struct { uint32_t n; const char *name; } want[] = {
        {0, "F32"},      {2, "Q4_0"},     {7, "Q8_0"},    {10, "Q2_K"},  {12, "Q3_K_M"}, {15, "Q4_K_M"},
        {19, "IQ2_XXS"}, {20, "IQ2_XS"},  {23, "IQ3_XXS"}, {24, "IQ1_S"}, {25, "IQ4_NL"}, {26, "IQ3_S"},
        {27, "IQ3_M"},   {28, "IQ2_S"},   {29, "IQ2_M"},  {30, "IQ4_XS"}, {31, "IQ1_M"}, {32, "BF16"},
        {38, "MXFP4_MOE"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const char *got = eng_gguf_ftype_name(want[i].n);
        CHECKF(got && strcmp(got, want[i].name) == 0, "file type %u: %s, want %s", want[i].n, got ? got : "NULL",
               want[i].name);
    }
    /* removed or never used numbers have no name */
    CHECK(!eng_gguf_ftype_name(4) && !eng_gguf_ftype_name(33) && !eng_gguf_ftype_name(1000));
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0)
        return write_corpus(argv[2]);
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/nb_test_gguf_XXXXXX", t && *t ? t : "/tmp");
    if (!tu_mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip();
    test_empty();
    test_stories();
    test_tiny_random();
    test_ftype_names();
    rmdir(tmpdir);
    return tu_result("test_gguf");
}
