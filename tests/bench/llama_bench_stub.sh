#!/usr/bin/env bash
# A stand-in for llama-bench in test_compare: takes its -p -n -d -o jsonl
# arguments and prints one JSON line per test in its field order, 100 tok/s
# prefill and 50 decode at depth 0, 80 and 40 at any depth. Every command
# line is appended to $STUB_LOG, so the test can see what compare.sh passed.
set -eu
p=0 n=0 d=0
echo "$*" >>"${STUB_LOG:-/dev/null}"
while [ $# -gt 0 ]; do
  case $1 in
    -p) p=$2; shift ;;
    -n) n=$2; shift ;;
    -d) d=$2; shift ;;
  esac
  shift
done
row() {
  printf '{"build_commit": "stub", "n_threads": 1, "n_prompt": %d, "n_gen": %d, "n_depth": %d, "avg_ns": 1, "stddev_ns": 0, "avg_ts": %s, "stddev_ts": 0.000000}\n' "$1" "$2" "$d" "$3"
}
[ "$p" -gt 0 ] && row "$p" 0 "$([ "$d" -gt 0 ] && echo 80.000000 || echo 100.000000)"
[ "$n" -gt 0 ] && row 0 "$n" "$([ "$d" -gt 0 ] && echo 40.000000 || echo 50.000000)"
exit 0
