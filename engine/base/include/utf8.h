/* UTF-8 helpers for streaming text: tokens end anywhere inside a
 * character, the screen wants whole ones. */
#ifndef NIBBLE_ENG_UTF8_H
#define NIBBLE_ENG_UTF8_H

#include <stddef.h>

/* Length of the longest prefix of s[0..n) that does not end inside a
 * character that could still be completed by more bytes. Invalid bytes
 * count as complete (they pass through, one byte each). */
size_t eng_utf8_complete(const char *s, size_t n);
/* 1 if s[0..n) is valid UTF-8 (no overlongs, no surrogates). */
int eng_utf8_valid(const char *s, size_t n);

#endif
