#!/usr/bin/env python3
"""Hot instructions of one kernel from `ncu --page source --print-source sass --csv`: the
instructions with the most warp stall samples (with their top stall reason) and the samples and
executed instructions summed per opcode.  Usage: ncu_sass.py CSV [TOP]"""
import csv
import sys
from collections import Counter, defaultdict

rows = list(csv.reader(open(sys.argv[1], errors="replace")))
top = int(sys.argv[2]) if len(sys.argv) > 2 else 40
head = next((i for i, r in enumerate(rows) if "Source" in r and "Address" in r), None)
if head is None:
    sys.exit(f"{sys.argv[1]}: no SASS table")
cols = rows[head]


def col(name):
    for i, c in enumerate(cols):
        if c == name:
            return i
    return None


src, samp, execd = col("Source"), col("Warp Stall Sampling (All Samples)"), col("Instructions Executed")
stall_cols = [(i, c) for i, c in enumerate(cols) if c.startswith("stall_") or "Stall" in c and i != samp]


def num(r, i):
    try:
        return float(r[i].replace(",", "")) if i is not None and r[i] else 0.0
    except ValueError:
        return 0.0


body = [r for r in rows[head + 1:] if len(r) == len(cols)]
total = sum(num(r, samp) for r in body) or 1
by_op, ex_op = Counter(), Counter()
for r in body:
    op = r[src].split()[0] if r[src].split() else "?"
    if op.startswith("@"):
        op = r[src].split()[1]
    op = op.split(".")[0]
    by_op[op] += num(r, samp)
    ex_op[op] += num(r, execd)
print(f"{len(body)} instructions, {total:.0f} stall samples, {sum(ex_op.values()):.0f} warp instructions executed")
print("per opcode: samples% executed")
for op, s in by_op.most_common(25):
    print(f"  {op:10s} {100 * s / total:5.1f}% {ex_op[op]:14.0f}")
print(f"top {top} instructions: samples% executed source")
for i, r in sorted(enumerate(body), key=lambda x: -num(x[1], samp))[:top]:
    print(f"  {i:5d} {100 * num(r, samp) / total:5.1f}% {num(r, execd):12.0f}  {r[src][:90]}")
