#!/bin/bash
# Session call 2: the first-layer kernel with its raw input rows prefetched by cp.async a tile
# ahead, tile-invariant row offsets, and an epilogue without bounds checks on full tiles (int8:
# the pool on the int32 accumulators). Bench int8/fp16 at batch 1 and 64 (3 in flight), the plan
# tables, ncu of the first layer, memcheck + racecheck on the fused conv tests (racecheck skips
# cuBLASLt's own nvjet kernels, whose mbarrier synchronisation it does not model).
#   GR_CTEST_ARGS="-j5 -R gpu_conv|gpu_tactic|gpu_engine|gpu_replay" bash .gpu/remote.sh -- bash bench/h100_s2.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
tc=/tmp/gr-tactics.cache
cs="compute-sanitizer --error-exitcode 9"
step bench 150 $b/graphrun_bench --prec int8,fp16 --batch 1,64 --iters 300 --inflight 3 --timing-cache $tc --json $OUT/bench.json
for p in int8 fp16; do
  step plan_${p}_64 40 $b/graphrun plan --model yolo --prec $p --batch 64 --device gpu --timing-cache $tc
  step ncu_first_$p 40 ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --section InstructionStats --section MemoryWorkloadAnalysis -k regex:k_conv_first --launch-skip 1 --launch-count 1 \
    $b/graphrun_bench --prec $p --batch 64 --iters 2 --warmup 1 --timing-cache $tc
done
step memcheck_fused 120 $cs --tool memcheck $b/test_gpu_conv_fused
step racecheck_fused 150 $cs --tool racecheck --kernel-name-exclude kns=nvjet $b/test_gpu_conv_fused
echo "--- summary"
grep -h -E "p50|img/s" $LOGS/bench.log | head -12
for f in $LOGS/plan_*.log; do echo "# $f"; grep -A12 "conv tactics" $f; done
for f in $LOGS/ncu_first_*.log; do echo "# $f"; grep -E "Duration|Registers|Achieved Occ|Issued Inst|Executed Ipc A|Eligible Warps|Spilling Req" $f; done
grep -H -E "ERROR SUMMARY|RACECHECK SUMMARY|Checks|rror" $LOGS/*check_*.log | head
pack_logs
