/* libFuzzer target for the conversation journal reader. The input is
 * written to a file (the reader's only entry point is a path) and loaded:
 * it is refused with a message or loads; a journal that loads saves and
 * loads again to the same conversation (the format round-trips whatever
 * text it carries), the lines this build does not know included; and
 * that second load saves to the very bytes the first save wrote (what was
 * kept comes back byte for byte). The escaper is checked on the raw
 * bytes as well. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "journal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char in_path[256], out_path[256], out2_path[256];

/* at exit: ctest replays the corpus in every build, so leave no files */
static void remove_files(void)
{
    remove(in_path);
    remove(out_path);
    remove(out2_path);
}

static void paths(void)
{
    if (in_path[0])
        return;
    atexit(remove_files);
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(in_path, sizeof in_path, "%s/nibble-fuzz-journal-%ld.in", dir, (long)getpid());
    snprintf(out_path, sizeof out_path, "%s/nibble-fuzz-journal-%ld.out", dir, (long)getpid());
    snprintf(out2_path, sizeof out2_path, "%s/nibble-fuzz-journal-%ld.out2", dir, (long)getpid());
}

static int same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

static void same_lines(char *const *a, size_t na, char *const *b, size_t nb)
{
    if (na != nb)
        abort();
    for (size_t i = 0; i < na; i++)
        if (strcmp(a[i], b[i]))
            abort();
}

/* The whole file, or NULL. */
static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16;
    char *b = malloc(cap);
    *n = 0;
    size_t got;
    while (b && (got = fread(b + *n, 1, cap - *n, f)) > 0) {
        *n += got;
        if (*n == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb)
                free(b);
            b = nb;
        }
    }
    fclose(f);
    return b;
}

static void check_same(const eng_journal *a, const eng_journal *b)
{
    same_lines(a->extra, a->nextra, b->extra, b->nextra);
    size_t kept = 0;
    for (size_t i = 0; i < a->n; i++)
        kept += !a->e[i].transient;
    if (!same_str(a->system, b->system) || kept != b->n)
        abort();
    for (size_t i = 0, k = 0; i < a->n; i++) {
        const eng_jentry *x = &a->e[i];
        if (x->transient)
            continue;
        const eng_jentry *y = &b->e[k++];
        if (x->kind != y->kind || x->len != y->len || memcmp(x->text, y->text, x->len) ||
            x->partial != y->partial || x->nmeta != y->nmeta || x->nmarks != y->nmarks)
            abort();
        same_lines(x->extra, x->nextra, y->extra, y->nextra);
        for (size_t m = 0; m < x->nmeta; m++)
            if (strcmp(x->meta[m].key, y->meta[m].key) || strcmp(x->meta[m].value, y->meta[m].value))
                abort();
        for (size_t m = 0; m < x->nmarks; m++)
            if (x->marks[m].byte != y->marks[m].byte || x->marks[m].token != y->marks[m].token ||
                strcmp(x->marks[m].what, y->marks[m].what))
                abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    paths();

    /* escape / unescape round trip on the raw bytes */
    char *esc = eng_journal_escape((const char *)data, size);
    if (esc) {
        if (strchr(esc, '\n'))
            abort();
        if (!memchr(data, 0, size)) {
            long k = eng_journal_unescape(esc);
            if (k != (long)size || memcmp(esc, data, size))
                abort();
        }
        free(esc);
    }

    FILE *f = fopen(in_path, "wb");
    if (!f)
        return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    eng_journal *j = NULL, *k = NULL;
    eng_err e = {{0}};
    if (eng_journal_load(in_path, &j, &e) == 0) {
        if (!j)
            abort();
        if (eng_journal_save(j, out_path, &e) != 0)
            abort();
        if (eng_journal_load(out_path, &k, &e) != 0) {
            fprintf(stderr, "fuzz_journal: a saved journal does not load: %s\n", e.msg);
            abort();
        }
        check_same(j, k);
        /* load, save, load, save: the two saves are the same bytes */
        if (eng_journal_save(k, out2_path, &e) != 0)
            abort();
        size_t n1 = 0, n2 = 0;
        char *s1 = slurp(out_path, &n1), *s2 = slurp(out2_path, &n2);
        if (s1 && s2 && (n1 != n2 || memcmp(s1, s2, n1))) {
            fprintf(stderr, "fuzz_journal: a second save differs from the first\n");
            abort();
        }
        free(s1);
        free(s2);
    } else if (j || !e.msg[0]) {
        abort(); /* refused: no journal, and a message */
    }
    eng_journal_free(j);
    eng_journal_free(k);
    return 0;
}
