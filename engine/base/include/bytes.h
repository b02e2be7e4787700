/* Searching byte strings that are not NUL-terminated (memmem is a GNU
 * extension, absent on Windows). */
#ifndef NIBBLE_ENG_BYTES_H
#define NIBBLE_ENG_BYTES_H

#include <stddef.h>

/* The first occurrence of needle[0..k) in hay[0..n), or NULL; an empty
 * needle is found at hay. */
const char *eng_memmem(const char *hay, size_t n, const char *needle, size_t k);
/* Offset of the first occurrence of the NUL-terminated pat in s[from..n),
 * or n when there is none (or from >= n). */
size_t eng_find(const char *s, size_t n, size_t from, const char *pat);

#endif
