#!/usr/bin/env bash
# Crash safety: kill -9 the line-mode chat at random moments, during
# replies and during saves, many times over one conversation that each
# run resumes. After every kill:
#   - every journal in the conversations folder loads (with the engine's
#     reader, through tests/ui/journal_dump);
#   - nothing saved before is lost: the entries a journal held after the
#     previous kill are still there, in order, word for word (a reply that
#     was cut short may only have grown), and named saves taken in earlier
#     rounds load with all the entries they had.
#   e2e_crash.sh [ITERATIONS]     (NIBBLE_BIN: the binary, JOURNAL_DUMP: the
#   dump tool, default next to it in the build tree; 30 rounds by default)
set -uo pipefail
bin=${NIBBLE_BIN:-build/bin/nibble}
iters=${1:-${NIBBLE_CRASH_ITER:-30}}
[ -x "$bin" ] || { echo "SKIP: no binary at $bin"; exit 77; }
T=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] && echo "files in $T" || rm -rf "$T"' EXIT
export HOME=$T XDG_CONFIG_HOME=$T/cfg XDG_DATA_HOME=$T/data
conv=$T/data/nibble/conversations
fail() { echo "FAIL (round $round): $*" >&2; exit 1; }

dump=${JOURNAL_DUMP:-$(dirname "$bin")/../tests/ui/journal_dump}
[ -x "$dump" ] || { echo "SKIP: no journal_dump at $dump"; exit 77; }
# old entries must be a prefix of new ones; a partial reply may have grown
is_kept() {
  local old=$1 new=$2 n i
  n=$(wc -l <"$old")
  [ "$(wc -l <"$new")" -ge "$n" ] || return 1
  paste "$old" <(head -n "$n" "$new") | awk -F'\t' '
    { if ($1 != $4) exit 1
      if ($2 == "1") { if (index($6, $3) != 1) exit 1 }   # cut short: the new text starts with it
      else if ($3 != $6 || $5 != "0") exit 1 }'
}

round=0
mkdir -p "$T/prev"
for round in $(seq 1 "$iters"); do
  # a script: two messages, a named save, another message, a save again
  {
    echo "Once upon a time $round"
    echo "The little dog $round"
    echo "/save keep$round"
    echo "Lily wanted to $round"
    echo "/save"
  } >"$T/script"
  # resume the newest conversation (the one the last round wrote)
  "$bin" chat --plain --no-config --resume -n 40 -t 1 --debug-token-delay 3 \
    <"$T/script" >"$T/out" 2>"$T/err" &
  pid=$!
  # kill somewhere between 0.05 s and ~1.5 s: loading, mid-reply or mid-save
  sleep "0.$(( RANDOM % 9 + 1 ))$(( RANDOM % 10 ))"
  (( RANDOM % 3 == 0 )) && sleep 0.6
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  ls "$conv"/*.nbj >/dev/null 2>&1 || continue # killed before the first save
  for f in "$conv"/*.nbj; do
    name=$(basename "$f" .nbj)
    # the engine's reader loads it, and lists its entries (kind, partial, text)
    "$dump" "$f" >"$T/now.$name" || fail "journal $name does not load after kill -9: $(head -c 300 "$f")"
    if [ -f "$T/prev/$name" ]; then
      is_kept "$T/prev/$name" "$T/now.$name" || {
        diff "$T/prev/$name" "$T/now.$name" | head -n 10 >&2
        fail "journal $name lost entries it had before"
      }
    fi
    mv "$T/now.$name" "$T/prev/$name"
  done
done
n=$(ls "$conv"/*.nbj 2>/dev/null | wc -l)
turns=$(cat "$T"/prev/* 2>/dev/null | wc -l)
leftovers=$(ls "$conv" | grep -c '\.tmp\.' || true)
echo "crash: $iters kill -9 rounds, $n journals, $turns entries, all load, none lost ($leftovers stale temp files)"
