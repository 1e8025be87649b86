#!/usr/bin/env python3
"""A folder with bad files in it, against the same folder without them.

Generates N COCO-sized JPEGs (crops, flips and noise of the bundled photos: never blank images)
and, beside them in a second folder, the same files plus about 5% bad ones: truncated and garbage
JPEGs, truncated PNGs, empty files, a FIFO, a directory named like an image, and files that are
hard but valid (16-bit PNGs, CMYK JPEGs). Then it runs `graphrun --input DIR` on both folders and
checks what a user must be able to rely on:

  - every good file's detections in the mixed folder equal its detections in the all-good folder,
    and equal a single-image run of the file (for a sample of files: one engine build each);
  - every bad file has its own error line naming it, and nothing else does;
  - the hard-but-valid files decode (16-bit PNG as 8-bit, CMYK JPEG converted to RGB);
  - the run's exit status says some files failed (3), the all-good run's says none did (0);
  - images/s of the mixed folder stays within 10% of the all-good folder's.

  python3 bench/folder_faults.py --graphrun build/graphrun --n 1000 --out /tmp/ff -- --prec int8

Arguments after `--` go to every graphrun run (device, precision, batch). Writes a JSON summary to
--json FILE when given. Exit status 0 when every check holds.
"""
import argparse
import ctypes
import ctypes.util
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

try:
    import cv2
except ImportError:  # the GPU machine has OpenCV; Debian: python3-opencv
    sys.exit("folder_faults: needs OpenCV's Python module (apt-get install python3-opencv)")

HERE = os.path.dirname(os.path.abspath(__file__))
PHOTOS = ["dog.jpg", "person.jpg", "horses.jpg", "eagle.jpg", "giraffe.jpg"]


def coco_like(rng, photos, i):
    """A 640x480-ish photo: a random crop of a bundled photo, resized, maybe flipped, with noise."""
    src = photos[i % len(photos)]
    h, w = src.shape[:2]
    ch, cw = int(h * rng.uniform(0.6, 1.0)), int(w * rng.uniform(0.6, 1.0))
    y, x = rng.integers(0, h - ch + 1), rng.integers(0, w - cw + 1)
    out_w = int(rng.choice([640, 612, 500, 480, 427]))
    out_h = int(out_w * rng.uniform(0.6, 1.1))
    img = cv2.resize(src[y:y + ch, x:x + cw], (out_w, out_h), interpolation=cv2.INTER_AREA)
    if rng.random() < 0.5:
        img = img[:, ::-1]
    noise = rng.normal(0, 4, img.shape)
    return np.clip(img.astype(np.float32) + noise, 0, 255).astype(np.uint8)


def cmyk_jpeg(rgb):
    """A CMYK JPEG of an RGB image, through libjpeg-turbo's TurboJPEG API (OpenCV writes none)."""
    name = ctypes.util.find_library("turbojpeg") or "libturbojpeg.so.0"
    try:
        tj = ctypes.CDLL(name)
    except OSError:
        return None
    h, w = rgb.shape[:2]
    k = 255 - rgb.max(axis=2)
    cmyk = np.empty((h, w, 4), np.uint8)  # Adobe's inverted CMYK, as Photoshop writes it
    for c in range(3):
        cmyk[..., c] = 255 - (255 - rgb[..., c] - k)  # stored inverted: 255 - C
    cmyk[..., 3] = 255 - k
    tj.tjInitCompress.restype = ctypes.c_void_p
    handle = tj.tjInitCompress()
    buf, size = ctypes.POINTER(ctypes.c_ubyte)(), ctypes.c_ulong(0)
    TJPF_CMYK, TJSAMP_444 = 11, 0
    data = np.ascontiguousarray(cmyk)
    rc = tj.tjCompress2(ctypes.c_void_p(handle), data.ctypes.data_as(ctypes.c_void_p), w, w * 4, h,
                        TJPF_CMYK, ctypes.byref(buf), ctypes.byref(size), TJSAMP_444, 90, 0)
    out = bytes(buf[:size.value]) if rc == 0 else None
    if buf:
        tj.tjFree(buf)
    tj.tjDestroy(ctypes.c_void_p(handle))
    return out


def make_folders(out, n, seed):
    rng = np.random.default_rng(seed)
    photos = [cv2.imread(os.path.join(HERE, "..", "data", p)) for p in PHOTOS]
    good_dir, mixed_dir = os.path.join(out, "good"), os.path.join(out, "mixed")
    for d in (good_dir, mixed_dir):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    good = []
    for i in range(n):
        name = "img%05d.jpg" % i
        ok, enc = cv2.imencode(".jpg", coco_like(rng, photos, i), [cv2.IMWRITE_JPEG_QUALITY, 90])
        assert ok
        for d in (good_dir, mixed_dir):
            with open(os.path.join(d, name), "wb") as f:
                f.write(enc.tobytes())
        good.append(name)
    # About 5% more, between the good files by name.
    n_bad = max(10, n // 20)
    bad, hard = [], []
    sample = open(os.path.join(mixed_dir, good[0]), "rb").read()
    kinds = ["truncated", "garbage", "empty", "png_truncated", "soi_garbage"]
    for j in range(n_bad - 4):
        kind = kinds[j % len(kinds)]
        name = "img%05d_%s.%s" % (int(rng.integers(0, n)), kind, "png" if "png" in kind else "jpg")
        path = os.path.join(mixed_dir, name)
        if kind == "truncated":
            data = sample[: int(len(sample) * rng.uniform(0.2, 0.9))]
        elif kind == "garbage":
            data = rng.integers(0, 256, 20000, dtype=np.uint8).tobytes()
        elif kind == "empty":
            data = b""
        elif kind == "png_truncated":
            ok, enc = cv2.imencode(".png", coco_like(rng, photos, j))
            data = enc.tobytes()[:5000]
        else:  # a JPEG start, then noise: the case that used to poison its decoding worker
            data = b"\xff\xd8\xff" + rng.integers(0, 256, 5000, dtype=np.uint8).tobytes()
        with open(path, "wb") as f:
            f.write(data)
        bad.append(name)
    fifo = os.path.join(mixed_dir, "img00000_fifo.jpg")
    os.mkfifo(fifo)
    bad.append(os.path.basename(fifo))
    os.mkdir(os.path.join(mixed_dir, "img00001_dir.jpg"))
    bad.append("img00001_dir.jpg")
    # Hard but valid: they must decode.
    img = coco_like(rng, photos, 1)
    cv2.imwrite(os.path.join(mixed_dir, "img00002_16bit.png"), img.astype(np.uint16) * 257)
    hard.append("img00002_16bit.png")
    cmyk = cmyk_jpeg(img[..., ::-1])
    if cmyk:
        with open(os.path.join(mixed_dir, "img00003_cmyk.jpg"), "wb") as f:
            f.write(cmyk)
        hard.append("img00003_cmyk.jpg")
    return good_dir, mixed_dir, good, bad, hard


def run_folder(graphrun, folder, extra):
    t0 = time.time()
    p = subprocess.run([graphrun, "--input", folder] + extra, capture_output=True, text=True,
                       timeout=900)
    wall = time.time() - t0
    lines = {}
    for line in p.stdout.splitlines():
        rec = json.loads(line)  # every line must be JSON
        name = os.path.basename(rec["input"])
        assert name not in lines, "two lines for " + name
        lines[name] = rec
    m = re.search(r"in ([0-9.]+) s: ([0-9.]+) images/s", p.stderr)
    rate = float(m.group(2)) if m else None
    return p.returncode, lines, rate, wall, p.stderr


def single(graphrun, path, extra):
    p = subprocess.run([graphrun, "--input", path, "--json", "--no-output"] + extra,
                       capture_output=True, text=True, timeout=600)
    return p.returncode, json.loads(p.stdout)["images"][0]["detections"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graphrun", required=True)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--out", default="/tmp/folder_faults")
    ap.add_argument("--singles", type=int, default=8, help="good files also run one by one")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs of each folder (median)")
    ap.add_argument("--json", help="write the summary here")
    ap.add_argument("extra", nargs="*", help="graphrun arguments (after --)")
    a = ap.parse_args()
    good_dir, mixed_dir, good, bad, hard = make_folders(a.out, a.n, 7)
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)
            print("FAIL:", what)

    rates = {"good": [], "mixed": []}
    results = {}
    for r in range(a.repeats):  # interleaved, so drift hits both alike
        for kind, folder in (("good", good_dir), ("mixed", mixed_dir)):
            rc, lines, rate, wall, err = run_folder(a.graphrun, folder, a.extra)
            rates[kind].append(rate or 0.0)
            results[kind] = (rc, lines, err)
    rc_good, good_lines, _ = results["good"]
    rc_mixed, mixed_lines, mixed_err = results["mixed"]
    check(rc_good == 0, "all-good folder exits 0 (got %d)" % rc_good)
    check(rc_mixed == 3, "mixed folder exits 3, some files failed (got %d)" % rc_mixed)
    for name in good:
        g, m = good_lines.get(name), mixed_lines.get(name)
        check(g is not None and "detections" in g, "good run has detections for " + name)
        check(m is not None and "detections" in m, "mixed run has detections for " + name)
        if g and m:
            check(g.get("detections") == m.get("detections"), "same detections for " + name)
    for name in bad:
        m = mixed_lines.get(name)
        check(m is not None and "error" in m and name in m["error"],
              "its own error line for %s (%s)" % (name, m))
    for name in hard:
        m = mixed_lines.get(name)
        check(m is not None and "detections" in m, "decodes: %s (%s)" % (name, m))
    extra_lines = set(mixed_lines) - set(good) - set(bad) - set(hard)
    check(not extra_lines, "no lines for files not in the folder: %s" % sorted(extra_lines))
    step = max(1, len(good) // max(1, a.singles))
    for name in good[::step][: a.singles]:
        rc, dets = single(a.graphrun, os.path.join(mixed_dir, name), a.extra)
        check(rc == 0 and dets == mixed_lines[name]["detections"],
              "single-image run equals the folder line for " + name)
    med = {k: float(np.median(v)) for k, v in rates.items()}
    ratio = med["mixed"] / med["good"] if med["good"] else 0.0
    check(ratio >= 0.9, "mixed folder within 10%% of the all-good one (%.3f)" % ratio)
    summary = {"n_good": len(good), "n_bad": len(bad), "hard_valid": hard, "args": a.extra,
               "rc_good": rc_good, "rc_mixed": rc_mixed, "images_per_s": rates,
               "median_images_per_s": med, "mixed_over_good": ratio, "failures": failures,
               "detections_total": sum(len(v.get("detections", [])) for v in mixed_lines.values())}
    print(json.dumps(summary, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)
    print("%d passed, %d failed" % (1 if not failures else 0, 1 if failures else 0))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
