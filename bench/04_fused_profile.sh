#!/bin/bash
# Profile benchmark 04 on the GPU machine (after .gpu/remote.sh built build-gpu/): SM clock while
# timing, then Nsight Compute on three kernels of the fused int8 chain (launch order in 04_fused
# with 10 runs: 30 launches per timed entry; the first layer has one entry, the others six).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,pstate --format=csv -lms 50 >"$OUT/clocks.csv" &
smi=$!
./build-gpu/04_fused 100 >"$OUT/b04_clock.txt"
kill "$smi"
echo "SM clock during 04_fused (MHz, count): $(tail -n +2 "$OUT/clocks.csv" | cut -d, -f1 | sort -n | uniq -c | sort -rn | head -5 | tr '\n' ' ')"
sections="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats"
prof() { # name kernel-regex skip
  timeout 120 ncu --clock-control none --kernel-name "regex:$2" --launch-skip "$3" --launch-count 1 $sections \
      ./build-gpu/04_fused 10 >"$OUT/ncu_$1.txt" 2>&1
  echo "== $1"; grep -E "Duration|Elapsed Cycles|SM Frequency|Memory Throughput|DRAM Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|Warp Cycles Per Issued|Block Limit|Grid Size|Stall" "$OUT/ncu_$1.txt" | head -24
}
prof first k_conv_first 2
prof l2 k_conv_i8 5
prof l8 k_conv_i8 1085
