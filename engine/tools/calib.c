/* Calibration passes (see calib.h). */
#include "calib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "files.h"
#include "gguf.h"
#include "tokenizer.h"

int tools_calib_tokens(const eng_model *m, const char *path, const char *text, size_t len, uint32_t min_tok,
                       uint32_t max_tok, const char *who, int32_t **ids, uint32_t *n_tok, eng_err *e)
{
    char *owned = NULL;
    int r;
    *ids = NULL;
    *n_tok = 0;
    if (path) {
        if ((r = eng_read_file(path, TOOLS_CALIB_MAX_BYTES, &owned, &len, e)))
            return eng_err_prefix(e, r, "calibration text");
        text = owned;
    }
    const eng_tok *tok = eng_model_tok(m);
    int need = eng_tok_encode(tok, text, len, 1, 0, NULL, 0);
    if (need < (int)min_tok || need <= 0) {
        r = eng_errf(e, ENG_EINVAL, "%s: the calibration text has %d tokens; at least %u are needed", who,
                     need < 0 ? 0 : need, min_tok);
    } else if (!(*ids = malloc((size_t)need * sizeof **ids))) {
        r = eng_errf(e, ENG_ENOMEM, "out of memory for %d calibration tokens", need);
    } else {
        eng_tok_encode(tok, text, len, 1, 0, *ids, (size_t)need);
        *n_tok = (uint32_t)need < max_tok ? (uint32_t)need : max_tok;
        r = 0;
    }
    free(owned);
    return r;
}

int tools_calib_run(eng_model *m, int32_t *ids, uint32_t n_tok, uint32_t n_ctx, int threads, eng_mm_observer fn,
                    void *user, void (*progress)(void *puser, double frac, const char *what), void *puser, double p0,
                    double span, eng_err *e)
{
    tools_calib_pass p = {.threads = threads, .fn = fn, .user = user, .progress = progress, .puser = puser,
                          .p0 = p0, .span = span};
    return tools_calib_run_pass(m, ids, n_tok, n_ctx, &p, e);
}

int tools_calib_run_pass(eng_model *m, int32_t *ids, uint32_t n_tok, uint32_t n_ctx, const tools_calib_pass *p,
                         eng_err *e)
{
    eng_ctx *c = NULL;
    const uint32_t piece = 64;
    float *logits = NULL;
    uint32_t nv = eng_model_get_info(m)->n_vocab;
    int r = eng_ctx_new(m, n_ctx, p->threads, &c, e);
    if (r)
        return r;
    if (p->all_logits && !(logits = malloc((size_t)piece * nv * sizeof *logits))) {
        eng_ctx_free(c);
        return eng_errf(e, ENG_ENOMEM, "out of memory for the logits");
    }
    eng_ctx_set_observer(c, p->fn, p->user);
    if (p->xfn)
        eng_ctx_set_expert_observer(c, p->xfn, p->xuser);
    int32_t bos = eng_tok_bos(eng_model_tok(m));
    for (uint32_t at = 0; at < n_tok && !r; at += n_ctx) {
        uint32_t n = n_tok - at < n_ctx ? n_tok - at : n_ctx;
        int32_t save = ids[at];
        if (bos >= 0)
            ids[at] = bos; /* each window starts as a sequence does */
        eng_ctx_truncate(c, 0);
        if (p->all_logits)
            for (uint32_t k = 0; k < n && !r; k += piece)
                r = eng_ctx_eval(c, ids + at + k, n - k < piece ? n - k : piece, logits, 1, e);
        else
            r = eng_ctx_eval(c, ids + at, n, NULL, 0, e);
        ids[at] = save;
        if (!r && p->progress)
            p->progress(p->puser, p->p0 + p->span * (at + n) / n_tok, "calibration");
    }
    eng_ctx_set_observer(c, NULL, NULL);
    eng_ctx_set_expert_observer(c, NULL, NULL);
    eng_ctx_free(c);
    free(logits);
    return r;
}

int tools_calib_pair_run(eng_model *mf, eng_model *mq, int32_t *ids, uint32_t n_tok, uint32_t n_ctx,
                         const tools_calib_pair *p, eng_err *e)
{
    int r = 0;
    for (uint32_t w0 = 0; w0 + n_ctx <= n_tok && !r; w0 += n_ctx) {
        if (p->window)
            p->window(p->user);
        r = tools_calib_run(mf, ids + w0, n_ctx, n_ctx, p->threads, p->on_float, p->user, NULL, NULL, 0, 1, e);
        if (!r)
            r = tools_calib_run(mq, ids + w0, n_ctx, n_ctx, p->threads, p->on_quant, p->user, NULL, NULL, 0, 1, e);
        if (!r && p->progress)
            p->progress(p->puser, p->p0 + p->span * (w0 + n_ctx) / n_tok, p->what ? p->what : "calibration");
    }
    return r;
}

void tools_pair_sums(double *Hq, double *C, double *Hf, const float *xq, const float *xf, uint32_t nt, uint32_t d,
                     uint32_t i0, uint32_t i1)
{
    for (uint32_t t = 0; t < nt; t++) {
        const float *q = xq + (size_t)t * d, *z = xf + (size_t)t * d;
        for (uint32_t i = i0; i < i1; i++) {
            double qi = q[i], zi = z[i];
            double *hq = Hq + (size_t)i * d, *c = C + (size_t)i * d;
            for (uint32_t j = 0; j <= i; j++)
                hq[j] += qi * q[j];
            for (uint32_t j = 0; j < d; j++)
                c[j] += qi * z[j];
            if (Hf) {
                double *hf = Hf + (size_t)i * d;
                for (uint32_t j = 0; j <= i; j++)
                    hf[j] += zi * z[j];
            }
        }
    }
}

void tools_weight_name(const eng_model *m, const eng_weight *w, int l, const char *role, char *out, size_t cap)
{
    const eng_gguf *g = eng_model_gguf(m);
    const char *p = w->data;
    for (uint64_t i = 0; p && i < eng_gguf_n_tensors(g); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        if (p >= (const char *)t->data && p < (const char *)t->data + t->size) {
            snprintf(out, cap, "%s", t->name);
            return;
        }
    }
    if (l >= 0)
        snprintf(out, cap, "blk.%d.%s", l, role);
    else
        snprintf(out, cap, "%s", role);
}

void tools_mirror_lower(double *h, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < i; j++)
            h[(size_t)j * n + i] = h[(size_t)i * n + j];
}

int tools_chol_lower(double *a, uint32_t n)
{
    for (uint32_t j = 0; j < n; j++) {
        double *rj = a + (size_t)j * n, s = rj[j];
        for (uint32_t k = 0; k < j; k++)
            s -= rj[k] * rj[k];
        if (!(s > 0))
            return -1;
        rj[j] = sqrt(s);
        for (uint32_t i = j + 1; i < n; i++) {
            double *ri = a + (size_t)i * n, t = ri[j];
            for (uint32_t k = 0; k < j; k++)
                t -= ri[k] * rj[k];
            ri[j] = t / rj[j];
        }
    }
    return 0;
}
