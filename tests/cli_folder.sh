#!/usr/bin/env bash
# CLI folder/list mode (--input DIR, --input-list FILE) and the image input contract, on the CPU
# reference with tiny networks: NaN/Inf outputs reported on each image's line (exit 1), file names
# that are not UTF-8 still give valid JSON, a long error keeps its reason, flags that do nothing
# with a folder are refused, and a network whose input is not 3 channels refuses images (a .npy
# of its shape still runs). $1 = the graphrun binary.
set -u
bin=$1
src=$(pwd)
source "$(dirname "$0")/lib/check.sh"

printf '[net]\nwidth=16\nheight=16\nchannels=3\n[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\nstride=1\npad=1\nactivation=leaky\n[maxpool]\nsize=2\nstride=2\n[convolutional]\nfilters=14\nsize=1\nstride=1\nactivation=linear\n[region]\nanchors=1.5,2.5,3,3\nclasses=2\ncoords=4\nnum=2\nsoftmax=1\n' >"$tmp/small.cfg"
mkdir "$tmp/images"
cp "$src/tests/fuzz/corpus/image/rgb8x6.png" "$tmp/images/a.png"
cp "$src/tests/fuzz/corpus/image/grey7x4.png" "$tmp/images/b.png"
run=(--device cpu --cfg "$tmp/small.cfg" --thresh 0.2)
# every line of $1 is a JSON object (bytes decoded as strict UTF-8); prints how many
json_lines() { python3 -c 'import json,sys; print(sum(1 for l in open(sys.argv[1], "rb") if json.loads(l.decode("utf-8"))))' "$1"; }

# All-NaN weights (the 20-byte header, then NaN for every float the cfg needs).
python3 -c 'import struct,sys; open(sys.argv[1],"wb").write(struct.pack("<iiiq",0,2,0,0))' "$tmp/empty.weights"
floats=$("$bin" "${run[@]}" --no-output --weights "$tmp/empty.weights" --input "$tmp/images/a.png" 2>&1 |
  sed -n 's/.*header 20 + \([0-9]*\) floats.*/\1/p')
python3 -c 'import struct,sys; open(sys.argv[1],"wb").write(struct.pack("<iiiq",0,2,0,0)+struct.pack("<f",float("nan"))*int(sys.argv[2]))' "$tmp/nan.weights" "${floats:-0}"
"$bin" "${run[@]}" --weights "$tmp/nan.weights" --input "$tmp/images" >"$tmp/nan.jsonl" 2>"$tmp/nan.err"
rc=$?
[ $rc -eq 1 ]; check "NaN outputs in folder mode: exit 1 (got $rc)" $?
python3 - "$tmp/nan.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 2 and all(l["nonfinite"] > 0 and "NaN/Inf" in l["error"] for l in lines), lines
PY
check "NaN outputs: each image's line says nonfinite and why" $?
grep -q "2 failed" "$tmp/nan.err"; check "NaN outputs: counted as failed in the summary" $?
grep -q "^graphrun: warning: .*nan.weights: [0-9]* non-finite weights" "$tmp/nan.err"
check "NaN weights: one warning line at load" $?
"$bin" "${run[@]}" --strict-weights --weights "$tmp/nan.weights" --input "$tmp/images" >/dev/null 2>"$tmp/strict.err"
rc=$?
[ $rc -ne 0 ] && grep -q "non-finite weights" "$tmp/strict.err" && ! grep -q '"input"' "$tmp/strict.err"
check "--strict-weights refuses NaN weights (exit $rc)" $?
"$bin" "${run[@]}" --weights "$tmp/nan.weights" --no-output --json --input "$tmp/images/a.png" >"$tmp/one.json" 2>/dev/null
rc=$?
[ $rc -eq 1 ] && python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["images"][0]["nonfinite"] > 0' "$tmp/one.json"
check "NaN outputs, single image --json: exit 1 and nonfinite in the record" $?

# A file name with byte 0xff (not UTF-8): the line is still valid JSON (U+FFFD for the byte).
cp "$tmp/images/a.png" "$tmp/images/$(printf 'x\xff.png')"
"$bin" "${run[@]}" --input "$tmp/images" >"$tmp/ff.jsonl" 2>/dev/null
[ "$(json_lines "$tmp/ff.jsonl")" = 3 ]; check "a 0xff file name: every line valid JSON and UTF-8" $?
grep -q 'x\\ufffd.png' "$tmp/ff.jsonl"; check "a 0xff file name: written as \\ufffd" $?
rm "$tmp/images/$(printf 'x\xff.png')"

# An error longer than 512 bytes keeps its reason (a 700-byte path to a truncated JPEG).
long=$tmp/$(printf 'd%.0s' {1..200})/$(printf 'e%.0s' {1..200})/$(printf 'f%.0s' {1..200})
mkdir -p "$long"
head -c 3000 "$src/data/dog.jpg" >"$long/cut.jpg"
echo "$long/cut.jpg" >"$tmp/list.txt"
"$bin" "${run[@]}" --input-list "$tmp/list.txt" >"$tmp/long.jsonl" 2>/dev/null
python3 -c 'import json,sys; e=json.loads(open(sys.argv[1]).read())["error"]; p=sys.argv[2]; assert len(p) > 600 and e.startswith(p + ": ") and "JPEG" in e[len(p):], e[-80:]' "$tmp/long.jsonl" "$long/cut.jpg"
check "an error line over 512 bytes keeps the reason" $?

# Flags that mean nothing for a folder are refused, not ignored.
for flag in "--save-output $tmp/x.npy" "--runs 2" "--find-overflow"; do
  "$bin" "${run[@]}" --input "$tmp/images" $flag >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^graphrun: ${flag%% *} .*--input DIR" "$tmp/err" && [ ! -s "$tmp/out" ]
  check "folder mode refuses ${flag%% *} (exit 2, one line; got $rc)" $?
done

# --output names a folder of annotated images here: an image file's name is refused (it would
# become a folder of that name), an existing folder of that name is fine.
"$bin" "${run[@]}" --input "$tmp/images" --output "$tmp/x.png" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^graphrun: --output .*x.png.* folder" "$tmp/err" && [ ! -e "$tmp/x.png" ]
check "folder mode refuses --output FILE.png (exit 2, one line; got $rc)" $?

# A network whose input is not 3 channels: images refused with one line naming the cfg's
# channels (this wrote past the letterbox's buffer before), in every mode; a .npy runs.
for c in 1 4; do
  sed "s/channels=3/channels=$c/" "$tmp/small.cfg" >"$tmp/c$c.cfg"
  "$bin" --device cpu --cfg "$tmp/c$c.cfg" --no-output --input "$tmp/images/a.png" >/dev/null 2>"$tmp/err"
  rc=$?
  [ $rc -eq 3 ] && grep -q "channels=$c" "$tmp/err"; check "channels=$c, one image: exit 3 naming channels=$c (got $rc)" $?
  "$bin" --device cpu --cfg "$tmp/c$c.cfg" --input "$tmp/images" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ $rc -eq 3 ] && grep -q "channels=$c" "$tmp/err"; check "channels=$c, a folder: exit 3 naming channels=$c (got $rc)" $?
  python3 -c 'import struct,sys; c=int(sys.argv[2]); h=("{'"'"'descr'"'"': '"'"'<f4'"'"', '"'"'fortran_order'"'"': False, '"'"'shape'"'"': (%d, 16, 16), }" % c).ljust(117)+"\n"; open(sys.argv[1],"wb").write(b"\x93NUMPY\x01\x00"+struct.pack("<H",len(h))+h.encode()+struct.pack("<f",0.5)*(c*256))' "$tmp/c$c.npy" $c
  "$bin" --device cpu --cfg "$tmp/c$c.cfg" --no-output --input "$tmp/c$c.npy" >/dev/null 2>"$tmp/err"
  rc=$?
  [ $rc -eq 0 ]; check "channels=$c, a .npy of its shape: exit 0 (got $rc)" $?
done
echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
