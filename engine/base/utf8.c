#include "utf8.h"

#include <stdint.h>

/* Length of a sequence from its lead byte, 0 for a byte that cannot lead. */
static int seq_len(uint8_t c)
{
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) return 2;
    if (c >= 0xe0 && c <= 0xef) return 3;
    if (c >= 0xf0 && c <= 0xf4) return 4;
    return 0;
}

/* Validity of the second byte depends on the lead (no overlongs,
 * surrogates or values past U+10FFFF); later bytes are plain 10xxxxxx. */
static int second_ok(uint8_t lead, uint8_t b)
{
    if ((b & 0xc0) != 0x80) return 0;
    if (lead == 0xe0) return b >= 0xa0;
    if (lead == 0xed) return b <= 0x9f;
    if (lead == 0xf0) return b >= 0x90;
    if (lead == 0xf4) return b <= 0x8f;
    return 1;
}

/* Bytes of the (possibly partial) valid sequence at s: returns its full
 * length L and sets *have to how many of its bytes are present (<= L); a
 * byte that cannot start or continue a sequence gives L = 1, *have = 1. */
static int scan(const uint8_t *s, size_t n, int *have)
{
    int L = seq_len(s[0]);
    if (L <= 1) {
        *have = 1;
        return 1;
    }
    int i = 1;
    for (; i < L && (size_t)i < n; i++) {
        int ok = i == 1 ? second_ok(s[0], s[i]) : (s[i] & 0xc0) == 0x80;
        if (!ok) {
            *have = 1; /* broken: the lead byte stands alone */
            return 1;
        }
    }
    *have = i;
    return L;
}

/* Bytes of whole characters from the start: up to the first that is cut
 * off by the end, or, if stop_at_broken, by a byte that starts none. */
static size_t whole_prefix(const uint8_t *s, size_t n, int stop_at_broken)
{
    size_t i = 0;
    while (i < n) {
        int have, L = scan(s + i, n - i, &have);
        if (have < L || (stop_at_broken && L == 1 && s[i] >= 0x80))
            break;
        i += (size_t)L;
    }
    return i;
}

size_t eng_utf8_complete(const char *str, size_t n) { return whole_prefix((const uint8_t *)str, n, 0); }

int eng_utf8_valid(const char *str, size_t n) { return whole_prefix((const uint8_t *)str, n, 1) == n; }
