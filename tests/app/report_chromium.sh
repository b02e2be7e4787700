#!/usr/bin/env bash
# report_chromium.sh - the dashboard `nibble report` writes opens in headless
# Chromium without console errors, shows its panels, and renders a page that
# is not blank. The results come from a real (small) quant-sweep of the
# embedded model: q8_0 RTN/AWQ and 30% of the FFN neurons pruned, then q4_0.
# usage: tests/app/report_chromium.sh NIBBLE_BINARY MODEL.gguf [SCREENSHOT.png]
# Exits 77 (skipped) without chromium (Debian: apt-get install chromium) or python3.
set -euo pipefail
nib=$1
model=$2
keep=${3:-}
browser=""
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then browser=$b; break; fi
done
[ -n "$browser" ] || { echo "report_chromium: skipped: no chromium here"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "report_chromium: skipped: no python3 to read the screenshot"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/nibble-report.XXXXXX")
trap 'rm -rf "$dir"' EXIT
text="Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine. One day, she saw a big red ball in the park. She ran to get it, but a dog got there first. The dog and Lily played with the ball all day. They were very happy and became good friends."
for i in 1 2 3 4 5 6; do printf '%s\n' "$text"; done > "$dir/text.txt"
cat > "$dir/calib.txt" <<'TXT'
Tom had a toy car. He liked to push it around the house. His mom said, "Tom, be careful!"
But Tom did not listen, and the car went under the bed. He was sad, but his sister helped him.
They looked under the bed together and found the car next to an old sock. Tom said thank you.
TXT
"$nib" quant-sweep -m "$model" -f "$dir/text.txt" --calib "$dir/calib.txt" -c 64 --chunks 2 --types q8_0 \
  --prune-neurons 0.3 --prune-then q4_0 --calib-tokens 64 --json "$dir/r.json" --out "$dir/sweep" -q \
  >/dev/null 2>"$dir/sweep.err" || { cat "$dir/sweep.err"; exit 1; }
"$nib" report "$dir/r.json" -o "$dir/report.html" 2>"$dir/report.err" || { cat "$dir/report.err"; exit 1; }
grep -q "<script" "$dir/report.html"
if grep -Eq '(src|href)="(https?:)?//' "$dir/report.html"; then
  echo "report_chromium: the page refers to something outside itself"; exit 1
fi
run() { # the page's console output and errors, on stderr with --enable-logging
  timeout 60 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
    --user-data-dir="$dir/profile" --enable-logging=stderr --v=0 "$@"
}
# the check must see a console error where there is one
printf '<!DOCTYPE html><html><body><script>console.error("planted");undefinedThing();</script></body></html>' \
  > "$dir/bad.html"
if ! run --dump-dom "file://$dir/bad.html" 2>&1 | grep -q 'CONSOLE'; then
  echo "report_chromium: skipped: this chromium does not report console messages on stderr"; exit 77
fi
run --dump-dom "file://$dir/report.html" > "$dir/dom.html" 2> "$dir/console.log" || true
if grep -q 'CONSOLE' "$dir/console.log"; then
  echo "report_chromium: console messages:"; grep 'CONSOLE' "$dir/console.log"; exit 1
fi
for h in "Size against perplexity" "Size reduction and perplexity change" "Pruning: perplexity against" \
         "Pruning: decode speed" "Pruned and quantized on one Pareto chart" "AWQ against round-to-nearest" \
         "All results"; do
  grep -q "$h" "$dir/dom.html" || { echo "report_chromium: panel '$h' missing from the rendered page"; exit 1; }
done
run --screenshot="$dir/shot.png" --window-size=1280,1600 "file://$dir/report.html" >/dev/null 2>&1 || true
[ -s "$dir/shot.png" ] || { echo "report_chromium: no screenshot"; exit 1; }
python3 - "$dir/shot.png" <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, w = 8, b"", 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
        bpp = {2: 3, 6: 4}[ctype]
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
raw = zlib.decompress(idat)
stride = w * bpp
prev = bytearray(stride)
colors, dark = set(), 0
for y in range(h):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    if y % 4 == 0:
        for x in range(0, w, 4):
            px = bytes(line[x * bpp:x * bpp + 3])
            colors.add(px)
            dark += sum(px) < 384
    prev = line
print("report_chromium: %dx%d screenshot, %d colours, %d dark samples" % (w, h, len(colors), dark))
if len(colors) < 8 or dark < 200:
    sys.exit("report_chromium: the screenshot looks blank")
PY
[ -z "$keep" ] || cp "$dir/shot.png" "$keep"
echo "report_chromium: ok"
