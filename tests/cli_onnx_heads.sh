#!/usr/bin/env bash
# ONNX detection heads in the CLI (docs/onnx.md, "Detection heads"): `graphrun --model v8.onnx`
# prints detections named by the file's metadata (names), --json lists them, --names overrides
# the metadata, --save-output writes the graph's own output ([1, 7, 336]); images letterbox with
# border 114 unless --letterbox says Darknet's; an engine saved by `graphrun build -o` and run
# with --engine prints the same detections; a head op the host does not run is one line
# naming the node (exit 3); malformed metadata is one warning line and the model runs. Skipped (77) in a build without ONNX import.
# $1 = the graphrun binary; run from the source root.
set -u
bin=$1
source "$(dirname "$0")/lib/check.sh"
v8=tests/onnx/yolov8n_head_op17.onnx

"$bin" --model $v8 --device cpu --input tests/onnx/input_dog.png --output "" \
    >"$tmp/out" 2>"$tmp/err"
rc=$?
if grep -q "built without ONNX import" "$tmp/err"; then
  echo "cli_onnx_heads: this graphrun has no ONNX import"
  exit 77
fi
[ $rc -eq 0 ]; check "v8 head: exit 0 (got $rc)" $?
# The recorded input at the default thresh 0.5: the reference's first boxes (make_models.py's
# yolov8n_head_dog.txt: person 0.99999 at 74.6 0 127 113.0, dog 0.99996 ...), 16 above 0.5.
grep -q "input_dog.png: 16 detections" "$tmp/out" &&
  grep -q "^  person  *100.0%  box left 75 top 0 right 127 bottom 113" "$tmp/out" &&
  grep -q "^  dog  *100.0%  box left 47 top 0 right 127 bottom 85" "$tmp/out"
check "v8 head: detections with the metadata's class names" $?

"$bin" --model $v8 --device cpu --input tests/onnx/input_dog.png --output "" --json \
    --save-output "$tmp/o.npy" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -q '"class": "dog", "class_id": 2, "prob": 0.99996' "$tmp/out"
check "v8 head: --json (got $rc)" $?
[ -s "$tmp/o.npy" ] && [ ! -e "$tmp/o.1.npy" ] &&
  head -c 128 "$tmp/o.npy" | grep -q "'shape': (1, 7, 336)"
check "v8 head: --save-output wrote the graph's output [1, 7, 336]" $?

# Ultralytics' letterbox (border 114) by default; --letterbox gives Darknet's.
grep -q "images letterbox114$" "$tmp/err"; check "v8 head: images letterbox114 by default" $?
"$bin" --model $v8 --letterbox --device cpu --input data/dog.jpg --output "" \
    >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -q "images letterbox$" "$tmp/err"
check "v8 head: --letterbox overrides it (got $rc)" $?

printf 'cat\nbus\nhorse\n' >"$tmp/names"
"$bin" --model $v8 --names "$tmp/names" --device cpu --input tests/onnx/input_dog.png \
    --output "" >"$tmp/out" 2>"$tmp/err"
grep -q "^  horse  *100.0%" "$tmp/out"; check "v8 head: --names overrides the metadata" $?

"$bin" --model tests/onnx/yolov5n_head_op13.onnx --device cpu --input tests/onnx/input_dog.png \
    --output "" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -q "^  class 0  *98.2%  box left 106 top 5 right 109 bottom 91" "$tmp/out"
check "v5 head: detections, unnamed classes (got $rc)" $?

# A saved engine (graphrun build -o; engine file format 5) keeps the host-side head and the
# metadata's names: --engine prints the detections --model does, byte for byte.
"$bin" --model $v8 --device cpu --input tests/onnx/input_dog.png --output "" >"$tmp/direct" \
    2>"$tmp/err"
"$bin" build --model $v8 --device cpu -o "$tmp/v8.grengine" >"$tmp/out" 2>"$tmp/err"
rc=$?
"$bin" --engine "$tmp/v8.grengine" --input tests/onnx/input_dog.png --output "" \
    >"$tmp/loaded" 2>"$tmp/err"
rc2=$?
[ $rc -eq 0 ] && [ $rc2 -eq 0 ] && grep -q "^  dog  *100.0%" "$tmp/loaded" &&
  cmp -s "$tmp/direct" "$tmp/loaded"
check "v8 head: build -o, then --engine: the same detections (got $rc, $rc2)" $?

"$bin" --model tests/onnx/head_erf.onnx --device cpu --input tests/onnx/tiny_input.npy \
    --output "" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 3 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
  grep -q "head_erf.onnx: node 'erf' (Erf, opset 13): not supported after graphrun's layers" \
      "$tmp/err"
check "a head op the host does not run: one line naming the node, exit 3 (got $rc)" $?

"$bin" --model tests/onnx/bad_metadata.onnx --device cpu --input tests/onnx/tiny_input.npy \
    --output "" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c "warning" "$tmp/err")" -eq 1 ] &&
  grep -q "warning: tests/onnx/bad_metadata.onnx: metadata 'names' is not a list" "$tmp/err"
check "malformed metadata: one warning line, the model runs (got $rc)" $?

echo "cli_onnx_heads: $pass passed, $fails failed"
[ $fails -eq 0 ]
