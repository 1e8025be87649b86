#!/usr/bin/env python3
"""Per-kernel table from `ncu --csv` output with metric sections (one row per metric): the last
replay's kernels, one line each with the chosen metrics.  Usage: ncu_detail.py LOG [N]
N defaults to the period of the log's trailing kernel sequence (one graph replay)."""
import csv
import sys
from collections import OrderedDict

WANT = [("gpu__time_duration.sum", "time"), ("Duration", "time"), ("Registers Per Thread", "regs"),
        ("Block Size", "blk"), ("Grid Size", "grid"), ("Waves Per SM", "waves"),
        ("Achieved Occupancy", "occ%"), ("Compute (SM) Throughput", "sm%"),
        ("Memory Throughput", "mem%"), ("L2 Cache Throughput", "l2%"),
        ("DRAM Throughput", "dram%"), ("Issued Warp Per Scheduler", "iss/cyc"),
        ("Active Warps Per Scheduler", "warps")]


def period(names):
    for p in range(1, len(names) // 2 + 1):
        if names[-p:] == names[-2 * p:-p]:
            return p
    return len(names)


rows = list(csv.reader(open(sys.argv[1], errors="replace")))
header = next((i for i, r in enumerate(rows) if r and r[0] == "ID"), None)
if header is None:
    sys.exit(f"{sys.argv[1]}: no ncu CSV table in it")
cols = rows[header]
kern = OrderedDict()
for r in rows[header + 1:]:
    if len(r) < cols.index("Metric Value") + 1:
        continue
    d = dict(zip(cols, r))
    k = kern.setdefault(d["ID"], {"name": d["Kernel Name"]})
    k[d["Metric Name"]] = d["Metric Value"] + ("" if d["Metric Unit"] in ("", "%") else d["Metric Unit"][:2])
ids = list(kern)
n = int(sys.argv[2]) if len(sys.argv) > 2 else period([kern[i]["name"] for i in ids])
have = [(m, short) for m, short in WANT if any(m in kern[i] for i in ids[-n:])]
print("kernel".ljust(36) + "".join(f"{short:>9}" for _, short in have))
for i in ids[-n:]:
    k = kern[i]
    print(k["name"][:35].ljust(36) + "".join(f"{k.get(m, '-')[:8]:>9}" for m, _ in have))
