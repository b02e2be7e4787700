#!/usr/bin/env bash
# imatrix_peer.sh - importance matrices move between nibble and llama.cpp:
#  1. llama-imatrix and `nibble imatrix` on the embedded model, the same
#     text, context and chunks: every entry's per-column importance agrees
#     within 1% (measured: 0.13% at worst, ffn_down's near-zero columns),
#     the counts exactly; llama-imatrix's legacy .dat reads the same;
#  2. llama-quantize --imatrix accepts nibble's file (a tiny256 synth
#     model, whose rows fit the K blocks: llama-quantize refuses the
#     embedded model's 172-wide ffn_down) and records it;
#  3. `nibble quantize --imatrix` uses llama-imatrix's file for every
#     matrix it has an entry for.
# usage: tests/app/imatrix_peer.sh NIBBLE TEST_IMATRIX MODEL.gguf
# llama.cpp's tools: $LLAMA_IMATRIX / $LLAMA_QUANTIZE, else $LLAMA_BIN/...,
# else /tmp/llama.cpp/build/bin/. Exits 77 (skipped) without them or
# without ../shared/text.
set -euo pipefail
nib=$1
cmp=$2
model=$3
shared=${NIBBLE_SHARED:-$(dirname "$0")/../../../shared}
bin=${LLAMA_BIN:-/tmp/llama.cpp/build/bin}
limx=${LLAMA_IMATRIX:-$bin/llama-imatrix}
lq=${LLAMA_QUANTIZE:-$bin/llama-quantize}
if [ ! -x "$limx" ] || [ ! -x "$lq" ]; then
  echo "imatrix_peer: skipped: no llama-imatrix / llama-quantize (set LLAMA_BIN or LLAMA_IMATRIX, LLAMA_QUANTIZE)"
  exit 77
fi
if [ ! -f "$shared/text/wiki.valid.raw" ]; then
  echo "imatrix_peer: skipped: $shared/text/wiki.valid.raw is absent"
  exit 77
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/nibble-imatrix-peer.XXXXXX")
trap 'rm -rf "$dir"' EXIT
head -c 300000 "$shared/text/wiki.valid.raw" > "$dir/calib.txt"
fail=0
run() { # a command whose output goes to a log shown on failure
  if ! "$@" > "$dir/log" 2>&1; then
    echo "imatrix_peer: failed: $*"; tail -20 "$dir/log"; fail=1; return 1
  fi
}

# 1. the same statistics
run "$limx" -m "$model" -f "$dir/calib.txt" -o "$dir/l.gguf" -c 256 --chunks 8 --no-ppl -t 2 || true
run "$limx" -m "$model" -f "$dir/calib.txt" -o "$dir/l.dat" --output-format dat -c 256 --chunks 8 --no-ppl -t 2 || true
run "$nib" imatrix -m "$model" -f "$dir/calib.txt" -o "$dir/n.gguf" -c 256 --chunks 8 -t 2 -q || true
for f in l.gguf l.dat; do
  if [ -f "$dir/$f" ] && [ -f "$dir/n.gguf" ]; then
    "$cmp" --compare "$dir/$f" "$dir/n.gguf" 0.01 || fail=1
  fi
done

# 2. llama-quantize reads nibble's file
run "$nib" synth --shape tiny256 --type f32 "$dir/t.gguf" || true
run "$nib" imatrix -m "$dir/t.gguf" -f "$dir/calib.txt" -o "$dir/tn.gguf" -c 128 --chunks 4 -q || true
if run "$lq" --imatrix "$dir/tn.gguf" "$dir/t.gguf" "$dir/tq.gguf" q4_k_m 2; then
  if grep -q "did not find weights for blk" "$dir/log" || ! grep -q "loaded [0-9]* importance matrix entries" "$dir/log"; then
    echo "imatrix_peer: llama-quantize did not use nibble's importance matrix:"; grep -i "imatrix\|importance\|weights for" "$dir/log" | head; fail=1
  fi
  # (grep, not `nibble info`: llama-quantize pads its header to 32 bytes
  # whatever general.alignment the input says, and nibble's files say 64,
  # so depending on the header's length its output may not load anywhere)
  if ! grep -aq "quantize.imatrix.entries_count" "$dir/tq.gguf"; then
    echo "imatrix_peer: llama-quantize's file does not record the importance matrix"; fail=1
  fi
fi

# 3. nibble quantize reads llama-imatrix's file
run "$limx" -m "$dir/t.gguf" -f "$dir/calib.txt" -o "$dir/tl.gguf" -c 128 --chunks 4 --no-ppl -t 2 || true
if run "$nib" quantize "$dir/t.gguf" "$dir/tq2.gguf" q4_k_m --imatrix "$dir/tl.gguf" -q; then
  n=$("$nib" imatrix --show "$dir/tl.gguf" | grep -c '^blk\.') || true
  if ! grep -q "; $n with importance" "$dir/log" || grep -q "names no tensor\|without importance" "$dir/log"; then
    echo "imatrix_peer: nibble quantize did not use llama-imatrix's $n entries:"; cat "$dir/log"; fail=1
  fi
fi
[ $fail = 0 ] && echo "imatrix_peer: ok"
exit $fail
