#!/usr/bin/env bash
# ppl_check.sh - nibble's perplexity against llama-perplexity's on the low-bit types, both ways:
# files written by llama-quantize (Q2_K, Q3_K_M, IQ4_XS, IQ4_NL, and with an importance matrix
# from `nibble imatrix` the i-quants IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) and
# files written by `nibble quantize` (q2_k, q3_k_m, iq4_xs, and with the same importance matrix
# iq3_s, iq3_xxs, iq2_s, iq2_xs, iq2_xxs, iq1_m, iq1_s), which llama.cpp must load and decode.
#
# usage: bench/ppl_check.sh [--ctest] [NIBBLE_BINARY]
#   LLAMA_TYPES / NIBBLE_TYPES (environment): the llama-quantize / nibble types to run instead of
#   all of them (e.g. LLAMA_TYPES="IQ3_S IQ2_XS" NIBBLE_TYPES=" ").
#
# The model is `nibble synth --shape tiny256` (dims 256 and 512, so every row fits the 256-value
# blocks) in f16; the text is the first 20000 bytes of ../shared/text/wiki.test.raw, all of its
# 128-token windows (218). Each file's two perplexities must agree to 0.1%. (The two programs
# differ in rounding: llama.cpp rounds the query and the softmax weights to f16 for its f16 KV
# cache, nibble keeps them in f32; q8_0 activations carry an f16 scale there, an f32 one here.
# On these random models, whose perplexity is in the tens of thousands, that moves a 100-window
# figure by up to 0.12% (Q3_K_M, IQ4_NL) and the 218-window one by 0.001-0.05% (measured
# 2026-12-04); a wrong kernel or layout moves it by whole percents.)
# llama.cpp's binaries come from $LLAMA_BIN (the directory holding llama-quantize and
# llama-perplexity), else from PATH. Without them or the text it says so and exits 0, or 77
# with --ctest (ctest's "skipped").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
ctest=0
nib="${NIBBLE_BIN:-}"
for a in "$@"; do
  case "$a" in
    --ctest) ctest=1 ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "ppl_check: unknown option $a (see --help)" >&2; exit 2 ;;
    *) nib=$a ;;
  esac
done
[ -n "$nib" ] || nib=$root/build/bin/nibble
skip() {
  echo "ppl_check: skipped: $*"
  exit $([ $ctest = 1 ] && echo 77 || echo 0)
}
bin=${LLAMA_BIN:-}
if [ -n "$bin" ]; then
  quant=$bin/llama-quantize perp=$bin/llama-perplexity
else
  quant=$(command -v llama-quantize || true) perp=$(command -v llama-perplexity || true)
fi
[ -x "$quant" ] && [ -x "$perp" ] || skip "no llama-quantize / llama-perplexity (set LLAMA_BIN)"
shared=${NIBBLE_SHARED:-$root/../shared}
[ -f "$shared/text/wiki.test.raw" ] || skip "$shared/text/wiki.test.raw is absent"
[ -x "$nib" ] || { echo "ppl_check: no nibble binary at $nib" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -c 20000 "$shared/text/wiki.test.raw" >"$tmp/text.txt"
"$nib" synth --shape tiny256 --type f16 "$tmp/f16.gguf" >/dev/null 2>&1

fail=0
# compare FILE WHO: both perplexities of FILE, 0.1% apart at most
compare() {
  local f=$1 who=$2 a b
  for try in 1 2 3; do # (llama-perplexity now and then ends without its result on this shared machine)
    "$perp" -m "$f" -f "$tmp/text.txt" -c 128 -t 2 >"$tmp/p.log" 2>&1 || true
    a=$(sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p' "$tmp/p.log")
    [ -n "$a" ] && break
    tail -n 2 "$tmp/p.log"
  done
  b=$("$nib" ppl -m "$f" -f "$tmp/text.txt" -c 128 -t 2 2>/dev/null |
    sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p')
  if [ -z "$a" ] || [ -z "$b" ]; then
    echo "FAIL $who $(basename "$f"): no perplexity (llama.cpp '${a}', nibble '${b}')"
    fail=1
    return
  fi
  awk -v a="$a" -v b="$b" -v w="$who" -v f="$(basename "$f")" 'BEGIN {
    d = (b - a) / a; if (d < 0) d = -d
    printf "%-4s %-16s llama-perplexity %12.4f  nibble %12.4f  diff %.4f%%  %s\n", w, f, a, b, 100 * d,
      d <= 0.001 ? "ok" : "FAIL"
    exit d <= 0.001 ? 0 : 1 }' || fail=1
}
# llama-quantize wants an importance matrix for the i-quants below 4 bits (it refuses IQ2_XXS,
# IQ2_XS, IQ1_S and IQ1_M without one): nibble's, over the first 20 chunks of the same text
"$nib" imatrix -m "$tmp/f16.gguf" -f "$tmp/text.txt" -o "$tmp/imatrix.gguf" -c 128 --chunks 20 -q -t 2 \
  >/dev/null 2>"$tmp/q.log" || { cat "$tmp/q.log"; echo "FAIL nibble imatrix"; fail=1; }
for t in ${LLAMA_TYPES-Q2_K Q3_K_M IQ4_XS IQ4_NL IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S IQ1_S IQ1_M}; do
  case $t in
  IQ[123]_*)
    # llama-quantize pads its header to 32 bytes but keeps the input's general.alignment (64,
    # nibble's): when the header ends an odd multiple of 32 bytes in, the data lands 32 bytes
    # off and no program loads the file. The header holds the imatrix's path, so a second
    # path 32 characters longer moves it to the other case.
    ok=0
    for im in imatrix.gguf "imatrix$(printf %032d 0).gguf"; do
      cp "$tmp/imatrix.gguf" "$tmp/$im" 2>/dev/null || true
      "$quant" --imatrix "$tmp/$im" "$tmp/f16.gguf" "$tmp/llama.$t.gguf" $t >"$tmp/q.log" 2>&1 || break
      "$nib" info "$tmp/llama.$t.gguf" >/dev/null 2>&1 && { ok=1; break; }
    done
    [ $ok = 1 ] || { cat "$tmp/q.log"; echo "FAIL llama-quantize $t"; fail=1; continue; } ;;
  *)
    "$quant" "$tmp/f16.gguf" "$tmp/llama.$t.gguf" $t >"$tmp/q.log" 2>&1 ||
      { cat "$tmp/q.log"; echo "FAIL llama-quantize $t"; fail=1; continue; } ;;
  esac
  compare "$tmp/llama.$t.gguf" llama
done
for t in ${NIBBLE_TYPES-q2_k q3_k_m iq4_xs iq3_s iq3_xxs iq2_s iq2_xs iq2_xxs iq1_m iq1_s}; do
  im=() # nibble's i-quants below 4 bits are written with the same importance matrix
  case $t in iq[123]_*) im=(--imatrix "$tmp/imatrix.gguf") ;; esac
  "$nib" quantize -q ${im[@]+"${im[@]}"} "$tmp/f16.gguf" "$tmp/nibble.$t.gguf" $t >/dev/null 2>"$tmp/q.log" ||
    { cat "$tmp/q.log"; echo "FAIL nibble quantize $t"; fail=1; continue; }
  compare "$tmp/nibble.$t.gguf" nib
done
[ $fail = 0 ] && echo "ppl_check: every file within 0.1%" || echo "ppl_check: FAILED"
exit $fail
