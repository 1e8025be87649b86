#!/bin/bash
# The resident-weights conv tiles (kernels/conv_stream.cu) on the H100: the conv tests, the
# per-layer sweep at batch 1 and 64 (04_fused), and the engine with the tactic search.
#   GR_CTEST_ARGS="-R gpu_conv|gpu_tactic|gpu_engine" bash .gpu/remote.sh -- bash bench/h100_stream.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
step fused_b1 150 $b/04_fused 30 1
step fused_b64 200 $b/04_fused 10 64
step bench 200 $b/graphrun_bench --prec int8,fp16 --batch 1,64 --iters 300 --inflight 3 --json $OUT/bench.json
step plan_int8_64 60 $b/graphrun plan --model yolo --prec int8 --batch 64 --device gpu
echo "--- summary"
grep -h -E "p50" $LOGS/bench.log | head -8
grep -v "^ *$" $LOGS/plan_int8_64.log | tail -14
cat $LOGS/fused_b1.log $LOGS/fused_b64.log | cut -c1-400
pack_logs
