#!/bin/bash
# Batch-64 kernels of the engine's own graph under ncu (issue 10): durations, then the
# SpeedOfLight / Occupancy / LaunchStats / SchedulerStats / WarpStateStats sections of one replay,
# for int8 and fp16 (GR_DIAG_PRECS). Cheaper than h100_diag.sh (no batch 1, no fp32).
#   bash .gpu/remote.sh --no-test -- bash bench/h100_diag2.sh
set -uo pipefail
source bench/step.sh
b=build-gpu
tc=/tmp/gr-tactics.cache
step fill 120 $b/graphrun_bench --prec ${GR_DIAG_PRECS:-int8,fp16} --batch 64 --iters 20 --timing-cache $tc
for p in $(echo ${GR_DIAG_PRECS:-int8,fp16} | tr , ' '); do
  step ncu_${p}_64 150 ncu --clock-control none --csv --metrics gpu__time_duration.sum \
    $b/graphrun_bench --prec $p --batch 64 --iters 2 --warmup 1 --timing-cache $tc
  total=$(python3 - "$LOGS/ncu_${p}_64.log" <<'PY'
import csv,sys
rows=[r for r in csv.reader(open(sys.argv[1],errors="replace"))]
h=next(i for i,r in enumerate(rows) if r and r[0]=="ID")
print(len(rows)-h-1)
PY
)
  per=$(python3 bench/ncu_detail.py "$LOGS/ncu_${p}_64.log" | tail -n +2 | wc -l)
  step sect_${p}_64 200 ncu --clock-control none --csv --section SpeedOfLight --section Occupancy \
    --section LaunchStats --section SchedulerStats --section WarpStateStats \
    --launch-skip $(( total - per )) --launch-count $per \
    $b/graphrun_bench --prec $p --batch 64 --iters 2 --warmup 1 --timing-cache $tc
done
echo "--- summary"
for f in $LOGS/sect_*.log; do echo "# $f"; python3 bench/ncu_detail.py $f; done
pack_logs
