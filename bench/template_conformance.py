#!/usr/bin/env python3
"""template_conformance.py - nibble's Jinja interpreter against the reference.

usage: NIBBLE=path/to/nibble bench/template_conformance.py TEMPLATE_DIR [-v] [--only NAME]

Renders every *.jinja file in TEMPLATE_DIR (e.g. llama.cpp's models/templates;
nothing of it is kept here) over a fixed set of conversations, with and
without the generation prompt, twice: with `nibble template` and with
Python's jinja2 set up the way Hugging Face transformers renders chat
templates (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, the
loopcontrols extension, transformers' tojson, raise_exception and
strftime_now). Needs python3-jinja2.

A case passes when both render byte-identical text, or when both fail
(jinja2 raises and nibble exits with an error). Prints one line a failing
case (-v: every case) and a summary: passed / all, and of the cases jinja2
renders, how many nibble renders identically.
"""
import datetime
import json
import os
import subprocess
import sys
import tempfile

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

BOS, EOS = "<s>", "</s>"

CONVERSATIONS = {
    "user": [{"role": "user", "content": "Hello!"}],
    "system+user": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is 2+2?"},
    ],
    "multi-turn": [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another one?"},
    ],
    "multiline-unicode": [
        {"role": "user", "content": "Line one\nLine two\n  indented \u2014 \u00fcn\u00efc\u00f8d\u00e9 \u65e5\u672c\u8a9e \U0001F642\n"},
        {"role": "assistant", "content": "  Got it:\n- \u00e9t\u00e9\n- \"quoted\" and 'single' \\ backslash"},
        {"role": "user", "content": "Tabs\tand {{ braces }} {% not a tag %}"},
    ],
}


class TemplateError(Exception):
    pass


def make_env():
    # as transformers' _compile_jinja_template sets it up
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.now().strftime(fmt)

    class Generation(jinja2.ext.Extension):
        # transformers' AssistantTracker: {% generation %} renders its body
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.Scope(body, lineno=lineno)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def reference(env, src, messages, gen):
    try:
        t = env.from_string(src)
        return True, t.render(messages=messages, tools=None, documents=None, add_generation_prompt=gen,
                              bos_token=BOS, eos_token=EOS)
    except Exception as e:  # jinja2 raising is a result too
        return False, "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")


def nibble(binary, path, msg_path, gen):
    cmd = [binary, "template", "--file", path, "--messages", msg_path, "--bos", BOS, "--eos", EOS]
    if not gen:
        cmd.append("--no-generation-prompt")
    p = subprocess.run(cmd, capture_output=True, timeout=60)
    if p.returncode == 0:
        return True, p.stdout.decode("utf-8", "replace")
    err = p.stderr.decode("utf-8", "replace").strip().splitlines()
    return False, (err[-1] if err else "exit %d" % p.returncode)


def first_diff(a, b):
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    return "at char %d: jinja2 %r / nibble %r" % (i, a[max(0, i - 20):i + 30], b[max(0, i - 20):i + 30])


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    verbose = "-v" in sys.argv
    only = None
    if "--only" in sys.argv:
        only = sys.argv[sys.argv.index("--only") + 1]
        args.remove(only)
    if len(args) != 1:
        sys.exit(__doc__)
    binary = os.environ.get("NIBBLE")
    if not binary:
        sys.exit("set NIBBLE to the nibble binary")
    tdir = args[0]
    env = make_env()
    names = sorted(f for f in os.listdir(tdir) if f.endswith(".jinja"))
    if only:
        names = [n for n in names if only in n]
    total = passed = ref_ok = ref_ok_same = both_fail = 0
    failing_templates = {}
    with tempfile.TemporaryDirectory() as tmp:
        msg_paths = {}
        for cname, msgs in CONVERSATIONS.items():
            msg_paths[cname] = os.path.join(tmp, cname + ".json")
            with open(msg_paths[cname], "w", encoding="utf-8") as f:
                json.dump(msgs, f, ensure_ascii=False)
        for name in names:
            path = os.path.join(tdir, name)
            with open(path, encoding="utf-8") as f:
                src = f.read()
            for cname, msgs in CONVERSATIONS.items():
                for gen in (True, False):
                    total += 1
                    rok, rout = reference(env, src, msgs, gen)
                    nok, nout = nibble(binary, path, msg_paths[cname], gen)
                    case = "%s %s%s" % (name, cname, "" if gen else " (no gen prompt)")
                    if rok:
                        ref_ok += 1
                    if rok and nok and rout == nout:
                        passed += 1
                        ref_ok_same += 1
                        if verbose:
                            print("ok   %s" % case)
                    elif not rok and not nok:
                        passed += 1
                        both_fail += 1
                        if verbose:
                            print("ok   %s: both raise (jinja2 %s | nibble %s)" % (case, rout, nout))
                    else:
                        if rok and nok:
                            why = "differs " + first_diff(rout, nout)
                        elif rok:
                            why = "nibble fails: " + nout
                        else:
                            why = "jinja2 raises (%s), nibble renders" % rout
                        failing_templates.setdefault(name, 0)
                        failing_templates[name] += 1
                        print("FAIL %s: %s" % (case, why))
    print()
    print("templates: %d, cases: %d (%d conversations x generation prompt on/off)" %
          (len(names), total, len(CONVERSATIONS)))
    print("passed: %d/%d (%.1f%%)" % (passed, total, 100.0 * passed / max(total, 1)))
    print("  jinja2 renders %d cases; nibble identical on %d (%.1f%%)" %
          (ref_ok, ref_ok_same, 100.0 * ref_ok_same / max(ref_ok, 1)))
    print("  jinja2 raises on %d cases; nibble errors too on %d" % (total - ref_ok, both_fail))
    if failing_templates:
        print("templates with failures: %s" % ", ".join(sorted(failing_templates)))
    return 0 if passed == total else 1


if __name__ == "__main__":
    sys.exit(main())
