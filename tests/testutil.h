/* Minimal test helpers: CHECK records a failure and goes on; the test's
 * main returns tu_result(). Exit 77 tells ctest the test was skipped. */
#ifndef NIBBLE_TESTUTIL_H
#define NIBBLE_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tu_failures;

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            tu_failures++;                                                     \
        }                                                                      \
    } while (0)

#define CHECKF(cond, ...)                                                      \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            tu_failures++;                                                     \
        }                                                                      \
    } while (0)

#define TU_SKIP 77

static inline int tu_result(const char *name)
{
    if (tu_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, tu_failures);
        return 1;
    }
    printf("%s: ok\n", name);
    return 0;
}

/* Path of a file under ../shared (NIBBLE_SHARED), or NULL with a skip
 * message if that folder is absent. buf must hold 4096 bytes. */
static inline const char *tu_shared(const char *rel, char *buf)
{
    const char *dir = getenv("NIBBLE_SHARED");
    if (!dir || !*dir)
        dir = "../shared";
    snprintf(buf, 4096, "%s/%s", dir, rel);
    FILE *f = fopen(buf, "rb");
    if (!f) {
        printf("skip: %s not found (the shared test data is absent)\n", buf);
        return NULL;
    }
    fclose(f);
    return buf;
}

/* Read a whole file; caller frees. NULL if it cannot be read. */
static inline char *tu_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    if (p) {
        p[n] = 0;
        if (len)
            *len = (size_t)n;
    }
    return p;
}

#endif
