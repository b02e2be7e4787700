#include "text.h"

#include <utf8proc.h>

static int invisible_class(long c)
{
    return (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069) || (c >= 0x200B && c <= 0x200F) ||
           (c >= 0x2060 && c <= 0x2064) || c == 0xFEFF || c == 0x061C || c == 0x180E;
}

/* The code point that ends s[0..i), -1 if none or not UTF-8. */
static long prev_char(const char *s, size_t i)
{
    size_t k = i;
    while (k > 0 && i - k < 4) {
        k--;
        if (((unsigned char)s[k] & 0xC0) != 0x80)
            break;
    }
    if (k == i)
        return -1;
    utf8proc_int32_t c;
    utf8proc_ssize_t len = utf8proc_iterate((const utf8proc_uint8_t *)s + k, (utf8proc_ssize_t)(i - k), &c);
    return len == (utf8proc_ssize_t)(i - k) ? (long)c : -1;
}

int ui_invisible(const char *s, size_t i, long cp)
{
    if (!invisible_class(cp))
        return 0;
    if (cp == 0x200C || cp == 0x200D) {
        long p = prev_char(s, i);
        if (p >= 0xA0 && !invisible_class(p))
            return 0; /* joining an emoji sequence or a script's letters */
    }
    return 1;
}

size_t ui_char(const char *s, size_t n, size_t i, int *w, int *cp)
{
    utf8proc_int32_t c;
    utf8proc_ssize_t len = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &c);
    if (len <= 0) {
        *w = 1;
        *cp = -1;
        return 1;
    }
    *cp = c;
    if (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0))
        *w = 1; /* shown as '?' */
    else if (ui_invisible(s, i, c))
        *w = UI_INVISIBLE_COLS; /* shown as \u202e */
    else {
        int cw = utf8proc_charwidth(c);
        /* ambiguous or unassigned (width 0 and not a mark): one column */
        if (cw == 0) {
            utf8proc_category_t cat = utf8proc_category(c);
            if (cat != UTF8PROC_CATEGORY_MN && cat != UTF8PROC_CATEGORY_ME && cat != UTF8PROC_CATEGORY_CF &&
                c != 0x200d)
                cw = 1;
        }
        *w = cw;
    }
    return (size_t)len;
}

int ui_width(const char *s, size_t n)
{
    int cols = 0, w, cp;
    for (size_t i = 0; i < n;) {
        i += ui_char(s, n, i, &w, &cp);
        cols += w;
    }
    return cols;
}

size_t ui_fit(const char *s, size_t n, int cols)
{
    int used = 0, w, cp;
    size_t i = 0;
    while (i < n) {
        size_t len = ui_char(s, n, i, &w, &cp);
        if (used + w > cols)
            break;
        used += w;
        i += len;
    }
    return i;
}

size_t ui_wrap(const char *s, size_t n, int width, int words, ui_line *out, size_t cap)
{
    size_t count = 0;
    if (width < 1)
        width = 1;
#define EMIT(a, b, c)                                                                      \
    do {                                                                                   \
        if (out && count < cap) {                                                          \
            out[count].start = (a);                                                        \
            out[count].end = (b);                                                          \
            out[count].cols = (c);                                                         \
        }                                                                                  \
        count++;                                                                           \
    } while (0)
    size_t start = 0;
    for (;;) {
        /* one paragraph: [start, pend) */
        size_t pend = start;
        while (pend < n && s[pend] != '\n')
            pend++;
        size_t ls = start; /* current line start */
        while (1) {
            int cols = 0, w, cp;
            size_t i = ls, brk = 0, brk_next = 0;
            int brk_cols = 0;
            while (i < pend) {
                size_t len = ui_char(s, pend, i, &w, &cp);
                if (cols + w > width && i > ls)
                    break;
                if (cp == ' ' && i > ls) {
                    brk = i;
                    brk_next = i + 1;
                    brk_cols = cols;
                }
                cols += w;
                i += len;
            }
            if (i >= pend) {
                EMIT(ls, pend, cols);
                break;
            }
            /* full (combining marks were taken with their base above) */
            if (words && s[i] == ' ') {
                EMIT(ls, i, cols);
                ls = i + 1;
            } else if (words && brk > ls) {
                EMIT(ls, brk, brk_cols);
                ls = brk_next;
            } else {
                EMIT(ls, i, cols);
                ls = i;
            }
        }
        if (pend >= n)
            break;
        start = pend + 1;
    }
#undef EMIT
    return count;
}
