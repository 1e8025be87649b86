#!/usr/bin/env bash
# `graphrun eval` with COCO files (docs/eval.md "COCO files"): the bundled labelled set's YOLO
# labels converted here into a COCO instances file must score exactly as the labels do, and the
# COCO results of a folder run (--format coco) scored with --detections must give the very same
# mAPs and per-class table (the boxes and scores are written to read back as the same floats, so
# exact equality is expected, not a tolerance). Then crowd regions, the category mapping and the
# errors. $1 = the graphrun binary; run from the source root.
set -u
bin=$1
source "$(dirname "$0")/lib/check.sh"

mkdir "$tmp/images"
for i in $(seq -w 0 19); do cp "data/shapes-val/0$i.png" "$tmp/images/"; done

# instances.json from the YOLO labels: bbox [x, y, w, h] in pixels, ids from the file names
# (000.png is image 0), categories = the model's classes by id and name.
to_coco() { # to_coco OUT NAMES [CROWD]: CROWD adds a crowd region over the first image
  python3 - "$tmp/images" "$1" "$2" "${3:-}" <<'EOF'
import json, os, struct, sys
d, out, names, crowd = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[4]
images, anns = [], []
for f in sorted(os.listdir(d)):
    W, H = struct.unpack(">II", open(os.path.join(d, f), "rb").read(24)[16:24])  # PNG IHDR
    iid = int(f[:-4])
    images.append({"id": iid, "file_name": f, "width": W, "height": H, "license": 1})
    for line in open(os.path.join("data/shapes-val", f[:-4] + ".txt")):
        if not line.strip():
            continue
        c, cx, cy, w, h = line.split()
        cx, cy, w, h = float(cx), float(cy), float(w), float(h)
        x, y = (cx - w / 2) * W, (cy - h / 2) * H
        anns.append({"id": len(anns) + 1, "image_id": iid, "category_id": int(c),
                     "bbox": [x, y, w * W, h * H], "area": w * W * h * H, "iscrowd": 0,
                     "segmentation": [[x, y, x + w * W, y, x, y + h * H]]})
if crowd:
    anns.append({"id": 9999, "image_id": 0, "category_id": 0, "bbox": [0, 0, 160, 160],
                 "iscrowd": 1, "segmentation": {"counts": [0, 25600], "size": [160, 160]}})
json.dump({"info": {"description": "shapes-val, first 20"}, "licenses": [], "images": images,
           "annotations": anns, "categories": [{"id": i, "name": n, "supercategory": "shape"}
                                               for i, n in enumerate(names)]}, open(out, "w"))
EOF
}
names=circle,square,triangle,diamond,cross
to_coco "$tmp/instances.json" $names

e=(eval --model shapes --device cpu --json)
"$bin" "${e[@]}" --images "$tmp/images" --labels data/shapes-val >"$tmp/yolo.json" 2>"$tmp/err"
check "eval with the YOLO labels runs (exit $?)" $?
"$bin" "${e[@]}" --images "$tmp/images" --coco-annotations "$tmp/instances.json" >"$tmp/coco.json" 2>"$tmp/err"
check "eval --coco-annotations runs (exit $?)" $?
cmp -s "$tmp/yolo.json" "$tmp/coco.json"; check "--coco-annotations scores exactly as the YOLO labels" $?

# The folder's COCO results at eval's settings (threshold 0.005, NMS 0.45), scored without a model.
"$bin" --model shapes --device cpu --input "$tmp/images" --format coco --thresh 0.005 --nms 0.45 \
    >"$tmp/results.json" 2>/dev/null
check "--format coco of the folder (exit $?)" $?
"$bin" eval --coco-annotations "$tmp/instances.json" --detections "$tmp/results.json" --json \
    >"$tmp/det.json" 2>"$tmp/err"
check "eval --detections runs (exit $?: $(head -c 200 "$tmp/err"))" $?
python3 - "$tmp/yolo.json" "$tmp/det.json" <<'EOF'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
ra, rb = a["results"][0], b["results"][0]
keys = ("map50", "map50_95", "detections")
same = all(ra[k] == rb[k] for k in keys) and ra["classes"] == rb["classes"] and \
    a["images"] == b["images"] and a["ground_truth"] == b["ground_truth"]
print("own mAP@0.5 %.6f mAP@0.5:0.95 %.6f; from the COCO results %.6f %.6f" %
      (ra["map50"], ra["map50_95"], rb["map50"], rb["map50_95"]))
sys.exit(0 if same and ra["map50"] > 0.5 else 1)
EOF
check "the COCO results score exactly graphrun's own mAPs and per-class table" $?

# Categories whose names are not the model's: category_id is the 0-based class (as --format coco
# writes it for a model that is not COCO's 80).
to_coco "$tmp/renamed.json" c0,c1,c2,c3,c4
"$bin" "${e[@]}" --images "$tmp/images" --coco-annotations "$tmp/renamed.json" >"$tmp/renamed.out" 2>/dev/null
cmp -s "$tmp/yolo.json" "$tmp/renamed.out"; check "categories mapped by id when their names are not the model's" $?

# A crowd region: VOC leaves it out (said on stderr), so the VOC scores do not move; COCO keeps
# it as an ignored region (its detections neither true nor false positives: the mAP cannot drop)
# and counts no ground truth for it.
to_coco "$tmp/crowd.json" $names crowd
"$bin" "${e[@]}" --images "$tmp/images" --labels data/shapes-val --metric voc >"$tmp/yolo-voc.json" 2>/dev/null
"$bin" "${e[@]}" --images "$tmp/images" --coco-annotations "$tmp/crowd.json" --metric voc \
    >"$tmp/crowd.out" 2>"$tmp/err"
cmp -s "$tmp/yolo-voc.json" "$tmp/crowd.out" && grep -q "1 crowd annotations (iscrowd 1) left out" "$tmp/err"
check "--metric voc: iscrowd annotations left out and counted" $?
"$bin" "${e[@]}" --images "$tmp/images" --coco-annotations "$tmp/crowd.json" >"$tmp/crowd.out" 2>"$tmp/err"
python3 - "$tmp/yolo.json" "$tmp/crowd.out" <<'PY'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
ra, rb = a["results"][0], b["results"][0]
sys.exit(0 if a["ground_truth"] == b["ground_truth"] and rb["map50_95"] >= ra["map50_95"] else 1)
PY
[ $? -eq 0 ] && grep -q "1 crowd annotations (iscrowd 1)$" "$tmp/err"
check "coco: a crowd region counts no ground truth and can only ignore detections" $?

# An image of the folder that the file does not list has no objects (said on stderr).
cp data/shapes-val/020.png "$tmp/images/extra.png"
"$bin" "${e[@]}" --images "$tmp/images" --coco-annotations "$tmp/instances.json" >/dev/null 2>"$tmp/err"
grep -q "1 images of .* are not in .*instances.json (no objects)" "$tmp/err"
check "an image the annotations do not list: counted on stderr" $?
rm "$tmp/images/extra.png"

# A model of COCO's 80 classes: --format coco writes COCO's ids (coco80_to_91), and eval maps an
# instances file's COCO ids back to the classes (names that are not the model's: by id). Ground
# truth = the run's own boxes of score >= 0.1 (synthetic weights), so that every one is found by
# the identical detection: both ways must score exactly 1.
printf '[net]\nwidth=32\nheight=32\nchannels=3\n[convolutional]\nfilters=8\nsize=3\nstride=1\npad=1\nactivation=leaky\n[convolutional]\nfilters=170\nsize=1\nstride=1\nactivation=linear\n[region]\nanchors=1.5,2.5,3,3\nclasses=80\ncoords=4\nnum=2\nsoftmax=1\n' >"$tmp/c80.cfg"
mkdir "$tmp/few"
cp "$tmp"/images/00{0,1,2,3,4}.png "$tmp/few/"
c80=(--device cpu --cfg "$tmp/c80.cfg" --input "$tmp/few" --thresh 0.005)
"$bin" "${c80[@]}" --format coco >"$tmp/c80.json" 2>/dev/null && "$bin" "${c80[@]}" >"$tmp/c80.jsonl" 2>/dev/null
python3 - "$tmp/c80.json" "$tmp/c80.jsonl" "$tmp/c80-gt.json" <<'EOF'
import json, sys
ids = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 27,
       28, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52, 53,
       54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80,
       81, 82, 84, 85, 86, 87, 88, 89, 90]  # the published coco80_to_91 table
coco = json.load(open(sys.argv[1]))
lines = [json.loads(l) for l in open(sys.argv[2])]
classes = [d["class_id"] for l in lines for d in l["detections"]]
assert len(coco) == len(classes) > 20, (len(coco), len(classes))
assert [c["category_id"] for c in coco] == [ids[k] for k in classes]
gt = [dict(c, id=i + 1, iscrowd=0) for i, c in enumerate(coco) if c["score"] >= 0.1]
assert len(gt) > 5, len(gt)
json.dump({"images": [{"id": i, "file_name": "00%d.png" % i} for i in range(5)], "annotations": gt,
           "categories": [{"id": k, "name": "c%d" % k} for k in ids]}, open(sys.argv[3], "w"))
EOF
check "80 classes: --format coco category_id = coco80_to_91(class_id)" $?
"$bin" eval --device cpu --cfg "$tmp/c80.cfg" --images "$tmp/few" --coco-annotations "$tmp/c80-gt.json" \
    --json >"$tmp/c80-eval.json" 2>/dev/null
grep -q '"map50": 1.000000, "map50_95": 1.000000' "$tmp/c80-eval.json"
check "80 classes: eval maps COCO's category ids back to the classes (mAP exactly 1)" $?
"$bin" eval --coco-annotations "$tmp/c80-gt.json" --detections "$tmp/c80.json" --json >"$tmp/c80-det.json" 2>/dev/null
grep -q '"map50": 1.000000, "map50_95": 1.000000' "$tmp/c80-det.json"
check "80 classes: --detections in COCO's ids (mAP exactly 1)" $?

# Errors: one line naming the file (and the byte offset for malformed JSON), exit 3; usage, exit 2.
fails_with() { # fails_with NAME STATUS PATTERN ARGS...
  local name=$1 want=$2 pattern=$3
  shift 3
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ $rc -eq "$want" ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "$pattern" "$tmp/err" && [ ! -s "$tmp/out" ]
  check "$name: exit $want, one line '$pattern' (got $rc: $(head -c 300 "$tmp/err"))" $?
}
printf '{"images": [{"id": 1, "file_name": "000.png"}], "categories": [' >"$tmp/cut.json"
fails_with "a cut instances file" 3 "cut.json: byte 67: expected an object" \
    eval --coco-annotations "$tmp/cut.json" --detections "$tmp/results.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["annotations"][3]["image_id"]=12345; json.dump(d,open(sys.argv[2],"w"))' \
    "$tmp/instances.json" "$tmp/orphan.json"
fails_with "an annotation of an unlisted image" 3 "orphan.json: box 3: image_id 12345 is not among" \
    eval --coco-annotations "$tmp/orphan.json" --detections "$tmp/results.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d[0]["category_id"]=77; json.dump(d,open(sys.argv[2],"w"))' \
    "$tmp/results.json" "$tmp/badcat.json"
fails_with "a result of an unknown category" 3 "badcat.json: category_id 77 is not among" \
    eval --coco-annotations "$tmp/instances.json" --detections "$tmp/badcat.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["categories"].append({"id": 9, "name": "star"}); d["annotations"][0]["category_id"]=9; json.dump(d,open(sys.argv[2],"w"))' \
    "$tmp/renamed.json" "$tmp/nine.json"
fails_with "a category that is none of the model's classes" 3 'category 9 ("star") is none of the model' \
    eval --model shapes --device cpu --images "$tmp/images" --coco-annotations "$tmp/nine.json"
# Ground truth that cannot be used: one line, exit 3, before any score.
edit() { # edit IN OUT PYTHON-STATEMENT-ON-d
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); exec(sys.argv[3]); json.dump(d,open(sys.argv[2],"w"))' "$@"
}
to_coco "$tmp/partial.json" circle,square,tri,diamond,cross
fails_with "category names that only partly match the classes" 3 \
    '4 of its 5 category names are the model.s class names but category 2 ("tri") is not' \
    eval --model shapes --device cpu --images "$tmp/images" --coco-annotations "$tmp/partial.json"
to_coco "$tmp/twice.json" circle,circle,triangle,diamond,cross
fails_with "two categories of one name" 3 'categories 0 and 1 have the same name "circle"' \
    eval --model shapes --device cpu --images "$tmp/images" --coco-annotations "$tmp/twice.json"
edit "$tmp/instances.json" "$tmp/samefile.json" 'd["images"][1]["file_name"] = "sub/000.png"'
fails_with "two images of one file_name" 3 'images 0 and 1 have the same file_name "000.png"' \
    eval --model shapes --device cpu --images "$tmp/images" --coco-annotations "$tmp/samefile.json"
edit "$tmp/instances.json" "$tmp/flat.json" 'd["annotations"][2]["bbox"][3] = 0'
fails_with "a zero-height bbox" 3 "flat.json: annotation 2 (image_id .*): bbox of zero width or height" \
    eval --coco-annotations "$tmp/flat.json" --detections "$tmp/results.json"
edit "$tmp/instances.json" "$tmp/outside.json" 'd["annotations"][1]["bbox"] = [150, 0, 40, 10]'
fails_with "a bbox outside its image" 3 "outside.json: annotation 1 (image_id .*): bbox \[150, 0, 40, 10\] is outside its 160x160 image" \
    eval --coco-annotations "$tmp/outside.json" --detections "$tmp/results.json"
edit "$tmp/instances.json" "$tmp/resized.json" 'd["images"][0]["width"] = 320'
"$bin" eval --model shapes --device cpu --images "$tmp/images" --coco-annotations "$tmp/resized.json" \
    >"$tmp/out" 2>"$tmp/err"
[ $? -eq 3 ] && [ ! -s "$tmp/out" ] && tail -n1 "$tmp/err" | grep -q "resized.json: 000.png is 160x160 but the annotations say 320x160"
check "an image whose size is not the annotations': exit 3 ($(tail -n1 "$tmp/err"))" $?
"$bin" "${e[@]}" --images "$tmp/images" --coco-annotations "$tmp/renamed.json" >/dev/null 2>"$tmp/err"
grep -q "no category name of .*renamed.json is a class name of the model: categories mapped by id (category_id = class)" "$tmp/err"
check "categories mapped by id: said on stderr" $?
edit "$tmp/instances.json" "$tmp/empty.json" 'd["annotations"] = []'
fails_with "annotations without a box" 3 "no ground truth: none of the 20 images has a labelled object in" \
    eval --coco-annotations "$tmp/empty.json" --detections "$tmp/results.json"

fails_with "--detections without annotations" 2 "needs --coco-annotations" eval --detections "$tmp/results.json"
fails_with "--labels with --coco-annotations" 2 "two sources of ground truth" \
    eval --images "$tmp/images" --labels "$tmp/images" --coco-annotations "$tmp/instances.json"

echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
