/* nibble info MODEL: metadata, tensor table, types, sizes, parameters.
 * nibble info --cpu: the CPU's features and every kernel set. */
#include <stdio.h>
#include <string.h>

#include "app.h"
#include "config.h" /* CFG_CACHE_K/V: which flags were given */
#include "gguf.h"
#include "model.h"
#include "simd.h"

static const char usage[] =
    "usage: nibble info MODEL     metadata, tensors, types, sizes, parameter count,\n"
    "                             the KV cache's memory per cache type (-c N for a\n"
    "                             context of N; -ctk/-ctv T for one pair of types)\n"
    "       nibble info --cpu     CPU features and the kernel sets this CPU runs\n";

static void print_cpu(void)
{
    simd_init();
    char buf[512];
    simd_cpu_describe(buf, sizeof buf);
    printf("cpu: %s\n", buf);
    printf("kernel sets:\n");
    for (int k = 0; k < SIMD_K_COUNT; k++) {
        const char *why = NULL;
        int ok = simd_kernel_supported((enum simd_kernel)k, &why);
        printf("  %-13s %s%s%s\n", simd_kernel_name((enum simd_kernel)k), ok ? "usable" : "no: ",
               ok ? "" : (why ? why : "unsupported"), k == (int)simd_kernel_current() ? "  (selected)" : "");
    }
}

static void human(double bytes, char *buf, size_t n)
{
    if (bytes >= 1e9) snprintf(buf, n, "%.2f GB", bytes / 1e9);
    else if (bytes >= 1e6) snprintf(buf, n, "%.2f MB", bytes / 1e6);
    else if (bytes >= 1e3) snprintf(buf, n, "%.2f kB", bytes / 1e3);
    else snprintf(buf, n, "%.0f B", bytes);
}

int cmd_info(int argc, char **argv)
{
    const char *pos[1];
    int np = 0;
    const app_cmd cmd = {.name = "info", .usage = usage, .max_pos = 1};
    app_opts o;
    int r = app_parse(argc, argv, 2, &cmd, &o, pos, &np);
    if (r)
        return app_parse_status(r);
    if (o.cpu) {
        print_cpu();
        return 0;
    }
    const char *path = np ? pos[0] : o.model ? o.model : app_model_path(&o);
    eng_err e = {{0}};
    eng_gguf *g;
    if (eng_gguf_open(path, &g, &e)) {
        fprintf(stderr, "nibble: %s\n", e.msg);
        return 1;
    }
    char sz[32];
    human((double)eng_gguf_file_size(g), sz, sizeof sz);
    printf("file: %s\n  GGUF v%u, %s, %llu metadata keys, %llu tensors, alignment %llu\n", path, eng_gguf_version(g), sz,
           (unsigned long long)eng_gguf_n_kv(g), (unsigned long long)eng_gguf_n_tensors(g),
           (unsigned long long)eng_gguf_alignment(g));
    printf("\nmetadata:\n");
    for (uint64_t i = 0; i < eng_gguf_n_kv(g); i++) {
        char val[200];
        eng_gguf_kv_format(g, i, val, sizeof val);
        printf("  %-44s %-7s %s\n", eng_gguf_kv_key(g, i), eng_gguf_vtype_name(eng_gguf_kv_type(g, i)), val);
    }
    printf("\ntensors:\n  %-36s %-6s %-24s %12s\n", "name", "type", "shape", "bytes");
    uint64_t params = 0, bytes = 0, per_type[SIMD_TYPE_COUNT] = {0};
    for (uint64_t i = 0; i < eng_gguf_n_tensors(g); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        char shape[64];
        int n = snprintf(shape, sizeof shape, "[");
        for (uint32_t d = 0; d < t->n_dims && n < (int)sizeof shape; d++)
            n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%llu", d ? ", " : "", (unsigned long long)t->ne[d]);
        if (n < (int)sizeof shape)
            snprintf(shape + n, sizeof shape - (size_t)n, "]");
        uint64_t count = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        params += count;
        bytes += t->size;
        per_type[t->type] += count;
        printf("  %-36s %-6s %-24s %12llu\n", t->name, simd_type_name(t->type), shape, (unsigned long long)t->size);
    }
    printf("\nparameters: %llu (%.2f M), tensor data %llu bytes, %.2f bits per weight\n", (unsigned long long)params,
           params / 1e6, (unsigned long long)bytes, params ? 8.0 * bytes / params : 0.0);
    printf("types:");
    for (int t = 0; t < SIMD_TYPE_COUNT; t++)
        if (per_type[t]) {
            const simd_traits *tr = simd_type_traits(t);
            printf(" %s %.1f%%", simd_type_name(t), 100.0 * per_type[t] / params);
            if (tr)
                printf(" (%.4g bpw)", 8.0 * tr->bytes / tr->block);
        }
    printf("\n");
    uint32_t ft;
    eng_err fe = {{0}};
    if (eng_gguf_find(g, "general.file_type") >= 0 && eng_gguf_get_u32(g, "general.file_type", &ft, &fe) == 0) {
        const char *fn = eng_gguf_ftype_name(ft);
        printf("file type: %s (general.file_type %u)\n", fn ? fn : "unknown to llama.cpp", ft);
    }
    eng_gguf_close(g);
    /* and whether this version can run it */
    eng_model *m;
    if (eng_model_open(path, &m, &e)) {
        printf("runnable: no: %s\n", e.msg);
        return 1;
    }
    const eng_model_info *in = eng_model_get_info(m);
    printf("runnable: yes: %s, vocab %u, dim %u, %u layers, %u heads (%u kv, head size %u), ffn %u, context %u, "
           "rope %s base %g scale %g%s\n",
           in->arch, in->n_vocab, in->dim, in->n_layers, in->n_heads, in->n_kv_heads, in->head_dim, in->ffn,
           in->ctx_train, in->rope_neox ? "neox" : "normal", in->rope_base, in->rope_scale,
           in->tied_output ? ", tied output" : "");
    if (in->rope_yarn > 0)
        printf("rope: YaRN, factor %g\n", in->rope_yarn);
    if (in->n_window_layers) {
        uint32_t n = in->ctx_train;
        printf("attention: sliding window of %u positions on %u of %u layers (their RoPE base %g); KV cache for %u "
               "positions %.1f MB, %.1f MB if every layer kept every position\n",
               in->window, in->n_window_layers, in->n_layers, in->rope_base_swa, n,
               eng_model_kv_bytes(m, n, 0) / 1048576.0, eng_model_kv_bytes(m, n, 1) / 1048576.0);
    }
    if (in->n_expert)
        printf("experts: %u a layer, %u a token, ffn %u each; active parameters %llu (%.2f M) of %llu\n",
               in->n_expert, in->n_expert_used, in->expert_ffn, (unsigned long long)in->n_active_params,
               in->n_active_params / 1e6, (unsigned long long)in->n_params);
    /* the K and V caches of a context (-c; the default as a context makes
     * it): each type for both, then the pair -ctk/-ctv chose */
    uint32_t nctx = o.n_ctx ? (uint32_t)o.n_ctx : in->ctx_train < 4096 ? in->ctx_train : 4096;
    printf("KV cache, context %u:", nctx);
    for (int t = 0; t < ENG_KV_COUNT; t++) {
        uint64_t b = eng_model_kv_bytes_typed(m, nctx, 0, t, t);
        if (b)
            printf("%s %s %.2f MB", t ? "," : "", eng_kv_type_name(t), b / 1048576.0);
        else
            printf("%s %s n/a (a layer's rows are not whole blocks of 32)", t ? "," : "", eng_kv_type_name(t));
    }
    printf("\n");
    if (o.given & (CFG_CACHE_K | CFG_CACHE_V))
        printf("KV cache, context %u, K %s, V %s: %.2f MB\n", nctx, eng_kv_type_name(o.cache_type_k),
               eng_kv_type_name(o.cache_type_v),
               eng_model_kv_bytes_typed(m, nctx, 0, o.cache_type_k, o.cache_type_v) / 1048576.0);
    uint64_t bpt = eng_model_bytes_per_token(m);
    printf("bytes read per token: %llu (%.1f MB)%s\n", (unsigned long long)bpt, bpt / 1e6,
           in->n_expert ? ", the experts a token runs only" : "");
    eng_model_close(m);
    return 0;
}
