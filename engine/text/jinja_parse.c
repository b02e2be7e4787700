/* Jinja source to a syntax tree. The lexer follows jinja2's rules for
 * whitespace with trim_blocks and lstrip_blocks on (as transformers sets
 * them): a block tag or comment eats the newline after it, the spaces
 * before it on its own line go, "-" strips all whitespace on its side and
 * "+" keeps it. Line breaks are normalised to "\n" and one trailing
 * newline of the template is dropped (keep_trailing_newline is off). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"

enum tk { TK_EOF, TK_DATA, TK_VBEGIN, TK_VEND, TK_BBEGIN, TK_BEND, TK_NAME, TK_STR, TK_INT, TK_FLOAT, TK_OP };

typedef struct tok {
    int type, line;
    const char *s; /* TK_NAME, TK_OP: the text (NUL-terminated copy); TK_DATA/TK_STR: bytes */
    size_t n;
    int64_t i;
    double f;
} tok;

typedef struct lexer {
    jarena *a;
    eng_err *e;
    const char *src;
    size_t n;
    tok *t;
    size_t nt, cap;
    int failed;
} lexer;

static int lx_err(lexer *L, int line, const char *msg)
{
    if (!L->failed)
        eng_errf(L->e, ENG_EFORMAT, "line %d: %s", line, msg);
    L->failed = 1;
    return -1;
}

static int lx_push(lexer *L, tok t)
{
    if (L->nt == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        tok *nt = ja_alloc(L->a, cap * sizeof *nt);
        if (!nt)
            return lx_err(L, t.line, "template too large");
        if (L->nt)
            memcpy(nt, L->t, L->nt * sizeof *nt);
        L->t = nt;
        L->cap = cap;
    }
    L->t[L->nt++] = t;
    return 0;
}

static int lines_in(const char *s, size_t n)
{
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += s[i] == '\n';
    return k;
}

/* Python's str.isspace for the characters that matter in templates. */
static size_t space_at(const char *s, size_t n, size_t i)
{
    unsigned char c = (unsigned char)s[i];
    if (c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f))
        return 1;
    if (c == 0xC2 && i + 1 < n && ((unsigned char)s[i + 1] == 0x85 || (unsigned char)s[i + 1] == 0xA0))
        return 2;
    if (c == 0xE3 && i + 2 < n && (unsigned char)s[i + 1] == 0x80 && (unsigned char)s[i + 2] == 0x80)
        return 3;
    if (c == 0xE2 && i + 2 < n) {
        unsigned char d = (unsigned char)s[i + 1], e = (unsigned char)s[i + 2];
        if (d == 0x80 && (e <= 0x8A || e == 0xA8 || e == 0xA9 || e == 0xAF))
            return 3;
        if (d == 0x81 && e == 0x9F)
            return 3;
    }
    return 0;
}

/* Length of s[0..n) without its trailing whitespace. */
static size_t rstrip_len(const char *s, size_t n)
{
    size_t end = n, i = 0, last = 0;
    (void)end;
    while (i < n) {
        size_t k = space_at(s, n, i);
        if (k)
            i += k;
        else {
            i++;
            while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80)
                i++;
            last = i;
        }
    }
    return last;
}

static int all_space(const char *s, size_t n)
{
    if (!n)
        return 0;
    for (size_t i = 0; i < n;) {
        size_t k = space_at(s, n, i);
        if (!k)
            return 0;
        i += k;
    }
    return 1;
}

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n) {
        size_t k = space_at(s, n, i);
        if (!k)
            break;
        i += k;
    }
    return i;
}

static int is_ident0(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Python's unicode-escape decoding of a string literal's body. */
static int unescape(lexer *L, const char *s, size_t n, int line, tok *t)
{
    jbuf b = {0};
    b.max = L->a->max;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            jb_putc(&b, s[i]);
            continue;
        }
        char c = s[++i];
        unsigned cp = 0;
        int hex = 0;
        switch (c) {
        case '\n': break;
        case '\\': jb_putc(&b, '\\'); break;
        case '\'': jb_putc(&b, '\''); break;
        case '"': jb_putc(&b, '"'); break;
        case 'a': jb_putc(&b, '\a'); break;
        case 'b': jb_putc(&b, '\b'); break;
        case 'f': jb_putc(&b, '\f'); break;
        case 'n': jb_putc(&b, '\n'); break;
        case 'r': jb_putc(&b, '\r'); break;
        case 't': jb_putc(&b, '\t'); break;
        case 'v': jb_putc(&b, '\v'); break;
        case 'x': hex = 2; break;
        case 'u': hex = 4; break;
        case 'U': hex = 8; break;
        default:
            if (c >= '0' && c <= '7') {
                int k = 0;
                while (k < 3 && i < n && s[i] >= '0' && s[i] <= '7') {
                    cp = cp * 8 + (unsigned)(s[i] - '0');
                    i++;
                    k++;
                }
                i--;
                hex = -1;
            } else {
                jb_putc(&b, '\\');
                jb_putc(&b, c);
            }
        }
        if (hex > 0) {
            if (i + (size_t)hex >= n) {
                free(b.p);
                return lx_err(L, line, "truncated escape in a string");
            }
            for (int k = 0; k < hex; k++) {
                char h = s[i + 1 + (size_t)k];
                int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                      : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (d < 0) {
                    free(b.p);
                    return lx_err(L, line, "bad escape in a string");
                }
                cp = cp * 16 + (unsigned)d;
            }
            i += (size_t)hex;
        }
        if (hex) {
            if (cp > 0x10FFFF) {
                free(b.p);
                return lx_err(L, line, "escape out of range in a string");
            }
            char u[4];
            int k;
            if (cp < 0x80) u[0] = (char)cp, k = 1;
            else if (cp < 0x800) u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 63)), k = 2;
            else if (cp < 0x10000)
                u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 63)), u[2] = (char)(0x80 | (cp & 63)), k = 3;
            else
                u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 63)),
                u[2] = (char)(0x80 | ((cp >> 6) & 63)), u[3] = (char)(0x80 | (cp & 63)), k = 4;
            jb_put(&b, u, (size_t)k);
        }
    }
    if (b.over) {
        free(b.p);
        return lx_err(L, line, "string literal too long");
    }
    jstr *js = js_new(L->a, b.p ? b.p : "", b.n);
    free(b.p);
    if (!js)
        return lx_err(L, line, "template too large");
    t->s = js->s;
    t->n = js->n;
    return 0;
}

static const char *const ops3[] = {NULL};
static const char *const ops2[] = {"//", "**", "==", "!=", "<=", ">=", NULL};
static const char ops1[] = "+-*/%~<>=()[]{},.:|;";

/* Tokens inside {{ }} or {% %} from *pos up to and including the end tag.
 * block: 1 for {% %}. Returns 0 with *pos after the end (trim applied). */
static int lex_tag(lexer *L, size_t *pos, int *line, int block, int *line_starting)
{
    const char *s = L->src;
    size_t n = L->n, i = *pos;
    int depth = 0; /* open brackets: an end tag inside them is not one */
    (void)ops3;
    for (;;) {
        size_t j = skip_ws(s, n, i);
        *line += lines_in(s + i, j - i);
        i = j;
        if (i >= n)
            return lx_err(L, *line, block ? "missing end of a block tag ('%}')" : "missing end of an expression ('}}')");
        if (!depth) {
            size_t end = 0;
            int strip = 0, trim = 0;
            if (block) {
                if (!strncmp(s + i, "+%}", 3))
                    end = 3;
                else if (!strncmp(s + i, "-%}", 3))
                    end = 3, strip = 1;
                else if (!strncmp(s + i, "%}", 2))
                    end = 2, trim = 1;
            } else {
                if (!strncmp(s + i, "-}}", 3))
                    end = 3, strip = 1;
                else if (!strncmp(s + i, "}}", 2))
                    end = 2;
            }
            if (end) {
                tok t = {block ? TK_BEND : TK_VEND, *line, NULL, 0, 0, 0};
                if (lx_push(L, t))
                    return -1;
                i += end;
                if (strip) {
                    j = skip_ws(s, n, i);
                    *line += lines_in(s + i, j - i);
                    i = j;
                } else if (trim && i < n && s[i] == '\n') {
                    i++;
                    (*line)++;
                }
                *line_starting = i > 0 && s[i - 1] == '\n';
                *pos = i;
                return 0;
            }
        }
        tok t = {0};
        t.line = *line;
        char c = s[i];
        if (is_ident0(c) || (unsigned char)c >= 0x80) {
            size_t j = i;
            while (j < n && (is_ident0(s[j]) || is_digit(s[j]) || (unsigned char)s[j] >= 0x80))
                j++;
            jstr *js = js_new(L->a, s + i, j - i);
            if (!js)
                return lx_err(L, *line, "template too large");
            t.type = TK_NAME;
            t.s = js->s;
            t.n = js->n;
            i = j;
        } else if (is_digit(c)) {
            size_t j = i;
            int isf = 0;
            char num[80];
            size_t k = 0;
            int too_long = 0;
            /* the literal's characters, without '_'; one longer than num
             * holds is refused below, never cut short */
#define PUT(ch) (k < sizeof num - 1 ? (void)(num[k++] = (ch)) : (void)(too_long = 1))
            while (j < n && (is_digit(s[j]) || (s[j] == '_' && j + 1 < n && is_digit(s[j + 1])))) {
                if (s[j] != '_')
                    PUT(s[j]);
                j++;
            }
            if (j + 1 < n && s[j] == '.' && is_digit(s[j + 1]) && !(i > 0 && s[i - 1] == '.')) {
                isf = 1;
                PUT('.');
                j++;
                while (j < n && (is_digit(s[j]) || (s[j] == '_' && j + 1 < n && is_digit(s[j + 1])))) {
                    if (s[j] != '_')
                        PUT(s[j]);
                    j++;
                }
            }
            if (j < n && (s[j] == 'e' || s[j] == 'E') && !(i > 0 && s[i - 1] == '.')) {
                size_t m = j + 1;
                if (m < n && (s[m] == '+' || s[m] == '-'))
                    m++;
                if (m < n && is_digit(s[m])) {
                    isf = 1;
                    while (j < m) {
                        PUT(s[j]);
                        j++;
                    }
                    while (j < n && is_digit(s[j])) {
                        PUT(s[j]);
                        j++;
                    }
                }
            }
#undef PUT
            if (too_long)
                return lx_err(L, *line, "a number of more than 79 characters");
            num[k] = 0;
            if (isf) {
                t.type = TK_FLOAT;
                t.f = strtod(num, NULL);
            } else {
                t.type = TK_INT;
                t.i = strtoll(num, NULL, 10);
            }
            i = j;
        } else if (c == '\'' || c == '"') {
            size_t j = i + 1;
            while (j < n && s[j] != c) {
                if (s[j] == '\\' && j + 1 < n)
                    j++;
                j++;
            }
            if (j >= n)
                return lx_err(L, *line, "unterminated string");
            t.type = TK_STR;
            if (unescape(L, s + i + 1, j - i - 1, *line, &t))
                return -1;
            *line += lines_in(s + i, j - i);
            i = j + 1;
        } else {
            size_t k = 0;
            for (int o = 0; ops2[o]; o++)
                if (i + 1 < n && s[i] == ops2[o][0] && s[i + 1] == ops2[o][1])
                    k = 2;
            if (!k && strchr(ops1, c) && c)
                k = 1;
            if (!k) {
                char m[64];
                snprintf(m, sizeof m, "unexpected character '%c'", c);
                return lx_err(L, *line, m);
            }
            jstr *js = js_new(L->a, s + i, k);
            if (!js)
                return lx_err(L, *line, "template too large");
            t.type = TK_OP;
            t.s = js->s;
            t.n = k;
            if (c == '(' || c == '[' || c == '{')
                depth++;
            else if ((c == ')' || c == ']' || c == '}') && depth > 0)
                depth--;
            i += k;
        }
        if (lx_push(L, t))
            return -1;
    }
}

static int push_data(lexer *L, const char *s, size_t n, int line)
{
    if (!n)
        return 0;
    tok t = {TK_DATA, line, s, n, 0, 0};
    return lx_push(L, t);
}

/* {% raw %} ... {% endraw %}: the text between as it is. i is after the
 * opening tag; returns the position after the closing one. */
static int lex_raw(lexer *L, size_t *pos, int *line, int *line_starting)
{
    const char *s = L->src;
    size_t n = L->n;
    for (size_t i = *pos; i + 1 < n; i++) {
        if (s[i] != '{' || s[i + 1] != '%')
            continue;
        size_t j = i + 2, tag = i;
        int sign = j < n && (s[j] == '-' || s[j] == '+') ? s[j++] : 0;
        j = skip_ws(s, n, j);
        if (n - j < 6 || strncmp(s + j, "endraw", 6))
            continue;
        j = skip_ws(s, n, j + 6);
        size_t text_end = tag;
        if (sign == '-')
            text_end = *pos + rstrip_len(s + *pos, tag - *pos);
        if (push_data(L, s + *pos, text_end - *pos, *line))
            return -1;
        if (!strncmp(s + j, "-%}", 3)) {
            j = skip_ws(s, n, j + 3);
        } else if (!strncmp(s + j, "+%}", 3)) {
            j += 3;
        } else if (!strncmp(s + j, "%}", 2)) {
            j += 2;
            if (j < n && s[j] == '\n')
                j++;
        } else
            continue;
        *line += lines_in(s + *pos, j - *pos);
        *line_starting = s[j - 1] == '\n';
        *pos = j;
        return 0;
    }
    return lx_err(L, *line, "missing end of raw directive");
}

static int lex(lexer *L)
{
    const char *s = L->src;
    size_t n = L->n, pos = 0;
    int line = 1, line_starting = 1;
    while (pos < n) {
        size_t k = pos;
        int kind = 0;
        for (; k + 1 < n; k++)
            if (s[k] == '{' && (s[k + 1] == '{' || s[k + 1] == '%' || s[k + 1] == '#')) {
                kind = s[k + 1];
                break;
            }
        if (!kind) {
            if (push_data(L, s + pos, n - pos, line))
                return -1;
            break;
        }
        size_t tl = k + 2;
        char sign = tl < n && (s[tl] == '-' || s[tl] == '+') ? s[tl] : 0;
        /* a raw block begins: {%[-+]? raw [-]%} */
        int raw = 0;
        size_t raw_end = 0;
        if (kind == '%') {
            size_t j = skip_ws(s, n, tl + (sign ? 1 : 0));
            if (n - j >= 3 && !strncmp(s + j, "raw", 3)) {
                size_t m = skip_ws(s, n, j + 3);
                if (!strncmp(s + m, "-%}", 3))
                    raw = 1, raw_end = skip_ws(s, n, m + 3);
                else if (!strncmp(s + m, "%}", 2))
                    raw = 1, raw_end = m + 2;
            }
        }
        size_t text_n = k - pos;
        if (sign == '-')
            text_n = rstrip_len(s + pos, text_n);
        else if (sign != '+' && kind != '{') {
            size_t l = text_n;
            while (l > 0 && s[pos + l - 1] != '\n')
                l--;
            if ((l > 0 || line_starting) && all_space(s + pos + l, text_n - l))
                text_n = l;
        }
        if (push_data(L, s + pos, text_n, line))
            return -1;
        line += lines_in(s + pos, k - pos);
        if (raw) {
            line += lines_in(s + k, raw_end - k);
            pos = raw_end;
            if (lex_raw(L, &pos, &line, &line_starting))
                return -1;
            continue;
        }
        pos = tl + (sign ? 1 : 0);
        if (kind == '#') {
            size_t j = pos;
            for (; j + 1 < n; j++) {
                if (s[j] == '#' && s[j + 1] == '}')
                    break;
                if ((s[j] == '-' || s[j] == '+') && j + 2 < n && s[j + 1] == '#' && s[j + 2] == '}')
                    break;
            }
            if (j + 1 >= n)
                return lx_err(L, line, "missing end of comment tag");
            line += lines_in(s + pos, j - pos);
            if (s[j] == '-') {
                j += 3;
                size_t m = skip_ws(s, n, j);
                line += lines_in(s + j, m - j);
                j = m;
            } else if (s[j] == '+')
                j += 3;
            else {
                j += 2;
                if (j < n && s[j] == '\n')
                    j++, line++;
            }
            line_starting = s[j - 1] == '\n';
            pos = j;
            continue;
        }
        tok t = {kind == '%' ? TK_BBEGIN : TK_VBEGIN, line, NULL, 0, 0, 0};
        if (lx_push(L, t) || lex_tag(L, &pos, &line, kind == '%', &line_starting))
            return -1;
    }
    tok t = {TK_EOF, line, NULL, 0, 0, 0};
    return lx_push(L, t);
}

/* ---- parser */

typedef struct parser {
    jarena *a;
    eng_err *e;
    tok *t;
    size_t i, nt;
    int depth, failed;
} parser;

#define MAX_PARSE_DEPTH 200

static int p_err(parser *P, const char *fmt, const char *arg)
{
    if (!P->failed) {
        char m[300];
        snprintf(m, sizeof m, fmt, arg ? arg : "");
        eng_errf(P->e, ENG_EFORMAT, "line %d: %s", P->t[P->i].line, m);
    }
    P->failed = 1;
    return -1;
}

static tok *cur(parser *P)
{
    return &P->t[P->i];
}

static tok *peek(parser *P, size_t k)
{
    return P->i + k < P->nt ? &P->t[P->i + k] : &P->t[P->nt - 1];
}

static int is_op(const tok *t, const char *op)
{
    return t->type == TK_OP && !strcmp(t->s, op);
}

static int is_name(const tok *t, const char *w)
{
    return t->type == TK_NAME && !strcmp(t->s, w);
}

static int expect_op(parser *P, const char *op)
{
    if (!is_op(cur(P), op)) {
        char m[64];
        snprintf(m, sizeof m, "expected '%s'", op);
        return p_err(P, "%s", m);
    }
    P->i++;
    return 0;
}

static const char *tok_desc(const tok *t)
{
    switch (t->type) {
    case TK_EOF: return "end of template";
    case TK_BEND: return "end of statement block";
    case TK_VEND: return "end of print statement";
    case TK_NAME: case TK_OP: return t->s;
    case TK_STR: return "string";
    default: return "number";
    }
}

static jnode *node(parser *P, int kind)
{
    jnode *n = ja_alloc(P->a, sizeof *n);
    if (!n) {
        p_err(P, "template too large", NULL);
        return NULL;
    }
    n->kind = kind;
    n->line = cur(P)->line;
    return n;
}

/* growable arrays of node pointers and names in the arena */
typedef struct nvec { jnode **v; size_t n, cap; } nvec;
typedef struct svec { const char **v; size_t n, cap; } svec;

/* Room for one more element of `size` bytes in the arena array *v of n
 * elements (*cap allocated): 0, or the error when the arena is full. */
static int room(parser *P, void **v, size_t n, size_t *cap, size_t size)
{
    if (n < *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 4;
    void *nv = ja_alloc(P->a, c * size);
    if (!nv)
        return p_err(P, "template too large", NULL);
    if (n)
        memcpy(nv, *v, n * size);
    *v = nv;
    *cap = c;
    return 0;
}

static int nv_push(parser *P, nvec *v, jnode *x)
{
    void *p = v->v;
    int rc = room(P, &p, v->n, &v->cap, sizeof *v->v);
    if (rc)
        return rc;
    v->v = p;
    v->v[v->n++] = x;
    return 0;
}

static int sv_push(parser *P, svec *v, const char *x)
{
    void *p = v->v;
    int rc = room(P, &p, v->n, &v->cap, sizeof *v->v);
    if (rc)
        return rc;
    v->v = p;
    v->v[v->n++] = x;
    return 0;
}

static jnode *p_expr(parser *P, int with_cond);
static jnode *p_unary(parser *P, int with_filter);
static jnode *p_primary(parser *P);
static jnode *p_postfix(parser *P, jnode *n);

static int enter(parser *P)
{
    if (++P->depth > MAX_PARSE_DEPTH)
        return p_err(P, "template nested too deeply", NULL);
    return 0;
}

/* (args) of a call, a filter or a test; the '(' is current. */
static int p_args(parser *P, jnode *n)
{
    nvec pos = {0}, kwv = {0};
    svec kwn = {0};
    if (expect_op(P, "("))
        return -1;
    while (!is_op(cur(P), ")")) {
        if (pos.n + kwv.n && expect_op(P, ","))
            return -1;
        if (is_op(cur(P), ")"))
            break;
        if (cur(P)->type == TK_NAME && is_op(peek(P, 1), "=")) {
            const char *k = cur(P)->s;
            P->i += 2;
            jnode *v = p_expr(P, 1);
            if (!v || sv_push(P, &kwn, k) || nv_push(P, &kwv, v))
                return -1;
        } else {
            if (kwv.n)
                return p_err(P, "positional argument after a keyword argument", NULL);
            jnode *v = p_expr(P, 1);
            if (!v || nv_push(P, &pos, v))
                return -1;
        }
    }
    P->i++;
    n->kids = pos.v;
    n->nkids = pos.n;
    n->kids2 = kwv.v;
    n->nkids2 = kwv.n;
    n->names = kwn.v;
    n->nnames = kwn.n;
    return 0;
}

/* callee(args...): the call node, NULL on an error (reported). */
static jnode *p_call(parser *P, jnode *callee)
{
    jnode *call = node(P, JN_CALL);
    if (!call)
        return NULL;
    call->a = callee;
    return p_args(P, call) ? NULL : call;
}

/* name(args) after a '|' (or after {% filter) */
static jnode *p_one_filter(parser *P, jnode *n)
{
    if (cur(P)->type != TK_NAME)
        return p_err(P, "expected a filter name", NULL), NULL;
    jnode *f = node(P, JN_FILTER);
    if (!f)
        return NULL;
    f->a = n;
    f->name = cur(P)->s;
    P->i++;
    while (is_op(cur(P), ".")) { /* dotted filter names do not exist here */
        return p_err(P, "no filter named '%s.'", f->name), NULL;
    }
    if (is_op(cur(P), "(") && p_args(P, f))
        return NULL;
    return f;
}

/* | name(args) ... and 'is' tests after an operand */
static jnode *p_filter_expr(parser *P, jnode *n)
{
    for (;;) {
        if (is_op(cur(P), "|")) {
            P->i++;
            if (!(n = p_one_filter(P, n)))
                return NULL;
        } else if (is_name(cur(P), "is")) {
            P->i++;
            jnode *t = node(P, JN_TEST);
            if (!t)
                return NULL;
            t->a = n;
            if (is_name(cur(P), "not")) {
                t->op = 1;
                P->i++;
            }
            if (cur(P)->type != TK_NAME)
                return p_err(P, "expected a test name", NULL), NULL;
            t->name = cur(P)->s;
            P->i++;
            tok *c = cur(P);
            if (is_op(c, "(")) {
                if (p_args(P, t))
                    return NULL;
            } else if ((c->type == TK_NAME || c->type == TK_STR || c->type == TK_INT || c->type == TK_FLOAT ||
                        is_op(c, "[") || is_op(c, "{")) &&
                       !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
                if (is_name(c, "is"))
                    return p_err(P, "you cannot chain multiple tests with is", NULL), NULL;
                jnode *arg = p_primary(P);
                if (!arg || !(arg = p_postfix(P, arg)))
                    return NULL;
                jnode **k = ja_alloc(P->a, sizeof *k);
                if (!k)
                    return p_err(P, "template too large", NULL), NULL;
                k[0] = arg;
                t->kids = k;
                t->nkids = 1;
            }
            n = t;
        } else if (is_op(cur(P), "(")) {
            if (!(n = p_call(P, n)))
                return NULL;
        } else
            return n;
    }
}

static jnode *p_subscript(parser *P)
{
    /* start[:stop[:step]] or an expression */
    jnode *parts[3] = {NULL, NULL, NULL};
    int k = 0, slice = 0;
    for (;;) {
        if (is_op(cur(P), ":")) {
            slice = 1;
            if (k >= 2)
                return p_err(P, "too many ':' in a slice", NULL), NULL;
            k++;
            P->i++;
            continue;
        }
        if (is_op(cur(P), "]") || is_op(cur(P), ","))
            break;
        if (parts[k])
            return p_err(P, "expected ']'", NULL), NULL;
        parts[k] = p_expr(P, 1);
        if (!parts[k])
            return NULL;
    }
    if (!slice)
        return parts[0] ? parts[0] : (p_err(P, "expected an index", NULL), NULL);
    jnode *s = node(P, JN_SLICE);
    if (!s)
        return NULL;
    jnode **v = ja_alloc(P->a, 3 * sizeof *v);
    if (!v)
        return p_err(P, "template too large", NULL), NULL;
    memcpy(v, parts, sizeof parts);
    s->kids = v;
    s->nkids = 3;
    return s;
}

static jnode *p_postfix(parser *P, jnode *n)
{
    for (;;) {
        tok *c = cur(P);
        if (is_op(c, ".")) {
            P->i++;
            tok *t = cur(P);
            if (t->type == TK_NAME) {
                jnode *a = node(P, JN_ATTR);
                if (!a)
                    return NULL;
                a->a = n;
                a->name = t->s;
                P->i++;
                n = a;
            } else if (t->type == TK_INT) {
                jnode *it = node(P, JN_ITEM), *lit = node(P, JN_LIT);
                if (!it || !lit)
                    return NULL;
                lit->lit = jv_int(t->i);
                it->a = n;
                it->b = lit;
                P->i++;
                n = it;
            } else
                return p_err(P, "expected a name after '.'", NULL), NULL;
        } else if (is_op(c, "[")) {
            P->i++;
            jnode *it = node(P, JN_ITEM);
            if (!it)
                return NULL;
            jnode *sub = p_subscript(P);
            if (!sub)
                return NULL;
            if (is_op(cur(P), ",")) { /* x[a, b]: a tuple index */
                /* a slice in it would index a list or mapping by a tuple
                 * holding a slice, which no value takes (jinja2: a
                 * TypeError); said here, where the slice has no operand */
                if (sub->kind == JN_SLICE)
                    return p_err(P, "a slice cannot be part of a tuple index", NULL), NULL;
                nvec items = {0};
                if (nv_push(P, &items, sub))
                    return NULL;
                while (is_op(cur(P), ",")) {
                    P->i++;
                    if (is_op(cur(P), "]"))
                        break;
                    jnode *x = p_subscript(P);
                    if (!x || nv_push(P, &items, x))
                        return NULL;
                    if (x->kind == JN_SLICE)
                        return p_err(P, "a slice cannot be part of a tuple index", NULL), NULL;
                }
                sub = node(P, JN_TUPLELIT);
                if (!sub)
                    return NULL;
                sub->kids = items.v;
                sub->nkids = items.n;
            }
            if (expect_op(P, "]"))
                return NULL;
            if (sub->kind == JN_SLICE) {
                sub->a = n;
                n = sub;
            } else {
                it->a = n;
                it->b = sub;
                n = it;
            }
        } else if (is_op(c, "(")) {
            if (!(n = p_call(P, n)))
                return NULL;
        } else
            return n;
    }
}

/* a parenthesised expression or tuple, a list, or a dict */
static jnode *p_seq(parser *P, const char *close, int kind)
{
    nvec items = {0}, vals = {0};
    int comma = 0;
    P->i++;
    while (!is_op(cur(P), close)) {
        if (items.n) {
            if (expect_op(P, ","))
                return NULL;
            comma = 1;
            if (is_op(cur(P), close))
                break;
        }
        jnode *x = p_expr(P, 1);
        if (!x || nv_push(P, &items, x))
            return NULL;
        if (kind == JN_DICTLIT) {
            if (expect_op(P, ":"))
                return NULL;
            jnode *v = p_expr(P, 1);
            if (!v || nv_push(P, &vals, v))
                return NULL;
        }
    }
    P->i++;
    if (kind == JN_TUPLELIT && items.n == 1 && !comma)
        return items.v[0];
    jnode *n = node(P, kind);
    if (!n)
        return NULL;
    n->kids = items.v;
    n->nkids = items.n;
    n->kids2 = vals.v;
    n->nkids2 = vals.n;
    return n;
}

static jnode *p_primary(parser *P)
{
    tok *t = cur(P);
    jnode *n;
    if (enter(P))
        return NULL;
    switch (t->type) {
    case TK_NAME:
        n = node(P, JN_LIT);
        if (!n)
            return NULL;
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True"))
            n->lit = jv_bool(1);
        else if (!strcmp(t->s, "false") || !strcmp(t->s, "False"))
            n->lit = jv_bool(0);
        else if (!strcmp(t->s, "none") || !strcmp(t->s, "None"))
            n->lit = jv_none();
        else {
            n->kind = JN_NAME;
            n->name = t->s;
        }
        P->i++;
        break;
    case TK_STR: {
        n = node(P, JN_LIT);
        if (!n)
            return NULL;
        jbuf b = {0};
        b.max = P->a->max;
        while (cur(P)->type == TK_STR) {
            jb_put(&b, cur(P)->s, cur(P)->n);
            P->i++;
        }
        n->lit = jv_str(P->a, b.p ? b.p : "", b.n);
        free(b.p);
        if (n->lit.t != JV_STR || b.over)
            return p_err(P, "template too large", NULL), NULL;
        break;
    }
    case TK_INT:
    case TK_FLOAT:
        n = node(P, JN_LIT);
        if (!n)
            return NULL;
        n->lit = t->type == TK_INT ? jv_int(t->i) : jv_float(t->f);
        P->i++;
        break;
    case TK_OP:
        if (is_op(t, "(")) {
            n = p_seq(P, ")", JN_TUPLELIT);
            break;
        }
        if (is_op(t, "[")) {
            n = p_seq(P, "]", JN_LISTLIT);
            break;
        }
        if (is_op(t, "{")) {
            n = p_seq(P, "}", JN_DICTLIT);
            break;
        }
        /* fall through */
    default: return p_err(P, "unexpected '%s'", tok_desc(t)), NULL;
    }
    P->depth--;
    return n;
}

static jnode *p_unary(parser *P, int with_filter)
{
    jnode *n;
    if (enter(P))
        return NULL;
    if (is_op(cur(P), "-") || is_op(cur(P), "+")) {
        n = node(P, is_op(cur(P), "-") ? JN_NEG : JN_POS);
        if (!n)
            return NULL;
        P->i++;
        if (!(n->a = p_unary(P, 0)))
            return NULL;
    } else if (!(n = p_primary(P)))
        return NULL;
    if (!(n = p_postfix(P, n)))
        return NULL;
    if (with_filter && !(n = p_filter_expr(P, n)))
        return NULL;
    P->depth--;
    return n;
}

static jnode *bin(parser *P, int op, jnode *a, jnode *b)
{
    jnode *n = node(P, JN_BIN);
    if (!n)
        return NULL;
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

/* One level of left-associative binary operators: operands parsed by
 * `operand`, joined by any of ops (a list ending in {NULL, 0}). */
typedef struct binop {
    const char *tok;
    int op;
} binop;

static jnode *p_binary(parser *P, const binop *ops, jnode *(*operand)(parser *))
{
    jnode *l = operand(P);
    while (l) {
        const binop *o = ops;
        while (o->tok && !is_op(cur(P), o->tok))
            o++;
        if (!o->tok)
            break;
        P->i++;
        jnode *r = operand(P);
        l = r ? bin(P, o->op, l, r) : NULL;
    }
    return l;
}

static jnode *p_unary_filtered(parser *P)
{
    return p_unary(P, 1);
}

static jnode *p_pow(parser *P)
{
    static const binop ops[] = {{"**", JO_POW}, {NULL, 0}};
    return p_binary(P, ops, p_unary_filtered);
}

static jnode *p_math2(parser *P)
{
    static const binop ops[] = {{"*", JO_MUL}, {"/", JO_DIV}, {"//", JO_FDIV}, {"%", JO_MOD}, {NULL, 0}};
    return p_binary(P, ops, p_pow);
}

static jnode *p_concat(parser *P)
{
    static const binop ops[] = {{"~", JO_CAT}, {NULL, 0}};
    return p_binary(P, ops, p_math2);
}

static jnode *p_math1(parser *P)
{
    static const binop ops[] = {{"+", JO_ADD}, {"-", JO_SUB}, {NULL, 0}};
    return p_binary(P, ops, p_concat);
}

static jnode *p_compare(parser *P)
{
    jnode *first = p_math1(P);
    if (!first)
        return NULL;
    nvec operands = {0};
    int ops[64];
    size_t nops = 0;
    for (;;) {
        tok *t = cur(P);
        int op = 0;
        if (t->type == TK_OP) {
            op = !strcmp(t->s, "==") ? JO_EQ : !strcmp(t->s, "!=") ? JO_NE : !strcmp(t->s, "<") ? JO_LT
               : !strcmp(t->s, "<=") ? JO_LE : !strcmp(t->s, ">") ? JO_GT : !strcmp(t->s, ">=") ? JO_GE : 0;
            if (op)
                P->i++;
        } else if (is_name(t, "in")) {
            op = JO_IN;
            P->i++;
        } else if (is_name(t, "not") && is_name(peek(P, 1), "in")) {
            op = JO_NOTIN;
            P->i += 2;
        }
        if (!op)
            break;
        if (nops == 64)
            return p_err(P, "comparison chain too long", NULL), NULL;
        if (!operands.n && nv_push(P, &operands, first))
            return NULL;
        jnode *r = p_math1(P);
        if (!r || nv_push(P, &operands, r))
            return NULL;
        ops[nops++] = op;
    }
    if (!nops)
        return first;
    jnode *n = node(P, JN_CMP);
    if (!n)
        return NULL;
    n->kids = operands.v;
    n->nkids = operands.n;
    n->ops = ja_alloc(P->a, nops * sizeof *n->ops);
    if (!n->ops)
        return p_err(P, "template too large", NULL), NULL;
    memcpy(n->ops, ops, nops * sizeof *ops);
    return n;
}

static jnode *p_not(parser *P)
{
    if (is_name(cur(P), "not")) {
        if (enter(P))
            return NULL;
        jnode *n = node(P, JN_NOT);
        if (!n)
            return NULL;
        P->i++;
        if (!(n->a = p_not(P)))
            return NULL;
        P->depth--;
        return n;
    }
    return p_compare(P);
}

/* A left-associative chain of `word`-joined operands (and / or), each
 * parsed by `operand`. */
static jnode *p_logic(parser *P, const char *word, int kind, jnode *(*operand)(parser *))
{
    jnode *l = operand(P);
    while (l && is_name(cur(P), word)) {
        jnode *n = node(P, kind);
        if (!n)
            return NULL;
        P->i++;
        n->a = l;
        if (!(n->b = operand(P)))
            return NULL;
        l = n;
    }
    return l;
}

static jnode *p_and(parser *P)
{
    return p_logic(P, "and", JN_AND, p_not);
}

static jnode *p_or(parser *P)
{
    return p_logic(P, "or", JN_OR, p_and);
}

static jnode *p_expr(parser *P, int with_cond)
{
    if (enter(P))
        return NULL;
    jnode *n = p_or(P);
    while (with_cond && n && is_name(cur(P), "if")) {
        jnode *c = node(P, JN_COND);
        if (!c)
            return NULL;
        P->i++;
        c->a = n;
        if (!(c->b = p_or(P)))
            return NULL;
        if (is_name(cur(P), "else")) {
            P->i++;
            if (!(c->c = p_expr(P, 1)))
                return NULL;
        }
        n = c;
    }
    P->depth--;
    return n;
}

/* expression, or a tuple of them when commas follow (for {{ a, b }},
 * set values and for iterables) */
static jnode *p_tuple(parser *P, int with_cond)
{
    jnode *first = p_expr(P, with_cond);
    if (!first || !is_op(cur(P), ","))
        return first;
    nvec items = {0};
    if (nv_push(P, &items, first))
        return NULL;
    while (is_op(cur(P), ",")) {
        P->i++;
        tok *t = cur(P);
        if (t->type == TK_BEND || t->type == TK_VEND || is_name(t, "if") || is_name(t, "recursive"))
            break;
        jnode *x = p_expr(P, with_cond);
        if (!x || nv_push(P, &items, x))
            return NULL;
    }
    jnode *n = node(P, JN_TUPLELIT);
    if (!n)
        return NULL;
    n->kids = items.v;
    n->nkids = items.n;
    return n;
}

/* ---- statements */

static jnode *p_body(parser *P, const char *const *ends, const char **which);

static int expect_bend(parser *P)
{
    if (cur(P)->type != TK_BEND)
        return p_err(P, "expected end of statement block, got '%s'", tok_desc(cur(P)));
    P->i++;
    return 0;
}

/* names of a for or set target: a, b or (a, b) */
static int p_targets(parser *P, svec *names)
{
    int paren = is_op(cur(P), "(");
    if (paren)
        P->i++;
    for (;;) {
        if (cur(P)->type != TK_NAME)
            return p_err(P, "expected a name to assign to, got '%s'", tok_desc(cur(P)));
        if (sv_push(P, names, cur(P)->s))
            return -1;
        P->i++;
        if (!is_op(cur(P), ","))
            break;
        P->i++;
        if (paren && is_op(cur(P), ")"))
            break;
    }
    if (paren && expect_op(P, ")"))
        return -1;
    return 0;
}

/* macro and call-block parameters: (a, b=default, ...) */
static int p_params(parser *P, jnode *n)
{
    svec names = {0};
    nvec defs = {0};
    if (expect_op(P, "("))
        return -1;
    while (!is_op(cur(P), ")")) {
        if (names.n && expect_op(P, ","))
            return -1;
        if (is_op(cur(P), ")"))
            break;
        if (cur(P)->type != TK_NAME)
            return p_err(P, "expected a parameter name, got '%s'", tok_desc(cur(P)));
        if (sv_push(P, &names, cur(P)->s))
            return -1;
        P->i++;
        jnode *d = NULL;
        if (is_op(cur(P), "=")) {
            P->i++;
            if (!(d = p_expr(P, 1)))
                return -1;
        } else if (defs.n && defs.v[defs.n - 1])
            return p_err(P, "non-default argument follows default argument", NULL);
        if (nv_push(P, &defs, d))
            return -1;
    }
    P->i++;
    n->names = names.v;
    n->nnames = names.n;
    n->kids2 = defs.v;
    n->nkids2 = defs.n;
    return 0;
}

static jnode *p_stmt(parser *P)
{
    tok *t = cur(P); /* the name after {% */
    if (t->type != TK_NAME)
        return p_err(P, "expected a statement name, got '%s'", tok_desc(t)), NULL;
    const char *w = t->s;
    int line = t->line;
    P->i++;
    jnode *n;
    if (!strcmp(w, "if")) {
        n = node(P, JN_IF);
        jnode *top = n;
        for (;;) {
            if (!n || !(n->a = p_tuple(P, 1)) || expect_bend(P))
                return NULL;
            static const char *const ends[] = {"elif", "else", "endif", NULL};
            const char *which;
            if (!(n->b = p_body(P, ends, &which)))
                return NULL;
            if (!strcmp(which, "elif")) {
                jnode *e = node(P, JN_IF);
                jnode *body = node(P, JN_BODY);
                if (!e || !body)
                    return NULL;
                jnode **k = ja_alloc(P->a, sizeof *k);
                if (!k)
                    return p_err(P, "template too large", NULL), NULL;
                k[0] = e;
                body->kids = k;
                body->nkids = 1;
                n->c = body;
                n = e;
                continue;
            }
            if (!strcmp(which, "else")) {
                if (expect_bend(P))
                    return NULL;
                static const char *const ends2[] = {"endif", NULL};
                if (!(n->c = p_body(P, ends2, &which)))
                    return NULL;
            }
            break;
        }
        n = top;
    } else if (!strcmp(w, "for")) {
        n = node(P, JN_FOR);
        svec names = {0};
        if (!n || p_targets(P, &names))
            return NULL;
        n->names = names.v;
        n->nnames = names.n;
        if (!is_name(cur(P), "in"))
            return p_err(P, "expected 'in' in a for loop", NULL), NULL;
        P->i++;
        if (!(n->a = p_tuple(P, 0)))
            return NULL;
        if (is_name(cur(P), "if")) {
            P->i++;
            jnode **k = ja_alloc(P->a, sizeof *k);
            if (!k)
                return p_err(P, "template too large", NULL), NULL;
            if (!(k[0] = p_expr(P, 1)))
                return NULL;
            n->kids = k;
            n->nkids = 1;
        }
        if (is_name(cur(P), "recursive"))
            return p_err(P, "recursive loops are not supported", NULL), NULL;
        if (expect_bend(P))
            return NULL;
        static const char *const ends[] = {"else", "endfor", NULL};
        const char *which;
        if (!(n->b = p_body(P, ends, &which)))
            return NULL;
        if (!strcmp(which, "else")) {
            static const char *const ends2[] = {"endfor", NULL};
            if (expect_bend(P) || !(n->c = p_body(P, ends2, &which)))
                return NULL;
        }
    } else if (!strcmp(w, "set")) {
        n = node(P, JN_SET);
        if (!n)
            return NULL;
        if (cur(P)->type == TK_NAME && is_op(peek(P, 1), ".")) { /* ns.attr = value */
            const char **nm = ja_alloc(P->a, sizeof *nm);
            if (!nm)
                return p_err(P, "template too large", NULL), NULL;
            nm[0] = cur(P)->s;
            n->names = nm;
            n->nnames = 1;
            P->i += 2;
            if (cur(P)->type != TK_NAME)
                return p_err(P, "expected an attribute name", NULL), NULL;
            n->name = cur(P)->s;
            P->i++;
        } else {
            svec names = {0};
            if (p_targets(P, &names))
                return NULL;
            n->names = names.v;
            n->nnames = names.n;
        }
        if (is_op(cur(P), "=")) {
            P->i++;
            if (!(n->a = p_tuple(P, 1)) || expect_bend(P))
                return NULL;
        } else {
            if (n->nnames != 1 || n->name)
                return p_err(P, "expected '='", NULL), NULL;
            n->kind = JN_SETBLOCK;
            if (is_op(cur(P), "|")) { /* {% set x | filter %} */
                jnode *hole = node(P, JN_LIT);
                if (!hole || !(n->c = p_filter_expr(P, hole)))
                    return NULL;
                hole->lit = jv_undef();
                hole->op = 1; /* the block's text goes here */
            }
            if (expect_bend(P))
                return NULL;
            static const char *const ends[] = {"endset", NULL};
            const char *which;
            if (!(n->a = p_body(P, ends, &which)))
                return NULL;
        }
        n->line = line;
        return n;
    } else if (!strcmp(w, "macro")) {
        n = node(P, JN_MACRO);
        if (!n)
            return NULL;
        if (cur(P)->type != TK_NAME)
            return p_err(P, "expected a macro name", NULL), NULL;
        n->name = cur(P)->s;
        P->i++;
        if (p_params(P, n) || expect_bend(P))
            return NULL;
        static const char *const ends[] = {"endmacro", NULL};
        const char *which;
        if (!(n->a = p_body(P, ends, &which)))
            return NULL;
    } else if (!strcmp(w, "call")) {
        n = node(P, JN_CALLBLOCK);
        if (!n)
            return NULL;
        if (is_op(cur(P), "(") && p_params(P, n))
            return NULL;
        if (!(n->a = p_expr(P, 1)))
            return NULL;
        if (n->a->kind != JN_CALL)
            return p_err(P, "expected a call after 'call'", NULL), NULL;
        if (expect_bend(P))
            return NULL;
        static const char *const ends[] = {"endcall", NULL};
        const char *which;
        if (!(n->b = p_body(P, ends, &which)))
            return NULL;
    } else if (!strcmp(w, "filter")) {
        n = node(P, JN_FILTERBLOCK);
        jnode *hole = node(P, JN_LIT);
        if (!n || !hole)
            return NULL;
        hole->op = 1;
        if (!(n->c = p_one_filter(P, hole)) || !(n->c = p_filter_expr(P, n->c)) || expect_bend(P))
            return NULL;
        static const char *const ends[] = {"endfilter", NULL};
        const char *which;
        if (!(n->a = p_body(P, ends, &which)))
            return NULL;
    } else if (!strcmp(w, "generation")) {
        if (expect_bend(P))
            return NULL;
        static const char *const ends[] = {"endgeneration", NULL};
        const char *which;
        if (!(n = p_body(P, ends, &which)))
            return NULL;
    } else if (!strcmp(w, "break") || !strcmp(w, "continue")) {
        n = node(P, w[0] == 'b' ? JN_BREAK : JN_CONTINUE);
        if (!n || expect_bend(P))
            return NULL;
    } else
        return P->i--, p_err(P, "encountered unknown tag '%s'", w), NULL;
    if (!n)
        return NULL;
    n->line = line;
    return n;
}

/* Statements until {% END %} for one of ends (NULL: the end of the
 * template); *which is the end found, its {% NAME consumed. */
static jnode *p_body(parser *P, const char *const *ends, const char **which)
{
    nvec kids = {0};
    jnode *body = node(P, JN_BODY);
    if (!body || enter(P))
        return NULL;
    for (;;) {
        tok *t = cur(P);
        jnode *n = NULL;
        if (t->type == TK_EOF) {
            if (ends)
                return p_err(P, "unexpected end of template, expected '%s'", ends[0]), NULL;
            break;
        }
        if (t->type == TK_DATA) {
            n = node(P, JN_TEXT);
            if (!n)
                return NULL;
            n->lit = jv_str(P->a, t->s, t->n);
            if (n->lit.t != JV_STR)
                return p_err(P, "template too large", NULL), NULL;
            P->i++;
        } else if (t->type == TK_VBEGIN) {
            P->i++;
            n = node(P, JN_OUT);
            if (!n || !(n->a = p_tuple(P, 1)))
                return NULL;
            if (cur(P)->type != TK_VEND)
                return p_err(P, "expected end of print statement, got '%s'", tok_desc(cur(P))), NULL;
            P->i++;
        } else if (t->type == TK_BBEGIN) {
            tok *w = peek(P, 1);
            if (ends && w->type == TK_NAME) {
                for (int k = 0; ends[k]; k++)
                    if (!strcmp(w->s, ends[k])) {
                        P->i += 2;
                        *which = ends[k];
                        if (strcmp(ends[k], "else") && strcmp(ends[k], "elif") && expect_bend(P))
                            return NULL;
                        goto done;
                    }
            }
            if (w->type == TK_NAME && (!strncmp(w->s, "end", 3) || !strcmp(w->s, "else") || !strcmp(w->s, "elif"))) {
                P->i++;
                return p_err(P, "unexpected '%s'", w->s), NULL;
            }
            P->i++;
            if (!(n = p_stmt(P)))
                return NULL;
        } else
            return p_err(P, "unexpected '%s'", tok_desc(t)), NULL;
        if (nv_push(P, &kids, n))
            return NULL;
    }
done:
    body->kids = kids.v;
    body->nkids = kids.n;
    P->depth--;
    return body;
}

int jinja_parse(const char *src, size_t len, jarena *a, jnode **root, eng_err *e)
{
    /* line breaks to \n, then drop one trailing newline */
    char *s = malloc(len + 1);
    if (!s)
        return eng_errf(e, ENG_ENOMEM, "out of memory");
    s[0] = 0;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
        } else
            s[n++] = src[i];
    }
    if (n && s[n - 1] == '\n')
        n--;
    jstr *copy = js_new(a, s, n);
    free(s);
    if (!copy)
        return eng_errf(e, ENG_ENOMEM, "template too large");
    lexer L = {a, e, copy->s, n, NULL, 0, 0, 0};
    if (lex(&L))
        return ENG_EFORMAT;
    parser P = {a, e, L.t, 0, L.nt, 0, 0};
    const char *which;
    *root = p_body(&P, NULL, &which);
    return *root ? 0 : ENG_EFORMAT;
}
