#!/usr/bin/env bash
# Build the libFuzzer harnesses (tests/fuzz/fuzz_*.c) into build-fuzz/ and run each on a copy of its
# seed corpus tests/fuzz/corpus/<target>/ (the committed corpus never grows). Two modes:
#   tests/fuzz/run.sh --ci [TARGET...]         what CI runs, deterministic: every committed input
#                                              replayed once (about a minute for all targets). No
#                                              mutations: the harnesses' coverage is not bit-for-bit
#                                              reproducible (two runs of fuzz_cfg with -seed=1 start at
#                                              712 and 713 features), so even a fixed seed's
#                                              mutations differ from run to run, and CI would not
#                                              pass or fail the same way every time
#   tests/fuzz/run.sh SECONDS [TARGET...]      random exploration for SECONDS per target: run it
#                                              before submitting a change to a parser (e.g.
#                                              tests/fuzz/run.sh 600 engine_file), fix what it
#                                              finds, and merge what it learned into the committed
#                                              corpus: tests/fuzz/run.sh --merge [TARGET...]
#   tests/fuzz/run.sh --merge [TARGET...]      add to tests/fuzz/corpus/<target>/ the inputs of the
#                                              last run's corpus that reach new coverage (-merge=1)
# targets: cfg weights image image_sequence npy cli coco calib_cache timing_cache engine_file
#          engine_map jpeg_scan onnx (default all)
# Prints per target the executions, the final corpus size and the crashes (crash, leak, timeout,
# out-of-memory: each leaves an input under build-fuzz/run/<target>-artifacts/). Exits 1 if any
# target found one. Needs clang with libFuzzer (Debian: clang-14 libclang-rt-14-dev).
set -uo pipefail
mode=${1:?usage: tests/fuzz/run.sh --ci|SECONDS [TARGET...]}
shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(cfg weights image image_sequence npy cli coco calib_cache timing_cache engine_file engine_map jpeg_scan onnx)
cd "$(dirname "$0")/../.."

cc=${CC:-clang}
cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER="$cc" -DGR_ENABLE_CUDA=OFF -DGR_FUZZ=ON \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 2
build_targets=()
for t in "${targets[@]}"; do build_targets+=("fuzz_$t"); done
cmake --build build-fuzz -j "$(nproc)" --target "${build_targets[@]}" >/dev/null || {
  echo "fuzz: build failed"; cmake --build build-fuzz -j 1 --target "${build_targets[@]}" | tail -20; exit 2; }

work=build-fuzz/run
if [ "$mode" = --merge ]; then
  for t in "${targets[@]}"; do
    [ -d "$work/$t-corpus" ] || { echo "fuzz $t: no $work/$t-corpus (run tests/fuzz/run.sh SECONDS first)"; continue; }
    before=$(find "tests/fuzz/corpus/$t" -type f | wc -l)
    "build-fuzz/fuzz_$t" -merge=1 -timeout=20 -rss_limit_mb=2560 "tests/fuzz/corpus/$t" \
      "$work/$t-corpus" >"$work/$t-merge.log" 2>&1 || { echo "fuzz $t: merge failed ($work/$t-merge.log)"; exit 1; }
    echo "fuzz $t: committed corpus $before -> $(find "tests/fuzz/corpus/$t" -type f | wc -l) files"
  done
  exit 0
fi
rm -rf "$work"
mkdir -p "$work"
failed=0
for t in "${targets[@]}"; do
  corpus=$work/$t-corpus artifacts=$work/$t-artifacts log=$work/$t.log
  cp -r "tests/fuzz/corpus/$t" "$corpus"
  mkdir -p "$artifacts"
  # -timeout: one input may take at most 20 s (the weights target runs a tiny network; the image
  # target decodes at most 2^20 pixels). -rss_limit_mb: the library's own limits keep one input
  # far below this.
  if [ "$mode" = --ci ]; then
    how=(-runs=0)
  else
    how=(-max_total_time="$mode")
  fi
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "build-fuzz/fuzz_$t" "${how[@]}" -print_final_stats=1 -timeout=20 \
    -rss_limit_mb=2560 -artifact_prefix="$artifacts/" "$corpus" >"$log" 2>&1
  rc=$?
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log" | tail -n 1)
  size=$(find "$corpus" -type f | wc -l)
  found=$(find "$artifacts" -type f | wc -l)
  printf 'fuzz %-12s %9s executions, corpus %5d files (seeds %d), crashes %d\n' "$t" "${execs:-?}" \
    "$size" "$(find "tests/fuzz/corpus/$t" -type f | wc -l)" "$found"
  if [ "$rc" -ne 0 ] || [ "$found" -gt 0 ]; then
    failed=1
    echo "fuzz $t: exit $rc; artifacts: $(find "$artifacts" -type f | tr '\n' ' ')"
    grep -E 'ERROR|SUMMARY|runtime error|==[0-9]+==' "$log" | head -n 8
  fi
done
exit $failed
