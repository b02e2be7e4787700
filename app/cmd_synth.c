/* nibble synth: a model of a real model's shape with seeded random
 * weights, for benchmarks and cross-checks against llama.cpp. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "files.h"
#include "quantize.h"
#include "simd.h"
#include "synth.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: nibble synth --shape NAME [--type TYPE] [--arch ARCH] [--seed S] [--layers N] OUT.gguf\n"
               "       nibble synth --list\n"
               "\n"
               "Write a GGUF model of a real model's shape with seeded random weights\n"
               "(llama.cpp loads it too). TYPE: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1\n"
               "q4_k q5_k q6_k mxfp4 (default q8_0); matrices whose rows do not fit the\n"
               "type's block are f16; under mxfp4 token_embd and output are q8_0, and a\n"
               "mixture of experts keeps only its experts in mxfp4 (the rest q8_0). Or the\n"
               "mixes q4_k_m / q5_k_m / q3_k_m / q3_k_l / q2_k / iq4_xs / iq4_nl, planned\n"
               "tensor by tensor as nibble quantize does (llama.cpp's rules: output q6_k,\n"
               "wider types for attn_v, ffn_down and others in some layers, 32-block\n"
               "types where rows do not fit 256); q3_k_s is q3_k planned the same way.\n"
               "ARCH overrides a dense shape's architecture: llama qwen2 qwen3 phi3 gpt2\n"
               "gemma2 gemma3 (on a shape without its own window: window 16; gemma3 with\n"
               "every sixth layer global, every second below 6 layers; gemma2 every\n"
               "second, with its soft-caps 50 and 30).\n"
               "--layers N writes only N layers of the shape's widths (a quick model of\n"
               "the same per-token shape; a full gpt-oss-20b needs its 13 GB in memory).\n"
               "\nshapes:\n");
    for (const eng_synth_shape *s = eng_synth_shapes(); s->name; s++)
    {
        if (s->n_expert)
            fprintf(f, "  %-13s %-8s dim %4u, %2u layers, %2u/%-2u heads, %u experts (%u a token) of ffn %u, vocab %6u  (%s)\n",
                    s->name, s->arch, s->dim, s->n_layers, s->n_heads, s->n_kv_heads, s->n_expert, s->n_expert_used,
                    s->expert_ffn, s->n_vocab, s->about);
        else
            fprintf(f, "  %-13s %-8s dim %4u, %2u layers, %2u/%-2u heads, ffn %4u, vocab %6u  (%s)\n", s->name, s->arch,
                    s->dim, s->n_layers, s->n_heads, s->n_kv_heads, s->ffn, s->n_vocab, s->about);
    }
}

/* Type id from a name like "q8_0" (case-insensitive), or -1. */
int app_type_from_name(const char *name)
{
    char low[16];
    size_t i = 0;
    for (; name[i] && i + 1 < sizeof low; i++)
        low[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
    low[i] = 0;
    for (int t = 0; t < SIMD_TYPE_COUNT; t++) {
        const simd_traits *tr = simd_type_traits(t);
        if (tr && !strcmp(tr->name, low))
            return t;
    }
    return -1;
}

int cmd_synth(int argc, char **argv)
{
    const char *shape = NULL, *out = NULL, *type = "q8_0";
    eng_synth_opts o = {NULL, 0, 1, 1, NULL, 0};
    int layers = 0;
    const app_flag own[] = {APP_FLAG("--list", NULL, APP_HELP, NULL),
                            APP_FLAG("--shape", NULL, APP_STR, &shape),
                            APP_FLAG("--type", NULL, APP_STR, &type),
                            APP_FLAG("--arch", NULL, APP_STR, &o.arch),
                            APP_FLAG("--seed", NULL, APP_U64, &o.seed),
                            APP_FLAG("--layers", NULL, APP_INT, &layers, .min = 1, .max = 1024),
                            APP_FLAG("-q", "--quiet", APP_OFF, &o.verbose),
                            APP_FLAG_END};
    const app_cmd cmd = {.name = "synth", .usage_fn = usage, .flags = own, .max_pos = 1};
    int np = 0;
    int st = app_parse(argc, argv, 2, &cmd, NULL, &out, &np);
    if (st)
        return app_parse_status(st);
    if (!shape || !out) {
        usage(stderr);
        return 2;
    }
    const eng_synth_shape *s = eng_synth_find(shape);
    if (!s) {
        fprintf(stderr, "nibble synth: unknown shape '%s' (see --list)\n", shape);
        return 2;
    }
    o.n_layers = (uint32_t)layers;
    o.type = app_type_from_name(type);
    const eng_qtarget *mix = eng_qtarget_find(type);
    if (mix && (mix->more_bits_type >= 0 || mix->mix)) {
        o.mix = mix;
        o.type = mix->type;
    } else if (mix && o.type < 0 && !mix->fake_bits) {
        /* another name of a plain type (q3_k_s): planned as nibble quantize
         * plans it, so rows that do not fit 256 fall back to q4_0, not f16 */
        o.mix = mix;
        o.type = mix->type;
    }
    const simd_traits *tr = o.type >= 0 ? simd_type_traits(o.type) : NULL;
    if (!tr || !tr->quant) {
        fprintf(stderr, "nibble synth: cannot write type '%s'\n", type);
        return 2;
    }
    eng_err e;
    if (eng_check_dest(out, &e)) { /* before the work, not after it */
        fprintf(stderr, "nibble synth: %s\n", e.msg);
        return 1;
    }
    if (eng_synth_write(s, &o, out, &e)) {
        fprintf(stderr, "nibble synth: %s\n", e.msg);
        return 1;
    }
    fprintf(stderr, "nibble synth: wrote %s (%s, %s)\n", out, o.arch ? o.arch : s->arch, o.mix ? o.mix->name : tr->name);
    return 0;
}
