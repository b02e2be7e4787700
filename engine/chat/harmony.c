#include "harmony.h"

#include <string.h>

#include "bytes.h"

#define CHANNEL "<|channel|>"
#define MESSAGE "<|message|>"

size_t eng_harmony_end(const char *s, size_t n, size_t from, size_t *after)
{
    static const char *const ends[] = {"<|end|>", "<|return|>", "<|call|>", "<|start|>"};
    size_t end = n, past = n;
    for (size_t k = 0; k < sizeof ends / sizeof *ends; k++) {
        size_t e = eng_find(s, n, from, ends[k]);
        if (e < end)
            end = e, past = k == 3 ? e : e + strlen(ends[k]);
    }
    if (after)
        *after = past;
    return end;
}

int eng_harmony_msg_at(const char *s, size_t n, size_t at, eng_harmony_msg *m)
{
    const size_t lc = strlen(CHANNEL);
    if (at > n || n - at < lc || memcmp(s + at, CHANNEL, lc))
        return 0;
    size_t name = at + lc, msg = eng_find(s, n, name, MESSAGE);
    if (msg == n)
        return 0;
    m->name0 = name;
    m->name1 = msg;
    m->body0 = msg + strlen(MESSAGE);
    m->body1 = eng_harmony_end(s, n, m->body0, &m->after);
    m->ended = m->body1 < n;
    return 1;
}
