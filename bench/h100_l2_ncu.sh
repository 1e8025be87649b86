#!/bin/bash
# Issue-9 checks after .gpu/remote.sh built build-gpu/: L2 persisting window A/B, the GEMM tactic
# benchmark, and ncu per-kernel times of the engine's int8/fp16 graphs (clocks untouched).
#   bash .gpu/remote.sh --no-test -- bash bench/h100_l2_ncu.sh [ncu]
OUT=${OUT:-/tmp/out}; b=build-gpu
for r in off on off on; do
  if [ $r = on ]; then e="env GR_L2_PERSIST=1"; else e=""; fi
  echo "# L2 persisting window $r"
  timeout 60 $e $b/graphrun_bench --prec int8,fp16 --batch 1 --iters 1000 2>&1 | grep -E "p50" | tail -2
done
timeout 120 $b/06_gemm 100 2>&1 | tee $OUT/06_gemm.txt
if [ "${1:-}" = ncu ]; then
  for p in int8 fp16; do
    timeout 120 ncu --clock-control none --csv --metrics gpu__time_duration.sum $b/graphrun_bench \
      --prec $p --batch 1 --iters 2 --warmup 1 > $OUT/ncu_$p.csv 2>>$OUT/ncu.err
    python3 bench/ncu_sum.py $OUT/ncu_$p.csv 10
  done
fi
