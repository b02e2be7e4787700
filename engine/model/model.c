/* Loading: map the GGUF, read the hyper-parameters for the architecture,
 * find every tensor and check its shape and type before the forward pass
 * may touch it. Tensor names and metadata keys are llama.cpp's, so files
 * converted for it load here. */
#include "model_internal.h"
#include "mapfile.h"
#include "files.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What differs between the decoder families this version runs. */
typedef struct arch_desc {
    const char *name;
    int neox;          /* RoPE pairs dims (i, i+n/2) instead of (2i, 2i+1) */
    enum eng_norm norm;
    enum eng_ffn ffn;
    int learned_pos;   /* position embeddings instead of RoPE (gpt2) */
    int qk_norm;       /* per-head RMSNorm of q and k (qwen3) */
    int moe;           /* every layer's FFN is a mixture of experts */
    enum eng_moe_gating gating;
    int oai;           /* gpt-oss: sinks, alternating sliding windows, clamped SwiGLU, biased experts */
    /* Gemma 2 and 3 (2 and 3 here): embeddings scaled by sqrt(dim), RMSNorm of the attention's
     * and the FFN's outputs (attn_post_norm, ffn_post_norm), sliding-window
     * layers (attention.sliding_window; 5 local layers to 1 global unless
     * attention.sliding_window_pattern says otherwise) that rotate with
     * their own RoPE base (rope.freq_base_swa, default 10000) unscaled, an
     * optional final logit soft-cap. The norms' weights are used as
     * stored: the converter has already added Gemma's 1 to them (HF's
     * RMSNorm multiplies by 1 + w). Gemma 2 instead: no q/k norms, every
     * other layer windowed (even ones), one RoPE base for all, and its
     * attention scores soft-capped (attn_logit_softcapping). */
    int gemma;
} arch_desc;

static const arch_desc archs[] = {
    {"llama", 0, ENG_NORM_RMS, ENG_FFN_SWIGLU, 0, 0, 0, 0, 0, 0},
    {"qwen2", 1, ENG_NORM_RMS, ENG_FFN_SWIGLU, 0, 0, 0, 0, 0, 0},
    {"qwen3", 1, ENG_NORM_RMS, ENG_FFN_SWIGLU, 0, 1, 0, 0, 0, 0},
    {"phi3", 1, ENG_NORM_RMS, ENG_FFN_SWIGLU, 0, 0, 0, 0, 0, 0},
    {"gpt2", 0, ENG_NORM_LAYER, ENG_FFN_GELU, 1, 0, 0, 0, 0, 0},
    {"qwen3moe", 1, ENG_NORM_RMS, ENG_FFN_SWIGLU, 0, 1, 1, ENG_MOE_SOFTMAX, 0, 0},
    {"gpt-oss", 1, ENG_NORM_RMS, ENG_FFN_SWIGLU_OAI, 0, 0, 1, ENG_MOE_TOPK_SOFTMAX, 1, 0},
    /* llama.cpp's name for llama blocks whose head counts and FFN sizes
     * differ per layer (Nemotron's); `nibble prune` writes llama models
     * under it so llama.cpp loads them too */
    {"deci", 0, ENG_NORM_RMS, ENG_FFN_SWIGLU, 0, 0, 0, 0, 0, 0},
    {"gemma2", 1, ENG_NORM_RMS, ENG_FFN_GEGLU, 0, 0, 0, 0, 0, 2},
    {"gemma3", 1, ENG_NORM_RMS, ENG_FFN_GEGLU, 0, 1, 0, 0, 0, 3},
};
#define N_ARCHS (sizeof archs / sizeof archs[0])

/* Upper bounds that keep a hostile header from asking for absurd buffers. */
#define MAX_DIM 65536u
#define MAX_LAYERS 1024u
#define MAX_HEADS 1024u
#define MAX_FFN (1u << 20)
#define MAX_VOCAB (1u << 24)
#define MAX_CTX (1u << 24)
#define MAX_EXPERTS 4096u
#define MAX_EXPERTS_USED 64u

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

/* A per-layer hyper-parameter: one number for all layers, or an array of
 * n_layers integers (pruned models). Each value within lo..hi. */
static int hp_layers(const eng_gguf *g, const char *arch, const char *key, uint32_t n_layers, uint32_t *out,
                     int required, uint32_t dflt, uint32_t lo, uint32_t hi, eng_err *e)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    int64_t idx = eng_gguf_find(g, full);
    if (idx >= 0 && eng_gguf_kv_type(g, (uint64_t)idx) == GGUF_ARRAY) {
        enum eng_gguf_vtype t;
        uint64_t n;
        const void *data;
        int r = eng_gguf_get_arr(g, full, -1, &t, &n, &data, e);
        if (r)
            return r < 0 ? r : ENG_EFORMAT;
        if (t == GGUF_STRING || t == GGUF_F32 || t == GGUF_F64 || t == GGUF_BOOL)
            return eng_errf(e, ENG_EFORMAT, "metadata key '%s': expected integers, got an array of %s", full,
                            eng_gguf_vtype_name(t));
        if (n != n_layers)
            return eng_errf(e, ENG_EFORMAT, "metadata key '%s': %llu values for %u layers", full,
                            (unsigned long long)n, n_layers);
        for (uint32_t l = 0; l < n_layers; l++) {
            int64_t v = eng_gguf_arr_i64(t, data, l);
            if (v < lo || v > hi)
                return eng_errf(e, ENG_EFORMAT, "metadata key '%s': layer %u value %lld is outside %u..%u", full, l,
                                (long long)v, lo, hi);
            out[l] = (uint32_t)v;
        }
        return 0;
    }
    uint32_t v = dflt;
    int r = hp_u32(g, arch, key, &v, required, e);
    if (r)
        return r;
    if (v < lo || v > hi)
        return eng_errf(e, ENG_EFORMAT, "metadata key '%s': %u is outside %u..%u", full, v, lo, hi);
    for (uint32_t l = 0; l < n_layers; l++)
        out[l] = v;
    return 0;
}

static const eng_gguf_tensor *find(const eng_model *m, const char *name) { return eng_gguf_tensor_find(m->gguf, name); }

/* A 1-D vector of n floats, copied (converted if not F32) into an owned
 * buffer. Not used in place: the norms and biases sit between the
 * matrices in the file, and reading them every token would keep the huge
 * page around each one mapped after the packer released its matrices
 * (65 MB over the resident budget on qwen05 q4_k_m: 32 2 MB pages). */
static int get_vec(eng_model *m, const char *name, uint32_t n, int optional, const float **out, eng_err *e)
{
    const eng_gguf_tensor *t = find(m, name);
    *out = NULL;
    if (!t)
        return optional ? 0 : eng_errf(e, ENG_EFORMAT, "missing tensor '%s'", name);
    if (t->n_dims != 1 || t->ne[0] != n)
        return eng_errf(e, ENG_EFORMAT, "tensor '%s' has %u dims [%llu%s], expected [%u]", name, t->n_dims,
                        (unsigned long long)t->ne[0], t->n_dims > 1 ? ", ..." : "", n);
    const simd_traits *tr = simd_type_traits(t->type);
    if (!tr->dequant)
        return eng_errf(e, ENG_EUNSUP, "tensor '%s': type %s is not supported", name, tr->name);
    float *v = malloc(n * sizeof *v);
    if (!v)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    tr->dequant(t->data, v, n);
    *out = v;
    return own(m, v);
}

/* Quantize on load (eng_model_opts.quantize_type): convert one float
 * matrix into an owned buffer of the target type, a row at a time, then
 * drop the source pages from memory (they stay in the file; a fused
 * tensor's other row ranges fault back in when converted). */
static int quantize_on_load(eng_model *m, const char *name, eng_weight *w, eng_err *e)
{
    const simd_traits *to = simd_type_traits(m->load_quant), *from = simd_type_traits(w->type);
    if ((w->type != SIMD_F32 && w->type != SIMD_F16 && w->type != SIMD_BF16) || w->type == m->load_quant ||
        w->cols % to->block)
        return 0;
    size_t rb = simd_row_bytes(m->load_quant, w->cols);
    char *buf = malloc((size_t)w->rows * rb + 1);
    float *row = malloc(w->cols * sizeof *row);
    if (!buf || !row) {
        free(buf);
        free(row);
        return eng_errf(e, ENG_ENOMEM, "tensor '%s': out of memory quantizing on load", name);
    }
    for (uint32_t r = 0; r < w->rows; r++) {
        from->dequant((const char *)w->data + (size_t)r * w->row_bytes, row, w->cols);
        to->quant(row, buf + (size_t)r * rb, w->cols);
    }
    free(row);
    eng_map_release(w->data, (size_t)w->rows * w->row_bytes);
    if (own(m, buf))
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    w->data = buf;
    w->type = m->load_quant;
    w->row_bytes = rb;
    w->act = to->act;
    m->n_load_quant++;
    return 0;
}

/* Rows [first, first+rows) of a matrix tensor of `total` rows of `cols`.
 * Types without a dot kernel are refused here, at load, naming the tensor
 * and type. */
static int get_mat_rows(eng_model *m, const char *name, uint32_t cols, uint32_t total, uint32_t first, uint32_t rows,
                        int optional, eng_weight *w, eng_err *e)
{
    const eng_gguf_tensor *t = find(m, name);
    memset(w, 0, sizeof *w);
    if (!t)
        return optional ? 0 : eng_errf(e, ENG_EFORMAT, "missing tensor '%s'", name);
    if (t->n_dims != 2 || t->ne[0] != cols || t->ne[1] != total)
        return eng_errf(e, ENG_EFORMAT, "tensor '%s' has shape [%llu, %llu%s], expected [%u, %u]", name,
                        (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], t->n_dims > 2 ? ", ..." : "",
                        cols, total);
    const simd_traits *tr = simd_type_traits(t->type);
    if (!tr->dot || !tr->dequant)
        return eng_errf(e, ENG_EUNSUP, "tensor '%s': weight type %s is not supported yet", name, tr->name);
    w->type = t->type;
    w->rows = rows;
    w->cols = cols;
    w->row_bytes = simd_row_bytes(t->type, cols);
    w->data = (const char *)t->data + (size_t)first * w->row_bytes;
    w->act = tr->act;
    if (m->load_quant)
        return quantize_on_load(m, name, w, e);
    return 0;
}

static int get_mat(eng_model *m, const char *name, uint32_t cols, uint32_t rows, int optional, eng_weight *w,
                   eng_err *e)
{
    return get_mat_rows(m, name, cols, rows, 0, rows, optional, w, e);
}

/* The experts' matrices: a 3-D tensor [cols, rows, n] seen as one weight
 * of n*rows rows (expert e's rows follow expert e-1's), in the file's
 * type (quantize on load converts float ones like any matrix). */
static int get_experts(eng_model *m, const char *name, uint32_t cols, uint32_t rows, uint32_t n, eng_weight *w,
                       eng_err *e)
{
    const eng_gguf_tensor *t = find(m, name);
    memset(w, 0, sizeof *w);
    if (!t)
        return eng_errf(e, ENG_EFORMAT, "missing tensor '%s'", name);
    if (t->n_dims != 3 || t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != n)
        return eng_errf(e, ENG_EFORMAT, "tensor '%s' has shape [%llu, %llu, %llu], expected [%u, %u, %u]", name,
                        (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], (unsigned long long)t->ne[2],
                        cols, rows, n);
    const simd_traits *tr = simd_type_traits(t->type);
    if (!tr->dot || !tr->dequant)
        return eng_errf(e, ENG_EUNSUP, "tensor '%s': weight type %s is not supported yet", name, tr->name);
    w->type = t->type;
    w->rows = rows * n;
    w->cols = cols;
    w->row_bytes = simd_row_bytes(t->type, cols);
    w->data = t->data;
    w->act = tr->act;
    if (m->load_quant)
        return quantize_on_load(m, name, w, e);
    return 0;
}

/* A 2-D table of n rows of `len` floats (the experts' biases), copied as
 * get_vec copies a vector; optional ones may be absent. */
static int get_table(eng_model *m, const char *name, uint32_t len, uint32_t n, int optional, const float **out,
                     eng_err *e)
{
    const eng_gguf_tensor *t = find(m, name);
    *out = NULL;
    if (!t)
        return optional ? 0 : eng_errf(e, ENG_EFORMAT, "missing tensor '%s'", name);
    if (t->n_dims != 2 || t->ne[0] != len || t->ne[1] != n)
        return eng_errf(e, ENG_EFORMAT, "tensor '%s' has %u dims [%llu, %llu], expected [%u, %u]", name, t->n_dims,
                        (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], len, n);
    const simd_traits *tr = simd_type_traits(t->type);
    if (!tr->dequant || len % tr->block)
        return eng_errf(e, ENG_EUNSUP, "tensor '%s': type %s is not supported", name, tr->name);
    float *v = malloc((size_t)len * n * sizeof *v);
    if (!v)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    size_t rb = simd_row_bytes(t->type, len);
    for (uint32_t i = 0; i < n; i++)
        tr->dequant((const char *)t->data + i * rb, v + (size_t)i * len, len);
    *out = v;
    return own(m, v);
}

static const arch_desc *load_arch(eng_model *m, eng_err *e)
{
    const eng_gguf *g = m->gguf;
    eng_model_info *in = &m->info;
    eng_str s;
    int r = eng_gguf_get_str(g, "general.architecture", &s, e);
    if (r < 0)
        return NULL;
    if (r == 1) {
        eng_errf(e, ENG_EFORMAT, "missing metadata key 'general.architecture'");
        return NULL;
    }
    size_t n = s.len < sizeof in->arch - 1 ? (size_t)s.len : sizeof in->arch - 1;
    memcpy(in->arch, s.ptr, n);
    in->arch[n] = 0;
    for (size_t i = 0; i < n; i++)
        if (in->arch[i] < 32 || in->arch[i] > 126)
            in->arch[i] = '?';
    for (size_t a = 0; a < N_ARCHS; a++)
        if (s.len == strlen(archs[a].name) && memcmp(archs[a].name, s.ptr, s.len) == 0)
            return &archs[a];
    eng_errf(e, ENG_EUNSUP,
             "unsupported architecture '%s' (this version runs llama, qwen2, qwen3, phi3, gpt2, qwen3moe, gpt-oss, "
             "deci, gemma2 and gemma3)",
             in->arch);
    return NULL;
}

static int load_rope(eng_model *m, const arch_desc *ad, eng_err *e)
{
    const eng_gguf *g = m->gguf;
    eng_model_info *in = &m->info;
    const char *ar = in->arch;
    int r;
    if (ad->learned_pos) {
        in->rope_dims = 0;
        return 0;
    }
    in->rope_dims = in->head_dim;
    if ((r = hp_u32(g, ar, "rope.dimension_count", &in->rope_dims, 0, e)))
        return r;
    if (in->rope_dims == 0 || in->rope_dims > in->head_dim || in->rope_dims % 2)
        return eng_errf(e, ENG_EFORMAT, "%s.rope.dimension_count %u must be even and at most the head size %u", ar,
                        in->rope_dims, in->head_dim);
    in->rope_base = 10000.0f;
    in->rope_scale = 1.0f;
    if ((r = hp_f32(g, ar, "rope.freq_base", &in->rope_base, e)))
        return r;
    if (!(in->rope_base > 0))
        return eng_errf(e, ENG_EFORMAT, "%s.rope.freq_base must be positive", ar);
    char key[128];
    eng_str st;
    snprintf(key, sizeof key, "%s.rope.scaling.type", ar);
    r = eng_gguf_get_str(g, key, &st, e);
    if (r < 0)
        return r;
    int linear = 0, yarn = 0;
    if (r == 0) {
        if (st.len == 6 && memcmp(st.ptr, "linear", 6) == 0)
            linear = 1;
        else if (st.len == 4 && memcmp(st.ptr, "yarn", 4) == 0)
            yarn = 1;
        else if (!(st.len == 4 && memcmp(st.ptr, "none", 4) == 0))
            return eng_errf(e, ENG_EUNSUP, "%s: RoPE scaling type '%.*s' is not supported (none, linear, yarn)", key,
                            (int)(st.len > 32 ? 32 : st.len), st.ptr);
    }
    float factor = 1.0f;
    if ((r = hp_f32(g, ar, "rope.scaling.factor", &factor, e)))
        return r;
    m->rope_attn_factor = 1.0f;
    if ((r = hp_f32(g, ar, "rope.scaling.attn_factor", &m->rope_attn_factor, e)))
        return r;
    if (!(m->rope_attn_factor > 0) || m->rope_attn_factor > 1e3f)
        return eng_errf(e, ENG_EFORMAT, "%s.rope.scaling.attn_factor %g is not a usable factor", ar, m->rope_attn_factor);
    if (yarn) {
        /* YaRN as llama.cpp applies it (gpt-oss): low frequencies
         * interpolated by the factor, high ones kept, a ramp between
         * (beta_fast 32, beta_slow 1), and cos/sin scaled by
         * 1 + 0.1 ln(factor) */
        if (!(factor >= 1) || factor > 1e6f)
            return eng_errf(e, ENG_EFORMAT, "%s.rope.scaling.factor %g is not a usable YaRN factor", ar, factor);
        float log_mul = 0;
        if ((r = hp_f32(g, ar, "rope.scaling.yarn_log_multiplier", &log_mul, e)))
            return r;
        if (log_mul != 0)
            return eng_errf(e, ENG_EUNSUP, "%s.rope.scaling.yarn_log_multiplier %g is not supported (0 only)", ar,
                            log_mul);
        m->yarn_orig_ctx = in->ctx_train;
        if ((r = hp_u32(g, ar, "rope.scaling.original_context_length", &m->yarn_orig_ctx, 0, e)))
            return r;
        if (m->yarn_orig_ctx == 0 || m->yarn_orig_ctx > MAX_CTX)
            return eng_errf(e, ENG_EFORMAT, "%s.rope.scaling.original_context_length %u is outside 1..%u", ar,
                            m->yarn_orig_ctx, MAX_CTX);
        in->rope_yarn = factor;
    } else if (linear || eng_gguf_find(g, key) < 0) {
        /* an untyped factor is linear, as converters write it */
        if (!(factor > 0) || factor > 1e6f)
            return eng_errf(e, ENG_EFORMAT, "%s.rope.scaling.factor %g is not a usable factor", ar, factor);
        in->rope_scale = factor;
    }
    /* Llama 3's frequency factors; Phi-3's short-context factors play the
     * same part (the long ones only matter past the original context) */
    const char *ff = find(m, "rope_freqs.weight") ? "rope_freqs.weight" : "rope_factors_short.weight";
    if ((r = get_vec(m, ff, in->rope_dims / 2, 1, &m->rope_freqs, e)))
        return r;
    for (uint32_t i = 0; m->rope_freqs && i < in->rope_dims / 2; i++)
        if (!(m->rope_freqs[i] > 0) || !isfinite(m->rope_freqs[i]))
            return eng_errf(e, ENG_EFORMAT, "tensor '%s': factor %u is not a positive number", ff, i);
    return 0;
}

/* Sliding-window layers (gpt-oss, gemma3): attention.sliding_window
 * positions (required, or else absent or 0 for none), on the layers
 * attention.sliding_window_pattern picks: a period p (layer l is
 * windowed unless l % p == p-1; p 0: all), default_period when absent,
 * or one boolean a layer. Fills m->swa and info.window. */
static int load_windows(eng_model *m, uint32_t default_period, int required, eng_err *e)
{
    const eng_gguf *g = m->gguf;
    eng_model_info *in = &m->info;
    const char *ar = in->arch;
    int r;
    if ((r = hp_u32(g, ar, "attention.sliding_window", &in->window, required, e)))
        return r;
    if (in->window == 0 && !required)
        return 0;
    if (in->window == 0 || in->window > MAX_CTX)
        return eng_errf(e, ENG_EFORMAT, "%s.attention.sliding_window %u is outside 1..%u", ar, in->window, MAX_CTX);
    char key[128];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", ar);
    uint32_t period = default_period;
    int64_t pi = eng_gguf_find(g, key);
    m->swa = calloc(in->n_layers, 1);
    if (!m->swa)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    if (pi >= 0 && eng_gguf_kv_type(g, (uint64_t)pi) == GGUF_ARRAY) {
        enum eng_gguf_vtype t;
        uint64_t n;
        const void *data;
        if ((r = eng_gguf_get_arr(g, key, -1, &t, &n, &data, e)))
            return r < 0 ? r : ENG_EFORMAT;
        if (t != GGUF_BOOL || n != in->n_layers)
            return eng_errf(e, ENG_EFORMAT, "metadata key '%s': expected %u booleans", key, in->n_layers);
        for (uint32_t l = 0; l < in->n_layers; l++)
            m->swa[l] = ((const uint8_t *)data)[l] != 0;
    } else {
        if ((r = hp_u32(g, ar, "attention.sliding_window_pattern", &period, 0, e)))
            return r;
        for (uint32_t l = 0; l < in->n_layers; l++)
            m->swa[l] = period == 0 || l % period < period - 1;
    }
    return 0;
}

/* Mixture of experts: how many experts, how many a token runs, their
 * FFN width; gpt-oss's sliding window and which layers have it. */
static int load_moe_hparams(eng_model *m, const arch_desc *ad, eng_err *e)
{
    const eng_gguf *g = m->gguf;
    eng_model_info *in = &m->info;
    const char *ar = in->arch;
    int r;
    if ((r = hp_u32(g, ar, "expert_count", &in->n_expert, 1, e)) ||
        (r = hp_u32(g, ar, "expert_used_count", &in->n_expert_used, 1, e)))
        return r;
    if (in->n_expert == 0 || in->n_expert > MAX_EXPERTS)
        return eng_errf(e, ENG_EFORMAT, "%s.expert_count %u is outside 1..%u", ar, in->n_expert, MAX_EXPERTS);
    if (in->n_expert_used == 0 || in->n_expert_used > in->n_expert || in->n_expert_used > MAX_EXPERTS_USED)
        return eng_errf(e, ENG_EFORMAT, "%s.expert_used_count %u is outside 1..%u", ar, in->n_expert_used,
                        in->n_expert < MAX_EXPERTS_USED ? in->n_expert : MAX_EXPERTS_USED);
    /* qwen3moe may leave the width out: the dense width shared by the
     * experts a token runs, as llama.cpp reads it */
    in->expert_ffn = ad->oai ? 0 : in->ffn / in->n_expert_used;
    if ((r = hp_u32(g, ar, "expert_feed_forward_length", &in->expert_ffn, ad->oai, e)))
        return r;
    if (in->expert_ffn == 0 || in->expert_ffn > MAX_FFN)
        return eng_errf(e, ENG_EFORMAT, "%s.expert_feed_forward_length %u is outside 1..%u", ar, in->expert_ffn,
                        MAX_FFN);
    m->gating = ad->gating;
    m->moe_norm = 1;
    char key[128];
    snprintf(key, sizeof key, "%s.expert_weights_norm", ar);
    if (ad->gating == ENG_MOE_SOFTMAX && eng_gguf_find(g, key) >= 0 &&
        (r = eng_gguf_get_bool(g, key, &m->moe_norm, e)))
        return r < 0 ? r : eng_errf(e, ENG_EFORMAT, "metadata key '%s' is not a boolean", key);
    float scale = 0;
    if ((r = hp_f32(g, ar, "expert_weights_scale", &scale, e)))
        return r;
    if (scale != 0 && scale != 1)
        return eng_errf(e, ENG_EUNSUP, "%s.expert_weights_scale %g is not supported (1 only)", ar, scale);
    return ad->oai ? load_windows(m, 2, 1, e) : 0;
}

static int load_hparams(eng_model *m, const arch_desc *ad, uint32_t **heads, uint32_t **kv, uint32_t **ffn, eng_err *e)
{
    const eng_gguf *g = m->gguf;
    eng_model_info *in = &m->info;
    const char *ar = in->arch;
    int r;
    if ((r = hp_u32(g, ar, "embedding_length", &in->dim, 1, e)) || (r = hp_u32(g, ar, "block_count", &in->n_layers, 1, e)))
        return r;
    in->ctx_train = 2048;
    if ((r = hp_u32(g, ar, "context_length", &in->ctx_train, 0, e)))
        return r;
    if (in->dim == 0 || in->dim > MAX_DIM)
        return eng_errf(e, ENG_EFORMAT, "%s.embedding_length %u is outside 1..%u", ar, in->dim, MAX_DIM);
    if (in->n_layers == 0 || in->n_layers > MAX_LAYERS)
        return eng_errf(e, ENG_EFORMAT, "%s.block_count %u is outside 1..%u", ar, in->n_layers, MAX_LAYERS);
    if (in->ctx_train == 0 || in->ctx_train > MAX_CTX)
        return eng_errf(e, ENG_EFORMAT, "%s.context_length %u is outside 1..%u", ar, in->ctx_train, MAX_CTX);
    *heads = calloc(in->n_layers, sizeof **heads);
    *kv = calloc(in->n_layers, sizeof **kv);
    *ffn = calloc(in->n_layers, sizeof **ffn);
    if (!*heads || !*kv || !*ffn)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    if ((r = hp_layers(g, ar, "attention.head_count", in->n_layers, *heads, 1, 0, 0, MAX_HEADS, e)) ||
        (r = hp_layers(g, ar, "feed_forward_length", in->n_layers, *ffn, !ad->moe, 0, 0, MAX_FFN, e)))
        return r;
    /* head_count_kv defaults to head_count, layer by layer */
    char key[128];
    snprintf(key, sizeof key, "%s.attention.head_count_kv", ar);
    int64_t kvi = eng_gguf_find(g, key);
    if (kvi < 0)
        memcpy(*kv, *heads, in->n_layers * sizeof **kv);
    else if ((r = hp_layers(g, ar, "attention.head_count_kv", in->n_layers, *kv, 1, 0, 0, MAX_HEADS, e)))
        return r;
    uint32_t max_heads = 0;
    for (uint32_t l = 0; l < in->n_layers; l++) {
        uint32_t h = (*heads)[l], k = (*kv)[l];
        if ((h == 0) != (k == 0) || (h && (k > h || h % k)))
            return eng_errf(e, ENG_EFORMAT, "layer %u: %u kv heads do not divide %u heads", l, k, h);
        if (h > max_heads)
            max_heads = h;
        if (h != (*heads)[0] || k != (*kv)[0] || (*ffn)[l] != (*ffn)[0])
            in->per_layer = 1;
    }
    if (max_heads == 0)
        return eng_errf(e, ENG_EFORMAT, "%s.attention.head_count: no layer has attention heads", ar);
    in->n_heads = (*heads)[0];
    in->n_kv_heads = (*kv)[0];
    in->ffn = (*ffn)[0];
    in->head_dim = in->dim / max_heads;
    if ((r = hp_u32(g, ar, "attention.key_length", &in->head_dim, 0, e)))
        return r;
    uint32_t vlen = in->head_dim;
    if ((r = hp_u32(g, ar, "attention.value_length", &vlen, 0, e)))
        return r;
    if (in->head_dim == 0 || in->head_dim > MAX_DIM || in->head_dim % 2 || vlen != in->head_dim)
        return eng_errf(e, ENG_EFORMAT, "%s: head size %u (value %u) is not supported", ar, in->head_dim, vlen);
    if ((uint64_t)in->head_dim * max_heads > MAX_DIM * 4ull)
        return eng_errf(e, ENG_EFORMAT, "%s: heads x head size too large", ar);
    in->norm_eps = 1e-5f;
    if ((r = hp_f32(g, ar, ad->norm == ENG_NORM_RMS ? "attention.layer_norm_rms_epsilon" : "attention.layer_norm_epsilon",
                    &in->norm_eps, e)))
        return r;
    if (!(in->norm_eps > 0) || in->norm_eps > 1)
        return eng_errf(e, ENG_EFORMAT, "%s: the norm epsilon must be in (0, 1]", ar);
    in->rope_neox = ad->neox;
    if (ad->moe && (r = load_moe_hparams(m, ad, e)))
        return r;
    /* gemma3: 5 local layers to 1 global by default, gemma2: every other
     * (the even layers), as llama.cpp */
    if (ad->gemma && (r = load_windows(m, ad->gemma == 2 ? 2 : 6, 0, e)))
        return r;
    return load_rope(m, ad, e);
}

/* A layer's mixture of experts: the norm before it, the router, the
 * experts' three matrices (and gpt-oss's biases). */
static int load_experts(eng_model *m, const arch_desc *ad, uint32_t l, eng_err *e)
{
    eng_layer *L = &m->layers[l];
    eng_experts *x = &L->moe;
    uint32_t dim = m->info.dim, ne = m->info.n_expert, ff = m->info.expert_ffn;
    char n[96];
    int r;
#define NAME(s) (snprintf(n, sizeof n, "blk.%u." s, l), n)
    x->n = ne;
    x->used = m->info.n_expert_used;
    x->ffn = ff;
    /* gpt-oss names the norm before its FFN "post_attention_norm" */
    /* the router is never quantized on load, as llama.cpp's quantizer
     * leaves it: a small change moves tokens to other experts */
    int lq = m->load_quant;
    m->load_quant = 0;
    r = get_mat(m, NAME("ffn_gate_inp.weight"), dim, ne, 0, &x->router, e);
    m->load_quant = lq;
    if (r)
        return r;
    if ((r = get_vec(m, ad->oai ? NAME("post_attention_norm.weight") : NAME("ffn_norm.weight"), dim, 0, &L->ffn_norm, e)) ||
        (r = get_vec(m, NAME("ffn_gate_inp.bias"), ne, !ad->oai, &x->router_b, e)) ||
        (r = get_experts(m, NAME("ffn_gate_exps.weight"), dim, ff, ne, &x->gate, e)) ||
        (r = get_experts(m, NAME("ffn_up_exps.weight"), dim, ff, ne, &x->up, e)) ||
        (r = get_experts(m, NAME("ffn_down_exps.weight"), ff, dim, ne, &x->down, e)) ||
        (r = get_table(m, NAME("ffn_gate_exps.bias"), ff, ne, !ad->oai, &x->b_gate, e)) ||
        (r = get_table(m, NAME("ffn_up_exps.bias"), ff, ne, !ad->oai, &x->b_up, e)) ||
        (r = get_table(m, NAME("ffn_down_exps.bias"), dim, ne, !ad->oai, &x->b_down, e)))
        return r;
#undef NAME
    return 0;
}

static int load_layer(eng_model *m, const arch_desc *ad, uint32_t l, eng_err *e)
{
    eng_layer *L = &m->layers[l];
    uint32_t dim = m->info.dim, hd = m->info.head_dim;
    uint32_t nq = L->n_heads * hd, nkv = L->n_kv_heads * hd, ffn = L->ffn;
    int bias_norm = m->norm == ENG_NORM_LAYER;
    char n[96];
    int r;
#define NAME(s) (snprintf(n, sizeof n, "blk.%u." s, l), n)
    if (nq) {
        if ((r = get_vec(m, NAME("attn_norm.weight"), dim, 0, &L->attn_norm, e)) ||
            (r = get_vec(m, NAME("attn_norm.bias"), dim, !bias_norm, &L->attn_norm_b, e)) ||
            (r = get_mat(m, NAME("attn_output.weight"), nq, dim, 0, &L->wo, e)) ||
            (r = get_vec(m, NAME("attn_output.bias"), dim, 1, &L->bo, e)))
            return r;
        if (find(m, NAME("attn_qkv.weight"))) {
            /* fused: q rows, then k rows, then v rows */
            uint32_t all = nq + 2 * nkv;
            const float *b = NULL;
            if ((r = get_mat_rows(m, n, dim, all, 0, nq, 0, &L->wq, e)) ||
                (r = get_mat_rows(m, n, dim, all, nq, nkv, 0, &L->wk, e)) ||
                (r = get_mat_rows(m, n, dim, all, nq + nkv, nkv, 0, &L->wv, e)) ||
                (r = get_vec(m, NAME("attn_qkv.bias"), all, 1, &b, e)))
                return r;
            if (b) {
                L->bq = b;
                L->bk = b + nq;
                L->bv = b + nq + nkv;
            }
        } else if ((r = get_mat(m, NAME("attn_q.weight"), dim, nq, 0, &L->wq, e)) ||
                   (r = get_mat(m, NAME("attn_k.weight"), dim, nkv, 0, &L->wk, e)) ||
                   (r = get_mat(m, NAME("attn_v.weight"), dim, nkv, 0, &L->wv, e)) ||
                   (r = get_vec(m, NAME("attn_q.bias"), nq, 1, &L->bq, e)) ||
                   (r = get_vec(m, NAME("attn_k.bias"), nkv, 1, &L->bk, e)) ||
                   (r = get_vec(m, NAME("attn_v.bias"), nkv, 1, &L->bv, e)))
            return r;
        if (ad->qk_norm && ((r = get_vec(m, NAME("attn_q_norm.weight"), hd, 0, &L->q_norm, e)) ||
                            (r = get_vec(m, NAME("attn_k_norm.weight"), hd, 0, &L->k_norm, e))))
            return r;
        if (ad->oai) {
            if ((r = get_vec(m, NAME("attn_sinks.weight"), L->n_heads, 0, &L->sinks, e)))
                return r;
            for (uint32_t h = 0; h < L->n_heads; h++)
                if (!isfinite(L->sinks[h]))
                    return eng_errf(e, ENG_EFORMAT, "tensor '%s': sink %u is not a finite number", n, h);
        }
        L->window = m->swa && m->swa[l] ? m->info.window : 0;
        if (ad->gemma && (r = get_vec(m, NAME("post_attention_norm.weight"), dim, 0, &L->attn_post_norm, e)))
            return r;
    }
    if (ad->moe)
        return load_experts(m, ad, l, e);
    if (ffn) {
        if ((r = get_vec(m, NAME("ffn_norm.weight"), dim, 0, &L->ffn_norm, e)) ||
            (r = get_vec(m, NAME("ffn_norm.bias"), dim, !bias_norm, &L->ffn_norm_b, e)) ||
            (r = get_mat(m, NAME("ffn_down.weight"), ffn, dim, 0, &L->w_down, e)) ||
            (r = get_vec(m, NAME("ffn_down.bias"), dim, 1, &L->b_down, e)) ||
            (r = get_vec(m, NAME("ffn_up.bias"), ffn, 1, &L->b_up, e)))
            return r;
        if (ad->ffn == ENG_FFN_GELU) {
            if ((r = get_mat(m, NAME("ffn_up.weight"), dim, ffn, 0, &L->w_up, e)))
                return r;
        } else if (!find(m, NAME("ffn_gate.weight"))) {
            /* fused gate+up (phi3): gate rows first, then up rows */
            if ((r = get_mat_rows(m, NAME("ffn_up.weight"), dim, 2 * ffn, 0, ffn, 0, &L->w_gate, e)) ||
                (r = get_mat_rows(m, n, dim, 2 * ffn, ffn, ffn, 0, &L->w_up, e)))
                return r;
        } else if ((r = get_mat(m, NAME("ffn_gate.weight"), dim, ffn, 0, &L->w_gate, e)) ||
                   (r = get_mat(m, NAME("ffn_up.weight"), dim, ffn, 0, &L->w_up, e)))
            return r;
        if (ad->ffn != ENG_FFN_GELU && find(m, NAME("ffn_gate.bias")))
            return eng_errf(e, ENG_EUNSUP, "tensor '%s': a bias on the FFN gate is not supported", n);
        if (ad->gemma && (r = get_vec(m, NAME("post_ffw_norm.weight"), dim, 0, &L->ffn_post_norm, e)))
            return r;
    }
#undef NAME
    return 0;
}

static int load_tensors(eng_model *m, const arch_desc *ad, const uint32_t *heads, const uint32_t *kv,
                        const uint32_t *ffn, eng_err *e)
{
    eng_model_info *in = &m->info;
    uint32_t dim = in->dim;
    const eng_gguf_tensor *te = find(m, "token_embd.weight");
    if (!te)
        return eng_errf(e, ENG_EFORMAT, "missing tensor 'token_embd.weight'");
    if (te->n_dims != 2 || te->ne[0] != dim || te->ne[1] == 0 || te->ne[1] > MAX_VOCAB)
        return eng_errf(e, ENG_EFORMAT, "tensor 'token_embd.weight' has shape [%llu, %llu], expected [%u, n_vocab]",
                        (unsigned long long)te->ne[0], (unsigned long long)te->ne[1], dim);
    in->n_vocab = (uint32_t)te->ne[1];
    int r;
    if ((r = get_mat(m, "token_embd.weight", dim, in->n_vocab, 0, &m->tok_embd, e)))
        return r;
    if (ad->learned_pos && (r = get_mat(m, "position_embd.weight", dim, in->ctx_train, 0, &m->pos_embd, e)))
        return r;
    if ((r = get_vec(m, "output_norm.weight", dim, 0, &m->out_norm, e)) ||
        (r = get_vec(m, "output_norm.bias", dim, m->norm != ENG_NORM_LAYER, &m->out_norm_b, e)) ||
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
        L->n_heads = heads[l];
        L->n_kv_heads = kv[l];
        L->ffn = ad->moe ? 0 : ffn[l]; /* the experts have their own width */
        if ((r = load_layer(m, ad, l, e)))
            return r;
        uint32_t q = L->n_heads * in->head_dim, k = L->n_kv_heads * in->head_dim;
        if (q > m->max_q) m->max_q = q;
        if (k > m->max_kv) m->max_kv = k;
        if (L->ffn > m->max_ffn) m->max_ffn = L->ffn;
        if (m->progress)
            m->progress(m->progress_user, (l + 1.0) / in->n_layers);
    }
    /* parameter count, and the weight type most parameters have (for display) */
    in->main_type = eng_gguf_main_type(m->gguf, &in->n_params);
    /* the experts a token does not run are not active */
    in->n_active_params = in->n_params;
    if (in->n_expert) {
        uint64_t idle = (uint64_t)(in->n_expert - in->n_expert_used) * in->n_layers;
        uint64_t per = 3ull * in->expert_ffn * dim;
        in->n_active_params = in->n_params > idle * per ? in->n_params - idle * per : 0;
    }
    for (uint32_t l = 0; l < in->n_layers; l++)
        in->n_window_layers += m->layers[l].window != 0;
    if (m->n_load_quant)
        in->main_type = m->load_quant;
    return 0;
}

/* Gemma 3's hyper-parameters beyond the common ones, as llama.cpp reads
 * them (it does not read attention.scale, which converters may write). */
static int load_gemma(eng_model *m, int version, eng_err *e)
{
    eng_model_info *in = &m->info;
    const char *ar = in->arch;
    int r;
    if (version == 2) {
        /* one RoPE base; attention scores soft-capped (50 in Google's
         * configs; absent or 0: none) */
        if ((r = hp_f32(m->gguf, ar, "attn_logit_softcapping", &m->attn_softcap, e)))
            return r;
        if (!(m->attn_softcap >= 0) || !isfinite(m->attn_softcap))
            return eng_errf(e, ENG_EFORMAT, "%s.attn_logit_softcapping must be a number >= 0", ar);
    }
    m->rope_local = version == 3 && in->window > 0;
    m->rope_base_local = 10000.0f;
    if ((r = hp_f32(m->gguf, ar, "rope.freq_base_swa", &m->rope_base_local, e)))
        return r;
    if (!(m->rope_base_local > 0))
        return eng_errf(e, ENG_EFORMAT, "%s.rope.freq_base_swa must be positive", ar);
    in->rope_base_swa = m->rope_base_local;
    if ((r = hp_f32(m->gguf, ar, "final_logit_softcapping", &m->logit_softcap, e)))
        return r;
    if (!(m->logit_softcap >= 0) || !isfinite(m->logit_softcap))
        return eng_errf(e, ENG_EFORMAT, "%s.final_logit_softcapping must be a number >= 0", ar);
    m->embd_scale = sqrtf((float)in->dim);
    /* queries scale by 1/sqrt(head size), except in the 27B models (62
     * layers in Gemma 3, 46 in Gemma 2), whose query_pre_attn_scalar is
     * dim / heads (Google's configs, as llama.cpp applies them) */
    if (in->n_layers == (version == 2 ? 46u : 62u) && in->n_heads)
        m->attn_scale = 1.0f / sqrtf((float)(in->dim / in->n_heads));
    return 0;
}

static int load(eng_model *m, eng_err *e)
{
    const arch_desc *ad = load_arch(m, e);
    if (!ad)
        return ENG_EUNSUP;
    m->norm = ad->norm;
    m->ffn_kind = ad->ffn;
    uint32_t *heads = NULL, *kv = NULL, *ffn = NULL;
    int r = load_hparams(m, ad, &heads, &kv, &ffn, e);
    if (!r)
        r = load_tensors(m, ad, heads, kv, ffn, e);
    m->embd_scale = 1.0f;
    m->attn_scale = 1.0f / sqrtf((float)m->info.head_dim);
    m->info.rope_base_swa = m->info.rope_base;
    if (!r && ad->gemma)
        r = load_gemma(m, ad->gemma, e);
    free(heads);
    free(kv);
    free(ffn);
    if (!r)
        r = eng_tok_from_gguf(m->gguf, &m->tok, e);
    if (!r && eng_tok_n_vocab(m->tok) != m->info.n_vocab)
        r = eng_errf(e, ENG_EFORMAT, "the tokenizer has %u tokens but token_embd.weight has %u rows",
                     eng_tok_n_vocab(m->tok), m->info.n_vocab);
    return r;
}

/* The first token reads every weight: have the OS fetch them all now
 * (a no-op for pages already in memory) in huge pages where it can. */
static void prefetch_weights(const eng_model *m)
{
    const char *lo = NULL, *hi = NULL;
    for (uint64_t i = 0; i < eng_gguf_n_tensors(m->gguf); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(m->gguf, i);
        const char *a = t->data, *b = a + t->size;
        if (!lo || a < lo)
            lo = a;
        if (!hi || b > hi)
            hi = b;
    }
    if (lo && hi > lo)
        eng_map_prefetch(lo, (size_t)(hi - lo));
}

int eng_model_open(const char *path, eng_model **out, eng_err *e) { return eng_model_open_opts(path, NULL, out, e); }

int eng_model_open_opts(const char *path, const eng_model_opts *o, eng_model **out, eng_err *e)
{
    *out = NULL;
    simd_init();
    if (o && o->quantize_type) {
        const simd_traits *t = simd_type_traits(o->quantize_type);
        if (!t || !t->quant || !t->dot)
            return eng_errf(e, ENG_EINVAL, "cannot quantize to type %s on load", simd_type_name(o->quantize_type));
    }
    eng_model *m = calloc(1, sizeof *m);
    if (!m)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    m->load_quant = o ? o->quantize_type : 0;
    m->progress = o ? o->progress : NULL;
    m->progress_user = o ? o->progress_user : NULL;
    int r = eng_gguf_open(path, &m->gguf, e);
    if (r) {
        free(m);
        return r;
    }
    m->info.file_size = eng_gguf_file_size(m->gguf);
    if ((r = load(m, e))) {
        eng_err_prefix(e, r, path); /* name the file once, keeping the reason */
        eng_model_close(m);
        return r;
    }
    prefetch_weights(m);
    /* out of memory for the packed copies: the file's layout still
     * works, only slower */
    m->no_pack = o && o->no_pack;
    if (!m->no_pack)
        (void)eng_model_pack_start(m, 1, NULL);
    eng_str name;
    if (eng_gguf_get_str(m->gguf, "general.name", &name, NULL) == 0 && name.len) {
        size_t n = name.len < sizeof m->info.name - 1 ? (size_t)name.len : sizeof m->info.name - 1;
        memcpy(m->info.name, name.ptr, n);
        m->info.name[n] = 0;
    } else {
        snprintf(m->info.name, sizeof m->info.name, "%s", eng_path_base(path));
    }
    *out = m;
    return 0;
}

void eng_model_close(eng_model *m)
{
    if (!m)
        return;
    /* the packing thread first: it may still be reading the buffers
     * converted at load (quantize on load) */
    eng_model_pack_free(m);
    for (size_t i = 0; i < m->n_owned; i++)
        free(m->owned[i]);
    free(m->owned);
    free(m->layers);
    free(m->swa);
    eng_tok_free(m->tok);
    eng_gguf_close(m->gguf);
    free(m);
}

const eng_model_info *eng_model_get_info(const eng_model *m) { return &m->info; }
const eng_tok *eng_model_tok(const eng_model *m) { return m->tok; }
const eng_gguf *eng_model_gguf(const eng_model *m) { return m->gguf; }
const eng_layer *eng_model_layer(const eng_model *m, uint32_t l) { return &m->layers[l]; }
const eng_weight *eng_model_output(const eng_model *m) { return &m->output; }
enum eng_norm eng_model_norm(const eng_model *m) { return m->norm; }
enum eng_ffn eng_model_ffn(const eng_model *m) { return m->ffn_kind; }

static uint64_t weight_bytes(const eng_weight *w) { return w->data ? (uint64_t)w->rows * w->row_bytes : 0; }

uint64_t eng_model_bytes_per_token(const eng_model *m)
{
    uint64_t b = m->tok_embd.row_bytes + weight_bytes(&m->output);
    for (uint32_t l = 0; l < m->info.n_layers; l++) {
        const eng_layer *L = &m->layers[l];
        b += weight_bytes(&L->wq) + weight_bytes(&L->wk) + weight_bytes(&L->wv) + weight_bytes(&L->wo) +
             weight_bytes(&L->w_gate) + weight_bytes(&L->w_up) + weight_bytes(&L->w_down);
        const eng_experts *x = &L->moe;
        if (x->n)
            b += weight_bytes(&x->router) +
                 (weight_bytes(&x->gate) + weight_bytes(&x->up) + weight_bytes(&x->down)) / x->n * x->used;
    }
    return b;
}
