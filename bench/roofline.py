#!/usr/bin/env python3
"""Roofline tables from `graphrun bench --roofline --json` files (docs/performance.md, "The
roofline table"): per plan node its FLOPs, must-move bytes, floor, in-graph time and % of floor.

    python3 bench/roofline.py RESULT.json                 # one file: its tables
    python3 bench/roofline.py BEFORE.json AFTER.json      # two: before / after side by side
    [--prec int8,fp16] [--batch 1,64]

One Markdown table per precision and batch (in both files, with two), then a summary line: the
sum of the floors, the nodes' in-graph time and the untraced replay. With two files, nodes are
matched by position and checked by layer and op (a plan that changed is reported, not guessed
at). Exit 1 when there is nothing to table.
"""
import argparse
import json
import sys


def tables(path):
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as err:
        sys.exit(f"roofline.py: {path}: {err}")
    out = {}
    for r in data.get("results", []):
        if r.get("ok") and r.get("roofline"):
            out[(r["precision"], r["batch"])] = (r, data)
    return out


def pct(floor, us):
    return f"{100.0 * floor / us:.1f}%" if us > 0 else "-"


def header(prec, batch, r, data):
    t = r["roofline"]
    p = t["peaks"]
    mb = t.get("micro_batch") or batch
    return (f"{data.get('model', '?')} {prec} batch {batch} on {r.get('device', '?')} "
            f"({batch // mb} x {mb} images a replay; peaks: copy {p['copy_gb_per_s']:.0f} GB/s, "
            f"int8 {p['int8_tops']:.0f} TOPS, fp16 {p['fp16_tflops']:.0f} TFLOPS, "
            f"fp32 {p['fp32_tflops']:.1f} TFLOPS)")


def summary(t):
    return (f"sum of floors {t['floor_sum_us']:.1f} µs; nodes {t['kernel_sum_us']:.1f} µs "
            f"in the graph (busy {t['busy_us']:.1f}, copies {t['copy_us']:.1f}, unclaimed "
            f"{t['unclaimed_us']:.1f}); replay {t['replay_us']:.1f} µs: floors / replay "
            f"{pct(t['floor_sum_us'], t['replay_us'])}")


def one(prec, batch, r, data):
    t = r["roofline"]
    print(f"\n### {header(prec, batch, r, data)}\n")
    print("| node | layer | op | prec | kernels | MFLOP | KB | floor µs | measured µs | % of floor |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in t["nodes"]:
        print(f"| {n['node']} | {n['layer']} | {n['op']} | {n['precision']} | {n['kernels']} | "
              f"{n['flops'] / 1e6:.1f} | {n['bytes'] / 1e3:.1f} | {n['floor_us']:.2f} | "
              f"{n['us']:.2f} | {pct(n['floor_us'], n['us'])} |")
    print(f"\n{summary(t)}")


def two(prec, batch, before, after):
    a, b = before[0]["roofline"], after[0]["roofline"]
    print(f"\n### before: {header(prec, batch, *before)}\n### after: {header(prec, batch, *after)}\n")
    na, nb = a["nodes"], b["nodes"]
    if len(na) != len(nb) or any(x["layer"] != y["layer"] or x["op"] != y["op"]
                                 for x, y in zip(na, nb)):
        print(f"plans differ ({len(na)} vs {len(nb)} nodes): no per-node diff")
    else:
        print("| node | layer | op | floor µs | before µs | after µs | after/before | "
              "% of floor before | after |")
        print("|---|---|---|---|---|---|---|---|---|")
        for x, y in zip(na, nb):
            ratio = f"{y['us'] / x['us']:.2f}" if x["us"] > 0 else "-"
            print(f"| {y['node']} | {y['layer']} | {y['op']} | {y['floor_us']:.2f} | "
                  f"{x['us']:.2f} | {y['us']:.2f} | {ratio} | {pct(x['floor_us'], x['us'])} | "
                  f"{pct(y['floor_us'], y['us'])} |")
    print(f"\nbefore: {summary(a)}\nafter: {summary(b)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", nargs="+", help="one or two graphrun bench --roofline --json files")
    ap.add_argument("--prec", help="precisions to show, comma-separated")
    ap.add_argument("--batch", help="batches to show, comma-separated")
    args = ap.parse_args()
    if len(args.json) > 2:
        ap.error("one or two JSON files")
    files = [tables(p) for p in args.json]
    keys = set(files[0])
    for f in files[1:]:
        keys &= set(f)
    if args.prec:
        keys = {k for k in keys if k[0] in args.prec.split(",")}
    if args.batch:
        keys = {k for k in keys if str(k[1]) in args.batch.split(",")}
    if not keys:
        sys.exit("roofline.py: no roofline table (in both files) for that precision and batch "
                 "(run graphrun bench --roofline --json)")
    order = {"fp32": 0, "fp16": 1, "int8": 2, "auto": 3}
    for prec, batch in sorted(keys, key=lambda k: (order.get(k[0], 9), k[1])):
        if len(files) == 1:
            one(prec, batch, *files[0][(prec, batch)])
        else:
            two(prec, batch, files[0][(prec, batch)], files[1][(prec, batch)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
