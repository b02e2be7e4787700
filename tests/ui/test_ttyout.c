/* ui/ttyout.c: what reaches a terminal from outside text. Controls (C0
 * but newline and tab, DEL, C1) and bytes that are not UTF-8 become
 * visible escapes; printable text, including wide and combining
 * characters, passes unchanged. */
#include "testutil.h"
#include "ui.h"

#define EXPECT(lit, want) expect(lit, sizeof lit - 1, want)

static void expect(const char *in, size_t n, const char *want)
{
    char out[512];
    size_t m = ui_term_escape(in, n, out);
    CHECKF(m == strlen(want) && !strcmp(out, want), "got '%s', want '%s'", out, want);
}

int main(void)
{
    EXPECT("plain text\n\tok", "plain text\n\tok");
    EXPECT("\x1b]0;T\x07\x1b[2J", "\\x1b]0;T\\x07\\x1b[2J");
    EXPECT("a\rb\x7f", "a\\x0db\\x7f");
    EXPECT("\xc2\x9b" "2J \xc2\x9d" "0;x", "\\u009b2J \\u009d0;x");
    EXPECT("\xc2\xa0\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80", "\xc2\xa0\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80");
    EXPECT("\xff\xc0\xaf\xed\xa0\x80", "\\xff\\xc0\\xaf\\xed\\xa0\\x80"); /* bad bytes, overlong, surrogate */
    EXPECT("\xe4\xb8", "\\xe4\\xb8"); /* cut short */
    EXPECT("a\0b", "a\\x00b");
    /* bidi controls ("Trojan Source") and zero-width characters: visible */
    EXPECT("abc\xe2\x80\xae" "cba", "abc\\u202ecba");                                  /* RLO */
    EXPECT("\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac\xe2\x80\xad", "\\u202a\\u202b\\u202c\\u202d"); /* LRE RLE PDF LRO */
    EXPECT("x\xe2\x81\xa6y\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9", "x\\u2066y\\u2067\\u2068\\u2069"); /* isolates */
    EXPECT("ad\xe2\x80\x8bmin", "ad\\u200bmin");                                       /* ZWSP */
    EXPECT("\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c", "\\u200e\\u200f\\u061c");                /* LRM RLM ALM */
    EXPECT("\xe2\x81\xa0\xe2\x81\xa1\xe2\x81\xa4", "\\u2060\\u2061\\u2064");             /* word joiner .. */
    EXPECT("\xef\xbb\xbf" "bom \xe1\xa0\x8e", "\\ufeffbom \\u180e");                       /* BOM, MVS */
    /* the joiners: shown after ASCII, a space, nothing, or another of them ... */
    EXPECT("a\xe2\x80\x8d" "b c\xe2\x80\x8c", "a\\u200db c\\u200c");
    EXPECT("\xe2\x80\x8dx", "\\u200dx");
    EXPECT("\xe2\x80\x8b\xe2\x80\x8d", "\\u200b\\u200d");
    /* ... kept inside emoji sequences and words: family, rainbow flag, a
     * Devanagari conjunct, a Persian word with ZWNJ */
    EXPECT("\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7",
           "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7");
    EXPECT("\xf0\x9f\x8f\xb3\xef\xb8\x8f\xe2\x80\x8d\xf0\x9f\x8c\x88",
           "\xf0\x9f\x8f\xb3\xef\xb8\x8f\xe2\x80\x8d\xf0\x9f\x8c\x88");
    EXPECT("\xe0\xa4\x95\xe0\xa5\x8d\xe2\x80\x8d\xe0\xa4\xb7", "\xe0\xa4\x95\xe0\xa5\x8d\xe2\x80\x8d\xe0\xa4\xb7");
    EXPECT("\xd9\x85\xdb\x8c\xe2\x80\x8c\xd8\xae\xd9\x88\xd8\xa7\xd9\x87\xd9\x85",
           "\xd9\x85\xdb\x8c\xe2\x80\x8c\xd8\xae\xd9\x88\xd8\xa7\xd9\x87\xd9\x85");
    /* but a bidi control after an emoji is still shown */
    EXPECT("\xf0\x9f\x98\x80\xe2\x80\xae", "\xf0\x9f\x98\x80\\u202e");
    /* a reply as it streams: the text before is the joiner's context */
    {
        static const char s[] = "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9 a\xe2\x80\x8d";
        char out[128];
        size_t m = ui_term_escape_from(s, 4, sizeof s - 1, out);
        CHECKF(!strcmp(out, "\xe2\x80\x8d\xf0\x9f\x91\xa9 a\\u200d") && m == strlen(out), "from 4: '%s'", out);
        m = ui_term_escape_from(s, 4, 4, out);
        CHECK(m == 0 && !out[0]);
    }
    /* to a file, the bytes as they are */
    FILE *f = tmpfile();
    if (f) {
        CHECK(!ui_is_terminal(f));
        ui_term_write(f, "\x1b[2J", 4);
        rewind(f);
        char b[8] = {0};
        CHECK(fread(b, 1, sizeof b, f) == 4 && !memcmp(b, "\x1b[2J", 4));
        fclose(f);
    }
    return tu_result("test_ttyout");
}
