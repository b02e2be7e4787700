/* The forward pass of the decoder families: pre-norm blocks (RMSNorm, or
 * LayerNorm with bias for gpt2), RoPE (or learned positions for gpt2),
 * grouped-query attention over a KV cache of f16 (or q8_0/q4_0) rows,
 * SwiGLU (or GELU for gpt2, gated GELU for gemma3). Head counts and FFN
 * sizes may differ per layer. What a family adds comes in as hooks on
 * the model (embedding scale, post-norms, attention scale, sliding
 * windows with their own RoPE, logit soft-cap), not as a copy of the pass.
 *
 * Sliding-window layers keep a ring of kv_slots positions, a multiple of
 * SIMD_ATTN_CHUNK of at least window + BATCH - 1 (a batch writes its
 * keys before its first token reads the window behind it): position p
 * lives in slot p % slots, so each attention chunk (positions 64c ..
 * 64c+63) is contiguous in the ring and is cut exactly as in a full
 * layer, only starting at the window's first position.
 *
 * Tokens run in batches of up to BATCH: every matmul reads each weight row
 * once per batch (dot_batch), so a prompt costs weight bandwidth once per
 * BATCH tokens, and decode is the same code with a batch of one. Only the
 * rows whose logits are wanted go through the output matrix. Nothing is
 * allocated per token. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "pool.h"
#include "sys.h"

/* The most tokens one forward pass takes at once (eng_ctx_opts.n_batch,
 * the default): every weight row is read once per batch, and each piece
 * between the products is one pool job per batch. 32 left a prompt's time
 * to streaming the weights on the larger shapes (qwen05 q8_0 pp512 at one
 * thread: 400 tok/s at 32, 520 at 128); 512 took llama1b past the bench's
 * memory budget for about 60 MB of scratch. */
#define BATCH 128u
/* Below this many weight bytes (times tokens) a matmul runs on the calling
 * thread alone: waking and joining the workers costs a few microseconds. */
#define SMALL_MATMUL_BYTES (192u * 1024u)
/* The least weight bytes a thread takes at once from a shared matmul. */
#define MM_CHUNK_BYTES (64u * 1024u)

typedef struct mm_part mm_part;

struct eng_ctx {
    eng_model *m;
    uint32_t n_ctx, pos;
    eng_pool *pool;
    int pool_borrowed;     /* pool is another context's (eng_ctx_share_pool): not freed here */
    uint32_t split_floats; /* a batch's per-token pieces go to the pool from this many floats (tok_run) */
    uint32_t batch;        /* tokens a forward pass takes at once, <= BATCH (the scratch below is for that many) */
    /* per layer l: K in kv_type[0] at kc + kv_off[0][l] bytes, V in
     * kv_type[1] at vc + kv_off[1][l]; with kv_heads: for each kv head
     * [kv_slots[l]] rows of head_dim values, else [kv_slots[l]] rows of
     * n_kv(l)*head_dim values (kv_row) */
    unsigned char *kc, *vc;
    int kv_heads;          /* each kv head's rows contiguous: f16, or a head of whole blocks */
    int kt;                /* K is f16 with kv_heads: kept transposed chunk by chunk (kv_kt) */
    size_t *kv_off[2];     /* [n_layers] each */
    int kv_type[2];        /* enum eng_kv_type */
    size_t kvq_floats;     /* 0 for f16 caches; else the floats at the end of each thread's
                            * scores that hold one chunk of a kv head's K and V as halves
                            * (or, with kv_int8, simd_attn_q_tile's buffer) */
    int kv_int8;           /* K and V both q8_0/q4_0 and the head size a multiple of 32:
                            * attention reads the blocks (simd_attn_q_tile) */
    simd_block_q8a *qq;    /* with kv_int8: [batch][n_heads*hd/32] the queries quantized */
    uint32_t *kv_slots;    /* [n_layers]: n_ctx, or the ring of a windowed layer */
    uint32_t high;         /* highest position written + 1 since the cache was last emptied */
    float *x, *xb, *xb2;   /* [batch][dim] */
    float *q, *k, *v;      /* [batch][n_heads*hd], [batch][n_kv*hd] x2 */
    float *att;            /* [batch][n_heads*hd] attention output */
    float *hb, *hb2;       /* [batch][ffn] */
    float *scores;         /* [threads][scores_per_thread]: scratch and chunk rows of a task */
    size_t scores_per_thread;
    uint32_t grp_max;      /* most query heads sharing a kv head, over layers */
    size_t nch_max;        /* attention chunks in n_ctx positions */
    float *apart;          /* [n_heads][nch_max][head_dim+2]: chunk rows of one token, split over threads */
    atomic_uint *kv_left;  /* [n_kv_heads]: a decode step's chunks of each kv head not yet done */
    int scores_threads;
    void *act;             /* [batch] activation rows, q8 format */
    void *act_k;           /* [batch] activation rows, q8k format (K-quant weights) */
    eng_mm_observer obs;   /* optional: sees every matmul's input (AWQ statistics) */
    eng_expert_observer eobs; /* optional: sees each expert's input rows (importance matrices) */
    void *eobs_user;
    void *obs_user;
    double *inv_freq;      /* [2][rope_dims/2] angle per position: global layers (scaling
                            * included), then windowed ones (rope_local: own base, unscaled) */
    float rope_mscale;     /* the global table's cos and sin are multiplied by it (YaRN) */
    float *rcos, *rsin;    /* [2][batch][rope_dims/2], the same two */
    void *embrow;          /* one embedding row, taken out of a packed output matrix */
    /* mixture of experts (NULL for dense models); k = experts a token
     * runs, rows g = 0 .. nt*k-1 are the batch's (token, expert) pairs
     * grouped by expert */
    float *rlog;           /* [batch][n_expert] router logits */
    int32_t *sel;          /* [batch][k] experts of each token */
    float *selw;           /* [batch][k] their weights */
    uint32_t *gidx;        /* [batch][k] row g of each (token, slot) */
    uint32_t *gtok, *gexp; /* [batch*k] token and expert of row g */
    uint32_t *ecount, *estart; /* [n_expert] rows of each expert, first row */
    float *xe, *ye;        /* [batch*k][dim] expert inputs and outputs */
    float *he, *he2;       /* [batch*k][expert_ffn] gate and up */
    void *eact, *eact_k;   /* [batch*k] activation rows, q8 and q8k formats */
    mm_part *eparts;       /* [2*n_expert] */
    eng_weight *eview;     /* [2*n_expert] one expert's rows of a layer's expert matrices */
};

/* ---- matmul: up to three weights sharing one input, split by rows ---- */

struct mm_part {
    const eng_weight *w;
    const void *act;
    size_t astride;
    float *out;   /* out[t * ostride + row] */
    size_t ostride;
    uint32_t nt;  /* activation rows (tokens) this part multiplies */
    simd_dot_packed_fn dot_packed; /* set when w's packed rows are used */
    size_t gbytes;                 /* bytes per packed group */
    uint32_t packed_rows;          /* w's packed rows when the job began */
};

/* The parts of one pool run: up to three weights sharing an input (a
 * dense layer), or the selected experts' matrices, each with its own
 * tokens (a mixture of experts). */
typedef struct mm_job {
    mm_part *p;
    int np;
    uint32_t total;     /* rows of all parts */
    uint64_t cost;      /* weight bytes times tokens, over all parts */
    uint64_t bytes;     /* weight bytes of all parts */
} mm_job;

static uint64_t part_cost(const mm_part *p) { return (uint64_t)p->w->rows * p->w->row_bytes * p->nt; }

/* A part boundary inside a packed weight moves up to a whole group; every
 * worker moves the same boundary the same way, so the parts still cover
 * each row once. */
static uint32_t group_edge(uint32_t r, uint32_t rows)
{
    uint32_t up = (r + SIMD_PACK_ROWS - 1) / SIMD_PACK_ROWS * SIMD_PACK_ROWS;
    return up < rows ? up : rows;
}

/* The pool cuts a job into ranges of units 0..total-1; unit u begins at
 * this row (counted over the job's weights in order), so that units are
 * equal shares of the weight bytes (times the tokens of each part)
 * rather than rows: a range's time is the time to stream its bytes, and
 * the weights of one job may differ in type (q4_k_m files mix q4_k,
 * q6_k, q5_0 and q8_0) and experts in tokens. */
static uint32_t mm_edge(const mm_job *j, uint32_t u)
{
    if (u >= j->total)
        return j->total;
    uint64_t target = j->cost * (uint64_t)u / (uint64_t)j->total, bbase = 0;
    uint32_t base = 0;
    for (int i = 0; i < j->np; i++) {
        const mm_part *p = &j->p[i];
        uint64_t wb = part_cost(p);
        if (target < bbase + wb)
            return base + (uint32_t)((target - bbase) / (p->w->row_bytes * p->nt));
        bbase += wb;
        base += p->w->rows;
    }
    return j->total;
}

/* Units [u0, u1) of the job. */
static void mm_range(void *arg, uint32_t u0, uint32_t u1)
{
    const mm_job *j = arg;
    uint32_t lo = mm_edge(j, u0), hi = mm_edge(j, u1);
    uint32_t base = 0;
    for (int i = 0; i < j->np; i++) {
        const mm_part *p = &j->p[i];
        const eng_weight *w = p->w;
        uint32_t a = lo > base ? lo - base : 0, b = hi - base < w->rows ? hi - base : w->rows;
        if (hi > base && a < b && p->dot_packed) {
            a = group_edge(a, w->rows);
            b = group_edge(b, w->rows);
            uint32_t end = b < p->packed_rows ? b : p->packed_rows;
            if (a < end) { /* whole groups: the packed rows */
                p->dot_packed(w->cols, (const char *)w->packed + (size_t)(a / SIMD_PACK_ROWS) * p->gbytes,
                              (end - a) / SIMD_PACK_ROWS, p->act, p->astride, p->nt, p->out + a, p->ostride);
                a = end;
            }
        }
        if (hi > base && a < b) {
            /* all of this worker's rows in one call: the kernel shares
             * activation work across them */
            const char *row = (const char *)w->data + (size_t)a * w->row_bytes;
            simd_type_traits(w->type)->dot_rows(w->cols, row, w->row_bytes, b - a, p->act, p->astride, p->nt,
                                                p->out + a, p->ostride);
        }
        base += w->rows;
        if (base >= hi)
            break;
    }
}

/* The packed rows of a part's weight, if the active set reads them (it
 * may have been switched since the model was packed); read once, so
 * every worker splits the same way while packing goes on. */
static void mm_part_packed(mm_part *p)
{
    const eng_weight *w = p->w;
    if (w->packed && (p->dot_packed = simd_type_traits(w->type)->dot_packed)) {
        p->gbytes = simd_pack_group_bytes(w->type, w->cols);
        p->packed_rows = atomic_load_explicit(&w->packed_rows, memory_order_acquire);
    }
}

static void mm_run(eng_ctx *c, mm_job *j);

/* A batch's per-token piece fn over tokens 0..nt-1 (here the activation
 * rows' quantization; below the norms, rope and the cache stores, the
 * FFN's activation, the residual adds), split by tokens over the pool.
 * Below this many floats (c->split_floats, eng_ctx_opts) it runs on the
 * calling thread: waking the workers costs a few microseconds, as much
 * as 64 KiB of floats take. */
#define TOK_PAR_FLOATS 16384u

static void tok_run(eng_ctx *c, uint32_t nt, size_t per_token, eng_pool_range_fn fn, void *arg)
{
    if (nt < 2 || (uint64_t)nt * per_token < c->split_floats || eng_pool_threads(c->pool) < 2)
        fn(arg, 0, nt);
    else
        eng_pool_run_range(c->pool, fn, arg, nt, 1);
}

/* Quantizing a batch's activation rows, split by rows over the pool: a
 * long prompt's rows took one thread a few percent of prefill while the
 * others waited. Each row is quantized alone, so the split changes no
 * byte. */
typedef struct act_job {
    const float *x;
    uint32_t cols;
    int q8, q8k;
    char *act, *act_k;
    size_t qstride, kstride;
} act_job;

static void act_range(void *arg, uint32_t t0, uint32_t t1)
{
    const act_job *j = arg;
    for (uint32_t t = t0; t < t1; t++) {
        if (j->q8)
            simd_act_quant(SIMD_ACT_Q8, j->x + (size_t)t * j->cols, j->act + t * j->qstride, j->cols);
        if (j->q8k)
            simd_act_quant(SIMD_ACT_Q8K, j->x + (size_t)t * j->cols, j->act_k + t * j->kstride, j->cols);
    }
}

/* y_i[t] = W_i x[t] for each weight of the group; x is nt rows of cols
 * floats, quantized here once if any weight wants int8 activations. */
static void matmul(eng_ctx *c, const float *x, uint32_t nt, int np, const eng_weight *const *w, float *const *out)
{
    uint32_t cols = w[0]->cols;
    size_t qstride = simd_act_row_bytes(SIMD_ACT_Q8, cols);
    size_t kstride = simd_act_row_bytes(SIMD_ACT_Q8K, cols);
    int need_q8 = 0, need_q8k = 0;
    if (c->obs)
        c->obs(c->obs_user, w[0], x, nt, cols);
    for (int i = 0; i < np; i++) {
        need_q8 |= w[i]->act == SIMD_ACT_Q8;
        need_q8k |= w[i]->act == SIMD_ACT_Q8K;
    }
    if (need_q8 || need_q8k) {
        act_job aj = {x, cols, need_q8, need_q8k, (char *)c->act, (char *)c->act_k, qstride, kstride};
        tok_run(c, nt, cols, act_range, &aj);
    }
    mm_part parts[3];
    mm_job j = {.p = parts, .np = np};
    for (int i = 0; i < np; i++) {
        int q8 = w[i]->act == SIMD_ACT_Q8, q8k = w[i]->act == SIMD_ACT_Q8K;
        parts[i] = (mm_part){w[i], q8 ? c->act : q8k ? c->act_k : (const void *)x,
                             q8 ? qstride : q8k ? kstride : cols * sizeof(float), out[i], w[i]->rows, nt, NULL, 0, 0};
        mm_part_packed(&parts[i]);
    }
    mm_run(c, &j);
}

/* Run a job whose parts are filled in: on this thread if it is small,
 * else on the pool. */
static void mm_run(eng_ctx *c, mm_job *j)
{
    j->total = 0;
    j->cost = j->bytes = 0;
    for (int i = 0; i < j->np; i++) {
        j->total += j->p[i].w->rows;
        j->cost += part_cost(&j->p[i]);
        j->bytes += (uint64_t)j->p[i].w->rows * j->p[i].w->row_bytes;
    }
    if (!j->total)
        return;
    /* A small product costs less than waking the workers: run it here. */
    if (j->cost < SMALL_MATMUL_BYTES)
        mm_range(j, 0, j->total);
    else
        /* each thread streams one contiguous share of the rows, then
         * helps with what is left of the other's in pieces of at least
         * MM_CHUNK_BYTES: every fresh start costs the kernel its prefetch
         * ramp (about a microsecond), so small interleaved parts cost more
         * than the imbalance they remove (eight equal parts for two
         * threads: 10-15% slower decode of qwen05 q4_0). */
        eng_pool_run_range(c->pool, mm_range, j, j->total,
                           (uint32_t)((uint64_t)MM_CHUNK_BYTES * j->total / j->bytes + 1));
}

static void matmul1(eng_ctx *c, const float *x, uint32_t nt, const eng_weight *w, float *out)
{
    matmul(c, x, nt, 1, &w, &out);
}

/* ---- elementwise pieces ---- */

static void rmsnorm(float *out, const float *x, const float *g, uint32_t n, float eps)
{
    double ss = 0;
    for (uint32_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    float s = (float)(1.0 / sqrt(ss / n + eps));
    for (uint32_t i = 0; i < n; i++)
        out[i] = x[i] * s * g[i];
}

static void layernorm(float *out, const float *x, const float *g, const float *b, uint32_t n, float eps)
{
    double sum = 0, ss = 0;
    for (uint32_t i = 0; i < n; i++)
        sum += x[i];
    float mean = (float)(sum / n);
    for (uint32_t i = 0; i < n; i++)
        ss += (double)(x[i] - mean) * (x[i] - mean);
    float s = (float)(1.0 / sqrt(ss / n + eps));
    for (uint32_t i = 0; i < n; i++)
        out[i] = (x[i] - mean) * s * g[i] + (b ? b[i] : 0.0f);
}

/* ---- a batch's per-token work over the pool ----
 *
 * The pieces between the matrix products (norms, biases, rope and the
 * cache stores, the FFN's activation, the residual adds) were one thread's
 * while the others waited: on smol135 pp512 at one thread they took about
 * 11% of the time. Each runs per token, split by tokens over the pool when
 * the batch is large enough to pay for waking the workers. Every token's
 * values are computed as they were alone, so the split changes no bit. */

typedef struct norm_job {
    const eng_model *m;
    float *out;
    const float *x, *g, *b;
} norm_job;

static void norm_range(void *arg, uint32_t t0, uint32_t t1)
{
    const norm_job *j = arg;
    uint32_t dim = j->m->info.dim;
    for (uint32_t t = t0; t < t1; t++) {
        if (j->m->norm == ENG_NORM_LAYER)
            layernorm(j->out + (size_t)t * dim, j->x + (size_t)t * dim, j->g, j->b, dim, j->m->info.norm_eps);
        else
            rmsnorm(j->out + (size_t)t * dim, j->x + (size_t)t * dim, j->g, dim, j->m->info.norm_eps);
    }
}

/* nt rows of dim: the model's norm kind, with weight g and bias b */
static void norm_rows(eng_ctx *c, float *out, const float *x, uint32_t nt, const float *g, const float *b)
{
    norm_job j = {c->m, out, x, g, b};
    tok_run(c, nt, c->m->info.dim, norm_range, &j);
}

/* Rotate the first rope_dims dims of each of nh heads of size hd. */
static void rope(float *v, uint32_t nh, uint32_t hd, uint32_t rd, int neox, const float *cs, const float *sn)
{
    uint32_t half = rd / 2;
    for (uint32_t h = 0; h < nh; h++) {
        float *x = v + (size_t)h * hd;
        for (uint32_t i = 0; i < half; i++) {
            uint32_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
            float x0 = x[a], x1 = x[b];
            x[a] = x0 * cs[i] - x1 * sn[i];
            x[b] = x0 * sn[i] + x1 * cs[i];
        }
    }
}

/* ---- attention ----
 * The query heads that share a kv head go to simd_attn_tile together, so
 * each cached K and V value is read once for all of them. Positions go in
 * chunks of SIMD_ATTN_CHUNK whose rows simd_attn_merge combines; the
 * result does not depend on which heads or chunks a task was given
 * (simd.h), so how the work is cut changes no bits.
 *
 * One token (decode): one task per kv head, or per (kv head, range of
 * chunks) when that would leave threads idle (att_decode_range).
 * A batch (prefill): one task per (kv head, tile of tokens). A task walks
 * the chunks in order and, for each chunk, runs every token of its tile
 * over it before the next chunk, so a chunk's K and V come from memory
 * once per tile and from L1 for the tile's other tokens (one token at a
 * time, they came from memory once per token: at depth 2048 a batch of
 * 32 read each layer's cache 32 times). Each token keeps its chunk rows
 * until its last chunk and is merged then. The tokens that see a chunk
 * whole go through simd_attn_tile together, the others (the chunk holds
 * their own position, or their window starts inside it) one by one. On
 * an f16 K the scores have the tile's order everywhere (one sum a
 * position, d in order: positions fill the vectors, K kept transposed
 * for it, kv_kt), so a token's bits are the same whether it came in a
 * batch, in a tile of any size, on any thread count or alone in a decode
 * step; a quantized K's halves come as rows, and one token takes
 * simd_attn_chunk's order there (att_one). A tile
 * holds as many tokens as their chunk rows fit in the thread's buffer
 * (ATT_TILE_BYTES). */

/* ---- the cache's rows ----
 * An f16 cache is read where it lies (K transposed chunk by chunk, V as
 * rows). When K and V are both q8_0/q4_0 and
 * a head's values are whole blocks (kv_int8), attention reads the blocks
 * where they lie too (kv_qargs, simd_attn_q_tile): the queries are
 * quantized once per layer (c->qq) and the scores are integer dots. Any
 * other quantized cache (a pair with f16, or a head size that splits a
 * block) is dequantized a chunk of one kv head at a time into the
 * thread's buffer, as halves the f16 kernels read: d * q is exact in
 * float and rounded to f16 once, the same arithmetic wherever it runs.
 * Either way the kernels see the same values for a position whichever
 * path (a token alone, a tile, a split) reads it. */

static int kv_simd_type(int t) { return t == ENG_KV_Q8_0 ? SIMD_Q8_0 : t == ENG_KV_Q4_0 ? SIMD_Q4_0 : SIMD_F16; }

/* Bytes of one position's row of n values (0 if n does not fit the blocks). */
static size_t kv_row_bytes(int t, size_t n)
{
    return t == ENG_KV_F16 ? n * sizeof(simd_f16) : simd_row_bytes(kv_simd_type(t), n);
}

/* Values [off, off + n) of a row r of type t as halves into dst: each
 * block whole through simd_deq_f16_row, then its part of the slice (a
 * head size that splits a block). */
static void kv_deq_slice(int t, const unsigned char *r, size_t off, size_t n, simd_f16 *dst)
{
    if (t == ENG_KV_F16) {
        memcpy(dst, (const simd_f16 *)r + off, n * sizeof *dst);
        return;
    }
    size_t bytes = kv_row_bytes(t, SIMD_QK);
    simd_f16 h[SIMD_QK];
    for (size_t i = off; i < off + n;) {
        size_t b = i / SIMD_QK, j0 = i % SIMD_QK, j1 = off + n - b * SIMD_QK;
        if (j1 > SIMD_QK)
            j1 = SIMD_QK;
        simd_deq_f16_row(kv_simd_type(t), r + b * bytes, SIMD_QK, h);
        memcpy(dst + (i - off), h + j0, (j1 - j0) * sizeof *h);
        i = b * SIMD_QK + j1;
    }
}

/* Where kv head g's values of position slot lie in layer l's K (w = 0)
 * or V (w = 1): the row returned holds them from value *off on, and the
 * next slot's row is *stride bytes on. With kv_heads each head's rows
 * follow one another (off 0): a decode step's attention, one task per kv
 * head, then streams through contiguous memory, where rows of all the
 * heads side by side made each head read hd halves and skip the others'
 * (a stride the prefetchers followed late: the step's attention ran at
 * half its in-cache rate at depth 4096). */
static unsigned char *kv_row(const eng_ctx *c, int w, uint32_t l, uint32_t g, size_t slot, size_t *stride,
                             size_t *off)
{
    size_t hd = c->m->info.head_dim, slots = c->kv_slots[l];
    unsigned char *base = (w ? c->vc : c->kc) + c->kv_off[w][l];
    if (c->kv_heads) {
        *stride = kv_row_bytes(c->kv_type[w], hd);
        *off = 0;
        return base + ((size_t)g * slots + slot) * *stride;
    }
    *stride = kv_row_bytes(c->kv_type[w], (size_t)c->m->layers[l].n_kv_heads * hd);
    *off = (size_t)g * hd;
    return base + slot * *stride;
}

/* With c->kt, K's halves of kv head g in layer l, chunk by chunk: the
 * chunk of slot (its SIMD_ATTN_CHUNK slots, fewer for the last one of a
 * cache whose slots are not whole chunks) as [head_dim][its slots], so
 * simd_attn_tile reads positions along its vectors (a decode step's
 * scores run at 1.7x the rate of rows, nibble_attnbench -g 3 -kv 3).
 * Returns where slot's value 0 lies; value d is d * *kts halves on. The
 * head's chunks follow one another, as its rows did. */
static simd_f16 *kv_kt(const eng_ctx *c, uint32_t l, uint32_t g, size_t slot, size_t *kts)
{
    size_t hd = c->m->info.head_dim, slots = c->kv_slots[l], c0 = slot - slot % SIMD_ATTN_CHUNK;
    *kts = slots - c0 < SIMD_ATTN_CHUNK ? slots - c0 : SIMD_ATTN_CHUNK;
    return (simd_f16 *)(c->kc + c->kv_off[0][l]) + ((size_t)g * slots + c0) * hd + slot % SIMD_ATTN_CHUNK;
}

/* Store position slot's K (v = 0) or V (v = 1) of layer l from n floats
 * (all its kv heads). */
static void kv_store(eng_ctx *c, int v, uint32_t l, size_t slot, const float *x, size_t n)
{
    int t = c->kv_type[v];
    size_t hd = c->m->info.head_dim, stride, off;
    size_t nh = c->kv_heads ? n / hd : 1, len = c->kv_heads ? hd : n;
    if (!v && c->kt) { /* the set's row conversion, 64 halves at a time, then down K's column */
        simd_f16 h[SIMD_ATTN_CHUNK];
        for (size_t g = 0; g < nh; g++) {
            size_t kts;
            simd_f16 *dst = kv_kt(c, l, (uint32_t)g, slot, &kts);
            for (size_t d0 = 0; d0 < hd; d0 += SIMD_ATTN_CHUNK) {
                size_t m = hd - d0 < SIMD_ATTN_CHUNK ? hd - d0 : SIMD_ATTN_CHUNK;
                simd_f32_to_f16_row(x + g * hd + d0, h, m);
                for (size_t i = 0; i < m; i++)
                    dst[(d0 + i) * kts] = h[i];
            }
        }
        return;
    }
    for (size_t g = 0; g < nh; g++) {
        unsigned char *dst = kv_row(c, v, l, (uint32_t)g, slot, &stride, &off);
        if (t == ENG_KV_F16)
            simd_f32_to_f16_row(x + g * len, (simd_f16 *)dst, len);
        else
            simd_type_traits(kv_simd_type(t))->quant(x + g * len, dst, len);
    }
}

/* The K and V of kv head g of layer l for positions [p0, p1) of one
 * chunk: with c->kt, *k is K transposed where it lies (position p0's
 * value d at *k + d * *kts, the next positions after it); else *k is
 * position p0's K row and *kts 0 (simd_attn_tile's two forms of K).
 * *v is position p0's V row. The next rows are *stride halves on (a
 * chunk is contiguous in a windowed layer's ring too). A quantized K or
 * V (or an f16 K whose rows hold every kv head: a head size that splits
 * a block beside a quantized V) goes through buf (the thread's
 * kvq_floats: K, then V, SIMD_ATTN_CHUNK rows of head_dim each), whole
 * blocks a row at a time by
 * simd_deq_f16_row (the per-block path, kv_deq_slice, made a q8_0 K
 * beside an f16 V, llama.cpp's common -ctk q8_0, 3x slower than f16 in
 * a decode step at depth 4096); an f16 V is read where it lies when its
 * rows are hd halves apart, the buffer's stride. */
static void kv_chunk(const eng_ctx *c, uint32_t l, uint32_t g, size_t p0, size_t p1, simd_f16 *buf,
                     const simd_f16 **k, size_t *kts, const simd_f16 **v, size_t *stride)
{
    size_t hd = c->m->info.head_dim, slots = c->kv_slots[l], rb, off;
    if (c->kt)
        *k = kv_kt(c, l, g, p0 % slots, kts);
    if (!c->kvq_floats) {
        *v = (const simd_f16 *)kv_row(c, 1, l, g, p0 % slots, &rb, &off) + off;
        *stride = rb / sizeof(simd_f16);
        return;
    }
    /* a chunk never wraps in a ring (rings are whole chunks), so its rows
     * are rb apart from the first */
    int whole = p0 % slots + (p1 - p0) <= slots;
    for (int w = c->kt; w < 2; w++) {
        size_t qb = kv_row_bytes(c->kv_type[w], SIMD_QK); /* a block's bytes */
        simd_f16 *out = buf + (size_t)w * SIMD_ATTN_CHUNK * hd;
        const unsigned char *r = kv_row(c, w, l, g, p0 % slots, &rb, &off);
        if (whole && c->kv_type[w] == ENG_KV_F16 && rb == hd * sizeof(simd_f16))
            out = (simd_f16 *)r + off;
        else if (whole && c->kv_type[w] != ENG_KV_F16 && off % SIMD_QK == 0 && hd % SIMD_QK == 0)
            for (size_t p = p0; p < p1; p++)
                simd_deq_f16_row(kv_simd_type(c->kv_type[w]), r + (p - p0) * rb + off / SIMD_QK * qb, hd,
                                 out + (p - p0) * hd);
        else
            for (size_t p = p0; p < p1; p++) {
                r = kv_row(c, w, l, g, p % slots, &rb, &off);
                kv_deq_slice(c->kv_type[w], r, off, hd, out + (p - p0) * hd);
            }
        if (w) {
            *v = out;
        } else {
            *k = out;
            *kts = 0;
        }
    }
    *stride = hd;
}

/* Ask the caches for kv head g's K and V rows of layer l, positions
 * [p0, p1), ahead of their use: a tile's next chunk, whose rows the
 * hardware prefetchers would start to fetch only after the chunk's first
 * reads had missed (a new 8 KB stream every chunk). */
static void kv_prefetch(const eng_ctx *c, uint32_t l, uint32_t g, size_t p0, size_t p1)
{
    size_t hd = c->m->info.head_dim, slots = c->kv_slots[l], rb, off;
    if (c->kt) { /* [p0, p1) lies in one chunk: its K, all of it */
        size_t kts;
        const char *k = (const char *)(kv_kt(c, l, g, p0 % slots, &kts) - p0 % SIMD_ATTN_CHUNK);
        for (size_t b = 0; b < hd * kts * sizeof(simd_f16); b += 64)
            __builtin_prefetch(k + b, 0, 2);
    }
    for (int w = c->kt; w < 2; w++) {
        size_t len = kv_row_bytes(c->kv_type[w], hd);
        /* one kv_row for each run of slots up to the ring's end: the
         * slots of a run are rb bytes apart */
        for (size_t p = p0; p < p1;) {
            size_t s = p % slots, run = slots - s < p1 - p ? slots - s : p1 - p;
            /* off is kv_row's output: read it only after the call */
            const unsigned char *r = kv_row(c, w, l, g, s, &rb, &off);
            r += off / hd * len;
            for (size_t i = 0; i < run; i++)
                for (size_t b = 0; b < len; b += 64)
                    __builtin_prefetch(r + i * rb + b, 0, 2);
            p += run;
        }
    }
}

/* For kv_int8: the blocks of kv head g of layer l from position p0 on
 * into a (k, v, their strides and types); a->buf is the thread's buffer. */
static void kv_qargs(const eng_ctx *c, uint32_t l, uint32_t g, size_t p0, simd_attn_q_args *a)
{
    size_t slots = c->kv_slots[l], rb, off;
    for (int w = 0; w < 2; w++) {
        int t = c->kv_type[w];
        size_t bb = t == ENG_KV_Q8_0 ? sizeof(simd_block_q8_0) : sizeof(simd_block_q4_0);
        const unsigned char *r = kv_row(c, w, l, g, p0 % slots, &rb, &off) + off / SIMD_QK * bb;
        if (w) {
            a->v = r;
            a->vstride = rb;
            a->vtype = kv_simd_type(t);
        } else {
            a->k = r;
            a->kstride = rb;
            a->ktype = kv_simd_type(t);
        }
    }
}

/* The thread's buffer for kv_chunk (scratch: its scores). */
static simd_f16 *kv_buf(const eng_ctx *c, float *scratch)
{
    return c->kvq_floats ? (simd_f16 *)(scratch + c->scores_per_thread - c->kvq_floats) : NULL;
}

/* The chunk rows one thread may hold for a tile of tokens, at least. */
#define ATT_TILE_BYTES (2u << 20)

typedef struct att_job {
    eng_ctx *c;
    uint32_t layer, nt, pos;
    uint32_t tile;  /* tokens per task when nt > 1 (the last tile may be short) */
} att_job;

/* The positions a token at position p sees in a layer with this window
 * (0: all): [*lo, p], in *nch chunks from chunk lo / SIMD_ATTN_CHUNK
 * (chunks are aligned to absolute positions, so that they stay whole in
 * a windowed layer's ring and the bits do not depend on its size). */
static void att_span(uint32_t window, size_t p, size_t *lo, size_t *nch)
{
    *lo = window && p + 1 > window ? p + 1 - window : 0;
    *nch = p / SIMD_ATTN_CHUNK - *lo / SIMD_ATTN_CHUNK + 1;
}

/* One head's output from its chunk rows, with the head's sink if the
 * layer has them. */
static void att_merge(const eng_layer *L, uint32_t h, size_t hd, size_t nch, const float *part, size_t cstride,
                      float *out)
{
    if (L->sinks)
        simd_attn_merge_sink(hd, nch, part, cstride, L->sinks[h], out);
    else
        simd_attn_merge(hd, nch, part, cstride, out);
}

/* One token over one chunk (a decode step's, or a batch token's own):
 * with K transposed (the f16 cache) the tile for one token, whose order
 * every path of that cache takes; with K as rows (a quantized K's halves)
 * simd_attn_chunk, which reads them where they lie (the tile would
 * transpose each chunk first: a decode step with -ctk q8_0 at depth 4096
 * ran at 0.63x). */
static void att_one(const simd_attn_args *a, float *kvbuf)
{
    if (a->ktstride)
        simd_attn_tile(a, 1, 0, 0, kvbuf);
    else
        simd_attn_chunk(a);
}

/* The chunks tokens [pos, pos + nt) see together in layer L: from the
 * first token's first to the last token's last. */
static size_t att_tile_chunks(const eng_layer *L, size_t pos, uint32_t nt, size_t *first)
{
    size_t lo, nch;
    att_span(L->window, pos, &lo, &nch);
    *first = lo / SIMD_ATTN_CHUNK;
    return (pos + nt - 1) / SIMD_ATTN_CHUNK - *first + 1;
}

/* Tokens [t0, t1) of a batch for kv head g, chunk by chunk (above): the
 * tokens that see the whole chunk go to simd_attn_tile together, the
 * others (the chunk holds their own position, or their window starts
 * inside it) one by one, with the same order of the scores. Token t's
 * rows sit at rows + (t - t0)*tokstride, one per chunk of the tile's
 * span, so that their stride is the same for every token. */
static void att_tile(const att_job *j, float *scratch, uint32_t g, uint32_t t0, uint32_t t1)
{
    eng_ctx *c = j->c;
    const eng_layer *L = &c->m->layers[j->layer];
    uint32_t hd = c->m->info.head_dim, nh = L->n_heads, nkv = L->n_kv_heads, grp = nh / nkv;
    size_t nkvd = (size_t)nkv * hd, row = (size_t)hd + 2, cstride = grp * row, qts = (size_t)nh * hd;
    float *kvbuf = scratch + (size_t)c->grp_max * SIMD_ATTN_CHUNK;
    float *rows = kvbuf + SIMD_ATTN_TILE_BUF(hd); /* [token][chunk][head][row] */
    simd_f16 *kvb = kv_buf(c, scratch);
    const simd_f16 *kl, *vl;
    const float *q = c->q + (size_t)g * grp * hd;
    size_t first, lo, tn, u0, un;
    size_t tokstride = att_tile_chunks(L, (size_t)j->pos + t0, t1 - t0, &first) * cstride;
    size_t last = (size_t)(j->pos + t1 - 1) / SIMD_ATTN_CHUNK;
    simd_attn_args a = {.hd = hd, .nq = grp, .qstride = hd, .kvstride = nkvd, .scale = c->m->attn_scale,
                        .softcap = c->m->attn_softcap, .scratch = scratch, .pstride = row};
    /* kv_int8: the same calls on the blocks (queries qq, qts8 blocks a token) */
    size_t nbh = hd / SIMD_QK, qts8 = (size_t)nh * nbh;
    simd_attn_q_args qa = {.hd = hd, .nq = grp, .qstride = nbh, .scale = c->m->attn_scale,
                           .softcap = c->m->attn_softcap, .scratch = scratch, .pstride = row, .buf = kvb};
    const simd_block_q8a *qq = c->kv_int8 ? c->qq + (size_t)g * grp * nbh : NULL;
    for (size_t ch = first; ch <= last; ch++) {
        size_t c0 = ch * SIMD_ATTN_CHUNK, c1 = c0 + SIMD_ATTN_CHUNK;
        uint32_t ta = t1, tb = t1; /* the tokens that see all of the chunk */
        /* the chunk's positions some token of the tile sees: from the
         * first token's window to the last token */
        att_span(L->window, (size_t)j->pos + t0, &u0, &un);
        u0 = u0 > c0 ? u0 : c0;
        un = (size_t)j->pos + t1 < c1 ? (size_t)j->pos + t1 : c1;
        if (ch < last)
            kv_prefetch(c, j->layer, g, c1, c1 + SIMD_ATTN_CHUNK < (size_t)j->pos + t1 ? c1 + SIMD_ATTN_CHUNK
                                                                                      : (size_t)j->pos + t1);
        if (!c->kv_int8)
            kv_chunk(c, j->layer, g, u0, un, kvb, &kl, &a.ktstride, &vl, &a.kvstride);
        for (uint32_t t = t0; t < t1; t++) {
            size_t p = (size_t)j->pos + t;
            att_span(L->window, p, &lo, &tn);
            if (c0 > p || c1 <= lo)
                continue;
            size_t p0 = c0 < lo ? lo : c0, p1 = c1 < p + 1 ? c1 : p + 1;
            if (p0 == c0 && p1 == c1) {
                if (ta == t1)
                    ta = t;
                tb = t + 1;
                continue;
            }
            if (c->kv_int8) {
                qa.n = p1 - p0;
                qa.q = qq + (size_t)t * qts8;
                qa.part = rows + (t - t0) * tokstride + (ch - first) * cstride;
                kv_qargs(c, j->layer, g, p0, &qa);
                simd_attn_q_tile(&qa, 1, 0, 0);
                continue;
            }
            a.n = p1 - p0;
            a.q = q + (size_t)t * qts;
            a.k = kl + (p0 - u0) * (a.ktstride ? 1 : a.kvstride);
            a.v = vl + (p0 - u0) * a.kvstride;
            a.part = rows + (t - t0) * tokstride + (ch - first) * cstride;
            att_one(&a, kvbuf);
        }
        if (ta < tb && c->kv_int8) {
            qa.n = SIMD_ATTN_CHUNK;
            qa.q = qq + (size_t)ta * qts8;
            qa.part = rows + (ta - t0) * tokstride + (ch - first) * cstride;
            kv_qargs(c, j->layer, g, c0, &qa);
            simd_attn_q_tile(&qa, tb - ta, qts8, tokstride);
        } else if (ta < tb) {
            a.n = SIMD_ATTN_CHUNK;
            a.q = q + (size_t)ta * qts;
            a.k = kl + (c0 - u0) * (a.ktstride ? 1 : a.kvstride);
            a.v = vl + (c0 - u0) * a.kvstride;
            a.part = rows + (ta - t0) * tokstride + (ch - first) * cstride;
            simd_attn_tile(&a, tb - ta, qts, tokstride, kvbuf);
        }
        /* the tokens whose last chunk this is */
        for (uint32_t t = t0; t < t1; t++) {
            size_t p = (size_t)j->pos + t;
            if (p / SIMD_ATTN_CHUNK != ch)
                continue;
            att_span(L->window, p, &lo, &tn);
            const float *tr = rows + (t - t0) * tokstride + (lo / SIMD_ATTN_CHUNK - first) * cstride;
            for (uint32_t h = 0; h < grp; h++)
                att_merge(L, g * grp + h, hd, tn, tr + h * row, cstride,
                          c->att + (size_t)t * nh * hd + (size_t)(g * grp + h) * hd);
        }
    }
}

/* Tokens per tile whose chunk rows fit a thread's buffer, for a batch
 * of nt tokens from pos in layer L (0: not even one; then the tokens go
 * one by one). */
static uint32_t att_tile_fit(const eng_ctx *c, const eng_layer *L, uint32_t pos, uint32_t nt)
{
    size_t first, grp = L->n_heads / L->n_kv_heads;
    size_t per_tok = grp * att_tile_chunks(L, pos, nt, &first) * (c->m->info.head_dim + 2);
    size_t room = c->scores_per_thread - (size_t)c->grp_max * SIMD_ATTN_CHUNK - SIMD_ATTN_TILE_BUF(c->m->info.head_dim) -
                  c->kvq_floats;
    size_t fit = room / per_tok;
    return fit < nt ? (uint32_t)fit : nt;
}

/* Token t's chunks [c0, c1) of its span for kv head g (query heads
 * g*grp...), chunk ch's rows at base + ch*cstride, the heads' rows pstride
 * apart. */
static void att_chunks(const att_job *j, float *scratch, uint32_t t, uint32_t g, size_t c0, size_t c1, float *base,
                       size_t cstride, size_t pstride)
{
    eng_ctx *c = j->c;
    const eng_layer *L = &c->m->layers[j->layer];
    uint32_t hd = c->m->info.head_dim, nh = L->n_heads, nkv = L->n_kv_heads, grp = nh / nkv;
    size_t nkvd = (size_t)nkv * hd, nbh = hd / SIMD_QK;
    simd_f16 *kvb = kv_buf(c, scratch);
    float *kvbuf = scratch + (size_t)c->grp_max * SIMD_ATTN_CHUNK; /* as att_tile's */
    simd_attn_args a = {.hd = hd, .nq = grp, .qstride = hd, .kvstride = nkvd, .scale = c->m->attn_scale,
                        .softcap = c->m->attn_softcap, .scratch = scratch, .pstride = pstride};
    simd_attn_q_args qa = {.hd = hd, .nq = grp, .qstride = nbh, .scale = c->m->attn_scale,
                           .softcap = c->m->attn_softcap, .scratch = scratch, .buf = kvb, .pstride = pstride};
    size_t p = (size_t)j->pos + t, lo, nch;
    att_span(L->window, p, &lo, &nch);
    size_t ch0 = lo / SIMD_ATTN_CHUNK;
    a.q = c->q + (size_t)t * nh * hd + (size_t)g * grp * hd;
    if (c->kv_int8)
        qa.q = c->qq + ((size_t)t * nh + (size_t)g * grp) * nbh;
    for (size_t ch = c0; ch < c1; ch++) {
        size_t p0 = (ch0 + ch) * SIMD_ATTN_CHUNK, p1 = p0 + SIMD_ATTN_CHUNK;
        if (p0 < lo)
            p0 = lo;
        if (p1 > p + 1)
            p1 = p + 1;
        if (c->kv_int8) {
            qa.n = p1 - p0;
            qa.part = base + ch * cstride;
            kv_qargs(c, j->layer, g, p0, &qa);
            simd_attn_q_tile(&qa, 1, 0, 0);
            continue;
        }
        a.n = p1 - p0;
        kv_chunk(c, j->layer, g, p0, p1, kvb, &a.k, &a.ktstride, &a.v, &a.kvstride);
        a.part = base + ch * cstride;
        att_one(&a, kvbuf);
    }
}

static void att_worker(void *arg, int ith, int nth)
{
    const att_job *j = arg;
    eng_ctx *c = j->c;
    const eng_layer *L = &c->m->layers[j->layer];
    uint32_t hd = c->m->info.head_dim, nh = L->n_heads, nkv = L->n_kv_heads, grp = nh / nkv;
    size_t row = (size_t)hd + 2;
    float *scratch = c->scores + (size_t)ith * c->scores_per_thread;
    /* after the scores and the tile's kvbuf (att_chunks): [chunk][head of the group][row] */
    float *tparts = scratch + (size_t)c->grp_max * SIMD_ATTN_CHUNK + SIMD_ATTN_TILE_BUF(hd);
    if (j->tile) {
        uint32_t ntiles = (j->nt + j->tile - 1) / j->tile;
        for (uint32_t task = (uint32_t)ith; task < nkv * ntiles; task += (uint32_t)nth) {
            uint32_t g = task % nkv, t0 = task / nkv * j->tile;
            att_tile(j, scratch, g, t0, t0 + j->tile < j->nt ? t0 + j->tile : j->nt);
        }
        return;
    }
    for (uint32_t task = (uint32_t)ith; task < j->nt * nkv; task += (uint32_t)nth) {
        uint32_t t = task / nkv, g = task % nkv;
        size_t lo, nch;
        att_span(L->window, (size_t)j->pos + t, &lo, &nch);
        att_chunks(j, scratch, t, g, 0, nch, tparts, grp * row, row);
        for (uint32_t h = 0; h < grp; h++)
            att_merge(L, g * grp + h, hd, nch, tparts + h * row, grp * row,
                      c->att + (size_t)t * nh * hd + (size_t)(g * grp + h) * hd);
    }
}

/* One token's attention split over the pool: unit u is chunk u % nch of
 * kv head u / nch, so a participant's share is a contiguous run of each
 * head's rows (kv_row: a head's rows follow one another) and the last
 * pieces still balance (a task per kv head and part of the span left the
 * caller waiting for a late worker, and both threads idle while the caller
 * merged the heads alone). Rows go to c->apart ([head][chunk]). The
 * participant that computes a kv head's last chunks merges its query
 * heads (c->kv_left counts what is left of each), so the merge needs no
 * job and no wait of its own: one wake-up and barrier a layer fewer. No
 * bit depends on the split: each chunk row is computed alone and merged
 * in chunk order, whoever merges. */
static void att_decode_range(void *arg, uint32_t u0, uint32_t u1)
{
    const att_job *j = arg;
    eng_ctx *c = j->c;
    const eng_layer *L = &c->m->layers[j->layer];
    uint32_t grp = L->n_heads / L->n_kv_heads;
    size_t hd = c->m->info.head_dim, row = hd + 2, lo, nch;
    float *scratch = c->scores + (size_t)eng_pool_self() * c->scores_per_thread;
    att_span(L->window, j->pos, &lo, &nch);
    while (u0 < u1) {
        uint32_t g = u0 / (uint32_t)nch, ch = u0 % (uint32_t)nch, end = (g + 1) * (uint32_t)nch;
        uint32_t e = end < u1 ? end : u1;
        float *rows = c->apart + (size_t)g * grp * c->nch_max * row;
        att_chunks(j, scratch, 0, g, ch, ch + (e - u0), rows, row, c->nch_max * row);
        /* acq_rel: the last to finish sees every other participant's rows */
        if (atomic_fetch_sub_explicit(&c->kv_left[g], e - u0, memory_order_acq_rel) == e - u0)
            for (uint32_t h = 0; h < grp; h++)
                att_merge(L, g * grp + h, hd, nch, rows + (size_t)h * c->nch_max * row, row,
                          c->att + (size_t)(g * grp + h) * hd);
        u0 = e;
    }
}

/* Tiles per kv head for a batch on nth threads: the fewest that make
 * the task count a multiple of the threads, at most one per token. */
static uint32_t att_split(uint32_t nkv, uint32_t nth, size_t nt)
{
    uint32_t s = 1;
    while ((nkv * s) % nth && s < nth && s < nt)
        s++;
    return s;
}

/* ---- one batch ---- */

static void add_bias(float *y, const float *b, uint32_t nt, uint32_t n)
{
    if (!b)
        return;
    for (uint32_t t = 0; t < nt; t++)
        for (uint32_t i = 0; i < n; i++)
            y[(size_t)t * n + i] += b[i];
}

/* Per-head RMSNorm of a token's nh heads of hd values (qwen3's q and k
 * norms). */
static void head_norm(float *v, uint32_t nh, uint32_t hd, const float *g, float eps)
{
    if (!g)
        return;
    for (uint32_t i = 0; i < nh; i++)
        rmsnorm(v + (size_t)i * hd, v + (size_t)i * hd, g, hd, eps);
}

static void add_rows(float *x, const float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] += y[i];
}

/* RMSNorm of a block's output row in place before it joins the residual
 * (gemma3's post-attention and post-FFN norms); g NULL: none. */
static void post_norm(const eng_model *m, float *y, const float *g)
{
    if (g)
        rmsnorm(y, y, g, m->info.dim, m->info.norm_eps);
}

/* After q/k/v's product, per token: the biases, the head norms, rope,
 * the cache stores and (kv_int8) the query blocks. The slots of one batch
 * are distinct (a windowed layer's ring holds window + BATCH - 1), so
 * tokens may store side by side. */
typedef struct qkv_job {
    eng_ctx *c;
    uint32_t l;
    size_t tab; /* the rope table: 0, or the second (rope_local) */
} qkv_job;

static void qkv_range(void *arg, uint32_t t0, uint32_t t1)
{
    const qkv_job *j = arg;
    eng_ctx *c = j->c;
    const eng_model *m = c->m;
    const eng_model_info *in = &m->info;
    const eng_layer *L = &m->layers[j->l];
    uint32_t hd = in->head_dim, nq = L->n_heads * hd, nkvd = L->n_kv_heads * hd, half = in->rope_dims / 2;
    for (uint32_t t = t0; t < t1; t++) {
        float *q = c->q + (size_t)t * nq, *k = c->k + (size_t)t * nkvd, *v = c->v + (size_t)t * nkvd;
        add_bias(q, L->bq, 1, nq);
        add_bias(k, L->bk, 1, nkvd);
        add_bias(v, L->bv, 1, nkvd);
        head_norm(q, L->n_heads, hd, L->q_norm, in->norm_eps);
        head_norm(k, L->n_kv_heads, hd, L->k_norm, in->norm_eps);
        if (half) {
            const float *cs = c->rcos + j->tab + t * half, *sn = c->rsin + j->tab + t * half;
            rope(q, L->n_heads, hd, in->rope_dims, in->rope_neox, cs, sn);
            rope(k, L->n_kv_heads, hd, in->rope_dims, in->rope_neox, cs, sn);
        }
        size_t slot = (size_t)((c->pos + t) % c->kv_slots[j->l]);
        /* the cache holds halves by default, as llama.cpp's does: half
         * the bytes for attention to read, and within f16's range and
         * precision for keys and values; q8_0/q4_0 when asked */
        kv_store(c, 0, j->l, slot, k, nkvd);
        kv_store(c, 1, j->l, slot, v, nkvd);
        /* the queries as int8 blocks, once for every chunk and thread
         * (a token's blocks do not cross into the next: nq is whole blocks) */
        if (c->kv_int8)
            simd_act_quant(SIMD_ACT_Q8, q, c->qq + (size_t)t * (nq / SIMD_QK), nq);
    }
}

/* A block's output rows y (nt of dim) joining the residual x, per token:
 * the bias b, the post norm g (gemma3), then the add. */
typedef struct resid_job {
    const eng_model *m;
    float *x, *y;
    const float *b, *g;
} resid_job;

static void resid_range(void *arg, uint32_t t0, uint32_t t1)
{
    const resid_job *j = arg;
    uint32_t dim = j->m->info.dim;
    for (uint32_t t = t0; t < t1; t++) {
        float *y = j->y + (size_t)t * dim;
        add_bias(y, j->b, 1, dim);
        post_norm(j->m, y, j->g);
        add_rows(j->x + (size_t)t * dim, y, dim);
    }
}

static void residual(eng_ctx *c, float *y, uint32_t nt, const float *b, const float *g)
{
    resid_job j = {c->m, c->x, y, b, g};
    tok_run(c, nt, c->m->info.dim, resid_range, &j);
}

static void attention_block(eng_ctx *c, uint32_t l, uint32_t nt)
{
    const eng_model *m = c->m;
    const eng_model_info *in = &m->info;
    const eng_layer *L = &m->layers[l];
    uint32_t hd = in->head_dim, nq = L->n_heads * hd, nkvd = L->n_kv_heads * hd;
    uint32_t half = in->rope_dims / 2;
    norm_rows(c, c->xb, c->x, nt, L->attn_norm, L->attn_norm_b);
    const eng_weight *qkv[3] = {&L->wq, &L->wk, &L->wv};
    float *qkv_out[3] = {c->q, c->k, c->v};
    matmul(c, c->xb, nt, 3, qkv, qkv_out);
    /* windowed layers of a rope_local family take the second table */
    qkv_job qj = {c, l, m->rope_local && L->window ? (size_t)c->batch * half : 0};
    tok_run(c, nt, nq + 2 * nkvd, qkv_range, &qj);
    att_job aj = {c, l, nt, c->pos, 0};
    if (nt > 1)
        aj.tile = att_tile_fit(c, L, c->pos, nt);
    /* attention reads the cache once per kv head for all the query heads
     * that share it, and its arithmetic grows with those heads: split it
     * when the cache bytes times the query heads per kv head are worth
     * waking the workers for */
    size_t seen = c->pos + nt, lo, nch;
    if (L->window && seen > L->window)
        seen = L->window;
    if (seen * nkvd * 2 * sizeof(simd_f16) * nt * (L->n_heads / L->n_kv_heads) < SMALL_MATMUL_BYTES) {
        att_worker(&aj, 0, 1);
    } else {
        uint32_t nth = (uint32_t)eng_pool_threads(c->pool);
        att_span(L->window, c->pos + nt - 1, &lo, &nch);
        if (nt == 1) {
            for (uint32_t g = 0; g < L->n_kv_heads; g++) /* published by the job's start */
                atomic_store_explicit(&c->kv_left[g], (unsigned)nch, memory_order_relaxed);
            eng_pool_run_range(c->pool, att_decode_range, &aj, (uint32_t)(L->n_kv_heads * nch), 1);
            matmul1(c, c->att, nt, &L->wo, c->xb2);
            residual(c, c->xb2, nt, L->bo, L->attn_post_norm);
            return;
        }
        if (aj.tile) { /* enough tiles for every thread, as even as the kv heads allow */
            uint32_t tiles = (nt + aj.tile - 1) / aj.tile, s = att_split(L->n_kv_heads, nth, nt);
            if (s > tiles)
                tiles = s;
            aj.tile = (nt + tiles - 1) / tiles;
        }
        eng_pool_run(c->pool, att_worker, &aj);
    }
    matmul1(c, c->att, nt, &L->wo, c->xb2);
    residual(c, c->xb2, nt, L->bo, L->attn_post_norm);
}

/* The FFN's activation, per row of n: the up bias b on u (or on g when
 * there is no u: GELU), then the family's gate. */
typedef struct glu_job {
    int kind; /* enum eng_ffn_kind */
    float *g, *u;
    const float *b;
    uint32_t n;
} glu_job;

static void glu_range(void *arg, uint32_t t0, uint32_t t1)
{
    const glu_job *j = arg;
    for (uint32_t t = t0; t < t1; t++) {
        float *g = j->g + (size_t)t * j->n, *u = j->u ? j->u + (size_t)t * j->n : NULL;
        add_bias(u ? u : g, j->b, 1, j->n);
        if (j->kind == ENG_FFN_GELU) {
            simd_gelu(g, j->n);
        } else if (j->kind == ENG_FFN_GEGLU) {
            simd_gelu(g, j->n);
            for (uint32_t i = 0; i < j->n; i++)
                g[i] *= u[i];
        } else if (j->kind == ENG_FFN_SWIGLU_OAI) {
            simd_swiglu_oai(g, u, j->n, 1.702f, 7.0f);
        } else {
            simd_silu_mul(g, u, j->n);
        }
    }
}

static void glu_rows(eng_ctx *c, int kind, float *g, float *u, const float *b, uint32_t rows, uint32_t n)
{
    glu_job j = {kind, g, u, b, n};
    tok_run(c, rows, n, glu_range, &j);
}

static void ffn_block(eng_ctx *c, uint32_t l, uint32_t nt)
{
    const eng_model *m = c->m;
    const eng_layer *L = &m->layers[l];
    uint32_t ffn = L->ffn;
    norm_rows(c, c->xb, c->x, nt, L->ffn_norm, L->ffn_norm_b);
    if (m->ffn_kind == ENG_FFN_GELU) {
        matmul1(c, c->xb, nt, &L->w_up, c->hb);
        glu_rows(c, m->ffn_kind, c->hb, NULL, L->b_up, nt, ffn);
    } else {
        const eng_weight *gu[2] = {&L->w_gate, &L->w_up};
        float *gu_out[2] = {c->hb, c->hb2};
        matmul(c, c->xb, nt, 2, gu, gu_out);
        glu_rows(c, m->ffn_kind, c->hb, c->hb2, L->b_up, nt, ffn);
    }
    matmul1(c, c->hb, nt, &L->w_down, c->xb2);
    residual(c, c->xb2, nt, L->b_down, L->ffn_post_norm);
}

/* ---- mixture of experts ---- */

/* Token t's experts and their weights from its router logits lg (n of
 * them): the k largest (the lower index first among equals), weighed
 * as the family says (enum eng_moe_gating). */
static void moe_route(const eng_model *m, const eng_experts *x, float *lg, int32_t *sel, float *w)
{
    uint32_t n = x->n, k = x->used;
    if (m->gating == ENG_MOE_SOFTMAX) {
        /* probabilities over all experts first: they are the weights */
        float mx = lg[0];
        for (uint32_t i = 1; i < n; i++)
            mx = lg[i] > mx ? lg[i] : mx;
        double sum = 0;
        for (uint32_t i = 0; i < n; i++) {
            lg[i] = expf(lg[i] - mx);
            sum += lg[i];
        }
        for (uint32_t i = 0; i < n; i++)
            lg[i] = (float)(lg[i] / sum);
    }
    for (uint32_t s = 0; s < k; s++) {
        int32_t best = -1;
        for (uint32_t i = 0; i < n; i++) {
            int taken = 0;
            for (uint32_t j = 0; j < s && !taken; j++)
                taken = sel[j] == (int32_t)i;
            /* NaN logits lose to every number, and are taken only when
             * nothing else is left */
            if (!taken && (best < 0 || lg[i] > lg[best] || (isnan(lg[best]) && !isnan(lg[i]))))
                best = (int32_t)i;
        }
        sel[s] = best;
        w[s] = lg[best];
    }
    if (m->gating == ENG_MOE_TOPK_SOFTMAX) {
        float mx = w[0]; /* the largest: w is in decreasing order */
        float sum = 0;
        for (uint32_t s = 0; s < k; s++) {
            w[s] = expf(w[s] - mx);
            sum += w[s];
        }
        for (uint32_t s = 0; s < k; s++)
            w[s] /= sum;
    } else if (m->moe_norm) {
        float sum = 0;
        for (uint32_t s = 0; s < k; s++)
            sum += w[s];
        if (sum < 6.103515625e-5f) /* llama.cpp's floor: the smallest normal half */
            sum = 6.103515625e-5f;
        for (uint32_t s = 0; s < k; s++)
            w[s] /= sum;
    }
}

/* v = rows [e*rows, (e+1)*rows) of all (expert e's share of a layer's
 * expert matrix), with the packed copy's groups of them when rows is a
 * whole number of groups. */
static void expert_view(const eng_weight *all, uint32_t e, uint32_t rows, eng_weight *v)
{
    size_t first = (size_t)e * rows;
    v->data = (const char *)all->data + first * all->row_bytes;
    v->type = all->type;
    v->rows = rows;
    v->cols = all->cols;
    v->row_bytes = all->row_bytes;
    v->act = all->act;
    v->packed = NULL;
    uint32_t done = 0;
    if (all->packed && rows % SIMD_PACK_ROWS == 0) {
        uint32_t pr = atomic_load_explicit(&all->packed_rows, memory_order_acquire);
        if (pr > first) {
            v->packed = (const char *)all->packed + first / SIMD_PACK_ROWS * simd_pack_group_bytes(all->type, all->cols);
            done = pr - first < rows ? (uint32_t)(pr - first) : rows;
        }
    }
    atomic_store_explicit(&v->packed_rows, done, memory_order_relaxed);
}

/* Rows of floats (n rows of cols) into the activation formats the
 * weights ws[0..nw-1] take. */
static void moe_quant(eng_ctx *c, const float *x, uint32_t n, uint32_t cols, const eng_weight *const *ws, int nw)
{
    int q8 = 0, q8k = 0;
    for (int i = 0; i < nw; i++) {
        q8 |= ws[i]->act == SIMD_ACT_Q8;
        q8k |= ws[i]->act == SIMD_ACT_Q8K;
    }
    size_t qs = simd_act_row_bytes(SIMD_ACT_Q8, cols), ks = simd_act_row_bytes(SIMD_ACT_Q8K, cols);
    for (uint32_t g = 0; g < n; g++) {
        if (q8)
            simd_act_quant(SIMD_ACT_Q8, x + (size_t)g * cols, (char *)c->eact + g * qs, cols);
        if (q8k)
            simd_act_quant(SIMD_ACT_Q8K, x + (size_t)g * cols, (char *)c->eact_k + g * ks, cols);
    }
}

/* One part of an expert job: expert view w on rows [g0, g0+cnt) of the
 * (quantized) input, writing rows of out (ostride floats each). */
static mm_part moe_part(eng_ctx *c, const eng_weight *w, const float *x, uint32_t g0, uint32_t cnt, float *out,
                        size_t ostride)
{
    size_t cols = w->cols, stride;
    const void *act;
    if (w->act == SIMD_ACT_Q8) {
        stride = simd_act_row_bytes(SIMD_ACT_Q8, cols);
        act = c->eact;
    } else if (w->act == SIMD_ACT_Q8K) {
        stride = simd_act_row_bytes(SIMD_ACT_Q8K, cols);
        act = c->eact_k;
    } else {
        stride = cols * sizeof(float);
        act = x;
    }
    mm_part p = {w, (const char *)act + g0 * stride, stride, out + (size_t)g0 * ostride, ostride, cnt, NULL, 0, 0};
    mm_part_packed(&p);
    return p;
}

/* The layer's mixture of experts on nt tokens: route each token, group
 * the batch's (token, expert) pairs by expert so that each selected
 * expert's rows are read once for all its tokens, run gate and up of all
 * selected experts as one pool job (split over experts and rows), the
 * activation, then down as a second job, and add each token's experts'
 * outputs, weighed, in the order of its selection. */
static void moe_block(eng_ctx *c, uint32_t l, uint32_t nt)
{
    const eng_model *m = c->m;
    const eng_layer *L = &m->layers[l];
    const eng_experts *x = &L->moe;
    uint32_t dim = m->info.dim, k = x->used, ff = x->ffn, ne = x->n, rows = nt * k;
    norm_rows(c, c->xb, c->x, nt, L->ffn_norm, NULL);
    matmul1(c, c->xb, nt, &x->router, c->rlog);
    add_bias(c->rlog, x->router_b, nt, ne);
    for (uint32_t t = 0; t < nt; t++)
        moe_route(m, x, c->rlog + (size_t)t * ne, c->sel + t * k, c->selw + t * k);
    /* rows grouped by expert, tokens in order within an expert */
    memset(c->ecount, 0, ne * sizeof *c->ecount);
    for (uint32_t i = 0; i < rows; i++)
        c->ecount[c->sel[i]]++;
    for (uint32_t e = 0, at = 0; e < ne; e++) {
        c->estart[e] = at;
        at += c->ecount[e];
        c->ecount[e] = 0; /* refilled below */
    }
    for (uint32_t i = 0; i < rows; i++) {
        uint32_t e = (uint32_t)c->sel[i], g = c->estart[e] + c->ecount[e]++;
        c->gidx[i] = g;
        c->gtok[g] = i / k;
        c->gexp[g] = e;
        memcpy(c->xe + (size_t)g * dim, c->xb + (size_t)(i / k) * dim, dim * sizeof(float));
    }
    const eng_weight *gu[2] = {&x->gate, &x->up};
    for (uint32_t e = 0; c->eobs && e < ne; e++)
        if (c->ecount[e])
            c->eobs(c->eobs_user, &x->gate, e, c->xe + (size_t)c->estart[e] * dim, c->ecount[e], dim);
    moe_quant(c, c->xe, rows, dim, gu, 2);
    int np = 0;
    for (uint32_t e = 0; e < ne; e++) {
        if (!c->ecount[e])
            continue;
        eng_weight *vg = &c->eview[2 * e], *vu = &c->eview[2 * e + 1];
        expert_view(&x->gate, e, ff, vg);
        expert_view(&x->up, e, ff, vu);
        c->eparts[np++] = moe_part(c, vg, c->xe, c->estart[e], c->ecount[e], c->he, ff);
        c->eparts[np++] = moe_part(c, vu, c->xe, c->estart[e], c->ecount[e], c->he2, ff);
    }
    mm_job j = {.p = c->eparts, .np = np};
    mm_run(c, &j);
    for (uint32_t g = 0; g < rows; g++) {
        float *hg = c->he + (size_t)g * ff, *hu = c->he2 + (size_t)g * ff;
        if (x->b_gate)
            add_rows(hg, x->b_gate + (size_t)c->gexp[g] * ff, ff);
        if (x->b_up)
            add_rows(hu, x->b_up + (size_t)c->gexp[g] * ff, ff);
    }
    glu_rows(c, m->ffn_kind == ENG_FFN_SWIGLU_OAI ? ENG_FFN_SWIGLU_OAI : ENG_FFN_SWIGLU, c->he, c->he2, NULL, rows, ff);
    const eng_weight *dn = &x->down;
    for (uint32_t e = 0; c->eobs && e < ne; e++)
        if (c->ecount[e])
            c->eobs(c->eobs_user, &x->down, e, c->he + (size_t)c->estart[e] * ff, c->ecount[e], ff);
    moe_quant(c, c->he, rows, ff, &dn, 1);
    np = 0;
    for (uint32_t e = 0; e < ne; e++) {
        if (!c->ecount[e])
            continue;
        eng_weight *vd = &c->eview[2 * e];
        expert_view(&x->down, e, dim, vd);
        c->eparts[np++] = moe_part(c, vd, c->he, c->estart[e], c->ecount[e], c->ye, dim);
    }
    j = (mm_job){.p = c->eparts, .np = np};
    mm_run(c, &j);
    for (uint32_t t = 0; t < nt; t++) {
        float *acc = c->xb2 + (size_t)t * dim;
        for (uint32_t s = 0; s < k; s++) {
            uint32_t g = c->gidx[t * k + s];
            const float *y = c->ye + (size_t)g * dim;
            const float *bd = x->b_down ? x->b_down + (size_t)c->gexp[g] * dim : NULL;
            float w = c->selw[t * k + s];
            for (uint32_t i = 0; i < dim; i++) {
                float v = (bd ? y[i] + bd[i] : y[i]) * w;
                acc[i] = s ? acc[i] + v : v;
            }
        }
    }
    add_rows(c->x, c->xb2, (size_t)nt * dim);
}

/* Token tok's row of the embedding. With the output matrix tied to the
 * embedding and packed, the row comes out of the packed copy: the file's
 * pages of that matrix were dropped once packed, and fetching rows from
 * them would bring them back (2 MB at a time where the page cache holds
 * the file in huge pages) until the matrix was resident twice. */
static const void *embd_row(eng_ctx *c, int32_t tok)
{
    const eng_model *m = c->m;
    const eng_weight *o = &m->output;
    if (m->info.tied_output && o->packed &&
        (uint32_t)tok < atomic_load_explicit(&o->packed_rows, memory_order_acquire)) {
        const char *g = (const char *)o->packed + (size_t)(tok / SIMD_PACK_ROWS) * simd_pack_group_bytes(o->type, o->cols);
        simd_unpack_row(o->type, o->cols, g, (size_t)tok % SIMD_PACK_ROWS, c->embrow);
        return c->embrow;
    }
    return (const char *)m->tok_embd.data + (size_t)tok * m->tok_embd.row_bytes;
}

static void forward_batch(eng_ctx *c, const int32_t *tok, uint32_t nt)
{
    eng_model *m = c->m;
    const eng_model_info *in = &m->info;
    uint32_t dim = in->dim;
    const simd_traits *et = simd_type_traits(m->tok_embd.type);
    for (uint32_t t = 0; t < nt; t++)
        et->dequant(embd_row(c, tok[t]), c->x + (size_t)t * dim, dim);
    if (m->embd_scale != 1.0f)
        for (size_t i = 0; i < (size_t)nt * dim; i++)
            c->x[i] *= m->embd_scale;
    if (m->pos_embd.data) {
        const simd_traits *pt = simd_type_traits(m->pos_embd.type);
        for (uint32_t t = 0; t < nt; t++) {
            pt->dequant((const char *)m->pos_embd.data + (size_t)(c->pos + t) * m->pos_embd.row_bytes, c->xb, dim);
            add_rows(c->x + (size_t)t * dim, c->xb, dim);
        }
    }
    uint32_t half = in->rope_dims / 2;
    /* the global layers' table, and the windowed layers' (own base, no
     * position scaling) for a rope_local family */
    for (int set = 0; set < 1 + m->rope_local; set++) {
        float ms = set ? 1.0f : c->rope_mscale;
        const double *f = c->inv_freq + (size_t)set * half;
        float *cs = c->rcos + (size_t)set * c->batch * half, *sn = c->rsin + (size_t)set * c->batch * half;
        for (uint32_t t = 0; t < nt; t++)
            for (uint32_t i = 0; i < half; i++) {
                double th = (double)(c->pos + t) * f[i];
                cs[t * half + i] = (float)cos(th) * ms;
                sn[t * half + i] = (float)sin(th) * ms;
            }
    }
    for (uint32_t l = 0; l < in->n_layers; l++) {
        if (m->layers[l].n_heads)
            attention_block(c, l, nt);
        if (m->layers[l].ffn)
            ffn_block(c, l, nt);
        else if (m->layers[l].moe.n)
            moe_block(c, l, nt);
    }
}

/* Logits of batch rows [first, first+count) into out (count x n_vocab). */
static void logits_rows(eng_ctx *c, uint32_t first, uint32_t count, float *out)
{
    const eng_model *m = c->m;
    norm_rows(c, c->xb, c->x + (size_t)first * m->info.dim, count, m->out_norm, m->out_norm_b);
    matmul1(c, c->xb, count, &m->output, out);
    if (m->logit_softcap > 0) {
        float cap = m->logit_softcap;
        for (size_t i = 0; i < (size_t)count * m->info.n_vocab; i++)
            out[i] = cap * tanhf(out[i] / cap);
    }
}

int eng_ctx_eval(eng_ctx *c, const int32_t *tokens, uint32_t n, float *logits, int all_logits, eng_err *e)
{
    const eng_model_info *in = &c->m->info;
    if (n == 0)
        return eng_errf(e, ENG_EINVAL, "no tokens to evaluate");
    if (n > c->n_ctx - c->pos)
        return eng_errf(e, ENG_EINVAL, "context full: %u tokens do not fit (%u of %u positions used)", n, c->pos,
                        c->n_ctx);
    for (uint32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= in->n_vocab)
            return eng_errf(e, ENG_EINVAL, "token id %d is outside the vocabulary (0..%u)", tokens[i], in->n_vocab - 1);
    for (uint32_t done = 0; done < n;) {
        uint32_t nt = n - done < c->batch ? n - done : c->batch;
        forward_batch(c, tokens + done, nt);
        c->pos += nt;
        if (c->pos > c->high)
            c->high = c->pos;
        if (logits && all_logits)
            logits_rows(c, 0, nt, logits + (size_t)done * in->n_vocab);
        else if (logits && done + nt == n)
            logits_rows(c, nt - 1, 1, logits);
        done += nt;
    }
    return 0;
}

/* ---- context lifetime ---- */

static int ensure_scores(eng_ctx *c, int threads)
{
    if (threads <= c->scores_threads)
        return 0;
    float *s = realloc(c->scores, (size_t)threads * c->scores_per_thread * sizeof(float));
    if (!s)
        return ENG_ENOMEM;
    c->scores = s;
    c->scores_threads = threads;
    return 0;
}

int eng_ctx_set_threads(eng_ctx *c, int n_threads)
{
    if (n_threads <= 0)
        n_threads = eng_physical_cores();
    if (n_threads > 256)
        n_threads = 256;
    if (c->pool && eng_pool_threads(c->pool) == n_threads)
        return 0;
    if (ensure_scores(c, n_threads))
        return ENG_ENOMEM;
    eng_pool *p = eng_pool_new(n_threads);
    if (!p)
        return ENG_ENOMEM;
    if (!c->pool_borrowed)
        eng_pool_free(c->pool);
    c->pool = p;
    c->pool_borrowed = 0;
    return 0;
}

int eng_ctx_share_pool(eng_ctx *c, eng_ctx *owner)
{
    if (c->pool == owner->pool)
        return 0;
    if (ensure_scores(c, eng_pool_threads(owner->pool)))
        return ENG_ENOMEM;
    if (!c->pool_borrowed)
        eng_pool_free(c->pool);
    c->pool = owner->pool;
    c->pool_borrowed = 1;
    return 0;
}

int eng_ctx_threads(const eng_ctx *c) { return eng_pool_threads(c->pool); }

/* Positions a layer's cache holds for a context of n_ctx: all, or a
 * windowed layer's ring (see the top of this file). */
static uint32_t kv_slots(const eng_layer *L, uint32_t n_ctx)
{
    if (!L->window)
        return n_ctx;
    uint64_t ring = ((uint64_t)L->window + BATCH - 1 + SIMD_ATTN_CHUNK - 1) / SIMD_ATTN_CHUNK * SIMD_ATTN_CHUNK;
    return ring < n_ctx ? (uint32_t)ring : n_ctx;
}

static const char *const kv_names[ENG_KV_COUNT] = {"f16", "q8_0", "q4_0"};

const char *eng_kv_type_name(int t) { return t >= 0 && t < ENG_KV_COUNT ? kv_names[t] : "?"; }

int eng_kv_type_parse(const char *s)
{
    for (int t = 0; s && t < ENG_KV_COUNT; t++)
        if (!strcmp(s, kv_names[t]))
            return t;
    return -1;
}

int eng_kv_int8_scores(uint32_t head_dim, int type_k, int type_v)
{
    return type_k != ENG_KV_F16 && type_v != ENG_KV_F16 && head_dim % SIMD_QK == 0;
}

uint64_t eng_model_kv_bytes_typed(const eng_model *m, uint32_t n_ctx, int full, int type_k, int type_v)
{
    uint64_t b = 0;
    if (type_k < 0 || type_k >= ENG_KV_COUNT || type_v < 0 || type_v >= ENG_KV_COUNT)
        return 0;
    for (uint32_t l = 0; l < m->info.n_layers; l++) {
        const eng_layer *L = &m->layers[l];
        size_t n = (size_t)L->n_kv_heads * m->info.head_dim, rk = kv_row_bytes(type_k, n), rv = kv_row_bytes(type_v, n);
        if (n && (!rk || !rv))
            return 0;
        b += (uint64_t)(rk + rv) * (full ? n_ctx : kv_slots(L, n_ctx));
    }
    return b;
}

uint64_t eng_model_kv_bytes(const eng_model *m, uint32_t n_ctx, int full)
{
    return eng_model_kv_bytes_typed(m, n_ctx, full, ENG_KV_F16, ENG_KV_F16);
}

size_t eng_ctx_kv_bytes(const eng_ctx *c)
{
    return (size_t)eng_model_kv_bytes_typed(c->m, c->n_ctx, 0, c->kv_type[0], c->kv_type[1]);
}

int eng_ctx_kv_type(const eng_ctx *c, int v) { return c->kv_type[v ? 1 : 0]; }

/* The mixture of experts' scratch (sizes at struct eng_ctx). */
static int moe_alloc(eng_ctx *c)
{
    const eng_model_info *in = &c->m->info;
    size_t ne = in->n_expert, rows = (size_t)c->batch * in->n_expert_used, ff = in->expert_ffn, dim = in->dim;
    size_t w = ff > dim ? ff : dim;
    c->rlog = malloc(c->batch * ne * sizeof *c->rlog);
    c->sel = malloc(rows * sizeof *c->sel);
    c->selw = malloc(rows * sizeof *c->selw);
    c->gidx = malloc(rows * sizeof *c->gidx);
    c->gtok = malloc(rows * sizeof *c->gtok);
    c->gexp = malloc(rows * sizeof *c->gexp);
    c->ecount = malloc(ne * sizeof *c->ecount);
    c->estart = malloc(ne * sizeof *c->estart);
    c->xe = malloc(rows * dim * sizeof(float));
    c->ye = malloc(rows * dim * sizeof(float));
    c->he = malloc(rows * ff * sizeof(float));
    c->he2 = malloc(rows * ff * sizeof(float));
    c->eact = malloc(rows * simd_act_row_bytes(SIMD_ACT_Q8, (w + SIMD_QK - 1) / SIMD_QK * SIMD_QK) + 64);
    c->eact_k = malloc(rows * simd_act_row_bytes(SIMD_ACT_Q8K, (w + SIMD_QKK - 1) / SIMD_QKK * SIMD_QKK) + 64);
    c->eparts = malloc(2 * ne * sizeof *c->eparts);
    c->eview = calloc(2 * ne, sizeof *c->eview);
    return !c->rlog || !c->sel || !c->selw || !c->gidx || !c->gtok || !c->gexp || !c->ecount || !c->estart ||
                   !c->xe || !c->ye || !c->he || !c->he2 || !c->eact || !c->eact_k || !c->eparts || !c->eview
               ? ENG_ENOMEM
               : 0;
}

/* Each rotated pair's angle per position: base^(-2i/dims), divided by a
 * frequency factor (Llama 3) and by a linear scale, or YaRN's blend as
 * llama.cpp computes it: pairs below the "fast" correction dimension keep
 * their angle, pairs above the "slow" one are interpolated by the factor,
 * a linear ramp between; cos and sin then carry 1 + 0.1 ln(factor). */
static void rope_setup(eng_ctx *c)
{
    const eng_model *m = c->m;
    const eng_model_info *in = &m->info;
    uint32_t dims = in->rope_dims;
    float lo = 0, hi = 0;
    c->rope_mscale = m->rope_attn_factor > 0 ? m->rope_attn_factor : 1.0f;
    if (in->rope_yarn > 0) {
        /* the pair that turns beta times over the original context */
        double k = dims / (2.0 * log((double)in->rope_base)), two_pi = 2 * 3.14159265358979323846;
        lo = floorf((float)(k * log(m->yarn_orig_ctx / (32.0 * two_pi))));
        hi = ceilf((float)(k * log(m->yarn_orig_ctx / (1.0 * two_pi))));
        lo = lo > 0 ? lo : 0;
        hi = hi < dims - 1 ? hi : (float)(dims - 1);
        c->rope_mscale *= 1.0f + 0.1f * logf(in->rope_yarn);
    }
    for (uint32_t i = 0; i < dims / 2; i++) {
        double f = pow((double)in->rope_base, -2.0 * i / dims);
        if (m->rope_freqs)
            f /= m->rope_freqs[i];
        if (in->rope_yarn > 0) {
            float y = (i - lo) / (hi - lo > 0.001f ? hi - lo : 0.001f);
            float keep = 1 - (y < 0 ? 0 : y > 1 ? 1 : y); /* 1: extrapolate (keep), 0: interpolate */
            f = f / in->rope_yarn * (1 - keep) + f * keep;
        } else {
            f /= in->rope_scale;
        }
        c->inv_freq[i] = f;
        c->inv_freq[dims / 2 + i] = pow((double)m->rope_base_local, -2.0 * i / dims);
    }
}

int eng_ctx_new(eng_model *m, uint32_t n_ctx, int n_threads, eng_ctx **out, eng_err *e)
{
    eng_ctx_opts o = {.n_ctx = n_ctx, .n_threads = n_threads};
    return eng_ctx_new_opts(m, &o, out, e);
}

int eng_ctx_new_opts(eng_model *m, const eng_ctx_opts *o, eng_ctx **out, eng_err *e)
{
    *out = NULL;
    const eng_model_info *in = &m->info;
    uint32_t n_ctx = o->n_ctx;
    int n_threads = o->n_threads;
    for (int w = 0; w < 2; w++) {
        int t = w ? o->type_v : o->type_k;
        if (t < 0 || t >= ENG_KV_COUNT)
            return eng_errf(e, ENG_EINVAL, "unknown %s cache type %d (allowed: %s)", w ? "V" : "K", t,
                            ENG_KV_TYPE_NAMES);
        for (uint32_t l = 0; t != ENG_KV_F16 && l < in->n_layers; l++) {
            uint32_t nkv = m->layers[l].n_kv_heads;
            if ((size_t)nkv * in->head_dim % SIMD_QK)
                return eng_errf(e, ENG_EINVAL,
                                "%s cache type %s needs rows of a multiple of %d values, but layer %u's are %u "
                                "(%u kv heads x head size %u); use f16",
                                w ? "V" : "K", kv_names[t], SIMD_QK, l, nkv * in->head_dim, nkv, in->head_dim);
        }
    }
    if (n_ctx == 0)
        n_ctx = in->ctx_train < 4096 ? in->ctx_train : 4096;
    if (m->pos_embd.data && n_ctx > in->ctx_train)
        return eng_errf(e, ENG_EINVAL, "context size %u is larger than this model's %u learned positions", n_ctx,
                        in->ctx_train);
    if (n_ctx == 0 || n_ctx > (1u << 20))
        return eng_errf(e, ENG_EINVAL, "context size %u is outside 1..%u", n_ctx, 1u << 20);
    if (o->n_batch > BATCH)
        return eng_errf(e, ENG_EINVAL, "batch size %u is outside 1..%u", o->n_batch, BATCH);
    eng_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    c->m = m;
    c->n_ctx = n_ctx;
    c->split_floats = o->split_floats ? o->split_floats : TOK_PAR_FLOATS;
    c->batch = o->n_batch ? o->n_batch : BATCH;
    c->kv_type[0] = o->type_k;
    c->kv_type[1] = o->type_v;
    if (o->type_k != ENG_KV_F16 || o->type_v != ENG_KV_F16)
        c->kvq_floats = (size_t)SIMD_ATTN_CHUNK * in->head_dim; /* 2 x 64 rows of halves */
    c->kv_int8 = eng_kv_int8_scores(in->head_dim, o->type_k, o->type_v);
    c->kv_heads = in->head_dim && (in->head_dim % SIMD_QK == 0 || (o->type_k == ENG_KV_F16 && o->type_v == ENG_KV_F16));
    c->kt = c->kv_heads && o->type_k == ENG_KV_F16;
    if (c->kv_int8) /* simd_attn_q_tile's buffer instead */
        c->kvq_floats = (SIMD_ATTN_Q_BUF(in->head_dim) + sizeof(float) - 1) / sizeof(float);
    uint32_t grp_max = 1;
    for (uint32_t l = 0; l < in->n_layers; l++)
        if (m->layers[l].n_kv_heads && m->layers[l].n_heads / m->layers[l].n_kv_heads > grp_max)
            grp_max = m->layers[l].n_heads / m->layers[l].n_kv_heads;
    c->grp_max = grp_max;
    c->nch_max = (n_ctx + SIMD_ATTN_CHUNK - 1) / SIMD_ATTN_CHUNK;
    /* a task's scores, a tile's K and V as floats, then its chunk rows:
     * one token's over n_ctx, or a tile's (ATT_TILE_BYTES at least) */
    size_t tok_rows = (size_t)grp_max * c->nch_max * (in->head_dim + 2);
    if (tok_rows < ATT_TILE_BYTES / sizeof(float))
        tok_rows = ATT_TILE_BYTES / sizeof(float);
    c->scores_per_thread = (size_t)grp_max * SIMD_ATTN_CHUNK + SIMD_ATTN_TILE_BUF(in->head_dim) + tok_rows + c->kvq_floats;
    size_t nq = m->max_q, nkvd = m->max_kv, dim = in->dim, ffn = m->max_ffn ? m->max_ffn : 1;
    size_t maxc = dim > nq ? dim : nq;
    if (ffn > maxc)
        maxc = ffn;
    size_t kvb[2] = {0, 0};
    c->apart = malloc((in->head_dim ? nq / in->head_dim : 1) * c->nch_max * (in->head_dim + 2) * sizeof(float) + 1);
    c->kv_left = malloc((in->head_dim ? nkvd / in->head_dim : 1) * sizeof *c->kv_left + 1);
    c->kv_off[0] = malloc(in->n_layers * sizeof *c->kv_off[0]);
    c->kv_off[1] = malloc(in->n_layers * sizeof *c->kv_off[1]);
    c->kv_slots = malloc(in->n_layers * sizeof *c->kv_slots);
    for (uint32_t l = 0; c->kv_off[0] && c->kv_off[1] && c->kv_slots && l < in->n_layers; l++) {
        c->kv_slots[l] = kv_slots(&m->layers[l], n_ctx);
        for (int w = 0; w < 2; w++) {
            c->kv_off[w][l] = kvb[w];
            kvb[w] += kv_row_bytes(c->kv_type[w], (size_t)m->layers[l].n_kv_heads * in->head_dim) * c->kv_slots[l];
        }
    }
    c->kc = malloc(kvb[0] + 64); /* simd_attn_tile reads a K row up to 15 halves past its last position */
    c->vc = malloc(kvb[1] + 1);
    c->x = malloc((size_t)c->batch * dim * sizeof(float));
    c->xb = malloc((size_t)c->batch * maxc * sizeof(float));
    c->xb2 = malloc((size_t)c->batch * dim * sizeof(float));
    c->q = malloc((size_t)c->batch * nq * sizeof(float));
    c->k = malloc((size_t)c->batch * nkvd * sizeof(float));
    c->v = malloc((size_t)c->batch * nkvd * sizeof(float));
    c->att = malloc((size_t)c->batch * nq * sizeof(float));
    c->hb = malloc((size_t)c->batch * ffn * sizeof(float));
    c->hb2 = malloc((size_t)c->batch * ffn * sizeof(float));
    c->act = malloc((size_t)c->batch * simd_act_row_bytes(SIMD_ACT_Q8, (maxc + SIMD_QK - 1) / SIMD_QK * SIMD_QK) + 64);
    c->act_k = malloc((size_t)c->batch * simd_act_row_bytes(SIMD_ACT_Q8K, (maxc + SIMD_QKK - 1) / SIMD_QKK * SIMD_QKK) + 64);
    c->inv_freq = malloc(2 * (in->rope_dims / 2 + 1) * sizeof(double));
    c->rcos = malloc(2 * (size_t)c->batch * (in->rope_dims / 2 + 1) * sizeof(float));
    c->rsin = malloc(2 * (size_t)c->batch * (in->rope_dims / 2 + 1) * sizeof(float));
    c->embrow = malloc(m->tok_embd.row_bytes + 64);
    if (c->kv_int8)
        c->qq = malloc((size_t)c->batch * nq / SIMD_QK * sizeof *c->qq + 1);
    if (!c->embrow || !c->kc || !c->vc || !c->x || !c->xb || !c->xb2 || !c->q || !c->k || !c->v || !c->att || !c->hb || !c->hb2 ||
        !c->act || !c->act_k || !c->inv_freq || !c->rcos || !c->rsin || !c->kv_off[0] || !c->kv_off[1] ||
        !c->kv_slots || !c->apart || !c->kv_left || (c->kv_int8 && !c->qq)) {
        eng_ctx_free(c);
        return eng_errf(e, ENG_ENOMEM, "out of memory for a context of %u tokens (KV cache %.1f MB)", n_ctx,
                        (double)(kvb[0] + kvb[1]) / 1e6);
    }
    if (in->n_expert && moe_alloc(c)) {
        eng_ctx_free(c);
        return eng_errf(e, ENG_ENOMEM, "out of memory for the experts' buffers");
    }
    rope_setup(c);
    if (eng_ctx_set_threads(c, n_threads)) {
        eng_ctx_free(c);
        return eng_errf(e, ENG_ENOMEM, "cannot start %d worker threads", n_threads);
    }
    *out = c;
    return 0;
}

void eng_ctx_free(eng_ctx *c)
{
    if (!c)
        return;
    if (!c->pool_borrowed)
        eng_pool_free(c->pool);
    free(c->kc); free(c->vc); free(c->x); free(c->xb); free(c->xb2);
    free(c->q); free(c->k); free(c->v); free(c->att); free(c->hb); free(c->hb2);
    free(c->rlog); free(c->sel); free(c->selw); free(c->gidx); free(c->gtok); free(c->gexp); free(c->ecount);
    free(c->estart); free(c->xe); free(c->ye); free(c->he); free(c->he2); free(c->eact); free(c->eact_k);
    free(c->eparts); free(c->eview);
    free(c->scores); free(c->apart); free(c->kv_left); free(c->act); free(c->act_k); free(c->inv_freq); free(c->rcos); free(c->rsin); free(c->embrow); free(c->qq); free(c->kv_off[0]); free(c->kv_off[1]); free(c->kv_slots);
    free(c);
}

uint32_t eng_ctx_size(const eng_ctx *c) { return c->n_ctx; }

void eng_ctx_set_observer(eng_ctx *c, eng_mm_observer fn, void *user)
{
    c->obs = fn;
    c->obs_user = user;
}

void eng_ctx_set_expert_observer(eng_ctx *c, eng_expert_observer fn, void *user)
{
    c->eobs = fn;
    c->eobs_user = user;
}
uint32_t eng_ctx_pos(const eng_ctx *c) { return c->pos; }

uint32_t eng_ctx_truncate(eng_ctx *c, uint32_t pos)
{
    if (pos >= c->pos)
        return c->pos;
    /* A windowed layer's ring has written every position below high; the
     * oldest key that positions from pos on read, q = pos - window + 1,
     * is still in its slot unless a position q + slots was written. */
    for (uint32_t l = 0; l < c->m->info.n_layers && pos; l++) {
        uint32_t w = c->m->layers[l].window, slots = c->kv_slots[l];
        uint64_t q = w && pos + 1 > w ? pos + 1 - w : 0;
        if (w && c->m->layers[l].n_heads && q + slots < c->high)
            pos = 0;
    }
    c->pos = pos;
    if (pos == 0)
        c->high = 0;
    return pos;
}
