#!/bin/bash
# First call of the 2026-11-23 night session: the direct 3x3 FP32 kernel (kernels/conv3x3_f32.cu)
# with its fused maxpool. Its tests, its per-layer benchmark against im2col + 3xTF32 (+ pool), the
# fp32 engine at batch 1 and 64 (sync and 3 in flight), memcheck on its test case.
#   bash .gpu/remote.sh --no-test -- bash bench/h100_f1.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
st() { step "$@"; pack_logs >/dev/null; }
st test_gemm_f32 200 ctest --test-dir $b --output-on-failure -R gpu_gemm_f32
st f32_09 90 $b/09_f32_direct 20
st bench_f32 150 $b/graphrun_bench --prec fp32 --batch 1,64 --iters 300 --inflight 3 --json $OUT/bench_fp32.json
st plan_f32 40 $b/graphrun plan --model yolo --prec fp32 --batch 64 --device gpu
st memcheck 150 env CK_RUN_CASE=direct compute-sanitizer --tool memcheck --error-exitcode 9 $b/test_gpu_gemm_f32
echo "--- summary"
grep -h -E "tests passed|tests failed|NRMSE" $LOGS/test_gemm_f32.log
cat $LOGS/f32_09.log
grep -h -E "batch (1|64) on|img/s|images/s" $LOGS/bench_f32.log | head -12
grep -h -E "ERROR SUMMARY|Checks|Failures" $LOGS/memcheck.log
pack_logs
