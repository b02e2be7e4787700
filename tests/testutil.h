/* Minimal test helpers: CHECK records a failure and goes on; the test's
 * main returns tu_result(). Exit 77 tells ctest the test was skipped: a
 * test whose shared data (tu_shared) was absent reports 77, not a pass,
 * since the checks that needed the data did not run. */
#ifndef NIBBLE_TESTUTIL_H
#define NIBBLE_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tu_failures;
static int tu_missing; /* tu_shared found a file absent */

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

/* Relative RMS error of b against a (the plain RMS where a is all
 * zeros): the quantization tests' measure of a round trip. */
static inline double tu_rel_rms(const float *a, const float *b, size_t n)
{
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)a[i] * a[i];
    }
    return s > 0 ? sqrt(e / s) : sqrt(e);
}

/* 1 if a check failed, else 77 if shared data was missing (the checks
 * that ran passed, the others did not run), else 0. */
static inline int tu_result(const char *name)
{
    if (tu_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, tu_failures);
        return 1;
    }
    if (tu_missing) {
        printf("%s: skipped: shared test data absent; only the self-contained checks ran\n", name);
        return TU_SKIP;
    }
    printf("%s: ok\n", name);
    return 0;
}

/* Path of rel under the folder the environment variable env names (else
 * fallback), or NULL with a skip message saying why if the file is absent
 * (then tu_result() says skip, 77, unless a check failed). buf must hold
 * 4096 bytes. */
static inline const char *tu_data_file(const char *env, const char *fallback, const char *rel, char *buf,
                                       const char *why)
{
    const char *dir = getenv(env);
    if (!dir || !*dir)
        dir = fallback;
    snprintf(buf, 4096, "%s/%s", dir, rel);
    FILE *f = fopen(buf, "rb");
    if (!f) {
        printf("skip: %s not found (%s)\n", buf, why);
        tu_missing = 1;
        return NULL;
    }
    fclose(f);
    return buf;
}

/* A file under ../shared (NIBBLE_SHARED), the larger data. */
static inline const char *tu_shared(const char *rel, char *buf)
{
    return tu_data_file("NIBBLE_SHARED", "../shared", rel, buf, "the shared test data is absent");
}

/* A file under assets/ (NIBBLE_ASSETS, which nb_test sets), e.g. the
 * embedded model stories260K.gguf. */
static inline const char *tu_asset(const char *rel, char *buf)
{
    return tu_data_file("NIBBLE_ASSETS", "assets", rel, buf, "the assets folder is absent");
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

/* Folders for a test's files, on POSIX and on Windows (mingw-w64). */
#include <dirent.h>
#include <sys/stat.h>
#ifdef _WIN32
#include <direct.h>
#include <io.h>
#else
#include <unistd.h>
#endif

#ifndef _WIN32
#include <sys/wait.h>

/* Run "bin args" through the shell, stdout dropped and stderr into the
 * file errpath: the exit status, or -1 when it did not exit. */
static inline int tu_run(const char *bin, const char *args, const char *errpath)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s 2>%s >/dev/null", bin, args, errpath);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
#endif

/* Whether the file at path holds the text what (else both are printed). */
static inline int tu_file_has(const char *path, const char *what)
{
    char *msg = tu_read(path, NULL);
    int ok = msg && strstr(msg, what);
    if (!ok)
        fprintf(stderr, "expected '%s' in: %s\n", what, msg ? msg : "(nothing)");
    free(msg);
    return ok;
}

/* "dir/name" for a test's scratch files. The result lives in one of eight
 * rotating buffers, so up to eight paths can be held at once. */
static inline const char *tu_path(const char *dir, const char *name)
{
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* mkdtemp(3): tmpl ends in XXXXXX; NULL on failure. */
static inline char *tu_mkdtemp(char *tmpl)
{
#ifdef _WIN32
    return _mktemp(tmpl) && _mkdir(tmpl) == 0 ? tmpl : NULL;
#else
    return mkdtemp(tmpl);
#endif
}

/* A scratch directory "name.XXXXXX" made into dir (cap bytes); NULL,
 * with a message, when it cannot be made. */
static inline char *tu_scratch(char *dir, size_t cap, const char *name)
{
    snprintf(dir, cap, "%s.XXXXXX", name);
    if (tu_mkdtemp(dir))
        return dir;
    fprintf(stderr, "%s: cannot make a scratch directory\n", name);
    return NULL;
}

/* xorshift64 from *s: uniform in (0, 1), and a standard normal (Box-Muller) */
static inline double tu_uniform(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return ((*s >> 11) + 0.5) / 9007199254740992.0;
}

static inline double tu_gauss(uint64_t *s)
{
    double u = tu_uniform(s);
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * tu_uniform(s));
}

static inline int tu_mkdir(const char *path)
{
#ifdef _WIN32
    return _mkdir(path);
#else
    return mkdir(path, 0700);
#endif
}

/* rm -rf path: 0 when it is gone. */
static inline int tu_rmtree(const char *path)
{
    struct stat st;
    if (stat(path, &st))
        return 0;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                continue;
            size_t lp = strlen(path), ln = strlen(de->d_name);
            char *sub = malloc(lp + ln + 2);
            if (!sub)
                break;
            memcpy(sub, path, lp);
            sub[lp] = '/';
            memcpy(sub + lp + 1, de->d_name, ln + 1);
            tu_rmtree(sub);
            free(sub);
        }
        if (d)
            closedir(d);
        return rmdir(path);
    }
    return remove(path);
}

#endif
