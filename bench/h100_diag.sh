#!/bin/bash
# Where the time goes, per kernel of the engine's own graph, at batch 1 and 64 (issues 9, 10):
# the tactic tables, ncu durations and launch/occupancy/throughput sections of one replay.
#   bash .gpu/remote.sh --no-test -- bash bench/h100_diag.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
tc=/tmp/gr-tactics.cache
step bench 200 $b/graphrun_bench --prec all --batch 1,64 --iters 300 --inflight 3 --timing-cache $tc --json $OUT/bench.json
for p in int8 fp16; do for n in 1 64; do
  step plan_${p}_$n 60 $b/graphrun plan --model yolo --prec $p --batch $n --device gpu --timing-cache $tc
done; done
for p in int8 fp16 fp32; do
  step ncu_${p}_64 150 ncu --clock-control none --csv --metrics gpu__time_duration.sum \
    $b/graphrun_bench --prec $p --batch 64 --iters 2 --warmup 1 --timing-cache $tc
done
for p in int8 fp16; do
  total=$(python3 - "$LOGS/ncu_${p}_64.log" <<'PY'
import csv,sys
rows=[r for r in csv.reader(open(sys.argv[1],errors="replace"))]
h=next(i for i,r in enumerate(rows) if r and r[0]=="ID")
print(len(rows)-h-1)
PY
)
  per=$(python3 bench/ncu_detail.py "$LOGS/ncu_${p}_64.log" | tail -n +2 | wc -l)
  for n in 64 1; do
    step sect_${p}_$n 200 ncu --clock-control none --csv --section SpeedOfLight --section Occupancy \
      --section LaunchStats --section SchedulerStats --launch-skip $(( n == 64 ? total - per : 0 )) \
      $( [ $n = 64 ] && echo "--launch-count $per" ) \
      $b/graphrun_bench --prec $p --batch $n --iters 2 --warmup 1 --timing-cache $tc
  done
done
echo "--- summary"
grep -h -E "p50|img/s" $LOGS/bench.log | head -20
for f in $LOGS/plan_*.log; do echo "# $f"; grep -v "^ *$" $f | tail -25; done
for p in int8 fp16 fp32; do echo "# ncu $p b64"; python3 bench/ncu_detail.py $LOGS/ncu_${p}_64.log; done
for f in $LOGS/sect_*.log; do echo "# $f"; python3 bench/ncu_detail.py $f; done
pack_logs
