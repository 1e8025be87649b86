#!/usr/bin/env bash
# CLI folder mode with files that are not images among good ones: a FIFO (it hung the run before:
# no line at all, even for the good files), a directory, a symlink to /dev/zero (read 256 MiB per
# worker before being refused), a truncated JPEG and a garbage file, each under an image's name.
# Each bad one gets one error line naming it, each good one its detections, exit 3.
# The folder pipeline (runtime/files.c) checks the stat of each file before its reader opens it,
# so none of these assertions depends on the library reader's own stat check (runtime/image, the
# image branch); with it they must still hold. $1 = the graphrun binary.
set -u
bin=$1
src=$(pwd)
source "$(dirname "$0")/lib/check.sh"

printf '[net]\nwidth=16\nheight=16\nchannels=3\n[convolutional]\nfilters=8\nsize=3\nstride=1\npad=1\nactivation=leaky\n[convolutional]\nfilters=14\nsize=1\nstride=1\nactivation=linear\n[region]\nanchors=1.5,2.5,3,3\nclasses=2\ncoords=4\nnum=2\nsoftmax=1\n' >"$tmp/small.cfg"
d=$tmp/images
mkdir "$d"
cp "$src/tests/fuzz/corpus/image/rgb8x6.png" "$d/a_good.png"
cp "$src/tests/fuzz/corpus/image/rgb8x6.jpg" "$d/g_good.jpg"
cp "$src/tests/fuzz/corpus/image/grey7x4.png" "$d/z_good.png"
mkfifo "$d/b_fifo.jpg"
mkdir "$d/c_dir.jpg"
ln -s /dev/zero "$d/d_zero.jpg"
head -c 3000 "$src/data/dog.jpg" >"$d/e_cut.jpg"
head -c 5000 /dev/urandom >"$d/f_garbage.png"

# A hang is a failure, not a stuck test run.
timeout 60 "$bin" --device cpu --cfg "$tmp/small.cfg" --input "$d" --threads 2 >"$tmp/out.jsonl" 2>"$tmp/err"
rc=$?
[ $rc -eq 3 ]; check "exit 3: some files failed (got $rc)" $?
[ "$(wc -l <"$tmp/out.jsonl")" -eq 8 ]; check "one line per file (8)" $?
line() { grep "\"input\": \"[^\"]*/$1\"" "$tmp/out.jsonl"; }
for good in a_good.png g_good.jpg z_good.png; do
  line $good | grep -q '"detections": \['; check "$good: its detections" $?
done
line b_fifo.jpg | grep -q '"error": "[^"]*b_fifo.jpg: not a regular file (a FIFO)"'; check "FIFO: its own error line" $?
line c_dir.jpg | grep -q '"error": "[^"]*c_dir.jpg: not a regular file (a directory)"'; check "directory: its own error line" $?
line d_zero.jpg | grep -q '"error": "[^"]*d_zero.jpg: not a regular file (a device)"'; check "/dev/zero symlink: refused from its stat" $?
line e_cut.jpg | grep -q '"error": "[^"]*e_cut.jpg: .*JPEG'; check "truncated JPEG: its own error line" $?
line f_garbage.png | grep -q '"error": "[^"]*f_garbage.png: '; check "garbage: its own error line" $?
grep -q "5 failed" "$tmp/err"; check "summary: 5 failed" $?
# A list of missing files costs no inference (runtime/files.c runs no batch whose every image
# failed): 400 of them with YOLOv2-tiny on the CPU (a second or so per run before) finish in
# seconds, each with its error line, exit 3.
for i in $(seq 1 400); do echo "$tmp/gone/$i.jpg"; done >"$tmp/missing.txt"
start=$(date +%s)
timeout 60 "$bin" --device cpu --model yolo --input-list "$tmp/missing.txt" --threads 2 >"$tmp/missing.jsonl" 2>"$tmp/missing.err"
rc=$?
took=$(( $(date +%s) - start ))
[ $rc -eq 3 ]; check "missing files: exit 3 (got $rc, after $took s)" $?
[ "$(grep -c '"error": "[^"]*/gone/[0-9]*.jpg: cannot open image file' "$tmp/missing.jsonl")" -eq 400 ]; check "missing files: each its error line" $?
[ $took -le 30 ]; check "missing files: no inference run ($took s)" $?
echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
