/* The conversation pane: the journal's entries wrapped into screen lines
 * (a label, the text indented, a footer under each reply, notices as
 * one dim line with a marker), the scroll position that keeps still
 * while text arrives below it, PgUp/PgDn, and the line kept on top
 * across a resize.
 *
 * Replies are markdown (ui/markdown.c) with their thinking (ui/think.h)
 * folded into one line that Ctrl+T opens. Rendering them is the costly part,
 * so each reply's lines are kept (conv_cache) until its text, its marks,
 * the width or its fold change: while a reply streams only that one is
 * laid out again, and a long scrollback costs no more than its copying. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "markdown.h"
#include "text.h"
#include "think.h"
#include "tui_internal.h"

#define MD_THINK UI_MD_BASE /* the style bit of thinking text */

/* one screen line of the conversation */
typedef struct dline {
    const char *s; /* bytes to draw (when md is NULL) */
    size_t n;
    int kind;   /* colour pair */
    int attr;
    int entry;  /* document entry, -1 for spacing */
    size_t off; /* byte offset in that entry's display text (resize anchor) */
    const ui_md *md; /* else: line mdl of these rendered lines */
    size_t mdl;
    int fold;   /* the line that says a reply thought (Ctrl+T opens it) */
} dline;

/* a growing list of them */
typedef struct dlines {
    dline *v;
    int n, cap;
} dlines;

/* A reply as last laid out: valid while text, len, nmarks, width,
 * unfold and stream are what they were. */
typedef struct centry {
    int valid;
    const char *text;
    size_t len, nmarks;
    int width, unfold, stream;
    int want_unfold; /* the user's choice (Ctrl+T), kept across re-renders */
    ui_think th;     /* on the display text (marks put in) */
    char label[96];
    ui_md think, answer;
} centry;

struct conv_cache {
    centry *v;
    size_t n;
    unsigned gen; /* ch->doc_gen it was built for */
};

void tui_conv_free(tui *t)
{
    conv_cache *c = t->cc;
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++) {
        ui_md_free(&c->v[i].think);
        ui_md_free(&c->v[i].answer);
    }
    free(c->v);
    free(c);
    t->cc = NULL;
}

/* the cache, sized for the document (a new document empties it); NULL
 * when out of memory */
static conv_cache *cache(tui *t)
{
    eng_journal *doc = t->ch->doc;
    if (t->cc && t->cc->gen != t->ch->doc_gen)
        tui_conv_free(t);
    if (!t->cc) {
        t->cc = calloc(1, sizeof *t->cc);
        if (!t->cc)
            return NULL;
        t->cc->gen = t->ch->doc_gen;
    }
    conv_cache *c = t->cc;
    if (c->n < doc->n) {
        centry *v = realloc(c->v, doc->n * sizeof *v);
        if (!v)
            return NULL;
        memset(v + c->n, 0, (doc->n - c->n) * sizeof *v);
        c->v = v;
        c->n = doc->n;
    }
    return c;
}

int tui_conv_width(tui *t) { return tui_side_docked(t) ? t->W - SIDE_W - 3 : t->W - 2; }

/* The text an entry shows: replies get their marks inserted. */
static const char *entry_text(tui *t, const eng_jentry *x, size_t *n)
{
    if (!x->nmarks) {
        *n = x->len;
        return x->text;
    }
    size_t cap = x->len + 1;
    for (size_t k = 0; k < x->nmarks; k++)
        cap += 2 * strlen(x->marks[k].what) + 16;
    char *b = malloc(cap);
    if (!b) {
        *n = x->len;
        return x->text;
    }
    size_t u = 0, prev = 0;
    for (size_t k = 0; k < x->nmarks; k++) {
        size_t at = x->marks[k].byte > x->len ? x->len : x->marks[k].byte;
        if (at < prev)
            at = prev;
        memcpy(b + u, x->text + prev, at - prev);
        u += at - prev;
        /* one unit: its spaces do not break (U+00A0), so the wrap moves
         * the whole mark to the next line rather than splitting it */
        u += (size_t)sprintf(b + u, "\u27e6");
        for (const char *w = x->marks[k].what; *w; w++) {
            if (*w == ' ')
                b[u++] = (char)0xc2, b[u++] = (char)0xa0;
            else
                b[u++] = *w;
        }
        u += (size_t)sprintf(b + u, "\u27e7");
        prev = at;
    }
    memcpy(b + u, x->text + prev, x->len - prev);
    u += x->len - prev;
    b[u] = 0;
    *n = u;
    return tui_frame_keep(t, b);
}

static int add_line(dlines *d, dline l)
{
    if (d->n == d->cap) {
        int c = d->cap ? d->cap * 2 : 256;
        dline *nv = realloc(d->v, (size_t)c * sizeof *nv);
        if (!nv)
            return -1;
        d->v = nv;
        d->cap = c;
    }
    d->v[d->n++] = l;
    return 0;
}

/* txt[0..tn) wrapped to width, each line after indent blanks; 0, or -1
 * when out of memory */
static int add_wrapped(tui *t, dlines *d, const char *txt, size_t tn, int width, int indent, dline proto)
{
    size_t nl = ui_wrap(txt, tn, width - indent, 1, NULL, 0);
    ui_line *ls = malloc((nl ? nl : 1) * sizeof *ls);
    if (!ls)
        return -1;
    ui_wrap(txt, tn, width - indent, 1, ls, nl);
    for (size_t k = 0; k < nl; k++) {
        char *b = malloc((size_t)indent + (ls[k].end - ls[k].start) + 1);
        if (!b)
            break;
        memset(b, ' ', (size_t)indent);
        memcpy(b + indent, txt + ls[k].start, ls[k].end - ls[k].start);
        b[indent + ls[k].end - ls[k].start] = 0;
        dline l = proto;
        l.s = tui_frame_keep(t, b);
        l.n = strlen(l.s);
        l.off = ls[k].start;
        add_line(d, l);
    }
    free(ls);
    return 0;
}

/* Under a reply: how it ended, size, speed, and what made it (at most
 * four lines). */
static void add_footer(tui *t, dlines *d, size_t i, int width)
{
    eng_journal *doc = t->ch->doc;
    const eng_jentry *x = &doc->e[i];
    const char *tok = eng_journal_get_meta(doc, i, "tokens");
    char *b = malloc(512);
    if (!b)
        return;
    if (x->partial && t->ch->reply == (int)i)
        snprintf(b, 512, "\u2026 writing");
    else if (x->partial)
        snprintf(b, 512, "\u2500 cut short (saved while it was being written)");
    else
        snprintf(b, 512,
                 "\u2500 %s \u00b7 %s tokens \u00b7 %s tok/s \u00b7 %s \u00d7%s \u00b7 temp %s top-p %s top-k %s "
                 "min-p %s repeat %s",
                 eng_journal_get_meta(doc, i, "end") ?: "?", tok ? tok : "?",
                 eng_journal_get_meta(doc, i, "decode_tps") ?: "?", eng_journal_get_meta(doc, i, "kernel") ?: "?",
                 eng_journal_get_meta(doc, i, "threads") ?: "?", eng_journal_get_meta(doc, i, "temp") ?: "?",
                 eng_journal_get_meta(doc, i, "top_p") ?: "?", eng_journal_get_meta(doc, i, "top_k") ?: "?",
                 eng_journal_get_meta(doc, i, "min_p") ?: "?", eng_journal_get_meta(doc, i, "repeat_penalty") ?: "?");
    const char *s = tui_frame_keep(t, b);
    ui_line fl[4];
    size_t nf = ui_wrap(s, strlen(s), width - 2, 1, fl, 4);
    for (size_t k = 0; k < nf && k < 4; k++) {
        char *fb = malloc(fl[k].end - fl[k].start + 3);
        if (!fb)
            break;
        fb[0] = fb[1] = ' ';
        memcpy(fb + 2, s + fl[k].start, fl[k].end - fl[k].start);
        fb[fl[k].end - fl[k].start + 2] = 0;
        const char *fs = tui_frame_keep(t, fb);
        add_line(d, (dline){fs, strlen(fs), C_DIM, 0, (int)i, x->len, NULL, 0, 0});
    }
}

/* "You" or "Reply · model" over an entry; NULL for notices */
static const char *add_label(tui *t, dlines *d, size_t i, int kind, int old)
{
    eng_journal *doc = t->ch->doc;
    const eng_jentry *x = &doc->e[i];
    const char *label = x->kind == ENG_J_USER
                            ? (old ? "You (earlier branch)" : t->ch->editing == (int)i ? "You (editing)" : "You")
                        : x->kind == ENG_J_ASSISTANT ? (old ? "Reply (replaced)" : "Reply")
                                                     : NULL;
    if (!label)
        return NULL;
    const char *m = eng_journal_get_meta(doc, i, "model");
    char *b = malloc(300);
    if (b) {
        snprintf(b, 300, "%s%s%s", label, x->kind == ENG_J_ASSISTANT && m ? " \u00b7 " : "",
                 x->kind == ENG_J_ASSISTANT && m ? m : "");
        const char *s = tui_frame_keep(t, b);
        add_line(d, (dline){s, strlen(s), kind, A_BOLD, (int)i, 0, NULL, 0, 0});
    }
    return label;
}

/* Lay reply i out again if anything it depends on changed. */
static void render_reply(tui *t, centry *c, size_t i, int width)
{
    const eng_jentry *x = &t->ch->doc->e[i];
    int stream = t->ch->reply == (int)i;
    int unfold = c->want_unfold;
    if (c->valid && c->text == x->text && c->len == x->len && c->nmarks == x->nmarks && c->width == width &&
        c->unfold == unfold && c->stream == stream)
        return;
    size_t tn;
    const char *txt = entry_text(t, x, &tn);
    ui_think_split(txt, tn, &c->th);
    c->label[0] = 0;
    if (c->th.found && !ui_chat_think_label(t->ch, i, c->label, sizeof c->label))
        c->th.found = 0;
    int w = width - 2; /* replies are indented by two */
    ui_md_opts o = {.width = w, .flags = stream ? UI_MD_STREAM : 0};
    c->think.nlines = 0;
    if (c->th.found && unfold) {
        ui_md_opts ot = {.width = w, .flags = stream && c->th.open ? UI_MD_STREAM : 0, .style = MD_THINK,
                         .lead = "\u2506 ", .src_base = c->th.t0};
        ui_md_render(txt + c->th.t0, c->th.t1 - c->th.t0, &ot, &c->think);
    }
    o.src_base = c->th.a0;
    if (ui_md_render(txt + c->th.a0, c->th.a1 - c->th.a0, &o, &c->answer))
        c->answer.nlines = 0; /* out of memory: the reply's label and footer still show */
    c->valid = 1;
    c->text = x->text;
    c->len = x->len;
    c->nmarks = x->nmarks;
    c->width = width;
    c->unfold = unfold;
    c->stream = stream;
}

static void add_md(dlines *d, const ui_md *md, dline proto)
{
    for (size_t k = 0; k < md->nlines; k++) {
        dline l = proto;
        l.md = md;
        l.mdl = k;
        l.off = md->lines[k].src;
        add_line(d, l);
    }
}

/* A reply: its fold line if it thought (and the thinking, unfolded),
 * then its answer; NULL from a failed cache: as plain text. */
static void add_reply(tui *t, dlines *d, centry *c, size_t i, int width, int kind, int attr)
{
    if (!c) {
        size_t tn;
        const char *txt = entry_text(t, &t->ch->doc->e[i], &tn);
        add_wrapped(t, d, txt, tn, width, 2, (dline){NULL, 0, kind, attr, (int)i, 0, NULL, 0, 0});
        return;
    }
    render_reply(t, c, i, width);
    if (c->th.found) {
        char *b = malloc(160);
        if (b) {
            int writing = c->th.open && t->ch->reply == (int)i;
            snprintf(b, 160, "  %s %s  (Ctrl+T %s)", c->unfold ? "\u25be" : "\u25b8", c->label,
                     c->unfold ? "folds" : writing ? "shows it" : "shows");
            const char *s = tui_frame_keep(t, b);
            add_line(d, (dline){s, strlen(s), C_DIM, attr, (int)i, c->th.t0, NULL, 0, 1});
        }
        if (c->unfold && c->think.nlines) {
            add_md(d, &c->think, (dline){NULL, 0, kind, attr, (int)i, 0, NULL, 0, 0});
            if (c->answer.nlines) /* a blank line before the answer */
                add_line(d, (dline){"", 0, 0, 0, (int)i, c->th.a0, NULL, 0, 0});
        }
    }
    add_md(d, &c->answer, (dline){NULL, 0, kind, attr, (int)i, 0, NULL, 0, 0});
}

static int build_lines(tui *t, int width, dline **out)
{
    eng_journal *doc = t->ch->doc;
    conv_cache *cc = cache(t);
    dlines d = {0};
    for (size_t i = 0; i < doc->n; i++) {
        const eng_jentry *x = &doc->e[i];
        const char *sup = eng_journal_get_meta(doc, i, "superseded");
        int old = sup && !strcmp(sup, "1");
        int kind = x->kind == ENG_J_USER ? C_USER : x->kind == ENG_J_ASSISTANT ? C_BOT : C_NOTE;
        if (x->kind == ENG_J_NOTICE && ui_chat_is_error(t->ch, i))
            kind = C_ERR;
        const char *label = add_label(t, &d, i, kind, old);
        if (x->kind == ENG_J_ASSISTANT) {
            add_reply(t, &d, cc ? &cc->v[i] : NULL, i, width, kind, old ? A_DIM : 0);
            add_footer(t, &d, i, width);
            add_line(&d, (dline){"", 0, 0, 0, -1, 0, NULL, 0, 0});
            continue;
        }
        size_t tn;
        const char *txt = entry_text(t, x, &tn);
        if (!label) {
            /* notices: one dim line (or several) with a leading marker */
            char *b = malloc(tn + 8);
            if (b) {
                memcpy(b, "\u2022 ", 4);
                memcpy(b + 4, txt, tn);
                b[tn + 4] = 0;
                txt = tui_frame_keep(t, b);
                tn += 4;
            }
        }
        if (add_wrapped(t, &d, txt, tn, width, label ? 2 : 0,
                        (dline){NULL, 0, kind, old ? A_DIM : 0, (int)i, 0, NULL, 0, 0}))
            break;
        add_line(&d, (dline){"", 0, 0, 0, -1, 0, NULL, 0, 0});
    }
    *out = d.v;
    return d.n;
}

/* The attributes of a markdown style: one colour pair (the first that
 * applies), attributes added; without colours only bold, underline and
 * reverse. */
static int md_attr(tui *t, uint32_t st)
{
    int c = t->color, a = 0, pair = 0;
    if (st & (UI_MD_BLOCK | UI_MD_CODE))
        pair = C_CODE;
    else if (st & (UI_MD_LINK))
        pair = C_LINK;
    else if (st & (UI_MD_H1 | UI_MD_H2))
        pair = C_HEAD;
    else if (st & (UI_MD_URL | UI_MD_QUOTE | UI_MD_RULE | UI_MD_CUT))
        pair = C_DIM;
    else if (st & UI_MD_BULLET)
        pair = C_METER;
    if (c && pair)
        a |= tui_pair(t, pair);
    if (!c && (st & (UI_MD_BLOCK | UI_MD_CODE)))
        a |= A_REVERSE;
    if (st & (UI_MD_BOLD | UI_MD_H1 | UI_MD_H2 | UI_MD_H3 | UI_MD_HEAD | UI_MD_CUT))
        a |= A_BOLD;
    if (st & (UI_MD_H1 | UI_MD_LINK))
        a |= A_UNDERLINE;
    if (st & UI_MD_ITALIC)
        a |= c && t->italic ? A_ITALIC : A_UNDERLINE;
    if (c && (st & (UI_MD_STRIKE | MD_THINK)))
        a |= A_DIM;
    return a;
}

/* A rendered markdown line at (y, x): a code block's background first,
 * then the spans. */
static void draw_md_line(tui *t, int y, int x, int width, const dline *l)
{
    const ui_md *md = l->md;
    const ui_md_line *ml = &md->lines[l->mdl];
    if (ml->code_x >= 0 && ml->code_x < width)
        tui_fill(y, x + ml->code_x, width - ml->code_x, t->color ? tui_pair(t, C_CODE) : (int)A_REVERSE);
    int col = 0;
    for (uint32_t k = 0; k < ml->nspans && col < width; k++) {
        const ui_md_span *sp = &md->spans[ml->span + k];
        int a = md_attr(t, sp->style) | l->attr;
        attron(a);
        col += tui_put(y, x + col, width - col, md->text + sp->off, sp->len);
        attroff(a);
    }
}

void tui_draw_conv(tui *t, int top, int rows)
{
    int width = tui_conv_width(t);
    dline *v;
    int n = build_lines(t, width, &v);
    /* keep the view still while text arrives below it */
    if (t->scroll > 0 && n > t->total_lines && t->total_lines)
        t->scroll += n - t->total_lines;
    t->total_lines = n;
    int maxscroll = n > rows ? n - rows : 0;
    if (t->scroll > maxscroll)
        t->scroll = maxscroll;
    if (t->scroll < 0)
        t->scroll = 0;
    /* Ctrl+T just opened or closed a reply's thinking: its fold line on top */
    if (t->think_focus >= 0) {
        for (int i = 0; i < n; i++)
            if (v[i].fold && v[i].entry == t->think_focus) {
                t->scroll = n - rows - i;
                t->scroll = t->scroll < 0 ? 0 : t->scroll > maxscroll ? maxscroll : t->scroll;
                break;
            }
        t->think_focus = -1;
    }
    int first = n - rows - t->scroll;
    if (first < 0)
        first = 0;
    t->anchor_entry = -1;
    t->think_seen = -1;
    /* scrolled back: the last row is the indicator's own, no text under it */
    int text_rows = t->scroll > 0 && rows > 1 ? rows - 1 : rows;
    for (int r = 0; r < text_rows && first + r < n; r++) {
        dline *l = &v[first + r];
        if (t->anchor_entry < 0 && l->entry >= 0) {
            t->anchor_entry = l->entry;
            t->anchor_off = l->off;
        }
        if (l->fold)
            t->think_seen = l->entry;
        if (l->md) {
            tui_put(top + r, 1, 2, "  ", 2);
            draw_md_line(t, top + r, 3, width - 2, l);
            continue;
        }
        int a = tui_pair(t, l->kind) | l->attr;
        attron(a);
        tui_put(top + r, 1, width, l->s, l->n);
        attroff(a);
    }
    if (t->scroll > 0 && rows > 1) {
        int below = n - (first + text_rows);
        char b[80];
        int bn = snprintf(b, sizeof b, "\u2193 %d more line%s below \u00b7 End: latest ", below, below == 1 ? "" : "s");
        int bw = bn - 3; /* the arrow (3 bytes) and the dot (2) take a column each */
        attron(tui_pair(t, C_SEL) | A_REVERSE * !t->color);
        tui_putz(top + rows - 1, width - bw > 1 ? width - bw : 1, bw < width ? bw : width, b);
        attroff(tui_pair(t, C_SEL) | A_REVERSE * !t->color);
    }
    free(v);
}

void tui_keep_anchor(tui *t, int rows)
{
    if (t->scroll == 0 || t->anchor_entry < 0)
        return;
    dline *v;
    int n = build_lines(t, tui_conv_width(t), &v);
    int at = -1;
    for (int i = 0; i < n; i++)
        if (v[i].entry == t->anchor_entry && v[i].off <= t->anchor_off)
            at = i;
    free(v);
    tui_frame_free(t);
    if (at >= 0) {
        t->scroll = n - rows - at;
        if (t->scroll < 0)
            t->scroll = 0;
    }
    t->total_lines = n;
}

void tui_page(tui *t, int dir)
{
    int rows = tui_conv_rows(t);
    t->scroll += dir * (rows > 2 ? rows - 2 : 1);
    if (t->scroll < 0)
        t->scroll = 0;
    if (t->scroll > t->total_lines)
        t->scroll = t->total_lines;
}

void tui_think_toggle(tui *t)
{
    conv_cache *c = cache(t);
    int target = t->think_seen;
    if (c && (target < 0 || (size_t)target >= c->n || !c->v[target].th.found)) {
        /* none on screen: the newest reply that thought */
        target = -1;
        for (size_t i = c->n; i-- > 0;)
            if (c->v[i].valid && c->v[i].th.found) {
                target = (int)i;
                break;
            }
    }
    if (!c || target < 0) {
        tui_set_status(t, "no reply here has a thinking block to show");
        return;
    }
    c->v[target].want_unfold = !c->v[target].want_unfold;
    t->think_focus = target;
    t->dirty = 1;
}
