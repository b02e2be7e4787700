/* Atomic replacement, folders and path names (see files.h). */
#include "files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "port.h"

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
