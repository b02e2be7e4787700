#!/usr/bin/env bash
# The Arm kernel sets, checked on an x86 machine: cross-build simd/ and its
# tests for aarch64 and run them under qemu-user twice, on a CPU model with
# the dot product instructions (max: neon and neon-dotprod run) and on one
# without (cortex-a53: neon runs, neon-dotprod must be refused), so both
# sets and both selection paths are exercised.
#
# Only simd/ is built (it needs libc alone), so no arm64 copies of the
# chat's libraries are needed. Exit 77 (skip) when the cross compiler,
# its sysroot, qemu-aarch64 or cmake is missing.
#
#   tests/simd/run_arm.sh            build in build-arm-simd/, run
#   BUILD_DIR=/tmp/x tests/simd/run_arm.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$root/build-arm-simd}
triple=aarch64-linux-gnu
sysroot=/usr/$triple

skip() { echo "SKIP: $*"; exit 77; }
command -v cmake >/dev/null || skip "cmake not found"
command -v "$triple-gcc" >/dev/null || skip "$triple-gcc not found (apt-get install gcc-aarch64-linux-gnu)"
[ -d "$sysroot/lib" ] || skip "$sysroot (the cross C library) not found"
qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64 || true)
[ -n "$qemu" ] || skip "qemu-aarch64 not found (apt-get install qemu-user)"

# A small project around simd/: the top-level CMakeLists.txt would also
# want ncursesw, utf8proc and inih for arm64. Its global flags are
# repeated here (keep them in step), plus -Werror: the Arm build is held
# to zero warnings.
tests=(test_kernels test_dispatch)
[ -f "$root/tests/simd/test_kquants.c" ] && tests+=(test_kquants)
[ -f "$root/tests/simd/test_mxfp4.c" ] && tests+=(test_mxfp4)
[ -f "$root/tests/simd/test_attn.c" ] && tests+=(test_attn)
[ -f "$root/tests/simd/test_attn_q.c" ] && tests+=(test_attn_q)
[ -f "$root/tests/simd/test_pack.c" ] && tests+=(test_pack)
[ -f "$root/tests/simd/test_lquants.c" ] && tests+=(test_lquants)
[ -f "$root/tests/simd/test_iquants.c" ] && tests+=(test_iquants)
mkdir -p "$build/wrap"
cat >"$build/wrap/CMakeLists.txt.new" <<EOF
cmake_minimum_required(VERSION 3.20)
project(nibble_simd_arm LANGUAGES C)
set(CMAKE_C_STANDARD 11)
set(CMAKE_C_STANDARD_REQUIRED ON)
set(CMAKE_C_EXTENSIONS OFF)
add_compile_options(-Wall -Wextra -Werror -ffp-contract=off)
add_compile_definitions(_POSIX_C_SOURCE=200809L _DEFAULT_SOURCE)
add_subdirectory("$root/simd" simd)
if(NOT NIBBLE_HAVE_ARM_SETS)
  message(FATAL_ERROR "simd/CMakeLists.txt did not add the Arm kernel sets")
endif()
foreach(t ${tests[*]})
  add_executable(\${t} "$root/tests/simd/\${t}.c")
  target_include_directories(\${t} PRIVATE "$root/tests" "$root/simd")
  target_link_libraries(\${t} PRIVATE nibble_simd)
endforeach()
EOF
# rewrite only on change, so a rerun rebuilds nothing
cmp -s "$build/wrap/CMakeLists.txt.new" "$build/wrap/CMakeLists.txt" 2>/dev/null ||
  mv "$build/wrap/CMakeLists.txt.new" "$build/wrap/CMakeLists.txt"
rm -f "$build/wrap/CMakeLists.txt.new"

if [ -f "$root/packaging/toolchain-aarch64.cmake" ]; then
  cross=(-DCMAKE_TOOLCHAIN_FILE="$root/packaging/toolchain-aarch64.cmake")
else
  cross=(-DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 -DCMAKE_C_COMPILER="$triple-gcc")
fi
cmake -S "$build/wrap" -B "$build/out" -DCMAKE_BUILD_TYPE=Release "${cross[@]}" >/dev/null
cmake --build "$build/out" -j2

# the dot product must really be in the neon-dotprod objects (the kernels
# and the quantized-cache attention), and elsewhere only in peak.c's loop for that set (`bench --peak`, which runs it only
# when the set is installed, after the CPU check)
objdump=$(command -v "$triple-objdump" || true)
if [ -n "$objdump" ]; then
  lib="$build/out/simd/libnibble_simd.a"
  sdot=$("$objdump" -d "$lib" | awk '/^[^ ].*file format/ {f=$1} /\tsdot\t/ {print f}' | sort -u | grep -vx 'peak.c.o:' || true)
  want=$(printf '%s\n' attn_q_neon_dotprod.c.o: kernels_neon_dotprod.c.o: | sort)
  [ "$sdot" = "$want" ] || { echo "FAIL: sdot found in: ${sdot:-nothing}"; exit 1; }
fi

# Each run starts at once, up to one per core (qemu-user runs one thread
# per test here), and is reported in order when all have ended.
par=$(nproc 2>/dev/null || echo 2)
runs="$build/runs"
rm -rf "$runs" && mkdir -p "$runs"
n=0
run() { # cpu test expected-line...
  local cpu=$1 t=$2 out=$runs/$n
  shift 2
  n=$((n + 1))
  while [ "$(jobs -rp | wc -l)" -ge "$par" ]; do wait -n || true; done
  (
    echo "--- $t on qemu -cpu $cpu"
    if ! "$qemu" -L "$sysroot" -cpu "$cpu" "$build/out/$t" >"$out.log" 2>&1; then
      cat "$out.log"
      echo "run_arm: FAIL: $t on $cpu"
      exit 0
    fi
    cat "$out.log"
    for want in "$@"; do
      grep -Eq "$want" "$out.log" || echo "run_arm: FAIL: $t on $cpu: no line matching /$want/"
    done
  ) >"$out" 2>&1 &
}
run max test_kernels '^neon +bit-identical' '^neon-dotprod +bit-identical'
run max test_dispatch '^neon-dotprod +usable' '^cpu: aarch64: asimd asimddp'
run cortex-a53 test_kernels '^neon +bit-identical' '^neon-dotprod +skipped: CPU lacks the dot product'
run cortex-a53 test_dispatch '^neon +usable' '^neon-dotprod +refused'
if [ -f "$root/tests/simd/test_kquants.c" ]; then
  run max test_kquants '^neon +K-quants bit-identical' '^neon-dotprod +K-quants bit-identical'
  run cortex-a53 test_kquants '^neon +K-quants bit-identical'
fi
if [ -f "$root/tests/simd/test_mxfp4.c" ]; then
  run max test_mxfp4 '^neon +mxfp4 bit-identical' '^neon-dotprod +mxfp4 bit-identical'
  run cortex-a53 test_mxfp4 '^neon +mxfp4 bit-identical'
fi
if [ -f "$root/tests/simd/test_attn.c" ]; then
  run max test_attn '^neon +attention bit-identical' '^neon-dotprod +attention bit-identical'
  run cortex-a53 test_attn '^neon +attention bit-identical'
fi
if [ -f "$root/tests/simd/test_attn_q.c" ]; then
  run max test_attn_q '^neon +quantized-cache attention bit-identical' \
    '^neon-dotprod +quantized-cache attention bit-identical'
  run cortex-a53 test_attn_q '^neon +quantized-cache attention bit-identical'
fi
if [ -f "$root/tests/simd/test_lquants.c" ]; then
  run max test_lquants '^neon +lquants bit-identical' '^neon-dotprod +lquants bit-identical'
  run cortex-a53 test_lquants '^neon +lquants bit-identical'
fi
if [ -f "$root/tests/simd/test_iquants.c" ]; then
  run max test_iquants '^neon +iquants bit-identical' '^neon-dotprod +iquants bit-identical'
  run cortex-a53 test_iquants '^neon +iquants bit-identical'
fi
wait
fail=0
for ((i = 0; i < n; i++)); do
  cat "$runs/$i"
  if grep -q '^run_arm: FAIL' "$runs/$i"; then fail=1; fi
done

if [ "$fail" = 0 ]; then
  echo "run_arm: neon and neon-dotprod bit-identical to scalar under qemu"
else
  echo "run_arm: FAILED"
fi
exit "$fail"
