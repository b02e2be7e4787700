/* Loading: map the GGUF, read the hyper-parameters for the architecture,
 * find every tensor and check its shape and type before the forward pass
 * may touch it. */
#include "model_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Architectures this version runs, and how their RoPE pairs dimensions. */
static const struct {
    const char *name;
    int neox;
} archs[] = {
    {"llama", 0},
    {"qwen2", 1},
};

/* Upper bounds that keep a hostile header from asking for absurd buffers. */
#define MAX_DIM 65536u
#define MAX_LAYERS 1024u
#define MAX_HEADS 1024u
#define MAX_FFN (1u << 20)
#define MAX_VOCAB (1u << 24)

static int own(eng_model *m, void *p)
{
    void **o = realloc(m->owned, (m->n_owned + 1) * sizeof *o);
    if (!o) {
        free(p);
        return ENG_ENOMEM;
    }
    m->owned = o;
    m->owned[m->n_owned++] = p;
    return 0;
}

static int hp_u32(const eng_gguf *g, const char *arch, const char *key, uint32_t *out, int required, eng_err *e)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    int r = eng_gguf_get_u32(g, full, out, e);
    if (r < 0)
        return r;
    if (r == 1 && required)
        return eng_errf(e, ENG_EFORMAT, "missing metadata key '%s'", full);
    return 0;
}

static int hp_f32(const eng_gguf *g, const char *arch, const char *key, float *out, eng_err *e)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    int r = eng_gguf_get_f32(g, full, out, e);
    return r < 0 ? r : 0;
}

/* A 1-D vector of n floats: used in place if F32, else converted once. */
static int get_vec(eng_model *m, const char *name, uint32_t n, int optional, const float **out, eng_err *e)
{
    const eng_gguf_tensor *t = eng_gguf_tensor_find(m->gguf, name);
    *out = NULL;
    if (!t)
        return optional ? 0 : eng_errf(e, ENG_EFORMAT, "missing tensor '%s'", name);
    if (t->n_dims != 1 || t->ne[0] != n)
        return eng_errf(e, ENG_EFORMAT, "tensor '%s' has %u dims [%llu], expected [%u]", name, t->n_dims,
                        (unsigned long long)t->ne[0], n);
    const simd_traits *tr = simd_type_traits(t->type);
    if (t->type == SIMD_F32 && ((uintptr_t)t->data % sizeof(float)) == 0) {
        *out = t->data;
        return 0;
    }
    if (!tr->dequant)
        return eng_errf(e, ENG_EUNSUP, "tensor '%s': type %s is not supported", name, tr->name);
    float *v = malloc(n * sizeof *v);
    if (!v)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    tr->dequant(t->data, v, n);
    *out = v;
    return own(m, v);
}

/* A matrix of rows x cols. Types without a dot kernel are refused here,
 * at load, naming the tensor and type. */
static int get_mat(eng_model *m, const char *name, uint32_t cols, uint32_t rows, int optional, eng_weight *w,
                   eng_err *e)
{
    const eng_gguf_tensor *t = eng_gguf_tensor_find(m->gguf, name);
    memset(w, 0, sizeof *w);
    if (!t)
        return optional ? 0 : eng_errf(e, ENG_EFORMAT, "missing tensor '%s'", name);
    if (t->n_dims != 2 || t->ne[0] != cols || t->ne[1] != rows)
        return eng_errf(e, ENG_EFORMAT, "tensor '%s' has shape [%llu, %llu%s], expected [%u, %u]", name,
                        (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], t->n_dims > 2 ? ", ..." : "",
                        cols, rows);
    const simd_traits *tr = simd_type_traits(t->type);
    if (!tr->dot || !tr->dequant)
        return eng_errf(e, ENG_EUNSUP, "tensor '%s': weight type %s is not supported yet", name, tr->name);
    w->data = t->data;
    w->type = t->type;
    w->rows = rows;
    w->cols = cols;
    w->row_bytes = simd_row_bytes(t->type, cols);
    w->act = tr->act;
    return 0;
}

static int load_arch(eng_model *m, eng_err *e)
{
    const eng_gguf *g = m->gguf;
    eng_model_info *in = &m->info;
    eng_str s;
    int r = eng_gguf_get_str(g, "general.architecture", &s, e);
    if (r < 0)
        return r;
    if (r == 1)
        return eng_errf(e, ENG_EFORMAT, "missing metadata key 'general.architecture'");
    if (s.len == 0 || s.len >= sizeof in->arch)
        return eng_errf(e, ENG_EUNSUP, "unsupported architecture (name of %llu bytes)", (unsigned long long)s.len);
    memcpy(in->arch, s.ptr, s.len);
    in->arch[s.len] = 0;
    for (size_t i = 0; i < s.len; i++)
        if (in->arch[i] < 32 || in->arch[i] > 126)
            in->arch[i] = '?';
    size_t a;
    for (a = 0; a < sizeof archs / sizeof archs[0]; a++)
        if (strcmp(archs[a].name, in->arch) == 0)
            break;
    if (a == sizeof archs / sizeof archs[0])
        return eng_errf(e, ENG_EUNSUP, "unsupported architecture '%s' (this version runs llama and qwen2)", in->arch);
    in->rope_neox = archs[a].neox;
    return 0;
}

static int load_hparams(eng_model *m, eng_err *e)
{
    const eng_gguf *g = m->gguf;
    eng_model_info *in = &m->info;
    const char *ar = in->arch;
    int r;
    if ((r = hp_u32(g, ar, "embedding_length", &in->dim, 1, e)) ||
        (r = hp_u32(g, ar, "block_count", &in->n_layers, 1, e)) ||
        (r = hp_u32(g, ar, "feed_forward_length", &in->ffn, 1, e)) ||
        (r = hp_u32(g, ar, "attention.head_count", &in->n_heads, 1, e)))
        return r;
    in->n_kv_heads = in->n_heads;
    in->ctx_train = 2048;
    if ((r = hp_u32(g, ar, "attention.head_count_kv", &in->n_kv_heads, 0, e)) ||
        (r = hp_u32(g, ar, "context_length", &in->ctx_train, 0, e)))
        return r;
    if (in->dim == 0 || in->dim > MAX_DIM)
        return eng_errf(e, ENG_EFORMAT, "%s.embedding_length %u is outside 1..%u", ar, in->dim, MAX_DIM);
    if (in->n_layers == 0 || in->n_layers > MAX_LAYERS)
        return eng_errf(e, ENG_EFORMAT, "%s.block_count %u is outside 1..%u", ar, in->n_layers, MAX_LAYERS);
    if (in->ffn == 0 || in->ffn > MAX_FFN)
        return eng_errf(e, ENG_EFORMAT, "%s.feed_forward_length %u is outside 1..%u", ar, in->ffn, MAX_FFN);
    if (in->n_heads == 0 || in->n_heads > MAX_HEADS)
        return eng_errf(e, ENG_EFORMAT, "%s.attention.head_count %u is outside 1..%u", ar, in->n_heads, MAX_HEADS);
    if (in->n_kv_heads == 0 || in->n_kv_heads > in->n_heads || in->n_heads % in->n_kv_heads)
        return eng_errf(e, ENG_EFORMAT, "%s.attention.head_count_kv %u does not divide head_count %u", ar,
                        in->n_kv_heads, in->n_heads);
    in->head_dim = in->dim / in->n_heads;
    if ((r = hp_u32(g, ar, "attention.key_length", &in->head_dim, 0, e)))
        return r;
    uint32_t vlen = in->head_dim;
    if ((r = hp_u32(g, ar, "attention.value_length", &vlen, 0, e)))
        return r;
    if (in->head_dim == 0 || in->head_dim > MAX_DIM || in->head_dim % 2 || vlen != in->head_dim)
        return eng_errf(e, ENG_EFORMAT, "%s: head size %u (value %u) is not supported", ar, in->head_dim, vlen);
    if ((uint64_t)in->head_dim * in->n_heads > MAX_DIM * 4ull)
        return eng_errf(e, ENG_EFORMAT, "%s: heads x head size too large", ar);
    in->rope_dims = in->head_dim;
    if ((r = hp_u32(g, ar, "rope.dimension_count", &in->rope_dims, 0, e)))
        return r;
    if (in->rope_dims == 0 || in->rope_dims > in->head_dim || in->rope_dims % 2)
        return eng_errf(e, ENG_EFORMAT, "%s.rope.dimension_count %u must be even and at most the head size %u", ar,
                        in->rope_dims, in->head_dim);
    in->rope_base = 10000.0f;
    in->rope_scale = 1.0f;
    in->norm_eps = 1e-5f;
    if ((r = hp_f32(g, ar, "rope.freq_base", &in->rope_base, e)) ||
        (r = hp_f32(g, ar, "attention.layer_norm_rms_epsilon", &in->norm_eps, e)))
        return r;
    if (!(in->rope_base > 0))
        return eng_errf(e, ENG_EFORMAT, "%s.rope.freq_base must be positive", ar);
    if (!(in->norm_eps > 0) || in->norm_eps > 1)
        return eng_errf(e, ENG_EFORMAT, "%s.attention.layer_norm_rms_epsilon must be in (0, 1]", ar);
    char key[128];
    eng_str st;
    snprintf(key, sizeof key, "%s.rope.scaling.type", ar);
    r = eng_gguf_get_str(g, key, &st, e);
    if (r < 0)
        return r;
    int linear = 0;
    if (r == 0) {
        if (st.len == 6 && memcmp(st.ptr, "linear", 6) == 0)
            linear = 1;
        else if (!(st.len == 4 && memcmp(st.ptr, "none", 4) == 0))
            return eng_errf(e, ENG_EUNSUP, "%s: RoPE scaling type '%.*s' is not supported (none, linear)", key,
                            (int)(st.len > 32 ? 32 : st.len), st.ptr);
    }
    float factor = 1.0f;
    if ((r = hp_f32(g, ar, "rope.scaling.factor", &factor, e)))
        return r;
    if (linear || eng_gguf_find(g, key) < 0) {
        /* an untyped factor is linear, as converters write it */
        if (!(factor > 0) || factor > 1e6f)
            return eng_errf(e, ENG_EFORMAT, "%s.rope.scaling.factor %g is not a usable factor", ar, factor);
        in->rope_scale = factor;
    }
    return 0;
}

static int load_tensors(eng_model *m, eng_err *e)
{
    eng_model_info *in = &m->info;
    uint32_t dim = in->dim, hd = in->head_dim, nq = in->n_heads * hd, nkv = in->n_kv_heads * hd;
    const eng_gguf_tensor *te = eng_gguf_tensor_find(m->gguf, "token_embd.weight");
    if (!te)
        return eng_errf(e, ENG_EFORMAT, "missing tensor 'token_embd.weight'");
    if (te->n_dims != 2 || te->ne[0] != dim || te->ne[1] == 0 || te->ne[1] > MAX_VOCAB)
        return eng_errf(e, ENG_EFORMAT, "tensor 'token_embd.weight' has shape [%llu, %llu], expected [%u, n_vocab]",
                        (unsigned long long)te->ne[0], (unsigned long long)te->ne[1], dim);
    in->n_vocab = (uint32_t)te->ne[1];
    int r;
    if ((r = get_mat(m, "token_embd.weight", dim, in->n_vocab, 0, &m->tok_embd, e)))
        return r;
    if (!simd_type_traits(m->tok_embd.type)->dequant)
        return eng_errf(e, ENG_EUNSUP, "token_embd.weight: type not supported");
    if ((r = get_vec(m, "output_norm.weight", dim, 0, &m->out_norm, e)) ||
        (r = get_mat(m, "output.weight", dim, in->n_vocab, 1, &m->output, e)))
        return r;
    if (!m->output.data) {
        m->output = m->tok_embd;
        in->tied_output = 1;
    }
    m->layers = calloc(in->n_layers, sizeof *m->layers);
    if (!m->layers)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    for (uint32_t l = 0; l < in->n_layers; l++) {
        eng_layer *L = &m->layers[l];
        char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%u." s, l), n)
        if ((r = get_vec(m, NAME("attn_norm.weight"), dim, 0, &L->attn_norm, e)) ||
            (r = get_vec(m, NAME("ffn_norm.weight"), dim, 0, &L->ffn_norm, e)) ||
            (r = get_mat(m, NAME("attn_q.weight"), dim, nq, 0, &L->wq, e)) ||
            (r = get_mat(m, NAME("attn_k.weight"), dim, nkv, 0, &L->wk, e)) ||
            (r = get_mat(m, NAME("attn_v.weight"), dim, nkv, 0, &L->wv, e)) ||
            (r = get_mat(m, NAME("attn_output.weight"), nq, dim, 0, &L->wo, e)) ||
            (r = get_mat(m, NAME("ffn_gate.weight"), dim, in->ffn, 0, &L->w_gate, e)) ||
            (r = get_mat(m, NAME("ffn_up.weight"), dim, in->ffn, 0, &L->w_up, e)) ||
            (r = get_mat(m, NAME("ffn_down.weight"), in->ffn, dim, 0, &L->w_down, e)) ||
            (r = get_vec(m, NAME("attn_q.bias"), nq, 1, &L->bq, e)) ||
            (r = get_vec(m, NAME("attn_k.bias"), nkv, 1, &L->bk, e)) ||
            (r = get_vec(m, NAME("attn_v.bias"), nkv, 1, &L->bv, e)))
            return r;
#undef NAME
    }
    /* the weight type most parameters have, for display */
    uint64_t per_type[SIMD_TYPE_COUNT] = {0};
    for (uint64_t i = 0; i < eng_gguf_n_tensors(m->gguf); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(m->gguf, i);
        uint64_t count = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        in->n_params += count;
        if (t->n_dims >= 2)
            per_type[t->type] += count;
    }
    in->main_type = SIMD_F32;
    for (int t = 0; t < SIMD_TYPE_COUNT; t++)
        if (per_type[t] > per_type[in->main_type])
            in->main_type = t;
    return 0;
}

int eng_model_open(const char *path, eng_model **out, eng_err *e)
{
    *out = NULL;
    simd_init();
    eng_model *m = calloc(1, sizeof *m);
    if (!m)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    int r = eng_gguf_open(path, &m->gguf, e);
    if (r) {
        free(m);
        return r;
    }
    m->info.file_size = eng_gguf_file_size(m->gguf);
    if (!(r = load_arch(m, e)) && !(r = load_hparams(m, e)) && !(r = load_tensors(m, e)))
        r = eng_tok_from_gguf(m->gguf, &m->tok, e);
    if (!r && eng_tok_n_vocab(m->tok) != m->info.n_vocab)
        r = eng_errf(e, ENG_EFORMAT, "the tokenizer has %u tokens but token_embd.weight has %u rows",
                     eng_tok_n_vocab(m->tok), m->info.n_vocab);
    if (r) {
        /* name the file once, keeping the reason */
        if (e && strncmp(e->msg, path, strlen(path)) != 0) {
            char tmp[sizeof e->msg];
            memcpy(tmp, e->msg, sizeof tmp);
            int n = snprintf(e->msg, sizeof e->msg, "%.200s: ", path);
            if (n > 0 && (size_t)n < sizeof e->msg)
                snprintf(e->msg + n, sizeof e->msg - (size_t)n, "%.300s", tmp);
        }
        eng_model_close(m);
        return r;
    }
    eng_str name;
    if (eng_gguf_get_str(m->gguf, "general.name", &name, NULL) == 0 && name.len) {
        size_t n = name.len < sizeof m->info.name - 1 ? (size_t)name.len : sizeof m->info.name - 1;
        memcpy(m->info.name, name.ptr, n);
        m->info.name[n] = 0;
    } else {
        const char *base = strrchr(path, '/');
        snprintf(m->info.name, sizeof m->info.name, "%s", base ? base + 1 : path);
    }
    *out = m;
    return 0;
}

void eng_model_close(eng_model *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_owned; i++)
        free(m->owned[i]);
    free(m->owned);
    free(m->layers);
    eng_tok_free(m->tok);
    eng_gguf_close(m->gguf);
    free(m);
}

const eng_model_info *eng_model_get_info(const eng_model *m) { return &m->info; }
const eng_tok *eng_model_tok(const eng_model *m) { return m->tok; }
const eng_gguf *eng_model_gguf(const eng_model *m) { return m->gguf; }
