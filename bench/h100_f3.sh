#!/bin/bash
# Call 3: split-K for the automatic 3xTF32 GEMMs (layers 6-7 at batch 64 fill their last wave).
# Tests, the per-layer fp32 table (conv(k) = the engine's split), the fp32 engine with and
# without it (--split-k off), the engine tests, memcheck on the conv launcher's cases.
#   bash .gpu/remote.sh --no-test -- bash bench/h100_f3.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
st() { step "$@"; pack_logs >/dev/null; }
st test_gemm_f32 240 ctest --test-dir $b --output-on-failure -R gpu_gemm_f32
st f32_08 90 $b/08_f32 20
st bench_f32 100 $b/graphrun_bench --prec fp32 --batch 64 --iters 300 --inflight 3 --json $OUT/bench_fp32.json
st bench_f32_nosplit 100 $b/graphrun_bench --split-k off --prec fp32 --batch 64 --iters 300 --inflight 3
st tests 200 ctest --test-dir $b --output-on-failure -j3 -R "gpu_engine|gpu_replay|gpu_inflight|gpu_conv_fused"
st memcheck 150 env CK_RUN_CASE=conv compute-sanitizer --tool memcheck --error-exitcode 9 $b/test_gpu_gemm_f32
echo "--- summary"
grep -h -E "tests passed|tests failed|NRMSE" $LOGS/test_gemm_f32.log $LOGS/tests.log
grep -h -E "batch 64  [0-9]|all convs" $LOGS/f32_08.log
grep -h -E "batch (1|64) on" $LOGS/bench_f32.log $LOGS/bench_f32_nosplit.log
grep -h -E "ERROR SUMMARY|Checks" $LOGS/memcheck.log
pack_logs
