#!/bin/bash
# Session call 3: the first layer's tail-word fix (never read past the input's end) and float
# divisions for the tile origin. Bench int8/fp16 b1/b64 (3 in flight); int8 b64 again with the
# first layer at 2 blocks/SM (GR_EXP_FIRST2, 100 registers, no spills) against 3 (80 + spills);
# ncu of the first layer with per-SASS-instruction counts (build with -lineinfo); memcheck +
# racecheck on the fused conv tests and on test_gpu_replay (int8, 20 replays).
#   GR_CMAKE_ARGS="-DCMAKE_CUDA_FLAGS=-lineinfo" GR_CTEST_ARGS="-j3 -R gpu_conv_fused|gpu_engine|gpu_replay" \
#     bash .gpu/remote.sh -- bash bench/h100_s3.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
tc=/tmp/gr-tactics.cache
cs="compute-sanitizer --error-exitcode 9"
step bench 150 $b/graphrun_bench --prec int8,fp16 --batch 1,64 --iters 300 --inflight 3 --timing-cache $tc --json $OUT/bench.json
step bench_exp2 60 env GR_EXP_FIRST2=1 $b/graphrun_bench --prec int8 --batch 64 --iters 300 --inflight 3 --timing-cache $tc
step bench_exp3 60 $b/graphrun_bench --prec int8 --batch 64 --iters 300 --inflight 3 --timing-cache $tc
for p in int8 fp16; do
  step ncu_first_$p 60 ncu --clock-control none --section SpeedOfLight --section InstructionStats --section SourceCounters \
    --import-source yes -k regex:k_conv_first --launch-skip 1 --launch-count 1 -o $LOGS/first_$p \
    $b/graphrun_bench --prec $p --batch 64 --iters 2 --warmup 1 --timing-cache $tc
  step sass_first_$p 60 ncu -i $LOGS/first_$p.ncu-rep --page source --print-source sass --csv
  rm -f $LOGS/first_$p.ncu-rep
done
step exp2_ncu 40 env GR_EXP_FIRST2=1 ncu --clock-control none --metrics gpu__time_duration.sum -k regex:k_conv_first --launch-skip 1 --launch-count 1 \
    $b/graphrun_bench --prec int8 --batch 64 --iters 2 --warmup 1 --timing-cache $tc
step memcheck_fused 120 $cs --tool memcheck $b/test_gpu_conv_fused
step racecheck_fused 150 $cs --tool racecheck --kernel-name-exclude kns=nvjet $b/test_gpu_conv_fused
step memcheck_replay_int8 90 env GR_TEST_REPLAYS=20 GR_TEST_PREC=int8 $cs --tool memcheck $b/test_gpu_replay
step racecheck_replay_int8 90 env GR_TEST_REPLAYS=20 GR_TEST_PREC=int8 $cs --tool racecheck --kernel-name-exclude kns=nvjet $b/test_gpu_replay
echo "--- summary"
grep -h -E "p50|img/s" $LOGS/bench*.log | grep -v "^prec\|^sustained" | head -12
grep -h "k_conv_first\|Duration\|duration" $LOGS/exp2_ncu.log | tail -3
for f in $LOGS/ncu_first_*.log; do echo "# $f"; grep -E "Duration|Issued Inst|Executed Ipc A" $f; done
wc -l $LOGS/sass_first_*.log
grep -H -E "ERROR SUMMARY|RACECHECK SUMMARY|Checks" $LOGS/*check_*.log | head
pack_logs
