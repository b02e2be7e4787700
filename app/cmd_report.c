/* nibble report: the results files quant-sweep writes (--json) drawn as
 * one self-contained HTML page (engine/tools/report.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "files.h"
#include "report.h"

static const char usage[] =
    "usage: nibble report RESULTS.json... -o report.html [--title TEXT]\n"
    "\n"
    "Read the results of one or more quant-sweep runs (quant-sweep --json FILE;\n"
    "one run per line, runs may be appended) and write one HTML page with no\n"
    "outside references: size against perplexity with the Pareto front (log\n"
    "scales), size-reduction and perplexity-change bars, the AWQ-vs-RTN gap per\n"
    "type, the pruning panels (perplexity and decode speed against the share\n"
    "removed; pruned and quantized on one Pareto chart) and a sortable table\n"
    "with the best row of each bit width marked. The schema: docs/PRUNING.md.\n"
    "\n"
    "  -o FILE        the page to write (required)\n"
    "  --title TEXT   its title (default: nibble results)\n";

int cmd_report(int argc, char **argv)
{
    const char *pos[64] = {0}, *out = NULL, *title = "nibble results";
    int np = 0;
    const app_flag own[] = {APP_FLAG("-o", "--output", APP_STR, &out), APP_FLAG("--title", NULL, APP_STR, &title),
                            APP_FLAG_END};
    const app_cmd cmd = {.name = "report", .usage = usage, .flags = own, .min_pos = 1, .max_pos = 64,
                         .required = "-o"};
    int st = app_parse(argc, argv, 2, &cmd, NULL, pos, &np);
    if (st)
        return app_parse_status(st);
    eng_results res = {0};
    eng_err e;
    for (int i = 0; i < np; i++) {
        size_t len = 0;
        char *text = NULL;
        if (app_read_text(pos[i], &text, &len, &e)) {
            fprintf(stderr, "nibble report: %s\n", e.msg);
            eng_results_free(&res);
            return 1;
        }
        int r = eng_results_parse(&res, text, len, pos[i], &e);
        free(text);
        if (r) {
            fprintf(stderr, "nibble report: %s\n", e.msg);
            eng_results_free(&res);
            return 1;
        }
    }
    eng_afile af;
    int r = eng_afile_open(&af, out, 0644, &e);
    if (!r) {
        if (eng_results_html(af.f, &res, title)) {
            eng_afile_abort(&af);
            r = eng_errf(&e, ENG_EIO, "%s: cannot write the page", out);
        } else {
            r = eng_afile_commit(&af, &e);
        }
    }
    if (r)
        fprintf(stderr, "nibble report: %s\n", e.msg);
    else
        fprintf(stderr, "wrote %s: %d rows from %d runs\n", out, res.n_rows, res.n_runs);
    eng_results_free(&res);
    return r ? 1 : 0;
}
