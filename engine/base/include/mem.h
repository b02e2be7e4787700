/* Memory helpers the engine's modules share: string copies and growable
 * arrays. Nothing here keeps state. */
#ifndef NIBBLE_ENG_MEM_H
#define NIBBLE_ENG_MEM_H

#include <stddef.h>

/* A NUL-terminated copy of the n bytes at s; NULL when out of memory. */
char *eng_strndup(const char *s, size_t n);

/* Room for `need` elements of `size` bytes in the array *pp, whose
 * capacity is *cap elements: when *cap is too small the array grows to
 * the larger of twice `need` and `min_cap`, and *pp and *cap are updated.
 * Returns 0, or ENG_ENOMEM (the array untouched) when memory runs out or
 * the size would overflow. */
int eng_reserve(void *pp, size_t *cap, size_t need, size_t size, size_t min_cap);

#endif
