/* The forward pass of the decoder families: pre-norm blocks (RMSNorm, or
 * LayerNorm with bias for gpt2), RoPE (or learned positions for gpt2),
 * grouped-query attention over an f16 KV cache, SwiGLU (or GELU for
 * gpt2). Head counts and FFN sizes may differ per layer.
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

#define BATCH 32u
/* Below this many weight bytes (times tokens) a matmul runs on the calling
 * thread alone: waking and joining the workers costs a few microseconds. */
#define SMALL_MATMUL_BYTES (192u * 1024u)
/* The least weight bytes a thread takes at once from a shared matmul. */
#define MM_CHUNK_BYTES (64u * 1024u)

struct eng_ctx {
    eng_model *m;
    uint32_t n_ctx, pos;
    eng_pool *pool;
    simd_f16 *kc, *vc;     /* per layer l: [n_ctx][n_kv(l)*head_dim] at kv_off[l] */
    size_t *kv_off;        /* [n_layers] */
    float *x, *xb, *xb2;   /* [BATCH][dim] */
    float *q, *k, *v;      /* [BATCH][n_heads*hd], [BATCH][n_kv*hd] x2 */
    float *att;            /* [BATCH][n_heads*hd] attention output */
    float *hb, *hb2;       /* [BATCH][ffn] */
    float *scores;         /* [threads][scores_per_thread]: scratch and chunk rows of a task */
    size_t scores_per_thread;
    uint32_t grp_max;      /* most query heads sharing a kv head, over layers */
    size_t nch_max;        /* attention chunks in n_ctx positions */
    float *apart;          /* [n_heads][nch_max][head_dim+2]: chunk rows of one token, split over threads */
    int scores_threads;
    void *act;             /* [BATCH] activation rows, q8 format */
    void *act_k;           /* [BATCH] activation rows, q8k format (K-quant weights) */
    eng_mm_observer obs;   /* optional: sees every matmul's input (AWQ statistics) */
    void *obs_user;
    double *inv_freq;      /* [rope_dims/2] */
    float *rcos, *rsin;    /* [BATCH][rope_dims/2] */
    void *embrow;          /* one embedding row, taken out of a packed output matrix */
};

/* ---- matmul: up to three weights sharing one input, split by rows ---- */

typedef struct mm_part {
    const eng_weight *w;
    const void *act;
    size_t astride;
    float *out;   /* out[t * ostride + row] */
    size_t ostride;
    simd_dot_packed_fn dot_packed; /* set when w's packed rows are used */
    size_t gbytes;                 /* bytes per packed group */
    uint32_t packed_rows;          /* w's packed rows when the job began */
} mm_part;

typedef struct mm_job {
    mm_part p[3];
    int np;
    uint32_t nt, total; /* tokens; rows of all parts */
    uint64_t bytes;     /* weight bytes of all parts */
} mm_job;

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
 * equal shares of the weight bytes rather than rows: a range's time is
 * the time to stream its bytes, and the weights of one job may differ in
 * type (q4_k_m files mix q4_k, q6_k, q5_0 and q8_0). */
static uint32_t mm_edge(const mm_job *j, uint32_t u)
{
    if (u >= j->total)
        return j->total;
    uint64_t target = j->bytes * (uint64_t)u / (uint64_t)j->total, bbase = 0;
    uint32_t base = 0;
    for (int i = 0; i < j->np; i++) {
        const eng_weight *w = j->p[i].w;
        uint64_t wb = (uint64_t)w->rows * w->row_bytes;
        if (target < bbase + wb)
            return base + (uint32_t)((target - bbase) / w->row_bytes);
        bbase += wb;
        base += w->rows;
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
                              (end - a) / SIMD_PACK_ROWS, p->act, p->astride, j->nt, p->out + a, p->ostride);
                a = end;
            }
        }
        if (hi > base && a < b) {
            /* all of this worker's rows in one call: the kernel shares
             * activation work across them */
            const char *row = (const char *)w->data + (size_t)a * w->row_bytes;
            simd_type_traits(w->type)->dot_rows(w->cols, row, w->row_bytes, b - a, p->act, p->astride, j->nt,
                                                p->out + a, p->ostride);
        }
        base += w->rows;
        if (base >= hi)
            break;
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
    if (need_q8)
        for (uint32_t t = 0; t < nt; t++)
            simd_act_quant(SIMD_ACT_Q8, x + (size_t)t * cols, (char *)c->act + t * qstride, cols);
    if (need_q8k)
        for (uint32_t t = 0; t < nt; t++)
            simd_act_quant(SIMD_ACT_Q8K, x + (size_t)t * cols, (char *)c->act_k + t * kstride, cols);
    mm_job j = {.np = np, .nt = nt, .total = 0};
    for (int i = 0; i < np; i++) {
        int q8 = w[i]->act == SIMD_ACT_Q8, q8k = w[i]->act == SIMD_ACT_Q8K;
        j.p[i] = (mm_part){w[i], q8 ? c->act : q8k ? c->act_k : (const void *)x,
                           q8 ? qstride : q8k ? kstride : cols * sizeof(float), out[i], w[i]->rows, NULL, 0, 0};
        /* the packed rows, if the active set reads them (it may have been
         * switched since the model was packed); read once, so every
         * worker splits the same way while packing goes on */
        if (w[i]->packed && (j.p[i].dot_packed = simd_type_traits(w[i]->type)->dot_packed)) {
            j.p[i].gbytes = simd_pack_group_bytes(w[i]->type, w[i]->cols);
            j.p[i].packed_rows = atomic_load_explicit(&w[i]->packed_rows, memory_order_acquire);
        }
        j.total += w[i]->rows;
        j.bytes += (uint64_t)w[i]->rows * w[i]->row_bytes;
    }
    /* A small product costs less than waking the workers: run it here. */
    if (j.bytes * nt < SMALL_MATMUL_BYTES)
        mm_range(&j, 0, j.total);
    else
        /* each thread streams one contiguous share of the rows, then
         * helps with what is left of the other's in pieces of at least
         * MM_CHUNK_BYTES: every fresh start costs the kernel its prefetch
         * ramp (about a microsecond), so small interleaved parts cost more
         * than the imbalance they remove (eight equal parts for two
         * threads: 10-15% slower decode of qwen05 q4_0). */
        eng_pool_run_range(c->pool, mm_range, &j, j.total,
                           (uint32_t)((uint64_t)MM_CHUNK_BYTES * j.total / j.bytes + 1));
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

/* nt rows of dim: the model's norm kind, with weight g and bias b */
static void norm_rows(const eng_model *m, float *out, const float *x, uint32_t nt, const float *g, const float *b)
{
    uint32_t dim = m->info.dim;
    for (uint32_t t = 0; t < nt; t++) {
        if (m->norm == ENG_NORM_LAYER)
            layernorm(out + (size_t)t * dim, x + (size_t)t * dim, g, b, dim, m->info.norm_eps);
        else
            rmsnorm(out + (size_t)t * dim, x + (size_t)t * dim, g, dim, m->info.norm_eps);
    }
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

/* ---- attention: one task per (token, kv head), or per (kv head, range
 * of chunks) when a single token would leave threads idle ----
 * The query heads that share a kv head go to simd_attn_chunk together, so
 * each cached K and V row is read once for all of them. Positions go in
 * chunks of SIMD_ATTN_CHUNK whose rows simd_attn_merge combines; the
 * result does not depend on which heads or chunks a task was given
 * (simd.h), so how the work is cut changes no bits. */

typedef struct att_job {
    eng_ctx *c;
    uint32_t layer, nt, pos;
    uint32_t split; /* tasks per (token, kv head): > 1 only for one token */
} att_job;

static void att_worker(void *arg, int ith, int nth)
{
    const att_job *j = arg;
    eng_ctx *c = j->c;
    const eng_layer *L = &c->m->layers[j->layer];
    uint32_t hd = c->m->info.head_dim, nh = L->n_heads, nkv = L->n_kv_heads, grp = nh / nkv;
    size_t nkvd = (size_t)nkv * hd, row = (size_t)hd + 2;
    float *scratch = c->scores + (size_t)ith * c->scores_per_thread;
    float *tparts = scratch + (size_t)c->grp_max * SIMD_ATTN_CHUNK; /* [chunk][head of the group][row] */
    const simd_f16 *kl = c->kc + c->kv_off[j->layer], *vl = c->vc + c->kv_off[j->layer];
    simd_attn_args a = {.hd = hd, .nq = grp, .qstride = hd, .kvstride = nkvd, .scale = 1.0f / sqrtf((float)hd),
                        .scratch = scratch};
    uint32_t per_tok = nkv * j->split;
    for (uint32_t task = (uint32_t)ith; task < j->nt * per_tok; task += (uint32_t)nth) {
        uint32_t t = task / per_tok, g = task % per_tok / j->split, r = task % j->split;
        size_t n = (size_t)j->pos + t + 1, nch = (n + SIMD_ATTN_CHUNK - 1) / SIMD_ATTN_CHUNK;
        size_t c0 = nch * r / j->split, c1 = nch * (r + 1) / j->split;
        /* one task per token: rows in this thread's buffer, merged here;
         * split: rows in c->apart ([head][chunk]), merged by the caller */
        float *base = j->split == 1 ? tparts : c->apart + (size_t)g * grp * c->nch_max * row;
        size_t cstride = j->split == 1 ? grp * row : row;
        a.pstride = j->split == 1 ? row : c->nch_max * row;
        a.q = c->q + (size_t)t * nh * hd + (size_t)g * grp * hd;
        for (size_t ch = c0; ch < c1; ch++) {
            size_t p0 = ch * SIMD_ATTN_CHUNK;
            a.n = n - p0 < SIMD_ATTN_CHUNK ? n - p0 : SIMD_ATTN_CHUNK;
            a.k = kl + p0 * nkvd + (size_t)g * hd;
            a.v = vl + p0 * nkvd + (size_t)g * hd;
            a.part = base + ch * cstride;
            simd_attn_chunk(&a);
        }
        if (j->split == 1)
            for (uint32_t h = 0; h < grp; h++)
                simd_attn_merge(hd, nch, tparts + h * row, cstride,
                                c->att + (size_t)t * nh * hd + (size_t)(g * grp + h) * hd);
    }
}

/* Tasks per kv head for one token on nth threads: the fewest that make
 * the task count a multiple of the threads, at most one per chunk. */
static uint32_t att_split(uint32_t nkv, uint32_t nth, size_t nch)
{
    uint32_t s = 1;
    while ((nkv * s) % nth && s < nth && s < nch)
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

/* Per-head RMSNorm of nh heads of hd values (qwen3's q and k norms). */
static void head_norm(float *v, uint32_t nt, uint32_t nh, uint32_t hd, const float *g, float eps)
{
    if (!g)
        return;
    for (uint32_t i = 0; i < nt * nh; i++)
        rmsnorm(v + (size_t)i * hd, v + (size_t)i * hd, g, hd, eps);
}

static void add_rows(float *x, const float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] += y[i];
}

static void attention_block(eng_ctx *c, uint32_t l, uint32_t nt)
{
    const eng_model *m = c->m;
    const eng_model_info *in = &m->info;
    const eng_layer *L = &m->layers[l];
    uint32_t dim = in->dim, hd = in->head_dim, nq = L->n_heads * hd, nkvd = L->n_kv_heads * hd;
    uint32_t half = in->rope_dims / 2;
    norm_rows(m, c->xb, c->x, nt, L->attn_norm, L->attn_norm_b);
    const eng_weight *qkv[3] = {&L->wq, &L->wk, &L->wv};
    float *qkv_out[3] = {c->q, c->k, c->v};
    matmul(c, c->xb, nt, 3, qkv, qkv_out);
    add_bias(c->q, L->bq, nt, nq);
    add_bias(c->k, L->bk, nt, nkvd);
    add_bias(c->v, L->bv, nt, nkvd);
    head_norm(c->q, nt, L->n_heads, hd, L->q_norm, in->norm_eps);
    head_norm(c->k, nt, L->n_kv_heads, hd, L->k_norm, in->norm_eps);
    for (uint32_t t = 0; t < nt; t++) {
        if (half) {
            const float *cs = c->rcos + t * half, *sn = c->rsin + t * half;
            rope(c->q + (size_t)t * nq, L->n_heads, hd, in->rope_dims, in->rope_neox, cs, sn);
            rope(c->k + (size_t)t * nkvd, L->n_kv_heads, hd, in->rope_dims, in->rope_neox, cs, sn);
        }
        size_t at = c->kv_off[l] + (size_t)(c->pos + t) * nkvd;
        /* the cache holds halves, as llama.cpp's does by default: half
         * the bytes for attention to read, and within f16's range and
         * precision for keys and values */
        simd_f32_to_f16_row(c->k + (size_t)t * nkvd, c->kc + at, nkvd);
        simd_f32_to_f16_row(c->v + (size_t)t * nkvd, c->vc + at, nkvd);
    }
    att_job aj = {c, l, nt, c->pos, 1};
    /* attention reads the cache once per kv head for all the query heads
     * that share it, and its arithmetic grows with those heads: split it
     * when the cache bytes times the query heads per kv head are worth
     * waking the workers for */
    if ((size_t)(c->pos + nt) * nkvd * 2 * sizeof(simd_f16) * nt * (L->n_heads / L->n_kv_heads) < SMALL_MATMUL_BYTES) {
        att_worker(&aj, 0, 1);
    } else {
        uint32_t nth = (uint32_t)eng_pool_threads(c->pool);
        size_t nch = (c->pos + nt + SIMD_ATTN_CHUNK - 1) / SIMD_ATTN_CHUNK;
        if (nt == 1)
            aj.split = att_split(L->n_kv_heads, nth, nch);
        eng_pool_run(c->pool, att_worker, &aj);
        if (aj.split > 1)
            for (uint32_t h = 0; h < L->n_heads; h++)
                simd_attn_merge(hd, nch, c->apart + (size_t)h * c->nch_max * (hd + 2), hd + 2, c->att + (size_t)h * hd);
    }
    matmul1(c, c->att, nt, &L->wo, c->xb2);
    add_bias(c->xb2, L->bo, nt, dim);
    add_rows(c->x, c->xb2, (size_t)nt * dim);
}

static void ffn_block(eng_ctx *c, uint32_t l, uint32_t nt)
{
    const eng_model *m = c->m;
    const eng_layer *L = &m->layers[l];
    uint32_t dim = m->info.dim, ffn = L->ffn;
    size_t n = (size_t)nt * ffn;
    norm_rows(m, c->xb, c->x, nt, L->ffn_norm, L->ffn_norm_b);
    if (m->ffn_kind == ENG_FFN_GELU) {
        matmul1(c, c->xb, nt, &L->w_up, c->hb);
        add_bias(c->hb, L->b_up, nt, ffn);
        simd_gelu(c->hb, n);
    } else {
        const eng_weight *gu[2] = {&L->w_gate, &L->w_up};
        float *gu_out[2] = {c->hb, c->hb2};
        matmul(c, c->xb, nt, 2, gu, gu_out);
        add_bias(c->hb2, L->b_up, nt, ffn);
        simd_silu_mul(c->hb, c->hb2, n);
    }
    matmul1(c, c->hb, nt, &L->w_down, c->xb2);
    add_bias(c->xb2, L->b_down, nt, dim);
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
    if (m->pos_embd.data) {
        const simd_traits *pt = simd_type_traits(m->pos_embd.type);
        for (uint32_t t = 0; t < nt; t++) {
            pt->dequant((const char *)m->pos_embd.data + (size_t)(c->pos + t) * m->pos_embd.row_bytes, c->xb, dim);
            add_rows(c->x + (size_t)t * dim, c->xb, dim);
        }
    }
    uint32_t half = in->rope_dims / 2;
    for (uint32_t t = 0; t < nt; t++)
        for (uint32_t i = 0; i < half; i++) {
            double th = (double)(c->pos + t) / in->rope_scale * c->inv_freq[i];
            c->rcos[t * half + i] = (float)cos(th);
            c->rsin[t * half + i] = (float)sin(th);
        }
    for (uint32_t l = 0; l < in->n_layers; l++) {
        if (m->layers[l].n_heads)
            attention_block(c, l, nt);
        if (m->layers[l].ffn)
            ffn_block(c, l, nt);
    }
}

/* Logits of batch rows [first, first+count) into out (count x n_vocab). */
static void logits_rows(eng_ctx *c, uint32_t first, uint32_t count, float *out)
{
    const eng_model *m = c->m;
    norm_rows(m, c->xb, c->x + (size_t)first * m->info.dim, count, m->out_norm, m->out_norm_b);
    matmul1(c, c->xb, count, &m->output, out);
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
        uint32_t nt = n - done < BATCH ? n - done : BATCH;
        forward_batch(c, tokens + done, nt);
        c->pos += nt;
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
    eng_pool_free(c->pool);
    c->pool = p;
    return 0;
}

int eng_ctx_threads(const eng_ctx *c) { return eng_pool_threads(c->pool); }

size_t eng_ctx_kv_bytes(const eng_ctx *c) { return 2 * c->m->kv_floats * c->n_ctx * sizeof(simd_f16); }

int eng_ctx_new(eng_model *m, uint32_t n_ctx, int n_threads, eng_ctx **out, eng_err *e)
{
    *out = NULL;
    const eng_model_info *in = &m->info;
    if (n_ctx == 0)
        n_ctx = in->ctx_train < 4096 ? in->ctx_train : 4096;
    if (m->pos_embd.data && n_ctx > in->ctx_train)
        return eng_errf(e, ENG_EINVAL, "context size %u is larger than this model's %u learned positions", n_ctx,
                        in->ctx_train);
    if (n_ctx == 0 || n_ctx > (1u << 20))
        return eng_errf(e, ENG_EINVAL, "context size %u is outside 1..%u", n_ctx, 1u << 20);
    eng_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    c->m = m;
    c->n_ctx = n_ctx;
    uint32_t grp_max = 1;
    for (uint32_t l = 0; l < in->n_layers; l++)
        if (m->layers[l].n_kv_heads && m->layers[l].n_heads / m->layers[l].n_kv_heads > grp_max)
            grp_max = m->layers[l].n_heads / m->layers[l].n_kv_heads;
    c->grp_max = grp_max;
    c->nch_max = (n_ctx + SIMD_ATTN_CHUNK - 1) / SIMD_ATTN_CHUNK;
    c->scores_per_thread = (size_t)grp_max * SIMD_ATTN_CHUNK + (size_t)grp_max * c->nch_max * (in->head_dim + 2);
    size_t nq = m->max_q, nkvd = m->max_kv, dim = in->dim, ffn = m->max_ffn ? m->max_ffn : 1;
    size_t maxc = dim > nq ? dim : nq;
    if (ffn > maxc)
        maxc = ffn;
    size_t kv = m->kv_floats * n_ctx;
    c->apart = malloc((in->head_dim ? nq / in->head_dim : 1) * c->nch_max * (in->head_dim + 2) * sizeof(float) + 1);
    c->kv_off = malloc(in->n_layers * sizeof *c->kv_off);
    for (uint32_t l = 0, off = 0; c->kv_off && l < in->n_layers; l++) {
        c->kv_off[l] = (size_t)off * n_ctx;
        off += m->layers[l].n_kv_heads * in->head_dim;
    }
    c->kc = malloc(kv * sizeof(simd_f16) + 1);
    c->vc = malloc(kv * sizeof(simd_f16) + 1);
    c->x = malloc(BATCH * dim * sizeof(float));
    c->xb = malloc(BATCH * maxc * sizeof(float));
    c->xb2 = malloc(BATCH * dim * sizeof(float));
    c->q = malloc(BATCH * nq * sizeof(float));
    c->k = malloc(BATCH * nkvd * sizeof(float));
    c->v = malloc(BATCH * nkvd * sizeof(float));
    c->att = malloc(BATCH * nq * sizeof(float));
    c->hb = malloc(BATCH * ffn * sizeof(float));
    c->hb2 = malloc(BATCH * ffn * sizeof(float));
    c->act = malloc(BATCH * simd_act_row_bytes(SIMD_ACT_Q8, (maxc + SIMD_QK - 1) / SIMD_QK * SIMD_QK) + 64);
    c->act_k = malloc(BATCH * simd_act_row_bytes(SIMD_ACT_Q8K, (maxc + SIMD_QKK - 1) / SIMD_QKK * SIMD_QKK) + 64);
    c->inv_freq = malloc((in->rope_dims / 2 + 1) * sizeof(double));
    c->rcos = malloc(BATCH * (in->rope_dims / 2 + 1) * sizeof(float));
    c->rsin = malloc(BATCH * (in->rope_dims / 2 + 1) * sizeof(float));
    c->embrow = malloc(m->tok_embd.row_bytes + 64);
    if (!c->embrow || !c->kc || !c->vc || !c->x || !c->xb || !c->xb2 || !c->q || !c->k || !c->v || !c->att || !c->hb || !c->hb2 ||
        !c->act || !c->act_k || !c->inv_freq || !c->rcos || !c->rsin || !c->kv_off || !c->apart) {
        eng_ctx_free(c);
        return eng_errf(e, ENG_ENOMEM, "out of memory for a context of %u tokens (KV cache %.1f MB)", n_ctx,
                        2.0 * kv * sizeof(simd_f16) / 1e6);
    }
    for (uint32_t i = 0; i < in->rope_dims / 2; i++) {
        c->inv_freq[i] = pow((double)in->rope_base, -2.0 * i / in->rope_dims);
        if (m->rope_freqs)
            c->inv_freq[i] /= m->rope_freqs[i];
    }
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
    eng_pool_free(c->pool);
    free(c->kc); free(c->vc); free(c->x); free(c->xb); free(c->xb2);
    free(c->q); free(c->k); free(c->v); free(c->att); free(c->hb); free(c->hb2);
    free(c->scores); free(c->apart); free(c->act); free(c->act_k); free(c->inv_freq); free(c->rcos); free(c->rsin); free(c->embrow); free(c->kv_off);
    free(c);
}

uint32_t eng_ctx_size(const eng_ctx *c) { return c->n_ctx; }

void eng_ctx_set_observer(eng_ctx *c, eng_mm_observer fn, void *user)
{
    c->obs = fn;
    c->obs_user = user;
}
uint32_t eng_ctx_pos(const eng_ctx *c) { return c->pos; }

void eng_ctx_truncate(eng_ctx *c, uint32_t pos)
{
    if (pos < c->pos)
        c->pos = pos;
}
