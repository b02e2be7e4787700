/* The POSIX calls nibble makes that Windows (mingw-w64) spells otherwise
 * or lacks, as nb_ names: on other systems they are the POSIX calls
 * themselves. What winpthreads already gives mingw-w64 (pthreads,
 * clock_gettime, nanosleep) needs nothing here. */
#ifndef NIBBLE_ENGINE_PORT_H
#define NIBBLE_ENGINE_PORT_H

#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#ifdef _WIN32
#include <direct.h>
#include <fcntl.h>
#include <io.h>

/* Windows folders have no mode bits; a new one takes its parent's ACL. */
static inline int nb_mkdir(const char *path, int mode)
{
    (void)mode;
    return _mkdir(path);
}
static inline int nb_fsync(int fd) { return _commit(fd); }
/* rename(), but replacing an existing target as POSIX rename does
 * (Windows' rename fails then): MoveFileEx with REPLACE_EXISTING and
 * WRITE_THROUGH. Sets errno on failure. In engine/base/sys.c. */
int nb_rename(const char *from, const char *to);
/* getline(3), which the Windows C runtime lacks. In engine/base/sys.c. */
ssize_t nb_getline(char **line, size_t *cap, FILE *f);
/* A file's modification time in nanoseconds since 1970, to the 100 ns
 * NTFS keeps (the C runtime's stat gives whole seconds); sb->st_mtime
 * when the file cannot be asked. In engine/base/sys.c. */
long long nb_mtime_ns(const char *path, const struct stat *sb);
/* files are bytes: no CRLF translation, no Ctrl+Z end of file */
#define NB_O_BINARY O_BINARY
#ifndef O_CLOEXEC
#define O_CLOEXEC O_NOINHERIT
#endif
#ifndef _UCRT
/* msvcrt has no timespec_get (the UCRT has); the wall clock from
 * winpthreads' clock_gettime is the same thing */
#ifndef TIME_UTC
#define TIME_UTC 1
#endif
static inline int timespec_get(struct timespec *ts, int base)
{
    return base == TIME_UTC && clock_gettime(CLOCK_REALTIME, ts) == 0 ? base : 0;
}
#endif

#else
#include <unistd.h>

static inline int nb_mkdir(const char *path, int mode) { return mkdir(path, (mode_t)mode); }
static inline int nb_fsync(int fd) { return fsync(fd); }
static inline int nb_rename(const char *from, const char *to) { return rename(from, to); }
static inline ssize_t nb_getline(char **line, size_t *cap, FILE *f) { return getline(line, cap, f); }
/* a file's modification time in nanoseconds since 1970, as finely as the
 * system keeps it (path is for Windows, where stat has whole seconds) */
static inline long long nb_mtime_ns(const char *path, const struct stat *sb)
{
    (void)path;
#if defined(__APPLE__)
    return (long long)sb->st_mtimespec.tv_sec * 1000000000LL + sb->st_mtimespec.tv_nsec;
#elif defined(__linux__) || defined(__FreeBSD__) || defined(__OpenBSD__) || defined(__NetBSD__)
    return (long long)sb->st_mtim.tv_sec * 1000000000LL + sb->st_mtim.tv_nsec;
#else
    return (long long)sb->st_mtime * 1000000000LL;
#endif
}
#define NB_O_BINARY 0
#endif

#endif
