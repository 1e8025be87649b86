#!/bin/sh
# Re-record tests/data/alexeyab/ (see its README.md). Run from the graphrun tree root with build/
# built, DARKNET pointing at AlexeyAB Darknet's tree (commit 59596d78) built by its Makefile
# (GPU=0 CUDNN=0 OPENCV=0 OPENMP=0), and TMP a scratch directory with ~300 MB free.
set -eu
DARKNET=${DARKNET:-/work/alexeyab-darknet}
TMP=${TMP:-/tmp/gr-alexeyab}
mkdir -p "$TMP"
gcc -O2 -I"$DARKNET/include" -c tests/alexeyab/driver.c -o "$TMP/driver.o"
g++ -o "$TMP/driver" "$TMP/driver.o" $(ls "$DARKNET"/obj/*.o | grep -v '/darknet.o$') -lm -pthread
# One line per record: model (a built-in, or a cfg in tests/data/alexeyab/), input size,
# threshold, what is kept ("dets": head tensors and detections; "tensors": the head tensors only;
# "raw": the heads' inputs only; tests/test_alexeyab.c says why) and samples per tensor.
printf '%s\n' "yolov4-tiny 416 0.9 dets 400" "yolov7-tiny 416 0.5 tensors 400" \
    "yolov4 256 0.5 tensors 400" "yolov4-csp 256 0.5 tensors 400" "sam-scale 16 0.5 raw 48" |
    while read -r m s t keep samples; do
        ./build/test_alexeyab --write-weights "$m" "$s" "$TMP/$m-$s.cfg" "$TMP/$m-$s.weights"
        "$TMP/driver" "$TMP/$m-$s.cfg" "$TMP/$m-$s.weights" "$t" 0.45 "$samples" 2>/dev/null \
            >"$TMP/$m-$s.out"
        case $keep in
        dets) pat='^(head|sample|det) ' ;;
        tensors) pat='^(head|sample) ' ;;
        *) pat='^(head [0-9]+ [0-9]+ [0-9]+ [0-9]+ [0-9]+ raw|sample [0-9]+ raw) ' ;;
        esac
        grep -E "$pat" "$TMP/$m-$s.out" >"tests/data/alexeyab/$m-$s.txt"
        rm -f "$TMP/$m-$s.weights"
    done
