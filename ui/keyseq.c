#include "keyseq.h"

/* The modifier parameter of xterm's "CSI 1 ; M X": 1 + shift(1) + alt(2) + ctrl(4). */
static enum ui_key arrow(uint32_t f, unsigned mod)
{
    unsigned m = mod > 1 ? mod - 1 : 0;
    int word = (m & 4) || (m & 2); /* Ctrl or Alt */
    switch (f) {
    case 'A': return UI_K_UP;
    case 'B': return UI_K_DOWN;
    case 'C': return word ? UI_K_WORD_RIGHT : UI_K_RIGHT;
    case 'D': return word ? UI_K_WORD_LEFT : UI_K_LEFT;
    case 'H': return UI_K_HOME;
    case 'F': return UI_K_END;
    }
    return UI_K_IGNORE;
}

/* "CSI N ~" and rxvt's "CSI N ^" (Ctrl), "CSI N $" (Shift), "CSI N @". */
static enum ui_key tilde(unsigned n)
{
    switch (n) {
    case 1: case 7: return UI_K_HOME;
    case 4: case 8: return UI_K_END;
    case 2: return UI_K_INS;
    case 3: return UI_K_DEL;
    case 5: return UI_K_PGUP;
    case 6: return UI_K_PGDN;
    case 200: return UI_K_PASTE_BEGIN;
    case 201: return UI_K_PASTE_END;
    }
    static const unsigned fk[12] = {11, 12, 13, 14, 15, 17, 18, 19, 20, 21, 23, 24};
    for (int i = 0; i < 12; i++)
        if (fk[i] == n)
            return (enum ui_key)(UI_K_F1 + i);
    return UI_K_IGNORE;
}

static enum ui_key csi(const uint32_t *c, size_t n, size_t *used)
{
    /* the Linux console's F1-F5: CSI [ A ... CSI [ E */
    if (n >= 2 && c[1] == '[') {
        if (n < 3)
            return UI_K_MORE;
        *used = 3;
        return c[2] >= 'A' && c[2] <= 'E' ? (enum ui_key)(UI_K_F1 + (c[2] - 'A')) : UI_K_IGNORE;
    }
    unsigned p[4] = {0, 0, 0, 0};
    int np = 0, priv = 0;
    for (size_t i = 1; i < n; i++) {
        uint32_t b = c[i];
        if (b >= '0' && b <= '9') {
            if (np == 0)
                np = 1;
            if (p[np - 1] < 100000)
                p[np - 1] = p[np - 1] * 10 + (b - '0');
            continue;
        }
        if (b == ';' || b == ':') {
            if (np == 0)
                np = 1;
            if (np < 4)
                np++;
            continue;
        }
        if (b >= 0x3c && b <= 0x3f) { /* private markers: < = > ? (a terminal's answers) */
            priv = 1;
            continue;
        }
        if (b == '$' && np) { /* rxvt's Shift+Home: a final byte there */
            *used = i + 1;
            return tilde(p[0]);
        }
        if (b >= 0x20 && b <= 0x2f) /* intermediate bytes */
            continue;
        if (b >= 0x40 && b <= 0x7e) {
            *used = i + 1;
            if (priv)
                return UI_K_IGNORE;
            if (b == '~' || b == '^' || b == '@')
                return tilde(p[0]);
            if (b == 'Z')
                return UI_K_BTAB;
            if (b >= 'a' && b <= 'd' && !np) /* rxvt's Shift+arrows */
                return arrow(b - 'a' + 'A', 0);
            return arrow(b, np >= 2 ? p[1] : p[0]); /* CSI 1;5D, or CSI 5D (older xterm, screen) */
        }
        /* anything else cannot be inside a sequence: it ends here, unused */
        *used = i;
        return UI_K_IGNORE;
    }
    return UI_K_MORE;
}

static enum ui_key ss3(const uint32_t *c, size_t n, size_t *used)
{
    unsigned mod = 0;
    for (size_t i = 1; i < n; i++) {
        uint32_t b = c[i];
        if (b >= '0' && b <= '9') { /* some terminals put a modifier here: SS3 5 D */
            mod = mod * 10 + (b - '0');
            if (mod > 1000)
                mod = 1000;
            continue;
        }
        if (b == ';')
            continue;
        *used = i + 1;
        if (b >= 'a' && b <= 'd') /* rxvt's Ctrl+arrows */
            return arrow(b - 'a' + 'A', 5);
        if (b >= 'P' && b <= 'S')
            return (enum ui_key)(UI_K_F1 + (b - 'P'));
        if (b == 'M')
            return UI_K_ENTER;
        if (b >= 0x40 && b <= 0x7e)
            return arrow(b, mod);
        *used = i;
        return UI_K_IGNORE;
    }
    return UI_K_MORE;
}

enum ui_key ui_keyseq(const uint32_t *c, size_t n, size_t *used)
{
    *used = 0;
    if (!n)
        return UI_K_MORE;
    if (c[0] == '[')
        return csi(c, n, used);
    if (c[0] == 'O')
        return ss3(c, n, used);
    return UI_K_IGNORE;
}
