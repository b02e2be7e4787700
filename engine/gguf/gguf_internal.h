/* Private to engine/gguf: the parsed file, shared by the reader
 * (gguf_read.c) and the writer (gguf_write.c, which copies key/values
 * from an open file as they are). */
#ifndef NIBBLE_ENG_GGUF_INTERNAL_H
#define NIBBLE_ENG_GGUF_INTERNAL_H

#include "gguf.h"
#include "mapfile.h"

typedef struct kv {
    char *key;
    enum eng_gguf_vtype type;
    const uint8_t *val;          /* value bytes (for arrays: the elements) */
    enum eng_gguf_vtype arr_type;
    uint64_t arr_count;
    eng_str *strs;               /* string value (1) or string-array elements */
} kv;

struct eng_gguf {
    eng_map map;
    const uint8_t *base;
    uint64_t size;
    uint32_t version;
    uint64_t n_kv, n_tensors;
    kv *kvs;
    eng_gguf_tensor *tensors;
    uint64_t alignment, data_offset;
};

/* Bytes of one value of each fixed-size type (0: string, array). */
extern const size_t eng_gguf_vsize[GGUF_VTYPE_COUNT];

#endif
