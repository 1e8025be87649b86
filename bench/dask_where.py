#!/usr/bin/env python3
"""Where graphrun.dask loses against the native CLI, one GPU: the same files to JSON Lines through
each layer between the two, each step's images/s, so the difference has an address.

  native        `graphrun --device gpu:0 --input-list L --decode gpu` (the CLI's folder pipeline)
  python        Engine.detect_files_jsonl over the whole list in this process (no Dask): the
                ctypes callback and the GIL, nothing else
  python-4      the same in 4 calls of a quarter each (a task's start and drain, 4 times)
  python-trim   `python` in a child process with the environment a Dask nanny gives its worker
                (MALLOC_TRIM_THRESHOLD_=65536 and OMP/MKL/OPENBLAS_NUM_THREADS=1)
  dask-4        graphrun.dask.detect(output_dir=...) on a LocalCluster of one worker process,
                4 partitions (what bench/multi_gpu.py measures)
  dask-1        the same, one partition
  dask-4-notrim dask-4 with the malloc thresholds README's "Dask" gives the workers
                (dask.config "distributed.nanny.pre-spawn-environ")

Engines are built before each clock (calibration cache shared). Files: bench/multi_gpu.py's
generated COCO-sized JPEGs, repeated to --files paths.

usage (GPU machine, from the source root; DASK_DISTRIBUTED__DIAGNOSTICS__NVML=False there):
  python3 bench/dask_where.py --graphrun build-gpu/graphrun --out DIR [--n 10000] [--files 20000]
      [--steps native,python,...] [--prec int8] [--batch 64]
Writes DIR/dask-where.json (after each step) and prints a table.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))

NANNY_ENV = {"MALLOC_TRIM_THRESHOLD_": "65536", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
             "OPENBLAS_NUM_THREADS": "1"}
STEPS = ["native", "python", "python-4", "python-trim", "dask-4", "dask-1", "dask-4-notrim"]


def build_engine(a, calib):
    import graphrun
    model = graphrun.Model(a.model)
    return model.build(device=a.device, precision=a.prec, batch=a.batch, calib_cache=calib,
                       inflight=3)


def python_run(paths, a, calib, parts, out_path):
    """Engine.detect_files_jsonl over paths in `parts` calls, written to out_path; seconds."""
    batch = a.batch
    engine = build_engine(a, calib)
    engine.detect_files_jsonl(paths[:3 * batch], open(os.devnull, "wb"))  # warm: every slot
    step = (len(paths) + parts - 1) // parts
    t0 = time.perf_counter()
    with open(out_path, "wb", buffering=1 << 20) as f:
        for first in range(0, len(paths), step):
            engine.detect_files_jsonl(paths[first:first + step], f)
    seconds = time.perf_counter() - t0
    stats = engine.files_stats  # the last call's
    engine.close()
    return seconds, stats


def _timed_partition(paths, options, out_dir):
    """In a Dask worker: graphrun.dask's partition task called directly, timed from inside."""
    import graphrun.dask
    t0 = time.perf_counter()
    graphrun.dask.detect_partition_jsonl(paths, options, 0.5, 0.45, out_dir, 99999)
    return time.perf_counter() - t0


def _worker_stats():
    """In a Dask worker: the files_stats of its graphrun.dask engines' last call."""
    import graphrun.dask
    return [e.files_stats for e in graphrun.dask._ENGINES.values()]


def dask_run(paths, a, calib, partitions, lift_trim):
    prec, batch, out = a.prec, a.batch, a.out
    import dask
    import graphrun.dask
    from distributed import Client, LocalCluster
    settings = {}
    if lift_trim:  # README, "Dask": both thresholds raised
        settings["distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"] = 134217728
        settings["distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_"] = 67108864
    parts_dir = os.path.join(out, f"dask-parts-{partitions}-{int(lift_trim)}")
    with dask.config.set(settings), \
            LocalCluster(n_workers=1, processes=True, threads_per_worker=1,
                         dashboard_address=None) as cluster, Client(cluster) as client:
        env = client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
        graphrun.dask.detect(paths[:batch], model=a.model, prec=prec, batch=batch,
                             device=a.device, calib_cache=calib, npartitions=1).compute()  # the engine, built
        t0 = time.perf_counter()
        files = graphrun.dask.detect(paths, model=a.model, prec=prec, batch=batch,
                                     device=a.device, calib_cache=calib, npartitions=partitions,
                                     output_dir=parts_dir)
        seconds = time.perf_counter() - t0
        stats = list(client.run(_worker_stats).values())[0]
        # The same task submitted directly, its time inside the worker beside the client's.
        options = (a.model, None, None, None, prec, batch, a.device, calib)
        t0 = time.perf_counter()
        inside = client.submit(_timed_partition, paths, options, parts_dir, pure=False).result()
        submitted = time.perf_counter() - t0
    lines = sum(1 for f in files for _ in open(f) if not f.endswith("99999.jsonl"))
    return seconds, {"worker_MALLOC_TRIM_THRESHOLD_": list(env.values()), "lines": lines,
                     "last_partition_stats": stats[0] if stats else None,
                     "one_task_submitted_s": submitted, "one_task_inside_worker_s": inside}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graphrun", default="build-gpu/graphrun")
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=10000, help="distinct JPEGs generated")
    ap.add_argument("--files", type=int, default=20000, help="paths (the JPEGs repeated)")
    ap.add_argument("--steps", default=",".join(STEPS))
    ap.add_argument("--prec", default="int8")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--model", default="yolo")
    ap.add_argument("--device", default="gpu", help="gpu (gpu:0 for the CLI) or cpu (a dry run)")
    ap.add_argument("--child", help=argparse.SUPPRESS)  # python-trim's child: the list file
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    calib = os.path.join(args.out, "calib.cache")
    if args.child:
        paths = open(args.child).read().split("\n")
        seconds, stats = python_run(paths, args, calib, 1, os.path.join(args.out, "child.jsonl"))
        print(json.dumps({"seconds": seconds, "stats": stats}))
        return 0
    from multi_gpu import folder_run, make_folder
    folder = make_folder(args.out, args.n)
    names = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".jpg"))
    paths = [names[i % len(names)] for i in range(args.files)]
    listing = os.path.join(args.out, "list.txt")
    with open(listing, "w") as f:
        f.write("\n".join(paths))
    results = {"files": len(paths), "distinct": len(names), "prec": args.prec,
               "batch": args.batch, "cores": len(os.sched_getaffinity(0)), "steps": {}}
    path = os.path.join(args.out, "dask-where.json")
    for step in args.steps.split(","):
        t0 = time.perf_counter()
        extra = {}
        try:
            if step == "native":
                gpu = args.device == "gpu"
                r = folder_run(args.graphrun, "gpu:0" if gpu else "cpu", listing,
                               ["--prec", args.prec, "--batch", str(args.batch), "--model",
                                args.model], os.path.join(args.out, "native.jsonl"),
                               "gpu" if gpu else "cpu")
                seconds, extra = r["seconds"], {"stages": r["stages"], "exit": r["exit"]}
            elif step in ("python", "python-4"):
                seconds, stats = python_run(paths, args, calib, 4 if step == "python-4" else 1,
                                            os.path.join(args.out, step + ".jsonl"))
                extra = {"last_call_stats": stats}
            elif step == "python-trim":
                env = dict(os.environ, **NANNY_ENV)
                run = subprocess.run([sys.executable, __file__, "--out", args.out, "--prec",
                                      args.prec, "--batch", str(args.batch), "--model",
                                      args.model, "--device", args.device, "--child", listing],
                                     env=env, capture_output=True, text=True, check=False)
                child = json.loads(run.stdout.strip().splitlines()[-1]) \
                    if run.returncode == 0 else {}
                seconds = child.get("seconds")
                extra = {"exit": run.returncode, "stderr_tail": run.stderr[-1500:],
                         "last_call_stats": child.get("stats")}
            elif step.startswith("dask-"):
                partitions = int(step.split("-")[1])
                seconds, extra = dask_run(paths, args, calib, partitions,
                                          step.endswith("notrim"))
            else:
                raise ValueError(f"unknown step {step}")
        except Exception as exc:  # a step's failure is its result; the others still run
            seconds, extra = None, {"error": f"{type(exc).__name__}: {exc}"}
        rate = len(paths) / seconds if seconds else None
        results["steps"][step] = dict(extra, seconds=seconds, images_per_s=rate,
                                      wall_s=time.perf_counter() - t0)
        st = extra.get("last_call_stats") or extra.get("last_partition_stats") or {}
        keys = ("setup_s", "elapsed_s", "finish_s", "main_wait_decoded_s", "main_wait_engine_s", "main_report_s",
                "main_deliver_s", "handoff_s", "read_s", "decode_s")
        detail = " ".join(f"{k[:-2]}={st[k]:.3f}" for k in keys if k in st)
        print(f"{step:14s} {rate or 0:10,.0f} img/s  ({seconds or 0:.2f} s) {extra.get('error', '')}"
              f"\n{'':14s} last call: {st.get('images')} images, {st.get('threads')} threads, "
              f"decoder {st.get('decoder')!r}: {detail}" if st else
              f"{step:14s} {rate or 0:10,.0f} img/s  ({seconds or 0:.2f} s) {extra.get('error', '')}",
              flush=True)
        if "one_task_submitted_s" in extra:
            print(f"{'':14s} one task of all paths: {extra['one_task_submitted_s']:.3f} s from the "
                  f"client, {extra['one_task_inside_worker_s']:.3f} s inside the worker", flush=True)
        with open(path + ".tmp", "w") as f:
            json.dump(results, f, indent=1)
        os.replace(path + ".tmp", path)
    native = results["steps"].get("native", {}).get("images_per_s")
    print("| step | images/s | of native |\n|---|---|---|")
    for step, r in results["steps"].items():
        rate = r.get("images_per_s")
        share = f"{rate / native:.0%}" if rate and native else "-"
        print(f"| {step} | {rate or 0:,.0f} | {share} |")
    return 0 if all(r.get("images_per_s") for r in results["steps"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
