#!/usr/bin/env bash
# CLI: video input and output through FFmpeg (tools/video.c) on the CPU reference with a tiny
# network. The source video is made here, never downloaded: 12 frames of 320x240 panning over
# data/dog.jpg, encoded losslessly (FFV1 in .mkv) by tests/video/make_video.c, which also writes
# each frame as a PNG. Checked: the decoded frames equal the PNGs byte for byte; each frame's
# detections equal (exactly: same RGB bytes, same letterbox, same engine) those of its PNG run
# through the folder path; frame indices 0..11 and pts k/25 s; batch and thread counts change
# nothing; --output .mp4/.avi/.mkv probe back with 12 frames; truncated and damaged videos, a file
# that is no video, an absent camera and a bad --output give one line and the documented exit
# status, no crash. Without FFmpeg in the build: the one-line hint to enable it, then skipped.
# $1 = the graphrun binary (gr_make_video lies beside it).
set -u
bin=$1
src=$(pwd)
make_video="$(dirname "$bin")/gr_make_video"
source "$(dirname "$0")/lib/check.sh"

printf '[net]\nwidth=16\nheight=16\nchannels=3\n[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\nstride=1\npad=1\nactivation=leaky\n[maxpool]\nsize=2\nstride=2\n[convolutional]\nfilters=14\nsize=1\nstride=1\nactivation=linear\n[region]\nanchors=1.5,2.5,3,3\nclasses=2\ncoords=4\nnum=2\nsoftmax=1\n' >"$tmp/small.cfg"
run=(--device cpu --cfg "$tmp/small.cfg" --thresh 0.2)
mkdir "$tmp/png"

"$make_video" make "$src/data/dog.jpg" "$tmp/clip.mkv" 12 320 240 "$tmp/png" 2>"$tmp/make.err"
rc=$?
if [ $rc -eq 77 ]; then
  "$bin" "${run[@]}" --input "$tmp/clip.mp4" >/dev/null 2>"$tmp/off.err"
  rc=$?
  grep -q "built without FFmpeg: install libavformat-dev .* and re-run cmake" "$tmp/off.err" &&
    [ $rc -eq 3 ] && [ "$(wc -l <"$tmp/off.err")" -eq 1 ]
  check "without FFmpeg: one line saying how to enable video, exit 3 (got $rc)" $?
  echo "$pass passed, $fails failed; no video in this build: the rest skipped"
  [ $fails -eq 0 ] || exit 1
  exit 77
fi
[ $rc -eq 0 ]; check "the source video is made (FFV1)" $?
[ $rc -eq 0 ] || cat "$tmp/make.err"
"$make_video" check "$tmp/clip.mkv" "$tmp/png" >/dev/null
check "decoded frames == the PNGs, byte for byte (lossless round trip, RGB out of swscale)" $?

# The video, and its frames as images through the folder path.
"$bin" "${run[@]}" --input "$tmp/clip.mkv" --batch 3 --threads 2 >"$tmp/v.jsonl" 2>"$tmp/v.err"
rc=$?
[ $rc -eq 0 ]; check "video run exits 0 (got $rc)" $?
[ $rc -eq 0 ] || cat "$tmp/v.err"
"$bin" "${run[@]}" --input "$tmp/png" --batch 1 >"$tmp/f.jsonl" 2>/dev/null
python3 - "$tmp/v.jsonl" "$tmp/f.jsonl" <<'PY'
import json, sys
video = [json.loads(l) for l in open(sys.argv[1])]
frames = [json.loads(l) for l in open(sys.argv[2])]
assert len(video) == 12 and len(frames) == 12, (len(video), len(frames))
for k, (v, f) in enumerate(zip(video, frames)):
    assert v["input"].endswith("clip.mkv") and v["frame"] == k, v
    assert abs(v["time"] - k / 25) < 1e-6, (k, v["time"])
    assert (v["width"], v["height"]) == (320, 240), v
    assert v["detections"] == f["detections"], (k, v["detections"][:2], f["detections"][:2])
assert sum(len(v["detections"]) for v in video) > 0, "no detections: the comparison is empty"
PY
check "each frame's detections == its PNG's (exact), frame k at pts k/25 s, 320x240" $?
grep -q "12 frames in .* frames/s from the video to detections" "$tmp/v.err"
check "throughput on stderr" $?
grep -q "latency per frame from decoded to its line written: p50 .* ms, p99 .* ms" "$tmp/v.err"
check "latency p50/p99 on stderr" $?
grep -q "main thread .* waiting for decoded batches" "$tmp/v.err"; check "the time split" $?

for args in "--batch 1 --threads 1" "--batch 5 --threads 4"; do
  # shellcheck disable=SC2086
  "$bin" "${run[@]}" --input "$tmp/clip.mkv" $args >"$tmp/o.jsonl" 2>/dev/null
  cmp -s "$tmp/v.jsonl" "$tmp/o.jsonl"; check "$args: the same lines" $?
done

# A name without a video extension is probed; --input-type overrides the guess.
cp "$tmp/clip.mkv" "$tmp/clip.bin"
"$bin" "${run[@]}" --input "$tmp/clip.bin" 2>/dev/null | sed 's/clip.bin/clip.mkv/' |
  cmp -s - "$tmp/v.jsonl"
check "no extension: FFmpeg's probe finds the video" $?
"$bin" "${run[@]}" --input "$tmp/clip.bin" --input-type video 2>/dev/null | wc -l | grep -qx 12
check "--input-type video" $?
"$bin" "${run[@]}" --input "$tmp/clip.mkv" --input-type image --no-output >/dev/null 2>"$tmp/e.err"
[ $? -eq 3 ] && grep -q "clip.mkv" "$tmp/e.err"
check "--input-type image: read as an image (fails)" $?

# --output: the annotated video, probed back.
for out in out.mp4 out.avi out.mkv; do
  "$bin" "${run[@]}" --input "$tmp/clip.mkv" --batch 4 --output "$tmp/$out" >/dev/null \
    2>"$tmp/w.err"
  rc=$?
  probe=$("$make_video" probe "$tmp/$out" 2>&1 | head -1)
  [ $rc -eq 0 ] && grep -q "wrote .*$out (12 frames, " "$tmp/w.err" &&
    [ "$probe" = "frames 12 size 320x240 fps 25.000" ]
  check "--output $out: 12 frames of 320x240 at 25 frames/s (got rc $rc, '$probe')" $?
done

# Damage: one line on stderr naming the file (and the frame), the documented status, no crash.
one_error() { # one_error NAME EXPECTED_EXIT PATTERN ARGS...: exit, and the only non-notice line
  local name=$1 want=$2 pattern=$3
  shift 3
  "$bin" "${run[@]}" "$@" >"$tmp/x.out" 2>"$tmp/x.err"
  local rc=$?
  local errors
  errors=$(grep -v -E '^graphrun( 0|: (weights|device|[^ ]*: [0-9.]+ frames/s;))' "$tmp/x.err")
  [ $rc -eq "$want" ] && [ "$(printf '%s\n' "$errors" | wc -l)" -eq 1 ] &&
    printf "%s\n" "$errors" | grep -q -E -e "$pattern"
  check "$name: exit $want, one line /$pattern/ (got $rc: $errors)" $?
}
size=$(stat -c %s "$tmp/clip.mkv")
head -c $((size / 2)) "$tmp/clip.mkv" >"$tmp/cut.mkv"
one_error "truncated video" 3 "cut.mkv: frame [0-9]+: the file ends at .* \(truncated\?\)" \
  --input "$tmp/cut.mkv"
python3 - "$tmp/clip.mkv" "$tmp/bad.mkv" <<'PY'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
for i in range(len(data) // 2, len(data) // 2 + 3000):
    data[i] ^= 0x5A
open(sys.argv[2], "wb").write(data)
PY
one_error "damaged frame (FFV1 slice CRC)" 3 "bad.mkv: frame [0-9]+: damaged: slice CRC mismatch" \
  --input "$tmp/bad.mkv"
[ "$(wc -l <"$tmp/x.out")" -ge 1 ]; check "the frames before the damage are reported" $?
echo "not a video" >"$tmp/text.mp4"
one_error "not a video" 3 "text.mp4: cannot open video: Invalid data found" --input "$tmp/text.mp4"
one_error "absent file" 3 "nothing.mkv: cannot open video: No such file or directory" \
  --input "$tmp/nothing.mkv"
one_error "absent camera" 3 "^graphrun: /dev/video9: no such camera: No such file or directory" \
  --input /dev/video9
one_error "--output not a video" 2 "--output .*x.png: a video's boxes are drawn into a video file" \
  --input "$tmp/clip.mkv" --output "$tmp/x.png"
[ ! -e "$tmp/x.png" ]; check "no file written for a refused --output" $?
one_error "--runs with a video" 2 "--runs applies to images, not to a video" \
  --input "$tmp/clip.mkv" --runs 3
one_error "two inputs" 2 "a video is the only input of a run" --input "$tmp/clip.mkv" \
  --input "$src/data/dog.jpg"
one_error "unknown --input-type" 2 "--input-type 'film' is not auto, image or video" \
  --input "$tmp/clip.mkv" --input-type film
one_error "--output into a missing folder" 3 "nowhere/out.mp4: cannot write: No such file" \
  --input "$tmp/clip.mkv" --output "$tmp/nowhere/out.mp4"

# --format text and yolo-txt for a video (they were refused): a text block per frame, a label file
# per frame (<stem>_<frame>.txt), each with the frame's boxes of the JSON Lines run.
"$bin" "${run[@]}" --input "$tmp/clip.mkv" --format text >"$tmp/v.txt" 2>/dev/null
rc=$?
"$bin" "${run[@]}" --input "$tmp/clip.mkv" --format yolo-txt --output "$tmp/labels" >"$tmp/y.out" 2>/dev/null
rc2=$?
python3 - "$tmp/v.jsonl" "$tmp/v.txt" "$tmp/labels" <<'PY'
import json, os, re, sys
video = [json.loads(l) for l in open(sys.argv[1])]
blocks = re.split(r"(?m)^(?=\S)", open(sys.argv[2]).read())
blocks = [b for b in blocks if b]
assert len(blocks) == 12, len(blocks)
for k, (v, b) in enumerate(zip(video, blocks)):
    head, *boxes = b.rstrip("\n").split("\n")
    n = len(v["detections"])
    want = "%s frame %d (%.6f s): %d detection%s" % (v["input"], k, v["time"], n, "" if n == 1 else "s")
    assert head == want, (head, want)
    assert len(boxes) == n and all(l.startswith("  ") for l in boxes), (k, boxes[:2])
    labels = open(os.path.join(sys.argv[3], "clip_%06d.txt" % k)).read().splitlines()
    assert len(labels) == n, (k, len(labels), n)
assert len(os.listdir(sys.argv[3])) == 12
PY
[ $? -eq 0 ] && [ $rc -eq 0 ] && [ $rc2 -eq 0 ] && [ ! -s "$tmp/y.out" ]
check "--format text (a block per frame) and yolo-txt (a label file per frame) for a video (got $rc, $rc2)" $?

# An --output that is the input (another spelling, a symlink) is refused; the input stays whole.
sum_before=$(md5sum <"$tmp/clip.mkv")
ln -s "$tmp/clip.mkv" "$tmp/same.mkv"
one_error "--output is the input" 2 "--output .*/\./clip.mkv is the input .*clip.mkv" \
  --input "$tmp/clip.mkv" --output "$tmp/./clip.mkv"
one_error "--output is a symlink to the input" 2 "--output .*same.mkv is the input" \
  --input "$tmp/clip.mkv" --output "$tmp/same.mkv"
[ "$(md5sum <"$tmp/clip.mkv")" = "$sum_before" ]; check "the input video intact" $?

# A network stream that stalls: a listener on 127.0.0.1 that accepts and never answers (it ends by
# itself after 30 s). --io-timeout 1 gives up after a second with one line, exit 3 (it waited for
# ever before); the whole run is bounded by timeout(1) so a hang fails instead of sticking.
python3 - "$tmp/port" <<'PY' &
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(4)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
s.settimeout(1.0)
held, end = [], time.time() + 30
while time.time() < end:
    try:
        held.append(s.accept()[0])  # accepted, never answered
    except socket.timeout:
        pass
PY
listener=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
port=$(cat "$tmp/port" 2>/dev/null)
start=$(date +%s)
timeout 20 "$bin" "${run[@]}" --input "http://127.0.0.1:$port/live.mjpeg" --io-timeout 1 >"$tmp/s.out" 2>"$tmp/s.err"
rc=$?
took=$(( $(date +%s) - start ))
errors=$(grep -v -E '^graphrun( 0|: (weights|device))' "$tmp/s.err")
[ -n "$port" ] && [ $rc -eq 3 ] && [ $took -le 10 ] && [ "$(printf '%s\n' "$errors" | wc -l)" -eq 1 ] &&
  printf '%s\n' "$errors" | grep -q "^graphrun: http://127.0.0.1:$port/live.mjpeg: cannot open video: no data for 1 s (the stream stalled"
check "a stalled stream: --io-timeout 1 ends it with one line, exit 3 (got $rc after $took s: $errors)" $?
"$bin" "${run[@]}" --input "$tmp/clip.mkv" --io-timeout -1 >/dev/null 2>"$tmp/t.err"
rc=$?
[ $rc -eq 2 ] && grep -q "^graphrun: --io-timeout '-1' is not a number of seconds" "$tmp/t.err"
check "--io-timeout -1: refused, exit 2 (got $rc)" $?
kill "$listener" 2>/dev/null
wait "$listener" 2>/dev/null

echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
