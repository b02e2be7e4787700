/* engine/tools/report.c: results written as JSON read back the same,
 * runs appended to one file read as several, bad lines refused with the
 * line named, and the page holds every panel and no outside reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "testutil.h"

static char *to_text(const eng_result_run *run, const eng_result_row *rows, int n, int times, size_t *len)
{
    char *buf = NULL;
    FILE *f = tmpfile();
    if (!f)
        return NULL;
    for (int i = 0; i < times; i++)
        eng_results_write_json(f, run, rows, n);
    long sz = ftell(f);
    rewind(f);
    buf = malloc((size_t)sz + 1);
    if (buf && fread(buf, 1, (size_t)sz, f) == (size_t)sz)
        buf[sz] = 0, *len = (size_t)sz;
    fclose(f);
    return buf;
}

int main(void)
{
    eng_result_run run = {.ctx = 128, .chunks = 4, .threads = 2, .base_params = 292800};
    snprintf(run.model, sizeof run.model, "stories \"260K\".gguf");
    snprintf(run.text, sizeof run.text, "text\twith tab");
    eng_result_row rows[4] = {
        {"base", "base", "f32", "none", 0, 0, 1185376, 292800, 32.4, 5.71, 0.99, 0, 0, 1, 22302, 0},
        {"neurons 30%", "prune", "f32", "none", 0, 0.3, 987584, 246720, 27, 59.4, 12.4, 2.2, 0.11, 0.21, 31087, 0},
        {"q4_0", "quant", "q4_0", "rtn", 0, 0, 277184, 292800, 7.57, 6.01, 1.02, 0.096, 0.0086, 0.837, 41819, 0},
        {"q4_0", "quant", "q4_0", "awq", 0, 0, 277184, 292800, 7.57, 6.06, 1.01, 0.0997, 0.0093, 0.857, NAN, 0},
    };
    size_t len = 0;
    char *text = to_text(&run, rows, 4, 2, &len);
    CHECK(text != NULL);
    eng_results r = {0};
    eng_err e;
    CHECKF(text && eng_results_parse(&r, text, len, "r.json", &e) == 0, "%s", e.msg);
    CHECKF(r.n_runs == 2 && r.n_rows == 8, "%d runs, %d rows", r.n_runs, r.n_rows);
    if (r.n_rows == 8) {
        CHECK(!strcmp(r.runs[0].model, run.model) && !strcmp(r.runs[0].text, run.text) && r.runs[1].ctx == 128 &&
              r.runs[0].calib[0] == 0);
        for (int i = 0; i < 8; i++) {
            const eng_result_row *a = &r.rows[i], *b = &rows[i % 4];
            CHECKF(!strcmp(a->name, b->name) && !strcmp(a->kind, b->kind) && !strcmp(a->type, b->type) &&
                       !strcmp(a->method, b->method) && a->neurons == b->neurons && a->bytes == b->bytes &&
                       fabs(a->ppl - b->ppl) < 1e-6 && a->run == i / 4 && (isnan(b->tok_s) ? isnan(a->tok_s) : a->tok_s == b->tok_s),
                   "row %d", i);
        }
    }
    /* the page */
    FILE *f = tmpfile();
    CHECK(f && eng_results_html(f, &r, "t <&>") == 0);
    if (f) {
        long sz = ftell(f);
        rewind(f);
        char *page = malloc((size_t)sz + 1);
        if (page && fread(page, 1, (size_t)sz, f) == (size_t)sz) {
            page[sz] = 0;
            const char *want[] = {"Size against perplexity", "Size reduction and perplexity change",
                                  "Pruning: perplexity against", "Pruning: decode speed", "on one Pareto chart",
                                  "AWQ against round-to-nearest", "All results", "t &lt;&amp;&gt;", "&#9733;",
                                  "stories &quot;260K&quot;.gguf", "class=\"front\""};
            for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
                CHECKF(strstr(page, want[i]), "page lacks %s", want[i]);
            CHECK(!strstr(page, "http:") && !strstr(page, "https:") && !strstr(page, "src="));
        }
        free(page);
        fclose(f);
    }
    eng_results_free(&r);
    /* bad input: nothing kept, the line named */
    const char *bad[][2] = {
        {"{\"schema\": \"nibble-sweep/1\", \"rows\": []}\n{\"schema\": \"nibble-sweep/1\", \"rows\": [{\"name\": 1}]}",
         "line 2"},
        {"{\"schema\": \"other/2\"}", "unknown schema"},
        {"{\"rows\": []}", "no \"schema\""},
        {"{\"schema\": \"nibble-sweep/1\", \"rows\": [{\"name\": \"x\", \"ppl\": 1}]}", "lacks"},
        {"{\"schema\": \"nibble-sweep/1\"} trailing", "text after"},
        {"{\"schema\": \"nibble-sweep/1\", \"rows\": [{\"name\": \"x\", \"bytes\": 1e, \"ppl\": 2}]}", "number"},
        {"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", "expected an object"},
        {"\n\n", "no results"},
        {"{\"schema\": \"nibble-sweep/1\", \"x\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
         "nested"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        eng_results b = {0};
        e.msg[0] = 0;
        int rc = eng_results_parse(&b, bad[i][0], strlen(bad[i][0]), "b.json", &e);
        CHECKF(rc < 0 && strstr(e.msg, bad[i][1]) && strstr(e.msg, "b.json") && b.n_rows == 0, "case %zu: %d '%s'", i,
               rc, e.msg);
        eng_results_free(&b);
    }
    free(text);
    return tu_result("test_report");
}
