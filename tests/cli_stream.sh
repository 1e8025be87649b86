#!/usr/bin/env bash
# CLI: folders and lists of images (--input DIR, --input-list FILE) on the CPU reference with a
# tiny network: one JSON line per image in sorted order, a bad file reported on its own line while
# the rest go on (exit 3), and every image's detections identical whatever the batch size and the
# number of decoding threads, and identical to running that image alone; more batches than buffers
# in flight with bad files among them. $1 = the graphrun binary.
set -u
bin=$1
src=$(pwd)
source "$(dirname "$0")/lib/check.sh"

printf '[net]\nwidth=16\nheight=16\nchannels=3\n[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\nstride=1\npad=1\nactivation=leaky\n[maxpool]\nsize=2\nstride=2\n[convolutional]\nfilters=14\nsize=1\nstride=1\nactivation=linear\n[region]\nanchors=1.5,2.5,3,3\nclasses=2\ncoords=4\nnum=2\nsoftmax=1\n' >"$tmp/small.cfg"
mkdir "$tmp/images"
for f in grey3x9.jpg grey7x4.png rgb8x6.bmp rgb8x6.jpg rgb8x6.png rgba5x3.png; do
  cp "$src/tests/fuzz/corpus/image/$f" "$tmp/images/$f"
done
cp "$src/data/dog.jpg" "$tmp/images/Dog.JPG"                 # extensions match in any case
head -c 20000 "$src/data/dog.jpg" >"$tmp/images/cut.jpg"       # truncated: fails on its line
echo "not an image" >"$tmp/images/notes.txt"                 # not an image name: skipped
run=(--device cpu --cfg "$tmp/small.cfg" --thresh 0.2)

"$bin" "${run[@]}" --input "$tmp/images/" --batch 3 --threads 2 >"$tmp/a.jsonl" 2>"$tmp/a.err"
rc=$?
[ $rc -eq 3 ]; check "a bad file makes the exit status 3 (got $rc)" $?
[ "$(wc -l <"$tmp/a.jsonl")" -eq 8 ]; check "one line per image (8)" $?
grep -q '"input": "[^"]*/cut.jpg", "error": "[^"]*cut.jpg: corrupt image: JPEG: ' "$tmp/a.jsonl"
check "the truncated JPEG's line holds its error" $?
grep -q "notes.txt" "$tmp/a.jsonl"; check "non-image names are skipped" $((1 - $?))
grep -q '8 images in .* images/s from files on disk to detections; 1 failed' "$tmp/a.err"
check "summary on stderr" $?
python3 - "$tmp/a.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
names = [l["input"].rsplit("/", 1)[1] for l in lines]
assert names == sorted(names), names
assert sum("detections" in l for l in lines) == 7
PY
check "every line is a JSON object, sorted by name" $?

# The same images from a list file, in the list's order, one at a time on one thread.
# (byte order, as the folder mode sorts: the machine's locale may sort Dog.JPG elsewhere)
ls "$tmp/images/"* | grep -v notes.txt | LC_ALL=C sort >"$tmp/list.txt"
"$bin" "${run[@]}" --input-list "$tmp/list.txt" --batch 1 --threads 1 >"$tmp/b.jsonl" 2>/dev/null
sed 's|images//|images/|' "$tmp/a.jsonl" | cmp -s - "$tmp/b.jsonl"
same=$?
check "batch 3 x 2 threads == batch 1 x 1 thread, folder == list" $same
[ $same = 0 ] || sed 's|images//|images/|' "$tmp/a.jsonl" | diff - "$tmp/b.jsonl" | head -20

# One image alone through the ordinary path gives the same detections.
"$bin" "${run[@]}" --no-output --json --input "$tmp/images/rgb8x6.png" 2>/dev/null |
  python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["images"][0]["detections"]))' >"$tmp/alone.json"
python3 -c 'import json,sys
for l in open(sys.argv[1]):
    o = json.loads(l)
    if o["input"].endswith("/rgb8x6.png"): print(json.dumps(o["detections"]))' "$tmp/b.jsonl" >"$tmp/streamed.json"
[ -s "$tmp/alone.json" ] && cmp -s "$tmp/alone.json" "$tmp/streamed.json"
check "streamed detections == single-image detections" $?

# Many batches through the ring of batch buffers (7 batches, 4 in flight), bad files among them:
# each error on its own line in sorted order, the others' detections unchanged, exit status 3,
# and the same lines whatever the batch size and thread count (1 batch: 1 buffer).
mkdir "$tmp/many"
for i in 00 01 02 03 04 05 06 07 08 09; do cp "$src/tests/fuzz/corpus/image/rgb8x6.png" "$tmp/many/img$i.png"; done
: >"$tmp/many/img03_empty.jpg"                                  # empty file
mkdir "$tmp/many/img06_dir.jpg"                                 # a directory with an image's name
cp "$tmp/images/cut.jpg" "$tmp/many/img08_cut.jpg"              # truncated JPEG
"$bin" "${run[@]}" --input "$tmp/many" --batch 2 --threads 3 >"$tmp/m2.jsonl" 2>"$tmp/m2.err"
rc=$?
[ $rc -eq 3 ]; check "many batches with bad files: exit status 3 (got $rc)" $?
grep -q "13 images, 3 decoding threads, batches of 2, 4 in flight" "$tmp/m2.err"
check "7 batches run 4 in flight" $?
grep -q "; 3 failed" "$tmp/m2.err"; check "3 failed in the summary" $?
grep -q "with the listing and the engine build" "$tmp/m2.err"; check "the time with the build too" $?
python3 - "$tmp/m2.jsonl" "$tmp/many" <<'PY'
import json, os, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
names = [l["input"].rsplit("/", 1)[1] for l in lines]
assert names == sorted(os.listdir(sys.argv[2])), names
bad = {n: l["error"] for n, l in zip(names, lines) if "error" in l}
assert sorted(bad) == ["img03_empty.jpg", "img06_dir.jpg", "img08_cut.jpg"], bad
assert "not a JPEG, PNG or BMP" in bad["img03_empty.jpg"], bad
assert "img06_dir.jpg" in bad["img06_dir.jpg"] and "corrupt image: JPEG" in bad["img08_cut.jpg"]
good = [json.dumps(l["detections"]) for l in lines if "error" not in l]
assert len(good) == 10 and len(set(good)) == 1, good  # ten copies of one image
PY
check "errors on their lines in order, the other images' detections identical" $?
for variant in "--batch 1 --threads 1" "--batch 16 --threads 2" "--batch 3 --threads 5"; do
  "$bin" "${run[@]}" --input "$tmp/many" $variant >"$tmp/mv.jsonl" 2>"$tmp/mv.err"
  rc=$?
  [ $rc -eq 3 ] && cmp -s "$tmp/m2.jsonl" "$tmp/mv.jsonl"; check "same lines with $variant" $?
done
grep -q "batches of 3, 4 in flight" "$tmp/mv.err"; check "batch 3: 5 batches, 4 in flight" $?
"$bin" "${run[@]}" --input "$tmp/many" --batch 16 >/dev/null 2>"$tmp/m16.err"
grep -q "batches of 16, 1 in flight" "$tmp/m16.err"; check "one batch: one buffer" $?

# Reporting (detections decoded, JSON lines formatted) runs on the decoding threads and the main
# thread, image by image, while the lines are written in input order: the output is byte for byte
# the same with 1 thread and with several, at thresholds where every image has many detections
# (0.005 and 0, the worst case for NMS and JSON), over more batches than buffers, bad file included.
mkdir "$tmp/varied"
for i in 0 1 2; do
  for f in "$tmp/images/"*; do cp "$f" "$tmp/varied/v${i}_$(basename "$f")"; done
done
for thresh in 0.005 0; do
  "$bin" "${run[@]}" --thresh $thresh --input "$tmp/varied" --batch 4 --threads 1 >"$tmp/v1.jsonl" 2>"$tmp/v1.err"
  [ $? -eq 3 ]; check "thresh $thresh, 1 thread: exit 3 for the bad files" $?
  python3 - "$tmp/v1.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 24, len(lines)
dets = [len(l["detections"]) for l in lines if "error" not in l]
assert len(dets) == 21 and min(dets) >= 3, dets
PY
  check "thresh $thresh: 24 lines, every decoded image with several detections" $?
  for threads in 2 3 8; do
    "$bin" "${run[@]}" --thresh $thresh --input "$tmp/varied" --batch 4 --threads $threads >"$tmp/vn.jsonl" 2>"$tmp/vn.err"
    [ $? -eq 3 ] && cmp -s "$tmp/v1.jsonl" "$tmp/vn.jsonl"
    check "thresh $thresh: the same bytes with $threads threads as with 1" $?
  done
done
grep -q "workers .* s decoding detections and formatting JSON (in total)" "$tmp/vn.err"
check "the summary splits the reporting between the main thread and the workers" $?

# --fast-decode: Dog.JPG (768x576, more than twice the 16x12 letterbox) is decoded at 1/8 scale,
# still reported at its own size; every other line (small JPEGs, PNG, BMP, the bad file) unchanged.
"$bin" "${run[@]}" --input "$tmp/images" --batch 3 --threads 2 --fast-decode >"$tmp/f.jsonl" 2>"$tmp/f.err"
rc=$?
[ $rc -eq 3 ] && grep -q "fast-decode" "$tmp/f.err"; check "--fast-decode runs (exit 3 for the bad file)" $?
python3 - "$tmp/a.jsonl" "$tmp/f.jsonl" <<'PY'
import json, sys
exact = [json.loads(l) for l in open(sys.argv[1])]
fast = [json.loads(l) for l in open(sys.argv[2])]
assert [l["input"] for l in exact] == [l["input"] for l in fast]
for e, f in zip(exact, fast):
    if e["input"].endswith("Dog.JPG"):
        assert (f["width"], f["height"]) == (768, 576), f
    else:
        assert e == f, (e, f)
PY
check "--fast-decode: only the large JPEG's line may change, its size stays 768x576" $?
"$bin" "${run[@]}" --input data/dog.jpg --fast-decode --no-output >/dev/null 2>"$tmp/g.err"
[ $? -eq 2 ] && grep -q "fast-decode applies to --input DIR" "$tmp/g.err"
check "--fast-decode without a folder or list: usage error" $?

"$bin" "${run[@]}" --input "$tmp/images" --input data/dog.jpg >/dev/null 2>"$tmp/c.err"
[ $? -eq 2 ] && grep -q "only input of a run" "$tmp/c.err"; check "a directory plus another input is a usage error" $?
mkdir "$tmp/empty"
"$bin" "${run[@]}" --input "$tmp/empty" >/dev/null 2>"$tmp/d.err"
[ $? -eq 3 ] && grep -q "no images" "$tmp/d.err"; check "an empty directory: exit 3" $?
"$bin" "${run[@]}" --input-list "$tmp/missing.txt" >/dev/null 2>"$tmp/e.err"
[ $? -eq 3 ] && grep -q "missing.txt" "$tmp/e.err"; check "a missing list: exit 3" $?

echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
