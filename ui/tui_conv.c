/* The conversation pane: the journal's entries wrapped into screen lines
 * (a label, the text indented, a footer under each reply, notices as
 * one dim line with a marker), the scroll position that keeps still
 * while text arrives below it, PgUp/PgDn, and the line kept on top
 * across a resize. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"
#include "tui_internal.h"

/* one screen line of the conversation */
typedef struct dline {
    const char *s; /* bytes to draw */
    size_t n;
    int kind;   /* colour pair */
    int attr;
    int entry;  /* document entry, -1 for spacing */
    size_t off; /* byte offset in that entry's display text (resize anchor) */
} dline;

/* a growing list of them */
typedef struct dlines {
    dline *v;
    int n, cap;
} dlines;

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
        add_line(d, (dline){fs, strlen(fs), C_DIM, 0, (int)i, x->len});
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
        add_line(d, (dline){s, strlen(s), kind, A_BOLD, (int)i, 0});
    }
    return label;
}

static int build_lines(tui *t, int width, dline **out)
{
    eng_journal *doc = t->ch->doc;
    dlines d = {0};
    for (size_t i = 0; i < doc->n; i++) {
        const eng_jentry *x = &doc->e[i];
        const char *sup = eng_journal_get_meta(doc, i, "superseded");
        int old = sup && !strcmp(sup, "1");
        int kind = x->kind == ENG_J_USER ? C_USER : x->kind == ENG_J_ASSISTANT ? C_BOT : C_NOTE;
        if (x->kind == ENG_J_NOTICE && ui_chat_is_error(t->ch, i))
            kind = C_ERR;
        const char *label = add_label(t, &d, i, kind, old);
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
        if (add_wrapped(t, &d, txt, tn, width, label ? 2 : 0, (dline){NULL, 0, kind, old ? A_DIM : 0, (int)i, 0}))
            break;
        if (x->kind == ENG_J_ASSISTANT)
            add_footer(t, &d, i, width);
        add_line(&d, (dline){"", 0, 0, 0, -1, 0});
    }
    *out = d.v;
    return d.n;
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
    int first = n - rows - t->scroll;
    if (first < 0)
        first = 0;
    t->anchor_entry = -1;
    /* scrolled back: the last row is the indicator's own, no text under it */
    int text_rows = t->scroll > 0 && rows > 1 ? rows - 1 : rows;
    for (int r = 0; r < text_rows && first + r < n; r++) {
        dline *l = &v[first + r];
        if (t->anchor_entry < 0 && l->entry >= 0) {
            t->anchor_entry = l->entry;
            t->anchor_off = l->off;
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
