/* Markdown to styled lines (see markdown.h): md4c's callbacks gather each
 * leaf block's inline text with a style per byte, and when the block ends
 * it is wrapped to the width that is left after its margin (quote bars,
 * list markers) and written out as lines of spans. Tables are gathered
 * whole and laid out when they end; code blocks line by line, cut to the
 * width. */
#include "markdown.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <md4c.h>

#include "text.h"

#define MAX_NEST 32    /* containers kept; deeper ones are counted, not drawn */
#define MAX_LINK 4     /* links and images kept open at once (an image in a link) */
#define MAX_MARK 24    /* a list item's marker: "123456789. [x] " */
#define CUT_MARK "\u203a" /* › where a code line was cut */
#define RULE_CH "\u2500"  /* ─ */
#define MD_PAD 64         /* NUL bytes after the text md4c is given */

/* ---- inline text being gathered: bytes, a style each, and where in the
 * source the bytes came from (for the lines' src) ---- */
typedef struct pbuf {
    char *b;
    uint32_t *st;
    size_t n, cap;
    size_t *at, *pos; /* byte at[k] of b came from source byte pos[k] */
    size_t nmap, capmap;
} pbuf;

static void pbuf_free(pbuf *p)
{
    free(p->b);
    free(p->st);
    free(p->at);
    free(p->pos);
    memset(p, 0, sizeof *p);
}

static int pbuf_put(pbuf *p, const char *s, size_t n, uint32_t style)
{
    if (p->n + n > p->cap) {
        size_t c = p->cap ? p->cap : 256;
        while (c < p->n + n)
            c *= 2;
        char *nb = realloc(p->b, c);
        if (!nb)
            return -1;
        p->b = nb;
        uint32_t *ns = realloc(p->st, c * sizeof *ns);
        if (!ns)
            return -1;
        p->st = ns;
        p->cap = c;
    }
    memcpy(p->b + p->n, s, n);
    for (size_t i = 0; i < n; i++)
        p->st[p->n + i] = style;
    p->n += n;
    return 0;
}

static int pbuf_map(pbuf *p, size_t srcpos)
{
    if (p->nmap && p->at[p->nmap - 1] == p->n) {
        p->pos[p->nmap - 1] = srcpos;
        return 0;
    }
    if (p->nmap == p->capmap) {
        size_t c = p->capmap ? p->capmap * 2 : 32;
        size_t *a = realloc(p->at, c * sizeof *a);
        if (!a)
            return -1;
        p->at = a;
        size_t *q = realloc(p->pos, c * sizeof *q);
        if (!q)
            return -1;
        p->pos = q;
        p->capmap = c;
    }
    p->at[p->nmap] = p->n;
    p->pos[p->nmap] = srcpos;
    p->nmap++;
    return 0;
}

/* the source byte of p's byte i */
static size_t pbuf_src(const pbuf *p, size_t i, size_t dflt)
{
    /* at[] only grows: the last entry at or before i */
    size_t lo = 0, hi = p->nmap;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->at[mid] <= i)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? p->pos[lo - 1] + (i - p->at[lo - 1]) : dflt;
}

/* ---- containers: block quotes, lists, list items ---- */
enum { K_QUOTE = 1, K_UL, K_OL, K_LI };

typedef struct cont {
    int kind;
    int tight;      /* lists: no blank lines between items */
    unsigned next;  /* OL: the next item's number */
    char mark[MAX_MARK];
    int mark_w;
    int pending;    /* LI: its marker is not drawn yet */
} cont;

/* a table cell, gathered */
typedef struct cell {
    char *b;
    uint32_t *st;
    size_t n;
    size_t src; /* where its text starts in the source */
    int row, col, align, head;
} cell;

enum { LEAF_NONE, LEAF_P, LEAF_H, LEAF_CODE, LEAF_IMPLICIT, LEAF_CELL };

typedef struct rend {
    const ui_md_opts *o;
    ui_md *out;
    const char *src;
    size_t n;
    int width;
    int oom;
    cont c[MAX_NEST];
    int nc;          /* containers open (may exceed MAX_NEST) */
    int leaf;
    uint32_t leaf_style;
    pbuf p;
    size_t last_src; /* the source byte of the latest text */
    int need_sep;    /* a block ended: a blank line before the next one */
    int em, strong, code, del, link;
    struct {
        char *href; /* a copy: md4c frees its own when enter_span returns */
        size_t n, start;
        int img;
    } ln[MAX_LINK];
    int nln;
    /* the table being gathered */
    int in_table, row, col;
    cell *cells;
    size_t ncells, capcells;
} rend;

/* ---- output ---- */

static void *grow(void *v, size_t *cap, size_t need, size_t size, int *oom)
{
    if (need <= *cap)
        return v;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *nv = realloc(v, c * size);
    if (!nv) {
        *oom = 1;
        return NULL;
    }
    *cap = c;
    return nv;
}

static void line_begin(rend *r, size_t src)
{
    ui_md *m = r->out;
    if (r->oom)
        return;
    ui_md_line *l = grow(m->lines, &m->caplines, m->nlines + 1, sizeof *l, &r->oom);
    if (!l)
        return;
    m->lines = l;
    /* src never goes back: a line whose text has no place of its own in
     * the source (an empty item, a link's address) keeps the one before */
    size_t at = r->o->src_base + src;
    if (m->nlines && l[m->nlines - 1].src > at)
        at = l[m->nlines - 1].src;
    l[m->nlines++] = (ui_md_line){(uint32_t)m->nspans, 0, 0, -1, at};
}

static ui_md_line *cur_line(rend *r) { return r->out->nlines ? &r->out->lines[r->out->nlines - 1] : NULL; }

/* the source byte of the line before: lines that stand for no text of
 * their own (blank ones, rules) take it, so src never goes back */
static size_t prev_src(rend *r)
{
    ui_md_line *l = cur_line(r);
    return l ? l->src - r->o->src_base : 0;
}

/* Text onto the current line; it joins the line's last span when that
 * has the same style. */
static void put(rend *r, const char *s, size_t n, uint32_t style)
{
    ui_md *m = r->out;
    ui_md_line *l = cur_line(r);
    if (r->oom || !n || !l)
        return;
    if (m->ntext + n > UINT32_MAX) {
        r->oom = 1;
        return;
    }
    char *t = grow(m->text, &m->captext, m->ntext + n + 1, 1, &r->oom);
    if (!t)
        return;
    m->text = t;
    memcpy(t + m->ntext, s, n);
    t[m->ntext + n] = 0;
    style |= r->o->style;
    ui_md_span *last = l->nspans ? &m->spans[l->span + l->nspans - 1] : NULL;
    if (last && last->style == style && last->off + last->len == m->ntext)
        last->len += (uint32_t)n;
    else {
        ui_md_span *sp = grow(m->spans, &m->capspans, m->nspans + 1, sizeof *sp, &r->oom);
        if (!sp)
            return;
        m->spans = sp;
        sp[m->nspans++] = (ui_md_span){(uint32_t)m->ntext, (uint32_t)n, style};
        l->nspans++;
    }
    m->ntext += n;
    l->cols += ui_width(s, n);
}

static void put_z(rend *r, const char *s, uint32_t style) { put(r, s, strlen(s), style); }

static void put_blanks(rend *r, int k, uint32_t style)
{
    static const char sp[] = "                                ";
    while (k > 0) {
        int c = k > 32 ? 32 : k;
        put(r, sp, (size_t)c, style);
        k -= c;
    }
}

/* ---- the margin: the caller's lead, quote bars, list markers ---- */

typedef struct piece {
    const char *s;
    size_t n;
    int w;
    uint32_t style;
    int blank; /* w blanks (an item's marker after its first line) */
} piece;

/* The margin's pieces for a line (first: the block's first line, where
 * pending item markers show; blank: a blank separating line, which shows
 * no marker), cut from the left to leave the text some room. Returns the
 * count; *cols their width. */
static int margin(rend *r, int first, piece *pc, int *cols)
{
    int k = 0, w = 0;
    if (r->o->lead && *r->o->lead) {
        size_t n = strlen(r->o->lead);
        pc[k++] = (piece){r->o->lead, n, ui_width(r->o->lead, n), 0, 0};
    }
    int lead = k;
    int nc = r->nc < MAX_NEST ? r->nc : MAX_NEST;
    for (int i = 0; i < nc; i++) {
        const cont *c = &r->c[i];
        if (c->kind == K_QUOTE)
            pc[k++] = (piece){"\u2502 ", strlen("\u2502 "), 2, UI_MD_QUOTE, 0};
        else if (c->kind == K_LI) {
            if (first && c->pending)
                pc[k++] = (piece){c->mark, strlen(c->mark), c->mark_w, UI_MD_BULLET, 0};
            else
                pc[k++] = (piece){NULL, 0, c->mark_w, 0, 1};
        }
    }
    for (int i = 0; i < k; i++)
        w += pc[i].w;
    /* at least min(width, 8) columns stay for the text: deep nesting on a
     * narrow screen loses its outer margins first, then the lead */
    int room = r->width < 8 ? r->width : 8;
    int start = lead;
    while (w > r->width - room && start < k)
        w -= pc[start++].w;
    if (w > r->width - room && lead) {
        w -= pc[0].w;
        pc[0].w = 0;
        pc[0].n = 0;
    }
    if (start > lead) {
        memmove(pc + lead, pc + start, (size_t)(k - start) * sizeof *pc);
        k -= start - lead;
    }
    *cols = w;
    return k;
}

static void put_margin(rend *r, const piece *pc, int k)
{
    for (int i = 0; i < k; i++) {
        if (pc[i].blank)
            put_blanks(r, pc[i].w, pc[i].style);
        else
            put(r, pc[i].s, pc[i].n, pc[i].style);
    }
}

static void markers_drawn(rend *r)
{
    int nc = r->nc < MAX_NEST ? r->nc : MAX_NEST;
    for (int i = 0; i < nc; i++)
        r->c[i].pending = 0;
}

/* a line with only the margin (quote bars), between blocks */
static void blank_line(rend *r)
{
    piece pc[MAX_NEST + 1];
    int w;
    int k = margin(r, 0, pc, &w);
    line_begin(r, prev_src(r));
    /* only the bars: trailing blanks of items would be noise */
    while (k > 0 && (pc[k - 1].blank || pc[k - 1].style != UI_MD_QUOTE))
        k--;
    put_margin(r, pc, k);
}

/* in an item of a tight list (no blank lines between its blocks) */
static int in_tight(const rend *r)
{
    int nc = r->nc < MAX_NEST ? r->nc : MAX_NEST;
    for (int i = nc - 1; i >= 0; i--) {
        if (r->c[i].kind == K_UL || r->c[i].kind == K_OL)
            return r->c[i].tight;
        if (r->c[i].kind == K_QUOTE)
            return 0;
    }
    return 0;
}

static void separate(rend *r)
{
    if (r->need_sep && !in_tight(r))
        blank_line(r);
    r->need_sep = 0;
}

/* Wrap b[0..n) (style per byte) to the width after the margin and write
 * the lines. */
static void emit_wrapped(rend *r, const char *b, const uint32_t *st, size_t n, const pbuf *map)
{
    piece pc[MAX_NEST + 1];
    int mw;
    margin(r, 1, pc, &mw);
    int avail = r->width - mw;
    if (avail < 1)
        avail = 1;
    size_t nl = ui_wrap(b, n, avail, 1, NULL, 0);
    ui_line *ls = malloc((nl ? nl : 1) * sizeof *ls);
    if (!ls) {
        r->oom = 1;
        return;
    }
    ui_wrap(b, n, avail, 1, ls, nl);
    for (size_t i = 0; i < nl && !r->oom; i++) {
        int k = margin(r, 1, pc, &mw);
        line_begin(r, map ? pbuf_src(map, ls[i].start, r->last_src) : r->last_src);
        put_margin(r, pc, k);
        markers_drawn(r);
        for (size_t a = ls[i].start; a < ls[i].end;) {
            size_t e = a + 1;
            while (e < ls[i].end && st[e] == st[a])
                e++;
            put(r, b + a, e - a, st[a]);
            a = e;
        }
    }
    free(ls);
}

/* ---- leaf blocks ---- */

static void flush_para(rend *r)
{
    if (r->leaf != LEAF_P && r->leaf != LEAF_H && r->leaf != LEAF_IMPLICIT)
        return;
    separate(r);
    emit_wrapped(r, r->p.b ? r->p.b : "", r->p.st, r->p.n, &r->p);
    r->p.n = 0;
    r->p.nmap = 0;
    r->leaf = LEAF_NONE;
    r->leaf_style = 0;
    r->need_sep = 1;
}

/* tabs to blanks (stops every 4 columns) into o; returns its length */
static size_t detab(const char *s, size_t n, char *o, size_t cap)
{
    size_t u = 0;
    int col = 0, w, cp;
    for (size_t i = 0; i < n && u < cap;) {
        if (s[i] == '\t') {
            do
                o[u++] = ' ';
            while (++col % 4 && u < cap);
            i++;
            continue;
        }
        size_t len = ui_char(s, n, i, &w, &cp);
        if (u + len > cap)
            break;
        memcpy(o + u, s + i, len);
        u += len;
        col += w;
        i += len;
    }
    return u;
}

static void code_line(rend *r, const char *s, size_t n, size_t src)
{
    piece pc[MAX_NEST + 1];
    int mw;
    int k = margin(r, 1, pc, &mw);
    line_begin(r, src);
    put_margin(r, pc, k);
    markers_drawn(r);
    ui_md_line *l = cur_line(r);
    if (!l)
        return;
    l->code_x = l->cols;
    int avail = r->width - l->cols;
    int pad = avail >= 4;
    int room = avail - pad;
    if (pad)
        put(r, " ", 1, UI_MD_BLOCK);
    size_t cap = n * 4 + 4;
    char *t = malloc(cap);
    if (!t) {
        r->oom = 1;
        return;
    }
    size_t tn = detab(s, n, t, cap);
    if (ui_width(t, tn) <= room)
        put(r, t, tn, UI_MD_BLOCK);
    else if (room >= 2) {
        put(r, t, ui_fit(t, tn, room - 1), UI_MD_BLOCK);
        put_z(r, CUT_MARK, UI_MD_BLOCK | UI_MD_CUT);
    } else
        put(r, t, ui_fit(t, tn, room), UI_MD_BLOCK);
    free(t);
}

static void flush_code(rend *r)
{
    separate(r);
    const char *b = r->p.b ? r->p.b : ""; /* an empty block has no buffer yet */
    size_t n = r->p.n;
    if (n && b[n - 1] == '\n')
        n--; /* the block's last line ends with one */
    size_t a = 0;
    do {
        size_t e = a;
        while (e < n && b[e] != '\n')
            e++;
        code_line(r, b + a, e - a, pbuf_src(&r->p, a, r->last_src));
        a = e + 1;
    } while (a <= n && !r->oom);
    r->p.n = 0;
    r->p.nmap = 0;
    r->leaf = LEAF_NONE;
    r->need_sep = 1;
}

/* ---- tables ---- */

static void cells_free(rend *r)
{
    for (size_t i = 0; i < r->ncells; i++) {
        free(r->cells[i].b);
        free(r->cells[i].st);
    }
    free(r->cells);
    r->cells = NULL;
    r->ncells = r->capcells = 0;
}

static void cell_end(rend *r, int align, int head)
{
    cell *c = grow(r->cells, &r->capcells, r->ncells + 1, sizeof *c, &r->oom);
    if (!c)
        return;
    r->cells = c;
    cell x = {malloc(r->p.n + 1), malloc((r->p.n + 1) * sizeof(uint32_t)), r->p.n,
              pbuf_src(&r->p, 0, r->last_src), r->row, r->col, align, head};
    if (!x.b || !x.st) {
        free(x.b);
        free(x.st);
        r->oom = 1;
        return;
    }
    memcpy(x.b, r->p.b ? r->p.b : "", r->p.n);
    if (r->p.n)
        memcpy(x.st, r->p.st, r->p.n * sizeof *x.st);
    /* a cell is one line: breaks inside it are blanks */
    for (size_t i = 0; i < x.n; i++)
        if (x.b[i] == '\n')
            x.b[i] = ' ';
    r->cells[r->ncells++] = x;
    r->p.n = 0;
    r->p.nmap = 0;
    r->col++;
}

static void put_cell(rend *r, const cell *c, int w)
{
    int cw = c ? ui_width(c->b, c->n) : 0;
    int before = 0, after = w - cw;
    if (c && c->align == MD_ALIGN_RIGHT)
        before = after, after = 0;
    else if (c && c->align == MD_ALIGN_CENTER)
        before = after / 2, after -= before;
    put_blanks(r, before, 0);
    for (size_t a = 0; c && a < c->n;) {
        size_t e = a + 1;
        while (e < c->n && c->st[e] == c->st[a])
            e++;
        put(r, c->b + a, e - a, c->st[a] | (c->head ? UI_MD_HEAD | UI_MD_BOLD : 0));
        a = e;
    }
    put_blanks(r, after, 0);
}

static const char SEP[] = " \u2502 ";  /*  │  */
static const char CROSS[] = "\u2500\u253c\u2500"; /* ─┼─ */

static void flush_table(rend *r)
{
    int rows = 0, cols = 0;
    for (size_t i = 0; i < r->ncells; i++) {
        if (r->cells[i].row + 1 > rows)
            rows = r->cells[i].row + 1;
        if (r->cells[i].col + 1 > cols)
            cols = r->cells[i].col + 1;
    }
    if (!rows || !cols)
        return;
    separate(r);
    int *w = calloc((size_t)cols, sizeof *w);
    const cell **grid = calloc((size_t)rows * (size_t)cols, sizeof *grid);
    if (!w || !grid) {
        free(w);
        free(grid);
        r->oom = 1;
        return;
    }
    for (size_t i = 0; i < r->ncells; i++) {
        const cell *c = &r->cells[i];
        grid[(size_t)c->row * (size_t)cols + (size_t)c->col] = c;
        int cw = ui_width(c->b, c->n);
        if (cw > w[c->col])
            w[c->col] = cw;
    }
    long total = 3L * (cols - 1);
    for (int k = 0; k < cols; k++)
        total += w[k];
    piece pc[MAX_NEST + 1];
    int mw;
    margin(r, 1, pc, &mw);
    if (total <= r->width - mw) {
        /* in columns: the header, a rule, the body */
        for (int y = 0; y < rows && !r->oom; y++) {
            int k = margin(r, 1, pc, &mw);
            const cell *first = grid[(size_t)y * (size_t)cols];
            size_t src = first ? first->src : prev_src(r);
            line_begin(r, src);
            put_margin(r, pc, k);
            markers_drawn(r);
            for (int x = 0; x < cols; x++) {
                if (x)
                    put_z(r, SEP, UI_MD_RULE);
                put_cell(r, grid[(size_t)y * (size_t)cols + (size_t)x], w[x]);
            }
            if (y == 0) {
                k = margin(r, 0, pc, &mw);
                line_begin(r, src);
                put_margin(r, pc, k);
                for (int x = 0; x < cols; x++) {
                    if (x)
                        put_z(r, CROSS, UI_MD_RULE);
                    for (int i = 0; i < w[x]; i++)
                        put_z(r, RULE_CH, UI_MD_RULE);
                }
            }
        }
    } else {
        /* too wide: a row a line, wrapped, its cells apart by bars */
        pbuf row = {0};
        for (int y = 0; y < rows && !r->oom; y++) {
            row.n = 0;
            for (int x = 0; x < cols; x++) {
                const cell *c = grid[(size_t)y * (size_t)cols + (size_t)x];
                if (x && pbuf_put(&row, SEP, strlen(SEP), UI_MD_RULE))
                    r->oom = 1;
                for (size_t i = 0; c && i < c->n && !r->oom; i++)
                    if (pbuf_put(&row, c->b + i, 1, c->st[i] | (c->head ? UI_MD_HEAD | UI_MD_BOLD : 0)))
                        r->oom = 1;
            }
            const cell *first = grid[(size_t)y * (size_t)cols];
            r->last_src = first ? first->src : prev_src(r);
            if (!r->oom)
                emit_wrapped(r, row.b ? row.b : "", row.st, row.n, NULL);
        }
        pbuf_free(&row);
    }
    free(w);
    free(grid);
    r->need_sep = 1;
}

/* ---- md4c's callbacks ---- */

static void push(rend *r, cont c)
{
    if (r->nc < MAX_NEST)
        r->c[r->nc] = c;
    r->nc++;
}

static cont *top(rend *r) { return r->nc > 0 && r->nc <= MAX_NEST ? &r->c[r->nc - 1] : NULL; }

static int list_depth(const rend *r)
{
    int d = 0, nc = r->nc < MAX_NEST ? r->nc : MAX_NEST;
    for (int i = 0; i < nc; i++)
        d += r->c[i].kind == K_UL || r->c[i].kind == K_OL;
    return d;
}

/* Spans never reach over a block: what one left open (md4c 0.4.8 does,
 * at times) does not colour the next. */
static void spans_reset(rend *r)
{
    r->em = r->strong = r->code = r->del = r->link = 0;
    for (int i = 0; i < MAX_LINK; i++) {
        free(r->ln[i].href);
        r->ln[i].href = NULL;
    }
    r->nln = 0;
}

static int enter_block(MD_BLOCKTYPE type, void *detail, void *ud)
{
    rend *r = ud;
    if (r->oom)
        return -1;
    if (r->leaf == LEAF_IMPLICIT)
        flush_para(r); /* a tight item's text, before the block in it */
    spans_reset(r);
    switch (type) {
    case MD_BLOCK_DOC: break;
    case MD_BLOCK_QUOTE:
        separate(r);
        push(r, (cont){.kind = K_QUOTE});
        break;
    case MD_BLOCK_UL:
    case MD_BLOCK_OL: {
        separate(r);
        cont c = {.kind = type == MD_BLOCK_UL ? K_UL : K_OL};
        if (type == MD_BLOCK_UL)
            c.tight = ((MD_BLOCK_UL_DETAIL *)detail)->is_tight;
        else {
            MD_BLOCK_OL_DETAIL *d = detail;
            c.tight = d->is_tight;
            c.next = d->start;
            c.mark[0] = d->mark_delimiter; /* kept here until the items need it */
        }
        push(r, c);
        break;
    }
    case MD_BLOCK_LI: {
        MD_BLOCK_LI_DETAIL *d = detail;
        cont *list = top(r);
        cont c = {.kind = K_LI, .pending = 1};
        if (list && list->kind == K_OL) {
            snprintf(c.mark, sizeof c.mark, "%u%c ", list->next, list->mark[0] ? list->mark[0] : '.');
            list->next++;
        } else {
            static const char *const bullets[] = {"\u2022 ", "\u25e6 ", "\u25aa "}; /* • ◦ ▪ */
            int d0 = list_depth(r) - 1;
            snprintf(c.mark, sizeof c.mark, "%s", bullets[(d0 < 0 ? 0 : d0) % 3]);
        }
        if (d->is_task) {
            size_t l = strlen(c.mark);
            snprintf(c.mark + l, sizeof c.mark - l, "[%c] ", d->task_mark == ' ' ? ' ' : 'x');
        }
        c.mark_w = ui_width(c.mark, strlen(c.mark));
        push(r, c);
        break;
    }
    case MD_BLOCK_HR: {
        separate(r);
        piece pc[MAX_NEST + 1];
        int mw;
        int k = margin(r, 1, pc, &mw);
        line_begin(r, prev_src(r));
        put_margin(r, pc, k);
        markers_drawn(r);
        for (int i = mw; i < r->width; i++)
            put_z(r, RULE_CH, UI_MD_RULE);
        r->need_sep = 1;
        break;
    }
    case MD_BLOCK_H: {
        unsigned lv = ((MD_BLOCK_H_DETAIL *)detail)->level;
        r->leaf = LEAF_H;
        r->leaf_style = UI_MD_BOLD | (lv == 1 ? UI_MD_H1 : lv == 2 ? UI_MD_H2 : UI_MD_H3);
        break;
    }
    case MD_BLOCK_CODE: r->leaf = LEAF_CODE; break;
    case MD_BLOCK_P:
    case MD_BLOCK_HTML: r->leaf = LEAF_P; break;
    case MD_BLOCK_TABLE:
        r->in_table = 1;
        r->row = 0;
        break;
    case MD_BLOCK_THEAD:
    case MD_BLOCK_TBODY: break;
    case MD_BLOCK_TR: r->col = 0; break;
    case MD_BLOCK_TH:
    case MD_BLOCK_TD:
        r->leaf = LEAF_CELL;
        r->p.n = 0;
        r->p.nmap = 0;
        break;
    }
    return r->oom ? -1 : 0;
}

static int leave_block(MD_BLOCKTYPE type, void *detail, void *ud)
{
    rend *r = ud;
    if (r->oom)
        return -1;
    switch (type) {
    case MD_BLOCK_QUOTE:
    case MD_BLOCK_UL:
    case MD_BLOCK_OL:
    case MD_BLOCK_LI:
        if (r->leaf == LEAF_IMPLICIT)
            flush_para(r);
        if (type == MD_BLOCK_LI && top(r) && top(r)->pending) {
            /* an empty item still shows its marker */
            separate(r);
            emit_wrapped(r, "", NULL, 0, NULL);
            r->need_sep = 1;
        }
        if (r->nc > 0)
            r->nc--;
        if (type != MD_BLOCK_LI)
            r->need_sep = 1;
        break;
    case MD_BLOCK_H:
    case MD_BLOCK_P:
    case MD_BLOCK_HTML: flush_para(r); break;
    case MD_BLOCK_CODE: flush_code(r); break;
    case MD_BLOCK_TH:
    case MD_BLOCK_TD:
        cell_end(r, (int)((MD_BLOCK_TD_DETAIL *)detail)->align, type == MD_BLOCK_TH);
        r->leaf = LEAF_NONE;
        break;
    case MD_BLOCK_TR: r->row++; break;
    case MD_BLOCK_TABLE:
        flush_table(r);
        cells_free(r);
        r->in_table = 0;
        break;
    default: break;
    }
    return r->oom ? -1 : 0;
}

static uint32_t style_now(const rend *r)
{
    return r->leaf_style | (r->em ? UI_MD_ITALIC : 0) | (r->strong ? UI_MD_BOLD : 0) | (r->code ? UI_MD_CODE : 0) |
           (r->del ? UI_MD_STRIKE : 0) | (r->link ? UI_MD_LINK : 0);
}

static void add(rend *r, const char *s, size_t n, uint32_t style)
{
    if (r->leaf == LEAF_NONE)
        r->leaf = LEAF_IMPLICIT; /* text straight in a tight list's item */
    /* Bytes that are not UTF-8 become U+FFFD here, run by run: joined,
     * a stray lead byte before markup ("\xf0`") and continuation bytes
     * after it would read as one character that the spans, drawn apart,
     * are not, and the wrap would measure what is not drawn. */
    size_t a = 0, w;
    int cw, cp;
    for (size_t i = 0; i < n && !r->oom; i += w) {
        w = ui_char(s, n, i, &cw, &cp);
        if (cp >= 0)
            continue;
        if ((i > a && pbuf_put(&r->p, s + a, i - a, style)) || pbuf_put(&r->p, "\xef\xbf\xbd", 3, style))
            r->oom = 1;
        a = i + w;
    }
    if (!r->oom && n > a && pbuf_put(&r->p, s + a, n - a, style))
        r->oom = 1;
}

static int enter_span(MD_SPANTYPE type, void *detail, void *ud)
{
    rend *r = ud;
    switch (type) {
    case MD_SPAN_EM: r->em++; break;
    case MD_SPAN_STRONG: r->strong++; break;
    case MD_SPAN_CODE: r->code++; break;
    case MD_SPAN_DEL: r->del++; break;
    case MD_SPAN_A:
    case MD_SPAN_IMG:
        if (r->nln < MAX_LINK) {
            const MD_ATTRIBUTE *at = type == MD_SPAN_A ? &((MD_SPAN_A_DETAIL *)detail)->href
                                                       : &((MD_SPAN_IMG_DETAIL *)detail)->src;
            r->ln[r->nln].href = malloc(at->size + 1);
            if (!r->ln[r->nln].href) {
                r->oom = 1;
                return -1;
            }
            if (at->size)
                memcpy(r->ln[r->nln].href, at->text, at->size);
            r->ln[r->nln].n = at->size;
            r->ln[r->nln].img = type == MD_SPAN_IMG;
            if (type == MD_SPAN_IMG)
                add(r, "[image: ", 8, style_now(r));
            r->ln[r->nln].start = r->p.n;
        }
        r->nln++;
        r->link++;
        break;
    default: break;
    }
    return r->oom ? -1 : 0;
}

/* "http://x" shown as "x" (or "mailto:a@b" as "a@b"): no need to repeat it */
static int same_address(const char *text, size_t tn, const char *href, size_t hn)
{
    static const char *const schemes[] = {"", "http://", "https://", "mailto:"};
    for (size_t i = 0; i < sizeof schemes / sizeof *schemes; i++) {
        size_t k = strlen(schemes[i]);
        if (hn >= k && !memcmp(href, schemes[i], k) && hn - k == tn && !memcmp(href + k, text, tn))
            return 1;
    }
    return 0;
}

static int leave_span(MD_SPANTYPE type, void *detail, void *ud)
{
    (void)detail;
    rend *r = ud;
    /* md4c 0.4.8 can leave a span it never entered (an image in a link
     * cut short): a count never goes below zero */
    switch (type) {
    case MD_SPAN_EM: r->em -= r->em > 0; break;
    case MD_SPAN_STRONG: r->strong -= r->strong > 0; break;
    case MD_SPAN_CODE: r->code -= r->code > 0; break;
    case MD_SPAN_DEL: r->del -= r->del > 0; break;
    case MD_SPAN_A:
    case MD_SPAN_IMG:
        if (r->nln <= 0)
            break;
        r->link--;
        r->nln--;
        if (r->nln < MAX_LINK) {
            uint32_t st = style_now(r);
            if (r->ln[r->nln].img)
                add(r, "]", 1, st | UI_MD_LINK);
            const char *h = r->ln[r->nln].href;
            size_t hn = r->ln[r->nln].n, s0 = r->ln[r->nln].start;
            if (s0 > r->p.n)
                s0 = r->p.n;
            if (hn && !same_address(r->p.b ? r->p.b + s0 : "", r->p.n - s0, h, hn)) {
                add(r, " (", 2, st | UI_MD_URL);
                add(r, h, hn, st | UI_MD_URL);
                add(r, ")", 1, st | UI_MD_URL);
            }
            free(r->ln[r->nln].href);
            r->ln[r->nln].href = NULL;
        }
        break;
    default: break;
    }
    return r->oom ? -1 : 0;
}

/* &name; &#NN; &#xHH; as UTF-8 into o (8 bytes); 0 when unknown */
static size_t entity(const char *s, size_t n, char *o)
{
    static const struct {
        const char *name, *utf8;
    } names[] = {{"amp", "&"},          {"lt", "<"},           {"gt", ">"},           {"quot", "\""},
                 {"apos", "'"},         {"nbsp", "\u00a0"},    {"copy", "\u00a9"},    {"reg", "\u00ae"},
                 {"trade", "\u2122"},   {"mdash", "\u2014"},   {"ndash", "\u2013"},   {"hellip", "\u2026"},
                 {"larr", "\u2190"},    {"rarr", "\u2192"},    {"uarr", "\u2191"},    {"darr", "\u2193"},
                 {"times", "\u00d7"},   {"divide", "\u00f7"},  {"plusmn", "\u00b1"},  {"deg", "\u00b0"},
                 {"middot", "\u00b7"},  {"laquo", "\u00ab"},   {"raquo", "\u00bb"},   {"euro", "\u20ac"},
                 {"le", "\u2264"},      {"ge", "\u2265"},      {"ne", "\u2260"},      {"bull", "\u2022"}};
    if (n < 3 || s[0] != '&' || s[n - 1] != ';')
        return 0;
    if (s[1] == '#') {
        unsigned long cp = 0;
        int hex = n > 3 && (s[2] == 'x' || s[2] == 'X');
        size_t i = hex ? 3 : 2;
        if (i >= n - 1 || n - 1 - i > 8)
            return 0;
        for (; i < n - 1; i++) {
            char c = s[i];
            int d = c >= '0' && c <= '9' ? c - '0'
                    : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                  : -1;
            if (d < 0)
                return 0;
            cp = cp * (hex ? 16 : 10) + (unsigned long)d;
        }
        if (cp == 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            cp = 0xfffd;
        size_t u = 0;
        if (cp < 0x80)
            o[u++] = (char)cp;
        else if (cp < 0x800) {
            o[u++] = (char)(0xc0 | (cp >> 6));
            o[u++] = (char)(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
            o[u++] = (char)(0xe0 | (cp >> 12));
            o[u++] = (char)(0x80 | ((cp >> 6) & 0x3f));
            o[u++] = (char)(0x80 | (cp & 0x3f));
        } else {
            o[u++] = (char)(0xf0 | (cp >> 18));
            o[u++] = (char)(0x80 | ((cp >> 12) & 0x3f));
            o[u++] = (char)(0x80 | ((cp >> 6) & 0x3f));
            o[u++] = (char)(0x80 | (cp & 0x3f));
        }
        return u;
    }
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strlen(names[i].name) == n - 2 && !memcmp(s + 1, names[i].name, n - 2)) {
            size_t u = strlen(names[i].utf8);
            memcpy(o, names[i].utf8, u);
            return u;
        }
    return 0;
}

static int text(MD_TEXTTYPE type, const MD_CHAR *s, MD_SIZE size, void *ud)
{
    rend *r = ud;
    if (r->oom)
        return -1;
    if (s >= r->src && s < r->src + r->n + MD_PAD) {
        /* never past the text, whatever the parser says */
        size_t at = (size_t)(s - r->src);
        if (at >= r->n)
            return 0;
        if (size > r->n - at)
            size = (MD_SIZE)(r->n - at);
        r->last_src = at;
        if (pbuf_map(&r->p, r->last_src))
            r->oom = 1;
    }
    uint32_t st = style_now(r);
    switch (type) {
    case MD_TEXT_NULLCHAR: add(r, "\xef\xbf\xbd", 3, st); break;
    case MD_TEXT_BR: add(r, r->in_table ? " " : "\n", 1, st); break;
    case MD_TEXT_SOFTBR: add(r, " ", 1, st); break;
    case MD_TEXT_ENTITY: {
        char o[8];
        size_t u = entity(s, size, o);
        if (u)
            add(r, o, u, st);
        else
            add(r, s, size, st);
        break;
    }
    default:
        if (type == MD_TEXT_CODE && r->leaf == LEAF_CODE) {
            add(r, s, size, UI_MD_BLOCK);
            break;
        }
        /* tabs and line ends in prose are blanks (a code span's line end too) */
        for (MD_SIZE a = 0; a < size && !r->oom;) {
            MD_SIZE e = a;
            while (e < size && s[e] != '\t' && s[e] != '\n' && s[e] != '\r')
                e++;
            if (e > a)
                add(r, s + a, e - a, st);
            if (e < size)
                add(r, " ", 1, st);
            a = e + 1;
        }
        break;
    }
    return r->oom ? -1 : 0;
}

/* ---- a reply still being written ---- */

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* The start of s's last paragraph, or n when s ends inside an open fenced
 * code block (which md4c already shows as code). */
static size_t last_para(const char *s, size_t n)
{
    size_t para = 0;
    char fence = 0;
    size_t flen = 0;
    for (size_t i = 0; i < n;) {
        size_t eol = i;
        while (eol < n && s[eol] != '\n')
            eol++;
        size_t q = i;
        while (q < eol && s[q] == ' ')
            q++;
        size_t run = 0;
        while (q + run < eol && (s[q + run] == '`' || s[q + run] == '~') && s[q + run] == s[q])
            run++;
        int only_blank = q == eol || (q + 1 == eol && s[q] == '\r');
        if (run >= 3 && (!fence || (s[q] == fence && run >= flen))) {
            if (!fence) {
                fence = s[q];
                flen = run;
            } else
                fence = 0;
            para = eol + 1;
        } else if (!fence && only_blank)
            para = eol + 1;
        i = eol + 1;
    }
    if (fence)
        return n;
    return para > n ? n : para;
}

/* The closers of the emphasis and code spans s[p..n) leaves open, into
 * cl (8 bytes room). */
static size_t open_spans(const char *s, size_t p, size_t n, char *cl)
{
    int order[2], no = 0; /* 1: strong, 2: em; in the order they opened */
    size_t code = 0;      /* backticks of an open code span */
    int line_start = 1;
    for (size_t i = p; i < n;) {
        char c = s[i];
        if (c == '\n') {
            line_start = 1;
            i++;
            continue;
        }
        if (code) {
            size_t run = 0;
            while (i + run < n && s[i + run] == '`')
                run++;
            if (run == code)
                code = 0;
            i += run ? run : 1;
            continue;
        }
        if (c == '\\') {
            i += 2;
            line_start = 0;
            continue;
        }
        if (c == '`') {
            size_t run = 0;
            while (i + run < n && s[i + run] == '`')
                run++;
            code = run;
            i += run;
            line_start = 0;
            continue;
        }
        if (c == '*') {
            size_t run = 0;
            while (i + run < n && s[i + run] == '*')
                run++;
            int after = i + run < n && !is_blank(s[i + run]);
            int before = i > p && !is_blank(s[i - 1]);
            /* not inside a word: "2*3" opens nothing */
            int word = i > p && ((s[i - 1] >= '0' && s[i - 1] <= '9') || ((s[i - 1] | 32) >= 'a' && (s[i - 1] | 32) <= 'z'));
            if (line_start && run == 1 && !after) { /* a bullet */
                i += run;
                line_start = 0;
                continue;
            }
            for (int kind = 1; kind <= 2; kind++) {
                if (kind == 1 && run < 2)
                    continue;
                if (kind == 2 && run % 2 == 0)
                    continue;
                int at = -1;
                for (int k = 0; k < no; k++)
                    if (order[k] == kind)
                        at = k;
                if (at >= 0 && before) { /* closes it (and whatever opened inside it) */
                    no = at;
                } else if (at < 0 && after && !word && no < 2)
                    order[no++] = kind;
            }
            i += run;
            line_start = 0;
            continue;
        }
        if (c != ' ')
            line_start = 0;
        i++;
    }
    size_t u = 0;
    if (code) {
        for (size_t k = 0; k < code && u < 7; k++)
            cl[u++] = '`';
        return u;
    }
    for (int k = no - 1; k >= 0; k--) {
        if (order[k] == 1) {
            cl[u++] = '*';
            cl[u++] = '*';
        } else
            cl[u++] = '*';
    }
    return u;
}

/* s as it should render while being written: a half-written delimiter at
 * the end held back, spans the last paragraph left open closed. Returns a
 * malloc'ed copy (length in *m), or NULL when s needs nothing (or memory
 * ran out: then s is rendered as it is). */
static char *streaming_text(const char *s, size_t n, size_t *m)
{
    size_t e = n;
    while (e > 0 && (s[e - 1] == '*' || s[e - 1] == '`' || s[e - 1] == '~' || s[e - 1] == '_'))
        e--;
    size_t p = last_para(s, e);
    char cl[8];
    size_t ncl = p < e ? open_spans(s, p, e, cl) : 0;
    if (e == n && !ncl)
        return NULL;
    /* the closers go before trailing blanks: "**bold **" would not close */
    size_t t = e;
    while (t > p && is_blank(s[t - 1]))
        t--;
    char *b = malloc(e + ncl + 1);
    if (!b)
        return NULL;
    memcpy(b, s, t);
    memcpy(b + t, cl, ncl);
    memcpy(b + t + ncl, s + t, e - t);
    b[e + ncl] = 0;
    *m = e + ncl;
    return b;
}

/* ---- the API ---- */

void ui_md_free(ui_md *md)
{
    if (!md)
        return;
    free(md->text);
    free(md->spans);
    free(md->lines);
    memset(md, 0, sizeof *md);
}

int ui_md_render(const char *src, size_t n, const ui_md_opts *o, ui_md *out)
{
    out->ntext = out->nspans = out->nlines = 0;
    if (n >= UINT_MAX)
        return -1;
    char *copy = NULL;
    if (o->flags & UI_MD_STREAM) {
        size_t m;
        copy = streaming_text(src, n, &m);
        if (copy) {
            src = copy;
            n = m;
        }
    }
    /* md4c 0.4.8 reads past the end of its input where the text ends
     * inside a link ("[a](http://x" while a reply streams): it gets its own
     * copy, with NUL bytes after the end that stop those scans */
    char *padded = malloc(n + MD_PAD);
    if (!padded) {
        free(copy);
        return -1;
    }
    if (n)
        memcpy(padded, src, n);
    memset(padded + n, 0, MD_PAD);
    free(copy);
    src = padded;
    rend r;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.out = out;
    r.src = src;
    r.n = n;
    r.width = o->width < 1 ? 1 : o->width;
    MD_PARSER parser = {0};
    /* no permissive autolinks: md4c 0.4.8 reads past the end of the text
     * when one ends it (a bare address shows as the text it is anyway) */
    parser.flags = MD_FLAG_TABLES | MD_FLAG_STRIKETHROUGH | MD_FLAG_TASKLISTS | MD_FLAG_NOHTML |
                   MD_FLAG_NOINDENTEDCODEBLOCKS;
    parser.enter_block = enter_block;
    parser.leave_block = leave_block;
    parser.enter_span = enter_span;
    parser.leave_span = leave_span;
    parser.text = text;
    int rc = md_parse(src, (MD_SIZE)n, &parser, &r);
    pbuf_free(&r.p);
    cells_free(&r);
    spans_reset(&r); /* links left open by an aborted parse */
    free(padded);
    if (rc || r.oom) {
        out->ntext = out->nspans = out->nlines = 0;
        return -1;
    }
    return 0;
}

size_t ui_md_line_str(const ui_md *md, size_t i, char *buf, size_t cap)
{
    size_t u = 0;
    if (i >= md->nlines)
        return 0;
    const ui_md_line *l = &md->lines[i];
    for (uint32_t k = 0; k < l->nspans; k++) {
        const ui_md_span *sp = &md->spans[l->span + k];
        if (cap && u < cap - 1) {
            size_t c = sp->len < cap - 1 - u ? sp->len : cap - 1 - u;
            memcpy(buf + u, md->text + sp->off, c);
        }
        u += sp->len;
    }
    if (cap)
        buf[u < cap - 1 ? u : cap - 1] = 0;
    return u;
}
