/* Markdown as styled terminal lines: md4c parses, this lays the result
 * out for a width. No curses here: a line is a list of spans, each some
 * UTF-8 text and a set of UI_MD_* style bits, which the screen turns into
 * colours and attributes (tui_conv.c). Tests read the lines as text.
 *
 * What it shows: headings (no '#'), bold, italic, strikethrough, inline
 * code, fenced code blocks (no fence lines; a line too long for the width
 * is cut with a marker, never wrapped into the text: /copy code gives it
 * whole), bullet and numbered lists (nested ones indented), task lists,
 * block quotes (a bar in the margin), rules, tables (in columns where
 * they fit, else one wrapped row a line), links and images (their text,
 * then the address dimmed), entities (&amp; ...). Indented code blocks
 * and raw HTML are off: models indent prose, and write <tags> as text.
 *
 * Streaming: with UI_MD_STREAM the text is a reply still being written.
 * A fence not closed yet is code so far (md4c does that); an emphasis or
 * code span opened in the last paragraph and not closed yet is closed
 * for the render, and a half-written delimiter at the very end is held
 * back, so no stray `**` or backtick flickers in while tokens arrive. */
#ifndef NIBBLE_UI_MARKDOWN_H
#define NIBBLE_UI_MARKDOWN_H

#include <stddef.h>
#include <stdint.h>

/* style bits of a span (any combination) */
enum {
    UI_MD_BOLD = 1 << 0,
    UI_MD_ITALIC = 1 << 1,
    UI_MD_CODE = 1 << 2,    /* inline code */
    UI_MD_BLOCK = 1 << 3,   /* text of a fenced code block */
    UI_MD_LINK = 1 << 4,    /* a link's text */
    UI_MD_URL = 1 << 5,     /* a link's address, shown after its text */
    UI_MD_H1 = 1 << 6,      /* heading text, level 1 */
    UI_MD_H2 = 1 << 7,      /* level 2 */
    UI_MD_H3 = 1 << 8,      /* levels 3 to 6 */
    UI_MD_QUOTE = 1 << 9,   /* a block quote's margin bar */
    UI_MD_BULLET = 1 << 10, /* a list item's bullet or number */
    UI_MD_RULE = 1 << 11,   /* a rule, a table's lines */
    UI_MD_STRIKE = 1 << 12,
    UI_MD_CUT = 1 << 13,    /* the marker where a code line was cut */
    UI_MD_HEAD = 1 << 14,   /* a table's header cells */
    UI_MD_BASE = 1 << 15    /* first of the caller's own bits (ui_md_opts.style) */
};

typedef struct ui_md_span {
    uint32_t off, len; /* bytes of ui_md.text */
    uint32_t style;    /* UI_MD_* bits, with ui_md_opts.style added */
} ui_md_span;

typedef struct ui_md_line {
    uint32_t span, nspans; /* ui_md.spans[span .. span + nspans) */
    int cols;              /* columns the spans take (<= the width) */
    int code_x;            /* a code block's line: its background runs from this
                            * column to the width; -1 for other lines */
    size_t src;            /* byte of the source where the line's text starts
                            * (what a resize keeps on top of the view) */
} ui_md_line;

/* The rendered lines. Plain data, owned by the caller: ui_md_free. */
typedef struct ui_md {
    char *text;
    size_t ntext, captext;
    ui_md_span *spans;
    size_t nspans, capspans;
    ui_md_line *lines;
    size_t nlines, caplines;
} ui_md;

enum { UI_MD_STREAM = 1 }; /* ui_md_opts.flags: the text is still being written */

typedef struct ui_md_opts {
    int width;          /* columns (clamped to >= 1) */
    unsigned flags;     /* UI_MD_STREAM */
    uint32_t style;     /* bits added to every span (a caller's own, >= UI_MD_BASE) */
    const char *lead;   /* NULL, or text put before every line (a margin), in
                         * style only; it counts in the width */
    size_t src_base;    /* added to every line's src */
} ui_md_opts;

/* Lay src[0..n) out. out is cleared first and may be reused (its memory
 * is kept). Returns 0, or -1 when out of memory or the text is too large
 * for the parser (4 GiB); out then holds nothing. Any bytes are taken:
 * bytes that are not UTF-8 become U+FFFD, control characters pass through
 * for the drawing to show (ui_width counts them one column each). */
int ui_md_render(const char *src, size_t n, const ui_md_opts *o, ui_md *out);
void ui_md_free(ui_md *md); /* the memory, not md; accepts NULL */

/* Line i's text (its spans joined) into buf, NUL-terminated and cut to
 * cap; returns its length uncut. */
size_t ui_md_line_str(const ui_md *md, size_t i, char *buf, size_t cap);

#endif
