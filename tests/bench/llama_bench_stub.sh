#!/usr/bin/env bash
# A stand-in for llama-bench in test_compare: takes its -p -n -d -o json
# arguments and prints a JSON array as llama-bench -o json does (one field a
# line, its field order), 100 tok/s prefill and 50 decode at depth 0, 80 and
# 40 at any depth, with a log line on stderr. Refuses another -o, as
# ik_llama.cpp's llama-bench refuses jsonl. Every command line is appended
# to $STUB_LOG, so the test can see what compare.sh passed.
set -eu
p=0 n=0 d=0
echo "$*" >>"${STUB_LOG:-/dev/null}"
while [ $# -gt 0 ]; do
  case $1 in
    -p) p=$2; shift ;;
    -n) n=$2; shift ;;
    -d) d=$2; shift ;;
    -o) [ "$2" = json ] || { echo "error: invalid parameter for argument: -o" >&2; exit 1; }; shift ;;
  esac
  shift
done
echo "llama_model_loader: loaded meta data {stub}" >&2
sep=""
row() {
  printf '%s  {\n    "build_commit": "stub",\n    "n_prompt": %d,\n    "n_gen": %d,\n    "n_depth": %d,\n' "$sep" "$1" "$2" "$d"
  printf '    "avg_ns": 1,\n    "avg_ts": %s,\n    "stddev_ts": 0.000000,\n    "samples_ts": [ %s ]\n  }' "$3" "$3"
  sep=$',\n'
}
echo "["
[ "$p" -gt 0 ] && row "$p" 0 "$([ "$d" -gt 0 ] && echo 80.000000 || echo 100.000000)"
[ "$n" -gt 0 ] && row 0 "$n" "$([ "$d" -gt 0 ] && echo 40.000000 || echo 50.000000)"
printf '\n]\n'
exit 0
