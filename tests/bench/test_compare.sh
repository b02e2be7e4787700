#!/usr/bin/env bash
# bench/compare.sh end to end on the tiny "stories" shape, with a stub in
# place of llama.cpp (peer_stub.mjs: 100 tok/s prefill, 50 decode): every
# cell of the table must be filled from nibble's JSON and the stub's
# RESULT line, the ratios must be nibble's figure over the stub's, and the
# RSS column must carry nibble's budget, the decode rows a roofline
# fraction. Guards the parsing of both programs' output (a new JSON field
# once left the table empty). A second shape cut to one layer
# (SHAPES="tiny:1") must name its rows after the cut. Then the llama-bench
# path (llama_bench_stub.sh) with DEPTHS, PEER_NAME and the argument lists,
# and LLAMA_QUANTIZE with IMATRIX (llama_quantize_stub.sh): the matrix must
# reach it, under the second name when the first file does not load.
#   test_compare.sh NIBBLE_BINARY      exit 77 without node
set -euo pipefail
nib=$1
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null || { echo "test_compare: no node here, skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
table=$(NIBBLE=$nib PEER=$here/peer_stub.mjs MODEL_DIR=$tmp SHAPES="stories tiny:1" TYPES="q8_0 q4_k_m" THREADS="1 2" \
  ROUNDS=1 REPS=1 PP=16 TG=8 bash "$here/../../bench/compare.sh" 2>"$tmp/log") ||
  { cat "$tmp/log"; echo "test_compare: compare.sh failed"; exit 1; }
echo "$table"
rows=$(echo "$table" | grep -c '^| stories ' || true)
[ "$rows" = 8 ] || { echo "test_compare: $rows rows for stories, want 8 (2 types x 2 thread counts x pp16/tg8)"; exit 1; }
rows=$(echo "$table" | grep -c '^| tiny-L1 ' || true)
[ "$rows" = 8 ] || { echo "test_compare: $rows rows for tiny-L1 (tiny cut to 1 layer), want 8"; exit 1; }
layers=$("$nib" info "$tmp/tiny-L1-q8_0.gguf" 2>/dev/null | sed -n 's/.*block_count *u32 *\([0-9]*\).*/\1/p')
[ "$layers" = 1 ] || { echo "test_compare: tiny-L1-q8_0.gguf has '$layers' layers, want 1"; exit 1; }
echo "$table" | grep -E "^\| (stories|tiny-L1) " | awk -F'|' '
  function num(s) { gsub(/ /, "", s); return s }
  { test = num($5); peer = num($6); nib = num($7); ratio = num($8); roof = num($9); prss = num($10); nrss = $11
    want = test == "pp16" ? "100.0" : "50.0"
    if (peer != want) { print "peer figure " peer " in: " $0; bad = 1 }
    if (nib !~ /^[0-9]+\.[0-9]$/ || nib + 0 <= 0) { print "no nibble figure in: " $0; bad = 1 }
    sub(/x$/, "", ratio)
    # both printed figures are rounded: the ratio to 0.01 from the unrounded
    # tok/s, nibble tok/s to 0.1 (so nib/peer may be off by 0.05/peer)
    tol = 0.005 + 0.05 / peer + 1e-4
    if (ratio == "" || (ratio - nib / peer) > tol || (nib / peer - ratio) > tol) { print "ratio " ratio " is not " nib "/" peer " in: " $0; bad = 1 }
    if (test == "pp16" ? roof != "-" : roof !~ /^[0-9]+%$/) { print "roofline column " roof " in: " $0; bad = 1 }
    if (test == "pp16" ? prss != "-" : prss !~ /^(-|[0-9]+)$/) { print "peer RSS column " prss " in: " $0; bad = 1 }
    if (test == "tg8" && nrss !~ /^ *[0-9]+ \([0-9]+\) *$/) { print "no nibble RSS (budget) in: " $0; bad = 1 }
    if (nrss ~ /OVER/) { print "over budget: " $0; bad = 1 } }
  END { exit bad }'
echo "test_compare: table complete, ratios right"

# The llama-bench path at two depths, with arguments for both programs:
# rows per depth named @dN, the stub's depth figures, the peer's name in
# the header, --peak filling the prefill rows' roofline column, and the
# extra arguments reaching each program.
export STUB_LOG=$tmp/stub.log
table=$(NIBBLE=$nib LLAMA_BENCH=$here/llama_bench_stub.sh PEER_NAME=stubllama PEER_ARGS="-fa 1" \
  NIBBLE_ARGS="--peak -ctk q8_0 -ctv q8_0" MODEL_DIR=$tmp SHAPES=stories TYPES=q8_0 THREADS=1 DEPTHS="0 64" \
  ROUNDS=1 REPS=1 PP=16 TG=8 bash "$here/../../bench/compare.sh" 2>"$tmp/log2") ||
  { cat "$tmp/log2"; echo "test_compare: compare.sh with DEPTHS failed"; exit 1; }
echo "$table"
echo "$table" | head -1 | grep -q 'stubllama t/s' || { echo "test_compare: PEER_NAME not in the header"; exit 1; }
echo "$table" | grep -E '^\| stories ' | awk -F'|' '
  function num(s) { gsub(/ /, "", s); return s }
  { test = num($5); peer = num($6); nib = num($7); roof = num($9); seen[test] = 1
    want = test ~ /^pp/ ? 100 : 50
    if (test ~ /@d64$/) want = want * 0.8
    if (peer + 0 != want) { print "peer figure " peer " (want " want ") in: " $0; bad = 1 }
    if (nib !~ /^[0-9]+\.[0-9]$/ || nib + 0 <= 0) { print "no nibble figure in: " $0; bad = 1 }
    if (roof !~ /^[0-9]+%$/) { print "no roofline (with --peak) in: " $0; bad = 1 } }
  END { if (!seen["pp16"] || !seen["tg8"] || !seen["pp16@d64"] || !seen["tg8@d64"]) { print "missing a depth row"; bad = 1 }
        exit bad }'
[ "$(grep -c -- '-fa 1' "$STUB_LOG")" = 2 ] || { echo "test_compare: PEER_ARGS did not reach llama-bench twice"; exit 1; }
[ "$(grep -c -- '-d 64' "$STUB_LOG")" = 1 ] || { echo "test_compare: depth 64 did not reach llama-bench once"; exit 1; }
grep -q 'type_k.*q8_0' <("$nib" bench -m "$tmp/stories-q8_0.gguf" -p 0 -n 2 -r 1 -t 1 -ctk q8_0 -ctv q8_0 --json --no-load 2>/dev/null) ||
  { echo "test_compare: nibble bench ignores -ctk (the NIBBLE_ARGS check would mean nothing)"; exit 1; }
echo "test_compare: depths, peer name and arguments right"

# LLAMA_QUANTIZE with IMATRIX: the f16 file goes through the stub with
# --imatrix, the first (unloadable) result is retried under the padded name,
# and the table has the type's rows; the copies of the matrix are removed.
export STUB_LOG=$tmp/quant.log
printf 'not read by the stub' >"$tmp/im.gguf"
table=$(NIBBLE=$nib LLAMA_BENCH=$here/llama_bench_stub.sh LLAMA_QUANTIZE=$here/llama_quantize_stub.sh \
  IMATRIX=$tmp/im.gguf MODEL_DIR=$tmp SHAPES=stories TYPES=IQ2_XS THREADS=1 ROUNDS=1 REPS=1 PP=16 TG=8 \
  bash "$here/../../bench/compare.sh" 2>"$tmp/log3") ||
  { cat "$tmp/log3"; echo "test_compare: compare.sh with IMATRIX failed"; exit 1; }
echo "$table"
[ "$(echo "$table" | grep -c '^| stories | IQ2_XS ')" = 2 ] || { cat "$tmp/log3"; echo "test_compare: no IQ2_XS rows with IMATRIX"; exit 1; }
[ "$(grep -c -- '--imatrix .*compare-imatrix' "$STUB_LOG")" = 2 ] ||
  { cat "$STUB_LOG"; echo "test_compare: the importance matrix did not reach llama-quantize under both names"; exit 1; }
! ls "$tmp" | grep -q compare-imatrix || { echo "test_compare: the matrix's copies were left behind"; exit 1; }
echo "test_compare: IMATRIX reaches llama-quantize"
