#!/bin/bash
# The GPU measurement run: build build-gpu/ (if remote.sh has not), run the GPU test suites, then
# graphrun_bench with the configuration of bench/RESULTS.md, PyTorch's peers (bench/peers.py) and,
# on request, torch.compile and an ncu profile. Results go to OUTDIR (default $OUT, else /tmp/out):
#   bench.json          graphrun_bench --json (the file bench/results/h100-latest.json is a copy of)
#   peers.json          peers.py --json, CUDA-graph rows (peers-h100-latest.json)
#   peers-compile.json  with GR_PEERS_COMPILE=1: the torch.compile rows (peers-compile-h100-latest.json)
#   logs.tgz            every step's log (device.log, tests.log, bench.log, peers*.log, ncu*.log)
# Each step has its own time limit, so one slow step cannot eat the others; the summary is last.
# On the GPU machine, from the source root, after bench/gpu/stage.sh (bench/README.md):
#   bash .gpu/remote.sh --no-test -- bash bench/device_run.sh
# Environment: GR_SKIP_TESTS=1 skips the GPU suites, GR_PEERS=0 skips PyTorch, GR_PEERS_COMPILE=1
# adds torch.compile (about 2 more minutes), GR_NCU=1 adds an ncu profile of one int8 batch-64
# replay (tabled by bench/ncu_detail.py). GR_BATCH_CURVE=1 adds the batch curve (batch 1..256,
# int8/fp16/fp32, micro-batch auto and whole, per-layer times; builds without and with a timing
# cache) and its tables (bench/batch_curve.py, bench/layer_diff.py): curve*.json, curve.txt,
# and peers.py's batch curve (with GR_PEERS). Exit status: 0 when every step that ran passed.
set -uo pipefail
out=${1:-${OUT:-/tmp/out}}
logs=$(mktemp -d)
mkdir -p "$out"
build="build-gpu"
status=0

# shellcheck source=bench/step.sh
. "$(dirname "$0")/step.sh"
STEP_LOGS=$logs

step device 30 nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total,clocks.sm \
    --format=csv
if [ ! -x $build/graphrun_bench ]; then
    step configure 300 cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_ARCHITECTURES="${GR_CUDA_ARCH:-90}"
    step build 900 cmake --build $build -j "$(nproc)"
fi
if [ "${GR_SKIP_TESTS:-0}" != 1 ]; then
    step tests 1200 ctest --test-dir $build -L gpu --output-on-failure --timeout 300 -j4
fi
step bench 600 $build/graphrun_bench --prec all --batch 1,8,64,256 --iters 500 --inflight 3 \
    --json "$out/bench.json"
if [ "${GR_BATCH_CURVE:-0}" = 1 ]; then
    curve="--prec int8,fp16,fp32 --batch 1,8,32,64,128,256 --iters 200 --inflight 3 --layers"
    step curve 600 $build/graphrun_bench $curve --json "$out/curve.json"
    step curve_whole 600 $build/graphrun_bench $curve --micro-batch whole \
        --json "$out/curve-whole.json"
    # Build times: a first build fills the timing cache, the second reads it.
    rm -f "$logs/tcache.txt"
    step build_nocache 300 $build/graphrun_bench --prec int8,fp16,fp32 --batch 64,256 --iters 20 \
        --timing-cache "$logs/tcache.txt" --json "$out/curve-build1.json"
    step build_cache 300 $build/graphrun_bench --prec int8,fp16,fp32 --batch 64,256 --iters 20 \
        --timing-cache "$logs/tcache.txt" --json "$out/curve-build2.json"
fi
if [ "${GR_PEERS:-1}" = 1 ]; then
    peers_curve=""
    [ "${GR_BATCH_CURVE:-0}" = 1 ] && peers_curve="--batch-curve 1,8,32,64,128,256"
    step peers 600 python3 bench/peers.py --no-compile --iters 300 --warmup 30 $peers_curve \
        --json "$out/peers.json"
fi
if [ "${GR_BATCH_CURVE:-0}" = 1 ]; then
    peers_arg=""
    [ -f "$out/peers.json" ] && peers_arg="--peers $out/peers.json"
    {
        echo "## batch curve (micro-batch auto)"; python3 bench/batch_curve.py "$out/curve.json" $peers_arg --build
        echo; echo "## batch curve (micro-batch whole: before)"; python3 bench/batch_curve.py "$out/curve-whole.json"
        echo; echo "## builds without a timing cache"; python3 bench/batch_curve.py "$out/curve-build1.json" --build
        echo; echo "## builds with the timing cache"; python3 bench/batch_curve.py "$out/curve-build2.json" --build
        echo; echo "## per layer, whole batch (before) vs micro-batch auto (after)"
        python3 bench/layer_diff.py "$out/curve-whole.json" "$out/curve.json" --batch 64,256
    } >"$out/curve.txt" 2>&1
    echo "[curve tables] $out/curve.txt"
fi
if [ "${GR_PEERS_COMPILE:-0}" = 1 ]; then
    step peers_compile 400 python3 bench/peers.py --no-baseline --iters 300 --warmup 30 \
        --compile-timeout 130 --json "$out/peers-compile.json"
fi
if [ "${GR_NCU:-0}" = 1 ]; then
    step ncu 400 ncu --clock-control none --csv --section SpeedOfLight --section Occupancy \
        --section LaunchStats --section SchedulerStats \
        $build/graphrun_bench --prec int8 --batch 64 --iters 2 --warmup 1
    step ncu_table 60 python3 bench/ncu_detail.py "$logs/ncu.log"
fi

echo "--- summary"
cat "$logs/device.log"
[ -f "$logs/tests.log" ] && grep -E "tests passed|tests failed|\(Failed\)|Not Run" "$logs/tests.log"
grep -E "^(prec|fp32|fp16|int8) |batch .* on" "$logs/bench.log" | head -40
[ -f "$logs/peers.log" ] && tail -22 "$logs/peers.log"
[ -f "$logs/peers_compile.log" ] && tail -8 "$logs/peers_compile.log"
[ -f "$logs/ncu_table.log" ] && cat "$logs/ncu_table.log"
[ -f "$out/curve.txt" ] && cat "$out/curve.txt"
tar -C "$logs" -czf "$out/logs.tgz" . && echo "logs: $out/logs.tgz"
rm -rf "$logs"
exit $status
