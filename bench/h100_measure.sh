#!/bin/bash
# The measurements the open issues ask for, on the GPU machine after .gpu/remote.sh built
# build-gpu/ (and its ctest passed). Two parts, one device call each (each well under 10 min):
#   bash .gpu/remote.sh --no-test -- bash bench/h100_measure.sh speed    # issues 9, 10, 12
#   bash .gpu/remote.sh --no-test -- bash bench/h100_measure.sh accuracy # issue 11
# JSON results land in $OUT (for bench/results/), every log in $OUT/logs.tgz, a summary on stdout.
set -uo pipefail
source bench/step.sh
b=build-gpu
part=${1:-speed}
if [ "$part" = speed ]; then
  step bench 150 $b/graphrun_bench --prec all --batch 1,64 --iters 1000 --inflight 3 --no-tactic-search --json "$OUT/h100-no-tactics.json"
  step bench_tactic 240 $b/graphrun_bench --prec all --batch 1,64 --iters 1000 --inflight 3 \
    --tactic-search --timing-cache /tmp/gr.timing --json "$OUT/h100-latest.json"
  for p in int8 fp16; do for n in 1 64; do
    step plan_${p}_b$n 120 $b/graphrun plan --device gpu --prec $p --batch $n --timing-cache /tmp/gr.timing
  done; done
  step gemm 120 $b/07_gemm 100
  mkdir -p /tmp/jpg1000 && for i in $(seq -w 1 200); do for f in data/*.jpg; do cp "$f" "/tmp/jpg1000/$i-$(basename "$f")"; done; done
  step stream 120 bash -c "$b/graphrun --model yolo --prec int8 --batch 64 --input /tmp/jpg1000 >/tmp/stream.jsonl"
  step stream_cpu 120 $b/06_stream /tmp/jpg1000 16 1000
  step peers 150 python3 bench/peers.py --no-compile --iters 300 --json "$OUT/peers.json"
  echo "--- summary"
  for f in bench bench_tactic; do echo "# $f"; grep -E "p50" "$LOGS/$f.log" | head -6; done
  for f in plan_int8_b1 plan_fp16_b1 plan_int8_b64 plan_fp16_b64; do echo "# $f"; sed -n '/^conv tactics/,$p' "$LOGS/$f.log" | head -12; done
  grep -E "batch|sum of" "$LOGS/gemm.log" | head -12
  tail -4 "$LOGS/stream.log"
  grep -E "^\((b|c)\)" "$LOGS/peers.log" | head -6
else
  step calib_yolo 120 $b/05_calib --device gpu --images data/shapes-val --count 500 --model yolo
  step calib_v3 180 $b/05_calib --device gpu --images data/shapes-val --count 500 --model yolov3-like
  step calib_both 120 $b/05_calib --device both --images data --model yolo --method entropy
  step eval 180 $b/graphrun eval --model shapes --images data/shapes-val --prec all --device gpu --batch 16
  for m in percentile entropy mse; do
    step eval_$m 120 $b/graphrun eval --model shapes --images data/shapes-val --prec int8 --calib $m --device gpu --batch 16
  done
  for p in int8 fp16 auto; do
    step detect_$p 120 $b/graphrun --model shapes --prec $p --calib-images data/shapes-calib --input data/shapes.png --no-output --runs 1000
  done
  step report 540 python3 tools/report/make_report.py --build $b --timeout 240 --out "$OUT/report"
  echo "--- summary"
  for f in calib_yolo calib_v3 calib_both; do echo "# $f"; tail -3 "$LOGS/$f.log"; done
  for f in eval eval_percentile eval_entropy eval_mse; do echo "# $f"; grep -E "mAP" "$LOGS/$f.log" | head -4; done
  for p in int8 fp16 auto; do echo "# detect $p"; grep -E "precision map|time|notice|nrmse" "$LOGS/detect_$p.log" | head -5; done
  grep -A3 "Problems" "$OUT/report/REPORT.md" 2>/dev/null | head -5
fi
pack_logs
