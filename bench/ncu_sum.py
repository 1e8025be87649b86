#!/usr/bin/env python3
"""Per-kernel durations from `ncu --csv --metrics gpu__time_duration.sum` output: the last N
kernels (one graph replay) and their sum.  Usage: ncu_sum.py LOG N"""
import csv
import sys

rows = list(csv.reader(open(sys.argv[1], errors="replace")))
header = next((i for i, r in enumerate(rows) if r and r[0] == "ID"), None)
if header is None:
    sys.exit(f"{sys.argv[1]}: no ncu CSV table in it")
names = rows[header]
data = [dict(zip(names, r)) for r in rows[header + 1:] if len(r) == len(names)]
last = data[-int(sys.argv[2]):]
for d in last:
    print(f'{d["ID"]:>5} {d["Kernel Name"][:60]:60} grid {d.get("Grid Size", ""):>14} '
          f'{d["Metric Value"]:>10} {d["Metric Unit"]}')
total = sum(float(d["Metric Value"].replace(",", "")) for d in last)
print(f"{len(data)} kernels profiled; the last {len(last)} sum to {total:.0f} {last[-1]['Metric Unit']}")
