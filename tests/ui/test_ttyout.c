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
