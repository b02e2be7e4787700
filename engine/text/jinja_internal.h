/* Private to the Jinja interpreter (jinja_value.c, jinja_parse.c,
 * jinja_eval.c): values, the arena they live in, the syntax tree. */
#ifndef NIBBLE_JINJA_INTERNAL_H
#define NIBBLE_JINJA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "bytes.h"
#include "err.h"
#include "jinja.h"

/* ---- arena: everything a render (or a parse) allocates; freed at once.
 * max bounds the bytes handed out; going past it is an error. */
typedef struct jarena_blk jarena_blk;
typedef struct jarena {
    jarena_blk *blk;
    size_t used, max;
    int failed; /* set once an allocation was refused */
} jarena;

void *ja_alloc(jarena *a, size_t n); /* zeroed; NULL when over the bound */
void ja_free_all(jarena *a);

/* ---- values. Passed by value; heap parts live in an arena. */
enum jv_type {
    JV_UNDEF = 0, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_FUNC
};
enum { JVF_TUPLE = 1, JVF_NS = 2, JVF_LOOP = 4 };

typedef struct jstr { size_t n; char s[]; } jstr; /* UTF-8, NUL-terminated */
typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jfunc jfunc;

typedef struct jv {
    uint8_t t;
    uint8_t flags;
    union {
        int b;
        int64_t i;
        double f;
        jstr *s;       /* JV_STR; for JV_UNDEF, the name (may be NULL) */
        jlist *l;
        jdict *d;
        jfunc *fn;
    } u;
} jv;

struct jlist { size_t n, cap; jv *v; };
struct jdict { size_t n, cap; jv *k; jv *v; };

struct jnode;
struct jscope;
enum jfunc_kind { JF_BUILTIN, JF_METHOD, JF_MACRO, JF_CALLER };
struct jfunc {
    int kind;
    const char *name;        /* builtin or method name */
    jv self;                 /* JF_METHOD: the object */
    const struct jnode *node; /* JF_MACRO / JF_CALLER: the definition */
    struct jscope *scope;    /* where it was defined */
    struct jfunc *caller;    /* JF_MACRO bound for a call block */
};

static inline jv jv_undef(void) { jv v = {0}; return v; }
static inline jv jv_none(void) { jv v = {0}; v.t = JV_NONE; return v; }
static inline jv jv_bool(int b) { jv v = {0}; v.t = JV_BOOL; v.u.b = !!b; return v; }
static inline jv jv_int(int64_t i) { jv v = {0}; v.t = JV_INT; v.u.i = i; return v; }
static inline jv jv_float(double f) { jv v = {0}; v.t = JV_FLOAT; v.u.f = f; return v; }

/* a string of n bytes copied from s (s NULL: left zeroed for the caller) */
jstr *js_new(jarena *a, const char *s, size_t n);
jv jv_str(jarena *a, const char *s, size_t n); /* JV_UNDEF with a->failed set on failure */
jv jv_cstr(jarena *a, const char *s);
jv jv_list(jarena *a);
jv jv_dict(jarena *a);
int jl_push(jarena *a, jlist *l, jv v);
int jd_set(jarena *a, jdict *d, jv k, jv v);
jv *jd_get(const jdict *d, jv k);
jv *jd_gets(const jdict *d, const char *k);

int jv_truthy(jv v);
int jv_eq(jv a, jv b);
/* Python ordering: -1/0/1; *err set when the types do not compare. */
int jv_cmp(jv a, jv b, int *err, int ci);
int jv_is_seq(jv v); /* list, tuple, string, dict (what a for loop walks) */
size_t utf8_len(const char *s, size_t n);
const char *jv_type_name(jv v);

/* A growable byte buffer (malloc'd, bounded by max). */
typedef struct jbuf { char *p; size_t n, cap, max; int over; } jbuf;
int jb_put(jbuf *b, const char *s, size_t n);
int jb_puts(jbuf *b, const char *s);
int jb_putc(jbuf *b, char c);

/* Python's str() and repr() of a value; JSON as transformers' tojson
 * writes it. Return 0, or -1 when the buffer's bound is exceeded or the
 * value cannot be written (tojson of undefined or a function: *why). */
int jv_write_str(jbuf *b, jv v, int depth);
int jv_write_repr(jbuf *b, jv v, int depth);
int jv_write_json(jbuf *b, jv v, int indent, const char *item_sep, const char *key_sep, int sort_keys,
                  int level, int depth, const char **why);
void write_float(jbuf *b, double f);
/* Parse JSON text into a value; 0 or -1 with a reason. */
int jv_parse_json(jarena *a, const char *s, size_t n, jv *out, char *why, size_t why_n, int max_depth);

/* ---- syntax tree */
enum jnode_kind {
    /* expressions */
    JN_LIT, JN_NAME, JN_ATTR, JN_ITEM, JN_SLICE, JN_CALL, JN_FILTER, JN_TEST, JN_NEG, JN_POS, JN_NOT,
    JN_AND, JN_OR, JN_BIN, JN_CMP, JN_COND, JN_LISTLIT, JN_TUPLELIT, JN_DICTLIT,
    /* statements */
    JN_BODY, JN_TEXT, JN_OUT, JN_IF, JN_FOR, JN_SET, JN_SETBLOCK, JN_MACRO, JN_CALLBLOCK, JN_FILTERBLOCK,
    JN_BREAK, JN_CONTINUE
};
enum jop {
    JO_ADD = 1, JO_SUB, JO_MUL, JO_DIV, JO_FDIV, JO_MOD, JO_POW, JO_CAT,
    JO_EQ, JO_NE, JO_LT, JO_LE, JO_GT, JO_GE, JO_IN, JO_NOTIN
};

typedef struct jnode {
    int kind, line, op;
    jv lit;                 /* JN_LIT; JN_TEXT's text */
    const char *name;       /* NAME, ATTR, FILTER, TEST, MACRO name; SET attribute */
    struct jnode *a, *b, *c; /* operands; IF cond; FOR iter/filter; SET value */
    struct jnode **kids;    /* args, items, body statements, comparison operands */
    size_t nkids;
    struct jnode **kids2;   /* keyword values, dict values, else body, macro defaults */
    size_t nkids2;
    const char **names;     /* keyword names, macro params, for/set targets */
    size_t nnames;
    int *ops;               /* JN_CMP: the operators between kids */
} jnode;

struct eng_jinja {
    jarena arena; /* the tree */
    jnode *root;
};

/* jinja_parse.c */
int jinja_parse(const char *src, size_t len, jarena *a, jnode **root, eng_err *e);
/* jinja_eval.c: names the parser checks at compile time */
int jinja_filter_known(const char *name);
int jinja_test_known(const char *name);

#endif
