#!/bin/sh
# Re-record tests/data/alexeyab/ (see its README.md). Run from the graphrun tree root with
# $BUILD (default build/) holding test_alexeyab, $DARKNET pointing at AlexeyAB Darknet's tree
# (commit 59596d78) built by its Makefile without fast-math - GPU=0 CUDNN=0 OPENCV=0 OPENMP=0
# AVX=0 (its defaults) and `make OPTS=-O2` (the default -Ofast swaps in vector expf/logf a few ulps
# off: the README says by how much) - and $TMP a scratch directory with ~300 MB free.
set -eu
DARKNET=${DARKNET:?set DARKNET to the AlexeyAB Darknet tree (see the comment above)}
TMP=${TMP:-/tmp/gr-alexeyab}
BUILD=${BUILD:-build}
mkdir -p "$TMP"
gcc -O2 -Wall -Wextra -I"$DARKNET/include" -c tests/alexeyab/driver.c -o "$TMP/driver.o"
g++ -o "$TMP/driver" "$TMP/driver.o" $(ls "$DARKNET"/obj/*.o | grep -v '/darknet.o$') -lm -pthread
# One line per record (the dead-leaves input): model (a built-in, or a cfg in tests/data/alexeyab/), input size,
# threshold, what is kept ("dets": head tensors and detections; "tensors": the head tensors only;
# "raw": the heads' inputs only; tests/test_alexeyab.c says why) and samples per tensor.
printf '%s\n' "yolov4-tiny 416 0.25 dets 400" "yolov7-tiny 416 0.1 dets 400" \
    "yolov4 160 0.5 dets 400" "yolov4-csp 160 0.25 dets 400" "sam-scale 16 0.5 raw 48" |
    while read -r m s t keep samples; do
        "$BUILD/test_alexeyab" --write-weights "$m" "$s" "$TMP/$m-$s.cfg" "$TMP/$m-$s.weights"
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
# Photos through test_detector's whole chain (the driver's IMAGE argument): each case of
# `test_alexeyab --list-photos`, on a PNG of graphrun's own decode of the JPEG in data/ (the same
# pixels on both sides), the cfg with letter_box=1 for the letterbox cases. Detections only.
"$BUILD/test_alexeyab" --list-photos |
    while read -r m s t photo how record; do
        "$BUILD/test_alexeyab" --write-png "data/$photo.jpg" "$TMP/$photo.png"
        extra=
        [ "$how" = letterbox ] && extra=letterbox
        "$BUILD/test_alexeyab" --write-weights "$m" "$s" "$TMP/$m-$s-$how.cfg" \
            "$TMP/$m-$s-$how.weights" $extra
        "$TMP/driver" "$TMP/$m-$s-$how.cfg" "$TMP/$m-$s-$how.weights" "$t" 0.45 400 \
            "$TMP/$photo.png" 2>/dev/null | grep -E '^(image|det) ' >"$record"
        rm -f "$TMP/$m-$s-$how.weights"
    done
