#!/usr/bin/env bash
# Saved engines on the command line, on the CPU: `graphrun build -o FILE` prints what it built and
# its build time and writes the file; `--engine FILE` gives the same detections as building the
# same engine (images one by one, and a folder), with the file's batch and precision; flags that
# contradict the file, or that it fixes, are one-line usage errors (exit 2); a corrupt or
# truncated file is one line and exit 3; compare refuses --engine.
# $1 = the graphrun binary. Runs from the source root.
set -u
bin=$1
source "$(dirname "$0")/lib/check.sh"

engine=$tmp/shapes.grengine
"$bin" build --model shapes --device cpu --prec int8 --batch 2 -o "$engine" >"$tmp/build.out" \
  2>"$tmp/build.err"
check "build exit 0" $?
[ -s "$engine" ]; check "build wrote the file" $?
grep -qE "^graphrun build: .*shapes.grengine: model shapes, int8, batch 2, CPU .*built in [0-9.]+ s, [0-9.]+ MB$" \
  "$tmp/build.out"
check "build says what it built and its time" $?
! ls "$tmp" | grep -q '\.tmp'; check "no temporary file left" $?

"$bin" build --model shapes --device cpu 2>"$tmp/noout.err"
[ $? -eq 2 ] && grep -q -- "-o FILE is required" "$tmp/noout.err"; check "build without -o: exit 2" $?
"$bin" build --model shapes --device cpu --input data/shapes.png -o "$tmp/x" 2>"$tmp/in.err"
[ $? -eq 2 ] && grep -q -- "--input is not a build option" "$tmp/in.err"; check "build --input: exit 2" $?
"$bin" build --model shapes --device cpu -o /nonexistent/dir/x.grengine 2>"$tmp/io.err"
rc=$?
[ $rc -eq 3 ] && [ "$(wc -l <"$tmp/io.err" | tr -d ' ')" -ge 1 ] && grep -q "/nonexistent/dir/x.grengine" "$tmp/io.err"
check "build to an unwritable place: exit 3 naming it (got $rc)" $?

# The same detections from the file as from a fresh build of the same engine.
"$bin" --model shapes --device cpu --prec int8 --batch 2 --input data/shapes.png --input \
  data/shapes-val/000.png --json --no-output >"$tmp/built.json" 2>/dev/null
check "detect (built) exit 0" $?
"$bin" --engine "$engine" --input data/shapes.png --input data/shapes-val/000.png --json \
  --no-output >"$tmp/loaded.json" 2>"$tmp/loaded.err"
check "detect --engine exit 0" $?
grep -v '"time\|_us"\|_ms"' "$tmp/built.json" >"$tmp/a"; grep -v '"time\|_us"\|_ms"' "$tmp/loaded.json" >"$tmp/b"
cmp -s "$tmp/a" "$tmp/b"; check "detect --engine: the same detections as the build" $?
grep -q "engine .*shapes.grengine: model shapes.*precision int8, batch 2, images letterbox, loaded in" "$tmp/loaded.err"
check "detect --engine says what it loaded" $?
grep -q "at build: calibration" "$tmp/loaded.err" && ! grep -q "^graphrun: calibration" "$tmp/loaded.err"
check "no calibration on load (the build's is marked as such)" $?

# A folder streams with the file's batch.
mkdir -p "$tmp/folder"
cp data/shapes-val/00[0-4].png "$tmp/folder/"
"$bin" --engine "$engine" --input "$tmp/folder" >"$tmp/folder.jsonl" 2>"$tmp/folder.err"
check "folder --engine exit 0" $?
[ "$(wc -l <"$tmp/folder.jsonl" | tr -d ' ')" -eq 5 ]; check "folder --engine: a line per image" $?

# Flags against the file.
for args in "--prec fp16:--prec fp16 contradicts" "--batch 4:--batch 4 contradicts" \
            "--model yolo:--model yolo contradicts" "--weights x.weights:--weights has no effect" \
            "--calib-cache c:--calib-cache has no effect" \
            "--executor dataflow:--executor has no effect"; do
  flags=${args%%:*} want=${args#*:}
  # shellcheck disable=SC2086
  "$bin" --engine "$engine" $flags --input data/shapes.png --no-output >/dev/null 2>"$tmp/flag.err"
  rc=$?
  [ $rc -eq 2 ] && grep -q -- "$want" "$tmp/flag.err" && [ "$(wc -l <"$tmp/flag.err" | tr -d ' ')" -eq 1 ]
  check "--engine with $flags: one line, exit 2 (got $rc)" $?
done
"$bin" --engine "$engine" --prec int8 --batch 2 --model shapes --input data/shapes.png --no-output \
  >/dev/null 2>&1
check "--engine with agreeing flags: exit 0" $?
"$bin" compare --engine "$engine" 2>"$tmp/cmp.err"
[ $? -eq 2 ] && grep -q -- "--engine is not a compare option" "$tmp/cmp.err"; check "compare --engine: exit 2" $?

# Damaged files: one line, exit 3 (input), never a run.
size=$(wc -c <"$engine")
head -c $((size / 2)) "$engine" >"$tmp/half.grengine"
"$bin" --engine "$tmp/half.grengine" --input data/shapes.png --no-output 2>"$tmp/half.err"
rc=$?
[ $rc -eq 3 ] && grep -q "truncated" "$tmp/half.err" && [ "$(wc -l <"$tmp/half.err" | tr -d ' ')" -eq 1 ]
check "truncated file: one line, exit 3 (got $rc)" $?
cp "$engine" "$tmp/flip.grengine"
printf '\x55' | dd of="$tmp/flip.grengine" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
"$bin" --engine "$tmp/flip.grengine" --input data/shapes.png --no-output 2>"$tmp/flip.err"
rc=$?
[ $rc -eq 3 ] && grep -q "checksum mismatch: file corrupt" "$tmp/flip.err"; check "corrupt file: exit 3 (got $rc)" $?
"$bin" --engine data/shapes.png --input data/shapes.png --no-output 2>"$tmp/png.err"
[ $? -eq 3 ] && grep -q "not a graphrun engine file" "$tmp/png.err"; check "not an engine file: exit 3" $?
"$bin" --engine "$tmp/missing.grengine" --input data/shapes.png --no-output 2>/dev/null
[ $? -eq 3 ]; check "missing file: exit 3" $?

echo "cli_engine_file: $pass passed, $fails failed"
[ "$fails" -eq 0 ]
