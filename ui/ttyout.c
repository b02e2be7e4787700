/* The one way every front end writes text it did not make itself (model
 * replies, conversation files, config files, the user's lines) to a
 * terminal: control characters become visible escapes, so no such text
 * can retitle the window, clear the screen, move the cursor or answer
 * for the user, and the invisible bidi and zero-width characters too, so
 * none can make text read otherwise than it is (see ui.h). The curses screen draws through its own
 * sanitising (tui_draw.c); this is line mode, `nibble run` and the
 * warnings before either starts. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _WIN32
#include <io.h>
#else
#include <unistd.h>
#endif

#include "text.h"
#include "ui.h"

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if none. */
static size_t seq_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, min = 0x10000;
    else
        return 0;
    if (n < len)
        return 0;
    unsigned cp = c & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

size_t ui_term_escape_from(const char *in, size_t from, size_t n, char *out)
{
    const unsigned char *s = (const unsigned char *)in;
    size_t o = 0;
    for (size_t i = from; i < n;) {
        unsigned c = s[i];
        if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7F)) {
            out[o++] = (char)c;
            i++;
            continue;
        }
        size_t len = c < 0x80 ? 0 : seq_len(s + i, n - i);
        if (len == 2 && c == 0xC2 && s[i + 1] < 0xA0) {
            /* C1 control (U+0080..U+009F): CSI, OSC and friends on many terminals */
            o += (size_t)sprintf(out + o, "\\u%04x", (unsigned)s[i + 1]);
            i += 2;
        } else if (len == 3 || len == 2) {
            unsigned cp = len == 2 ? (c & 0x1Fu) << 6 | (s[i + 1] & 0x3Fu)
                                   : (c & 0x0Fu) << 12 | (s[i + 1] & 0x3Fu) << 6 | (s[i + 2] & 0x3Fu);
            if (ui_invisible(in, i, (long)cp)) { /* bidi controls, zero-width characters */
                o += (size_t)sprintf(out + o, "\\u%04x", cp);
            } else {
                memcpy(out + o, s + i, len);
                o += len;
            }
            i += len;
        } else if (len) {
            memcpy(out + o, s + i, len);
            o += len;
            i += len;
        } else {
            /* C0 control, DEL, or a byte that is not UTF-8 */
            o += (size_t)sprintf(out + o, "\\x%02x", c);
            i++;
        }
    }
    out[o] = 0;
    return o;
}

size_t ui_term_escape(const char *in, size_t n, char *out) { return ui_term_escape_from(in, 0, n, out); }

int ui_is_terminal(FILE *f)
{
#ifdef _WIN32
    return _isatty(_fileno(f));
#else
    return isatty(fileno(f));
#endif
}

void ui_term_write_from(FILE *f, const char *s, size_t from, size_t n)
{
    if (from >= n)
        return;
    if (!ui_is_terminal(f)) {
        fwrite(s + from, 1, n - from, f); /* a pipe or a file gets the bytes as they are */
        return;
    }
    size_t need = (n - from) * 6 + 1;
    char small[1024], *buf = need <= sizeof small ? small : malloc(need);
    if (!buf)
        return;
    size_t m = ui_term_escape_from(s, from, n, buf);
    fwrite(buf, 1, m, f);
    if (buf != small)
        free(buf);
}

void ui_term_write(FILE *f, const char *s, size_t n) { ui_term_write_from(f, s, 0, n); }

void ui_term_printf(FILE *f, const char *fmt, ...)
{
    char small[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        ui_term_write(f, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big)
        return;
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    ui_term_write(f, big, (size_t)n);
    free(big);
}

int ui_exit_status(int status)
{
#ifndef _WIN32
    if (status > 128 && status < 128 + 64) {
        int sig = status - 128;
        fflush(NULL);
        signal(sig, SIG_DFL);
        raise(sig);
    }
#endif
    return status;
}
