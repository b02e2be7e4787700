#!/usr/bin/env bash
# A stand-in for llama-quantize in test_compare: [--imatrix FILE] IN OUT TYPE.
# It copies IN to OUT (the "quantized" file is the f16 one, which nibble
# runs), and with an importance matrix whose name lacks the 32 zeros of
# compare.sh's second name it writes a file no program loads, as the real
# one does when its header padding misplaces the data, so the retry is
# exercised. Every command line is appended to $STUB_LOG.
set -eu
echo "$*" >>"${STUB_LOG:-/dev/null}"
im=""
if [ "$1" = --imatrix ]; then
  im=$2
  shift 2
  [ -f "$im" ] || { echo "stub: no imatrix $im" >&2; exit 1; }
fi
[ $# = 3 ] || { echo "usage: llama_quantize_stub.sh [--imatrix FILE] IN OUT TYPE" >&2; exit 1; }
case $im in
  "" | *00000000000000000000000000000000*) cp "$1" "$2" ;;
  *) echo "not a gguf file" >"$2" ;;
esac
