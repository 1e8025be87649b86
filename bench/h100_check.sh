#!/bin/bash
# One device call's worth of checks and measurements on the GPU machine, after .gpu/remote.sh has
# built build-gpu/ (and run ctest): the engine benchmark with 3 runs in flight (JSON for
# bench/results/), JPEG folder throughput, the bundled shapes model's mAP per precision,
# compute-sanitizer on the fused conv kernels, PyTorch's peers - most important first. Logs go to $OUT/logs.tgz; a short summary
# is printed last. Each step has its own time limit so one slow step cannot eat the others.
#   bash .gpu/remote.sh -- bash bench/h100_check.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
step bench 120 $b/graphrun_bench --prec all --batch 1,64 --iters 300 --inflight 3 --json "$OUT/h100-latest.json"
mkdir -p /tmp/imgs && for i in $(seq 200); do for f in data/*.jpg; do cp "$f" "/tmp/imgs/${i}_$(basename "$f")"; done; done
step stream 90 $b/graphrun --model yolo --prec int8 --batch 64 --input /tmp/imgs
step eval 90 $b/graphrun eval --model shapes --images data/shapes-val --prec all --device gpu --batch 16
step sanitize_memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 9 $b/test_gpu_conv_fused
step peers 120 python3 bench/peers.py --no-compile --iters 300 --json "$OUT/peers.json"
echo "--- summary"
grep -E "^(fp32|fp16|int8) " "$LOGS/bench.log" | head -8
grep -E "^\((b|c)\)" "$LOGS/peers.log" | head -6
grep -E "mAP|precision" "$LOGS/eval.log" | head -8
tail -2 "$LOGS/stream.log"
grep -E "ERROR SUMMARY" "$LOGS/sanitize_memcheck.log"
pack_logs
