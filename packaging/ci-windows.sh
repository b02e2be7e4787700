#!/usr/bin/env bash
# Cross-build nibble for 64-bit Windows with mingw-w64 and test it under
# wine: the engine, kernels, config and line-mode CLI (no curses screen:
# NIBBLE_TUI=OFF; PDCurses is not packaged for mingw-w64 in Debian, see
# packaging/windows/README.md). Then nibble.exe itself: greedy text on every
# kernel set it can run must equal the host build's, and a line-mode chat
# script must give the host's transcript.
#   packaging/ci-windows.sh [BUILD_DIR]   (default build-win)
# Installs what is missing with apt-get: the cross compiler and wine.
# utf8proc for Windows is built from Debian's source package (apt-get
# source; needs a deb-src entry, added for the running release if absent)
# into BUILD_DIR/deps. inih is not needed: config/inifile.c reads INI files.
# Exit 77: the tools cannot be had here (no apt-get, no network).
set -euo pipefail
cd "$(dirname "$0")/.."
b=${1:-build-win}
case $b in /*) ;; *) b=$PWD/$b ;; esac
host_bin=${HOST_NIBBLE:-build/bin/nibble}
export DEBIAN_FRONTEND=noninteractive
sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
skip() { echo "ci-windows: skipped: $*" >&2; exit 77; }
t0=$(date +%s)
step() { echo "ci-windows: $* ($(( $(date +%s) - t0 ))s)"; }

# --- tools -----------------------------------------------------------------
pkgs=()
command -v x86_64-w64-mingw32-gcc-posix >/dev/null || pkgs+=(gcc-mingw-w64-x86-64-posix)
command -v x86_64-w64-mingw32-windres >/dev/null || pkgs+=(binutils-mingw-w64-x86-64)
command -v wine >/dev/null || pkgs+=(wine wine64)
if [ ${#pkgs[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || skip "missing ${pkgs[*]} and no apt-get"
  { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends "${pkgs[@]}"; } >/dev/null ||
    skip "cannot install ${pkgs[*]}"
fi
wine=$(command -v wine64 || command -v wine)

# --- utf8proc, cross-built from Debian's source package --------------------
deps=$b/deps
prefix=$deps/prefix
if [ ! -f "$prefix/lib/pkgconfig/libutf8proc.pc" ]; then
  command -v apt-get >/dev/null || skip "no apt-get to fetch utf8proc's source"
  rm -rf "$deps/src" && mkdir -p "$deps/src" "$prefix/include" "$prefix/lib/pkgconfig"
  fetch() { (cd "$deps/src" && apt-get source --download-only utf8proc) >/dev/null 2>&1; }
  if ! fetch; then
    # no deb-src entry: add one for this release, signed like the binaries
    codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
    keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    [ -n "$codename" ] && [ -f "$keyring" ] || skip "no deb-src entry and not Debian: cannot fetch utf8proc's source"
    printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: main\nSigned-By: %s\n' \
      "$codename" "$keyring" | $sudo tee /etc/apt/sources.list.d/nibble-src.sources >/dev/null
    $sudo apt-get update -qq >/dev/null 2>&1 || true
    fetch || skip "apt-get source utf8proc failed"
  fi
  tarball=$(ls "$deps"/src/utf8proc_*.orig.tar.gz | head -n1)
  tar -xzf "$tarball" -C "$deps/src"
  src=$(ls -d "$deps"/src/utf8proc-*/ | head -n1)
  version=$(basename "$src" | sed 's/^utf8proc-//')
  # one translation unit (utf8proc.c includes its data tables); a static
  # library, so users of the header must say UTF8PROC_STATIC (no dllimport)
  x86_64-w64-mingw32-gcc-posix -O2 -DUTF8PROC_STATIC -c "$src/utf8proc.c" -o "$deps/utf8proc.o"
  x86_64-w64-mingw32-ar rcs "$prefix/lib/libutf8proc.a" "$deps/utf8proc.o"
  cp "$src/utf8proc.h" "$prefix/include/"
  cat > "$prefix/lib/pkgconfig/libutf8proc.pc" <<PC
prefix=$prefix
Name: libutf8proc
Description: UTF-8 processing (static, mingw-w64, from Debian's source package)
Version: $version
Libs: -L\${prefix}/lib -lutf8proc
Cflags: -I\${prefix}/include -DUTF8PROC_STATIC
PC
  echo "ci-windows: utf8proc $version built for Windows from $(basename "$tarball")"
fi

step "tools and utf8proc ready"
# --- build -------------------------------------------------------------------
cmake -S . -B "$b" -DCMAKE_TOOLCHAIN_FILE=packaging/toolchain-mingw64.cmake -DCMAKE_BUILD_TYPE=Release \
  -DNIBBLE_WIN_PREFIX="$prefix" -DNIBBLE_TUI=OFF >/dev/null
cmake --build "$b" -j2 >/dev/null
x86_64-w64-mingw32-objdump -f "$b/bin/nibble.exe" | grep -q 'file format pei-x86-64' ||
  { echo "ci-windows: nibble.exe is not a 64-bit Windows program" >&2; exit 1; }

step "cross-built"
# --- wine: a prefix of our own, one server for every run ---------------------
export WINEPREFIX=$b/wineprefix WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
"$wine" cmd /c exit >/dev/null 2>&1 || true   # creates the prefix (slow once)
wineserver -p 60 >/dev/null 2>&1 || true        # stays up between the runs below
trap 'wineserver -k >/dev/null 2>&1 || true' EXIT

step "wine prefix ready"
# --- the tests (ctest runs each .exe under wine) ------------------------------
# A test that fails is run once more on its own and must pass then. One CI
# run saw test_mxfp4.exe end with an error after 0.02 s and no output (it
# takes 0.37 s; the same build passes natively, under ASan and in 30 runs
# under wine here): we take it for a start-up failure of wine's. A real
# failure fails twice and stops the run.
if ! ctest --test-dir "$b" --output-on-failure -j2 --timeout 300; then
  echo "ci-windows: running the failed tests again, one at a time" >&2
  ctest --test-dir "$b" --rerun-failed --output-on-failure -j1 --timeout 300
fi

step "tests passed"
# --- nibble.exe itself ---------------------------------------------------------
"$wine" "$b/bin/nibble.exe" info --cpu > "$b/cpu.txt"
grep -q '^cpu: x86-64' "$b/cpu.txt" || { echo "ci-windows: nibble.exe info --cpu failed" >&2; exit 1; }
want=$("$host_bin" run -p "Once upon a time" -n 32 --temp 0 -t 1 -q --kernel scalar)
sets=$(awk '/^ +[a-z0-9-]+ +usable/ {print $1}' "$b/cpu.txt")
for k in $sets; do
  # without -m: the embedded model beside the .exe (build-win/share/nibble)
  got=$("$wine" "$b/bin/nibble.exe" run -p "Once upon a time" -n 32 --temp 0 -t 2 -q --kernel "$k")
  if [ "$got" != "$want" ]; then
    echo "ci-windows: kernel set $k on Windows gives other text than the host:" >&2
    printf '  host:    %s\n  windows: %s\n' "$want" "$got" >&2
    exit 1
  fi
  echo "windows $k: same 32 greedy tokens as the host"
done

# A line-mode chat round trip: the same script, the same transcript; the
# conversation is saved under XDG_DATA_HOME on both sides.
chat_dir=$b/chat
rm -rf "$chat_dir" && mkdir -p "$chat_dir/host" "$chat_dir/win"
script=$'Once upon a time\n/set top_k 1\nThe cat\n/save ci\n'
printf '%s' "$script" | XDG_DATA_HOME="$chat_dir/host" "$host_bin" chat --plain --no-config -n 24 --temp 0 -t 1 \
  > "$chat_dir/host.out" 2> "$chat_dir/host.err"
printf '%s' "$script" | XDG_DATA_HOME="$chat_dir/win" "$wine" "$b/bin/nibble.exe" chat --plain --no-config -n 24 \
  --temp 0 -t 1 > "$chat_dir/win.out" 2> "$chat_dir/win.err"
if ! cmp -s "$chat_dir/host.out" "$chat_dir/win.out"; then
  echo "ci-windows: the line-mode chat transcript differs from the host's:" >&2
  diff "$chat_dir/host.out" "$chat_dir/win.out" >&2 || true
  cat "$chat_dir/win.err" >&2
  exit 1
fi
grep -q 'Once upon a time' "$chat_dir/win.out" && grep -q '^> The cat' "$chat_dir/win.out" ||
  { echo "ci-windows: the chat transcript lacks the script's lines" >&2; cat "$chat_dir/win.out" >&2; exit 1; }
ls "$chat_dir"/win/nibble/conversations/*ci* >/dev/null 2>&1 ||
  { echo "ci-windows: /save wrote no conversation under XDG_DATA_HOME" >&2; ls -R "$chat_dir/win" >&2; exit 1; }
echo "windows chat --plain: same transcript as the host ($(wc -l < "$chat_dir/win.out") lines), conversation saved"
step "ok ($(echo $sets | wc -w) kernel sets)"
