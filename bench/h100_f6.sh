#!/bin/bash
# Call 6: the final commit (after host-side refactors that left the PTX identical): the GPU test
# suite in full and the fp32 engine at batch 64 once more.
#   bash .gpu/remote.sh --no-test -- bash bench/h100_f6.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
st() { step "$@"; pack_logs >/dev/null; }
st tests 420 ctest --test-dir $b --output-on-failure -j4 -L gpu
st bench_f32 100 $b/graphrun_bench --prec fp32 --batch 64 --iters 300 --inflight 3 --json $OUT/bench_fp32.json
echo "--- summary"
grep -h -E "tests passed|tests failed|Failed|\*\*\*" $LOGS/tests.log | head -20
grep -h -E "batch 64 on" $LOGS/bench_f32.log
pack_logs
