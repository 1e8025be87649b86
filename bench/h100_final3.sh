#!/bin/bash
# Session's last call (device time short: steps by priority, logs packed after each so a cut-off
# call still returns them): the merged K32 3xTF32 GEMM's test, the landed figures
# (graphrun_bench --prec all --batch 1,64 --iters 1000 --inflight 3 -> bench/results/h100-latest.json),
# PyTorch in the same call, the fp32 per-layer benchmark, batch-1 tactic tables, the engine tests.
#   bash .gpu/remote.sh --no-test -- bash bench/h100_final3.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
tc=/tmp/gr-tactics.cache
st() { step "$@"; pack_logs >/dev/null; }
st test_gemm_f32 120 ctest --test-dir $b --output-on-failure -R gpu_gemm_f32
st bench 200 $b/graphrun_bench --prec all --batch 1,64 --iters 1000 --inflight 3 --timing-cache $tc --json $OUT/bench.json
st peers 110 python3 bench/peers.py --no-compile --iters 300 --warmup 30 --json $OUT/peers.json
st f32_08 60 $b/08_f32 20
for p in int8 fp16; do st plan_${p}_1 30 $b/graphrun plan --model yolo --prec $p --batch 1 --device gpu --timing-cache $tc; done
st tests 120 ctest --test-dir $b --output-on-failure -j3 -R "gpu_conv_fused|gpu_engine|gpu_replay"
echo "--- summary"
grep -h -E "tests passed|tests failed" $LOGS/test*.log
grep -h -E "batch (1|64) on" $LOGS/bench.log
grep -h -E "NRMSE|nrmse" $LOGS/bench.log | head -6
tail -25 $LOGS/peers.log
grep -h -E "batch 64  [0-9]|all convs" $LOGS/f32_08.log
for f in $LOGS/plan_*.log; do echo "# $f"; grep -A12 "conv tactics" $f; done
pack_logs
