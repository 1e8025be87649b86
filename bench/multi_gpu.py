#!/usr/bin/env python3
"""Every GPU of the host, JPEG decoding on the GPU, and Dask: figures per GPU count, each run's JSON.

Generates N COCO-sized JPEGs (bench/folder_faults.py's crops of the bundled photos, never blank;
on all cores), then for each GPU count k in 1, 2, 4, 8 up to the GPUs visible (`--device
gpu:0,..,k-1`), YOLOv2-tiny batch 64 (override with arguments after `--`):

  bench-<k>gpu-<prec>.json   `graphrun bench`: the engine alone, sustained images/s, int8 and fp16
  folder-<k>gpu-<dec>.json   files on disk -> JSON Lines, `graphrun --input DIR --decode gpu|cpu`:
                             images/s and the stage line (which stage bounds it); every k's lines
                             must be the same bytes as 1 GPU's (int8), in input order
  dask-<k>gpu.json           graphrun.dask on a LocalCluster of one worker process per GPU over
                             --dask-files paths (the folder's files repeated), engines warmed
                             first, JSON Lines partitions written by the workers (and the records
                             sent back), beside the native CLI on the same list and GPUs
  decode-agreement.json      the GPU-decoded folder's detections against the CPU-decoded ones
  summary.json               the scaling ratios (k GPUs / 1 GPU) and Dask / native

  python3 bench/multi_gpu.py --graphrun build-gpu/graphrun --out /tmp/mg [--n 1000]
      [--dask-files 10000] [--gpus 1,2,4] [-- --prec int8 --batch 64]
  python3 bench/multi_gpu.py --table summary.json      # the README's table

Needs OpenCV's Python module (the generator) and, for the Dask step, python3-dask and
python3-distributed (skipped with a line without them). On a machine whose pynvml breaks
distributed, export DASK_DISTRIBUTED__DIAGNOSTICS__NVML=False first. Exit status 0 when every
step ran and every GPU count printed 1 GPU's lines.
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


def _write_one(args):
    import cv2
    import numpy as np
    from folder_faults import PHOTOS, coco_like
    folder, first, count, seed = args
    rng = np.random.default_rng(seed + first)
    photos = [cv2.imread(os.path.join(HERE, "..", "data", p)) for p in PHOTOS]
    for i in range(first, first + count):
        ok, enc = cv2.imencode(".jpg", coco_like(rng, photos, i), [cv2.IMWRITE_JPEG_QUALITY, 90])
        assert ok
        with open(os.path.join(folder, "img%05d.jpg" % i), "wb") as f:
            f.write(enc.tobytes())


def make_folder(out, n, seed=7):
    from concurrent.futures import ProcessPoolExecutor
    folder = os.path.join(out, "photos")
    os.makedirs(folder, exist_ok=True)
    if len([f for f in os.listdir(folder) if f.endswith(".jpg")]) == n:
        return folder
    step = 250
    with ProcessPoolExecutor() as pool:
        list(pool.map(_write_one, [(folder, first, min(step, n - first), seed)
                                   for first in range(0, n, step)]))
    return folder


def folder_run(graphrun, device, source, extra, out_jsonl, decode="auto"):
    """`graphrun --input DIR|--input-list FILE`: its images/s and stage line from stderr."""
    flag = "--input-list" if source.endswith(".txt") else "--input"
    cmd = [graphrun, "--device", device, flag, source, "--decode", decode] + extra
    with open(out_jsonl, "w") as f:
        run = subprocess.run(cmd, stdout=f, stderr=subprocess.PIPE, text=True, check=False)
    rate = re.search(r"in ([0-9.]+) s: ([0-9.]+) images/s from files", run.stderr)
    stages = [line for line in run.stderr.splitlines() if "stages, busy us per image" in line]
    bound = re.search(r"bound: ([^(]+) \(", stages[0]) if stages else None
    decoder = [line for line in run.stderr.splitlines() if "JPEG decoding on the" in line]
    return {"command": " ".join(cmd), "exit": run.returncode,
            "decoder": decoder[0] if decoder else None,
            "seconds": float(rate.group(1)) if rate else None,
            "images_per_s": float(rate.group(2)) if rate else None,
            "bound": bound.group(1).strip() if bound else None,
            "stages": stages[0] if stages else None, "stderr_tail": run.stderr[-3000:]}


def bench_run(graphrun, device, extra, path, prec=None):
    cmd = [graphrun, "bench", "--device", device,
           "--prec", prec or option(extra, "--prec", "int8"),
           "--batch", option(extra, "--batch", "64"), "--model", option(extra, "--model", "yolo"),
           "--inflight", "3", "--iters", "500", "--json", path]
    run = subprocess.run(cmd, capture_output=True, text=True, check=False)
    result = json.load(open(path))["results"][0] if run.returncode == 0 else {}
    return {"command": " ".join(cmd), "exit": run.returncode, "stdout": run.stdout[-2000:],
            "sustained_images_per_s": result.get("sustained_images_per_s"),
            "devices": result.get("devices")}


def option(extra, flag, default):
    return extra[extra.index(flag) + 1] if flag in extra else default


def agreement(cpu_jsonl, gpu_jsonl):
    """Per image, the GPU-decoded run's detections against the CPU-decoded run's."""
    def iou(x, y):
        w = min(x["right"], y["right"]) - max(x["left"], y["left"])
        h = min(x["bottom"], y["bottom"]) - max(x["top"], y["top"])
        inter = max(w, 0) * max(h, 0)
        area = lambda d: (d["right"] - d["left"]) * (d["bottom"] - d["top"])
        return inter / (area(x) + area(y) - inter) if inter > 0 else 0.0
    cpu = [json.loads(l) for l in open(cpu_jsonl)]
    gpu = [json.loads(l) for l in open(gpu_jsonl)]
    same_images = found = total = extra = 0
    for a, b in zip(cpu, gpu):
        da, db = a.get("detections", []), b.get("detections", [])
        key = lambda d: (d["class_id"], round(d["left"]), round(d["top"]), round(d["right"]),
                         round(d["bottom"]))
        same_images += sorted(map(key, da)) == sorted(map(key, db))
        for d in da:
            total += 1
            found += any(e["class_id"] == d["class_id"] and iou(d, e) >= 0.9 for e in db)
        extra += sum(not any(e["class_id"] == d["class_id"] and iou(d, e) >= 0.9 for d in da)
                     for e in db)
    return {"images": len(cpu), "lines": [len(cpu), len(gpu)],
            "images_with_equal_boxes_rounded_px": same_images,
            "cpu_detections": total, "found_after_gpu_decode_iou_0.9": found,
            "gpu_only_detections": extra}


def shapes_agreement(graphrun, out):
    """The trained shapes model on its validation photos as JPEGs: detections with the GPU decoder
    against the CPU's (a network with synthetic weights is no judge of small input changes)."""
    import cv2
    src = os.path.join(HERE, "..", "data", "shapes-val")
    folder = os.path.join(out, "shapes-jpg")
    os.makedirs(folder, exist_ok=True)
    for name in sorted(os.listdir(src)):
        if name.endswith(".png"):
            im = cv2.imread(os.path.join(src, name))
            cv2.imwrite(os.path.join(folder, name[:-4] + ".jpg"), im,
                        [cv2.IMWRITE_JPEG_QUALITY, 90])
    runs, maps = {}, {}
    for dec in ("cpu", "gpu"):
        path = os.path.join(out, f"shapes-{dec}.jsonl")
        with open(path, "w") as f:
            subprocess.run([graphrun, "--model", "shapes", "--prec", "int8", "--device", "gpu:0",
                            "--batch", "16", "--thresh", "0.25", "--decode", dec, "--input",
                            folder], stdout=f, stderr=subprocess.DEVNULL, check=False)
        runs[dec] = path
        maps[dec] = map50(path, src)
    result = agreement(runs["cpu"], runs["gpu"])
    result["map50_cpu_decode"], result["map50_gpu_decode"] = maps["cpu"], maps["gpu"]
    return result


def map50(jsonl, labels):
    """mAP@0.5 (all-point interpolated AP per class, averaged) of a JSON Lines run against the
    YOLO txt labels beside the photos: the trained model's accuracy per decoder."""
    truth, dets = {}, {}
    for line in open(jsonl):
        r = json.loads(line)
        stem = os.path.basename(r["input"]).rsplit(".", 1)[0]
        w, h = r.get("width", 0), r.get("height", 0)
        for row in open(os.path.join(labels, stem + ".txt")):
            c, cx, cy, bw, bh = row.split()
            cx, cy, bw, bh = float(cx) * w, float(cy) * h, float(bw) * w, float(bh) * h
            truth.setdefault(int(c), []).append([stem, cx - bw / 2, cy - bh / 2, cx + bw / 2,
                                                 cy + bh / 2, False])
        for d in r.get("detections", []):
            dets.setdefault(d["class_id"], []).append((d["prob"], stem, d))
    aps = []
    for c, gts in truth.items():
        found = sorted(dets.get(c, []), key=lambda t: -t[0])
        tp = []
        for _, stem, d in found:
            best, hit = 0.0, None
            for g in gts:
                if g[0] != stem:
                    continue
                iw = min(d["right"], g[3]) - max(d["left"], g[1])
                ih = min(d["bottom"], g[4]) - max(d["top"], g[2])
                inter = max(iw, 0) * max(ih, 0)
                union = ((d["right"] - d["left"]) * (d["bottom"] - d["top"]) +
                         (g[3] - g[1]) * (g[4] - g[2]) - inter)
                if union > 0 and inter / union > best:
                    best, hit = inter / union, g
            ok = best >= 0.5 and not hit[5]
            if ok:
                hit[5] = True
            tp.append(ok)
        for g in gts:
            g[5] = False
        ap, prec_at, hits = 0.0, [], 0
        for i, ok in enumerate(tp):
            hits += ok
            prec_at.append((hits / len(gts), hits / (i + 1)))
        prev_r = 0.0
        for i, (r_, _) in enumerate(prec_at):
            if tp[i]:
                ap += (r_ - prev_r) * max(p for rr, p in prec_at[i:])
                prev_r = r_
        aps.append(ap)
    return round(sum(aps) / len(aps), 4) if aps else None


def dask_run(paths, extra, devices, out):
    """graphrun.dask on a LocalCluster of one worker process per GPU: the files to JSON Lines
    partitions written by the workers (what the native CLI does: its lines to a file), and the
    same files' records sent back to the client; engines built before the clock."""
    try:
        import distributed  # noqa: F401
    except ImportError as exc:
        return {"skipped": f"{exc.name} missing (apt-get install python3-dask python3-distributed)"}
    import shutil
    import graphrun.dask
    from distributed import Client, LocalCluster
    prec, batch = option(extra, "--prec", "int8"), int(option(extra, "--batch", "64"))
    model = option(extra, "--model", "yolo")
    calib = os.path.join(out, "calib.cache")
    parts = os.path.join(out, f"dask-parts-{devices}")
    shutil.rmtree(parts, ignore_errors=True)
    with LocalCluster(n_workers=devices, processes=True, threads_per_worker=1,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        warm = graphrun.dask.detect(paths[:batch * devices], model=model, prec=prec, batch=batch,
                                    calib_cache=calib, npartitions=devices)
        warm.compute()  # each worker's engine built (calibration, tactics) before the clock
        t0 = time.perf_counter()
        files = graphrun.dask.detect(paths, model=model, prec=prec, batch=batch,
                                     calib_cache=calib, npartitions=4 * devices, output_dir=parts)
        seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        records = graphrun.dask.detect(paths, model=model, prec=prec, batch=batch,
                                       calib_cache=calib, npartitions=4 * devices).compute()
        seconds_records = time.perf_counter() - t0
        workers = len(client.scheduler_info()["workers"])
    written = [json.loads(line)["input"] for f in sorted(files) for line in open(f)]
    shutil.rmtree(parts, ignore_errors=True)
    errors = sum("error" in r for r in records)
    return {"files": len(paths), "workers": workers, "partitions": 4 * devices,
            "seconds": seconds, "images_per_s": len(paths) / seconds,
            "records_seconds": seconds_records,
            "records_images_per_s": len(paths) / seconds_records, "errors": errors,
            "in_order": written == list(paths) and [r["input"] for r in records] == list(paths)}


def visible_gpus():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
        return sum(line.startswith("GPU ") for line in out.stdout.splitlines())
    except OSError:
        return 1


def table(summary):
    """The README's table of a summary.json (or of a bench/results file that wraps one, with its
    "produced" and "command"): one column per GPU count."""
    rows = summary.get("summary", summary)["by_gpus"]
    counts = sorted(rows, key=int)
    def cell(k, key, ratio=None):
        v = rows[k].get(key)
        if v is None:
            return "-"
        r = rows[k].get(ratio) if ratio else None
        return f"{v:,.0f}" + (f" ({r:.2f}x)" if r and int(k) > 1 else "")
    lines = ["| images/s | " + " | ".join(f"{k} GPU{'s' if int(k) > 1 else ''}" for k in counts) + " |",
             "|---|" + "---|" * len(counts)]
    for label, key, ratio in (
            ("engine alone, int8 (`graphrun bench`, 3 in flight per GPU)",
             "engine_int8_images_per_s", "engine_int8_over_1gpu"),
            ("engine alone, fp16", "engine_fp16_images_per_s", "engine_fp16_over_1gpu"),
            ("files -> JSON Lines, `--decode gpu`", "folder_gpu_decode_images_per_s",
             "folder_gpu_decode_over_1gpu"),
            ("files -> JSON Lines, `--decode cpu`", "folder_cpu_decode_images_per_s",
             "folder_cpu_decode_over_1gpu"),
            ("native CLI on the Dask list, `--decode gpu`", "native_list_images_per_s", None)):
        lines.append(f"| {label} | " + " | ".join(cell(k, key, ratio) for k in counts) + " |")
    lines.append("| graphrun.dask, one worker process per GPU, JSON Lines partitions (of the native "
                 "CLI) | " + " | ".join(
        (f"{rows[k]['dask']['images_per_s']:,.0f} ({rows[k]['dask_over_native']:.0%})"
         if rows[k]["dask"].get("images_per_s") else "-") for k in counts) + " |")
    lines.append("| bound (`--decode gpu` / `--decode cpu`) | " + " | ".join(
        f"{rows[k].get('folder_gpu_decode_bound')} / {rows[k].get('folder_cpu_decode_bound')}"
        for k in counts) + " |")
    return "\n".join(lines)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--table":
        print(table(json.load(open(sys.argv[2]))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graphrun", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--dask-files", type=int, default=10000)
    ap.add_argument("--gpus", default=None, help="GPU counts, e.g. 1,2,4 (default: 1, 2, 4, 8 "
                    "up to the GPUs visible)")
    ap.add_argument("--precs", default="int8,fp16", help="the engine-alone precisions")
    ap.add_argument("extra", nargs="*", help="graphrun arguments (after --)")
    args = ap.parse_args()
    extra = args.extra or ["--prec", "int8", "--batch", "64"]
    os.makedirs(args.out, exist_ok=True)
    extra = extra + ["--calib-cache", os.path.join(args.out, "calib.cache"),
                     "--timing-cache", os.path.join(args.out, "tactics")]
    t0 = time.perf_counter()
    folder = make_folder(args.out, args.n)
    print(f"{args.n} JPEGs generated in {time.perf_counter() - t0:.1f} s", flush=True)
    visible = visible_gpus()
    counts = [int(k) for k in args.gpus.split(",")] if args.gpus else \
        [k for k in (1, 2, 4, 8) if k <= max(visible, 1)]
    summary = {"visible_gpus": visible, "images": args.n, "by_gpus": {}}
    names = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".jpg"))
    paths = [names[i % len(names)] for i in range(args.dask_files)]
    listing = os.path.join(args.out, "dask-list.txt")
    with open(listing, "w") as f:
        f.write("\n".join(paths) + "\n")
    ok = True
    for k in counts:
        device = "gpu:" + ",".join(str(i) for i in range(k))
        row = summary["by_gpus"][k] = {"device": device}
        for prec in args.precs.split(","):
            b = bench_run(args.graphrun, device, extra,
                          os.path.join(args.out, f"bench-{k}gpu-{prec}.raw.json"), prec)
            json.dump(b, open(os.path.join(args.out, f"bench-{k}gpu-{prec}.json"), "w"), indent=1)
            row[f"engine_{prec}_images_per_s"] = b["sustained_images_per_s"]
            print(f"{device} {prec}: engine {b['sustained_images_per_s']} img/s", flush=True)
        for dec in ("gpu", "cpu"):
            f = folder_run(args.graphrun, device, folder, extra,
                           os.path.join(args.out, f"folder-{k}gpu-{dec}.jsonl"), dec)
            json.dump(f, open(os.path.join(args.out, f"folder-{k}gpu-{dec}.json"), "w"), indent=1)
            row[f"folder_{dec}_decode_images_per_s"] = f["images_per_s"]
            row[f"folder_{dec}_decode_bound"] = f["bound"]
            print(f"{device} --decode {dec}: {f['images_per_s']} img/s, bound: {f['bound']}; "
                  f"{f['decoder']}\n  {f['stages']}", flush=True)
            if f["exit"] != 0:
                print(f["stderr_tail"], flush=True)
                ok = False
        for dec in ("gpu", "cpu"):
            one = open(os.path.join(args.out, f"folder-1gpu-{dec}.jsonl"), "rb").read()
            mine = open(os.path.join(args.out, f"folder-{k}gpu-{dec}.jsonl"), "rb").read()
            row[f"lines_equal_1gpu_{dec}"] = bool(one) and one == mine
            ok = ok and row[f"lines_equal_1gpu_{dec}"]
        native = folder_run(args.graphrun, device, listing, extra,
                            os.path.join(args.out, f"dask-native-{k}gpu.jsonl"), "gpu")
        d = dask_run(paths, extra, k, args.out)
        d["native_cli"] = {key: native[key] for key in ("command", "images_per_s", "bound")}
        json.dump(d, open(os.path.join(args.out, f"dask-{k}gpu.json"), "w"), indent=1)
        row["dask"] = {key: d.get(key) for key in ("images_per_s", "records_images_per_s", "files",
                                                   "workers", "in_order", "skipped")}
        row["native_list_images_per_s"] = native["images_per_s"]
        print(f"{device}: Dask {d.get('images_per_s')} img/s, native {native['images_per_s']}",
              flush=True)
    agree = agreement(os.path.join(args.out, "folder-1gpu-cpu.jsonl"),
                      os.path.join(args.out, "folder-1gpu-gpu.jsonl"))
    agree = {"yolo_synthetic_weights": agree, "shapes_trained": shapes_agreement(args.graphrun,
                                                                               args.out)}
    json.dump(agree, open(os.path.join(args.out, "decode-agreement.json"), "w"), indent=1)
    summary["decode_agreement"] = agree

    def ratio(a, b):
        return round(a / b, 3) if a and b else None

    base = summary["by_gpus"].get(counts[0], {})
    for k, row in summary["by_gpus"].items():
        for key in ("engine_int8_images_per_s", "engine_fp16_images_per_s",
                    "folder_gpu_decode_images_per_s", "folder_cpu_decode_images_per_s"):
            row[key.replace("_images_per_s", "_over_1gpu")] = ratio(row.get(key), base.get(key))
        row["dask_over_native"] = ratio(row["dask"].get("images_per_s"),
                                        row["native_list_images_per_s"])
    json.dump(summary, open(os.path.join(args.out, "summary.json"), "w"), indent=1)
    print(json.dumps(summary, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
