/* Just enough JSON for the golden files: find a key at the top level of a
 * one-line object and read a string, an integer or an integer array. */
#ifndef NIBBLE_TEST_JSONL_H
#define NIBBLE_TEST_JSONL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Pointer just after `"key":` and any spaces, or NULL. */
static inline const char *js_find(const char *obj, const char *key)
{
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(obj, pat);
    if (!p)
        return NULL;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    return p;
}

static inline void js_put_utf8(char **o, uint32_t cp)
{
    unsigned char *u = (unsigned char *)*o;
    if (cp < 0x80) *u++ = (unsigned char)cp;
    else if (cp < 0x800) { *u++ = (unsigned char)(0xc0 | cp >> 6); *u++ = (unsigned char)(0x80 | (cp & 0x3f)); }
    else if (cp < 0x10000) { *u++ = (unsigned char)(0xe0 | cp >> 12); *u++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3f)); *u++ = (unsigned char)(0x80 | (cp & 0x3f)); }
    else { *u++ = (unsigned char)(0xf0 | cp >> 18); *u++ = (unsigned char)(0x80 | ((cp >> 12) & 0x3f)); *u++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3f)); *u++ = (unsigned char)(0x80 | (cp & 0x3f)); }
    *o = (char *)u;
}

/* Decode the JSON string at p (which points at its opening quote). Returns
 * a malloc'd NUL-terminated string (length in *len), or NULL. */
static inline char *js_string(const char *p, size_t *len)
{
    if (!p || *p != '"')
        return NULL;
    p++;
    char *out = malloc(strlen(p) + 1), *o = out;
    while (*p && *p != '"') {
        if (*p != '\\') { *o++ = *p++; continue; }
        p++;
        switch (*p) {
        case 'n': *o++ = '\n'; p++; break;
        case 't': *o++ = '\t'; p++; break;
        case 'r': *o++ = '\r'; p++; break;
        case 'b': *o++ = '\b'; p++; break;
        case 'f': *o++ = '\f'; p++; break;
        case 'u': {
            uint32_t cp = (uint32_t)strtoul((char[5]){p[1], p[2], p[3], p[4], 0}, NULL, 16);
            p += 5;
            if (cp >= 0xd800 && cp < 0xdc00 && p[0] == '\\' && p[1] == 'u') {
                uint32_t lo = (uint32_t)strtoul((char[5]){p[2], p[3], p[4], p[5], 0}, NULL, 16);
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                p += 6;
            }
            js_put_utf8(&o, cp);
            break;
        }
        default: *o++ = *p++; break;
        }
    }
    *o = 0;
    if (len)
        *len = (size_t)(o - out);
    return out;
}

/* Read an integer array at p ('['); returns the count, ids in *out (malloc'd). */
static inline int js_int_array(const char *p, int32_t **out)
{
    *out = NULL;
    if (!p || *p != '[')
        return -1;
    int n = 0, cap = 0;
    p++;
    for (;;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == ']' || !*p)
            break;
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p)
            return -1;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            *out = realloc(*out, (size_t)cap * sizeof **out);
        }
        (*out)[n++] = (int32_t)v;
        p = end;
    }
    return n;
}

#endif
