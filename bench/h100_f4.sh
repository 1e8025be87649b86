#!/bin/bash
# Call 4: the landed figures from the final code (graphrun_bench --prec all --batch 1,8,64,256
# --inflight 3 -> bench/results/h100-latest.json) and PyTorch in the same call (CUDA graphs, fp16
# and exact fp32, no torch.compile: call 5), then the GPU tests the session touched.
#   bash .gpu/remote.sh --no-test -- bash bench/h100_f4.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
tc=/tmp/gr-tactics.cache
st() { step "$@"; pack_logs >/dev/null; }
st bench 300 $b/graphrun_bench --prec all --batch 1,8,64,256 --iters 500 --inflight 3 --timing-cache $tc --json $OUT/bench.json
st peers 120 python3 bench/peers.py --no-compile --iters 300 --warmup 30 --json $OUT/peers.json
st tests 150 ctest --test-dir $b --output-on-failure -j3 -R "gpu_gemm_f32|gpu_engine|gpu_inflight"
echo "--- summary"
grep -h -E "batch (1|8|64|256) on|engine build" $LOGS/bench.log
tail -22 $LOGS/peers.log
grep -h -E "tests passed|tests failed|NRMSE" $LOGS/tests.log
pack_logs
