#!/bin/bash
# The resident-weights conv tiles (kernels/conv_stream.cu) on the H100: the engine with the
# tactic search at batch 1 and 64, the per-layer tactic tables, PyTorch in the same call.
#   GR_CTEST_ARGS="-R gpu_conv|gpu_tactic|gpu_engine" bash .gpu/remote.sh -- bash bench/h100_stream.sh
# (04_fused [runs [batch]] sweeps every tile per layer, when there is device time for it.)
set -uo pipefail
source bench/step.sh
b=build-gpu
step bench 240 $b/graphrun_bench --prec all --batch 1,64 --iters 500 --inflight 3 --json $OUT/bench.json
for p in int8 fp16; do for n in 1 64; do
  step plan_${p}_$n 60 $b/graphrun plan --model yolo --prec $p --batch $n --device gpu
done; done
[ "${GR_PEERS:-1}" = 1 ] && step peers 150 python3 bench/peers.py --no-compile --iters 300
echo "--- summary"
grep -h -E "p50" $LOGS/bench.log | head -8
for f in $LOGS/plan_*.log; do echo "# $f"; grep -A12 "conv tactics" $f; done
[ -f $LOGS/peers.log ] && tail -25 $LOGS/peers.log
pack_logs
