/* Malformed GGUF files: each must give a non-zero code and a message
 * naming the field, with no crash, hang or huge allocation (run under
 * ASan/UBSan). Most cases start from a valid file written by the writer
 * and patch one field, found by walking the valid file; a few are built
 * byte by byte. Every buffer handed to the reader is a heap copy of
 * exactly the bytes it may read, so ASan catches any read past them. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gguf.h"
#include "simd.h"
#include "testutil.h"
#include "gguf_walk.h"

static char tmpdir[1024];
static int verbose;

/* ---- byte helpers ---- */

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t get64(const uint8_t *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }

static uint64_t rng_state = 12345;

static uint64_t rng(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

/* ---- the valid base file and where its fields are ---- */

#define MAX_KV 32
#define MAX_T 16

typedef struct layout {
    size_t n_tensors_at, n_kv_at;
    uint64_t n_kv, n_t;
    struct {
        char key[64];
        uint32_t type;
        size_t key_at;  /* the key's 8-byte length */
        size_t type_at; /* the value type */
        size_t val_at;  /* the value (for arrays: element type) */
        size_t count_at;/* arrays: the element count */
    } kv[MAX_KV];
    struct {
        char name[64];
        uint32_t n_dims;
        size_t name_at, ndims_at, ne_at, type_at, off_at;
        uint64_t offset, size;
    } t[MAX_T];
    size_t header_end; /* end of the last tensor info */
    size_t data_at;    /* start of the data section */
    size_t need_end;   /* end of the last tensor's bytes */
} layout;

static uint8_t *base;
static size_t base_len;
static layout L;

static const size_t vsz[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* Walk a file the writer made (so trusted) and note every field's offset. */
static void walk(const uint8_t *b, size_t n, layout *l)
{
    memset(l, 0, sizeof *l);
    size_t p = 8;
    l->n_tensors_at = p;
    l->n_t = get64(b + p);
    p += 8;
    l->n_kv_at = p;
    l->n_kv = get64(b + p);
    p += 8;
    for (uint64_t i = 0; i < l->n_kv && i < MAX_KV; i++) {
        l->kv[i].key_at = p;
        uint64_t len = get64(b + p);
        memcpy(l->kv[i].key, b + p + 8, len < 63 ? len : 63);
        p += 8 + len;
        l->kv[i].type_at = p;
        uint32_t t = l->kv[i].type = get32(b + p);
        p += 4;
        l->kv[i].val_at = p;
        if (t == 8) {
            p += 8 + get64(b + p);
        } else if (t == 9) {
            uint32_t at = get32(b + p);
            l->kv[i].count_at = p + 4;
            uint64_t cnt = get64(b + p + 4);
            p += 12;
            for (uint64_t j = 0; j < cnt; j++)
                p += at == 8 ? 8 + get64(b + p) : vsz[at];
        } else {
            p += vsz[t];
        }
    }
    for (uint64_t i = 0; i < l->n_t && i < MAX_T; i++) {
        l->t[i].name_at = p;
        uint64_t len = get64(b + p);
        memcpy(l->t[i].name, b + p + 8, len < 63 ? len : 63);
        p += 8 + len;
        l->t[i].ndims_at = p;
        l->t[i].n_dims = get32(b + p);
        p += 4;
        l->t[i].ne_at = p;
        p += 8 * l->t[i].n_dims;
        l->t[i].type_at = p;
        p += 4;
        l->t[i].off_at = p;
        l->t[i].offset = get64(b + p);
        p += 8;
    }
    l->header_end = p;
    l->data_at = (p + 63) / 64 * 64;
    /* sizes from the reader, which the round-trip test vouches for */
    eng_gguf *g = NULL;
    eng_err e;
    if (eng_gguf_open_memory(b, n, &g, &e) == 0) {
        for (uint64_t i = 0; i < l->n_t && i < MAX_T; i++) {
            l->t[i].size = eng_gguf_tensor_at(g, i)->size;
            size_t end = l->data_at + l->t[i].offset + l->t[i].size;
            if (end > l->need_end)
                l->need_end = end;
        }
        eng_gguf_close(g);
    }
}

static int kv_at(const char *key)
{
    for (uint64_t i = 0; i < L.n_kv; i++)
        if (strcmp(L.kv[i].key, key) == 0)
            return (int)i;
    fprintf(stderr, "test bug: no key %s in the base file\n", key);
    exit(2);
}

static int t_at(const char *name)
{
    for (uint64_t i = 0; i < L.n_t; i++)
        if (strcmp(L.t[i].name, name) == 0)
            return (int)i;
    fprintf(stderr, "test bug: no tensor %s in the base file\n", name);
    exit(2);
}

static const char *tmp_path(const char *name, char *buf)
{
    snprintf(buf, 4096, "%s/%s", tmpdir, name);
    return buf;
}

static void make_base(void)
{
    static uint8_t data[4096];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)rng();
    eng_gguf_writer *w = eng_gguf_writer_new();
    static const int32_t i3[3] = {1, 2, 3};
    static const int32_t scores[4] = {0, -1, -2, -3};
    static const char *const strs[2] = {"ab", "cd"};
    static const uint8_t u8v = 7;
    eng_gguf_writer_str(w, "general.architecture", "llama");
    eng_gguf_writer_scalar(w, "k.u8", GGUF_U8, &u8v);
    eng_gguf_writer_bool(w, "k.bool", 1);
    eng_gguf_writer_arr(w, "k.arr", GGUF_I32, i3, 3);
    eng_gguf_writer_arr_str(w, "k.strs", strs, 2);
    eng_gguf_writer_arr(w, "k.bools", GGUF_BOOL, (const uint8_t[3]){1, 0, 1}, 3);
    /* a tokenizer array with the wrong element type (scores are f32) */
    eng_gguf_writer_arr(w, "tokenizer.ggml.scores", GGUF_I32, scores, 4);
    eng_gguf_writer_arr(w, "tokenizer.ggml.token_type", GGUF_U32, scores, 4);
    uint64_t ne0[2] = {8, 2}, ne1[2] = {32, 2}, ne2[1] = {64}, ne3[3] = {2, 2, 2};
    eng_gguf_writer_tensor(w, "t0", SIMD_F32, 2, ne0, data);
    eng_gguf_writer_tensor(w, "t1", SIMD_Q8_0, 2, ne1, data);
    eng_gguf_writer_tensor(w, "t2", SIMD_Q4_0, 1, ne2, data);
    eng_gguf_writer_tensor(w, "t3", SIMD_F16, 3, ne3, data);
    char path[4096];
    eng_err e;
    if (eng_gguf_writer_save(w, tmp_path("base.gguf", path), &e) != 0) {
        fprintf(stderr, "cannot write the base file: %s\n", e.msg);
        exit(1);
    }
    eng_gguf_writer_free(w);
    base = (uint8_t *)tu_read(path, &base_len);
    remove(path);
    walk(base, base_len, &L);
    CHECK(L.n_kv == 9 && L.n_t == 4 && L.need_end > L.data_at && L.need_end <= base_len);
}

/* ---- running one case ---- */

/* Open n bytes (an exact-size heap copy) from memory; expect failure with
 * every word of want ('|'-separated alternatives) in the message. */
static void expect_fail(const uint8_t *b, size_t n, const char *want, const char *label)
{
    uint8_t *copy = malloc(n ? n : 1);
    if (n)
        memcpy(copy, b, n);
    eng_gguf *g = (eng_gguf *)1;
    eng_err e;
    strcpy(e.msg, "(no message)");
    int r = eng_gguf_open_memory(copy, n, &g, &e);
    if (verbose)
        printf("%-40s -> %d %s\n", label, r, e.msg);
    CHECKF(r < 0 && g == NULL, "%s: returned %d", label, r);
    if (r < 0 && want) {
        /* any alternative matches */
        int ok = 0;
        const char *w = want;
        while (*w && !ok) {
            const char *bar = strchr(w, '|');
            size_t len = bar ? (size_t)(bar - w) : strlen(w);
            char word[128];
            snprintf(word, sizeof word, "%.*s", (int)len, w);
            ok = strstr(e.msg, word) != NULL;
            w += len + (bar != NULL);
        }
        CHECKF(ok, "%s: message \"%s\" lacks \"%s\"", label, e.msg, want);
    }
    CHECKF(memchr(e.msg, 0, sizeof e.msg) && strlen(e.msg) > 10, "%s: empty message", label);
    if (g && g != (eng_gguf *)1)
        eng_gguf_close(g);
    free(copy);
}

static uint8_t *mut(void)
{
    uint8_t *m = malloc(base_len);
    memcpy(m, base, base_len);
    return m;
}

/* Patch a u32 / u64 of the base file and expect failure. */
static void case32(size_t at, uint32_t v, const char *want, const char *label)
{
    uint8_t *m = mut();
    put32(m + at, v);
    expect_fail(m, base_len, want, label);
    free(m);
}

static void case64(size_t at, uint64_t v, const char *want, const char *label)
{
    uint8_t *m = mut();
    put64(m + at, v);
    expect_fail(m, base_len, want, label);
    free(m);
}

/* ---- the cases ---- */

static void test_base_ok(void)
{
    eng_gguf *g = NULL;
    eng_err e;
    uint8_t *m = mut();
    CHECKF(eng_gguf_open_memory(m, base_len, &g, &e) == 0, "base: %s", e.msg);
    if (g) {
        /* the tokenizer-like array of the wrong element type: an error
         * naming the key and both types, when read as f32 */
        enum eng_gguf_vtype t;
        uint64_t n;
        const void *d;
        e.msg[0] = 0;
        int r = eng_gguf_get_arr(g, "tokenizer.ggml.scores", GGUF_F32, &t, &n, &d, &e);
        CHECKF(r == ENG_EFORMAT && strstr(e.msg, "tokenizer.ggml.scores") && strstr(e.msg, "f32") &&
                   strstr(e.msg, "i32"),
               "scores as f32: %d %s", r, e.msg);
        e.msg[0] = 0;
        r = eng_gguf_get_arr(g, "tokenizer.ggml.token_type", GGUF_I32, &t, &n, &d, &e);
        CHECKF(r == ENG_EFORMAT && strstr(e.msg, "tokenizer.ggml.token_type"), "token_type as i32: %d %s", r, e.msg);
        e.msg[0] = 0;
        r = eng_gguf_get_arr(g, "general.architecture", GGUF_STRING, &t, &n, &d, &e);
        CHECKF(r == ENG_EFORMAT && strstr(e.msg, "general.architecture"), "string as array: %d %s", r, e.msg);
        eng_gguf_close(g);
    }
    free(m);
}

static void test_truncate(void)
{
    /* every length short of the last tensor's last byte fails; from there
     * on (only padding missing) the file is whole */
    for (size_t n = 0; n <= base_len; n++) {
        char label[64];
        snprintf(label, sizeof label, "truncated at %zu", n);
        if (n >= L.need_end) {
            uint8_t *copy = malloc(n);
            memcpy(copy, base, n);
            eng_gguf *g = NULL;
            eng_err e;
            CHECKF(eng_gguf_open_memory(copy, n, &g, &e) == 0, "%s: %s", label, e.msg);
            eng_gguf_close(g);
            free(copy);
        } else if (n < 4) {
            expect_fail(base, n, "magic", label);
        } else if (n < L.header_end) {
            expect_fail(base, n, "truncated", label);
        } else if (n < L.data_at) {
            expect_fail(base, n, "truncated", label);
        } else {
            expect_fail(base, n, "end of the file", label);
        }
    }
}

static void test_header(void)
{
    uint8_t *m = mut();
    memcpy(m, "GGUX", 4);
    expect_fail(m, base_len, "magic", "bad magic GGUX");
    memcpy(m, "FUGG", 4);
    expect_fail(m, base_len, "magic", "bad magic FUGG");
    memcpy(m, "\0\0\0\0", 4);
    expect_fail(m, base_len, "magic", "bad magic zeros");
    free(m);
    case32(4, 0, "version", "version 0");
    case32(4, 1, "version 1", "version 1");
    case32(4, 4, "version", "version 4");
    case32(4, UINT32_MAX, "version", "version max");
    case32(4, 0x03000000u, "big-endian", "big-endian v3");
    case32(4, 0x02000000u, "big-endian", "big-endian v2");

    case64(L.n_tensors_at, UINT64_MAX, "tensor count", "tensor count max");
    case64(L.n_tensors_at, (uint64_t)1 << 40, "tensor count", "tensor count 2^40");
    case64(L.n_tensors_at, base_len, "tensor count", "tensor count = file size");
    case64(L.n_tensors_at, L.n_t + 1, NULL, "one tensor more");
    case64(L.n_kv_at, UINT64_MAX, "metadata count", "kv count max");
    case64(L.n_kv_at, (uint64_t)1 << 40, "metadata count", "kv count 2^40");
    case64(L.n_kv_at, base_len / 2, "metadata count", "kv count file/2");
    case64(L.n_kv_at, L.n_kv + 1, NULL, "one key more");
}

static void test_kv(void)
{
    int arch = kv_at("general.architecture"), u8 = kv_at("k.u8"), bl = kv_at("k.bool"), arr = kv_at("k.arr"),
        strs = kv_at("k.strs"), bools = kv_at("k.bools");
    /* string lengths: key, value, array element */
    case64(L.kv[u8].key_at, UINT64_MAX, "metadata key #", "key length max");
    case64(L.kv[u8].key_at, (uint64_t)1 << 40, "metadata key #", "key length 2^40");
    case64(L.kv[u8].key_at, base_len, "metadata key #", "key length = file size");
    case64(L.kv[u8].key_at, 0, "empty key", "key length 0");
    case64(L.kv[arch].val_at, UINT64_MAX, "general.architecture", "value length max");
    case64(L.kv[arch].val_at, (uint64_t)1 << 40, "general.architecture", "value length 2^40");
    case64(L.kv[arch].val_at, base_len - L.kv[arch].val_at - 7, "truncated", "value length just past the end");
    case64(L.kv[strs].count_at + 8, UINT64_MAX, "k.strs", "string element length max");
    {
        uint8_t *m = mut();
        m[L.kv[u8].key_at + 8 + 1] = 0; /* "k\0u8" */
        expect_fail(m, base_len, "NUL", "NUL in key");
        free(m);
    }
    /* array counts */
    case64(L.kv[arr].count_at, UINT64_MAX, "k.arr|array count", "array count max");
    case64(L.kv[arr].count_at, (uint64_t)1 << 62, "array count", "array count 2^62 (x4 wraps)");
    case64(L.kv[arr].count_at, ((uint64_t)1 << 62) + 1, "array count", "array count 2^62+1");
    case64(L.kv[arr].count_at, base_len, "array count", "array count = file size");
    case64(L.kv[strs].count_at, UINT64_MAX, "array count", "string array count max");
    case64(L.kv[strs].count_at, base_len / 8, "k.strs|array count", "string array count file/8");
    case64(L.kv[strs].count_at, 1000, NULL, "string array count 1000");
    /* value types */
    case32(L.kv[u8].type_at, 13, "unknown value type", "value type 13");
    case32(L.kv[u8].type_at, 1000, "unknown value type", "value type 1000");
    case32(L.kv[u8].type_at, UINT32_MAX, "unknown value type", "value type max");
    case32(L.kv[arr].val_at, 13, "unknown array element type", "array element type 13");
    case32(L.kv[arr].val_at, UINT32_MAX, "unknown array element type", "array element type max");
    case32(L.kv[arr].val_at, GGUF_ARRAY, "nested", "nested array");
    /* a u8 re-read as every other type: wrong sizes, no crash */
    for (uint32_t t = 0; t < 13; t++) {
        char label[64];
        snprintf(label, sizeof label, "k.u8 read as type %u", t);
        uint8_t *m = mut();
        put32(m + L.kv[u8].type_at, t);
        uint8_t *copy = malloc(base_len);
        memcpy(copy, m, base_len);
        eng_gguf *g = NULL;
        eng_err e;
        if (eng_gguf_open_memory(copy, base_len, &g, &e) == 0)
            eng_gguf_close(g);
        free(copy);
        free(m);
    }
    /* bools */
    {
        uint8_t *m = mut();
        m[L.kv[bl].val_at] = 2;
        expect_fail(m, base_len, "bool", "bool value 2");
        m[L.kv[bl].val_at] = 255;
        expect_fail(m, base_len, "k.bool", "bool value 255");
        free(m);
        m = mut();
        m[L.kv[bools].count_at + 8 + 2] = 2;
        expect_fail(m, base_len, "bool", "bool array element 2");
        free(m);
    }
    /* duplicate keys: rename k.strs to k.bool (same length) */
    {
        uint8_t *m = mut();
        memcpy(m + L.kv[strs].key_at + 8, "k.bool", 6);
        expect_fail(m, base_len, "appears twice", "duplicate key");
        free(m);
    }
}

static void test_alignment(void)
{
    int a = kv_at("general.alignment");
    CHECK(a == 0);
    size_t at = L.kv[a].val_at;
    case32(at, 0, "alignment", "alignment 0");
    case32(at, 3, "alignment", "alignment 3");
    case32(at, 48, "alignment", "alignment 48");
    case32(at, 1u << 30, "alignment", "alignment 2^30");
    case32(at, UINT32_MAX, "alignment", "alignment max");
    case32(at, 128, "aligned", "alignment 128 (offsets of 64)");
    case32(L.kv[a].type_at, GGUF_F32, "alignment", "alignment as f32");
    case32(L.kv[a].type_at, GGUF_BOOL, "bool", "alignment as bool (value 64)");
    /* any power of two up to 64 is valid here: the data section moves,
     * every offset stays aligned; an i32 holding 64 is taken too */
    for (uint32_t v = 1; v <= 128; v *= 2) {
        uint8_t *m = mut();
        if (v == 128)
            put32(m + L.kv[a].type_at, GGUF_I32);
        else
            put32(m + at, v);
        eng_gguf *g = NULL;
        eng_err e;
        int r = eng_gguf_open_memory(m, base_len, &g, &e);
        CHECKF(r == 0, "alignment %u: %s", v, e.msg);
        if (g) {
            CHECK(eng_gguf_alignment(g) == (v == 128 ? 64 : v));
            eng_gguf_close(g);
        }
        free(m);
    }
}

static void test_tensors(void)
{
    int t0 = t_at("t0"), t1 = t_at("t1"), t2 = t_at("t2"), t3 = t_at("t3");
    case64(L.t[t1].name_at, UINT64_MAX, "name of tensor", "tensor name length max");
    case64(L.t[t1].name_at, (uint64_t)1 << 40, "name of tensor", "tensor name length 2^40");
    case64(L.t[t1].name_at, 0, "empty name", "tensor name length 0");
    case32(L.t[t1].ndims_at, 0, "n_dims", "n_dims 0");
    case32(L.t[t1].ndims_at, 5, "n_dims", "n_dims 5");
    case32(L.t[t1].ndims_at, UINT32_MAX, "n_dims", "n_dims max");
    case32(L.t[t0].ndims_at, 1, NULL, "n_dims 1 instead of 2");
    case32(L.t[t0].ndims_at, 3, NULL, "n_dims 3 instead of 2");
    case64(L.t[t0].ne_at + 8, 0, "dimension", "zero dimension");
    case64(L.t[t0].ne_at, 0, "dimension", "zero row length");
    {
        uint8_t *m = mut();
        put64(m + L.t[t0].ne_at, (uint64_t)1 << 32);
        put64(m + L.t[t0].ne_at + 8, (uint64_t)1 << 32);
        expect_fail(m, base_len, "overflow", "dims 2^32 x 2^32");
        put64(m + L.t[t0].ne_at, UINT64_MAX);
        put64(m + L.t[t0].ne_at + 8, UINT64_MAX);
        expect_fail(m, base_len, "overflow", "dims max x max");
        put64(m + L.t[t0].ne_at, (uint64_t)1 << 31);
        put64(m + L.t[t0].ne_at + 8, (uint64_t)1 << 31);
        expect_fail(m, base_len, "overflow", "f32 dims 2^31 x 2^31 (size 2^64)");
        put64(m + L.t[t0].ne_at, (uint64_t)1 << 20);
        put64(m + L.t[t0].ne_at + 8, (uint64_t)1 << 20);
        expect_fail(m, base_len, "end of the file", "f32 dims 2^20 x 2^20");
        free(m);
        m = mut();
        for (int d = 0; d < 3; d++)
            put64(m + L.t[t3].ne_at + 8 * (size_t)d, (uint64_t)1 << 22);
        expect_fail(m, base_len, "overflow", "3 dims of 2^22");
        free(m);
    }
    static const uint32_t bad_types[] = {4, 5, 31, 40, 1000, UINT32_MAX, 0x80000000u};
    for (size_t i = 0; i < sizeof bad_types / sizeof bad_types[0]; i++) {
        char label[64];
        snprintf(label, sizeof label, "tensor type %u", bad_types[i]);
        case32(L.t[t2].type_at, bad_types[i], "unknown tensor type", label);
    }
    case64(L.t[t1].ne_at, 33, "row length", "q8_0 row of 33");
    case64(L.t[t2].ne_at, 16, "row length", "q4_0 row of 16");
    case32(L.t[t0].type_at, SIMD_Q4_K, "row length", "f32 [8,2] as q4_k");
    /* offsets */
    case64(L.t[t2].off_at, (uint64_t)1 << 40, "offset", "offset 2^40");
    case64(L.t[t2].off_at, UINT64_MAX, "offset", "offset max");
    case64(L.t[t2].off_at, UINT64_MAX - 63, "offset", "offset max aligned");
    case64(L.t[t3].off_at, (base_len - L.data_at + 63) / 64 * 64, "offset", "offset at the end");
    case64(L.t[t3].off_at, L.t[t3].offset + 1, "aligned", "unaligned offset");
    case64(L.t[t3].off_at, L.t[t3].offset + 32, "aligned", "offset aligned to 32 only");
    case64(L.t[t1].off_at, L.t[t0].offset, "overlap", "t1 at t0");
    case64(L.t[t3].off_at, L.t[t2].offset, "overlap", "t3 at t2");
    case64(L.t[t0].off_at, L.t[t3].offset, "overlap", "t0 at t3");
    /* t1 (q8_0, 136 bytes) one block of 64 ahead: runs into t2 */
    case64(L.t[t2].off_at, L.t[t1].offset + 64, "overlap", "t2 inside t1");
    /* duplicate names */
    {
        uint8_t *m = mut();
        memcpy(m + L.t[t1].name_at + 8, "t0", 2);
        expect_fail(m, base_len, "appears twice", "duplicate tensor name");
        free(m);
        m = mut();
        m[L.t[t1].name_at + 8 + 1] = 0;
        expect_fail(m, base_len, "NUL", "NUL in tensor name");
        free(m);
    }
}

/* ---- files built byte by byte ---- */

typedef struct rb {
    uint8_t *p;
    size_t len, cap;
} rb;

static void rb_put(rb *b, const void *src, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void rb32(rb *b, uint32_t v)
{
    uint8_t x[4];
    put32(x, v);
    rb_put(b, x, 4);
}

static void rb64(rb *b, uint64_t v)
{
    uint8_t x[8];
    put64(x, v);
    rb_put(b, x, 8);
}

static void rbstr(rb *b, const char *s)
{
    rb64(b, strlen(s));
    rb_put(b, s, strlen(s));
}

static void rb_header(rb *b, uint32_t version, uint64_t n_t, uint64_t n_kv)
{
    b->len = 0;
    rb_put(b, "GGUF", 4);
    rb32(b, version);
    rb64(b, n_t);
    rb64(b, n_kv);
}

/* tensor info: f32 vector of n values at offset off */
static void rb_tensor(rb *b, const char *name, uint64_t n, uint64_t off)
{
    rbstr(b, name);
    rb32(b, 1);
    rb64(b, n);
    rb32(b, SIMD_F32);
    rb64(b, off);
}

static void rb_pad(rb *b, size_t align, size_t extra)
{
    static const uint8_t z[256];
    rb_put(b, z, (align - b->len % align) % align);
    while (extra) {
        size_t k = extra < sizeof z ? extra : sizeof z;
        rb_put(b, z, k);
        extra -= k;
    }
}

static void test_built(void)
{
    rb b = {0};
    /* general.alignment as a string */
    rb_header(&b, 3, 1, 1);
    rbstr(&b, "general.alignment");
    rb32(&b, GGUF_STRING);
    rbstr(&b, "64");
    rb_tensor(&b, "x", 4, 0);
    rb_pad(&b, 64, 64);
    expect_fail(b.p, b.len, "alignment", "alignment as string");
    /* as a negative i32 */
    rb_header(&b, 3, 1, 1);
    rbstr(&b, "general.alignment");
    rb32(&b, GGUF_I32);
    rb32(&b, (uint32_t)-64);
    rb_tensor(&b, "x", 4, 0);
    rb_pad(&b, 64, 64);
    expect_fail(b.p, b.len, "alignment", "alignment -64");
    /* as an array */
    rb_header(&b, 3, 1, 1);
    rbstr(&b, "general.alignment");
    rb32(&b, GGUF_ARRAY);
    rb32(&b, GGUF_U32);
    rb64(&b, 1);
    rb32(&b, 64);
    rb_tensor(&b, "x", 4, 0);
    rb_pad(&b, 64, 64);
    expect_fail(b.p, b.len, "alignment", "alignment as array");
    /* version 2 is read; without general.alignment the default 32 holds */
    rb_header(&b, 2, 2, 1);
    rbstr(&b, "general.architecture");
    rb32(&b, GGUF_STRING);
    rbstr(&b, "llama");
    rb_tensor(&b, "a", 4, 0);
    rb_tensor(&b, "b", 4, 32);
    rb_pad(&b, 32, 64);
    {
        eng_gguf *g = NULL;
        eng_err e;
        uint8_t *copy = malloc(b.len);
        memcpy(copy, b.p, b.len);
        CHECKF(eng_gguf_open_memory(copy, b.len, &g, &e) == 0, "v2: %s", e.msg);
        if (g) {
            CHECK(eng_gguf_version(g) == 2 && eng_gguf_alignment(g) == 32 && eng_gguf_n_tensors(g) == 2);
            eng_gguf_close(g);
        }
        free(copy);
    }
    /* the same with b at 16: unaligned for the default 32 */
    rb_header(&b, 2, 2, 1);
    rbstr(&b, "general.architecture");
    rb32(&b, GGUF_STRING);
    rbstr(&b, "llama");
    rb_tensor(&b, "a", 4, 0);
    rb_tensor(&b, "b", 4, 16);
    rb_pad(&b, 32, 64);
    expect_fail(b.p, b.len, "aligned", "v2 offset 16 with default alignment");
    /* a tensor with no data section at all */
    rb_header(&b, 3, 1, 0);
    rb_tensor(&b, "x", 4, 0);
    expect_fail(b.p, b.len, "truncated|end of the file", "no data section");
    free(b.p);
}

/* Many keys and many tensors: checking them for duplicates must not be
 * quadratic (100k keys would take minutes at n^2). */
static void test_many(void)
{
    rb b = {0};
    const uint64_t n_kv = 100000, n_t = 50000;
    rb_header(&b, 3, n_t, n_kv + 1);
    rbstr(&b, "general.alignment");
    rb32(&b, GGUF_U32);
    rb32(&b, 4);
    char name[32];
    for (uint64_t i = 0; i < n_kv; i++) {
        snprintf(name, sizeof name, "k%07llu", (unsigned long long)(i * 7919 % n_kv));
        rbstr(&b, name);
        rb32(&b, GGUF_U8);
        rb_put(&b, "\1", 1);
    }
    for (uint64_t i = 0; i < n_t; i++) {
        snprintf(name, sizeof name, "t%07llu", (unsigned long long)i);
        rb_tensor(&b, name, 1, 4 * i);
    }
    rb_pad(&b, 4, 4 * n_t);
    clock_t t0 = clock();
    eng_gguf *g = NULL;
    eng_err e;
    CHECKF(eng_gguf_open_memory(b.p, b.len, &g, &e) == 0, "many: %s", e.msg);
    if (g) {
        CHECK(eng_gguf_n_kv(g) == n_kv + 1 && eng_gguf_n_tensors(g) == n_t);
        eng_gguf_close(g);
    }
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    CHECKF(secs < 3, "opening 100k keys and 50k tensors took %.1f s", secs);
    if (verbose)
        printf("many keys: %.3f s\n", secs);
    /* the last key renamed to equal one in the middle */
    size_t last_key = 24 + 8 + 17 + 4 + 4 + (n_kv - 1) * (8 + 8 + 4 + 1) + 8;
    char want[16];
    snprintf(want, sizeof want, "k%07llu", (unsigned long long)((n_kv / 2) * 7919 % n_kv));
    memcpy(b.p + last_key, want, 8);
    t0 = clock();
    expect_fail(b.p, b.len, "appears twice", "many keys, one twice");
    secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    CHECKF(secs < 3, "took %.1f s", secs);
    free(b.p);
}

/* ---- through real files ---- */

static void test_files(void)
{
    char path[4096];
    eng_gguf *g = NULL;
    eng_err e;
    struct {
        const char *name;
        size_t len;
        void (*patch)(uint8_t *);
        const char *want;
    } cases[] = {
        {"empty.gguf", 0, NULL, "magic"},
        {"short.gguf", 3, NULL, "magic"},
        {"header_cut.gguf", 40, NULL, "truncated"},
        {"data_cut.gguf", 0, NULL, "end of the file"},
    };
    cases[3].len = L.need_end - 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *f = fopen(tmp_path(cases[i].name, path), "wb");
        CHECK(f && fwrite(base, 1, cases[i].len, f) == cases[i].len);
        if (f)
            fclose(f);
        e.msg[0] = 0;
        int r = eng_gguf_open(path, &g, &e);
        CHECKF(r < 0 && !g && strstr(e.msg, cases[i].want) && strstr(e.msg, cases[i].name), "%s: %d %s",
               cases[i].name, r, e.msg);
        if (verbose)
            printf("%-40s -> %d %s\n", cases[i].name, r, e.msg);
        remove(path);
    }
    /* a bad alignment through a file */
    uint8_t *m = mut();
    put32(m + L.kv[0].val_at, 3);
    FILE *f = fopen(tmp_path("align3.gguf", path), "wb");
    CHECK(f && fwrite(m, 1, base_len, f) == base_len);
    if (f)
        fclose(f);
    free(m);
    e.msg[0] = 0;
    CHECKF(eng_gguf_open(path, &g, &e) < 0 && strstr(e.msg, "alignment") && strstr(e.msg, "align3.gguf"), "%s", e.msg);
    remove(path);
    /* missing file, a folder */
    e.msg[0] = 0;
    CHECKF(eng_gguf_open(tmp_path("missing.gguf", path), &g, &e) == ENG_EIO && !g && strstr(e.msg, "missing.gguf"),
           "%s", e.msg);
    e.msg[0] = 0;
    CHECKF(eng_gguf_open(tmpdir, &g, &e) == ENG_EIO && !g && strstr(e.msg, "directory"), "%s", e.msg);
    /* the valid base through a file */
    f = fopen(tmp_path("ok.gguf", path), "wb");
    CHECK(f && fwrite(base, 1, base_len, f) == base_len);
    if (f)
        fclose(f);
    CHECKF(eng_gguf_open(path, &g, &e) == 0, "%s", e.msg);
    eng_gguf_close(g);
    remove(path);
}

/* ---- random mutation ---- */

static void test_mutate(void)
{
    const int iters = 20000;
    int ok = 0;
    unsigned sum = 0;
    /* fields worth hitting with boundary values */
    size_t fields[2 * MAX_KV + 6 * MAX_T + 4];
    int widths[2 * MAX_KV + 6 * MAX_T + 4];
    int nf = 0;
    fields[nf] = 4, widths[nf++] = 4;
    fields[nf] = L.n_tensors_at, widths[nf++] = 8;
    fields[nf] = L.n_kv_at, widths[nf++] = 8;
    for (uint64_t i = 0; i < L.n_kv; i++) {
        fields[nf] = L.kv[i].key_at, widths[nf++] = 8;
        fields[nf] = L.kv[i].type_at, widths[nf++] = 4;
    }
    for (uint64_t i = 0; i < L.n_t; i++) {
        fields[nf] = L.t[i].name_at, widths[nf++] = 8;
        fields[nf] = L.t[i].ndims_at, widths[nf++] = 4;
        fields[nf] = L.t[i].ne_at, widths[nf++] = 8;
        fields[nf] = L.t[i].type_at, widths[nf++] = 4;
        fields[nf] = L.t[i].off_at, widths[nf++] = 8;
    }
    static const uint64_t special[] = {0, 1, 2, 3, 4, 8, 9, 12, 13, 31, 32, 64, 255, 0x7fffffff, 0xffffffff,
                                       0x100000000ull, (uint64_t)1 << 62, INT64_MAX, UINT64_MAX};
    for (int it = 0; it < iters; it++) {
        size_t n = base_len;
        uint8_t *m = malloc(base_len);
        memcpy(m, base, base_len);
        int kind = (int)(rng() % 8);
        if (kind < 5) {
            /* flip 1..8 bytes, mostly in the header */
            int flips = 1 + (int)(rng() % 8);
            for (int k = 0; k < flips; k++) {
                size_t at = rng() % 10 ? rng() % L.data_at : rng() % base_len;
                m[at] = rng() % 2 ? (uint8_t)rng() : (uint8_t)(m[at] ^ (1u << (rng() % 8)));
            }
        } else if (kind < 7) {
            /* a boundary value into a field, maybe off by a little */
            int f = (int)(rng() % (uint64_t)nf);
            uint64_t v = special[rng() % (sizeof special / sizeof special[0])] + (rng() % 4 == 0 ? rng() % 3 : 0);
            if (widths[f] == 4)
                put32(m + fields[f], (uint32_t)v);
            else
                put64(m + fields[f], v);
        } else {
            /* a flip plus a cut */
            m[rng() % L.data_at] ^= (uint8_t)(1u << (rng() % 8));
            n = rng() % (base_len + 1);
        }
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, m, n);
        free(m);
        eng_gguf *g = NULL;
        eng_err e;
        e.msg[0] = 0;
        int r = eng_gguf_open_memory(copy, n, &g, &e);
        if (r == 0) {
            ok++;
            sum += gguf_walk(g);
            eng_gguf_close(g);
        } else {
            CHECKF(r < 0 && !g && strlen(e.msg) > 10, "iteration %d: %d [%s]", it, r, e.msg);
        }
        free(copy);
    }
    if (verbose)
        printf("mutation: %d of %d opened (checksum %u)\n", ok, iters, sum);
    CHECK(ok > 0 && ok < iters);
}

int main(int argc, char **argv)
{
    verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/nb_test_gguf_bad_XXXXXX", t && *t ? t : "/tmp");
    if (!tu_mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    make_base();
    test_base_ok();
    test_truncate();
    test_header();
    test_kv();
    test_alignment();
    test_tensors();
    test_built();
    test_many();
    test_files();
    test_mutate();
    free(base);
    rmdir(tmpdir);
    return tu_result("test_gguf_bad");
}
