#!/bin/bash
# Profile benchmark 01 on the GPU machine (after .gpu/remote.sh --no-test built build-gpu/):
# SM clock while timing, then Nsight Compute on the INT8 kernels of layer 1 and layer 8
# (launch order in 01_conv with 10 runs: per layer 6 timed variants x 30 launches, auto first).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,pstate --format=csv -lms 100 >"$OUT/clocks.csv" &
smi=$!
./build-gpu/01_conv 200 | tee "$OUT/bench01.txt"
kill "$smi"
echo "SM clock during the run (MHz): $(tail -n +2 "$OUT/clocks.csv" | cut -d, -f1 | sort -n | uniq -c | sort -rn | head -4 | tr '\n' ' ')"
sections="--section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats"
for skip in 20 1280; do
  ncu --kernel-name regex:k_conv_i8 --launch-skip $skip --launch-count 1 $sections \
      ./build-gpu/01_conv 10 >"$OUT/ncu_i8_$skip.txt" 2>&1
  grep -E "k_conv|SM Frequency|Duration|Memory Throughput|Compute \(SM\)|Achieved Occupancy|Registers|Stall|Warp Cycles Per Issued|Block Limit|Theoretical Occ" "$OUT/ncu_i8_$skip.txt" | head -30
done
