#!/bin/bash
# The landed figures (issues 9, 10): graphrun_bench --prec all at batch 1 and 64 (--iters 1000,
# 3 in flight) -> bench.json (bench/results/h100-latest.json), the batch 8 / 256 curve for int8
# and fp16, the tactic tables, PyTorch in the same call, memcheck on the replay test.
#   GR_CTEST_ARGS="-j4 -R gpu_conv_fused|gpu_tactic|gpu_engine|gpu_replay|gpu_inflight" \
#     bash .gpu/remote.sh -- bash bench/h100_final2.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
step bench 220 $b/graphrun_bench --prec all --batch 1,64 --iters 1000 --inflight 3 --json $OUT/bench.json
step curve 120 $b/graphrun_bench --prec int8,fp16 --batch 8,256 --iters 200 --inflight 3 --json $OUT/curve.json
for p in int8 fp16; do for n in 1 64; do
  step plan_${p}_$n 60 $b/graphrun plan --model yolo --prec $p --batch $n --device gpu
done; done
step peers 150 python3 bench/peers.py --no-compile --iters 300 --json $OUT/peers.json
step memcheck_replay 90 compute-sanitizer --tool memcheck --error-exitcode 9 $b/test_gpu_replay
echo "--- summary"
grep -h -E "p50" $LOGS/bench.log $LOGS/curve.log | head -16
for f in $LOGS/plan_*.log; do echo "# $f"; grep -A12 "conv tactics" $f; done
tail -22 $LOGS/peers.log
tail -4 $LOGS/memcheck_replay.log
pack_logs
