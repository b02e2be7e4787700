#!/usr/bin/env bash
# Build nibble from a fresh checkout: installs what is missing (Debian and
# Ubuntu, with apt-get), then configures and builds into ./build.
#   ./setup.sh                 release build in ./build
#   BUILD_DIR=b CMAKE_ARGS='-DNIBBLE_SANITIZE=ON' ./setup.sh
set -euo pipefail
cd "$(dirname "$0")"
build_dir=${BUILD_DIR:-build}
build_type=${BUILD_TYPE:-Release}

need_pkgs=()
have() { command -v "$1" >/dev/null 2>&1; }
pc() { have pkg-config && pkg-config --exists "$1"; }
have cmake || need_pkgs+=(cmake)
{ have cc || have gcc; } || need_pkgs+=(gcc)
have make || need_pkgs+=(make)
have pkg-config || need_pkgs+=(pkg-config)
pc ncursesw || need_pkgs+=(libncurses-dev)
pc libutf8proc || need_pkgs+=(libutf8proc-dev)
pc inih || need_pkgs+=(libinih-dev)
pc md4c || need_pkgs+=(libmd4c-dev)  # markdown in the chat screen
have tmux || need_pkgs+=(tmux)  # the chat's end-to-end tests drive it

if [ ${#need_pkgs[@]} -gt 0 ]; then
  if have apt-get; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    echo "setup: installing ${need_pkgs[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need_pkgs[@]}" >&2
  else
    cat >&2 <<MSG
setup: missing: ${need_pkgs[*]}
Install a C11 compiler, CMake (3.20 or newer), pkg-config, and the
development files of ncursesw, utf8proc, inih and md4c, then run this again:
  Fedora:   dnf install gcc cmake pkgconf ncurses-devel utf8proc-devel inih-devel md4c-devel
  Arch:     pacman -S gcc cmake pkgconf ncurses libutf8proc libinih md4c
  macOS:    brew install cmake pkgconf ncurses utf8proc inih md4c, then (ncurses is keg-only)
            PKG_CONFIG_PATH="\$(brew --prefix ncurses)/lib/pkgconfig" ./setup.sh
MSG
    exit 1
  fi
fi

cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="$build_type" ${CMAKE_ARGS:-} >/dev/null
cmake --build "$build_dir" -j"$(nproc 2>/dev/null || echo 2)"
echo "setup: built $build_dir/bin/nibble" >&2
