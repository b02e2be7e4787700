/* Terminal key sequences (what follows Esc for the cursor and function
 * keys), decoded without curses: xterm, rxvt, screen/tmux and the Linux
 * console each spell Home, End and Ctrl+arrows their own way, and the
 * terminfo entry of $TERM often knows only one of them. A complete
 * sequence that names no key we use is reported as such, so the caller
 * drops it instead of typing its bytes into the input. */
#ifndef NIBBLE_UI_KEYSEQ_H
#define NIBBLE_UI_KEYSEQ_H

#include <stddef.h>
#include <stdint.h>

enum ui_key {
    UI_K_MORE = 0, /* incomplete: more bytes may follow */
    UI_K_IGNORE,   /* a complete sequence for a key we do not use */
    UI_K_UP, UI_K_DOWN, UI_K_RIGHT, UI_K_LEFT,
    UI_K_WORD_LEFT, UI_K_WORD_RIGHT, /* Ctrl or Alt with Left/Right */
    UI_K_HOME, UI_K_END, UI_K_INS, UI_K_DEL, UI_K_PGUP, UI_K_PGDN,
    UI_K_BTAB, UI_K_ENTER,
    UI_K_PASTE_BEGIN, UI_K_PASTE_END,
    UI_K_F1, /* UI_K_F1 + n - 1 for Fn, n = 1..12 */
    UI_K_F12 = UI_K_F1 + 11,
};

/* Decode the characters after an Esc: c[0] is '[' (CSI) or 'O' (SS3).
 * Returns a key and sets *used to the characters it took (counting
 * c[0]); UI_K_MORE when c[0..n) is a proper beginning of a sequence;
 * UI_K_IGNORE for a whole sequence we have no use for (*used covers it),
 * or for something that is not a sequence at all (*used: 0). */
enum ui_key ui_keyseq(const uint32_t *c, size_t n, size_t *used);

#endif
