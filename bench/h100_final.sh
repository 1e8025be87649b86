#!/bin/bash
# Closing checks of the session on the H100 (after .gpu/remote.sh built build-gpu and ran the
# tests in GR_CTEST_ARGS): folder throughput from JPEG files to detections (issue 12, twice), and
# compute-sanitizer memcheck on the fused conv tests (stream tiles included).
#   GR_CTEST_ARGS="-R gpu_detect_threads|cli_stream_gpu|gpu_engine" bash .gpu/remote.sh -- bash bench/h100_final.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
mkdir -p /tmp/jpg1000 && for i in $(seq -w 1 200); do for f in data/*.jpg; do cp "$f" "/tmp/jpg1000/$i-$(basename "$f")"; done; done
ls /tmp/jpg1000 | wc -l
for r in 1 2; do
  step stream_$r 60 bash -c "$b/graphrun --model yolo --prec int8 --batch 64 --input /tmp/jpg1000 >/tmp/stream.jsonl"
done
wc -l /tmp/stream.jsonl
step memcheck_fused 110 env CK_FORK=no compute-sanitizer --tool memcheck --error-exitcode 9 $b/test_gpu_conv_fused
echo "--- summary"
for r in 1 2; do tail -4 "$LOGS/stream_$r.log"; done
grep -h -E "ERROR SUMMARY|Checks:" "$LOGS"/memcheck_fused.log
pack_logs
