#include "err.h"

#include <stdio.h>
#include <string.h>

int eng_errf(eng_err *e, int code, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

int eng_err_prefix(eng_err *e, int code, const char *what)
{
    if (!e || !strncmp(e->msg, what, strlen(what)))
        return code;
    char reason[sizeof e->msg];
    memcpy(reason, e->msg, sizeof reason);
    snprintf(e->msg, sizeof e->msg, "%.200s: %.300s", what, reason);
    return code;
}
