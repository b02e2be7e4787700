#!/usr/bin/env bash
# Cross-build for aarch64 with packaging/toolchain-aarch64.cmake and run the
# kernel and engine tests under qemu-user; then the binary itself: the CPU
# it reports (proves the architecture), and greedy text on every kernel set
# it runs, which must equal the host's (every set gives the same numbers).
#   packaging/ci-aarch64.sh [BUILD_DIR]   (default build-arm; installs what
#   is missing with apt-get: the cross compiler, qemu-user and Debian's
#   arm64 -dev packages of utf8proc, ncursesw, inih and md4c)
set -euo pipefail
cd "$(dirname "$0")/.."
b=${1:-build-arm}
host_bin=${HOST_NIBBLE:-build/bin/nibble}
export DEBIAN_FRONTEND=noninteractive

pkgs=()
command -v aarch64-linux-gnu-gcc >/dev/null || pkgs+=(gcc-aarch64-linux-gnu)
command -v qemu-aarch64-static >/dev/null || command -v qemu-aarch64 >/dev/null || pkgs+=(qemu-user)
for p in libutf8proc-dev libncurses-dev libinih-dev libmd4c-dev; do
  dpkg -s "$p:arm64" >/dev/null 2>&1 || pkgs+=("$p:arm64")
done
if [ ${#pkgs[@]} -gt 0 ]; then
  dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
  apt-get update -qq
  apt-get install -y -qq "${pkgs[@]}" >/dev/null
fi

cmake -S . -B "$b" -DCMAKE_TOOLCHAIN_FILE=packaging/toolchain-aarch64.cmake -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$b" -j2 >/dev/null
aarch64-linux-gnu-readelf -h "$b/bin/nibble" | grep -q 'Machine: *AArch64' || { echo "ci-aarch64: not an aarch64 binary" >&2; exit 1; }

export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64)
# Kernels and the single-threaded engine parts. The forward/golden/engine
# tests also run the worker pool on 2 threads, whose spin-waits crawl under
# qemu's emulation of 'yield' on this 2-core machine; the whole-model check
# is the greedy run below instead.
ctest --test-dir "$b" --output-on-failure -j2 --timeout 300 \
  -R '^(test_kernels|test_kquants|test_dispatch|test_gguf|test_gguf_bad|test_tokenizer|test_template|test_journal|test_config|test_moe_quick)$'

"$qemu" "$b/bin/nibble" info --cpu | tee /tmp/nibble-arm-cpu.txt
grep -q '^cpu: aarch64' /tmp/nibble-arm-cpu.txt || { echo "ci-aarch64: not running as aarch64" >&2; exit 1; }
want=$("$host_bin" run -p "Once upon a time" -n 32 --temp 0 -t 1 -q --kernel scalar)
sets=$(awk '/^ +[a-z0-9-]+ +usable/ {print $1}' /tmp/nibble-arm-cpu.txt)
for k in $sets; do
  got=$("$qemu" "$b/bin/nibble" run -p "Once upon a time" -n 32 --temp 0 -t 1 -q --kernel "$k")
  if [ "$got" != "$want" ]; then
    echo "ci-aarch64: kernel set $k on aarch64 gives other text than the host:" >&2
    printf '  host: %s\n  arm:  %s\n' "$want" "$got" >&2
    exit 1
  fi
  echo "aarch64 $k: same 32 greedy tokens as the host"
  # a quantized KV cache (dequantized before the set's attention kernels
  # read it): the same text as the host's scalar set with the same cache
  kvwant=$("$host_bin" run -p "Once upon a time" -n 32 --temp 0 -t 1 -q --kernel scalar -ctk q8_0 -ctv q4_0)
  kvgot=$("$qemu" "$b/bin/nibble" run -p "Once upon a time" -n 32 --temp 0 -t 1 -q --kernel "$k" -ctk q8_0 -ctv q4_0)
  if [ "$kvgot" != "$kvwant" ]; then
    echo "ci-aarch64: kernel set $k with a q8_0/q4_0 KV cache gives other text than the host:" >&2
    printf '  host: %s\n  arm:  %s\n' "$kvwant" "$kvgot" >&2
    exit 1
  fi
  echo "aarch64 $k: same 32 greedy tokens as the host with a q8_0/q4_0 KV cache"
done
echo "ci-aarch64: ok ($(echo $sets | wc -w) kernel sets)"
