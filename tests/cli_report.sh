#!/usr/bin/env bash
# tools/report/make_report.py in CI mode (--device cpu --quick, the shapes model) into a scratch
# directory: it exits 0, every sub-command succeeds, REPORT.md has a row for each precision in
# the latency, error, mAP and data-type tables, and report.svg is well-formed SVG with one point
# per compare row (fp32, fp16, int8 max, int8 mse). $1 = the graphrun binary (its folder is the
# build directory). Runs from the source root. Skips (77) without python3.
set -u
bin=$1
source "$(dirname "$0")/lib/check.sh"
command -v python3 >/dev/null || { echo "SKIP cli_report: no python3"; exit 77; }

python3 tools/report/make_report.py --build "$(dirname "$bin")" --device cpu --quick \
  --out "$tmp" >"$tmp/out.txt" 2>&1
check "make_report exit 0" $?
cat "$tmp/out.txt"
grep -q "^None: every command succeeded" "$tmp/REPORT.md"
check "no failed sub-command" $?
[ "$(git rev-parse --short HEAD 2>/dev/null)" = "" ] || grep -q "commit: \`$(git rev-parse --short HEAD)" "$tmp/REPORT.md"
check "commit recorded" $?

python3 - "$tmp" <<'PY'
import re, sys, xml.etree.ElementTree as ET
out = sys.argv[1]
md = open(f"{out}/REPORT.md").read()
fails = []
def section(title):
    m = re.search(r"^## " + re.escape(title) + r".*?$(.*?)(?=^## |\Z)", md, re.S | re.M)
    return m.group(1) if m else ""
def rows(text):
    return [[c.strip() for c in l.strip("|").split("|")] for l in text.splitlines()
            if l.startswith("|") and not l.startswith("|---")][1:]
lat = rows(section("Latency"))
for p in ("fp32", "fp16", "int8"):
    r = [x for x in lat if x[1] == p]
    if len(r) != 1 or not all(float(v.replace(",", "")) >= 0 for v in r[0][2:]):
        fails.append(f"latency row {p}: {r}")
err = rows(section("Output error"))
labels = [(x[1], x[2]) for x in err]
if labels != [("fp32", "—"), ("fp16", "—"), ("int8", "max"), ("int8", "mse")]:
    fails.append(f"error rows {labels}")
elif float(err[0][3]) != 0 or not 0 < float(err[1][3]) < float(err[2][3]):
    fails.append(f"NRMSE not 0 < fp16 < int8: {err}")
acc = {x[0]: x for x in rows(section("Accuracy"))}
for p in ("fp32", "fp16", "int8 max", "int8 mse"):
    if p not in acc or not 0.5 <= float(acc[p][2]) <= 1.0:
        fails.append(f"mAP row {p}: {acc.get(p)}")
dt = rows(section("Data types"))
if len(dt) != 11 or any(x[2:] != ["f32>f32", "f16>f16", "i8>i8"] for x in dt if x[1].startswith("conv")):
    fails.append(f"data-type rows: {dt[:3]}...")
if "- int8: quantize u8>i8" not in md:
    fails.append("no int8 quantize node listed")
svg = ET.parse(f"{out}/report.svg").getroot()
ns = "{http://www.w3.org/2000/svg}"
if svg.tag != ns + "svg" or len(svg.findall(ns + "circle")) != 4:
    fails.append(f"svg: root {svg.tag}, {len(svg.findall(ns + 'circle'))} points")
for f in fails:
    print("report check:", f)
sys.exit(1 if fails else 0)
PY
check "report tables and svg" $?

echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
