/* The side panel and the sampler sliders view: one slider a row of a
 * table (name, range, step, format, which field of the generation
 * settings it moves); Tab or F4 gives them the keyboard, arrows (or
 * h j k l, + -) pick and set, and a change goes to the engine at once. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "tui_internal.h"

typedef struct slider {
    const char *name;
    double lo, hi, step;
    const char *fmt;
    size_t off;   /* of the field in eng_gen_params */
    int is_int;   /* the field is an int32_t (else a float) */
    int zero_off; /* 0 shows as "off" */
} slider;

#define GEN(f) offsetof(eng_gen_params, f)

static const slider sliders[] = {
    {"Temperature", 0, 2, 0.05, "%.2f", GEN(sp.temp), 0, 0},
    {"Top-p", 0.05, 1, 0.05, "%.2f", GEN(sp.top_p), 0, 0},
    {"Top-k", 0, 200, 5, "%.0f", GEN(sp.top_k), 1, 1},
    {"Min-p", 0, 0.5, 0.01, "%.2f", GEN(sp.min_p), 0, 0},
    {"Repeat penalty", 1, 2, 0.05, "%.2f", GEN(sp.repeat_penalty), 0, 0},
    {"Max tokens", 0, 4096, 32, "%.0f", GEN(max_tokens), 1, 1},
};
#define NSLIDERS (int)(sizeof sliders / sizeof sliders[0])

static double slider_get(const eng_gen_params *g, const slider *s)
{
    const char *p = (const char *)g + s->off;
    if (s->is_int) {
        int32_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    float v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void slider_set(eng_gen_params *g, const slider *s, double v)
{
    char *p = (char *)g + s->off;
    if (s->is_int) {
        int32_t i = (int32_t)(v + 0.5);
        memcpy(p, &i, sizeof i);
    } else {
        float f = (float)v;
        memcpy(p, &f, sizeof f);
    }
}

static void slider_step(tui *t, int dir)
{
    const slider *s = &sliders[t->slider];
    eng_gen_params g = t->ch->gen;
    double v = slider_get(&g, s) + dir * s->step;
    /* snap to the step grid, so repeated steps stay round */
    v = s->lo + (double)(long)((v - s->lo) / s->step + 0.5) * s->step;
    if (v < s->lo)
        v = s->lo;
    if (v > s->hi)
        v = s->hi;
    slider_set(&g, s, v);
    ui_chat_set_gen_soon(t->ch, &g);
    char b[96], val[32];
    snprintf(val, sizeof val, s->fmt, v);
    snprintf(b, sizeof b, "%s %s%s", s->name, val, t->ch->busy ? " (from the next token)" : "");
    tui_set_status(t, b);
}

int tui_side_docked(const tui *t) { return t->W >= SIDE_MIN_W; }

/* The panel: a title row, then each slider as its name and value over a
 * bar (3 rows), or, when that does not fit, name and value alone (1 row),
 * scrolled so that the picked one is on screen; the seed below when there
 * is room. Nothing that can be changed is ever out of sight. */
void tui_draw_side(tui *t, int top, int rows)
{
    int foc = t->view == &tui_view_sliders;
    int docked = tui_side_docked(t);
    if (!docked && !foc)
        return; /* collapsed: Tab/F4 shows it */
    int x = t->W - SIDE_W;
    if (x < 1)
        x = 1;
    int w = t->W - x;
    if (!docked) /* over the conversation: cleared first */
        for (int r = 0; r < rows; r++)
            tui_fill(top + r, x - 1, w + 1, 0);
    attron(tui_pair(t, C_DIM));
    mvvline(top, x - 1, ACS_VLINE, rows);
    attroff(tui_pair(t, C_DIM));
    attron((foc ? tui_pair(t, C_SEL) : tui_pair(t, C_METER)) | A_BOLD);
    tui_putz(top, x + 1, w - 2, foc ? "Sampler  (\u2191\u2193 pick, \u2190\u2192 set)" : "Sampler  (Tab/F4)");
    attroff((foc ? tui_pair(t, C_SEL) : tui_pair(t, C_METER)) | A_BOLD);
    int full = 2 + NSLIDERS * 3 + 1 <= rows;
    int per = full ? 3 : 1, y0 = top + (full ? 2 : 1);
    int fit = (top + rows - y0) / per; /* sliders that fit */
    if (fit < 1)
        fit = 1;
    int first = 0;
    if (foc && t->slider >= fit)
        first = t->slider - fit + 1;
    int y = y0;
    for (int i = first; i < NSLIDERS && y < top + rows && i < first + fit; i++, y += per) {
        const slider *s = &sliders[i];
        double v = slider_get(&t->ch->gen, s);
        char val[32], b[64];
        snprintf(val, sizeof val, s->fmt, v);
        if (s->zero_off && v == 0)
            snprintf(val, sizeof val, "off");
        snprintf(b, sizeof b, "%-15s%8s", s->name, val);
        int sel = foc && t->slider == i;
        if (sel)
            attron(A_REVERSE | tui_pair(t, C_SEL));
        tui_putz(y, x + 1, w - 2, b);
        if (sel)
            attroff(A_REVERSE | tui_pair(t, C_SEL));
        if (full)
            tui_bar(t, y + 1, x + 1, w - 3, (v - s->lo) / (s->hi - s->lo), 0);
    }
    if (y < top + rows && first + fit >= NSLIDERS) {
        char b[64];
        snprintf(b, sizeof b, "seed %llu", (unsigned long long)t->ch->gen.sp.seed);
        attron(tui_pair(t, C_DIM));
        tui_putz(y, x + 1, w - 2, b);
        attroff(tui_pair(t, C_DIM));
    }
}

static void pick(tui *t, int dir) { t->slider = (t->slider + NSLIDERS + dir) % NSLIDERS; }

static void sliders_key(tui *t, int fn, uint32_t c, int alt)
{
    (void)alt;
    if (fn) {
        switch (c) {
        case KEY_UP: pick(t, -1); return;
        case KEY_DOWN: pick(t, +1); return;
        case KEY_LEFT: slider_step(t, -1); return;
        case KEY_RIGHT: slider_step(t, +1); return;
        case KEY_BTAB: t->view = &tui_view_input; return;
        }
        return;
    }
    switch (c) {
    case '+': case '=': case 'l': slider_step(t, +1); return;
    case '-': case '_': case 'h': slider_step(t, -1); return;
    case 'k': pick(t, -1); return;
    case 'j': pick(t, +1); return;
    case '\t': case '\r': case 27: t->view = &tui_view_input; return;
    }
}

const tui_view tui_view_sliders = {"sliders", tui_key_main, sliders_key, NULL, TUI_CURSOR_NONE};
