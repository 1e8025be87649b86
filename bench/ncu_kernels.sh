#!/bin/bash
# ncu on the kernels of one graph replay of YOLOv2-tiny (or MODEL) whose names match REGEX, for
# one precision and batch. The engine is built and saved first (`graphrun build`: calibration and
# tactic search happen there, outside the profile), then ncu profiles `graphrun --engine FILE` on
# one photo: the loaded engine runs its graph (a warm-up replay and the run), so every captured
# launch is one of the replay's kernels (profiling graphrun_bench captured the search's candidate
# checks and the fp32 calibration engine's kernels first). On the GPU machine, after
# bench/gpu/stage.sh:
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
graphrun=build-gpu/graphrun
engine=$(mktemp --suffix=.engine)
$graphrun build --model "$model" --prec "$prec" --batch "$batch" -o "$engine" >/dev/null || exit 1
boxes=$(mktemp --suffix=.png)
run=($graphrun --engine "$engine" --input data/dog.jpg --output "$boxes")
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
rm -f "$engine" "$boxes" "$rep.ncu-rep"
exit $rc
