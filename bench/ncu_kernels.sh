#!/bin/bash
# ncu on the kernels of one graph replay of YOLOv2-tiny (or MODEL) whose names match REGEX, for
# one precision and batch. A first run fills a timing cache and (int8) a calibration cache so that
# the profiled run measures no tactic candidates and runs no fp32 calibration engine (ncu would
# profile those launches first); the profiled run does 1 warm-up and 1 timed run. On the GPU machine, after bench/gpu/stage.sh:
#   bash .gpu/remote.sh --no-test -- bash bench/ncu_kernels.sh detail int8 64 'k_conv_stream|conv_first'
#       ncu's detail sections (speed of light, occupancy, launch, warp states, scheduler, memory
#       and compute workload, source counters) of up to 40 matching launches:
#       $OUT/ncu-PREC-BATCH.txt (ncu --page details), a summary on stdout
#   bash .gpu/remote.sh --no-test -- bash bench/ncu_kernels.sh sass int8 64 k_conv_stream 4
#       the source counters of the matching launch number SKIP (0 = first): warp stall samples
#       and executed instructions per SASS line, $OUT/sass-PREC-BATCH-SKIP.csv, and the hottest
#       instructions and a per-opcode summary on stdout (bench/ncu_sass.py)
set -uo pipefail
mode=${1:-detail} prec=${2:-int8} batch=${3:-64} regex=${4:-.} skip=${5:-0} model=${6:-yolo}
out=${OUT:-/tmp/out}
bench=build-gpu/graphrun_bench
cache=$(mktemp) calib=$(mktemp)
rm -f "$cache" "$calib"
$bench --model "$model" --prec "$prec" --batch "$batch" --iters 20 --warmup 5 \
    --timing-cache "$cache" --calib-cache "$calib" >/dev/null || exit 1
run=($bench --model "$model" --prec "$prec" --batch "$batch" --iters 1 --warmup 1 --timing-cache "$cache"
     --calib-cache "$calib")
case $mode in
detail)
    rep="$out/ncu-$prec-$batch"
    ncu --clock-control none -k "regex:$regex" --launch-count 40 --import-source no \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
        --section SourceCounters -f -o "$rep" "${run[@]}" >"$rep.log" 2>&1
    rc=$?
    ncu -i "$rep.ncu-rep" --page details >"$rep.txt" 2>&1
    grep -E "^  [a-z_].*\(|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issued Warp|Block Limit|Memory Throughput|Compute \(SM\)" \
        "$rep.txt" | head -150 ;;
sass)
    rep="$out/sass-$prec-$batch-$skip"
    ncu --clock-control none -k "regex:$regex" --launch-skip "$skip" --launch-count 1 \
        --section SourceCounters --section WarpStateStats --section SpeedOfLight -f -o "$rep" \
        "${run[@]}" >"$rep.log" 2>&1
    rc=$?
    ncu -i "$rep.ncu-rep" --page source --print-source sass --csv >"$rep.csv" 2>&1
    ncu -i "$rep.ncu-rep" --page details >"$rep.txt" 2>&1
    head -3 "$rep.txt"; grep -E "Duration" "$rep.txt"
    python3 bench/ncu_sass.py "$rep.csv" | head -80 ;;
*)
    echo "ncu_kernels.sh: mode '$mode' is not detail or sass" >&2; exit 2 ;;
esac
rm -f "$cache" "$calib" "$rep.ncu-rep"
exit $rc
