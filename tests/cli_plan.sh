#!/usr/bin/env bash
# `graphrun plan`: the arena summary (arena bytes, lower bound, naive sum) for YOLOv2-tiny and
# yolov3-tiny at batch 1 and 8 in each precision, JSON keys, DOT with Q/DQ marked, the SVG
# timeline, the I/O fusion flags, grouped / dilated / strided convs in fp16 and int8 (no
# conversions around them), and usage errors. $1 is the graphrun binary; run from the source
# root.
set -u
graphrun=$1
if ! "$graphrun" plan --help 2>/dev/null | grep -q "usage: graphrun plan"; then
    echo "skipped: this graphrun build does not dispatch the plan subcommand"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for model in yolov2-tiny yolov3-tiny; do
    for prec in fp32 fp16 int8; do
        for batch in 1 8; do
            "$graphrun" plan --model "$model" --prec "$prec" --batch "$batch" > "$tmp/out.txt" \
                || fail "plan $model $prec $batch exited $?"
            summary=$(grep '^arena bytes:' "$tmp/out.txt") || fail "no arena summary for $model $prec $batch"
            echo "$model $prec batch $batch: $summary"
            arena=$(echo "$summary" | sed -E 's/^arena bytes: ([0-9]+).*/\1/')
            lower=$(echo "$summary" | sed -E 's/.*lower bound: ([0-9]+).*/\1/')
            naive=$(echo "$summary" | sed -E 's/.*naive sum: ([0-9]+).*/\1/')
            [ "$arena" -ge "$lower" ] || fail "arena below the lower bound"
            [ "$arena" -lt "$naive" ] || fail "arena not below the naive sum"
            if [ "$model" = yolov2-tiny ]; then
                [ "$arena" -eq "$lower" ] || fail "yolov2-tiny arena $arena != lower bound $lower"
            else
                [ $((arena * 100)) -le $((lower * 105)) ] || fail "yolov3-tiny arena over 1.05 x lower bound"
            fi
        done
    done
done

"$graphrun" plan --model yolov3-tiny --prec int8 --json --dot "$tmp/g.dot" --svg "$tmp/m.svg" \
    > "$tmp/plan.json" || fail "json/dot/svg run"
for key in arena_bytes lower_bound_bytes naive_bytes nodes; do
    grep -q "\"$key\"" "$tmp/plan.json" || fail "JSON lacks $key"
done
[ "$(grep -c '"step"' "$tmp/plan.json")" -gt 20 ] || fail "JSON has too few node entries"
[ "$(grep -c 'shape=diamond' "$tmp/g.dot")" -eq 3 ] || fail "DOT should mark 1 quantize + 2 dequantize"
grep -q '^digraph' "$tmp/g.dot" || fail "not a DOT file"
grep -q '<svg' "$tmp/m.svg" || fail "not an SVG"
[ "$(grep -c '<rect' "$tmp/m.svg")" -gt 10 ] || fail "SVG has too few rectangles"

"$graphrun" plan --model yolov3-tiny --single-stream | grep -q ' 1 streams, 0 events' \
    || fail "--single-stream"
"$graphrun" plan --model yolov3-tiny --prec int8 --layer-prec 4=fp32,8=fp16 | grep -q 'convert: 2' \
    || fail "--layer-prec"

# The I/O fusions: off by default; --fuse-io removes the input's quantize and both heads'
# dequantizes and shows them in the fused column and the summary.
"$graphrun" plan --model yolov3-tiny --prec int8 > "$tmp/plain.txt" || fail "int8 plan"
grep -q 'quant-in\|dequant-out' "$tmp/plain.txt" && fail "I/O fusions must be off by default"
"$graphrun" plan --model yolov3-tiny --prec int8 --fuse-io > "$tmp/io.txt" || fail "--fuse-io"
grep -q 'quantize: 0  dequantize: 0' "$tmp/io.txt" || fail "--fuse-io left a quantize or dequantize"
grep -q 'fused quant-in: 1  fused dequant-out: 2' "$tmp/io.txt" || fail "--fuse-io summary"
[ "$(grep -c ' conv .*quant-in+' "$tmp/io.txt")" -eq 1 ] || fail "one conv reads the u8 input"
[ "$(grep -c 'dequant-out ' "$tmp/io.txt")" -eq 2 ] || fail "two convs write f32 heads"
[ $(($(grep -c '^ *[0-9]' "$tmp/plain.txt") - $(grep -c '^ *[0-9]' "$tmp/io.txt"))) -eq 3 ] \
    || fail "--fuse-io should remove 3 nodes"
"$graphrun" plan --model yolov3-tiny --prec fp16 --fuse-quant-in \
    | grep -q 'quantize: 0  dequantize: 2' || fail "--fuse-quant-in"
"$graphrun" plan --model yolov3-tiny --prec fp16 --fuse-dequant-out \
    | grep -q 'quantize: 1  dequantize: 0' || fail "--fuse-dequant-out"

# --device gpu: the GPU engine's conv tactics after the plan (docs/tactics.md). Without a GPU:
# exit 4 and one line. With one: a row per tensor-core conv, and a second build with the same
# timing cache takes every tactic from it.
"$graphrun" plan --device tpu > /dev/null 2>&1
[ $? -eq 2 ] || fail "--device tpu should exit 2"
"$graphrun" plan --device gpu --prec int8 > "$tmp/gpu.txt" 2> "$tmp/gpu.err"
rc=$?
if [ $rc -eq 4 ]; then
    [ "$(wc -l < "$tmp/gpu.err")" -eq 1 ] || fail "no GPU: one stderr line expected"
    grep -q 'no CUDA device\|without CUDA' "$tmp/gpu.err" || fail "no GPU: the line says why"
else
    [ $rc -eq 0 ] || fail "plan --device gpu exited $rc: $(cat "$tmp/gpu.err")"
    grep -q '^conv tactics on ' "$tmp/gpu.txt" || fail "--device gpu: no tactic table"
    [ "$(grep -cE '^ +[0-9]+  [0-9a-z]' "$tmp/gpu.txt")" -eq 8 ] \
        || fail "--device gpu: YOLOv2-tiny has 8 tensor-core convs after the first"
    "$graphrun" plan --device gpu --prec int8 --timing-cache "$tmp/t.cache" > /dev/null 2>&1 \
        || fail "--timing-cache first build"
    "$graphrun" plan --device gpu --prec int8 --timing-cache "$tmp/t.cache" > "$tmp/gpu2.txt" \
        || fail "--timing-cache second build"
    grep -q '0 candidates timed, 8 of 8 convs from the timing cache' "$tmp/gpu2.txt" \
        || fail "second build with the timing cache measured something"
    "$graphrun" plan --device gpu --prec int8 --no-tactic-search | grep -q 'search is off' \
        || fail "--no-tactic-search"
fi

# --prec auto: the map chosen on two calibration images heads the plan; budget 0 is all fp16 (even
# fp16 exceeds it: the notice says so); a budget out of range and --layer-prec with auto exit 2.
mkdir "$tmp/calib"
cp data/shapes-calib/00.png data/shapes-calib/01.png "$tmp/calib/"
"$graphrun" plan --model shapes --prec auto --max-nrmse 0 --calib-images "$tmp/calib" \
    --device cpu > "$tmp/auto.txt" 2> "$tmp/auto.err" || fail "--prec auto exited $?"
grep -q '^precision map: L0 fp16, L2 fp16, L4 fp16' "$tmp/auto.txt" \
    || fail "budget 0 should map every conv to fp16: $(head -1 "$tmp/auto.txt")"
grep -q 'even all fp16 exceeds the budget' "$tmp/auto.err" || fail "no fallback notice"
grep -q ' int8 \| i8' "$tmp/auto.txt" && fail "an all-fp16 map left int8 in the plan"
"$graphrun" plan --model shapes --prec auto --max-nrmse 2 > /dev/null 2>&1
[ $? -eq 2 ] || fail "--max-nrmse 2 should exit 2"
"$graphrun" plan --model shapes --prec auto --layer-prec 0=fp16 > /dev/null 2>&1
[ $? -eq 2 ] || fail "--layer-prec with --prec auto should exit 2"

# --tasks: the task graph (planner/tasks.h). Every computing node of YOLOv2-tiny int8 with fused
# pools is cut into at most --task-target tasks; the JSON lists each task once, in a topological
# order, with dependencies on earlier tasks only.
"$graphrun" plan --model yolo --prec int8 --fuse-maxpool --tasks > "$tmp/tasks.txt" \
    || fail "plan --tasks exited $?"
grep -q '^task graph: batch 1, [0-9]* tasks' "$tmp/tasks.txt" || fail "no task graph summary"
[ "$(grep -c ' conv ' "$tmp/tasks.txt")" -eq 9 ] || fail "expected 9 conv rows in the task table"
grep -q '^dataflow executor: can run this plan' "$tmp/tasks.txt" || fail "no dataflow executor line"
"$graphrun" plan --model yolo --prec fp32 --tasks > "$tmp/tasks32.txt" || fail "plan --tasks fp32"
grep -q '^dataflow executor: cannot run this plan: unsupported: conv (node 1, computes in fp32)' \
    "$tmp/tasks32.txt" || fail "no reason why fp32 plans stay on the per-layer graph"
"$graphrun" plan --model yolov3-tiny --prec fp16 --tasks --task-target 20 --json > "$tmp/tasks.json" \
    || fail "plan --tasks --json exited $?"
python3 - "$tmp/tasks.json" <<'PY' || fail "task graph JSON"
import json, sys
g = json.load(open(sys.argv[1]))
tasks = g["task_list"]
assert g["tasks"] == len(tasks) == len(g["order"]), "task counts"
assert sorted(g["order"]) == list(range(len(tasks))), "order is a permutation"
pos = {t: i for i, t in enumerate(g["order"])}
for t in tasks:
    assert all(pos[d] < pos[t["id"]] for d in t["deps"]), "dependency after its task"
for n in g["nodes"]:
    assert 1 <= n["tasks"] <= 20 * n["slices"] or n["tasks"] <= 20, n
assert sum(len(t["deps"]) for t in tasks) == g["dependencies"], "dependency count"
PY
"$graphrun" plan --tasks --task-target 0 > /dev/null 2>&1
[ $? -eq 2 ] || fail "--task-target 0 should exit 2"

# Grouped, depthwise, dilated and stride_x != stride_y convs in fp16 / int8: channels-last
# tensors of the precision in and out like every conv (the GPU's direct kernels read them as
# they are), no conversion around them: one quantize of the input, one dequantize of the head.
for prec in fp16 int8; do
    dt=$([ "$prec" = int8 ] && echo i8 || echo f16)
    "$graphrun" plan --cfg tests/data/grouped_convs.cfg --prec "$prec" > "$tmp/grouped.txt" \
        || fail "plan grouped_convs.cfg $prec"
    grep -q 'quantize: 1  dequantize: 1  convert: 0' "$tmp/grouped.txt" \
        || fail "grouped $prec: conversions around the direct convs"
    convs=$(grep -cE "^ +[0-9]+ conv .* $dt>$dt +NHWC" "$tmp/grouped.txt")
    [ "$convs" -eq 11 ] || fail "grouped $prec: $convs of 11 convs are $dt NHWC in and out"
done

"$graphrun" plan --prec fp64 > /dev/null 2>&1
[ $? -eq 2 ] || fail "bad precision should exit 2"
"$graphrun" plan --model no-such-model > /dev/null 2>&1
[ $? -ne 0 ] || fail "unknown model should fail"
"$graphrun" plan --batch 0 > /dev/null 2>&1
[ $? -eq 2 ] || fail "batch 0 should exit 2"
echo "ok"
