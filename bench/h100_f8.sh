#!/bin/bash
# Call 8: the direct kernel on every 3x3 conv shape of YOLOv2-tiny and yolov3-tiny (new test
# cases), then the GPU suite once more on the final commit.
#   bash .gpu/remote.sh --no-test -- bash bench/h100_f8.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
st() { step "$@"; pack_logs >/dev/null; }
st direct 200 env CK_RUN_CASE=direct $b/test_gpu_gemm_f32
st all 360 ctest --test-dir $b --output-on-failure -j4 -L gpu
echo "--- summary"
grep -h -E "Checks|F:|E:" $LOGS/direct.log | head
grep -h -E "tests passed|tests failed|\*\*\*Failed" $LOGS/all.log | head
pack_logs
