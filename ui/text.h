/* Display width and wrapping of UTF-8 text for a terminal, with utf8proc's
 * character widths: wide CJK and emoji take two columns, combining marks
 * none. Bytes that are not valid UTF-8 and control characters show as
 * one column each (drawn as '?'), and the invisible bidi and zero-width
 * characters as an escape (ui_invisible), so any input lays out. */
#ifndef NIBBLE_UI_TEXT_H
#define NIBBLE_UI_TEXT_H

#include <stddef.h>

/* Invisible characters that change how the text around them reads:
 * bidi embeddings, overrides and isolates (U+202A..U+202E,
 * U+2066..U+2069, the "Trojan Source" characters), the direction marks
 * (U+200E, U+200F, U+061C), zero-width spaces and joiners
 * (U+200B..U+200D, U+2060..U+2064, U+FEFF, U+180E). 1 when the code
 * point cp at s[i] is one and is to be shown as a visible escape
 * (\u202e) rather than obeyed. The joiners U+200C and U+200D are kept
 * right after a character beyond ASCII (not a control, not another of
 * these): there emoji sequences (a family, a flag), Indic conjuncts and
 * Persian words use them; after ASCII, a space or nothing they only hide
 * a difference, and are shown. Only s[0..i) is read besides cp, so the
 * answer for a prefix of a text is the answer for the whole. */
int ui_invisible(const char *s, size_t i, long cp);
/* Columns such an escape takes: "\u202e". */
#define UI_INVISIBLE_COLS 6

/* Length in bytes (>= 1) of the character at s[i] (i < n), its width in
 * columns in *w, and its code point in *cp (-1 for an invalid byte).
 * A character ui_invisible shows as an escape is UI_INVISIBLE_COLS wide. */
size_t ui_char(const char *s, size_t n, size_t i, int *w, int *cp);
/* Columns of s[0..n). */
int ui_width(const char *s, size_t n);
/* Bytes of the longest prefix of s[0..n) that fits in cols columns
 * (whole characters; combining marks stay with their base). */
size_t ui_fit(const char *s, size_t n, int cols);

typedef struct ui_line {
    size_t start, end; /* bytes [start, end) of the text; no '\n' inside */
    int cols;          /* width of that span */
} ui_line;

/* Break s[0..n) into lines of at most width columns (width >= 1):
 * at '\n', and where a line is full: at the last space when words is set
 * (the space is dropped), else at the character. A character wider than
 * the line gets a line of its own. Writes up to cap lines to out (out may
 * be NULL) and returns how many there are. */
size_t ui_wrap(const char *s, size_t n, int width, int words, ui_line *out, size_t cap);

#endif
