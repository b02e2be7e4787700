/* The embedded model against published and llama.cpp outputs:
 * - greedy from BOS reproduces stories260K.greedy256.txt token for token;
 * - each prompt of golden/stories260K-greedy.jsonl tokenizes to llama.cpp's
 *   prompt_ids and continues greedily with llama.cpp's ids;
 * on 1 and 2 threads. Without those files (../shared) it exits 77, skipped,
 * never 0: a pass means the outputs were compared. */
#include "jsonl.h"
#include "model.h"
#include "session.h"
#include "testutil.h"

static eng_model *load(void)
{
    char buf[4096];
    const char *dir = getenv("NIBBLE_ASSETS");
    snprintf(buf, sizeof buf, "%s/stories260K.gguf", dir ? dir : "assets");
    eng_model *m = NULL;
    eng_err e;
    if (eng_model_open(buf, &m, &e))
        fprintf(stderr, "%s\n", e.msg);
    return m;
}

static void greedy(eng_model *m, int threads, const int32_t *prompt, int np, int n, int32_t *out)
{
    eng_sampler_params sp = eng_sampler_defaults();
    sp.temp = 0;
    eng_session *s;
    eng_err e;
    CHECK(eng_session_new(m, 0, threads, &sp, &s, &e) == 0);
    CHECK(eng_session_feed(s, prompt, (uint32_t)np, &e) == 0);
    for (int i = 0; i < n; i++) {
        out[i] = -1;
        if (eng_session_next(s, &out[i], &e) != 0)
            break;
    }
    eng_session_free(s);
}

/* A file of ../shared, whole (caller frees); NULL if absent (a skip) or
 * unreadable (a failure). */
static char *read_shared(const char *rel)
{
    char buf[4096];
    if (!tu_shared(rel, buf))
        return NULL;
    char *txt = tu_read(buf, NULL);
    CHECKF(txt != NULL, "cannot read %s", buf);
    return txt;
}

static void check_greedy256(eng_model *m)
{
    char *txt = read_shared("models/stories260K.greedy256.txt");
    if (!txt)
        return;
    /* line 3: comma-separated ids */
    char *line = txt;
    for (int i = 0; i < 2 && line; i++)
        line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL;
    int32_t want[256], got[256];
    int n = 0;
    for (char *p = line; p && n < 256;) {
        want[n++] = (int32_t)strtol(p, &p, 10);
        if (*p != ',')
            break;
        p++;
    }
    CHECK(n == 256);
    int32_t bos = 1;
    for (int threads = 1; threads <= 2; threads++) {
        greedy(m, threads, &bos, 1, 256, got);
        int same = 0;
        while (same < 256 && got[same] == want[same])
            same++;
        CHECKF(same == 256, "threads %d: first difference at token %d (got %d, want %d)", threads, same,
               same < 256 ? got[same] : 0, same < 256 ? want[same] : 0);
    }
    free(txt);
}

static void check_prompts(eng_model *m)
{
    char *all = read_shared("golden/stories260K-greedy.jsonl");
    if (!all)
        return;
    int cases = 0;
    for (char *line = all; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        char *prompt = js_string(js_find(line, "prompt"), NULL);
        int32_t *pids, *ids;
        int np = js_int_array(js_find(line, "prompt_ids"), &pids);
        int n = js_int_array(js_find(line, "ids"), &ids);
        if (prompt && np > 0 && n > 0) {
            cases++;
            int32_t mine[256];
            int k = eng_tok_encode(eng_model_tok(m), prompt, strlen(prompt), 1, 0, mine, 256);
            int same = k == np && k <= 256;
            for (int i = 0; same && i < k; i++)
                same = mine[i] == pids[i];
            CHECKF(same, "prompt '%s' tokenizes differently from llama.cpp", prompt);
            int32_t *got = malloc((size_t)n * sizeof *got);
            for (int threads = 1; threads <= 2; threads++) {
                greedy(m, threads, pids, np, n, got);
                int s = 0;
                while (s < n && got[s] == ids[s])
                    s++;
                CHECKF(s == n, "prompt '%s', %d threads: first difference at token %d", prompt, threads, s);
            }
            free(got);
        }
        free(prompt);
        free(pids);
        free(ids);
        line = nl ? nl + 1 : NULL;
    }
    CHECKF(cases == 6, "read %d cases", cases);
    free(all);
}

int main(void)
{
    eng_model *m = load();
    CHECK(m != NULL);
    if (!m)
        return tu_result("test_golden");
    check_greedy256(m);
    check_prompts(m);
    eng_model_close(m);
    return tu_result("test_golden");
}
