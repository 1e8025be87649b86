#!/usr/bin/env python3
"""Regenerate docs/REPORT.md and docs/report.svg from the project's own commands.

Runs, with a timeout each, from the source root: graphrun_bench (batch-1 latency and its split
into conversion / copies / compute; GPU only, the CPU gets `graphrun --runs N` timings), graphrun
compare (NRMSE against fp32 per precision, int8 calibration method and the mixed map of --prec
auto, and p50 latency), graphrun eval on the trained `shapes` model (mAP per precision, per int8
calibration method and auto),
graphrun plan --json (the data type each layer runs in, Q/DQ nodes) and compare on Darknet's
classifiers darknet19 and resnet18. A command that fails or times out is reported in the report,
never a crash. Python 3 standard library only.

    tools/report/make_report.py [--build DIR] [--device gpu|cpu] [--quick] [--out DIR]
"""
import argparse, datetime, html, json, math, os, platform, re, subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PRECS = ["fp32", "fp16", "int8"]
METHODS = ["max", "percentile", "entropy", "mse"]
CLASSIFIERS = ["darknet19", "resnet18"]


class Runner:
    """Runs commands from the source root; keeps every command line and every failure."""

    def __init__(self, timeout):
        self.timeout, self.commands, self.problems = timeout, [], []

    def run(self, argv, what, timeout=None):
        # Paths as the reader would type them: the tree's relative, others (the --out scratch
        # files) under $OUT, never this machine's absolute path.
        line = " ".join(os.path.relpath(a, ROOT) if os.path.isabs(a) and a.startswith(ROOT)
                        else "$OUT/" + os.path.basename(a) if os.path.isabs(a) else a
                        for a in argv)
        self.commands.append(line)
        try:
            p = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                               timeout=timeout or self.timeout)
        except subprocess.TimeoutExpired:
            self.problems.append(f"{what}: `{line}` timed out after {timeout or self.timeout} s")
            return None
        except OSError as e:
            self.problems.append(f"{what}: `{line}` could not start: {e}")
            return None
        if p.returncode != 0:
            err = (p.stderr.strip().splitlines() or ["(no message)"])[-1]
            self.problems.append(f"{what}: `{line}` exited {p.returncode}: {err}")
            return None
        return p

    def run_json(self, argv, what, timeout=None):
        p = self.run(argv, what, timeout)
        if p is None:
            return None
        try:
            return json.loads(p.stdout)
        except ValueError as e:
            self.problems.append(f"{what}: output is not JSON ({e})")
            return None


def latency(r, a, graphrun, bench, model):
    """{prec: {p50, p99, convert, copy, compute}} at batch 1."""
    rows = {}
    if a.device == "gpu":
        path = os.path.join(a.out, f".bench-{model}.json")
        argv = bench + ["--model", model, "--batch", "1", "--prec", ",".join(PRECS),
                        "--iters", str(a.iters), "--warmup", str(max(1, a.iters // 10)),
                        "--json", path]
        if r.run(argv, f"bench {model}") is not None:
            with open(path) as f:
                for row in json.load(f)["results"]:
                    if row.get("ok"):
                        s = row["engine_split_median_us"]
                        rows[row["precision"]] = dict(p50=row["p50_us"], p99=row["p99_us"],
                                                      device=row["device"], **s)
            os.remove(path)
        return rows
    pat = re.compile(r"type conversion ([\d.]+) us, memory copy ([\d.]+) us, computation "
                     r"([\d.]+) us; end to end ([\d.]+) us(?:; median of \d+ runs ([\d.]+) us, "
                     r"p99 ([\d.]+) us)?")
    for prec in PRECS:
        p = r.run(graphrun + ["--model", model, "--device", "cpu", "--prec", prec, "--runs",
                              str(a.iters), "--no-output"], f"latency {model} {prec}")
        m = pat.search(p.stderr) if p else None
        if m:
            conv, copy, comp, e2e, p50, p99 = (float(x) if x else None for x in m.groups())
            rows[prec] = dict(p50=p50 or e2e, p99=p99 or e2e, convert=conv, copy=copy,
                              compute=comp, device="CPU reference")
    return rows


def compare(r, a, graphrun, model, methods, inputs, extra=()):
    argv = graphrun + ["compare", "--model", model, "--device", a.device, "--json",
                       "--runs", str(a.runs), *extra]
    for m in methods:
        argv += ["--calib", m]
    for i in inputs:
        argv += ["--input", i]
    out = r.run_json(argv, f"compare {model}")
    return out["rows"] if out else []


def evaluate(r, a, graphrun, methods):
    """[(label, map50, map50_95)] on the shapes validation set."""
    base = graphrun + ["eval", "--model", "shapes", "--images", "data/shapes-val", "--device",
                       a.device, "--json"] + (["--max-images", "10"] if a.quick else [])
    rows = []
    for prec in PRECS + ([] if a.quick else ["auto"]):
        for m in (methods if prec == "int8" else [None]):
            out = r.run_json(base + ["--prec", prec] + (["--calib", m] if m else []),
                             f"eval {prec} {m or ''}".strip())
            if out:
                res = out["results"][0]
                rows.append((f"{prec} {m}" if m else prec, res["map50"], res["map50_95"],
                             out["images"]))
    return rows


def dtype_trace(r, graphrun, model):
    """Per precision: ({layer: 'in>out'}, [Q/DQ/convert node descriptions], {layer: op})."""
    plans, ops = {}, {}
    for prec in PRECS:
        out = r.run_json(graphrun + ["plan", "--model", model, "--prec", prec, "--json"],
                         f"plan {prec}")
        if not out:
            continue
        layers, qdq = {}, []
        for i, n in enumerate(out["nodes"]):
            kind = f"{n['dtype_in'] or '-'}>{n['dtype_out'] or '-'}"
            if n["layer"] >= 0 and n["op"] != "output":
                layers[n["layer"]] = kind
                ops.setdefault(n["layer"], n["op"] + (f" ({n['fused']})" if n["fused"] else ""))
            elif n["op"] in ("quantize", "dequantize", "convert"):
                nxt = next((m for m in out["nodes"][i + 1:]
                            if m["layer"] >= 0 and m["op"] != "output"), None)
                where = f"before layer {nxt['layer']} {nxt['op']}" if nxt else "at the output"
                qdq.append(f"{n['op']} {kind} {where}")
        plans[prec] = (layers, qdq)
    return plans, ops


def fmt(x, scale=1.0):
    return "—" if x is None else f"{x * scale:,.1f}"


def time_unit(values):
    """("us", 1) for GPU-sized times, ("ms", 1e-3) when the largest is 100 ms or more (CPU)."""
    return ("ms", 1e-3) if max([v for v in values if v] or [0]) >= 1e5 else ("us", 1.0)


def svg_plot(points, path):
    """Scatter of NRMSE (log scale) against p50 latency; fp32 (NRMSE 0) sits on the floor line."""
    W, H, L, R, T, B = 720, 440, 80, 30, 40, 60
    pts = [p for p in points if p[2] is not None and p[2] > 0]
    unit, scale = ("ms", 1e-3) if max([p[2] for p in pts] or [0]) >= 1e4 else ("us", 1.0)
    pts = [(m, lab, x * scale, y) for m, lab, x, y in pts]
    xs = [p[2] for p in pts] or [1.0]
    ys = [p[3] for p in pts if p[3] > 0] or [1e-4]
    step = 10 ** math.floor(math.log10(max(xs) / 5))
    step *= next(m for m in (1, 2, 5, 10) if max(xs) * 1.05 / (step * m) <= 6)
    x0, x1 = 0.0, math.ceil(max(xs) * 1.05 / step) * step
    y0, y1 = 10 ** (math.floor(math.log10(min(ys))) - 1), 10 ** math.ceil(math.log10(max(ys)))
    y_floor = y0  # where the fp32 reference (NRMSE 0) is drawn
    sx = lambda x: L + (x - x0) / (x1 - x0) * (W - L - R)
    sy = lambda y: H - B - (math.log10(max(y, y_floor)) - math.log10(y0)) / \
        (math.log10(y1) - math.log10(y0)) * (H - T - B)
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]
    models = list(dict.fromkeys(p[0] for p in pts))
    e = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
         f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="15">'
         'Output error (NRMSE vs fp32) against p50 latency</text>',
         f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>',
         f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>',
         f'<text x="{(L + W - R) / 2}" y="{H - 15}" text-anchor="middle">p50 latency ({unit}, batch 1)'
         '</text>',
         f'<text x="18" y="{(T + H - B) / 2}" text-anchor="middle" '
         f'transform="rotate(-90 18 {(T + H - B) / 2})">NRMSE (log scale; fp32 = 0 on the axis)</text>']
    for k in range(int(round(x1 / step)) + 1):
        e.append(f'<text x="{sx(k * step):.1f}" y="{H - B + 16}" text-anchor="middle">'
                 f'{k * step:g}</text>')
    d = int(math.log10(y0))
    while 10 ** d <= y1 * 1.001:
        y = sy(10 ** d)
        e.append(f'<line x1="{L - 4}" y1="{y:.1f}" x2="{W - R}" y2="{y:.1f}" stroke="#ddd"/>')
        e.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">1e{d}</text>')
        d += 1
    placed = []  # label boxes (x, y, width): a label that would overlap one moves down a line
    for model, label, x, y in pts:
        c = colors[models.index(model) % len(colors)]
        e.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="4" fill="{c}"/>')
        label += " (0)" if y <= 0 else ""
        lw = 7 * len(label)  # about 7 px a character at 12 px
        lx, ly = min(sx(x) + 6, W - lw), sy(y) - 6  # near the right edge: left of the point
        while any(abs(ly - py) < 13 and lx < px + pw and px < lx + lw for px, py, pw in placed):
            ly += 13
        placed.append((lx, ly, lw))
        e.append(f'<text x="{lx:.1f}" y="{ly:.1f}" fill="{c}">{html.escape(label)}</text>')
    for i, model in enumerate(models):
        c = colors[i % len(colors)]
        e.append(f'<text x="{L + 10}" y="{T + 16 * i + 12}" fill="{c}">● '
                 f'{html.escape(model)}</text>')
    e.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(e) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", help="build directory (default build-gpu, else build)")
    ap.add_argument("--device", choices=["gpu", "cpu"], default="gpu")
    ap.add_argument("--quick", action="store_true", help="small iteration counts and subsets")
    ap.add_argument("--model", help="model of the latency, compare and plan sections "
                    "(default yolo; shapes with --quick)")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs"), help="where REPORT.md and "
                    "report.svg go (default docs/)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per command")
    a = ap.parse_args()
    build = a.build or next((d for d in ("build-gpu", "build")
                             if os.path.isdir(os.path.join(ROOT, d))), "build")
    build = os.path.abspath(os.path.join(ROOT, build))
    graphrun = [os.path.join(build, "graphrun")]
    bench = ([os.path.join(build, "graphrun_bench")]
             if os.path.exists(os.path.join(build, "graphrun_bench")) else graphrun + ["bench"])
    model = a.model or ("shapes" if a.quick else "yolo")
    a.iters, a.runs = (5, 1) if a.quick else ((1000, 20) if a.device == "gpu" else (5, 1))
    methods = ["max", "mse"] if a.quick else METHODS
    os.makedirs(a.out, exist_ok=True)
    r = Runner(a.timeout)

    lat = {model: latency(r, a, graphrun, bench, model)}
    cmp_rows = compare(r, a, graphrun, model, methods,
                       ["data/shapes.png"] if a.quick else [])
    if not a.quick:  # the mixed map of --prec auto, run apart so that a failure costs one row
        cmp_rows += [row for row in compare(r, a, graphrun, model, ["max"], [], ["--prec", "auto"])
                     if row["precision"] == "auto"]
    ev = evaluate(r, a, graphrun, methods)
    plans, ops = dtype_trace(r, graphrun, model)
    cls = {}
    for net in ([] if a.quick else CLASSIFIERS):
        cls[net] = compare(r, a, graphrun, net, ["max"], [])
        if a.device == "gpu":
            lat[net] = latency(r, a, graphrun, bench, net)

    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip() or "unknown"
    device = next((row["device"] for rows in lat.values() for row in rows.values()), None)
    if a.device == "cpu":
        cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                    if l.startswith("model name")), None) if os.path.exists("/proc/cpuinfo") else None
        device = f"CPU reference on {cpu or platform.machine()}, {os.cpu_count()} cores"
    elif not device:
        device = "GPU (name unavailable: every bench run failed)"
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    md = ["# graphrun report", "",
          "Generated by `tools/report/make_report.py"
          + (f" --device {a.device}" if a.device != "gpu" else "")
          + (" --quick" if a.quick else "") + "`; do not edit by hand.", "",
          f"- device: **{device}** (`--device {a.device}`{', quick mode' if a.quick else ''})",
          f"- date: {date}", f"- commit: `{commit}`", f"- model: `{model}` "
          "(synthetic weights unless `shapes`); mAP on the trained `shapes` model", ""]
    unit, scale = time_unit([x["p50"] for rows in lat.values() for x in rows.values()])
    md += ["## Latency (batch 1)", "",
           "End to end as the caller waits (p50, p99) and the engine's own split: type "
           "conversion (input quantize/convert, output dequantize), host-device copies, "
           "compute (every layer). Times in " + ("milliseconds." if unit == "ms" else "microseconds.")
           + (" On the CPU the split is of the last run and copies are 0." if a.device == "cpu"
              else ""), "",
           "| model | precision | p50 | p99 | conversion | copies | compute |",
           "|---|---|---|---|---|---|---|"]
    for net, rows in lat.items():
        for prec in PRECS:
            x = rows.get(prec)
            md.append(f"| {net} | {prec} | " + (" | ".join(fmt(x[k], scale) for k in (
                "p50", "p99", "convert", "copy", "compute")) if x else "failed | | | |") + " |")
    md += ["", "## Output error against fp32", "",
           "`graphrun compare`: NRMSE = RMSE / (max - min) of the fp32 output, per head; boxes: "
           "fp32 detections matched by the precision (same class, IoU >= 0.5; — for the classifiers, "
           "whose output is the softmax).", "",
           "| model | precision | calibration | NRMSE | max abs error | boxes matched | p50 |",
           "|---|---|---|---|---|---|---|"]
    points = []
    unit, scale = time_unit([row["p50_us"] for rows in [cmp_rows] + list(cls.values())
                             for row in rows])
    for net, rows in [(model, cmp_rows)] + list(cls.items()):
        for row in rows:
            nrmse = max(row["nrmse"]) if row["nrmse"] else None
            label = row["precision"] + (f" {row['method']}" if row["method"] else "")
            md.append(f"| {net} | {row['precision']} | {row['method'] or '—'} | "
                      f"{', '.join(f'{v:.3g}' for v in row['nrmse'])} | "
                      f"{row['max_abs_error']:.3g} | "
                      f"{'—' if net in CLASSIFIERS else row['boxes_matched']} | "
                      f"{fmt(row['p50_us'], scale)} {unit} |")
            points.append((net, label, row["p50_us"], nrmse or 0.0))
    if not cmp_rows:
        md.append("| " + model + " | failed | | | | | |")
    svg_plot(points, os.path.join(a.out, "report.svg"))
    md += ["", "![NRMSE against p50 latency](report.svg)", "",
           "## Accuracy: mAP of the trained `shapes` model", "",
           "`graphrun eval` on `data/shapes-val` (int8 calibrated on `data/shapes-calib`).", "",
           "| precision | images | mAP@0.5 | mAP@0.5:0.95 |", "|---|---|---|---|"]
    md += [f"| {label} | {n} | {m50:.4f} | {m95:.4f} |" for label, m50, m95, n in ev]
    if not ev:
        md.append("| failed | | | |")
    md += ["", f"## Data types: `{model}`", "",
           "`graphrun plan --json`: the data type each layer reads > writes per precision (the "
           "op column: fp32's fusions; int8 convs also requantize their output).", "",
           "| layer | op (fused) | " + " | ".join(PRECS) + " |",
           "|---|---|" + "---|" * len(PRECS)]
    for layer in sorted(ops):
        md.append(f"| {layer} | {ops[layer]} | " + " | ".join(
            plans[p][0].get(layer, "—") if p in plans else "failed" for p in PRECS) + " |")
    md += ["", "Quantize / dequantize / convert nodes:", ""]
    for p in PRECS:
        nodes = plans[p][1] if p in plans else ["plan failed"]
        md.append(f"- {p}: " + ("; ".join(nodes) if nodes else "none"))
    md += ["", "## Commands", "", "```"] + r.commands + ["```", "", "## Problems", ""]
    md += [f"- {p}" for p in r.problems] or ["None: every command succeeded."]
    with open(os.path.join(a.out, "REPORT.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print(f"make_report: wrote {os.path.join(a.out, 'REPORT.md')} and report.svg "
          f"({len(r.problems)} problem{'s' if len(r.problems) != 1 else ''})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
