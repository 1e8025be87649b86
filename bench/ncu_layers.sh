#!/bin/bash
# Where a kernel's time goes: ncu's detailed sections (speed of light, occupancy, launch, warp
# states, scheduler, memory and compute workload, source counters) on the kernels of one graph
# replay whose names match REGEX, for one precision and batch of YOLOv2-tiny (or --model).
# A first run fills a timing cache so that the profiled run measures no tactic candidates (ncu
# would profile every candidate's launch); the profiled run does 1 warm-up and 1 timed run.
# On the GPU machine, after bench/gpu/stage.sh:
#   bash .gpu/remote.sh --no-test -- bash bench/ncu_layers.sh int8 64 'k_conv_stream|conv_first'
# Writes $OUT/ncu-PREC-BATCH.txt (ncu --page details) and $OUT/ncu-PREC-BATCH.ncu-rep.
set -uo pipefail
prec=${1:-int8} batch=${2:-64} regex=${3:-.} model=${4:-yolo}
out=${OUT:-/tmp/out}
bench=build-gpu/graphrun_bench
cache=$(mktemp)
rm -f "$cache"
$bench --model "$model" --prec "$prec" --batch "$batch" --iters 20 --warmup 5 \
    --timing-cache "$cache" >/dev/null || exit 1
ncu --clock-control none -k "regex:$regex" --launch-count 40 --import-source no \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    --section SourceCounters -f -o "$out/ncu-$prec-$batch" \
    $bench --model "$model" --prec "$prec" --batch "$batch" --iters 1 --warmup 1 \
    --timing-cache "$cache" >"$out/ncu-$prec-$batch.log" 2>&1
rc=$?
ncu -i "$out/ncu-$prec-$batch.ncu-rep" --page details >"$out/ncu-$prec-$batch.txt" 2>&1
grep -E "^  [a-z_].*\(|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issued Warp|Block Limit|Memory Throughput|Compute \(SM\)" \
    "$out/ncu-$prec-$batch.txt" | head -150
rm -f "$cache"
exit $rc
