/* ui/markdown: each construct as the screen gets it (text and style bits
 * of the lines), replies cut at every byte as while they stream (no
 * crash, no delimiter of a closed construct on screen), widths from 1 to
 * 120, wide characters, hostile input. Run under ASan in CI. */
#include "markdown.h"
#include "testutil.h"
#include "text.h"

#include <stdint.h>

static ui_md md;

static int render(const char *s, int width, unsigned flags)
{
    ui_md_opts o = {.width = width, .flags = flags};
    return ui_md_render(s, strlen(s), &o, &md);
}

/* line i as text (static buffer) */
static const char *L(size_t i)
{
    static char b[4096];
    ui_md_line_str(&md, i, b, sizeof b);
    return b;
}

/* every line joined with '\n' (static buffer) */
static const char *all(void)
{
    static char b[1 << 16];
    size_t u = 0;
    for (size_t i = 0; i < md.nlines && u < sizeof b - 1; i++) {
        u += ui_md_line_str(&md, i, b + u, sizeof b - u);
        if (u > sizeof b - 2)
            u = sizeof b - 2;
        b[u++] = '\n';
    }
    b[u] = 0;
    return b;
}

/* the style of the span holding the first occurrence of word; 0 if none */
static uint32_t style_of(const char *word)
{
    size_t wn = strlen(word);
    for (size_t i = 0; i < md.nspans; i++) {
        const ui_md_span *sp = &md.spans[i];
        for (size_t k = 0; k + wn <= sp->len; k++)
            if (!memcmp(md.text + sp->off + k, word, wn))
                return sp->style;
    }
    return 0;
}

/* the first line that contains s, or -1 */
static long find_line(const char *s)
{
    for (size_t i = 0; i < md.nlines; i++)
        if (strstr(L(i), s))
            return (long)i;
    return -1;
}

/* The line s passes the width only by its last character, wider than the
 * room left before it (it then stands alone after the margin). */
static int one_wide_char(const char *s, int width)
{
    size_t n = strlen(s), i = 0, last = 0;
    int w, cp, lw = 0;
    while (i < n) {
        size_t len = ui_char(s, n, i, &w, &cp);
        if (w > 0)
            last = i, lw = w;
        i += len;
    }
    int before = ui_width(s, last);
    return before < width && lw > width - before;
}

/* Lines fit the width (a character wider than the room left may stand
 * alone), their cols say their width, spans lie in the text, src never
 * goes back. Returns 1 when all hold. */
static int sane(int width)
{
    size_t prev = 0;
    for (size_t i = 0; i < md.nlines; i++) {
        const ui_md_line *l = &md.lines[i];
        const char *s = L(i);
        if (l->cols != ui_width(s, strlen(s)) || (l->cols > width && !one_wide_char(s, width))) {
            fprintf(stderr, "width %d line %zu: %d cols: '%s'\n", width, i, l->cols, s);
            return 0;
        }
        if (l->span + l->nspans > md.nspans)
            return 0;
        for (uint32_t k = 0; k < l->nspans; k++) {
            const ui_md_span *sp = &md.spans[l->span + k];
            if (sp->off + sp->len > md.ntext || sp->len == 0)
                return 0;
        }
        if (l->code_x > l->cols)
            return 0;
        if (l->src < prev) {
            fprintf(stderr, "width %d line %zu: src %zu after %zu\n", width, i, l->src, prev);
            return 0;
        }
        prev = l->src;
    }
    return 1;
}

static const char reply[] = "# Plan\n"
                            "\n"
                            "Here is **the answer** with *emphasis*, `inline code` and a [link](https://example.org).\n"
                            "\n"
                            "- **First**: do this\n"
                            "- Second, with `code` and *more*\n"
                            "  1. nested one\n"
                            "  2. nested **two**\n"
                            "\n"
                            "```c\n"
                            "int main(void) { return 0; }\n"
                            "```\n"
                            "\n"
                            "| Col | **Bold** |\n"
                            "|-----|----------|\n"
                            "| a   | `b`      |\n"
                            "\n"
                            "> A *quote* here.\n"
                            "\n"
                            "Done.\n";

static void constructs(void)
{
    /* headings: no '#', bold, level in the style */
    CHECK(render("# Title\n\n## Sub\n\n#### Small", 40, 0) == 0);
    CHECK(!strcmp(L(0), "Title") && !strchr(all(), '#'));
    CHECK((style_of("Title") & (UI_MD_H1 | UI_MD_BOLD)) == (UI_MD_H1 | UI_MD_BOLD));
    CHECK(style_of("Sub") & UI_MD_H2);
    CHECK(style_of("Small") & UI_MD_H3);
    CHECK(!strcmp(L(1), "") && !strcmp(L(2), "Sub")); /* blocks apart by a blank line */

    /* inline styles */
    CHECK(render("a **b** *c* `d` ~~e~~ ***f***", 40, 0) == 0);
    CHECK(md.nlines == 1 && !strcmp(L(0), "a b c d e f"));
    CHECK(style_of("b") == UI_MD_BOLD);
    CHECK(style_of("c") == UI_MD_ITALIC);
    CHECK(style_of("d") == UI_MD_CODE);
    CHECK(style_of("e") == UI_MD_STRIKE);
    CHECK(style_of("f") == (UI_MD_BOLD | UI_MD_ITALIC));

    /* a fenced code block: no fence lines, its own background from the
     * margin, the language not shown, indentation kept, tabs expanded */
    CHECK(render("text\n\n```python\nif x:\n\treturn 1\n```\n\nafter", 40, 0) == 0);
    CHECK(!strstr(all(), "```") && !strstr(all(), "python"));
    long c0 = find_line("if x:");
    CHECKF(c0 >= 0 && !strcmp(L((size_t)c0), " if x:") && !strcmp(L((size_t)c0 + 1), "     return 1"), "%s", all());
    CHECK(c0 >= 0 && md.lines[c0].code_x == 0 && md.lines[c0 + 1].code_x == 0);
    CHECK(style_of("return") & UI_MD_BLOCK);
    CHECK(md.lines[0].code_x == -1 && find_line("after") > c0 + 1);

    /* a long code line is cut with a marker, never wrapped */
    CHECK(render("```\nabcdefghijklmnopqrstuvwxyz0123456789\n```", 20, 0) == 0);
    CHECK(md.nlines == 1 && md.lines[0].cols == 20);
    CHECK(!strcmp(L(0), " abcdefghijklmnopqr\u203a"));
    CHECK(style_of("\u203a") & UI_MD_CUT);

    /* lists: bullets, numbers, nested ones indented, wrapped items hang */
    CHECK(render("- one\n- two and a long tail that wraps\n  - inner\n\n1. first\n2. second", 20, 0) == 0);
    CHECKF(!strcmp(L(0), "\u2022 one") && !strcmp(L(1), "\u2022 two and a long"), "%s", all());
    CHECKF(!strcmp(L(2), "  tail that wraps") && !strcmp(L(3), "  \u25e6 inner"), "%s", all());
    CHECK(find_line("1. first") >= 0 && find_line("2. second") == find_line("1. first") + 1);
    CHECK(style_of("\u2022") & UI_MD_BULLET);
    CHECK(render("3) three\n4) four", 20, 0) == 0 && !strcmp(L(0), "3) three") && !strcmp(L(1), "4) four"));
    CHECK(render("- [x] done\n- [ ] todo", 20, 0) == 0);
    CHECK(!strcmp(L(0), "\u2022 [x] done") && !strcmp(L(1), "\u2022 [ ] todo"));
    CHECK(render("-\n- b", 20, 0) == 0 && !strcmp(L(0), "\u2022 ") && !strcmp(L(1), "\u2022 b")); /* an empty item */

    /* block quotes: a bar on every line, also the blank one inside */
    CHECK(render("> first para\n>\n> second", 40, 0) == 0);
    CHECK(md.nlines == 3 && !strcmp(L(0), "\u2502 first para") && !strcmp(L(1), "\u2502 ") &&
          !strcmp(L(2), "\u2502 second"));
    CHECK(style_of("\u2502") & UI_MD_QUOTE);
    CHECK(!strchr(all(), '>'));

    /* tables: columns where they fit (alignment kept), else a row a line */
    const char *tab = "| Name | Age |\n|:-----|----:|\n| Alice | 30 |\n| Bob | 4 |";
    CHECK(render(tab, 40, 0) == 0);
    CHECKF(md.nlines == 4 && !strcmp(L(0), "Name  \u2502 Age") && !strcmp(L(1), "\u2500\u2500\u2500\u2500\u2500\u2500\u253c\u2500\u2500\u2500\u2500") &&
               !strcmp(L(2), "Alice \u2502  30") && !strcmp(L(3), "Bob   \u2502   4"),
           "%s", all());
    CHECK(style_of("Name") & UI_MD_HEAD);
    CHECK(!strchr(all(), '|'));
    CHECK(render(tab, 10, 0) == 0);
    CHECKF(!strstr(all(), "\u253c") && find_line("Alice \u2502 30") >= 0 && find_line("Bob \u2502 4") >= 0, "%s", all());

    /* links: the text, then the address dimmed; an address shown as its
     * own text is not repeated; images say so */
    CHECK(render("see [the docs](https://x.org/d) or <https://y.org>", 60, 0) == 0);
    CHECKF(!strcmp(L(0), "see the docs (https://x.org/d) or https://y.org"), "%s", all());
    CHECK(style_of("the docs") & UI_MD_LINK);
    CHECK(style_of("(https://x.org/d") & UI_MD_URL);
    CHECK(render("![a cat](cat.png)", 60, 0) == 0 && !strcmp(L(0), "[image: a cat] (cat.png)"));

    /* rules, entities, hard breaks, raw HTML and indented text as text */
    CHECK(render("a\n\n---\n\nb", 10, 0) == 0 && !strcmp(L(2), "\u2500\u2500\u2500\u2500\u2500\u2500\u2500\u2500\u2500\u2500"));
    CHECK(render("Tom &amp; Jerry &#x263A; &#65; &bogus;", 60, 0) == 0);
    CHECK(!strcmp(L(0), "Tom & Jerry \u263a A &bogus;"));
    CHECK(render("line one  \nline two", 60, 0) == 0 && md.nlines == 2);
    CHECK(render("a <b>bold</b> Vec<T>", 60, 0) == 0 && !strcmp(L(0), "a <b>bold</b> Vec<T>"));
    CHECK(render("para\n\n    indented, not code", 60, 0) == 0 && md.lines[md.nlines - 1].code_x == -1);

    /* the whole sample: no markup left, and sane at every width */
    CHECK(render(reply, 60, 0) == 0);
    const char *a = all();
    CHECKF(!strstr(a, "**") && !strchr(a, '`') && !strchr(a, '#') && !strchr(a, '|') && !strchr(a, '*'), "%s", a);
    for (int w = 1; w <= 120; w++) {
        CHECK(render(reply, w, 0) == 0);
        CHECKF(sane(w), "width %d", w);
    }

    /* the caller's lead and style: on every line, counted in the width */
    ui_md_opts o = {.width = 12, .style = UI_MD_BASE, .lead = "\u2506 ", .src_base = 100};
    CHECK(ui_md_render("some thinking text here", 23, &o, &md) == 0);
    CHECK(md.nlines == 3 && !strcmp(L(0), "\u2506 some") && sane(12));
    for (size_t i = 0; i < md.nspans; i++)
        CHECK(md.spans[i].style & UI_MD_BASE);
    CHECK(md.lines[0].src == 100);
}

/* The sample cut at every byte, as while a reply streams: never a crash,
 * never a `**`, backtick or '*' on screen (the sample shows none when
 * done), an open fence shows its code so far. */
static void streaming(void)
{
    size_t n = strlen(reply);
    for (int w = 1; w <= 81; w += 20) {
        for (size_t k = 0; k <= n; k++) {
            ui_md_opts o = {.width = w, .flags = UI_MD_STREAM};
            int rc = ui_md_render(reply, k, &o, &md);
            CHECKF(rc == 0, "cut at %zu", k);
            const char *a = all();
            CHECKF(!strstr(a, "**") && !strchr(a, '`') && !strchr(a, '*'), "width %d, cut at %zu: %s", w, k, a);
            CHECKF(sane(w), "width %d, cut at %zu", w, k);
        }
    }
    /* an open fence is code so far */
    CHECK(render("Look:\n\n```py\nprint(1)\nprint(", 40, UI_MD_STREAM) == 0);
    long c = find_line("print(1)");
    CHECKF(c >= 0 && md.lines[c].code_x == 0 && !strcmp(L((size_t)c + 1), " print("), "%s", all());
    CHECK(!strstr(all(), "```"));
    /* open bold and code spans read as they will end */
    CHECK(render("Some **bold tex", 40, UI_MD_STREAM) == 0 && !strcmp(L(0), "Some bold tex"));
    CHECK(style_of("bold tex") == UI_MD_BOLD);
    CHECK(render("call `foo(", 40, UI_MD_STREAM) == 0 && !strcmp(L(0), "call foo("));
    CHECK(style_of("foo(") == UI_MD_CODE);
    CHECK(render("Some **bold**", 40, UI_MD_STREAM) == 0 && style_of("bold") == UI_MD_BOLD);
    /* not emphasis: 2*3, a lone star, a bullet */
    CHECK(render("2*3 is 6", 40, UI_MD_STREAM) == 0 && !strcmp(L(0), "2*3 is 6"));
    CHECK(render("- item", 40, UI_MD_STREAM) == 0 && !strcmp(L(0), "\u2022 item"));
    /* the same text done renders the same as streamed, once closed */
    CHECK(render("**a** b", 40, 0) == 0 && !strcmp(L(0), "a b"));
    /* a finished reply is taken as it is: a stray ** stays */
    CHECK(render("a ** b", 40, 0) == 0 && !strcmp(L(0), "a ** b"));
}

static void wide(void)
{
    /* CJK wraps at characters, never past the width, never split */
    const char *cjk = "\u4e00\u4e8c\u4e09\u56db\u4e94\u516d\u4e03\u516b\u4e5d\u5341"; /* 一二三...十 */
    CHECK(render(cjk, 9, 0) == 0 && sane(9) && md.nlines == 3);
    for (size_t i = 0; i < md.nlines; i++)
        CHECK(strlen(L(i)) % 3 == 0 && md.lines[i].cols <= 8);
    /* a table of wide cells lines up */
    CHECK(render("| \u540d\u524d | x |\n|---|---|\n| \u6771\u4eac\u90fd | y |\n| a | \U0001f600 |", 40, 0) == 0);
    CHECK(sane(40) && md.lines[0].cols == md.lines[2].cols && md.lines[2].cols == md.lines[3].cols);
    /* a wide code line cut on a character boundary */
    CHECK(render("```\n\u4e00\u4e8c\u4e09\u56db\u4e94\u516d\n```", 8, 0) == 0 && sane(8));
    CHECK(md.nlines == 1 && strstr(L(0), "\u203a"));
    /* combining marks stay with their letter */
    CHECK(render("cafe\xcc\x81 **e\xcc\x81t\xc3\xa9**", 40, 0) == 0 && !strcmp(L(0), "cafe\xcc\x81 e\xcc\x81t\xc3\xa9"));
    /* emoji in a list at a narrow width */
    CHECK(render("- \U0001f600\U0001f600\U0001f600\U0001f600 ok", 5, 0) == 0 && sane(5));
    /* an invisible character is shown as a 6-column escape (\u061c): on a
     * 5-column pane it stands alone on its line, the text around it is
     * wrapped as usual (found by fuzz_markdown) */
    CHECK(render("ab\xd8\x9c" "cd efgh", 5, 0) == 0 && sane(5));
    CHECK(find_line("\xd8\x9c") >= 0 && !strcmp(L((size_t)find_line("\xd8\x9c")), "\xd8\x9c"));
    CHECK(render("> ab\xd8\x9c" "cd", 5, 0) == 0 && sane(5));
}

static void hostile(void)
{
    /* invalid UTF-8, NUL bytes, control characters: laid out, not lost */
    const char bad[] = "a\xff\xfe b\x01 **c\0" "d** \x1b[31m";
    ui_md_opts o = {.width = 20};
    CHECK(ui_md_render(bad, sizeof bad - 1, &o, &md) == 0 && sane(20) && md.nlines == 1);
    CHECK(strstr(L(0), "\xef\xbf\xbd")); /* the NUL as U+FFFD */
    /* deep nesting: the margins give way, the text keeps some room */
    char deep[4200];
    size_t u = 0;
    for (int i = 0; i < 1000; i++)
        deep[u++] = '>';
    memcpy(deep + u, " text", 6);
    CHECK(render(deep, 30, 0) == 0 && sane(30) && find_line("text") >= 0);
    u = 0;
    for (int i = 0; i < 60; i++) {
        for (int k = 0; k < i * 2; k++)
            deep[u++] = ' ';
        memcpy(deep + u, "- x\n", 4);
        u += 4;
    }
    deep[u] = 0;
    CHECK(render(deep, 30, 0) == 0 && sane(30));
    for (size_t i = 0; i < md.nlines; i++)
        CHECK(strstr(L(i), "x") || !strcmp(L(i), ""));
    /* every byte value in markdown's favourite places, cut everywhere */
    static const char pieces[][8] = {"*", "**", "_", "`", "```", "~~", "[", "](", ")", "!", "<", ">", "|", "-", "1.",
                                     "#", "\n", " ", "\\", "&", ";", "x", "\xe4\xb8\x80", "\t", "\r", "    ",
                                     "\xd8\x9c"};
    unsigned seed = 12345;
    char buf[400];
    for (int round = 0; round < 400; round++) {
        size_t m = 0;
        while (m < sizeof buf - 8) {
            seed = seed * 1103515245u + 12345u;
            const char *p = pieces[(seed >> 16) % (sizeof pieces / sizeof *pieces)];
            size_t pl = strlen(p);
            memcpy(buf + m, p, pl);
            m += pl;
        }
        for (size_t k = m; k > 0; k -= k > 40 ? 37 : k) {
            ui_md_opts so = {.width = 1 + (int)(seed >> 20) % 60, .flags = round & 1 ? UI_MD_STREAM : 0};
            CHECK(ui_md_render(buf, k, &so, &md) == 0);
            CHECK(sane(so.width));
        }
    }
    /* empty text: no lines */
    CHECK(render("", 20, 0) == 0 && md.nlines == 0);
    CHECK(render("", 20, UI_MD_STREAM) == 0 && md.nlines == 0);
}

int main(void)
{
    constructs();
    streaming();
    wide();
    hostile();
    ui_md_free(&md);
    ui_md_free(&md); /* twice: it is left empty */
    return tu_result("test_markdown");
}
