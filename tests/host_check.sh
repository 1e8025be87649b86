#!/usr/bin/env bash
# The host-code check CI runs first: every C file of the tree compiled the way the CI build
# compiles it (gcc, Release = -O3, -DGR_WERROR=ON, the CUDA build's macros where a CUDA compiler
# is found), plus the nvJPEG code path (GR_HAVE_NVJPEG=1) against tests/support/nvjpeg/nvjpeg.h
# when the toolkit has no nvjpeg.h, as on CI's machine. Some warnings (-Wstringop-truncation,
# -Wmaybe-uninitialized, -Warray-bounds) only appear at -O3 with those macros, which is how a
# submission once failed CI after 40 minutes; this takes about a minute and compiles nothing twice.
#   tests/host_check.sh [BUILD_DIR]     (default build-hostcheck/; needs the quickstart's packages:
#                                        ./quickstart --install-only)
# Exit status: 0 clean, 1 a file failed (its first errors printed), 2 could not configure.
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-hostcheck}
cuda=OFF
command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] && cuda=ON
mkdir -p "$dir"
if ! cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGR_WERROR=ON -DGR_ENABLE_CUDA=$cuda \
     -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >"$dir/configure.log" 2>&1; then
  echo "host_check: configure failed (see $dir/configure.log):"; tail -n 15 "$dir/configure.log"
  exit 2
fi
# Headers the build generates before compiling (protoc-c's C code of onnx.proto, which
# models/onnx/ includes): made first, as the build would.
if grep -q 'onnx_gen/onnx.pb-c.h' "$dir/build.ninja" 2>/dev/null &&
   ! cmake --build "$dir" --target onnx_gen/onnx.pb-c.h >"$dir/generate.log" 2>&1; then
  echo "host_check: generating the ONNX code failed (see $dir/generate.log):"; tail -n 15 "$dir/generate.log"
  exit 2
fi
extra=()
if [ $cuda = ON ]; then
  nvjpeg_dir=$(sed -n 's/^GR_NVJPEG_INCLUDE:PATH=//p' "$dir/CMakeCache.txt")
  if [ -z "$nvjpeg_dir" ] || [ ! -f "$nvjpeg_dir/nvjpeg.h" ]; then
    extra=(-DGR_HAVE_NVJPEG=1 -I"$PWD/tests/support/nvjpeg")
  fi
fi
# One line per C file: its directory, then its compile command with the object sent to /dev/null.
python3 - "$dir/compile_commands.json" "${extra[@]}" >"$dir/host_check.cmds" <<'PY'
import json, os, shlex, sys
extra = sys.argv[2:]
seen = set()
for e in json.load(open(sys.argv[1])):
    # Sources only: files the build generates (the embedded cfgs) are data, made later.
    if not e["file"].endswith(".c") or e["file"] in seen or not os.path.exists(e["file"]):
        continue
    seen.add(e["file"])
    args = shlex.split(e["command"]) if "command" in e else list(e["arguments"])
    if "-o" in args:
        i = args.index("-o")
        args[i + 1] = "/dev/null"
    args[1:1] = extra  # before the sources, after the compiler
    print(e["directory"] + "\t" + e["file"] + "\t" + " ".join(shlex.quote(a) for a in args))
PY
n=$(wc -l <"$dir/host_check.cmds")
t0=$(date +%s)
rm -rf "$dir/host_check.fail"; mkdir -p "$dir/host_check.fail"
export fail_dir=$PWD/$dir/host_check.fail
tr '\n' '\0' <"$dir/host_check.cmds" | xargs -0 -P "$(nproc)" -n 1 bash -c '
  IFS=$'"'"'\t'"'"' read -r d f cmd <<<"$1"
  out=$(cd "$d" && eval "$cmd" 2>&1) || { printf "%s\n" "$out" >"$fail_dir/$(echo "$f" | tr / _).log"; echo "host_check: FAILED $f"; }' _
failed=$(find "$dir/host_check.fail" -type f | wc -l)
macros="CUDA $cuda${extra:+, nvJPEG via tests/support/nvjpeg}"
if [ "$failed" -gt 0 ]; then
  for f in "$dir"/host_check.fail/*.log; do grep -m 6 -E 'error|warning' "$f"; done | head -n 40
  echo "host_check: $failed of $n C files fail at -O3 -Werror ($macros) in $(( $(date +%s) - t0 )) s"
  exit 1
fi
echo "host_check: $n C files clean at -O3 -Werror ($macros) in $(( $(date +%s) - t0 )) s"
