#!/usr/bin/env bash
# Soak: a scripted 500-turn line-mode chat on the embedded model, with a
# small context so it fills and shifts many times, and /reset, /save and
# /load in between. Prints the resident memory near the start and at the
# end (and the largest seen) and fails on any error message.
#   bench/soak.sh [NIBBLE_BIN] [TURNS]     (default build/bin/nibble, 500)
# Not a timed unit test: it takes a few minutes.
set -euo pipefail
bin=${1:-build/bin/nibble}
turns=${2:-500}
[ -x "$bin" ] || { echo "soak: no binary at $bin (build first)" >&2; exit 1; }
T=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; [ -n "${SOAK_KEEP:-}" ] && echo "soak: files in $T" >&2 || rm -rf "$T"; }
trap cleanup EXIT
export HOME=$T XDG_CONFIG_HOME=$T/cfg XDG_DATA_HOME=$T/data

# the script: story openings, with a command every few turns
starts=("Once upon a time" "The little dog" "Lily wanted to" "One day, Tom" "The sun was"
        "A big red ball" "Mom said" "The bird flew" "They played in the park" "Ben had a toy")
{
  saves=0
  for ((i = 1; i <= turns; i++)); do
    if (( i % 97 == 0 )); then echo "/reset"
    elif (( i % 41 == 0 )); then saves=$((saves + 1)); echo "/save soak$saves"
    elif (( i % 43 == 0 && saves > 0 )); then echo "/load soak$saves"
    elif (( i % 59 == 0 )); then echo "/set temp 0.$((i % 9 + 1))"
    else echo "${starts[i % ${#starts[@]}]} $i"
    fi
  done
  echo "/list"
} > "$T/script.txt"

mkfifo "$T/in"
"$bin" chat --plain --no-config -c 256 -n 64 -t 1 --seed 1 <"$T/in" >"$T/out" 2>"$T/err" &
pid=$!
exec 3>"$T/in"
rss() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0; }
# warm up: the first 10 turns, then the first sample
head -n 10 "$T/script.txt" >&3
for _ in $(seq 1 600); do
  [ "$(grep -c '^> ' "$T/out" || true)" -ge 10 ] && break
  sleep 0.1
done
sleep 1
rss_start=$(rss)
rss_max=$rss_start
tail -n +11 "$T/script.txt" >&3
want=$(grep -vc '^/' "$T/script.txt")
t0=$(date +%s)
while kill -0 "$pid" 2>/dev/null; do
  r=$(rss)
  [ "${r:-0}" -gt "$rss_max" ] && rss_max=$r
  grep -q "saved conversations" "$T/err" && break # /list, the last line, has run
  [ $(( $(date +%s) - t0 )) -gt 1800 ] && { echo "soak: timed out" >&2; exit 1; }
  sleep 0.5
done
rss_end=$(rss)
echo "/quit" >&3
exec 3>&-
wait "$pid" || { echo "soak: nibble exited with $?" >&2; tail -n 20 "$T/err" >&2; exit 1; }
pid=

sent=$(grep -c '^> ' "$T/out" || true)
replies=$(grep -c '^\[.* tokens, ' "$T/err" || true)
shifts=$(grep -ci 'context' "$T/err" || true)
echo "soak: $turns turns ($sent messages sent, $replies replies), $shifts context notices, $(( $(date +%s) - t0 ))s"
echo "soak: RSS start ${rss_start} kB, end ${rss_end} kB, max ${rss_max} kB"
bad=$(grep -iE 'error|cannot|failed|out of memory|busy' "$T/err" || true)
if [ -n "$bad" ]; then
  echo "soak: errors:" >&2
  echo "$bad" | head -n 20 >&2
  exit 1
fi
[ "$sent" -ge "$((want * 9 / 10))" ] || { echo "soak: only $sent of $want messages went through" >&2; exit 1; }
# flat: the end within 10% (and 4 MB) of the start
[ "$rss_end" -le $(( rss_start + rss_start / 10 + 4096 )) ] || { echo "soak: memory grew" >&2; exit 1; }
echo "soak: ok"
