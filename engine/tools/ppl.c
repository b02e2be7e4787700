/* Perplexity and KL divergence over windows of a text (see ppl.h for the
 * method). Log-probabilities are computed in double from the float
 * logits, so the sums do not drift over many windows. */
#include "ppl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "port.h"

static double now_s(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* log-sum-exp of n logits, and the arg max */
static double lse(const float *l, uint32_t n, uint32_t *argmax)
{
    uint32_t best = 0;
    for (uint32_t j = 1; j < n; j++)
        if (l[j] > l[best])
            best = j;
    double mx = l[best], s = 0;
    for (uint32_t j = 0; j < n; j++)
        s += exp((double)l[j] - mx);
    *argmax = best;
    return mx + log(s);
}

/* KL(p || q) from logits, given each's log-sum-exp. */
static double kl_div(const float *lp, double zp, const float *lq, double zq, uint32_t n)
{
    double kl = 0;
    for (uint32_t j = 0; j < n; j++) {
        double a = (double)lp[j] - zp, b = (double)lq[j] - zq;
        kl += exp(a) * (a - b);
    }
    return kl > 0 ? kl : 0; /* rounding can give -1e-17 */
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int eng_ppl_run(eng_model *m, const char *text, size_t len, const eng_ppl_opts *o, eng_ppl_result *r, eng_err *e)
{
    memset(r, 0, sizeof *r);
    const eng_model_info *in = eng_model_get_info(m);
    const eng_tok *tok = eng_model_tok(m);
    uint32_t n_ctx = o->n_ctx ? o->n_ctx : 512;
    if (n_ctx > in->ctx_train)
        n_ctx = in->ctx_train;
    if (n_ctx < 8)
        return eng_errf(e, ENG_EINVAL, "context %u is too small to measure perplexity (at least 8)", n_ctx);
    uint32_t nv = in->n_vocab;
    if (o->base && eng_model_get_info(o->base)->n_vocab != nv)
        return eng_errf(e, ENG_EINVAL, "the base model has %u tokens in its vocabulary, this one %u: KL needs the same",
                        eng_model_get_info(o->base)->n_vocab, nv);
    int need = eng_tok_encode(tok, text, len, 1, 0, NULL, 0);
    if (need < 0)
        return eng_errf(e, need, "cannot tokenize the text");
    int32_t *ids = malloc(((size_t)need + 1) * sizeof *ids);
    if (!ids)
        return eng_errf(e, ENG_ENOMEM, "out of memory for %d tokens", need);
    eng_tok_encode(tok, text, len, 1, 0, ids, (size_t)need);
    uint32_t n_chunks = (uint32_t)((size_t)need / n_ctx);
    r->n_text_tokens = (uint64_t)need;
    if (n_chunks == 0) {
        free(ids);
        return eng_errf(e, ENG_EINVAL, "the text has %d tokens; one window of %u is needed (use a longer text or a smaller -c)",
                        need, n_ctx);
    }
    if (o->max_chunks && o->max_chunks < n_chunks)
        n_chunks = o->max_chunks;
    uint32_t first = n_ctx / 2, per = n_ctx - first - 1;
    float *lg = malloc((size_t)n_ctx * nv * sizeof *lg);
    float *lb = o->base ? malloc((size_t)n_ctx * nv * sizeof *lb) : NULL;
    double *kls = o->base ? malloc((size_t)n_chunks * per * sizeof *kls) : NULL;
    int32_t *win = malloc((size_t)n_ctx * sizeof *win);
    eng_ctx *c = NULL, *cb = NULL;
    int rc = 0;
    if (!lg || !win || (o->base && (!lb || !kls))) {
        rc = eng_errf(e, ENG_ENOMEM, "out of memory for the logits of %u positions", n_ctx);
        goto done;
    }
    eng_ctx_opts co = {.n_ctx = n_ctx, .n_threads = o->threads, .type_k = o->type_k, .type_v = o->type_v};
    if ((rc = eng_ctx_new_opts(m, &co, &c, e)) || (o->base && (rc = eng_ctx_new(o->base, n_ctx, o->threads, &cb, e))))
        goto done;
    int32_t bos = eng_tok_bos(tok);
    double nll = 0, nll2 = 0, bnll = 0, bnll2 = 0, kl = 0, kl2 = 0;
    uint64_t count = 0, agree = 0;
    double t0 = now_s();
    for (uint32_t i = 0; i < n_chunks; i++) {
        memcpy(win, ids + (size_t)i * n_ctx, n_ctx * sizeof *win);
        if (bos >= 0)
            win[0] = bos;
        eng_ctx_truncate(c, 0);
        if ((rc = eng_ctx_eval(c, win, n_ctx, lg, 1, e)))
            goto done;
        if (cb) {
            eng_ctx_truncate(cb, 0);
            if ((rc = eng_ctx_eval(cb, win, n_ctx, lb, 1, e)))
                goto done;
        }
        for (uint32_t j = first; j + 1 < n_ctx; j++) {
            int32_t next = ids[(size_t)i * n_ctx + j + 1];
            const float *l = lg + (size_t)j * nv;
            uint32_t am, bm;
            double z = lse(l, nv, &am), v = z - l[next];
            nll += v;
            nll2 += v * v;
            if (cb) {
                const float *b = lb + (size_t)j * nv;
                double zb = lse(b, nv, &bm), bv = zb - b[next];
                bnll += bv;
                bnll2 += bv * bv;
                double k = kl_div(b, zb, l, z, nv);
                kls[count] = k;
                kl += k;
                kl2 += k * k;
                agree += am == bm;
            }
            count++;
        }
        if (o->progress)
            o->progress(o->user, i + 1, n_chunks, exp(nll / (double)count));
    }
    r->seconds = now_s() - t0;
    r->n_ctx = n_ctx;
    r->n_chunks = n_chunks;
    r->n_scored = count;
    double n = (double)count;
    r->nll = nll / n;
    r->ppl = exp(r->nll);
    /* standard error of the mean NLL, carried to the ppl (as llama-perplexity reports it) */
    double var = count > 1 ? (nll2 / n - r->nll * r->nll) * n / (n - 1) : 0;
    r->ppl_err = r->ppl * sqrt(var > 0 ? var / n : 0);
    if (cb) {
        r->has_base = 1;
        double bm = bnll / n, bvar = count > 1 ? (bnll2 / n - bm * bm) * n / (n - 1) : 0;
        r->base_ppl = exp(bm);
        r->base_ppl_err = r->base_ppl * sqrt(bvar > 0 ? bvar / n : 0);
        r->kl = kl / n;
        double kvar = count > 1 ? (kl2 / n - r->kl * r->kl) * n / (n - 1) : 0;
        r->kl_err = sqrt(kvar > 0 ? kvar / n : 0);
        r->top1 = (double)agree / n;
        qsort(kls, count, sizeof *kls, cmp_double);
        r->kl_max = kls[count - 1];
        r->kl_p99 = kls[(size_t)(0.99 * (double)(count - 1))];
    }
done:
    eng_ctx_free(c);
    eng_ctx_free(cb);
    free(ids);
    free(lg);
    free(lb);
    free(kls);
    free(win);
    return rc;
}
