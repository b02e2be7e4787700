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

/* printf-style argument checks. mingw-w64 builds use its C99 printf
 * (__USE_MINGW_ANSI_STDIO: %zu, %lld), which GCC names gnu_printf there;
 * plain "printf" would mean msvcrt's. */
#if defined(__MINGW32__)
#define ENG_PRINTF(f, a) __attribute__((format(gnu_printf, f, a)))
#elif defined(__GNUC__)
#define ENG_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define ENG_PRINTF(f, a)
#endif

/* Formats into e (if not NULL) and returns code. */
int eng_errf(eng_err *e, int code, const char *fmt, ...) ENG_PRINTF(3, 4);
/* Names what failed once: puts "WHAT: " before e's message (a file's
 * path, usually) unless the message already starts with it. Returns
 * code; e may be NULL. */
int eng_err_prefix(eng_err *e, int code, const char *what);

#endif
