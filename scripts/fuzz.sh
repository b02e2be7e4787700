#!/usr/bin/env bash
# Build the libFuzzer targets (clang) and run each for a bounded time.
#   scripts/fuzz.sh [SECONDS_EACH] [BUILD_DIR]     (default 20 s, build-fuzz)
# Each target starts from its seeds in tests/fuzz/corpus/<name>/ and
# writes what it finds to a scratch folder, so the tree stays clean. A
# crash leaves its input as BUILD_DIR/fuzz-artifacts/crash-* and fails.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
b=${2:-build-fuzz}
targets="gguf tokenizer template jinja config journal markdown"
if ! command -v clang >/dev/null && command -v apt-get >/dev/null; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get install -y -qq clang libclang-rt-dev >/dev/null || $sudo sh -c 'apt-get update -qq && apt-get install -y -qq clang libclang-rt-dev' >/dev/null
fi
command -v clang >/dev/null || { echo "fuzz: clang is missing (apt-get install clang)" >&2; exit 1; }
CC=clang cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNIBBLE_FUZZ=ON >/dev/null
if ! cmake --build "$b" -j2 --target $(for t in $targets; do printf 'fuzz_%s ' "$t"; done) >"$b/fuzz-build.log" 2>&1; then
  tail -n 40 "$b/fuzz-build.log" >&2
  exit 1
fi
art="$PWD/$b/fuzz-artifacts"
mkdir -p "$art"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# up to one target a core at once (each is one process on one thread);
# the results are reported in the order of $targets once all have ended
par=$(nproc 2>/dev/null || echo 2)
for t in $targets; do
  while [ "$(jobs -rp | wc -l)" -ge "$par" ]; do wait -n || true; done
  mkdir -p "$scratch/$t"
  (
    if "$b/tests/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
         -artifact_prefix="$art/" -print_final_stats=1 "$scratch/$t" "tests/fuzz/corpus/$t" >"$scratch/$t.log" 2>&1; then
      echo ok >"$scratch/$t.rc"
    else
      echo failed >"$scratch/$t.rc"
    fi
  ) &
done
wait
fails=0
for t in $targets; do
  log="$scratch/$t.log"
  if [ "$(cat "$scratch/$t.rc" 2>/dev/null)" = ok ]; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "fuzz_$t: ${runs:-?} runs in ${secs}s, no crash"
  else
    echo "fuzz_$t: FAILED" >&2
    tail -n 40 "$log" >&2
    fails=$((fails + 1))
  fi
done
[ "$fails" = 0 ]
