/* The top of the screen: the title row, then two rows of meters (htop's
 * Meter classes): the context gauge and the speeds; the sparkline of
 * recent tok/s and memory, or a progress bar while a model loads or a
 * long prompt runs. Each meter row is a table of cells (gap, width,
 * how to draw) placed left to right, so a width changes in one place.
 * At 80 columns the gauge is shorter and the speeds lose their padding,
 * so that all three figures stay on the screen. */
#include <stdio.h>
#include <string.h>

#include "sys.h"
#include "text.h"
#include "tui_internal.h"

/* what the cells of one frame share, worked out once */
typedef struct hdr {
    uint32_t used, size; /* context used / size, tokens */
    double f;            /* used / size */
    double el;           /* seconds since the progress began */
    int isload;          /* the progress is a model load (else a prompt) */
} hdr;

typedef struct cell {
    const char *label; /* a label, bold in the meter colour; NULL: draw says what */
    int gap;           /* blank columns before the cell */
    int wide, narrow;  /* columns at >= 110 terminal columns / below; 0: the rest but one */
    void (*draw)(tui *t, const hdr *h, int y, int x, int cols);
} cell;

#define WIDE_W 110

static void label(tui *t, int y, int x, const char *s)
{
    attron(tui_pair(t, C_METER) | A_BOLD);
    mvaddstr(y, x, s);
    attroff(tui_pair(t, C_METER) | A_BOLD);
}

/* ---- row 1: context and speeds ---- */

static void ctx_gauge(tui *t, const hdr *h, int y, int x, int cols) { tui_bar(t, y, x, cols, h->f, h->f >= 0.8); }

static void ctx_figures(tui *t, const hdr *h, int y, int x, int cols)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%u/%u%s", h->used, h->size, h->f >= 0.8 ? " !" : "");
    if (h->f >= 0.8)
        attron(tui_pair(t, C_WARN) | A_BOLD);
    tui_putz(y, x, cols, buf);
    if (h->f >= 0.8)
        attroff(tui_pair(t, C_WARN) | A_BOLD);
}

static void speeds(tui *t, const hdr *h, int y, int x, int cols)
{
    (void)h;
    ui_chat *ch = t->ch;
    char buf[256];
    snprintf(buf, sizeof buf, "Decode %7.1f tok/s   Prefill %7.1f tok/s   TTFT %6.0f ms", ch->decode_tps,
             ch->prefill_tps, ch->ttft_ms);
    int spec = ch->stats.accept >= 0 && ch->st.draft_max;
    char plain[32] = "plain -";
    if (ch->plain_tps > 0)
        snprintf(plain, sizeof plain, "plain %.*f", ch->plain_tps < 100 ? 1 : 0, ch->plain_tps);
    if (spec) /* speculative: decode is the effective rate, plain what one token a pass gives */
        snprintf(buf, sizeof buf, "Decode %7.1f tok/s (%s)  Accept %3.0f%%   Prefill %7.1f tok/s   TTFT %6.0f ms",
                 ch->decode_tps, plain, 100.0 * ch->stats.accept, ch->prefill_tps, ch->ttft_ms);
    if ((int)strlen(buf) > cols && spec)
        snprintf(buf, sizeof buf, "Decode %.*f (%s) Acc %.0f%%  Prefill %.*f  TTFT %.0f ms", ch->decode_tps < 100 ? 1 : 0,
                 ch->decode_tps, plain, 100.0 * ch->stats.accept, ch->prefill_tps < 100 ? 1 : 0, ch->prefill_tps,
                 ch->ttft_ms);
    else if ((int)strlen(buf) > cols) /* tenths only below 100 tok/s, where they tell something */
        snprintf(buf, sizeof buf, "Decode %.*f  Prefill %.*f tok/s  TTFT %.0f ms", ch->decode_tps < 100 ? 1 : 0,
                 ch->decode_tps, ch->prefill_tps < 100 ? 1 : 0, ch->prefill_tps, ch->ttft_ms);
    tui_putz(y, x, cols, buf);
}

static const cell row_speed[] = {
    {"Ctx", 1, 3, 3, NULL},
    {NULL, 1, 26, 12, ctx_gauge},
    {NULL, 1, 14, 14, ctx_figures},
    {NULL, 1, 0, 0, speeds},
};

/* Below 80 columns the speeds take a row of their own (the second), and
 * the sparkline gives way: what the figures say matters more. */
static const cell row_ctx_narrow[] = {
    {"Ctx", 1, 3, 3, NULL},
    {NULL, 1, 0, 12, ctx_gauge},
    {NULL, 1, 0, 0, ctx_figures},
};

static void speeds_narrow(tui *t, const hdr *h, int y, int x, int cols)
{
    (void)h;
    ui_chat *ch = t->ch;
    char buf[160], mem[32];
    eng_format_bytes((double)eng_rss_bytes(), mem, sizeof mem);
    if (ch->stats.accept >= 0 && ch->st.draft_max)
        snprintf(buf, sizeof buf, "Decode %.*f (plain %.*f) Acc %.0f%%  TTFT %.0f ms  Mem %s",
                 ch->decode_tps < 100 ? 1 : 0, ch->decode_tps, ch->plain_tps < 100 ? 1 : 0, ch->plain_tps,
                 100.0 * ch->stats.accept, ch->ttft_ms, mem);
    else
        snprintf(buf, sizeof buf, "Decode %.*f  Prefill %.*f tok/s  TTFT %.0f ms  Mem %s", ch->decode_tps < 100 ? 1 : 0,
                 ch->decode_tps, ch->prefill_tps < 100 ? 1 : 0, ch->prefill_tps, ch->ttft_ms, mem);
    tui_putz(y, x, cols, buf);
}

static const cell row_speed_narrow[] = {
    {NULL, 1, 0, 0, speeds_narrow},
};

/* ---- row 2 while loading or prefilling: progress ---- */

static void prog_label(tui *t, const hdr *h, int y, int x, int cols)
{
    (void)cols;
    label(t, y, x, h->isload ? "Load" : "Prompt");
}

static void prog_gauge(tui *t, const hdr *h, int y, int x, int cols)
{
    if (!h->isload || t->ch->prog_frac > 0) {
        tui_bar(t, y, x, cols, t->ch->prog_frac, 0);
        return;
    }
    /* before the first layer is checked: a moving block */
    int pos = (int)(h->el * 8) % (cols - 4);
    mvaddch(y, x, '[');
    for (int i = 0; i < cols - 2; i++)
        addch(i >= pos && i < pos + 3 ? '|' : ' ');
    addch(']');
}

static void prog_text(tui *t, const hdr *h, int y, int x, int cols)
{
    ui_chat *ch = t->ch;
    char buf[1024];
    if (h->isload && ch->prog_frac > 0)
        snprintf(buf, sizeof buf, "%3.0f%%  ETA %.1f s  %.900s", ch->prog_frac * 100, ch->prog_eta, ch->loading_path);
    else if (h->isload)
        snprintf(buf, sizeof buf, "opening %.900s  %.1f s", ch->loading_path, h->el);
    else
        snprintf(buf, sizeof buf, "%3.0f%%  ETA %.1f s", ch->prog_frac * 100, ch->prog_eta);
    tui_putz(y, x, cols, buf);
}

static const cell row_progress[] = {
    {NULL, 1, 6, 6, prog_label},
    {NULL, 1, 26, 26, prog_gauge},
    {NULL, 2, 0, 0, prog_text},
};

static const cell row_progress_narrow[] = {
    {NULL, 1, 6, 6, prog_label},
    {NULL, 1, 0, 10, prog_gauge},
    {NULL, 2, 0, 0, prog_text},
};

/* ---- row 2 otherwise: sparkline, memory, state ---- */

static void sparkline(tui *t, const hdr *h, int y, int x, int cols)
{
    (void)h;
    static const char *blocks[] = {"\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"};
    ui_chat *ch = t->ch;
    float mx = 0;
    for (int i = 0; i < ch->nspark; i++)
        if (ch->spark[i] > mx)
            mx = ch->spark[i];
    move(y, x);
    attron(tui_pair(t, C_BAR));
    for (int i = 0; i < UI_SPARK && i < cols; i++) {
        int k = ch->nspark - cols + i;
        if (k < 0) {
            addch(' ');
            continue;
        }
        int lvl = mx > 0 ? (int)(ch->spark[k] / mx * 7 + 0.5) : 0;
        addstr(blocks[lvl < 0 ? 0 : lvl > 7 ? 7 : lvl]);
    }
    attroff(tui_pair(t, C_BAR));
}

static void memory(tui *t, const hdr *h, int y, int x, int cols)
{
    (void)h;
    ui_chat *ch = t->ch;
    char mem[32], kv[32], buf[128];
    eng_format_bytes((double)eng_rss_bytes(), mem, sizeof mem);
    eng_format_bytes((double)ch->st.kv_bytes, kv, sizeof kv);
    /* the cache's share of it, and its types (the context gauge's memory) */
    const char *state = ch->busy ? "replying..." : ch->loading ? "loading..." : "ready";
    if (ch->st.cache_k[0])
        snprintf(buf, sizeof buf, "Mem %s (KV %s %s/%s)   %s", mem, kv, ch->st.cache_k, ch->st.cache_v, state);
    else
        snprintf(buf, sizeof buf, "Mem %s   %s", mem, state);
    tui_putz(y, x, cols, buf);
}

static const cell row_idle[] = {
    {"Tok/s", 1, 6, 6, NULL},
    {NULL, 1, 32, 32, sparkline},
    {NULL, 2, 0, 0, memory},
};

static void draw_row(tui *t, const hdr *h, int y, const cell *c, size_t n)
{
    int x = 0;
    for (size_t i = 0; i < n; i++) {
        x += c[i].gap;
        int w = t->W >= WIDE_W ? c[i].wide : c[i].narrow;
        if (!w)
            w = t->W - x - 1;
        if (c[i].label)
            label(t, y, x, c[i].label);
        else
            c[i].draw(t, h, y, x, w);
        x += w;
    }
}

static void draw_title(tui *t)
{
    ui_chat *ch = t->ch;
    char buf[1024];
    tui_fill(0, 0, t->W, tui_pair(t, C_TITLE) | A_REVERSE * !t->color);
    attron(tui_pair(t, C_TITLE) | A_BOLD | (t->color ? 0 : A_REVERSE));
    if (ch->have_model)
        snprintf(buf, sizeof buf, " nibble  %s  %s %s  kernel %s  %d thread%s  template %s", ch->st.model_name,
                 ch->st.arch, ch->st.weight_type, ch->st.kernel, ch->st.threads, ch->st.threads == 1 ? "" : "s",
                 ch->st.tmpl);
    else
        snprintf(buf, sizeof buf, " nibble  %s", ch->loading ? "loading a model..." : "no model (F2 opens one)");
    tui_putz(0, 0, t->W, buf);
    attroff(tui_pair(t, C_TITLE) | A_BOLD | (t->color ? 0 : A_REVERSE));
}

#define ROW(r) r, sizeof r / sizeof r[0]

void tui_draw_header(tui *t)
{
    ui_chat *ch = t->ch;
    draw_title(t);
    hdr h = {0};
    h.used = ch->stats.ctx_used;
    h.size = ch->stats.ctx_size ? ch->stats.ctx_size : ch->st.ctx_size;
    h.f = h.size ? (double)h.used / h.size : 0;
    int nar = t->W < 80;
    if (ch->prog_active) {
        h.el = (ui_now_ms() - ch->prog_t0) / 1e3;
        h.isload = ch->prog_stage == ENG_STAGE_LOAD;
    }
    if (nar)
        draw_row(t, &h, 1, ROW(row_ctx_narrow));
    else
        draw_row(t, &h, 1, ROW(row_speed));
    if (ch->prog_active && nar)
        draw_row(t, &h, 2, ROW(row_progress_narrow));
    else if (ch->prog_active)
        draw_row(t, &h, 2, ROW(row_progress));
    else if (nar)
        draw_row(t, &h, 2, ROW(row_speed_narrow));
    else
        draw_row(t, &h, 2, ROW(row_idle));
}
