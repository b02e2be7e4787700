#!/usr/bin/env bash
# Issue 25, one check per finding of the attack pass: each failed on the
# build before the fix. Drives the binary ($NIBBLE_BIN) as a user would,
# on a pty where the terminal matters (script(1)). Usage:
#   NIBBLE_BIN=build/bin/nibble NIBBLE_ASSETS=assets tests/hostile/items.sh [ITEM...]
# Exit 0 all passed, 1 a check failed, 77 no script(1) or timeout(1).
set -u
bin=${NIBBLE_BIN:?NIBBLE_BIN names the nibble binary}
assets=${NIBBLE_ASSETS:-$(dirname "$0")/../../assets}
command -v script >/dev/null && command -v timeout >/dev/null || { echo "items: no script(1)/timeout(1); skipped"; exit 77; }
export NIBBLE_DEFAULT_MODEL=$assets/stories260K.gguf
work=$(mktemp -d /tmp/nibble-hostile-items.XXXXXX)
trap 'rm -rf "$work"' EXIT
export HOME=$work/home XDG_DATA_HOME=$work/data XDG_CONFIG_HOME=$work/config
conv=$XDG_DATA_HOME/nibble/conversations
mkdir -p "$HOME" "$conv" "$XDG_CONFIG_HOME"
# under ASan/TSan everything is slower
T=${HOSTILE_TIMEOUT:-60}
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "  ok   $1"; }
bad() { fail=$((fail + 1)); echo "  FAIL $1"; }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
# run CMD on a pty with stdin INPUT; output (stdout and stderr as the terminal shows them) in $work/pty.out
on_pty() {
  local input=$1; shift
  printf '%s' "$input" | timeout -k 5 "$T" script -qec "$*" /dev/null >"$work/pty.out" 2>&1
}
reply_saved() { # the journal has an assistant entry with some text
  awk '/^entry/ {a = ($2 == "assistant")} a && /^text ./ {f = 1} END {exit !f}' "$1"
}
has_raw_controls() { # ESC, BEL, C1 CSI/OSC as bytes
  LC_ALL=C grep -q $'\x1b\|\x07\|\xc2\x9b\|\xc2\x9d' "$1"
}

item_inject() {
  echo "1. terminal injection (line mode on a pty, run, config warnings)"
  printf 'nibble-journal 1\nentry user\ntext hi \\x1b]0;PWNED\\x07\\x1b[2J there \xc2\x9b31m red\nentry assistant\nmeta tokens \\x1b[31m\ntext ok \xc2\x9d0;T\\x07 done\nend\n' >"$conv/evil.nbj"
  on_pty $'/quit\n' "$bin" chat --plain --no-config --resume evil
  check "resumed journal: no raw ESC, BEL or C1 on the terminal" '! has_raw_controls "$work/pty.out"'
  check "resumed journal: shown as visible escapes" 'grep -qF "\\u009d0;T\\x07 done" "$work/pty.out"'
  printf '[chat]\ncolor = off\x1b]0;PWNED\x07\n' >"$work/esc.ini"
  on_pty $'/quit\n' "$bin" chat --plain --config "$work/esc.ini"
  check "config warning: no raw ESC on the terminal" '! has_raw_controls "$work/pty.out" && grep -qF "\\x1b]0;PWNED" "$work/pty.out"'
  on_pty "" "$bin" run -n 2 -f "$work/$(printf 'x\x1b[2Jy')"
  check "run: a file name's ESC shown as an escape" '! has_raw_controls "$work/pty.out" && grep -qF "x\\x1b[2Jy" "$work/pty.out"'
  # bidi controls and zero-width characters ("Trojan Source"): shown as escapes;
  # a joiner inside an emoji sequence stays
  printf 'nibble-journal 1\nentry user\ntext hi\nentry assistant\ntext if (user != "admin\xe2\x80\xae \xe2\x81\xa6// ok\xe2\x81\xa9 \xe2\x81\xa6") ad\xe2\x80\x8bmin, family \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\nend\n' >"$conv/bidi.nbj"
  cp "$conv/bidi.nbj" "$work/bidi.orig"
  on_pty $'/quit\n' "$bin" chat --plain --no-config --resume bidi
  check "bidi and zero-width: shown as escapes, none raw on the terminal" 'grep -qF "admin\\u202e \\u2066// ok\\u2069 \\u2066\") ad\\u200bmin" "$work/pty.out" && ! LC_ALL=C grep -q $'"'"'\xe2\x80\xae\|\xe2\x81[\xa6-\xa9]\|\xe2\x80\x8b'"'"' "$work/pty.out"'
  check "an emoji's joiner kept, the file as it was" 'LC_ALL=C grep -q $'"'"'\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9'"'"' "$work/pty.out" && cmp -s "$conv/bidi.nbj" "$work/bidi.orig"'
  # to a pipe the bytes stay as they are (the caller's choice)
  printf '/quit\n' | timeout -k 5 "$T" "$bin" chat --plain --no-config --resume evil >"$work/pipe.out" 2>&1
  check "to a pipe: the bytes as they are" 'LC_ALL=C grep -q $'"'"'\xc2\x9d0;T\x07'"'"' "$work/pipe.out"'
}

item_hang() {
  echo "2. line mode after an ERROR"
  printf 'Once \xff upon\n/quit\n' | timeout -k 5 "$T" "$bin" chat --plain --no-config >"$work/o" 2>&1
  local rc=$?
  check "invalid UTF-8 message: error shown, then /quit ends it (status $rc)" '[ $rc = 0 ] && grep -q "not valid UTF-8" "$work/o"'
}

item_unbounded() {
  echo "3. unbounded and blocking reads"
  ln -sf /dev/zero "$conv/zero.nbj"
  # the memory bound: ASan's own RSS limit in sanitizer builds (their
  # shadow memory takes more address space than any ulimit -v would allow)
  if [ "${NIBBLE_SANITIZED:-0}" = 1 ]; then
    (export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}hard_rss_limit_mb=2000"
     printf '/load zero\n/quit\n' | timeout -k 5 "$T" "$bin" chat --plain --no-config >"$work/o" 2>&1)
  else
    (ulimit -v 2000000 2>/dev/null; printf '/load zero\n/quit\n' | timeout -k 5 "$T" "$bin" chat --plain --no-config >"$work/o" 2>&1)
  fi
  local rc=$?
  check "/load of a link to /dev/zero: refused at once (status $rc)" '[ $rc = 0 ] && grep -q "a device, not a regular file" "$work/o"'
  printf '/quit\n' | timeout -k 5 "$T" "$bin" chat --plain --no-config --resume zero >"$work/o" 2>&1
  rc=$?
  check "--resume of it: refused (status $rc)" '[ $rc = 0 ] && grep -q "a device" "$work/o"'
  rm -f "$conv/zero.nbj"
  mkfifo "$conv/fifo.nbj"
  printf '/load fifo\n/quit\n' | timeout -k 5 20 "$bin" chat --plain --no-config >"$work/o" 2>&1
  rc=$?
  check "/load of a FIFO: refused, no wait (status $rc)" '[ $rc = 0 ] && grep -q "FIFO" "$work/o"'
  rm -f "$conv/fifo.nbj"
  timeout -k 5 "$T" "$bin" run -f /dev/zero >"$work/o" 2>&1
  rc=$?
  check "run -f /dev/zero: refused (status $rc)" '[ $rc = 1 ] && grep -q "a device" "$work/o"'
}

item_load_time() {
  echo "4. load time and SIGTERM during /load"
  { printf 'nibble-journal 1\nentry assistant\n'; seq 1 100000 | sed 's/.*/meta k& v/'; printf 'text x\nend\n'; } >"$conv/meta.nbj"
  local t0=$(date +%s%N)
  printf '/load meta\n/quit\n' | timeout -k 5 "$T" "$bin" chat --plain --no-config >"$work/o" 2>&1
  local rc=$? ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  check "100,000 meta lines load (status $rc, $ms ms, was 13 s)" '[ $rc = 0 ] && grep -q "resumed .meta." "$work/o" && [ $ms -lt 8000 ]'
  local w=$(printf 'word %.0s' $(seq 1 60))
  { printf 'nibble-journal 1\n'; for i in $(seq 1 15000); do printf 'entry user\ntext question %d %s\nentry assistant\ntext answer %d %s\n' $i "$w" $i "$w"; done; printf 'end\n'; } >"$conv/long.nbj"
  mkfifo "$work/in"
  "$bin" chat --plain --no-config <"$work/in" >"$work/o" 2>&1 &
  local pid=$!
  exec 3>"$work/in"
  printf '/load long\n' >&3
  sleep 1.5
  t0=$(date +%s%N)
  kill -TERM $pid
  wait $pid
  rc=$?
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  exec 3>&-
  rm -f "$work/in"
  check "SIGTERM during /load of 30,000 turns ends it within 5 s ($ms ms, status $rc)" '[ $ms -lt 5000 ] && [ $rc = 143 ]'
  # The same signal once the chat is idle: the load is over (its line is
  # printed) and the loop waits in poll() with stdin open and silent. The
  # build before the self-pipe passes this too (poll returns EINTR); what
  # it missed was a signal landing just before poll(), a window no script
  # can aim at. This holds the idle path itself: a chat that ignores
  # SIGTERM while it waits for input fails here, not by timing out CI.
  mkfifo "$work/in"
  "$bin" chat --plain --no-config <"$work/in" >"$work/o" 2>&1 &
  pid=$!
  exec 3>"$work/in"
  printf '/load meta\n' >&3
  local i=0
  while [ $i -lt $((T * 10)) ] && ! grep -q "resumed .meta." "$work/o"; do sleep 0.1; i=$((i + 1)); done
  sleep 0.3
  t0=$(date +%s%N)
  kill -TERM $pid
  { sleep 10; kill -KILL $pid 2>/dev/null; } &
  local guard=$!
  wait $pid
  rc=$?
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  kill $guard 2>/dev/null; wait $guard 2>/dev/null
  exec 3>&-
  rm -f "$work/in"
  check "SIGTERM to an idle chat (stdin open, nothing typed) ends it within 5 s ($ms ms, status $rc)" '[ $ms -lt 5000 ] && [ $rc = 143 ]'
}

item_forward() {
  echo "5. forward compatibility"
  printf 'nibble-journal 1\ncreated 2031-01-01\nentry user\ntext hi\nrating 5\nentry tool_call\nmeta id 7\ntext {}\nentry assistant\nmeta future_key v\ntext hello\nend\n' >"$conv/newer.nbj"
  cp "$conv/newer.nbj" "$work/newer.orig"
  printf '/regen\n/quit\n' | timeout -k 5 "$T" "$bin" chat --plain --no-config -n 3 --resume newer >"$work/o" 2>&1
  local missing
  missing=$(grep -Fxv -f "$conv/newer.nbj" "$work/newer.orig")
  check "--resume, a new reply, /quit: every line of the newer build kept${missing:+ (lost: $missing)}" '[ -z "$missing" ] && grep -q "^entry assistant" "$conv/newer.nbj"'
}

item_names() {
  echo "6. names on every path"
  printf 'nibble-journal 1\nentry user\ntext outside\nend\n' >"$XDG_DATA_HOME/nibble/outside.nbj"
  printf '/quit\n' | timeout -k 5 "$T" "$bin" chat --plain --no-config --resume ../outside >"$work/o" 2>&1
  check "--resume ../outside: refused, not loaded" 'grep -q "not a conversation name" "$work/o" && ! grep -q "resumed" "$work/o"'
}

item_store() {
  echo "7. temporaries, overwrite, signals"
  (exit 0) & local dead=$!; wait $dead
  echo junk >"$conv/old.nbj.tmp.$dead"
  printf '/quit\n' | timeout -k 5 "$T" "$bin" chat --plain --no-config >"$work/o" 2>&1
  check "a killed save's temporary is removed at start" '[ ! -e "$conv/old.nbj.tmp.$dead" ]'
  printf 'nibble-journal 1\nentry user\ntext keep me\nend\n' >"$conv/keep.nbj"
  cp "$conv/keep.nbj" "$work/keep.orig"
  # /save NAME over another conversation asks; n, EOF or anything but y keep the other
  printf 'hello\n/save keep\nn\n/quit\n' | timeout -k 5 "$T" "$bin" chat --plain --no-config -n 2 >"$work/o" 2>&1
  check "/save NAME over another, answered n: asked, the other left as it was" 'cmp -s "$conv/keep.nbj" "$work/keep.orig" && grep -q "overwrite .keep.* \[y/N\]" "$work/o" && grep -q "kept as it was" "$work/o"'
  printf 'hello\n/save keep\n' | timeout -k 5 "$T" "$bin" chat --plain --no-config -n 2 >"$work/o" 2>&1
  check "/save NAME over another, no answer (EOF): the other left as it was" 'cmp -s "$conv/keep.nbj" "$work/keep.orig" && grep -q "kept as it was" "$work/o"'
  on_pty $'hello\n/save keep\ny\n/quit\n' "$bin" chat --plain --no-config -n 2
  check "/save NAME over another on a terminal, answered y: overwritten" 'grep -q "overwrite .keep.* \[y/N\]" "$work/pty.out" && grep -q "^text hello" "$conv/keep.nbj" && ! grep -q "keep me" "$conv/keep.nbj"'
  rm -f "$conv"/*.nbj
  set -o pipefail
  { printf 'Once upon a time\n'; sleep 8; } | timeout -k 5 "$T" "$bin" chat --plain --no-config --debug-token-delay 40 -n 400 --temp 0 2>/dev/null | head -c 20 >/dev/null
  local rc=$?
  set +o pipefail
  local f=$(ls -t "$conv"/*.nbj 2>/dev/null | head -1)
  check "SIGPIPE (| head): status 141 ($rc), the reply so far saved" '[ $rc = 141 ] && [ -n "$f" ] && grep -q "^entry assistant" "$f" && reply_saved "$f"'
  for sig in TERM HUP; do
    rm -f "$conv"/*.nbj
    mkfifo "$work/in"
    "$bin" chat --plain --no-config --debug-token-delay 40 -n 400 --temp 0 <"$work/in" >/dev/null 2>&1 &
    local pid=$!
    exec 3>"$work/in"
    printf 'Once upon a time\n' >&3
    sleep 2.5
    kill -$sig $pid
    wait $pid
    rc=$?
    exec 3>&-
    rm -f "$work/in"
    f=$(ls -t "$conv"/*.nbj 2>/dev/null | head -1)
    local want=$((128 + $(kill -l $sig)))
    check "SIG$sig: status $want ($rc), the reply so far saved, marked cut short" '[ $rc = $want ] && [ -n "$f" ] && grep -q "^entry assistant" "$f" && reply_saved "$f" && grep -q "^partial 1" "$f"'
  done
}

item_config() {
  echo "8. config and paths"
  printf '[sampler]\ntemp = 0.5\x00junk\ntop_k = 3\nbogus_key = 1\n' >"$work/nul.ini"
  printf '/quit\n' | timeout -k 5 "$T" "$bin" chat --plain --config "$work/nul.ini" >"$work/o" 2>&1
  check "a NUL byte: named, and the lines after it still read" 'grep -q "nul.ini:2: a NUL byte" "$work/o" && grep -q "nul.ini:4: unknown key .bogus_key." "$work/o"'
  mkdir -p "$XDG_CONFIG_HOME/nibble/nibble.ini"
  printf '/quit\n' | timeout -k 5 "$T" "$bin" chat --plain >"$work/o" 2>&1
  check "nibble.ini a directory: said" 'grep -q "nibble.ini: a directory" "$work/o"'
  rmdir "$XDG_CONFIG_HOME/nibble/nibble.ini"
  mkdir -p "$work/cwd/rel/nibble" && printf 'bogus_rel = 1\n' >"$work/cwd/rel/nibble/nibble.ini"
  (cd "$work/cwd" && printf '/quit\n' | XDG_CONFIG_HOME=rel timeout -k 5 "$T" "$bin" chat --plain >"$work/o" 2>&1)
  check "relative XDG_CONFIG_HOME: ignored" '! grep -q "bogus_rel" "$work/o"'
  printf '/quit\n' | HOME= XDG_DATA_HOME= timeout -k 5 "$T" "$bin" chat --plain --no-config >"$work/o" 2>&1
  check "no HOME: says nothing will be saved" 'grep -q "will not be saved" "$work/o"'
  timeout -k 5 "$T" "$bin" run -f "$work" >"$work/o" 2>&1
  local rc=$?
  check "run -f DIR: refused (status $rc)" '[ $rc = 1 ] && grep -q "a directory" "$work/o"'
  timeout -k 5 "$T" "$bin" run --temp inf -p x >"$work/o" 2>&1
  check "--temp inf: names the flag" 'grep -q -- "--temp inf" "$work/o"'
  timeout -k 5 "$T" "$bin" synth --shape smol135 "$work/missing/x.gguf" >"$work/o" 2>&1
  rc=$?
  check "synth to a missing folder: refused before the work (status $rc)" '[ $rc = 1 ] && ! grep -q "layer" "$work/o"'
  printf '\xef\xbb\xbfnibble-journal 1\r\nentry user\r\ntext hi from windows\r\nend\r\n' >"$conv/crlf.nbj"
  printf '/quit\n' | timeout -k 5 "$T" "$bin" chat --plain --no-config --resume crlf >"$work/o" 2>&1
  check "a journal with a BOM and CRLF: read" 'grep -q "resumed .crlf. (1 turns)" "$work/o"'
}

item_disk() {
  echo "9. a file size limit (ulimit -f), as a full disk meets a save"
  rm -f "$conv"/*
  (ulimit -f 1; printf 'hello\n/quit\n' | timeout -k 5 "$T" "$bin" chat --plain --no-config -n 300 --temp 0 >"$work/o" 2>&1)
  local rc=$? f=$(ls "$conv"/*.nbj 2>/dev/null | head -1)
  check "saves past the limit fail with a message, nibble goes on and ends by /quit (status $rc, was killed by SIGXFSZ)" '[ $rc = 0 ] && grep -q "cannot save the conversation: .*File too large" "$work/o"'
  check "no temporary left, the last save that fitted intact" '! ls "$conv" | grep -q "\.tmp\." && [ -n "$f" ] && grep -q "^text hello" "$f" && grep -q "^end" "$f"'
}

items=${*:-inject hang unbounded load_time forward names store config disk}
for i in $items; do "item_$i"; done
echo "items: $pass passed, $fail failed"
[ $fail = 0 ]
