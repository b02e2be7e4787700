/* The tokenizer of a GGUF file: its tokenizer.ggml.* keys checked and
 * turned into an eng_tok_spec for eng_tok_new. */
#include "tok_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- from GGUF ---- */

/* An array key of element type want: 0 with count and data, 1 when
 * absent, or an error naming the key and what it holds instead. */
static int gguf_array(const eng_gguf *g, const char *key, enum eng_gguf_vtype want, uint64_t *count,
                      const void **data, eng_err *e)
{
    int64_t i = eng_gguf_find(g, key);
    if (i < 0)
        return 1;
    enum eng_gguf_vtype vt = eng_gguf_kv_type(g, (uint64_t)i), et = GGUF_VTYPE_COUNT;
    if (vt != GGUF_ARRAY)
        return eng_errf(e, ENG_EFORMAT, "%s: expected array of %s, got %s", key, eng_gguf_vtype_name(want),
                        eng_gguf_vtype_name(vt));
    if (eng_gguf_get_arr(g, key, -1, &et, count, data, e))
        return ENG_EFORMAT;
    if (et != want)
        return eng_errf(e, ENG_EFORMAT, "%s: expected array of %s, got array of %s", key, eng_gguf_vtype_name(want),
                        eng_gguf_vtype_name(et));
    return 0;
}

/* A special token id: absent keeps *id, -1 (or its u32 spelling) means
 * none. Out of range is an error unless lenient, for ids nibble never
 * emits (padding), which some converters write past the vocabulary. */
static int gguf_id(const eng_gguf *g, const char *key, uint32_t n, int lenient, int32_t *id, eng_err *e)
{
    int64_t v;
    int r = eng_gguf_get_i64(g, key, &v, e);
    if (r)
        return r < 0 ? r : 0;
    if (v == -1 || v == (int64_t)UINT32_MAX) {
        *id = -1;
        return 0;
    }
    if (v < 0 || v >= (int64_t)n) {
        if (lenient) {
            *id = -1;
            return 0;
        }
        return eng_errf(e, ENG_EFORMAT, "%s: token id %lld is out of range (the vocabulary has %u tokens)", key,
                        (long long)v, n);
    }
    *id = (int32_t)v;
    return 0;
}

static int gguf_flag(const eng_gguf *g, const char *key, int *v, eng_err *e)
{
    int r = eng_gguf_get_bool(g, key, v, e);
    return r < 0 ? r : 0;
}

/* A per-token array (scores as F32, types as I32; 4 bytes an entry):
 * *out is a new copy of n entries, or NULL when the key is absent. */
static int per_token(const eng_gguf *g, const char *key, enum eng_gguf_vtype vt, uint64_t n, void **out, eng_err *e)
{
    uint64_t cnt = 0;
    const void *data = NULL;
    *out = NULL;
    int r = gguf_array(g, key, vt, &cnt, &data, e);
    if (r)
        return r < 0 ? r : 0;
    if (cnt != n)
        return eng_errf(e, ENG_EFORMAT, "%s: %llu entries for %llu tokens", key, (unsigned long long)cnt,
                        (unsigned long long)n);
    void *v = malloc(n * 4);
    if (!v)
        return eng_errf(e, ENG_ENOMEM, "tokenizer: out of memory");
    for (uint64_t i = 0; i < n; i++) {
        if (vt == GGUF_F32)
            ((float *)v)[i] = (float)eng_gguf_arr_f64(GGUF_F32, data, i);
        else
            ((int32_t *)v)[i] = (int32_t)eng_gguf_arr_i64(GGUF_I32, data, i);
    }
    *out = v;
    return 0;
}

/* Byte-level BPE's merges (required). */
static int bpe_merges(const eng_gguf *g, eng_tok_spec *s, eng_err *e)
{
    uint64_t cnt = 0, got = 0;
    const void *data = NULL;
    int r = gguf_array(g, "tokenizer.ggml.merges", GGUF_STRING, &cnt, &data, e);
    if (r < 0)
        return r;
    if (r == 1)
        return eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.merges: missing (a 'gpt2' tokenizer needs its merges)");
    if (cnt >= INT32_MAX)
        return eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.merges: too many entries");
    s->merges = eng_gguf_arr_strs(g, "tokenizer.ggml.merges", &got);
    if (cnt && (!s->merges || got != cnt))
        return eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.merges: not a string array");
    s->n_merges = (uint32_t)cnt;
    return 0;
}

/* tokenizer.ggml.pre as a C string in name[65] ("default" if absent). */
static int pre_name(const eng_gguf *g, char name[65], eng_err *e)
{
    eng_str pre = {NULL, 0};
    int r = eng_gguf_get_str(g, "tokenizer.ggml.pre", &pre, e);
    if (r < 0)
        return r;
    strcpy(name, "default");
    if (r == 1)
        return 0;
    if (pre.len > 64)
        return eng_errf(e, ENG_EUNSUP, "tokenizer.ggml.pre: pre-tokenizer name too long");
    if (pre.len && memchr(pre.ptr, 0, pre.len))
        return eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.pre: name contains a NUL byte");
    memcpy(name, pre.ptr, pre.len);
    name[pre.len] = 0;
    return 0;
}

/* The special ids and flags: llama.cpp's defaults for what the file
 * leaves out, then the file's keys. SentencePiece vocabularies put <unk>
 * <s> </s> first and want BOS and a leading space; byte-level ones want
 * neither, except Llama 3's family (ignore_merges). *eom: the
 * end-of-message id, or -1. */
static int special_ids(const eng_gguf *g, eng_tok_spec *s, int ignore_merges, int32_t *eom, eng_err *e)
{
    int r;
    s->bos = s->eos = s->unk = s->pad = s->eot = -1;
    *eom = -1;
    if (s->kind == ENG_TOK_SPM) {
        if (s->n_vocab > 2)
            s->unk = 0, s->bos = 1, s->eos = 2;
        s->add_bos = 1;
        s->add_space_prefix = 1;
    } else {
        s->add_bos = ignore_merges;
    }
    if ((r = gguf_id(g, "tokenizer.ggml.bos_token_id", s->n_vocab, 0, &s->bos, e)) ||
        (r = gguf_id(g, "tokenizer.ggml.eos_token_id", s->n_vocab, 0, &s->eos, e)) ||
        (r = gguf_id(g, "tokenizer.ggml.unknown_token_id", s->n_vocab, 0, &s->unk, e)) ||
        (r = gguf_id(g, "tokenizer.ggml.eot_token_id", s->n_vocab, 0, &s->eot, e)) ||
        (r = gguf_id(g, "tokenizer.ggml.eom_token_id", s->n_vocab, 0, eom, e)) ||
        (r = gguf_id(g, "tokenizer.ggml.padding_token_id", s->n_vocab, 1, &s->pad, e)) ||
        (r = gguf_flag(g, "tokenizer.ggml.add_bos_token", &s->add_bos, e)) ||
        (r = gguf_flag(g, "tokenizer.ggml.add_eos_token", &s->add_eos, e)) ||
        (r = gguf_flag(g, "tokenizer.ggml.add_space_prefix", &s->add_space_prefix, e)))
        return r;
    return 0;
}

int eng_tok_from_gguf(const eng_gguf *g, eng_tok **out, eng_err *e)
{
    if (!out)
        return eng_errf(e, ENG_EINVAL, "tokenizer: no output pointer");
    *out = NULL;
    if (!g)
        return eng_errf(e, ENG_EINVAL, "tokenizer: no GGUF");
    eng_tok_spec s;
    memset(&s, 0, sizeof s);
    eng_str model;
    int r = eng_gguf_get_str(g, "tokenizer.ggml.model", &model, e);
    if (r < 0)
        return r;
    if (r == 1)
        return eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.model: missing (the file has no tokenizer)");
    if (model.len == 5 && memcmp(model.ptr, "llama", 5) == 0)
        s.kind = ENG_TOK_SPM;
    else if (model.len == 4 && memcmp(model.ptr, "gpt2", 4) == 0)
        s.kind = ENG_TOK_BPE;
    else
        return eng_errf(e, ENG_EUNSUP, "tokenizer.ggml.model: '%.*s' is not supported (only 'llama' and 'gpt2')",
                        (int)(model.len > 64 ? 64 : model.len), model.ptr);

    uint64_t n = 0;
    const void *data = NULL;
    r = gguf_array(g, "tokenizer.ggml.tokens", GGUF_STRING, &n, &data, e);
    if (r < 0)
        return r;
    if (r == 1)
        return eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.tokens: missing");
    if (n == 0 || n >= INT32_MAX)
        return eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.tokens: %llu tokens is not a usable vocabulary",
                        (unsigned long long)n);
    s.n_vocab = (uint32_t)n;

    void *scores = NULL, *types = NULL;
    uint64_t got = 0;
    s.tokens = eng_gguf_arr_strs(g, "tokenizer.ggml.tokens", &got);
    if (!s.tokens || got != n)
        return eng_errf(e, ENG_EFORMAT, "tokenizer.ggml.tokens: not a string array");
    char pre[65];
    int ignore_merges = 0;
    int32_t eom;
    if ((r = per_token(g, "tokenizer.ggml.scores", GGUF_F32, n, &scores, e)) ||
        (r = per_token(g, "tokenizer.ggml.token_type", GGUF_I32, n, &types, e)) ||
        (s.kind == ENG_TOK_BPE && (r = bpe_merges(g, &s, e))) || (r = pre_name(g, pre, e)))
        goto done;
    s.scores = scores;
    s.types = types;
    if (s.kind == ENG_TOK_BPE) {
        s.pre = pre;
        eng_uni_pretok_lookup(pre, strlen(pre), &ignore_merges);
    }
    if ((r = special_ids(g, &s, ignore_merges, &eom, e)))
        goto done;
    r = eng_tok_new(&s, out, e);
    if (!r && eom >= 0)
        (*out)->attr[eom] |= TT_EOG;
done:
    free(scores);
    free(types);
    return r;
}
