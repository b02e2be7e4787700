/* ui/text: display widths (ASCII, CJK, emoji, combining marks, bad
 * bytes) and wrapping, which the conversation pane and the editor share. */
#include "testutil.h"
#include "text.h"

static size_t wrap(const char *s, int width, int words, ui_line *out)
{
    return ui_wrap(s, strlen(s), width, words, out, 64);
}

static int line_is(const char *s, const ui_line *l, const char *want)
{
    return l->end - l->start == strlen(want) && !memcmp(s + l->start, want, strlen(want));
}

int main(void)
{
    CHECK(ui_width("hello", 5) == 5);
    const char *cjk = "\xe4\xb8\xad\xe6\x96\x87"; /* 中文 */
    CHECK(ui_width(cjk, 6) == 4);
    const char *emoji = "\xf0\x9f\x98\x80"; /* 😀 */
    CHECK(ui_width(emoji, 4) == 2);
    const char *comb = "e\xcc\x81"; /* e + combining acute */
    CHECK(ui_width(comb, 3) == 1);
    CHECK(ui_width("\xff\xfe", 2) == 2); /* bad bytes: one column each */
    CHECK(ui_width("a\tb", 3) == 3);
    CHECK(ui_fit(cjk, 6, 3) == 3);     /* the second wide char does not fit in 1 */
    CHECK(ui_fit(comb, 3, 1) == 3);    /* the mark stays with its base */
    CHECK(ui_fit("abc", 3, 0) == 0);
    /* bidi controls and zero-width characters take the columns of their
     * escape (\u202e); joiners inside emoji sequences take none */
    CHECK(ui_width("abc\xe2\x80\xae", 6) == 3 + UI_INVISIBLE_COLS);
    CHECK(ui_width("a\xe2\x80\x8b" "b", 5) == 2 + UI_INVISIBLE_COLS);
    CHECK(ui_width("a\xe2\x80\x8d" "b", 5) == 2 + UI_INVISIBLE_COLS);
    const char *family = "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9"; /* man ZWJ woman */
    CHECK(ui_width(family, 11) == 4);
    CHECK(ui_invisible(family, 4, 0x200d) == 0 && ui_invisible("a\xe2\x80\x8d", 1, 0x200d) == 1);
    CHECK(ui_invisible("", 0, 0x202e) && ui_invisible("", 0, 0xfeff) && !ui_invisible("", 0, 0x2065));
    CHECK(!ui_invisible("", 0, 0x4e2d) && !ui_invisible("", 0, 'a'));
    /* a line is never cut between a character and the joiner after it */
    {
        ui_line jl[8];
        size_t jn = ui_wrap(family, 11, 2, 0, jl, 8);
        CHECK(jn == 2 && jl[0].end == 7 && jl[1].start == 7);
    }

    ui_line l[64];
    const char *s = "the quick brown fox";
    size_t n = wrap(s, 10, 1, l);
    CHECK(n == 2 && line_is(s, &l[0], "the quick") && line_is(s, &l[1], "brown fox"));
    CHECK(l[0].cols == 9);
    n = wrap(s, 10, 0, l);
    CHECK(n == 2 && line_is(s, &l[0], "the quick ") && line_is(s, &l[1], "brown fox"));
    /* a word longer than the line is cut */
    s = "abcdefghijklmnop";
    n = wrap(s, 5, 1, l);
    CHECK(n == 4 && line_is(s, &l[0], "abcde") && line_is(s, &l[3], "p"));
    /* newlines end lines; an empty paragraph is an empty line */
    s = "one\n\ntwo";
    n = wrap(s, 20, 1, l);
    CHECK(n == 3 && line_is(s, &l[0], "one") && line_is(s, &l[1], "") && line_is(s, &l[2], "two"));
    CHECK(wrap("", 10, 1, l) == 1);
    /* wide characters never straddle the edge: 5 CJK chars in width 5 */
    s = "\xe4\xb8\x80\xe4\xba\x8c\xe4\xb8\x89\xe5\x9b\x9b\xe4\xba\x94"; /* 一二三四五 */
    n = wrap(s, 5, 1, l);
    CHECK(n == 3);
    for (size_t i = 0; i < n; i++)
        CHECK(l[i].cols <= 5 && (l[i].end - l[i].start) % 3 == 0);
    CHECK(l[0].cols == 4 && l[2].cols == 2);
    /* a character wider than the line still gets a line */
    n = wrap(emoji, 1, 1, l);
    CHECK(n == 1 && l[0].cols == 2);
    /* combining marks stay on their base's line */
    s = "abce\xcc\x81" "fg";
    n = wrap(s, 4, 0, l);
    CHECK(n == 2 && line_is(s, &l[0], "abce\xcc\x81") && line_is(s, &l[1], "fg"));
    /* mixed: every line fits */
    s = "Hello \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80 caf\x65\xcc\x81 \xe3\x81\x93\xe3\x82\x93\xe3\x81\xab\xe3\x81\xa1\xe3\x81\xaf end";
    for (int w = 1; w < 30; w++) {
        n = wrap(s, w, 1, l);
        for (size_t i = 0; i < n && i < 64; i++) {
            CHECK(l[i].cols == ui_width(s + l[i].start, l[i].end - l[i].start));
            CHECK(l[i].cols <= (w < 2 ? 2 : w));
        }
    }
    return tu_result("test_text");
}
