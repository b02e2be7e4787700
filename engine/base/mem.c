#include "mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

char *eng_strndup(const char *s, size_t n)
{
    char *c = malloc(n + 1);
    if (c) {
        memcpy(c, s, n);
        c[n] = 0;
    }
    return c;
}

int eng_reserve(void *pp, size_t *cap, size_t need, size_t size, size_t min_cap)
{
    if (need <= *cap)
        return 0;
    size_t want = need > SIZE_MAX / 2 ? need : need * 2;
    if (want < min_cap)
        want = min_cap;
    if (size && want > SIZE_MAX / size)
        return ENG_ENOMEM;
    void *p = realloc(*(void **)pp, want * size);
    if (!p)
        return ENG_ENOMEM;
    *(void **)pp = p;
    *cap = want;
    return 0;
}
