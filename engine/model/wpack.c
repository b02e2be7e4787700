/* Weight packing: each matrix whose type the active kernel set reads
 * faster in the packed form (simd.h, "packed weights") gets its whole
 * 16-row groups copied into that form, so decode reads one sequential
 * stream per matrix with 16 rows in the vector lanes, which is what lets
 * a single core run at memory speed.
 *
 * The copy runs on a background thread started at load, so loading and
 * the first tokens cost what they cost without packing: the copies need
 * fresh memory, and first touches of fresh memory are slow on some
 * machines (seconds for a GB in some VMs). Each 1 MB chunk is published
 * as soon as it is packed (the weight's packed_rows grows, with release
 * order; a matmul reads it once, with acquire order, and takes the rows
 * below it packed and the rest from the file), and its source pages are
 * then dropped from the resident set, so the model is resident about
 * once at every moment, not twice. The file's pages stay in the page
 * cache and fault back in if anything still reads them: AWQ statistics,
 * the rows past the last whole group, a kernel set without packed
 * kernels. The thread runs at the lowest priority where the OS has one:
 * the engine's own threads go first. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "mapfile.h"
#include "model_internal.h"

#define CHUNK_BYTES ((size_t)1 << 20) /* unit of work and of publication */
#define WEIGHTS_PER_LAYER 10 /* 7 dense, or 4 dense and the experts' 3 */

typedef struct pack_item {
    eng_weight *w;
    size_t gbytes;   /* bytes per group */
    uint32_t g0, g1; /* groups of this chunk */
    int release;     /* the source is in the file mapping */
} pack_item;

struct eng_packer {
    pthread_t thread;
    int running;        /* a thread was started and not yet joined */
    atomic_int stop;
    pack_item *items;
    size_t n;
    void *buf;
    size_t bytes;
    size_t extra; /* bytes beyond the file's for the same matrices */
    const char *lo, *hi; /* the file's tensor bytes */
    unsigned touched;
};

static void pack_item_run(const pack_item *it)
{
    eng_weight *w = it->w;
    size_t rows = (size_t)(it->g1 - it->g0) * SIMD_PACK_ROWS;
    const char *src = (const char *)w->data + (size_t)it->g0 * SIMD_PACK_ROWS * w->row_bytes;
    simd_pack(w->type, w->cols, src, w->row_bytes, it->g1 - it->g0,
              (char *)(uintptr_t)w->packed + (size_t)it->g0 * it->gbytes);
    atomic_store_explicit(&w->packed_rows, it->g1 * SIMD_PACK_ROWS, memory_order_release);
    if (it->release)
        eng_map_release(src, rows * w->row_bytes);
}

/* Reads one byte of every page of the tensor bytes, from the last page
 * back. The first token walks the weights from the front, and on a VM
 * the first touch of each 4 KB page of a mapping costs about a
 * microsecond (more than reading it: docs/BENCHMARKS.md), so the pages
 * are touched from both ends at once and the two meet near the middle.
 * Measured on llama1b q4_0 with the file in 4 KB page-cache pages,
 * alternated (nibble bench -t 1 -p 0 -n 0 -r 3): first token 145-152 ms
 * against 230-245 ms at one thread; two threads, where both cores already
 * compute, unchanged (142-155 against 148-159). Pages already mapped cost
 * a cache miss each, so the rest of the walk is quick. */
static void touch_back(struct eng_packer *pk)
{
    const size_t page = 4096;
    unsigned sum = 0;
    if (!pk->lo || pk->hi <= pk->lo)
        return;
    size_t n = (size_t)(pk->hi - pk->lo), i = (n - 1) / page;
    for (size_t k = 0;; i--, k++) {
        sum += *(const volatile unsigned char *)(pk->lo + i * page);
        if (!i || ((k & 511) == 511 && atomic_load_explicit(&pk->stop, memory_order_relaxed)))
            break;
    }
    pk->touched = sum; /* keeps the loads */
}

static void pack_all(struct eng_packer *pk)
{
    for (size_t i = 0; i < pk->n && !atomic_load_explicit(&pk->stop, memory_order_relaxed); i++)
        pack_item_run(&pk->items[i]);
}

static void *pack_thread(void *arg)
{
    struct eng_packer *pk = arg;
#if defined(__linux__)
    /* Linux's nice is per thread: make this one yield to the engine */
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
#endif
    touch_back(pk);
    pack_all(pk);
    return NULL;
}

/* Whether weight w is worth packing with the active set. */
static int wants_pack(const eng_weight *w)
{
    const simd_traits *t = simd_type_traits(w->type);
    return w->data && w->rows >= SIMD_PACK_ROWS && t && t->dot_packed && simd_pack_has_layout(w->type);
}

/* Every matrix that may have a packed copy, in the forward pass's order. */
static size_t all_matrices(eng_model *m, eng_weight **ws)
{
    size_t n = 0;
    for (uint32_t l = 0; l < m->info.n_layers; l++) {
        eng_layer *L = &m->layers[l];
        eng_weight *lw[WEIGHTS_PER_LAYER] = {&L->wq,     &L->wk,     &L->wv,       &L->wo,      &L->w_gate,
                                             &L->w_up,   &L->w_down, &L->moe.gate, &L->moe.up, &L->moe.down};
        /* experts are packed only when each expert's rows are whole
         * groups: the forward pass reads an expert's share of them */
        int experts = L->moe.n && L->moe.ffn % SIMD_PACK_ROWS == 0 && m->info.dim % SIMD_PACK_ROWS == 0;
        for (int i = 0; i < WEIGHTS_PER_LAYER; i++)
            if (i < 7 || experts)
                ws[n++] = lw[i];
    }
    ws[n++] = &m->output;
    return n;
}

/* The weights to pack, in the order a forward pass reads them. */
static size_t collect(eng_model *m, eng_weight **ws)
{
    size_t n = 0, all = all_matrices(m, ws);
    for (size_t i = 0; i < all; i++)
        if (wants_pack(ws[i]))
            ws[n++] = ws[i];
    return n;
}

/* [lo, hi): the file bytes holding tensor data. Sources outside it, such
 * as buffers converted at load, are kept: dropping their pages would
 * lose them. */
static void tensor_range(const eng_model *m, const char **lo, const char **hi)
{
    *lo = *hi = NULL;
    for (uint64_t i = 0; i < eng_gguf_n_tensors(m->gguf); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(m->gguf, i);
        const char *a = t->data, *b = a + t->size;
        if (!*lo || a < *lo)
            *lo = a;
        if (!*hi || b > *hi)
            *hi = b;
    }
}

int eng_model_pack_start(eng_model *m, int background, eng_err *e)
{
    size_t cap = (size_t)m->info.n_layers * WEIGHTS_PER_LAYER + 1;
    eng_weight **ws = malloc(cap * sizeof *ws);
    struct eng_packer *pk = calloc(1, sizeof *pk);
    if (!ws || !pk) {
        free(ws);
        free(pk);
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    }
    size_t nw = collect(m, ws), total = 0, nitems = 0, extra = 0;
    for (size_t i = 0; i < nw; i++) {
        size_t gb = simd_pack_group_bytes(ws[i]->type, ws[i]->cols), ng = ws[i]->rows / SIMD_PACK_ROWS;
        size_t per = CHUNK_BYTES / gb ? CHUNK_BYTES / gb : 1;
        total += ng * gb;
        nitems += (ng + per - 1) / per;
        size_t file = ng * SIMD_PACK_ROWS * ws[i]->row_bytes; /* of the rows packed */
        extra += ng * gb > file ? ng * gb - file : 0;
    }
    if (!total) {
        free(ws);
        free(pk);
        return 0;
    }
    pk->buf = eng_map_anon(total);
    pk->bytes = total;
    pk->extra = extra;
    pk->items = malloc(nitems * sizeof *pk->items);
    if (!pk->buf || !pk->items) {
        eng_map_anon_free(pk->buf, total);
        free(pk->items);
        free(pk);
        free(ws);
        return eng_errf(e, ENG_ENOMEM, "out of memory for %zu MB of packed weights", total >> 20);
    }
    const char *lo, *hi;
    tensor_range(m, &lo, &hi);
    pk->lo = lo;
    pk->hi = hi;
    size_t off = 0;
    for (size_t i = 0; i < nw; i++) {
        eng_weight *w = ws[i];
        size_t gb = simd_pack_group_bytes(w->type, w->cols), ng = w->rows / SIMD_PACK_ROWS;
        size_t per = CHUNK_BYTES / gb ? CHUNK_BYTES / gb : 1;
        const char *d = w->data;
        int release = lo && d >= lo && d + (size_t)w->rows * w->row_bytes <= hi;
        for (size_t g = 0; g < ng; g += per)
            pk->items[pk->n++] = (pack_item){w, gb, (uint32_t)g, (uint32_t)(g + per < ng ? g + per : ng), release};
        w->packed = (char *)pk->buf + off;
        off += ng * gb;
    }
    free(ws);
    m->packer = pk;
    if (background && pthread_create(&pk->thread, NULL, pack_thread, pk) == 0)
        pk->running = 1;
    else
        pack_all(pk); /* here and now: asked to, or no thread to be had */
    return 0;
}

uint64_t eng_model_pack_extra_bytes(const eng_model *m)
{
    return m->packer ? m->packer->extra : 0;
}

void eng_model_pack_wait(eng_model *m)
{
    struct eng_packer *pk = m ? m->packer : NULL;
    if (pk && pk->running) {
        pthread_join(pk->thread, NULL);
        pk->running = 0;
    }
}

void eng_model_pack_free(eng_model *m)
{
    struct eng_packer *pk = m->packer;
    if (!pk)
        return;
    atomic_store(&pk->stop, 1);
    eng_model_pack_wait(m);
    eng_map_anon_free(pk->buf, pk->bytes);
    free(pk->items);
    free(pk);
    m->packer = NULL;
}

void eng_model_kernel_changed(eng_model *m)
{
    if (!m)
        return;
    size_t cap = (size_t)m->info.n_layers * WEIGHTS_PER_LAYER + 1, n;
    eng_weight **ws = malloc(cap * sizeof *ws);
    if (!ws)
        return; /* the copies stay: slower or larger, never wrong */
    n = all_matrices(m, ws);
    int reads = 0;
    for (size_t i = 0; i < n; i++)
        reads |= ws[i]->packed != NULL && simd_type_traits(ws[i]->type)->dot_packed != NULL;
    if (m->packer && !reads) {
        eng_model_pack_free(m);
        for (size_t i = 0; i < n; i++) {
            ws[i]->packed = NULL;
            atomic_store_explicit(&ws[i]->packed_rows, 0, memory_order_release);
        }
    } else if (!m->packer && !m->no_pack) {
        (void)eng_model_pack_start(m, 1, NULL); /* packs nothing if the set reads no packed rows */
    }
    free(ws);
}
