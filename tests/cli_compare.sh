#!/usr/bin/env bash
# `graphrun compare` and the calibration / overflow options of detect, on the CPU: the table's
# structure, fp32 against itself exactly 0, int8 NRMSE under 1e-2 for every method (the bound
# tests/test_planner_exec.c uses for fp16; YOLOv2-tiny VOC with synthetic weights on dog + horses,
# calibrated on the bundled photos, measured 0.0071-0.0083 at 416x416 and 0.0072-0.0093 at 256;
# at 128 entropy's clipping reaches 0.011), --per-layer rows, JSON; --calib/--calib-images writing a cache keyed by
# method and image set; an fp16 overflow named by one line and located by --find-overflow.
# $1 = the graphrun binary. Runs from the source root.
set -u
bin=$1
source "$(dirname "$0")/lib/check.sh"

# YOLOv2-tiny VOC at 256x256 keeps the six configurations (and four calibrations) quicker.
sed 's/^width=416/width=256/; s/^height=416/height=256/' models/yolov2-tiny-voc.cfg >"$tmp/y256.cfg"
# conv + batch norm, maxpool, 1x1 conv: calibration options and the overflow case.
printf '[net]\nwidth=32\nheight=32\nchannels=3\n[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\nstride=1\npad=1\nactivation=leaky\n[maxpool]\nsize=2\nstride=2\n[convolutional]\nfilters=4\nsize=1\nstride=1\npad=0\nactivation=linear\n' >"$tmp/small.cfg"

"$bin" compare --cfg "$tmp/y256.cfg" --device cpu --input data/dog.jpg --input data/horses.jpg \
  --per-layer >"$tmp/table.txt" 2>"$tmp/table.err"
check "compare exit 0" $?
head -1 "$tmp/table.txt" | grep -q '^precision *nrmse\[0\] *max_abs_err *detections_agree *p50_us$'
check "table header" $?
for row in fp32 fp16 "int8 max" "int8 percentile" "int8 entropy" "int8 mse"; do
  grep -q "^$row  " "$tmp/table.txt"; check "row '$row'" $?
done
awk '$1 == "fp32" { exit !($2 == 0 && $3 == 0) }' "$tmp/table.txt"; check "fp32 vs fp32 is exactly 0" $?
awk '$1 == "fp32" { split($4, a, "/"); exit !(a[1] == a[2]) }' "$tmp/table.txt"
check "fp32 agrees with all its own boxes" $?
awk '$1 == "int8" { n++; if (!($3 > 0 && $3 < 1e-2)) bad++ } END { exit !(n == 4 && bad == 0) }' \
  "$tmp/table.txt"
check "int8 NRMSE in (0, 1e-2) for the four methods" $?
awk '$1 == "fp16" { exit !($2 > 0 && $2 < 1e-2) }' "$tmp/table.txt"; check "fp16 NRMSE in (0, 1e-2)" $?
grep -q '^per-layer NRMSE' "$tmp/table.txt"; check "per-layer section" $?
[ "$(grep -cE '^[0-9]+ +(conv|maxpool) ' "$tmp/table.txt")" -eq 15 ]; check "a row per plan layer (15)" $?
grep -q 'running int8 entropy' "$tmp/table.err"; check "progress of the configurations on stderr" $?

"$bin" compare --cfg "$tmp/y256.cfg" --device cpu --input data/dog.jpg --calib entropy --json \
  >"$tmp/c.json" 2>/dev/null
check "compare --json exit 0" $?
if command -v python3 >/dev/null; then
  python3 - "$tmp/c.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["rows"]
assert [r["precision"] for r in rows] == ["fp32", "fp16", "int8"], rows
assert rows[2]["method"] == "entropy"
assert rows[0]["nrmse"] == [0] and rows[0]["max_abs_error"] == 0
assert 0 < rows[2]["nrmse"][0] < 1e-2
EOF
  check "compare JSON content" $?
fi
"$bin" compare --calib kl >/dev/null 2>"$tmp/err"; [ $? -eq 2 ] && grep -q "'kl'" "$tmp/err"
check "compare --calib kl is a usage error" $?

# detect --calib entropy --calib-images DIR: the cache records method and image set.
mkdir "$tmp/photos"
cp data/dog.jpg data/eagle.jpg "$tmp/photos/"
echo "not a photo" >"$tmp/photos/notes.txt"
"$bin" --cfg "$tmp/small.cfg" --device cpu --prec int8 --calib entropy --calib-images "$tmp/photos" \
  --calib-cache "$tmp/c.calib" --input data/dog.jpg --no-output >/dev/null 2>"$tmp/e.err"
check "int8 entropy calibration on a folder exit 0" $?
grep -q '^method entropy$' "$tmp/c.calib"; check "cache records the method" $?
grep -q '^images 2 [0-9a-f]\{16\}$' "$tmp/c.calib"; check "cache records the image set (2 files)" $?
! grep -q 'calibrating \[' "$tmp/e.err"; check "no progress bar when stderr is not a terminal" $?
grep -q '^graphrun: calibration: 2 images in [0-9.]* s (CPU)$' "$tmp/e.err"; check "calibration time line" $?
"$bin" --calib-device foo >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "'foo' is not auto, cpu or gpu" "$tmp/err"; check "bad --calib-device: exit 2" $?
if ! nvidia-smi -L >/dev/null 2>&1; then # no GPU: asking to calibrate on one says so
  "$bin" --cfg "$tmp/small.cfg" --device cpu --prec int8 --calib-device gpu --input data/dog.jpg \
    --no-output >/dev/null 2>"$tmp/err"
  [ $? -eq 4 ] && grep -qE 'calibration on the GPU: (no CUDA device|this graphrun was built without CUDA)' "$tmp/err"
  check "--calib-device gpu without a GPU: exit 4" $?
fi
if command -v script >/dev/null; then # a pseudo-terminal on stderr: the bar is drawn
  script -qec "'$bin' --cfg '$tmp/small.cfg' --device cpu --prec int8 --calib mse \
    --calib-images '$tmp/photos' --input data/dog.jpg --no-output" /dev/null >"$tmp/tty.out" 2>&1
  grep -q 'calibrating \[#*\] 2/2' "$tmp/tty.out"; check "progress bar on a terminal" $?
fi
cp data/horses.jpg "$tmp/photos/"
"$bin" --cfg "$tmp/small.cfg" --device cpu --prec int8 --calib entropy --calib-images "$tmp/photos" \
  --calib-cache "$tmp/c.calib" --input data/dog.jpg --no-output >/dev/null 2>"$tmp/e.err"
[ $? -eq 3 ] && grep -q 'another image set' "$tmp/e.err"; check "changed image set is rejected" $?
printf 'graphrun-calibration 1\nmodel x 0123456789abcdef\nmethod max\nimages 5\ninput 1\n' >"$tmp/old.calib"
"$bin" --cfg "$tmp/small.cfg" --device cpu --prec int8 --calib-cache "$tmp/old.calib" \
  --input data/dog.jpg --no-output >/dev/null 2>"$tmp/o.err"
check "old cache: still runs" $?
[ "$(grep -c 'older graphrun' "$tmp/o.err")" -eq 1 ]; check "old cache: one notice line" $?
grep -q '^graphrun: calibration: 5 images in [0-9.]* s (CPU)$' "$tmp/o.err"; check "old cache: recalibrated" $?
grep -q '^graphrun-calibration 3$' "$tmp/old.calib"; check "old cache replaced" $?
"$bin" --calib-images "$tmp/nonexistent" --prec int8 --device cpu >/dev/null 2>"$tmp/err"
[ $? -eq 3 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ]; check "missing --calib-images folder: one line, exit 3" $?

# fp16 overflow: a 3x32x32 input of 60000 (finite in fp16) through conv + batch norm exceeds
# 65504 in the first conv. One line names the output; --find-overflow names layer 0.
header="{'descr': '<f4', 'fortran_order': False, 'shape': (3, 32, 32), }"
{
  printf '\x93NUMPY\x01\x00\x76\x00%s' "$header"
  printf '%*s\n' $((117 - ${#header})) ''
  for _ in $(seq 3072); do printf '\x00\x60\x6a\x47'; done # 60000.0f little-endian
} >"$tmp/big.npy"
[ "$(stat -c %s "$tmp/big.npy")" -eq $((128 + 3072 * 4)) ]; check "test .npy written" $?
"$bin" --cfg "$tmp/small.cfg" --device cpu --prec fp32 --input "$tmp/big.npy" >/dev/null 2>"$tmp/f32.err"
check "fp32: finite, exit 0" $?
! grep -q 'non-finite' "$tmp/f32.err"; check "fp32: no overflow line" $?
"$bin" --cfg "$tmp/small.cfg" --device cpu --prec fp16 --input "$tmp/big.npy" >/dev/null 2>"$tmp/f16.err"
[ $? -eq 1 ]; check "fp16 overflow: exit 1" $?
[ "$(grep -c 'output 0 holds [0-9]* non-finite values.*use --prec fp32 or int8' "$tmp/f16.err")" -eq 1 ]
check "fp16 overflow: one line naming the output" $?
"$bin" --cfg "$tmp/small.cfg" --device cpu --prec fp16 --input "$tmp/big.npy" --find-overflow \
  >/dev/null 2>"$tmp/find.err"
grep -q 'first non-finite value at layer 0 (conv, cfg line 5)' "$tmp/find.err"
check "--find-overflow names layer 0" $?

echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
