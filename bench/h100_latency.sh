#!/bin/bash
# Batch-1 latency checks for issue 9 on the GPU machine, after .gpu/remote.sh built build-gpu/:
# the L2 persisting-window experiment (A/B/A/B), yolov3-tiny, per-kernel times of the engine's own
# graph (ncu, clocks untouched), compute-sanitizer racecheck/memcheck on the conv and replay tests.
#   bash .gpu/remote.sh --no-test -- bash bench/h100_latency.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
b=build-gpu
step() { # name seconds command...
  local name=$1 secs=$2; shift 2
  local t0=$(date +%s)
  timeout "$secs" "$@" >"$OUT/$name.log" 2>&1
  echo "[$name] rc $? in $(( $(date +%s) - t0 )) s"
}
step l2_off_a 60 $b/graphrun_bench --prec int8,fp16 --batch 1 --iters 1000
step l2_on_a 60 env GR_L2_PERSIST=1 $b/graphrun_bench --prec int8,fp16 --batch 1 --iters 1000
step l2_off_b 60 $b/graphrun_bench --prec int8,fp16 --batch 1 --iters 1000
step l2_on_b 60 env GR_L2_PERSIST=1 $b/graphrun_bench --prec int8,fp16 --batch 1 --iters 1000
step v3tiny 90 $b/graphrun_bench --model yolov3-tiny --prec all --batch 1 --iters 1000 --json "$OUT/v3tiny.json"
step ncu_int8 120 ncu --clock-control none --csv --metrics gpu__time_duration.sum \
  $b/graphrun_bench --prec int8 --batch 1 --iters 3 --warmup 1
step racecheck_fused 150 env CK_FORK=no compute-sanitizer --tool racecheck --error-exitcode 9 $b/test_gpu_conv_fused
step racecheck_replay 100 env CK_FORK=no compute-sanitizer --tool racecheck --error-exitcode 9 $b/test_gpu_replay
step memcheck_engine 120 env CK_FORK=no compute-sanitizer --tool memcheck --error-exitcode 9 $b/test_gpu_engine
echo "--- summary"
for f in l2_off_a l2_on_a l2_off_b l2_on_b v3tiny; do echo "# $f"; grep -E "^(fp32|fp16|int8) " "$OUT/$f.log" | head -4; done
grep -h -E "ERROR SUMMARY|RACECHECK SUMMARY|Checks:" "$OUT"/racecheck_*.log "$OUT"/memcheck_*.log
