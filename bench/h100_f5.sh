#!/bin/bash
# Call 5: yolov3-tiny on the final code (batch 64, 3 in flight), then torch.compile (compute only;
# the fp16 CUDA-graph and fp32 peers ran in call 4).
#   bash .gpu/remote.sh --no-test -- bash bench/h100_f5.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
st() { step "$@"; pack_logs >/dev/null; }
st bench_v3 120 $b/graphrun_bench --model yolov3-tiny --prec all --batch 1,64 --iters 300 --inflight 3 --json $OUT/bench_v3.json
st compile 420 python3 bench/peers.py --no-baseline --iters 300 --warmup 30 --compile-timeout 130 --json $OUT/peers_compile.json
echo "--- summary"
grep -h -E "batch (1|64) on" $LOGS/bench_v3.log
tail -12 $LOGS/compile.log
pack_logs
