#!/bin/bash
# Session call 1 (2026-11-23 late): after the GPU tests, the first-layer kernel under ncu's full
# section set at batch 64 (int8, fp16: where its 291 / 421 µs go), the fp32 per-layer benchmark,
# and memcheck + racecheck on the fused conv tests (the review's fixes and new cases).
#   GR_CTEST_ARGS="-j4 -R gpu_conv|gpu_tactic|gpu_engine" bash .gpu/remote.sh -- bash bench/h100_s1.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
tc=/tmp/gr-tactics.cache
cs="compute-sanitizer --error-exitcode 9"
step fill 60 $b/graphrun_bench --prec int8,fp16 --batch 64 --iters 20 --timing-cache $tc
for p in int8 fp16; do
  step ncu_first_$p 60 ncu --clock-control none --set full -k regex:k_conv_first --launch-skip 1 --launch-count 1 \
    $b/graphrun_bench --prec $p --batch 64 --iters 2 --warmup 1 --timing-cache $tc
done
step bench_08 80 $b/08_f32 20
step memcheck_fused 140 $cs --tool memcheck $b/test_gpu_conv_fused
step racecheck_fused 140 $cs --tool racecheck $b/test_gpu_conv_fused
echo "--- summary"
grep -H -E "ERROR SUMMARY|RACECHECK SUMMARY|Checks" $LOGS/*check_*.log
tail -30 $LOGS/bench_08.log
pack_logs
