#!/usr/bin/env python3
"""Per-layer before/after table from two graphrun_bench JSON files (their "layers": each
engine's per-node times, eager at build, median of 3, every micro-batch pass).

    python3 bench/layer_diff.py BEFORE.json AFTER.json [--prec int8] [--batch 64,256]

For each precision and batch found in both files: one Markdown table, one row per node (layer,
kind, µs before, µs after, µs per image after, after/before), and the totals. Nodes are matched
by position and checked by layer and kind (a plan that changed is reported, not guessed at).
Exit 1 when the files hold no common configuration.
"""
import argparse
import json
import sys


def configs(path):
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as err:
        sys.exit(f"layer_diff.py: {path}: {err}")
    out = {}
    for r in data.get("results", []):
        if r.get("ok") and r.get("layers"):
            out[(r["precision"], r["batch"])] = r
    return out


def table(prec, batch, before, after):
    a, b = before["layers"], after["layers"]
    print(f"\n### {prec}, batch {batch} (before: runs as {batch // (before.get('micro_batch') or batch)}"
          f" x {before.get('micro_batch') or batch}; after: "
          f"{batch // (after.get('micro_batch') or batch)} x {after.get('micro_batch') or batch})\n")
    print("| node | layer | kind | before µs | after µs | after µs/image | after/before |")
    print("|---|---|---|---|---|---|---|")
    same = len(a) == len(b) and all(x["layer"] == y["layer"] and x["kind"] == y["kind"]
                                    for x, y in zip(a, b))
    if not same:
        print(f"| - | - | plans differ ({len(a)} vs {len(b)} nodes): no per-node diff | - | - | - "
              "| - |")
    else:
        for i, (x, y) in enumerate(zip(a, b)):
            ratio = y["us"] / x["us"] if x["us"] > 0 else float("nan")
            print(f"| {i} | {x['layer']} | {x['kind']} | {x['us']:.1f} | {y['us']:.1f} | "
                  f"{y['us'] / batch:.3f} | {ratio:.2f} |")
    ta, tb = sum(x["us"] for x in a), sum(y["us"] for y in b)
    print(f"| all | | | {ta:.1f} | {tb:.1f} | {tb / batch:.3f} | "
          f"{tb / ta if ta > 0 else float('nan'):.2f} |")
    print(f"\nsustained img/s: {before['sustained_images_per_s']:,.0f} before, "
          f"{after['sustained_images_per_s']:,.0f} after")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--prec", help="only this precision")
    ap.add_argument("--batch", help="only these batches, comma-separated")
    args = ap.parse_args()
    before, after = configs(args.before), configs(args.after)
    batches = {int(b) for b in args.batch.split(",")} if args.batch else None
    common = sorted(k for k in before if k in after and (not args.prec or k[0] == args.prec)
                    and (batches is None or k[1] in batches))
    if not common:
        sys.exit("layer_diff.py: no precision and batch with per-layer times in both files")
    for prec, batch in common:
        table(prec, batch, before[(prec, batch)], after[(prec, batch)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
