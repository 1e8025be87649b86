#!/usr/bin/env python3
"""The AlexeyAB models' table: accuracy against AlexeyAB's own build and speed on the GPU, beside
PyTorch's CUDA graph of the same network, for yolov4-tiny, yolov7-tiny, yolov4-csp and yolov4.

One command on the GPU machine, from the source root, with a time budget; every step has its own
time limit and writes its JSON (and its log) as soon as it ends, and summary.json is rewritten after
each step, so a step that fails or runs out of time loses nothing measured before it. In --out:

  bench-<model>-<prec>-b<batch>.raw.json   `graphrun_bench --model M --prec P --batch B
                                           --inflight 3 --json` (one configuration per run: its
                                           own iterations and time limit)
  peers-<model>.raw.json                   `bench/peers.py --cfg models/<model>.cfg --no-compile
                                           --no-fp32 --no-nchw --json`: PyTorch fp16
                                           channels-last CUDA graph, batch 1 and 64; row (c) has
                                           the copies in the graph (the same call as graphrun's)
  <step>.json                              each step: command, exit, time, limit, what was parsed
  logs/<step>.log                          each command's output
  tests.json                               `test_gpu_alexeyab` (GPU fp32/fp16/int8 vs the CPU
                                           engine, NRMSE per head) and, at the same time (it is
                                           CPU-only), `test_alexeyab` (the CPU reference
                                           vs AlexeyAB's recorded outputs, NRMSE per head,
                                           the detections)
  summary.json                             all of the above and the targets' verdicts

  python3 bench/alexeyab.py --graphrun-bench build-gpu/graphrun_bench --out /tmp/ab
      [--models yolov4-tiny,yolov7-tiny,yolov4-csp,yolov4] [--budget-s 330] [--search-all]
      [--gpu-test build-gpu/test_gpu_alexeyab] [--cpu-test build-gpu/test_alexeyab] [--plan]
  python3 bench/alexeyab.py --table /tmp/ab/summary.json      # reprints the table

The budget is shared out in order: yolov4-tiny, yolov7-tiny, the two tests, yolov4-csp, yolov4,
each group's steps ending by the group's cumulative share of the budget (time a group leaves over
goes to the next), so a slow model never takes a later one's time. Within a model: int8 and fp16
at batch 1 and 64, PyTorch, then fp32 (no target). The two large models (608x608 and 512x512,
77-130 GFLOP/image) are built with --no-tactic-search: measuring every conv's candidate tactics at
batch 64 would take minutes a model (yolov2-tiny's nine convs already take 2-3 s at batch 64,
bench/RESULTS.md), and without the search a batch is not split into measured micro-batches
either (docs/tactics.md); the table says so, and --search-all turns the search on for them too.
Exit status 0 when every step ran and passed, 1 otherwise (the table is printed either way).
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = ("yolov4-tiny", "yolov7-tiny", "yolov4-csp", "yolov4")
BIG = {"yolov4-csp", "yolov4"}
# (warmup, iters) per model size and batch. Batch 64 of yolov4 is ~8 TFLOP a run, ~0.2 s in fp32:
# 2 x (3 + 15) runs (timed, then sustained) stay under 10 s; batch 1 of the tiny models takes
# well under 1 ms, so 1000 runs give a p99 worth reading.
ITERS = {(False, 1): (50, 1000), (False, 64): (20, 200), (True, 1): (20, 200), (True, 64): (3, 15)}
# Shares of --budget-s, cumulative, in the order the groups run.
# The tests: test_gpu_alexeyab runs single-threaded CPU engines (fp32 and fp16) of yolov4 and
# yolov4-csp at 256x256 beside the GPU ones (on this project's 2-core machine 11 and 8 s each).
SHARES = (("yolov4-tiny", 0.16), ("yolov7-tiny", 0.14), ("tests", 0.24), ("yolov4-csp", 0.21),
          ("yolov4", 0.25))
CAP_S = {"bench": 90, "peers": 150, "tests": 300}  # per step, before the budget's own cut
MIN_STEP_S = 5  # a step with less time than this left in its group is skipped, saying so
# The targets for the AlexeyAB models (H100, end to end): yolov4-tiny's, shown for yolov7-tiny too.
TARGET_P50_US = {"int8": 200.0, "fp16": 220.0}
TARGET_B64_IPS = {"int8": 40000.0, "fp16": 28000.0}
TARGET_OVER_TORCH = 2.0


def now():
    return time.monotonic()


def run_logged(cmd, log_path, timeout_s, cwd=ROOT):
    """Start cmd in its own process group, output to log_path; returns the Popen."""
    log = open(log_path, "w")
    log.write("$ " + " ".join(cmd) + "\n")
    log.flush()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=cwd,
                            start_new_session=True)
    proc.log, proc.deadline, proc.started = log, now() + timeout_s, now()
    return proc


def finish(proc):
    """Wait until the process ends or its deadline; a late one's group is killed. Returns
    {rc, timed_out, seconds}."""
    timed_out = False
    try:
        proc.wait(timeout=max(proc.deadline - now(), 0.1))
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    proc.log.close()
    return {"rc": proc.returncode, "timed_out": timed_out,
            "seconds": round(now() - proc.started, 1)}


def tail(path, lines=15):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()[-lines:]
    except OSError:
        return []


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write_json(path, data):
    with open(path + ".tmp", "w") as f:
        json.dump(data, f, indent=1)
    os.replace(path + ".tmp", path)


# --- parsing each step's output --------------------------------------------------------------

BENCH_LINE = re.compile(r"^(fp32|fp16|int8) batch (\d+) on (.+): p50 ([0-9.]+) us, ([0-9.]+) "
                        r"images/s; ([0-9.]+) images/s sustained", re.M)
BENCH_HEAD = re.compile(r"model (\S+) \((\d+)x(\d+)x\d+, ([0-9.]+) GFLOP/image")


def parse_bench(json_path, log_path):
    """graphrun_bench's one configuration: its JSON entry, else (cut short: no JSON) what its
    progress line said."""
    out = {}
    log = "\n".join(tail(log_path, 400))
    head = BENCH_HEAD.search(log)
    if head:
        out.update(input=f"{head.group(2)}x{head.group(3)}", gflops=float(head.group(4)))
    data = load_json(json_path)
    if data and data.get("results"):
        r = data["results"][0]
        if not r.get("ok"):
            out["error"] = r.get("error") or r.get("status")
            return out
        out.update({k: r.get(k) for k in ("device", "p50_us", "p99_us", "max_us", "images_per_s",
                                          "sustained_images_per_s", "inflight", "build_ms",
                                          "micro_batch", "output_sane")})
        out["tactic_search_ms"] = (r.get("tactic_search") or {}).get("ms")
        out["iters"], out["warmup"] = data.get("iters"), data.get("warmup")
        return out
    m = BENCH_LINE.search(log)
    if m:  # the run measured but did not get to write its JSON
        out.update(device=m.group(3), p50_us=float(m.group(4)), images_per_s=float(m.group(5)),
                   sustained_images_per_s=float(m.group(6)),
                   note="from the progress line (no JSON written): no p99")
    return out


def parse_peers(json_path):
    """peers.py's rows (c) (fp16 channels-last CUDA graph with the copies) at batch 1 and the large
    batch, and (b) (compute only) for context."""
    data = load_json(json_path)
    if not data:
        return {}
    out = {"torch": data["meta"].get("torch"), "device": data["meta"].get("device")}
    for r in data.get("results", []):
        if "wall_p50_us" not in r:
            continue
        key = "copies" if r["name"].startswith("(c)") else \
            "compute" if r["name"].startswith("(b) ") else None
        if key:
            out.setdefault(f"b{r['batch']}", {})[key] = {
                k: r[k] for k in ("wall_p50_us", "wall_p99_us", "images_per_s_wall",
                                  "event_p50_us", "iters", "note")}
    return out


GPU_LINE = re.compile(r"^(\S+)\s+(fp32|fp16|int8) head (\d+): NRMSE (\S+) against the CPU "
                      r"(fp32|fp16) engine$")
GPU_DETS = re.compile(r"^(\S+)\s+fp32 detections: CPU (\d+), GPU (\d+)$")
CPU_LINE = re.compile(r"^(\S+) head (\d+) \(layer (\d+)\) (raw|act): NRMSE (\S+) over (\d+) "
                      r"samples$")
CPU_DETS = re.compile(r"^(\S+) detections: (.+)$")
CHECK_FAIL = re.compile(r":[FE]:[^:]*:[^:]*:\d+: (.*)$")  # Check: file:line:F:tcase:test:i: msg


def failures_of(lines, model):
    """The Check failure messages that name `model` first (yolov4 is not yolov4-tiny)."""
    found = []
    for line in lines:
        m = CHECK_FAIL.search(line)
        if m and re.match(re.escape(model) + r"[ :]", m.group(1)):
            found.append(m.group(1))
    return found


def parse_tests(gpu_log, cpu_log):
    """{model: {"gpu": {prec: [NRMSE per head], "detections": ...}, "cpu": {...}}} and the failure
    messages, from the two tests' output."""
    models = {}
    lines = {"gpu": tail(gpu_log, 2000), "cpu": tail(cpu_log, 2000)}
    for line in lines["gpu"]:
        m = GPU_LINE.match(line.strip())
        if m:
            g = models.setdefault(m.group(1), {}).setdefault("gpu", {})
            g.setdefault(m.group(2), []).append(float(m.group(4)))
            g.setdefault("against", {})[m.group(2)] = "CPU " + m.group(5)
        m = GPU_DETS.match(line.strip())
        if m:
            models.setdefault(m.group(1), {}).setdefault("gpu", {})["detections_fp32"] = {
                "cpu": int(m.group(2)), "gpu": int(m.group(3))}
    for line in lines["cpu"]:
        m = CPU_LINE.match(line.strip())
        if m:
            c = models.setdefault(m.group(1), {}).setdefault("cpu", {})
            c.setdefault(m.group(4), []).append(float(m.group(5)))
        m = CPU_DETS.match(line.strip())
        if m:
            models.setdefault(m.group(1), {}).setdefault("cpu", {})["detections"] = m.group(2)
    for model, entry in models.items():
        for side in ("gpu", "cpu"):
            if side in entry:
                entry[side]["failures"] = failures_of(lines[side], model)
    return models


# --- the steps -------------------------------------------------------------------------------

def bench_steps(model, args):
    big = model in BIG
    search = not big or args.search_all
    order = [("int8", 1), ("fp16", 1), ("int8", 64), ("fp16", 64), "peers", ("fp32", 1),
             ("fp32", 64)]
    steps = []
    for item in order:
        if item == "peers":
            warmup, iters = (10, 100) if big else (30, 300)
            out = os.path.join(args.out, f"peers-{model}.raw.json")
            steps.append({"name": f"peers-{model}", "kind": "peers", "model": model,
                          "json": out, "cap": CAP_S["peers"],
                          "cmd": [sys.executable, os.path.join(HERE, "peers.py"), "--cfg",
                                  f"models/{model}.cfg", "--no-compile", "--no-fp32", "--no-nchw",
                                  "--batch", "64", "--iters", str(iters),
                                  "--warmup", str(warmup), "--json", out]})
            continue
        prec, batch = item
        warmup, iters = ITERS[(big, batch)]
        out = os.path.join(args.out, f"bench-{model}-{prec}-b{batch}.raw.json")
        cmd = [args.graphrun_bench, "--model", model, "--prec", prec, "--batch", str(batch),
               "--inflight", "3", "--iters", str(iters), "--warmup", str(warmup), "--json", out]
        if not search:
            cmd.append("--no-tactic-search")
        steps.append({"name": f"bench-{model}-{prec}-b{batch}", "kind": "bench", "model": model,
                      "prec": prec, "batch": batch, "json": out, "cmd": cmd,
                      "cap": CAP_S["bench"], "tactic_search": search})
    return steps


def plan(args):
    """[(group, [steps])] in the order they run."""
    groups = []
    for group, _ in SHARES:
        if group == "tests":
            if not args.no_tests:
                groups.append((group, [{"name": "tests", "kind": "tests",
                                        "cap": CAP_S["tests"]}]))
        elif group in args.models:
            groups.append((group, bench_steps(group, args)))
    return groups


def deadlines(args, start):
    """Each group's deadline: the cumulative share of the budget of the groups that run."""
    shares = [(g, s) for g, s in SHARES
              if g in args.models or (g == "tests" and not args.no_tests)]
    total = sum(s for _, s in shares)
    out, acc = {}, 0.0
    for g, s in shares:
        acc += s / total
        out[g] = start + acc * args.budget_s
    return out


def run_tests(step, args, timeout_s):
    """Both tests at once: the GPU one (its CPU references are single-threaded) and the CPU-only
    oracle test, neither a timing."""
    gpu_log = os.path.join(args.out, "logs", "test_gpu_alexeyab.log")
    cpu_log = os.path.join(args.out, "logs", "test_alexeyab.log")
    procs = {}
    for key, exe, log in (("gpu", args.gpu_test, gpu_log), ("cpu", args.cpu_test, cpu_log)):
        if exe and os.path.exists(exe):
            procs[key] = run_logged([exe], log, timeout_s)
        else:
            with open(log, "w") as f:
                f.write(f"not run: {exe} is not there\n")
    runs = {key: finish(p) for key, p in procs.items()}
    step["runs"] = runs
    step["rc"] = next((r["rc"] for r in runs.values() if r["rc"] != 0), 0 if runs else None)
    step["timed_out"] = any(r["timed_out"] for r in runs.values())
    step["seconds"] = max((r["seconds"] for r in runs.values()), default=0)
    step["commands"] = {"gpu": f"{args.gpu_test} (from {ROOT})",
                        "cpu": f"{args.cpu_test} (from {ROOT})"}
    step["logs"] = {"gpu": gpu_log, "cpu": cpu_log}
    step["result"] = parse_tests(gpu_log, cpu_log)
    step["ok"] = bool(runs) and len(runs) == 2 and all(
        r["rc"] == 0 and not r["timed_out"] for r in runs.values())
    return step


def run_step(step, args, timeout_s):
    if step["kind"] == "tests":
        return run_tests(step, args, timeout_s)
    log = os.path.join(args.out, "logs", step["name"] + ".log")
    try:
        os.remove(step["json"])  # never read an earlier run's file as this one's
    except OSError:
        pass
    step.update(finish(run_logged(step["cmd"], log, timeout_s)))
    step["command"], step["log"] = " ".join(step.pop("cmd")), log
    step["result"] = (parse_bench(step["json"], log) if step["kind"] == "bench"
                      else parse_peers(step["json"]))
    step["ok"] = step["rc"] == 0 and not step["timed_out"]
    if not step["ok"]:
        step["log_tail"] = tail(log)
    return step


def summarise(steps, args, started_at):
    models = {}
    for s in steps:
        m = s.get("model")
        if s["kind"] == "bench":
            entry = models.setdefault(m, {"bench": {}})
            r = dict(s.get("result") or {})
            for key in ("input", "gflops"):
                if key in r:
                    entry[key] = r.pop(key)
            r["step"] = status_of(s)
            r["tactic_search"] = s["tactic_search"]
            entry["bench"].setdefault(s["prec"], {})[str(s["batch"])] = r
        elif s["kind"] == "peers":
            entry = models.setdefault(m, {"bench": {}})
            entry["peers"] = dict(s.get("result") or {}, step=status_of(s))
        elif s["kind"] == "tests":
            for name, r in (s.get("result") or {}).items():
                models.setdefault(name, {"bench": {}}).update(r)
            models["_tests"] = {"step": status_of(s), "runs": s.get("runs", {})}
    summary = {"tool": "bench/alexeyab.py", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                  time.gmtime()),
               "command": " ".join(sys.argv), "budget_s": args.budget_s,
               "elapsed_s": round(now() - started_at, 1), "models_asked": list(args.models),
               "device": next((e["bench"][p][b].get("device") for e in models.values()
                               if isinstance(e, dict) for p in e.get("bench", {})
                               for b in e["bench"][p] if e["bench"][p][b].get("device")), None),
               "models": models, "steps": [{k: s.get(k) for k in
                                            ("name", "ok", "rc", "timed_out", "seconds",
                                             "timeout_s", "skipped")} for s in steps]}
    summary["targets"] = {m: verdicts(models[m]) for m in ("yolov4-tiny", "yolov7-tiny")
                          if m in args.models and m in models}
    return summary


def status_of(step):
    if step.get("skipped"):
        return "skipped: " + step["skipped"]
    if "runs" in step:  # the tests: each one's
        return "; ".join(
            f"{key}: " + ("not run (no such file)" if key not in step["runs"] else
                          "timed out" if step["runs"][key]["timed_out"] else
                          "ok" if step["runs"][key]["rc"] == 0 else
                          f"failed (exit {step['runs'][key]['rc']})") for key in ("gpu", "cpu"))
    if step.get("timed_out"):
        return f"timed out after {step.get('seconds')} s"
    return "ok" if step.get("ok") else f"failed (exit {step.get('rc')})"


# --- the table -------------------------------------------------------------------------------

def bench_of(entry, prec, batch):
    return (entry.get("bench") or {}).get(prec, {}).get(str(batch), {})


def torch_of(entry, batch):
    return ((entry.get("peers") or {}).get(f"b{batch}") or {}).get("copies") or {}


def ratio(a, b):
    return round(a / b, 2) if a and b else None


def verdicts(entry):
    """The targets against one model's figures: {name: (value, target, met)}."""
    out = {}
    for prec, limit in TARGET_P50_US.items():
        v = bench_of(entry, prec, 1).get("p50_us")
        out[f"{prec} b1 p50 us <= {limit:.0f}"] = (v, limit, v <= limit if v else None)
    for prec, floor in TARGET_B64_IPS.items():
        v = bench_of(entry, prec, 64).get("sustained_images_per_s")
        out[f"{prec} b64 sustained img/s >= {floor:.0f}"] = (v, floor, v >= floor if v else None)
    # The same call: a synchronous run with both copies, graphrun_bench's p50 (batch / p50 at 64)
    # against PyTorch's CUDA graph with the copies inside, host clock.
    b1 = ratio(torch_of(entry, 1).get("wall_p50_us"), bench_of(entry, "fp16", 1).get("p50_us"))
    b64 = ratio(bench_of(entry, "fp16", 64).get("images_per_s"),
                torch_of(entry, 64).get("images_per_s_wall"))
    out["fp16 b1 speed-up over PyTorch CUDA graph >= 2x"] = (
        b1, TARGET_OVER_TORCH, b1 >= TARGET_OVER_TORCH if b1 else None)
    out["fp16 b64 speed-up over PyTorch CUDA graph >= 2x (synchronous)"] = (
        b64, TARGET_OVER_TORCH, b64 >= TARGET_OVER_TORCH if b64 else None)
    sus = ratio(bench_of(entry, "fp16", 64).get("sustained_images_per_s"),
                torch_of(entry, 64).get("images_per_s_wall"))
    out["fp16 b64 sustained (3 in flight) over PyTorch CUDA graph (context)"] = (sus, None, None)
    return out


def g(x, digits=2):
    return "-" if x is None else f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.{digits}g}"


def n0(x):
    return "-" if x is None else f"{x:,.0f}"


def cell(entry, prec, batch, key, fmt):
    r = bench_of(entry, prec, batch)
    if r.get(key) is not None:
        return fmt(r[key]) + ("" if r.get("output_sane", True) else " (NOT SANE)")
    if r.get("error"):
        return "failed"
    step = r.get("step", "")
    return "timed out" if step.startswith("timed out") else \
        "skipped" if step.startswith("skipped") else "-"


def worst(values):
    return max(values) if values else None


def table(summary):
    models = [m for m in summary.get("models_asked", MODELS) if m in summary["models"]]
    ms = summary["models"]
    tests = ms.get("_tests", {})
    lines = ["| model | CPU vs AlexeyAB (NRMSE, worst head: raw / act) | detections vs AlexeyAB "
             "| GPU fp32 vs CPU fp32 | GPU fp16 vs CPU fp16 | GPU int8 vs CPU fp32 | fp32 "
             "detections CPU / GPU |", "|---|---|---|---|---|---|---|"]
    for m in models:
        e = ms[m]
        cpu, gpu = e.get("cpu", {}), e.get("gpu", {})
        cpu_cell = f"{g(worst(cpu.get('raw')))} / {g(worst(cpu.get('act')))}" if cpu else "-"
        if cpu.get("failures"):
            cpu_cell += " FAILED"
        dets = cpu.get("detections", "-")
        dets = "equal: " + dets.split(",")[0] if "all matched" in dets else \
            "not recorded" if "not compared" in dets else dets
        gd = gpu.get("detections_fp32")
        gpu_dets = f"{gd['cpu']} / {gd['gpu']}" if gd else "-"
        # A failure names its precision (the test's bounds: fp32 1e-4, fp16 5e-2), else the model.
        failed = {(re.match(r"\S+ (fp32|fp16|int8) head", f) or [None, "model"])[1]
                  for f in gpu.get("failures", [])}
        nrmse = " | ".join(g(worst(gpu.get(p))) + (" FAILED" if p in failed else "")
                           for p in ("fp32", "fp16", "int8"))
        if "model" in failed:
            gpu_dets += " (test FAILED)"
        lines.append(f"| {m} | {cpu_cell} | {dets} | {nrmse} | {gpu_dets} |")
    lines += ["", "| model | input | b1 p50 µs int8 / fp16 / fp32 | b1 p99 µs int8 / fp16 / fp32 "
              "| b64 sustained img/s int8 / fp16 / fp32 | PyTorch fp16 CUDA graph: b1 p50 µs / "
              "b64 img/s | fp16 over PyTorch b1 / b64 | tactics |",
              "|---|---|---|---|---|---|---|---|"]
    for m in models:
        e = ms[m]
        precs = ("int8", "fp16", "fp32")
        p50 = " / ".join(cell(e, p, 1, "p50_us", lambda v: f"{v:,.0f}") for p in precs)
        p99 = " / ".join(cell(e, p, 1, "p99_us", lambda v: f"{v:,.0f}") for p in precs)
        sus = " / ".join(cell(e, p, 64, "sustained_images_per_s", n0) for p in precs)
        t1, t64 = torch_of(e, 1), torch_of(e, 64)
        peer = f"{n0(t1.get('wall_p50_us'))} / {n0(t64.get('images_per_s_wall'))}"
        v = verdicts(e)
        over = " / ".join(
            "-" if x is None else f"{x:.2f}x"
            for x in (v["fp16 b1 speed-up over PyTorch CUDA graph >= 2x"][0],
                      v["fp16 b64 speed-up over PyTorch CUDA graph >= 2x (synchronous)"][0]))
        search = {r.get("tactic_search") for p in e.get("bench", {}).values() for r in p.values()}
        tactics = "searched" if search == {True} else "automatic (--no-tactic-search)" \
            if search == {False} else "mixed" if search else "-"
        lines.append(f"| {m} | {e.get('input', '-')} | {p50} | {p99} | {sus} | {peer} | {over} "
                     f"| {tactics} |")
    targets = summary.get("targets", {})
    if targets:
        names = list(targets)
        lines += ["", "| target (yolov4-tiny's; H100, end to end) | "
                  + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
        for label in targets[names[0]]:
            row = []
            for m in names:
                value, target, met = targets[m][label]
                row.append(g(value, 3) + ("" if target is None else " (not measured)"
                                          if met is None else " ok" if met else " MISS"))
            lines.append(f"| {label} | " + " | ".join(row) + " |")
    steps = summary.get("steps", [])
    bad = [s for s in steps if not s.get("ok")]
    not_ok = "; not: " + ", ".join(f"{s['name']} ({status_of(s)})" for s in bad) if bad else ""
    lines += ["", f"{summary.get('device') or 'GPU ?'}, {summary.get('date')}; "
              f"{len(steps) - len(bad)} of {len(steps)} steps ran and passed in "
              f"{summary.get('elapsed_s')} s (budget {summary.get('budget_s')} s){not_ok}.",
              "CPU vs AlexeyAB: `test_alexeyab`, graphrun's CPU reference against AlexeyAB's "
              "own CPU build's recorded heads and detections (tests/data/alexeyab/; yolov4 and "
              "yolov4-csp at 160x160); GPU vs CPU: "
              "`test_gpu_alexeyab`, NRMSE = RMSE / range of the CPU head, worst of the heads "
              "(yolov4 and yolov4-csp at 256x256), synthetic weights (seed 1), data/dog.jpg.",
              "Latency: host clock around a synchronous `gr_engine_run` (both copies); "
              "sustained: 3 runs in flight (`graphrun_bench --inflight 3`). PyTorch: "
              "`bench/peers.py --cfg`, row (c), fp16 channels-last CUDA graph with the copies in "
              "the graph, host clock of synchronous replays. fp16 over PyTorch: its b1 p50 over "
              "graphrun's; at b64 graphrun's synchronous img/s (batch / p50) over PyTorch's."]
    if tests.get("step", "ok") != "ok":
        lines.append(f"The tests' step: {tests['step']}.")
    return "\n".join(lines)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--table":
        print(table(json.load(open(sys.argv[2]))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graphrun-bench", default="build-gpu/graphrun_bench")
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--budget-s", type=float, default=330.0,
                    help="wall-clock seconds for everything (default 330)")
    ap.add_argument("--gpu-test", default=None,
                    help="test_gpu_alexeyab (default: beside --graphrun-bench)")
    ap.add_argument("--cpu-test", default=None,
                    help="test_alexeyab (default: beside --graphrun-bench, else build/)")
    ap.add_argument("--no-tests", action="store_true", help="skip the two tests")
    ap.add_argument("--search-all", action="store_true",
                    help="tactic search for yolov4 and yolov4-csp too (minutes more)")
    ap.add_argument("--plan", action="store_true", help="print the steps and their limits, run "
                    "nothing")
    args = ap.parse_args()
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        ap.error(f"--models: {', '.join(unknown)} (known: {', '.join(MODELS)})")
    args.graphrun_bench = os.path.abspath(args.graphrun_bench)
    build = os.path.dirname(args.graphrun_bench)
    args.gpu_test = os.path.abspath(args.gpu_test or os.path.join(build, "test_gpu_alexeyab"))
    if args.cpu_test is None:
        beside = os.path.join(build, "test_alexeyab")
        args.cpu_test = beside if os.path.exists(beside) else os.path.join(ROOT, "build",
                                                                           "test_alexeyab")
    args.cpu_test = os.path.abspath(args.cpu_test)
    args.out = os.path.abspath(args.out)
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)

    started_at = now()
    groups = plan(args)
    ends = deadlines(args, started_at)
    if args.plan:
        for group, steps in groups:
            print(f"{group}: ends by {ends[group] - started_at:.0f} s")
            for s in steps:
                print(f"  {s['name']} (limit {s['cap']} s): "
                      + (" ".join(s["cmd"]) if "cmd" in s
                         else f"{args.gpu_test} & {args.cpu_test}"))
        return 0
    done = []
    summary_path = os.path.join(args.out, "summary.json")
    for group, steps in groups:
        print(f"== {group}, by {ends[group] - started_at:.0f} s"
              + (": built with --no-tactic-search (a search at batch 64 would take minutes)"
                 if group in BIG and not args.search_all else ""), flush=True)
        for step in steps:
            left = ends[group] - now()
            step["timeout_s"] = round(min(step["cap"], left), 1)
            if left < MIN_STEP_S:
                step["skipped"] = f"{max(left, 0):.0f} s left of {group}'s share of the budget"
                step["ok"] = False
                step.pop("cmd", None)
            else:
                run_step(step, args, step["timeout_s"])
            done.append(step)
            write_json(os.path.join(args.out, step["name"] + ".json"), step)
            write_json(summary_path, summarise(done, args, started_at))
            print(f"[{now() - started_at:6.1f} s] {step['name']}: {status_of(step)}"
                  + brief(step), flush=True)
    summary = summarise(done, args, started_at)
    write_json(summary_path, summary)
    print()
    print(table(summary))
    return 0 if all(s.get("ok") for s in done) else 1


def brief(step):
    r = step.get("result") or {}
    if step["kind"] == "bench" and r.get("p50_us") is not None:
        return (f"; p50 {r['p50_us']:.1f} us, p99 {g(r.get('p99_us'), 4)} us, sustained "
                f"{r['sustained_images_per_s']:,.0f} img/s")
    if step["kind"] == "bench" and r.get("error"):
        return "; " + r["error"]
    if step["kind"] == "peers":
        return "".join(f"; b{b} {n0(torch_of({'peers': r}, b).get('wall_p50_us'))} us"
                       for b in (1, 64))
    if step["kind"] == "tests":
        return f"; {len(r)} models reported"
    return ""


if __name__ == "__main__":
    sys.exit(main())
