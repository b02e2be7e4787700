/* Unicode pieces the tokenizers share: UTF-8 decoding that never fails,
 * the character classes pre-tokenizer rules are written in (\p{L}, \p{N},
 * \p{P}, \s; categories from utf8proc), the GPT-2 byte <-> character map,
 * and each model family's pre-tokenizer split rules. Internal to engine/. */
#ifndef NIBBLE_ENG_UNICODE_H
#define NIBBLE_ENG_UNICODE_H

#include <stddef.h>
#include <stdint.h>

enum {
    ENG_UNI_LETTER = 1 << 0,  /* \p{L} */
    ENG_UNI_NUMBER = 1 << 1,  /* \p{N} */
    ENG_UNI_PUNCT = 1 << 2,   /* \p{P} */
    ENG_UNI_SPACE = 1 << 3,   /* \s: the White_Space property */
    ENG_UNI_INVALID = 1 << 4, /* a byte that begins no valid UTF-8 sequence */
    /* GPT-4o's case classes (with the letter bit where they are letters):
     * [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and [\p{Ll}\p{Lm}\p{Lo}\p{M}] */
    ENG_UNI_UPPERISH = 1 << 5,
    ENG_UNI_LOWERISH = 1 << 6,
};

/* One character of decoded text. An invalid byte becomes a character of
 * its own (len 1, class ENG_UNI_INVALID, cp the byte value), so every byte
 * of the text belongs to exactly one character. */
typedef struct eng_uni_char {
    uint32_t cp;
    uint32_t off; /* byte offset in the text */
    uint8_t len;  /* bytes, 1..4 */
    uint8_t cls;  /* ENG_UNI_* */
} eng_uni_char;

/* Decode the sequence at s[0..n), n > 0. Returns its length (1..4) and the
 * code point in *cp, or 1 and -1 in *cp when s[0] starts no valid sequence
 * (truncated, overlong, surrogate, above U+10FFFF, stray continuation). */
size_t eng_uni_next(const unsigned char *s, size_t n, int32_t *cp);
/* Class bits of a code point. */
unsigned eng_uni_class(uint32_t cp);
/* Decode len bytes into out (len entries suffice); returns the count.
 * len must be below 2^32. */
size_t eng_uni_decode(const char *s, size_t len, eng_uni_char *out);
/* Write cp as UTF-8 into buf (4 bytes); returns the length. */
size_t eng_uni_encode(uint32_t cp, char *buf);

/* GPT-2's reversible byte map: printable bytes stand for themselves, the
 * rest move to U+0100.. so that every byte is a visible character. */
uint32_t eng_uni_byte_to_cp(uint8_t b);
/* The byte a mapped character stands for, or -1. */
int eng_uni_cp_to_byte(uint32_t cp);

/* Pre-tokenizer rule sets, by family (tokenizer.ggml.pre). */
enum eng_pretok {
    ENG_PRE_GPT2 = 0,       /* GPT-2's regex */
    ENG_PRE_LLAMA3,         /* Llama 3: case-insensitive contractions, digits by 3 */
    ENG_PRE_QWEN2,          /* Llama 3's rules with one digit a word */
    ENG_PRE_DEEPSEEK_LLM,
    ENG_PRE_DEEPSEEK_CODER,
    ENG_PRE_FALCON,
    ENG_PRE_STARCODER,      /* digits alone, then GPT-2 */
    ENG_PRE_GPT4O,          /* GPT-4o / gpt-oss (o200k): words split by case, digits by 3 */
};

/* The rule set a tokenizer.ggml.pre name selects, or -1 if unknown.
 * NULL (no key) means "default", GPT-2's rules. ignore_merges is set
 * when whole words found in the vocabulary skip merging (Llama 3). */
int eng_uni_pretok_lookup(const char *name, size_t len, int *ignore_merges);

/* Split c[0..n) into words: ends[k] is the index one past the last
 * character of word k (increasing, the last equal to n). ends and scratch
 * each need room for n entries. Returns the word count (0 when n is 0). */
size_t eng_uni_pretok_split(enum eng_pretok kind, const eng_uni_char *c, size_t n, uint32_t *ends,
                            uint32_t *scratch);

#endif
