/* Importance matrices (imatrix.h): collected through the forward pass's
 * observers, read from and written to llama.cpp's formats.
 *
 * Collection: one "site" per distinct matmul input (q, k and v share the
 * normalised hidden state, gate and up the FFN's, each expert's gate and
 * up its routed rows), summed in double and named after the tensors that
 * read it. A weight is named by the GGUF tensor its data lies in (so a
 * fused qkv or a tied output gets its file's name); where the loader
 * converted a tensor into a buffer of its own, by its role. */
#include "imatrix.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "tokenizer.h"
#include "files.h"
#include "gguf.h"
#include "mem.h"
#include "model_layout.h"
#include "simd.h"

struct eng_imatrix {
    eng_imatrix_entry *e;
    size_t n, cap;
    char **datasets;
    size_t n_ds;
    uint32_t chunk_count, chunk_size;
    int legacy;
};

/* ---- the container ---- */

void eng_imatrix_free(eng_imatrix *im)
{
    if (!im)
        return;
    for (size_t i = 0; i < im->n; i++) {
        free(im->e[i].name);
        free(im->e[i].sums);
        free(im->e[i].counts);
    }
    for (size_t i = 0; i < im->n_ds; i++)
        free(im->datasets[i]);
    free(im->datasets);
    free(im->e);
    free(im);
}

size_t eng_imatrix_count(const eng_imatrix *im) { return im ? im->n : 0; }
const eng_imatrix_entry *eng_imatrix_at(const eng_imatrix *im, size_t i) { return im && i < im->n ? &im->e[i] : NULL; }
uint32_t eng_imatrix_chunk_count(const eng_imatrix *im) { return im ? im->chunk_count : 0; }
uint32_t eng_imatrix_chunk_size(const eng_imatrix *im) { return im ? im->chunk_size : 0; }
int eng_imatrix_is_legacy(const eng_imatrix *im) { return im ? im->legacy : 0; }

const char *const *eng_imatrix_datasets(const eng_imatrix *im, size_t *n)
{
    *n = im ? im->n_ds : 0;
    return im ? (const char *const *)im->datasets : NULL;
}

const eng_imatrix_entry *eng_imatrix_find(const eng_imatrix *im, const char *name)
{
    size_t lo = 0, hi = im ? im->n : 0; /* sorted by name */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(im->e[mid].name, name);
        if (!c)
            return &im->e[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

void eng_imatrix_importance(const eng_imatrix_entry *x, uint32_t k, float *out)
{
    const float *s = x->sums + (size_t)k * x->n_cols;
    float n = x->counts[k];
    for (uint32_t c = 0; c < x->n_cols; c++)
        out[c] = n > 0 ? s[c] / n : 1.0f;
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* A new entry (sums and counts zeroed), or NULL when out of memory. */
static eng_imatrix_entry *add_entry(eng_imatrix *im, const char *name, size_t name_len, uint32_t n_cols,
                                    uint32_t n_mat)
{
    if (eng_reserve(&im->e, &im->cap, im->n + 1, sizeof *im->e, 64))
        return NULL;
    eng_imatrix_entry *x = &im->e[im->n];
    memset(x, 0, sizeof *x);
    x->name = dup_n(name, name_len);
    x->n_cols = n_cols;
    x->n_mat = n_mat;
    x->sums = calloc((size_t)n_cols * n_mat, sizeof *x->sums);
    x->counts = calloc(n_mat, sizeof *x->counts);
    im->n++; /* counted even when incomplete, so that free releases it */
    return x->name && x->sums && x->counts ? x : NULL;
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const eng_imatrix_entry *)a)->name, ((const eng_imatrix_entry *)b)->name);
}

/* Sort by name; a name twice is an error naming it. */
static int finish(eng_imatrix *im, const char *path, eng_err *e)
{
    if (im->n)
        qsort(im->e, im->n, sizeof *im->e, cmp_entry);
    for (size_t i = 1; i < im->n; i++)
        if (!strcmp(im->e[i - 1].name, im->e[i].name))
            return eng_errf(e, ENG_EFORMAT, "%s: entry '%s' appears twice", path, im->e[i].name);
    return 0;
}

static int add_dataset(eng_imatrix *im, const char *s, size_t n)
{
    char **nd = realloc(im->datasets, (im->n_ds + 1) * sizeof *nd);
    if (!nd)
        return ENG_ENOMEM;
    im->datasets = nd;
    if (!(nd[im->n_ds] = dup_n(s, n)))
        return ENG_ENOMEM;
    im->n_ds++;
    return 0;
}

/* ---- reading ---- */

static int ends_with(const char *s, const char *suffix, size_t *stem)
{
    size_t a = strlen(s), b = strlen(suffix);
    *stem = a >= b ? a - b : 0;
    return a > b && !strcmp(s + a - b, suffix);
}

static int check_values(const char *path, const eng_imatrix_entry *x, eng_err *e)
{
    for (size_t i = 0; i < (size_t)x->n_cols * x->n_mat; i++)
        if (!isfinite(x->sums[i]) || x->sums[i] < 0)
            return eng_errf(e, ENG_EFORMAT, "%s: entry '%s' has a %s sum of squares (%g at %zu)", path, x->name,
                            isfinite(x->sums[i]) ? "negative" : "non-finite", (double)x->sums[i], i);
    for (uint32_t k = 0; k < x->n_mat; k++)
        if (!isfinite(x->counts[k]) || x->counts[k] < 0)
            return eng_errf(e, ENG_EFORMAT, "%s: entry '%s' has a bad count (%g for matrix %u)", path, x->name,
                            (double)x->counts[k], k);
    return 0;
}

/* Entries and metadata of an open GGUF (g is closed here). */
static int load_gguf(const char *path, eng_gguf *g, eng_imatrix *im, eng_err *e)
{
    int r = 0;
    eng_str ty;
    if (eng_gguf_get_str(g, "general.type", &ty, NULL) == 0 && !(ty.len == 7 && !memcmp(ty.ptr, "imatrix", 7))) {
        r = eng_errf(e, ENG_EFORMAT, "%s is not an importance matrix (general.type is '%.*s')", path,
                     (int)(ty.len > 40 ? 40 : ty.len), ty.ptr);
        goto done;
    }
    uint64_t nt = eng_gguf_n_tensors(g);
    for (uint64_t i = 0; i < nt && !r; i++) {
        const eng_gguf_tensor *s = eng_gguf_tensor_at(g, i);
        size_t stem;
        if (!ends_with(s->name, ".in_sum2", &stem))
            continue;
        char cname[300];
        snprintf(cname, sizeof cname, "%.*s.counts", (int)stem, s->name);
        const eng_gguf_tensor *c = eng_gguf_tensor_find(g, cname);
        uint64_t ns = s->ne[0] * s->ne[1] * s->ne[2] * s->ne[3], nc = c ? c->ne[0] * c->ne[1] * c->ne[2] * c->ne[3] : 0;
        if (!c)
            r = eng_errf(e, ENG_EFORMAT, "%s: '%s' has no '%s' beside it", path, s->name, cname);
        else if (s->type != SIMD_F32 || c->type != SIMD_F32)
            r = eng_errf(e, ENG_EFORMAT, "%s: '%s' and its counts must be f32 (they are %s and %s)", path, s->name,
                         simd_type_name(s->type), simd_type_name(c->type));
        else if (nc == 0 || ns == 0 || ns % nc || ns / nc > UINT32_MAX || nc > UINT32_MAX)
            r = eng_errf(e, ENG_EFORMAT, "%s: '%s' has %llu values for %llu counts (expected a whole number of "
                         "values per count)", path, s->name, (unsigned long long)ns, (unsigned long long)nc);
        if (r)
            break;
        eng_imatrix_entry *x = add_entry(im, s->name, stem, (uint32_t)(ns / nc), (uint32_t)nc);
        if (!x) {
            r = eng_errf(e, ENG_ENOMEM, "out of memory reading %s", path);
            break;
        }
        memcpy(x->sums, s->data, ns * sizeof(float));
        memcpy(x->counts, c->data, nc * sizeof(float));
        r = check_values(path, x, e);
    }
    for (uint64_t i = 0; i < nt && !r; i++) { /* counts without sums */
        const char *n = eng_gguf_tensor_at(g, i)->name;
        size_t stem;
        char sname[300];
        if (ends_with(n, ".counts", &stem)) {
            snprintf(sname, sizeof sname, "%.*s.in_sum2", (int)stem, n);
            if (!eng_gguf_tensor_find(g, sname))
                r = eng_errf(e, ENG_EFORMAT, "%s: '%s' has no '%s' beside it", path, n, sname);
        }
    }
    if (!r && im->n == 0)
        r = eng_errf(e, ENG_EFORMAT, "%s is not an importance matrix (no '.in_sum2' tensors)", path);
    if (r)
        goto done;
    enum eng_gguf_vtype at;
    uint64_t n_ds = 0;
    const void *d;
    if ((r = eng_gguf_get_arr(g, "imatrix.datasets", GGUF_STRING, &at, &n_ds, &d, e)) < 0)
        goto done;
    r = 0;
    for (uint64_t i = 0; i < n_ds && !r; i++) {
        eng_str s = eng_gguf_arr_str(g, "imatrix.datasets", i);
        if (add_dataset(im, s.ptr, (size_t)s.len))
            r = eng_errf(e, ENG_ENOMEM, "out of memory reading %s", path);
    }
    if (!r && ((r = eng_gguf_get_u32(g, "imatrix.chunk_count", &im->chunk_count, e)) < 0 ||
               (r = eng_gguf_get_u32(g, "imatrix.chunk_size", &im->chunk_size, e)) < 0))
        goto done;
    r = 0;
done:
    eng_gguf_close(g);
    return r;
}

/* A little-endian int32 at p (the legacy file is written by x86/Arm hosts). */
static int32_t rd_i32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

static int load_legacy(const char *path, const unsigned char *b, size_t len, eng_imatrix *im, eng_err *e)
{
    size_t at = 0;
#define NEED(n, what)                                                                                           \
    do {                                                                                                        \
        if (len - at < (size_t)(n))                                                                             \
            return eng_errf(e, ENG_EFORMAT, "%s: the file ends inside %s (legacy imatrix format)", path, what); \
    } while (0)
    NEED(4, "the entry count");
    int32_t n = rd_i32(b);
    at = 4;
    if (n < 1)
        return eng_errf(e, ENG_EFORMAT, "%s: entry count %d (legacy imatrix format: expected at least 1)", path, n);
    for (int32_t i = 0; i < n; i++) {
        NEED(4, "an entry's name length");
        int32_t nl = rd_i32(b + at);
        at += 4;
        if (nl < 1 || nl > 1024)
            return eng_errf(e, ENG_EFORMAT, "%s: entry %d has a name of %d bytes (expected 1..1024)", path, i, nl);
        NEED(nl, "an entry's name");
        const char *name = (const char *)b + at;
        at += (size_t)nl;
        if (memchr(name, 0, (size_t)nl))
            return eng_errf(e, ENG_EFORMAT, "%s: entry %d's name holds a NUL byte", path, i);
        NEED(8, "an entry's call and value counts");
        int32_t ncall = rd_i32(b + at), nval = rd_i32(b + at + 4);
        at += 8;
        if (nval < 1 || ncall < 0)
            return eng_errf(e, ENG_EFORMAT, "%s: entry '%.*s' has %d values and %d calls", path, nl, name, nval,
                            ncall);
        NEED((size_t)nval * 4, "an entry's values");
        eng_imatrix_entry *x = add_entry(im, name, (size_t)nl, (uint32_t)nval, 1);
        if (!x)
            return eng_errf(e, ENG_ENOMEM, "out of memory reading %s", path);
        memcpy(x->sums, b + at, (size_t)nval * 4);
        at += (size_t)nval * 4;
        /* values are (sum / count) * ncall: as sums over ncall "rows" they
         * give back the same sum / count */
        x->counts[0] = (float)ncall;
        int r = check_values(path, x, e);
        if (r)
            return r;
    }
    if (len - at >= 4) { /* optional: chunk count, then the dataset */
        int32_t chunks = rd_i32(b + at);
        at += 4;
        im->chunk_count = chunks > 0 ? (uint32_t)chunks : 0;
        if (len - at >= 4) {
            int32_t dl = rd_i32(b + at);
            at += 4;
            if (dl > 0 && (size_t)dl <= len - at && add_dataset(im, (const char *)b + at, (size_t)dl))
                return eng_errf(e, ENG_ENOMEM, "out of memory reading %s", path);
        }
    }
#undef NEED
    im->legacy = 1;
    return 0;
}

int eng_imatrix_load(const char *path, eng_imatrix **out, eng_err *e)
{
    *out = NULL;
    eng_imatrix *im = calloc(1, sizeof *im);
    if (!im)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    char *buf = NULL;
    size_t len = 0;
    /* a GGUF is mapped (a model given by mistake is not read whole); what
     * is not one is read whole as the legacy format (a few MB even for
     * large models), unless it starts like a GGUF: then the GGUF reader's
     * message says what is wrong */
    eng_gguf *g = NULL;
    eng_err ge;
    int gr = eng_gguf_open(path, &g, &ge), r;
    if (!gr) {
        r = load_gguf(path, g, im, e);
    } else if (!(r = eng_read_file(path, (size_t)1 << 30, &buf, &len, e))) {
        if (len >= 4 && !memcmp(buf, "GGUF", 4)) {
            *e = ge;
            r = gr;
        } else {
            r = load_legacy(path, (const unsigned char *)buf, len, im, e);
        }
    }
    free(buf);
    if (!r)
        r = finish(im, path, e);
    if (r) {
        eng_imatrix_free(im);
        return r;
    }
    *out = im;
    return 0;
}

/* ---- writing ---- */

int eng_imatrix_save(const eng_imatrix *im, const char *path, eng_err *e)
{
    eng_gguf_writer *w = eng_gguf_writer_new();
    char name[320];
    int r = w ? 0 : ENG_ENOMEM;
    if (!r && !(r = eng_gguf_writer_str(w, "general.type", "imatrix")) &&
        !(r = eng_gguf_writer_arr_str(w, "imatrix.datasets", (const char *const *)im->datasets, im->n_ds)) &&
        !(r = eng_gguf_writer_u32(w, "imatrix.chunk_count", im->chunk_count)))
        r = eng_gguf_writer_u32(w, "imatrix.chunk_size", im->chunk_size);
    for (size_t i = 0; i < im->n && !r; i++) {
        const eng_imatrix_entry *x = &im->e[i];
        /* llama.cpp writes [n_cols, n_mat] and [1, n_mat] with ggml's
         * dimension count (trailing 1s dropped) */
        uint64_t ne_s[2] = {x->n_cols, x->n_mat}, ne_c[2] = {1, x->n_mat};
        uint32_t nd = x->n_mat > 1 ? 2 : 1;
        snprintf(name, sizeof name, "%s.in_sum2", x->name);
        if (!(r = eng_gguf_writer_tensor(w, name, SIMD_F32, nd, ne_s, x->sums))) {
            snprintf(name, sizeof name, "%s.counts", x->name);
            r = eng_gguf_writer_tensor(w, name, SIMD_F32, nd, ne_c, x->counts);
        }
    }
    if (r)
        r = eng_errf(e, ENG_ENOMEM, "out of memory while building %s", path);
    else
        r = eng_gguf_writer_save(w, path, e);
    eng_gguf_writer_free(w);
    return r;
}

/* ---- collecting ---- */

#define MAX_NAMES 3

typedef struct site {
    const eng_weight *key;  /* what the observer is called with */
    int expert;             /* 1: an expert observer's site (n_mat experts) */
    uint32_t cols, n_mat;
    double *sums;           /* n_mat * cols */
    uint64_t *counts;       /* n_mat */
    int bad;                /* a non-finite input was seen */
    char names[MAX_NAMES][96];
    int n_names;
} site;

typedef struct collector {
    site *s;
    size_t n, cap;
    size_t last; /* the site found last: matmuls come in the same order every batch */
} collector;

static site *find_site(collector *c, const eng_weight *w, int expert)
{
    for (size_t k = 0; k < c->n; k++) {
        size_t i = (c->last + k) % c->n;
        if (c->s[i].key == w && c->s[i].expert == expert) {
            c->last = i;
            return &c->s[i];
        }
    }
    return NULL;
}

static void accumulate(site *s, uint32_t k, const float *x, uint32_t nt, uint32_t cols)
{
    if (cols != s->cols || k >= s->n_mat)
        return;
    double *acc = s->sums + (size_t)k * cols;
    for (uint32_t t = 0; t < nt; t++) {
        const float *row = x + (size_t)t * cols;
        for (uint32_t j = 0; j < cols; j++)
            acc[j] += (double)row[j] * row[j];
    }
    s->counts[k] += nt;
    if (!s->bad)
        for (uint32_t j = 0; j < cols; j++)
            if (!isfinite(acc[j]))
                s->bad = 1;
}

static void observe(void *user, const eng_weight *w, const float *x, uint32_t nt, uint32_t cols)
{
    site *s = find_site(user, w, 0);
    if (s)
        accumulate(s, 0, x, nt, cols);
}

static void observe_expert(void *user, const eng_weight *all, uint32_t expert, const float *x, uint32_t nt,
                           uint32_t cols)
{
    site *s = find_site(user, all, 1);
    if (s)
        accumulate(s, expert, x, nt, cols);
}

/* Name weight w (whose role name is `role` in layer l, or a global name
 * when l < 0) into site s, once. */
static void site_name(site *s, const eng_model *m, const eng_weight *w, int l, const char *role)
{
    char n[96];
    tools_weight_name(m, w, l, role, n, sizeof n);
    for (int i = 0; i < s->n_names; i++)
        if (!strcmp(s->names[i], n))
            return;
    if (s->n_names < MAX_NAMES)
        memcpy(s->names[s->n_names++], n, sizeof n);
}

static site *add_site(collector *c, const eng_weight *key, int expert, uint32_t cols, uint32_t n_mat)
{
    if (eng_reserve(&c->s, &c->cap, c->n + 1, sizeof *c->s, 32))
        return NULL;
    site *s = &c->s[c->n++];
    memset(s, 0, sizeof *s);
    s->key = key;
    s->expert = expert;
    s->cols = cols;
    s->n_mat = n_mat;
    s->sums = calloc((size_t)cols * n_mat, sizeof *s->sums);
    s->counts = calloc(n_mat, sizeof *s->counts);
    return s->sums && s->counts ? s : NULL;
}

/* The sites of every matmul the forward pass runs. */
static int make_sites(const eng_model *m, collector *c, int process_output)
{
    const eng_model_info *in = eng_model_get_info(m);
    site *s;
    for (uint32_t l = 0; l < in->n_layers; l++) {
        const eng_layer *L = eng_model_layer(m, l);
        int li = (int)l;
        if (L->n_heads) {
            if (!(s = add_site(c, &L->wq, 0, L->wq.cols, 1)))
                return ENG_ENOMEM;
            site_name(s, m, &L->wq, li, "attn_q.weight");
            site_name(s, m, &L->wk, li, "attn_k.weight");
            site_name(s, m, &L->wv, li, "attn_v.weight");
            if (!(s = add_site(c, &L->wo, 0, L->wo.cols, 1)))
                return ENG_ENOMEM;
            site_name(s, m, &L->wo, li, "attn_output.weight");
        }
        if (L->ffn) {
            /* a GELU FFN has no gate: its first matmul is up's */
            const eng_weight *first = eng_model_ffn(m) == ENG_FFN_GELU ? &L->w_up : &L->w_gate;
            if (!(s = add_site(c, first, 0, first->cols, 1)))
                return ENG_ENOMEM;
            if (first == &L->w_gate)
                site_name(s, m, &L->w_gate, li, "ffn_gate.weight");
            site_name(s, m, &L->w_up, li, "ffn_up.weight");
            if (!(s = add_site(c, &L->w_down, 0, L->w_down.cols, 1)))
                return ENG_ENOMEM;
            site_name(s, m, &L->w_down, li, "ffn_down.weight");
        } else if (L->moe.n) {
            const eng_experts *x = &L->moe;
            if (!(s = add_site(c, &x->router, 0, x->router.cols, 1)))
                return ENG_ENOMEM;
            site_name(s, m, &x->router, li, "ffn_gate_inp.weight");
            if (!(s = add_site(c, &x->gate, 1, x->gate.cols, x->n)))
                return ENG_ENOMEM;
            site_name(s, m, &x->gate, li, "ffn_gate_exps.weight");
            site_name(s, m, &x->up, li, "ffn_up_exps.weight");
            if (!(s = add_site(c, &x->down, 1, x->down.cols, x->n)))
                return ENG_ENOMEM;
            site_name(s, m, &x->down, li, "ffn_down_exps.weight");
        }
    }
    if (process_output) {
        const eng_weight *o = eng_model_output(m);
        if (!(s = add_site(c, o, 0, o->cols, 1)))
            return ENG_ENOMEM;
        site_name(s, m, o, -1, in->tied_output ? "token_embd.weight" : "output.weight");
    }
    return 0;
}

/* The collected sites as entries of im. */
static int sites_to_entries(const collector *c, eng_imatrix *im, eng_err *e)
{
    for (size_t i = 0; i < c->n; i++) {
        const site *s = &c->s[i];
        if (s->bad)
            return eng_errf(e, ENG_EFORMAT, "imatrix: non-finite activations reached '%s' (the model overflows "
                            "on this text)", s->names[0]);
        for (int k = 0; k < s->n_names; k++) {
            eng_imatrix_entry *x = add_entry(im, s->names[k], strlen(s->names[k]), s->cols, s->n_mat);
            if (!x)
                return eng_errf(e, ENG_ENOMEM, "out of memory");
            for (size_t j = 0; j < (size_t)s->cols * s->n_mat; j++)
                x->sums[j] = (float)s->sums[j];
            for (uint32_t j = 0; j < s->n_mat; j++)
                x->counts[j] = (float)s->counts[j];
        }
    }
    return finish(im, "imatrix", e);
}

/* The calibration pass's progress (a share of the tokens) as chunks done. */
typedef struct chunk_progress {
    const eng_imatrix_opts *o;
    uint32_t n_chunks;
} chunk_progress;

static void on_chunks(void *user, double frac, const char *what)
{
    (void)what;
    const chunk_progress *cp = user;
    cp->o->progress(cp->o->user, (uint32_t)(frac * cp->n_chunks + 0.5), cp->n_chunks);
}

/* Chunks of n_ctx tokens through m, each started with BOS as
 * llama-imatrix starts them (calib.c's pass); all logits when the output
 * is observed. */
static int run_chunks(eng_model *m, int32_t *ids, uint32_t n_chunks, uint32_t n_ctx, const eng_imatrix_opts *o,
                      collector *col, eng_err *e)
{
    chunk_progress cp = {o, n_chunks};
    tools_calib_pass p = {.threads = o->threads, .fn = observe, .user = col, .xfn = observe_expert, .xuser = col,
                          .all_logits = o->process_output, .progress = o->progress ? on_chunks : NULL,
                          .puser = &cp, .p0 = 0, .span = 1};
    return tools_calib_run_pass(m, ids, n_chunks * n_ctx, n_ctx, &p, e);
}

int eng_imatrix_collect(const char *model_path, const eng_imatrix_opts *o, eng_imatrix **out, eng_err *e)
{
    *out = NULL;
    eng_model *m = NULL;
    collector col = {0};
    int32_t *ids = NULL;
    uint32_t n_tok = 0;
    eng_imatrix *im = calloc(1, sizeof *im);
    int r = im ? 0 : eng_errf(e, ENG_ENOMEM, "out of memory");
    if (r || (r = eng_model_open(model_path, &m, e)))
        goto done;
    uint32_t n_ctx = o->n_ctx ? o->n_ctx : 512;
    uint64_t max_tok = o->max_chunks ? (uint64_t)o->max_chunks * n_ctx : UINT32_MAX;
    if (max_tok > UINT32_MAX)
        max_tok = UINT32_MAX;
    if ((r = tools_calib_tokens(m, o->calib_text ? NULL : o->calib_path, o->calib_text, o->calib_len, n_ctx,
                                (uint32_t)max_tok, "imatrix", &ids, &n_tok, e)))
        goto done;
    if ((r = make_sites(m, &col, o->process_output))) {
        r = eng_errf(e, ENG_ENOMEM, "out of memory for the statistics");
        goto done;
    }
    uint32_t n_chunks = n_tok / n_ctx;
    if ((r = run_chunks(m, ids, n_chunks, n_ctx, o, &col, e)) || (r = sites_to_entries(&col, im, e)))
        goto done;
    im->chunk_count = n_chunks;
    im->chunk_size = n_ctx;
    const char *ds = o->dataset ? o->dataset : o->calib_path;
    if (ds && add_dataset(im, ds, strlen(ds)))
        r = eng_errf(e, ENG_ENOMEM, "out of memory");
done:
    for (size_t i = 0; i < col.n; i++) {
        free(col.s[i].sums);
        free(col.s[i].counts);
    }
    free(col.s);
    free(ids);
    eng_model_close(m);
    if (r) {
        eng_imatrix_free(im);
        return r;
    }
    *out = im;
    return 0;
}
