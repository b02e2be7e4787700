#include "journal.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <time.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mem.h"
#include "port.h"
#include "utf8.h"

eng_journal *eng_journal_new(void) { return calloc(1, sizeof(eng_journal)); }

static void entry_free(eng_jentry *x)
{
    free(x->text);
    for (size_t i = 0; i < x->nmeta; i++) {
        free(x->meta[i].key);
        free(x->meta[i].value);
    }
    free(x->meta);
    for (size_t i = 0; i < x->nmarks; i++)
        free(x->marks[i].what);
    free(x->marks);
    for (size_t i = 0; i < x->nextra; i++)
        free(x->extra[i]);
    free(x->extra);
}

static void lines_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void eng_journal_clear(eng_journal *j)
{
    for (size_t i = 0; i < j->n; i++)
        entry_free(&j->e[i]);
    j->n = 0;
    lines_free(j->extra, j->nextra);
    j->extra = NULL;
    j->nextra = j->cap_extra = 0;
}

void eng_journal_free(eng_journal *j)
{
    if (!j)
        return;
    eng_journal_clear(j);
    free(j->e);
    free(j->system);
    free(j);
}

int eng_journal_add(eng_journal *j, enum eng_jkind kind, const char *text)
{
    if (eng_reserve(&j->e, &j->cap, j->n + 1, sizeof *j->e, 16))
        return ENG_ENOMEM;
    eng_jentry *x = &j->e[j->n];
    memset(x, 0, sizeof *x);
    x->kind = kind;
    x->len = text ? strlen(text) : 0;
    x->cap = x->len + 1;
    x->text = eng_strndup(text ? text : "", x->len);
    if (!x->text)
        return ENG_ENOMEM;
    return (int)j->n++;
}

int eng_journal_append(eng_journal *j, size_t idx, const char *b, size_t n)
{
    if (idx >= j->n)
        return ENG_EINVAL;
    eng_jentry *x = &j->e[idx];
    if (eng_reserve(&x->text, &x->cap, x->len + n + 1, 1, 0))
        return ENG_ENOMEM;
    memcpy(x->text + x->len, b, n);
    x->len += n;
    x->text[x->len] = 0;
    return 0;
}

/* Append key = v (v is taken over, freed on failure): no search, so a
 * load is linear however many keys an entry has. */
static int meta_push(eng_jentry *x, const char *key, char *v)
{
    char *k = eng_strndup(key, strlen(key));
    if (!k || eng_reserve(&x->meta, &x->cap_meta, x->nmeta + 1, sizeof *x->meta, 8)) {
        free(v);
        free(k);
        return ENG_ENOMEM;
    }
    x->meta[x->nmeta].key = k;
    x->meta[x->nmeta].value = v;
    x->nmeta++;
    return 0;
}

/* Keep a line this build does not know, verbatim. */
static int extra_push(char ***v, size_t *n, size_t *cap, const char *line, size_t len)
{
    char *c = eng_strndup(line, len);
    if (!c || eng_reserve(v, cap, *n + 1, sizeof **v, 4)) {
        free(c);
        return ENG_ENOMEM;
    }
    (*v)[(*n)++] = c;
    return 0;
}

int eng_journal_meta(eng_journal *j, size_t idx, const char *key, const char *value)
{
    if (idx >= j->n)
        return ENG_EINVAL;
    eng_jentry *x = &j->e[idx];
    char *v = eng_strndup(value, strlen(value));
    if (!v)
        return ENG_ENOMEM;
    for (size_t i = x->nmeta; i-- > 0;)
        if (!strcmp(x->meta[i].key, key)) {
            free(x->meta[i].value);
            x->meta[i].value = v;
            return 0;
        }
    return meta_push(x, key, v);
}

const char *eng_journal_get_meta(const eng_journal *j, size_t idx, const char *key)
{
    if (idx >= j->n)
        return NULL;
    const eng_jentry *x = &j->e[idx];
    for (size_t i = x->nmeta; i-- > 0;) /* the last of a repeated key counts */
        if (!strcmp(x->meta[i].key, key))
            return x->meta[i].value;
    return NULL;
}

static int mark_at(eng_journal *j, size_t idx, size_t byte, uint32_t token, const char *what)
{
    if (idx >= j->n)
        return ENG_EINVAL;
    eng_jentry *x = &j->e[idx];
    char *w = eng_strndup(what, strlen(what));
    if (!w || eng_reserve(&x->marks, &x->cap_marks, x->nmarks + 1, sizeof *x->marks, 4)) {
        free(w);
        return ENG_ENOMEM;
    }
    eng_jmark *m = x->marks;
    m[x->nmarks].byte = byte; /* clamped by the caller once the text is known */
    m[x->nmarks].token = token;
    m[x->nmarks].what = w;
    x->nmarks++;
    return 0;
}

int eng_journal_mark(eng_journal *j, size_t idx, uint32_t token, const char *what)
{
    if (idx >= j->n)
        return ENG_EINVAL;
    return mark_at(j, idx, j->e[idx].len, token, what);
}

int eng_journal_set_system(eng_journal *j, const char *text)
{
    char *s = NULL;
    if (text && *text && !(s = eng_strndup(text, strlen(text))))
        return ENG_ENOMEM;
    free(j->system);
    j->system = s;
    return 0;
}

/* ---- escaping ---- */

char *eng_journal_escape(const char *s, size_t n)
{
    char *o = malloc(n * 4 + 1), *p = o;
    if (!o)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '\\': *p++ = '\\'; *p++ = '\\'; break;
        case '\n': *p++ = '\\'; *p++ = 'n'; break;
        case '\r': *p++ = '\\'; *p++ = 'r'; break;
        case '\t': *p++ = '\\'; *p++ = 't'; break;
        default:
            if (c < 0x20 || c == 0x7f)
                p += sprintf(p, "\\x%02x", c);
            else
                *p++ = (char)c;
        }
    }
    *p = 0;
    return o;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

long eng_journal_unescape(char *s)
{
    char *r = s, *w = s;
    while (*r) {
        if (*r != '\\') {
            *w++ = *r++;
            continue;
        }
        r++;
        switch (*r) {
        case '\\': *w++ = '\\'; break;
        case 'n': *w++ = '\n'; break;
        case 'r': *w++ = '\r'; break;
        case 't': *w++ = '\t'; break;
        case 'x': {
            int h = hexval(r[1]), l = h >= 0 ? hexval(r[2]) : -1;
            if (h < 0 || l < 0 || (h == 0 && l == 0))
                return -1;
            *w++ = (char)(h * 16 + l);
            r += 2;
            break;
        }
        default:
            return -1;
        }
        r++;
    }
    *w = 0;
    return (long)(w - s);
}

/* ---- files ---- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (eng_reserve(&b->p, &b->cap, b->n + n + 1, 1, 0)) {
        b->oom = 1;
        return;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_esc(sbuf *b, const char *s, size_t n)
{
    char *x = eng_journal_escape(s, n);
    if (!x) {
        b->oom = 1;
        return;
    }
    sb_str(b, x);
    free(x);
}

static const char *kind_name(enum eng_jkind k)
{
    return k == ENG_J_USER ? "user" : k == ENG_J_ASSISTANT ? "assistant" : "notice";
}

int eng_journal_save(const eng_journal *j, const char *path, eng_err *e)
{
    sbuf b = {0};
    sb_str(&b, "nibble-journal 1\n");
    if (j->system) {
        sb_str(&b, "system ");
        sb_esc(&b, j->system, strlen(j->system));
        sb_str(&b, "\n");
    }
    for (size_t k = 0; k < j->nextra; k++) {
        sb_str(&b, j->extra[k]);
        sb_str(&b, "\n");
    }
    for (size_t i = 0; i < j->n; i++) {
        const eng_jentry *x = &j->e[i];
        if (x->transient)
            continue;
        sb_str(&b, "entry ");
        sb_str(&b, kind_name(x->kind));
        sb_str(&b, "\n");
        if (x->partial)
            sb_str(&b, "partial 1\n");
        for (size_t k = 0; k < x->nmeta; k++) {
            sb_str(&b, "meta ");
            sb_esc(&b, x->meta[k].key, strlen(x->meta[k].key));
            sb_str(&b, " ");
            sb_esc(&b, x->meta[k].value, strlen(x->meta[k].value));
            sb_str(&b, "\n");
        }
        for (size_t k = 0; k < x->nmarks; k++) {
            char num[64];
            snprintf(num, sizeof num, "mark %zu %u ", x->marks[k].byte, x->marks[k].token);
            sb_str(&b, num);
            sb_esc(&b, x->marks[k].what, strlen(x->marks[k].what));
            sb_str(&b, "\n");
        }
        sb_str(&b, "text ");
        sb_esc(&b, x->text, x->len);
        sb_str(&b, "\n");
        for (size_t k = 0; k < x->nextra; k++) {
            sb_str(&b, x->extra[k]);
            sb_str(&b, "\n");
        }
    }
    sb_str(&b, "end\n");
    if (b.oom) {
        free(b.p);
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    }
    int rc = eng_write_atomic(path, b.p, b.n, e);
    free(b.p);
    return rc;
}

static int oom(eng_err *e) { return eng_errf(e, ENG_ENOMEM, "out of memory"); }

/* One record line after the first (key and val split at the first
 * space, val NUL-terminated and writable): applied to j. The caller keeps
 * the lines whose key this build does not know. */
static int load_line(eng_journal *j, const char *path, int line, char *key, char *val, int *seen_end, eng_err *e)
{
    if (*seen_end)
        return eng_errf(e, ENG_EFORMAT, "%s:%d: text after 'end'", path, line);
    if (!strcmp(key, "end")) {
        *seen_end = 1;
        return 0;
    }
    if (!strcmp(key, "entry")) {
        enum eng_jkind k = !strcmp(val, "user") ? ENG_J_USER : !strcmp(val, "assistant") ? ENG_J_ASSISTANT
                           : !strcmp(val, "notice")                                   ? ENG_J_NOTICE
                                                                                      : 0;
        if (!k)
            return eng_errf(e, ENG_EFORMAT, "%s:%d: unknown entry kind '%s'", path, line, val);
        return eng_journal_add(j, k, "") < 0 ? oom(e) : 0;
    }
    int needs_entry = !strcmp(key, "text") || !strcmp(key, "meta") || !strcmp(key, "mark") ||
                      !strcmp(key, "partial");
    if (needs_entry && !j->n)
        return eng_errf(e, ENG_EFORMAT, "%s:%d: '%s' before any entry", path, line, key);
    eng_jentry *x = j->n ? &j->e[j->n - 1] : NULL;
    if (!strcmp(key, "partial")) {
        x->partial = atoi(val) != 0;
    } else if (!strcmp(key, "text") || !strcmp(key, "system")) {
        long n = eng_journal_unescape(val);
        if (n < 0 || !eng_utf8_valid(val, (size_t)n))
            return eng_errf(e, ENG_EFORMAT, "%s:%d: bad escape or invalid UTF-8 in %s", path, line, key);
        if (!strcmp(key, "system")) {
            if (eng_journal_set_system(j, val))
                return oom(e);
        } else {
            x->len = 0;
            if (eng_journal_append(j, j->n - 1, val, (size_t)n))
                return oom(e);
        }
    } else if (!strcmp(key, "meta")) {
        char *v = strchr(val, ' ');
        if (!v)
            return eng_errf(e, ENG_EFORMAT, "%s:%d: meta needs a key and a value", path, line);
        *v++ = 0;
        if (eng_journal_unescape(val) < 0 || eng_journal_unescape(v) < 0)
            return eng_errf(e, ENG_EFORMAT, "%s:%d: bad escape in meta", path, line);
        char *vc = eng_strndup(v, strlen(v));
        if (!vc || meta_push(x, val, vc))
            return oom(e);
    } else if (!strcmp(key, "mark")) {
        unsigned long long byte, tok;
        int used = 0;
        if (sscanf(val, "%llu %llu %n", &byte, &tok, &used) < 2 || !used || tok > UINT32_MAX ||
            eng_journal_unescape(val + used) < 0)
            return eng_errf(e, ENG_EFORMAT, "%s:%d: mark needs BYTE TOKEN WHAT", path, line);
        if (mark_at(j, j->n - 1, (size_t)byte, (uint32_t)tok, val + used))
            return oom(e);
    }
    return 0;
}

static int known_key(const char *k)
{
    static const char *const keys[] = {"end", "entry", "text", "system", "meta", "mark", "partial"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (!strcmp(k, keys[i]))
            return 1;
    return 0;
}

static int known_kind(const char *v) { return !strcmp(v, "user") || !strcmp(v, "assistant") || !strcmp(v, "notice"); }

int eng_journal_load(const char *path, eng_journal **out, eng_err *e)
{
    *out = NULL;
    size_t len = 0;
    char *data = NULL;
    int rc = eng_read_file(path, ENG_JOURNAL_MAX, &data, &len, e);
    if (rc)
        return rc;
    eng_journal *j = eng_journal_new();
    if (!j) {
        free(data);
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    }
    if (strlen(data) != len) {
        rc = eng_errf(e, ENG_EFORMAT, "%s: contains a NUL byte; not a journal", path);
        goto done;
    }
    int line = 0, seen_end = 0;
    int foreign = 0; /* inside an entry of a kind this build does not know */
    char *p = data;
    if ((unsigned char)p[0] == 0xEF && (unsigned char)p[1] == 0xBB && (unsigned char)p[2] == 0xBF)
        p += 3; /* a byte order mark an editor added */
    while (*p) {
        char *nl = strchr(p, '\n');
        if (!nl) {
            rc = eng_errf(e, ENG_EFORMAT, "%s:%d: file ends inside a line (cut short?)", path, line + 1);
            goto done;
        }
        *nl = 0;
        for (char *q = nl; q > p && q[-1] == '\r';)
            *--q = 0; /* CR LF line ends (escaped text never holds a raw CR at the end); all of them, so a
                       * kept line saves and loads back the same */
        line++;
        char *key = p, *raw = p;
        size_t raw_len = strlen(raw);
        p = nl + 1;
        size_t klen = strcspn(key, " ");
        char saved = key[klen];
        key[klen] = 0;
        char *val = saved ? key + klen + 1 : key + klen;
        if (line == 1) {
            if (strcmp(key, "nibble-journal") || strcmp(val, "1")) {
                rc = eng_errf(e, ENG_EFORMAT, "%s: not a nibble journal (first line)", path);
                goto done;
            }
            continue;
        }
        if (seen_end) {
            rc = eng_errf(e, ENG_EFORMAT, "%s:%d: text after 'end'", path, line);
            goto done;
        }
        int is_entry = !strcmp(key, "entry");
        if (is_entry)
            foreign = !known_kind(val);
        else if (!strcmp(key, "end"))
            foreign = 0;
        if (foreign || !known_key(key)) {
            /* a newer build's line (or a line of its entry): kept as it is */
            key[klen] = saved;
            int r = j->n ? extra_push(&j->e[j->n - 1].extra, &j->e[j->n - 1].nextra, &j->e[j->n - 1].cap_extra,
                                      raw, raw_len)
                         : extra_push(&j->extra, &j->nextra, &j->cap_extra, raw, raw_len);
            if (r) {
                rc = oom(e);
                goto done;
            }
            continue;
        }
        if ((rc = load_line(j, path, line, key, val, &seen_end, e)))
            goto done;
    }
    if (line == 0) {
        rc = eng_errf(e, ENG_EFORMAT, "%s: empty file; not a nibble journal", path);
        goto done;
    }
    if (!seen_end) {
        rc = eng_errf(e, ENG_EFORMAT, "%s: no 'end' line (cut short?)", path);
        goto done;
    }
    /* marks were read before the text: clamp them now */
    for (size_t i = 0; i < j->n; i++)
        for (size_t k = 0; k < j->e[i].nmarks; k++)
            if (j->e[i].marks[k].byte > j->e[i].len)
                j->e[i].marks[k].byte = j->e[i].len;
    free(data);
    *out = j;
    return 0;
done:
    free(data);
    eng_journal_free(j);
    return rc;
}

int eng_journal_clean_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int removed = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        /* NAME.nbj.tmp.PID, as eng_afile_open names them */
        const char *t = strstr(de->d_name, ".nbj.tmp.");
        if (!t || t == de->d_name)
            continue;
        char *end;
        long pid = strtol(t + 9, &end, 10);
        if (*end || end == t + 9 || pid <= 0)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct stat sb;
#ifdef _WIN32
        if (stat(path, &sb) || !S_ISREG(sb.st_mode))
#else
        if (lstat(path, &sb) || !S_ISREG(sb.st_mode))
#endif
            continue;
#ifdef _WIN32
        /* no cheap test for a live process by id here: an hour's age says
         * no save is still writing it */
        if (time(NULL) - sb.st_mtime < 3600)
            continue;
#else
        if (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* its writer may still be at work */
#endif
        if (unlink(path) == 0)
            removed++;
    }
    closedir(d);
    return removed;
}
