#!/usr/bin/env bash
# CLI folder mode with files that are not images among good ones: a FIFO (it hung the run before:
# no line at all, even for the good files), a directory, a symlink to /dev/zero (read 256 MiB per
# worker before being refused), a truncated JPEG and a garbage file, each under an image's name.
# Each bad one gets one error line naming it, each good one its detections, exit 3. Files of other
# image types are listed too (WebP and TIFF decoded where the build has them, HEIC an error line).
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
# Other image types: WebP and TIFF decode where the build has libwebp / libtiff (else each is an
# error line naming the package), HEIC is an error line naming its format; all are listed (they
# were skipped unseen), a .txt is not.
cp "$src/tests/data/formats/shapes000.webp" "$d/h_photo.webp"
cp "$src/tests/data/formats/shapes000.tiff" "$d/i_scan.tiff"
{ printf '\0\0\0\x18ftypheic\0\0\0\0mif1heic'; } >"$d/j_phone.HEIC"
echo "a label" >"$d/k_notes.txt"

# A hang is a failure, not a stuck test run.
timeout 60 "$bin" --device cpu --cfg "$tmp/small.cfg" --input "$d" --threads 2 >"$tmp/out.jsonl" 2>"$tmp/err"
rc=$?
[ $rc -eq 3 ]; check "exit 3: some files failed (got $rc)" $?
[ "$(wc -l <"$tmp/out.jsonl")" -eq 11 ]; check "one line per image file (11; not the .txt)" $?
line() { grep "\"input\": \"[^\"]*/$1\"" "$tmp/out.jsonl"; }
for good in a_good.png g_good.jpg z_good.png; do
  line $good | grep -q '"detections": \['; check "$good: its detections" $?
done
line b_fifo.jpg | grep -q '"error": "[^"]*b_fifo.jpg: not a regular file (a FIFO)"'; check "FIFO: its own error line" $?
line c_dir.jpg | grep -q '"error": "[^"]*c_dir.jpg: not a regular file (a directory)"'; check "directory: its own error line" $?
line d_zero.jpg | grep -q '"error": "[^"]*d_zero.jpg: not a regular file (a device)"'; check "/dev/zero symlink: refused from its stat" $?
line e_cut.jpg | grep -q '"error": "[^"]*e_cut.jpg: .*JPEG'; check "truncated JPEG: its own error line" $?
line f_garbage.png | grep -q '"error": "[^"]*f_garbage.png: '; check "garbage: its own error line" $?
failed=6
for f in h_photo.webp:WebP:libwebp i_scan.tiff:TIFF:libtiff; do
  IFS=: read -r name format lib <<<"$f"
  if line "$name" | grep -q '"width": 160, "height": 160, "detections"'; then
    check "$format: decoded ($lib in the build): its 160x160 record" 0
  else
    failed=$((failed + 1))
    line "$name" | grep -q "\"error\": \"[^\"]*$name: byte 0: $format images are not accepted (JPEG, PNG, BMP): this graphrun was built without $lib (install $lib-dev"
    check "$format: without $lib, an error line naming the package" $?
  fi
done
line j_phone.HEIC | grep -q '"error": "[^"]*j_phone.HEIC: byte 0: HEIF images are not accepted'; check "HEIC: its own error line" $?
grep -q "$failed failed" "$tmp/err"; check "summary: $failed failed" $?
# --output DIR: the WebP and TIFF drawn as PNG (the encoder writes PNG and JPEG), where decoded.
timeout 60 "$bin" --device cpu --cfg "$tmp/small.cfg" --input "$d" --threads 2 --output "$tmp/drawn" >/dev/null 2>"$tmp/drawn.err"
for f in h_photo.webp:h_photo i_scan.tiff:i_scan; do
  IFS=: read -r name stem <<<"$f"
  if line "$name" | grep -q '"width": 160'; then
    [ -s "$tmp/drawn/$stem.png" ] && ! grep -q "$stem" "$tmp/drawn.err"; check "$name drawn as $stem.png" $?
  fi
done
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
