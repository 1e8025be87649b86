#!/usr/bin/env bash
# Bad-input table: run the graphrun CLI on every kind of bad input and check what the user sees.
#   tests/bad_inputs.sh BIN        (from the source root; BIN = the built graphrun)
# For each case it checks: the documented exit code, no crash (exit < 128), and exactly one error
# line on stderr that names the file and the line/key/byte offset (or the option) - besides the
# CLI's documented notices ("graphrun 0.1.0: model ...", "weights: SYNTHETIC", "no CUDA device").
# stdout is a Markdown table of every case (docs/errors.md pastes it); failures go to stderr and
# make the exit status 1. The inputs are made in a scratch directory that the commands run in, so
# the messages (and the table) do not depend on where the script runs.
set -u
bin=$(realpath "$1")
src=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 2
fails=0
total=0

echo "| input | command | exit | what the user sees (stderr) |"
echo "|---|---|---|---|"

# run_case DESCRIPTION EXIT-CODE PATTERN -- ARGS...   (PATTERN: extended regex for the error line)
run_case() {
  local what=$1 code=$2 pattern=$3
  shift 4
  total=$((total + 1))
  # A hang (e.g. on a FIFO) is a failure too: 124 from timeout.
  timeout 120 "$bin" "$@" >out.txt 2>err.txt </dev/null
  local rc=$?
  [ "$rc" -eq 124 ] && rc=200
  # The error line(s): stderr minus the documented notices.
  grep -vE '^graphrun [0-9.]+: model |^graphrun: weights: SYNTHETIC|^graphrun: no CUDA device visible|^graphrun: device ' \
    err.txt >errors.txt
  local n
  n=$(wc -l <errors.txt)
  local msg
  msg=$(head -n 1 errors.txt)
  local problem=""
  [ "$rc" -ge 128 ] && problem="crashed (exit $rc)"
  [ -z "$problem" ] && [ "$rc" -ne "$code" ] && problem="exit $rc, documented $code"
  [ -z "$problem" ] && [ "$n" -ne 1 ] && problem="$n error lines on stderr"
  [ -z "$problem" ] && ! grep -qE -- "$pattern" errors.txt && problem="message lacks /$pattern/"
  if [ -n "$problem" ]; then
    fails=$((fails + 1))
    { echo "FAIL: $what: $problem"; sed 's/^/    stderr: /' err.txt; } >&2
  fi
  # Arguments shown as typed; long ones abbreviated so the table stays readable.
  local shown="" a
  for a in "$@"; do
    a=${a//$'\n'/\\n}
    [ ${#a} -gt 40 ] && a="${a:0:37}..."
    shown+=" $a"
  done
  msg=${msg//|/\\|}
  printf '| %s | `graphrun%s` | %d | `%s` |\n' "$what" "$shown" "$rc" "$msg"
}

# A tiny valid image as the default input: the cases are about the other file, and decoding the
# bundled photo for each of them would only slow the sanitizer builds down.
cp "$src/tests/fuzz/corpus/image/rgb8x6.png" ok.png
cpu=(--device cpu --no-output --input ok.png)
cpu_own_input=(--device cpu --no-output)

# ---- malformed cfgs: every file in tests/data/cfg that must fail -----------------------------------
mkdir cfg
for f in "$src"/tests/data/cfg/*.cfg; do
  name=$(basename "$f")
  [ "$name" = valid_spellings.cfg ] && continue
  cp "$f" "cfg/$name"
  run_case "cfg: ${name%.cfg}" 3 "cfg/$name:[0-9]+: " -- "${cpu[@]}" --cfg "cfg/$name"
done
printf '[net]\nwidth=65536\nheight=65536\nchannels=3\n[convolutional]\nfilters=1024\nsize=3\n' >cfg/input_65536x65536.cfg
run_case "cfg: 65536x65536 input" 3 "input_65536x65536.cfg:1: \[net\] input 3x65536x65536 is too large" -- "${cpu[@]}" --cfg cfg/input_65536x65536.cfg
{ printf '[net]\nwidth=1\nheight=1\nchannels=16384\n'; for _ in 1 2 3 4 5 6 7 8 9; do printf '[convolutional]\nfilters=16384\nsize=1\n'; done; } >cfg/weights_8gib.cfg
run_case "cfg: 8 GiB of weights" 3 "weights_8gib.cfg:26: .*brings the network to [0-9]+ weights" -- "${cpu[@]}" --cfg cfg/weights_8gib.cfg
head -c $((17 * 1024 * 1024)) /dev/zero | tr '\0' '#' >cfg/17mib.cfg
run_case "cfg: 17 MiB file" 3 "17mib.cfg: [0-9]+ bytes is larger than the [0-9]+-byte cfg file limit" -- "${cpu[@]}" --cfg cfg/17mib.cfg
run_case "cfg: missing file" 3 "cfg/missing.cfg: cannot open cfg file: No such file" -- "${cpu[@]}" --cfg cfg/missing.cfg
run_case "cfg: a directory" 3 "cfg: not a regular file \(a directory\)" -- "${cpu[@]}" --cfg cfg
run_case "cfg: /dev/zero" 3 "/dev/zero: not a regular file \(a character device\)" -- "${cpu[@]}" --cfg /dev/zero

# ---- weights: for a small fixed cfg whose exact size is 656 bytes (header 20 + 159 floats) ----------
printf '[net]\nwidth=8\nheight=8\nchannels=3\n[convolutional]\nbatch_normalize=1\nfilters=4\nsize=3\nstride=1\npad=1\nactivation=leaky\n[maxpool]\nsize=2\nstride=2\n[convolutional]\nfilters=7\nsize=1\nstride=1\nactivation=linear\n[region]\nanchors=1.5,2.5\nclasses=2\ncoords=4\nnum=1\nsoftmax=1\n' >small.cfg
{ printf '\0\0\0\0\2\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0'; head -c 636 /dev/zero; } >ok.weights
head -c 400 ok.weights >truncated.weights
{ cat ok.weights; printf '\0\0\0\0'; } >oversized.weights
{ printf '\x88\x13\0\0\2\0\0\0\0\0\0\0'; head -c 644 /dev/zero; } >bad_version.weights
head -c 8 ok.weights >header_8_bytes.weights
: >empty.weights
head -c 656 /dev/zero | tr '\0' '\377' >garbage.weights
run_case "weights: truncated" 3 "truncated.weights: truncated: expected 656 bytes \(header 20 \+ 159 floats\), found 400" -- "${cpu[@]}" --cfg small.cfg --weights truncated.weights
run_case "weights: 4 bytes too many" 3 "oversized.weights: oversized: expected 656 bytes .*found 660" -- "${cpu[@]}" --cfg small.cfg --weights oversized.weights
run_case "weights: bad version" 3 "bad_version.weights: bad header at offset 0: version 5000.2.0" -- "${cpu[@]}" --cfg small.cfg --weights bad_version.weights
run_case "weights: 8-byte file" 3 "header_8_bytes.weights: truncated header: file is 8 bytes.*\(offset 0\)" -- "${cpu[@]}" --cfg small.cfg --weights header_8_bytes.weights
run_case "weights: empty file" 3 "empty.weights: truncated header: file is 0 bytes" -- "${cpu[@]}" --cfg small.cfg --weights empty.weights
run_case "weights: all 0xff bytes" 3 "garbage.weights: bad header at offset 0" -- "${cpu[@]}" --cfg small.cfg --weights garbage.weights
run_case "weights: for another net" 3 "ok.weights: truncated: expected [0-9]+ bytes" -- "${cpu[@]}" --model yolo --weights ok.weights
run_case "weights: missing file" 3 "missing.weights: cannot open weights file: No such file" -- "${cpu[@]}" --weights missing.weights
run_case "weights: a directory" 3 "cfg: not a regular file \(a directory\)" -- "${cpu[@]}" --weights cfg

# ---- images ------------------------------------------------------------------------------------
head -c 100 ok.png >truncated.png
head -c 3000 "$src/data/dog.jpg" >truncated.jpg
printf 'this is not an image\n' >text.jpg
: >empty.png
# 54-byte BMP header claiming 30000x30000 (9e8 pixels) and 70000x2 (a side over 65536).
bmp() { printf 'BM\0\0\0\0\0\0\0\0\x36\0\0\0\x28\0\0\0%b%b\1\0\x18\0' "$1" "$2"; head -c 24 /dev/zero; }
bmp '\x30\x75\0\0' '\x30\x75\0\0' >huge_30000x30000.bmp
bmp '\x70\x11\x01\0' '\x02\0\0\0' >wide_70000x2.bmp
run_case "image: truncated PNG" 3 "truncated.png: corrupt image" -- "${cpu_own_input[@]}" --input truncated.png
run_case "image: truncated JPEG" 3 "truncated.jpg: (not a readable|corrupt) image" -- "${cpu_own_input[@]}" --input truncated.jpg
run_case "image: text file" 3 "text.jpg: byte 0: not a JPEG, PNG or BMP image" -- "${cpu_own_input[@]}" --input text.jpg
run_case "image: empty file" 3 "empty.png: byte 0: not a JPEG, PNG or BMP image" -- "${cpu_own_input[@]}" --input empty.png
run_case "image: 30000x30000 header" 3 "huge_30000x30000.bmp: image is 30000x30000; the limit is 65536 per side and 268435456 pixels" -- "${cpu_own_input[@]}" --input huge_30000x30000.bmp
run_case "image: 70000x2 header" 3 "wide_70000x2.bmp: image is 70000x2" -- "${cpu_own_input[@]}" --input wide_70000x2.bmp
# A 2x2 BMP header whose pixel data is missing, and an 8-bit (paletted) one: not read here.
bmp '\x02\0\0\0' '\x02\0\0\0' >no_pixels_2x2.bmp
printf 'BM\0\0\0\0\0\0\0\0\x36\0\0\0\x28\0\0\0\x02\0\0\0\x02\0\0\0\1\0\x08\0' >paletted.bmp; head -c 40 /dev/zero >>paletted.bmp
run_case "image: BMP without its pixels" 3 "no_pixels_2x2.bmp: corrupt image: BMP pixel data at byte 54 needs 16 bytes, the file has 0" -- "${cpu_own_input[@]}" --input no_pixels_2x2.bmp
run_case "image: 8-bit BMP" 3 "paletted.bmp: byte 28: BMP with 8 bits per pixel, compression 0 \(only uncompressed 24- and 32-bit BMP is read\)" -- "${cpu_own_input[@]}" --input paletted.bmp
cp "$src/tests/fuzz/corpus/image/white1x1.gif" one_pixel.gif
run_case "image: GIF (refused format)" 3 "one_pixel.gif: byte 0: GIF images are not accepted \(JPEG, PNG, BMP\)" -- "${cpu_own_input[@]}" --input one_pixel.gif
cp "$src/tests/data/regress/image/jpeg_huffman_table_over_256_codes.jpg" bad_huffman.jpg
run_case "image: JPEG Huffman table > 256 codes" 3 "bad_huffman.jpg: not a readable image: JPEG: Bogus Huffman table definition" -- "${cpu_own_input[@]}" --input bad_huffman.jpg
cp "$src/tests/data/regress/image/pgm_16bit_truncated_segv.pgm" short_16bit.pgm
run_case "image: 20-byte 16-bit PGM (crashed stb)" 3 "short_16bit.pgm: byte 0: PGM images are not accepted" -- "${cpu_own_input[@]}" --input short_16bit.pgm
run_case "image: missing file" 3 "missing.jpg: cannot open image file: No such file" -- "${cpu_own_input[@]}" --input missing.jpg
run_case "image: a directory without images" 3 "cfg: no images \(.jpg, .jpeg, .png, .bmp\)" -- "${cpu_own_input[@]}" --input cfg
run_case "image: second of two bad" 3 "text.jpg: byte 0: not a JPEG" -- "${cpu_own_input[@]}" --input ok.png --input text.jpg

# ---- .npy tensors -------------------------------------------------------------------------------
npy() { # npy FILE DICT DATA-BYTES [VERSION-BYTES]: a v1.0 header padded to 64 bytes, then zeros
  local dict=$2 n=${#2}
  local header_len=$(( ( (10 + n + 1 + 63) / 64) * 64 - 10 ))
  { printf '\x93NUMPY\x01\x00'; printf "\\x$(printf %02x $((header_len & 255)))\\x$(printf %02x $((header_len >> 8)))";
    printf '%s' "$dict"; printf '%*s' $((header_len - n - 1)) ''; printf '\n'; head -c "$3" /dev/zero; } >"$1"
}
npy shape_1x3x8x8.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 8, 8), }" 768
npy f8.npy "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 416, 416), }" 4153344
npy fortran.npy "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 416, 416), }" 2076672
npy two_pow_40.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048576), }" 16
npy truncated.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 416, 416), }" 1000
npy trailing.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 416, 416), }" 2076676
npy bad_dict.npy "{'descr': '<f4', 'fortran_order': False, 'shape': [3, 416, 416], }" 2076672
printf 'NUMPY not really' >bad_magic.npy
printf '\x93NUMPY\x01\x00\xff\xff{' >header_past_end.npy
run_case "npy: wrong shape for the net" 3 "shape_1x3x8x8.npy: shape does not match the network input 3x416x416" -- "${cpu_own_input[@]}" --input shape_1x3x8x8.npy
run_case "npy: float64" 3 "f8.npy: byte [0-9]+: npy dtype '<f8' is not float32" -- "${cpu_own_input[@]}" --input f8.npy
run_case "npy: Fortran order" 3 "fortran.npy: byte [0-9]+: npy fortran_order True is not supported" -- "${cpu_own_input[@]}" --input fortran.npy
run_case "npy: 2^40 elements" 3 "two_pow_40.npy: byte 70: npy shape has more than 2147483648 elements" -- "${cpu_own_input[@]}" --input two_pow_40.npy
run_case "npy: truncated data" 3 "truncated.npy: byte 128: truncated npy data: expected 2076672 bytes, found 1000" -- "${cpu_own_input[@]}" --input truncated.npy
run_case "npy: trailing bytes" 3 "trailing.npy: byte 2076800: trailing bytes" -- "${cpu_own_input[@]}" --input trailing.npy
run_case "npy: shape as a list" 3 "bad_dict.npy: byte 60: npy header: expected '\(' to open the shape" -- "${cpu_own_input[@]}" --input bad_dict.npy
run_case "npy: bad magic" 3 "bad_magic.npy: byte 0: bad magic" -- "${cpu_own_input[@]}" --input bad_magic.npy
run_case "npy: header past the end" 3 "header_past_end.npy: byte 10: npy header claims 65535 bytes" -- "${cpu_own_input[@]}" --input header_past_end.npy
run_case "npy: missing file" 3 "missing.npy: cannot open: No such file" -- "${cpu_own_input[@]}" --input missing.npy

# ---- options -----------------------------------------------------------------------------------
run_case "option: unknown" 2 "unknown option '--bogus'" -- --bogus
run_case "option: positional" 2 "unexpected argument 'dog.jpg'" -- dog.jpg
run_case "option: missing value" 2 "missing value for '--input'" -- --input
run_case "option: newline in name" 2 "unknown option '--bach4\?--bogus'" -- $'--bach4\n--bogus'
run_case "option: precision" 2 "--prec 'int4' is not fp32, fp16, int8 or auto" -- --prec int4
run_case "option: max-nrmse 2" 2 "--max-nrmse '2' is not a number in \[0, 1\]" -- --max-nrmse 2
run_case "option: on/off value" 2 "--tf32 'yes' is not on or off" -- --tf32 yes
run_case "option: --no- with a value" 2 "option '--no-tactic-search' takes no value" -- --no-tactic-search=on
run_case "option: toggle value" 2 "--split-k 'maybe' is not auto, on or off" -- --split-k=maybe
run_case "option: calib-max-images -1" 2 "--calib-max-images '-1' is not all or an integer in 0..2147483647" -- --calib-max-images -1
run_case "option: device" 2 "--device 'tpu' is not auto, cpu, gpu, gpu:all or gpu:N\\[,M...\\]" -- --device tpu
run_case "option: device list empty" 2 "--device 'gpu:': empty device list" -- --device gpu:
run_case "option: device list twice" 2 "--device 'gpu:0,1,0': gpu 0 given twice" -- --device gpu:0,1,0
run_case "option: device list entry empty" 2 "--device 'gpu:0,,1': entry 2 is empty" -- --device gpu:0,,1
run_case "option: device list not an ordinal" 2 "--device 'gpu:x': 'x' is not a CUDA device ordinal" -- --device gpu:x
run_case "option: device list for one image" 2 "--device gpu:0,1: several GPUs apply to --input DIR" -- --device gpu:0,1 --no-output --input ok.png
run_case "option: batch 0" 2 "--batch '0' is not an integer in 1..4096" -- --batch 0
run_case "option: batch 5000" 2 "--batch '5000' is not an integer in 1..4096" -- --batch 5000
run_case "option: batch 1e3" 2 "--batch '1e3' is not an integer" -- --batch=1e3
run_case "option: runs -1" 2 "--runs '-1' is not an integer in 1..1000000" -- --runs -1
run_case "option: thresh 2" 2 "--thresh '2' is not a number in \[0, 1\]" -- --thresh 2
run_case "option: nms nan" 2 "--nms 'nan' is not a number in \[0, 1\]" -- --nms nan
run_case "option: seed -1" 2 "--seed '-1' is not a non-negative integer" -- --seed -1
run_case "option: seed 2^64" 2 "--seed '18446744073709551616' is not a non-negative integer" -- --seed 18446744073709551616
many=(); for _ in $(seq 65); do many+=(--input ok.png); done
run_case "option: 65 inputs" 2 "too many --input files \(at most 64\)" -- "${many[@]}"
for f in "$src"/tests/data/regress/cli/*; do # fuzzer findings: argv split at NUL bytes
  [ -f "$f" ] || continue
  mapfile -d '' args <"$f"
  run_case "option: fuzz $(basename "$f")" 2 "." -- "${args[@]}"
done

# ---- absurd sizes and other failures --------------------------------------------------------------
run_case "batch 4096 of YOLOv2-tiny" 3 "yolov2-tiny-voc:[0-9]+: layer 0 \(conv\): output 16x416x416 x batch 4096 is more than 2147483648 elements" -- "${cpu[@]}" --batch 4096
run_case "names: missing file" 3 "missing.names: cannot open" -- "${cpu[@]}" --cfg small.cfg --names missing.names
run_case "output: unwritable" 3 "no_such_dir/out.png: cannot write the image \(a new file beside it\): No such file or directory" -- --device cpu --cfg small.cfg --input ok.png --output no_such_dir/out.png
run_case "output: unknown extension" 2 "out.gif: unknown image extension" -- --device cpu --cfg small.cfg --input ok.png --output out.gif
run_case "save-output: unwritable" 3 "no_such_dir/out.npy: cannot write the npy array \(a new file beside it\): No such file" -- --device cpu --cfg small.cfg --no-output --input ok.png --save-output no_such_dir/out.npy
if ! nvidia-smi -L >/dev/null 2>&1; then # only where no GPU is visible
  run_case "--device gpu without a GPU" 4 "(built without CUDA|no CUDA device|CUDA)" -- --device gpu --cfg small.cfg --no-output --input ok.png
fi

echo "$((total - fails)) passed, $fails failed (tests/bad_inputs.sh: $total bad inputs)" >&2
[ "$fails" -eq 0 ]
