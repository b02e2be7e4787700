#!/usr/bin/env bash
# prune_peer.sh - llama.cpp loads what `nibble prune` writes: the embedded
# llama model pruned (heads only, heads and neurons; written as llama.cpp's
# `deci` architecture with per-layer head and FFN counts), then greedy
# decoding of a prompt by nibble and by llama.cpp must give the same ids
# (node-llama-cpp through ../shared/peer/generate.mjs) and, where a
# llama.cpp build's llama-simple is found ($LLAMA_SIMPLE, else
# /tmp/llama.cpp/build/bin/llama-simple), the same text.
# usage: tests/app/prune_peer.sh NIBBLE_BINARY MODEL.gguf
# Exits 77 (skipped) when neither peer can run here.
set -euo pipefail
nib=$1
model=$2
shared=${NIBBLE_SHARED:-$(dirname "$0")/../../../shared}
nlc=${NLC_DIR:-$HOME/.cache/nibble-peer}
simple=${LLAMA_SIMPLE:-/tmp/llama.cpp/build/bin/llama-simple}
have_node=0
if command -v node >/dev/null 2>&1 && [ -f "$nlc/node_modules/node-llama-cpp/package.json" ] &&
   [ -f "$shared/peer/generate.mjs" ]; then
  have_node=1
fi
[ -x "$simple" ] || simple=""
if [ $have_node = 0 ] && [ -z "$simple" ]; then
  echo "prune_peer: skipped: no llama.cpp here (../shared/peer with node-llama-cpp, or \$LLAMA_SIMPLE)"
  exit 77
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/nibble-prune-peer.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cat > "$dir/calib.txt" <<'TXT'
Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine.
One day, she saw a big red ball in the park. She ran to get it, but a dog got there first.
The dog and Lily played with the ball all day. They were very happy and became good friends.
Tom had a toy car. He liked to push it around the house. His mom said, "Tom, be careful!"
TXT
prompt="Once upon a time"
n=32
fail=0
for cut in "--heads 0.5" "--heads 0.25 --neurons 0.3"; do
  out="$dir/p.gguf"
  # shellcheck disable=SC2086
  "$nib" prune "$model" "$out" $cut --calib "$dir/calib.txt" -q 2>"$dir/prune.err" ||
    { cat "$dir/prune.err"; exit 1; }
  ours=$("$nib" run -m "$out" -p "$prompt" -n $n --temp 0 --ids 2>/dev/null | sed -n 's/^generated: //p')
  text=$("$nib" run -m "$out" -p "$prompt" -n $n --temp 0 2>/dev/null)
  if [ $have_node = 1 ]; then
    theirs=$(NLC_DIR=$nlc node "$shared/peer/generate.mjs" "$out" -p "$prompt" -n $n |
             python3 -c 'import json,sys; print(" ".join(map(str, json.load(sys.stdin)["ids"])))')
    if [ "$ours" = "$theirs" ]; then
      echo "prune_peer: $cut: node-llama-cpp greedy ids equal nibble's ($n tokens)"
    else
      echo "prune_peer: $cut: ids differ"; echo "  nibble:    $ours"; echo "  llama.cpp: $theirs"; fail=1
    fi
  fi
  if [ -n "$simple" ]; then
    # llama-simple prints the prompt's pieces (BOS as "<s>", then " Once ...")
    # and the continuation on stdout
    theirs=$("$simple" -m "$out" -n $n "$prompt" 2>/dev/null || true)
    theirs=${theirs#"<s>"}
    theirs=${theirs#" "}
    if [ "$theirs" = "$prompt$text" ] || [ "$theirs" = "$prompt$text"$'\n' ]; then
      echo "prune_peer: $cut: llama-simple's greedy text equals nibble's"
    else
      echo "prune_peer: $cut: llama-simple text differs"; echo "  nibble:    $prompt$text"
      echo "  llama.cpp: $theirs"; fail=1
    fi
  fi
done
exit $fail
