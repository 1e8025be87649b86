#!/bin/bash
# Benchmark 01 on the GPU machine, after .gpu/remote.sh has built build-gpu/ (and run ctest):
#   GR_CTEST_ARGS="-R test_gpu_conv" bash .gpu/remote.sh -- bash bench/01_conv_device.sh
# Times the convs, then runs the conv test once more under compute-sanitizer (memcheck).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
grep -E "seed|Checks|Failures|Errors" Testing/Temporary/LastTest.log build-gpu/Testing/Temporary/LastTest.log 2>/dev/null | head -5
./build-gpu/01_conv "${1:-200}" | tee "$OUT/bench01.txt"
timeout 300 compute-sanitizer --tool memcheck --leak-check no ./build-gpu/test_gpu_conv >"$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"
tail -4 "$OUT/memcheck.log"
