/* Evaluating a Jinja syntax tree: statements, expressions, the filters,
 * tests, string/dict methods and globals chat templates use, with
 * jinja2's semantics (Python's for the values). Every render is bounded:
 * steps, nesting depth, the arena's bytes and the output's bytes. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <utf8proc.h>

#include "jinja_internal.h"

typedef struct jscope {
    struct jscope *parent;
    jdict vars;
} jscope;

typedef struct ctx {
    jarena a;
    eng_jinja_limits lim;
    eng_err *e;
    int failed;
    jbuf *out;
    size_t steps;
    int depth;
    jscope *root;
    const char *macro_name; /* the innermost macro, for error messages */
} ctx;

enum { X_OK = 0, X_BREAK = 1, X_CONTINUE = 2, X_ERR = -1 };

static int fail(ctx *c, const jnode *n, const char *fmt, ...) ENG_PRINTF(3, 4);
static int fail(ctx *c, const jnode *n, const char *fmt, ...)
{
    if (c->failed)
        return X_ERR;
    c->failed = 1;
    char m[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    eng_errf(c->e, ENG_EFORMAT, "line %d: %s", n ? n->line : 0, m);
    return X_ERR;
}

static int oom(ctx *c, const jnode *n)
{
    return fail(c, n, "the template used more than %zu MB of memory", c->lim.max_memory >> 20);
}

static int eval(ctx *c, const jnode *n, jscope *s, jv *out);
static int exec_body(ctx *c, const jnode *body, jscope *s);

/* ---- scopes */

static jscope *scope_new(ctx *c, jscope *parent)
{
    jscope *s = ja_alloc(&c->a, sizeof *s);
    if (s)
        s->parent = parent;
    return s;
}

static jv *lookup(jscope *s, const char *name)
{
    for (; s; s = s->parent) {
        jv *v = jd_gets(&s->vars, name);
        if (v)
            return v;
    }
    return NULL;
}

static int assign(ctx *c, jscope *s, const char *name, jv v)
{
    jv *have = jd_gets(&s->vars, name);
    if (have) {
        *have = v;
        return 0;
    }
    jv k = jv_cstr(&c->a, name);
    if (k.t != JV_STR || jd_set(&c->a, &s->vars, k, v))
        return -1;
    return 0;
}

static jv undef_named(ctx *c, const char *name)
{
    jv u = jv_undef();
    if (name) {
        jstr *s = js_new(&c->a, name, strlen(name));
        u.u.s = s;
    }
    return u;
}

static const char *undef_name(jv u)
{
    return u.u.s ? u.u.s->s : "value";
}

static int fail_undef(ctx *c, const jnode *n, jv u)
{
    return fail(c, n, "%s is undefined", undef_name(u));
}

/* ---- strings */

static jv str_of(ctx *c, jv v)
{
    if (v.t == JV_STR)
        return v;
    jbuf b = {0};
    b.max = c->lim.max_memory;
    jv_write_str(&b, v, 0);
    jv r = jv_str(&c->a, b.p ? b.p : "", b.n);
    free(b.p);
    return r;
}

static int mkstr(ctx *c, const jnode *n, const char *s, size_t len, jv *out)
{
    *out = jv_str(&c->a, s, len);
    return out->t == JV_STR ? 0 : oom(c, n);
}

/* code points of a UTF-8 string: offsets of each character start */
static size_t *char_offsets(ctx *c, const jstr *s, size_t *count)
{
    size_t k = utf8_len(s->s, s->n);
    size_t *off = ja_alloc(&c->a, (k + 1) * sizeof *off);
    if (!off)
        return NULL;
    size_t j = 0;
    for (size_t i = 0; i < s->n; i++)
        if (((unsigned char)s->s[i] & 0xC0) != 0x80)
            off[j++] = i;
    off[k] = s->n;
    *count = k;
    return off;
}

static int is_space_cp(int32_t cp)
{
    return cp == ' ' || (cp >= 9 && cp <= 13) || (cp >= 0x1c && cp <= 0x1f) || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

static int32_t cp_at(const char *s, size_t n, size_t i, size_t *len)
{
    int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
    if (k <= 0) {
        *len = 1;
        return (unsigned char)s[i];
    }
    *len = (size_t)k;
    return cp;
}

/* strip: which 1 = left, 2 = right, 3 = both; chars NULL for whitespace */
static int do_strip(ctx *c, const jnode *n, jv v, int which, const jstr *chars, jv *out)
{
    const jstr *s = v.u.s;
    size_t b = 0, e = s->n;
    if (which & 1)
        while (b < e) {
            size_t k;
            int32_t cp = cp_at(s->s, e, b, &k);
            int hit = chars ? k <= chars->n && eng_memmem(chars->s, chars->n, s->s + b, k) != NULL : is_space_cp(cp);
            if (!hit)
                break;
            b += k;
        }
    if (which & 2)
        while (e > b) {
            size_t st = e - 1;
            while (st > b && ((unsigned char)s->s[st] & 0xC0) == 0x80)
                st--;
            size_t k;
            int32_t cp = cp_at(s->s, e, st, &k);
            int hit = chars ? eng_memmem(chars->s, chars->n, s->s + st, e - st) != NULL : is_space_cp(cp);
            if (!hit)
                break;
            e = st;
        }
    return mkstr(c, n, s->s + b, e - b, out);
}

/* mode 0 lower, 1 upper, 2 capitalize, 3 title */
static int do_case(ctx *c, const jnode *n, const jstr *s, int mode, jv *out)
{
    jbuf b = {0};
    b.max = c->lim.max_memory;
    int first = 1, prev_alpha = 0;
    for (size_t i = 0; i < s->n;) {
        size_t k;
        int32_t cp = cp_at(s->s, s->n, i, &k);
        int32_t r = cp;
        if (mode == 0)
            r = utf8proc_tolower(cp);
        else if (mode == 1)
            r = utf8proc_toupper(cp);
        else if (mode == 2)
            r = first ? utf8proc_toupper(cp) : utf8proc_tolower(cp);
        else {
            int alpha = utf8proc_category(cp) <= UTF8PROC_CATEGORY_LO && utf8proc_category(cp) >= UTF8PROC_CATEGORY_LU;
            r = prev_alpha ? utf8proc_tolower(cp) : utf8proc_toupper(cp);
            prev_alpha = alpha;
        }
        first = 0;
        utf8proc_uint8_t t[4];
        utf8proc_ssize_t m = utf8proc_encode_char(r, t);
        jb_put(&b, (const char *)t, (size_t)m);
        i += k;
    }
    int rc = b.over ? oom(c, n) : mkstr(c, n, b.p ? b.p : "", b.n, out);
    free(b.p);
    return rc;
}

static int do_replace(ctx *c, const jnode *n, const jstr *s, const jstr *old, const jstr *new, int64_t count,
                      jv *out)
{
    jbuf b = {0};
    b.max = c->lim.max_memory;
    size_t i = 0;
    int64_t done = 0;
    if (!old->n) { /* Python inserts between every character */
        size_t k;
        while (i <= s->n && (count < 0 || done < count)) {
            jb_put(&b, new->s, new->n);
            done++;
            if (i == s->n)
                break;
            cp_at(s->s, s->n, i, &k);
            jb_put(&b, s->s + i, k);
            i += k;
        }
        jb_put(&b, s->s + i, s->n - i);
    } else {
        while (i < s->n && (count < 0 || done < count)) {
            const char *hit = eng_memmem(s->s + i, s->n - i, old->s, old->n);
            if (!hit)
                break;
            jb_put(&b, s->s + i, (size_t)(hit - (s->s + i)));
            jb_put(&b, new->s, new->n);
            i = (size_t)(hit - s->s) + old->n;
            done++;
        }
        jb_put(&b, s->s + i, s->n - i);
    }
    int rc = b.over ? oom(c, n) : mkstr(c, n, b.p ? b.p : "", b.n, out);
    free(b.p);
    return rc;
}

static int do_split(ctx *c, const jnode *n, const jstr *s, const jstr *sep, int64_t maxsplit, jv *out)
{
    *out = jv_list(&c->a);
    if (out->t != JV_LIST)
        return oom(c, n);
    if (sep && !sep->n)
        return fail(c, n, "split: empty separator");
    size_t i = 0;
    int64_t done = 0;
    if (!sep) {
        for (;;) {
            size_t k;
            while (i < s->n && is_space_cp(cp_at(s->s, s->n, i, &k)))
                i += k;
            if (i >= s->n)
                break;
            size_t st = i;
            if (maxsplit >= 0 && done >= maxsplit) {
                size_t e = s->n;
                while (e > st) { /* Python keeps the rest, trailing space stripped */
                    size_t p = e - 1;
                    while (p > st && ((unsigned char)s->s[p] & 0xC0) == 0x80)
                        p--;
                    if (!is_space_cp(cp_at(s->s, e, p, &k)))
                        break;
                    e = p;
                }
                jv piece;
                if (mkstr(c, n, s->s + st, e - st, &piece) || jl_push(&c->a, out->u.l, piece))
                    return oom(c, n);
                break;
            }
            while (i < s->n && !is_space_cp(cp_at(s->s, s->n, i, &k)))
                i += k;
            jv piece;
            if (mkstr(c, n, s->s + st, i - st, &piece) || jl_push(&c->a, out->u.l, piece))
                return oom(c, n);
            done++;
        }
        return 0;
    }
    for (;;) {
        const char *hit = (maxsplit < 0 || done < maxsplit) ? eng_memmem(s->s + i, s->n - i, sep->s, sep->n) : NULL;
        size_t e = hit ? (size_t)(hit - s->s) : s->n;
        jv piece;
        if (mkstr(c, n, s->s + i, e - i, &piece) || jl_push(&c->a, out->u.l, piece))
            return oom(c, n);
        if (!hit)
            break;
        i = e + sep->n;
        done++;
    }
    return 0;
}

/* ---- arguments of filters, methods and globals */

typedef struct args {
    jv *pos;
    size_t np;
    const char **kwn;
    jv *kwv;
    size_t nk;
} args;

/* the i-th positional argument or the keyword `name`; NULL if absent */
static jv *arg(args *a, size_t i, const char *name)
{
    if (i < a->np)
        return &a->pos[i];
    for (size_t k = 0; name && k < a->nk; k++)
        if (!strcmp(a->kwn[k], name))
            return &a->kwv[k];
    return NULL;
}

static int eval_args(ctx *c, const jnode *n, jscope *s, args *a, size_t skip)
{
    memset(a, 0, sizeof *a);
    a->np = n->nkids - skip;
    a->nk = n->nkids2;
    a->pos = ja_alloc(&c->a, (a->np + 1) * sizeof *a->pos);
    a->kwv = ja_alloc(&c->a, (a->nk + 1) * sizeof *a->kwv);
    if (!a->pos || !a->kwv)
        return oom(c, n);
    a->kwn = n->names;
    for (size_t i = 0; i < a->np; i++)
        if (eval(c, n->kids[i + skip], s, &a->pos[i]))
            return X_ERR;
    for (size_t i = 0; i < a->nk; i++)
        if (eval(c, n->kids2[i], s, &a->kwv[i]))
            return X_ERR;
    return 0;
}

static int want_int(ctx *c, const jnode *n, jv *v, const char *what, int64_t dflt, int64_t *out)
{
    if (!v || v->t == JV_NONE) {
        *out = dflt;
        return 0;
    }
    if (v->t == JV_INT || v->t == JV_BOOL) {
        *out = v->t == JV_INT ? v->u.i : v->u.b;
        return 0;
    }
    return fail(c, n, "%s: expected an integer, got %s", what, jv_type_name(*v));
}

static int want_str(ctx *c, const jnode *n, jv *v, const char *what, jstr **out)
{
    if (!v || v->t != JV_STR)
        return fail(c, n, "%s: expected a string, got %s", what, v ? jv_type_name(*v) : "nothing");
    *out = v->u.s;
    return 0;
}

/* ---- items of what a loop or filter walks */

static int iterate(ctx *c, const jnode *n, jv v, jv *out_list)
{
    switch (v.t) {
    case JV_UNDEF: *out_list = jv_list(&c->a); break;
    case JV_LIST: *out_list = v; out_list->flags = 0; return 0;
    case JV_DICT:
        if (v.flags & JVF_NS)
            return fail(c, n, "a namespace is not iterable");
        *out_list = jv_list(&c->a);
        for (size_t i = 0; out_list->t == JV_LIST && i < v.u.d->n; i++)
            if (jl_push(&c->a, out_list->u.l, v.u.d->k[i]))
                return oom(c, n);
        break;
    case JV_STR: {
        *out_list = jv_list(&c->a);
        for (size_t i = 0; out_list->t == JV_LIST && i < v.u.s->n;) {
            size_t k;
            cp_at(v.u.s->s, v.u.s->n, i, &k);
            jv ch;
            if (mkstr(c, n, v.u.s->s + i, k, &ch) || jl_push(&c->a, out_list->u.l, ch))
                return oom(c, n);
            i += k;
        }
        break;
    }
    default: return fail(c, n, "'%s' object is not iterable", jv_type_name(v));
    }
    return out_list->t == JV_LIST ? 0 : oom(c, n);
}

static jv pair(ctx *c, jv k, jv v)
{
    jv t = jv_list(&c->a);
    if (t.t == JV_LIST) {
        t.flags = JVF_TUPLE;
        if (jl_push(&c->a, t.u.l, k) || jl_push(&c->a, t.u.l, v))
            t.t = JV_UNDEF;
    }
    return t;
}

static int items_of(ctx *c, const jnode *n, jv d, jv *out)
{
    if (d.t == JV_UNDEF) {
        *out = jv_list(&c->a);
        return out->t == JV_LIST ? 0 : oom(c, n);
    }
    if (d.t != JV_DICT)
        return fail(c, n, "items: expected a mapping, got %s", jv_type_name(d));
    *out = jv_list(&c->a);
    if (out->t != JV_LIST)
        return oom(c, n);
    for (size_t i = 0; i < d.u.d->n; i++) {
        jv p = pair(c, d.u.d->k[i], d.u.d->v[i]);
        if (p.t != JV_LIST || jl_push(&c->a, out->u.l, p))
            return oom(c, n);
    }
    return 0;
}

/* ---- attribute and item access (jinja2's getattr / getitem) */

static const char *const str_methods[] = {"startswith", "endswith", "split", "rsplit", "strip", "lstrip",
    "rstrip", "replace", "upper", "lower", "title", "capitalize", "format", "find", "rfind", "count", "join",
    "splitlines", "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", "index", NULL};
static const char *const dict_methods[] = {"get", "keys", "values", "items", "pop", "update", "copy",
    "setdefault", "clear", "popitem", NULL};
static const char *const list_methods[] = {"append", "pop", "index", "count", "extend", "insert", "remove",
    "reverse", "sort", "clear", "copy", NULL};

static int in_names(const char *const *names, const char *w)
{
    for (int i = 0; names[i]; i++)
        if (!strcmp(names[i], w))
            return 1;
    return 0;
}

static int method(ctx *c, const jnode *n, jv self, const char *name, jv *out)
{
    jfunc *f = ja_alloc(&c->a, sizeof *f);
    if (!f)
        return oom(c, n);
    f->kind = JF_METHOD;
    f->name = name;
    f->self = self;
    out->t = JV_FUNC;
    out->flags = 0;
    out->u.fn = f;
    return 0;
}

static int get_attr(ctx *c, const jnode *n, jv v, const char *name, jv *out)
{
    switch (v.t) {
    case JV_UNDEF: return fail_undef(c, n, v);
    case JV_DICT:
        if (v.flags & JVF_LOOP && !strcmp(name, "cycle"))
            return method(c, n, v, "cycle", out);
        if (!(v.flags & (JVF_NS | JVF_LOOP)) && in_names(dict_methods, name))
            return method(c, n, v, name, out);
        {
            jv *x = jd_gets(v.u.d, name);
            if (x) {
                *out = *x;
                return 0;
            }
        }
        break;
    case JV_STR:
        if (in_names(str_methods, name))
            return method(c, n, v, name, out);
        break;
    case JV_LIST:
        if (!(v.flags & JVF_TUPLE) && in_names(list_methods, name))
            return method(c, n, v, name, out);
        if ((v.flags & JVF_TUPLE) && (!strcmp(name, "index") || !strcmp(name, "count")))
            return method(c, n, v, name, out);
        break;
    default: break;
    }
    char m[160];
    snprintf(m, sizeof m, "'%s' has no attribute '%s'", jv_type_name(v), name);
    *out = undef_named(c, m);
    return 0;
}

static int get_item(ctx *c, const jnode *n, jv v, jv key, jv *out)
{
    if (v.t == JV_UNDEF)
        return fail_undef(c, n, v);
    if (v.t == JV_DICT) {
        jv *x = jd_get(v.u.d, key);
        if (x) {
            *out = *x;
            return 0;
        }
    } else if ((v.t == JV_LIST || v.t == JV_STR) && (key.t == JV_INT || key.t == JV_BOOL)) {
        int64_t i = key.t == JV_INT ? key.u.i : key.u.b;
        if (v.t == JV_LIST) {
            int64_t len = (int64_t)v.u.l->n;
            if (i < 0)
                i += len;
            if (i >= 0 && i < len) {
                *out = v.u.l->v[i];
                return 0;
            }
        } else {
            size_t cnt;
            size_t *off = char_offsets(c, v.u.s, &cnt);
            if (!off)
                return oom(c, n);
            if (i < 0)
                i += (int64_t)cnt;
            if (i >= 0 && i < (int64_t)cnt)
                return mkstr(c, n, v.u.s->s + off[i], off[i + 1] - off[i], out);
        }
    }
    if (key.t == JV_STR && v.t != JV_DICT)
        return get_attr(c, n, v, key.u.s->s, out);
    *out = undef_named(c, "item");
    return 0;
}

static int64_t clampi(int64_t i, int64_t len, int64_t lo, int64_t hi)
{
    if (i < 0)
        i += len;
    return i < lo ? lo : i > hi ? hi : i;
}

static int do_slice(ctx *c, const jnode *n, jv v, jv *st, jv *en, jv *sp, jv *out)
{
    int64_t step = 1;
    if (want_int(c, n, sp, "slice", 1, &step))
        return X_ERR;
    if (step == 0)
        return fail(c, n, "slice step cannot be zero");
    size_t cnt;
    size_t *off = NULL;
    if (v.t == JV_STR) {
        if (!(off = char_offsets(c, v.u.s, &cnt)))
            return oom(c, n);
    } else if (v.t == JV_LIST)
        cnt = v.u.l->n;
    else if (v.t == JV_UNDEF)
        return fail_undef(c, n, v);
    else
        return fail(c, n, "cannot slice %s", jv_type_name(v));
    int64_t len = (int64_t)cnt, a = 0, b = 0;
    if (step > 0) {
        if (want_int(c, n, st, "slice", 0, &a) || want_int(c, n, en, "slice", len, &b))
            return X_ERR;
        if (st && st->t != JV_NONE)
            a = clampi(a, len, 0, len);
        if (en && en->t != JV_NONE)
            b = clampi(b, len, 0, len);
    } else {
        if (want_int(c, n, st, "slice", len - 1, &a) || want_int(c, n, en, "slice", -1, &b))
            return X_ERR;
        if (st && st->t != JV_NONE)
            a = clampi(a, len, -1, len - 1);
        if (en && en->t != JV_NONE)
            b = clampi(b, len, -1, len - 1);
    }
    jbuf sb = {0};
    sb.max = c->lim.max_memory;
    jv l = {0};
    if (v.t == JV_LIST) {
        l = jv_list(&c->a);
        if (l.t != JV_LIST)
            return oom(c, n);
        l.flags = v.flags & JVF_TUPLE;
    }
    for (int64_t i = a; step > 0 ? i < b : i > b; i += step) {
        if (v.t == JV_LIST) {
            if (jl_push(&c->a, l.u.l, v.u.l->v[i]))
                return oom(c, n);
        } else
            jb_put(&sb, v.u.s->s + off[i], off[i + 1] - off[i]);
    }
    if (v.t == JV_LIST) {
        *out = l;
        return 0;
    }
    int rc = sb.over ? oom(c, n) : mkstr(c, n, sb.p ? sb.p : "", sb.n, out);
    free(sb.p);
    return rc;
}

/* ---- operators */

static int is_intish(jv v)
{
    return v.t == JV_INT || v.t == JV_BOOL;
}

static int64_t ival(jv v)
{
    return v.t == JV_INT ? v.u.i : v.u.b;
}

static double fval(jv v)
{
    return v.t == JV_FLOAT ? v.u.f : (double)ival(v);
}

static int is_numv(jv v)
{
    return is_intish(v) || v.t == JV_FLOAT;
}

static const char *op_name(int op)
{
    static const char *const names[] = {"?", "+", "-", "*", "/", "//", "%", "**", "~"};
    return op > 0 && op <= JO_CAT ? names[op] : "?";
}

static int printf_format(ctx *c, const jnode *n, jv fmt, jv argv, jv *out);

static int binop(ctx *c, const jnode *n, int op, jv x, jv y, jv *out)
{
    if (op == JO_CAT) {
        jv a = str_of(c, x), b = str_of(c, y);
        if (a.t != JV_STR || b.t != JV_STR)
            return oom(c, n);
        if (a.u.s->n + b.u.s->n > c->lim.max_output)
            return fail(c, n, "string longer than %zu bytes", c->lim.max_output);
        jstr *r = js_new(&c->a, NULL, a.u.s->n + b.u.s->n);
        if (!r)
            return oom(c, n);
        memcpy(r->s, a.u.s->s, a.u.s->n);
        memcpy(r->s + a.u.s->n, b.u.s->s, b.u.s->n);
        out->t = JV_STR;
        out->flags = 0;
        out->u.s = r;
        return 0;
    }
    if (x.t == JV_UNDEF)
        return fail_undef(c, n, x);
    if (y.t == JV_UNDEF)
        return fail_undef(c, n, y);
    if (is_numv(x) && is_numv(y)) {
        if (is_intish(x) && is_intish(y) && op != JO_DIV) {
            int64_t a = ival(x), b = ival(y), r;
            switch (op) {
            case JO_ADD: if (__builtin_add_overflow(a, b, &r)) goto big; break;
            case JO_SUB: if (__builtin_sub_overflow(a, b, &r)) goto big; break;
            case JO_MUL: if (__builtin_mul_overflow(a, b, &r)) goto big; break;
            case JO_FDIV:
            case JO_MOD:
                if (!b)
                    return fail(c, n, "integer division or modulo by zero");
                if (a == INT64_MIN && b == -1)
                    goto big;
                r = op == JO_FDIV ? a / b : a % b;
                if (op == JO_FDIV && (a % b) && ((a < 0) != (b < 0)))
                    r--;
                if (op == JO_MOD && r && ((r < 0) != (b < 0)))
                    r += b;
                break;
            case JO_POW:
                if (b < 0) {
                    *out = jv_float(pow((double)a, (double)b));
                    return 0;
                }
                r = 1;
                for (int64_t i = 0; i < b; i++)
                    if (__builtin_mul_overflow(r, a, &r))
                        goto big;
                break;
            default: return fail(c, n, "bad operator");
            }
            *out = jv_int(r);
            return 0;
        big:
            return fail(c, n, "integer overflow in '%s'", op_name(op));
        }
        double a = fval(x), b = fval(y), r;
        switch (op) {
        case JO_ADD: r = a + b; break;
        case JO_SUB: r = a - b; break;
        case JO_MUL: r = a * b; break;
        case JO_DIV:
            if (b == 0)
                return fail(c, n, "division by zero");
            r = a / b;
            break;
        case JO_FDIV:
            if (b == 0)
                return fail(c, n, "float floor division by zero");
            r = floor(a / b);
            break;
        case JO_MOD:
            if (b == 0)
                return fail(c, n, "float modulo by zero");
            r = fmod(a, b);
            if (r != 0 && ((r < 0) != (b < 0)))
                r += b;
            break;
        case JO_POW: r = pow(a, b); break;
        default: return fail(c, n, "bad operator");
        }
        *out = jv_float(r);
        return 0;
    }
    if (op == JO_ADD && x.t == JV_STR && y.t == JV_STR)
        return binop(c, n, JO_CAT, x, y, out);
    if (op == JO_ADD && x.t == JV_LIST && y.t == JV_LIST && (x.flags & JVF_TUPLE) == (y.flags & JVF_TUPLE)) {
        jv l = jv_list(&c->a);
        if (l.t != JV_LIST)
            return oom(c, n);
        l.flags = x.flags & JVF_TUPLE;
        for (size_t i = 0; i < x.u.l->n; i++)
            if (jl_push(&c->a, l.u.l, x.u.l->v[i]))
                return oom(c, n);
        for (size_t i = 0; i < y.u.l->n; i++)
            if (jl_push(&c->a, l.u.l, y.u.l->v[i]))
                return oom(c, n);
        *out = l;
        return 0;
    }
    if (op == JO_MUL && (x.t == JV_STR || x.t == JV_LIST) && is_intish(y)) {
        jv t = x;
        x = y;
        y = t;
    }
    if (op == JO_MUL && is_intish(x) && (y.t == JV_STR || y.t == JV_LIST)) {
        int64_t k = ival(x);
        if (y.t == JV_STR) {
            if (k > 0 && y.u.s->n && (uint64_t)k > c->lim.max_output / y.u.s->n)
                return fail(c, n, "string longer than %zu bytes", c->lim.max_output);
            jbuf b = {0};
            b.max = c->lim.max_output;
            for (int64_t i = 0; i < k; i++)
                jb_put(&b, y.u.s->s, y.u.s->n);
            int rc = mkstr(c, n, b.p ? b.p : "", b.n, out);
            free(b.p);
            return rc;
        }
        jv l = jv_list(&c->a);
        if (l.t != JV_LIST)
            return oom(c, n);
        l.flags = y.flags & JVF_TUPLE;
        for (int64_t i = 0; i < k; i++)
            for (size_t j = 0; j < y.u.l->n; j++)
                if (jl_push(&c->a, l.u.l, y.u.l->v[j]))
                    return oom(c, n);
        *out = l;
        return 0;
    }
    if (op == JO_MOD && x.t == JV_STR)
        return printf_format(c, n, x, y, out);
    return fail(c, n, "unsupported operand types for %s: %s and %s", op_name(op), jv_type_name(x), jv_type_name(y));
}

static int contains(ctx *c, const jnode *n, jv needle, jv hay, int *res)
{
    switch (hay.t) {
    case JV_STR:
        if (needle.t != JV_STR)
            return fail(c, n, "'in <string>' requires string as left operand, not %s", jv_type_name(needle));
        *res = !needle.u.s->n || eng_memmem(hay.u.s->s, hay.u.s->n, needle.u.s->s, needle.u.s->n) != NULL;
        return 0;
    case JV_LIST:
        *res = 0;
        for (size_t i = 0; i < hay.u.l->n && !*res; i++)
            *res = jv_eq(hay.u.l->v[i], needle);
        return 0;
    case JV_DICT:
        if (hay.flags & JVF_NS)
            break;
        *res = jd_get(hay.u.d, needle) != NULL;
        return 0;
    case JV_UNDEF: *res = 0; return 0;
    default: break;
    }
    return fail(c, n, "argument of type '%s' is not iterable", jv_type_name(hay));
}

static int compare(ctx *c, const jnode *n, int op, jv x, jv y, int *res)
{
    switch (op) {
    case JO_EQ: *res = jv_eq(x, y); return 0;
    case JO_NE: *res = !jv_eq(x, y); return 0;
    case JO_IN: return contains(c, n, x, y, res);
    case JO_NOTIN:
        if (contains(c, n, x, y, res))
            return X_ERR;
        *res = !*res;
        return 0;
    default: break;
    }
    if (x.t == JV_UNDEF)
        return fail_undef(c, n, x);
    if (y.t == JV_UNDEF)
        return fail_undef(c, n, y);
    int err = 0, k = jv_cmp(x, y, &err, 0);
    static const char *const names[] = {"<", "<=", ">", ">="};
    if (err)
        return fail(c, n, "'%s' not supported between %s and %s", names[op - JO_LT], jv_type_name(x),
                    jv_type_name(y));
    *res = op == JO_LT ? k < 0 : op == JO_LE ? k <= 0 : op == JO_GT ? k > 0 : k >= 0;
    return 0;
}

/* "%s %d" % args, the printf-style formatting Python strings have */
static int printf_format(ctx *c, const jnode *n, jv fmt, jv argv, jv *out)
{
    jbuf b = {0};
    b.max = c->lim.max_output;
    size_t ai = 0;
    int tuple = argv.t == JV_LIST && (argv.flags & JVF_TUPLE);
    const char *s = fmt.u.s->s;
    size_t len = fmt.u.s->n;
    int rc = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '%') {
            jb_putc(&b, s[i]);
            continue;
        }
        if (++i >= len) {
            rc = fail(c, n, "incomplete format");
            break;
        }
        if (s[i] == '%') {
            jb_putc(&b, '%');
            continue;
        }
        char spec[32];
        size_t k = 0;
        spec[k++] = '%';
        while (i < len && strchr("-+ #0123456789.", s[i]) && k < 20)
            spec[k++] = s[i++];
        spec[k] = 0;
        if (i >= len) {
            rc = fail(c, n, "incomplete format");
            break;
        }
        char conv = s[i];
        jv v;
        if (tuple) {
            if (ai >= argv.u.l->n) {
                rc = fail(c, n, "not enough arguments for format string");
                break;
            }
            v = argv.u.l->v[ai++];
        } else {
            if (ai++) {
                rc = fail(c, n, "not enough arguments for format string");
                break;
            }
            v = argv;
        }
        char t[128];
        if (conv == 's' || conv == 'r') {
            jbuf vb = {0};
            vb.max = c->lim.max_output;
            if (conv == 's')
                jv_write_str(&vb, v, 0);
            else
                jv_write_repr(&vb, v, 0);
            /* flags, width and precision count characters */
            int left = 0;
            long width = 0, prec = -1;
            const char *q = spec + 1;
            while (*q && strchr("-+ #0", *q))
                left |= *q++ == '-';
            width = strtol(q, (char **)&q, 10);
            if (*q == '.')
                prec = strtol(q + 1, NULL, 10);
            size_t used = vb.n;
            if (prec >= 0) { /* keep prec characters */
                size_t chars = 0, i2 = 0;
                while (i2 < vb.n && chars < (size_t)prec) {
                    i2++;
                    while (i2 < vb.n && ((unsigned char)vb.p[i2] & 0xC0) == 0x80)
                        i2++;
                    chars++;
                }
                used = i2;
            }
            size_t chars = utf8_len(vb.p ? vb.p : "", used);
            if (width > 4096)
                width = 4096;
            for (long pad = width - (long)chars; !left && pad > 0; pad--)
                jb_putc(&b, ' ');
            jb_put(&b, vb.p ? vb.p : "", used);
            for (long pad = width - (long)chars; left && pad > 0; pad--)
                jb_putc(&b, ' ');
            free(vb.p);
        } else if (conv == 'd' || conv == 'i') {
            if (!is_numv(v)) {
                rc = fail(c, n, "%%d format: a number is required, not %s", jv_type_name(v));
                break;
            }
            spec[k++] = 'l';
            spec[k++] = 'l';
            spec[k++] = 'd';
            spec[k] = 0;
            snprintf(t, sizeof t, spec, (long long)(v.t == JV_FLOAT ? (int64_t)v.u.f : ival(v)));
            jb_puts(&b, t);
        } else if (strchr("feEgGxX", conv)) {
            if (!is_numv(v)) {
                rc = fail(c, n, "%%%c format: a number is required, not %s", conv, jv_type_name(v));
                break;
            }
            spec[k++] = conv;
            spec[k] = 0;
            if (conv == 'x' || conv == 'X') {
                spec[k - 1] = 'l';
                spec[k++] = 'l';
                spec[k++] = conv;
                spec[k] = 0;
                snprintf(t, sizeof t, spec, (long long)ival(v));
            } else
                snprintf(t, sizeof t, spec, fval(v));
            jb_puts(&b, t);
        } else {
            rc = fail(c, n, "unsupported format character '%c'", conv);
            break;
        }
    }
    if (!rc && tuple && ai < argv.u.l->n)
        rc = fail(c, n, "not all arguments converted during string formatting");
    if (!rc)
        rc = b.over ? oom(c, n) : mkstr(c, n, b.p ? b.p : "", b.n, out);
    free(b.p);
    return rc;
}

/* "{} {name}".format(...) */
static int str_format(ctx *c, const jnode *n, const jstr *f, args *a, jv *out)
{
    jbuf b = {0};
    b.max = c->lim.max_output;
    size_t auto_i = 0;
    int rc = 0;
    for (size_t i = 0; i < f->n && !rc; i++) {
        char ch = f->s[i];
        if (ch == '}' && i + 1 < f->n && f->s[i + 1] == '}') {
            jb_putc(&b, '}');
            i++;
            continue;
        }
        if (ch != '{') {
            jb_putc(&b, ch);
            continue;
        }
        if (i + 1 < f->n && f->s[i + 1] == '{') {
            jb_putc(&b, '{');
            i++;
            continue;
        }
        const char *end = memchr(f->s + i, '}', f->n - i);
        if (!end) {
            rc = fail(c, n, "format: single '{' encountered");
            break;
        }
        char field[128];
        size_t fl = (size_t)(end - (f->s + i + 1));
        if (fl >= sizeof field) {
            rc = fail(c, n, "format: field too long");
            break;
        }
        memcpy(field, f->s + i + 1, fl);
        field[fl] = 0;
        char *colon = strchr(field, ':');
        if (colon)
            *colon = 0;
        jv *v;
        if (!field[0])
            v = arg(a, auto_i++, NULL);
        else if (field[0] >= '0' && field[0] <= '9')
            v = arg(a, (size_t)atoi(field), NULL);
        else
            v = arg(a, (size_t)-1, field);
        if (!v) {
            rc = fail(c, n, "format: no argument for '{%s}'", field);
            break;
        }
        jv_write_str(&b, *v, 0);
        i = (size_t)(end - f->s);
    }
    if (!rc)
        rc = b.over ? oom(c, n) : mkstr(c, n, b.p ? b.p : "", b.n, out);
    free(b.p);
    return rc;
}

/* ---- tests */

static const char *const test_names[] = {"defined", "undefined", "none", "string", "number", "integer", "float",
    "boolean", "true", "false", "mapping", "iterable", "sequence", "callable", "sameas", "equalto", "eq", "==",
    "ne", "!=", "lt", "<", "lessthan", "le", "<=", "gt", ">", "greaterthan", "ge", ">=", "in", "odd", "even",
    "divisibleby", "lower", "upper", "escaped", "filter", "test", NULL};

int jinja_test_known(const char *name)
{
    return in_names(test_names, name);
}

static int run_test(ctx *c, const jnode *n, const char *name, jv v, args *a, int *res)
{
    if (!jinja_test_known(name))
        return fail(c, n, "no test named '%s'", name);
    jv *x = arg(a, 0, NULL);
    if (!strcmp(name, "defined")) *res = v.t != JV_UNDEF;
    else if (!strcmp(name, "undefined")) *res = v.t == JV_UNDEF;
    else if (!strcmp(name, "none")) *res = v.t == JV_NONE;
    else if (!strcmp(name, "string")) *res = v.t == JV_STR;
    else if (!strcmp(name, "number")) *res = is_numv(v);
    else if (!strcmp(name, "integer")) *res = v.t == JV_INT;
    else if (!strcmp(name, "float")) *res = v.t == JV_FLOAT;
    else if (!strcmp(name, "boolean")) *res = v.t == JV_BOOL;
    else if (!strcmp(name, "true")) *res = v.t == JV_BOOL && v.u.b;
    else if (!strcmp(name, "false")) *res = v.t == JV_BOOL && !v.u.b;
    else if (!strcmp(name, "mapping")) *res = v.t == JV_DICT && !(v.flags & JVF_LOOP);
    else if (!strcmp(name, "iterable")) *res = jv_is_seq(v) || v.t == JV_UNDEF;
    else if (!strcmp(name, "sequence")) *res = jv_is_seq(v);
    else if (!strcmp(name, "callable")) *res = v.t == JV_FUNC;
    else if (!strcmp(name, "escaped")) *res = 0;
    else if (!strcmp(name, "filter")) *res = v.t == JV_STR && jinja_filter_known(v.u.s->s);
    else if (!strcmp(name, "test")) *res = v.t == JV_STR && jinja_test_known(v.u.s->s);
    else if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        if (v.t != JV_STR) {
            *res = 0;
            return 0;
        }
        jv t;
        if (do_case(c, n, v.u.s, name[0] == 'l' ? 0 : 1, &t))
            return X_ERR;
        int cased = 0;
        for (size_t i = 0; i < v.u.s->n; i++) {
            unsigned char ch = (unsigned char)v.u.s->s[i];
            cased |= (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch >= 0x80;
        }
        *res = cased && jv_eq(t, v);
    } else if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
        if (!is_intish(v))
            return fail(c, n, "test '%s' needs an integer, got %s", name, jv_type_name(v));
        int64_t d = 2;
        if (name[0] == 'd' && want_int(c, n, x, "divisibleby", 0, &d))
            return X_ERR;
        if (!d)
            return fail(c, n, "divisibleby(0)");
        int64_t r = ival(v) % d;
        *res = name[0] == 'o' ? r != 0 : r == 0;
    } else {
        if (!x)
            return fail(c, n, "test '%s' needs an argument", name);
        if (!strcmp(name, "sameas"))
            *res = v.t == x->t && (v.t == JV_NONE || v.t == JV_UNDEF || jv_eq(v, *x)) &&
                   (v.t != JV_LIST || v.u.l == x->u.l) && (v.t != JV_DICT || v.u.d == x->u.d);
        else if (!strcmp(name, "in"))
            return contains(c, n, v, *x, res);
        else {
            int op = !strcmp(name, "equalto") || !strcmp(name, "eq") || !strcmp(name, "==") ? JO_EQ
                   : !strcmp(name, "ne") || !strcmp(name, "!=") ? JO_NE
                   : !strcmp(name, "lt") || !strcmp(name, "<") || !strcmp(name, "lessthan") ? JO_LT
                   : !strcmp(name, "le") || !strcmp(name, "<=") ? JO_LE
                   : !strcmp(name, "gt") || !strcmp(name, ">") || !strcmp(name, "greaterthan") ? JO_GT : JO_GE;
            return compare(c, n, op, v, *x, res);
        }
    }
    return 0;
}

/* ---- filters */

static const char *const filter_names[] = {"abs", "attr", "batch", "capitalize", "center", "count", "d",
    "default", "dictsort", "e", "escape", "first", "float", "forceescape", "format", "groupby", "indent", "int",
    "items", "join", "last", "length", "list", "lower", "map", "max", "min", "pprint", "reject", "rejectattr",
    "replace", "reverse", "round", "safe", "select", "selectattr", "slice", "sort", "string", "striptags", "sum",
    "title", "tojson", "trim", "truncate", "unique", "upper", "urlencode", "wordcount", "wordwrap", "xmlattr",
    "filesizeformat", "random", "urlize", NULL};

int jinja_filter_known(const char *name)
{
    return in_names(filter_names, name);
}

static int apply_filter(ctx *c, const jnode *n, const char *name, jv v, args *a, jv *out);

/* attribute path "a.b" or an integer index of an item, as jinja2's
 * make_attrgetter does */
static int attr_path(ctx *c, const jnode *n, jv v, jv path, jv *out)
{
    if (path.t == JV_INT)
        return get_item(c, n, v, path, out);
    if (path.t != JV_STR)
        return fail(c, n, "attribute name must be a string");
    const char *p = path.u.s->s;
    *out = v;
    while (*p) {
        const char *dot = strchr(p, '.');
        size_t k = dot ? (size_t)(dot - p) : strlen(p);
        jv key;
        int digits = k > 0;
        for (size_t i = 0; i < k; i++)
            digits &= p[i] >= '0' && p[i] <= '9';
        if (digits)
            key = jv_int(strtoll(p, NULL, 10));
        else if (mkstr(c, n, p, k, &key))
            return X_ERR;
        if (get_item(c, n, *out, key, out))
            return X_ERR;
        p += k + (dot ? 1 : 0);
    }
    return 0;
}

/* select / reject / selectattr / rejectattr */
static int select_items(ctx *c, const jnode *n, jv seq, args *a, int by_attr, int keep, jv *out)
{
    jv items;
    if (!jv_truthy(seq)) { /* jinja2 walks only a true value */
        *out = jv_list(&c->a);
        return out->t == JV_LIST ? 0 : oom(c, n);
    }
    if (iterate(c, n, seq, &items))
        return X_ERR;
    *out = jv_list(&c->a);
    if (out->t != JV_LIST)
        return oom(c, n);
    size_t first_arg = by_attr ? 1 : 0;
    jv *attrname = by_attr ? arg(a, 0, NULL) : NULL;
    if (by_attr && !attrname)
        return fail(c, n, "%s: missing attribute name", keep ? "selectattr" : "rejectattr");
    jv *testname = arg(a, first_arg, NULL);
    if (testname && testname->t != JV_STR)
        return fail(c, n, "test name must be a string");
    if (testname && !jinja_test_known(testname->u.s->s))
        return fail(c, n, "no test named '%s'", testname->u.s->s);
    args ta = {0};
    if (a->np > first_arg + 1) {
        ta.pos = a->pos + first_arg + 1;
        ta.np = a->np - first_arg - 1;
    }
    for (size_t i = 0; i < items.u.l->n; i++) {
        jv x = items.u.l->v[i], val = x;
        if (by_attr && attr_path(c, n, x, *attrname, &val))
            return X_ERR;
        int r;
        if (testname) {
            if (run_test(c, n, testname->u.s->s, val, &ta, &r))
                return X_ERR;
        } else
            r = jv_truthy(val);
        if (r == keep && jl_push(&c->a, out->u.l, x))
            return oom(c, n);
    }
    return 0;
}

static int sort_list(ctx *c, const jnode *n, jv *items, size_t cnt, int reverse, int ci, jv *keys)
{
    /* stable insertion sort (template lists are short); keys parallel */
    for (size_t i = 1; i < cnt; i++)
        for (size_t j = i; j > 0; j--) {
            int err = 0;
            jv ka = keys ? keys[j - 1] : items[j - 1], kb = keys ? keys[j] : items[j];
            int k = jv_cmp(ka, kb, &err, ci);
            if (err)
                return fail(c, n, "sort: cannot compare %s and %s", jv_type_name(ka), jv_type_name(kb));
            if (reverse ? k >= 0 : k <= 0)
                break;
            jv t = items[j];
            items[j] = items[j - 1];
            items[j - 1] = t;
            if (keys) {
                t = keys[j];
                keys[j] = keys[j - 1];
                keys[j - 1] = t;
            }
        }
    return 0;
}

static int copy_list(ctx *c, const jnode *n, jv from, jv *out)
{
    *out = jv_list(&c->a);
    if (out->t != JV_LIST)
        return oom(c, n);
    for (size_t i = 0; i < from.u.l->n; i++)
        if (jl_push(&c->a, out->u.l, from.u.l->v[i]))
            return oom(c, n);
    return 0;
}

static int do_tojson(ctx *c, const jnode *n, jv v, args *a, jv *out)
{
    jv *ind = arg(a, 1, "indent"), *sep = arg(a, 2, "separators"), *sk = arg(a, 3, "sort_keys"),
       *ea = arg(a, 0, "ensure_ascii");
    int64_t indent = -1;
    if (ind && ind->t != JV_NONE && want_int(c, n, ind, "tojson indent", -1, &indent))
        return X_ERR;
    if (ea && jv_truthy(*ea))
        return fail(c, n, "tojson: ensure_ascii is not supported");
    const char *isep = indent >= 0 ? "," : ", ", *ksep = ": ";
    if (sep && sep->t != JV_NONE) {
        if (sep->t != JV_LIST || sep->u.l->n != 2 || sep->u.l->v[0].t != JV_STR || sep->u.l->v[1].t != JV_STR)
            return fail(c, n, "tojson: separators must be a pair of strings");
        isep = sep->u.l->v[0].u.s->s;
        ksep = sep->u.l->v[1].u.s->s;
    }
    jbuf b = {0};
    b.max = c->lim.max_output;
    const char *why = NULL;
    int rc = 0;
    if (jv_write_json(&b, v, indent > 1000 ? 1000 : (int)indent, isep, ksep, sk && jv_truthy(*sk), 0, 0, &why))
        rc = fail(c, n, "tojson: %s", why ? why : "output too large");
    else
        rc = mkstr(c, n, b.p ? b.p : "", b.n, out);
    free(b.p);
    return rc;
}

static int apply_filter(ctx *c, const jnode *n, const char *f, jv v, args *a, jv *out)
{
    jv *a0 = arg(a, 0, NULL);
    if (!jinja_filter_known(f))
        return fail(c, n, "no filter named '%s'", f);
    if (!strcmp(f, "safe") || !strcmp(f, "e") || !strcmp(f, "escape") || !strcmp(f, "forceescape")) {
        if (f[0] == 's') {
            *out = v;
            return 0;
        }
        jv s = str_of(c, v);
        if (s.t != JV_STR)
            return oom(c, n);
        jbuf b = {0};
        b.max = c->lim.max_output;
        for (size_t i = 0; i < s.u.s->n; i++) {
            char ch = s.u.s->s[i];
            const char *r = ch == '&' ? "&amp;" : ch == '<' ? "&lt;" : ch == '>' ? "&gt;" : ch == '"' ? "&#34;"
                          : ch == '\'' ? "&#39;" : NULL;
            if (r)
                jb_puts(&b, r);
            else
                jb_putc(&b, ch);
        }
        int rc = mkstr(c, n, b.p ? b.p : "", b.n, out);
        free(b.p);
        return rc;
    }
    if (!strcmp(f, "tojson"))
        return do_tojson(c, n, v, a, out);
    if (!strcmp(f, "default") || !strcmp(f, "d")) {
        jv *boolean = arg(a, 1, "boolean");
        jv dflt = a0 ? *a0 : jv_undef();
        if (!a0) {
            jv *k = arg(a, (size_t)-1, "default_value");
            if (k)
                dflt = *k;
            else
                dflt = jv_str(&c->a, "", 0);
        }
        *out = (v.t == JV_UNDEF || (boolean && jv_truthy(*boolean) && !jv_truthy(v))) ? dflt : v;
        return 0;
    }
    if (!strcmp(f, "length") || !strcmp(f, "count")) {
        switch (v.t) {
        case JV_UNDEF: *out = jv_int(0); return 0;
        case JV_STR: *out = jv_int((int64_t)utf8_len(v.u.s->s, v.u.s->n)); return 0;
        case JV_LIST: *out = jv_int((int64_t)v.u.l->n); return 0;
        case JV_DICT:
            if (!(v.flags & JVF_NS)) {
                *out = jv_int((int64_t)v.u.d->n);
                return 0;
            }
            /* fall through */
        default: return fail(c, n, "object of type '%s' has no len()", jv_type_name(v));
        }
    }
    if (!strcmp(f, "string")) {
        *out = str_of(c, v);
        return out->t == JV_STR ? 0 : oom(c, n);
    }
    if (!strcmp(f, "trim") || !strcmp(f, "upper") || !strcmp(f, "lower") || !strcmp(f, "capitalize") ||
        !strcmp(f, "title") || !strcmp(f, "replace") || !strcmp(f, "indent") || !strcmp(f, "center") ||
        !strcmp(f, "wordcount") || !strcmp(f, "striptags") || !strcmp(f, "truncate")) {
        jv s = str_of(c, v);
        if (s.t != JV_STR)
            return oom(c, n);
        if (!strcmp(f, "trim")) {
            jv *chars = arg(a, 0, "chars");
            if (chars && chars->t != JV_STR && chars->t != JV_NONE)
                return fail(c, n, "trim: chars must be a string");
            return do_strip(c, n, s, 3, chars && chars->t == JV_STR ? chars->u.s : NULL, out);
        }
        if (!strcmp(f, "upper"))
            return do_case(c, n, s.u.s, 1, out);
        if (!strcmp(f, "lower"))
            return do_case(c, n, s.u.s, 0, out);
        if (!strcmp(f, "capitalize"))
            return do_case(c, n, s.u.s, 2, out);
        if (!strcmp(f, "title"))
            return do_case(c, n, s.u.s, 3, out);
        if (!strcmp(f, "replace")) {
            jstr *old, *new;
            int64_t cnt;
            jv *o = arg(a, 0, "old"), *nw = arg(a, 1, "new");
            if (o && o->t != JV_STR)
                *o = str_of(c, *o);
            if (nw && nw->t != JV_STR)
                *nw = str_of(c, *nw);
            if (want_str(c, n, o, "replace", &old) || want_str(c, n, nw, "replace", &new) ||
                want_int(c, n, arg(a, 2, "count"), "replace", -1, &cnt))
                return X_ERR;
            return do_replace(c, n, s.u.s, old, new, cnt, out);
        }
        if (!strcmp(f, "wordcount")) {
            jv parts;
            if (do_split(c, n, s.u.s, NULL, -1, &parts))
                return X_ERR;
            *out = jv_int((int64_t)parts.u.l->n);
            return 0;
        }
        if (!strcmp(f, "indent")) {
            jv *w = arg(a, 0, "width"), *first = arg(a, 1, "first"), *blank = arg(a, 2, "blank");
            jbuf ind = {0};
            ind.max = 4096;
            if (w && w->t == JV_STR)
                jb_put(&ind, w->u.s->s, w->u.s->n);
            else {
                int64_t k;
                if (want_int(c, n, w, "indent", 4, &k))
                    return X_ERR;
                for (int64_t i = 0; i < k && i < 4096; i++)
                    jb_putc(&ind, ' ');
            }
            const char *is = ind.p ? ind.p : "";
            jbuf b = {0};
            b.max = c->lim.max_output;
            int fi = first && jv_truthy(*first), bl = blank && jv_truthy(*blank);
            if (fi)
                jb_put(&b, is, ind.n);
            const char *p = s.u.s->s, *end = p + s.u.s->n;
            int line0 = 1;
            while (p < end) {
                const char *nl = p;
                while (nl < end && *nl != '\n' && *nl != '\r')
                    nl++;
                size_t ll = (size_t)(nl - p);
                if (!line0) {
                    jb_putc(&b, '\n');
                    if (ll || bl)
                        jb_put(&b, is, ind.n);
                }
                jb_put(&b, p, ll);
                line0 = 0;
                if (nl < end && *nl == '\r' && nl + 1 < end && nl[1] == '\n')
                    nl++;
                p = nl < end ? nl + 1 : end;
            }
            int rc = b.over ? oom(c, n) : mkstr(c, n, b.p ? b.p : "", b.n, out);
            free(b.p);
            free(ind.p);
            return rc;
        }
        return fail(c, n, "filter '%s' is not supported", f);
    }
    if (!strcmp(f, "join")) {
        jv items;
        jv *d = arg(a, 0, "d"), *attr = arg(a, 1, "attribute");
        if (iterate(c, n, v, &items))
            return X_ERR;
        jv sep = d ? str_of(c, *d) : jv_str(&c->a, "", 0);
        if (sep.t != JV_STR)
            return oom(c, n);
        jbuf b = {0};
        b.max = c->lim.max_output;
        for (size_t i = 0; i < items.u.l->n; i++) {
            jv x = items.u.l->v[i];
            if (attr && attr_path(c, n, x, *attr, &x)) {
                free(b.p);
                return X_ERR;
            }
            if (i)
                jb_put(&b, sep.u.s->s, sep.u.s->n);
            jv_write_str(&b, x, 0);
        }
        int rc = b.over ? oom(c, n) : mkstr(c, n, b.p ? b.p : "", b.n, out);
        free(b.p);
        return rc;
    }
    if (!strcmp(f, "items"))
        return items_of(c, n, v, out);
    if (!strcmp(f, "list")) {
        jv items;
        if (iterate(c, n, v, &items))
            return X_ERR;
        return copy_list(c, n, items, out);
    }
    if (!strcmp(f, "first") || !strcmp(f, "last")) {
        jv items;
        if (v.t == JV_UNDEF && f[0] == 'l')
            return fail_undef(c, n, v);
        if (iterate(c, n, v, &items))
            return X_ERR;
        if (!items.u.l->n) {
            *out = undef_named(c, f[0] == 'f' ? "No first item" : "No last item");
            return 0;
        }
        *out = items.u.l->v[f[0] == 'f' ? 0 : items.u.l->n - 1];
        return 0;
    }
    if (!strcmp(f, "reverse")) {
        if (v.t == JV_STR) {
            jv items;
            if (iterate(c, n, v, &items))
                return X_ERR;
            jbuf b = {0};
            b.max = c->lim.max_output;
            for (size_t i = items.u.l->n; i > 0; i--)
                jb_put(&b, items.u.l->v[i - 1].u.s->s, items.u.l->v[i - 1].u.s->n);
            int rc = mkstr(c, n, b.p ? b.p : "", b.n, out);
            free(b.p);
            return rc;
        }
        jv items, r;
        if (iterate(c, n, v, &items) || copy_list(c, n, items, &r))
            return X_ERR;
        for (size_t i = 0; i < r.u.l->n / 2; i++) {
            jv t = r.u.l->v[i];
            r.u.l->v[i] = r.u.l->v[r.u.l->n - 1 - i];
            r.u.l->v[r.u.l->n - 1 - i] = t;
        }
        *out = r;
        return 0;
    }
    if (!strcmp(f, "selectattr") || !strcmp(f, "rejectattr"))
        return select_items(c, n, v, a, 1, f[0] == 's', out);
    if (!strcmp(f, "select") || !strcmp(f, "reject"))
        return select_items(c, n, v, a, 0, f[0] == 's', out);
    if (!strcmp(f, "map")) {
        jv items;
        if (!jv_truthy(v))
            v = jv_undef();
        if (iterate(c, n, v, &items))
            return X_ERR;
        *out = jv_list(&c->a);
        if (out->t != JV_LIST)
            return oom(c, n);
        jv *attr = arg(a, (size_t)-1, "attribute"), *dflt = arg(a, (size_t)-1, "default");
        if (!attr && (!a0 || a0->t != JV_STR))
            return fail(c, n, "map: expected a filter name or attribute=");
        if (!attr && !jinja_filter_known(a0->u.s->s))
            return fail(c, n, "no filter named '%s'", a0->u.s->s);
        args fa = {0};
        if (!attr && a->np > 1) {
            fa.pos = a->pos + 1;
            fa.np = a->np - 1;
        }
        for (size_t i = 0; i < items.u.l->n; i++) {
            jv r;
            if (attr) {
                if (attr_path(c, n, items.u.l->v[i], *attr, &r))
                    return X_ERR;
                if (r.t == JV_UNDEF && dflt)
                    r = *dflt;
            } else if (apply_filter(c, n, a0->u.s->s, items.u.l->v[i], &fa, &r))
                return X_ERR;
            if (jl_push(&c->a, out->u.l, r))
                return oom(c, n);
        }
        return 0;
    }
    if (!strcmp(f, "unique")) {
        jv items;
        jv *attr = arg(a, 1, "attribute"), *cs = arg(a, 0, "case_sensitive");
        int ci = !(cs && jv_truthy(*cs));
        if (iterate(c, n, v, &items))
            return X_ERR;
        *out = jv_list(&c->a);
        jv seen = jv_list(&c->a);
        if (out->t != JV_LIST || seen.t != JV_LIST)
            return oom(c, n);
        for (size_t i = 0; i < items.u.l->n; i++) {
            jv k = items.u.l->v[i];
            if (attr && attr_path(c, n, k, *attr, &k))
                return X_ERR;
            if (ci && k.t == JV_STR && do_case(c, n, k.u.s, 0, &k))
                return X_ERR;
            int dup = 0;
            for (size_t j = 0; j < seen.u.l->n && !dup; j++)
                dup = jv_eq(seen.u.l->v[j], k);
            if (!dup && (jl_push(&c->a, seen.u.l, k) || jl_push(&c->a, out->u.l, items.u.l->v[i])))
                return oom(c, n);
        }
        return 0;
    }
    if (!strcmp(f, "sort") || !strcmp(f, "dictsort") || !strcmp(f, "min") || !strcmp(f, "max")) {
        jv items, r;
        int dict = f[0] == 'd', agg = !strcmp(f, "min") ? 1 : !strcmp(f, "max") ? 2 : 0;
        jv *rev = arg(a, dict ? 2 : 0, "reverse"), *cs = arg(a, dict ? 0 : 1, "case_sensitive"),
           *attr = arg(a, dict ? (size_t)-1 : 2, "attribute"), *by = dict ? arg(a, 1, "by") : NULL;
        if (agg) { /* min/max(case_sensitive, attribute) */
            cs = arg(a, 0, "case_sensitive");
            attr = arg(a, 1, "attribute");
            rev = NULL;
        }
        int ci = !(cs && jv_truthy(*cs));
        if (dict) {
            if (items_of(c, n, v, &r))
                return X_ERR;
        } else if (iterate(c, n, v, &items) || copy_list(c, n, items, &r))
            return X_ERR;
        size_t cnt = r.u.l->n;
        jv *keys = ja_alloc(&c->a, (cnt + 1) * sizeof *keys);
        if (!keys)
            return oom(c, n);
        int by_value = by && by->t == JV_STR && !strcmp(by->u.s->s, "value");
        for (size_t i = 0; i < cnt; i++) {
            jv k = r.u.l->v[i];
            if (dict)
                k = k.u.l->v[by_value ? 1 : 0];
            else if (attr && attr_path(c, n, k, *attr, &k))
                return X_ERR;
            if (ci && k.t == JV_STR && do_case(c, n, k.u.s, 0, &k))
                return X_ERR;
            keys[i] = k;
        }
        if (sort_list(c, n, r.u.l->v, cnt, rev && jv_truthy(*rev), 0, keys))
            return X_ERR;
        if (agg) {
            if (!cnt) {
                *out = undef_named(c, "No aggregated item, sequence was empty.");
                return 0;
            }
            *out = r.u.l->v[agg == 1 ? 0 : cnt - 1];
            if (agg == 2) { /* max keeps the first of equal maxima */
                size_t i = cnt - 1;
                while (i > 0 && jv_eq(keys[i - 1], keys[cnt - 1]))
                    i--;
                *out = r.u.l->v[i];
            }
            return 0;
        }
        *out = r;
        return 0;
    }
    if (!strcmp(f, "int") || !strcmp(f, "float")) {
        jv *dflt = arg(a, 0, "default");
        int isint = f[0] == 'i';
        jv d = dflt ? *dflt : isint ? jv_int(0) : jv_float(0);
        if (is_numv(v)) {
            *out = isint ? jv_int(v.t == JV_FLOAT ? (int64_t)v.u.f : ival(v)) : jv_float(fval(v));
            return 0;
        }
        if (v.t == JV_STR) {
            char *e;
            const char *s = v.u.s->s;
            if (isint) {
                long long i = strtoll(s, &e, 10);
                while (*e == ' ' || *e == '\n' || *e == '\t')
                    e++;
                if (e != s && !*e) {
                    *out = jv_int(i);
                    return 0;
                }
            }
            double x = strtod(s, &e);
            while (*e == ' ' || *e == '\n' || *e == '\t')
                e++;
            if (e != s && !*e) {
                *out = isint ? jv_int((int64_t)x) : jv_float(x);
                return 0;
            }
        }
        *out = d;
        return 0;
    }
    if (!strcmp(f, "abs")) {
        if (v.t == JV_FLOAT)
            *out = jv_float(fabs(v.u.f));
        else if (is_intish(v))
            *out = jv_int(ival(v) < 0 ? -ival(v) : ival(v));
        else
            return fail(c, n, "bad operand type for abs(): '%s'", jv_type_name(v));
        return 0;
    }
    if (!strcmp(f, "round")) {
        int64_t prec;
        if (!is_numv(v))
            return fail(c, n, "round: expected a number, got %s", jv_type_name(v));
        if (want_int(c, n, arg(a, 0, "precision"), "round", 0, &prec))
            return X_ERR;
        jv *meth = arg(a, 1, "method");
        double m = pow(10, (double)prec), x = fval(v) * m;
        const char *how = meth && meth->t == JV_STR ? meth->u.s->s : "common";
        x = !strcmp(how, "ceil") ? ceil(x) : !strcmp(how, "floor") ? floor(x) : round(x);
        *out = jv_float(x / m);
        return 0;
    }
    if (!strcmp(f, "sum")) {
        jv items, acc = jv_int(0);
        jv *attr = arg(a, 0, "attribute"), *start = arg(a, 1, "start");
        if (start)
            acc = *start;
        if (iterate(c, n, v, &items))
            return X_ERR;
        for (size_t i = 0; i < items.u.l->n; i++) {
            jv x = items.u.l->v[i];
            if (attr && attr_path(c, n, x, *attr, &x))
                return X_ERR;
            if (binop(c, n, JO_ADD, acc, x, &acc))
                return X_ERR;
        }
        *out = acc;
        return 0;
    }
    if (!strcmp(f, "format")) {
        if (v.t != JV_STR)
            return fail(c, n, "format: expected a string");
        jv t = jv_list(&c->a);
        if (t.t != JV_LIST)
            return oom(c, n);
        t.flags = JVF_TUPLE;
        for (size_t i = 0; i < a->np; i++)
            if (jl_push(&c->a, t.u.l, a->pos[i]))
                return oom(c, n);
        return printf_format(c, n, v, t, out);
    }
    if (!strcmp(f, "batch") || !strcmp(f, "slice")) {
        int64_t k;
        jv items;
        if (want_int(c, n, a0, f, 1, &k) || iterate(c, n, v, &items))
            return X_ERR;
        if (k <= 0)
            return fail(c, n, "%s: count must be positive", f);
        *out = jv_list(&c->a);
        if (out->t != JV_LIST)
            return oom(c, n);
        size_t cnt = items.u.l->n;
        size_t per = f[0] == 'b' ? (size_t)k : cnt / (size_t)k, extra = f[0] == 'b' ? 0 : cnt % (size_t)k;
        size_t i = 0, g = 0;
        while (i < cnt || (f[0] == 's' && g < (size_t)k)) {
            jv grp = jv_list(&c->a);
            if (grp.t != JV_LIST || jl_push(&c->a, out->u.l, grp))
                return oom(c, n);
            size_t take = per + (g < extra ? 1 : 0);
            for (size_t j = 0; j < take && i < cnt; j++)
                if (jl_push(&c->a, grp.u.l, items.u.l->v[i++]))
                    return oom(c, n);
            g++;
            if (f[0] == 'b' && !take)
                break;
        }
        return 0;
    }
    if (!strcmp(f, "attr")) {
        jstr *nm;
        if (want_str(c, n, a0, "attr", &nm))
            return X_ERR;
        if (v.t == JV_DICT && !(v.flags & JVF_NS)) { /* getattr on a dict finds no keys */
            *out = undef_named(c, nm->s);
            return 0;
        }
        return get_attr(c, n, v, nm->s, out);
    }
    if (!strcmp(f, "pprint")) {
        jbuf b = {0};
        b.max = c->lim.max_output;
        jv_write_repr(&b, v, 0);
        int rc = mkstr(c, n, b.p ? b.p : "", b.n, out);
        free(b.p);
        return rc;
    }
    return fail(c, n, "filter '%s' is not supported", f);
}

/* ---- methods of strings, dicts, lists, and the loop's cycle */

static int call_method(ctx *c, const jnode *n, jfunc *fn, args *a, jv *out)
{
    jv self = fn->self;
    const char *m = fn->name;
    jv *a0 = arg(a, 0, NULL), *a1 = arg(a, 1, NULL);
    if (self.t == JV_DICT && (self.flags & JVF_LOOP)) {
        jv *i0 = jd_gets(self.u.d, "index0");
        if (!a->np)
            return fail(c, n, "loop.cycle: no items");
        *out = a->pos[i0 ? ival(*i0) % (int64_t)a->np : 0];
        return 0;
    }
    if (self.t == JV_DICT) {
        if (!strcmp(m, "get")) {
            if (!a0)
                return fail(c, n, "get expected at least 1 argument");
            jv *x = jd_get(self.u.d, *a0);
            *out = x ? *x : a1 ? *a1 : jv_none();
            return 0;
        }
        if (!strcmp(m, "items"))
            return items_of(c, n, self, out);
        if (!strcmp(m, "keys") || !strcmp(m, "values")) {
            *out = jv_list(&c->a);
            if (out->t != JV_LIST)
                return oom(c, n);
            for (size_t i = 0; i < self.u.d->n; i++)
                if (jl_push(&c->a, out->u.l, m[0] == 'k' ? self.u.d->k[i] : self.u.d->v[i]))
                    return oom(c, n);
            return 0;
        }
        if (!strcmp(m, "copy")) {
            *out = jv_dict(&c->a);
            for (size_t i = 0; out->t == JV_DICT && i < self.u.d->n; i++)
                if (jd_set(&c->a, out->u.d, self.u.d->k[i], self.u.d->v[i]))
                    return oom(c, n);
            return out->t == JV_DICT ? 0 : oom(c, n);
        }
        return fail(c, n, "access to attribute '%s' of 'dict' object is unsafe (templates cannot modify values)", m);
    }
    if (self.t == JV_LIST) {
        if (!strcmp(m, "index") || !strcmp(m, "count")) {
            if (!a0)
                return fail(c, n, "%s expected an argument", m);
            int64_t k = 0;
            for (size_t i = 0; i < self.u.l->n; i++)
                if (jv_eq(self.u.l->v[i], *a0)) {
                    if (m[0] == 'i') {
                        *out = jv_int((int64_t)i);
                        return 0;
                    }
                    k++;
                }
            if (m[0] == 'i')
                return fail(c, n, "value is not in list");
            *out = jv_int(k);
            return 0;
        }
        if (!strcmp(m, "copy"))
            return copy_list(c, n, self, out);
        return fail(c, n, "access to attribute '%s' of 'list' object is unsafe (templates cannot modify values)", m);
    }
    if (self.t != JV_STR)
        return fail(c, n, "'%s' has no method '%s'", jv_type_name(self), m);
    const jstr *s = self.u.s;
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
        if (!a0)
            return fail(c, n, "%s expected an argument", m);
        jv opts = *a0;
        size_t cnt = 1;
        if (opts.t == JV_LIST) {
            if (!(opts.flags & JVF_TUPLE))
                return fail(c, n, "%s first arg must be str or a tuple of str, not list", m);
            cnt = opts.u.l->n;
        }
        *out = jv_bool(0);
        for (size_t i = 0; i < cnt; i++) {
            jv p = opts.t == JV_LIST ? opts.u.l->v[i] : opts;
            if (p.t != JV_STR)
                return fail(c, n, "%s first arg must be str, not %s", m, jv_type_name(p));
            if (p.u.s->n <= s->n &&
                !memcmp(m[0] == 's' ? s->s : s->s + s->n - p.u.s->n, p.u.s->s, p.u.s->n)) {
                *out = jv_bool(1);
                break;
            }
        }
        return 0;
    }
    if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
        if (a0 && a0->t != JV_STR && a0->t != JV_NONE)
            return fail(c, n, "%s arg must be None or str", m);
        return do_strip(c, n, self, m[0] == 'l' ? 1 : m[0] == 'r' ? 2 : 3,
                        a0 && a0->t == JV_STR ? a0->u.s : NULL, out);
    }
    if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
        jv *sep = arg(a, 0, "sep");
        int64_t maxsplit = -1;
        if (want_int(c, n, arg(a, 1, "maxsplit"), m, -1, &maxsplit))
            return X_ERR;
        if (sep && sep->t != JV_STR && sep->t != JV_NONE)
            return fail(c, n, "must be str or None, not %s", jv_type_name(*sep));
        if (m[0] == 'r' && maxsplit >= 0)
            return fail(c, n, "rsplit with maxsplit is not supported");
        return do_split(c, n, s, sep && sep->t == JV_STR ? sep->u.s : NULL, maxsplit, out);
    }
    if (!strcmp(m, "replace")) {
        jstr *old, *new;
        int64_t cnt;
        if (want_str(c, n, a0, "replace", &old) || want_str(c, n, a1, "replace", &new) ||
            want_int(c, n, arg(a, 2, "count"), "replace", -1, &cnt))
            return X_ERR;
        return do_replace(c, n, s, old, new, cnt, out);
    }
    if (!strcmp(m, "upper") || !strcmp(m, "lower") || !strcmp(m, "capitalize") || !strcmp(m, "title"))
        return do_case(c, n, s, m[0] == 'l' ? 0 : m[0] == 'u' ? 1 : m[0] == 'c' ? 2 : 3, out);
    if (!strcmp(m, "format"))
        return str_format(c, n, s, a, out);
    if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "count") || !strcmp(m, "index")) {
        jstr *sub;
        if (want_str(c, n, a0, m, &sub))
            return X_ERR;
        int64_t found = -1, k = 0;
        for (size_t i = 0; i + sub->n <= s->n; i++)
            if (!memcmp(s->s + i, sub->s, sub->n)) {
                if (found < 0 || m[0] == 'r')
                    found = (int64_t)utf8_len(s->s, i);
                k++;
                if (m[0] == 'c' && sub->n)
                    i += sub->n - 1;
                if (m[0] == 'f' || m[0] == 'i')
                    break;
            }
        if (m[0] == 'i' && found < 0)
            return fail(c, n, "substring not found");
        *out = jv_int(m[0] == 'c' ? k : found);
        return 0;
    }
    if (!strcmp(m, "join")) {
        jv items;
        if (!a0 || iterate(c, n, *a0, &items))
            return a0 ? X_ERR : fail(c, n, "join expected an argument");
        jbuf b = {0};
        b.max = c->lim.max_output;
        int rc = 0;
        for (size_t i = 0; i < items.u.l->n && !rc; i++) {
            if (items.u.l->v[i].t != JV_STR)
                rc = fail(c, n, "sequence item %zu: expected str, %s found", i, jv_type_name(items.u.l->v[i]));
            if (i)
                jb_put(&b, s->s, s->n);
            jv_write_str(&b, items.u.l->v[i], 0);
        }
        if (!rc)
            rc = b.over ? oom(c, n) : mkstr(c, n, b.p ? b.p : "", b.n, out);
        free(b.p);
        return rc;
    }
    if (!strcmp(m, "splitlines")) {
        jv nl = jv_str(&c->a, "\n", 1), l;
        if (nl.t != JV_STR || do_split(c, n, s, nl.u.s, -1, &l))
            return X_ERR;
        if (l.u.l->n && l.u.l->v[l.u.l->n - 1].u.s->n == 0)
            l.u.l->n--;
        *out = l;
        return 0;
    }
    if (!strncmp(m, "is", 2)) {
        int ok = s->n > 0, cased = 0;
        for (size_t i = 0; i < s->n;) {
            size_t k;
            int32_t cp = cp_at(s->s, s->n, i, &k);
            utf8proc_category_t cat = utf8proc_category(cp);
            int letter = cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
            int digit = cat == UTF8PROC_CATEGORY_ND;
            if (!strcmp(m, "isdigit")) ok &= digit;
            else if (!strcmp(m, "isalpha")) ok &= letter;
            else if (!strcmp(m, "isalnum")) ok &= letter || digit;
            else if (!strcmp(m, "isspace")) ok &= is_space_cp(cp);
            else if (!strcmp(m, "isupper")) { ok &= cat != UTF8PROC_CATEGORY_LL; cased |= cat == UTF8PROC_CATEGORY_LU; }
            else if (!strcmp(m, "islower")) { ok &= cat != UTF8PROC_CATEGORY_LU; cased |= cat == UTF8PROC_CATEGORY_LL; }
            i += k;
        }
        if (!strcmp(m, "isupper") || !strcmp(m, "islower"))
            ok &= cased;
        *out = jv_bool(ok);
        return 0;
    }
    return fail(c, n, "string method '%s' is not supported", m);
}

/* ---- globals */

static const char *const global_names[] = {"range", "namespace", "raise_exception", "strftime_now", "dict",
    "joiner", "cycler", "lipsum", NULL};

static int call_builtin(ctx *c, const jnode *n, const char *name, args *a, jv *out)
{
    if (!strcmp(name, "range")) {
        int64_t st = 0, en = 0, sp = 1;
        if (a->np == 1) {
            if (want_int(c, n, &a->pos[0], "range", 0, &en))
                return X_ERR;
        } else if (a->np >= 2) {
            if (want_int(c, n, &a->pos[0], "range", 0, &st) || want_int(c, n, &a->pos[1], "range", 0, &en) ||
                want_int(c, n, arg(a, 2, NULL), "range", 1, &sp))
                return X_ERR;
        } else
            return fail(c, n, "range expected at least 1 argument");
        if (!sp)
            return fail(c, n, "range() arg 3 must not be zero");
        int64_t cnt = sp > 0 ? (en > st ? (en - st + sp - 1) / sp : 0) : (st > en ? (st - en - sp - 1) / -sp : 0);
        if (cnt > 100000) /* jinja2's sandbox refuses ranges over MAX_RANGE */
            return fail(c, n, "range too big: %lld items (at most 100000)", (long long)cnt);
        *out = jv_list(&c->a);
        if (out->t != JV_LIST)
            return oom(c, n);
        for (int64_t i = 0; i < cnt; i++)
            if (jl_push(&c->a, out->u.l, jv_int(st + i * sp)))
                return oom(c, n);
        return 0;
    }
    if (!strcmp(name, "namespace") || !strcmp(name, "dict")) {
        *out = jv_dict(&c->a);
        if (out->t != JV_DICT)
            return oom(c, n);
        if (name[0] == 'n')
            out->flags = JVF_NS;
        for (size_t i = 0; i < a->np; i++) {
            if (a->pos[i].t != JV_DICT)
                return fail(c, n, "%s: positional arguments must be mappings", name);
            for (size_t k = 0; k < a->pos[i].u.d->n; k++)
                if (jd_set(&c->a, out->u.d, a->pos[i].u.d->k[k], a->pos[i].u.d->v[k]))
                    return oom(c, n);
        }
        for (size_t i = 0; i < a->nk; i++) {
            jv k = jv_cstr(&c->a, a->kwn[i]);
            if (k.t != JV_STR || jd_set(&c->a, out->u.d, k, a->kwv[i]))
                return oom(c, n);
        }
        return 0;
    }
    if (!strcmp(name, "raise_exception")) {
        jv *msg = arg(a, 0, "message");
        jv s = msg ? str_of(c, *msg) : jv_str(&c->a, "", 0);
        return fail(c, n, "raise_exception: %s", s.t == JV_STR ? s.u.s->s : "");
    }
    if (!strcmp(name, "strftime_now")) {
        jstr *f = NULL;
        if (want_str(c, n, a->np ? &a->pos[0] : NULL, "strftime_now", &f))
            return X_ERR;
        time_t t = time(NULL);
        struct tm tm;
        localtime_r(&t, &tm);
        char buf[512];
        size_t k = f->n < 200 ? strftime(buf, sizeof buf, f->s, &tm) : 0;
        return mkstr(c, n, buf, k, out);
    }
    return fail(c, n, "'%s' is not supported", name);
}

/* ---- macros */

static int call_macro(ctx *c, const jnode *n, jfunc *fn, args *a, jfunc *caller, jv *out)
{
    const jnode *m = fn->node; /* JN_MACRO, or JN_CALLBLOCK for caller() */
    jscope *s = scope_new(c, fn->scope);
    if (!s)
        return oom(c, n);
    size_t np = m->nnames;
    if (a->np > np)
        return fail(c, n, "macro '%s' takes not more than %zu argument(s)", fn->name ? fn->name : "caller", np);
    for (size_t i = 0; i < np; i++) {
        jv v = jv_undef();
        jv *given = arg(a, i, m->names[i]);
        if (given)
            v = *given;
        else if (m->kids2 && m->kids2[i] && eval(c, m->kids2[i], s, &v))
            return X_ERR;
        if (v.t == JV_UNDEF && !v.u.s)
            v = undef_named(c, m->names[i]);
        if (assign(c, s, m->names[i], v))
            return oom(c, n);
    }
    for (size_t i = 0; i < a->nk; i++) {
        int known = 0;
        for (size_t k = 0; k < np && !known; k++)
            known = !strcmp(m->names[k], a->kwn[i]);
        if (!known)
            return fail(c, n, "macro '%s' takes no keyword argument '%s'", fn->name ? fn->name : "caller", a->kwn[i]);
    }
    if (caller) {
        jv cv = {0};
        cv.t = JV_FUNC;
        cv.u.fn = caller;
        if (assign(c, s, "caller", cv))
            return oom(c, n);
    }
    jbuf b = {0}, *saved = c->out;
    b.max = c->lim.max_output;
    c->out = &b;
    const char *saved_name = c->macro_name;
    c->macro_name = fn->name;
    int rc = exec_body(c, m->kind == JN_MACRO ? m->a : m->b, s);
    c->out = saved;
    c->macro_name = saved_name;
    if (rc == X_ERR || (b.over && !c->failed)) {
        free(b.p);
        return b.over ? fail(c, n, "output longer than %zu bytes", c->lim.max_output) : X_ERR;
    }
    rc = mkstr(c, n, b.p ? b.p : "", b.n, out);
    free(b.p);
    return rc;
}

static int call_value(ctx *c, const jnode *n, jv f, args *a, jfunc *caller, jv *out)
{
    if (f.t == JV_UNDEF)
        return fail_undef(c, n, f);
    if (f.t != JV_FUNC)
        return fail(c, n, "'%s' object is not callable", jv_type_name(f));
    switch (f.u.fn->kind) {
    case JF_BUILTIN: return call_builtin(c, n, f.u.fn->name, a, out);
    case JF_METHOD: return call_method(c, n, f.u.fn, a, out);
    default: return call_macro(c, n, f.u.fn, a, caller, out);
    }
}

/* ---- expressions */

static int enter(ctx *c, const jnode *n)
{
    if (++c->depth > c->lim.max_depth)
        return fail(c, n, "nested deeper than %d levels (runaway recursion?)", c->lim.max_depth);
    return 0;
}

static int eval_inner(ctx *c, const jnode *n, jscope *s, jv *out)
{
    jv x, y;
    switch (n->kind) {
    case JN_LIT:
        *out = n->lit;
        return 0;
    case JN_NAME: {
        jv *v = lookup(s, n->name);
        *out = v ? *v : undef_named(c, n->name);
        if (!v && !out->u.s)
            return oom(c, n);
        if (!v) {
            char m[200];
            snprintf(m, sizeof m, "'%s'", n->name);
            *out = undef_named(c, m);
        }
        return 0;
    }
    case JN_ATTR:
        if (eval(c, n->a, s, &x))
            return X_ERR;
        return get_attr(c, n, x, n->name, out);
    case JN_ITEM:
        if (eval(c, n->a, s, &x) || eval(c, n->b, s, &y))
            return X_ERR;
        return get_item(c, n, x, y, out);
    case JN_SLICE: {
        jv p[3];
        jv *pp[3] = {NULL, NULL, NULL};
        if (eval(c, n->a, s, &x))
            return X_ERR;
        for (int i = 0; i < 3; i++)
            if (n->kids[i]) {
                if (eval(c, n->kids[i], s, &p[i]))
                    return X_ERR;
                pp[i] = &p[i];
            }
        return do_slice(c, n, x, pp[0], pp[1], pp[2], out);
    }
    case JN_CALL: {
        args a;
        if (eval(c, n->a, s, &x) || eval_args(c, n, s, &a, 0))
            return X_ERR;
        return call_value(c, n, x, &a, NULL, out);
    }
    case JN_FILTER: {
        args a;
        if (eval(c, n->a, s, &x) || eval_args(c, n, s, &a, 0))
            return X_ERR;
        return apply_filter(c, n, n->name, x, &a, out);
    }
    case JN_TEST: {
        args a;
        int r;
        if (eval(c, n->a, s, &x) || eval_args(c, n, s, &a, 0) || run_test(c, n, n->name, x, &a, &r))
            return X_ERR;
        *out = jv_bool(n->op ? !r : r);
        return 0;
    }
    case JN_NEG:
    case JN_POS:
        if (eval(c, n->a, s, &x))
            return X_ERR;
        if (x.t == JV_UNDEF)
            return fail_undef(c, n, x);
        if (!is_numv(x))
            return fail(c, n, "bad operand type for unary %s: '%s'", n->kind == JN_NEG ? "-" : "+", jv_type_name(x));
        if (n->kind == JN_POS)
            *out = x.t == JV_BOOL ? jv_int(x.u.b) : x;
        else
            *out = x.t == JV_FLOAT ? jv_float(-x.u.f) : jv_int(-ival(x));
        return 0;
    case JN_NOT:
        if (eval(c, n->a, s, &x))
            return X_ERR;
        *out = jv_bool(!jv_truthy(x));
        return 0;
    case JN_AND:
    case JN_OR:
        if (eval(c, n->a, s, &x))
            return X_ERR;
        if (jv_truthy(x) == (n->kind == JN_OR)) {
            *out = x;
            return 0;
        }
        return eval(c, n->b, s, out);
    case JN_BIN:
        if (eval(c, n->a, s, &x) || eval(c, n->b, s, &y))
            return X_ERR;
        return binop(c, n, n->op, x, y, out);
    case JN_CMP: {
        if (eval(c, n->kids[0], s, &x))
            return X_ERR;
        for (size_t i = 1; i < n->nkids; i++) {
            int r;
            if (eval(c, n->kids[i], s, &y) || compare(c, n, n->ops[i - 1], x, y, &r))
                return X_ERR;
            if (!r) {
                *out = jv_bool(0);
                return 0;
            }
            x = y;
        }
        *out = jv_bool(1);
        return 0;
    }
    case JN_COND:
        if (eval(c, n->b, s, &x))
            return X_ERR;
        if (jv_truthy(x))
            return eval(c, n->a, s, out);
        if (n->c)
            return eval(c, n->c, s, out);
        *out = undef_named(c, "the else branch of an inline if");
        return 0;
    case JN_LISTLIT:
    case JN_TUPLELIT:
        *out = jv_list(&c->a);
        if (out->t != JV_LIST)
            return oom(c, n);
        if (n->kind == JN_TUPLELIT)
            out->flags = JVF_TUPLE;
        for (size_t i = 0; i < n->nkids; i++)
            if (eval(c, n->kids[i], s, &x) || jl_push(&c->a, out->u.l, x))
                return c->failed ? X_ERR : oom(c, n);
        return 0;
    case JN_DICTLIT:
        *out = jv_dict(&c->a);
        if (out->t != JV_DICT)
            return oom(c, n);
        for (size_t i = 0; i < n->nkids; i++) {
            if (eval(c, n->kids[i], s, &x) || eval(c, n->kids2[i], s, &y))
                return X_ERR;
            if (x.t == JV_LIST && !(x.flags & JVF_TUPLE))
                return fail(c, n, "unhashable type: 'list'");
            if (x.t == JV_DICT)
                return fail(c, n, "unhashable type: 'dict'");
            if (jd_set(&c->a, out->u.d, x, y))
                return oom(c, n);
        }
        return 0;
    default: return fail(c, n, "not an expression");
    }
}

static int eval(ctx *c, const jnode *n, jscope *s, jv *out)
{
    if (enter(c, n))
        return X_ERR;
    int rc = eval_inner(c, n, s, out);
    c->depth--;
    if (!rc && c->a.failed)
        return oom(c, n);
    return rc;
}

/* ---- statements */

static int step(ctx *c, const jnode *n)
{
    if (++c->steps > c->lim.max_steps)
        return fail(c, n, "the template ran more than %zu steps (runaway loop?)", c->lim.max_steps);
    return 0;
}

static int emit(ctx *c, const jnode *n, const char *s, size_t len)
{
    if (jb_put(c->out, s, len))
        return fail(c, n, "output longer than %zu bytes", c->lim.max_output);
    return 0;
}

static int unpack(ctx *c, const jnode *n, jscope *s, const char **names, size_t k, jv v)
{
    if (k == 1)
        return assign(c, s, names[0], v) ? oom(c, n) : 0;
    jv items;
    if (iterate(c, n, v, &items))
        return X_ERR;
    if (items.u.l->n != k)
        return fail(c, n, "cannot unpack %zu values into %zu names", items.u.l->n, k);
    for (size_t i = 0; i < k; i++)
        if (assign(c, s, names[i], items.u.l->v[i]))
            return oom(c, n);
    return 0;
}

static int exec_for(ctx *c, const jnode *n, jscope *s)
{
    jv it, items;
    if (eval(c, n->a, s, &it))
        return X_ERR;
    if (it.t == JV_DICT && !(it.flags & JVF_NS)) {
        if (iterate(c, n, it, &items))
            return X_ERR;
    } else if (iterate(c, n, it, &items))
        return X_ERR;
    /* the filter clause decides which items the loop (and loop.*) sees */
    if (n->nkids) {
        jv kept = jv_list(&c->a);
        if (kept.t != JV_LIST)
            return oom(c, n);
        for (size_t i = 0; i < items.u.l->n; i++) {
            jscope *fs = scope_new(c, s);
            jv r;
            if (!fs)
                return oom(c, n);
            if (step(c, n) || unpack(c, n, fs, n->names, n->nnames, items.u.l->v[i]) || eval(c, n->kids[0], fs, &r))
                return X_ERR;
            if (jv_truthy(r) && jl_push(&c->a, kept.u.l, items.u.l->v[i]))
                return oom(c, n);
        }
        items = kept;
    }
    size_t cnt = items.u.l->n;
    jv *outer_loop = lookup(s, "loop");
    int depth = 1;
    if (outer_loop && outer_loop->t == JV_DICT && (outer_loop->flags & JVF_LOOP)) {
        jv *d = jd_gets(outer_loop->u.d, "depth");
        if (d)
            depth = (int)ival(*d) + 1;
    }
    for (size_t i = 0; i < cnt; i++) {
        if (step(c, n))
            return X_ERR;
        jscope *is = scope_new(c, s);
        jv loop = jv_dict(&c->a);
        if (!is || loop.t != JV_DICT)
            return oom(c, n);
        loop.flags = JVF_LOOP;
        static const char *const keys[] = {"index", "index0", "revindex", "revindex0", "first", "last", "length",
                                           "previtem", "nextitem", "depth", "depth0"};
        jv vals[11] = {jv_int((int64_t)i + 1), jv_int((int64_t)i), jv_int((int64_t)(cnt - i)),
                       jv_int((int64_t)(cnt - i - 1)), jv_bool(i == 0), jv_bool(i + 1 == cnt), jv_int((int64_t)cnt),
                       i > 0 ? items.u.l->v[i - 1] : undef_named(c, "there is no previous item"),
                       i + 1 < cnt ? items.u.l->v[i + 1] : undef_named(c, "there is no next item"),
                       jv_int(depth), jv_int(depth - 1)};
        for (int k = 0; k < 11; k++) {
            jv key = jv_cstr(&c->a, keys[k]);
            if (key.t != JV_STR || jd_set(&c->a, loop.u.d, key, vals[k]))
                return oom(c, n);
        }
        if (assign(c, is, "loop", loop) || c->a.failed)
            return oom(c, n);
        if (unpack(c, n, is, n->names, n->nnames, items.u.l->v[i]))
            return X_ERR;
        int rc = exec_body(c, n->b, is);
        if (rc == X_ERR)
            return X_ERR;
        if (rc == X_BREAK)
            break;
    }
    if (!cnt && n->c)
        return exec_body(c, n->c, s);
    return 0;
}

/* Render body into a string (set blocks, filter blocks). */
static int capture(ctx *c, const jnode *body, jscope *s, jv *out)
{
    jbuf b = {0}, *saved = c->out;
    b.max = c->lim.max_output;
    c->out = &b;
    int rc = exec_body(c, body, s);
    c->out = saved;
    if (rc == X_ERR) {
        free(b.p);
        return X_ERR;
    }
    if (rc) {
        free(b.p);
        return fail(c, body, "break or continue outside a loop");
    }
    rc = mkstr(c, body, b.p ? b.p : "", b.n, out);
    free(b.p);
    return rc;
}

/* apply a filter chain whose innermost operand is the hole (op == 1) */
static int apply_chain(ctx *c, const jnode *f, jscope *s, jv in, jv *out)
{
    if (f->kind == JN_LIT && f->op == 1) {
        *out = in;
        return 0;
    }
    jv x;
    args a;
    if (apply_chain(c, f->a, s, in, &x) || eval_args(c, f, s, &a, 0))
        return X_ERR;
    return apply_filter(c, f, f->name, x, &a, out);
}

static int exec_stmt(ctx *c, const jnode *n, jscope *s)
{
    jv v;
    if (step(c, n))
        return X_ERR;
    switch (n->kind) {
    case JN_TEXT: return emit(c, n, n->lit.u.s->s, n->lit.u.s->n);
    case JN_OUT: {
        if (eval(c, n->a, s, &v))
            return X_ERR;
        if (v.t == JV_STR)
            return emit(c, n, v.u.s->s, v.u.s->n);
        if (jv_write_str(c->out, v, 0))
            return fail(c, n, "output longer than %zu bytes", c->lim.max_output);
        return 0;
    }
    case JN_IF:
        if (eval(c, n->a, s, &v))
            return X_ERR;
        if (jv_truthy(v))
            return exec_body(c, n->b, s);
        return n->c ? exec_body(c, n->c, s) : 0;
    case JN_FOR: return exec_for(c, n, s);
    case JN_SET:
        if (eval(c, n->a, s, &v))
            return X_ERR;
        if (n->name) {
            jv *ns = lookup(s, n->names[0]);
            if (!ns || ns->t != JV_DICT || !(ns->flags & JVF_NS))
                return fail(c, n, "cannot assign attribute on non-namespace object '%s'", n->names[0]);
            jv k = jv_cstr(&c->a, n->name);
            if (k.t != JV_STR || jd_set(&c->a, ns->u.d, k, v))
                return oom(c, n);
            return 0;
        }
        return unpack(c, n, s, n->names, n->nnames, v);
    case JN_SETBLOCK:
        if (capture(c, n->a, s, &v))
            return X_ERR;
        if (n->c && apply_chain(c, n->c, s, v, &v))
            return X_ERR;
        return assign(c, s, n->names[0], v) ? oom(c, n) : 0;
    case JN_FILTERBLOCK:
        if (capture(c, n->a, s, &v) || apply_chain(c, n->c, s, v, &v))
            return X_ERR;
        if (v.t == JV_STR)
            return emit(c, n, v.u.s->s, v.u.s->n);
        return jv_write_str(c->out, v, 0) ? fail(c, n, "output too long") : 0;
    case JN_MACRO: {
        jfunc *f = ja_alloc(&c->a, sizeof *f);
        if (!f)
            return oom(c, n);
        f->kind = JF_MACRO;
        f->name = n->name;
        f->node = n;
        f->scope = s;
        jv fv = {0};
        fv.t = JV_FUNC;
        fv.u.fn = f;
        return assign(c, s, n->name, fv) ? oom(c, n) : 0;
    }
    case JN_CALLBLOCK: {
        jfunc *caller = ja_alloc(&c->a, sizeof *caller);
        if (!caller)
            return oom(c, n);
        caller->kind = JF_CALLER;
        caller->name = "caller";
        caller->node = n;
        caller->scope = s;
        const jnode *call = n->a;
        jv f;
        args a;
        if (eval(c, call->a, s, &f) || eval_args(c, call, s, &a, 0))
            return X_ERR;
        if (f.t != JV_FUNC || f.u.fn->kind != JF_MACRO)
            return fail(c, n, "call block needs a macro");
        if (call_macro(c, n, f.u.fn, &a, caller, &v))
            return X_ERR;
        return emit(c, n, v.u.s->s, v.u.s->n);
    }
    case JN_BODY: return exec_body(c, n, s);
    case JN_BREAK: return X_BREAK;
    case JN_CONTINUE: return X_CONTINUE;
    default: return fail(c, n, "not a statement");
    }
}

static int exec_body(ctx *c, const jnode *body, jscope *s)
{
    if (enter(c, body))
        return X_ERR;
    int rc = 0;
    for (size_t i = 0; i < body->nkids && !rc; i++)
        rc = exec_stmt(c, body->kids[i], s);
    c->depth--;
    if (rc == X_OK && c->a.failed)
        return oom(c, body);
    return rc;
}

/* ---- public */

void eng_jinja_limits_default(eng_jinja_limits *l)
{
    l->max_output = 16u << 20;
    l->max_memory = 256u << 20;
    l->max_steps = 5000000;
    l->max_depth = 500;
}

int eng_jinja_parse(const char *src, size_t len, eng_jinja **out, eng_err *e)
{
    *out = NULL;
    eng_jinja *t = calloc(1, sizeof *t);
    if (!t)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    t->arena.max = 64u << 20;
    int rc = jinja_parse(src ? src : "", src ? len : 0, &t->arena, &t->root, e);
    if (rc) {
        eng_jinja_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void eng_jinja_free(eng_jinja *t)
{
    if (!t)
        return;
    ja_free_all(&t->arena);
    free(t);
}

int eng_jinja_render(const eng_jinja *t, const char *vars_json, const eng_jinja_limits *lim, char **out,
                     size_t *len, eng_err *e)
{
    *out = NULL;
    if (len)
        *len = 0;
    ctx c = {0};
    if (lim)
        c.lim = *lim;
    else
        eng_jinja_limits_default(&c.lim);
    c.e = e;
    c.a.max = c.lim.max_memory;
    int rc = 0;
    jbuf b = {0};
    b.max = c.lim.max_output;
    c.out = &b;
    jscope *globals = scope_new(&c, NULL), *vars = scope_new(&c, globals);
    if (!globals || !vars) {
        rc = eng_errf(e, ENG_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; global_names[i]; i++) {
        jfunc *f = ja_alloc(&c.a, sizeof *f);
        jv fv = {0};
        if (!f) {
            rc = eng_errf(e, ENG_ENOMEM, "out of memory");
            goto done;
        }
        f->kind = JF_BUILTIN;
        f->name = global_names[i];
        fv.t = JV_FUNC;
        fv.u.fn = f;
        if (assign(&c, globals, global_names[i], fv)) {
            rc = eng_errf(e, ENG_ENOMEM, "out of memory");
            goto done;
        }
    }
    if (vars_json) {
        jv v;
        char why[128];
        if (jv_parse_json(&c.a, vars_json, strlen(vars_json), &v, why, sizeof why, 200)) {
            rc = eng_errf(e, ENG_EINVAL, "template variables: %s", why);
            goto done;
        }
        if (v.t != JV_DICT) {
            rc = eng_errf(e, ENG_EINVAL, "template variables must be a JSON object");
            goto done;
        }
        for (size_t i = 0; i < v.u.d->n; i++)
            if (jd_set(&c.a, &vars->vars, v.u.d->k[i], v.u.d->v[i])) {
                rc = eng_errf(e, ENG_ENOMEM, "out of memory");
                goto done;
            }
    }
    c.root = vars;
    jscope *top = scope_new(&c, vars);
    if (!top) {
        rc = eng_errf(e, ENG_ENOMEM, "out of memory");
        goto done;
    }
    int x = exec_body(&c, t->root, top);
    if (x == X_ERR) {
        rc = ENG_EFORMAT;
        goto done;
    }
    if (x != X_OK) {
        rc = eng_errf(e, ENG_EFORMAT, "break or continue outside a loop");
        goto done;
    }
    *out = b.p ? b.p : calloc(1, 1);
    b.p = NULL;
    if (!*out)
        rc = eng_errf(e, ENG_ENOMEM, "out of memory");
    else if (len)
        *len = b.n;
done:
    free(b.p);
    ja_free_all(&c.a);
    return rc;
}
