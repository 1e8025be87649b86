#!/bin/bash
# Profile benchmark 01 on the GPU machine (after .gpu/remote.sh built build-gpu/):
# SM clock while timing, the SASS instruction mix of two conv kernels (are the loads wide, which
# tensor-core instructions), then Nsight Compute on the INT8 kernels of layer 1 and layer 8
# (launch order in 01_conv with 10 runs: per layer 6 timed variants x 30 launches, auto first).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,pstate --format=csv -lms 100 >"$OUT/clocks.csv" &
smi=$!
./build-gpu/01_conv 200 | tee "$OUT/bench01.txt"
kill "$smi"
echo "SM clock during the run (MHz): $(tail -n +2 "$OUT/clocks.csv" | cut -d, -f1 | sort -n | uniq -c | sort -rn | head -4 | tr '\n' ' ')"
obj=$(find build-gpu -name 'conv_wmma.cu.o' | head -1)
cuobjdump -sass "$obj" >"$OUT/conv_wmma.sass" 2>&1
for k in 'k_conv_i8ILi2ELi2ELi2ELi2E' 'k_conv_f16IfLi2ELi2ELi2ELi2E'; do
  echo "SASS mix of $k:"
  awk -v k="$k" '/Function :/{f=index($0,k)>0} f' "$OUT/conv_wmma.sass" |
    grep -oE '^ +/\*[0-9a-f]+\*/ +[A-Z][A-Z0-9_.]*' | awk '{print $2}' | sort | uniq -c | sort -rn | head -14 | tr '\n' ' '
  echo
done
if [ "${GR_NCU:-1}" = 1 ]; then
  sections="--section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats"
  for skip in 20 1280; do
    ncu --kernel-name regex:k_conv_i8 --launch-skip $skip --launch-count 1 $sections \
        ./build-gpu/01_conv 10 >"$OUT/ncu_i8_$skip.txt" 2>&1
    grep -E "k_conv|Duration|Memory Throughput|Compute \(SM\)|Achieved Occupancy|Warp Cycles Per Issued" "$OUT/ncu_i8_$skip.txt" | head -12
  done
fi
