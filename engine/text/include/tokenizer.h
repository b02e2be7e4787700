/* Tokenizers: SentencePiece-style (GGUF tokenizer.ggml.model = "llama")
 * and byte-level BPE ("gpt2") with each family's pre-tokenizer split
 * rules. Built from a GGUF's tokenizer.* metadata or from explicit arrays
 * (tests build Qwen2 / Llama 3 vocabularies from their JSON files). */
#ifndef NIBBLE_ENG_TOKENIZER_H
#define NIBBLE_ENG_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "gguf.h"

enum eng_tok_kind { ENG_TOK_SPM = 1, ENG_TOK_BPE = 2 };

/* Token types as GGUF stores them (tokenizer.ggml.token_type). */
enum eng_tok_type {
    ENG_TT_NORMAL = 1, ENG_TT_UNKNOWN = 2, ENG_TT_CONTROL = 3,
    ENG_TT_USER_DEFINED = 4, ENG_TT_UNUSED = 5, ENG_TT_BYTE = 6
};

typedef struct eng_tok_spec {
    enum eng_tok_kind kind;
    const char *pre;          /* pre-tokenizer: "default", "gpt-2", "llama-bpe", "qwen2", ... (NULL = default) */
    uint32_t n_vocab;
    const eng_str *tokens;    /* n_vocab token texts (as stored: SPM uses U+2581 for space, BPE the GPT-2 byte map) */
    const float *scores;      /* n_vocab merge scores, or NULL (SPM) */
    const int32_t *types;     /* n_vocab enum eng_tok_type, or NULL (all normal) */
    uint32_t n_merges;
    const eng_str *merges;    /* "a b" pairs in rank order (BPE) */
    int32_t bos, eos, unk, pad, eot; /* -1 where absent */
    int add_bos, add_eos, add_space_prefix;
} eng_tok_spec;

typedef struct eng_tok eng_tok;

/* Build from the tokenizer.* keys of g. Every array is checked (type,
 * length equal to the vocabulary, ids in range); e names the bad key. The
 * tokenizer copies what it needs: g may be closed afterwards. */
int eng_tok_from_gguf(const eng_gguf *g, eng_tok **out, eng_err *e);
int eng_tok_new(const eng_tok_spec *spec, eng_tok **out, eng_err *e);
void eng_tok_free(eng_tok *t);

/* Encode len bytes of UTF-8 text. add_bos: put BOS first if the model
 * wants one (tokenizer.ggml.add_bos_token, default on for SPM and the
 * Llama 3 family), and EOS last if it wants that (add_eos_token).
 * parse_special: recognise control token texts (templates only);
 * user-defined tokens (added words such as DeepSeek's) are always
 * recognised, as the reference tokenizers do. Invalid UTF-8 is encoded as
 * bytes (byte tokens; a byte a byte-level vocabulary has no token for
 * becomes U+FFFD), never rejected. Writes up to cap ids (out may be NULL
 * when cap is 0) and returns how many the text needs (call again with a
 * bigger buffer if that exceeds cap), or a negative code. Thread-safe:
 * t is only read. */
int eng_tok_encode(const eng_tok *t, const char *text, size_t len, int add_bos, int parse_special, int32_t *out,
                   size_t cap);

/* The bytes a token stands for in output text (SPM: U+2581 -> space,
 * <0xNN> -> that byte; BPE: the byte map undone; control, unknown and
 * unused tokens give nothing unless show_special, user-defined ones their
 * text as written; harmony's message tags are shown too, see tok_vocab.c).
 * Writes up to cap bytes (buf may be NULL when cap is
 * 0), returns the full length. */
size_t eng_tok_piece(const eng_tok *t, int32_t id, int show_special, char *buf, size_t cap);
/* The token's text as stored in the vocabulary (for --pieces). */
eng_str eng_tok_text(const eng_tok *t, int32_t id);

uint32_t eng_tok_n_vocab(const eng_tok *t);
int32_t eng_tok_bos(const eng_tok *t);
int32_t eng_tok_eos(const eng_tok *t);
enum eng_tok_kind eng_tok_kind(const eng_tok *t);
/* 1 if generation should stop at id (EOS, EOT and end-of-generation tokens). */
int eng_tok_is_eog(const eng_tok *t, int32_t id);
/* Id of the token whose text is exactly s, or -1. */
int32_t eng_tok_find(const eng_tok *t, const char *s);

#endif
