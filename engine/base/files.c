/* Atomic replacement, folders and path names (see files.h). */
#include "files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "port.h"

#ifndef W_OK
#define W_OK 2 /* mingw-w64 spells access()'s modes as numbers */
#endif

#ifdef _WIN32
#include <process.h>
#define nb_getpid _getpid
#else
#define nb_getpid getpid
#endif

int eng_afile_open(eng_afile *a, const char *path, int mode, eng_err *e)
{
    memset(a, 0, sizeof *a);
    size_t plen = strlen(path);
    a->path = malloc(plen + 1);
    a->tmp = malloc(plen + 32);
    if (!a->path || !a->tmp) {
        eng_afile_abort(a);
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    }
    memcpy(a->path, path, plen + 1);
    snprintf(a->tmp, plen + 32, "%s.tmp.%ld", path, (long)nb_getpid());
    int fd = open(a->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | NB_O_BINARY, mode);
    if (fd >= 0)
        a->f = fdopen(fd, "wb");
    if (!a->f) {
        int err = errno;
        if (fd >= 0) {
            close(fd);
            unlink(a->tmp);
        }
        free(a->tmp);
        a->tmp = NULL; /* nothing to remove */
        eng_afile_abort(a);
        return eng_errf(e, ENG_EIO, "%.200s: cannot write: %s", path, strerror(err));
    }
    return 0;
}

int eng_afile_commit(eng_afile *a, eng_err *e)
{
    int ok = fflush(a->f) == 0 && !ferror(a->f) && nb_fsync(fileno(a->f)) == 0;
    int err = errno;
    if (fclose(a->f) != 0 && ok) {
        ok = 0;
        err = errno;
    }
    a->f = NULL;
    const char *what = "cannot write";
    if (ok && nb_rename(a->tmp, a->path) != 0) {
        ok = 0;
        err = errno;
        what = "cannot replace it";
    }
    int r = 0;
    if (!ok)
        r = eng_errf(e, ENG_EIO, "%.200s: %s: %s", a->path, what, strerror(err ? err : EIO));
    else {
        free(a->tmp); /* renamed: nothing to remove */
        a->tmp = NULL;
    }
    eng_afile_abort(a);
    return r;
}

void eng_afile_abort(eng_afile *a)
{
    if (a->f)
        fclose(a->f);
    if (a->tmp)
        unlink(a->tmp);
    free(a->tmp);
    free(a->path);
    memset(a, 0, sizeof *a);
}

int eng_write_atomic(const char *path, const char *data, size_t n, eng_err *e)
{
    eng_afile a;
    int r = eng_afile_open(&a, path, 0600, e);
    if (r)
        return r;
    if (n && fwrite(data, 1, n, a.f) != n) {
        int err = errno;
        eng_afile_abort(&a);
        return eng_errf(e, ENG_EIO, "%.200s: cannot write: %s", path, strerror(err));
    }
    return eng_afile_commit(&a, e);
}

static const char *kind_of(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
#ifdef S_ISFIFO
    if (S_ISFIFO(m))
        return "a FIFO (named pipe)";
#endif
#ifdef S_ISSOCK
    if (S_ISSOCK(m))
        return "a socket";
#endif
    if (S_ISCHR(m) || S_ISBLK(m))
        return "a device";
    return "not a regular file";
}

int eng_read_file(const char *path, size_t max, char **data, size_t *len, eng_err *e)
{
    *data = NULL;
    *len = 0;
    int flags = O_RDONLY | O_CLOEXEC | NB_O_BINARY;
#ifdef O_NONBLOCK
    flags |= O_NONBLOCK; /* a FIFO opens at once instead of waiting for a writer */
#endif
#ifdef O_NOCTTY
    flags |= O_NOCTTY;
#endif
    int fd = open(path, flags);
    if (fd < 0)
        return eng_errf(e, ENG_EIO, "%.300s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int err = errno;
        close(fd);
        return eng_errf(e, ENG_EIO, "%.300s: cannot read: %s", path, strerror(err));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return eng_errf(e, ENG_EIO, "%.300s: %s, not a regular file; not read", path, kind_of(sb.st_mode));
    }
    if (sb.st_size < 0 || (unsigned long long)sb.st_size > (unsigned long long)max) {
        close(fd);
        return eng_errf(e, ENG_EFORMAT, "%.300s: %lld bytes, more than the %zu this file may have; not read", path,
                        (long long)sb.st_size, max);
    }
#ifdef O_NONBLOCK
    /* reads of a regular file never block anyway; clear it for clarity */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
#endif
    size_t cap = (size_t)sb.st_size + 1, n = 0;
    char *b = malloc(cap);
    if (!b) {
        close(fd);
        return eng_errf(e, ENG_ENOMEM, "%.300s: out of memory", path);
    }
    for (;;) {
        if (n + 1 == cap) { /* it grew since fstat: go on, up to max */
            char extra;
            if (n >= max) {
                ssize_t more = read(fd, &extra, 1);
                if (more > 0) {
                    free(b);
                    close(fd);
                    return eng_errf(e, ENG_EFORMAT, "%.300s: grew past %zu bytes while being read; not read", path,
                                    max);
                }
                break;
            }
            size_t nc = cap * 2 + 4096;
            if (nc > max + 1 || nc < cap)
                nc = max + 1;
            char *nb = realloc(b, nc);
            if (!nb) {
                free(b);
                close(fd);
                return eng_errf(e, ENG_ENOMEM, "%.300s: out of memory", path);
            }
            b = nb;
            cap = nc;
        }
        size_t want = cap - 1 - n;
        ssize_t got = read(fd, b + n, want > (1u << 30) ? (1u << 30) : (unsigned)want);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            int err = errno;
            free(b);
            close(fd);
            return eng_errf(e, ENG_EIO, "%.300s: cannot read: %s", path, strerror(err));
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    close(fd);
    b[n] = 0;
    *data = b;
    *len = n;
    return 0;
}

int eng_check_dest(const char *path, eng_err *e)
{
    struct stat sb;
    if (!*path)
        return eng_errf(e, ENG_EIO, "no output file named");
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return eng_errf(e, ENG_EIO, "%.300s: is a folder; name a file to write", path);
    const char *base = eng_path_base(path);
    size_t n = (size_t)(base - path);
    char dir[4096];
    if (n == 0)
        snprintf(dir, sizeof dir, ".");
    else if (n >= sizeof dir)
        return eng_errf(e, ENG_EIO, "%.300s: path too long", path);
    else {
        memcpy(dir, path, n);
        dir[n] = 0;
    }
    if (stat(dir, &sb) != 0)
        return eng_errf(e, ENG_EIO, "%.300s: cannot write: folder %.300s: %s", path, dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return eng_errf(e, ENG_EIO, "%.300s: cannot write: %.300s is not a folder", path, dir);
    if (access(dir, W_OK) != 0)
        return eng_errf(e, ENG_EIO, "%.300s: cannot write in %.300s: %s", path, dir, strerror(errno));
    return 0;
}

int eng_mkdirs(const char *path, eng_err *e)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf)
        return eng_errf(e, ENG_EINVAL, "bad folder name");
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != 0)
            continue;
        char c = buf[i];
        buf[i] = 0;
        if (nb_mkdir(buf, 0700) && errno != EEXIST)
            return eng_errf(e, ENG_EIO, "cannot create %s: %s", buf, strerror(errno));
        buf[i] = c;
    }
    return 0;
}

const char *eng_path_base(const char *path)
{
    const char *b = strrchr(path, '/');
#ifdef _WIN32
    const char *w = strrchr(path, '\\');
    if (w && (!b || w > b))
        b = w;
#endif
    return b ? b + 1 : path;
}
