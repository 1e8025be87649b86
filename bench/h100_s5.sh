#!/bin/bash
# Session call 5: the first layer with call 3's prefetch and packing (thread per word / pixel) and
# the epilogue per activation. Bench int8/fp16 b1/b64 (3 in flight); int8 b64 with the first layer
# at 2 blocks/SM (GR_EXP_FIRST2: no spills) against 3; ncu durations of both; memcheck and
# racecheck on the fused conv tests (racecheck without exclusions: call 3's exclusion of nvjet made
# the tool itself fault).
#   GR_CTEST_ARGS="-R gpu_conv_fused" bash .gpu/remote.sh -- bash bench/h100_s5.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
tc=/tmp/gr-tactics.cache
cs="compute-sanitizer --error-exitcode 9"
step bench 150 $b/graphrun_bench --prec int8,fp16 --batch 1,64 --iters 300 --inflight 3 --timing-cache $tc --json $OUT/bench.json
step bench_exp2 60 env GR_EXP_FIRST2=1 $b/graphrun_bench --prec int8 --batch 64 --iters 300 --inflight 3 --timing-cache $tc
for v in 2 3; do
  step ncu_first_b$v 40 env $([ $v = 2 ] && echo GR_EXP_FIRST2=1 || echo GR_X=0) ncu --clock-control none \
    --metrics gpu__time_duration.sum,smsp__inst_issued.sum -k regex:k_conv_first --launch-skip 1 --launch-count 3 \
    $b/graphrun_bench --prec int8 --batch 64 --iters 3 --warmup 1 --timing-cache $tc
done
step ncu_first_fp16 40 ncu --clock-control none --metrics gpu__time_duration.sum,smsp__inst_issued.sum -k regex:k_conv_first \
    --launch-skip 1 --launch-count 3 $b/graphrun_bench --prec fp16 --batch 64 --iters 3 --warmup 1 --timing-cache $tc
step memcheck_fused 120 $cs --tool memcheck $b/test_gpu_conv_fused
step racecheck_fused 160 $cs --tool racecheck $b/test_gpu_conv_fused
echo "--- summary"
grep -h -E "p50|img/s" $LOGS/bench*.log | grep -v "^prec\|^sustained" | head -12
for f in $LOGS/ncu_first_*.log; do echo "# $f"; grep -E "duration|inst_issued" $f; done
grep -H -E "ERROR SUMMARY|RACECHECK SUMMARY|Checks" $LOGS/*check_*.log | head
grep -h "Race reported between" $LOGS/racecheck_fused.log | sed 's/+0x[0-9a-f]*//g' | sort | uniq -c
pack_logs
