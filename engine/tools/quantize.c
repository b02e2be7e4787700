/* Quantizing a GGUF file, tensor by tensor. The input stays mapped; each
 * matrix is converted a slice of rows at a time (so no whole float copy
 * of a large tensor is made), and only the converted outputs are held
 * until the writer saves. A tensor whose type does not change is written
 * straight from the mapping, byte for byte.
 *
 * Which type a tensor gets (eng_quant_plan), in this order:
 *  - vectors (norms, biases) keep their type;
 *  - f32/f16/bf16 targets: every matrix gets the target type;
 *  - the output matrix (or the token embedding when it doubles as the
 *    output) gets q6_k under every target narrower than 8 bits, q8_0
 *    under q8_0: the logits are the most sensitive product, as
 *    llama.cpp also judges (which gives it q5_k under iq3_xxs, iq2_s,
 *    iq2_xs, iq2_xxs and iq1_*, and so does this tool);
 *  - mixes (q4_k_m, q5_k_m): attn_v and ffn_down get q6_k in the first
 *    and last eighth of the layers and in every third layer between; a
 *    fused attn_qkv (phi3, gpt2) gets one step more than the base type
 *    (q5_k / q6_k), llama.cpp's rule for it;
 *  - the low-bit mixes (llama.cpp's file types of the same names, whose
 *    choices they follow for dense models): q2_k gives attn_v,
 *    attn_output and ffn_down q3_k; q3_k_m gives attn_v q5_k in layers
 *    0-1 and q4_k after, ffn_down q5_k in the first sixteenth of the
 *    layers and q4_k after, attn_output and attn_qkv q4_k; q3_k_l gives
 *    attn_v, attn_output and ffn_down q5_k and attn_qkv q4_k; iq4_xs and
 *    iq4_nl give ffn_down q5_k in the first eighth of the layers; q3_k_s
 *    is q3_k throughout. (llama.cpp also widens attn_v when 4 or more query
 *    heads share a key head; these rules do not look at head counts.)
 *  - the i-quant mixes, llama.cpp's rules for dense models when an
 *    importance matrix is given: iq2_xxs, iq2_xs, iq1_s and iq1_m give
 *    attn_v, token_embd and ffn_down in the first eighth of the layers
 *    q2_k, and iq1_* attn_output iq2_xxs; iq2_s (= iq2_m) gives attn_v,
 *    attn_output, token_embd and the first eighth's ffn_down iq3_s;
 *    iq3_xxs gives attn_output and token_embd iq3_s, attn_q and attn_k
 *    iq2_s; iq3_xs is iq3_s with iq3_xxs for attn_q, attn_k, and ffn_gate
 *    and ffn_up from layer n/8 to 7n/8; iq3_m is iq3_s with q4_k for
 *    attn_v, attn_output, attn_qkv and the first eighth's ffn_down; iq3_s
 *    is iq3_s throughout. iq2_xxs, iq2_xs, iq1_s and iq1_m tensors need
 *    an importance entry (eng_quant_needs_imatrix): the run is refused
 *    before any work without one;
 *  - a matrix whose rows do not fit the block falls back: q4_k -> q5_0,
 *    q5_k -> q5_1, q6_k -> q8_0 (the 32-block type of at least the same
 *    quality), q2_k / q3_k -> q4_0, iq4_xs and every i-quant below 4 bits
 *    -> iq4_nl (llama.cpp's rule), and any 32-block type -> f16. */
#include "quantize.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"
#include "simd.h"

/* LLAMA_FTYPE numbers: ALL_F32 0, MOSTLY_F16 1, Q4_0 2, Q4_1 3, Q8_0 7,
 * Q5_0 8, Q5_1 9, Q4_K_S 14, Q4_K_M 15, Q5_K_S 16, Q5_K_M 17, Q6_K 18,
 * BF16 32, MXFP4_MOE 38. A plain K type is the "_S" file type. */
static const eng_qtarget targets[] = {
    {"f32", SIMD_F32, -1, 0, 0, 0},     {"f16", SIMD_F16, -1, 1, 0, 0},     {"bf16", SIMD_BF16, -1, 32, 0, 0},
    {"q8_0", SIMD_Q8_0, -1, 7, 0, 0},   {"q6_k", SIMD_Q6_K, -1, 18, 0, 0},  {"q5_k_m", SIMD_Q5_K, SIMD_Q6_K, 17, 0, 0},
    {"q5_k", SIMD_Q5_K, -1, 16, 0, 0},  {"q5_1", SIMD_Q5_1, -1, 9, 0, 0},   {"q5_0", SIMD_Q5_0, -1, 8, 0, 0},
    {"q4_k_m", SIMD_Q4_K, SIMD_Q6_K, 15, 0, 0}, {"q4_k", SIMD_Q4_K, -1, 14, 0, 0}, {"q4_1", SIMD_Q4_1, -1, 3, 0, 0},
    {"q4_0", SIMD_Q4_0, -1, 2, 0, 0},
    /* the low-bit K types and mixes (Q2_K 10, Q3_K_S 11, Q3_K_M 12,
     * Q3_K_L 13) and the non-linear 4-bit types (IQ4_NL 25, IQ4_XS 30) */
    {"q3_k_l", SIMD_Q3_K, -1, 13, 0, ENG_QMIX_Q3_K_L}, {"q3_k_m", SIMD_Q3_K, -1, 12, 0, ENG_QMIX_Q3_K_M},
    {"q3_k_s", SIMD_Q3_K, -1, 11, 0, ENG_QMIX_NONE},  {"q3_k", SIMD_Q3_K, -1, 11, 0, ENG_QMIX_NONE},
    {"q2_k", SIMD_Q2_K, -1, 10, 0, ENG_QMIX_Q2_K},
    {"iq4_xs", SIMD_IQ4_XS, -1, 30, 0, ENG_QMIX_IQ4}, {"iq4_nl", SIMD_IQ4_NL, -1, 25, 0, ENG_QMIX_IQ4},
    /* the i-quants below 4 bits: IQ3_M 27, IQ3_S 26, IQ3_XS 22, IQ3_XXS
     * 23, IQ2_M 29 (llama.cpp's file type whose base is iq2_s; its
     * "IQ2_S" file type is mostly iq2_xs), IQ2_XS 20, IQ2_XXS 19, IQ1_M
     * 31, IQ1_S 24 */
    {"iq3_m", SIMD_IQ3_S, -1, 27, 0, ENG_QMIX_IQ3_M},   {"iq3_s", SIMD_IQ3_S, -1, 26, 0, ENG_QMIX_NONE},
    {"iq3_xs", SIMD_IQ3_S, -1, 22, 0, ENG_QMIX_IQ3_XS}, {"iq3_xxs", SIMD_IQ3_XXS, -1, 23, 0, ENG_QMIX_IQ3_XXS},
    {"iq2_s", SIMD_IQ2_S, -1, 29, 0, ENG_QMIX_IQ2_S},   {"iq2_m", SIMD_IQ2_S, -1, 29, 0, ENG_QMIX_IQ2_S},
    {"iq2_xs", SIMD_IQ2_XS, -1, 20, 0, ENG_QMIX_IQ2},   {"iq2_xxs", SIMD_IQ2_XXS, -1, 19, 0, ENG_QMIX_IQ2},
    {"iq1_m", SIMD_IQ1_M, -1, 31, 0, ENG_QMIX_IQ1},     {"iq1_s", SIMD_IQ1_S, -1, 24, 0, ENG_QMIX_IQ1},
    /* llama.cpp's MXFP4_MOE file type (38); here every matrix but the
     * output, not only MoE experts (nibble runs dense models) */
    {"mxfp4", SIMD_MXFP4, -1, 38, 0, 0},
    /* the uniform baseline (stored as f32, see fake_bits) */
    {"u8g32", SIMD_F32, -1, 0, 8, 0},   {"u4g32", SIMD_F32, -1, 0, 4, 0},   {"u2g32", SIMD_F32, -1, 0, 2, 0},
    {NULL, 0, -1, 0, 0, 0},
};

const eng_qtarget *eng_qtargets(void) { return targets; }

const eng_qtarget *eng_qtarget_find(const char *name)
{
    if (!name)
        return NULL;
    for (const eng_qtarget *t = targets; t->name; t++) {
        size_t i = 0;
        while (t->name[i] && tolower((unsigned char)name[i]) == t->name[i])
            i++;
        if (!t->name[i] && !name[i])
            return t;
    }
    return NULL;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* Layer of "blk.N.xxx", or -1. */
static int layer_of(const char *name)
{
    if (strncmp(name, "blk.", 4))
        return -1;
    char *end;
    long l = strtol(name + 4, &end, 10);
    return end != name + 4 && *end == '.' && l >= 0 && l < 100000 ? (int)l : -1;
}

static int more_bits_layer(int l, uint32_t n)
{
    int n8 = (int)n / 8;
    return l < n8 || l >= 7 * (int)n / 8 || (l - n8) % 3 == 2;
}

static int fallback_of(int type)
{
    switch (type) {
    case SIMD_Q4_K: return SIMD_Q5_0;
    case SIMD_Q5_K: return SIMD_Q5_1;
    case SIMD_Q6_K: return SIMD_Q8_0;
    case SIMD_Q2_K:
    case SIMD_Q3_K: return SIMD_Q4_0;
    case SIMD_IQ4_XS:
    case SIMD_IQ3_S:
    case SIMD_IQ3_XXS:
    case SIMD_IQ2_S:
    case SIMD_IQ2_XS:
    case SIMD_IQ2_XXS:
    case SIMD_IQ1_M:
    case SIMD_IQ1_S: return SIMD_IQ4_NL;
    default: return SIMD_F16;
    }
}

int eng_quant_needs_imatrix(int type)
{
    return type == SIMD_IQ2_XXS || type == SIMD_IQ2_XS || type == SIMD_IQ1_S || type == SIMD_IQ1_M;
}

/* The i-quant mixes' type for the token embedding (when it is not also
 * the output), or -1 to keep the base. */
static int mix_embd_type(int mix)
{
    switch (mix) {
    case ENG_QMIX_IQ2:
    case ENG_QMIX_IQ1: return SIMD_Q2_K;
    case ENG_QMIX_IQ2_S:
    case ENG_QMIX_IQ3_XXS: return SIMD_IQ3_S;
    default: return -1;
    }
}

/* The low-bit mixes' type for a layer tensor, or -1 to keep the base. */
static int mix_type(int mix, const char *name, int l, uint32_t n_layers)
{
    int v = ends_with(name, ".attn_v.weight"), o = ends_with(name, ".attn_output.weight");
    int down = ends_with(name, ".ffn_down.weight"), qkv = ends_with(name, ".attn_qkv.weight");
    int qk = ends_with(name, ".attn_q.weight") || ends_with(name, ".attn_k.weight");
    int gate_up = ends_with(name, ".ffn_gate.weight") || ends_with(name, ".ffn_up.weight");
    int first8 = l < (int)n_layers / 8;
    switch (mix) {
    case ENG_QMIX_IQ2:
        return v || (down && first8) ? SIMD_Q2_K : -1;
    case ENG_QMIX_IQ1:
        return v || (down && first8) ? SIMD_Q2_K : o ? SIMD_IQ2_XXS : -1;
    case ENG_QMIX_IQ2_S:
        return v || o || (down && first8) ? SIMD_IQ3_S : -1;
    case ENG_QMIX_IQ3_XXS:
        return o ? SIMD_IQ3_S : qk ? SIMD_IQ2_S : -1;
    case ENG_QMIX_IQ3_XS:
        return qk || (gate_up && !first8 && l < 7 * (int)n_layers / 8) ? SIMD_IQ3_XXS : -1;
    case ENG_QMIX_IQ3_M:
        return v || o || qkv || (down && first8) ? SIMD_Q4_K : -1;
    case ENG_QMIX_Q2_K:
        return v || o || down ? SIMD_Q3_K : -1;
    case ENG_QMIX_Q3_K_M:
        if (v)
            return l < 2 ? SIMD_Q5_K : SIMD_Q4_K;
        if (down)
            return l < (int)n_layers / 16 ? SIMD_Q5_K : SIMD_Q4_K;
        return o || qkv ? SIMD_Q4_K : -1;
    case ENG_QMIX_Q3_K_L:
        return v || o || down ? SIMD_Q5_K : qkv ? SIMD_Q4_K : -1;
    case ENG_QMIX_IQ4:
        return down && l < (int)n_layers / 8 ? SIMD_Q5_K : -1;
    default:
        return -1;
    }
}

int eng_quant_plan(const eng_qtarget *t, const char *name, uint32_t n_dims, const uint64_t *ne, int src_type,
                   uint32_t n_layers, int has_output, int *planned, int *fallback)
{
    *fallback = 0;
    *planned = src_type;
    /* routers stay as they are (llama.cpp leaves them unquantized too):
     * a small change to one moves tokens to other experts */
    if (n_dims < 2 || !ends_with(name, ".weight") || ends_with(name, ".ffn_gate_inp.weight"))
        return src_type;
    int type = t->type;
    int is_output = !strcmp(name, "output.weight") || (!has_output && !strcmp(name, "token_embd.weight"));
    int low_iq = t->mix == ENG_QMIX_IQ2 || t->mix == ENG_QMIX_IQ1 || t->mix == ENG_QMIX_IQ2_S ||
                 t->mix == ENG_QMIX_IQ3_XXS;
    if (type != SIMD_F32 && type != SIMD_F16 && type != SIMD_BF16 && is_output)
        type = type == SIMD_Q8_0 ? SIMD_Q8_0 : low_iq ? SIMD_Q5_K : SIMD_Q6_K;
    int l = layer_of(name);
    if (t->more_bits_type >= 0 && l >= 0 && (ends_with(name, ".attn_v.weight") || ends_with(name, ".ffn_down.weight") ||
                                              ends_with(name, ".ffn_down_exps.weight")) &&
        more_bits_layer(l, n_layers))
        type = t->more_bits_type;
    if (t->more_bits_type >= 0 && l >= 0 && ends_with(name, ".attn_qkv.weight"))
        type = t->type == SIMD_Q4_K ? SIMD_Q5_K : SIMD_Q6_K;
    if (l >= 0 && !is_output) {
        int m = mix_type(t->mix, name, l, n_layers);
        if (m >= 0)
            type = m;
    }
    if (!is_output && !strcmp(name, "token_embd.weight") && mix_embd_type(t->mix) >= 0)
        type = mix_embd_type(t->mix);
    *planned = type;
    while (ne[0] % simd_type_traits(type)->block) {
        type = fallback_of(type);
        *fallback = 1;
    }
    return type;
}

int eng_quant_rows(int type, const float *src, void *dst, uint64_t rows, uint64_t cols)
{
    const simd_traits *tr = simd_type_traits(type);
    size_t rb = simd_row_bytes(type, cols);
    if (!tr || !tr->quant || !rb)
        return ENG_EINVAL;
    for (uint64_t r = 0; r < rows; r++)
        tr->quant(src + r * cols, (char *)dst + r * rb, (size_t)cols);
    return 0;
}

void eng_fake_quant_row(const float *src, float *dst, size_t n, int bits, int group)
{
    float levels = (float)((1 << bits) - 1);
    for (size_t g0 = 0; g0 < n; g0 += (size_t)group) {
        size_t g1 = g0 + (size_t)group < n ? g0 + (size_t)group : n;
        float lo = src[g0], hi = src[g0];
        for (size_t i = g0; i < g1; i++) {
            if (src[i] < lo) lo = src[i];
            if (src[i] > hi) hi = src[i];
        }
        float d = simd_f16_to_f32(simd_f32_to_f16((hi - lo) / levels));
        float m = simd_f16_to_f32(simd_f32_to_f16(lo));
        for (size_t i = g0; i < g1; i++) {
            float q = d > 0 ? rintf((src[i] - m) / d) : 0;
            q = q < 0 ? 0 : q > levels ? levels : q;
            dst[i] = m + d * q;
        }
    }
}

static const eng_tensor_edit *edit_for(const eng_quant_opts *o, const char *name)
{
    for (size_t i = 0; o->edits && i < o->n_edits; i++)
        if (!strcmp(o->edits[i].name, name))
            return &o->edits[i];
    return NULL;
}

static int is_float_type(int t) { return t == SIMD_F32 || t == SIMD_F16 || t == SIMD_BF16; }

/* Keys this tool sets itself (not copied from the input). */
static int own_key(const char *k)
{
    return !strcmp(k, "general.file_type") || !strcmp(k, "general.quantization_version") ||
           !strncmp(k, "nibble.quantize.", 16) || !strncmp(k, "quantize.imatrix.", 17);
}

static void notef(const eng_quant_opts *o, const char *fmt, ...) ENG_PRINTF(2, 3);
static void notef(const eng_quant_opts *o, const char *fmt, ...)
{
    if (!o->note)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    o->note(o->user, line);
}

#define SLICE_ROWS 64u

/* The importance of the columns of matrix k of imatrix entry x, divided
 * by the square of an edit's column factor, into imp (cols values). */
static void importance_of(const eng_imatrix_entry *x, uint32_t k, const eng_tensor_edit *ed, float *imp)
{
    eng_imatrix_importance(x, k, imp);
    if (ed && ed->col)
        for (uint32_t c = 0; c < x->n_cols; c++)
            imp[c] = ed->col[c] != 0 ? imp[c] / (ed->col[c] * ed->col[c]) : imp[c];
}

/* Clip each group of ed's clip_group values of row r (n values at x) to
 * its ratio of the group's largest magnitude. */
static void clip_row(const eng_tensor_edit *ed, uint64_t r, float *x, uint64_t n)
{
    uint32_t gsz = ed->clip_group;
    for (uint64_t g0 = 0; gsz && g0 + gsz <= n; g0 += gsz) {
        float ratio = ed->clip[r * (n / gsz) + g0 / gsz], amax = 0;
        if (!(ratio < 1))
            continue;
        for (uint32_t i = 0; i < gsz; i++)
            amax = fmaxf(amax, fabsf(x[g0 + i]));
        float lim = amax * ratio;
        for (uint32_t i = 0; i < gsz; i++)
            x[g0 + i] = fminf(lim, fmaxf(-lim, x[g0 + i]));
    }
}

/* The GPTQ pass on 2-D tensor t (edit ed's factors applied first; with
 * importance entry ix, the block scales by the weighted search) into
 * out. Returns 0, 1 when H is not positive definite (the caller rounds to
 * nearest instead), or a negative code. */
static int convert_gptq(const eng_quant_opts *o, const eng_gguf_tensor *t, int type, const eng_tensor_edit *ed,
                        const eng_imatrix_entry *ix, const double *H, const double *Hr, uint32_t hr_per,
                        const double *T, const double *Tr, char *out, eng_quant_report *rep)
{
    const simd_traits *src = simd_type_traits(t->type), *dt = simd_type_traits(type);
    uint64_t cols = t->ne[0], rows = t->ne[1];
    size_t srb = simd_row_bytes(t->type, cols);
    float *W = malloc((size_t)(rows * cols) * sizeof *W + 1);
    float *imp = ix && dt->quant_imp ? malloc((size_t)cols * sizeof *imp) : NULL;
    double *wd = T || Tr ? malloc((size_t)cols * sizeof *wd) : NULL;
    if (!W || (ix && dt->quant_imp && !imp) || ((T || Tr) && !wd)) {
        free(W);
        free(imp);
        free(wd);
        return ENG_ENOMEM;
    }
    for (uint64_t r = 0; r < rows; r++) {
        float *w = W + r * cols;
        src->dequant((const char *)t->data + r * srb, w, (size_t)cols);
        if (T || Tr) {
            /* --asym: the moved target T w (before any AWQ factors: T maps
             * the float model's columns); --asym-rows: the row's own T */
            const double *Tm = Tr ? Tr + r * cols * cols : T;
            for (uint64_t i = 0; i < cols; i++) {
                const double *ti = Tm + i * cols;
                double a = 0;
                for (uint64_t j = 0; j < cols; j++)
                    a += ti[j] * w[j];
                wd[i] = a;
            }
            for (uint64_t i = 0; i < cols; i++)
                w[i] = (float)wd[i];
        }
        if (ed)
            for (uint64_t c = 0; c < cols; c++)
                w[c] *= (ed->col ? ed->col[c] : 1.0f) * (ed->row ? ed->row[r] : 1.0f);
    }
    if (imp)
        importance_of(ix, 0, ed, imp);
    eng_gptq_params p = o->gptq_params;
    p.col = ed ? ed->col : NULL;
    p.imp = imp;
    p.row_h = Hr;
    p.row_h_per = hr_per;
    eng_gptq_stats st;
    int r = eng_gptq_quant_matrix(type, W, (uint32_t)rows, (uint32_t)cols, H, &p, out, &st);
    free(W);
    free(imp);
    free(wd);
    if (r == ENG_EFORMAT) {
        notef(o, "%s: its Hessian is not positive definite even with damping: rounded to nearest", t->name);
        return 1;
    }
    if (!r) {
        rep->gptq_ratio += st.err_rtn > 0 ? st.err_gptq / st.err_rtn : 1.0;
        rep->n_gptq++;
    }
    return r;
}

/* --asym layer or stage wise: the tensors ord[from .. upto) of in
 * converted so far (bufs, sizes) written over their bytes in the
 * quantized file at path (the first pass's file: the same types, so the
 * same sizes and offsets), the collection's model of it closed meanwhile,
 * so that the next group's sums see the matrices before it as they will
 * be written. */
static int asym_refresh(eng_gptq *gq, const char *path, const eng_gguf *in, const uint64_t *ord, void *const *bufs,
                        const size_t *sizes, uint64_t from, uint64_t upto, eng_err *e)
{
    eng_gptq_asym_close(gq);
    eng_gguf *q = NULL;
    uint64_t *offs = calloc(upto + 1, sizeof *offs);
    int r = offs ? eng_gguf_open(path, &q, e) : eng_errf(e, ENG_ENOMEM, "out of memory");
    if (r) {
        free(offs);
        return r;
    }
    /* where each finished tensor lies in the file (0: leave it), the file closed before writing */
    for (uint64_t j = from; j < upto; j++) {
        uint64_t k = ord[j];
        const eng_gguf_tensor *t = bufs[k] ? eng_gguf_tensor_find(q, eng_gguf_tensor_at(in, k)->name) : NULL;
        offs[j] = t && t->size == sizes[k] ? eng_gguf_data_offset(q) + t->offset : 0;
    }
    eng_gguf_close(q);
    FILE *fp = fopen(path, "r+b");
    for (uint64_t j = from; fp && j < upto; j++)
        if (offs[j] && (offs[j] > LONG_MAX || fseek(fp, (long)offs[j], SEEK_SET) ||
                        fwrite(bufs[ord[j]], 1, sizes[ord[j]], fp) != sizes[ord[j]])) {
            fclose(fp);
            fp = NULL;
        }
    free(offs);
    if (!fp || fclose(fp))
        return eng_errf(e, ENG_EIO, "cannot write the finished layers into %s", path);
    return eng_gptq_asym_open(gq, e);
}

/* The rows of a matrix converted without GPTQ, a slice of SLICE_ROWS at
 * a time, slices handed out to the threads as they come free. Each row's
 * bytes depend on that row alone (its values, its edit factors, its
 * matrix's importance), so the output is the same at any thread count. */
typedef struct {
    const eng_quant_opts *o;
    const eng_gguf_tensor *t;
    const simd_traits *src, *dt;
    int type, fake_bits;
    const eng_tensor_edit *ed;
    const eng_imatrix_entry *ix;
    uint64_t rows, cols;
    size_t rb, srb;
    char *out;
    float **tmp, **imp;  /* per participant: SLICE_ROWS rows, cols importances */
    uint64_t *imp_k;     /* per participant: the matrix (expert) imp holds */
    atomic_uint_fast64_t next;
} conv_job;

static void convert_slice(conv_job *j, int ith, uint64_t r0)
{
    const eng_tensor_edit *ed = j->ed;
    uint64_t cols = j->cols, n = j->rows - r0 < SLICE_ROWS ? j->rows - r0 : SLICE_ROWS;
    float *tmp = j->tmp[ith], *imp = j->imp ? j->imp[ith] : NULL;
    for (uint64_t r = 0; r < n; r++)
        j->src->dequant((const char *)j->t->data + (r0 + r) * j->srb, tmp + r * cols, (size_t)cols);
    if (ed)
        for (uint64_t r = 0; r < n; r++)
            for (uint64_t c = 0; c < cols; c++)
                tmp[r * cols + c] *= (ed->col ? ed->col[c] : 1.0f) * (ed->row ? ed->row[r0 + r] : 1.0f);
    if (ed && ed->clip && j->t->ne[2] * j->t->ne[3] == 1)
        for (uint64_t r = 0; r < n; r++)
            clip_row(ed, r0 + r, tmp + r * cols, cols);
    if (j->fake_bits)
        for (uint64_t r = 0; r < n; r++)
            eng_fake_quant_row(tmp + r * cols, tmp + r * cols, (size_t)cols, j->fake_bits, 32);
    if (!imp) {
        eng_quant_rows(j->type, tmp, j->out + r0 * j->rb, n, cols);
        return;
    }
    for (uint64_t r = 0; r < n; r++) {
        uint64_t k = (r0 + r) / j->t->ne[1];
        if (k != j->imp_k[ith]) {
            importance_of(j->ix, (uint32_t)k, ed, imp);
            j->imp_k[ith] = k;
        }
        j->dt->quant_imp(tmp + r * cols, j->out + (r0 + r) * j->rb, (size_t)cols, imp);
    }
}

static void convert_part(void *arg, int ith, int nth)
{
    (void)nth;
    conv_job *j = arg;
    for (;;) {
        uint64_t s = atomic_fetch_add(&j->next, 1);
        if (s * SLICE_ROWS >= j->rows)
            return;
        convert_slice(j, ith, s * SLICE_ROWS);
    }
}

/* Convert tensor t to `type` (applying edit ed; with importance entry
 * ix, through the type's weighted quantizer; with a Hessian H, through
 * the GPTQ pass) into a new buffer, on pool's threads (NULL: this one). */
static void *convert(const eng_quant_opts *o, eng_pool *pool, const eng_gguf_tensor *t, int type,
                     const eng_tensor_edit *ed, int fake_bits, const eng_imatrix_entry *ix, const double *H,
                     const double *Hr, uint32_t hr_per, const double *T, const double *Tr, eng_quant_report *rep,
                     size_t *out_bytes, eng_err *e)
{
    const simd_traits *src = simd_type_traits(t->type), *dt = simd_type_traits(type);
    uint64_t cols = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];
    if (!src->dequant) {
        eng_errf(e, ENG_EUNSUP, "tensor '%s': cannot read type %s", t->name, src->name);
        return NULL;
    }
    size_t rb = simd_row_bytes(type, cols), srb = simd_row_bytes(t->type, cols);
    char *out = malloc(rb * rows + 1);
    if (!out) {
        eng_errf(e, ENG_ENOMEM, "tensor '%s': out of memory", t->name);
        return NULL;
    }
    if (H) {
        int r = convert_gptq(o, t, type, ed, ix, H, Hr, hr_per, T, Tr, out, rep);
        if (r < 0) {
            free(out);
            eng_errf(e, r, "tensor '%s': %s", t->name, r == ENG_ENOMEM ? "out of memory for the GPTQ pass" :
                     "the GPTQ pass cannot write this type");
            return NULL;
        }
        if (r == 0) {
            *out_bytes = rb * rows;
            return out;
        }
    }
    int nth = pool ? eng_pool_threads(pool) : 1;
    uint64_t slices = (rows + SLICE_ROWS - 1) / SLICE_ROWS;
    if ((uint64_t)nth > slices)
        nth = slices ? (int)slices : 1;
    int with_imp = ix && dt->quant_imp;
    conv_job j = {.o = o, .t = t, .src = src, .dt = dt, .type = type, .fake_bits = fake_bits, .ed = ed, .ix = ix,
                  .rows = rows, .cols = cols, .rb = rb, .srb = srb, .out = out,
                  .tmp = calloc((size_t)nth, sizeof *j.tmp), .imp = with_imp ? calloc((size_t)nth, sizeof *j.imp) : NULL,
                  .imp_k = malloc((size_t)nth * sizeof *j.imp_k)};
    atomic_init(&j.next, 0);
    int ok = j.tmp && (!with_imp || j.imp) && j.imp_k;
    for (int i = 0; ok && i < nth; i++) {
        j.imp_k[i] = UINT64_MAX;
        ok = (j.tmp[i] = malloc(SLICE_ROWS * cols * sizeof(float) + 1)) != NULL &&
             (!with_imp || (j.imp[i] = malloc(cols * sizeof(float) + 1)) != NULL);
    }
    if (ok) {
        if (nth > 1)
            eng_pool_run_parts(pool, convert_part, &j, nth);
        else
            convert_part(&j, 0, 1);
    }
    for (int i = 0; i < nth; i++) {
        free(j.tmp ? j.tmp[i] : NULL);
        free(j.imp ? j.imp[i] : NULL);
    }
    free(j.tmp);
    free(j.imp);
    free(j.imp_k);
    if (!ok) {
        free(out);
        eng_errf(e, ENG_ENOMEM, "tensor '%s': out of memory", t->name);
        return NULL;
    }
    *out_bytes = rb * rows;
    return out;
}

int eng_quantize_file(const char *in_path, const char *out_path, const eng_quant_opts *o, eng_quant_report *rep,
                      eng_err *e)
{
    eng_quant_report dummy;
    if (!rep)
        rep = &dummy;
    memset(rep, 0, sizeof *rep);
    if (!o || !o->target)
        return eng_errf(e, ENG_EINVAL, "no target type");
    simd_init();
    eng_gguf *g = NULL;
    int r = eng_gguf_open(in_path, &g, e);
    if (r)
        return r;
    uint64_t nt = eng_gguf_n_tensors(g);
    eng_gguf_writer *w = eng_gguf_writer_new();
    void **bufs = calloc(nt + 1, sizeof *bufs);
    size_t *bsz = calloc(nt + 1, sizeof *bsz);
    int *types = calloc(nt + 1, sizeof *types);
    uint64_t *ord = malloc((nt + 1) * sizeof *ord); /* the conversion order (see below) */
    long *keys = malloc((nt + 1) * sizeof *keys);
    uint64_t patched = 0; /* --asym layer or stage wise: tensors ord[0 .. patched) written into the first file */
    eng_pool *pool = o->threads > 1 ? eng_pool_new(o->threads) : NULL;
    if (!w || !bufs || !bsz || !types || !ord || !keys || (o->threads > 1 && !pool)) {
        r = eng_errf(e, ENG_ENOMEM, "out of memory");
        goto done;
    }
    /* the input's type, refusing quantized input unless asked */
    for (uint64_t i = 0; i < nt; i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        if (t->n_dims >= 2 && !is_float_type(t->type) && t->type != SIMD_MXFP4) {
            if (!o->allow_requantize) {
                r = eng_errf(e, ENG_EINVAL,
                             "%s is already quantized (tensor '%s' is %s): quantizing it again adds the errors of "
                             "both; pass --allow-requantize to do it anyway",
                             in_path, t->name, simd_type_name(t->type));
                goto done;
            }
            notef(o, "requantizing: %s is already quantized (e.g. '%s' is %s); its errors add to the new ones",
                  in_path, t->name, simd_type_name(t->type));
            break;
        }
    }
    eng_str arch;
    uint32_t n_layers = 0;
    if (eng_gguf_get_str(g, "general.architecture", &arch, NULL) == 0 && arch.len < 64) {
        char key[96];
        snprintf(key, sizeof key, "%.*s.block_count", (int)arch.len, arch.ptr);
        eng_gguf_get_u32(g, key, &n_layers, NULL);
    }
    int has_output = eng_gguf_tensor_find(g, "output.weight") != NULL;
    /* the types that need importance are refused without it before any
     * work is done (llama.cpp refuses them too) */
    for (uint64_t i = 0; i < nt; i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        int planned, fb;
        int type = eng_quant_plan(o->target, t->name, t->n_dims, t->ne, t->type, n_layers, has_output, &planned, &fb);
        if (type == t->type || !eng_quant_needs_imatrix(type) || (t->type == SIMD_MXFP4 && !o->allow_requantize))
            continue;
        if (!o->imatrix) {
            r = eng_errf(e, ENG_EINVAL,
                         "%s writes %s tensors (e.g. '%s'), which need an importance matrix: give --imatrix FILE "
                         "(made by `nibble imatrix`), or pick iq2_s, iq3_xxs or a larger type",
                         o->target->name, simd_type_name(type), t->name);
            goto done;
        }
        const eng_imatrix_entry *x = eng_imatrix_find(o->imatrix, t->name);
        if (!x || x->n_cols != t->ne[0] || x->n_mat != t->ne[2] || t->ne[3] != 1) {
            r = eng_errf(e, ENG_EINVAL,
                         "tensor '%s' would be %s, which needs an importance matrix, but %s has %s for it: is the "
                         "importance matrix this model's?",
                         t->name, simd_type_name(type), o->imatrix_file ? o->imatrix_file : "the importance matrix",
                         x ? "an entry of another shape" : "no entry");
            goto done;
        }
    }

    for (uint64_t i = 0; i < eng_gguf_n_kv(g); i++)
        if (!own_key(eng_gguf_kv_key(g, i)) && (r = eng_gguf_writer_copy_kv(w, g, i)))
            goto oom;
    if ((r = eng_gguf_writer_u32(w, "general.file_type", o->target->file_type)) ||
        (!is_float_type(o->target->type) && (r = eng_gguf_writer_u32(w, "general.quantization_version", 2))) ||
        (r = eng_gguf_writer_str(w, "nibble.quantize.type", o->target->name)) ||
        (r = eng_gguf_writer_str(w, "nibble.quantize.method", o->method ? o->method : o->target->fake_bits ? "uniform-fake" : "rtn")) ||
        (o->calib && (r = eng_gguf_writer_str(w, "nibble.quantize.calibration", o->calib))) ||
        (o->fit_norms && (r = eng_gguf_writer_u32(w, "nibble.quantize.fit_norms", 1))) ||
        (o->asym > 0 && (r = eng_gguf_writer_f32(w, "nibble.quantize.asym", o->asym))))
        goto oom;
    if (o->imatrix) {
        size_t nds;
        const char *const *ds = eng_imatrix_datasets(o->imatrix, &nds);
        uint32_t chunks = eng_imatrix_chunk_count(o->imatrix);
        if ((r = eng_gguf_writer_str(w, "quantize.imatrix.file", o->imatrix_file ? o->imatrix_file : "")) ||
            (nds && (r = eng_gguf_writer_str(w, "quantize.imatrix.dataset", ds[0]))) ||
            (r = eng_gguf_writer_u32(w, "quantize.imatrix.entries_count", (uint32_t)eng_imatrix_count(o->imatrix))) ||
            (chunks && (r = eng_gguf_writer_u32(w, "quantize.imatrix.chunks_count", chunks))))
            goto oom;
    }

    /* The tensors are converted in file order, except that with --asym
     * taken layer or stage wise every tensor of a collection group comes
     * before any of a later group (eng_gptq_asym_stage): llama files list
     * ffn_down before ffn_up, and stage by stage down's sums must see the
     * final up. A tensor without sums keeps its place after the one before
     * it (a stable sort on the group, carried forward). They are written
     * in file order after. */
    uint64_t total = 0, done = 0;
    for (uint64_t i = 0; i < nt; i++) {
        total += eng_gguf_tensor_at(g, i)->size;
        long key = o->gptq ? eng_gptq_asym_stage(o->gptq, eng_gguf_tensor_at(g, i)->name) : -1;
        keys[i] = key < 0 ? (i ? keys[i - 1] : -1) : key;
        uint64_t j = i;
        for (; j > 0 && keys[ord[j - 1]] > keys[i]; j--) /* nearly sorted: a few steps */
            ord[j] = ord[j - 1];
        ord[j] = i;
    }
    for (uint64_t n = 0; n < nt; n++) {
        uint64_t i = ord[n];
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        int planned, fb;
        int type = eng_quant_plan(o->target, t->name, t->n_dims, t->ne, t->type, n_layers, has_output, &planned, &fb);
        /* MXFP4 (gpt-oss's experts) is copied as stored unless
         * requantizing is asked for: its 4.25 bits are what the model was
         * trained at, and any other type of that size only adds error */
        if (t->type == SIMD_MXFP4 && !o->allow_requantize && t->n_dims >= 2) {
            type = SIMD_MXFP4;
            fb = 0;
        }
        const eng_tensor_edit *ed = edit_for(o, t->name);
        if (ed && t->n_dims < 2)
            type = SIMD_F32; /* a scaled norm is written in full precision */
        if (fb) {
            rep->n_fallbacks++;
            notef(o, "%s: rows of %llu do not fit %s blocks of %u: using %s", t->name,
                  (unsigned long long)t->ne[0], simd_type_name(planned), simd_type_traits(planned)->block,
                  simd_type_name(type));
        }
        size_t bytes = (size_t)t->size;
        int fake = o->target->fake_bits && t->n_dims >= 2 && ends_with(t->name, ".weight") ? o->target->fake_bits : 0;
        const eng_imatrix_entry *ix = NULL;
        if (o->imatrix && t->n_dims >= 2 && !fake && type != t->type && simd_type_traits(type)->quant_imp) {
            ix = eng_imatrix_find(o->imatrix, t->name);
            if (ix && (ix->n_cols != t->ne[0] || ix->n_mat != t->ne[2] || t->ne[3] != 1)) {
                notef(o, "%s: the importance matrix has %u columns x %u matrices, the tensor %llu x %llu: "
                      "quantized without importance", t->name, ix->n_cols, ix->n_mat,
                      (unsigned long long)t->ne[0], (unsigned long long)t->ne[2]);
                ix = NULL;
            }
            if (ix)
                rep->n_weighted++;
            else
                rep->n_unweighted++;
        }
        const double *H = NULL, *Hr = NULL, *T = NULL, *Tr = NULL;
        uint32_t hrows = 0, hper = 0;
        if (o->gptq && t->n_dims == 2 && !fake && type != t->type && eng_gptq_supports(type)) {
            uint32_t hc;
            const char *qp = eng_gptq_asym_pending(o->gptq, t->name);
            if (qp && (r = asym_refresh(o->gptq, qp, g, ord, bufs, bsz, patched, n, e)))
                goto done;
            if (qp)
                patched = n;
            if ((r = eng_gptq_hessian(o->gptq, t->name, &H, &hc, e)))
                goto done;
            if (H && hc != t->ne[0]) {
                notef(o, "%s: the Hessian is %u wide, the tensor %llu: rounded to nearest", t->name, hc,
                      (unsigned long long)t->ne[0]);
                H = NULL;
            }
            if (H && (r = eng_gptq_row_hessians(o->gptq, t->name, &Hr, &hrows, &hper, e)))
                goto done;
            if (Hr && (hrows != t->ne[1] || !hper || hrows % hper))
                Hr = NULL;
            if (H && (r = eng_gptq_target(o->gptq, t->name, &T, e)))
                goto done;
            if (Hr && T && (r = eng_gptq_row_targets(o->gptq, t->name, &Tr, e)))
                goto done;
        }
        if (type != t->type || ed || fake) {
            bufs[i] = convert(o, pool, t, type, ed, fake, ix, H, Hr, hper, T, Tr, rep, &bytes, e);
            if (!bufs[i]) {
                r = ENG_ENOMEM;
                goto done;
            }
            bsz[i] = bytes;
        }
        types[i] = type;
        rep->n_tensors++;
        rep->in_bytes += t->size;
        rep->out_bytes += bytes;
        rep->n_weights += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        if (type >= 0 && type < 40)
            rep->type_count[type]++;
        done += t->size;
        if (o->progress)
            o->progress(o->user, done, total, t->name);
    }
    for (uint64_t i = 0; i < nt; i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        if ((r = eng_gguf_writer_tensor(w, t->name, types[i], t->n_dims, t->ne, bufs[i] ? bufs[i] : t->data)))
            goto oom;
    }
    if (o->imatrix) {
        /* entries that name no tensor: another model's file, most likely */
        char list[256] = "";
        size_t used = 0;
        for (size_t k = 0; k < eng_imatrix_count(o->imatrix); k++) {
            const char *n = eng_imatrix_at(o->imatrix, k)->name;
            if (eng_gguf_tensor_find(g, n))
                continue;
            if (rep->n_unused++ < 3 && used < sizeof list)
                used += (size_t)snprintf(list + used, sizeof list - used, "%s'%s'", used ? ", " : "", n);
        }
        if (rep->n_unused)
            notef(o, "warning: %llu importance matrix entr%s name%s no tensor of %s (%s%s): is it this model's?",
                  (unsigned long long)rep->n_unused, rep->n_unused == 1 ? "y" : "ies", rep->n_unused == 1 ? "s" : "",
                  in_path, list, rep->n_unused > 3 ? ", ..." : "");
        if (rep->n_unweighted)
            notef(o, "%llu of %llu quantized matrices had no importance entry and were quantized unweighted",
                  (unsigned long long)rep->n_unweighted, (unsigned long long)(rep->n_unweighted + rep->n_weighted));
    }
    if (rep->n_gptq)
        rep->gptq_ratio /= (double)rep->n_gptq;
    r = eng_gguf_writer_save(w, out_path, e);
    goto done;
oom:
    r = eng_errf(e, ENG_ENOMEM, "out of memory while building %s", out_path);
done:
    eng_pool_free(pool);
    eng_gguf_writer_free(w);
    for (uint64_t i = 0; bufs && i < nt; i++)
        free(bufs[i]);
    free(bufs);
    free(bsz);
    free(types);
    free(ord);
    free(keys);
    eng_gguf_close(g);
    return r;
}
