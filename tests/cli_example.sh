#!/usr/bin/env bash
# One letterbox: examples/detect.c (the C API: gr_engine_set_image) and the CLI put the same image
# into the engine the same way, so they print the same detections for the bundled photo on the
# same device (here whatever `--device auto` picks for both: the CPU reference without a GPU).
# Before gr_engine_set_image the example fed the uint8 letterbox and the CLI Darknet's floats on
# the CPU: "bus 65.4% box left 108" against "bus 63.8% box left 116".
#   tests/cli_example.sh path/to/graphrun     (from the source root; example_detect beside it)
set -u
bin=$1
example=$(dirname "$bin")/example_detect
source "$(dirname "$0")/lib/check.sh"
[ -x "$example" ] || { echo "cli_example: $example not built"; exit 77; }

"$example" data/dog.jpg >"$tmp/example.txt" 2>"$tmp/example.err"
check "example_detect runs" $?
"$bin" --input data/dog.jpg --no-output >"$tmp/cli.txt" 2>"$tmp/cli.err"
check "graphrun runs" $?
# The detection lines: "  <class> <prob>%  box left L top T right R bottom B", the same format.
grep -E '^  .*%  box left' "$tmp/example.txt" >"$tmp/example.dets"
grep -E '^  .*%  box left' "$tmp/cli.txt" >"$tmp/cli.dets"
[ -s "$tmp/cli.dets" ]; check "the CLI finds detections on the bundled photo" $?
if diff "$tmp/example.dets" "$tmp/cli.dets" >"$tmp/diff.txt"; then
  check "example and CLI print the same detections" 0
else
  check "example and CLI print the same detections" 1
  echo "example (<) vs CLI (>):"; cat "$tmp/diff.txt"
fi

echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
