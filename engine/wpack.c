/* Weight packing at load: each matrix whose type the active kernel set
 * reads faster in the packed form (simd.h, "packed weights") gets its
 * whole 16-row groups copied once into that form. Decode then reads one
 * sequential stream per matrix with 16 rows in the vector lanes, which
 * is what lets a single core run at memory speed.
 *
 * Cost and memory: the copies live in one buffer from the OS (huge
 * pages); a matrix's source pages in the file mapping are dropped from
 * the resident set as soon as a chunk of it is packed, so a packed model
 * is resident about once, not twice (the file's pages stay in the page
 * cache, and fault back in if something reads them: AWQ statistics, the
 * rows past the last whole group, a kernel set without packed kernels).
 * The chunks are shared out over the machine's cores. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "mapfile.h"
#include "model_internal.h"

#define CHUNK_BYTES ((size_t)1 << 20) /* packing work item, about 1 MB of rows */
#define MAX_WEIGHTS_PER_LAYER 7

typedef struct pack_item {
    eng_weight *w;
    char *dst;         /* the weight's packed rows */
    size_t gbytes;     /* bytes per group */
    uint32_t g0, g1;   /* groups of this chunk */
    int release;       /* the source is in the file mapping */
} pack_item;

typedef struct pack_work {
    pack_item *items;
    size_t n;
    atomic_size_t next;
} pack_work;

static void pack_item_run(const pack_item *it)
{
    const eng_weight *w = it->w;
    const char *src = (const char *)w->data + (size_t)it->g0 * SIMD_PACK_ROWS * w->row_bytes;
    simd_pack(w->type, w->cols, src, w->row_bytes, it->g1 - it->g0, it->dst + (size_t)it->g0 * it->gbytes);
    if (it->release)
        eng_map_release(src, (size_t)(it->g1 - it->g0) * SIMD_PACK_ROWS * w->row_bytes);
}

static void *pack_thread(void *arg)
{
    pack_work *pw = arg;
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&pw->next, 1, memory_order_relaxed);
        if (i >= pw->n)
            return NULL;
        pack_item_run(&pw->items[i]);
    }
}

/* Whether weight w is worth packing with the active set. */
static int wants_pack(const eng_weight *w)
{
    const simd_traits *t = simd_type_traits(w->type);
    return w->data && w->rows >= SIMD_PACK_ROWS && t && t->dot_packed && simd_pack_has_layout(w->type);
}

static size_t collect(eng_model *m, eng_weight **ws)
{
    size_t n = 0;
    for (uint32_t l = 0; l < m->info.n_layers; l++) {
        eng_layer *L = &m->layers[l];
        eng_weight *lw[MAX_WEIGHTS_PER_LAYER] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (int i = 0; i < MAX_WEIGHTS_PER_LAYER; i++)
            if (wants_pack(lw[i]))
                ws[n++] = lw[i];
    }
    if (wants_pack(&m->output))
        ws[n++] = &m->output;
    return n;
}

/* [lo, hi): the file bytes holding tensor data (sources outside it, such
 * as buffers converted at load, are kept: dropping pages of those would
 * lose them) */
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

int eng_model_pack(eng_model *m, int threads, eng_err *e)
{
    size_t cap = (size_t)m->info.n_layers * MAX_WEIGHTS_PER_LAYER + 1;
    eng_weight **ws = malloc(cap * sizeof *ws);
    if (!ws)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    size_t nw = collect(m, ws), total = 0, nitems = 0;
    for (size_t i = 0; i < nw; i++) {
        size_t gb = simd_pack_group_bytes(ws[i]->type, ws[i]->cols), ng = ws[i]->rows / SIMD_PACK_ROWS;
        size_t per = CHUNK_BYTES / gb ? CHUNK_BYTES / gb : 1;
        total += ng * gb;
        nitems += (ng + per - 1) / per;
    }
    if (!total) {
        free(ws);
        return 0;
    }
    char *buf = eng_map_anon(total);
    pack_item *items = malloc(nitems * sizeof *items);
    if (!buf || !items) {
        /* not fatal in spirit, but the caller asked: say why */
        eng_map_anon_free(buf, total);
        free(items);
        free(ws);
        return eng_errf(e, ENG_ENOMEM, "out of memory packing %zu MB of weights", total >> 20);
    }
    const char *lo, *hi;
    tensor_range(m, &lo, &hi);
    size_t k = 0, off = 0;
    for (size_t i = 0; i < nw; i++) {
        eng_weight *w = ws[i];
        size_t gb = simd_pack_group_bytes(w->type, w->cols), ng = w->rows / SIMD_PACK_ROWS;
        size_t per = CHUNK_BYTES / gb ? CHUNK_BYTES / gb : 1;
        const char *d = w->data;
        int release = lo && d >= lo && d + (size_t)w->rows * w->row_bytes <= hi;
        for (size_t g = 0; g < ng; g += per)
            items[k++] = (pack_item){w, buf + off, gb, (uint32_t)g, (uint32_t)(g + per < ng ? g + per : ng), release};
        off += ng * gb;
    }
    pack_work pw = {items, nitems, 0};
    if (threads < 1)
        threads = 1;
    if (threads > 16)
        threads = 16;
    pthread_t th[16];
    int started = 0;
    for (int i = 1; i < threads; i++)
        if (pthread_create(&th[started], NULL, pack_thread, &pw) == 0)
            started++;
    pack_thread(&pw);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    off = 0;
    for (size_t i = 0; i < nw; i++) {
        eng_weight *w = ws[i];
        size_t ng = w->rows / SIMD_PACK_ROWS;
        w->packed = buf + off;
        w->packed_rows = (uint32_t)(ng * SIMD_PACK_ROWS);
        off += ng * simd_pack_group_bytes(w->type, w->cols);
    }
    m->packed = buf;
    m->packed_bytes = total;
    free(items);
    free(ws);
    return 0;
}
