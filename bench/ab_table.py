#!/usr/bin/env python3
"""The before/after table of bench/ab_device.sh: for each model, precision and batch, the base's and
the tree's p50 and p99 latency (host clock around a synchronous run, both copies), their sustained
images/s with runs in flight, and tree / base; with the roofline runs, each version's sum of
in-graph kernel time per replay.

  python3 bench/ab_table.py DIR MODEL [MODEL ...]

DIR holds TAG-base.json and TAG-tree.json (graphrun_bench --json) per model, TAG the model's file
name without .onnx, and optionally roofline-TAG-base.json / roofline-TAG-tree.json. A missing or
failed run prints as such. Exit status 0."""
import json
import os
import sys


def load(path):
    """{(precision, batch): result} of a graphrun_bench JSON, or None when the file is missing."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    return {(r["precision"], r["batch"]): r for r in doc.get("results", [])}


def kernel_us(result):
    """The sum of the roofline's exclusive per-node times (one replay), or None."""
    roof = result.get("roofline") if result else None
    return sum(n["exclusive_us"] for n in roof["nodes"]) if roof else None


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    folder = argv[1]
    print("%-14s %-5s %5s | %17s %17s | %19s %7s" % ("model", "prec", "batch", "p50 base / tree",
                                                     "p99 base / tree", "img/s base / tree",
                                                     "tree/base"))
    for model in argv[2:]:
        tag = os.path.basename(model)
        tag = tag[:-5] if tag.endswith(".onnx") else tag
        runs = {v: load(os.path.join(folder, "%s-%s.json" % (tag, v))) for v in ("base", "tree")}
        if not runs["base"] or not runs["tree"]:
            print("%-14s no result (%s)" % (tag, ", ".join(v for v in runs if not runs[v])))
            continue
        for key in sorted(set(runs["base"]) | set(runs["tree"])):
            b, t = runs["base"].get(key), runs["tree"].get(key)
            if not b or not t or not b.get("ok", True) or not t.get("ok", True):
                print("%-14s %-5s %5d | failed in %s" % (tag, key[0], key[1],
                                                         "base" if not b or not b.get("ok", True) else "tree"))
                continue
            sb, st = b["sustained_images_per_s"], t["sustained_images_per_s"]
            print("%-14s %-5s %5d | %8.1f / %6.1f %8.1f / %6.1f | %9.0f / %7.0f %7.3f" % (
                tag, key[0], key[1], b["p50_us"], t["p50_us"], b["p99_us"], t["p99_us"], sb, st,
                st / sb if sb else 0.0))
        roofs = {v: load(os.path.join(folder, "roofline-%s-%s.json" % (tag, v))) for v in ("base", "tree")}
        if roofs["base"] and roofs["tree"]:
            for key in sorted(roofs["base"]):
                kb, kt = kernel_us(roofs["base"][key]), kernel_us(roofs["tree"].get(key))
                if kb and kt:
                    print("%-14s %-5s %5d | kernels per replay %.0f -> %.0f us (%+.1f%%)" % (
                        tag, key[0], key[1], kb, kt, 100.0 * (kt / kb - 1.0)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
