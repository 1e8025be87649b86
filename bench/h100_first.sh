#!/bin/bash
# The tensor-core first layer (kernels/conv_first.cu, tile 5) on the H100: the engine with the
# tactic search at batch 1 and 64 (the tables show the first layer's SIMT "auto" time beside the
# chosen one), memcheck on the fused conv tests. PyTorch only with GR_PEERS=1.
#   GR_CTEST_ARGS="-R gpu_conv|gpu_tactic|gpu_engine" bash .gpu/remote.sh -- bash bench/h100_first.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
step bench 200 $b/graphrun_bench --prec int8,fp16 --batch 1,64 --iters 300 --inflight 3 --json $OUT/bench.json
for p in int8 fp16; do for n in 1 64; do
  step plan_${p}_$n 60 $b/graphrun plan --model yolo --prec $p --batch $n --device gpu
done; done
step memcheck 200 compute-sanitizer --tool memcheck --error-exitcode 9 $b/test_gpu_conv_fused
[ "${GR_PEERS:-0}" = 1 ] && step peers 150 python3 bench/peers.py --no-compile --iters 300
echo "--- summary"
grep -h -E "p50|img/s" $LOGS/bench.log | head -12
for f in $LOGS/plan_*.log; do echo "# $f"; grep -A12 "conv tactics" $f; done
tail -5 $LOGS/memcheck.log
[ -f $LOGS/peers.log ] && tail -25 $LOGS/peers.log
pack_logs
