/* The nibble binary as a user meets it: golden continuations printed
 * exactly, and one clear message with exit status 1 for each kind of bad
 * model file. */
#include <math.h>
#include <stdint.h>
#include <unistd.h>
#ifdef _WIN32
#include <windows.h>
#else
#include <sys/wait.h>
#endif

#include "gguf.h"
#include "jsonl.h"
#include "report.h"
#include "testutil.h"

typedef struct result {
    int status;
    char *out, *err;
    size_t out_len, err_len;
} result;

#ifdef _WIN32
/* Appends arg to cmd quoted the way the C runtime splits a Windows
 * command line: inside "...", a run of backslashes is literal unless a
 * quote follows, then it is doubled and the quote escaped. */
static void quote_arg(char *cmd, size_t cap, const char *arg)
{
    size_t n = strlen(cmd);
    if (n && n + 1 < cap)
        cmd[n++] = ' ';
    if (n + 1 < cap)
        cmd[n++] = '"';
    for (const char *p = arg; *p && n + 4 < cap; p++) {
        size_t bs = 0;
        while (p[bs] == '\\')
            bs++;
        if (bs && (p[bs] == '"' || p[bs] == 0)) {
            for (size_t i = 0; i < 2 * bs && n + 4 < cap; i++)
                cmd[n++] = '\\';
            p += bs - 1;
            continue;
        }
        if (*p == '"')
            cmd[n++] = '\\';
        cmd[n++] = *p;
    }
    if (n + 1 < cap)
        cmd[n++] = '"';
    cmd[n] = 0;
}

static char *slurp_file(const char *path, size_t *len)
{
    char *b = tu_read(path, len);
    if (!b) {
        b = calloc(1, 1);
        *len = 0;
    }
    return b;
}

/* Windows: CreateProcess with stdout and stderr in temp files. */
static result run(const char *const *args)
{
    result r = {-1, NULL, NULL, 0, 0};
    const char *bin = getenv("NIBBLE_BIN");
    char tmp[MAX_PATH], outp[MAX_PATH], errp[MAX_PATH];
    static char cmd[32768];
    cmd[0] = 0;
    if (!bin || !GetTempPathA(sizeof tmp, tmp) || !GetTempFileNameA(tmp, "nbo", 0, outp) ||
        !GetTempFileNameA(tmp, "nbe", 0, errp)) {
        fprintf(stderr, "test_cli: no temp files: Windows error %lu\n", (unsigned long)GetLastError());
    } else {
        SECURITY_ATTRIBUTES sa = {sizeof sa, NULL, TRUE};
        HANDLE ho = CreateFileA(outp, GENERIC_WRITE, FILE_SHARE_READ, &sa, CREATE_ALWAYS, 0, NULL);
        HANDLE he = CreateFileA(errp, GENERIC_WRITE, FILE_SHARE_READ, &sa, CREATE_ALWAYS, 0, NULL);
        quote_arg(cmd, sizeof cmd, bin);
        for (int i = 0; args[i]; i++)
            quote_arg(cmd, sizeof cmd, args[i]);
        STARTUPINFOA si = {.cb = sizeof si, .dwFlags = STARTF_USESTDHANDLES};
        si.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
        si.hStdOutput = ho;
        si.hStdError = he;
        PROCESS_INFORMATION pi;
        int started = 0;
        /* wine, on a loaded machine, now and then fails a CreateProcess
         * that works a moment later: three tries, each failure reported */
        for (int tries = 0; tries < 3 && !started && ho != INVALID_HANDLE_VALUE && he != INVALID_HANDLE_VALUE;
             tries++) {
            started = CreateProcessA(bin, cmd, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi) != 0;
            if (!started) {
                fprintf(stderr, "test_cli: cannot run %s: Windows error %lu\n", bin, (unsigned long)GetLastError());
                Sleep(500);
            }
        }
        if (started) {
            DWORD code = 1;
            WaitForSingleObject(pi.hProcess, INFINITE);
            GetExitCodeProcess(pi.hProcess, &code);
            r.status = (int)code;
            CloseHandle(pi.hProcess);
            CloseHandle(pi.hThread);
        }
        if (ho != INVALID_HANDLE_VALUE)
            CloseHandle(ho);
        if (he != INVALID_HANDLE_VALUE)
            CloseHandle(he);
        r.out = slurp_file(outp, &r.out_len);
        r.err = slurp_file(errp, &r.err_len);
        DeleteFileA(outp);
        DeleteFileA(errp);
    }
    if (!r.out)
        r.out = calloc(1, 1);
    if (!r.err)
        r.err = calloc(1, 1);
    return r;
}
#else
static char *slurp_fd(int fd, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    ssize_t got;
    while ((got = read(fd, b + n, cap - n - 1)) > 0) {
        n += (size_t)got;
        if (n + 1 == cap)
            b = realloc(b, cap *= 2);
    }
    b[n] = 0;
    *len = n;
    return b;
}

/* Run the binary with args (NULL-terminated); stderr goes to a temp file
 * so that neither pipe can fill up and block. */
static result run(const char *const *args)
{
    result r = {0, NULL, NULL, 0, 0};
    const char *bin = getenv("NIBBLE_BIN");
    char errpath[] = "/tmp/nibble-cli-err-XXXXXX";
    int efd = mkstemp(errpath);
    int p[2];
    if (!bin || efd < 0 || pipe(p)) {
        r.status = -1;
        r.out = calloc(1, 1);
        r.err = calloc(1, 1);
        return r;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        dup2(efd, 2);
        close(p[0]);
        char *argv[64];
        int n = 0;
        argv[n++] = (char *)bin;
        for (int i = 0; args[i] && n < 63; i++)
            argv[n++] = (char *)args[i];
        argv[n] = NULL;
        execv(bin, argv);
        _exit(127);
    }
    close(p[1]);
    r.out = slurp_fd(p[0], &r.out_len);
    close(p[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    lseek(efd, 0, SEEK_SET);
    r.err = slurp_fd(efd, &r.err_len);
    close(efd);
    unlink(errpath);
    return r;
}

#endif

static void done(result *r)
{
    free(r->out);
    free(r->err);
}

static char model[4096];

static void check_golden(void)
{
    char buf[4096];
    if (!tu_shared("golden/stories260K-greedy.jsonl", buf))
        return;
    char *all = tu_read(buf, NULL);
    int cases = 0;
    for (char *line = all; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        char *prompt = js_string(js_find(line, "prompt"), NULL);
        char *want = js_string(js_find(line, "continuation"), NULL);
        const char *np = js_find(line, "n_predict");
        if (prompt && want && np) {
            char n[16];
            snprintf(n, sizeof n, "%d", atoi(np));
            const char *args[] = {"run", "-m", model, "-p", prompt, "-n", n, "--temp", "0", "-t", "1", NULL};
            result r = run(args);
            CHECKF(r.status == 0, "run '%s' exited %d: %s", prompt, r.status, r.err);
            CHECKF(r.out && strcmp(r.out, want) == 0, "prompt '%s':\n got: [%s]\nwant: [%s]", prompt, r.out, want);
            CHECKF(r.err && strstr(r.err, "tok/s"), "no speed figures on stderr: %s", r.err);
            done(&r);
            cases++;
        }
        free(prompt);
        free(want);
        line = nl ? nl + 1 : NULL;
    }
    CHECKF(cases == 6, "%d golden cases", cases);
    free(all);
}

/* nibble bench --json on the embedded model: a load line with open and
 * first-token times, and pp/tg lines whose resident set was read and
 * stays within file + KV cache + 64 MB. */
static void check_bench(void)
{
    const char *args[] = {"bench", "-m", model, "-p", "16", "-n", "8", "-r", "1", "-t", "1", "--json", NULL};
    result r = run(args);
    CHECKF(r.status == 0, "bench exited %d: %s", r.status, r.err);
    int loads = 0, tests = 0;
    for (char *line = r.out; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        const char *t = js_find(line, "test");
        if (t && !strncmp(t, "\"load\"", 6)) {
            const char *o = js_find(line, "open_ms"), *f = js_find(line, "first_token_ms");
            CHECKF(o && f && atof(o) > 0 && atof(f) >= atof(o), "load line: %s", line);
            loads++;
        } else if (t) {
            const char *rs = js_find(line, "rss_bytes"), *b = js_find(line, "rss_budget_bytes");
            const char *kv = js_find(line, "kv_bytes");
            CHECKF(rs && b && kv && atof(kv) > 0, "no memory figures: %s", line);
#if defined(__linux__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
            /* (a sanitizer's shadow memory and redzones are not nibble's:
             * under one the resident set says nothing about the budget) */
            CHECKF(rs && b && atof(rs) > 0 && atof(rs) <= atof(b), "resident set over budget: %s", line);
#endif
            tests++;
        }
        line = nl ? nl + 1 : NULL;
    }
    CHECKF(loads == 1 && tests == 2, "bench printed %d load and %d test lines:\n%s", loads, tests, r.out);
    done(&r);
}

/* -d: both tests after a prefilled context; the depth shows in the JSON
 * and the table; a negative depth is refused with the reason. */
static void check_bench_depth(void)
{
    const char *args[] = {"bench", "-m", model, "-p", "8", "-n", "4", "-d", "40", "-r", "1", "-t", "1", "--json",
                          "--no-load", NULL};
    result r = run(args);
    CHECKF(r.status == 0, "bench -d exited %d: %s", r.status, r.err);
    int tests = 0;
    for (char *line = r.out; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        const char *d = js_find(line, "depth"), *t = js_find(line, "tps");
        CHECKF(d && atoi(d) == 40 && t && atof(t) > 0, "bench -d 40 line: %s", line);
        tests++;
        line = nl ? nl + 1 : NULL;
    }
    CHECKF(tests == 2, "bench -d printed %d test lines", tests);
    done(&r);
    const char *table[] = {"bench", "-m", model, "-p", "0", "-n", "4", "-d", "16", "-r", "1", "-t", "1",
                           "--no-load", NULL};
    r = run(table);
    CHECKF(r.status == 0 && r.out && strstr(r.out, "| tg4 @ d16 |"), "bench -d table:\n%s", r.out);
    done(&r);
    const char *bad[] = {"bench", "-m", model, "-d", "-5", "--no-load", NULL};
    r = run(bad);
    CHECKF(r.status == 2 && r.err && strstr(r.err, "-d"), "bench -d -5: status %d, %s", r.status, r.err);
    done(&r);
}

/* --peak: a peak line per kernel set and thread count (the int8 and
 * float instruction rates, the q8_0 kernel's and the model type's, the
 * multiply-adds per prompt token in the matrices and in attention at the
 * depth), and the pp row measured against it, in JSON and in the table.
 * The embedded model is f32, so its matrices' ceiling is its own
 * kernel's; its f16 cache makes attention's sums float ones. */
static void check_bench_peak(void)
{
    const char *args[] = {"bench", "-m", model, "-p", "16", "-n", "0", "-d", "8", "-r", "1", "-t", "1", "--json",
                          "--no-load", "--peak", "--kernel", "scalar", NULL};
    result r = run(args);
    CHECKF(r.status == 0, "bench --peak exited %d: %s", r.status, r.err);
    int peaks = 0, pps = 0;
    for (char *line = r.out; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        const char *t = js_find(line, "test");
        if (t && !strncmp(t, "\"peak\"", 6)) {
            const char *p = js_find(line, "peak_gmacs"), *q = js_find(line, "q8_0_gmacs"), *o = js_find(line, "type_gmacs");
            const char *mt = js_find(line, "macs_per_token"), *rt = js_find(line, "roofline_tps");
            CHECKF(p && q && o && mt && rt && atof(p) > 0 && atof(q) > 0 && atof(o) > 0 && atof(rt) > 0,
                   "peak line: %s", line);
            /* the embedded model: 5 layers of q, o 64x64; k, v 64x32; gate, up, down 64x172 (its norms,
             * 704 values, are counted too); the 512-token embedding and output matrices are not */
            long long want = 5LL * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 172);
            CHECKF(mt && llabs(atoll(mt) - want) <= want / 100, "multiply-adds per token (want %lld): %s", want, line);
            /* attention: 5 layers of 8 heads of 8 values against 8 + (1 + ... + 16) / 16 = 16.5 positions on
             * average; the roofline is the time of both at their peaks, the V sums as many as the scores */
            const char *f = js_find(line, "fma_gmacs"), *am = js_find(line, "attn_macs_per_token");
            CHECKF(f && am && atof(f) > 0 && atoll(am) == 5 * 8 * 8 * 33 / 2, "attention's multiply-adds: %s", line);
            if (f && am && o && mt && rt && atof(f) > 0 && atof(o) > 0) {
                double roof = 1e9 / (atof(mt) / atof(o) + 2 * atof(am) / atof(f));
                CHECKF(fabs(atof(rt) / roof - 1) < 0.02, "roofline %s, want %.1f: %s", rt, roof, line);
            }
            peaks++;
        } else if (t && !strncmp(t, "\"pp16\"", 6)) {
            const char *rt = js_find(line, "roofline_tps"), *p = js_find(line, "peak_gmacs");
            CHECKF(rt && p && atof(rt) > 0 && atof(p) > 0, "pp line without its peak: %s", line);
            pps++;
        }
        line = nl ? nl + 1 : NULL;
    }
    CHECKF(peaks == 1 && pps == 1, "bench --peak printed %d peak and %d pp lines:\n%s", peaks, pps, r.out);
    done(&r);
    const char *table[] = {"bench", "-m", model, "-p", "16", "-n", "0", "-r", "1", "-t", "1", "--no-load", "--peak",
                           NULL};
    r = run(table);
    CHECKF(r.status == 0 && strstr(r.out, " peak | ") && strstr(r.err, "peak, ") && strstr(r.err, " in attention's "),
           "bench --peak table:\n%s%s",
           r.out, r.err);
    done(&r);
}

/* Without -m the binary finds the embedded model next to itself. */
static void check_default_model(void)
{
    char buf[4096];
    if (!tu_shared("models/stories260K.greedy256.txt", buf))
        return;
    char *txt = tu_read(buf, NULL);
    char *text = txt;
    for (int i = 0; i < 3 && text; i++)
        text = strchr(text, '\n') ? strchr(text, '\n') + 1 : NULL;
    const char *args[] = {"run", "-n", "256", "--temp", "0", "-q", NULL};
    result r = run(args);
    CHECKF(r.status == 0, "default model run exited %d: %s", r.status, r.err);
    /* the file strips the first piece's leading space and ends with a newline */
    const char *got = r.out && r.out[0] == ' ' ? r.out + 1 : r.out;
    size_t wl = text ? strlen(text) : 0;
    while (wl && text[wl - 1] == '\n')
        wl--;
    CHECKF(got && text && strlen(got) == wl && memcmp(got, text, wl) == 0, "greedy 256 from BOS differs:\n%s", got);
    done(&r);
    free(txt);
}

static void expect_fail(const char *what, const char *const *args, int status, const char *needle)
{
    result r = run(args);
    CHECKF(r.status == status, "%s: exit %d, want %d (stderr: %s)", what, r.status, status, r.err);
    CHECKF(strstr(r.err, needle), "%s: stderr lacks '%s': %s", what, needle, r.err);
    /* one line, not a cascade */
    int lines = 0;
    for (const char *p = r.err; p && *p; p++)
        lines += *p == '\n';
    CHECKF(status == 2 || lines == 1, "%s: %d lines on stderr: %s", what, lines, r.err);
    CHECKF(r.out_len == 0, "%s: printed to stdout: %s", what, r.out);
    done(&r);
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
}

static void check_errors(void)
{
    char dir[] = "/tmp/nibble-cli-XXXXXX";
    CHECK(tu_mkdtemp(dir) != NULL);
    char missing[256], text[256], arch[256], trunc[256];
    snprintf(missing, sizeof missing, "%s/none.gguf", dir);
    snprintf(text, sizeof text, "%s/notes.txt", dir);
    snprintf(arch, sizeof arch, "%s/mamba.gguf", dir);
    snprintf(trunc, sizeof trunc, "%s/trunc.gguf", dir);
    write_file(text, "hello, this is not a model\n", 27);
    eng_gguf_writer *w = eng_gguf_writer_new();
    eng_gguf_writer_str(w, "general.architecture", "mamba");
    float v[32] = {0};
    uint64_t ne[1] = {32};
    eng_gguf_writer_tensor(w, "token_embd.weight", 0, 1, ne, v);
    eng_err e;
    CHECK(eng_gguf_writer_save(w, arch, &e) == 0);
    eng_gguf_writer_free(w);
    size_t n;
    char *whole = tu_read(model, &n);
    write_file(trunc, whole, n / 2);
    free(whole);

    const char *a1[] = {"run", "-m", missing, "-p", "x", NULL};
    expect_fail("missing file", a1, 1, "no such file");
    const char *a2[] = {"run", "-m", dir, "-p", "x", NULL};
    expect_fail("directory", a2, 1, "directory");
    const char *a3[] = {"run", "-m", text, "-p", "x", NULL};
    expect_fail("text file", a3, 1, "not a GGUF file");
    const char *a4[] = {"run", "-m", arch, "-p", "x", NULL};
    expect_fail("unknown architecture", a4, 1, "unsupported architecture 'mamba'");
    const char *a5[] = {"run", "-m", trunc, "-p", "x", NULL};
    expect_fail("truncated file", a5, 1, "past the end of the file");
    const char *a6[] = {"info", missing, NULL};
    expect_fail("info of a missing file", a6, 1, "no such file");
    const char *a7[] = {"run", "--frobnicate", NULL};
    expect_fail("unknown option", a7, 2, "unknown option");
    const char *a8[] = {"run", "-m", model, "--kernel", "nosuch", NULL};
    expect_fail("unknown kernel", a8, 1, "unknown kernel set");
#ifndef _WIN32 /* a Windows command line is UTF-16: these bytes cannot pass */
    const char *a9[] = {"run", "-m", model, "-p", "caf\xc3", NULL};
    expect_fail("invalid UTF-8 prompt", a9, 1, "not valid UTF-8");
#endif
    write_file(text, "caf\xc3", 4);
    const char *a9f[] = {"run", "-m", model, "-f", text, NULL};
    expect_fail("invalid UTF-8 prompt file", a9f, 1, "not valid UTF-8");
    const char *a10[] = {"run", "-m", model, "--top-p", "2", NULL};
    expect_fail("bad sampler value", a10, 2, "top-p");
    const char *a11[] = {"frobnicate", NULL};
    expect_fail("unknown command", a11, 2, "unknown command");
    const char *a12[] = {"ppl", "-m", model, "-f", text, "--chunks", "0", NULL};
    expect_fail("ppl --chunks 0", a12, 2, "--chunks 0: expected a whole number in 1..");
    const char *a13[] = {"quant-sweep", "-m", model, "-f", text, "--calib-tokens", "many", NULL};
    expect_fail("quant-sweep --calib-tokens many", a13, 2, "--calib-tokens many: expected a whole number");
    const char *a13b[] = {"quant-sweep", "-m", model, "-f", text, "--methods", "rtn,best", NULL};
    expect_fail("quant-sweep --methods rtn,best", a13b, 2, "--methods rtn,best: expected rtn, awq, gptq, awq+gptq");
    const char *a13c[] = {"quant-sweep", "-m", model, "-f", text, "--methods", "gptq", NULL};
    expect_fail("quant-sweep --methods gptq without --calib", a13c, 2, "awq and gptq need --calib");
    const char *a14[] = {"ppl", "-m", model, "-f", text, "--kl-base", NULL};
    expect_fail("ppl --kl-base without a value", a14, 2, "--kl-base : needs a value");
    remove(missing);
    remove(text);
    remove(arch);
    remove(trunc);
    rmdir(dir);
}

/* Every subcommand parses its flags with the one parser (app/args.c):
 * an unknown flag and a flag without its value give the same one-line
 * message, naming the command, with exit status 2 and nothing on stdout. */
/* -ctk/-ctv (issue 24): run, ppl, bench and info take the cache types;
 * a bad name is refused naming the allowed ones; bench measures every
 * pair and its JSON names them, with the quantized pair's KV bytes the
 * blocks' share of f16's (34 and 18 bytes a block of 32 against 64). */
static void check_kv_cache(void)
{
    const char *a1[] = {"run", "-m", model, "-n", "24", "--temp", "0", "-ctk", "q8_0", "-ctv", "q4_0", "-q", NULL};
    result r = run(a1);
    CHECKF(r.status == 0 && r.out_len > 20, "run -ctk q8_0 -ctv q4_0: %d %s%s", r.status, r.out, r.err);
    done(&r);
    const char *bad[] = {"run", "-m", model, "--cache-type-k", "q5_1", NULL};
    expect_fail("run --cache-type-k q5_1", bad, 2,
                "nibble run: --cache-type-k q5_1: unknown cache type (allowed: f16, q8_0, q4_0)");
    const char *badv[] = {"chat", "-ctv", "f32", NULL};
    expect_fail("chat -ctv f32", badv, 2, "nibble chat: -ctv f32: unknown cache type (allowed: f16, q8_0, q4_0)");
    const char *badb[] = {"bench", "-m", model, "-ctk", "f16,q5", NULL};
    expect_fail("bench -ctk f16,q5", badb, 2, "nibble bench: -ctk f16,q5: expected cache types like f16,q8_0");
    const char *a2[] = {"bench", "-m", model, "-p", "8", "-n", "4", "-r", "1", "-t", "1", "--json", "--no-load",
                        "-ctk", "f16,q8_0", "-ctv", "q4_0", NULL};
    r = run(a2);
    CHECKF(r.status == 0, "bench -ctk f16,q8_0 -ctv q4_0 exited %d: %s", r.status, r.err);
    int rows = 0;
    double kv[2] = {0, 0};
    for (char *line = r.out; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        const char *tk = js_find(line, "type_k"), *tv = js_find(line, "type_v"), *b = js_find(line, "kv_bytes");
        int q8 = tk && !strncmp(tk, "\"q8_0\"", 6);
        CHECKF(tk && tv && b && (q8 || !strncmp(tk, "\"f16\"", 5)) && !strncmp(tv, "\"q4_0\"", 6),
               "bench cache line: %s", line);
        if (b)
            kv[q8] = atof(b);
        rows++;
        line = nl ? nl + 1 : NULL;
    }
    CHECKF(rows == 4, "bench printed %d rows for two cache pairs:\n%s", rows, r.out);
    /* K f16 + V q4_0 = (64 + 18) / 128 of f16's; K q8_0 + V q4_0 = (34 + 18) / 128 */
    CHECKF(kv[0] > 0 && kv[1] > 0 && fabs(kv[1] / kv[0] - 52.0 / 82.0) < 1e-9, "kv bytes %g %g", kv[0], kv[1]);
    done(&r);
    const char *a3[] = {"info", model, "-ctk", "q8_0", NULL};
    r = run(a3);
    CHECKF(r.status == 0 && strstr(r.out, "KV cache, context 2048: f16 1.25 MB, q8_0 0.66 MB, q4_0 0.35 MB") &&
               strstr(r.out, "KV cache, context 2048, K q8_0, V f16: 0.96 MB"),
           "info -ctk q8_0: %s%s", r.out, r.err);
    done(&r);
    char tbuf[4096];
    const char *text = tu_shared("text/wiki.test.raw", tbuf);
    if (text) {
        const char *a4[] = {"ppl", "-m", model, "-f", text, "-c", "128", "--chunks", "2", "-t", "1", "--json", "-q",
                            "-ctk", "q4_0", "-ctv", "q8_0", NULL};
        r = run(a4);
        CHECKF(r.status == 0 && strstr(r.out, "\"type_k\": \"q4_0\", \"type_v\": \"q8_0\""), "ppl -ctk: %d %s%s",
               r.status, r.out, r.err);
        done(&r);
    }
}

static void check_flag_errors(void)
{
    static const struct {
        const char *cmd, *flag; /* a flag of cmd that takes a value */
    } cmds[] = {
        {"run", "-p"},          {"info", "-m"},     {"tokenize", "-p"},   {"chat", "--system"},
        {"bench", "-p"},        {"synth", "--shape"}, {"score", "--ids"}, {"quantize", "--awq"},
        {"ppl", "--kl-base"},   {"quant-sweep", "--types"}, {"export-ollama", "--name"},
        {"imatrix", "-o"},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char what[96], want[160];
        const char *unknown[] = {cmds[i].cmd, "--frobnicate", NULL};
        snprintf(what, sizeof what, "%s --frobnicate", cmds[i].cmd);
        snprintf(want, sizeof want, "nibble %s: --frobnicate : unknown option (see 'nibble %s --help')\n",
                 cmds[i].cmd, cmds[i].cmd);
        expect_fail(what, unknown, 2, want);
        const char *missing[] = {cmds[i].cmd, cmds[i].flag, NULL};
        snprintf(what, sizeof what, "%s %s without a value", cmds[i].cmd, cmds[i].flag);
        snprintf(want, sizeof want, "nibble %s: %s : needs a value (see 'nibble %s --help')\n", cmds[i].cmd,
                 cmds[i].flag, cmds[i].cmd);
        expect_fail(what, missing, 2, want);
        const char *help[] = {cmds[i].cmd, "-h", NULL};
        result r = run(help);
        CHECKF(r.status == 0 && r.out && strstr(r.out, "usage") && r.err_len == 0, "%s -h: %d %s", cmds[i].cmd,
               r.status, r.err);
        done(&r);
    }
    /* without a command the flags are the chat's */
    const char *bare[] = {"--frobnicate", NULL};
    expect_fail("--frobnicate", bare, 2, "nibble chat: --frobnicate : unknown option");
    /* a bad number is refused by the same parser, with the flag's range */
    const char *reps[] = {"bench", "-r", "0", NULL};
    expect_fail("bench -r 0", reps, 2, "nibble bench: -r 0: expected a whole number in 1..");
    const char *seed[] = {"synth", "--seed", "x", NULL};
    expect_fail("synth --seed x", seed, 2, "nibble synth: --seed x: expected a non-negative integer");
    const char *extra[] = {"quantize", "a", "b", "c", "d", NULL};
    expect_fail("quantize with 4 arguments", extra, 2, "nibble quantize: d : unexpected argument");
}

static void check_tools(void)
{
    const char *a1[] = {"tokenize", "-m", model, "-p", "Once upon a time", NULL};
    result r = run(a1);
    CHECKF(r.status == 0 && r.out && strcmp(r.out, "1 403 407 261 378\n") == 0, "tokenize: %s%s", r.out, r.err);
    done(&r);
    const char *a2[] = {"info", model, NULL};
    r = run(a2);
    CHECKF(r.status == 0 && r.out && strstr(r.out, "parameters: 292800") && strstr(r.out, "runnable: yes"),
           "info: %s%s", r.out, r.err);
    done(&r);
    const char *a3[] = {"--help", NULL};
    r = run(a3);
    CHECK(r.status == 0 && r.out && strstr(r.out, "usage"));
    done(&r);
    const char *a4[] = {"--version", NULL};
    r = run(a4);
    CHECK(r.status == 0 && r.out && strncmp(r.out, "nibble ", 7) == 0);
    done(&r);
    const char *cmds[] = {"run", "info", "tokenize", "chat"};
    for (int i = 0; i < 4; i++) {
        const char *a[] = {cmds[i], "--help", NULL};
        r = run(a);
        CHECKF(r.status == 0 && r.out && strstr(r.out, "usage"), "%s --help", cmds[i]);
        done(&r);
    }
}

/* nibble synth on the low-bit targets: each writes its file type, plans
 * tensors as nibble quantize does (the output q6_k; q3_k_s and q2_k keep
 * q3_k / q2_k where rows fit 256; q3_k_m widens attn_v), and runs */
static void check_synth_lowbit(void)
{
    static const struct {
        const char *type, *ftype, *want, *also;
    } c[] = {
        {"q3_k_s", "u32     11", "q3_k", "q6_k"},
        {"q2_k", "u32     10", "q2_k", "q3_k"},
        {"q3_k_m", "u32     12", "q3_k", "q5_k"},
        {"iq4_xs", "u32     30", "iq4_xs", "q6_k"},
    };
    char dir[] = "/tmp/nibble-cli-synth-XXXXXX", out[4200];
    if (!tu_mkdtemp(dir))
        return;
    snprintf(out, sizeof out, "%s/s.gguf", dir);
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        const char *a[] = {"synth", "--shape", "tiny256", "--type", c[i].type, out, NULL};
        result r = run(a);
        CHECKF(r.status == 0, "synth --type %s: %s", c[i].type, r.err);
        done(&r);
        const char *b[] = {"info", out, NULL};
        r = run(b);
        CHECKF(r.status == 0 && r.out && strstr(r.out, c[i].ftype) && strstr(r.out, "runnable: yes"),
               "info of synth %s: %s%s", c[i].type, r.out, r.err);
        char want[64], also[64];
        snprintf(want, sizeof want, " %s ", c[i].want);
        snprintf(also, sizeof also, " %s ", c[i].also);
        CHECKF(r.out && strstr(r.out, want) && strstr(r.out, also), "synth %s: no %s and %s tensors", c[i].type,
               c[i].want, c[i].also);
        done(&r);
        const char *g[] = {"run", "-m", out, "-p", "a", "-n", "4", "--temp", "0", NULL};
        r = run(g);
        CHECKF(r.status == 0, "run on synth %s: %s", c[i].type, r.err);
        done(&r);
    }
    remove(out);
    rmdir(dir);
}

/* nibble prune: its usage errors, and a run with --then that gives a
 * smaller model nibble runs */
static void check_prune(void)
{
    const char *h[] = {"prune", "--help", NULL};
    result r = run(h);
    CHECKF(r.status == 0 && r.out && strstr(r.out, "--max-per-layer"), "prune --help: %s", r.err);
    done(&r);
    const char *a1[] = {"prune", model, "/tmp/x.gguf", "--heads", "0.2", NULL};
    expect_fail("prune --heads without --calib", a1, 2, "needs --calib");
    const char *a2[] = {"prune", model, "/tmp/x.gguf", "--neurons", "1.5", NULL};
    expect_fail("prune --neurons 1.5", a2, 2, "between 0 and 1");
    const char *a3[] = {"prune", model, "/tmp/x.gguf", "--protect", "most", NULL};
    expect_fail("prune --protect most", a3, 2, "pagerank or none");
    const char *a4[] = {"prune", model, "/tmp/x.gguf", "--neurons", "0.2", "--then", "q9", NULL};
    expect_fail("prune --then q9", a4, 2, "unknown type");
    const char *m1[] = {"prune", model, "/tmp/x.gguf", "--neurons", "0.2", "--method", "wprod,magnitude", NULL};
    expect_fail("prune --method magnitude", m1, 2, "--method magnitude: unknown method (heads: vnorm, weight");
    const char *m2[] = {"prune", model, "/tmp/x.gguf", "--heads", "0.2", "--method", "weight,vnorm", NULL};
    expect_fail("prune --method weight,vnorm", m2, 2, "more than one head method");
    const char *m3[] = {"prune", model, "/tmp/x.gguf", "--neurons", "0.2", "--method", "act", NULL};
    expect_fail("prune --method act without --calib", m3, 2, "act: needs --calib");
    char dir[] = "/tmp/nibble-cli-prune-XXXXXX", out[4200];
    if (!tu_mkdtemp(dir))
        return;
    snprintf(out, sizeof out, "%s/p.gguf", dir);
    const char *a5[] = {"prune", model, out, "--neurons", "0.25", "--then", "q8_0", "-q", NULL};
    r = run(a5);
    CHECKF(r.status == 0 && strstr(r.err, "FFN neurons 860 -> 645") && strstr(r.err, "q8_0"), "prune --then: %s",
           r.err);
    done(&r);
    const char *a6[] = {"info", out, NULL};
    r = run(a6);
    CHECKF(r.status == 0 && r.out && strstr(r.out, "\"deci\"") && strstr(r.out, "nibble.prune.neurons") &&
               strstr(r.out, "q8_0") && strstr(r.out, "runnable: yes"),
           "info of the pruned model: %s%s", r.out, r.err);
    done(&r);
    remove(out);
    /* prune, then q4_0 with AWQ on a calibration text, in one run */
    char cal[4200];
    snprintf(cal, sizeof cal, "%s/calib.txt", dir);
    {
        static const char ct[] = "Tom had a toy car. He liked to push it around the house. His mom said, \"Tom, be "
                                 "careful!\" But Tom did not listen, and the car went under the bed. He was sad, but "
                                 "his sister helped him. They looked under the bed together and found the car.\n";
        write_file(cal, ct, sizeof ct - 1);
    }
    const char *a11[] = {"prune", model, out, "--neurons", "0.25", "--then", "q4_0", "--awq", cal, "-q", NULL};
    r = run(a11);
    CHECKF(r.status == 0 && strstr(r.err, "FFN neurons 860 -> 645") && strstr(r.err, "q4_0 (AWQ)"),
           "prune --then q4_0 --awq: %s", r.err);
    done(&r);
    r = run(a6);
    CHECKF(r.status == 0 && r.out && strstr(r.out, "nibble.prune.neurons") && strstr(r.out, "\"awq\"") &&
               strstr(r.out, "calib.txt") && strstr(r.out, "q4_0") && strstr(r.out, "runnable: yes"),
           "info of the pruned AWQ model: %s%s", r.out, r.err);
    done(&r);
    remove(out);
    remove(cal);
    /* heads by the weight score need no calibration; the method is recorded */
    const char *a9[] = {"prune", model, out, "--heads", "0.2", "--method", "weight", "-q", NULL};
    r = run(a9);
    CHECKF(r.status == 0 && strstr(r.err, "KV groups 20 -> 16") && strstr(r.err, "scores: weight"), "prune --method weight: %s",
           r.err);
    done(&r);
    const char *a10[] = {"info", out, NULL};
    r = run(a10);
    CHECKF(r.status == 0 && r.out && strstr(r.out, "nibble.prune.head_method") && strstr(r.out, "\"weight\""),
           "info of the weight-pruned model: %s%s", r.out, r.err);
    done(&r);
    remove(out);
    /* nibble report: -o required; a bad results file is named with its line */
    snprintf(out, sizeof out, "%s/bad.json", dir);
    {
        static const char bad_json[] = "{\"schema\": \"nibble-sweep/1\", \"rows\": [}\n";
        write_file(out, bad_json, sizeof bad_json - 1);
    }
    const char *a7[] = {"report", out, NULL};
    expect_fail("report without -o", a7, 2, "-o is required");
    const char *a8[] = {"report", out, "-o", "/tmp/nibble-never.html", NULL};
    expect_fail("report of a bad file", a8, 1, "bad.json: line 1");
    remove(out);
    rmdir(dir);
}

/* quant-sweep's combined rows: pruned, then quantized to q4_0 with AWQ in
 * the same run, beside the pruned-only and quantized-only rows, in the
 * results file and on the dashboard's pruning Pareto chart */
static void check_sweep_combined(void)
{
    char dir[] = "/tmp/nibble-cli-sweep-XXXXXX", text[4200], cal[4200], json[4200], html[4200], out[4200];
    if (!tu_mkdtemp(dir)) {
        CHECK(0);
        return;
    }
    snprintf(text, sizeof text, "%s/text.txt", dir);
    snprintf(cal, sizeof cal, "%s/calib.txt", dir);
    snprintf(json, sizeof json, "%s/r.json", dir);
    snprintf(html, sizeof html, "%s/r.html", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    static const char story[] =
        "Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine. One day, "
        "she saw a big red ball in the park. She ran to get it, but a dog got there first. The dog and Lily played "
        "with the ball all day. They were very happy and became good friends.\n";
    static const char calib_text[] =
        "Tom had a toy car. He liked to push it around the house. His mom said, \"Tom, be careful!\" But Tom did not "
        "listen, and the car went under the bed. He was sad, but his sister helped him. They looked under the bed "
        "together and found the car next to an old sock. Tom said thank you.\n";
    char buf[sizeof story * 6];
    for (int i = 0; i < 6; i++)
        memcpy(buf + i * (sizeof story - 1), story, sizeof story - 1);
    write_file(text, buf, 6 * (sizeof story - 1));
    write_file(cal, calib_text, sizeof calib_text - 1);
    result r = run((const char *const[]){"quant-sweep", "-m", model, "-f", text, "--calib", cal, "-c", "64",
                                         "--chunks", "2", "--types", "q4_0", "--prune-heads", "0.2",
                                         "--prune-neurons", "0.3", "--prune-then", "q4_0", "--calib-tokens", "64",
                                         "--json", json, "--html", html, "--out", out, "-q", NULL});
    CHECKF(r.status == 0, "quant-sweep with --prune-then: exit %d: %s", r.status, r.err);
    done(&r);
    size_t n = 0, hn = 0;
    char *j = tu_read(json, &n), *h = tu_read(html, &hn);
    eng_results res = {0};
    eng_err e = {{0}};
    CHECKF(j && eng_results_parse(&res, j, n, json, &e) == 0, "the sweep's results: %s", e.msg);
    const eng_result_row *base = NULL, *nq = NULL, *np = NULL, *hq = NULL, *hp = NULL, *q = NULL;
    int n_gptq = 0;
    for (int i = 0; i < res.n_rows; i++) {
        const eng_result_row *w = &res.rows[i];
        if (!strcmp(w->kind, "base"))
            base = w;
        else if (!strcmp(w->name, "neurons 30%"))
            np = w;
        else if (!strcmp(w->name, "neurons 30% + q4_0"))
            nq = w;
        else if (!strcmp(w->name, "heads 20%"))
            hp = w;
        else if (!strcmp(w->name, "heads 20% + q4_0"))
            hq = w;
        else if (!strcmp(w->kind, "quant") && !strcmp(w->type, "q4_0") && !strcmp(w->method, "awq"))
            q = w;
        else if (!strcmp(w->kind, "quant") && !strcmp(w->type, "q4_0") &&
                 (!strcmp(w->method, "gptq") || !strcmp(w->method, "awq+gptq")))
            n_gptq++;
    }
    /* q4_0 has four rows with --calib: rtn, awq, gptq, awq+gptq */
    CHECKF(base && np && nq && hp && hq && q && n_gptq == 2 && res.n_rows == 9,
           "sweep rows: %d, base %d, neurons %d+%d, heads %d+%d, q4_0 awq %d, gptq %d", res.n_rows, !!base, !!np,
           !!nq, !!hp, !!hq, !!q, n_gptq);
    char mdp[4300];
    snprintf(mdp, sizeof mdp, "%s/sweep.md", out);
    char *md = tu_read(mdp, NULL);
    CHECKF(md && strstr(md, "| q4_0 | GPTQ |") && strstr(md, "| q4_0 | AWQ+GPTQ |") &&
           strstr(md, "Least KL for the size") && strstr(md, "| bits/weight up to |"),
           "sweep.md: %s", md ? md : "(none)");
    free(md);
    if (base && np && nq && hp && hq && q) {
        CHECKF(!strcmp(nq->kind, "prune") && !strcmp(nq->type, "q4_0") && !strcmp(nq->method, "awq") &&
                   nq->neurons > 0.29 && nq->neurons < 0.31 && nq->heads == 0,
               "the combined row: %s %s %s %g %g", nq->kind, nq->type, nq->method, nq->heads, nq->neurons);
        CHECKF(nq->bytes < np->bytes && nq->bytes < q->bytes && nq->params < base->params,
               "neurons 30%% + q4_0: %.0f bytes, pruned alone %.0f, q4_0 alone %.0f", nq->bytes, np->bytes, q->bytes);
        CHECKF(hq->bytes < hp->bytes && !strcmp(hq->method, "awq") && hq->heads > 0.19 && hq->heads < 0.21,
               "heads 20%% + q4_0: %.0f bytes, pruned alone %.0f", hq->bytes, hp->bytes);
        const eng_result_row *c[] = {nq, hq};
        for (int i = 0; i < 2; i++)
            CHECKF(isfinite(c[i]->ppl) && c[i]->ppl > 1 && isfinite(c[i]->kl) && c[i]->kl > 0 && c[i]->tok_s > 0,
                   "%s: ppl %g, KL %g, %g tok/s", c[i]->name, c[i]->ppl, c[i]->kl, c[i]->tok_s);
    }
    /* on the pruning panel's Pareto chart, beside the pruned-only and quantized-only points */
    const char *panel = h ? strstr(h, "Pruned and quantized on one Pareto chart") : NULL;
    const char *end = panel ? strstr(panel, "</svg>") : NULL;
    int seen = 0;
    static const char *const names[] = {">neurons 30% + q4_0 awq<", ">heads 20% + q4_0 awq<", ">neurons 30%<",
                                        ">q4_0 awq<", ">q4_0<"};
    for (size_t i = 0; end && i < sizeof names / sizeof *names; i++) {
        const char *at = strstr(panel, names[i]);
        seen += at && at < end;
    }
    CHECKF(panel && end && seen == 5, "the pruning Pareto chart shows %d of the 5 points", seen);
    eng_results_free(&res);
    free(j);
    free(h);
    tu_rmtree(dir);
}

/* The i-quants below 4 bits through the command line: quantize refuses
 * iq1_s on a model whose rows fit without --imatrix and writes it with
 * one (from nibble imatrix); quant-sweep skips iq2_xxs without
 * --imatrix, names a missing file, and marks its rows weighted with one. */
static void check_iquants_cli(void)
{
    char dir[] = "/tmp/nibble-cli-iq-XXXXXX", text[4200], t256[4200], im[4200], out[4200], sw[4200], md[4300];
    if (!tu_mkdtemp(dir)) {
        CHECK(0);
        return;
    }
    snprintf(text, sizeof text, "%s/text.txt", dir);
    snprintf(t256, sizeof t256, "%s/t256.gguf", dir);
    snprintf(im, sizeof im, "%s/im.gguf", dir);
    snprintf(out, sizeof out, "%s/q.gguf", dir);
    snprintf(sw, sizeof sw, "%s/sw", dir);
    static const char story[] =
        "Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine. One day, "
        "she saw a big red ball in the park. She ran to get it, but a dog got there first.\n";
    char buf[sizeof story * 8];
    for (int i = 0; i < 8; i++)
        memcpy(buf + i * (sizeof story - 1), story, sizeof story - 1);
    write_file(text, buf, 8 * (sizeof story - 1));
    result r = run((const char *const[]){"synth", "--shape", "tiny256", "--type", "f32", t256, NULL});
    CHECKF(r.status == 0, "synth: %s", r.err);
    done(&r);
    expect_fail("quantize iq1_s without --imatrix", (const char *const[]){"quantize", "-q", t256, out, "iq1_s", NULL},
                1, "need an importance matrix: give --imatrix FILE");
    r = run((const char *const[]){"imatrix", "-m", t256, "-f", text, "-o", im, "-c", "64", "--chunks", "2", "-q",
                                  NULL});
    CHECKF(r.status == 0, "imatrix: %s", r.err);
    done(&r);
    r = run((const char *const[]){"quantize", "-q", "--imatrix", im, t256, out, "iq1_s", NULL});
    CHECKF(r.status == 0 && strstr(r.err, "iq1_s x"), "quantize iq1_s --imatrix: exit %d: %s", r.status, r.err);
    done(&r);
    r = run((const char *const[]){"info", out, NULL});
    CHECKF(r.status == 0 && strstr(r.out, "IQ1_S") && strstr(r.out, "iq1_s"), "info: %s%s", r.out, r.err);
    done(&r);
    expect_fail("quant-sweep --imatrix missing",
                (const char *const[]){"quant-sweep", "-m", t256, "-f", text, "--imatrix", "/nonexistent/im.gguf", NULL},
                1, "/nonexistent/im.gguf");
    r = run((const char *const[]){"quant-sweep", "-m", t256, "-f", text, "-c", "64", "--chunks", "1", "--types",
                                  "iq2_xxs,iq3_s", "--out", sw, "-q", NULL});
    CHECKF(r.status == 0 && strstr(r.err, "iq2_xxs skipped: its iq2_xxs tensors need an importance matrix"),
           "quant-sweep without --imatrix: exit %d: %s", r.status, r.err);
    done(&r);
    snprintf(md, sizeof md, "%s/sweep.md", sw);
    char *m = tu_read(md, NULL);
    CHECKF(m && strstr(m, "| iq3_s | RTN |") && !strstr(m, "| iq2_xxs |"), "sweep.md: %s", m ? m : "(none)");
    free(m);
    r = run((const char *const[]){"quant-sweep", "-m", t256, "-f", text, "-c", "64", "--chunks", "1", "--types",
                                  "iq2_xxs", "--imatrix", im, "--out", sw, "-q", NULL});
    CHECKF(r.status == 0, "quant-sweep --imatrix: exit %d: %s", r.status, r.err);
    done(&r);
    m = tu_read(md, NULL);
    CHECKF(m && strstr(m, "| iq2_xxs | imatrix |") && strstr(m, "weighted by the importance matrix `im.gguf`"),
           "sweep.md: %s", m ? m : "(none)");
    free(m);
    tu_rmtree(dir);
}

/* nibble template: exactly the rendered text on stdout; a template error
 * is one message and exit 1 */
static void check_template(void)
{
    char dir[] = "/tmp/nibble-tmpl-XXXXXX";
    CHECK(tu_mkdtemp(dir) != NULL);
    char tp[256], mp[256], bad[256], badm[256];
    snprintf(tp, sizeof tp, "%s/t.jinja", dir);
    snprintf(mp, sizeof mp, "%s/m.json", dir);
    snprintf(bad, sizeof bad, "%s/bad.jinja", dir);
    snprintf(badm, sizeof badm, "%s/badm.json", dir);
    const char *t = "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{{ eos_token }}\n{% endfor %}"
                    "{% if add_generation_prompt %}<|assistant|>{% endif %}{% if think is defined %}{{ think }}{% endif %}\n";
    write_file(tp, t, strlen(t));
    const char *m = "[{\"role\": \"user\", \"content\": \"h\u00e9\"}]";
    write_file(mp, m, strlen(m));
    const char *b = "{% if messages[0].role != 'system' %}{{ raise_exception('need a system turn') }}{% endif %}";
    write_file(bad, b, strlen(b));
    write_file(badm, "[{\"role\": ", 10);
    result r = run((const char *const[]){"template", "--file", tp, "--messages", mp, "--bos", "<s>", "--eos", "</s>", NULL});
    CHECKF(r.status == 0 && r.out && !strcmp(r.out, "<s><|user|>h\xc3\xa9</s>\n<|assistant|>"), "template: %d '%s' %s",
           r.status, r.out, r.err);
    done(&r);
    r = run((const char *const[]){"template", "--file", tp, "--messages", mp, "--no-generation-prompt", "--var",
                                  "think=[1, \"x\"]", NULL});
    CHECKF(r.status == 0 && r.out && !strcmp(r.out, "<|user|>h\xc3\xa9\n[1, 'x']"), "template --var: %d '%s' %s",
           r.status, r.out, r.err);
    done(&r);
    expect_fail("template raise", (const char *const[]){"template", "--file", bad, "--messages", mp, NULL}, 1,
                "line 1: raise_exception: need a system turn");
    expect_fail("template bad messages", (const char *const[]){"template", "--file", tp, "--messages", badm, NULL}, 1,
                "template variables");
    expect_fail("template no model template", (const char *const[]){"template", "-m", model, "--messages", mp, NULL}, 1,
                "no chat template");
    expect_fail("template no messages", (const char *const[]){"template", "--file", tp, NULL}, 2, "--messages");
#ifndef _WIN32
    /* a folder (or FIFO, or device) is refused at once, not read or waited on */
    expect_fail("template file is a folder", (const char *const[]){"template", "--file", dir, "--messages", mp, NULL},
                1, "a directory, not a regular file");
    expect_fail("chat template file is a folder",
                (const char *const[]){"chat", "--plain", "--chat-template-file", dir, NULL}, 1,
                "a directory, not a regular file");
#endif
    tu_rmtree(dir);
}

/* The embedded model with a chat template added (tokenizer.chat_template):
 * what a downloaded GGUF carries. 0 on success. */
static int with_template(const char *out, const char *tmpl)
{
    eng_gguf *g = NULL;
    eng_err e = {{0}};
    if (eng_gguf_open(model, &g, &e))
        return -1;
    eng_gguf_writer *w = eng_gguf_writer_new();
    int rc = w ? 0 : -1;
    for (uint64_t i = 0; !rc && i < eng_gguf_n_kv(g); i++)
        if (strcmp(eng_gguf_kv_key(g, i), "tokenizer.chat_template"))
            rc = eng_gguf_writer_copy_kv(w, g, i);
    if (!rc)
        rc = eng_gguf_writer_str(w, "tokenizer.chat_template", tmpl);
    for (uint64_t i = 0; !rc && i < eng_gguf_n_tensors(g); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        rc = eng_gguf_writer_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
    }
    if (!rc)
        rc = eng_gguf_writer_save(w, out, &e);
    eng_gguf_writer_free(w);
    eng_gguf_close(g);
    return rc;
}

/* export-ollama with the model's own Jinja: a ChatML template that renders
 * exactly as the ChatML layout exports without a note; one with ChatML's
 * markers but another layout, and one that does not parse, each get a
 * note on stderr and in the Modelfile. */
static void check_export_template(void)
{
    static const struct {
        const char *what, *tmpl, *note; /* note: NULL = none expected */
    } cases[] = {
        {"exact chatml",
         "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + "
         "'<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
         NULL},
        {"chatml markers, other layout",
         "{% for m in messages %}<|im_start|>{{ m.role }}: {{ m.content }}<|im_end|>{% endfor %}"
         "{% if add_generation_prompt %}<|im_start|>assistant: {% endif %}",
         "does not render exactly as the chatml layout"},
        {"broken", "<|im_start|>{% for m in messages %}{{ m.content }", "does not render"},
    };
    char dir[] = "/tmp/nibble-cli-export-XXXXXX";
    if (!tu_mkdtemp(dir)) {
        CHECK(0);
        return;
    }
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char in[4200], out[4200], mf[4300];
        snprintf(in, sizeof in, "%s/m%zu.gguf", dir, i);
        snprintf(out, sizeof out, "%s/out%zu", dir, i);
        snprintf(mf, sizeof mf, "%s/Modelfile", out);
        CHECKF(with_template(in, cases[i].tmpl) == 0, "export %s: could not write the model", cases[i].what);
        result r = run((const char *const[]){"export-ollama", in, out, NULL});
        size_t n = 0;
        char *m = tu_read(mf, &n);
        CHECKF(r.status == 0 && m, "export %s: exit %d: %s", cases[i].what, r.status, r.err);
        CHECKF(m && strstr(m, "<|im_start|>assistant"), "export %s: no ChatML TEMPLATE:\n%s", cases[i].what, m);
        if (cases[i].note) {
            CHECKF(r.err && strstr(r.err, cases[i].note), "export %s: stderr lacks '%s': %s", cases[i].what,
                   cases[i].note, r.err);
            CHECKF(m && strstr(m, cases[i].note), "export %s: Modelfile lacks '%s'", cases[i].what, cases[i].note);
        } else {
            CHECKF(!(r.err && strstr(r.err, "does not render")) && !(m && strstr(m, "does not render")),
                   "export %s: a note where the template maps exactly: %s", cases[i].what, r.err);
        }
        free(m);
        done(&r);
    }
    tu_rmtree(dir);
}

/* speculative decoding (issue 23): greedy output equal to plain with
 * lookup and with a draft model (the model itself: every guess is kept),
 * the acceptance on stderr, bench's two rows, and the errors. */
static void check_spec(void)
{
    const char *plain[] = {"run", "-m", model, "-p", "Lily and Tom", "-n", "120", "--temp", "0", "-t", "1", NULL};
    result a = run(plain);
    CHECKF(a.status == 0 && a.out_len > 100, "plain run exited %d: %s", a.status, a.err);
    const char *look[] = {"run", "-m", model, "-p", "Lily and Tom", "-n", "120", "--temp", "0", "-t", "1",
                          "--lookup", "2", NULL};
    result b = run(look);
    CHECKF(b.status == 0 && b.out && a.out && strcmp(a.out, b.out) == 0, "run --lookup 2 differs from plain:\n%s\n%s",
           a.out, b.out);
    CHECKF(b.err && strstr(b.err, "speculative (lookup)") && strstr(b.err, "drafted tokens accepted"),
           "run --lookup 2 stderr: %s", b.err);
    done(&b);
    const char *self[] = {"run", "-m", model, "-p", "Lily and Tom", "-n", "120", "--temp", "0", "-t", "2",
                          "--model-draft", model, "--draft-max", "5", NULL};
    b = run(self);
    CHECKF(b.status == 0 && b.out && a.out && strcmp(a.out, b.out) == 0, "run --model-draft differs from plain:\n%s",
           b.out);
    CHECKF(b.err && strstr(b.err, "(100%)"), "the model as its own draft: not every guess kept: %s", b.err);
    done(&b);
    done(&a);
    const char *missing[] = {"run", "-m", model, "--model-draft", "no-such-draft.gguf", "-n", "4", NULL};
    expect_fail("run --model-draft missing", missing, 1, "draft model: no-such-draft.gguf");
    const char *zero[] = {"run", "-m", model, "--draft-max", "0", NULL};
    expect_fail("run --draft-max 0", zero, 2, "--draft-max 0");
    const char *big[] = {"run", "-m", model, "--draft-max", "32", "--lookup", "2", NULL};
    expect_fail("run --draft-max 32", big, 2, "--draft-max 32");
    char other[4096];
    if (tu_shared("models/llama-2-tiny-random.gguf", other)) {
        const char *vocab[] = {"run", "-m", model, "--model-draft", other, "-n", "4", NULL};
        expect_fail("run --model-draft other vocabulary", vocab, 1, "vocabulary differs from the model's at token id 259");
    }
    const char *bench[] = {"bench", "-m", model, "-p", "0", "-n", "24", "-r", "1", "-t", "1", "--no-load", "--json",
                           "--lookup", "3", NULL};
    result r = run(bench);
    CHECKF(r.status == 0, "bench --lookup exited %d: %s", r.status, r.err);
    CHECKF(r.out && strstr(r.out, "\"test\": \"tg24-text\"") && strstr(r.out, "\"test\": \"tg24-spec\"") &&
               strstr(r.out, "\"accept\": ") && strstr(r.out, "\"drafter\": \"lookup 3\""),
           "bench --lookup rows:\n%s", r.out);
    done(&r);
}

/* nibble imatrix writes a file --show reads and quantize --imatrix uses;
 * its errors are one line each */
static void check_imatrix(void)
{
    char dir[] = "/tmp/nibble-cli-XXXXXX";
    CHECK(tu_mkdtemp(dir) != NULL);
    char text[256], imx[256], out[256], missing[256];
    snprintf(text, sizeof text, "%s/calib.txt", dir);
    snprintf(imx, sizeof imx, "%s/im.gguf", dir);
    snprintf(out, sizeof out, "%s/q.gguf", dir);
    snprintf(missing, sizeof missing, "%s/none.gguf", dir);
    const char story[] = "Once upon a time, there was a little girl named Lily. She loved to play outside. "
                         "One day, she saw a big red ball in the park. She ran to get it, but a dog got there first. ";
    FILE *f = fopen(text, "wb");
    for (int i = 0; f && i < 6; i++)
        fputs(story, f);
    if (f)
        fclose(f);
    const char *a1[] = {"imatrix", "-m", model, "-o", imx, NULL};
    expect_fail("imatrix without -f", a1, 2, "a calibration text file is required");
    const char *a2[] = {"imatrix", "-m", model, "-f", missing, "-o", imx, NULL};
    expect_fail("imatrix of a missing text", a2, 1, "cannot open");
    const char *a3[] = {"imatrix", "-m", model, "-f", text, "-o", imx, "-c", "4096", NULL};
    expect_fail("imatrix with too short a text", a3, 1, "at least 4096 are needed");
    const char *a4[] = {"imatrix", "-m", model, "-f", text, "-o", imx, "-c", "64", "-q", NULL};
    result r = run(a4);
    CHECKF(r.status == 0 && r.err && strstr(r.err, "35 entries from 5 chunks of 64 tokens"), "imatrix: %d %s",
           r.status, r.err);
    done(&r);
    const char *a5[] = {"imatrix", "--show", imx, NULL};
    r = run(a5);
    CHECKF(r.status == 0 && r.out && strstr(r.out, "GGUF format, 35 entries, 5 chunks of 64 tokens") &&
               strstr(r.out, "blk.4.ffn_down.weight") && strstr(r.out, "dataset: "),
           "imatrix --show: %d %s", r.status, r.out);
    done(&r);
    const char *a6[] = {"quantize", model, out, "q4_0", "--imatrix", imx, "-q", NULL};
    r = run(a6);
    CHECKF(r.status == 0 && r.err && strstr(r.err, "; 30 with importance"), "quantize --imatrix: %d %s", r.status,
           r.err);
    done(&r);
    const char *a7[] = {"quantize", model, out, "q4_0", "--imatrix", missing, NULL};
    expect_fail("quantize --imatrix of a missing file", a7, 1, "cannot open");
    const char *a8[] = {"quantize", model, out, "q4_0", "--imatrix", model, NULL};
    expect_fail("quantize --imatrix of a model", a8, 1, "is not an importance matrix");
    const char *a9[] = {"imatrix", "--show", model, NULL};
    expect_fail("imatrix --show of a model", a9, 1, "is not an importance matrix");
    remove(text);
    remove(imx);
    remove(out);
    rmdir(dir);
}

int main(void)
{
    const char *assets = getenv("NIBBLE_ASSETS");
    snprintf(model, sizeof model, "%s/stories260K.gguf", assets ? assets : "assets");
    check_tools();
    check_prune();
    check_synth_lowbit();
    check_sweep_combined();
    check_iquants_cli();
    check_template();
    check_export_template();
    check_errors();
    check_flag_errors();
    check_kv_cache();
    check_imatrix();
    check_golden();
    check_bench();
    check_bench_depth();
    check_bench_peak();
    check_spec();
    check_default_model();
    return tu_result("test_cli");
}
