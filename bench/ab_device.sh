#!/bin/bash
# Before and after in one device call: the working tree against a base revision, both built on the
# GPU machine side by side and timed on the same card, alternately, with the GPU suites of the tree.
# Timings from two calls can land on different cards (an H200 for an H100, another H100 of the
# same kind): the difference between two versions is only read from one call (bench/README.md).
#
# Here (the base as a tarball, git-ignored; the ONNX benchmark model if it is to be timed):
#   mkdir -p .base && git archive --format=tar.gz -o .base/base.tgz REF
#   python3 bench/onnx_models.py bench-models        # optional: else made on the device
#   ../shared/gpu/stage.sh
# Device: run with carry [".gpu", ".base/base.tgz", "bench-models/yolov8n-640.onnx"] and
#   bash bench/ab_device.sh
# Environment (defaults in brackets):
#   GR_AB_MODELS   models to time, graphrun --model names or .onnx paths
#                  [yolo yolov4-tiny bench-models/yolov8n-640.onnx]
#   GR_AB_PREC     [int8,fp16]      GR_AB_BATCH [1,64]      GR_AB_ITERS [100]
#   GR_AB_TESTS    ctest -R regex of the tree's GPU suites, empty for none
#                  [test_gpu_(conv|conv_fused|tactic|onnx|ops|engine)$]
#   GR_AB_ROOFLINE 1: also the per-layer roofline of each version (batch 64)  [0]
#   LIMIT          seconds this script may take (each step is cut to fit)      [540]
# Output: $OUT/ab.tgz (each bench JSON and log); a table on stdout (p50, p99 and sustained img/s of
# base and tree, and their ratio), from bench/ab_table.py. Exit status 0 when everything ran.
set -uo pipefail
OUT=${OUT:-/tmp/out}
R=$(mktemp -d)
T0=$(date +%s)
LIMIT=${LIMIT:-540}
MODELS=${GR_AB_MODELS:-yolo yolov4-tiny bench-models/yolov8n-640.onnx}
PREC=${GR_AB_PREC:-int8,fp16}
BATCH=${GR_AB_BATCH:-1,64}
ITERS=${GR_AB_ITERS:-100}
TESTS=${GR_AB_TESTS-test_gpu_(conv|conv_fused|tactic|onnx|ops|engine)\$}
status=0
mkdir -p "$OUT"

# shellcheck source=bench/step.sh
. "$(dirname "$0")/step.sh"
STEP_LOGS=$R
STEP_DEADLINE=$((T0 + LIMIT))

if [ ! -f .base/base.tgz ]; then
    echo "ab_device.sh: no .base/base.tgz (make it here: git archive --format=tar.gz -o .base/base.tgz REF)" >&2
    exit 2
fi
sys=$PWD/.gpu/sysroot
lib=$sys/usr/lib/x86_64-linux-gnu
export PKG_CONFIG_PATH=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$sys CMAKE_PREFIX_PATH=$sys/usr
export CPATH=$sys/usr/include${CPATH:+:$CPATH} LIBRARY_PATH=$lib${LIBRARY_PATH:+:$LIBRARY_PATH}
export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PATH=$sys/usr/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,memory.used,clocks.sm --format=csv,noheader
prev=/tmp/gr-ab-base
rm -rf "$prev" && mkdir -p "$prev" && tar -xzf .base/base.tgz -C "$prev"
configure() { cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90; }
# The base builds only the benchmark, beside the tree's full build (tests included).
(configure "$prev" "$prev/build" >"$R/configure_base.log" 2>&1 &&
    cmake --build "$prev/build" -j 6 --target graphrun_bench >"$R/build_base.log" 2>&1
 echo $? >"$R/build_base.rc") &
prev_pid=$!
step configure 120 cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90
step build 400 cmake --build build-gpu -j "$(nproc)" || grep -E -A5 "error" "$R/build.log" | head -40
for m in $MODELS; do # an ONNX model the call did not carry is made here (PyTorch is on the machine)
    case $m in *.onnx) [ -f "$m" ] || step models 200 python3 bench/onnx_models.py "$(dirname "$m")" ;; esac
done
if [ -n "$TESTS" ]; then
    step tests 300 ctest --test-dir build-gpu -R "$TESTS" --output-on-failure --timeout 280 -j3
    grep -E "tests passed|tests failed|\(Failed\)|Not Run" "$R/tests.log"
fi
wait $prev_pid
if [ "$(cat "$R/build_base.rc")" != 0 ]; then
    echo "base build failed:"; grep -E -A5 "error" "$R/build_base.log" | head -20
    status=1
fi
# Alternate the versions per model so that a drift of the card's clocks touches both.
for m in $MODELS; do
    tag=$(basename "$m" .onnx)
    for v in base tree; do
        bin=build-gpu/graphrun_bench
        [ $v = base ] && bin=$prev/build/graphrun_bench
        step "$tag-$v" 120 "$bin" --model "$m" --prec "$PREC" --batch "$BATCH" --iters "$ITERS" \
            --warmup 10 --inflight 3 --json "$R/$tag-$v.json"
        if [ "${GR_AB_ROOFLINE:-0}" = 1 ]; then
            step "roofline-$tag-$v" 90 "$bin" --model "$m" --prec "$PREC" --batch 64 --iters 30 \
                --warmup 5 --roofline --json "$R/roofline-$tag-$v.json"
        fi
    done
done
# shellcheck disable=SC2086 # MODELS is a list
python3 bench/ab_table.py "$R" $MODELS
tar -C "$R" -czf "$OUT/ab.tgz" . && echo "results: $OUT/ab.tgz ($(($(date +%s) - T0)) s)"
rm -rf "$R"
exit $status
