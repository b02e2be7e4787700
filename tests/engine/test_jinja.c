/* engine/text/jinja: each construct chat templates use, rendered as
 * jinja2 renders it with transformers' settings (the expected texts were
 * checked against python3-jinja2: ImmutableSandboxedEnvironment,
 * trim_blocks, lstrip_blocks, loopcontrols); errors name the line; and
 * hostile templates (deep recursion, a huge loop, a string doubled 60
 * times) end with an error in bounded time and memory. */
#include <string.h>
#include <time.h>

#include "jinja.h"
#include "testutil.h"

struct jcase {
    const char *tmpl, *vars, *want;
};

static const struct jcase cases[] = {
    {"{% if x == 1 %}one{% elif x == 2 %}two{% else %}other{% endif %}",
     "{\"x\": 2}",
     "two"},
    {"{% for m in messages %}{{ loop.index }}/{{ loop.length }}:{{ m.role }}{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %}{{ loop.revindex0 }} {% endfor %}",
     "{\"messages\": [{\"role\": \"user\"}, {\"role\": \"assistant\"}, {\"role\": \"user\"}]}",
     "1/3:userF2 2/3:assistant1 3/3:userL0 "},
    {"{% for x in xs %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }}|{% endfor %}",
     "{\"xs\": [1, 2, 3]}",
     "<1>2|1<2>3|2<3>|"},
    {"{% for x in [] %}no{% else %}empty{% endfor %}",
     "{}",
     "empty"},
    {"{% for x in xs if x is odd %}{{ loop.index0 }}{{ x }}{% endfor %}",
     "{\"xs\": [1, 2, 3, 4, 5]}",
     "011325"},
    {"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d|dictsort %}{{ k }}{% endfor %}",
     "{\"d\": {\"b\": 1, \"a\": 2}}",
     "b=1;a=2;ab"},
    {"{% set ns = namespace(n=0, s=\"\") %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }}",
     "{}",
     "6 0123"},
    {"{% set c = 0 %}{% for i in [1, 2] %}{% set c = c + 1 %}{{ c }}{% endfor %}{{ c }}",
     "{}",
     "110"},
    {"{% set x %}  block {{ 1 + 1 }}{% endset %}[{{ x }}]",
     "{}",
     "[  block 2]"},
    {"{% macro greet(name, punct=\"!\") %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet(\"A\") }} {{ greet(\"B\", punct=\"?\") }} {{ greet(name=\"C\") }}",
     "{}",
     "Hi A! Hi B? Hi C!"},
    {"{% macro box() %}[{{ caller() }}]{% endmacro %}{% call box() %}inside{% endcall %}",
     "{}",
     "[inside]"},
    {"{% macro li(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(item) li([1, 2]) %}<{{ item }}>{% endcall %}",
     "{}",
     "<1><2>"},
    {"{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}",
     "{}",
     "0134"},
    {"{% filter upper %}shout {{ \"this\" }}{% endfilter %}",
     "{}",
     "SHOUT THIS"},
    {"{% generation %}gen{{ 1 }}{% endgeneration %}",
     "{}",
     "gen1"},
    {"a\n  {% if true %}\n    b\n  {% endif %}\nc\n",
     "{}",
     "a\n    b\nc"},
    {"x  {%- if true -%}  y  {%- endif -%}  z",
     "{}",
     "xyz"},
    {"  {%+ if true %}k{% endif %}\n  {# comment #}\nend",
     "{}",
     "  kend"},
    {"{{ \"tab\\there\" }}|{{ 'q\\'s' }}|{{ \"\\u00e9\\n\" }}|{{ 1_000 }}|{{ 2.5e3 }}|{{ (1, 2) }}|{{ (1,) }}|{{ [1, \"a\", none, true] }}|{{ {\"k\": [1.5, false]} }}",
     "{}",
     "tab\there|q's|\303\251\n|1000|2500.0|(1, 2)|(1,)|[1, 'a', None, True]|{'k': [1.5, False]}"},
    {"{{ m.content }}|{{ m[\"role\"] }}|{{ xs[1] }}|{{ xs[-1] }}|{{ xs[5] }}|{{ xs[::-1] }}|{{ xs[1:] }}|{{ \"h\303\251llo\"[::-1] }}|{{ \"h\303\251llo\"[1:3] }}",
     "{\"m\": {\"role\": \"user\", \"content\": \"hi\"}, \"xs\": [1, 2, 3]}",
     "hi|user|2|3||[3, 2, 1]|[2, 3]|oll\303\251h|\303\251l"},
    {"{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }} {{ \"a\" ~ 1 ~ none }} {{ \"ab\" * 3 }} {{ [1] + [2] }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1.0 }} {{ 3 - 1.5 }}",
     "{}",
     "3 -4 1 2 3.5 1024 7 a1None ababab [1, 2] 0.30000000000000004 1e+20 1.0 1.5"},
    {"{{ 1 < 2 < 3 }} {{ \"a\" in \"cat\" }} {{ 2 not in [1, 3] }} {{ \"k\" in {\"k\": 1} }} {{ not true or false and true }} {{ \"y\" if x else \"n\" }} {{ x or \"dflt\" }} {{ x and \"yes\" }}",
     "{\"x\": 0}",
     "True True True True False n dflt 0"},
    {"{{ messages is defined }} {{ nope is defined }} {{ none is none }} {{ \"s\" is string }} {{ {} is mapping }} {{ [] is iterable }} {{ \"s\" is sequence }} {{ 1 is number }} {{ true is boolean }} {{ 3 is divisibleby 3 }} {{ x is not none }}",
     "{\"messages\": []}",
     "True False True True True True True True True True True"},
    {"[{{ \"  a b  \"|trim }}] {{ \"abc\"|length }} {{ [1, 2]|length }} {{ [\"a\", \"b\"]|join(\", \") }} {{ nope|default(\"d\") }} {{ \"\"|default(\"e\", true) }} {{ \"Hello\"|upper }} {{ \"Hello\"|lower }} {{ \"hello world\"|capitalize }} {{ \"a-b\"|replace(\"-\", \"+\") }} {{ 12|string ~ \"x\" }} {{ \"42\"|int + 1 }} {{ \"x\"|int }}",
     "{}",
     "[a b] 3 2 a, b d e HELLO hello Hello world a+b 12x 43 0"},
    {"{{ xs|first }} {{ xs|last }} {{ xs|map(attribute=\"n\")|list }} {{ xs|selectattr(\"n\", \"equalto\", 2)|list|length }} {{ xs|rejectattr(\"n\", \"gt\", 1)|list }} {{ xs|map(attribute=\"n\")|join(\"+\") }} {{ [3, 1, 2]|sort }} {{ [\"b\", \"A\", \"a\"]|unique|list }} {{ [1, 2, 3]|sum }} {{ [4, 9]|max }}",
     "{\"xs\": [{\"n\": 1}, {\"n\": 2}, {\"n\": 3}]}",
     "{'n': 1} {'n': 3} [1, 2, 3] 1 [{'n': 1}] 1+2+3 [1, 2, 3] ['b', 'A'] 6 9"},
    {"{{ x|tojson }}|{{ x|tojson(indent=2) }}|{{ x|tojson(sort_keys=true) }}|{{ \"\303\251\\\"\\n\"|tojson }}|{{ [1.0, 2.5, none]|tojson }}",
     "{\"x\": {\"b\": [1, {\"c\": \"d\"}], \"a\": true}}",
     "{\"b\": [1, {\"c\": \"d\"}], \"a\": true}|{\n  \"b\": [\n    1,\n    {\n      \"c\": \"d\"\n    }\n  ],\n  \"a\": true\n}|{\"a\": true, \"b\": [1, {\"c\": \"d\"}]}|\"\303\251\\\"\\n\"|[1.0, 2.5, null]"},
    {"{{ \"line1\\nline2\\n\\nline4\"|indent(2) }}|{{ \"a\\nb\"|indent(4, true) }}|{{ \"a\\n\\nb\"|indent(2, blank=true) }}",
     "{}",
     "line1\n  line2\n\n  line4|    a\n    b|a\n  \n  b"},
    {"{{ \"a,b,,c\".split(\",\") }} {{ \"  x y \\n z \".split() }} {{ \"a b c\".split(\" \", 1) }} {{ \"xxhixx\".strip(\"x\") }} {{ \"  hi  \".lstrip() }}| {{ \"  hi  \".rstrip() }}| {{ \"file.txt\".endswith(\".txt\") }} {{ \"abc\".startswith((\"x\", \"a\")) }} {{ \"{} and {}\".format(1, \"b\") }} {{ \"{0}{name}\".format(\"p\", name=\"q\") }} {{ \"aaa\".replace(\"a\", \"b\", 2) }} {{ \"Hi %s, %d\" % (\"you\", 3) }}",
     "{}",
     "['a', 'b', '', 'c'] ['x', 'y', 'z'] ['a', 'b c'] hi hi  |   hi| True True 1 and b pq bba Hi you, 3"},
    {"{{ d.get(\"a\") }} {{ d.get(\"z\", \"none\") }} {{ d.get(\"z\") }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ d|length }}",
     "{\"d\": {\"a\": 1, \"b\": [2]}}",
     "1 none None ['a', 'b'] [1, [2]] [('a', 1), ('b', [2])] 2"},
    {"{{ none }} {{ true }} {{ false }} {{ nope }}|{{ [none, true, \"it's\"] }} {{ {\"a\": \"x\"}|string }} {{ 0.5 }} {{ 1e-5 }} {{ 123456789012345678 }} {{ -0.0 }}",
     "{}",
     "None True False |[None, True, \"it's\"] {'a': 'x'} 0.5 1e-05 123456789012345678 -0.0"},
    {"{% for x in xs %}{% set y = x %}{% endfor %}[{{ y }}]{% if true %}{% set z = 1 %}{% endif %}{{ z }}",
     "{\"xs\": [1]}",
     "[]1"},
    {"{# a comment #}a{% raw %}{{ not rendered }}{% endraw %}b",
     "{}",
     "a{{ not rendered }}b"},
    {"{%- for m in messages -%}{{ \"<|\" + m.role + \"|>\\n\" + m.content | trim + \"\\n\" }}{%- endfor -%}{%- if add_generation_prompt %}<|assistant|>\n{% endif -%}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \" hi \"}], \"add_generation_prompt\": true}",
     "<|user|>\nhi\n<|assistant|>\n"},
    {"{{ bos_token }}{% for m in messages %}{% if m.role == \"system\" %}{% set sys = m.content %}{% endif %}{% endfor %}{{ messages[0].content if messages[0].role == \"system\" else \"none\" }}",
     "{\"bos_token\": \"<s>\", \"messages\": [{\"role\": \"system\", \"content\": \"S\"}]}",
     "<s>S"},
    {"{{ \"Abc Def\"|title }} {{ \"aBc\"|lower }} {{ 3.7|int }} {{ -3|abs }} {{ 2.567|round(1) }} {{ \"5.5\"|float }} {{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ range(0, 10, 3)|list }} {{ \"\303\211COLE\"|lower }}",
     "{}",
     "Abc Def abc 3 3 2.6 5.5 [[1, 2], [3, 4], [5]] [0, 3, 6, 9] \303\251cole"},
    {"{{ \"%-5s|\" % \"ab\" }}{{ \"%05.1f\" % 3.14159 }}{{ \"x\" ~ (1, 2)|string }}{{ (\"a\", \"b\")|join }}",
     "{}",
     "ab   |003.1x(1, 2)ab"},
    {"{{ x.y.z }}",
     "{\"x\": {\"y\": {\"z\": \"deep\"}}}",
     "deep"},
    {"{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = (\"p\", \"q\") %}{% for i, j in [t] %}{{ i }}{{ j }}{% endfor %}",
     "{}",
     "12pq"},
    {"{{ messages|selectattr(\"role\", \"equalto\", \"user\")|map(attribute=\"content\")|list|tojson }}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"bot\", \"content\": \"b\"}, {\"role\": \"user\", \"content\": \"c\"}]}",
     "[\"a\", \"c\"]"},
    {"{{ \"\346\227\245\346\234\254\"|length }} {{ \"\346\227\245\346\234\254\350\252\236\"[1] }} {% for ch in \"h\303\251\" %}[{{ ch }}]{% endfor %}",
     "{}",
     "2 \346\234\254 [h][\303\251]"},
};
static const struct jcase errors[] = {
    {"{{ raise_exception(\"bad role\") }}", "{}", "raise_exception: bad role"},
    {"a\n{% if x %}\n{{ x.y.z }}\n{% endif %}", "{\"x\": {\"q\": 1}}", "line 3"},
    {"{% for x in 5 %}{% endfor %}", "{}", "not iterable"},
    {"{{ 1 + \"a\" }}", "{}", "unsupported operand"},
    {"{{ xs.append(1) }}", "{\"xs\": []}", "unsafe"},
    {"{{ x | nosuchfilter }}", "{}", "no filter named 'nosuchfilter'"},
    {"{{ 1 < \"a\" }}", "{}", "not supported"},
};
static const struct jcase parse_errors[] = {
    {"line one\n{% if x %}\nno end", NULL, "line 3"},
    {"{{ 1 + }}", NULL, "line 1"},
    {"{% for %}{% endfor %}", NULL, "line 1"},
    {"{% endif %}", NULL, "unexpected 'endif'"},
    {"{% unknowntag %}", NULL, "unknown tag 'unknowntag'"},
    {"{{ \"unterminated }}", NULL, "unterminated string"},
    {"{# never closed", NULL, "comment"},
    /* a slice inside a tuple index had no operand and crashed (fuzzer) */
    {"{{ x[1:2, 0] }}", NULL, "a slice cannot be part of a tuple index"},
    {"{{ x[0, ::] }}", NULL, "a slice cannot be part of a tuple index"},
    /* a number longer than the lexer's buffer is refused, never cut short
     * (79 digits then '.5' wrote one byte past it: the fuzzer's find) */
    {"{{ 4444444444444444444444444444444444444444444444444444444444444444444444444444444.5 }}", NULL, "more than 79 characters"},
    {"{{ 7777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777777 }}", NULL, "more than 79 characters"},
};

static char *render(const char *tmpl, const char *vars, const eng_jinja_limits *lim, eng_err *e, int *rc)
{
    eng_jinja *t = NULL;
    char *out = NULL;
    size_t len = 0;
    *rc = eng_jinja_parse(tmpl, strlen(tmpl), &t, e);
    if (!*rc)
        *rc = eng_jinja_render(t, vars, lim, &out, &len, e);
    if (!*rc)
        CHECKF(strlen(out) == len, "length %zu for '%s'", len, tmpl);
    eng_jinja_free(t);
    return out;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A hostile template stops with an error that says why, quickly. */
static void hostile(const char *what, const char *tmpl, const char *why)
{
    eng_jinja_limits lim;
    eng_jinja_limits_default(&lim);
    lim.max_memory = 64u << 20; /* the same checks as the defaults, sooner */
    eng_err e = {{0}};
    int rc;
    double t0 = now();
    char *out = render(tmpl, "{}", &lim, &e, &rc);
    double dt = now() - t0;
    CHECKF(rc == ENG_EFORMAT && !out, "%s: rendered (rc %d)", what, rc);
    int found = 0; /* why: alternatives separated by '|' */
    for (const char *w = why; *w;) {
        const char *bar = strchr(w, '|');
        size_t k = bar ? (size_t)(bar - w) : strlen(w);
        for (const char *m = e.msg; *m && !found; m++)
            found = !strncmp(m, w, k);
        w += k + (bar ? 1 : 0);
    }
    CHECKF(found, "%s: message '%s' lacks '%s'", what, e.msg, why);
    CHECKF(strncmp(e.msg, "line ", 5) == 0, "%s: message '%s' names no line", what, e.msg);
    CHECKF(dt < 20, "%s: took %.1f s", what, dt);
    free(out);
}

int main(void)
{
    eng_err e = {{0}};
    int rc;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = render(cases[i].tmpl, cases[i].vars, NULL, &e, &rc);
        CHECKF(rc == 0, "case %zu: %s", i, e.msg);
        if (out)
            CHECKF(!strcmp(out, cases[i].want), "case %zu: '%s'\n  got  '%s'\n  want '%s'", i, cases[i].tmpl, out,
                   cases[i].want);
        free(out);
    }
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
        char *out = render(errors[i].tmpl, errors[i].vars, NULL, &e, &rc);
        CHECKF(rc == ENG_EFORMAT && !out, "error %zu: '%s' rendered '%s'", i, errors[i].tmpl, out ? out : "");
        CHECKF(strstr(e.msg, errors[i].want) != NULL, "error %zu: '%s' lacks '%s'", i, e.msg, errors[i].want);
        free(out);
    }
    for (size_t i = 0; i < sizeof parse_errors / sizeof parse_errors[0]; i++) {
        eng_jinja *t = NULL;
        const char *s = parse_errors[i].tmpl;
        rc = eng_jinja_parse(s, strlen(s), &t, &e);
        CHECKF(rc == ENG_EFORMAT && !t, "parse error %zu: '%s' parsed", i, s);
        CHECKF(strstr(e.msg, parse_errors[i].want) != NULL, "parse error %zu: '%s' lacks '%s'", i, e.msg,
               parse_errors[i].want);
        eng_jinja_free(t);
    }

    /* strftime_now gives today's date; the template's one trailing newline goes */
    char *out = render("{{ strftime_now('%Y') }}\n", NULL, NULL, &e, &rc);
    CHECK(rc == 0 && out && strlen(out) == 4 && out[0] == '2');
    free(out);
    /* variables must be a JSON object */
    out = render("x", "[1]", NULL, &e, &rc);
    CHECK(rc == ENG_EINVAL && !out);
    out = render("x", "{\"a\": ", NULL, &e, &rc);
    CHECK(rc == ENG_EINVAL && !out);

    /* hostile templates */
    hostile("deep recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "nested deeper");
    hostile("huge loop",
            "{% for i in range(100000) %}{% for j in range(100000) %}{% for k in range(100000) %}"
            "x{% endfor %}{% endfor %}{% endfor %}",
            "steps|memory");
    hostile("doubling string",
            "{% set ns = namespace(s='ab') %}{% for i in range(60) %}{% set ns.s = ns.s + ns.s %}{% endfor %}"
            "{{ ns.s }}",
            "longer than");
    hostile("doubling list",
            "{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = ns.l + ns.l %}{% endfor %}"
            "{{ ns.l|length }}",
            "memory");
    hostile("output flood", "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", "output longer");
    hostile("range too big", "{% for i in range(10**12) %}{% endfor %}", "range too big");
    /* a nesting too deep to parse is refused before it runs */
    char deep[4100];
    for (int i = 0; i < 2000; i++) {
        deep[i] = '(';
        deep[2001 + i] = ')';
    }
    deep[2000] = '1';
    deep[4001] = 0;
    eng_jinja *t = NULL;
    char deep_t[4200];
    snprintf(deep_t, sizeof deep_t, "{{ %s }}", deep);
    CHECK(eng_jinja_parse(deep_t, strlen(deep_t), &t, &e) == ENG_EFORMAT && strstr(e.msg, "nested too deeply"));
    eng_jinja_free(t);
    return tu_result("test_jinja");
}
