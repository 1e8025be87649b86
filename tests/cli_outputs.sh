#!/usr/bin/env bash
# Fault injection on every output path of the CLI: stdout on a full device (/dev/full), a closed
# pipe, output files on a full device and under a path that cannot be a folder (a regular file
# used as a directory: blocks root too, unlike a read-only folder). Each must exit 3 (the I/O
# status, docs/errors.md) with one line saying what failed, never 0. $1 = the graphrun binary.
set -u
bin=$1
src=$(pwd)
source "$(dirname "$0")/lib/check.sh"

printf '[net]\nwidth=16\nheight=16\nchannels=3\n[convolutional]\nfilters=8\nsize=3\nstride=1\npad=1\nactivation=leaky\n[convolutional]\nfilters=14\nsize=1\nstride=1\nactivation=linear\n[region]\nanchors=1.5,2.5,3,3\nclasses=2\ncoords=4\nnum=2\nsoftmax=1\n' >"$tmp/small.cfg"
mkdir "$tmp/images"
for i in 1 2 3; do cp "$src/tests/fuzz/corpus/image/rgb8x6.png" "$tmp/images/$i.png"; done
run=(--device cpu --cfg "$tmp/small.cfg")
: >"$tmp/file"                 # a regular file: "$tmp/file/x" can never be created
ln -s /dev/full "$tmp/full.png"
ln -s /dev/full "$tmp/full.npy"
ln -s /dev/full "$tmp/full.dot"

# expect NAME PATTERN STDOUT CMD...: CMD with stdout to the file STDOUT exits 3 with PATTERN on
# stderr.
expect() {
  local name=$1 pattern=$2 out=$3
  shift 3
  "$@" >"$out" 2>"$tmp/err"
  local rc=$?
  [ $rc -eq 3 ] && grep -q -- "$pattern" "$tmp/err"
  check "$name: exit 3 with '$pattern' (got $rc)" $?
}

full="writing the results to stdout: No space left on device"
expect "folder > /dev/full" "$full" /dev/full "$bin" "${run[@]}" --input "$tmp/images"
expect "list > /dev/full" "$full" /dev/full "$bin" "${run[@]}" --input-list <(ls "$tmp"/images/*)
expect "--json > /dev/full" "$full" /dev/full "$bin" "${run[@]}" --no-output --json --input "$tmp/images/1.png"
expect "text > /dev/full" "$full" /dev/full "$bin" "${run[@]}" --no-output --input "$tmp/images/1.png"
expect "plan > /dev/full" "$full" /dev/full "$bin" plan --cfg "$tmp/small.cfg"
expect "plan --json > /dev/full" "$full" /dev/full "$bin" plan --cfg "$tmp/small.cfg" --json
expect "eval > /dev/full" "$full" /dev/full "$bin" eval --model shapes --images data/shapes-val --max-images 2 --device cpu --json
expect "--list-models > /dev/full" "$full" /dev/full "$bin" --list-models
expect "--help > /dev/full" "$full" /dev/full "$bin" plan --help

# Files "written" onto a full device through a link: every file graphrun writes replaces a regular
# file by rename (base/bytes.h gr_write_file_atomic), so a link to a device is refused by kind,
# before anything is written (a write error itself names the file the same way).
expect "--save-output on a full device" "full.npy: not a regular file (a character device)" /dev/null "$bin" "${run[@]}" --no-output --input "$tmp/images/1.png" --save-output "$tmp/full.npy"
expect "plan --dot on a full device" "full.dot: not a regular file (a character device)" /dev/null "$bin" plan --cfg "$tmp/small.cfg" --dot "$tmp/full.dot"
# gr_image_write (runtime/image/encode.c) checks its writes itself (stb's own file writer ignores
# fwrite/fclose failures: it printed "wrote" and exited 0).
expect "--output on a full device" "full.png: not a regular file (a character device)" /dev/null "$bin" "${run[@]}" --input "$tmp/images/1.png" --output "$tmp/full.png"
grep -q "wrote" "$tmp/err"; check "--output on a full device: no 'wrote' line" $((1 - $?))

# Files under a path that cannot be a folder.
expect "--output under a file" "file/out.png" /dev/null "$bin" "${run[@]}" --input "$tmp/images/1.png" --output "$tmp/file/out.png"
expect "--save-output under a file" "file/out.npy" /dev/null "$bin" "${run[@]}" --no-output --input "$tmp/images/1.png" --save-output "$tmp/file/out.npy"
expect "plan --svg under a file" "file/plan.svg" /dev/null "$bin" plan --cfg "$tmp/small.cfg" --svg "$tmp/file/plan.svg"

# A closed pipe: the reader is gone before graphrun writes (deterministic, unlike `| head -c1`);
# SIGPIPE is ignored, so the write fails with EPIPE: exit 3 and one line, not a silent death.
closed_pipe() { # closed_pipe ARGS...: runs graphrun with stdout a pipe whose read end is closed
  python3 -c 'import os,subprocess,sys
r, w = os.pipe(); os.close(r)
p = subprocess.run(sys.argv[1:], stdout=w, stderr=subprocess.PIPE)
sys.stderr.write(p.stderr.decode(errors="replace")); sys.exit(p.returncode if p.returncode >= 0 else 128 - p.returncode)' "$bin" "$@"
}
expect "folder | closed pipe" "stdout: Broken pipe" /dev/null closed_pipe "${run[@]}" --input "$tmp/images"
expect "--json | closed pipe" "stdout: Broken pipe" /dev/null closed_pipe "${run[@]}" --no-output --json --input "$tmp/images/1.png"
expect "plan | closed pipe" "stdout: Broken pipe" /dev/null closed_pipe plan --cfg "$tmp/small.cfg"
# The usual shape of it: `| head -c1` reads one byte and leaves; graphrun still ends with a status
# (3 if it wrote after head left, 0 if everything fit before), never killed by SIGPIPE (141).
"$bin" "${run[@]}" --input "$tmp/images" 2>/dev/null | head -c1 >/dev/null
rc=${PIPESTATUS[0]}
[ $rc -eq 0 ] || [ $rc -eq 3 ]; check "| head -c1: exit 0 or 3, not a signal (got $rc)" $?
echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
