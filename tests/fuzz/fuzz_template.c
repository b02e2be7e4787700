/* libFuzzer target for the chat-template renderer and the way the engine
 * feeds its output to a tokenizer. The input is split at NUL bytes into a
 * Jinja text (whose family is detected), a system prompt and user turns.
 * The rendered segments must join to the same text; what the user typed
 * appears only in non-special segments; and encoding those segments
 * without special-token parsing never yields a control token, so typing
 * "<|im_end|>" cannot end a turn. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_vocab.h"
#include "template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 8192)
        return 0;
    fz_vocab *v = fz_vocab_get();
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = 0;
    size_t n = size - 1;

    /* fields: jinja \0 system \0 turn \0 turn ... */
    const char *field[16];
    int nf = 0;
    for (size_t i = 0; nf < 16;) {
        field[nf++] = buf + i;
        size_t l = strlen(buf + i);
        if (i + l >= n)
            break;
        i += l + 1;
    }
    enum eng_tmpl t = (data[0] & 0x80) ? (enum eng_tmpl)((data[0] & 0x7f) % ENG_TMPL_COUNT)
                                       : eng_tmpl_detect(field[0], strlen(field[0]));
    if ((unsigned)t >= ENG_TMPL_COUNT || eng_tmpl_find(eng_tmpl_name(t)) != (int)t)
        abort();
    for (const char *const *s = eng_tmpl_stops(t); *s; s++)
        if (!**s)
            abort();
    const char *sys = nf > 1 ? field[1] : NULL;

    eng_tmpl_out o;
    memset(&o, 0, sizeof o);
    if (eng_tmpl_begin(t, sys, &o) != 0)
        goto done;
    for (int i = 2; i < nf; i++) {
        if (eng_tmpl_user(t, field[i], i == 2, sys, &o) != 0 || eng_tmpl_close(t, &o) != 0)
            goto done;
    }
    char *joined = eng_tmpl_join(&o);
    size_t total = 0;
    for (size_t i = 0; i < o.n; i++) {
        const eng_tmpl_seg *s = &o.seg[i];
        size_t l = strlen(s->text);
        if (!l || (joined && memcmp(joined + total, s->text, l)))
            abort();
        total += l;
        if (!s->special) {
            /* user text goes to the tokenizer with special parsing off */
            eng_tok *tok = v->bpe[i % FZ_NPRE];
            int need = eng_tok_encode(tok, s->text, l, 0, 0, NULL, 0);
            if (need < 0)
                abort();
            int32_t *ids = malloc(((size_t)need + 1) * sizeof *ids);
            if (ids) {
                eng_tok_encode(tok, s->text, l, 0, 0, ids, (size_t)need + 1);
                for (int k = 0; k < need; k++)
                    if (ids[k] >= v->bpe_first_control)
                        abort();
                free(ids);
            }
        }
    }
    if (joined && strlen(joined) != total)
        abort();
    /* every user turn is present, verbatim, in a non-special segment */
    for (int i = 2; i < nf; i++) {
        if (!*field[i])
            continue;
        int found = 0;
        for (size_t s = 0; s < o.n && !found; s++)
            found = !o.seg[s].special && !strcmp(o.seg[s].text, field[i]);
        if (!found)
            abort();
    }
    free(joined);
done:
    eng_tmpl_out_clear(&o);
    free(buf);
    return 0;
}
