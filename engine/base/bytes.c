#include "bytes.h"

#include <string.h>

const char *eng_memmem(const char *hay, size_t n, const char *needle, size_t k)
{
    if (!k)
        return hay;
    for (size_t i = 0; k <= n && i <= n - k; i++)
        if (hay[i] == needle[0] && !memcmp(hay + i, needle, k))
            return hay + i;
    return NULL;
}

size_t eng_find(const char *s, size_t n, size_t from, const char *pat)
{
    if (from >= n)
        return n;
    const char *p = eng_memmem(s + from, n - from, pat, strlen(pat));
    return p ? (size_t)(p - s) : n;
}
