/* Files the way nibble writes them: never half-written (a temporary
 * beside the target, flushed to disk, then renamed over it, so a crash or
 * a full disk leaves the previous file whole), folders made as needed,
 * and path names taken apart the same way on every system. */
#ifndef NIBBLE_ENG_FILES_H
#define NIBBLE_ENG_FILES_H

#include <stddef.h>
#include <stdio.h>

#include "err.h"

/* A file being replaced: write to f, then commit or abort. */
typedef struct eng_afile {
    FILE *f;   /* the temporary, open for writing (binary) */
    char *tmp; /* its name: PATH.tmp.PID */
    char *path;
} eng_afile;

/* Create the temporary for path with the given mode bits (0600 for
 * private data, 0644 for shared files; umask applies). On failure a
 * is empty and e names the file. */
int eng_afile_open(eng_afile *a, const char *path, int mode, eng_err *e);
/* Flush, sync to disk, close and rename over the target. On any failure
 * the temporary is removed, the target untouched, and e says why. a is
 * empty afterwards either way. */
int eng_afile_commit(eng_afile *a, eng_err *e);
/* Give up: close and remove the temporary. Accepts an empty a. */
void eng_afile_abort(eng_afile *a);

/* path replaced by the n bytes at data, atomically (mode 0600). */
int eng_write_atomic(const char *path, const char *data, size_t n, eng_err *e);

/* Read a whole file that a user or another program may have put there.
 * Only a regular file is read: a directory, FIFO, socket or device (a
 * link to /dev/zero, say) is refused with a message naming what it is,
 * and the open never blocks (a FIFO is opened without waiting for a
 * writer, then refused). A file larger than max bytes is refused before
 * it is read, and reading stops at max even if it grows meanwhile.
 * On success *data (caller frees) holds *len bytes and a NUL after them;
 * on failure *data is NULL and e names the path (ENG_EIO: cannot open or
 * read, or not a regular file; ENG_EFORMAT: too large; ENG_ENOMEM). */
int eng_read_file(const char *path, size_t max, char **data, size_t *len, eng_err *e);

/* Before long work that ends in writing path: 0 if path can be written
 * as far as one can tell without writing (its folder exists, is a folder
 * and is writable; path itself is not a folder), else ENG_EIO with e
 * naming what is wrong. */
int eng_check_dest(const char *path, eng_err *e);

/* mkdir -p (mode 0700 for each folder it makes). */
int eng_mkdirs(const char *path, eng_err *e);

/* The last component of a path: after the last '/' (or '\\' on Windows);
 * the path itself when it has no separator. Points into path. */
const char *eng_path_base(const char *path);

#endif
