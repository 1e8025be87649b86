#!/usr/bin/env python3
"""Records what pycocotools' COCOeval (bbox) scores on the cases of tests/cli_eval_pycocotools.sh.

Writes, next to this script, <case>_gt.json (a COCO instances file), <case>_dt.json (a COCO
results file) and expected.txt: per case pycocotools' summary AP, AP50, AP75, APs, APm, APl
(COCOeval.stats[0:6]; -1 where pycocotools has no ground truth for it).

pycocotools is not in Debian and graphrun has no PyPI: it was built from cocodataset/cocoapi at
commit 8c9bcc3cf640524c4c20a9c40e89cb6a2f2fa0e9 (PythonAPI: coco.py, cocoeval.py and the _mask C
extension) with Debian's python3-numpy 1.24 and cython3 0.29:

    git archive 8c9bcc3 PythonAPI common | tar -x -C /tmp/cocoapi
    cd /tmp/cocoapi/PythonAPI && /usr/bin/python3 setup.py build_ext --inplace
    /usr/bin/python3 tests/data/pycocotools/record.py /tmp/cocoapi/PythonAPI

Two shims, neither touching the evaluation: coco.py imports matplotlib (only its showAnns draws)
and this machine has none, so an empty stand-in module is installed; cocoeval.py uses np.float,
which numpy 1.24 removed, so it is set to float (what it aliased). Nothing else is changed.
"""
import json
import os
import random
import sys
import types

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, sys.argv[1])
for name in ("matplotlib", "matplotlib.pyplot", "matplotlib.collections", "matplotlib.patches"):
    sys.modules[name] = types.ModuleType(name)
sys.modules["matplotlib.collections"].PatchCollection = None
sys.modules["matplotlib.patches"].Polygon = None
import numpy as np  # noqa: E402
np.float = float
from pycocotools.coco import COCO  # noqa: E402
from pycocotools.cocoeval import COCOeval  # noqa: E402


def gt_file(images, anns, cats):
    """images: [(id, file_name, w, h)]; anns: [(image_id, cat, [x, y, w, h], area, iscrowd)]."""
    return {"images": [{"id": i, "file_name": f, "width": w, "height": h} for i, f, w, h in images],
            "annotations": [{"id": k + 1, "image_id": i, "category_id": c, "bbox": b, "area": a,
                             "iscrowd": cr} for k, (i, c, b, a, cr) in enumerate(anns)],
            "categories": [{"id": c, "name": n} for c, n in cats]}


def box(x, y, w, h):
    return [x, y, w, h]


def two_boxes_one_class():
    # Two overlapping objects of one class. The second detection's best ground truth is the one
    # the first took (IoU 0.70), its other (IoU 0.63) is free: COCO matches it there, VOC's
    # matcher calls it a false positive (AP50 1.0 here, 0.5 the VOC way).
    g = [(1, "a.png", 100, 100)]
    anns = [(1, 1, box(0, 0, 10, 10), 100, 0), (1, 1, box(4, 0, 10, 10), 100, 0)]
    dets = [(1, 1, box(4, 0, 10, 10), 0.9), (1, 1, box(2.25, 0, 10, 10), 0.8)]
    return gt_file(g, anns, [(1, "thing")]), dets


def crowd():
    # A crowd region (matched many times, ignored: its detections are neither true nor false
    # positives; IoU against it is intersection / detection area), an object inside it, and
    # duplicate detections that a crowd region absorbs.
    g = [(1, "a.png", 200, 200), (2, "b.png", 200, 200)]
    anns = [(1, 1, box(0, 0, 100, 100), 10000, 1), (1, 1, box(10, 10, 20, 20), 400, 0),
            (1, 2, box(120, 120, 40, 40), 1600, 0), (2, 1, box(50, 50, 60, 60), 3600, 0),
            (2, 2, box(0, 0, 200, 100), 20000, 1)]
    dets = [(1, 1, box(10, 10, 20, 20), 0.95), (1, 1, box(11, 10, 20, 20), 0.9),
            (1, 1, box(60, 60, 30, 30), 0.85), (1, 1, box(80, 80, 40, 40), 0.6),
            (1, 1, box(150, 150, 20, 20), 0.5), (1, 2, box(120, 121, 40, 40), 0.7),
            (1, 2, box(118, 118, 44, 44), 0.65), (2, 1, box(52, 50, 60, 60), 0.8),
            (2, 2, box(10, 10, 50, 50), 0.99), (2, 2, box(20, 60, 50, 50), 0.3),
            (2, 1, box(0, 150, 30, 30), 0.75)]
    return gt_file(g, anns, [(1, "person"), (2, "car")]), dets


def over_100():
    # 150 detections of one category in one image (pycocotools keeps the 100 best, per image and
    # category: the found objects ranked below are cut), 60 of a second category in the same
    # image (all kept: 210 in the image), and a second image.
    rnd = random.Random(100)
    g = [(1, "a.png", 1000, 1000), (2, "b.png", 1000, 1000)]
    anns, dets = [], []
    for k in range(10):
        anns.append((1, 1, box(k * 90, 10, 60, 60), 3600, 0))
        anns.append((1, 2, box(k * 90, 500, 80, 40), 3200, 0))
        anns.append((2, 1, box(k * 90, 300, 50, 50), 2500, 0))
    for k in range(150):
        s = round(0.9 - k * 0.005, 4)
        if k % 15 == 7:  # every 15th is on an object: ranks 7, 22, ..., 97 kept, 112.. cut
            j = k // 15
            dets.append((1, 1, box(j * 90 + 1, 11, 60, 60), s))
        else:
            dets.append((1, 1, box(rnd.randint(0, 900), rnd.randint(600, 900), 40, 40), s))
    for k in range(60):
        j = k % 10
        if k < 10:
            dets.append((1, 2, box(j * 90 + 2, 501, 80, 40), 0.5 - k * 0.001))
        else:
            dets.append((1, 2, box(rnd.randint(0, 900), rnd.randint(0, 400), 30, 30), 0.6))
    for k in range(10):
        dets.append((2, 1, box(k * 90, 300 + k, 50, 50), 0.3 + 0.05 * (k % 3)))
    return gt_file(g, anns, [(1, "a"), (2, "b")]), dets


def sizes():
    # Small, medium and large by the annotation's area field (not the box: the first box is 40x40
    # = 1600 but its area says 900, small), at the boundaries 32^2 and 96^2 (both ranges), and
    # unmatched detections outside a range (ignored there).
    g = [(1, "a.png", 640, 480), (2, "b.png", 640, 480)]
    anns = [(1, 1, box(0, 0, 40, 40), 900, 0), (1, 1, box(100, 0, 32, 32), 1024, 0),
            (1, 1, box(200, 0, 96, 96), 9216, 0), (1, 1, box(300, 0, 200, 200), 40000, 0),
            (1, 2, box(0, 200, 20, 20), 400, 0), (1, 2, box(100, 200, 60, 60), 3600, 0),
            (2, 1, box(0, 0, 10, 10), 100, 0), (2, 2, box(200, 200, 150, 150), 22500, 0),
            (2, 2, box(400, 50, 50, 50), 2500, 0)]
    dets = [(1, 1, box(0, 0, 40, 40), 0.9), (1, 1, box(101, 1, 32, 32), 0.8),
            (1, 1, box(205, 5, 96, 96), 0.7), (1, 1, box(300, 0, 200, 180), 0.6),
            (1, 1, box(500, 300, 10, 10), 0.95), (1, 1, box(500, 400, 60, 60), 0.85),
            (1, 2, box(0, 200, 20, 20), 0.4), (1, 2, box(400, 300, 120, 120), 0.5),
            (1, 2, box(100, 205, 60, 60), 0.3), (2, 1, box(1, 1, 10, 10), 0.2),
            (2, 2, box(210, 200, 150, 150), 0.9), (2, 2, box(390, 50, 50, 50), 0.45),
            (2, 2, box(0, 400, 5, 5), 0.99)]
    return gt_file(g, anns, [(1, "a"), (2, "b")]), dets


def mixed():
    # Random scenes (fixed seed): three categories, jittered boxes, duplicates, misses, false
    # alarms, tied scores, image ids out of file order, a crowd region and areas that differ from
    # the boxes. Coordinates on a 1/4 pixel grid and scores of 2 decimals (exact as floats).
    rnd = random.Random(34)
    ids = [7, 3, 11, 5, 9, 2]
    g, anns, dets = [], [], []
    for i in ids:
        g.append((i, "img%d.png" % i, 320, 240))
        for _ in range(rnd.randint(2, 7)):
            c = rnd.choice([1, 2, 3])
            w, h = rnd.randint(8, 150), rnd.randint(8, 120)
            x, y = rnd.randint(0, 320 - w), rnd.randint(0, 240 - h)
            anns.append((i, c, box(x, y, w, h), w * h * rnd.choice([1, 1, 0.8]), 0))
            for _ in range(rnd.choice([0, 1, 1, 1, 2])):
                j = lambda s: rnd.randint(-int(s * 0.6), int(s * 0.6)) / 4
                dets.append((i, rnd.choice([c] * 5 + [1, 2, 3]),
                             box(x + j(w / 10), y + j(h / 10), w + j(w / 10), h + j(h / 10)),
                             rnd.randint(5, 99) / 100))
        for _ in range(rnd.randint(0, 3)):
            dets.append((i, rnd.choice([1, 2, 3]), box(rnd.randint(0, 250), rnd.randint(0, 180),
                                                       rnd.randint(5, 60), rnd.randint(5, 60)),
                         rnd.randint(5, 99) / 100))
    anns.append((ids[0], 2, box(0, 0, 160, 120), 19200, 1))
    dets.append((ids[0], 2, box(10, 10, 30, 30), 0.55))
    return gt_file(g, anns, [(1, "x"), (2, "y"), (3, "z")]), dets


def main():
    cases = [("two_boxes_one_class", two_boxes_one_class), ("crowd", crowd),
             ("over_100", over_100), ("sizes", sizes), ("mixed", mixed)]
    lines = ["# pycocotools COCOeval (bbox, default params) on cocodataset/cocoapi "
             "8c9bcc3cf640524c4c20a9c40e89cb6a2f2fa0e9, written by record.py",
             "# case AP AP50 AP75 APsmall APmedium APlarge"]
    for name, make in cases:
        gt, dets = make()
        gt_path = os.path.join(here, name + "_gt.json")
        dt_path = os.path.join(here, name + "_dt.json")
        with open(gt_path, "w") as f:
            json.dump(gt, f)
        results = [{"image_id": i, "category_id": c, "bbox": b, "score": s} for i, c, b, s in dets]
        with open(dt_path, "w") as f:
            json.dump(results, f)
        coco_gt = COCO(gt_path)
        coco_dt = coco_gt.loadRes(dt_path)
        ev = COCOeval(coco_gt, coco_dt, "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
        lines.append(name + " " + " ".join("%.9f" % v for v in ev.stats[:6]))
    with open(os.path.join(here, "expected.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
