#!/bin/bash
# Which instructions of one kernel the time goes to: ncu's source counters (warp stall samples
# per SASS instruction) for the N-th launch matching REGEX in one graph replay of YOLOv2-tiny
# (or --model), printed as the hottest instructions and a per-opcode summary
# (bench/ncu_sass.py). A first run fills a timing cache so that no tactic candidates run.
# On the GPU machine, after bench/gpu/stage.sh:
#   bash .gpu/remote.sh --no-test -- bash bench/ncu_sass.sh int8 64 k_conv_stream 4
# Writes $OUT/sass-PREC-BATCH-SKIP.csv (ncu --page source --print-source sass --csv).
set -uo pipefail
prec=${1:-int8} batch=${2:-64} regex=${3:-.} skip=${4:-0} model=${5:-yolo}
out=${OUT:-/tmp/out}
bench=build-gpu/graphrun_bench
cache=$(mktemp)
rm -f "$cache"
$bench --model "$model" --prec "$prec" --batch "$batch" --iters 20 --warmup 5 \
    --timing-cache "$cache" >/dev/null || exit 1
rep="$out/sass-$prec-$batch-$skip"
ncu --clock-control none -k "regex:$regex" --launch-skip "$skip" --launch-count 1 \
    --section SourceCounters --section WarpStateStats --section SpeedOfLight -f -o "$rep" \
    $bench --model "$model" --prec "$prec" --batch "$batch" --iters 1 --warmup 1 \
    --timing-cache "$cache" >"$rep.log" 2>&1
rc=$?
ncu -i "$rep.ncu-rep" --page source --print-source sass --csv >"$rep.csv" 2>&1
ncu -i "$rep.ncu-rep" --page details >"$rep.txt" 2>&1
head -3 "$rep.txt"; grep -E "Duration" "$rep.txt"
python3 bench/ncu_sass.py "$rep.csv" | head -80
rm -f "$cache" "$rep.ncu-rep"
exit $rc
