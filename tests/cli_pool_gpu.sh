#!/usr/bin/env bash
# CLI over every GPU of the host: `--device gpu:all` spreads a folder's batches over one engine per
# GPU (batch k on GPU k mod D, 4 runs in flight on each) and must print exactly the lines of
# `--device gpu:0`, byte for byte, in input order: int8 YOLOv2-tiny gives the same outputs on every
# GPU of one model (tests/test_gpu_pool.c checks that bit for bit), so any difference is a batch
# reported out of order or read from the wrong engine or slot. 30 photos (the five bundled ones x 6)
# and a truncated JPEG in batches of 4. With one GPU gpu:all is a pool of one (the same path, one
# device); with two or more it is the real test. Also: a list naming a GPU past the visible count
# is refused with one line (exit 4), the stage report names the bound. Without a GPU: exit 77.
# $1 = the graphrun binary.
set -u
bin=$1
src=$(pwd)
source "$(dirname "$0")/lib/check.sh"

mkdir "$tmp/photos"
for i in 1 2 3 4 5 6; do
  for f in "$src"/data/*.jpg; do cp "$f" "$tmp/photos/$i-$(basename "$f")"; done
done
head -c 20000 "$src/data/dog.jpg" >"$tmp/photos/3-cut.jpg"
run=(--model yolo --prec int8 --batch 4 --thresh 0.2 --calib-cache "$tmp/calib.cache"
     --timing-cache "$tmp/tactics" --input "$tmp/photos")

"$bin" "${run[@]}" --device gpu:0 >"$tmp/one.jsonl" 2>"$tmp/one.err"
rc=$?
if [ $rc -eq 4 ]; then
  echo "no CUDA device visible: skipped ($(tail -1 "$tmp/one.err"))"
  exit 77
fi
[ $rc -eq 3 ]; check "gpu:0: exit status 3 for the bad file (got $rc)" $?
"$bin" "${run[@]}" --device gpu:all >"$tmp/all.jsonl" 2>"$tmp/all.err"
rc=$?
[ $rc -eq 3 ]; check "gpu:all: exit status 3 for the bad file (got $rc)" $?
[ $rc -eq 3 ] || cat "$tmp/all.err"
[ "$(wc -l <"$tmp/all.jsonl")" -eq 31 ]; check "31 lines" $?
cmp -s "$tmp/one.jsonl" "$tmp/all.jsonl"; same=$?
check "gpu:all prints the lines of gpu:0, byte for byte" $same
[ $same -eq 0 ] || diff "$tmp/one.jsonl" "$tmp/all.jsonl" | head -n 10
# The GPU count from nvidia-smi where it is (else only what the run printed is checked).
devices=$(command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -c '^GPU' || echo 0)
if [ "$devices" -gt 1 ]; then
  grep -q "graphrun: $devices devices: gpu 0 " "$tmp/all.err"; check "one engine per GPU ($devices)" $?
  grep -q "in flight over the devices round robin" "$tmp/all.err"; check "round robin" $?
fi
grep -q "bound: " "$tmp/all.err"; check "the stage report names the bound" $?
python3 - "$tmp/all.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
names = [l["input"].rsplit("/", 1)[1] for l in lines]
assert names == sorted(names), names
assert "error" in lines[names.index("3-cut.jpg")]
assert all("detections" in l for l in lines if not l["input"].endswith("3-cut.jpg"))
PY
check "input order, the bad file on its line" $?

"$bin" "${run[@]}" --device gpu:0,64 >"$tmp/bad.jsonl" 2>"$tmp/bad.err"
rc=$?
[ $rc -eq 4 ]; check "gpu:0,64 refused with exit 4 (got $rc)" $?
grep -q "gpu 64: only [0-9]* CUDA device" "$tmp/bad.err"; check "naming gpu 64" $?
[ ! -s "$tmp/bad.jsonl" ]; check "and no lines" $?

echo "$pass passed, $fails failed (tests/cli_pool_gpu.sh)"
[ $fails -eq 0 ]
