#!/usr/bin/env python3
"""Every GPU of the host, and Dask: the figures of one GPU against all of them, each run's JSON.

Generates N COCO-sized JPEGs (bench/folder_faults.py's crops of the bundled photos, never blank),
then measures, YOLOv2-tiny int8 batch 64 (override with arguments after `--`):

  bench-gpu0.json, bench-all.json   `graphrun bench --device gpu:0` / `gpu:all`: the engine alone,
                                    sustained images/s (all: per GPU alone and together)
  folder-gpu0.json, folder-all.json files on disk -> JSON Lines, `graphrun --input DIR` with
                                    `--device gpu:0` / `gpu:all`: images/s and the stage line
                                    (which stage bounds it); the two outputs must be the same bytes
  dask.json                         graphrun.dask on a LocalCluster of one worker process per GPU
                                    over --dask-files paths (the folder's files repeated), engines
                                    warmed first, against the native gpu:all CLI on the same list
  summary.json                      the ratios the issue asks for (all / one GPU; Dask / native)

  python3 bench/multi_gpu.py --graphrun build-gpu/graphrun --out /tmp/mg [--n 1000]
      [--dask-files 10000] [-- --prec int8 --batch 64]

Needs OpenCV's Python module (the generator) and, for the Dask step, python3-dask and
python3-distributed (skipped with a line without them). On a machine whose pynvml breaks
distributed, export DASK_DISTRIBUTED__DIAGNOSTICS__NVML=False first. Exit status 0 when every
step ran and gpu:all printed gpu:0's lines.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))


def make_folder(out, n, seed=7):
    import cv2
    import numpy as np
    from folder_faults import PHOTOS, coco_like
    folder = os.path.join(out, "photos")
    os.makedirs(folder, exist_ok=True)
    if len([f for f in os.listdir(folder) if f.endswith(".jpg")]) == n:
        return folder
    rng = np.random.default_rng(seed)
    photos = [cv2.imread(os.path.join(HERE, "..", "data", p)) for p in PHOTOS]
    for i in range(n):
        ok, enc = cv2.imencode(".jpg", coco_like(rng, photos, i), [cv2.IMWRITE_JPEG_QUALITY, 90])
        assert ok
        with open(os.path.join(folder, "img%05d.jpg" % i), "wb") as f:
            f.write(enc.tobytes())
    return folder


def folder_run(graphrun, device, source, extra, out_jsonl):
    """`graphrun --input DIR|--input-list FILE`: its images/s and stage line from stderr."""
    flag = "--input-list" if source.endswith(".txt") else "--input"
    cmd = [graphrun, "--device", device, flag, source] + extra
    with open(out_jsonl, "w") as f:
        run = subprocess.run(cmd, stdout=f, stderr=subprocess.PIPE, text=True, check=False)
    rate = re.search(r"in ([0-9.]+) s: ([0-9.]+) images/s from files", run.stderr)
    stages = [line for line in run.stderr.splitlines() if "stages, busy us per image" in line]
    bound = re.search(r"bound: ([^(]+) \(", stages[0]) if stages else None
    return {"command": " ".join(cmd), "exit": run.returncode,
            "seconds": float(rate.group(1)) if rate else None,
            "images_per_s": float(rate.group(2)) if rate else None,
            "bound": bound.group(1).strip() if bound else None,
            "stages": stages[0] if stages else None, "stderr_tail": run.stderr[-3000:]}


def bench_run(graphrun, device, extra, path):
    cmd = [graphrun, "bench", "--device", device, "--prec", option(extra, "--prec", "int8"),
           "--batch", option(extra, "--batch", "64"), "--model", option(extra, "--model", "yolo"),
           "--inflight", "3", "--iters", "500", "--json", path]
    run = subprocess.run(cmd, capture_output=True, text=True, check=False)
    result = json.load(open(path))["results"][0] if run.returncode == 0 else {}
    return {"command": " ".join(cmd), "exit": run.returncode, "stdout": run.stdout[-2000:],
            "sustained_images_per_s": result.get("sustained_images_per_s"),
            "devices": result.get("devices")}


def option(extra, flag, default):
    return extra[extra.index(flag) + 1] if flag in extra else default


def dask_run(paths, extra, devices, out):
    try:
        import distributed  # noqa: F401
    except ImportError as exc:
        return {"skipped": f"{exc.name} missing (apt-get install python3-dask python3-distributed)"}
    import graphrun.dask
    from distributed import Client, LocalCluster
    prec, batch = option(extra, "--prec", "int8"), int(option(extra, "--batch", "64"))
    model = option(extra, "--model", "yolo")
    calib = os.path.join(out, "calib.cache")
    with LocalCluster(n_workers=devices, processes=True, threads_per_worker=1,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        warm = graphrun.dask.detect(paths[:batch * devices], model=model, prec=prec, batch=batch,
                                    calib_cache=calib, npartitions=devices)
        warm.compute()  # each worker's engine built (calibration, tactics) before the clock
        t0 = time.perf_counter()
        records = graphrun.dask.detect(paths, model=model, prec=prec, batch=batch,
                                       calib_cache=calib, partition_size=8 * batch).compute()
        seconds = time.perf_counter() - t0
        workers = len(client.scheduler_info()["workers"])
    errors = sum("error" in r for r in records)
    return {"files": len(paths), "workers": workers, "seconds": seconds,
            "images_per_s": len(paths) / seconds, "errors": errors, "in_order":
            [r["input"] for r in records] == list(paths)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graphrun", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--dask-files", type=int, default=10000)
    ap.add_argument("extra", nargs="*", help="graphrun arguments (after --)")
    args = ap.parse_args()
    extra = args.extra or ["--prec", "int8", "--batch", "64"]
    os.makedirs(args.out, exist_ok=True)
    extra = extra + ["--calib-cache", os.path.join(args.out, "calib.cache"),
                     "--timing-cache", os.path.join(args.out, "tactics")]
    folder = make_folder(args.out, args.n)
    summary, benches = {}, {}
    for name, device in (("gpu0", "gpu:0"), ("all", "gpu:all")):
        b = benches[name] = bench_run(args.graphrun, device, extra,
                                      os.path.join(args.out, f"bench-{name}.raw.json"))
        json.dump(b, open(os.path.join(args.out, f"bench-{name}.json"), "w"), indent=1)
        f = folder_run(args.graphrun, device, folder, extra,
                       os.path.join(args.out, f"folder-{name}.jsonl"))
        json.dump(f, open(os.path.join(args.out, f"folder-{name}.json"), "w"), indent=1)
        summary[name] = {"engine_images_per_s": b["sustained_images_per_s"],
                         "folder_images_per_s": f["images_per_s"], "folder_bound": f["bound"]}
        print(f"{device}: engine {b['sustained_images_per_s']} img/s, folder "
              f"{f['images_per_s']} img/s, bound: {f['bound']}", flush=True)
    one = open(os.path.join(args.out, "folder-gpu0.jsonl"), "rb").read()
    same = bool(one) and one == open(os.path.join(args.out, "folder-all.jsonl"), "rb").read()
    summary["gpu_all_lines_equal_gpu0"] = same
    names = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".jpg"))
    paths = [names[i % len(names)] for i in range(args.dask_files)]
    listing = os.path.join(args.out, "dask-list.txt")
    with open(listing, "w") as f:
        f.write("\n".join(paths) + "\n")
    devices = len(benches["all"]["devices"] or [0])  # GPUs the pool used (1 when it failed)
    native = folder_run(args.graphrun, "gpu:all", listing, extra,
                        os.path.join(args.out, "dask-native.jsonl"))
    d = dask_run(paths, extra, devices, args.out)
    d["native_cli"] = {k: native[k] for k in ("command", "images_per_s", "bound")}
    json.dump(d, open(os.path.join(args.out, "dask.json"), "w"), indent=1)
    summary["dask"] = {k: d.get(k) for k in ("images_per_s", "files", "workers", "in_order",
                                             "skipped")}
    summary["native_all_list_images_per_s"] = native["images_per_s"]

    def ratio(a, b):
        return round(a / b, 3) if a and b else None

    summary["engine_all_over_one"] = ratio(summary["all"]["engine_images_per_s"],
                                           summary["gpu0"]["engine_images_per_s"])
    summary["folder_all_over_one"] = ratio(summary["all"]["folder_images_per_s"],
                                           summary["gpu0"]["folder_images_per_s"])
    summary["dask_over_native"] = ratio(d.get("images_per_s"), native["images_per_s"])
    json.dump(summary, open(os.path.join(args.out, "summary.json"), "w"), indent=1)
    print(json.dumps(summary, indent=1))
    return 0 if same and all(summary[k]["engine_images_per_s"] for k in ("gpu0", "all")) else 1


if __name__ == "__main__":
    sys.exit(main())
