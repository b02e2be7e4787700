/* GGUF v2/v3: a validating, memory-mapped reader and a writer.
 *
 * Every length, count, offset, type and shape is checked against the file
 * before use; a bad file gives one message naming the field. Tensor data
 * is used in place from the mapping (zero copy). */
#ifndef NIBBLE_ENG_GGUF_H
#define NIBBLE_ENG_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

enum eng_gguf_vtype {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5,
    GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_U64 = 10,
    GGUF_I64 = 11, GGUF_F64 = 12, GGUF_VTYPE_COUNT
};

#define ENG_GGUF_MAX_DIMS 4
#define ENG_GGUF_DEFAULT_ALIGN 32

typedef struct eng_str {
    const char *ptr; /* into the mapping; not NUL-terminated */
    uint64_t len;
} eng_str;

typedef struct eng_gguf_tensor {
    const char *name;  /* NUL-terminated copy */
    uint32_t n_dims;
    uint64_t ne[ENG_GGUF_MAX_DIMS]; /* ne[0] is the row length; unused dims are 1 */
    int type;          /* enum simd_type */
    uint64_t offset;   /* from the start of the data section */
    uint64_t size;     /* bytes */
    const void *data;  /* into the mapping */
} eng_gguf_tensor;

typedef struct eng_gguf eng_gguf;

/* Open and validate a file. On failure *out is NULL and e says why. */
int eng_gguf_open(const char *path, eng_gguf **out, eng_err *e);
/* Validate a buffer the caller keeps alive for the reader's lifetime
 * (for tests and fuzzing). */
int eng_gguf_open_memory(const void *data, size_t size, eng_gguf **out, eng_err *e);
void eng_gguf_close(eng_gguf *g);

uint32_t eng_gguf_version(const eng_gguf *g);
uint64_t eng_gguf_file_size(const eng_gguf *g);
uint64_t eng_gguf_alignment(const eng_gguf *g);
uint64_t eng_gguf_data_offset(const eng_gguf *g);

/* ---- metadata ---- */
uint64_t eng_gguf_n_kv(const eng_gguf *g);
const char *eng_gguf_kv_key(const eng_gguf *g, uint64_t i);
/* Type of key i; GGUF_VTYPE_COUNT if i is out of range. */
enum eng_gguf_vtype eng_gguf_kv_type(const eng_gguf *g, uint64_t i);
/* Index of key, or -1. */
int64_t eng_gguf_find(const eng_gguf *g, const char *key);

/* Typed getters. Each returns 0, or ENG_EFORMAT (e names key and the type
 * found) when the key exists with another type, or 1 when it is absent
 * (*out untouched, so callers may preset a default). Integer getters accept
 * any integer type whose value fits. */
int eng_gguf_get_u32(const eng_gguf *g, const char *key, uint32_t *out, eng_err *e);
int eng_gguf_get_i64(const eng_gguf *g, const char *key, int64_t *out, eng_err *e);
int eng_gguf_get_u64(const eng_gguf *g, const char *key, uint64_t *out, eng_err *e);
/* Float getters accept f32, f64 and any integer; both fail on NaN or an
 * infinity, get_f32 also on a value beyond float's range. */
int eng_gguf_get_f32(const eng_gguf *g, const char *key, float *out, eng_err *e);
int eng_gguf_get_f64(const eng_gguf *g, const char *key, double *out, eng_err *e);
int eng_gguf_get_bool(const eng_gguf *g, const char *key, int *out, eng_err *e);
int eng_gguf_get_str(const eng_gguf *g, const char *key, eng_str *out, eng_err *e);

/* Arrays: element type and count; the elements of a numeric array are at
 * *data (unaligned, little-endian); a string array is read with
 * eng_gguf_arr_str. Same return convention; want is the element type
 * expected (or -1 for any). */
int eng_gguf_get_arr(const eng_gguf *g, const char *key, int want, enum eng_gguf_vtype *type,
                     uint64_t *count, const void **data, eng_err *e);
eng_str eng_gguf_arr_str(const eng_gguf *g, const char *key, uint64_t j);
/* All elements of a string array at once (borrowed, valid while g is
 * open), *count of them; NULL if key is not a string array. For long
 * arrays (vocabularies): eng_gguf_arr_str looks the key up per element. */
const eng_str *eng_gguf_arr_strs(const eng_gguf *g, const char *key, uint64_t *count);
/* Value of element j of a numeric array as double / int64 (0 for a type
 * that is not numeric). int64 clamps what does not fit (u64 above
 * INT64_MAX, large floats; NaN gives 0). */
double eng_gguf_arr_f64(enum eng_gguf_vtype type, const void *data, uint64_t j);
int64_t eng_gguf_arr_i64(enum eng_gguf_vtype type, const void *data, uint64_t j);

const char *eng_gguf_vtype_name(int t);
/* Print a value for display (arrays summarised) into buf: always
 * NUL-terminated when n > 0, valid UTF-8 (bytes that are not become '?',
 * cut strings end in "..."); "" for an index out of range. */
void eng_gguf_kv_format(const eng_gguf *g, uint64_t i, char *buf, size_t n);

/* ---- tensors ---- */
uint64_t eng_gguf_n_tensors(const eng_gguf *g);
const eng_gguf_tensor *eng_gguf_tensor_at(const eng_gguf *g, uint64_t i);
const eng_gguf_tensor *eng_gguf_tensor_find(const eng_gguf *g, const char *name);
/* The weight type (enum simd_type) that most matrix parameters (tensors
 * of two or more dimensions) have: what "a Q4_0 model" means. F32 when
 * there is no matrix. *n_params (may be NULL) gets every tensor's
 * element count. */
int eng_gguf_main_type(const eng_gguf *g, uint64_t *n_params);
/* The name llama.cpp gives a general.file_type value (its LLAMA_FTYPE_*
 * list: 0 "F32", 15 "Q4_K_M", 26 "IQ3_S" ...), or NULL for a number it
 * does not use. */
const char *eng_gguf_ftype_name(uint32_t ftype);

/* ---- writer ----
 * Collects metadata and tensors, then writes a GGUF v3 file with
 * alignment 64 through a temporary file renamed into place, so a failed
 * write never leaves a half-written file. Tensor data is borrowed: it
 * must stay valid until eng_gguf_writer_save returns. The writer puts
 * general.alignment first itself; setting or copying that key is a no-op
 * (returns 0). Keys are not checked for duplicates: the caller adds each
 * once. */
typedef struct eng_gguf_writer eng_gguf_writer;

eng_gguf_writer *eng_gguf_writer_new(void);
void eng_gguf_writer_free(eng_gguf_writer *w);
int eng_gguf_writer_u32(eng_gguf_writer *w, const char *key, uint32_t v);
int eng_gguf_writer_i32(eng_gguf_writer *w, const char *key, int32_t v);
int eng_gguf_writer_f32(eng_gguf_writer *w, const char *key, float v);
int eng_gguf_writer_bool(eng_gguf_writer *w, const char *key, int v);
int eng_gguf_writer_str(eng_gguf_writer *w, const char *key, const char *v);
/* One value of any numeric or bool type t, read from *v in host layout
 * (uint8_t for GGUF_BOOL, which must hold 0 or 1). */
int eng_gguf_writer_scalar(eng_gguf_writer *w, const char *key, enum eng_gguf_vtype t, const void *v);
/* numeric array: n elements of type t copied from data */
int eng_gguf_writer_arr(eng_gguf_writer *w, const char *key, enum eng_gguf_vtype t, const void *data,
                        uint64_t n);
int eng_gguf_writer_arr_str(eng_gguf_writer *w, const char *key, const char *const *v, uint64_t n);
/* Copy key i of g (any type) into the writer; ENG_EINVAL if i is out
 * of range. */
int eng_gguf_writer_copy_kv(eng_gguf_writer *w, const eng_gguf *g, uint64_t i);
/* The same under another key (NULL: its own), e.g. when a tool renames
 * the architecture prefix. */
int eng_gguf_writer_copy_kv_as(eng_gguf_writer *w, const eng_gguf *g, uint64_t i, const char *key);
/* ne has n_dims entries (ne[0] the row length); data holds the tensor in
 * type `type`, simd_row_bytes(type, ne[0]) * rows bytes. */
int eng_gguf_writer_tensor(eng_gguf_writer *w, const char *name, int type, uint32_t n_dims,
                           const uint64_t *ne, const void *data);
int eng_gguf_writer_save(eng_gguf_writer *w, const char *path, eng_err *e);

#endif
