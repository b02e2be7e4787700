/* ui/keyseq: the cursor and function keys as xterm, rxvt, screen/tmux and
 * the Linux console send them decode to one key each, and a sequence for
 * a key we do not use is swallowed whole (never typed). */
#include <string.h>
#include "keyseq.h"
#include "testutil.h"

/* Decode s (the bytes after Esc); *used out. */
static enum ui_key dec(const char *s, size_t *used)
{
    uint32_t c[64];
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++)
        c[i] = (unsigned char)s[i];
    return ui_keyseq(c, n, used);
}

int main(void)
{
    static const struct {
        const char *seq;
        enum ui_key key;
    } known[] = {
        /* xterm */
        {"[H", UI_K_HOME}, {"[F", UI_K_END}, {"OH", UI_K_HOME}, {"OF", UI_K_END},
        {"[1;5D", UI_K_WORD_LEFT}, {"[1;5C", UI_K_WORD_RIGHT}, {"[1;3D", UI_K_WORD_LEFT},
        {"[1;2D", UI_K_LEFT}, {"[D", UI_K_LEFT}, {"[C", UI_K_RIGHT}, {"[A", UI_K_UP}, {"[B", UI_K_DOWN},
        {"OD", UI_K_LEFT}, {"[1;5H", UI_K_HOME}, {"[3~", UI_K_DEL}, {"[3;5~", UI_K_DEL}, {"[5~", UI_K_PGUP},
        {"[6~", UI_K_PGDN}, {"OP", UI_K_F1}, {"[15~", UI_K_F1 + 4}, {"[21~", UI_K_F1 + 9}, {"[24~", UI_K_F12},
        {"[Z", UI_K_BTAB}, {"[200~", UI_K_PASTE_BEGIN}, {"[201~", UI_K_PASTE_END},
        /* rxvt */
        {"[7~", UI_K_HOME}, {"[8~", UI_K_END}, {"Od", UI_K_WORD_LEFT}, {"Oc", UI_K_WORD_RIGHT},
        {"[7^", UI_K_HOME}, {"[8$", UI_K_END}, {"[d", UI_K_LEFT}, {"[11~", UI_K_F1},
        /* screen, tmux */
        {"[1~", UI_K_HOME}, {"[4~", UI_K_END}, {"[5D", UI_K_WORD_LEFT}, {"[5C", UI_K_WORD_RIGHT},
        {"O5D", UI_K_WORD_LEFT},
        /* the Linux console */
        {"[[A", UI_K_F1}, {"[[E", UI_K_F1 + 4},
    };
    for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
        size_t used = 99;
        enum ui_key k = dec(known[i].seq, &used);
        CHECKF(k == known[i].key && used == strlen(known[i].seq), "Esc %s: key %d used %zu, want %d", known[i].seq,
               (int)k, used, (int)known[i].key);
        /* every proper beginning asks for more */
        for (size_t m = 1; m < strlen(known[i].seq); m++) {
            uint32_t c[16];
            for (size_t j = 0; j < m; j++)
                c[j] = (unsigned char)known[i].seq[j];
            CHECKF(ui_keyseq(c, m, &used) == UI_K_MORE, "Esc %.*s is not incomplete", (int)m, known[i].seq);
        }
    }
    /* unknown but well-formed: swallowed whole */
    static const char *const unknown[] = {"[99~", "[1;5P;", "[?1;2c", "[>0;95;0c", "[12;40R", "[9999999999~", "Ox"};
    for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++) {
        size_t used = 0;
        const char *s = unknown[i];
        enum ui_key k = dec(s, &used);
        if (k == UI_K_MORE) /* "[1;5P;" is a whole key then more: take the first */
            continue;
        CHECKF(k == UI_K_IGNORE || (k >= UI_K_F1 && k <= UI_K_F12), "Esc %s: key %d", s, (int)k);
        CHECKF(used > 0 && used <= strlen(s), "Esc %s: used %zu", s, used);
    }
    {
        size_t used = 0;
        CHECK(dec("[99~", &used) == UI_K_IGNORE && used == 4);
        CHECK(dec("[?1;2c", &used) == UI_K_IGNORE && used == 6);
        /* a control character cannot be inside: it ends the sequence, unused */
        CHECK(dec("[1\r", &used) == UI_K_IGNORE && used == 2);
        /* neither CSI nor SS3 */
        CHECK(dec("x", &used) == UI_K_IGNORE && used == 0);
    }
    return tu_result("test_keyseq");
}
