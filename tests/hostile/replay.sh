#!/usr/bin/env bash
# The hostile corpus (tests/hostile/{journals,configs,prompts}), each case
# run through the binary the way a user meets it, on a pty, under a time
# and a memory limit. A case passes when nibble ends by itself within the
# time (status 0, or 1 where it refuses the input with a message), no
# sanitizer reported, nothing it printed to the terminal holds a raw ESC,
# BEL, C1 control, bidi control or zero-width space, and a conversation it loaded kept every line it had
# (one it refused is left as it was). Prints the counts per surface.
#   NIBBLE_BIN=build/bin/nibble tests/hostile/replay.sh [journals|configs|prompts...]
# Environment: HOSTILE_TIMEOUT (s, default 60), HOSTILE_MEM_MB (default
# 2048: RSS under ASan via hard_rss_limit_mb, else ulimit -v),
# NIBBLE_SANITIZED=1 in sanitizer builds. Exit 77 without script(1).
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=${NIBBLE_BIN:?NIBBLE_BIN names the nibble binary}
assets=${NIBBLE_ASSETS:-$here/../../assets}
command -v script >/dev/null && command -v timeout >/dev/null || { echo "replay: no script(1)/timeout(1); skipped"; exit 77; }
export NIBBLE_DEFAULT_MODEL=$assets/stories260K.gguf
T=${HOSTILE_TIMEOUT:-60}
MEM=${HOSTILE_MEM_MB:-2048}
work=$(mktemp -d /tmp/nibble-hostile-replay.XXXXXX)
trap 'rm -rf "$work"' EXIT
export HOME=$work/home XDG_DATA_HOME=$work/data XDG_CONFIG_HOME=$work/config
conv=$XDG_DATA_HOME/nibble/conversations
mkdir -p "$HOME" "$conv" "$XDG_CONFIG_HOME"
if [ "${NIBBLE_SANITIZED:-0}" = 1 ]; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}hard_rss_limit_mb=$MEM:abort_on_error=1"
  limit=""
else
  limit="ulimit -v $((MEM * 1024 + 1024 * 1024));" # address space: RSS plus the mappings' slack
fi
fails=0
# limited CMD: run on a pty with stdin $1; output in $work/out, status in $rc
limited() {
  local input=$1; shift
  printf '%s' "$input" | timeout -k 5 "$T" script -qec "$limit exec $*" /dev/null >"$work/out" 2>&1
  rc=$?
}
# ESC, BEL, the C1 controls CSI, OSC, DCS, ST; the bidi overrides, embeddings
# and isolates (U+202A..U+202E, U+2066..U+2069) and the zero-width space,
# direction marks and BOM (U+200B, U+200E, U+200F, U+FEFF), which must be
# shown as escapes (the joiners U+200C, U+200D may stay inside emoji and words)
raw_controls() {
  LC_ALL=C grep -q $'\x1b\|\x07\|\xc2\x9b\|\xc2\x9d\|\xc2\x90\|\xc2\x9c\|\xe2\x80[\xaa-\xae]\|\xe2\x81[\xa6-\xa9]\|\xe2\x80[\x8b\x8e\x8f]\|\xef\xbb\xbf' "$work/out"
}
sanitizer() { grep -q "AddressSanitizer\|LeakSanitizer\|runtime error:\|ThreadSanitizer" "$work/out"; }
# normalise a journal for comparing lines: no BOM, LF line ends
norm() { LC_ALL=C sed -e '1s/^\xef\xbb\xbf//' -e 's/\r$//' "$1"; }
verdict() { # case what-went-wrong...
  if [ $# -gt 1 ]; then
    fails=$((fails + 1)); shift; echo "  FAIL $case_name: $*"
  fi
}

surfaces=" ${*:-journals configs prompts} "
nj=0 jl=0 jr=0 nc=0 cw=0 np=0 pr=0
[[ $surfaces == *" journals "* ]] &&
for f in "$here"/journals/*; do
  case_name=journals/$(basename "$f")
  name=$(basename "$f" .nbj)
  rm -f "$conv"/*
  cp "$f" "$conv/$name.nbj"
  norm "$f" >"$work/before"
  limited $'/quit\n' "$bin" chat --plain --no-config --resume "$name"
  nj=$((nj + 1))
  why=()
  [ $rc = 0 ] || why+=("status $rc")
  sanitizer && why+=("sanitizer report")
  raw_controls && why+=("raw control characters on the terminal")
  if grep -q "resumed '$name'" "$work/out"; then
    jl=$((jl + 1))
    lost=$(norm "$conv/$name.nbj" | LC_ALL=C grep -Fxv -f - "$work/before" | head -3)
    [ -z "$lost" ] || why+=("lines lost in the save: $lost")
  else
    jr=$((jr + 1))
    cmp -s "$f" "$conv/$name.nbj" || why+=("a refused file was changed")
    grep -q -- "--resume: " "$work/out" || why+=("refused without a message")
  fi
  verdict "$case_name" "${why[@]}"
done
[ $nj -gt 0 ] && echo "journals: $nj cases, $jl loaded, $jr refused with a message"

[[ $surfaces == *" configs "* ]] &&
for f in "$here"/configs/*; do
  case_name=configs/$(basename "$f")
  limited $'/quit\n' "$bin" chat --plain --config "$f"
  nc=$((nc + 1))
  why=()
  [ $rc = 0 ] || why+=("status $rc")
  sanitizer && why+=("sanitizer report")
  raw_controls && why+=("raw control characters on the terminal")
  grep -q "warning:" "$work/out" && cw=$((cw + 1))
  verdict "$case_name" "${why[@]}"
done
[ $nc -gt 0 ] && echo "configs: $nc cases, $cw with warnings, all ran"

[[ $surfaces == *" prompts "* ]] &&
for f in "$here"/prompts/*; do
  case_name=prompts/$(basename "$f")
  limited "" "$bin" run -n 8 --temp 0 -f "$f"
  np=$((np + 1))
  why=()
  [ $rc = 0 ] || [ $rc = 1 ] || why+=("status $rc")
  [ $rc = 1 ] && { pr=$((pr + 1)); grep -q "nibble" "$work/out" || why+=("refused without a message"); }
  sanitizer && why+=("sanitizer report")
  raw_controls && why+=("raw control characters on the terminal")
  verdict "$case_name" "${why[@]}"
done
[ $np -gt 0 ] && echo "prompts: $np cases, $((np - pr)) ran, $pr refused with a message"
echo "replay: $((nj + nc + np)) cases, $fails failed"
[ $fails = 0 ]
