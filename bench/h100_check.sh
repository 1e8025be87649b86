#!/bin/bash
# One device call's worth of checks and measurements on the GPU machine, after .gpu/remote.sh has
# built build-gpu/ (and run ctest): compute-sanitizer on the conv kernels, the engine benchmark
# (JSON for bench/results/), PyTorch's peers, the fused-conv benchmark, the bundled shapes model's
# mAP per precision, and JPEG folder throughput. Everything is logged under $OUT; a short summary
# is printed last. Each step has its own time limit so one slow step cannot eat the others.
#   bash .gpu/remote.sh -- bash bench/h100_check.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
b=build-gpu
step() { # name seconds command...
  local name=$1 secs=$2; shift 2
  local t0=$(date +%s)
  timeout "$secs" "$@" >"$OUT/$name.log" 2>&1
  echo "[$name] rc $? in $(( $(date +%s) - t0 )) s"
}
step sanitize_memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 $b/test_gpu_conv_fused
step sanitize_racecheck 150 compute-sanitizer --tool racecheck --error-exitcode 9 $b/test_gpu_conv_fused
step bench 150 $b/graphrun_bench --prec all --batch 1,64 --iters 1000 --json "$OUT/h100-latest.json"
step bench_v3 90 $b/graphrun_bench --model yolov3-tiny --prec all --batch 1 --iters 1000 --json "$OUT/h100-yolov3-tiny.json"
step peers 150 python3 bench/peers.py --no-compile --iters 1000 --json "$OUT/peers.json"
step fused 120 $b/04_fused 50
step eval 120 $b/graphrun eval --model shapes --images data/shapes-val --prec all --device gpu --batch 16
mkdir -p /tmp/imgs && for i in $(seq 200); do for f in data/*.jpg; do cp "$f" "/tmp/imgs/${i}_$(basename "$f")"; done; done
step stream 120 $b/graphrun --model yolo --prec int8 --batch 64 --input /tmp/imgs
echo "--- summary"
grep -E "^(fp32|fp16|int8) " "$OUT/bench.log" | head -8
grep -E "^(fp32|fp16|int8) " "$OUT/bench_v3.log" | head -4
grep -E "^\((b|c)\)" "$OUT/peers.log" | head -6
grep -E "9-conv graph" "$OUT/fused.log"
grep -E "mAP|precision" "$OUT/eval.log" | head -8
tail -2 "$OUT/stream.log"
grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitize_memcheck.log" "$OUT/sanitize_racecheck.log"
