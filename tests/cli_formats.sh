#!/usr/bin/env bash
# Result formats (--format json|jsonl|coco|yolo-txt|csv, README "Result formats") and annotated
# images (--output DIR): every format of one folder run parsed back and compared with coco's
# exact floats and with --format json; one image given as --input FILE gives the same records;
# bad values refused with one line; a file that cannot be written is reported, counted, and the
# run goes on (exit 3). $1 = the graphrun binary; run from the source root.
set -u
bin=$1
source "$(dirname "$0")/lib/check.sh"

mkdir "$tmp/images"
for i in 000 001 002 003; do cp "data/shapes-val/$i.png" "$tmp/images/$i.png"; done
printf 'not an image' >"$tmp/images/004.png" # fails: an error record (json) or a stderr line
run=(--model shapes --device cpu)

for f in json jsonl coco csv; do
  "$bin" "${run[@]}" --input "$tmp/images" --format $f >"$tmp/out.$f" 2>"$tmp/err.$f"
  rc=$?
  [ $rc -eq 3 ]; check "--format $f: exit 3 for the bad file (got $rc)" $?
done
"$bin" "${run[@]}" --input "$tmp/images" --format yolo-txt --save-conf --output "$tmp/labels/a" \
    >"$tmp/out.yolo" 2>"$tmp/err.yolo"
rc=$?
[ $rc -eq 3 ] && [ ! -s "$tmp/out.yolo" ]; check "--format yolo-txt: exit 3, nothing on stdout (got $rc)" $?
for f in coco csv yolo; do
  grep -q "004.png: .*" "$tmp/err.$f"; check "--format $f: the bad file is one line on stderr" $?
done
"$bin" "${run[@]}" --input "$tmp/images" >"$tmp/out.default" 2>/dev/null
cmp -s "$tmp/out.default" "$tmp/out.jsonl"; check "a folder's default is --format jsonl" $?

# Tolerances: coco holds each float exactly (the fewest digits that read back as the same float);
# json and csv round pixels to 0.1 (so 0.05 + float noise) and probabilities to 1e-6 (5e-7 +
# noise); yolo-txt rounds the normalised values to 1e-6 (5e-7 + noise).
python3 - "$tmp" <<'EOF'
import csv, json, os, sys
tmp = sys.argv[1]
fail = []
def expect(ok, what):
    if not ok:
        fail.append(what)
doc = json.load(open(f"{tmp}/out.json"))
lines = [json.loads(l) for l in open(f"{tmp}/out.jsonl")]
expect(doc["images"] == lines, "json's images are jsonl's lines")
expect(doc["model"] == "shapes" and doc["precision"] == "fp32", "json's header")
expect(len(lines) == 5 and "error" in lines[4] and "004.png" in lines[4]["input"], "jsonl error line")
coco = json.load(open(f"{tmp}/out.coco"))
rows = list(csv.DictReader(open(f"{tmp}/out.csv")))
expect(open(f"{tmp}/out.csv").readline() == "path,class_id,class,conf,x1,y1,x2,y2\n", "csv header")
k = 0
n_boxes = 0
for img in lines[:4]:
    stem = os.path.splitext(os.path.basename(img["input"]))[0]
    W, H = img["width"], img["height"]
    yolo = [l.split() for l in open(f"{tmp}/labels/a/{stem}.txt")]
    expect(len(yolo) == len(img["detections"]), f"{stem}: yolo-txt lines")
    mine = [c for c in coco if c["image_id"] == int(stem)]
    expect(len(mine) == len(img["detections"]), f"{stem}: coco boxes")
    for j, d in enumerate(img["detections"]):
        n_boxes += 1
        c = mine[j] if j < len(mine) else None
        if c is None:
            break
        x, y, w, h = c["bbox"]
        expect(c["category_id"] == d["class_id"], f"{stem}:{j} coco category_id (not COCO's 80: the class)")
        expect(abs(c["score"] - d["prob"]) <= 6e-7, f"{stem}:{j} coco score {c['score']} vs {d['prob']}")
        for got, want in ((x, d["left"]), (y, d["top"]), (x + w, d["right"]), (y + h, d["bottom"])):
            expect(abs(got - want) <= 0.0501, f"{stem}:{j} coco bbox {c['bbox']} vs json {d}")
        r = rows[k]; k += 1
        expect(r["path"] == img["input"] and int(r["class_id"]) == d["class_id"] and r["class"] == d["class"],
               f"{stem}:{j} csv row {r}")
        expect(abs(float(r["conf"]) - c["score"]) <= 6e-7, f"{stem}:{j} csv conf")
        for got, want in ((r["x1"], x), (r["y1"], y), (r["x2"], x + w), (r["y2"], y + h)):
            expect(abs(float(got) - want) <= 0.0501, f"{stem}:{j} csv box {r} vs coco {c}")
        cls, cx, cy, bw, bh, conf = yolo[j]
        for got, want in ((cx, (x + w / 2) / W), (cy, (y + h / 2) / H), (bw, w / W), (bh, h / H), (conf, c["score"])):
            expect(abs(float(got) - want) <= 6e-7, f"{stem}:{j} yolo-txt {yolo[j]} vs coco {c}")
        expect(int(cls) == d["class_id"], f"{stem}:{j} yolo-txt class")
expect(k == len(rows) and n_boxes == len(coco) and n_boxes > 4, f"box counts: csv {len(rows)}, coco {len(coco)}, json {n_boxes}")
expect(not os.path.exists(f"{tmp}/labels/a/004.txt"), "no label file for the bad image")
for f in fail:
    print("FAIL:", f)
sys.exit(1 if fail else 0)
EOF
check "every format holds the same boxes as --format json and coco (parsed back)" $?

# One image as --input FILE: the same records as its line in the folder run.
"$bin" "${run[@]}" --no-output --input "$tmp/images/001.png" --format jsonl >"$tmp/one.jsonl" 2>/dev/null
sed -n 2p "$tmp/out.jsonl" | cmp -s - "$tmp/one.jsonl"; check "--input FILE --format jsonl = the folder's line" $?
"$bin" "${run[@]}" --no-output --input "$tmp/images/001.png" --format coco >"$tmp/one.coco" 2>/dev/null
python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=[c for c in json.load(open(sys.argv[2])) if c["image_id"]==1]; sys.exit(a!=b)' \
    "$tmp/one.coco" "$tmp/out.coco"
check "--input FILE --format coco = the folder's boxes of that image" $?
"$bin" "${run[@]}" --no-output --input "$tmp/images/001.png" --format csv >"$tmp/one.csv" 2>/dev/null
{ head -n1 "$tmp/out.csv"; grep '/001.png,' "$tmp/out.csv"; } | cmp -s - "$tmp/one.csv"
check "--input FILE --format csv = the header and the folder's rows of that image" $?
"$bin" "${run[@]}" --input "$tmp/images/001.png" --format yolo-txt --output "$tmp/one" >/dev/null 2>&1
cut -d' ' -f1-5 "$tmp/labels/a/001.txt" | cmp -s - "$tmp/one/001.txt"
check "--input FILE --format yolo-txt = the folder's label file (without --save-conf)" $?

# Bad values: one line, exit 2, nothing run.
usage() { # usage NAME PATTERN ARGS...
  local name=$1 pattern=$2
  shift 2
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "$pattern" "$tmp/err" && [ ! -s "$tmp/out" ]
  check "$name: exit 2, one line '$pattern' (got $rc: $(head -c 200 "$tmp/err"))" $?
}
usage "--format xml" "^graphrun: --format 'xml' is not text, json, jsonl, coco, yolo-txt or csv$" "${run[@]}" --format xml
usage "--json --format csv" "two formats" "${run[@]}" --json --format csv
usage "--save-conf without yolo-txt" "--save-conf applies to --format yolo-txt" "${run[@]}" --save-conf
usage "yolo-txt without --output" "give their folder as --output DIR" "${run[@]}" --format yolo-txt --input "$tmp/images"
usage "compare --format coco" "compare" compare --format coco

# --output DIR: annotated images, made with their parents, same names, boxes drawn.
"$bin" "${run[@]}" --input "$tmp/images" --output "$tmp/drawn/x" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 3 ] && [ -s "$tmp/drawn/x/000.png" ] && [ -s "$tmp/drawn/x/003.png" ] && [ ! -e "$tmp/drawn/x/004.png" ]
check "--output DIR: one image per good input, folder made (exit 3 for the bad one; got $rc)" $?
python3 -c 'import sys; d=open(sys.argv[1],"rb").read(); sys.exit(d[:8]!=b"\x89PNG\r\n\x1a\n")' "$tmp/drawn/x/000.png"
check "--output DIR: 000.png is a PNG" $?
! cmp -s "$tmp/drawn/x/000.png" "$tmp/images/000.png"; check "--output DIR: boxes drawn (not a copy)" $?

# A file that cannot be written: reported with its name, counted, the others written.
mkdir -p "$tmp/blocked/001.png"   # a folder where 001.png should go
"$bin" "${run[@]}" --input "$tmp/images" --output "$tmp/blocked" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 3 ] && grep -q "blocked/001.png" "$tmp/err" && grep -q "1 output files could not be written" "$tmp/err" &&
  [ -s "$tmp/blocked/000.png" ] && [ -s "$tmp/blocked/002.png" ] && [ "$(wc -l <"$tmp/out")" -eq 5 ]
check "--output DIR: an image not written is one line, counted, the run goes on (exit 3, got $rc)" $?
mkdir -p "$tmp/blocked-labels/002.txt"
"$bin" "${run[@]}" --input "$tmp/images" --format yolo-txt --output "$tmp/blocked-labels" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 3 ] && grep -q "blocked-labels/002.txt: not a regular file (a directory)" "$tmp/err" && [ -e "$tmp/blocked-labels/003.txt" ]
check "yolo-txt: a label file not written is one line, the others written (exit 3, got $rc)" $?
: >"$tmp/plainfile"
"$bin" "${run[@]}" --input "$tmp/images" --output "$tmp/plainfile/sub" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 3 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "plainfile.*cannot make the folder" "$tmp/err" && [ ! -s "$tmp/out" ]
check "--output DIR under a file: one line, exit 3 before any image (got $rc)" $?

echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
