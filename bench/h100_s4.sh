#!/bin/bash
# Session call 4: the first layer with a warp per row for prefetch and packing and the epilogue
# per activation. Fused conv tests first (remote.sh), then bench int8/fp16 b1/b64 (3 in flight),
# per-SASS-instruction counts of the first layer and of the patch/stream kernel's first launch in a
# replay (layer 2), memcheck on the fused conv tests.
#   GR_CTEST_ARGS="-R gpu_conv_fused" bash .gpu/remote.sh -- bash bench/h100_s4.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
tc=/tmp/gr-tactics.cache
step bench 150 $b/graphrun_bench --prec int8,fp16 --batch 1,64 --iters 300 --inflight 3 --timing-cache $tc --json $OUT/bench.json
sass() { # name kernel-regex skip prec
  step ncu_$1 60 ncu --clock-control none --section SpeedOfLight --section InstructionStats --section SourceCounters \
    -k regex:$2 --launch-skip $3 --launch-count 1 -o $LOGS/$1 \
    $b/graphrun_bench --prec $4 --batch 64 --iters 2 --warmup 1 --timing-cache $tc
  step sass_$1 60 ncu -i $LOGS/$1.ncu-rep --page source --print-source sass --csv
  step details_$1 60 ncu -i $LOGS/$1.ncu-rep --page details
  rm -f $LOGS/$1.ncu-rep
}
sass first_int8 k_conv_first 1 int8
sass first_fp16 k_conv_first 1 fp16
sass stream_int8 k_conv_stream 4 int8
sass stream_fp16 k_conv_stream 4 fp16
step memcheck_fused 120 compute-sanitizer --error-exitcode 9 --tool memcheck $b/test_gpu_conv_fused
echo "--- summary"
grep -h -E "p50|img/s" $LOGS/bench*.log | grep -v "^prec\|^sustained" | head -12
for f in $LOGS/details_*.log; do echo "# $f"; grep -E "k_conv|Duration|Issued Inst|Executed Ipc A|Registers" $f; done
grep -H -E "ERROR SUMMARY|Checks" $LOGS/*check_*.log | head
pack_logs
