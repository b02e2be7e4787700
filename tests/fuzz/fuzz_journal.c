/* libFuzzer target for the conversation journal reader. The input is
 * written to a file (the reader's only entry point is a path) and loaded:
 * it is refused with a message or loads; a journal that loads saves and
 * loads again to the same conversation (the format round-trips whatever
 * text it carries). The escaper is checked on the raw bytes as well. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "journal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char in_path[256], out_path[256];

/* at exit: ctest replays the corpus in every build, so leave no files */
static void remove_files(void)
{
    remove(in_path);
    remove(out_path);
}

static void paths(void)
{
    if (in_path[0])
        return;
    atexit(remove_files);
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(in_path, sizeof in_path, "%s/nibble-fuzz-journal-%ld.in", dir, (long)getpid());
    snprintf(out_path, sizeof out_path, "%s/nibble-fuzz-journal-%ld.out", dir, (long)getpid());
}

static int same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

static void check_same(const eng_journal *a, const eng_journal *b)
{
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
    } else if (j || !e.msg[0]) {
        abort(); /* refused: no journal, and a message */
    }
    eng_journal_free(j);
    eng_journal_free(k);
    return 0;
}
