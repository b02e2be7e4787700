#include "editor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "journal.h"
#include "port.h"

struct ui_editor {
    char *buf;         /* NUL-terminated */
    size_t len, cap, cur;
    char *kill;        /* last killed text */
    char **hist;       /* oldest first */
    size_t nhist, hist_max;
    size_t hpos;       /* == nhist: not browsing */
    char *draft;       /* what was typed before browsing began */
};

ui_editor *ui_editor_new(size_t hist_max)
{
    ui_editor *ed = calloc(1, sizeof *ed);
    if (!ed)
        return NULL;
    ed->cap = 256;
    ed->buf = calloc(1, ed->cap);
    ed->hist = calloc(hist_max ? hist_max : 1, sizeof *ed->hist);
    if (!ed->buf || !ed->hist) {
        ui_editor_free(ed);
        return NULL;
    }
    ed->hist_max = hist_max ? hist_max : 1;
    return ed;
}

void ui_editor_free(ui_editor *ed)
{
    if (!ed)
        return;
    for (size_t i = 0; i < ed->nhist; i++)
        free(ed->hist[i]);
    free(ed->hist);
    free(ed->buf);
    free(ed->kill);
    free(ed->draft);
    free(ed);
}

const char *ui_editor_text(const ui_editor *ed) { return ed->buf; }
size_t ui_editor_len(const ui_editor *ed) { return ed->len; }
size_t ui_editor_cursor(const ui_editor *ed) { return ed->cur; }

static int reserve(ui_editor *ed, size_t extra)
{
    if (ed->len + extra + 1 <= ed->cap)
        return 0;
    size_t cap = (ed->len + extra + 1) * 2;
    char *b = realloc(ed->buf, cap);
    if (!b)
        return -1;
    ed->buf = b;
    ed->cap = cap;
    return 0;
}

void ui_editor_set(ui_editor *ed, const char *text)
{
    size_t n = strlen(text);
    ed->len = ed->cur = 0;
    ed->buf[0] = 0;
    if (reserve(ed, n))
        return;
    memcpy(ed->buf, text, n + 1);
    ed->len = ed->cur = n;
}

void ui_editor_clear(ui_editor *ed)
{
    ed->len = ed->cur = 0;
    ed->buf[0] = 0;
    ed->hpos = ed->nhist;
}

int ui_editor_insert(ui_editor *ed, const char *s, size_t n)
{
    if (reserve(ed, n))
        return -1;
    memmove(ed->buf + ed->cur + n, ed->buf + ed->cur, ed->len - ed->cur + 1);
    memcpy(ed->buf + ed->cur, s, n);
    ed->len += n;
    ed->cur += n;
    return 0;
}

/* Character boundaries: step over UTF-8 continuation bytes. */
static size_t prev_char(const ui_editor *ed, size_t i)
{
    if (i == 0)
        return 0;
    i--;
    while (i > 0 && ((unsigned char)ed->buf[i] & 0xc0) == 0x80)
        i--;
    return i;
}

static size_t next_char(const ui_editor *ed, size_t i)
{
    if (i >= ed->len)
        return ed->len;
    int w, cp;
    return i + ui_char(ed->buf, ed->len, i, &w, &cp);
}

void ui_editor_left(ui_editor *ed) { ed->cur = prev_char(ed, ed->cur); }
void ui_editor_right(ui_editor *ed) { ed->cur = next_char(ed, ed->cur); }

static int is_space(char c) { return c == ' ' || c == '\n' || c == '\t'; }

void ui_editor_word_left(ui_editor *ed)
{
    size_t i = ed->cur;
    while (i > 0 && is_space(ed->buf[i - 1]))
        i--;
    while (i > 0 && !is_space(ed->buf[i - 1]))
        i--;
    ed->cur = i;
}

void ui_editor_word_right(ui_editor *ed)
{
    size_t i = ed->cur;
    while (i < ed->len && is_space(ed->buf[i]))
        i++;
    while (i < ed->len && !is_space(ed->buf[i]))
        i++;
    ed->cur = i;
}

void ui_editor_home(ui_editor *ed)
{
    while (ed->cur > 0 && ed->buf[ed->cur - 1] != '\n')
        ed->cur--;
}

void ui_editor_end(ui_editor *ed)
{
    while (ed->cur < ed->len && ed->buf[ed->cur] != '\n')
        ed->cur++;
}

/* Remove [a, b); keep it for yank if save. */
static void cut(ui_editor *ed, size_t a, size_t b, int save)
{
    if (b <= a)
        return;
    if (save) {
        char *k = malloc(b - a + 1);
        if (k) {
            memcpy(k, ed->buf + a, b - a);
            k[b - a] = 0;
            free(ed->kill);
            ed->kill = k;
        }
    }
    memmove(ed->buf + a, ed->buf + b, ed->len - b + 1);
    ed->len -= b - a;
    ed->cur = a;
}

void ui_editor_backspace(ui_editor *ed) { cut(ed, prev_char(ed, ed->cur), ed->cur, 0); }
void ui_editor_delete(ui_editor *ed) { cut(ed, ed->cur, next_char(ed, ed->cur), 0); }

void ui_editor_kill_end(ui_editor *ed)
{
    size_t e = ed->cur;
    while (e < ed->len && ed->buf[e] != '\n')
        e++;
    if (e == ed->cur && e < ed->len)
        e++; /* at a line's end: join the next line */
    cut(ed, ed->cur, e, 1);
}

void ui_editor_kill_start(ui_editor *ed)
{
    size_t a = ed->cur;
    while (a > 0 && ed->buf[a - 1] != '\n')
        a--;
    cut(ed, a, ed->cur, 1);
}

void ui_editor_kill_word(ui_editor *ed)
{
    size_t e = ed->cur;
    ui_editor_word_left(ed);
    cut(ed, ed->cur, e, 1);
}

void ui_editor_yank(ui_editor *ed)
{
    if (ed->kill)
        ui_editor_insert(ed, ed->kill, strlen(ed->kill));
}

size_t ui_editor_layout(const ui_editor *ed, int width, ui_line *out, size_t cap, int *cur_row, int *cur_col)
{
    size_t n = ui_wrap(ed->buf, ed->len, width, 0, out, cap);
    int row = 0, col = 0;
    if (out) {
        size_t lim = n < cap ? n : cap;
        for (size_t r = 0; r < lim; r++) {
            /* the cursor belongs to the last line whose span holds it */
            if (ed->cur >= out[r].start && ed->cur <= out[r].end) {
                row = (int)r;
                col = ui_width(ed->buf + out[r].start, ed->cur - out[r].start);
            }
        }
        /* at the end of a full line the cursor shows at the next row */
        if (row >= 0 && (size_t)row < lim && col >= width) {
            row++;
            col = 0;
            if ((size_t)row >= n)
                n++;
        }
    }
    if (cur_row)
        *cur_row = row;
    if (cur_col)
        *cur_col = col;
    return n;
}

/* Move one visual row up (dir -1) or down (+1) keeping the column.
 * Returns 0 if there is no such row. */
static int move_row(ui_editor *ed, int width, int dir)
{
    size_t cap = ui_wrap(ed->buf, ed->len, width, 0, NULL, 0) + 1;
    ui_line *ln = malloc(cap * sizeof *ln);
    if (!ln)
        return 0;
    int row, col;
    size_t n = ui_editor_layout(ed, width, ln, cap, &row, &col);
    int target = row + dir;
    int ok = target >= 0 && (size_t)target < n && (size_t)target < cap;
    if (ok) {
        ui_line *t = &ln[target];
        if (t->start > ed->len) {
            free(ln);
            return 0;
        }
        size_t i = t->start + ui_fit(ed->buf + t->start, t->end - t->start, col);
        ed->cur = i;
    }
    free(ln);
    return ok;
}

static void hist_show(ui_editor *ed)
{
    ui_editor_set(ed, ed->hpos < ed->nhist ? ed->hist[ed->hpos] : (ed->draft ? ed->draft : ""));
}

int ui_editor_up(ui_editor *ed, int width)
{
    if (move_row(ed, width, -1))
        return 1;
    if (ed->hpos == 0 || ed->nhist == 0)
        return 0;
    if (ed->hpos == ed->nhist) {
        free(ed->draft);
        ed->draft = malloc(ed->len + 1);
        if (ed->draft)
            memcpy(ed->draft, ed->buf, ed->len + 1);
    }
    ed->hpos--;
    hist_show(ed);
    return 1;
}

int ui_editor_down(ui_editor *ed, int width)
{
    if (move_row(ed, width, +1))
        return 1;
    if (ed->hpos >= ed->nhist)
        return 0;
    ed->hpos++;
    hist_show(ed);
    return 1;
}

void ui_editor_history_add(ui_editor *ed, const char *text)
{
    if (*text && !(ed->nhist && !strcmp(ed->hist[ed->nhist - 1], text))) {
        size_t n = strlen(text);
        char *c = malloc(n + 1);
        if (c) {
            memcpy(c, text, n + 1);
            if (ed->nhist == ed->hist_max) {
                free(ed->hist[0]);
                memmove(ed->hist, ed->hist + 1, (ed->nhist - 1) * sizeof *ed->hist);
                ed->nhist--;
            }
            ed->hist[ed->nhist++] = c;
        }
    }
    ed->hpos = ed->nhist;
    free(ed->draft);
    ed->draft = NULL;
}

size_t ui_editor_history_count(const ui_editor *ed) { return ed->nhist; }
const char *ui_editor_history_at(const ui_editor *ed, size_t i) { return i < ed->nhist ? ed->hist[i] : NULL; }

int ui_editor_history_load(ui_editor *ed, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    while ((got = nb_getline(&line, &cap, f)) > 0) {
        if (line[got - 1] == '\n')
            line[--got] = 0;
        if (eng_journal_unescape(line) >= 0 && *line)
            ui_editor_history_add(ed, line);
    }
    free(line);
    fclose(f);
    return 0;
}

int ui_editor_history_save(const ui_editor *ed, const char *path)
{
    size_t total = 1;
    char **esc = calloc(ed->nhist + 1, sizeof *esc);
    if (!esc)
        return -1;
    for (size_t i = 0; i < ed->nhist; i++) {
        esc[i] = eng_journal_escape(ed->hist[i], strlen(ed->hist[i]));
        total += esc[i] ? strlen(esc[i]) + 1 : 0;
    }
    char *all = malloc(total), *p = all;
    for (size_t i = 0; i < ed->nhist; i++) {
        if (all && esc[i]) {
            size_t k = strlen(esc[i]);
            memcpy(p, esc[i], k);
            p += k;
            *p++ = '\n';
        }
        free(esc[i]);
    }
    free(esc);
    if (!all)
        return -1;
    eng_err e;
    int rc = eng_write_atomic(path, all, (size_t)(p - all), &e);
    free(all);
    return rc;
}
