#!/usr/bin/env python3
"""The batch-curve table of README.md ("On a GPU") from graphrun_bench's JSON, and optionally
peers.py's: sustained images/s (runs in flight, copies included) per precision and batch, the
micro-batch each engine runs as, and its build time.

    python3 bench/batch_curve.py BENCH.json [--peers PEERS.json] [--build]

BENCH.json: `graphrun_bench --prec int8,fp16,fp32 --batch 1,8,32,64,128,256 --inflight 3 --json`.
PEERS.json: `python3 bench/peers.py --batch-curve 1,8,32,64,128,256 --json` (rows "(c)" fp16 and
"(g)" fp32 with copies, wall-clock images/s: what a caller waits, as graphrun_bench measures).
--build adds a table of build times and their phases (ms). Prints Markdown; exit 1 on a file
that is not such JSON.
"""
import argparse
import json
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as err:
        sys.exit(f"batch_curve.py: {path}: {err}")


def fmt(x):
    return f"{x:,.0f}"


def graphrun_rows(bench):
    """{precision: {batch: result}} of the successful results."""
    rows = {}
    for r in bench.get("results", []):
        if r.get("ok"):
            rows.setdefault(r["precision"], {})[r["batch"]] = r
    return rows


def peer_rows(peers):
    rows = {}
    for r in peers.get("results", []):
        if "images_per_s_wall" not in r:
            continue
        if r["name"].startswith("(c)"):
            rows.setdefault("PyTorch fp16, CUDA graph", {})[r["batch"]] = r["images_per_s_wall"]
        elif r["name"].startswith("(g)"):
            rows.setdefault("PyTorch fp32, CUDA graph", {})[r["batch"]] = r["images_per_s_wall"]
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bench")
    ap.add_argument("--peers")
    ap.add_argument("--build", action="store_true")
    args = ap.parse_args()
    bench = load(args.bench)
    rows = graphrun_rows(bench)
    peers = peer_rows(load(args.peers)) if args.peers else {}
    batches = sorted({b for r in rows.values() for b in r} | {b for r in peers.values() for b in r})
    if not batches:
        sys.exit(f"batch_curve.py: {args.bench}: no successful results")
    largest = batches[-1]
    print("| precision | " + " | ".join(f"batch {b}" for b in batches) +
          f" | batch {largest} runs as |")
    print("|---" * (len(batches) + 2) + "|")
    order = [p for p in ("int8", "fp16", "fp32", "auto") if p in rows]
    for prec in order:
        cells = [fmt(rows[prec][b]["sustained_images_per_s"]) if b in rows[prec] else "-"
                 for b in batches]
        top = rows[prec].get(largest, {})
        micro = top.get("micro_batch", largest) or largest
        runs_as = f"{largest // micro} x {micro}" if top else "-"
        print(f"| {prec} | " + " | ".join(cells) + f" | {runs_as} |")
    for name, by_batch in sorted(peers.items()):
        cells = [fmt(by_batch[b]) if b in by_batch else "-" for b in batches]
        print(f"| {name} | " + " | ".join(cells) + " | - |")
    inflight = bench.get("inflight", "?")
    device = next((r["device"] for by in rows.values() for r in by.values()), "?")
    print(f"\nimg/s sustained with {inflight} runs in flight (graphrun), wall clock of synchronous "
          f"replays (PyTorch); copies included; {bench.get('date', '?')}, {device}")
    if args.build:
        print("\n| precision | batch | build ms | calibration/map | plan | weights | tactic search "
              "| micro-batch timing | capture | candidates timed (cut) | cached convs |")
        print("|---" * 11 + "|")
        for prec in order:
            for b in sorted(rows[prec]):
                r = rows[prec][b]
                ph = r.get("build_phases_ms", {})
                ts = r.get("tactic_search", {})
                print(f"| {prec} | {b} | {r['build_ms']:.0f} | {ph.get('resolve', 0):.0f} | "
                      f"{ph.get('plan', 0):.0f} | {ph.get('weights', 0):.0f} | "
                      f"{ph.get('tactic_search', ts.get('ms', 0)):.0f} | "
                      f"{ph.get('micro_batch', 0):.0f} | {ph.get('capture', 0):.0f} | "
                      f"{ts.get('candidates', 0)} ({ts.get('cut', 0)}) | {ts.get('cached', 0)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
