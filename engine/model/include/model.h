/* Models: a GGUF file mapped and checked for one of the known
 * architectures, and contexts (KV cache + scratch + worker pool) that run
 * the forward pass over it. */
#ifndef NIBBLE_ENG_MODEL_H
#define NIBBLE_ENG_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "gguf.h"
#include "tokenizer.h"

typedef struct eng_model_info {
    char arch[32];         /* general.architecture */
    char name[128];        /* general.name, or the file name */
    uint32_t n_vocab, dim, n_layers, n_heads, n_kv_heads, head_dim, ffn, ctx_train;
    int per_layer;         /* head counts or ffn sizes differ between layers (the fields above are layer 0's) */
    uint32_t rope_dims;    /* rotated dimensions per head */
    int rope_neox;         /* 1: NeoX (halves) layout, 0: adjacent pairs */
    float rope_base, rope_scale, norm_eps;
    int tied_output;       /* output matrix is the token embedding */
    int main_type;         /* weight type of most matrix parameters (enum simd_type) */
    uint64_t n_params, file_size;
    /* mixture of experts (0 for dense models): experts per layer, experts
     * a token runs, rows of one expert's FFN, and the parameters one token
     * uses (n_params less the experts it does not run) */
    uint32_t n_expert, n_expert_used, expert_ffn;
    uint64_t n_active_params;
    /* sliding-window attention: positions a windowed layer's query sees
     * (0: none), and how many of the layers are windowed */
    uint32_t window, n_window_layers;
    float rope_base_swa;   /* the windowed layers' RoPE base where the family gives them their own (gemma3), else rope_base */
    float rope_yarn;       /* YaRN context extension factor (0: none) */
} eng_model_info;

typedef struct eng_model eng_model;

/* Open and check a model. e names the file and what is wrong: missing
 * file, not GGUF, malformed field, unknown architecture, missing or
 * misshapen tensor, weight type without a kernel. */
int eng_model_open(const char *path, eng_model **out, eng_err *e);

/* Options for eng_model_open_opts (zero = eng_model_open's behaviour). */
typedef struct eng_model_opts {
    /* quantize on load: F32/F16/BF16 weight matrices are converted to this
     * type (enum simd_type, one with a reference quantizer) one tensor at
     * a time as they are found, into buffers the model owns; the source
     * pages of each converted tensor are released, so the float model is
     * never resident as a whole. Matrices whose rows do not fit the block
     * stay as they are. 0 (F32): no conversion. */
    int quantize_type;
    /* called on the loading thread as the layers are checked (and, with
     * quantize_type, converted): fraction in (0, 1]; may be NULL */
    void (*progress)(void *user, double fraction);
    void *progress_user;
    /* 1: keep every weight in the file's layout (no packed copy, see
     * eng_model_pack); the default packs where the kernel set gains */
    int no_pack;
} eng_model_opts;
int eng_model_open_opts(const char *path, const eng_model_opts *o, eng_model **out, eng_err *e);
void eng_model_close(eng_model *m);
/* Wait until the background packing started at open is done (weights
 * are usable all along; this is for measurements that want the packed
 * speed). Returns at once when nothing is being packed. */
void eng_model_pack_wait(eng_model *m);
/* Bytes the packed copies hold beyond the file's bytes of the same
 * matrices: iq3_s's grid is decoded at load into 4-bit levels (22% more
 * than its file bytes); every other packed layout is the file's size,
 * and its file pages are let go. 0 when nothing is packed. */
uint64_t eng_model_pack_extra_bytes(const eng_model *m);
/* After a switch of kernel set (simd_kernel_select, between tokens): the
 * packed copies are freed if the new set reads none of them (its decode
 * would read the file, and the model would be resident twice), and made
 * anew, in the background, if it reads them and there are none (unless
 * the model was opened with no_pack). */
void eng_model_kernel_changed(eng_model *m);
const eng_model_info *eng_model_get_info(const eng_model *m);
const eng_tok *eng_model_tok(const eng_model *m);
const eng_gguf *eng_model_gguf(const eng_model *m);
/* Bytes of the f16 K and V caches for n_ctx positions: as a context keeps
 * them (windowed layers hold only their window and a batch), or, with
 * full, as if every layer kept every position (to show what windows save). */
uint64_t eng_model_kv_bytes(const eng_model *m, uint32_t n_ctx, int full);
/* Bytes one decode step reads: every weight matrix once plus one
 * embedding row (what a bandwidth-bound decode must stream); of a
 * mixture of experts only the experts one token runs (n_expert_used of
 * each layer's). */
uint64_t eng_model_bytes_per_token(const eng_model *m);

/* The types a context's K and V caches store a position's row in
 * (llama.cpp's --cache-type-k/-v names): f16, or ggml's q8_0 / q4_0
 * blocks of 32 values with an f16 scale over the row of n_kv*head_dim
 * values (which must then be a multiple of 32). */
enum eng_kv_type { ENG_KV_F16 = 0, ENG_KV_Q8_0, ENG_KV_Q4_0, ENG_KV_COUNT };
/* "f16", "q8_0", "q4_0"; "?" for anything else. */
const char *eng_kv_type_name(int t);
/* The type named s, or -1 (the names: ENG_KV_TYPE_NAMES). */
int eng_kv_type_parse(const char *s);
#define ENG_KV_TYPE_NAMES "f16, q8_0, q4_0"
/* 1 where attention with these cache types (enum eng_kv_type) takes its
 * scores as int8 dot products of the cache's blocks against int8 queries
 * (both caches quantized, a head whole blocks of 32), 0 where it takes
 * them on floats (the cache's rows converted to halves' values). */
int eng_kv_int8_scores(uint32_t head_dim, int type_k, int type_v);
/* eng_model_kv_bytes with the K and V caches in these types (enum
 * eng_kv_type); 0 if a type does not fit a layer's rows. */
uint64_t eng_model_kv_bytes_typed(const eng_model *m, uint32_t n_ctx, int full, int type_k, int type_v);

typedef struct eng_ctx eng_ctx;

/* A context of n_ctx positions (0: the model's training length, capped at
 * 4096) with n_threads workers (0: physical cores), f16 caches. */
int eng_ctx_new(eng_model *m, uint32_t n_ctx, int n_threads, eng_ctx **out, eng_err *e);
/* eng_ctx_new's arguments, and the cache types (zero: eng_ctx_new). */
typedef struct eng_ctx_opts {
    uint32_t n_ctx;
    int n_threads;
    int type_k, type_v; /* enum eng_kv_type */
    /* A batch's per-token pieces between the matrix products (norms, rope
     * and the cache stores, the FFN's activation, the residual adds, the
     * products' int8 activation rows) are
     * split over the threads from this many floats of a piece on (0: the
     * engine's choice, 16384). The split changes no bit; tests set 1 to
     * take it on their small models. */
    uint32_t split_floats;
    /* Tokens one forward pass takes at once, 1..128 (0: 128). Each weight
     * row is read once per batch. Where the batches fall moves the logits
     * by the attention tile's rounding only (a batch's fully seen chunks
     * take the tile, the rest the chunk path: the same bounds as a batch
     * against token by token). Tests set a small batch to cross batch
     * boundaries with short sequences. */
    uint32_t n_batch;
} eng_ctx_opts;
/* eng_ctx_new with options. A quantized type where a layer's K/V row
 * (n_kv heads x head_dim) is not a multiple of 32 values, or a type out
 * of range, is ENG_EINVAL with a message naming the width. Quantized
 * rows are dequantized (exactly, then rounded to f16 once) a chunk at a
 * time as attention reads them, so every kernel set gives the same bits,
 * and a batch the bits of its tokens one by one, as with f16. */
int eng_ctx_new_opts(eng_model *m, const eng_ctx_opts *o, eng_ctx **out, eng_err *e);
/* The type of the K (v = 0) or V (v = 1) cache. */
int eng_ctx_kv_type(const eng_ctx *c, int v);
void eng_ctx_free(eng_ctx *c);
uint32_t eng_ctx_size(const eng_ctx *c);
/* Positions already in the KV cache. */
uint32_t eng_ctx_pos(const eng_ctx *c);
/* Forget positions >= pos (pos <= eng_ctx_pos) and return the position
 * the context now continues from: pos, or 0 where a sliding-window layer
 * has already overwritten keys that the positions from pos on would see
 * (going back further than about a batch past its window); the caller
 * then evaluates the tokens before pos again. */
uint32_t eng_ctx_truncate(eng_ctx *c, uint32_t pos);
int eng_ctx_set_threads(eng_ctx *c, int n_threads);
int eng_ctx_threads(const eng_ctx *c);
/* Run c's forward passes on owner's worker pool (borrowed: owner must
 * outlive c's use of it) instead of c's own, which is freed; for a
 * draft model's context that takes turns with its target's on one
 * thread. eng_ctx_set_threads on the owner replaces its pool: share
 * again before c's next eval. eng_ctx_set_threads on c gives it its own
 * pool again. 0, or ENG_ENOMEM. */
int eng_ctx_share_pool(eng_ctx *c, eng_ctx *owner);
/* Bytes of the K and V caches of this context (allocated; pages become
 * resident as positions fill): eng_model_kv_bytes_typed(m, n_ctx, 0,
 * its types). */
size_t eng_ctx_kv_bytes(const eng_ctx *c);

/* Run n tokens at the next n positions. If logits is not NULL, write the
 * last token's n_vocab logits there; if all_logits, write every token's
 * (n * n_vocab floats). The prompt runs in batches, each weight read once
 * per batch. Fails (nothing changed) if the tokens do not fit or an id is
 * out of range. A caller that must stay responsive (the engine thread)
 * passes the prompt in pieces and checks for STOP between them. */
int eng_ctx_eval(eng_ctx *c, const int32_t *tokens, uint32_t n, float *logits, int all_logits, eng_err *e);

#endif
