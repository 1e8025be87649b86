#!/bin/bash
# The 3xTF32 fp32 path on the H100 in a short call: the engine at batch 1 and 64 with the default
# algorithm (3xTF32 where it fills the SMs) and with cuBLAS SGEMM (GR_F32_ALGO=sgemm).
#   GR_CTEST_ARGS="-j2 -R gpu_gemm_f32|gpu_engine" bash .gpu/remote.sh -- bash bench/h100_f32_quick.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
for algo in default sgemm; do
  if [ $algo = default ]; then e=(env -u GR_F32_ALGO); else e=(env GR_F32_ALGO=$algo); fi
  step bench_fp32_$algo 70 "${e[@]}" $b/graphrun_bench --prec fp32 --batch 1,64 --iters 100 \
    --warmup 10 --inflight 3 --json $OUT/fp32_$algo.json
done
echo "--- summary"
for algo in default sgemm; do echo "== $algo"; grep -E "p50" "$LOGS/bench_fp32_$algo.log"; done
pack_logs
