#!/usr/bin/env bash
# CLI on a GPU: --decode gpu (nvJPEG, letterboxed on the GPU) against --decode cpu on one folder:
# the five bundled photos x 4, and between them files that are bad or not the GPU decoder's - a
# truncated JPEG, garbage named .jpg, an empty file, a PNG named .jpg, a JPEG with bytes between
# its markers, a progressive JPEG and a greyscale one (those two decode on the CPU in both modes),
# a JPEG whose entropy-coded data is damaged - in batches of 4 over 2 slots, so bad files share
# batches with good ones. Without a GPU: exit 77; without nvJPEG in the build: the refusal is
# checked and the rest skipped with one line. $1 = the graphrun binary.
#
# What must hold:
#  - the same lines in the same order, each bad file's error line byte for byte the CPU mode's
#    (the damaged-scan file is the one exception allowed: libjpeg-turbo refuses it on a warning,
#    the GPU decoder may decode it - docs/performance.md - and its line is printed);
#  - the files the GPU does not take (progressive, greyscale, PNG) get the CPU mode's detections
#    exactly: the same bytes into the same engine;
#  - every copy of a photo gets the same detections as the other copies (the GPU decoder is
#    deterministic), wherever it sat (batch, slot, position, after which bad file);
#  - the GPU-decoded photos' detections against CPU mode's: printed (agreement in classes and
#    boxes), not required equal - the decoders' pixels may differ (tests/test_gpu_jpeg.c bounds
#    that difference on the pixels themselves).
set -u
bin=$1
src=$(pwd)
source "$(dirname "$0")/lib/check.sh"

mkdir "$tmp/photos"
for i in 1 2 3 4; do
  for f in "$src"/data/*.jpg; do cp "$f" "$tmp/photos/$i-$(basename "$f")"; done
done
head -c 20000 "$src/data/dog.jpg" >"$tmp/photos/1-zz-cut.jpg"
head -c 30000 /dev/urandom >"$tmp/photos/2-zz-garbage.jpg"
: >"$tmp/photos/2-zz-empty.jpg"
python3 - "$src" "$tmp/photos" <<'PY'
import os, shutil, subprocess, sys, zlib, struct
src, out = sys.argv[1], sys.argv[2]
dog = open(f"{src}/data/dog.jpg", "rb").read()
# bytes between two marker segments, right after SOI's first segment
seg = 4 + (dog[4] << 8 | dog[5])
open(f"{out}/3-zz-junk.jpg", "wb").write(dog[:seg] + b"\x12\x34\x56" + dog[seg:])
# damaged entropy-coded data: bits flipped in the middle of the scan, no 0xFF made
sos = dog.index(b"\xff\xda")
data = bytearray(dog)
for k in range(sos + (len(dog) - sos) // 3, sos + (len(dog) - sos) // 2, 97):
    if data[k] != 0xFF and data[k] ^ 0x5A != 0xFF:
        data[k] ^= 0x5A
open(f"{out}/3-zz-damaged.jpg", "wb").write(bytes(data))
# a PNG under a .jpg name (a 2x2 RGB image)
raw = b"".join(b"\x00" + bytes([200, 30, 30, 30, 200, 30]) for _ in range(2))
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)) + \
      chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
open(f"{out}/4-zz-png.jpg", "wb").write(png)
try:
    import cv2
    im = cv2.imread(f"{src}/data/horses.jpg")
    ok, enc = cv2.imencode(".jpg", im, [cv2.IMWRITE_JPEG_PROGRESSIVE, 1])
    open(f"{out}/4-zz-progressive.jpg", "wb").write(enc.tobytes())
    ok, enc = cv2.imencode(".jpg", cv2.cvtColor(im, cv2.COLOR_BGR2GRAY))
    open(f"{out}/4-zz-grey.jpg", "wb").write(enc.tobytes())
except ImportError:
    print("cli_decode_gpu: no OpenCV: no progressive and greyscale JPEGs in the folder")
PY
n=$(ls "$tmp/photos" | wc -l)
run=(--device gpu --model yolo --prec int8 --batch 4 --thresh 0.2 --threads 3
     --calib-cache "$tmp/calib.cache" --timing-cache "$tmp/tactics" --input "$tmp/photos")

"$bin" "${run[@]}" --decode cpu >"$tmp/cpu.jsonl" 2>"$tmp/cpu.err"
rc=$?
if [ $rc -eq 4 ]; then
  echo "no CUDA device visible: skipped ($(tail -1 "$tmp/cpu.err"))"
  exit 77
fi
[ $rc -eq 3 ]; check "--decode cpu: exit 3 for the bad files (got $rc)" $?
grep -q "JPEG decoding on the CPU: libjpeg-turbo (--decode cpu)" "$tmp/cpu.err"
check "--decode cpu says which decoder runs" $?

"$bin" "${run[@]}" --decode gpu >"$tmp/gpu.jsonl" 2>"$tmp/gpu.err"
rc=$?
if grep -q "built without nvJPEG" "$tmp/gpu.err"; then
  [ $rc -ne 0 ] && [ ! -s "$tmp/gpu.jsonl" ]; check "--decode gpu without nvJPEG: refused, no lines" $?
  "$bin" "${run[@]}" >"$tmp/auto.jsonl" 2>"$tmp/auto.err"
  grep -q "JPEG decoding on the CPU: libjpeg-turbo (.*without nvJPEG" "$tmp/auto.err"
  check "--decode auto without nvJPEG: the CPU, saying why" $?
  echo "cli_decode_gpu: this build has no nvJPEG: GPU decoding not tested"
  echo "$pass passed, $fails failed"
  [ $fails -eq 0 ]
  exit
fi
[ $rc -eq 3 ]; check "--decode gpu: exit 3 for the bad files (got $rc)" $?
[ $rc -eq 3 ] || cat "$tmp/gpu.err"
grep -q "JPEG decoding on the GPU: nvJPEG" "$tmp/gpu.err"; check "--decode gpu says which decoder runs" $?
grep -q "GPU decode [0-9]* (" "$tmp/gpu.err"; check "the stage report has the GPU decode" $?
grep "JPEG decoding\|stages" "$tmp/gpu.err"

"$bin" "${run[@]}" >"$tmp/auto.jsonl" 2>"$tmp/auto.err"
grep -q "JPEG decoding on the GPU: nvJPEG" "$tmp/auto.err"; check "--decode auto picks the GPU" $?
cmp -s "$tmp/gpu.jsonl" "$tmp/auto.jsonl"; check "--decode auto prints --decode gpu's lines" $?
"$bin" "${run[@]}" --decode gpu --fast-decode >/dev/null 2>"$tmp/fast.err"
[ $? -eq 2 ] && grep -q "not with --fast-decode" "$tmp/fast.err"
check "--decode gpu --fast-decode refused (exit 2)" $?

python3 - "$tmp/cpu.jsonl" "$tmp/gpu.jsonl" "$n" <<'PY'
import json, sys
cpu = [json.loads(l) for l in open(sys.argv[1])]
gpu = [json.loads(l) for l in open(sys.argv[2])]
n = int(sys.argv[3])
name = lambda l: l["input"].rsplit("/", 1)[1]
assert len(cpu) == len(gpu) == n, (len(cpu), len(gpu), n)
assert [name(l) for l in cpu] == [name(l) for l in gpu] == sorted(name(l) for l in cpu)
for a, b in zip(cpu, gpu):
    f = name(a)
    if f.endswith("zz-damaged.jpg"):
        print("cli_decode_gpu: damaged scan: CPU:", a.get("error", "decoded"), "| GPU:",
              b.get("error", "decoded, %d detections" % len(b.get("detections", []))))
        continue
    if "error" in a or "error" in b:
        assert a == b, (f, a, b)  # the same error line
    elif "-zz-" in f:  # not the GPU decoder's files: the CPU decoded them in both modes
        assert a == b, (f, a, b)
for f in ("cut", "garbage", "empty", "junk"):
    assert any(name(l).endswith(f"zz-{f}.jpg") and "error" in l for l in gpu), f
# every copy of a photo the same in GPU mode; agreement with CPU mode printed
def key(d):
    return (d["class_id"], round(d["left"]), round(d["top"]), round(d["right"]), round(d["bottom"]))
def iou(x, y):
    w = min(x["right"], y["right"]) - max(x["left"], y["left"])
    h = min(x["bottom"], y["bottom"]) - max(x["top"], y["top"])
    inter = max(w, 0) * max(h, 0)
    area = lambda d: (d["right"] - d["left"]) * (d["bottom"] - d["top"])
    return inter / (area(x) + area(y) - inter) if inter > 0 else 0.0
matched = total = 0
for photo in ("dog", "eagle", "giraffe", "horses", "person"):
    copies = [l for l in gpu if name(l).endswith(f"-{photo}.jpg")]
    assert len(copies) == 4, photo
    first = [key(d) for d in copies[0]["detections"]]
    for c in copies[1:]:
        assert [key(d) for d in c["detections"]] == first, (photo, c["input"])
    ref = next(l for l in cpu if name(l) == name(copies[0]))["detections"]
    for d in ref:
        total += 1
        matched += any(e["class_id"] == d["class_id"] and iou(d, e) >= 0.9
                       for e in copies[0]["detections"])
print(f"cli_decode_gpu: CPU-decoded detections found again after GPU decoding (same class, "
      f"IoU >= 0.9): {matched} of {total}")
assert total > 0, "no detections at all: the comparison would be empty"
PY
check "same lines in order; bad files' lines as CPU mode's; CPU-decoded files equal; copies agree" $?

echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
