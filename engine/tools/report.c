/* Sweep results as JSON lines, read back, and drawn as one HTML page
 * (see report.h). The reader is a small JSON parser for this schema: it
 * walks any JSON, keeps the keys it knows and skips the rest. */
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- writing ---- */

static void jstr(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void jnum(FILE *f, const char *key, double v, int last)
{
    fprintf(f, "\"%s\": ", key);
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fputs("null", f);
    fputs(last ? "" : ", ", f);
}

void eng_results_write_json(FILE *f, const eng_result_run *run, const eng_result_row *rows, int n)
{
    fputs("{\"schema\": \"nibble-sweep/1\", \"model\": ", f);
    jstr(f, run->model);
    fputs(", \"text\": ", f);
    jstr(f, run->text);
    fputs(", \"calib\": ", f);
    if (run->calib[0])
        jstr(f, run->calib);
    else
        fputs("null", f);
    fprintf(f, ", \"ctx\": %d, \"chunks\": %d, \"threads\": %d, ", run->ctx, run->chunks, run->threads);
    jnum(f, "base_params", run->base_params, 0);
    fputs("\"rows\": [", f);
    for (int i = 0; i < n; i++) {
        const eng_result_row *r = &rows[i];
        fputs(i ? ", {\"name\": " : "{\"name\": ", f);
        jstr(f, r->name);
        fputs(", \"kind\": ", f);
        jstr(f, r->kind);
        fputs(", \"type\": ", f);
        jstr(f, r->type);
        fputs(", \"method\": ", f);
        jstr(f, r->method);
        fputs(", ", f);
        jnum(f, "heads", r->heads, 0);
        jnum(f, "neurons", r->neurons, 0);
        jnum(f, "bytes", r->bytes, 0);
        jnum(f, "params", r->params, 0);
        jnum(f, "bpw", r->bpw, 0);
        jnum(f, "ppl", r->ppl, 0);
        jnum(f, "ppl_err", r->ppl_err, 0);
        jnum(f, "kl", r->kl, 0);
        jnum(f, "kl_err", r->kl_err, 0);
        jnum(f, "top1", r->top1, 0);
        jnum(f, "tok_s", r->tok_s, 1);
        fputc('}', f);
    }
    fputs("]}\n", f);
}

/* ---- reading ---- */

typedef struct jp {
    const char *p, *end;
    const char *err;
} jp;

static void ws(jp *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\r'))
        j->p++;
}

static int lit(jp *j, const char *s)
{
    size_t n = strlen(s);
    if ((size_t)(j->end - j->p) >= n && !memcmp(j->p, s, n)) {
        j->p += n;
        return 1;
    }
    return 0;
}

/* A string into out (cap bytes, cut short if longer; NULL: skipped). */
static int jp_str(jp *j, char *out, size_t cap)
{
    size_t n = 0;
    ws(j);
    if (j->p >= j->end || *j->p != '"')
        return j->err = "expected a string", -1;
    j->p++;
    while (j->p < j->end && *j->p != '"') {
        char c = *j->p++;
        if ((unsigned char)c < 0x20)
            return j->err = "control character in a string", -1;
        if (c == '\\') {
            if (j->p >= j->end)
                break;
            c = *j->p++;
            switch (c) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'u':
                if (j->end - j->p < 4)
                    return j->err = "short \\u escape", -1;
                {
                    char hex[5] = {j->p[0], j->p[1], j->p[2], j->p[3], 0}, *e;
                    long v = strtol(hex, &e, 16);
                    if (*e)
                        return j->err = "bad \\u escape", -1;
                    j->p += 4;
                    c = v < 0x80 ? (char)v : '?'; /* names here are ASCII; others shown as '?' */
                }
                break;
            case '"': case '\\': case '/': break;
            default: return j->err = "bad escape", -1;
            }
        }
        if (out && n + 1 < cap)
            out[n++] = c;
    }
    if (j->p >= j->end)
        return j->err = "unterminated string", -1;
    j->p++;
    if (out && cap)
        out[n] = 0;
    return 0;
}

static int jp_num(jp *j, double *v)
{
    ws(j);
    if (lit(j, "null")) {
        *v = NAN;
        return 0;
    }
    char buf[64];
    size_t n = 0;
    while (j->p + n < j->end && n < sizeof buf - 1 && strchr("0123456789+-.eE", j->p[n]))
        n++;
    memcpy(buf, j->p, n);
    buf[n] = 0;
    char *e;
    *v = strtod(buf, &e);
    if (!n || *e)
        return j->err = "expected a number", -1;
    j->p += n;
    return 0;
}

static int jp_skip(jp *j, int depth);

/* Calls fn for each key of an object, positioned at its value; fn must
 * consume the value (or return 1 to have it skipped). */
static int jp_obj(jp *j, int (*fn)(jp *j, const char *key, void *u), void *u, int depth)
{
    ws(j);
    if (depth > 32)
        return j->err = "nested too deeply", -1;
    if (!lit(j, "{"))
        return j->err = "expected an object", -1;
    ws(j);
    if (lit(j, "}"))
        return 0;
    for (;;) {
        char key[64];
        if (jp_str(j, key, sizeof key))
            return -1;
        ws(j);
        if (!lit(j, ":"))
            return j->err = "expected ':'", -1;
        int r = fn ? fn(j, key, u) : 1;
        if (r < 0 || (r == 1 && jp_skip(j, depth + 1)))
            return -1;
        ws(j);
        if (lit(j, "}"))
            return 0;
        if (!lit(j, ","))
            return j->err = "expected ',' or '}'", -1;
    }
}

static int jp_skip(jp *j, int depth)
{
    ws(j);
    if (depth > 32)
        return j->err = "nested too deeply", -1;
    if (j->p >= j->end)
        return j->err = "unexpected end", -1;
    if (*j->p == '{')
        return jp_obj(j, NULL, NULL, depth);
    if (*j->p == '"')
        return jp_str(j, NULL, 0);
    if (*j->p == '[') {
        j->p++;
        ws(j);
        if (lit(j, "]"))
            return 0;
        for (;;) {
            if (jp_skip(j, depth + 1))
                return -1;
            ws(j);
            if (lit(j, "]"))
                return 0;
            if (!lit(j, ","))
                return j->err = "expected ',' or ']'", -1;
        }
    }
    if (lit(j, "true") || lit(j, "false") || lit(j, "null"))
        return 0;
    double v;
    return jp_num(j, &v);
}

typedef struct row_ctx {
    eng_result_row *r;
    unsigned seen;
} row_ctx;

static int row_key(jp *j, const char *k, void *u)
{
    row_ctx *c = u;
    eng_result_row *r = c->r;
    static const char *const nums[] = {"heads", "neurons", "bytes", "params", "bpw", "ppl", "ppl_err",
                                       "kl", "kl_err", "top1", "tok_s"};
    double *dst[] = {&r->heads, &r->neurons, &r->bytes, &r->params, &r->bpw, &r->ppl, &r->ppl_err,
                     &r->kl, &r->kl_err, &r->top1, &r->tok_s};
    for (int i = 0; i < 11; i++)
        if (!strcmp(k, nums[i])) {
            c->seen |= 1u << i;
            return jp_num(j, dst[i]);
        }
    if (!strcmp(k, "name"))
        return c->seen |= 1u << 12, jp_str(j, r->name, sizeof r->name);
    if (!strcmp(k, "kind"))
        return jp_str(j, r->kind, sizeof r->kind);
    if (!strcmp(k, "type"))
        return jp_str(j, r->type, sizeof r->type);
    if (!strcmp(k, "method"))
        return jp_str(j, r->method, sizeof r->method);
    return 1;
}

typedef struct run_ctx {
    eng_results *res;
    eng_result_run run;
    int have_schema;
    const char *bad_row;
} run_ctx;

static int str_or_null(jp *j, char *out, size_t cap)
{
    ws(j);
    if (lit(j, "null")) {
        out[0] = 0;
        return 0;
    }
    return jp_str(j, out, cap);
}

static int run_key(jp *j, const char *k, void *u)
{
    run_ctx *c = u;
    double v;
    if (!strcmp(k, "schema")) {
        char s[32];
        if (jp_str(j, s, sizeof s))
            return -1;
        if (strcmp(s, "nibble-sweep/1"))
            return j->err = "unknown schema (expected nibble-sweep/1)", -1;
        c->have_schema = 1;
        return 0;
    }
    if (!strcmp(k, "model"))
        return str_or_null(j, c->run.model, sizeof c->run.model);
    if (!strcmp(k, "text"))
        return str_or_null(j, c->run.text, sizeof c->run.text);
    if (!strcmp(k, "calib"))
        return str_or_null(j, c->run.calib, sizeof c->run.calib);
    if (!strcmp(k, "ctx") || !strcmp(k, "chunks") || !strcmp(k, "threads") || !strcmp(k, "base_params")) {
        if (jp_num(j, &v))
            return -1;
        if (k[0] == 'c')
            *(k[1] == 't' ? &c->run.ctx : &c->run.chunks) = isfinite(v) ? (int)v : 0;
        else if (k[0] == 't')
            c->run.threads = isfinite(v) ? (int)v : 0;
        else
            c->run.base_params = v;
        return 0;
    }
    if (strcmp(k, "rows"))
        return 1;
    ws(j);
    if (!lit(j, "["))
        return j->err = "\"rows\" is not an array", -1;
    ws(j);
    if (lit(j, "]"))
        return 0;
    for (;;) {
        eng_results *res = c->res;
        eng_result_row *nr = realloc(res->rows, (size_t)(res->n_rows + 1) * sizeof *nr);
        if (!nr)
            return j->err = "out of memory", -1;
        res->rows = nr;
        row_ctx rc = {&nr[res->n_rows], 0};
        memset(rc.r, 0, sizeof *rc.r);
        if (jp_obj(j, row_key, &rc, 2))
            return -1;
        /* name, bytes and ppl at least */
        if ((rc.seen & (1u << 12 | 1u << 2 | 1u << 5)) != (1u << 12 | 1u << 2 | 1u << 5))
            return j->err = "a row lacks \"name\", \"bytes\" or \"ppl\"", -1;
        rc.r->run = res->n_runs;
        res->n_rows++;
        ws(j);
        if (lit(j, "]"))
            return 0;
        if (!lit(j, ","))
            return j->err = "expected ',' or ']'", -1;
    }
}

int eng_results_parse(eng_results *r, const char *text, size_t len, const char *what, eng_err *e)
{
    int rows0 = r->n_rows, runs0 = r->n_runs, line = 0, any = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        line++;
        jp j = {p, le, NULL};
        ws(&j);
        if (j.p < le) {
            run_ctx c = {.res = r};
            int rc = jp_obj(&j, run_key, &c, 0);
            if (!rc) {
                ws(&j);
                if (j.p != le)
                    rc = -1, j.err = "text after the object";
                else if (!c.have_schema)
                    rc = -1, j.err = "no \"schema\" key";
            }
            eng_result_run *nr = rc ? NULL : realloc(r->runs, (size_t)(r->n_runs + 1) * sizeof *nr);
            if (!rc && !nr)
                rc = -1, j.err = "out of memory";
            if (rc) {
                r->n_rows = rows0;
                r->n_runs = runs0;
                return eng_errf(e, ENG_EFORMAT, "%s: line %d, byte %ld: %s", what, line, (long)(j.p - p) + 1,
                                j.err ? j.err : "bad JSON");
            }
            r->runs = nr;
            r->runs[r->n_runs++] = c.run;
            any = 1;
        }
        p = nl ? nl + 1 : end;
    }
    if (!any)
        return eng_errf(e, ENG_EFORMAT, "%s: no results in it", what);
    return 0;
}

void eng_results_free(eng_results *r)
{
    free(r->runs);
    free(r->rows);
    memset(r, 0, sizeof *r);
}

/* ---- the page ---- */

static void esc(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* Nominal bits of a weight type name: q4_0 -> 4, u2g32 -> 2, f16 -> 16. */
static int type_bits(const char *t)
{
    if (!strcmp(t, "f32"))
        return 32;
    if (!strcmp(t, "f16") || !strcmp(t, "bf16"))
        return 16;
    if (!strcmp(t, "mxfp4"))
        return 4;
    if ((t[0] == 'q' || t[0] == 'u') && t[1] >= '1' && t[1] <= '9')
        return t[1] - '0';
    return 0;
}

typedef struct series_style {
    const char *color, *label;
} series_style;

/* " awq", " gptq", ... after a point's name; nothing for rtn and none. */
static void method_label(FILE *f, const eng_result_row *r)
{
    if (strcmp(r->method, "rtn") && strcmp(r->method, "none") && r->method[0]) {
        fputc(' ', f);
        esc(f, r->method);
    }
}

static series_style style_of(const eng_result_row *r)
{
    if (!strcmp(r->kind, "base"))
        return (series_style){"#222222", "unpruned base"};
    if (!strcmp(r->kind, "prune"))
        return type_bits(r->type) >= 16 ? (series_style){"#2ca02c", "pruned"}
                                         : (series_style){"#9467bd", "pruned + quantized"};
    if (!strcmp(r->method, "awq"))
        return (series_style){"#1f77b4", "quantized, AWQ"};
    if (!strcmp(r->method, "gptq"))
        return (series_style){"#17becf", "quantized, GPTQ"};
    if (!strcmp(r->method, "awq+gptq"))
        return (series_style){"#8c564b", "quantized, AWQ+GPTQ"};
    return (series_style){"#ff7f0e", "quantized, RTN"};
}

/* The run's base: its base row, else its largest file. */
static const eng_result_row *base_of(const eng_results *res, int run)
{
    const eng_result_row *b = NULL;
    for (int i = 0; i < res->n_rows; i++) {
        const eng_result_row *r = &res->rows[i];
        if (r->run != run)
            continue;
        if (!strcmp(r->kind, "base"))
            return r;
        if (!b || r->bytes > b->bytes)
            b = r;
    }
    return b;
}

static double lg(double v) { return log10(v > 1e-12 ? v : 1e-12); }

typedef struct axis {
    double lo, hi;
    int log;
} axis;

/* An axis is grown value by value (axis_take), then padded (axis_done);
 * values that cannot be drawn (not finite, or <= 0 on a log axis) are
 * passed over, and an axis with none spans 0..1. */
static axis axis_new(int logs) { return (axis){INFINITY, -INFINITY, logs}; }

static void axis_take(axis *a, double v)
{
    if (!isfinite(v) || (a->log && v <= 0))
        return;
    double x = a->log ? lg(v) : v;
    a->lo = fmin(a->lo, x);
    a->hi = fmax(a->hi, x);
}

static void axis_done(axis *a)
{
    if (!isfinite(a->lo))
        a->lo = 0, a->hi = 1;
    double pad = (a->hi - a->lo) * 0.08;
    if (pad <= 0)
        pad = a->log ? 0.05 : fabs(a->hi) * 0.1 + 0.5;
    a->lo -= pad;
    a->hi += pad;
}

static double at(const axis *a, double v, double p0, double p1)
{
    double x = a->log ? lg(v) : v;
    return p0 + (x - a->lo) / (a->hi - a->lo) * (p1 - p0);
}

/* Tick values of an axis: decades with 1-2-5 for logs, about 5 steps else. */
static int ticks(const axis *a, double *out, int cap)
{
    int n = 0;
    if (a->log) {
        for (int e = (int)floor(a->lo); e <= (int)ceil(a->hi) && n < cap; e++)
            for (int m = 1; m < 10 && n < cap; m++) {
                double v = m * pow(10, e);
                if (lg(v) >= a->lo && lg(v) <= a->hi && (m == 1 || m == 2 || m == 5))
                    out[n++] = v;
            }
        return n;
    }
    double span = a->hi - a->lo, step = pow(10, floor(log10(span / 5)));
    if (span / step > 10)
        step *= 2;
    if (span / step > 10)
        step *= 2.5;
    for (double v = ceil(a->lo / step) * step; v <= a->hi && n < cap; v += step)
        out[n++] = fabs(v) < step * 1e-9 ? 0 : v;
    return n;
}

enum { W = 640, H = 400, PL = 64, PR = 16, PT = 16, PB = 48 };

static void frame(FILE *f, const axis *x, const axis *y, const char *xl, const char *yl, double xscale,
                  const char *xunit)
{
    double t[64];
    int n = ticks(x, t, 64);
    fprintf(f, "<svg viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\">\n", W, H, W, H);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fff\" stroke=\"#999\"/>\n", PL, PT,
            W - PL - PR, H - PT - PB);
    for (int i = 0; i < n; i++) {
        double px = at(x, t[i], PL, W - PR);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" class=\"grid\"/>", px, PT, px, H - PB);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.3g%s</text>\n", px, H - PB + 14,
                t[i] / xscale, xunit);
    }
    n = ticks(y, t, 64);
    for (int i = 0; i < n; i++) {
        double py = at(y, t[i], H - PB, PT);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"grid\"/>", PL, py, W - PR, py);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n", PL - 4, py + 4, t[i]);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", (PL + W - PR) / 2, H - 10);
    esc(f, xl);
    fprintf(f, "</text><text x=\"14\" y=\"%d\" transform=\"rotate(-90 14 %d)\" text-anchor=\"middle\">",
            (PT + H - PB) / 2, (PT + H - PB) / 2);
    esc(f, yl);
    fputs("</text>\n", f);
}

static int by_bytes(const void *a, const void *b)
{
    const eng_result_row *x = *(const eng_result_row *const *)a, *y = *(const eng_result_row *const *)b;
    return (x->bytes > y->bytes) - (x->bytes < y->bytes);
}

/* 1 if no other row is at most as large and at most as perplexed, and
 * better in one. */
static int on_front(const eng_results *res, int i)
{
    const eng_result_row *r = &res->rows[i];
    for (int j = 0; j < res->n_rows; j++) {
        const eng_result_row *o = &res->rows[j];
        if (j != i && o->bytes <= r->bytes && o->ppl <= r->ppl && (o->bytes < r->bytes || o->ppl < r->ppl))
            return 0;
    }
    return 1;
}

static void legend(FILE *f, const eng_results *res)
{
    const char *seen[8] = {0};
    int ns = 0;
    fputs("<div class=\"legend\">", f);
    for (int i = 0; i < res->n_rows; i++) {
        series_style s = style_of(&res->rows[i]);
        int dup = 0;
        for (int k = 0; k < ns; k++)
            dup |= seen[k] == s.label;
        if (dup || ns == 8)
            continue;
        seen[ns++] = s.label;
        fprintf(f, "<span><i style=\"background:%s\"></i>%s</span>", s.color, s.label);
    }
    fputs("<span><i class=\"front\"></i>Pareto front</span></div>\n", f);
}

/* Size (log) against perplexity (log), every row, the front joined. */
static void scatter(FILE *f, const eng_results *res, int only_prune_or_base)
{
    int n = res->n_rows;
    const eng_result_row **front = malloc((size_t)(n + 1) * sizeof *front);
    if (!front)
        return;
    axis x = axis_new(1), y = axis_new(1);
    for (int i = 0; i < n; i++)
        axis_take(&x, res->rows[i].bytes), axis_take(&y, res->rows[i].ppl);
    axis_done(&x);
    axis_done(&y);
    frame(f, &x, &y, "file size (log scale)", "perplexity (log scale)", 1e6, " MB");
    int nf = 0;
    for (int i = 0; i < n; i++)
        if (on_front(res, i))
            front[nf++] = &res->rows[i];
    qsort(front, (size_t)nf, sizeof *front, by_bytes);
    fputs("<polyline class=\"front\" points=\"", f);
    for (int i = 0; i < nf; i++)
        fprintf(f, "%.1f,%.1f ", at(&x, front[i]->bytes, PL, W - PR), at(&y, front[i]->ppl, H - PB, PT));
    fputs("\"/>\n", f);
    for (int i = 0; i < n; i++) {
        const eng_result_row *r = &res->rows[i];
        if (only_prune_or_base && !strcmp(r->kind, "quant") && type_bits(r->type) >= 8)
            continue;
        series_style s = style_of(r);
        double px = at(&x, r->bytes, PL, W - PR), py = at(&y, r->ppl, H - PB, PT);
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\"%s><title>", px, py, s.color,
                on_front(res, i) ? " stroke=\"#d62728\" stroke-width=\"2\"" : "");
        esc(f, r->name);
        fprintf(f, " (%s): %.3f MB, ppl %.4f</title></circle>", r->method, r->bytes / 1e6, r->ppl);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"pt\">", px + 7, py - 4);
        esc(f, r->name);
        method_label(f, r);
        fputs("</text>\n", f);
    }
    fputs("</svg>\n", f);
    free(front);
}

/* Horizontal bars, one a row: v[i] in percent (negative to the left). */
static void bars(FILE *f, const eng_results *res, const double *v, const char *title)
{
    int n = res->n_rows, bh = 16;
    double lo = 0, hi = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i]))
            lo = fmin(lo, v[i]), hi = fmax(hi, v[i]);
    if (hi - lo < 1e-9)
        hi = lo + 1;
    int h = n * bh + 40, lw = 170, w = 460;
    fprintf(f, "<svg viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\">\n", lw + w + 60, h, lw + w + 60, h);
    fprintf(f, "<text x=\"0\" y=\"14\" class=\"ttl\">%s</text>\n", title);
    double zero = lw + (0 - lo) / (hi - lo) * w;
    for (int i = 0; i < n; i++) {
        const eng_result_row *r = &res->rows[i];
        double y0 = 24 + i * bh, a = lw + (fmin(0, v[i]) - lo) / (hi - lo) * w,
               b = lw + (fmax(0, v[i]) - lo) / (hi - lo) * w;
        fprintf(f, "<text x=\"%d\" y=\"%.0f\" text-anchor=\"end\">", lw - 6, y0 + 12);
        esc(f, r->name);
        method_label(f, r);
        fprintf(f, "</text><rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>", a, y0 + 2,
                isfinite(v[i]) ? fmax(b - a, 0.5) : 0, bh - 4, style_of(r).color);
        fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" class=\"pt\">%+.1f%%</text>\n", fmax(a, b) + 4, y0 + 12, v[i]);
    }
    fprintf(f, "<line x1=\"%.1f\" y1=\"20\" x2=\"%.1f\" y2=\"%d\" stroke=\"#333\"/></svg>\n", zero, zero, h - 8);
}

/* The AWQ-vs-RTN gap: for each type measured both ways, ppl(RTN) -
 * ppl(AWQ) (positive: AWQ better). */
static void awq_gap(FILE *f, const eng_results *res)
{
    fputs("<table class=\"gap\"><tr><th>type</th><th>bits</th><th>PPL RTN</th><th>PPL AWQ</th><th>gap</th>"
          "<th></th></tr>\n", f);
    int any = 0;
    double maxg = 1e-9;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < res->n_rows; i++) {
            const eng_result_row *r = &res->rows[i];
            if (strcmp(r->kind, "quant") || strcmp(r->method, "rtn"))
                continue;
            for (int j = 0; j < res->n_rows; j++) {
                const eng_result_row *a = &res->rows[j];
                if (a->run != r->run || strcmp(a->kind, "quant") || strcmp(a->method, "awq") || strcmp(a->type, r->type))
                    continue;
                double g = r->ppl - a->ppl;
                if (!pass) {
                    maxg = fmax(maxg, fabs(g));
                    continue;
                }
                any = 1;
                fputs("<tr><td>", f);
                esc(f, r->type);
                fprintf(f, "</td><td>%d</td><td>%.4f</td><td>%.4f</td><td>%+.4f</td><td><svg width=\"200\" height=\"12\">"
                           "<rect x=\"%.1f\" y=\"1\" width=\"%.1f\" height=\"10\" fill=\"%s\"/></svg></td></tr>\n",
                        type_bits(r->type), r->ppl, a->ppl, g, g >= 0 ? 100.0 : 100 - 100 * fabs(g) / maxg,
                        100 * fabs(g) / maxg, g >= 0 ? "#1f77b4" : "#ff7f0e");
            }
        }
    fputs("</table>\n", f);
    if (!any)
        fputs("<p class=\"note\">No type was measured both with and without AWQ (quant-sweep --calib).</p>\n", f);
}

/* Pruning: perplexity and decode speed against the pruned share, one
 * line per series (heads, neurons; alone and quantized). */
static void prune_lines(FILE *f, const eng_results *res, int speed)
{
    static const struct {
        int heads;
        int quant;
        const char *label, *color, *dash;
    } ser[] = {{1, 0, "heads", "#2ca02c", ""}, {0, 0, "neurons", "#8c564b", ""},
               {1, 1, "heads + quantized", "#2ca02c", "5,3"}, {0, 1, "neurons + quantized", "#8c564b", "5,3"}};
    int n = res->n_rows;
    axis x = axis_new(0), y = axis_new(!speed);
    axis_take(&x, 0); /* the share axis starts at none removed, the speed axis at 0 */
    if (speed)
        axis_take(&y, 0);
    for (int i = 0; i < n; i++) {
        const eng_result_row *r = &res->rows[i];
        if (strcmp(r->kind, "quant")) {
            axis_take(&x, strcmp(r->kind, "prune") ? 0 : fmax(r->heads, r->neurons));
            axis_take(&y, speed ? r->tok_s : r->ppl);
        }
    }
    axis_done(&x);
    axis_done(&y);
    x.lo = fmin(x.lo, 0);
    frame(f, &x, &y, "share removed (heads: of the KV groups; neurons: of each layer)",
          speed ? "decode tokens/s" : "perplexity (log scale)", 0.01, "%");
    for (size_t s = 0; s < sizeof ser / sizeof ser[0]; s++) {
        double px[64], py[64];
        int k = 0;
        for (int run = 0; run < res->n_runs; run++) {
            const eng_result_row *b = base_of(res, run);
            k = 0;
            if (b && !ser[s].quant && !strcmp(b->kind, "base"))
                px[k] = 0, py[k++] = speed ? b->tok_s : b->ppl;
            for (int i = 0; i < n && k < 64; i++) {
                const eng_result_row *r = &res->rows[i];
                if (r->run != run || strcmp(r->kind, "prune"))
                    continue;
                int is_heads = r->heads > 0 && r->neurons == 0, is_neur = r->neurons > 0 && r->heads == 0;
                int q = type_bits(r->type) < 16;
                if ((ser[s].heads ? is_heads : is_neur) && q == ser[s].quant)
                    px[k] = ser[s].heads ? r->heads : r->neurons, py[k++] = speed ? r->tok_s : r->ppl;
            }
            if (k < 1)
                continue;
            fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" stroke-dasharray=\"%s\" points=\"",
                    ser[s].color, ser[s].dash);
            for (int i = 0; i < k; i++)
                fprintf(f, "%.1f,%.1f ", at(&x, px[i], PL, W - PR), at(&y, py[i], H - PB, PT));
            fputs("\"/>", f);
            for (int i = 0; i < k; i++)
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"><title>%s %.0f%%: %.4g</title></circle>",
                        at(&x, px[i], PL, W - PR), at(&y, py[i], H - PB, PT), ser[s].color, ser[s].label, 100 * px[i],
                        py[i]);
            fputc('\n', f);
        }
    }
    fputs("</svg>\n<div class=\"legend\">", f);
    for (size_t s = 0; s < sizeof ser / sizeof ser[0]; s++)
        fprintf(f, "<span><i style=\"background:%s%s\"></i>%s</span>", ser[s].color,
                ser[s].dash[0] ? ";opacity:.55" : "", ser[s].label);
    fputs("</div>\n", f);
}

static const char css[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#f6f6f4}"
    "h1{font-size:20px}h2{font-size:16px;margin:0 0 8px}"
    ".panel{background:#fff;border:1px solid #ddd;border-radius:6px;padding:12px 16px;margin:0 0 16px;"
    "display:inline-block;vertical-align:top;max-width:100%;overflow-x:auto}"
    "svg{font-size:11px;display:block}svg text{fill:#333}.grid{stroke:#eee}"
    ".front{fill:none;stroke:#d62728;stroke-width:1.5;stroke-dasharray:5,3}"
    ".pt{font-size:10px}.ttl{font-size:12px;font-weight:600}"
    ".legend span{margin-right:14px;white-space:nowrap}.legend i{display:inline-block;width:10px;height:10px;"
    "border-radius:5px;margin-right:4px}.legend i.front{border:0;border-top:2px dashed #d62728;height:0;width:16px;"
    "border-radius:0;vertical-align:middle}"
    "table{border-collapse:collapse;font-size:13px}th,td{padding:3px 8px;border-bottom:1px solid #eee;"
    "text-align:right}th{cursor:pointer;background:#f0f0ee;position:sticky;top:0}td:first-child,th:first-child"
    "{text-align:left}tr.best td{font-weight:600}.note{color:#666;font-size:12px}";

/* Click a header to sort by it (numbers as numbers); again to reverse. */
static const char script[] =
    "document.querySelectorAll('table.sort th').forEach(function(th,i){th.addEventListener('click',function(){"
    "var tb=th.closest('table').tBodies[0],rs=Array.from(tb.rows),d=th.dataset.d=th.dataset.d==='1'?'-1':'1';"
    "rs.sort(function(a,b){var x=a.cells[i].dataset.v||a.cells[i].textContent,y=b.cells[i].dataset.v||"
    "b.cells[i].textContent,p=parseFloat(x),q=parseFloat(y);return (isNaN(p)||isNaN(q)?x.localeCompare(y):p-q)*d;});"
    "rs.forEach(function(r){tb.appendChild(r);});});});";

static void table(FILE *f, const eng_results *res)
{
    fputs("<table class=\"sort\"><thead><tr><th>name</th><th>kind</th><th>type</th><th>method</th><th>bits</th>"
          "<th>size MB</th><th>params M</th><th>bits/weight</th><th>PPL</th><th>PPL change</th><th>mean KL</th>"
          "<th>same top-1</th><th>decode tok/s</th><th>speed vs base</th></tr></thead><tbody>\n", f);
    for (int i = 0; i < res->n_rows; i++) {
        const eng_result_row *r = &res->rows[i], *b = base_of(res, r->run);
        int bits = type_bits(r->type), best = 1;
        for (int j = 0; j < res->n_rows; j++)
            if (j != i && type_bits(res->rows[j].type) == bits && res->rows[j].ppl < r->ppl)
                best = 0;
        fprintf(f, "<tr%s><td>", best ? " class=\"best\" title=\"best perplexity at this bit width\"" : "");
        esc(f, r->name);
        fputs(best ? " &#9733;" : "", f);
        fputs("</td><td>", f);
        esc(f, r->kind);
        fputs("</td><td>", f);
        esc(f, r->type);
        fputs("</td><td>", f);
        esc(f, r->method);
        fprintf(f, "</td><td>%d</td><td data-v=\"%.0f\">%.3f</td><td>%.3f</td><td>%.2f</td><td>%.4f &plusmn; %.3f</td>"
                   "<td>%+.2f%%</td><td>%.5f</td><td>%.2f%%</td><td>%.0f</td><td>%.2fx</td></tr>\n",
                bits, r->bytes, r->bytes / 1e6, r->params / 1e6, r->bpw, r->ppl, r->ppl_err,
                b && b->ppl > 0 ? 100 * (r->ppl / b->ppl - 1) : 0.0, r->kl, 100 * r->top1, r->tok_s,
                b && b->tok_s > 0 ? r->tok_s / b->tok_s : 0.0);
    }
    fputs("</tbody></table>\n<p class=\"note\">&#9733; the lowest perplexity among the rows of the same nominal bit "
          "width (weight type); click a column to sort.</p>\n", f);
}

int eng_results_html(FILE *f, const eng_results *res, const char *title)
{
    if (!res->n_rows)
        return ENG_EINVAL;
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n<title>", f);
    esc(f, title);
    fprintf(f, "</title>\n<style>%s</style></head><body>\n<h1>", css);
    esc(f, title);
    fputs("</h1>\n<p class=\"note\">", f);
    for (int i = 0; i < res->n_runs; i++) {
        const eng_result_run *r = &res->runs[i];
        fputs(i ? "<br>" : "", f);
        fputs("Model <b>", f);
        esc(f, r->model);
        fputs("</b>, measured on <b>", f);
        esc(f, r->text);
        fprintf(f, "</b> (%d windows of %d tokens, second halves scored, %d threads)", r->chunks, r->ctx, r->threads);
        if (r->calib[0]) {
            fputs("; calibration <b>", f);
            esc(f, r->calib);
            fputs("</b>", f);
        }
        fputc('.', f);
    }
    fputs("</p>\n<div class=\"panel\"><h2>Size against perplexity</h2>\n", f);
    scatter(f, res, 0);
    legend(f, res);
    fputs("</div>\n", f);
    double *v = malloc((size_t)res->n_rows * sizeof *v + 1), *w = malloc((size_t)res->n_rows * sizeof *w + 1);
    if (v && w) {
        for (int i = 0; i < res->n_rows; i++) {
            const eng_result_row *r = &res->rows[i], *b = base_of(res, r->run);
            v[i] = b && b->bytes > 0 ? 100 * (1 - r->bytes / b->bytes) : 0;
            w[i] = b && b->ppl > 0 ? 100 * (r->ppl / b->ppl - 1) : 0;
        }
        fputs("<div class=\"panel\"><h2>Size reduction and perplexity change against the base</h2>\n", f);
        bars(f, res, v, "size reduction");
        bars(f, res, w, "perplexity change");
        fputs("</div>\n", f);
    }
    free(v);
    free(w);
    int pruned = 0;
    for (int i = 0; i < res->n_rows; i++)
        pruned |= !strcmp(res->rows[i].kind, "prune");
    if (pruned) {
        fputs("<div class=\"panel\"><h2>Pruning: perplexity against the share removed</h2>\n", f);
        prune_lines(f, res, 0);
        fputs("</div>\n<div class=\"panel\"><h2>Pruning: decode speed against the share removed</h2>\n", f);
        prune_lines(f, res, 1);
        fputs("</div>\n<div class=\"panel\"><h2>Pruned and quantized on one Pareto chart</h2>\n", f);
        scatter(f, res, 1);
        legend(f, res);
        fputs("<p class=\"note\">Quantized-only rows of 8 bits and more are left out here to keep the small end "
              "readable; the first chart has them.</p></div>\n",
              f);
    }
    fputs("<div class=\"panel\"><h2>AWQ against round-to-nearest, per type</h2>\n", f);
    awq_gap(f, res);
    fputs("</div>\n<div class=\"panel\"><h2>All results</h2>\n", f);
    table(f, res);
    fprintf(f, "</div>\n<script>%s</script>\n</body></html>\n", script);
    return ferror(f) ? ENG_EIO : 0;
}
