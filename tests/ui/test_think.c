/* ui/think: a reply's thinking found in each form (think.h), while it is
 * still being written, and left alone where there is none. */
#include "testutil.h"
#include "think.h"

static ui_think th;
static const char *cur;

static void split(const char *s)
{
    cur = s;
    ui_think_split(s, strlen(s), &th);
}

/* the part [a, b) of the text last split is want */
static int part_is(size_t a, size_t b, const char *want)
{
    return b >= a && b - a == strlen(want) && !memcmp(cur + a, want, b - a);
}

int main(void)
{
    /* <think> ... </think> answer */
    split("<think>\nstep one\n</think>\n\nThe answer.");
    CHECK(th.found && !th.open);
    CHECK(part_is(th.t0, th.t1, "\nstep one\n"));
    CHECK(part_is(th.a0, th.a1, "The answer."));
    split("  \n<think>x</think>y");
    CHECK(th.found && part_is(th.t0, th.t1, "x") && part_is(th.a0, th.a1, "y"));
    /* still thinking: open, no answer yet */
    split("<think>\nso far");
    CHECK(th.found && th.open && part_is(th.t0, th.t1, "\nso far") && th.a0 == th.a1);
    split("<think>");
    CHECK(th.found && th.open && th.t0 == th.t1);
    /* a half-written tag is not thinking yet, nor an end */
    split("<thi");
    CHECK(!th.found && part_is(th.a0, th.a1, "<thi"));
    split("<think>abc</thi");
    CHECK(th.found && th.open && part_is(th.t0, th.t1, "abc</thi"));
    /* the <think> was in the prompt: only the end in the reply */
    split("reasoning here\n</think>\n\nAnswer");
    CHECK(th.found && !th.open && part_is(th.t0, th.t1, "reasoning here\n") && part_is(th.a0, th.a1, "Answer"));
    /* no thinking: the whole text is the answer, also with a tag later on */
    split("Plain answer.");
    CHECK(!th.found && th.a0 == 0 && th.a1 == strlen(cur));
    split("Use <think> tags like <think>this</think>.");
    CHECK(!th.found && th.a0 == 0);
    split("");
    CHECK(!th.found && th.a0 == 0 && th.a1 == 0);
    /* harmony (gpt-oss): analysis, then the final channel */
    split("<|channel|>analysis<|message|>Think hard.<|end|><|start|>assistant<|channel|>final<|message|>Hi!<|return|>");
    CHECK(th.found && !th.open && part_is(th.t0, th.t1, "Think hard.") && part_is(th.a0, th.a1, "Hi!"));
    split("<|start|>assistant<|channel|>analysis<|message|>Still");
    CHECK(th.found && th.open && part_is(th.t0, th.t1, "Still") && th.a0 == th.a1);
    split("<|channel|>analysis");
    CHECK(th.found && th.open && th.t0 == th.t1);
    split("<|channel|>analysis<|message|>T<|end|><|start|>assistant<|channel|>final");
    CHECK(th.found && !th.open && th.a0 == th.a1); /* the answer's header not whole yet */
    split("<|channel|>analysis<|message|>T<|end|>plain rest");
    CHECK(th.found && part_is(th.a0, th.a1, "plain rest"));
    /* an analysis closed by the next message's start (no <|end|>), and a
     * final message that is still coming */
    split("<|channel|>analysis<|message|>T<|start|>assistant<|channel|>final<|message|>A");
    CHECK(th.found && !th.open && part_is(th.t0, th.t1, "T") && part_is(th.a0, th.a1, "A"));
    /* a tool call's commentary channel after the analysis is the answer shown */
    split("<|channel|>analysis<|message|>T<|end|><|start|>assistant<|channel|>commentary to=functions.f "
          "<|constrain|>json<|message|>{}<|call|>");
    CHECK(th.found && part_is(th.a0, th.a1, "{}"));
    /* words */
    CHECK(ui_think_words("", 0) == 0);
    const char *ws = "  one two\nthree\t four  ";
    CHECK(ui_think_words(ws, strlen(ws)) == 4);
    /* every cut of a reply: ranges stay inside the text and in order */
    const char *r = "<think>\nI consider.\n</think>\n\nDone **now**.";
    for (size_t k = 0; k <= strlen(r); k++) {
        ui_think_split(r, k, &th);
        CHECK(th.t0 <= th.t1 && th.t1 <= k && th.a0 <= th.a1 && th.a1 <= k);
        CHECK(!th.found || th.t1 <= th.a0 || th.open);
    }
    return tu_result("test_think");
}
