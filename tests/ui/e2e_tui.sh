#!/usr/bin/env bash
# End-to-end tests of `nibble chat`: the real binary in a tmux session,
# driven with send-keys and read with capture-pane. One scenario per run:
#   e2e_tui.sh SCENARIO
# Needs NIBBLE_BIN (the binary) and NIBBLE_ASSETS (for stories260K.gguf).
# Exit 77 (skip) without tmux. Every wait polls the screen with a timeout,
# so a slow machine only makes it slower, not flaky.
set -u
scenario=${1:?scenario}
bin=${NIBBLE_BIN:?NIBBLE_BIN}
model=${NIBBLE_ASSETS:?NIBBLE_ASSETS}/stories260K.gguf
command -v tmux >/dev/null 2>&1 || { echo "skip: tmux not installed"; exit 77; }
[ -f "$model" ] || { echo "skip: $model missing"; exit 77; }

T=$(mktemp -d "${TMPDIR:-/tmp}/nibble-e2e.XXXXXX")
# every session gets its own server socket: a new session on the socket of
# a server that is still shutting down fails with "server exited unexpectedly"
gen=0
sock="nb-e2e-$$-$scenario-$gen"
tm() { tmux -L "$sock" -f /dev/null "$@"; }
# end the current session; the next start() opens a new server
stop_session() {
    tm kill-server >/dev/null 2>&1
    gen=$((gen + 1))
    sock="nb-e2e-$$-$scenario-$gen"
}
cleanup() {
    tm kill-server >/dev/null 2>&1
    [ -f "$T/pid" ] && kill -0 "$(cat "$T/pid")" 2>/dev/null && kill "$(cat "$T/pid")" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
export LC_ALL=C.UTF-8 LANG=C.UTF-8
# ncurses keeps some memory until the process ends; under ASan that is not
# ours to report (the unit tests check our modules for leaks)
export ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0"
export HOME="$T/home" XDG_DATA_HOME="$T/data" XDG_CONFIG_HOME="$T/cfg"
mkdir -p "$HOME" "$T/cfg/nibble" "$T/models"
cp "$model" "$T/models/story-a.gguf"
cp "$model" "$T/models/story-b.gguf"
# a file that claims to be GGUF and is not
printf 'GGUF\003\000\000\000garbage that is not a model' >"$T/models/broken.gguf"
cat >"$T/cfg/nibble/nibble.ini" <<INI
[chat]
model_dirs = $T/models
INI

fail() {
    echo "FAIL ($scenario): $*"
    echo "---- screen ----"
    tm capture-pane -p -t s 2>/dev/null
    echo "----------------"
    exit 1
}

# start W H ARGS...: run nibble in a fresh session; its pid lands in $T/pid
start() {
    local w=$1 h=$2
    shift 2
    { echo 'echo $$ > "$1"; shift; exec "$@"'; } >"$T/run.sh"
    tm new-session -d -s s -x "$w" -y "$h" \
        "sh $T/run.sh $T/pid $(printf '%q ' "$bin" "$@"); echo \"[exited \$?]\"; sleep 600"
    wait_for "F10Quit" 20 || fail "the screen did not come up"
    # a line typed while the model still loads is refused ("still loading"):
    # under a sanitizer loading is slow, so wait for it before any typing
    case " $* " in *" -m "*) wait_for "loaded [^ ]*\.gguf|context [0-9]+\)" 60 || true ;; esac
}

screen() { tm capture-pane -p -t s; }

# wait_for REGEX SECONDS: poll the screen until it matches
wait_for() {
    local re=$1 secs=${2:-20} i=0
    while [ $i -lt $((secs * 20)) ]; do
        local scr
        scr=$(screen)
        printf '%s\n' "$scr" | grep -Eq -- "$re" && return 0
        # nibble is gone: no point waiting
        case "$re" in *exited*) ;; *) printf '%s\n' "$scr" | grep -q '^\[exited' && return 1 ;; esac
        sleep 0.05
        i=$((i + 1))
    done
    return 1
}

keys() { tm send-keys -t s "$@"; }
type_line() { tm send-keys -t s -l "$1"; tm send-keys -t s Enter; }
footer_re='─ [a-z ]+ · [0-9]+ tokens · [0-9.]+ tok/s'
journal() { ls -t "$XDG_DATA_HOME"/nibble/conversations/*.nbj 2>/dev/null | head -1; }

case "$scenario" in
stream)
    # a typed message gets a streamed reply and a tok/s figure
    start 120 40 -m "$T/models/story-a.gguf" -n 60
    wait_for "loaded story-a.gguf" 20 || fail "no load notice"
    type_line "Once upon a time"
    wait_for "$footer_re" 30 || fail "no reply footer"
    screen | grep -q "^ You" || fail "no user entry"
    screen | grep -Eq "Decode +[1-9][0-9.]* tok/s" || fail "no decode tok/s meter"
    screen | grep -Eq "Ctx \[.*\] [1-9][0-9]*/[0-9]+" || fail "no context gauge"
    keys F10
    wait_for "\[exited 0\]" 10 || fail "F10 did not quit"
    ;;
scroll)
    # scrolled back, the indicator has a line of its own (it covered the
    # last text line) and says how much is below
    start 100 24 -m "$T/models/story-a.gguf" -n 300 --temp 0
    type_line "Once upon a time"
    wait_for "$footer_re" 30 || fail "no reply"
    keys PPage
    wait_for "↓ [0-9]+ more lines? below" 10 || fail "no scroll indicator"
    screen | grep -Eq "^ +↓ [0-9]+ more lines? below · End: latest +│" || fail "text shares the indicator's line"
    keys End
    wait_for "$footer_re" 10 || fail "End does not go back to the latest"
    screen | grep -q "more line" && fail "the indicator stays at the latest"
    ;;
edit)
    # F8 puts the last message in the input; Enter sends the edited text as
    # a new branch; the old message and reply stay, dimmed and labelled
    start 120 40 -m "$T/models/story-a.gguf" -n 12 --temp 0
    type_line "Once upon a time"
    wait_for "$footer_re" 30 || fail "no first reply"
    type_line "The dog"
    wait_for "The dog" 10 || fail "second message not shown"
    for _ in $(seq 1 100); do [ "$(screen | grep -Ec "$footer_re")" = 2 ] && break; sleep 0.05; done
    screen | grep -q "F8Edit" || fail "no F8Edit on the key bar at 120 columns"
    keys F8
    wait_for "^✎ The dog" 10 || fail "F8 did not put the last message in the input"
    wait_for "You \(editing\)" 5 || fail "the message being edited is not marked"
    keys C-u
    type_line "The cat"
    wait_for "You \(earlier branch\)" 20 || fail "the old message is not kept as an earlier branch"
    wait_for "Reply \(replaced\)" 5 || fail "the old reply is not kept"
    for _ in $(seq 1 100); do [ "$(screen | grep -Ec "$footer_re")" = 3 ] && break; sleep 0.05; done
    j=$(journal)
    grep -q "^meta edit_of 2" "$j" || fail "the new message does not say what it replaced: $j"
    [ "$(grep -c '^meta superseded 1' "$j")" = 2 ] || fail "the old message and reply are not both superseded"
    # Esc cancels an edit and leaves the input empty
    keys F8
    wait_for "^✎ The cat" 10 || fail "F8 again"
    keys Escape
    wait_for "edit cancelled" 5 || fail "Esc does not cancel the edit"
    screen | grep -q "^✎" && fail "the edit marker stays after Esc"
    ;;
slider)
    # a slider moved mid-reply is recorded in the reply
    start 120 40 -m "$T/models/story-a.gguf" -n 200 --debug-token-delay 25
    type_line "Once upon a time"
    wait_for "… writing" 20 || fail "reply did not start"
    keys Tab Left
    # one unit on one line (its spaces do not break)
    wait_for "⟦temp.0.80->0.75⟧" 20 || fail "no mark in the reply"
    wait_for "$footer_re" 40 || fail "reply did not finish"
    j=$(journal)
    grep -q "^mark [0-9]* [0-9]* temp 0.80->0.75" "$j" || fail "mark not in the journal $j"
    grep -q "^meta temp 0.8" "$j" || fail "provenance temp missing"
    # three quick steps mid-reply: one mark with the whole change
    keys Tab # back to the input
    type_line "/new"
    type_line "Once upon a time"
    wait_for "… writing" 20 || fail "second reply did not start"
    keys Tab Left Left Left
    wait_for "⟦temp.0.75->0.60⟧" 20 || fail "no single mark for three steps"
    wait_for "$footer_re" 40 || fail "second reply did not finish"
    j=$(journal)
    [ "$(grep -c '^mark ' "$j")" = 1 ] || fail "$(grep -c '^mark ' "$j") marks for three steps in $j"
    grep -q "^mark [0-9]* [0-9]* temp 0.75->0.60$" "$j" || fail "the mark does not hold the whole change: $(grep '^mark' "$j")"
    ;;
kernel)
    # switching kernel then regenerating at temperature 0 gives the same text
    start 120 40 -m "$T/models/story-a.gguf" -n 60 --temp 0
    type_line "Once upon a time"
    wait_for "$footer_re" 30 || fail "no first reply"
    keys F3
    wait_for "Kernel sets and threads" 10 || fail "no kernel menu"
    screen | grep -q "scalar" || fail "scalar not listed"
    for _ in 1 2 3 4 5 6 7 8; do keys Up; done
    keys Enter
    wait_for "kernel scalar" 10 || fail "kernel did not switch"
    keys F5
    wait_for "Reply \(replaced\)" 10 || fail "regenerate did not start"
    n=0
    for _ in $(seq 1 400); do
        n=$(grep -c '^entry assistant' "$(journal)" 2>/dev/null)
        [ "$n" = 2 ] && ! grep -q '^partial 1' "$(journal)" && break
        sleep 0.05
    done
    j=$(journal)
    mapfile -t texts < <(awk '/^entry assistant/{a=1} a&&/^text /{print; a=0}' "$j")
    [ ${#texts[@]} -eq 2 ] || fail "expected two replies in $j"
    [ "${texts[0]}" = "${texts[1]}" ] || fail "regenerated text differs: ${texts[0]} VS ${texts[1]}"
    grep -q "^meta kernel scalar" "$j" || fail "second reply not on scalar"
    ;;
model)
    # switching model from the menu works
    start 120 40 -m "$T/models/story-a.gguf" -n 30
    wait_for "loaded story-a.gguf" 20 || fail "first model"
    keys F2
    wait_for "story-b.gguf" 10 || fail "model menu lacks story-b"
    screen | grep -q "broken.gguf.*unreadable" || fail "broken file not marked"
    keys Down Enter # the cursor starts on story-a, the model in use
    wait_for "loaded story-b.gguf" 20 || fail "story-b did not load"
    # F2 again: the cursor starts on the model in use (drawn in reverse)
    keys F2
    wait_for "Models  \\(Enter opens" 10 || fail "no model menu the second time"
    tm capture-pane -p -e -t s | grep "story-b.gguf" | grep -q $'\e\\[[0-9;]*7[;m]' ||
        fail "the cursor is not on the model in use"
    keys Escape
    # tmux would send Esc and the typed text in one write, which reads as
    # the escape sequence Esc O n; a person's Esc arrives on its own
    sleep 0.3
    type_line "Once upon a time"
    wait_for "$footer_re" 30 || fail "no reply on the new model"
    grep -q "^meta model_file .*story-b.gguf" "$(journal)" || fail "provenance lacks the new model"
    ;;
corrupt)
    # a corrupt model file chosen in the menu shows an error; the app keeps running
    start 120 40 -m "$T/models/story-a.gguf" -n 30
    wait_for "loaded story-a.gguf" 20 || fail "first model"
    keys F2
    wait_for "broken.gguf" 10 || fail "no broken.gguf in the menu"
    keys Up Enter # the cursor starts on story-a, the model in use; broken.gguf is above
    # back in the menu, with the reason on top
    wait_for "│ /.*broken\.gguf: " 20 || fail "no load error in the menu"
    screen | grep -q "Models  (Enter opens" || fail "not back in the model menu"
    keys Escape
    wait_for "cannot load .*broken.gguf" 10 || fail "no load error in the conversation"
    screen | grep -q "previous model stays" || fail "no word that the old model stays"
    type_line "Once upon a time"
    wait_for "$footer_re" 30 || fail "the app stopped working"
    ;;
stop)
    # Ctrl+C stops a reply and keeps the partial text; twice on idle quits
    start 120 40 -m "$T/models/story-a.gguf" -n 400 --debug-token-delay 25
    type_line "Once upon a time"
    wait_for "… writing" 20 || fail "reply did not start"
    sleep 0.5
    keys C-c
    wait_for "─ stopped · [0-9]+ tokens" 10 || fail "reply not stopped"
    toks=$(screen | grep -Eo '[0-9]+ tokens' | head -1 | cut -d' ' -f1)
    [ "${toks:-0}" -gt 0 ] && [ "${toks:-0}" -lt 400 ] || fail "partial reply has $toks tokens"
    grep -q "^meta end stopped" "$(journal)" || fail "journal lacks the stopped reply"
    keys C-c
    wait_for "Ctrl\+C again" 5 || fail "no quit hint"
    keys C-c
    wait_for "\[exited 0\]" 10 || fail "double Ctrl+C did not quit"
    ;;
resize)
    # resizing 120x40 -> 80x24 -> 200x60 leaves no garbage
    start 120 40 -m "$T/models/story-a.gguf" -n 80
    type_line "Once upon a time"
    wait_for "$footer_re" 30 || fail "no reply"
    for size in "80 24" "200 60" "120 40"; do
        set -- $size
        tm resize-window -t s -x "$1" -y "$2"
        wait_for "F10Quit" 10 || fail "no redraw at $size"
        sleep 0.3
        a=$(screen)
        keys C-l # a full repaint: must give the same picture
        sleep 0.3
        b=$(screen)
        # (rows 2-3 hold live meters such as memory; compare the rest)
        [ "$(echo "$a" | sed 2,3d)" = "$(echo "$b" | sed 2,3d)" ] || fail "screen at $size differs from a full repaint"
        [ "$(echo "$a" | tail -1 | grep -c F10Quit)" = 1 ] || fail "key bar not on the last row at $size"
        echo "$a" | head -1 | grep -q "nibble" || fail "title not on the first row at $size"
        echo "$a" | grep -q "Once upon a time" || fail "conversation lost at $size"
        w=$(echo "$a" | wc -L)
        [ "$w" -le "$1" ] || fail "a line wider than $1 at $size"
        # every meter fits, even at 80 columns, and key labels stay apart
        echo "$a" | sed -n 2p | grep -Eq "Decode +[0-9.]+ .*Prefill +[0-9.]+ .*TTFT +[0-9]+ ms" ||
            fail "speed meters cut at $size"
        echo "$a" | tail -1 | grep -q "F4Sampler F5" || fail "key labels run together at $size"
    done
    tm resize-window -t s -x 30 -y 10
    wait_for "needs at least 40x12" 10 || fail "no small-terminal message"
    # the message wraps: its end is on the screen too
    wait_for "quit\.$" 10 || fail "the small-terminal message is cut"
    tm resize-window -t s -x 100 -y 30
    wait_for "F10Quit" 10 || fail "did not come back after growing"
    # the help is longer than an 80x24 screen: it scrolls to its last line
    tm resize-window -t s -x 80 -y 24
    wait_for "F10Quit" 10 || fail "no redraw at 80x24"
    keys F1
    wait_for "Help  \(.*scroll" 10 || fail "help does not say it scrolls at 80x24"
    screen | grep -q "/quit" && fail "help fits at 80x24: this check needs a longer help"
    keys NPage NPage NPage # past the end stays at the end
    wait_for "/quit +leave" 10 || fail "help's last line not reached by PgDn"
    keys x
    sleep 0.3
    screen | grep -q "Help  (" && fail "a key other than scrolling did not close the help"
    ;;
wide)
    # wide characters line up: the side panel's border stays in one column
    start 120 40 -m "$T/models/story-a.gguf" -n 20
    type_line "你好世界 😀 中文字符测试 café naïve e$(printf '\xcc\x81') 日本語のテキスト"
    wait_for "$footer_re" 30 || fail "no reply"
    screen | grep -q "你好世界" || fail "CJK text not shown"
    cols=$(screen | sed -n '5,30p' | grep '│' | while IFS= read -r line; do
        prefix=${line%%│*}
        printf '%s\n' "$prefix" | wc -L
    done | sort -u)
    [ "$(echo "$cols" | wc -l)" = 1 ] || fail "border columns differ: $(echo $cols)"
    ;;
resume)
    # kill -9 during a reply; --resume brings back everything up to the last partial save
    start 120 40 -m "$T/models/story-a.gguf" -n 400 --debug-token-delay 30
    type_line "Once upon a time"
    wait_for "… writing" 20 || fail "reply did not start"
    for _ in $(seq 1 100); do
        grep -q '^partial 1' "$(journal)" 2>/dev/null && grep -Eq '^text .{30}' <(awk '/^entry assistant/{a=1} a' "$(journal)") && break
        sleep 0.05
    done
    kill -9 "$(cat "$T/pid")"
    wait_for "\[exited 137\]" 10 || fail "nibble did not die"
    j=$(journal)
    grep -q '^partial 1' "$j" || fail "no partial save in $j"
    saved=$(awk '/^entry assistant/{a=1} a&&/^text /{sub(/^text /,""); print; exit}' "$j")
    [ ${#saved} -gt 5 ] || fail "partial save is empty"
    stop_session
    rm -f "$T/pid"
    start 120 40 -m "$T/models/story-a.gguf" -n 30 --resume
    wait_for "resumed" 20 || fail "no resume notice"
    wait_for "cut short" 10 || fail "partial reply not marked"
    # the saved text is on screen (compare its first words; wrapping may split later ones)
    first=$(printf '%s' "$saved" | cut -c1-25)
    screen | tr -s ' \n' ' ' | grep -qF -- "$(printf '%s' "$first" | tr -s ' ' ' ')" || fail "saved text '$first' not shown"
    type_line "The end"
    wait_for "$footer_re" 30 || fail "cannot continue after resume"
    ;;
signal)
    # SIGTERM and SIGHUP mid-reply: the reply so far is saved, cut short;
    # the terminal is put back (no alternate screen); the status says which
    # signal (the shell's 128 + N), never 0
    for sig in TERM HUP; do
        rm -f "$XDG_DATA_HOME"/nibble/conversations/*.nbj
        start 120 40 -m "$T/models/story-a.gguf" -n 400 --debug-token-delay 30
        type_line "Once upon a time"
        wait_for "… writing" 20 || fail "SIG$sig: reply did not start"
        for _ in $(seq 1 100); do
            grep -Eq '^text .{20}' <(awk '/^entry assistant/{a=1} a' "$(journal)" 2>/dev/null) && break
            sleep 0.05
        done
        kill -$sig "$(cat "$T/pid")"
        want=$((128 + $(kill -l $sig)))
        wait_for "\[exited $want\]" 15 || fail "SIG$sig: not [exited $want]"
        [ "$(tm display-message -p -t s '#{alternate_on}')" = 0 ] || fail "SIG$sig: the alternate screen is still on"
        j=$(journal)
        grep -q '^partial 1' "$j" || fail "SIG$sig: the reply is not marked cut short in $j"
        saved=$(awk '/^entry assistant/{a=1} a&&/^text /{sub(/^text /,""); print; exit}' "$j")
        [ ${#saved} -gt 20 ] || fail "SIG$sig: the reply so far was not saved ('$saved')"
        grep -q '^meta end stopped' "$j" || fail "SIG$sig: the reply's figures were not kept"
        stop_session
        rm -f "$T/pid"
    done
    ;;
saveover)
    # /save NAME where NAME is another conversation: a question first;
    # n keeps the other file as it was, y writes this one over it
    conv="$XDG_DATA_HOME/nibble/conversations"
    mkdir -p "$conv"
    printf 'nibble-journal 1\nentry user\ntext keep me\nend\n' >"$conv/keep.nbj"
    cp "$conv/keep.nbj" "$T/keep.orig"
    start 120 40 -m "$T/models/story-a.gguf" -n 8
    type_line "Once upon a time"
    wait_for "$footer_re" 30 || fail "no reply"
    type_line "/save keep"
    wait_for "overwrite 'keep' \(another saved conversation\)" 10 || fail "no question"
    screen | grep -q '\[y/N\]' || fail "the question does not say y/N"
    keys n
    wait_for "'keep' kept as it was" 10 || fail "no word that n kept it"
    cmp -s "$conv/keep.nbj" "$T/keep.orig" || fail "n changed keep.nbj"
    type_line "/save keep"
    wait_for "\[y/N\]" 10 || fail "no question the second time"
    keys y
    wait_for "saved as 'keep', over the other" 10 || fail "no word that y overwrote it"
    grep -q "^text Once upon a time" "$conv/keep.nbj" || fail "keep.nbj does not hold this conversation"
    grep -q "keep me" "$conv/keep.nbj" && fail "keep.nbj still holds the old one"
    [ "$(ls "$conv"/*.nbj | wc -l)" = 1 ] || fail "this conversation's old file is still there"
    ;;
bidi)
    # a resumed conversation with bidi controls and zero-width characters
    # ("Trojan Source"): drawn as escapes, never sent raw; an emoji's
    # joiner stays; the file keeps the raw text
    conv="$XDG_DATA_HOME/nibble/conversations"
    mkdir -p "$conv"
    printf 'nibble-journal 1\nentry user\ntext is it \xe2\x80\xaeadmin?\nentry assistant\ntext if (user != "admin\xe2\x80\xae \xe2\x81\xa6// ok\xe2\x81\xa9 \xe2\x81\xa6") ad\xe2\x80\x8bmin, family \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\nend\n' >"$conv/bidi.nbj"
    cp "$conv/bidi.nbj" "$T/bidi.orig"
    start 120 40 -m "$T/models/story-a.gguf" --resume bidi
    wait_for "resumed 'bidi'" 20 || fail "not resumed"
    wait_for 'is it \\u202eadmin\?' 5 || fail "the user's U+202E is not shown as \\u202e"
    screen | grep -qF 'admin\u202e \u2066// ok\u2069 \u2066") ad\u200bmin' || fail "the reply's controls are not shown as escapes"
    screen | grep -q $'\xe2\x80\xae\|\xe2\x81\xa6\|\xe2\x80\x8b' && fail "a raw bidi or zero-width character reached the screen"
    screen | grep -q $'family \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9' || fail "the emoji ZWJ sequence is not drawn as it is"
    # typed: the input line shows a zero-width space too
    tm send-keys -t s -l "$(printf 'ad\xe2\x80\x8bmin')"
    wait_for '^> ad\\u200bmin' 5 || fail "a typed U+200B is not shown as \\u200b"
    keys C-u F10
    wait_for "\[exited 0\]" 10 || fail "F10 did not quit"
    cmp -s "$conv/bidi.nbj" "$T/bidi.orig" || fail "the stored text changed"
    ;;
plain)
    # line mode with the same commands, for scripts
    out=$(printf 'Once upon a time\n/set temp 0\n/list\n/quit\nnever sent\n' |
        "$bin" chat --plain -m "$T/models/story-a.gguf" -n 20 2>"$T/err")
    echo "$out" | grep -q "^> Once upon a time" || fail "no echo: $out"
    [ "$(echo "$out" | wc -l)" -ge 2 ] || fail "no reply: $out"
    grep -q "temp = 0" "$T/err" || fail "/set not run: $(cat "$T/err")"
    grep -q "saved conversations" "$T/err" || fail "/list not run"
    echo "$out" | grep -q "never sent" && fail "/quit did not stop reading"
    [ -n "$(journal)" ] || fail "no journal written"
    # /edit: the last message is shown and the next line replaces it
    out=$(printf 'Once upon a time\nThe dog\n/edit\nThe cat\n/quit\n' |
        "$bin" chat --plain -m "$T/models/story-a.gguf" -n 8 2>"$T/err")
    grep -q "(editing: The dog)" "$T/err" || fail "/edit in line mode: $(cat "$T/err")"
    grep -q "^meta edit_of 2" "$(journal)" || fail "/edit in line mode: no branch in $(journal)"
    ;;
spec)
    # speculative decoding: a [model:NAME] draft (relative: beside the
    # model) loads with the model; the meters show the plain rate and the
    # acceptance; F3 turns the draft off and prompt lookup on; a model
    # whose configured draft is missing says so and chats on without it
    cat >>"$T/cfg/nibble/nibble.ini" <<INI
[model:story-a.gguf]
draft = story-b.gguf
draft_max = 4
[model:story-b.gguf]
draft = nowhere.gguf
INI
    start 150 40 -m "$T/models/story-a.gguf" -n 40 --temp 0
    wait_for "speculative decoding on: draft story-b.gguf, up to 4" 20 || fail "the configured draft did not load"
    type_line "Once upon a time"
    wait_for "$footer_re" 30 || fail "no reply"
    wait_for "Decode +[0-9.]+ tok/s \(plain [-0-9.]+\) +Accept +100%" 10 || fail "no plain rate and acceptance"
    j=$(journal)
    grep -q "^meta draft $T/models/story-b.gguf" "$j" || fail "provenance lacks the draft: $(grep ^meta "$j")"
    grep -q "^meta checks [1-9]" "$j" || fail "provenance lacks the checks"
    keys F3
    wait_for "Draft model: on" 10 || fail "no draft row in F3"
    screen | grep -q "Prompt lookup: off" || fail "no lookup row in F3"
    keys NPage Enter # the last row: the draft model
    wait_for "speculative decoding off" 10 || fail "F3 did not turn the draft off"
    keys F3
    wait_for "Draft model: off" 10 || fail "the draft row does not say off"
    keys NPage Up Right Right Right
    wait_for "Prompt lookup: 3 tokens" 10 || fail "Right does not lengthen the lookup"
    keys Enter
    wait_for "speculative decoding on: lookup 3" 10 || fail "F3 did not turn lookup on"
    type_line "The little dog"
    for _ in $(seq 1 400); do
        [ "$(grep -c '^entry assistant' "$(journal)")" = 2 ] && ! grep -q '^partial 1' "$(journal)" && break
        sleep 0.05
    done
    awk '/^entry assistant/{n++} n==2' "$(journal)" | grep -q "^meta lookup 3" || fail "second reply lacks lookup 3"
    awk "/^entry assistant/{n++} n==2" "$(journal)" >"$T/j2"; grep -q "^meta draft " "$T/j2" && fail "second reply still drafted: $(cat "$T/j2")"
    keys F2
    wait_for "story-b.gguf" 10 || fail "no model menu"
    keys Down Enter
    wait_for "loaded story-b.gguf" 20 || fail "story-b did not load"
    wait_for "draft model for story-b.gguf is not used: .*nowhere.gguf" 10 || fail "no error for the missing draft"
    type_line "Once upon a time"
    for _ in $(seq 1 400); do
        [ "$(grep -c '^entry assistant' "$(journal)")" = 3 ] && ! grep -q '^partial 1' "$(journal)" && break
        sleep 0.05
    done
    [ "$(grep -c '^entry assistant' "$(journal)")" = 3 ] || fail "no reply after the missing draft"
    keys F10
    wait_for "\[exited 0\]" 10 || fail "no clean exit"
    ;;
config)
    # a bad config line: warning with its line number, default kept
    printf '[chat]\nthreads = many\n[sampler]\ntemp = 0.3\n' >"$T/cfg/nibble/nibble.ini"
    out=$(printf '/quit\n' | "$bin" chat --plain -m "$T/models/story-a.gguf" 2>&1)
    echo "$out" | grep -q "nibble.ini:2: threads" || fail "no warning: $out"
    # once: line mode has it on stderr, and not again as a chat notice
    [ "$(echo "$out" | grep -c "nibble.ini:2")" = 1 ] || fail "the warning is printed more than once: $out"
    start 120 40 -m "$T/models/story-a.gguf"
    wait_for "config: .*nibble.ini:2" 10 || fail "warning not shown in the chat"
    wait_for "Temperature +0.30" 10 || fail "temp from the config not applied"
    keys F10
    wait_for "\[exited 0\]" 10 || fail "no clean exit"
    screen | grep -q "nibble.ini:2" || fail "warning not left on the terminal after exit"
    ;;
small)
    # a message and its reply at 60x20 and 40x12; the side panel is
    # collapsed there and Tab shows it with every slider and the seed
    for size in "60 20" "40 12"; do
        set -- $size
        start "$1" "$2" -m "$T/models/story-a.gguf" -n 12
        type_line "Once upon a time"
        wait_for "─ [a-z ]+ · [0-9]+ tokens" 30 || fail "no reply at $size"
        a=$(screen)
        w=$(echo "$a" | wc -L)
        [ "$w" -le "$1" ] || fail "a line wider than $1 at $size"
        echo "$a" | tail -1 | grep -q "F10Quit" || fail "no F10Quit on the key bar at $size"
        echo "$a" | grep -q "Temperature" && fail "the side panel is not collapsed at $size"
        echo "$a" | grep -Eq "Decode [0-9.]+ +Prefill" || fail "no speeds at $size"
        keys Tab
        wait_for "Temperature" 5 || fail "Tab does not show the sliders at $size"
        for _ in 1 2 3 4 5; do keys Down; done
        wait_for "Max tokens +12" 5 || fail "max tokens not on screen at $size"
        keys Tab
        stop_session
        rm -f "$T/pid"
    done
    # at 80x24 (collapsed, below 100 columns) every slider and the seed show
    start 80 24 -m "$T/models/story-a.gguf" -n 12
    keys Tab
    wait_for "Max tokens" 5 || fail "max tokens hidden at 80x24"
    wait_for "seed [0-9]+" 5 || fail "seed hidden at 80x24"
    ;;
convs)
    # F7: the saved conversations; / searches, Enter opens, r renames,
    # d deletes after a y
    start 120 40 -m "$T/models/story-a.gguf" -n 8
    type_line "Once upon a time there was a cat"
    wait_for "$footer_re" 30 || fail "no first reply"
    type_line "/new"
    type_line "Once upon a time there was a dog"
    wait_for "$footer_re" 30 || fail "no second reply"
    n=$(ls "$XDG_DATA_HOME"/nibble/conversations/*.nbj | wc -l)
    [ "$n" = 2 ] || fail "$n conversation files, not 2"
    keys F7
    wait_for "Conversations  \(Enter opens" 10 || fail "F7 opened no list"
    screen | grep -q "there was a cat" || fail "the cat conversation is not listed"
    screen | grep -q "there was a dog  (open)" || fail "the open one is not marked"
    keys /
    wait_for "Search conversations" 5 || fail "/ asks nothing"
    tm send-keys -t s -l "cat"
    keys Enter
    wait_for "search: cat" 5 || fail "no search shown"
    screen | grep -q "there was a dog" && fail "the search kept the dog"
    keys r C-u
    tm send-keys -t s -l "kitty"
    keys Enter
    wait_for "kitty " 5 || fail "rename not listed"
    [ -f "$XDG_DATA_HOME/nibble/conversations/kitty.nbj" ] || fail "no kitty.nbj after the rename"
    keys Enter
    wait_for "resumed 'kitty'" 10 || fail "Enter did not open it"
    keys F7
    wait_for "kitty .*\(open\)" 5 || fail "the opened one is not marked"
    # newest first: the dog (saved after the cat) is on top, where the cursor starts
    screen | grep -A1 "Conversations  (Enter" | tail -1 | grep -q "there was a dog" || fail "the dog is not on top"
    keys d
    wait_for "Delete '.*' for good\?" 5 || fail "d did not ask first"
    keys n
    sleep 0.3
    [ "$(ls "$XDG_DATA_HOME"/nibble/conversations/*.nbj | wc -l)" = 2 ] || fail "n deleted a file"
    keys d
    wait_for "for good\?" 5 || fail "d did not ask again"
    keys y
    wait_for "deleted" 5 || fail "no word of the deletion"
    [ "$(ls "$XDG_DATA_HOME"/nibble/conversations/*.nbj | wc -l)" = 1 ] || fail "y deleted nothing"
    [ -f "$XDG_DATA_HOME/nibble/conversations/kitty.nbj" ] || fail "the wrong one was deleted"
    ;;
copy)
    # /copy sends the last reply as OSC 52 (read from the pane's pty):
    # its base64 is the reply the journal holds
    start 120 40 -m "$T/models/story-a.gguf" -n 16 --temp 0
    type_line "Once upon a time"
    wait_for "$footer_re" 30 || fail "no reply"
    tm pipe-pane -t s -o "cat > $T/pty.out"
    sleep 0.3
    type_line "/copy"
    wait_for "copied [0-9]+ bytes" 10 || fail "no word that it was copied"
    sleep 0.5
    tm pipe-pane -t s
    b64=$(tr -d '\r' <"$T/pty.out" | grep -ao $'\e]52;c;[A-Za-z0-9+/=]*\a' | head -1 | sed $'s/^\e]52;c;//; s/\a$//')
    [ -n "$b64" ] || fail "no OSC 52 sequence on the pty"
    got=$(printf '%s' "$b64" | base64 -d)
    want=$(awk '/^entry assistant/{a=1} a&&/^text /{sub(/^text /,""); print; exit}' "$(journal)")
    [ "$got" = "$want" ] || fail "OSC 52 carries '$got', the reply is '$want'"
    ;;
nocolor)
    # NO_COLOR: no colours at all; Ctrl+C on a draft clears it and Up
    # brings it back; the reply footer names min-p and repeat penalty
    real=$bin
    bin=env
    start 120 40 NO_COLOR=1 "$real" -m "$T/models/story-a.gguf" -n 12
    bin=$real
    type_line "Once upon a time"
    wait_for "$footer_re" 30 || fail "no reply"
    tm capture-pane -p -e -t s | grep -Eq $'\e\\[([0-9;]*;)?(3[0-7]|4[0-7]|38;5;[0-9]+|48;5;[0-9]+)(;[0-9;]*)?m' &&
        fail "colours drawn with NO_COLOR set"
    screen | tr -s ' \n' ' ' | grep -Eq "min-p [0-9.]+ repeat [0-9.]+" || fail "footer lacks min-p and repeat"
    tm send-keys -t s -l "a draft worth keeping"
    keys C-c
    wait_for "draft cleared" 5 || fail "no word that the draft is cleared"
    screen | grep -q "^> a draft worth keeping" && fail "Ctrl+C did not clear the draft"
    keys Up
    wait_for "^> a draft worth keeping" 5 || fail "Up did not bring the draft back"
    ;;
markdown)
    # A saved reply with markdown and a <think> block (the journal written
    # here): no fence or ** on screen, the thinking folded until Ctrl+T; /copy
    # and /export leave the thinking out / fold it; a resize re-wraps
    d="$XDG_DATA_HOME/nibble/conversations"
    mkdir -p "$d"
    {
        printf 'nibble-journal 1\nentry user\ntext Show me markdown\nentry assistant\n'
        printf 'meta model demo\nmeta tokens 90\nmeta think_tokens 17\nmeta end end of turn\n'
        printf '%s' 'text <think>\nThe user wants a demo; SECRETTHOUGHT says show a list.\n</think>\n\n'
        printf '%s' '# Demo heading\n\nHere is **bold text** and `inline code`.\n\n- first item\n- second item\n\n'
        printf '%s' '```python\ndef hello():\n    print("hi there, this line is long enough that it does not fit a narrow pane at all")\n```\n\n'
        printf '%s\n' '| Name | Age |\n|------|----:|\n| Alice | 30 |\n\nThe end.'
        printf 'end\n'
    } >"$d/demo.nbj"
    start 120 40 -m "$T/models/story-a.gguf" --resume
    wait_for "resumed 'demo'" 20 || fail "the journal was not resumed"
    scr=$(screen)
    printf '%s\n' "$scr" | grep -q "Demo heading" || fail "no heading"
    printf '%s\n' "$scr" | grep -q "Here is bold text and inline code." || fail "bold/code not rendered as text"
    printf '%s\n' "$scr" | grep -q "^   • first item" || fail "no bullet list"
    printf '%s\n' "$scr" | grep -q 'def hello():' || fail "no code block"
    printf '%s\n' "$scr" | grep -q "Alice │  30" || fail "no table in columns"
    printf '%s\n' "$scr" | grep -Eq '\*\*|```|^ *#|\| Name' && fail "markdown markers on screen"
    printf '%s\n' "$scr" | grep -q "▸ thought for 17 tokens" || fail "no folded thinking line"
    printf '%s\n' "$scr" | grep -q "\^TThink" || fail "Ctrl+T is not on the key bar"
    printf '%s\n' "$scr" | grep -q "SECRETTHOUGHT" && fail "the thinking shows before Ctrl+T"
    keys C-t
    wait_for "SECRETTHOUGHT" 5 || fail "Ctrl+T did not show the thinking"
    screen | grep -q "▾ thought for 17 tokens" || fail "the fold line does not say it is open"
    screen | grep -q "^> *$\|^> Type" || fail "Ctrl+T typed into the input"
    keys C-t
    sleep 0.3
    screen | grep -q "SECRETTHOUGHT" && fail "Ctrl+T again did not fold it"
    # /copy: the answer only
    tm pipe-pane -t s -o "cat > $T/pty.out"
    sleep 0.3
    type_line "/copy"
    wait_for "copied [0-9]+ bytes" 10 || fail "no word that it was copied"
    sleep 0.5
    tm pipe-pane -t s
    b64=$(tr -d '\r' <"$T/pty.out" | grep -ao $'\e]52;c;[A-Za-z0-9+/=]*\a' | head -1 | sed $'s/^\e]52;c;//; s/\a$//')
    got=$(printf '%s' "$b64" | base64 -d)
    case "$got" in "# Demo heading"*"The end.") ;; *) fail "/copy gave '$got'" ;; esac
    case "$got" in *SECRETTHOUGHT*|*think*) fail "/copy took the thinking" ;; esac
    # /export: the thinking in a folded block, the answer as written
    type_line "/export $T/out.md"
    wait_for "written to" 5 || fail "/export said nothing"
    for _ in $(seq 1 40); do [ -s "$T/out.md" ] && break; sleep 0.05; done
    grep -q '^<summary>Thinking (thought for 17 tokens)</summary>' "$T/out.md" || fail "/export has no folded thinking"
    grep -q 'SECRETTHOUGHT' "$T/out.md" || fail "/export lost the thinking"
    grep -q '^# Demo heading' "$T/out.md" || fail "/export lost the answer"
    grep -q '<think>' "$T/out.md" && fail "/export kept the think tags"
    # narrower: re-wrapped, the long code line cut with a marker, not wrapped
    tm resize-window -t s -x 60 -y 40
    wait_for "print\(\"hi there.*›" 5 || fail "the long code line is not cut with a marker after a resize"
    screen | grep -q "not fit a narrow" && fail "the code line was wrapped into the text"
    screen | grep -Eq '\*\*|```' && fail "markers after the resize"
    stop_session
    # without colours: code in reverse video, no colour at all
    real=$bin
    bin=env
    start 120 40 NO_COLOR=1 "$real" -m "$T/models/story-a.gguf" --resume
    bin=$real
    wait_for "resumed 'demo'" 20 || fail "not resumed (NO_COLOR)"
    scr=$(tm capture-pane -p -e -t s)
    printf '%s\n' "$scr" | grep -Eq $'\e\\[([0-9;]*;)?(3[0-7]|4[0-7]|38;5;[0-9]+|48;5;[0-9]+)(;[0-9;]*)?m' &&
        fail "colours drawn with NO_COLOR set"
    printf '%s\n' "$scr" | grep 'def hello' | grep -q $'\e\\[[0-9;]*7m' || fail "no reverse video for code with NO_COLOR"
    ;;
keys)
    # Home, End and Ctrl+Left/Right as xterm, rxvt and screen send them,
    # whatever TERM says: they move the cursor and type nothing; a
    # sequence for a key nibble has no use for types nothing either
    hx() { tm send-keys -t s -H "$@"; }
    home_xterm() { hx 1b 5b 48; }; end_xterm() { hx 1b 5b 46; }
    wl_xterm() { hx 1b 5b 31 3b 35 44; }; wr_xterm() { hx 1b 5b 31 3b 35 43; }
    home_rxvt() { hx 1b 5b 37 7e; }; end_rxvt() { hx 1b 5b 38 7e; }
    wl_rxvt() { hx 1b 4f 64; }; wr_rxvt() { hx 1b 4f 63; }
    home_screen() { hx 1b 5b 31 7e; }; end_screen() { hx 1b 5b 34 7e; }
    wl_screen() { hx 1b 5b 35 44; }; wr_screen() { hx 1b 5b 35 43; }
    real=$bin
    for term in xterm-256color screen-256color rxvt-unicode; do
        bin=env
        start 100 30 TERM=$term "$real" -m "$T/models/story-a.gguf"
        bin=$real
        for set in xterm rxvt screen; do
            keys C-e C-u
            tm send-keys -t s -l "hello world"
            home_$set; tm send-keys -t s -l A
            end_$set; tm send-keys -t s -l Z
            wl_$set; tm send-keys -t s -l W
            wl_$set; wl_$set; wr_$set; tm send-keys -t s -l R
            hx 1b 5b 39 39 7e        # Esc [ 99 ~: no key
            hx 1b 5b 31 3b 35 50     # Ctrl+F1
            hx 1b 5b 3f 31 3b 32 63  # a terminal's answer to a query
            tm send-keys -t s -l .
            wait_for "^> AhelloR\. WworldZ\s*$" 5 ||
                fail "TERM=$term, $set's keys: the input is not 'AhelloR. WworldZ'"
        done
        keys C-u
        stop_session
        rm -f "$T/pid"
    done
    ;;
*)
    echo "unknown scenario $scenario"
    exit 2
    ;;
esac
echo "ok: $scenario"
exit 0
