#!/usr/bin/env bash
# CLI on a GPU: a folder streamed through the GPU engine (uint8 letterbox straight into the pinned
# slot buffers, 4 runs in flight). 30 photos (the five bundled ones x 6) and a truncated JPEG in
# batches of 4 = 8 batches through 4 slots: one line per image in order, the bad file on its line,
# exit 3, and every copy of a photo gets the same detections as the others and as the photo run
# alone, wherever it sat (batch, slot, position in the batch). Without a GPU: exit 77 (skipped).
# $1 = the graphrun binary.
#
# Tolerance: copies of one photo are the same input bytes through the same int8 kernels at the same
# batch size, so they should agree exactly; the check allows prob +-0.01 and boxes +-1 pixel in case
# a kernel's reduction order differs between runs (split-K). A slot or ordering mix-up gives another
# photo's boxes (other sizes, classes, hundreds of pixels apart), far outside that.
set -u
bin=$1
src=$(pwd)
source "$(dirname "$0")/lib/check.sh"

mkdir "$tmp/photos"
for i in 1 2 3 4 5 6; do
  for f in "$src"/data/*.jpg; do cp "$f" "$tmp/photos/$i-$(basename "$f")"; done
done
head -c 20000 "$src/data/dog.jpg" >"$tmp/photos/3-cut.jpg"
run=(--device gpu --model yolo --prec int8 --thresh 0.2 --decode cpu --calib-cache "$tmp/calib.cache")

"$bin" "${run[@]}" --input "$tmp/photos" --batch 4 --threads 3 >"$tmp/a.jsonl" 2>"$tmp/a.err"
rc=$?
if [ $rc -eq 4 ]; then
  echo "no CUDA device visible: skipped ($(tail -1 "$tmp/a.err"))"
  exit 77
fi
[ $rc -eq 3 ]; check "exit status 3 for the bad file (got $rc)" $?
[ $rc -eq 3 ] || cat "$tmp/a.err"
grep -q "31 images, 3 decoding threads, batches of 4, 4 in flight" "$tmp/a.err"
check "8 batches through 4 slots" $?
grep -q "waiting for decoded batches" "$tmp/a.err"; check "where the time went" $?

for f in dog eagle giraffe horses person; do
  "$bin" "${run[@]}" --input "$src/data/$f.jpg" --json --no-output 2>/dev/null >"$tmp/alone-$f.json"
done
python3 - "$tmp/a.jsonl" "$tmp" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
names = [l["input"].rsplit("/", 1)[1] for l in lines]
assert names == sorted(names) and len(names) == 31, names
assert "corrupt image: JPEG" in lines[names.index("3-cut.jpg")]["error"]
sizes = {"dog": (768, 576), "eagle": (773, 512), "giraffe": (500, 500), "horses": (773, 512),
         "person": (640, 424)}

def same(a, b):
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x["class_id"] != y["class_id"] or abs(x["prob"] - y["prob"]) > 0.01:
            return False
        if any(abs(x[k] - y[k]) > 1.0 for k in ("left", "top", "right", "bottom")):
            return False
    return True

total = 0
for photo, size in sizes.items():
    alone = json.load(open(f"{sys.argv[2]}/alone-{photo}.json"))["images"][0]["detections"]
    copies = [l for n, l in zip(names, lines) if n.endswith(f"-{photo}.jpg")]
    assert len(copies) == 6, photo
    for c in copies:
        assert (c["width"], c["height"]) == size, (photo, c["width"], c["height"])
        assert same(c["detections"], alone), (photo, c["input"], c["detections"][:3], alone[:3])
    total += len(alone)
assert total > 0, "no detections at all: the comparison would be empty"
PY
check "every copy of a photo == the photo alone (prob +-0.01, box +-1 px), in order, right sizes" $?

# Reporting (detection decoding + JSON) runs on the decoding threads and the main thread: with 1
# and with 8 threads every line matches the 3-thread run's (same tolerance as above: a rebuilt
# engine may pick other tactics; an ordering mix-up gives another photo's boxes).
for threads in 1 8; do
  "$bin" "${run[@]}" --input "$tmp/photos" --batch 4 --threads $threads >"$tmp/t$threads.jsonl" 2>"$tmp/t$threads.err"
  [ $? -eq 3 ] && python3 - "$tmp/a.jsonl" "$tmp/t$threads.jsonl" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert [l["input"] for l in a] == [l["input"] for l in b]
for x, y in zip(a, b):
    assert ("error" in x) == ("error" in y), (x, y)
    if "error" in x:
        continue
    dx, dy = x["detections"], y["detections"]
    assert len(dx) == len(dy), (x["input"], len(dx), len(dy))
    for p, q in zip(dx, dy):
        assert p["class_id"] == q["class_id"] and abs(p["prob"] - q["prob"]) <= 0.01, (p, q)
        assert all(abs(p[k] - q[k]) <= 1.0 for k in ("left", "top", "right", "bottom")), (p, q)
PY
  check "--threads $threads: the same lines as with 3 threads" $?
done
grep "main thread" "$tmp/t8.err"

# Result formats and annotated images on the GPU path (uint8 slots; the drawn image is decoded
# again at full size): --format coco holds the jsonl run's boxes (same tolerance as above: a
# rebuilt engine may pick other tactics), one image drawn per readable photo, the bad file
# reported on stderr (coco has no place for it), exit 3.
"$bin" "${run[@]}" --input "$tmp/photos" --batch 4 --format coco --output "$tmp/drawn" \
    >"$tmp/c.json" 2>"$tmp/c.err"
rc=$?
[ $rc -eq 3 ] && grep -q "3-cut.jpg" "$tmp/c.err" && [ "$(ls "$tmp/drawn" | wc -l)" -eq 30 ] &&
  [ ! -e "$tmp/drawn/3-cut.jpg" ] && python3 - "$tmp/a.jsonl" "$tmp/c.json" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
coco = json.load(open(sys.argv[2]))
want = [(i, d) for i, l in enumerate(lines) for d in l.get("detections", [])]
assert len(coco) == len(want), (len(coco), len(want))
for c, (i, d) in zip(coco, want):
    assert c["image_id"] == i and c["category_id"] == d["class_id"], (c, d)  # VOC: 20 classes
    assert abs(c["score"] - d["prob"]) <= 0.01, (c, d)
    x, y, w, h = c["bbox"]
    for got, ref in ((x, d["left"]), (y, d["top"]), (x + w, d["right"]), (y + h, d["bottom"])):
        assert abs(got - ref) <= 1.0, (c, d)
PY
check "GPU: --format coco = the jsonl boxes, --output DIR draws 30 photos, exit 3 (got $rc)" $?

echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
