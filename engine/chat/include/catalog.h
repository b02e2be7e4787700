/* What the chat's menus list, asked of the engine so that front ends need
 * neither the kernels (simd/) nor the file format (gguf): the kernel sets
 * this build has, whether this CPU runs each, and one line about a model
 * file. Plain data out; nothing here keeps state. */
#ifndef NIBBLE_ENG_CATALOG_H
#define NIBBLE_ENG_CATALOG_H

#include <stddef.h>

typedef struct eng_kernel_desc {
    const char *name; /* "scalar", "avx2", ...: what ENG_CMD_SET_KERNEL takes */
    int usable;       /* 1: this CPU and OS run it */
    const char *why;  /* when not usable: the missing feature; static text */
} eng_kernel_desc;

/* Kernel sets known to this build, usable or not, in a fixed order. */
int eng_kernel_count(void);
/* The i-th set (0 <= i < eng_kernel_count()); 0, or ENG_EINVAL. */
int eng_kernel_describe(int i, eng_kernel_desc *out);

/* One line about a model file for a menu, read from its header without
 * loading it: "469.5 MB  llama  q4_0", or the size and why it cannot be
 * read. Always fills note (n > 0). */
void eng_model_file_describe(const char *path, char *note, size_t n);

#endif
