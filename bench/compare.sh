#!/usr/bin/env bash
# compare.sh - nibble against llama.cpp (node-llama-cpp, ../shared/peer/bench.mjs) on the same
# synth GGUF files: prefill (pp) and decode (tg) tok/s, interleaved, with ratios.
#
# usage: NIBBLE=path/to/nibble bench/compare.sh
#
# Builds nothing. Environment (all optional but NIBBLE):
#   NIBBLE     the nibble binary (required)
#   NLC_DIR    where node-llama-cpp is installed (passed to bench.mjs; its default is
#              ~/.cache/nibble-peer, which ../shared/peer/setup.sh fills)
#   PEER       bench.mjs (default: ../shared/peer/bench.mjs beside the source tree)
#   MODEL_DIR  where the synth models are, or are written when missing (default: a new
#              temporary directory, removed at the end)
#   SHAPES     default "smol135 qwen05"      TYPES    default "q8_0 q4_0"
#   THREADS    default "1 2"                 ROUNDS   default 2 (peer, nibble, peer, nibble)
#   PP, TG     prompt and generated tokens, default 128 and 64
#   REPS       repetitions inside each run (each tool reports its median), default 3
#
# Each cell is the mean over ROUNDS runs; the runs of the two programs alternate so that
# both see the same background load. Prints a markdown table; ratio = nibble / llama.cpp.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
nib=${NIBBLE:?set NIBBLE to the nibble binary}
peer=${PEER:-$root/../shared/peer/bench.mjs}
shapes=${SHAPES:-smol135 qwen05}
types=${TYPES:-q8_0 q4_0}
threads=${THREADS:-1 2}
rounds=${ROUNDS:-2}
pp=${PP:-128}
tg=${TG:-64}
reps=${REPS:-3}

[ -x "$nib" ] || { echo "compare.sh: $nib is not an executable" >&2; exit 2; }
[ -f "$peer" ] || { echo "compare.sh: no $peer (the peer benchmark)" >&2; exit 2; }
command -v node >/dev/null || { echo "compare.sh: node is not installed" >&2; exit 2; }

tmp=""
dir=${MODEL_DIR:-}
if [ -z "$dir" ]; then
  tmp=$(mktemp -d)
  dir=$tmp
fi
trap '[ -n "$tmp" ] && rm -rf "$tmp"' EXIT
mkdir -p "$dir"

log=$(mktemp)
trap '[ -n "$tmp" ] && rm -rf "$tmp"; rm -f "$log"' EXIT

for s in $shapes; do
  for ty in $types; do
    f="$dir/$s-$ty.gguf"
    [ -f "$f" ] || "$nib" synth --shape "$s" --type "$ty" "$f" >/dev/null 2>&1 ||
      { echo "compare.sh: nibble synth --shape $s --type $ty failed" >&2; exit 1; }
  done
done

# one run of each program: appends "prog shape type t test tps" lines to $log
run_peer() {
  local f=$1 s=$2 ty=$3 t=$4 line
  line=$(node "$peer" "$f" -t "$t" -n "$pp" -m "$tg" -r "$reps" 2>/dev/null | grep '^RESULT' || true)
  [ -n "$line" ] || { echo "compare.sh: llama.cpp run failed on $f t=$t" >&2; return; }
  echo "$line" | sed -E "s/.* pp$pp=([0-9.]+) tok\/s tg$tg=([0-9.]+) tok\/s.*/peer $s $ty $t pp$pp \1\npeer $s $ty $t tg$tg \2/" >>"$log"
}
run_nibble() {
  local f=$1 s=$2 ty=$3 t=$4
  "$nib" bench -m "$f" -t "$t" -p "$pp" -n "$tg" -r "$reps" --json 2>/dev/null |
    sed -nE "s/.*\"test\": \"([a-z]+[0-9]+)\", \"tps\": ([0-9.]+).*/nibble $s $ty $t \1 \2/p" >>"$log"
}

for s in $shapes; do
  for ty in $types; do
    for t in $threads; do
      f="$dir/$s-$ty.gguf"
      for r in $(seq "$rounds"); do
        echo "compare.sh: $s $ty t=$t round $r" >&2
        run_peer "$f" "$s" "$ty" "$t"
        run_nibble "$f" "$s" "$ty" "$t"
      done
    done
  done
done

echo "| model | type | threads | test | llama.cpp t/s | nibble t/s | nibble / llama.cpp |"
echo "|---|---|---:|---|---:|---:|---:|"
awk -v shapes="$shapes" -v types="$types" -v threads="$threads" -v pp="pp$pp" -v tg="tg$tg" '
  { k = $2 SUBSEP $3 SUBSEP $4 SUBSEP $5; sum[$1, k] += $6; cnt[$1, k]++ }
  END {
    ns = split(shapes, S, " "); nt = split(types, T, " "); nh = split(threads, H, " ")
    split(pp " " tg, X, " ")
    for (i = 1; i <= ns; i++) for (j = 1; j <= nt; j++) for (h = 1; h <= nh; h++) for (x = 1; x <= 2; x++) {
      k = S[i] SUBSEP T[j] SUBSEP H[h] SUBSEP X[x]
      p = cnt["peer", k] ? sum["peer", k] / cnt["peer", k] : -1
      n = cnt["nibble", k] ? sum["nibble", k] / cnt["nibble", k] : -1
      ps = p < 0 ? "-" : sprintf("%.1f", p); nstr = n < 0 ? "-" : sprintf("%.1f", n)
      rs = (p > 0 && n >= 0) ? sprintf("%.2fx", n / p) : "-"
      printf "| %s | %s | %s | %s | %s | %s | %s |\n", S[i], T[j], H[h], X[x], ps, nstr, rs
    }
  }' "$log"
