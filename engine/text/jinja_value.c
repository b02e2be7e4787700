/* Values of the Jinja interpreter: the arena they live in, lists and
 * dicts, Python's equality and ordering, and the three ways a value is
 * written: str() (what {{ x }} prints), repr() (items inside a printed
 * list) and JSON (transformers' tojson, i.e. json.dumps with
 * ensure_ascii=False). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"
#include "mem.h"

/* ---- arena */

struct jarena_blk {
    jarena_blk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

void *ja_alloc(jarena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0)
        n = 16;
    if (a->failed || n > a->max || a->used > a->max - n) {
        a->failed = 1;
        return NULL;
    }
    jarena_blk *b = a->blk;
    if (!b || b->size - b->used < n) {
        size_t size = n > 60000 ? n : 64 * 1024 - sizeof(jarena_blk);
        b = malloc(sizeof *b + size);
        if (!b) {
            a->failed = 1;
            return NULL;
        }
        b->size = size;
        b->used = 0;
        if (a->blk && n > 60000) { /* a big one: keep the current block current */
            b->next = a->blk->next;
            a->blk->next = b;
        } else {
            b->next = a->blk;
            a->blk = b;
        }
    }
    void *p = b->data + b->used;
    b->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

void ja_free_all(jarena *a)
{
    jarena_blk *b = a->blk;
    while (b) {
        jarena_blk *n = b->next;
        free(b);
        b = n;
    }
    a->blk = NULL;
    a->used = 0;
}

/* ---- strings, lists, dicts */

jstr *js_new(jarena *a, const char *s, size_t n)
{
    if (n > a->max)
        return a->failed = 1, NULL;
    jstr *r = ja_alloc(a, sizeof *r + n + 1);
    if (!r)
        return NULL;
    r->n = n;
    if (n && s)
        memcpy(r->s, s, n);
    r->s[n] = 0;
    return r;
}

jv jv_str(jarena *a, const char *s, size_t n)
{
    jv v = {0};
    jstr *js = js_new(a, s, n);
    if (js) {
        v.t = JV_STR;
        v.u.s = js;
    }
    return v;
}

jv jv_cstr(jarena *a, const char *s)
{
    return jv_str(a, s, strlen(s));
}

jv jv_list(jarena *a)
{
    jv v = {0};
    jlist *l = ja_alloc(a, sizeof *l);
    if (l) {
        v.t = JV_LIST;
        v.u.l = l;
    }
    return v;
}

jv jv_dict(jarena *a)
{
    jv v = {0};
    jdict *d = ja_alloc(a, sizeof *d);
    if (d) {
        v.t = JV_DICT;
        v.u.d = d;
    }
    return v;
}

int jl_push(jarena *a, jlist *l, jv v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jv *nv = ja_alloc(a, cap * sizeof *nv);
        if (!nv)
            return -1;
        if (l->n)
            memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
    return 0;
}

jv *jd_get(const jdict *d, jv k)
{
    for (size_t i = 0; i < d->n; i++)
        if (jv_eq(d->k[i], k))
            return &d->v[i];
    return NULL;
}

jv *jd_gets(const jdict *d, const char *k)
{
    size_t n = strlen(k);
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JV_STR && d->k[i].u.s->n == n && !memcmp(d->k[i].u.s->s, k, n))
            return &d->v[i];
    return NULL;
}

int jd_set(jarena *a, jdict *d, jv k, jv v)
{
    jv *have = jd_get(d, k);
    if (have) {
        *have = v;
        return 0;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        jv *nk = ja_alloc(a, cap * sizeof *nk), *nv = ja_alloc(a, cap * sizeof *nv);
        if (!nk || !nv)
            return -1;
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof *nk);
            memcpy(nv, d->v, d->n * sizeof *nv);
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n] = v;
    d->n++;
    return 0;
}

/* ---- Python semantics */

size_t utf8_len(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

const char *jv_type_name(jv v)
{
    switch (v.t) {
    case JV_UNDEF: return "undefined";
    case JV_NONE: return "none";
    case JV_BOOL: return "boolean";
    case JV_INT: return "integer";
    case JV_FLOAT: return "float";
    case JV_STR: return "string";
    case JV_LIST: return v.flags & JVF_TUPLE ? "tuple" : "list";
    case JV_DICT: return v.flags & JVF_NS ? "namespace" : "dict";
    default: return "function";
    }
}

int jv_truthy(jv v)
{
    switch (v.t) {
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0;
    case JV_STR: return v.u.s->n != 0;
    case JV_LIST: return v.u.l->n != 0;
    case JV_DICT: return (v.flags & JVF_NS) || v.u.d->n != 0;
    case JV_FUNC: return 1;
    default: return 0;
    }
}

static int is_num(jv v)
{
    return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL;
}

static double num(jv v)
{
    return v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : (double)v.u.b;
}

int jv_eq(jv a, jv b)
{
    if (is_num(a) && is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT)
            return (a.t == JV_INT ? a.u.i : a.u.b) == (b.t == JV_INT ? b.u.i : b.u.b);
        return num(a) == num(b);
    }
    if (a.t != b.t)
        return 0;
    switch (a.t) {
    case JV_UNDEF:
    case JV_NONE: return 1;
    case JV_STR: return a.u.s->n == b.u.s->n && !memcmp(a.u.s->s, b.u.s->s, a.u.s->n);
    case JV_LIST:
        if ((a.flags & JVF_TUPLE) != (b.flags & JVF_TUPLE) || a.u.l->n != b.u.l->n)
            return 0;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!jv_eq(a.u.l->v[i], b.u.l->v[i]))
                return 0;
        return 1;
    case JV_DICT:
        if ((a.flags | b.flags) & JVF_NS)
            return a.u.d == b.u.d;
        if (a.u.d->n != b.u.d->n)
            return 0;
        for (size_t i = 0; i < a.u.d->n; i++) {
            jv *o = jd_get(b.u.d, a.u.d->k[i]);
            if (!o || !jv_eq(a.u.d->v[i], *o))
                return 0;
        }
        return 1;
    case JV_FUNC: return a.u.fn == b.u.fn;
    default: return 0;
    }
}

/* Case-folded comparison of two UTF-8 strings (ASCII letters folded; the
 * rest compares by code point, as UTF-8 bytes do). */
static int cmp_ci(const jstr *a, const jstr *b)
{
    size_t n = a->n < b->n ? a->n : b->n;
    for (size_t i = 0; i < n; i++) {
        unsigned char x = (unsigned char)a->s[i], y = (unsigned char)b->s[i];
        if (x >= 'A' && x <= 'Z')
            x += 32;
        if (y >= 'A' && y <= 'Z')
            y += 32;
        if (x != y)
            return x < y ? -1 : 1;
    }
    return a->n < b->n ? -1 : a->n > b->n;
}

int jv_cmp(jv a, jv b, int *err, int ci)
{
    if (is_num(a) && is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) {
            int64_t x = a.t == JV_INT ? a.u.i : a.u.b, y = b.t == JV_INT ? b.u.i : b.u.b;
            return x < y ? -1 : x > y;
        }
        double x = num(a), y = num(b);
        return x < y ? -1 : x > y;
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        if (ci)
            return cmp_ci(a.u.s, b.u.s);
        size_t n = a.u.s->n < b.u.s->n ? a.u.s->n : b.u.s->n;
        int c = memcmp(a.u.s->s, b.u.s->s, n);
        if (c)
            return c < 0 ? -1 : 1;
        return a.u.s->n < b.u.s->n ? -1 : a.u.s->n > b.u.s->n;
    }
    if (a.t == JV_LIST && b.t == JV_LIST && (a.flags & JVF_TUPLE) == (b.flags & JVF_TUPLE)) {
        size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < n; i++) {
            if (jv_eq(a.u.l->v[i], b.u.l->v[i]))
                continue;
            return jv_cmp(a.u.l->v[i], b.u.l->v[i], err, ci);
        }
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
    }
    *err = 1;
    return 0;
}

int jv_is_seq(jv v)
{
    return v.t == JV_LIST || v.t == JV_STR || (v.t == JV_DICT && !(v.flags & JVF_NS));
}

/* ---- buffers */

int jb_put(jbuf *b, const char *s, size_t n)
{
    if (b->over)
        return -1;
    if (n > b->max || b->n > b->max - n) {
        b->over = 1;
        return -1;
    }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->over = 1;
            return -1;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

int jb_puts(jbuf *b, const char *s)
{
    return jb_put(b, s, strlen(s));
}

int jb_putc(jbuf *b, char c)
{
    return jb_put(b, &c, 1);
}

/* ---- writing values */

/* Python's repr() of a float: the shortest decimal that reads back the
 * same, positional from 1e-4 up to 1e16, else with an exponent. */
void write_float(jbuf *b, double f)
{
    if (isnan(f)) {
        jb_puts(b, "nan");
        return;
    }
    if (isinf(f)) {
        jb_puts(b, f < 0 ? "-inf" : "inf");
        return;
    }
    char t[64];
    int p;
    for (p = 1; p <= 17; p++) {
        snprintf(t, sizeof t, "%.*e", p - 1, f);
        if (strtod(t, NULL) == f)
            break;
    }
    /* t is [-]d[.ddd]e[+-]XX */
    char dig[32];
    int nd = 0, neg = t[0] == '-';
    const char *q = t + neg;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9')
            dig[nd++] = *q;
    int ex = atoi(q + 1);
    while (nd > 1 && dig[nd - 1] == '0')
        nd--;
    char o[64];
    int k = 0;
    if (neg)
        o[k++] = '-';
    if (ex >= -4 && ex < 16) {
        if (ex < 0) {
            o[k++] = '0';
            o[k++] = '.';
            for (int i = 0; i < -ex - 1; i++)
                o[k++] = '0';
            for (int i = 0; i < nd; i++)
                o[k++] = dig[i];
        } else {
            for (int i = 0; i <= ex; i++)
                o[k++] = i < nd ? dig[i] : '0';
            o[k++] = '.';
            if (nd > ex + 1)
                for (int i = ex + 1; i < nd; i++)
                    o[k++] = dig[i];
            else
                o[k++] = '0';
        }
        o[k] = 0;
    } else {
        o[k++] = dig[0];
        if (nd > 1) {
            o[k++] = '.';
            for (int i = 1; i < nd; i++)
                o[k++] = dig[i];
        }
        k += snprintf(o + k, sizeof o - k, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
    }
    jb_puts(b, o);
}

static void write_int(jbuf *b, int64_t i)
{
    char t[32];
    snprintf(t, sizeof t, "%lld", (long long)i);
    jb_puts(b, t);
}

/* One UTF-8 sequence starting at s (n bytes left): its code point and
 * length; a broken byte counts as itself. */
static unsigned dec1(const unsigned char *s, size_t n, int *len)
{
    unsigned c = s[0];
    int k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if ((size_t)k > n)
        k = 1;
    if (k == 1) {
        *len = 1;
        return c;
    }
    unsigned cp = c & (0x7F >> k);
    for (int i = 1; i < k; i++)
        cp = cp << 6 | (s[i] & 0x3F);
    *len = k;
    return cp;
}

static void write_repr_str(jbuf *b, const jstr *s)
{
    int has_sq = memchr(s->s, '\'', s->n) != NULL, has_dq = memchr(s->s, '"', s->n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    jb_putc(b, q);
    const unsigned char *p = (const unsigned char *)s->s;
    for (size_t i = 0; i < s->n;) {
        int len;
        unsigned c = dec1(p + i, s->n - i, &len);
        char t[16];
        if (c == (unsigned)q || c == '\\') {
            t[0] = '\\';
            t[1] = (char)c;
            jb_put(b, t, 2);
        } else if (c == '\n')
            jb_puts(b, "\\n");
        else if (c == '\r')
            jb_puts(b, "\\r");
        else if (c == '\t')
            jb_puts(b, "\\t");
        else if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) {
            snprintf(t, sizeof t, "\\x%02x", c);
            jb_puts(b, t);
        } else
            jb_put(b, (const char *)p + i, len);
        i += len;
    }
    jb_putc(b, q);
}

int jv_write_repr(jbuf *b, jv v, int depth)
{
    if (depth > 200)
        return -1;
    switch (v.t) {
    case JV_STR: write_repr_str(b, v.u.s); break;
    case JV_LIST: {
        int tup = v.flags & JVF_TUPLE;
        jb_putc(b, tup ? '(' : '[');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i)
                jb_puts(b, ", ");
            if (jv_write_repr(b, v.u.l->v[i], depth + 1))
                return -1;
        }
        if (tup && v.u.l->n == 1)
            jb_putc(b, ',');
        jb_putc(b, tup ? ')' : ']');
        break;
    }
    case JV_DICT:
        if (v.flags & JVF_NS)
            jb_puts(b, "<Namespace ");
        jb_putc(b, '{');
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i)
                jb_puts(b, ", ");
            if (jv_write_repr(b, v.u.d->k[i], depth + 1))
                return -1;
            jb_puts(b, ": ");
            if (jv_write_repr(b, v.u.d->v[i], depth + 1))
                return -1;
        }
        jb_putc(b, '}');
        if (v.flags & JVF_NS)
            jb_putc(b, '>');
        break;
    default: return jv_write_str(b, v, depth);
    }
    return b->over ? -1 : 0;
}

int jv_write_str(jbuf *b, jv v, int depth)
{
    switch (v.t) {
    case JV_UNDEF: break;
    case JV_NONE: jb_puts(b, "None"); break;
    case JV_BOOL: jb_puts(b, v.u.b ? "True" : "False"); break;
    case JV_INT: write_int(b, v.u.i); break;
    case JV_FLOAT: write_float(b, v.u.f); break;
    case JV_STR: jb_put(b, v.u.s->s, v.u.s->n); break;
    case JV_FUNC:
        jb_puts(b, "<function ");
        jb_puts(b, v.u.fn->name ? v.u.fn->name : "?");
        jb_putc(b, '>');
        break;
    default: return jv_write_repr(b, v, depth);
    }
    return b->over ? -1 : 0;
}

static void write_json_str(jbuf *b, const char *s, size_t n)
{
    jb_putc(b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char t[8];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (c < 0x20) {
                snprintf(t, sizeof t, "\\u%04x", c);
                esc = t;
            }
        }
        if (esc) {
            jb_put(b, s + run, i - run);
            jb_puts(b, esc);
            run = i + 1;
        }
    }
    jb_put(b, s + run, n - run);
    jb_putc(b, '"');
}

static void newline_indent(jbuf *b, int indent, int level)
{
    jb_putc(b, '\n');
    for (int i = 0; i < indent * level; i++)
        jb_putc(b, ' ');
}

/* A dict key as json.dumps turns it into a string; -1 if it cannot. */
static int json_key(jbuf *b, jv k)
{
    jbuf t = {0};
    t.max = b->max;
    switch (k.t) {
    case JV_STR: write_json_str(b, k.u.s->s, k.u.s->n); return 0;
    case JV_INT: write_int(&t, k.u.i); break;
    case JV_FLOAT: write_float(&t, k.u.f); break;
    case JV_BOOL: jb_puts(&t, k.u.b ? "true" : "false"); break;
    case JV_NONE: jb_puts(&t, "null"); break;
    default: return -1;
    }
    write_json_str(b, t.p ? t.p : "", t.n);
    free(t.p);
    return 0;
}

int jv_write_json(jbuf *b, jv v, int indent, const char *isep, const char *ksep, int sort_keys, int level,
                  int depth, const char **why)
{
    if (depth > 200) {
        *why = "nested too deeply";
        return -1;
    }
    switch (v.t) {
    case JV_NONE: jb_puts(b, "null"); break;
    case JV_BOOL: jb_puts(b, v.u.b ? "true" : "false"); break;
    case JV_INT: write_int(b, v.u.i); break;
    case JV_FLOAT:
        if (isnan(v.u.f))
            jb_puts(b, "NaN");
        else if (isinf(v.u.f))
            jb_puts(b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else
            write_float(b, v.u.f);
        break;
    case JV_STR: write_json_str(b, v.u.s->s, v.u.s->n); break;
    case JV_LIST:
        if (!v.u.l->n) {
            jb_puts(b, "[]");
            break;
        }
        jb_putc(b, '[');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i)
                jb_puts(b, isep);
            if (indent >= 0)
                newline_indent(b, indent, level + 1);
            if (jv_write_json(b, v.u.l->v[i], indent, isep, ksep, sort_keys, level + 1, depth + 1, why))
                return -1;
        }
        if (indent >= 0)
            newline_indent(b, indent, level);
        jb_putc(b, ']');
        break;
    case JV_DICT: {
        if (v.flags & JVF_NS) {
            *why = "Object of type Namespace is not JSON serializable";
            return -1;
        }
        jdict *d = v.u.d;
        if (!d->n) {
            jb_puts(b, "{}");
            break;
        }
        size_t *ord = malloc(d->n * sizeof *ord);
        if (!ord) {
            *why = "out of memory";
            return -1;
        }
        for (size_t i = 0; i < d->n; i++)
            ord[i] = i;
        if (sort_keys) /* insertion sort: stable, and dicts are small */
            for (size_t i = 1; i < d->n; i++)
                for (size_t j = i; j > 0; j--) {
                    int err = 0;
                    if (jv_cmp(d->k[ord[j - 1]], d->k[ord[j]], &err, 0) <= 0 || err)
                        break;
                    size_t t = ord[j];
                    ord[j] = ord[j - 1];
                    ord[j - 1] = t;
                }
        jb_putc(b, '{');
        for (size_t i = 0; i < d->n; i++) {
            if (i)
                jb_puts(b, isep);
            if (indent >= 0)
                newline_indent(b, indent, level + 1);
            if (json_key(b, d->k[ord[i]])) {
                free(ord);
                *why = "keys must be str, int, float, bool or None";
                return -1;
            }
            jb_puts(b, ksep);
            if (jv_write_json(b, d->v[ord[i]], indent, isep, ksep, sort_keys, level + 1, depth + 1, why)) {
                free(ord);
                return -1;
            }
        }
        free(ord);
        if (indent >= 0)
            newline_indent(b, indent, level);
        jb_putc(b, '}');
        break;
    }
    case JV_UNDEF: *why = "Object of type Undefined is not JSON serializable"; return -1;
    default: *why = "Object of type function is not JSON serializable"; return -1;
    }
    if (b->over) {
        *why = "output too large";
        return -1;
    }
    return 0;
}

/* ---- JSON reading */

typedef struct jp {
    jarena *a;
    const char *s, *end;
    char *why;
    size_t why_n;
    int max_depth;
} jp;

static void jp_ws(jp *p)
{
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
        p->s++;
}

static int jp_fail(jp *p, const char *msg)
{
    if (p->why && !p->why[0])
        snprintf(p->why, p->why_n, "%s", msg);
    return -1;
}

static int hex4(const char *s, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

static int put_utf8(jbuf *b, unsigned c)
{
    char t[4];
    int n;
    if (c < 0x80) {
        t[0] = (char)c;
        n = 1;
    } else if (c < 0x800) {
        t[0] = (char)(0xC0 | c >> 6);
        t[1] = (char)(0x80 | (c & 0x3F));
        n = 2;
    } else if (c < 0x10000) {
        t[0] = (char)(0xE0 | c >> 12);
        t[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        t[2] = (char)(0x80 | (c & 0x3F));
        n = 3;
    } else {
        t[0] = (char)(0xF0 | c >> 18);
        t[1] = (char)(0x80 | ((c >> 12) & 0x3F));
        t[2] = (char)(0x80 | ((c >> 6) & 0x3F));
        t[3] = (char)(0x80 | (c & 0x3F));
        n = 4;
    }
    return jb_put(b, t, (size_t)n);
}

static int jp_string(jp *p, jv *out)
{
    p->s++; /* the quote */
    jbuf b = {0};
    b.max = p->a->max;
    while (p->s < p->end && *p->s != '"') {
        unsigned char c = (unsigned char)*p->s;
        if (c < 0x20) {
            free(b.p);
            return jp_fail(p, "control character in a string");
        }
        if (c != '\\') {
            const char *r = p->s;
            while (p->s < p->end && *p->s != '"' && *p->s != '\\' && (unsigned char)*p->s >= 0x20)
                p->s++;
            jb_put(&b, r, (size_t)(p->s - r));
            continue;
        }
        if (p->end - p->s < 2) {
            free(b.p);
            return jp_fail(p, "unterminated string");
        }
        char e = p->s[1];
        p->s += 2;
        switch (e) {
        case '"': jb_putc(&b, '"'); break;
        case '\\': jb_putc(&b, '\\'); break;
        case '/': jb_putc(&b, '/'); break;
        case 'b': jb_putc(&b, '\b'); break;
        case 'f': jb_putc(&b, '\f'); break;
        case 'n': jb_putc(&b, '\n'); break;
        case 'r': jb_putc(&b, '\r'); break;
        case 't': jb_putc(&b, '\t'); break;
        case 'u': {
            unsigned u, lo;
            if (p->end - p->s < 4 || hex4(p->s, &u)) {
                free(b.p);
                return jp_fail(p, "bad \\u escape");
            }
            p->s += 4;
            if (u >= 0xD800 && u < 0xDC00 && p->end - p->s >= 6 && p->s[0] == '\\' && p->s[1] == 'u' &&
                !hex4(p->s + 2, &lo) && lo >= 0xDC00 && lo < 0xE000) {
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                p->s += 6;
            }
            put_utf8(&b, u);
            break;
        }
        default: free(b.p); return jp_fail(p, "bad escape in a string");
        }
    }
    if (p->s >= p->end) {
        free(b.p);
        return jp_fail(p, "unterminated string");
    }
    p->s++;
    if (b.over) {
        free(b.p);
        return jp_fail(p, "string too long");
    }
    *out = jv_str(p->a, b.p ? b.p : "", b.n);
    free(b.p);
    return out->t == JV_STR ? 0 : jp_fail(p, "out of memory");
}

static int jp_value(jp *p, jv *out, int depth)
{
    if (depth > p->max_depth)
        return jp_fail(p, "nested too deeply");
    jp_ws(p);
    if (p->s >= p->end)
        return jp_fail(p, "unexpected end");
    char c = *p->s;
    if (c == '"')
        return jp_string(p, out);
    if (c == '[') {
        p->s++;
        *out = jv_list(p->a);
        if (out->t != JV_LIST)
            return jp_fail(p, "out of memory");
        jp_ws(p);
        if (p->s < p->end && *p->s == ']') {
            p->s++;
            return 0;
        }
        for (;;) {
            jv item;
            if (jp_value(p, &item, depth + 1) || jl_push(p->a, out->u.l, item))
                return jp_fail(p, "out of memory");
            jp_ws(p);
            if (p->s < p->end && *p->s == ',') {
                p->s++;
                continue;
            }
            if (p->s < p->end && *p->s == ']') {
                p->s++;
                return 0;
            }
            return jp_fail(p, "expected ',' or ']'");
        }
    }
    if (c == '{') {
        p->s++;
        *out = jv_dict(p->a);
        if (out->t != JV_DICT)
            return jp_fail(p, "out of memory");
        jp_ws(p);
        if (p->s < p->end && *p->s == '}') {
            p->s++;
            return 0;
        }
        for (;;) {
            jv k, v;
            jp_ws(p);
            if (p->s >= p->end || *p->s != '"')
                return jp_fail(p, "expected a string key");
            if (jp_string(p, &k))
                return -1;
            jp_ws(p);
            if (p->s >= p->end || *p->s != ':')
                return jp_fail(p, "expected ':'");
            p->s++;
            if (jp_value(p, &v, depth + 1) || jd_set(p->a, out->u.d, k, v))
                return jp_fail(p, "out of memory");
            jp_ws(p);
            if (p->s < p->end && *p->s == ',') {
                p->s++;
                continue;
            }
            if (p->s < p->end && *p->s == '}') {
                p->s++;
                return 0;
            }
            return jp_fail(p, "expected ',' or '}'");
        }
    }
    static const struct { const char *w; int t, b; } words[] = {
        {"true", JV_BOOL, 1}, {"false", JV_BOOL, 0}, {"null", JV_NONE, 0}};
    for (size_t i = 0; i < 3; i++) {
        size_t k = strlen(words[i].w);
        if ((size_t)(p->end - p->s) >= k && !memcmp(p->s, words[i].w, k)) {
            p->s += k;
            *out = words[i].t == JV_BOOL ? jv_bool(words[i].b) : jv_none();
            return 0;
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        const char *r = p->s;
        int isf = 0;
        if (*p->s == '-')
            p->s++;
        while (p->s < p->end && ((*p->s >= '0' && *p->s <= '9') || *p->s == '.' || *p->s == 'e' ||
                                 *p->s == 'E' || *p->s == '+' || *p->s == '-')) {
            if (*p->s == '.' || *p->s == 'e' || *p->s == 'E')
                isf = 1;
            p->s++;
        }
        char t[64];
        size_t n = (size_t)(p->s - r);
        if (n >= sizeof t)
            return jp_fail(p, "number too long");
        memcpy(t, r, n);
        t[n] = 0;
        char *e;
        if (!isf) {
            long long i = strtoll(t, &e, 10);
            if (*e == 0 && !(i == LLONG_MAX || i == LLONG_MIN)) {
                *out = jv_int(i);
                return 0;
            }
        }
        double f = strtod(t, &e);
        if (*e)
            return jp_fail(p, "bad number");
        *out = jv_float(f);
        return 0;
    }
    return jp_fail(p, "unexpected character");
}

int jv_parse_json(jarena *a, const char *s, size_t n, jv *out, char *why, size_t why_n, int max_depth)
{
    jp p = {a, s, s + n, why, why_n, max_depth};
    if (why && why_n)
        why[0] = 0;
    if (jp_value(&p, out, 0))
        return -1;
    jp_ws(&p);
    if (p.s != p.end)
        return jp_fail(&p, "text after the value");
    return 0;
}

int eng_jinja_json_str(char **buf, size_t *n, size_t *cap, const char *s)
{
    jbuf b = {*buf, *n, *cap, (size_t)-1 / 2, 0};
    write_json_str(&b, s, strlen(s));
    *buf = b.p;
    *n = b.n;
    *cap = b.cap;
    return b.over ? ENG_ENOMEM : 0;
}
