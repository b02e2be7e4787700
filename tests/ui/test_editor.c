/* ui/editor: editing keys on UTF-8 text, multi-line layout and cursor,
 * Up/Down between rows and through history, and the history file. */
#include <unistd.h>

#include "editor.h"
#include "testutil.h"

static int is(ui_editor *ed, const char *want) { return !strcmp(ui_editor_text(ed), want); }

int main(void)
{
    ui_editor *ed = ui_editor_new(3);
    ui_editor_insert(ed, "hello", 5);
    ui_editor_insert(ed, " \xe4\xb8\x96\xe7\x95\x8c", 7); /* " 世界" */
    CHECK(is(ed, "hello \xe4\xb8\x96\xe7\x95\x8c"));
    ui_editor_backspace(ed); /* a whole character */
    CHECK(is(ed, "hello \xe4\xb8\x96"));
    ui_editor_left(ed);
    CHECK(ui_editor_cursor(ed) == 6);
    ui_editor_left(ed);
    ui_editor_insert(ed, ",", 1);
    CHECK(is(ed, "hello, \xe4\xb8\x96"));
    ui_editor_home(ed);
    ui_editor_delete(ed);
    CHECK(is(ed, "ello, \xe4\xb8\x96"));
    ui_editor_word_right(ed);
    CHECK(ui_editor_cursor(ed) == 5);
    ui_editor_kill_end(ed);
    CHECK(is(ed, "ello,"));
    ui_editor_home(ed);
    ui_editor_yank(ed);
    CHECK(is(ed, " \xe4\xb8\x96" "ello,"));
    ui_editor_end(ed);
    ui_editor_kill_word(ed); /* "世ello," is one word */
    CHECK(is(ed, " "));
    ui_editor_kill_start(ed);
    CHECK(is(ed, ""));

    /* multi-line: Ctrl+J inserts '\n'; Home/End stay on the line */
    ui_editor_set(ed, "first line\nsecond");
    ui_editor_home(ed);
    CHECK(ui_editor_cursor(ed) == 11);
    int row, col;
    ui_line ls[16];
    size_t n = ui_editor_layout(ed, 40, ls, 16, &row, &col);
    CHECK(n == 2 && row == 1 && col == 0);
    CHECK(ui_editor_up(ed, 40) == 1); /* moves up a row, not into history */
    CHECK(ui_editor_cursor(ed) == 0);
    ui_editor_end(ed);
    CHECK(ui_editor_down(ed, 40) == 1);
    CHECK(ui_editor_cursor(ed) == strlen("first line\nsecond")); /* column clamps */
    /* long line wraps by character; the cursor follows */
    ui_editor_set(ed, "abcdefghij");
    n = ui_editor_layout(ed, 4, ls, 16, &row, &col);
    CHECK(n == 3 && row == 2 && col == 2);
    ui_editor_set(ed, "abcd");
    n = ui_editor_layout(ed, 4, ls, 16, &row, &col);
    CHECK(row == 1 && col == 0); /* after a full line the cursor is on the next row */

    /* history: Up on the first row walks back, Down returns to the draft */
    ui_editor_clear(ed);
    ui_editor_history_add(ed, "one");
    ui_editor_history_add(ed, "two");
    ui_editor_history_add(ed, "two"); /* no repeat */
    ui_editor_history_add(ed, "");
    CHECK(ui_editor_history_count(ed) == 2);
    ui_editor_insert(ed, "draft", 5);
    CHECK(ui_editor_up(ed, 40) && is(ed, "two"));
    CHECK(ui_editor_up(ed, 40) && is(ed, "one"));
    CHECK(!ui_editor_up(ed, 40) && is(ed, "one"));
    CHECK(ui_editor_down(ed, 40) && is(ed, "two"));
    CHECK(ui_editor_down(ed, 40) && is(ed, "draft"));
    CHECK(!ui_editor_down(ed, 40));
    ui_editor_history_add(ed, "three\nlines\\x");
    ui_editor_history_add(ed, "four"); /* max 3: "one" goes */
    CHECK(ui_editor_history_count(ed) == 3 && !strcmp(ui_editor_history_at(ed, 0), "two"));

    char path[128];
    snprintf(path, sizeof path, "/tmp/nibble-test-history-%ld", (long)getpid());
    CHECK(ui_editor_history_save(ed, path) == 0);
    ui_editor *e2 = ui_editor_new(10);
    CHECK(ui_editor_history_load(e2, path) == 0);
    CHECK(ui_editor_history_count(e2) == 3);
    CHECK(!strcmp(ui_editor_history_at(e2, 1), "three\nlines\\x"));
    CHECK(!strcmp(ui_editor_history_at(e2, 2), "four"));
    unlink(path);
    CHECK(ui_editor_history_load(e2, "/nonexistent/history") < 0);
    ui_editor_free(e2);
    ui_editor_free(ed);
    return tu_result("test_editor");
}
