/* libFuzzer target for the chat screen's markdown layout (ui/markdown.c
 * over md4c) and the thinking split (ui/think.c). The first byte picks
 * the width (1-128) and whether the text is still being written; the
 * rest is a reply. Every prefix a stream would show is not tried (the
 * unit test does that for a sample); this one takes the whole input and
 * one cut in its middle. Broken properties abort: a line wider than the
 * width (a character wider than the room left on its line aside), a span outside
 * the text, a line's columns that are not its text's, src going back, a
 * thinking or answer range outside the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "markdown.h"
#include "text.h"
#include "think.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A line may pass the width only where its last character is wider than
 * the room the line has (a double-width character on a one-column line, a
 * 6-column escape of an invisible character on a narrow one): that
 * character is then alone after the margin, and the screen clips it. */
static int one_wide_char(const ui_md *md, const ui_md_line *l, int width)
{
    if (!l->nspans)
        return 0;
    const ui_md_span *sp = &md->spans[l->span + l->nspans - 1];
    const char *t = md->text + sp->off;
    size_t i = 0, last = 0;
    int w, cp, lw = 0;
    while (i < sp->len) { /* the last character with a width (marks follow it) */
        size_t len = ui_char(t, sp->len, i, &w, &cp);
        if (w > 0)
            last = i, lw = w;
        i += len;
    }
    int before = l->cols - ui_width(t + last, sp->len - last);
    return before < width && lw > width - before;
}

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
        if (cols != l->cols || (cols > width && !one_wide_char(md, l, width)) || l->code_x > l->cols ||
            l->src < prev)
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
