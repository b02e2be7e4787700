/* Errors: fallible calls return 0 or a negative code and fill a caller's
 * eng_err with one line naming what is wrong. */
#ifndef NIBBLE_ENG_ERR_H
#define NIBBLE_ENG_ERR_H

#include <stdarg.h>

typedef struct eng_err {
    char msg[512];
} eng_err;

enum {
    ENG_OK = 0,
    ENG_EIO = -1,      /* cannot open / read / write */
    ENG_EFORMAT = -2,  /* malformed input */
    ENG_EUNSUP = -3,   /* well-formed but not supported */
    ENG_ENOMEM = -4,
    ENG_EINVAL = -5,   /* bad argument */
    ENG_ESTOPPED = -6, /* stopped on request */
};

/* Formats into e (if not NULL) and returns code. */
int eng_errf(eng_err *e, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
