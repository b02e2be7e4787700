/* libFuzzer target for both tokenizers. The first byte picks the
 * tokenizer (SentencePiece or byte-level BPE with one of its
 * pre-tokenizers) and the flags; the rest is the text. Whatever the bytes:
 * encoding succeeds, the count it reports is exact, every id is inside the
 * vocabulary, text parsed without special tokens never yields a control
 * token, and decoding the ids gives the text back (BPE: any bytes, since
 * every byte has a token; SentencePiece: valid UTF-8, less the leading
 * space it adds and the U+2581 it uses for spaces). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_vocab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const uint8_t *text, size_t n)
{
    fprintf(stderr, "fuzz_tokenizer: %s (text of %zu bytes:", what, n);
    for (size_t i = 0; i < n && i < 64; i++)
        fprintf(stderr, " %02x", text[i]);
    fprintf(stderr, ")\n");
    abort();
}

static int has_sp(const char *s, size_t n) /* U+2581, SentencePiece's space */
{
    for (size_t i = 0; i + 3 <= n; i++)
        if (!memcmp(s + i, "\xe2\x96\x81", 3))
            return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    fz_vocab *v = fz_vocab_get();
    unsigned sel = data[0];
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    int use_spm = (sel & 7) == 7;
    eng_tok *t = use_spm ? v->spm : v->bpe[(sel & 7) % FZ_NPRE];
    int add_bos = (sel >> 3) & 1, special = (sel >> 4) & 1;

    int need = eng_tok_encode(t, text, n, add_bos, special, NULL, 0);
    if (need < 0)
        fail("encode refused its input", data + 1, n);
    int32_t *ids = malloc(((size_t)need + 1) * sizeof *ids);
    if (!ids)
        return 0;
    int got = eng_tok_encode(t, text, n, add_bos, special, ids, (size_t)need + 1);
    if (got != need)
        fail("second encode gave another count", data + 1, n);
    uint32_t nv = eng_tok_n_vocab(t);
    for (int i = 0; i < got; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= nv)
            fail("id outside the vocabulary", data + 1, n);
        if (!use_spm && !special && ids[i] >= v->bpe_first_control)
            fail("control token from text parsed without specials", data + 1, n);
    }

    /* decode; skip the BOS the encoder may have put first */
    size_t cap = n * 4 + 64, len = 0;
    char *out = malloc(cap);
    if (!out) {
        free(ids);
        return 0;
    }
    for (int i = 0; i < got; i++) {
        size_t k = eng_tok_piece(t, ids[i], 0, NULL, 0);
        if (len + k > cap)
            fail("decoded text much longer than the input", data + 1, n);
        size_t k2 = eng_tok_piece(t, ids[i], 0, out + len, cap - len);
        if (k2 != k)
            fail("piece length differs between calls", data + 1, n);
        len += k;
    }

    if (!special) {
        if (!use_spm) {
            if (len != n || memcmp(out, text, n))
                fail("BPE round trip changed the text", data + 1, n);
        } else if (fz_valid_utf8(text, n) && !has_sp(text, n)) {
            const char *o = out;
            size_t ol = len;
            if (ol == n + 1 && o[0] == ' ') { /* the space prefix SentencePiece adds */
                o++;
                ol--;
            }
            if (ol != n || memcmp(o, text, n))
                fail("SentencePiece round trip changed the text", data + 1, n);
        }
    }
    free(out);
    free(ids);
    return 0;
}
