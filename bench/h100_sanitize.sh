#!/bin/bash
# compute-sanitizer on the engine-level GPU tests with the session's kernels (issue 9's must-show):
# memcheck and racecheck on the fused conv tests (every new conv kernel) and on the replay test at
# 20 replays per precision (GR_TEST_REPLAYS; 1,000 fp32 replays under memcheck exceed a call), then
# the fp32 per-layer benchmark. Run after the GPU tests:
#   GR_CTEST_ARGS="-j4 -R gpu_conv|gpu_tactic|gpu_engine" bash .gpu/remote.sh -- bash bench/h100_sanitize.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
cs="compute-sanitizer --error-exitcode 9"
step memcheck_fused 200 $cs --tool memcheck $b/test_gpu_conv_fused
step racecheck_fused 200 $cs --tool racecheck $b/test_gpu_conv_fused
for p in int8 fp16; do
  step memcheck_replay_$p 120 env GR_TEST_REPLAYS=20 GR_TEST_PREC=$p $cs --tool memcheck $b/test_gpu_replay
  step racecheck_replay_$p 120 env GR_TEST_REPLAYS=20 GR_TEST_PREC=$p $cs --tool racecheck $b/test_gpu_replay
done
step bench_08 150 $b/08_f32 20
echo "--- summary"
grep -H -E "ERROR SUMMARY|RACECHECK SUMMARY|Checks" $LOGS/*check_*.log
tail -30 $LOGS/bench_08.log
pack_logs
