/* engine/tools/ppl.c and engine/tools/awq.c against ../shared:
 *  - the embedded model's perplexity on wiki.test.raw (-c 256, 40
 *    windows) equals llama-perplexity's 92.3628 (../shared/golden) to 0.1%;
 *  - KL of a model against itself is 0 with 100% top-1 agreement;
 *  - AWQ q4_0 (calibrated on wiki.valid.raw) has a lower mean KL than
 *    RTN q4_0 on held-out text (wiki.test.raw). */
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "awq.h"
#include "model.h"
#include "ppl.h"
#include "quantize.h"
#include "testutil.h"

#define GOLDEN_PPL 92.3628

int main(void)
{
    char tbuf[4096], vbuf[4096], mbuf[4096];
    const char *test = tu_shared("text/wiki.test.raw", tbuf), *valid = tu_shared("text/wiki.valid.raw", vbuf);
    const char *model = tu_asset("stories260K.gguf", mbuf);
    if (!test || !valid || !model)
        return TU_SKIP;
    size_t len = 0;
    char *text = tu_read(test, &len);
    CHECK(text != NULL);
    eng_err e;
    eng_model *m = NULL;
    CHECK(eng_model_open(model, &m, &e) == 0);
    if (!text || !m)
        return tu_result("test_ppl");

    eng_ppl_opts o = {.n_ctx = 256, .max_chunks = 40};
    eng_ppl_result r;
    CHECK(eng_ppl_run(m, text, len, &o, &r, &e) == 0);
    printf("ppl %.4f +/- %.4f over %llu tokens (llama-perplexity: %.4f)\n", r.ppl, r.ppl_err,
           (unsigned long long)r.n_scored, GOLDEN_PPL);
    CHECK(r.n_chunks == 40 && r.n_scored == 40 * 127);
    CHECKF(fabs(r.ppl / GOLDEN_PPL - 1) < 0.001, "ppl %.4f", r.ppl);

    /* against itself */
    o.max_chunks = 2;
    o.base = m;
    CHECK(eng_ppl_run(m, text, len, &o, &r, &e) == 0);
    CHECK(r.has_base && r.kl < 1e-12 && r.top1 == 1.0 && r.ppl == r.base_ppl);

    /* too short a text */
    o.base = NULL;
    CHECK(eng_ppl_run(m, "Once upon a time", 16, &o, &r, &e) == ENG_EINVAL && strstr(e.msg, "one window of"));

    /* AWQ q4_0 vs RTN q4_0 */
    char dir[128], rtn[256], awq[256];
    snprintf(dir, sizeof dir, "/tmp/nibble_test_ppl_%d", (int)getpid());
    tu_mkdir(dir);
    snprintf(rtn, sizeof rtn, "%s/rtn.gguf", dir);
    snprintf(awq, sizeof awq, "%s/awq.gguf", dir);
    const eng_qtarget *t = eng_qtarget_find("q4_0");
    eng_quant_opts qo = {.target = t};
    CHECK(eng_quantize_file(model, rtn, &qo, NULL, &e) == 0);
    eng_awq_opts ao = {.target = t, .calib_path = valid, .max_tokens = 4096};
    eng_awq *a = NULL;
    CHECKF(eng_awq_compute(model, &ao, &a, &e) == 0, "%s", e.msg);
    qo.edits = eng_awq_edits(a, &qo.n_edits);
    qo.method = "awq";
    CHECK(qo.n_edits > 0);
    CHECK(eng_quantize_file(model, awq, &qo, NULL, &e) == 0);
    printf("awq: %s\n", eng_awq_summary(a));
    eng_awq_free(a);
    double kl[2];
    const char *paths[2] = {rtn, awq};
    for (int i = 0; i < 2; i++) {
        eng_model *q = NULL;
        CHECK(eng_model_open(paths[i], &q, &e) == 0);
        eng_ppl_opts po = {.n_ctx = 256, .max_chunks = 20, .base = m};
        CHECK(q && eng_ppl_run(q, text, len, &po, &r, &e) == 0);
        kl[i] = r.kl;
        printf("%s q4_0: ppl %.4f, KL %.5f +/- %.5f, top-1 %.2f%%\n", i ? "AWQ" : "RTN", r.ppl, r.kl, r.kl_err,
               100 * r.top1);
        eng_model_close(q);
    }
    CHECKF(kl[1] < kl[0], "AWQ KL %g, RTN KL %g", kl[1], kl[0]);
    remove(rtn);
    remove(awq);
    rmdir(dir);
    eng_model_close(m);
    free(text);
    return tu_result("test_ppl");
}
