#!/usr/bin/env bash
# compare.sh - nibble against llama.cpp (node-llama-cpp, ../shared/peer/bench.mjs, or a
# llama-bench built from source) on the same synth GGUF files: prefill (pp) and decode (tg)
# tok/s, interleaved, with ratios.
#
# usage: NIBBLE=path/to/nibble bench/compare.sh
#
# Builds nothing. Environment (all optional but NIBBLE):
#   NIBBLE     the nibble binary (required)
#   NLC_DIR    where node-llama-cpp is installed (passed to bench.mjs; its default is
#              ~/.cache/nibble-peer, which ../shared/peer/setup.sh fills)
#   PEER       bench.mjs (default: ../shared/peer/bench.mjs beside the source tree)
#   LLAMA_BENCH  a llama-bench binary: used instead of node and bench.mjs
#   LLAMA_QUANTIZE  a llama-quantize binary: each file is then `nibble synth --type f16`
#              quantized by llama.cpp (TYPES in its names, e.g. "Q2_K Q3_K_M IQ4_XS IQ3_S"),
#              so both programs run llama.cpp's own quantization
#   IMATRIX    an importance matrix (GGUF, e.g. from `nibble imatrix`) handed to llama-quantize
#              with --imatrix; llama-quantize refuses IQ2_XXS, IQ2_XS, IQ1_S and IQ1_M without
#              one. A copy under a 32-character-longer name is tried when the first file does
#              not load (llama-quantize's header padding; see bench/ppl_check.sh)
#   MODEL_DIR  where the synth models are, or are written when missing (default: a new
#              temporary directory, removed at the end)
#   SHAPES     default "smol135 qwen05 llama1b"; SHAPE:N makes a model of that shape cut to
#              N layers (`nibble synth --layers N`), e.g. "gpt-oss-20b:4 qwen3-30b-a3b:4"
#   TYPES      default "q8_0 q4_0 q4_k_m" (a type `nibble synth` refuses is skipped, with a message)
#   THREADS    default "1 2"                 ROUNDS   default 2 (peer, nibble, peer, nibble)
#   PP, TG     prompt and generated tokens, default 128 and 64
#   REPS       repetitions inside each run (each tool reports its median), default 3
#   DEPTHS     context depths, default "0": every test runs after that many tokens
#              already in the context (llama-bench -d, nibble bench -d); a peer without
#              -d (ik_llama.cpp's llama-bench) can only run depth 0. PP=0 or TG=0 skips
#              that test, e.g. PP=512 TG=0 DEPTHS="0 2048 8192", then PP=0 TG=64 DEPTHS=4096
#   PEER_ARGS  more arguments for llama-bench (e.g. "-fa 1", ik_llama.cpp's "-rtr 1")
#   NIBBLE_ARGS  more arguments for nibble bench (e.g. "-ctk q8_0 -ctv q8_0", "--peak")
#   PEER_NAME  the peer's name in the table header (default llama.cpp)
#
# Each cell is the mean over ROUNDS runs; the runs of the two programs alternate so that
# both see the same background load. Prints a markdown table; ratio = nibble / llama.cpp.
# "of roof" is nibble's decode rate over the bandwidth roofline `nibble bench` gives (the
# bytes one token reads, active experts only, at the bandwidth it measures at start).
# Memory columns (MB): nibble's resident set while it runs (from `nibble bench --json`,
# checked against file + KV cache + 64 MB + a decoded layout's extra) and llama.cpp's peak RSS from /usr/bin/time
# (the whole node process, runtime included), when /usr/bin/time exists.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
nib=${NIBBLE:?set NIBBLE to the nibble binary}
peer=${PEER:-$root/../shared/peer/bench.mjs}
shapes=${SHAPES:-smol135 qwen05 llama1b}
types=${TYPES:-q8_0 q4_0 q4_k_m}
threads=${THREADS:-1 2}
rounds=${ROUNDS:-2}
pp=${PP:-128}
tg=${TG:-64}
reps=${REPS:-3}
depths=${DEPTHS:-0}
peer_args=${PEER_ARGS:-}
nib_args=${NIBBLE_ARGS:-}
peer_name=${PEER_NAME:-llama.cpp}
for d in $depths; do
  case $d in ''|*[!0-9]*) echo "compare.sh: DEPTHS must be numbers, not '$d'" >&2; exit 2 ;; esac
done
case $pp$tg in *[!0-9]*) echo "compare.sh: PP and TG must be numbers" >&2; exit 2 ;; esac
[ "$pp" -gt 0 ] || [ "$tg" -gt 0 ] || { echo "compare.sh: PP and TG are both 0: nothing to run" >&2; exit 2; }

[ -x "$nib" ] || { echo "compare.sh: $nib is not an executable" >&2; exit 2; }
lbench=${LLAMA_BENCH:-}
lquant=${LLAMA_QUANTIZE:-}
if [ -n "$lbench" ]; then
  [ -x "$lbench" ] || { echo "compare.sh: LLAMA_BENCH=$lbench is not an executable" >&2; exit 2; }
else
  [ -f "$peer" ] || { echo "compare.sh: no $peer (the peer benchmark)" >&2; exit 2; }
  command -v node >/dev/null || { echo "compare.sh: node is not installed" >&2; exit 2; }
fi
if [ -z "$lbench" ] && [ "$depths" != 0 ]; then
  echo "compare.sh: DEPTHS needs LLAMA_BENCH (the node peer has no depth)" >&2; exit 2
fi
[ -z "$lquant" ] || [ -x "$lquant" ] || { echo "compare.sh: LLAMA_QUANTIZE=$lquant is not an executable" >&2; exit 2; }
imat=${IMATRIX:-}
[ -z "$imat" ] || [ -f "$imat" ] || { echo "compare.sh: IMATRIX=$imat is not a file" >&2; exit 2; }

tmp=""
dir=${MODEL_DIR:-}
if [ -z "$dir" ]; then
  tmp=$(mktemp -d)
  dir=$tmp
fi
trap '[ -n "$tmp" ] && rm -rf "$tmp"' EXIT
mkdir -p "$dir"

log=$(mktemp)
trap '[ -n "$tmp" ] && rm -rf "$tmp"; rm -f "$log" "$log.err"' EXIT

# the (shape, type) pairs that have a model file; synth may not know every type yet
pairs=""
for sl in $shapes; do
  s=${sl%%:*} lay=""
  [ "$sl" = "$s" ] || lay=${sl#*:}
  for ty in $types; do
    f="$dir/$s${lay:+-L$lay}-$ty.gguf"
    if [ ! -f "$f" ] && [ -n "$lquant" ]; then
      f16="$dir/$s${lay:+-L$lay}-f16.gguf"
      [ -f "$f16" ] || "$nib" synth --shape "$s" ${lay:+--layers "$lay"} --type f16 "$f16" >/dev/null 2>&1 ||
        { echo "compare.sh: nibble synth --shape $s --type f16 failed" >&2; continue; }
      if [ -n "$imat" ]; then
        # two names for the matrix: the header holds its path, and one of the two lengths
        # puts the tensor data where the file's alignment says
        ok=0
        for im in compare-imatrix.gguf "compare-imatrix$(printf %032d 0).gguf"; do
          cp "$imat" "$dir/$im"
          msg=$("$lquant" --imatrix "$dir/$im" "$f16" "$f.part" "$ty" 2>&1) || break
          "$nib" info "$f.part" >/dev/null 2>&1 && { ok=1; break; }
          msg="the file it wrote does not load"
        done
        rm -f "$dir/compare-imatrix.gguf" "$dir/compare-imatrix$(printf %032d 0).gguf"
      else
        ok=0
        msg=$("$lquant" "$f16" "$f.part" "$ty" 2>&1) && ok=1
      fi
      if [ $ok = 0 ]; then
        rm -f "$f.part"
        echo "compare.sh: skipping $s $ty: llama-quantize refused it: $(echo "$msg" | tail -1)" >&2
        continue
      fi
      mv "$f.part" "$f"
    fi
    if [ ! -f "$f" ]; then
      if ! msg=$("$nib" synth --shape "$s" ${lay:+--layers "$lay"} --type "$ty" "$f.part" 2>&1 >/dev/null); then
        rm -f "$f.part"
        echo "compare.sh: skipping $s $ty: nibble synth refused it: $(echo "$msg" | tail -1)" >&2
        continue
      fi
      mv "$f.part" "$f"
    fi
    pairs="$pairs $s${lay:+-L$lay}:$ty"
  done
done
[ -n "$pairs" ] || { echo "compare.sh: no model to run" >&2; exit 1; }

timer=""
[ -x /usr/bin/time ] && timer=/usr/bin/time

# one run of each program: appends "prog shape type t test tps" lines to $log
run_peer() {
  local f=$1 s=$2 ty=$3 t=$4 d=$5 line out kb dl=""
  [ "$d" = 0 ] || dl="@d$d"
  if [ -n "$lbench" ]; then
    # JSON (both llama.cpp's and ik_llama.cpp's llama-bench write it; only the first has
    # jsonl), one object per line once the newlines are gone; stderr apart, for the RSS
    # shellcheck disable=SC2086 # PEER_ARGS are words
    out=$(${timer:+$timer -f "MAXRSS_KB %M"} "$lbench" -m "$f" -t "$t" -p "$pp" -n "$tg" ${dl:+-d "$d"} -r "$reps" \
      $peer_args -o json 2>"$log.err" || true)
    echo "$out" | tr -d '\n' | sed 's/}/}\n/g' |
      sed -nE "s/.*\"n_prompt\": *([0-9]+), *\"n_gen\": *([0-9]+),.*\"avg_ts\": *([0-9.]+),.*/\1 \2 \3/p" |
      awk -v k="peer $s $ty $t" -v pp="$pp" -v tg="$tg" -v dl="$dl" '
        pp > 0 && $1 == pp && $2 == 0 { printf "%s pp%d%s %s\n", k, pp, dl, $3 }
        tg > 0 && $1 == 0 && $2 == tg { printf "%s tg%d%s %s\n", k, tg, dl, $3 }' >>"$log" || true
    echo "$out" | grep -q '"avg_ts"' ||
      echo "compare.sh: llama-bench failed on $f t=$t${dl:+ depth $d}: $(grep -v '^MAXRSS_KB' "$log.err" | tail -1)" >&2
    kb=$(sed -n 's/^MAXRSS_KB \([0-9]*\)$/\1/p' "$log.err" | tail -1)
    [ -z "$kb" ] || echo "peer $s $ty $t rss$dl $((kb / 1024))" >>"$log"
    return
  fi
  if [ -n "$timer" ]; then
    out=$("$timer" -f "MAXRSS_KB %M" node "$peer" "$f" -t "$t" -n "$pp" -m "$tg" -r "$reps" 2>&1 || true)
  else
    out=$(node "$peer" "$f" -t "$t" -n "$pp" -m "$tg" -r "$reps" 2>/dev/null || true)
  fi
  line=$(echo "$out" | grep '^RESULT' || true)
  [ -n "$line" ] || { echo "compare.sh: llama.cpp run failed on $f t=$t" >&2; return; }
  echo "$line" | sed -E "s/.* pp$pp=([0-9.]+) tok\/s tg$tg=([0-9.]+) tok\/s.*/peer $s $ty $t pp$pp \1\npeer $s $ty $t tg$tg \2/" >>"$log"
  kb=$(echo "$out" | sed -n 's/^MAXRSS_KB \([0-9]*\)$/\1/p' | tail -1)
  [ -z "$kb" ] || echo "peer $s $ty $t rss $((kb / 1024))" >>"$log"
}
run_nibble() {
  local f=$1 s=$2 ty=$3 t=$4 d=$5 out dl=""
  [ "$d" = 0 ] || dl="@d$d"
  # shellcheck disable=SC2086 # NIBBLE_ARGS are words
  out=$("$nib" bench -m "$f" -t "$t" -p "$pp" -n "$tg" -d "$d" -r "$reps" $nib_args --json --no-load 2>/dev/null || true)
  echo "$out" | grep -q '"tps"' || echo "compare.sh: nibble bench failed on $f t=$t${dl:+ depth $d}" >&2
  echo "$out" | sed -nE "s/.*\"test\": \"([a-z]+[0-9]+)\", (\"depth\": [0-9]+, )?\"tps\": ([0-9.]+).*/nibble $s $ty $t \1$dl \3/p" >>"$log"
  echo "$out" | tail -1 |
    sed -nE "s/.*\"rss_bytes\": ([0-9]+), \"kv_bytes\": [0-9]+, \"rss_budget_bytes\": ([0-9]+).*/\1 \2/p" |
    awk -v k="nibble $s $ty $t" -v dl="$dl" '{ printf "%s rss%s %d\n%s budget%s %d\n", k, dl, $1 / 1048576, k, dl, $2 / 1048576 }' >>"$log"
  echo "$out" | sed -nE "s/.*\"test\": \"([a-z]+[0-9]+)\",.*\"tps\": ([0-9.]+),.*\"roofline_tps\": ([0-9.]+),.*/\1 \2 \3/p" |
    awk -v k="nibble $s $ty $t" -v dl="$dl" '$3 > 0 { printf "%s roof:%s%s %.1f\n", k, $1, dl, 100 * $2 / $3 }' >>"$log"
}

for st in $pairs; do
  s=${st%%:*} ty=${st#*:}
  for t in $threads; do
    f="$dir/$s-$ty.gguf"
    for d in $depths; do
      for r in $(seq "$rounds"); do
        echo "compare.sh: $s $ty t=$t depth $d round $r" >&2
        run_peer "$f" "$s" "$ty" "$t" "$d"
        run_nibble "$f" "$s" "$ty" "$t" "$d"
      done
    done
  done
done

echo "| model | type | threads | test | $peer_name t/s | nibble t/s | nibble / $peer_name | nibble of roof | $peer_name peak RSS MB | nibble RSS MB (budget) |"
echo "|---|---|---:|---|---:|---:|---:|---:|---:|---:|"
awk -v pairs="$pairs" -v threads="$threads" -v pp="$pp" -v tg="$tg" -v depths="$depths" '
  { k = $2 SUBSEP $3 SUBSEP $4 SUBSEP $5; sum[$1, k] += $6; cnt[$1, k]++
    if ($5 ~ /^(rss|budget)/) { if ($6 > mx[$1, k]) mx[$1, k] = $6 } }
  END {
    np = split(pairs, P, " "); nh = split(threads, H, " "); nd = split(depths, D, " ")
    nx = 0
    if (pp > 0) X[++nx] = "pp" pp
    if (tg > 0) X[++nx] = "tg" tg
    for (i = 1; i <= np; i++) for (h = 1; h <= nh; h++) for (e = 1; e <= nd; e++) for (x = 1; x <= nx; x++) {
      split(P[i], st, ":")
      dl = D[e] == 0 ? "" : "@d" D[e]
      base = st[1] SUBSEP st[2] SUBSEP H[h]
      k = base SUBSEP X[x] dl
      p = cnt["peer", k] ? sum["peer", k] / cnt["peer", k] : -1
      n = cnt["nibble", k] ? sum["nibble", k] / cnt["nibble", k] : -1
      ps = p < 0 ? "-" : sprintf("%.1f", p); nstr = n < 0 ? "-" : sprintf("%.1f", n)
      rs = (p > 0 && n >= 0) ? sprintf("%.2fx", n / p) : "-"
      last = x == nx   # the memory columns go on the last row of a depth
      pr = ((("peer", base SUBSEP "rss" dl) in mx) && last) ? mx["peer", base SUBSEP "rss" dl] : "-"
      nr = "-"
      if ((("nibble", base SUBSEP "rss" dl) in mx) && last) {
        nr = mx["nibble", base SUBSEP "rss" dl] " (" mx["nibble", base SUBSEP "budget" dl] ")"
        if (mx["nibble", base SUBSEP "rss" dl] > mx["nibble", base SUBSEP "budget" dl]) nr = nr " OVER"
      }
      rk = base SUBSEP "roof:" X[x] dl
      rf = cnt["nibble", rk] ? sprintf("%.0f%%", sum["nibble", rk] / cnt["nibble", rk]) : "-"
      printf "| %s | %s | %s | %s%s | %s | %s | %s | %s | %s | %s |\n", st[1], st[2], H[h], X[x], dl, ps, nstr, rs, rf, pr, nr
    }
  }' "$log"
