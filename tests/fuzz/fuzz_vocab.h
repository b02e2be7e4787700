/* Tokenizers the fuzz targets share, built once per process:
 *   - the SentencePiece vocabulary of the embedded model (assets/,
 *     512 pieces with byte fallback), read from its GGUF;
 *   - a small byte-level BPE vocabulary made here: the 256 GPT-2 byte
 *     characters, a few dozen merges (ASCII pairs, a space before a
 *     letter, one two-byte character), two user-defined words and the
 *     ChatML / GPT-2 control tokens; one tokenizer per pre-tokenizer.
 * The byte tokens make every input encodable, so the BPE round trip
 * holds for any bytes; SentencePiece's holds for valid UTF-8. */
#ifndef NIBBLE_FUZZ_VOCAB_H
#define NIBBLE_FUZZ_VOCAB_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "tokenizer.h"
#include "unicode.h"

#ifndef NIBBLE_ASSETS_DIR
#define NIBBLE_ASSETS_DIR "assets"
#endif

static const char *const fz_pres[] = {"gpt-2", "llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder",
                                      "falcon", "starcoder", NULL};
#define FZ_NPRE 7

typedef struct fz_vocab {
    eng_tok *spm;
    eng_tok *bpe[FZ_NPRE];
    int32_t bpe_first_control; /* ids >= this in the BPE vocabulary are control tokens */
    uint32_t bpe_n;
} fz_vocab;

static void fz_die(const char *what, const char *msg)
{
    fprintf(stderr, "fuzz setup: %s: %s\n", what, msg);
    abort();
}

/* Text of a string of bytes in the GPT-2 byte map. */
static size_t fz_map(const char *bytes, char *out)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)bytes; *p; p++)
        n += eng_uni_encode(eng_uni_byte_to_cp(*p), out + n);
    out[n] = 0;
    return n;
}

static fz_vocab *fz_vocab_get(void)
{
    static fz_vocab v;
    static int ready;
    if (ready)
        return &v;
    eng_err e = {{0}};

    /* SentencePiece: the embedded model's vocabulary */
    const char *dir = getenv("NIBBLE_ASSETS");
    char path[1024];
    snprintf(path, sizeof path, "%s/stories260K.gguf", dir ? dir : NIBBLE_ASSETS_DIR);
    eng_gguf *g = NULL;
    if (eng_gguf_open(path, &g, &e) != 0)
        fz_die(path, e.msg);
    if (eng_tok_from_gguf(g, &v.spm, &e) != 0)
        fz_die("spm vocabulary", e.msg);
    eng_gguf_close(g);

    /* byte-level BPE made here */
    static const char *const pairs[] = {"t h", "h e", "i n", "e r", "a n", "o n", "r e", "e d", "o u",
                                        "th e", "in g", "an d", "\xc3 \xa9", NULL};
    static const char *const words[] = {"<tool>", NULL}; /* user-defined */
    static const char *const ctrl[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", NULL}; /* control */
    enum { CAP = 512 };
    static char store[CAP][16];
    static eng_str toks[CAP], merges[CAP];
    static int32_t types[CAP];
    static char mstore[CAP][40];
    uint32_t n = 0, nm = 0;
    for (int b = 0; b < 256; b++, n++) {
        char one[2] = {(char)b, 0};
        if (b == 0) { /* fz_map stops at NUL */
            toks[n].len = eng_uni_encode(eng_uni_byte_to_cp(0), store[n]);
        } else
            toks[n].len = fz_map(one, store[n]);
        toks[n].ptr = store[n];
        types[n] = ENG_TT_NORMAL;
    }
    /* merge "a b" -> token "ab", with the space character mapped (Ġ) */
    for (int i = 0; pairs[i]; i++) {
        char l[8], r[8];
        const char *sp = strchr(pairs[i], ' ');
        memcpy(l, pairs[i], (size_t)(sp - pairs[i]));
        l[sp - pairs[i]] = 0;
        strcpy(r, sp + 1);
        char ml[24], mr[24];
        fz_map(l, ml);
        fz_map(r, mr);
        snprintf(mstore[nm], sizeof mstore[nm], "%s %s", ml, mr);
        merges[nm].ptr = mstore[nm];
        merges[nm].len = strlen(mstore[nm]);
        nm++;
        toks[n].len = (size_t)snprintf(store[n], sizeof store[n], "%s%s", ml, mr);
        toks[n].ptr = store[n];
        types[n++] = ENG_TT_NORMAL;
    }
    for (char c = 'a'; c <= 'z'; c++) { /* " x" -> "Ġx" */
        char l[2] = {' ', 0}, r[2] = {c, 0}, ml[8], mr[8];
        fz_map(l, ml);
        fz_map(r, mr);
        snprintf(mstore[nm], sizeof mstore[nm], "%s %s", ml, mr);
        merges[nm].ptr = mstore[nm];
        merges[nm].len = strlen(mstore[nm]);
        nm++;
        toks[n].len = (size_t)snprintf(store[n], sizeof store[n], "%s%s", ml, mr);
        toks[n].ptr = store[n];
        types[n++] = ENG_TT_NORMAL;
    }
    for (int i = 0; words[i]; i++, n++) {
        toks[n].len = fz_map(words[i], store[n]);
        toks[n].ptr = store[n];
        types[n] = ENG_TT_USER_DEFINED;
    }
    v.bpe_first_control = (int32_t)n;
    for (int i = 0; ctrl[i]; i++, n++) {
        toks[n].len = strlen(ctrl[i]);
        memcpy(store[n], ctrl[i], toks[n].len);
        toks[n].ptr = store[n];
        types[n] = ENG_TT_CONTROL;
    }
    v.bpe_n = n;
    for (int p = 0; p < FZ_NPRE; p++) {
        eng_tok_spec s;
        memset(&s, 0, sizeof s);
        s.kind = ENG_TOK_BPE;
        s.pre = fz_pres[p];
        s.n_vocab = n;
        s.tokens = toks;
        s.types = types;
        s.n_merges = nm;
        s.merges = merges;
        s.bos = s.unk = s.pad = -1;
        s.eos = v.bpe_first_control;     /* <|endoftext|> */
        s.eot = v.bpe_first_control + 2; /* <|im_end|> */
        if (eng_tok_new(&s, &v.bpe[p], &e) != 0)
            fz_die(fz_pres[p], e.msg);
    }
    ready = 1;
    return &v;
}

/* 1 if s[0..n) is valid UTF-8 (no overlongs, surrogates or values above
 * U+10FFFF). */
static inline int fz_valid_utf8(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        int32_t cp;
        size_t k = eng_uni_next((const unsigned char *)s + i, n - i, &cp);
        if (cp < 0)
            return 0;
        i += k;
    }
    return 1;
}

#endif
