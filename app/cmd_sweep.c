/* nibble quant-sweep: quantize a model to every type (round to nearest,
 * and AWQ when a calibration text is given), measure each result against
 * the input model (size, bits per weight, perplexity, KL divergence, top-1
 * agreement, decode speed) and write a markdown table, an SVG plot of
 * size against KL with the Pareto front marked, and a terminal chart. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "app.h"
#include "awq.h"
#include "gptq.h"
#include "model.h"
#include "port.h"
#include "ppl.h"
#include "prune.h"
#include "quantize.h"
#include "report.h"
#include "files.h"
#include "simd.h"
#include "sys.h"

static const char usage[] =
    "usage: nibble quant-sweep [-m MODEL] -f TEXT [--calib CALIB] [-c CTX] [--chunks N]\n"
    "                          [--types LIST] [--methods LIST] [--out DIR] [-t N] [--json FILE] [--html FILE]\n"
    "                          [--prune-heads LIST] [--prune-neurons LIST] [--prune-then TYPE]\n"
    "                          [--imatrix FILE]\n"
    "\n"
    "Quantize MODEL (F32/F16/BF16) to every type, RTN and (with --calib) AWQ,\n"
    "GPTQ and AWQ+GPTQ (the methods of 'nibble quantize --method'), and\n"
    "measure each against MODEL on TEXT: file size, bits per weight,\n"
    "perplexity, mean KL divergence, top-1 agreement, decode tokens/s.\n"
    "A second table, \"least KL for the size\", lists per size the type and\n"
    "method of least KL at or under it and the KL each extra bit bought.\n"
    "Writes DIR/sweep.md (the tables), DIR/sweep.svg (size vs KL, Pareto front\n"
    "marked) and DIR/sweep.tsv, prints the table and a chart. The u8g32/u4g32/\n"
    "u2g32 rows are the per-group (32) asymmetric uniform baseline, evaluated as\n"
    "fake quantization (stored dequantized; size is what the format would take).\n"
    "\n"
    "  --calib CALIB     calibration text for AWQ and GPTQ (must not overlap TEXT)\n"
    "  --imatrix FILE    importance matrix (nibble imatrix, llama-imatrix) used by\n"
    "                    every quantized row, as 'nibble quantize --imatrix' uses\n"
    "                    it; without one the types that need it (iq2_xxs, iq2_xs,\n"
    "                    iq1_s, iq1_m) are skipped with a note\n"
    "  --methods LIST    comma-separated subset of rtn,awq,gptq,awq+gptq (default:\n"
    "                    rtn, and all four with --calib; GPTQ rows only for the\n"
    "                    types it writes)\n"
    "  -c CTX            window (default 256); --chunks N windows (default 40)\n"
    "  --types LIST      comma-separated subset (default: all)\n"
    "  --out DIR         where files go (default: sweep-out)\n"
    "  --calib-tokens N  AWQ calibration tokens (default 4096)\n"
    "  --json FILE       append this run's results to FILE as one JSON line (the\n"
    "                    schema is in docs/PRUNING.md; nibble report reads it)\n"
    "  --html FILE       also write the dashboard page (as nibble report does)\n"
    "  --prune-heads LIST    pruning sweep: remove these shares of the KV groups\n"
    "                        (e.g. 0.1,0.2,0.3,0.5; needs --calib), one model each\n"
    "  --prune-neurons LIST  ... these shares of each layer's FFN neurons\n"
    "  --prune-then TYPE     also quantize each pruned model to TYPE (AWQ when\n"
    "                        --calib is given), next to the pruned-only rows\n"
    "With --json, --html or a pruning sweep the unpruned input is measured too\n"
    "(the base row: perplexity, decode speed) and every pruned row is compared\n"
    "with it; with --types, the quantized-only rows are the comparison.\n";

typedef struct row {
    char name[32];
    int method; /* APP_QM_* bits: AWQ, GPTQ */
    int imx;    /* weighted by an importance matrix */
    double bytes, bpw, ppl, ppl_err, kl, kl_err, top1, tps;
    int pareto;
    /* for the results file: "base", "quant" or "prune", the weight type,
     * the pruning shares, the parameters */
    const char *kind, *type;
    double heads, neurons, params;
} row;

/* What a row's method column says. */
static const char *method_of(const row *r)
{
    if (r->kind && strcmp(r->kind, "quant") && !strchr(r->name, '+'))
        return r->kind[0] == 'b' ? "base" : "pruned";
    static const char *const names[] = {"RTN", "AWQ", "GPTQ", "AWQ+GPTQ"};
    static const char *const imx[] = {"imatrix", "AWQ+imatrix", "GPTQ+imatrix", "AWQ+GPTQ+imatrix"};
    return r->imx ? imx[r->method & 3] : names[r->method & 3];
}

/* A row's method as a name suffix ("" for RTN): sep + "awq" etc. */
static const char *method_suffix(int method, const char *sep)
{
    static char buf[4][16];
    static int k;
    if (!(method & 3))
        return "";
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s%s", sep, app_quant_method_name(method & 3, 0));
    return buf[k];
}

static double now_s(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Decode speed: 16 prompt tokens, then passes of 64 greedy tokens one at
 * a time, each pass from the same 16-token prefix; the fastest pass
 * counts (the machine may be busy), over at least 3 passes and about
 * 0.3 s, so a small model's few-millisecond pass is timed many times. */
static double decode_tps(eng_model *m, int threads)
{
    eng_ctx *c;
    eng_err e;
    uint32_t nv = eng_model_get_info(m)->n_vocab;
    float *l = malloc(nv * sizeof *l), *l0 = malloc(nv * sizeof *l0);
    if (!l || !l0 || eng_ctx_new(m, 128, threads, &c, &e)) {
        free(l);
        free(l0);
        return 0;
    }
    int32_t p[16];
    for (int i = 0; i < 16; i++)
        p[i] = (int32_t)((i * 31 + 7) % nv);
    double best = 0, start = now_s();
    if (!eng_ctx_eval(c, p, 16, l0, 0, &e)) {
        for (int pass = 0; pass < 3 || (now_s() - start < 0.3 && pass < 10000); pass++) {
            eng_ctx_truncate(c, 16);
            memcpy(l, l0, nv * sizeof *l);
            double t0 = now_s();
            int i = 0;
            for (; i < 64; i++) {
                int32_t tok = 0;
                for (uint32_t j = 1; j < nv; j++)
                    if (l[j] > l[tok])
                        tok = (int32_t)j;
                if (eng_ctx_eval(c, &tok, 1, l, 0, &e))
                    break;
            }
            double t = now_s() - t0;
            if (i < 64)
                break;
            if (t > 0 && 64 / t > best)
                best = 64 / t;
        }
    }
    eng_ctx_free(c);
    free(l);
    free(l0);
    return best;
}

static void on_ppl(void *user, uint32_t done, uint32_t total, double ppl)
{
    (void)ppl;
    app_progress(user, (double)done / total, "measuring");
}

static int in_list(const char *list, const char *name)
{
    if (!list)
        return 1;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !strncmp(p, name, n))
            return 1;
        if (!end)
            break;
        p = end + 1;
    }
    return 0;
}

/* ---- outputs ---- */

static void mark_pareto(row *r, int n)
{
    for (int i = 0; i < n; i++) {
        r[i].pareto = 1;
        for (int j = 0; j < n; j++)
            if (j != i && r[j].bytes <= r[i].bytes && r[j].kl <= r[i].kl && (r[j].bytes < r[i].bytes || r[j].kl < r[i].kl))
                r[i].pareto = 0;
    }
}

static void table(FILE *f, const row *r, int n, const char *model, const char *text, const char *calib, uint32_t ctx,
                  uint32_t chunks, const char *imx)
{
    fprintf(f, "Model `%s`, evaluated on `%s` (%u windows of %u tokens, second halves scored)%s%s%s%s%s%s.\n\n", model,
            text, chunks, ctx, calib ? "; AWQ calibrated on `" : "", calib ? calib : "", calib ? "`" : "",
            imx ? "; every quantized row weighted by the importance matrix `" : "", imx ? imx : "", imx ? "`" : "");
    fprintf(f, "| type | method | size (bytes) | bits/weight | PPL | mean KL vs base | same top-1 | decode tok/s | Pareto |\n");
    fprintf(f, "|---|---|---:|---:|---:|---:|---:|---:|:---:|\n");
    for (int i = 0; i < n; i++)
        fprintf(f, "| %s | %s | %.0f | %.2f | %.4f ± %.3f | %.5f ± %.5f | %.2f%% | %.0f | %s |\n", r[i].name,
                method_of(&r[i]), r[i].bytes, r[i].bpw, r[i].ppl, r[i].ppl_err, r[i].kl, r[i].kl_err,
                100 * r[i].top1, r[i].tps, r[i].pareto ? "*" : "");
}

/* The "KL per bit" view: for each size a row offers (cheapest first), the
 * row of least KL at or under it, listed when it beats every cheaper one
 * (the Pareto front read by size), with the KL each extra bit per weight
 * bought over the line before. */
static void kl_per_bit(FILE *f, const row *r, int n)
{
    int *ix = malloc((size_t)n * sizeof *ix);
    if (!ix)
        return;
    for (int i = 0; i < n; i++)
        ix[i] = i;
    for (int i = 1; i < n; i++) /* by size, then KL (a few dozen rows) */
        for (int j = i; j > 0; j--) {
            const row *x = &r[ix[j - 1]], *y = &r[ix[j]];
            if (x->bytes < y->bytes || (x->bytes == y->bytes && x->kl <= y->kl))
                break;
            int t = ix[j];
            ix[j] = ix[j - 1];
            ix[j - 1] = t;
        }
    fprintf(f, "\nLeast KL for the size (KL per bit): each line is the best row at or under its size; "
               "the last column is the mean KL each extra bit per weight bought over the line above.\n\n");
    fprintf(f, "| bits/weight up to | size (bytes) | best type + method | mean KL vs base | same top-1 | KL saved per bit |\n");
    fprintf(f, "|---:|---:|---|---:|---:|---:|\n");
    const row *prev = NULL;
    for (int k = 0; k < n; k++) {
        const row *x = &r[ix[k]];
        if (prev && !(x->kl < prev->kl))
            continue;
        char gain[32] = "";
        if (prev && x->bpw > prev->bpw)
            snprintf(gain, sizeof gain, "%.5f", (prev->kl - x->kl) / (x->bpw - prev->bpw));
        fprintf(f, "| %.2f | %.0f | %s%s | %.5f | %.2f%% | %s |\n", x->bpw, x->bytes, x->name,
                method_suffix(x->method, " + "), x->kl, 100 * x->top1, gain);
        prev = x;
    }
    free(ix);
}

static double ylog(double kl) { return log10(kl > 1e-6 ? kl : 1e-6); }

static int by_bytes(const void *a, const void *b)
{
    const row *x = *(row *const *)a, *y = *(row *const *)b;
    return (x->bytes > y->bytes) - (x->bytes < y->bytes);
}

static void svg(FILE *f, row *r, int n, const char *title)
{
    double W = 760, H = 480, L = 70, R = 20, T = 40, B = 60;
    double xmin = INFINITY, xmax = 0, ymin = INFINITY, ymax = -INFINITY;
    for (int i = 0; i < n; i++) {
        xmin = fmin(xmin, r[i].bytes);
        xmax = fmax(xmax, r[i].bytes);
        ymin = fmin(ymin, ylog(r[i].kl));
        ymax = fmax(ymax, ylog(r[i].kl));
    }
    ymin = floor(ymin);
    ymax = ceil(ymax);
    if (ymax <= ymin)
        ymax = ymin + 1;
    double lx0 = log10(xmin) - 0.05, lx1 = log10(xmax) + 0.05;
#define X(b) (L + (log10(b) - lx0) / (lx1 - lx0) * (W - L - R))
#define Y(k) (T + (ymax - ylog(k)) / (ymax - ymin) * (H - T - B))
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
               "font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%.0f\" y=\"22\" font-size=\"14\">%s</text>\n", L, title);
    for (double y = ymin; y <= ymax; y += 1) {
        double py = T + (ymax - y) / (ymax - ymin) * (H - T - B);
        fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, py, W - R, py);
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">1e%.0f</text>\n", L - 6, py + 4, y);
    }
    for (int e = (int)floor(lx0); e <= (int)ceil(lx1); e++)
        for (int m = 1; m < 10; m++) {
            double v = m * pow(10, e);
            if (log10(v) < lx0 || log10(v) > lx1 || (m != 1 && m != 2 && m != 5))
                continue;
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#eee\"/>\n", X(v), T, X(v), H - B);
            fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%.3g MB</text>\n", X(v), H - B + 16, v / 1e6);
        }
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">size (log scale)</text>\n", (L + W - R) / 2, H - 18);
    fprintf(f, "<text x=\"16\" y=\"%.0f\" transform=\"rotate(-90 16 %.0f)\" text-anchor=\"middle\">mean KL divergence "
               "vs base (nats, log scale)</text>\n", (T + H - B) / 2, (T + H - B) / 2);
    /* the Pareto front, by size */
    row **p = malloc((size_t)n * sizeof *p);
    int np = 0;
    for (int i = 0; p && i < n; i++)
        if (r[i].pareto)
            p[np++] = &r[i];
    if (p) {
        qsort(p, (size_t)np, sizeof *p, by_bytes);
        fprintf(f, "<polyline fill=\"none\" stroke=\"#d62728\" stroke-width=\"1.5\" stroke-dasharray=\"5,3\" points=\"");
        for (int i = 0; i < np; i++)
            fprintf(f, "%.1f,%.1f ", X(p[i]->bytes), Y(p[i]->kl));
        fprintf(f, "\"/>\n");
        free(p);
    }
    for (int i = 0; i < n; i++) {
        static const char *const cols[] = {"#ff7f0e", "#1f77b4", "#2ca02c", "#9467bd"};
        const char *col = cols[r[i].method & 3];
        if (r[i].method)
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" fill=\"%s\"%s/>\n", X(r[i].bytes) - 4,
                    Y(r[i].kl) - 4, col, r[i].pareto ? " stroke=\"#d62728\" stroke-width=\"2\"" : "");
        else
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"%s\"%s/>\n", X(r[i].bytes), Y(r[i].kl), col,
                    r[i].pareto ? " stroke=\"#d62728\" stroke-width=\"2\"" : "");
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#333\">%s%s</text>\n", X(r[i].bytes) + 6,
                Y(r[i].kl) + (r[i].method ? 12 : -5), r[i].name, method_suffix(r[i].method, " "));
    }
    fprintf(f, "<circle cx=\"%.0f\" cy=\"%.0f\" r=\"4.5\" fill=\"#ff7f0e\"/><text x=\"%.0f\" y=\"%.0f\">RTN</text>\n",
            W - 150, T + 10, W - 140, T + 14);
    static const char *const legend[] = {"AWQ", "GPTQ", "AWQ+GPTQ"}, *const lcol[] = {"#1f77b4", "#2ca02c", "#9467bd"};
    for (int k = 0; k < 3; k++)
        fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"8\" height=\"8\" fill=\"%s\"/><text x=\"%.0f\" y=\"%.0f\">%s</text>\n",
                W - 154, T + 22 + 14 * k, lcol[k], W - 140, T + 30 + 14 * k, legend[k]);
    fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#d62728\" stroke-dasharray=\"5,3\"/>"
               "<text x=\"%.0f\" y=\"%.0f\">Pareto front (ringed)</text>\n",
            W - 158, T + 70, W - 144, T + 70, W - 140, T + 74);
    fprintf(f, "</svg>\n");
#undef X
#undef Y
}

static char key(int i)
{
    static const char keys[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    return keys[i % 36];
}

/* A character chart: x = log size, y = log KL; each point a letter keyed below. */
static void chart(FILE *f, const row *r, int n)
{
    enum { CW = 64, CH = 18 };
    char grid[CH][CW + 1];
    memset(grid, ' ', sizeof grid);
    double xmin = INFINITY, xmax = 0, ymin = INFINITY, ymax = -INFINITY;
    for (int i = 0; i < n; i++) {
        xmin = fmin(xmin, log10(r[i].bytes));
        xmax = fmax(xmax, log10(r[i].bytes));
        ymin = fmin(ymin, ylog(r[i].kl));
        ymax = fmax(ymax, ylog(r[i].kl));
    }
    if (xmax <= xmin) xmax = xmin + 1;
    if (ymax <= ymin) ymax = ymin + 1;
    for (int i = 0; i < n; i++) {
        int x = (int)lround((log10(r[i].bytes) - xmin) / (xmax - xmin) * (CW - 1));
        int y = (int)lround((ymax - ylog(r[i].kl)) / (ymax - ymin) * (CH - 1));
        char ch = key(i);
        while (x < CW - 1 && grid[y][x] != ' ') /* points that coincide sit side by side */
            x++;
        grid[y][x] = r[i].pareto && ch >= 'a' ? (char)(ch - 'a' + 'A') : ch;
    }
    fprintf(f, "\nmean KL (log) vs size (log); capitals and * = on the Pareto front\n");
    for (int y = 0; y < CH; y++) {
        grid[y][CW] = 0;
        double v = pow(10, ymax - (ymax - ymin) * y / (CH - 1));
        fprintf(f, "%9.2g |%s\n", v, grid[y]);
    }
    fprintf(f, "          +");
    for (int x = 0; x < CW; x++)
        fputc('-', f);
    fprintf(f, "\n           %-10.3g MB%*s%.3g MB\n", pow(10, xmin) / 1e6, CW - 22, "", pow(10, xmax) / 1e6);
    for (int i = 0; i < n; i++)
        fprintf(f, "%c=%s%s%s%s", key(i), r[i].name, method_suffix(r[i].method, "+"), r[i].pareto ? "*" : "",
                i + 1 < n ? (i % 6 == 5 ? "\n" : "  ") : "\n");
}

/* What every type of a sweep shares. */
typedef struct sweep {
    const app_opts *o;
    const char *model, *calib, *text;
    eng_model *base;
    int chunks, calib_tokens;
    const char *outdir;
    const char *json, *html; /* --json (appended), --html */
    const char *methods;     /* --methods (NULL: every one that applies) */
    eng_gptq *gptq;          /* the Hessians, once a GPTQ row needs them */
    eng_imatrix *imatrix;    /* --imatrix, for every quantized row (NULL: none) */
    const char *imatrix_path;
    char gptq_src[1200];     /* of this model */
} sweep;

static const char *base_type_name(const sweep *sw) { return simd_type_name(eng_model_get_info(sw->base)->main_type); }

/* Measure the model at path against the base into *w (the numbers;
 * the caller names the row). Returns 0, or 1 after a message. */
static int measure_file(const sweep *sw, const char *path, row *w)
{
    const app_opts *o = sw->o;
    eng_err e;
    eng_model *m = NULL;
    if (eng_model_open(path, &m, &e)) {
        fprintf(stderr, "nibble quant-sweep: %s\n", e.msg);
        return 1;
    }
    app_bar pb = {.label = "  measure ", .quiet = o->quiet};
    eng_ppl_opts po = {.n_ctx = (uint32_t)o->n_ctx, .max_chunks = (uint32_t)sw->chunks, .threads = o->threads,
                       .base = sw->base, .progress = on_ppl, .user = &pb};
    eng_ppl_result pr;
    if (eng_ppl_run(m, sw->text, strlen(sw->text), &po, &pr, &e)) {
        fprintf(stderr, "nibble quant-sweep: %s\n", e.msg);
        eng_model_close(m);
        return 1;
    }
    w->bytes = (double)eng_model_get_info(m)->file_size;
    w->params = (double)eng_model_get_info(m)->n_params;
    w->bpw = 8.0 * (w->bytes) / (double)eng_model_get_info(sw->base)->n_params;
    w->ppl = pr.ppl;
    w->ppl_err = pr.ppl_err;
    w->kl = pr.kl;
    w->kl_err = pr.kl_err;
    w->top1 = pr.top1;
    w->tps = decode_tps(m, o->threads);
    eng_model_close(m);
    return 0;
}

/* Quantize src to t with method (APP_QM_* bits; AWQ searched for this
 * type, GPTQ's Hessians of src collected once per sweep) into path; *rep
 * gets the quantizer's report. Returns 0, or 1 after a message. */
static int quantize_to(sweep *sw, const char *src, const eng_qtarget *t, int method, const char *path,
                       eng_quant_report *rep)
{
    const app_opts *o = sw->o;
    eng_err e;
    app_bar bar = {.label = "  quantize", .quiet = o->quiet};
    eng_quant_opts qo = {.target = t, .user = &bar, .method = app_quant_method_name(method, sw->imatrix != NULL),
                         .imatrix = sw->imatrix, .imatrix_file = sw->imatrix_path,
                         .threads = o->threads ? o->threads : eng_physical_cores()};
    eng_awq *aw = NULL;
    if (method & APP_QM_AWQ) {
        app_bar ab = {.label = "  awq     ", .quiet = o->quiet};
        eng_awq_opts ao = {.target = t, .calib_path = sw->calib, .max_tokens = (uint32_t)sw->calib_tokens,
                           .threads = o->threads, .clip = !(method & APP_QM_GPTQ), .progress = app_awq_progress,
                           .user = &ab};
        if (eng_awq_compute(src, &ao, &aw, &e)) {
            fprintf(stderr, "nibble quant-sweep: %s\n", e.msg);
            return 1;
        }
        qo.edits = eng_awq_edits(aw, &qo.n_edits);
    }
    if (method & APP_QM_GPTQ) {
        if (!sw->gptq || strcmp(sw->gptq_src, src)) {
            app_bar gb = {.label = "  gptq    ", .quiet = o->quiet};
            eng_gptq_opts go = {.calib_path = sw->calib, .max_tokens = (uint32_t)sw->calib_tokens,
                                .threads = o->threads, .progress = app_awq_progress, .user = &gb};
            eng_gptq_free(sw->gptq);
            sw->gptq = NULL;
            if (eng_gptq_collect(src, &go, &sw->gptq, &e)) {
                fprintf(stderr, "nibble quant-sweep: %s\n", e.msg);
                eng_awq_free(aw);
                return 1;
            }
            snprintf(sw->gptq_src, sizeof sw->gptq_src, "%s", src);
        }
        qo.gptq = sw->gptq;
        qo.gptq_params.clip = 1;
        qo.gptq_params.refine = APP_GPTQ_REFINE;
        qo.gptq_params.threads = o->threads;
    }
    int r = eng_quantize_file(src, path, &qo, rep, &e);
    eng_awq_free(aw);
    if (r) {
        fprintf(stderr, "nibble quant-sweep: %s\n", e.msg);
        return 1;
    }
    return 0;
}

/* Quantize the base model to t with method, measure the result against
 * it into *w. Returns 0, or 1 after a message. */
static int measure(sweep *sw, const eng_qtarget *t, int method, row *w)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s%s.gguf", sw->outdir, t->name, method_suffix(method, "-"));
    fprintf(stderr, "== %s %s\n", t->name, app_quant_method_name(method, 0));
    eng_quant_report rep;
    memset(w, 0, sizeof *w);
    if (quantize_to(sw, sw->model, t, method, path, &rep) || measure_file(sw, path, w))
        return 1;
    snprintf(w->name, sizeof w->name, "%s", t->name);
    w->method = method;
    w->imx = sw->imatrix != NULL;
    w->kind = "quant";
    w->type = t->name;
    if (t->fake_bits) { /* what the format would take: bits + an f16 scale and min per 32 */
        w->bytes = w->bytes - (double)rep.out_bytes + (double)rep.n_weights * (t->fake_bits + 1) / 8.0;
        w->bpw = 8.0 * (w->bytes) / (double)eng_model_get_info(sw->base)->n_params;
    }
    fprintf(stderr, "  %s%s: %.0f bytes, ppl %.4f, KL %.5f, top-1 %.2f%%, %.0f tok/s\n", w->name,
            method_suffix(method, "+"), w->bytes, w->ppl, w->kl, 100 * w->top1, w->tps);
    return 0;
}

/* One pruning point: prune the base (heads or neurons share), measure;
 * with then, also quantize the pruned model and measure that. Adds one
 * or two rows at *n. */
static int measure_pruned(sweep *sw, double heads, double neurons, const eng_qtarget *then, row *rows, int *n,
                          int cap)
{
    const app_opts *o = sw->o;
    char path[1200], qpath[1200];
    snprintf(path, sizeof path, "%s/prune-h%g-n%g.gguf", sw->outdir, heads, neurons);
    fprintf(stderr, "== prune heads %g, neurons %g\n", heads, neurons);
    app_bar bar = {.label = "  prune   ", .quiet = o->quiet};
    eng_prune_opts po = {.heads = heads, .neurons = neurons, .calib_path = sw->calib, .threads = o->threads,
                         .protect = ENG_PRUNE_PROTECT_PAGERANK, .progress = app_awq_progress, .user = &bar};
    eng_err e;
    if (eng_prune_file(sw->model, path, &po, NULL, &e)) {
        fprintf(stderr, "nibble quant-sweep: %s\n", e.msg);
        return 1;
    }
    for (int q = 0; q < (then ? 2 : 1) && *n < cap; q++) {
        row *w = &rows[*n];
        memset(w, 0, sizeof *w);
        eng_quant_report rep;
        if (q) {
            snprintf(qpath, sizeof qpath, "%s/prune-h%g-n%g-%s%s.gguf", sw->outdir, heads, neurons, then->name,
                     sw->calib ? "-awq" : "");
            if (quantize_to(sw, path, then, sw->calib ? APP_QM_AWQ : 0, qpath, &rep))
                return 1;
        }
        if (measure_file(sw, q ? qpath : path, w))
            return 1;
        snprintf(w->name, sizeof w->name, "%s %.0f%%%s%s", heads > 0 ? "heads" : "neurons",
                 100 * (heads > 0 ? heads : neurons), q ? " + " : "", q ? then->name : "");
        w->kind = "prune";
        w->type = q ? then->name : base_type_name(sw);
        w->method = q && sw->calib ? APP_QM_AWQ : 0;
        w->heads = heads;
        w->neurons = neurons;
        fprintf(stderr, "  %s: %.0f bytes, %.0f params, ppl %.4f, KL %.5f, %.0f tok/s\n", w->name, w->bytes, w->params,
                w->ppl, w->kl, w->tps);
        (*n)++;
    }
    return 0;
}

/* The table and chart on stdout; sweep.md, sweep.svg and sweep.tsv in the
 * output folder. */
static void write_outputs(const sweep *sw, row *rows, int n)
{
    mark_pareto(rows, n);
    const char *tb = eng_path_base(sw->o->prompt_file), *cb = sw->calib ? eng_path_base(sw->calib) : NULL;
    const char *mb = eng_path_base(sw->model), *dir = sw->outdir;
    uint32_t ctx = (uint32_t)sw->o->n_ctx, chunks = (uint32_t)sw->chunks;
    char p[1200];
    const char *ib = sw->imatrix_path ? eng_path_base(sw->imatrix_path) : NULL;
    table(stdout, rows, n, mb, tb, cb, ctx, chunks, ib);
    kl_per_bit(stdout, rows, n);
    chart(stdout, rows, n);
    snprintf(p, sizeof p, "%s/sweep.md", dir);
    FILE *f = fopen(p, "w");
    if (f) {
        table(f, rows, n, mb, tb, cb, ctx, chunks, ib);
        kl_per_bit(f, rows, n);
        fclose(f);
    }
    snprintf(p, sizeof p, "%s/sweep.svg", dir);
    if ((f = fopen(p, "w"))) {
        char title[256];
        snprintf(title, sizeof title, "%s: size vs KL divergence on %s", mb, tb);
        svg(f, rows, n, title);
        fclose(f);
    }
    snprintf(p, sizeof p, "%s/sweep.tsv", dir);
    if ((f = fopen(p, "w"))) {
        fprintf(f, "type\tmethod\tbytes\tbpw\tppl\tppl_err\tkl\tkl_err\ttop1\ttok_s\tpareto\n");
        for (int i = 0; i < n; i++)
            fprintf(f, "%s\t%s\t%.0f\t%.4f\t%.6f\t%.6f\t%.8f\t%.8f\t%.6f\t%.1f\t%d\n", rows[i].name,
                    method_of(&rows[i]), rows[i].bytes, rows[i].bpw, rows[i].ppl, rows[i].ppl_err, rows[i].kl,
                    rows[i].kl_err, rows[i].top1, rows[i].tps, rows[i].pareto);
        fclose(f);
    }
    fprintf(stderr, "wrote %s/sweep.md, %s/sweep.svg, %s/sweep.tsv\n", dir, dir, dir);
    if (!sw->json && !sw->html)
        return;
    eng_result_run run = {.ctx = (int)ctx, .chunks = (int)chunks, .threads = sw->o->threads,
                          .base_params = (double)eng_model_get_info(sw->base)->n_params};
    snprintf(run.model, sizeof run.model, "%s", mb);
    snprintf(run.text, sizeof run.text, "%s", tb);
    snprintf(run.calib, sizeof run.calib, "%s", cb ? cb : "");
    eng_result_row *rr = calloc((size_t)n + 1, sizeof *rr);
    if (!rr)
        return;
    for (int i = 0; i < n; i++) {
        const row *w = &rows[i];
        eng_result_row *x = &rr[i];
        snprintf(x->name, sizeof x->name, "%.47s", w->name);
        snprintf(x->kind, sizeof x->kind, "%s", w->kind ? w->kind : "quant");
        snprintf(x->type, sizeof x->type, "%.15s", w->type ? w->type : w->name);
        snprintf(x->method, sizeof x->method, "%s",
                 w->method || w->imx ? app_quant_method_name(w->method, w->imx)
                 : strcmp(method_of(w), "RTN")   ? "none"
                                                 : "rtn");
        x->heads = w->heads, x->neurons = w->neurons, x->bytes = w->bytes, x->params = w->params, x->bpw = w->bpw;
        x->ppl = w->ppl, x->ppl_err = w->ppl_err, x->kl = w->kl, x->kl_err = w->kl_err, x->top1 = w->top1;
        x->tok_s = w->tps;
    }
    if (sw->json && (f = fopen(sw->json, "a"))) {
        eng_results_write_json(f, &run, rr, n);
        fprintf(stderr, "%s %s\n", fclose(f) ? "could not write" : "appended this run to", sw->json);
    } else if (sw->json) {
        fprintf(stderr, "nibble quant-sweep: %s: cannot open it for appending\n", sw->json);
    }
    if (sw->html) {
        eng_results res = {.runs = &run, .n_runs = 1, .rows = rr, .n_rows = n};
        eng_afile af;
        eng_err e;
        char title[300];
        snprintf(title, sizeof title, "%s: quantization and pruning", mb);
        if (eng_afile_open(&af, sw->html, 0644, &e) || eng_results_html(af.f, &res, title) ||
            eng_afile_commit(&af, &e)) {
            eng_afile_abort(&af);
            fprintf(stderr, "nibble quant-sweep: %s: cannot write the page\n", sw->html);
        } else {
            fprintf(stderr, "wrote %s\n", sw->html);
        }
    }
    free(rr);
}

/* A comma-separated list of shares in (0, 1] into v (at most cap);
 * returns the count, or -1 after a usage message. */
static int shares(const char *flag, const char *list, double *v, int cap)
{
    int n = 0;
    for (const char *p = list; p && *p;) {
        char *end;
        double x = strtod(p, &end);
        if (end == p || !(x > 0 && x <= 1) || (*end && *end != ',') || n == cap) {
            app_usage_error("quant-sweep", flag, list, "expected shares in (0, 1] separated by commas");
            return -1;
        }
        v[n++] = x;
        p = *end ? end + 1 : end;
    }
    return n;
}

int cmd_sweep(int argc, char **argv)
{
    sweep sw = {.outdir = "sweep-out", .chunks = 40, .calib_tokens = 4096};
    const char *types = NULL, *ph = NULL, *pn = NULL, *pthen = NULL;
    double hs[16], ns[16];
    const app_flag own[] = {APP_FLAG("--calib", NULL, APP_STR, &sw.calib),
                            APP_FLAG("--types", NULL, APP_STR, &types),
                            APP_FLAG("--methods", NULL, APP_STR, &sw.methods),
                            APP_FLAG("--out", NULL, APP_STR, &sw.outdir),
                            APP_FLAG("--chunks", NULL, APP_INT, &sw.chunks, .min = 1, .max = INT_MAX),
                            APP_FLAG("--calib-tokens", NULL, APP_INT, &sw.calib_tokens, .min = 16, .max = INT_MAX),
                            APP_FLAG("--json", NULL, APP_STR, &sw.json),
                            APP_FLAG("--html", NULL, APP_STR, &sw.html),
                            APP_FLAG("--prune-heads", NULL, APP_STR, &ph),
                            APP_FLAG("--prune-neurons", NULL, APP_STR, &pn),
                            APP_FLAG("--prune-then", NULL, APP_STR, &pthen),
                            APP_FLAG("--imatrix", NULL, APP_STR, &sw.imatrix_path),
                            APP_FLAG_END};
    const app_cmd cmd = {.name = "quant-sweep", .usage = usage, .flags = own, .required = "-f"};
    app_opts o;
    int st = app_parse(argc, argv, 2, &cmd, &o, NULL, NULL);
    if (st)
        return app_parse_status(st);
    for (const char *p = types; p && *p;) {
        const char *end = strchr(p, ',');
        char nm[32];
        snprintf(nm, sizeof nm, "%.*s", (int)(end ? (size_t)(end - p) : strlen(p)), p);
        if (!eng_qtarget_find(nm)) {
            fprintf(stderr, "nibble quant-sweep: unknown type '%s'\n", nm);
            return 2;
        }
        p = end ? end + 1 : p + strlen(p);
    }
    for (const char *p = sw.methods; p && *p;) {
        const char *end = strchr(p, ',');
        char nm[32];
        snprintf(nm, sizeof nm, "%.*s", (int)(end ? (size_t)(end - p) : strlen(p)), p);
        if (app_quant_method(nm) < 0)
            return app_usage_error("quant-sweep", "--methods", sw.methods, "expected rtn, awq, gptq, awq+gptq");
        if (app_quant_method(nm) && !sw.calib)
            return app_usage_error("quant-sweep", "--methods", sw.methods, "awq and gptq need --calib");
        p = end ? end + 1 : p + strlen(p);
    }
    int nh = shares("--prune-heads", ph, hs, 16), nn = shares("--prune-neurons", pn, ns, 16);
    if (nh < 0 || nn < 0)
        return 2;
    const eng_qtarget *then = NULL;
    if (pthen && !(then = eng_qtarget_find(pthen)))
        return app_usage_error("quant-sweep", "--prune-then", pthen, "unknown type (see 'nibble quantize --help')");
    if (nh && !sw.calib)
        return app_usage_error("quant-sweep", "--prune-heads", ph, "needs --calib (head scores come from calibration)");
    if (o.n_ctx == 0)
        o.n_ctx = 256;
    eng_err e;
    if (sw.imatrix_path && eng_imatrix_load(sw.imatrix_path, &sw.imatrix, &e)) {
        fprintf(stderr, "nibble quant-sweep: %s\n", e.msg);
        return 1;
    }
    char *text = NULL;
    if (!app_prompt(&o, &text)) {
        eng_imatrix_free(sw.imatrix);
        return 1;
    }
    nb_mkdir(sw.outdir, 0755);
    sw.o = &o;
    sw.text = text;
    sw.model = app_model_path(&o);
    if (eng_model_open(sw.model, &sw.base, &e)) {
        fprintf(stderr, "nibble quant-sweep: %s\n", e.msg);
        free(text);
        eng_imatrix_free(sw.imatrix);
        return 1;
    }
    enum { MAX_ROWS = 160 };
    row rows[MAX_ROWS];
    int n = 0, status = 0;
    if (sw.json || sw.html || nh || nn) { /* the unpruned input, the rows' reference */
        fprintf(stderr, "== base\n");
        memset(&rows[0], 0, sizeof rows[0]);
        status = measure_file(&sw, sw.model, &rows[0]);
        snprintf(rows[0].name, sizeof rows[0].name, "base");
        rows[0].kind = "base";
        rows[0].type = base_type_name(&sw);
        n += !status;
    }
    for (int i = 0; i < nh && !status; i++)
        status = measure_pruned(&sw, hs[i], 0, then, rows, &n, MAX_ROWS);
    for (int i = 0; i < nn && !status; i++)
        status = measure_pruned(&sw, 0, ns[i], then, rows, &n, MAX_ROWS);
    for (const eng_qtarget *t = eng_qtargets(); t->name && !status && (!(nh || nn) || types); t++) {
        if (!in_list(types, t->name))
            continue;
        if (!sw.imatrix && eng_quant_needs_imatrix(t->type)) {
            fprintf(stderr, "== %s skipped: its %s tensors need an importance matrix (--imatrix FILE)\n", t->name,
                    simd_type_name(t->type));
            continue;
        }
        for (int method = 0; method < 4 && n < MAX_ROWS && !status; method++) {
            int quantized = t->type != 0 && t->type != 1 && t->type != 30; /* not f32/f16/bf16 */
            if (method && (!sw.calib || !(quantized || t->fake_bits)))
                continue;
            if ((method & APP_QM_GPTQ) && (t->fake_bits || !eng_gptq_supports(t->type)))
                continue;
            if (!in_list(sw.methods, app_quant_method_name(method, 0)))
                continue;
            status = measure(&sw, t, method, &rows[n]);
            n += !status;
        }
    }
    if (n)
        write_outputs(&sw, rows, n);
    eng_model_close(sw.base);
    eng_gptq_free(sw.gptq);
    eng_imatrix_free(sw.imatrix);
    free(text);
    return status;
}
