#include "mapfile.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#ifdef _WIN32
#include <windows.h>

int eng_map_open(eng_map *m, const char *path, eng_err *e)
{
    memset(m, 0, sizeof *m);
    DWORD attr = GetFileAttributesA(path);
    if (attr == INVALID_FILE_ATTRIBUTES)
        return eng_errf(e, ENG_EIO, "%s: no such file", path);
    if (attr & FILE_ATTRIBUTE_DIRECTORY)
        return eng_errf(e, ENG_EIO, "%s: is a directory, not a model file", path);
    HANDLE f = CreateFileA(path, GENERIC_READ, FILE_SHARE_READ, NULL, OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, NULL);
    if (f == INVALID_HANDLE_VALUE)
        return eng_errf(e, ENG_EIO, "%s: cannot open", path);
    LARGE_INTEGER sz;
    if (!GetFileSizeEx(f, &sz)) {
        CloseHandle(f);
        return eng_errf(e, ENG_EIO, "%s: cannot read its size", path);
    }
    m->size = (size_t)sz.QuadPart;
    if (m->size == 0) {
        CloseHandle(f);
        return 0;
    }
    HANDLE map = CreateFileMappingA(f, NULL, PAGE_READONLY, 0, 0, NULL);
    CloseHandle(f);
    if (!map)
        return eng_errf(e, ENG_EIO, "%s: cannot map", path);
    m->data = MapViewOfFile(map, FILE_MAP_READ, 0, 0, 0);
    if (!m->data) {
        CloseHandle(map);
        return eng_errf(e, ENG_EIO, "%s: cannot map", path);
    }
    m->handle = map;
    return 0;
}

void eng_map_close(eng_map *m)
{
    if (m->data)
        UnmapViewOfFile(m->data);
    if (m->handle)
        CloseHandle(m->handle);
    memset(m, 0, sizeof *m);
}

#else
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int eng_map_open(eng_map *m, const char *path, eng_err *e)
{
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return eng_errf(e, ENG_EIO, "%s: %s", path, errno == ENOENT ? "no such file" : strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return eng_errf(e, ENG_EIO, "%s: %s", path, strerror(err));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return eng_errf(e, ENG_EIO, "%s: is a directory, not a model file", path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return eng_errf(e, ENG_EIO, "%s: not a regular file", path);
    }
    m->size = (size_t)st.st_size;
    if (m->size == 0) {
        close(fd);
        return 0;
    }
    void *p = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return eng_errf(e, ENG_EIO, "%s: cannot map: %s", path, strerror(errno));
    m->data = p;
    return 0;
}

void eng_map_close(eng_map *m)
{
    if (m->data)
        munmap((void *)m->data, m->size);
    memset(m, 0, sizeof *m);
}
#endif

#ifdef _WIN32
void *eng_map_anon(size_t n)
{
    return n ? VirtualAlloc(NULL, n, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE) : NULL;
}

void eng_map_anon_free(void *p, size_t n)
{
    (void)n;
    if (p)
        VirtualFree(p, 0, MEM_RELEASE);
}

void eng_map_release(const void *p, size_t n)
{
    (void)p;
    (void)n;
}
void eng_map_prefetch(const void *p, size_t n)
{
    (void)p;
    (void)n;
}
#else
#define HUGE_ALIGN ((size_t)2 << 20)

void *eng_map_anon(size_t n)
{
    if (!n || n > SIZE_MAX - 2 * HUGE_ALIGN)
        return NULL;
    size_t len = (n + HUGE_ALIGN - 1) & ~(HUGE_ALIGN - 1);
    /* over-ask by one huge page, then trim to a 2 MB aligned start */
    char *p = mmap(NULL, len + HUGE_ALIGN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    char *a = (char *)(((uintptr_t)p + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1));
    if (a > p)
        munmap(p, (size_t)(a - p));
    if (a + len < p + len + HUGE_ALIGN)
        munmap(a + len, (size_t)(p + len + HUGE_ALIGN - (a + len)));
#ifdef MADV_HUGEPAGE
    madvise(a, len, MADV_HUGEPAGE);
#endif
    return a;
}

void eng_map_anon_free(void *p, size_t n)
{
    if (p && n)
        munmap(p, (n + HUGE_ALIGN - 1) & ~(HUGE_ALIGN - 1));
}

void eng_map_release(const void *p, size_t n)
{
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0)
        return;
    uintptr_t a = ((uintptr_t)p + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
    uintptr_t b = ((uintptr_t)p + n) & ~((uintptr_t)pg - 1);
    if (b > a)
        madvise((void *)a, b - a, MADV_DONTNEED);
}

void eng_map_prefetch(const void *p, size_t n)
{
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0 || !p || !n)
        return;
    uintptr_t a = (uintptr_t)p & ~((uintptr_t)pg - 1);
    size_t len = (size_t)((uintptr_t)p + n - a);
#ifdef MADV_HUGEPAGE
    /* before WILLNEED: readahead then allocates huge folios where the
     * file system can (measured on ext4, Linux 6.18: a cold 77 MB model
     * came back 90% PMD-mapped instead of 40%, and a later process's
     * first pass over it ran 3x faster) */
    madvise((void *)a, len, MADV_HUGEPAGE);
#endif
    madvise((void *)a, len, MADV_WILLNEED);
    /* Then map every page now (Linux 5.14+; older kernels refuse it and
     * the first token faults them in). On this project's VM the first
     * touch of each 4 KB mapping costs 0.5-1.8 us whichever way it is
     * made, but made here in one call it cost 8-10 ms at open and saved
     * 25-75 ms of llama1b q4_0's first token (bench -p 0 -n 0 -r 3,
     * alternated with and without). */
#if defined(__linux__)
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* the Linux value; older headers lack it */
#endif
    madvise((void *)a, len, MADV_POPULATE_READ);
#endif
}
#endif
