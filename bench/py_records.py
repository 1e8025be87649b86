#!/usr/bin/env python3
"""Python's time per image of Engine.detect_files and of graphrun.dask's JSON Lines partitions:
what the calling thread does with each result, under the GIL, while the C pipeline decodes, runs
and formats. No GPU needed: the results are a CPU engine's (YOLOv2-tiny COCO, synthetic weights,
on the bundled photos at a few thresholds: ~15 to ~80 detections per image), captured once, then
replayed on idle cores through the package's own ctypes callback (graphrun._files.deliverer, called
through its CFUNCTYPE as C calls it), many times:

  lines     detect_files_jsonl / dask output_dir: the callback copies the library's line (bytes)
            and keeps it (a file's write is a copy too)
  records   detect_files: the same, each line parsed (json.loads) into its dict
  structs   the path these replaced, for reference: a dict per detection built from the
            gr_detection structs (full float32 values, not the CLI's), then for output_dir
            json.dumps per record (what dask's output_dir did)

usage: PYTHONPATH=python GRAPHRUN_LIBRARY=build/libgraphrun.so python3 bench/py_records.py
       [--reps 300] [--thresh 0.5,0.3,0.2]
"""

import argparse
import ctypes
import io
import json
import struct
import time

import graphrun
from graphrun import _capi, _files

PHOTOS = ["data/dog.jpg", "data/person.jpg", "data/horses.jpg", "data/eagle.jpg",
          "data/giraffe.jpg"]
DETECTION = struct.Struct("=4fi2f")  # gr_detection


def capture(engine, thresh):
    """The engine's results for the photos as C structs (lines and detections kept alive)."""
    out = io.BytesIO()
    engine.detect_files_jsonl(PHOTOS, out, thresh=thresh, threads=2)
    lines = out.getvalue().splitlines(keepends=True)
    keep, results = [], []
    for index, line in enumerate(lines):
        record = json.loads(line)
        dets = record.get("detections", [])
        array = (_capi.Detection * max(1, len(dets)))()
        for k, d in enumerate(dets):  # the printed values: the same amount of work to build
            array[k] = _capi.Detection(d["left"], d["top"], d["right"], d["bottom"],
                                       d["class_id"], d["prob"], d["objectness"])
        text = ctypes.create_string_buffer(line)
        keep += [array, text]
        r = _capi.FileResult(index=index, width=record.get("width", 0),
                             height=record.get("height", 0), n_detections=len(dets))
        r.detections = ctypes.cast(array, ctypes.POINTER(_capi.Detection))
        r.jsonl, r.jsonl_len = ctypes.cast(text, ctypes.c_void_p), len(line)
        results.append(ctypes.pointer(r))
    return results, keep, sum(len(json.loads(x).get("detections", [])) for x in lines) / len(lines)


def struct_record(r, path, names):
    """The dict the callback built before the library formatted lines (full float32 values)."""
    found = []
    if r.n_detections:
        raw = ctypes.string_at(r.detections, r.n_detections * DETECTION.size)
        for left, top, right, bottom, cls, prob, objectness in DETECTION.iter_unpack(raw):
            found.append({"class": names[cls] if 0 <= cls < len(names) else f"class {cls}",
                          "class_id": cls, "prob": prob, "objectness": objectness,
                          "left": left, "top": top, "right": right, "bottom": bottom})
    return {"input": path, "width": r.width, "height": r.height, "detections": found}


def per_image_us(results, reps, make_callback):
    """Microseconds per result of the callback make_callback() returns (with the list it keeps
    what it makes in, emptied after each pass over the results, as a partition's would be),
    called through ctypes as C calls it; the best of 3."""
    best = float("inf")
    for _ in range(3):
        deliver, kept = make_callback()
        callback = _capi.FILE_FN(deliver)
        t0 = time.perf_counter()
        for _ in range(reps):
            for r in results:
                callback(None, r)
            kept.clear()
        best = min(best, (time.perf_counter() - t0) / reps / len(results) * 1e6)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--thresh", default="0.5,0.3,0.2")
    args = ap.parse_args()
    model = graphrun.Model("yolov2-tiny")
    names = [model.class_name(i) for i in range(model.classes)]
    with model.build(device="cpu", batch=1, inflight=2) as engine:
        for thresh in (float(t) for t in args.thresh.split(",")):
            results, keep, dets = capture(engine, thresh)
            paths = PHOTOS
            failure = []

            def lines():
                kept = []
                return _files.deliverer(paths, lambda index, text: kept.append(text),
                                        failure), kept

            def records():
                kept = []
                return _files.deliverer(paths, _files.parser(paths, kept), failure), kept

            def structs(dump):
                kept = []

                def deliver(user, result):
                    r = result.contents
                    record = struct_record(r, paths[r.index], names)
                    kept.append((json.dumps(record) + "\n").encode() if dump else record)
                    return 0
                return deliver, kept

            t_lines = per_image_us(results, args.reps, lines)
            t_records = per_image_us(results, args.reps, records)
            t_structs = per_image_us(results, args.reps, lambda: structs(False))
            t_dumps = per_image_us(results, args.reps, lambda: structs(True))
            assert not failure, failure
            print(f"thresh {thresh}: {dets:.1f} detections per image; us per image on the "
                  f"calling thread: lines {t_lines:.1f}, records {t_records:.1f}; before: dicts "
                  f"from structs {t_structs:.1f}, + json.dumps (output_dir) {t_dumps:.1f}")
            del keep


if __name__ == "__main__":
    main()
