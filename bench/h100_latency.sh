#!/bin/bash
# Batch-1 latency checks for issue 9 on the GPU machine, after .gpu/remote.sh built build-gpu/:
# the engine at batch 1, the GEMM tactic against the implicit GEMM per layer (07_gemm), yolov3-tiny, per-kernel times of the engine's own
# graphs (ncu, clocks untouched), compute-sanitizer on the conv, engine and replay tests.
#   bash .gpu/remote.sh --no-test -- bash bench/h100_latency.sh
# Few files come back from a call: the summary is printed, the details in $OUT/logs.tgz.
set -uo pipefail
source bench/step.sh
b=build-gpu
bench1=($b/graphrun_bench --prec int8,fp16 --batch 1 --iters 1000)
step batch1 60 "${bench1[@]}"
step gemm 120 $b/07_gemm 100
step v3tiny 90 $b/graphrun_bench --model yolov3-tiny --prec all --batch 1 --iters 1000
for p in int8 fp16; do
  step ncu_$p 120 ncu --clock-control none --csv --metrics gpu__time_duration.sum \
    $b/graphrun_bench --prec $p --batch 1 --iters 2 --warmup 1
done
step racecheck_fused 150 env CK_FORK=no compute-sanitizer --tool racecheck --error-exitcode 9 $b/test_gpu_conv_fused
step memcheck_fused 150 env CK_FORK=no compute-sanitizer --tool memcheck --error-exitcode 9 $b/test_gpu_conv_fused
step racecheck_replay 300 env CK_FORK=no compute-sanitizer --tool racecheck --error-exitcode 9 $b/test_gpu_replay
echo "--- summary"
for f in batch1 v3tiny; do
  echo "# $f"; grep -E "p50" "$LOGS/$f.log" | head -3
done
cat "$LOGS/gemm.log"
for p in int8 fp16; do echo "# ncu $p (last replay)"; python3 bench/ncu_sum.py "$LOGS/ncu_$p.log" 10; done
grep -h -E "ERROR SUMMARY|RACECHECK SUMMARY|Checks:" "$LOGS"/racecheck_*.log "$LOGS"/memcheck_*.log
pack_logs
