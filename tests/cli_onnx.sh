#!/usr/bin/env bash
# ONNX models in the CLI (docs/onnx.md): `--model x.onnx` and `--cfg x.onnx` run the importer's
# test network (tests/onnx/) and print each output tensor's shape and summary, --save-output writes
# them; `plan` shows its plan; an op outside the slice is one line naming the node, its op type
# and the opset, exit 3; --weights with an ONNX model is refused. Skipped (77) in a build without ONNX import.
# $1 = the graphrun binary; run from the source root.
set -u
bin=$1
source "$(dirname "$0")/lib/check.sh"
model=tests/onnx/yolov8n_like_op13.onnx

"$bin" --model tests/onnx/erf.onnx --device cpu --input tests/onnx/input_dog.png \
    >"$tmp/out" 2>"$tmp/err"
rc=$?
if grep -q "built without ONNX import" "$tmp/err"; then
  [ $rc -eq 3 ]; check "no ONNX import: exit 3 (got $rc)" $?
  echo "cli_onnx: this graphrun has no ONNX import ($pass passed, $fails failed)"
  [ $fails -eq 0 ] && exit 77 || exit 1
fi
[ $rc -eq 3 ]; check "unsupported op: exit 3 (got $rc)" $?
[ "$(wc -l <"$tmp/err")" -eq 1 ] &&
  grep -q "erf.onnx: node '/Erf' (Erf, opset 13): not supported" "$tmp/err"
check "unsupported op: one line naming node, op and opset" $?

for flag in --model --cfg; do
  "$bin" $flag $model --device cpu --input tests/onnx/input_dog.png --output "" \
      --save-output "$tmp/o.npy" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ $rc -eq 0 ]; check "$flag x.onnx: exit 0 (got $rc)" $?
  grep -q "^  output 0: 24x16x16 (CxHxW)" "$tmp/out" && grep -q "^  output 2: 24x4x4 (CxHxW)" "$tmp/out"
  check "$flag x.onnx: the outputs' shapes printed" $?
  [ -s "$tmp/o.npy" ] && [ -s "$tmp/o.1.npy" ] && [ -s "$tmp/o.2.npy" ]
  check "$flag x.onnx: --save-output wrote the three outputs" $?
done

# Recognised by content too: the same file under another name.
cp tests/onnx/tiny_ops.onnx "$tmp/model.bin"
"$bin" --cfg "$tmp/model.bin" --device cpu --input tests/onnx/tiny_input.npy --output "" \
    >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -q "^  output 0: 6x8x8 (CxHxW)" "$tmp/out"
check "an ONNX file named model.bin is read as ONNX (got $rc)" $?

# graphrun plan and compare's per-layer trace open the network themselves (gr_net_open): they
# said "unknown built-in model" before.
"$bin" plan --model tests/onnx/tiny_ops.onnx >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -q "bias+leaky" "$tmp/out"; check "plan --model x.onnx (got $rc)" $?
"$bin" plan --cfg tests/onnx/tiny_ops.onnx --weights data/shapes.weights >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -ne 0 ] && grep -q "holds its weights" "$tmp/err"; check "plan: --weights with ONNX refused" $?

"$bin" --model $model --weights data/shapes.weights --device cpu \
    --input tests/onnx/input_dog.png --output "" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -ne 0 ] && grep -q "holds its weights" "$tmp/err"; check "--weights with ONNX refused" $?

# Explicit Q/DQ (docs/onnx.md): int8 takes the file's scales and calibrates nothing - the one
# calibration image here is not an image, so a calibration would fail - and says so; a bad Q/DQ
# is one line naming the node, exit 3 (before: QuantizeLinear was an unsupported op).
mkdir -p "$tmp/calib" && echo "not an image" >"$tmp/calib/bad.jpg"
"$bin" --model tests/onnx/qdq.onnx --device cpu --prec int8 --calib-images "$tmp/calib" \
    --input tests/onnx/tiny_input.npy --output "" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -q "^  output 0: 6x8x8 (CxHxW)" "$tmp/out" &&
  grep -q "int8: scales from the file's QuantizeLinear/DequantizeLinear (7 tensors, 5 convs" "$tmp/err"
check "Q/DQ model: int8 without calibration (got $rc)" $?
# compare's int8 row and its per-layer trace use the file's scales too (the trace said "the int8
# ranges were not kept" when it looked for a calibration cache).
"$bin" compare --model tests/onnx/qdq.onnx --device cpu --calib max --per-layer \
    --input tests/onnx/input_dog.png >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -q "^8 *conv " "$tmp/out" && grep -q "scales from the file's" "$tmp/err"
check "compare --per-layer on a Q/DQ model (got $rc)" $?
"$bin" --model tests/onnx/qdq_bad_zp.onnx --device cpu --prec int8 \
    --input tests/onnx/tiny_input.npy --output "" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 3 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
  grep -q "node '/QuantizeLinear_2' (QuantizeLinear, opset 13): zero point 3" "$tmp/err"
check "bad Q/DQ: one line naming the node, exit 3 (got $rc)" $?

echo "cli_onnx: $pass passed, $fails failed"
[ $fails -eq 0 ]
