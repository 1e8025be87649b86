#!/usr/bin/env bash
# `graphrun bench`: usage errors, and on a GPU a short run whose JSON has the same fields as
# bench/graphrun_bench's (one code path, tools/bench_core.c). Without a GPU: the usage checks,
# then exit 77 (skipped) with one line: graphrun's own status without a GPU is 4 (docs/errors.md);
# 77 is only ctest's skip code, so this script translates. $1 = the graphrun binary; graphrun_bench lies next to it.
set -u
bin=$1
source "$(dirname "$0")/lib/check.sh"

"$bin" bench --help | grep -q -- '--eager'; check "bench --help" $?
"$bin" bench --batch 0 >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "^graphrun bench: --batch '0' is not valid" "$tmp/err"; check "bad --batch: exit 2" $?
"$bin" bench --frobnicate >/dev/null 2>&1; [ $? -eq 2 ]; check "unknown option: exit 2" $?
"$bin" bench --inflight 9 >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "^graphrun bench: --inflight '9' is not an integer in 0..8" "$tmp/err"; check "bad --inflight: exit 2" $?

# --roofline (docs/performance.md, "Roofline"): needs the CUDA graph, a CUPTI build, a GPU. With
# them, a table per engine: every launching node timed in the graph (at least one kernel, a
# positive time and floor), its exclusive times adding up to no more than the untraced replay.
# bench/roofline.py on two hand-made tables (tests/data/roofline): each node's % of floor (floor /
# measured) before and after, the failed configuration left out, exit 1 for one not there.
rf=(python3 bench/roofline.py tests/data/roofline/before.json)
"${rf[@]}" tests/data/roofline/after.json | grep -qxF '| 1 | 0 | conv | 20.00 | 206.50 | 103.25 | 0.50 | 9.7% | 19.4% |'
check "roofline.py: before / after row" $?
"${rf[@]}" | grep -qxF '| 2 | 14 | conv | int8 | 2 | 1000.0 | 15000.0 | 5.00 | 35.40 | 14.1% |'
check "roofline.py: one table's row" $?
"${rf[@]}" --prec fp16 >/dev/null 2>&1; [ $? -eq 1 ]; check "roofline.py: nothing to table, exit 1" $?
"$bin" bench --roofline --eager >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "^graphrun bench: --roofline times the kernels inside the CUDA graph" "$tmp/err"
check "--roofline --eager: exit 2" $?
"$bin" bench --roofline --prec int8 --batch 1 --iters 5 --warmup 1 --json "$tmp/r.json" >"$tmp/rout" 2>&1
rc=$?
case $rc in
  3) grep -q "^graphrun bench: --roofline is unavailable: this graphrun was built without CUPTI" "$tmp/rout"
     check "--roofline without CUPTI: exit 3, one line" $? ;;
  4) grep -q "no CUDA device visible" "$tmp/rout"; check "--roofline without a GPU: exit 4" $? ;;
  0) grep -q "^roofline int8 batch 1 on " "$tmp/rout" && grep -q "^sum of floors " "$tmp/rout"
     check "--roofline: the text table" $?
     python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))["results"][0]["roofline"]
n = t["nodes"]
assert n and all(x["kernels"] >= 1 and x["us"] > 0 and x["floor_us"] > 0 and x["bytes"] > 0 for x in n), n
assert t["peaks"]["copy_gb_per_s"] > 0 and t["peaks"]["int8_tops"] > 0 and t["replay_us"] > 0, t
assert sum(x["exclusive_us"] for x in n) <= 1.1 * t["replay_us"] + 20, t
assert abs(sum(x["floor_us"] for x in n) - t["floor_sum_us"]) < 0.01 * t["floor_sum_us"] + 0.01, t
' "$tmp/r.json"
     check "--roofline: the JSON table" $? ;;
  *) check "--roofline: exit $rc" 1 ;;
esac

args=(--prec fp32,int8 --batch 1,4 --iters 20 --warmup 2 --inflight 2 --tactic-search)
"$bin" bench "${args[@]}" --json "$tmp/a.json" >"$tmp/out" 2>&1
rc=$?
if [ $rc -eq 4 ] && grep -q "no CUDA device visible" "$tmp/out"; then
  echo "$pass passed, $fails failed; no CUDA device visible: the timed run is skipped"
  [ $fails -eq 0 ] && exit 77
  exit 1
fi
[ $rc -eq 0 ]; check "bench run exit 0 (got $rc)" $?
"$(dirname "$bin")/graphrun_bench" "${args[@]}" --json "$tmp/b.json" >/dev/null 2>&1
check "graphrun_bench run" $?
keys() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sorted(d), [sorted(r) for r in d["results"]])' "$1"; }
[ "$(keys "$tmp/a.json")" = "$(keys "$tmp/b.json")" ]; check "same JSON fields" $?
python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"]; assert len(r)==4 and all(x["ok"] and x["output_sane"] and x["images_per_s"]>0 and x["inflight"]==2 and x["sustained_images_per_s"]>0 and x["device_memory"]["weights"]>0 for x in r)' "$tmp/a.json"
check "4 configurations measured (2 in flight), outputs sane" $?
# Build time and the tactic search in the JSON: int8 searched its convs (several tiles each), fp32
# its convs' algorithms (docs/tactics.md: every fp32 conv has at least the rule's candidate).
python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"]; assert all(x["build_ms"]>0 and x["tactic_search"]["convs"]>0 and (x["tactic_search"]["candidates"]>x["tactic_search"]["convs"] if x["precision"]=="int8" else x["tactic_search"]["candidates"]>=x["tactic_search"]["convs"]) for x in r)' "$tmp/a.json"
check "JSON build_ms and tactic_search" $?
# With a timing cache the second bench's builds time no candidate.
"$bin" bench --prec int8 --batch 1 --iters 5 --warmup 1 --tactic-search --timing-cache "$tmp/t.cache" --json "$tmp/c1.json" >/dev/null 2>&1
"$bin" bench --prec int8 --batch 1 --iters 5 --warmup 1 --tactic-search --timing-cache "$tmp/t.cache" --json "$tmp/c2.json" >/dev/null 2>&1
python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["results"][0]["tactic_search"]; assert t["candidates"]==0 and t["cached"]==t["convs"]>0, t' "$tmp/c2.json"
check "--timing-cache: the second build times nothing" $?
echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
