#!/bin/bash
# Issue 10, exact FP32 through 3xTF32 (branch h10f32), on the H100 after .gpu/remote.sh built
# build-gpu: the fp32 GPU tests, memcheck/racecheck on the new kernels, the per-layer benchmark
# and the engine at batch 1 and 64 with each --f32-algo. About 12 minutes at the limits below;
# split it (one step per call) where a call is shorter.
#   GR_CTEST_ARGS="-R gpu_gemm_f32|gpu_conv$|gpu_engine" bash .gpu/remote.sh -- bash bench/h100_f32.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
export GR_DISABLE_TACTIC_SEARCH=1 GR_TEST_SEED=20261123
step test_gemm_f32 180 $b/test_gpu_gemm_f32
for tc in im2col gemm conv; do
  step memcheck_$tc 150 env CK_FORK=no CK_RUN_CASE=$tc \
    compute-sanitizer --tool memcheck --error-exitcode 9 $b/test_gpu_gemm_f32
done
step racecheck_gemm 150 env CK_FORK=no CK_RUN_CASE=gemm \
  compute-sanitizer --tool racecheck --error-exitcode 9 $b/test_gpu_gemm_f32
step bench_08 150 $b/08_f32 20
for algo in auto tf32x3 implicit sgemm; do
  step bench_fp32_$algo 60 $b/graphrun_bench --f32-algo $algo --prec fp32 --batch 1,64 \
    --iters 200 --warmup 20 --inflight 3
done
echo "--- summary"
grep -H -E "Checks|ERROR SUMMARY|RACECHECK SUMMARY|NRMSE" "$LOGS"/test_gemm_f32.log \
  "$LOGS"/memcheck_*.log "$LOGS"/racecheck_gemm.log
cat "$LOGS"/bench_08.log
for algo in auto tf32x3 implicit sgemm; do
  echo "== --f32-algo $algo"
  tail -6 "$LOGS/bench_fp32_$algo.log"
done
pack_logs
