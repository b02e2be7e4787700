/* libFuzzer target for the chat screen's markdown layout (ui/markdown.c
 * over md4c) and the thinking split (ui/think.c). The first byte picks
 * the width (1-128) and whether the text is still being written; the
 * rest is a reply. Every prefix a stream would show is not tried (the
 * unit test does that for a sample); this one takes the whole input and
 * one cut in its middle. Broken properties abort: a line wider than the
 * width (a character wider than a one-column line aside), a span outside
 * the text, a line's columns that are not its text's, src going back, a
 * thinking or answer range outside the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "markdown.h"
#include "text.h"
#include "think.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const ui_md *md, int width)
{
    size_t prev = 0;
    for (size_t i = 0; i < md->nlines; i++) {
        const ui_md_line *l = &md->lines[i];
        if (l->span + (size_t)l->nspans > md->nspans)
            abort();
        int cols = 0;
        for (uint32_t k = 0; k < l->nspans; k++) {
            const ui_md_span *sp = &md->spans[l->span + k];
            if (!sp->len || (size_t)sp->off + sp->len > md->ntext)
                abort();
            cols += ui_width(md->text + sp->off, sp->len);
        }
        if (cols != l->cols || (cols > width && !(width < 2 && cols <= 2)) || l->code_x > l->cols || l->src < prev)
            abort();
        prev = l->src;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int width = 1 + (data[0] & 127);
    unsigned flags = data[0] & 128 ? UI_MD_STREAM : 0;
    const char *s = (const char *)data + 1;
    size_t n = size - 1;
    ui_md md = {0};
    ui_md_opts o = {.width = width, .flags = flags};
    size_t cuts[2] = {n, n / 2};
    for (int c = 0; c < 2; c++) {
        if (ui_md_render(s, cuts[c], &o, &md) == 0)
            check(&md, width);
        ui_think th;
        ui_think_split(s, cuts[c], &th);
        if (th.t0 > th.t1 || th.t1 > cuts[c] || th.a0 > th.a1 || th.a1 > cuts[c])
            abort();
    }
    ui_md_free(&md);
    return 0;
}
