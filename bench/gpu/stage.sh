#!/bin/bash
# Stage what a GPU run of the project needs into .gpu/ (git-ignored), so the device tool can carry it.
# Run from anywhere inside the project checkout:  bench/gpu/stage.sh
# Then call the device tool's `run` with carry [".gpu"] and a command such as:
#   bash .gpu/remote.sh                       # configure, build, ctest (GPU tests enabled)
#   bash .gpu/remote.sh -- ./build-gpu/graphrun bench --model yolo --prec int8
# The GPU machine has CUDA 13 (nvcc, cuBLAS, cuBLASLt), CMake, Ninja, compute-sanitizer and ncu, but no
# package registry: Check, subunit and stb travel from here as Debian packages unpacked into .gpu/sysroot.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(git rev-parse --show-toplevel)
cd "$root"
exclude=.git/info/exclude
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >>"$exclude"
grep -qx '/build-gpu/' "$exclude" 2>/dev/null || echo '/build-gpu/' >>"$exclude"
mkdir -p .gpu/debs .gpu/sysroot
pkgs="check libsubunit-dev libsubunit0 libstb-dev libstb0 libturbojpeg0-dev libturbojpeg0 libpng-dev libpng16-16 zlib1g-dev ${GPU_EXTRA_DEBS:-}"
missing=0
for p in $pkgs; do ls .gpu/debs/"${p}"_*.deb >/dev/null 2>&1 || missing=1; done
if [ $missing = 1 ]; then
  apt-get update -qq >/dev/null 2>&1 || true
  (cd .gpu/debs && apt-get download $pkgs >/dev/null)
fi
for f in .gpu/debs/*.deb; do dpkg -x "$f" .gpu/sysroot; done
cp "$here/remote.sh" .gpu/remote.sh
size=$(du -sm --exclude=.git . | cut -f1)
echo "staged .gpu/ ($(du -sh .gpu | cut -f1)); working tree about ${size} MiB of the 64 MiB that can travel."
echo 'next: device run, carry [".gpu"], command: bash .gpu/remote.sh [-- extra command]'
