#!/usr/bin/env bash
# CLI on a GPU: video through the GPU engine (frames converted to RGB, uint8-letterboxed straight
# into the pinned slot buffers, 4 runs in flight). Without a GPU: exit 77 (skipped); without FFmpeg
# in the build: exit 77. $1 = the graphrun binary (gr_make_video lies beside it).
#
# 1. Exactness: a lossless video (FFV1: the frames' exact RGB bytes) of 10 frames in batches of 4
#    gets, frame by frame, the detections of the same frames as PNGs streamed as a folder through
#    the same engine configuration. Same input bytes, same kernels (tactic search off): they should
#    agree exactly; the check allows prob +-0.01 and boxes +-1 pixel in case a kernel's reduction
#    order differs between two builds (split-K). A frame or slot mix-up gives a frame 7 px and 5 px
#    away, far outside that: each frame's boxes are compared with its own PNG's.
# 2. Throughput: 300 frames of 640x480 H.264 through YOLOv2-tiny fp16 in batches of 8, and at
#    batch 1 (latency); the frames/s, latency and time-split lines are printed (ctest -V shows
#    them). --output writes the annotated H.264 video, probed back: 300 frames.
set -u
bin=$1
src=$(pwd)
make_video="$(dirname "$bin")/gr_make_video"
source "$(dirname "$0")/lib/check.sh"

mkdir "$tmp/png"
"$make_video" make "$src/data/dog.jpg" "$tmp/clip.mkv" 10 416 320 "$tmp/png" 2>"$tmp/make.err"
rc=$?
if [ $rc -eq 77 ]; then
  echo "no video in this build (FFmpeg not found by cmake): skipped"
  exit 77
fi
[ $rc -eq 0 ]; check "the lossless source video is made" $?
run=(--device gpu --model yolo --prec fp16 --thresh 0.2 --no-tactic-search)

"$bin" "${run[@]}" --input "$tmp/clip.mkv" --batch 4 >"$tmp/v.jsonl" 2>"$tmp/v.err"
rc=$?
if [ $rc -eq 4 ]; then
  echo "no CUDA device visible: skipped ($(tail -1 "$tmp/v.err"))"
  exit 77
fi
[ $rc -eq 0 ]; check "video on the GPU exits 0 (got $rc)" $?
[ $rc -eq 0 ] || cat "$tmp/v.err"
"$bin" "${run[@]}" --input "$tmp/png" --batch 4 >"$tmp/f.jsonl" 2>/dev/null
python3 - "$tmp/v.jsonl" "$tmp/f.jsonl" <<'PY'
import json, sys
video = [json.loads(l) for l in open(sys.argv[1])]
frames = [json.loads(l) for l in open(sys.argv[2])]
assert len(video) == 10 and len(frames) == 10, (len(video), len(frames))
total = 0
for k, (v, f) in enumerate(zip(video, frames)):
    assert v["frame"] == k and abs(v["time"] - k / 25) < 1e-6, (k, v["frame"], v["time"])
    dv, df = v["detections"], f["detections"]
    assert len(dv) == len(df), f"frame {k}: {len(dv)} detections, its PNG {len(df)}"
    for a, b in zip(dv, df):
        assert a["class_id"] == b["class_id"] and abs(a["prob"] - b["prob"]) <= 0.01, (k, a, b)
        assert all(abs(a[c] - b[c]) <= 1.0 for c in ("left", "top", "right", "bottom")), (k, a, b)
    total += len(dv)
assert total > 0, "no detections at all: the comparison would be empty"
print(f"{total} detections over 10 frames match their PNGs")
PY
check "GPU: each frame's detections == its PNG's (prob +-0.01, box +-1 px)" $?

"$make_video" make-lossy "$src/data/dog.jpg" "$tmp/long.mp4" 300 640 480 2>"$tmp/make.err"
check "the 300-frame H.264 video is made" $?
"$bin" "${run[@]}" --input "$tmp/long.mp4" --batch 8 --output "$tmp/boxes.mp4" \
  >"$tmp/l.jsonl" 2>"$tmp/l.err"
rc=$?
[ $rc -eq 0 ] && [ "$(wc -l <"$tmp/l.jsonl")" -eq 300 ]
check "300 frames, one line each (rc $rc)" $?
probe=$("$make_video" probe "$tmp/boxes.mp4" 2>&1 | head -1)
[ "$probe" = "frames 300 size 640x480 fps 25.000" ]
check "--output boxes.mp4 probes back as 300 frames of 640x480 at 25 frames/s (got '$probe')" $?
echo "batch 8, with --output:"
grep -E "frames/s|latency|main thread|wrote" "$tmp/l.err"
"$bin" "${run[@]}" --input "$tmp/long.mp4" --batch 8 >/dev/null 2>"$tmp/n.err"
echo "batch 8, no --output:"
grep -E "frames/s|latency|main thread" "$tmp/n.err"
"$bin" "${run[@]}" --input "$tmp/long.mp4" --batch 1 >/dev/null 2>"$tmp/b1.err"
echo "batch 1:"
grep -E "frames/s|latency" "$tmp/b1.err"
grep -q "300 frames in .* frames/s from the video to detections" "$tmp/n.err"
check "throughput line" $?

echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
