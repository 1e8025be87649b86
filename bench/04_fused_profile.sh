#!/bin/bash
# Profile benchmark 04 on the GPU machine (after .gpu/remote.sh built build-gpu/): Nsight Compute
# on kernels of the fused int8 chain. Launch order in 04_fused with 10 runs: 30 launches per timed
# entry; the first layer has one entry, layers 2-9 seventeen each (auto, then 4 tiles x 4 splits),
# so layer L's automatic launch of k_conv_i8 is number (L-2)*510.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
sections="--section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section Occupancy --section WarpStateStats --section SourceCounters --section InstructionStats --section LaunchStats --section SchedulerStats"
prof() { # name kernel-regex skip
  timeout 150 ncu --clock-control none --kernel-name "regex:$2" --launch-skip "$3" --launch-count 1 $sections \
      ./build-gpu/04_fused 10 >"$OUT/ncu_$1.txt" 2>&1
  echo "== $1"; grep -E "Duration|Grid Size|Block Size|Memory Throughput|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Executed Instructions  |Issued Warp Per|Warp Cycles Per Issued" "$OUT/ncu_$1.txt" | head -16
  grep -E "^ +(stall|Stall)|smsp__pcsamp" "$OUT/ncu_$1.txt" | head -12
}
prof first k_conv_first 2
prof l3 k_conv_i8 515
prof l8 k_conv_i8 3065
