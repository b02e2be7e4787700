#!/usr/bin/env bash
# Build the .deb and .tar.gz, install the .deb with apt (which pulls in its
# Depends), and run the installed binary: version, a greedy continuation on
# the embedded model, info of the installed model, the man page.
#   packaging/ci-deb.sh [BUILD_DIR]      (default build-pkg; needs root)
set -euo pipefail
cd "$(dirname "$0")/.."
b=${1:-build-pkg}
cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr -DNIBBLE_TESTS=OFF >/dev/null
cmake --build "$b" -j2 >/dev/null
(cd "$b" && rm -f ./*.deb ./*.tar.gz && cpack -G "DEB;TGZ" >/dev/null)
deb=$(ls "$b"/nibble_*.deb)
tgz=$(ls "$b"/nibble-*.tar.gz)
echo "built $deb and $tgz"
dpkg-deb -f "$deb" Package Version Architecture Depends
tar tzf "$tgz" > /tmp/nibble-tgz.txt
grep '/bin/nibble$' /tmp/nibble-tgz.txt >/dev/null
grep '/share/nibble/stories260K.gguf$' /tmp/nibble-tgz.txt >/dev/null

export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq --reinstall "./$deb" >/dev/null
fail() { echo "ci-deb: $*" >&2; exit 1; }
[ "$(command -v nibble)" = /usr/bin/nibble ] || fail "nibble is not /usr/bin/nibble"
cd /tmp
v=$(nibble --version)
echo "$v"
[ "$v" = "nibble $(dpkg-deb -f "$OLDPWD/$deb" Version | sed 's/-[^-]*$//')" ] || fail "version mismatch: $v"
out=$(nibble run -p "Once upon a time" -n 16 --temp 0 -t 1)
echo "run: Once upon a time$out"
# the embedded model's greedy continuation (as in tests/engine/test_golden)
[ "$out" = ", there was a little girl named Lily. She loved to play" ] || fail "unexpected continuation: $out"
nibble info /usr/share/nibble/stories260K.gguf > /tmp/nibble-info.txt
grep "general.architecture.*\"llama\"" /tmp/nibble-info.txt >/dev/null || fail "info does not show the architecture"
head -n 2 /tmp/nibble-info.txt
[ -f /usr/share/man/man1/nibble.1.gz ] || fail "man page not installed"
man -w nibble >/dev/null 2>&1 || true
echo "ci-deb: the installed package works"
