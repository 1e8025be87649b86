b=build-gpu
$b/graphrun_bench --prec int8,fp16 --batch 64 --iters 200 --inflight 3 2>&1 | grep -E "p50"
for p in int8 fp16; do $b/graphrun plan --model yolo --prec $p --batch 64 --device gpu 2>&1 | grep -A4 "conv tactics"; done
