#!/bin/bash
# Call 7: call 6's three failures. gpu_calib / gpu_mixed: the GPU calibration's fp32 engine fused
# its maxpools (now an "observable" engine, no fusion). gpu_reliability: its device-memory check
# raced other tests under ctest -j4 (now RUN_SERIAL). Then the whole GPU suite with -j4.
#   bash .gpu/remote.sh --no-test -- bash bench/h100_f7.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
st() { step "$@"; pack_logs >/dev/null; }
rm -f /tmp/graphrun_gpu_reliability.calib
st three 200 ctest --test-dir $b --output-on-failure -R "gpu_calib|gpu_mixed|gpu_reliability"
st all 360 ctest --test-dir $b --output-on-failure -j4 -L gpu
echo "--- summary"
grep -h -E "tests passed|tests failed|\*\*\*Failed|F:|E:" $LOGS/three.log $LOGS/all.log | head -30
pack_logs
