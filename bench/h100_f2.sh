#!/bin/bash
# Call 2: why the direct 3x3 FP32 kernel runs at 20-31 TFLOP/s (ncu on its batch-64 launches with
# the pool fused: layer 0 = launch 25, layer 1 = 66, layer 2 = 107 of `09_f32_direct 10 64`).
#   bash .gpu/remote.sh --no-test -- bash bench/h100_f2.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
st() { step "$@"; pack_logs >/dev/null; }
secs="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis"
for l in 0:25 1:66 2:107; do
  st ncu_l${l%%:*} 120 ncu --clock-control none -k regex:k_conv3x3 --launch-skip ${l##*:} --launch-count 1 $secs $b/09_f32_direct 10 64
done
st ncu_src 150 ncu --clock-control none -k regex:k_conv3x3 --launch-skip 107 --launch-count 1 --set full --import-source no -o $LOGS/l2 $b/09_f32_direct 10 64
st sass 60 bash -c "ncu -i $LOGS/l2.ncu-rep --page source --print-source sass --csv > $LOGS/l2_sass.csv"
rm -f $LOGS/l2.ncu-rep
echo "--- summary"
for f in $LOGS/ncu_l*.log; do echo "# $f"; grep -E "Duration|Compute \(SM\) Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|Local|Stall|Executed Ipc A|Warp Cycles Per Issued|L1/TEX Hit|Shared" $f | head -30; done
pack_logs
