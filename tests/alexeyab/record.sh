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
# One line per record: model, input size, threshold, and whether the detections are kept
# ("dets") or only the head tensors ("tensors"; tests/test_alexeyab.c says why).
printf '%s\n' "yolov4-tiny 416 0.9 dets" "yolov7-tiny 416 0.5 tensors" "yolov4 256 0.5 tensors" \
    "yolov4-csp 256 0.5 tensors" |
    while read -r m s t keep; do
        ./build/test_alexeyab --write-weights "$m" "$s" "$TMP/$m-$s.cfg" "$TMP/$m-$s.weights"
        "$TMP/driver" "$TMP/$m-$s.cfg" "$TMP/$m-$s.weights" "$t" 0.45 2>/dev/null >"$TMP/$m-$s.out"
        if [ "$keep" = dets ]; then pat='^(head|sample|det) '; else pat='^(head|sample) '; fi
        grep -E "$pat" "$TMP/$m-$s.out" >"tests/data/alexeyab/$m-$s.txt"
        rm -f "$TMP/$m-$s.weights"
    done
