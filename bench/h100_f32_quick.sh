#!/bin/bash
# The 3xTF32 fp32 path on the H100 in a short call: the engine at batch 1 and 64 with the default
# algorithm (3xTF32 where it fills the SMs) and with cuBLAS SGEMM (--f32-algo sgemm).
#   GR_CTEST_ARGS="-j2 -R gpu_gemm_f32|gpu_engine" bash .gpu/remote.sh -- bash bench/h100_f32_quick.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
for algo in auto sgemm; do
  step bench_fp32_$algo 70 $b/graphrun_bench --f32-algo $algo --prec fp32 --batch 1,64 \
    --iters 100 --warmup 10 --inflight 3 --json $OUT/fp32_$algo.json
done
echo "--- summary"
for algo in auto sgemm; do echo "== $algo"; grep -E "p50" "$LOGS/bench_fp32_$algo.log"; done
pack_logs
