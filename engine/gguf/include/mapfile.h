/* Read-only whole-file mapping (mmap; MapViewOfFile on Windows). */
#ifndef NIBBLE_ENG_MAPFILE_H
#define NIBBLE_ENG_MAPFILE_H

#include <stddef.h>

#include "err.h"

typedef struct eng_map {
    const void *data;
    size_t size;
    void *handle; /* platform state */
} eng_map;

/* Map path. A missing file, a directory or an unreadable file gives a
 * message naming the path. An empty file maps to data=NULL, size=0. */
int eng_map_open(eng_map *m, const char *path, eng_err *e);
void eng_map_close(eng_map *m);
/* Tell the OS the whole pages inside [p, p+n) of a mapping are not needed
 * now: they leave this process's resident set and are read from the file
 * again if touched. Only for memory from eng_map_open (a no-op where the
 * platform has no such call). */
void eng_map_release(const void *p, size_t n);
/* Tell the OS the pages of [p, p+n) of a mapping will all be read soon:
 * start reading them from disk now, and ask for huge pages, so that the
 * page cache keeps the file in 2 MB pieces that later runs map with one
 * entry each instead of 512 (a first touch of a small page costs a fault,
 * and in some VMs much more). Advice only: nothing fails. */
void eng_map_prefetch(const void *p, size_t n);

/* n bytes of zeroed memory straight from the OS, 2 MB aligned and in huge
 * pages where the OS gives them (a large buffer then costs one fault per
 * 2 MB on first touch instead of one per 4 KB). NULL when out of memory
 * or n == 0. Free with eng_map_anon_free(p, n). */
void *eng_map_anon(size_t n);
void eng_map_anon_free(void *p, size_t n);

#endif
