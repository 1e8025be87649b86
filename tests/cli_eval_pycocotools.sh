#!/usr/bin/env bash
# `graphrun eval --metric coco` (the default) scores as pycocotools does: each case of
# tests/data/pycocotools/ (a COCO instances file and a results file) must give pycocotools'
# AP, AP50, AP75, APsmall, APmedium and APlarge, recorded in expected.txt by record.py (which runs
# pycocotools itself: cocodataset/cocoapi 8c9bcc3, its C extension built; see the script). Cases:
# two boxes of one class (COCO matches the second detection to the free box, VOC does not), crowd
# regions, more than 100 detections in an image, small/medium/large by the `area` field, and a
# random mix. Then --metric voc on the first case: VOC's 0.5. $1 = the graphrun binary; run from
# the source root.
set -u
bin=$1
source "$(dirname "$0")/lib/check.sh"
d=tests/data/pycocotools

while read -r name ap ap50 ap75 aps apm apl; do
  case $name in '#'*|'') continue ;; esac
  "$bin" eval --coco-annotations "$d/${name}_gt.json" --detections "$d/${name}_dt.json" --json \
      >"$tmp/$name.json" 2>"$tmp/err"
  check "$name: eval runs (exit $?: $(head -c 200 "$tmp/err"))" $?
  python3 - "$tmp/$name.json" "$ap" "$ap50" "$ap75" "$aps" "$apm" "$apl" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
r = doc["results"][0]
keys = ("map50_95", "map50", "map75", "map_small", "map_medium", "map_large")
got = [r[k] for k in keys]
want = [float(v) for v in sys.argv[2:]]
bad = [(k, g, w) for k, g, w in zip(keys, got, want) if abs(g - w) > 1e-6]
print(" ".join("%s %.6f" % (k, g) for k, g in zip(keys, got)), "; pycocotools:", *sys.argv[2:])
sys.exit(1 if bad or doc["metric"] != "coco" else 0)
PY
  check "$name: graphrun's COCO numbers are pycocotools' (within the JSON's 6 decimals)" $?
done <"$d/expected.txt"

"$bin" eval --coco-annotations "$d/two_boxes_one_class_gt.json" \
    --detections "$d/two_boxes_one_class_dt.json" --metric voc --json >"$tmp/voc.json" 2>/dev/null
grep -q '"metric": "voc"' "$tmp/voc.json" && grep -q '"map50": 0.500000' "$tmp/voc.json"
check "--metric voc: the second detection's best box is taken, a false positive (AP50 0.5)" $?
"$bin" eval --coco-annotations "$d/two_boxes_one_class_gt.json" \
    --detections "$d/two_boxes_one_class_dt.json" --metric map >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "'--metric' 'map' is not coco, voc or voc07\|--metric 'map' is not coco, voc or voc07" "$tmp/err"
check "--metric of an unknown name: usage error ($(cat "$tmp/err"))" $?

echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
