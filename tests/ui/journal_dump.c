/* journal_dump FILE...: load each conversation journal with the engine's
 * reader and print its entries, one a line: kind, partial flag (1: a reply
 * cut short), and the text escaped as the journal escapes it. Exit 1 with
 * the reader's message if a file does not load. For e2e_crash.sh. */
#include <stdio.h>
#include <stdlib.h>

#include "journal.h"

int main(int argc, char **argv)
{
    static const char *const kinds[] = {"?", "user", "assistant", "notice"};
    for (int i = 1; i < argc; i++) {
        eng_journal *j = NULL;
        eng_err e = {{0}};
        if (eng_journal_load(argv[i], &j, &e) != 0) {
            fprintf(stderr, "journal_dump: %s\n", e.msg);
            return 1;
        }
        for (size_t k = 0; k < j->n; k++) {
            const eng_jentry *x = &j->e[k];
            char *t = eng_journal_escape(x->text, x->len);
            printf("%s\t%d\t%s\n", kinds[x->kind <= ENG_J_NOTICE ? x->kind : 0], x->partial, t ? t : "");
            free(t);
        }
        eng_journal_free(j);
    }
    return 0;
}
