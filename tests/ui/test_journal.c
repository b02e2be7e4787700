/* engine/journal: a conversation survives save and load byte for byte
 * (provenance, marks, partial replies, awkward text); saving is atomic;
 * damaged files are refused with the line that is wrong. */
#include <sys/stat.h>
#include <unistd.h>

#include "journal.h"
#include "testutil.h"

static char dir[256];

static void write_file(const char *path, const char *s)
{
    FILE *f = fopen(path, "wb");
    fputs(s, f);
    fclose(f);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/nibble-test-journal-%ld", (long)getpid());
    eng_err e = {{0}};
    char sub[300], path[400];
    snprintf(sub, sizeof sub, "%s/a/b", dir);
    CHECK(eng_mkdirs(sub, &e) == 0);
    CHECK(eng_mkdirs(sub, &e) == 0); /* exists: fine */
    snprintf(path, sizeof path, "%s/c.nbj", sub);

    eng_journal *j = eng_journal_new();
    CHECK(eng_journal_set_system(j, "Be\tbrief.\n") == 0);
    int u = eng_journal_add(j, ENG_J_USER, "Hello \\ world\nline two \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80");
    int a = eng_journal_add(j, ENG_J_ASSISTANT, "Once");
    CHECK(u == 0 && a == 1);
    eng_journal_append(j, 1, " upon", 5);
    CHECK(eng_journal_mark(j, 1, 2, "temp 0.80->0.20") == 0);
    eng_journal_append(j, 1, " a time\x01", 8);
    eng_journal_meta(j, 1, "model", "stories 260K");
    eng_journal_meta(j, 1, "kernel", "scalar");
    eng_journal_meta(j, 1, "kernel", "avx2"); /* replaced */
    j->e[1].partial = 1;
    int n = eng_journal_add(j, ENG_J_NOTICE, "context full");
    int tr = eng_journal_add(j, ENG_J_NOTICE, "help text");
    j->e[tr].transient = 1;
    CHECK(n == 2);
    CHECK(eng_journal_save(j, path, &e) == 0);

    eng_journal *k;
    CHECKF(eng_journal_load(path, &k, &e) == 0, "%s", e.msg);
    if (k) {
        CHECK(k->n == 3); /* the transient notice is not saved */
        CHECK(!strcmp(k->system, "Be\tbrief.\n"));
        CHECK(!strcmp(k->e[0].text, j->e[0].text));
        CHECK(k->e[1].len == j->e[1].len && !memcmp(k->e[1].text, j->e[1].text, j->e[1].len));
        CHECK(k->e[1].partial == 1 && k->e[0].partial == 0);
        CHECK(!strcmp(eng_journal_get_meta(k, 1, "model"), "stories 260K"));
        CHECK(!strcmp(eng_journal_get_meta(k, 1, "kernel"), "avx2"));
        CHECK(k->e[1].nmeta == 2);
        CHECK(k->e[1].nmarks == 1 && k->e[1].marks[0].byte == 9 && k->e[1].marks[0].token == 2 &&
              !strcmp(k->e[1].marks[0].what, "temp 0.80->0.20"));
        CHECK(k->e[2].kind == ENG_J_NOTICE);
        eng_journal_free(k);
    }
    /* no temporary file is left behind */
    char tmp[500];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    CHECK(access(tmp, F_OK) != 0);

    /* escapes round-trip */
    const char raw[] = "a\\b\nc\rd\te\x1f\x7f";
    char *x = eng_journal_escape(raw, sizeof raw - 1);
    CHECK(!strchr(x, '\n'));
    CHECK(eng_journal_unescape(x) == (long)(sizeof raw - 1) && !memcmp(x, raw, sizeof raw - 1));
    free(x);
    char badesc[] = "abc\\q";
    CHECK(eng_journal_unescape(badesc) < 0);

    /* damaged files: one message naming the line */
    struct {
        const char *text, *want;
    } bad[] = {
        {"", "not a nibble journal"},
        {"something else\n", "not a nibble journal"},
        {"nibble-journal 1\nentry user\ntext hi\n", "no 'end'"},
        {"nibble-journal 1\nentry user\ntext hi", "cut short"},
        {"nibble-journal 1\ntext hi\nend\n", ":2:"},
        {"nibble-journal 1\nentry robot\nend\n", ":2: unknown entry kind"},
        {"nibble-journal 1\nentry user\ntext bad \\q escape\nend\n", ":3:"},
        {"nibble-journal 1\nentry user\ntext \xff\xfe\nend\n", "invalid UTF-8"},
        {"nibble-journal 1\nentry user\nmark x\nend\n", ":3: mark"},
        {"nibble-journal 1\nend\nentry user\n", "after 'end'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(path, bad[i].text);
        eng_journal *z = NULL;
        int rc = eng_journal_load(path, &z, &e);
        CHECKF(rc != 0 && !z && strstr(e.msg, bad[i].want), "case %zu: rc %d msg '%s'", i, rc, e.msg);
    }
    /* unknown keys from a newer version are skipped */
    write_file(path, "nibble-journal 1\nentry user\nfuture stuff\ntext hi\nend\n");
    CHECK(eng_journal_load(path, &k, &e) == 0 && k && k->n == 1);
    eng_journal_free(k);
    CHECK(eng_journal_load("/nonexistent/x.nbj", &k, &e) == ENG_EIO);

    eng_journal_free(j);
    CHECK(tu_rmtree(dir) == 0);
    return tu_result("test_journal");
}
