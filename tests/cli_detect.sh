#!/usr/bin/env bash
# CLI end to end on the CPU reference: detections printed, image written, deterministic output,
# yolov3-tiny (two heads), a classifier's top 5 (resnet18, darknet19), --save-output/.npy naming,
# and bad input giving a one-line error with the documented exit status. $1 = the graphrun binary. Runs from the source root.
set -u
bin=$1
source "$(dirname "$0")/lib/check.sh"
expect_exit() { # expect_exit NAME CODE PATTERN -- ARGS...
  local name=$1 code=$2 pattern=$3; shift 4
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  local lines; lines=$(wc -l <"$tmp/err")
  if [ $rc -ne "$code" ] || ! grep -q -- "$pattern" "$tmp/err" || [ "$lines" -ne 1 ]; then
    echo "FAIL: $name: exit $rc (want $code), stderr ($lines lines):"; cat "$tmp/err"; fails=$((fails + 1))
  else pass=$((pass + 1)); fi
}

"$bin" --version | grep -q '^graphrun [0-9]'; check "--version" $?
"$bin" --help | grep -q -- '--prec'; check "--help" $?

# YOLOv2-tiny VOC on the bundled photo, twice: same stdout, same image bytes.
"$bin" --model yolo --device cpu --input data/dog.jpg --output "$tmp/a.png" >"$tmp/a.txt" 2>"$tmp/a.err"
check "yolo cpu run exit 0" $?
"$bin" --model yolo --device cpu --input data/dog.jpg --output "$tmp/b.png" >"$tmp/b.txt" 2>/dev/null
check "yolo cpu second run exit 0" $?
grep -q '^data/dog.jpg: [0-9]* detection' "$tmp/a.txt"; check "detections header printed" $?
[ "$(grep -c 'box left' "$tmp/a.txt")" -ge 1 ]; check "at least one detection line" $?
cmp -s "$tmp/a.txt" "$tmp/b.txt"; check "same stdout twice" $?
cmp -s "$tmp/a.png" "$tmp/b.png"; check "same image twice" $?
head -c 8 "$tmp/a.png" | od -An -tx1 | grep -q '89 50 4e 47'; check "output is a PNG" $?
grep -q 'SYNTHETIC' "$tmp/a.err"; check "synthetic weights announced" $?
# The tactic options parse everywhere (the CPU reference has no tactics to choose).
"$bin" --model shapes --device cpu --input data/shapes.png --no-output --no-tactic-search \
    --timing-cache "$tmp/t.cache" >/dev/null 2>&1
check "--no-tactic-search --timing-cache accepted" $?
"$bin" --model shapes --device cpu --input data/shapes.png --no-output --tactic-search >/dev/null 2>&1
check "--tactic-search accepted" $?
grep -q 'time (last run)' "$tmp/a.err"; check "time split reported" $?

# fp16 without a GPU: the CPU emulates the GPU's arithmetic, says so, and finds boxes too.
"$bin" --device cpu --prec fp16 --input data/dog.jpg --no-output >"$tmp/h.txt" 2>"$tmp/h.err"
check "fp16 on the CPU exit 0" $?
grep -q 'emulates' "$tmp/h.err"; check "fp16 CPU emulation announced" $?
grep -q 'box left' "$tmp/h.txt"; check "fp16 CPU emulation finds boxes" $?

# yolov3-tiny: two yolo heads, raw outputs saved as FILE.npy and FILE.1.npy.
"$bin" --model yolov3-tiny --device cpu --input data/dog.jpg --output "$tmp/c.png" \
  --save-output "$tmp/heads.npy" --json >"$tmp/c.json" 2>/dev/null
check "yolov3-tiny exit 0" $?
grep -q '"detections"' "$tmp/c.json"; check "json output" $?
[ -s "$tmp/heads.npy" ] && [ -s "$tmp/heads.1.npy" ]; check "two head .npy files" $?
head -c 6 "$tmp/heads.npy" | od -An -c | grep -q 'N   U   M   P   Y'; check ".npy magic" $?
[ -s "$tmp/c.png" ]; check "yolov3-tiny image written" $?

# Bad input: one line on stderr naming what and where, documented exit status.
# Darknet's classifier by name: no boxes, its top 5 classes (ImageNet names, scores falling).
"$bin" --model resnet18 --device cpu --input data/dog.jpg --no-output --json >"$tmp/cls.json" 2>/dev/null
check "resnet18 cpu run exit 0" $?
python3 - "$tmp/cls.json" <<'PY'
import json, sys
img = json.load(open(sys.argv[1]))["images"][0]
top = img["top5"]
scores = [t["score"] for t in top]
assert img["detections"] == [] and len(top) == 5, img
assert scores == sorted(scores, reverse=True) and 0 < scores[-1] and scores[0] < 1, scores
assert all(0 <= t["class_id"] < 1000 and not t["class"].startswith("class ") for t in top), top
PY
check "resnet18 top-5 classes in the JSON" $?
"$bin" --model darknet19 --device cpu --input data/dog.jpg --no-output 2>/dev/null | grep -q '^  top-5: [a-zA-Z]'
check "darknet19 top-5 line" $?

expect_exit "unknown option" 2 "unknown option '--bogus'" -- --bogus
expect_exit "bad precision" 2 "fp32, fp16, int8 or auto" -- --prec int4
expect_exit "bad --max-nrmse" 2 "--max-nrmse" -- --max-nrmse -1
expect_exit "missing image" 3 "nonexistent.jpg" -- --device cpu --input "$tmp/nonexistent.jpg"
printf 'not an image' >"$tmp/bad.jpg"
expect_exit "corrupt image" 3 "bad.jpg" -- --device cpu --input "$tmp/bad.jpg"
printf '[net]\nwidth=416\nheight=416\nchannels=3\n[convolutional]\nfilters=16\nsize=banana\n' >"$tmp/bad.cfg"
expect_exit "malformed cfg" 3 "bad.cfg:7" -- --device cpu --cfg "$tmp/bad.cfg"
head -c 1000 /dev/urandom >"$tmp/short.weights"
expect_exit "truncated weights" 3 "short.weights" -- --device cpu --weights "$tmp/short.weights"

echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
