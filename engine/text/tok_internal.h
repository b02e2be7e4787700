/* Private to engine/text's tokenizer: the vocabulary (pieces, their
 * hash maps, the special-token trie) built by tok_vocab.c and read by the
 * encoder (tok_encode.c) and the GGUF loader (tok_gguf.c). */
#ifndef NIBBLE_ENG_TOK_INTERNAL_H
#define NIBBLE_ENG_TOK_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "tokenizer.h"
#include "unicode.h"

#define TT_MASK 0x07 /* attr bits holding enum eng_tok_type */
#define TT_EOG 0x80  /* attr bit: generation stops at this token */
#define TT_SHOW 0x40 /* attr bit: a control token whose text a reply shows (harmony's tags) */

/* Longest text the encoder takes in one call: the SentencePiece path
 * triples the text when it writes spaces as U+2581, and offsets are 32
 * bits. */
#define MAX_TEXT ((size_t)INT32_MAX / 4)

typedef struct text_slot {
    int32_t id;   /* piece id, -1 when empty */
    uint32_t tag; /* high half of the hash, to skip most memcmp calls */
} text_slot;

typedef struct merge_slot {
    uint64_t key;   /* left piece << 32 | right piece */
    int32_t rank;   /* line in the merges list, -1 when empty */
    int32_t result; /* piece of the merged text, -1 if it is none */
} merge_slot;

/* Special-token trie: node 0 is the root, whose children are found by
 * byte in root[]; deeper children are sibling lists (0 ends a list, as
 * the root is nobody's child). */
typedef struct trie_node {
    uint32_t child, sibling;
    int32_t tok; /* token whose text ends here, or -1 */
    uint8_t byte;
} trie_node;

struct eng_tok {
    enum eng_tok_kind kind;
    enum eng_pretok pre;
    int ignore_merges;
    uint32_t n_vocab;  /* ids 0..n_vocab-1 are tokens */
    uint32_t n_pieces; /* n_vocab, then merge parts that are not tokens */
    uint32_t cap_pieces;
    char *blob; /* piece texts back to back */
    size_t blob_len, blob_cap;
    size_t *off; /* piece i is blob[off[i] .. off[i + 1]) */
    float *scores;
    uint8_t *attr; /* token type | TT_EOG, per token */

    text_slot *map;
    size_t map_mask, map_used;
    merge_slot *merges;
    size_t merge_mask;

    /* SentencePiece: the <0xNN> token of each byte. Byte-level: the piece
     * of each byte's mapped character. -1 where there is none. */
    int32_t byte_tok[256];

    trie_node *trie;
    uint32_t n_trie;
    uint32_t root[256];
    int has_user; /* user-defined tokens exist: the trie runs on every text */

    /* SentencePiece: a bit set of character pairs that occur next to
     * each other inside some token (hashed, so it may say yes wrongly,
     * never no). Where two characters of the text form no such pair, no
     * merge can join them, so the text is merged in independent chunks:
     * same result, small heaps. */
    uint64_t *joins;
    size_t joins_mask;

    /* Byte-level: the tokens of U+FFFD, written for a byte that no token
     * stands for (bytes UTF-8 never uses are often left out). */
    int32_t repl[4];
    int n_repl;

    int32_t bos, eos, unk, pad, eot;
    int add_bos, add_eos, add_space_prefix;
};

/* A character as the join set sees it: the code point, or past U+10FFFF
 * for a byte that is not UTF-8. */
static inline uint32_t char_key(const unsigned char *s, size_t n, size_t *len)
{
    int32_t cp;
    *len = eng_uni_next(s, n, &cp);
    return cp >= 0 ? (uint32_t)cp : 0x110000u + s[0];
}

/* ---- hashing ---- */

static inline uint64_t mix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static inline uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return mix64(h ^ n);
}

static inline const char *piece_ptr(const eng_tok *t, int32_t id) { return t->blob + t->off[id]; }
static inline size_t piece_len(const eng_tok *t, int32_t id) { return t->off[id + 1] - t->off[id]; }

static inline int same_text(const eng_tok *t, int32_t id, const char *s, size_t n)
{
    return piece_len(t, id) == n && (n == 0 || memcmp(piece_ptr(t, id), s, n) == 0);
}

/* Slot holding text s, or the empty slot where it would go. */
static inline text_slot *map_slot(const eng_tok *t, const char *s, size_t n, uint64_t h)
{
    uint32_t tag = (uint32_t)(h >> 32);
    for (size_t i = (size_t)h & t->map_mask;; i = (i + 1) & t->map_mask) {
        text_slot *sl = &t->map[i];
        if (sl->id < 0 || (sl->tag == tag && same_text(t, sl->id, s, n)))
            return sl;
    }
}

static inline int32_t map_find(const eng_tok *t, const char *s, size_t n)
{
    return map_slot(t, s, n, hash_bytes(s, n))->id;
}

static inline merge_slot *merge_find(const eng_tok *t, uint64_t key)
{
    for (size_t i = (size_t)mix64(key) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        merge_slot *sl = &t->merges[i];
        if (sl->rank < 0 || sl->key == key)
            return sl;
    }
}

static inline uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t)(uint32_t)a << 32 | (uint32_t)b; }

/* The join set (see struct eng_tok): may a and b be neighbours inside a token? */
static inline size_t join_bit(const eng_tok *t, uint32_t a, uint32_t b)
{
    return (size_t)mix64((uint64_t)a << 32 | b) & t->joins_mask;
}

static inline int joinable(const eng_tok *t, uint32_t a, uint32_t b)
{
    size_t bit = join_bit(t, a, b);
    return (t->joins[bit / 64] >> (bit % 64)) & 1;
}

/* Byte-level: find the tokens of U+FFFD for bytes without one
 * (tok_encode.c, as it runs the encoder). */
int tok_set_replacement(eng_tok *t);

#endif
