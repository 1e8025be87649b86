#!/usr/bin/env bash
# CLI: every input named is run, and no output destroys an input.
# - Several images, repeated --input or several paths after one --input (what a shell glob
#   gives), at any --batch: each runs once, in order, in batches of --batch (before: at the
#   default batch only the first ran, exit 0, nothing said; a glob was "unexpected argument").
#   --output FILE draws them as FILE, FILE.1.png ...; --output DIR (an existing folder) as
#   DIR/<name>; --save-output over several runs and more than 64 inputs are refused (exit 2).
# - An output that is an input (another spelling, a symlink, a hard link), or a folder written
#   into that holds one, is refused before anything is written, exit 2, the input intact: single
#   images, --input DIR / --input-list (drawn images, yolo-txt labels), build -o, plan --dot.
#   (The video's --output is checked in tests/cli_video.sh.)
# - WebP and TIFF samples (tests/data/formats) give the PNG's boxes where the build decodes them.
# $1 = the graphrun binary.
set -u
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(pwd)
source "$(dirname "$0")/lib/check.sh"

printf '[net]\nwidth=16\nheight=16\nchannels=3\n[convolutional]\nfilters=8\nsize=3\nstride=1\npad=1\nactivation=leaky\n[convolutional]\nfilters=14\nsize=1\nstride=1\nactivation=linear\n[region]\nanchors=1.5,2.5,3,3\nclasses=2\ncoords=4\nnum=2\nsoftmax=1\n' >"$tmp/small.cfg"
run=(--device cpu --cfg "$tmp/small.cfg" --thresh 0.2)
d=$tmp/in
mkdir "$d"
for k in 0 1 2 3 4; do cp "$src/data/shapes-val/00$k.png" "$d/s$k.png"; done
cd "$tmp" || exit 1

# ---- several inputs --------------------------------------------------------------------------
"$bin" "${run[@]}" --input in/s0.png in/s1.png in/s2.png --output out.png >glob.txt 2>glob.err
rc=$?
[ $rc -eq 0 ]; check "a glob after one --input runs (got $rc)" $?
[ $rc -eq 0 ] || head -c 300 glob.err
[ "$(grep -c '^in/s[0-9].png: [0-9]* detection' glob.txt)" -eq 3 ]; check "glob: each image reported once" $?
[ "$(grep -o '^in/s[0-9].png' glob.txt | tr '\n' ' ')" = "in/s0.png in/s1.png in/s2.png " ]; check "glob: in order" $?
[ -s out.png ] && [ -s out.1.png ] && [ -s out.2.png ]; check "glob: out.png, out.1.png, out.2.png drawn" $?

"$bin" "${run[@]}" --input in/s0.png --input in/s1.png --no-output >repeat.txt 2>/dev/null
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c '^in/s[01].png: ' repeat.txt)" -eq 2 ]; check "--input a --input b at batch 1: both run (got $rc)" $?

# Five inputs at --batch 2: three runs, each image once (json, csv), the same records as one by one.
"$bin" "${run[@]}" --input in/s*.png --batch 2 --json --no-output >b2.json 2>b2.err
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c '"input": "in/s[0-4].png"' b2.json)" -eq 5 ]; check "--batch 2, 5 inputs: 5 json records (got $rc)" $?
grep -q 'median of 3 runs' b2.err; check "--batch 2, 5 inputs: three runs" $?
for k in 0 1 2 3 4; do "$bin" "${run[@]}" --input in/s$k.png --format csv --no-output 2>/dev/null | tail -n +2; done >one.csv
"$bin" "${run[@]}" --input in/s*.png --batch 2 --format csv --no-output 2>/dev/null | tail -n +2 >b2.csv
[ -s one.csv ] && cmp -s one.csv b2.csv; check "--batch 2: the csv rows of the images run one by one" $?

mkdir drawn
"$bin" "${run[@]}" --input in/s0.png in/s3.png --output drawn >/dev/null 2>&1
[ -s drawn/s0.png ] && [ -s drawn/s3.png ]; check "--output DIR: DIR/<name> per input" $?

"$bin" "${run[@]}" --input in/s0.png in/s1.png --save-output x.npy >/dev/null 2>err
rc=$?
[ $rc -eq 2 ] && grep -q "save-output writes one run's outputs: 2 inputs at --batch 1 are 2 runs" err
check "--save-output over several runs: refused, exit 2 (got $rc)" $?
"$bin" "${run[@]}" --input in/s0.png in/s1.png --save-output x.npy --batch 2 --no-output >/dev/null 2>&1
check "--save-output with one batch of two" $?

args=(); for k in $(seq 1 65); do args+=(in/s0.png); done
"$bin" "${run[@]}" --input "${args[@]}" >/dev/null 2>err
rc=$?
[ $rc -eq 2 ] && grep -q "too many --input files (at most 64): give their folder (--input DIR) or a list" err
check "65 inputs: refused with the way to run them, exit 2 (got $rc)" $?

# ---- outputs that would destroy an input ------------------------------------------------------
mkdir more
cp in/s1.png more/s.1.png
sum() { md5sum in/* more/* | md5sum; }
before=$(sum)
refused() { # NAME WORDS ARGS...: exit 2, one line with WORDS, the inputs intact
  local name=$1 words=$2
  shift 2
  "$@" >/dev/null 2>err
  local rc=$?
  [ $rc -eq 2 ] && grep -q -- "$words" err && [ "$(wc -l <err)" -le 3 ] && [ "$(sum)" = "$before" ]
  local ok=$?
  check "$name: refused, exit 2, inputs intact (got $rc)" $ok
  [ $ok -eq 0 ] || tail -1 err
}
ln -s in/s1.png link.png
ln in/s2.png hard.png
refused "--output = --input" "--output in/s0.png is the input in/s0.png" "$bin" "${run[@]}" --input in/s0.png --output in/s0.png
refused "--output = --input, another spelling" "is the input in/s0.png" "$bin" "${run[@]}" --input in/s0.png --output ./in/../in/s0.png
refused "--output a symlink to the input" "is the input" "$bin" "${run[@]}" --input in/s1.png --output link.png
refused "--output a hard link of the input" "is the input" "$bin" "${run[@]}" --input in/s2.png --output hard.png
refused "the second input's drawn name (FILE.1.png) is the third input" "--output more/s.1.png is the input" \
  "$bin" "${run[@]}" --input in/s0.png in/s3.png more/s.1.png --output more/s.png
refused "--output DIR holding the inputs" "--output in holds the input in/s0.png" "$bin" "${run[@]}" --input in/s0.png in/s1.png --output in
refused "--save-output = an .npy input" "--save-output" bash -c '"$0" "$@"; exit $?' "$bin" "${run[@]}" --input in/s0.png --save-output in/s0.png
refused "--input DIR --output DIR" "holds the input" "$bin" "${run[@]}" --input in --output "$tmp/in/"
refused "--input DIR --output DIR, yolo-txt" "holds the input" "$bin" "${run[@]}" --input in --format yolo-txt --output ./in
ls "$tmp"/in/s*.png >list.txt
refused "--input-list --output the images' folder" "holds the input" "$bin" "${run[@]}" --input-list list.txt --output in
refused "build -o the cfg" "-o small.cfg is the input" "$bin" build --device cpu --cfg small.cfg -o small.cfg
refused "plan --dot the cfg" "--dot ./small.cfg is the input small.cfg" "$bin" plan --cfg small.cfg --dot ./small.cfg
[ -s small.cfg ] && grep -q '^\[region\]' small.cfg; check "the cfg intact" $?
# Not refused: a subfolder of the input folder, a new folder.
"$bin" "${run[@]}" --input in --output in/drawn >/dev/null 2>&1
rc=$?
[ $rc -eq 0 ] && [ -s in/drawn/s0.png ]; check "--input DIR --output DIR/sub: runs (got $rc)" $?

# ---- WebP and TIFF: the PNG's boxes where the build decodes them, else a line naming the package ----
"$bin" --device cpu --model shapes --input "$src/data/shapes-val/000.png" --format csv --no-output 2>/dev/null | tail -n +2 | cut -d, -f2- >png.csv
[ -s png.csv ]; check "the PNG's boxes" $?
for f in webp:WebP:libwebp tiff:TIFF:libtiff; do
  IFS=: read -r ext format lib <<<"$f"
  "$bin" --device cpu --model shapes --input "$src/tests/data/formats/shapes000.$ext" --format csv --no-output >x.csv 2>x.err
  rc=$?
  if [ $rc -eq 0 ]; then
    tail -n +2 x.csv | cut -d, -f2- | cmp -s - png.csv; check "$format: the PNG's boxes exactly" $?
  else
    [ $rc -eq 3 ] && grep -q "$format images are not accepted (JPEG, PNG, BMP): this graphrun was built without $lib (install $lib-dev" x.err
    check "$format: built without $lib: one line naming the package, exit 3 (got $rc)" $?
  fi
done

echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
