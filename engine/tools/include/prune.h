/* Structured pruning: whole attention heads (a KV group at a time, so a
 * grouped-query layer stays a valid GQA layout) and whole FFN neurons
 * are removed from a GGUF model, and the tensors are written smaller, so
 * the saved work is real at run time.
 *
 * Scores (the method of each is chosen in the options):
 *   - a KV group, ranked over all layers with a per-layer cap, summed
 *     over its query heads h:
 *       vnorm (default): mean |attention output of h| on calibration text
 *         (run through nibble's own forward pass, seen by the matmul
 *         observer at the output projection) x ||W_o columns of h||;
 *       weight: ||W_v rows of the group|| x ||W_o columns of h||, from the
 *         weights alone (no calibration);
 *   - a neuron, ranked within its layer (early layers have smaller norms:
 *     a global ranking would empty them):
 *       wprod (default): ||gate row|| * ||up row|| * ||down column|| (the
 *         weight product; rarely firing neurons with large weights keep
 *         their rank);
 *       act: mean |activation| (the down projection's input) on
 *         calibration text.
 * The graph guard: embedding -> KV groups of layer 0 -> MLP 0 -> KV
 * groups of layer 1 -> ... -> output, each edge weighted by its target's
 * score; PageRank over it, and the best-ranked share of the groups is
 * never removed.
 *
 * The output keeps the input's types (float input only: columns are cut
 * out of the output projection and the down projection). Per-layer head
 * counts, KV head counts and FFN sizes are written as arrays; llama
 * models are written as llama.cpp's `deci` architecture, which reads
 * them per layer (docs/PRUNING.md). nibble.prune.* keys record what was
 * removed. */
#ifndef NIBBLE_ENG_PRUNE_H
#define NIBBLE_ENG_PRUNE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

enum eng_prune_protect { ENG_PRUNE_PROTECT_PAGERANK, ENG_PRUNE_PROTECT_NONE };
enum eng_prune_kind { ENG_PRUNE_KIND_HEADS, ENG_PRUNE_KIND_NEURONS };
enum eng_prune_head_method { ENG_PRUNE_HEADS_VNORM, ENG_PRUNE_HEADS_WEIGHT };
enum eng_prune_neuron_method { ENG_PRUNE_NEURONS_WPROD, ENG_PRUNE_NEURONS_ACT };

typedef struct eng_prune_opts {
    double heads;          /* share of all KV groups to remove, 0..1 */
    double neurons;        /* share of each layer's FFN neurons to remove, 0..1 */
    double max_per_layer;  /* most of one layer's groups or neurons removed (0: 0.75); one of each always stays */
    int protect;           /* enum eng_prune_protect */
    double protect_share;  /* share of the groups the guard keeps (0: 0.1) */
    int head_method;       /* enum eng_prune_head_method */
    int neuron_method;     /* enum eng_prune_neuron_method */
    const char *calib_path;/* calibration text (needed by vnorm heads, act neurons), or: */
    const char *calib_text;/* the text itself, calib_len bytes */
    size_t calib_len;
    uint32_t calib_tokens; /* 0: 2048 */
    uint32_t n_ctx;        /* calibration window (0: 128) */
    int threads;
    void (*progress)(void *user, double frac, const char *what); /* optional */
    void *user;
} eng_prune_opts;

typedef struct eng_prune_report {
    char arch_in[32], arch_out[32];
    uint32_t n_layers;
    uint32_t groups_before, groups_after; /* KV groups, all layers */
    uint32_t heads_before, heads_after;   /* query heads */
    uint64_t ffn_before, ffn_after;       /* neurons */
    uint64_t params_before, params_after;
    uint32_t n_protected;                 /* groups the guard kept */
    uint32_t groups_short;                /* groups asked for but not removable (cap, guard) */
} eng_prune_report;

/* Prune in_path into out_path (through a temporary file). Errors: the
 * input cannot be read or is not a llama/deci/qwen2/qwen3 model, a
 * projection to cut is quantized, a chosen score needs calibration text
 * and there is none (or it is too short), an unknown method, the output
 * cannot be written, out of memory. */
int eng_prune_file(const char *in_path, const char *out_path, const eng_prune_opts *o, eng_prune_report *rep,
                   eng_err *e);

/* A method by its name ("vnorm", "weight", "wprod", "act"): its kind
 * (enum eng_prune_kind) and value; ENG_EINVAL if unknown. */
int eng_prune_method_find(const char *name, int *kind, int *method);
/* The name of a kind's method, NULL if there is none. */
const char *eng_prune_method_name(int kind, int method);

/* PageRank by power iteration: n nodes, n_edges edges src[i] -> dst[i]
 * of weight w[i] >= 0 (NULL: all 1); a node's rank flows to its targets
 * in proportion to the weights; nodes without outgoing weight spread
 * theirs over all nodes; (1 - damping) / n is the teleport share.
 * Iterates until the L1 change is below tol or max_iter. rank gets n
 * values summing to 1; returns the iterations used, or a negative error
 * (bad edge, out of memory). */
int eng_pagerank(uint32_t n, const uint32_t *src, const uint32_t *dst, const double *w, size_t n_edges,
                 double damping, double tol, int max_iter, double *rank);

#endif
