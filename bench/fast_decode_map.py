#!/usr/bin/env python3
"""The accuracy cost of --fast-decode (DCT-scaled JPEG decoding) on the trained shapes model.

data/shapes-val (240 labelled 160x160 PNGs) is written as quality-90 JPEGs at 1x, 4x and 8x
(`13_cpu_decode enlarge`: bilinear, so 4x is 640x640 and decodes at 1/4 under --fast-decode, 8x
at 1/8; 1x is never scaled). Each copy goes through the folder mode on the CPU engine with and
without --fast-decode (`--format coco --thresh 0.005 --nms 0.45`, eval's settings), and the
results are scored by `graphrun eval --coco-annotations --detections` against the labels made
into a COCO instances file (pycocotools' numbers, docs/eval.md). Prints a table, writes --json.

    python3 bench/fast_decode_map.py --build build --out /tmp/fdmap [--scales 1,4,8] [--prec fp32]
"""
import argparse
import json
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
NAMES = ["circle", "square", "triangle", "diamond", "cross"]


def jpeg_size(path):
    """Width and height from a JPEG's first SOF marker."""
    data = open(path, "rb").read()
    i = 2
    while i < len(data):
        marker, length = data[i + 1], struct.unpack(">H", data[i + 2:i + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            h, w = struct.unpack(">HH", data[i + 5:i + 9])
            return w, h
        i += 2 + length
    raise ValueError(path + ": no frame header")


def instances(folder, out):
    """The YOLO labels beside the JPEGs as a COCO instances file: the conversion
    tests/cli_eval_coco.sh checks scores exactly as the labels do (docs/eval.md)."""
    images, anns = [], []
    for f in sorted(os.listdir(folder)):
        if not f.endswith(".jpg"):
            continue
        W, H = jpeg_size(os.path.join(folder, f))
        iid = int(f[:-4])
        images.append({"id": iid, "file_name": f, "width": W, "height": H})
        for line in open(os.path.join(folder, f[:-4] + ".txt")):
            if not line.strip():
                continue
            c, cx, cy, w, h = line.split()
            cx, cy, w, h = float(cx), float(cy), float(w), float(h)
            x, y = (cx - w / 2) * W, (cy - h / 2) * H
            anns.append({"id": len(anns) + 1, "image_id": iid, "category_id": int(c),
                         "bbox": [x, y, w * W, h * H], "area": w * W * h * H, "iscrowd": 0})
    json.dump({"images": images, "annotations": anns,
               "categories": [{"id": i, "name": n} for i, n in enumerate(NAMES)]}, open(out, "w"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", required=True)
    ap.add_argument("--scales", default="1,4,8")
    ap.add_argument("--prec", default="fp32")
    ap.add_argument("--json")
    a = ap.parse_args()
    graphrun = os.path.join(a.build, "graphrun")
    os.makedirs(a.out, exist_ok=True)
    rows = []
    for k in [int(s) for s in a.scales.split(",")]:
        folder = os.path.join(a.out, "x%d" % k)
        if not os.path.isdir(folder):
            subprocess.run([os.path.join(a.build, "13_cpu_decode"), "enlarge",
                            os.path.join(HERE, "..", "data", "shapes-val"), folder, str(k)],
                           check=True, stdout=subprocess.DEVNULL)
        gt = os.path.join(a.out, "x%d-instances.json" % k)
        instances(folder, gt)
        row = {"scale": k, "size": "%dx%d" % (160 * k, 160 * k)}
        for fast in (False, True):
            det = os.path.join(a.out, "x%d%s.json" % (k, "-fast" if fast else ""))
            cmd = [graphrun, "--model", "shapes", "--device", "cpu", "--prec", a.prec,
                   "--input", folder, "--decode", "cpu", "--format", "coco",
                   "--thresh", "0.005", "--nms", "0.45"] + (["--fast-decode"] if fast else [])
            with open(det, "w") as f:
                subprocess.run(cmd, stdout=f, stderr=subprocess.DEVNULL, check=True)
            ev = subprocess.run([graphrun, "eval", "--coco-annotations", gt, "--detections", det,
                                 "--json"], capture_output=True, text=True, check=True)
            r = json.loads(ev.stdout)
            res = r["results"][0] if "results" in r else r
            key = "fast" if fast else "exact"
            row[key] = {m: res[m] for m in ("map50", "map50_95", "map75") if m in res}
        rows.append(row)
    print("| copy | exact mAP@0.5 | fast mAP@0.5 | exact mAP@0.5:0.95 | fast mAP@0.5:0.95 |")
    print("|---|---|---|---|---|")
    for r in rows:
        print("| %s (x%d) | %.4f | %.4f | %.4f | %.4f |" % (
            r["size"], r["scale"], r["exact"]["map50"], r["fast"]["map50"],
            r["exact"]["map50_95"], r["fast"]["map50_95"]))
    if a.json:
        json.dump({"prec": a.prec, "rows": rows}, open(a.json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
