/* nibble export-ollama: a directory Ollama can `ollama create` from: the
 * GGUF (copied) and a Modelfile with the chat template rewritten in
 * Ollama's Go-template syntax for the family engine/text/template.c detects,
 * the family's stop strings and nibble's sampler defaults. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app.h"
#include "model.h"
#include "port.h"
#include "sampler.h"
#include "jinja.h"
#include "template.h"
#include "files.h"

static const char usage[] =
    "usage: nibble export-ollama MODEL.gguf OUTDIR [--template FAMILY] [--name NAME]\n"
    "\n"
    "Write OUTDIR/NAME.gguf (a copy of MODEL) and OUTDIR/Modelfile: FROM, the\n"
    "chat template in Ollama's syntax (family detected from the GGUF's\n"
    "tokenizer.chat_template; --template overrides: none chatml llama3 llama2\n"
    "zephyr phi3 gemma), PARAMETER stop lines and sampler defaults. The model's\n"
    "own template is rendered over a probe conversation and compared with the\n"
    "family's layout; where the translation is not exact a note says so. Then:\n"
    "  cd OUTDIR && ollama create NAME -f Modelfile\n";

/* Does the model's own Jinja template render a probe conversation (a
 * system prompt, user, assistant, user, then the generation prompt)
 * exactly as the family's layout, which is what the Modelfile gets? If
 * not, note says how it differs, so the export says where the
 * translation is not faithful. */
static void check_mapping(const char *src, size_t len, enum eng_tmpl fam, char *note, size_t n)
{
    if (fam == ENG_TMPL_NONE) {
        snprintf(note, n, "the model's chat template maps onto no family nibble can translate; TEMPLATE is the "
                          "plain prompt (give --template FAMILY to choose one)");
        return;
    }
    static const char vars[] =
        "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": "
        "\"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello\"}, {\"role\": \"user\", \"content\": \"Bye\"}], "
        "\"add_generation_prompt\": true, \"bos_token\": \"\", \"eos_token\": \"</s>\", \"tools\": null, "
        "\"documents\": null}";
    eng_jinja *t = NULL;
    eng_err e = {{0}};
    char *got = NULL, *want = NULL;
    size_t glen;
    eng_tmpl_out o = {0};
    if (eng_jinja_parse(src, len, &t, &e) || eng_jinja_render(t, vars, NULL, &got, &glen, &e)) {
        snprintf(note, n, "the model's chat template does not render (%s); TEMPLATE is the %s layout", e.msg,
                 eng_tmpl_name(fam));
        goto done;
    }
    if (eng_tmpl_begin(fam, "Be brief.", &o) || eng_tmpl_user(fam, "Hi", 1, "Be brief.", &o))
        goto done;
    {
        char *head = eng_tmpl_join(&o);
        eng_tmpl_out_clear(&o);
        if (!head || eng_tmpl_close(fam, &o) || eng_tmpl_user(fam, "Bye", 0, "Be brief.", &o)) {
            free(head);
            goto done;
        }
        char *tail = eng_tmpl_join(&o);
        if (tail) {
            size_t k = strlen(head) + 5 + strlen(tail) + 1;
            want = malloc(k);
            if (want)
                snprintf(want, k, "%sHello%s", head, tail);
        }
        free(head);
        free(tail);
    }
    if (!want)
        goto done;
    if (strcmp(got, want)) {
        size_t i = 0;
        while (got[i] && got[i] == want[i])
            i++;
        snprintf(note, n,
                 "the model's chat template does not render exactly as the %s layout written here (they differ "
                 "from byte %zu: \"%.30s\" vs \"%.30s\"); check TEMPLATE",
                 eng_tmpl_name(fam), i, got + i, want + i);
    }
done:
    eng_tmpl_out_clear(&o);
    eng_jinja_free(t);
    free(got);
    free(want);
}

/* Ollama templates, one per family (text/template syntax: .System,
 * .Messages with .Role/.Content, .Prompt for plain completion). */
static const char *ollama_template(enum eng_tmpl t)
{
    switch (t) {
    case ENG_TMPL_CHATML:
        return "{{- if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}"
               "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}"
               "<|im_start|>assistant\n";
    case ENG_TMPL_LLAMA3:
        return "{{- if .System }}<|start_header_id|>system<|end_header_id|>\n\n{{ .System }}<|eot_id|>{{ end }}"
               "{{- range .Messages }}<|start_header_id|>{{ .Role }}<|end_header_id|>\n\n{{ .Content }}<|eot_id|>{{ end }}"
               "<|start_header_id|>assistant<|end_header_id|>\n\n";
    case ENG_TMPL_LLAMA2:
        return "{{- range $i, $m := .Messages }}"
               "{{- if eq $m.Role \"user\" }}[INST] {{ if and (eq $i 0) $.System }}<<SYS>>\n{{ $.System }}\n<</SYS>>\n\n{{ end }}"
               "{{ $m.Content }} [/INST]"
               "{{- else if eq $m.Role \"assistant\" }} {{ $m.Content }}</s><s>{{ end }}{{ end }}";
    case ENG_TMPL_ZEPHYR:
        return "{{- if .System }}<|system|>\n{{ .System }}</s>\n{{ end }}"
               "{{- range .Messages }}<|{{ .Role }}|>\n{{ .Content }}</s>\n{{ end }}<|assistant|>\n";
    case ENG_TMPL_PHI3:
        return "{{- if .System }}<|system|>\n{{ .System }}<|end|>\n{{ end }}"
               "{{- range .Messages }}<|{{ .Role }}|>\n{{ .Content }}<|end|>\n{{ end }}<|assistant|>\n";
    case ENG_TMPL_GEMMA:
        return "{{- range $i, $m := .Messages }}<start_of_turn>{{ if eq $m.Role \"assistant\" }}model{{ else }}{{ $m.Role }}{{ end }}\n"
               "{{ if and (eq $i 0) $.System }}{{ $.System }}\n\n{{ end }}{{ $m.Content }}<end_of_turn>\n{{ end }}"
               "<start_of_turn>model\n";
    default:
        return "{{ .Prompt }}";
    }
}

static int copy_file(const char *from, const char *to, char *err, size_t n)
{
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%.4200s.tmp", to);
    FILE *in = fopen(from, "rb"), *out = in ? fopen(tmp, "wb") : NULL;
    if (!in || !out) {
        snprintf(err, n, "%.400s: %s", in ? tmp : from, strerror(errno));
        if (in)
            fclose(in);
        return -1;
    }
    static char buf[1 << 16];
    size_t got;
    int bad = 0;
    while ((got = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, got, out) != got) {
            bad = 1;
            break;
        }
    bad |= ferror(in);
    fclose(in);
    if (fclose(out) || bad || nb_rename(tmp, to)) {
        snprintf(err, n, "%.400s: cannot write: %s", to, strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}

/* Go template strings in a Modelfile sit inside """ ... """; the fixed
 * templates here never contain that. Stop strings are quoted. */
static void put_quoted(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int cmd_export(int argc, char **argv)
{
    const char *pos[2] = {0}, *force = NULL, *name = NULL;
    int np = 0;
    const app_flag own[] = {APP_FLAG("--template", NULL, APP_STR, &force), APP_FLAG("--name", NULL, APP_STR, &name),
                            APP_FLAG_END};
    const app_cmd cmd = {.name = "export-ollama", .usage = usage, .flags = own, .min_pos = 2, .max_pos = 2};
    int st = app_parse(argc, argv, 2, &cmd, NULL, pos, &np);
    if (st)
        return app_parse_status(st);
    eng_err e;
    eng_model *m;
    if (eng_model_open(pos[0], &m, &e)) { /* a file nibble cannot run is not exported */
        fprintf(stderr, "nibble export-ollama: %s\n", e.msg);
        return 1;
    }
    enum eng_tmpl fam = ENG_TMPL_NONE;
    eng_str jt;
    char note[700] = "";
    if (force) {
        int f = eng_tmpl_find(force);
        if (f < 0) {
            fprintf(stderr, "nibble export-ollama: unknown template family '%s'\n", force);
            eng_model_close(m);
            return 2;
        }
        fam = (enum eng_tmpl)f;
    } else if (eng_gguf_get_str(eng_model_gguf(m), "tokenizer.chat_template", &jt, NULL) == 0) {
        fam = eng_tmpl_detect(jt.ptr, (size_t)jt.len);
        check_mapping(jt.ptr, (size_t)jt.len, fam, note, sizeof note);
    }
    const eng_model_info *in = eng_model_get_info(m);
    uint32_t ctx = in->ctx_train < 4096 ? in->ctx_train : 4096;
    eng_model_close(m);

    if (nb_mkdir(pos[1], 0755) && errno != EEXIST) {
        fprintf(stderr, "nibble export-ollama: %s: %s\n", pos[1], strerror(errno));
        return 1;
    }
    const char *base = eng_path_base(pos[0]);
    char file[1024], dst[4200], mf[4200], tmp[4300], err[600];
    if (name)
        snprintf(file, sizeof file, "%s.gguf", name);
    else
        snprintf(file, sizeof file, "%s", base);
    snprintf(dst, sizeof dst, "%s/%s", pos[1], file);
    if (copy_file(pos[0], dst, err, sizeof err)) {
        fprintf(stderr, "nibble export-ollama: %s\n", err);
        return 1;
    }
    snprintf(mf, sizeof mf, "%s/Modelfile", pos[1]);
    snprintf(tmp, sizeof tmp, "%s.tmp", mf);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "nibble export-ollama: %s: %s\n", tmp, strerror(errno));
        return 1;
    }
    eng_sampler_params sp = eng_sampler_defaults();
    fprintf(f, "# Written by nibble export-ollama from %s (template family: %s).\n", base, eng_tmpl_name(fam));
    if (note[0])
        fprintf(f, "# Note: %s.\n", note);
    fprintf(f, "FROM ./%s\n\n", file);
    fprintf(f, "TEMPLATE \"\"\"%s\"\"\"\n\n", ollama_template(fam));
    for (const char *const *s = eng_tmpl_stops(fam); *s; s++) {
        fputs("PARAMETER stop ", f);
        put_quoted(f, *s);
        fputc('\n', f);
    }
    fprintf(f, "PARAMETER temperature %g\nPARAMETER top_k %d\nPARAMETER top_p %g\nPARAMETER min_p %g\n", sp.temp,
            sp.top_k, sp.top_p, sp.min_p);
    fprintf(f, "PARAMETER repeat_penalty %g\nPARAMETER repeat_last_n %d\nPARAMETER num_ctx %u\n", sp.repeat_penalty,
            sp.repeat_last_n, ctx);
    if (fclose(f) || nb_rename(tmp, mf)) {
        fprintf(stderr, "nibble export-ollama: %s: cannot write: %s\n", mf, strerror(errno));
        remove(tmp);
        return 1;
    }
    if (note[0])
        fprintf(stderr, "nibble export-ollama: %s\n", note);
    printf("wrote %s and %s (template %s)\nnext: cd %s && ollama create %.*s -f Modelfile\n", dst, mf,
           eng_tmpl_name(fam), pos[1], (int)(strlen(file) - (strlen(file) > 5 ? 5 : 0)), file);
    return 0;
}
