#!/usr/bin/env bash
# Install graphrun to a temporary prefix and use it as a user would: build examples/ with CMake
# (find_package(graphrun): graphrun::graphrun and graphrun::graphrun_static) and with pkg-config
# (`cc detect.c $(pkg-config --cflags --libs graphrun)`, run without LD_LIBRARY_PATH: the .pc's
# rpath), then run each build on the bundled photo and check the installed tree and that all three
# print the same detections.
#   tests/install_consumer.sh BUILD_DIR      (from the source root; CTest: install_consumer)
set -u
build=$(realpath "$1")
src=$(pwd)
source "$(dirname "$0")/lib/check.sh"
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1
check "cmake --install" $?
libdir=$(dirname "$(find "$prefix" -name libgraphrun.a | head -n 1)")
for f in include/graphrun/runtime.h bin/graphrun; do
  [ -f "$prefix/$f" ]; check "installed $f" $?
done
for f in libgraphrun.a libgraphrun.so pkgconfig/graphrun.pc cmake/graphrun/graphrunConfig.cmake; do
  [ -e "$libdir/$f" ]; check "installed lib/$f" $?
done
"$prefix/bin/graphrun" --version | grep -q '^graphrun [0-9]'; check "installed CLI runs" $?

# CMake consumer.
cmake -S "$src/examples" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  >"$tmp/cmake.log" 2>&1 && cmake --build "$tmp/cmake" >>"$tmp/cmake.log" 2>&1
check "CMake consumer builds (find_package)" $? || true
[ "$fails" -eq 0 ] || cat "$tmp/cmake.log"

# pkg-config consumer. graphrun.pc's paths are real ones: no PKG_CONFIG_SYSROOT_DIR for it (the
# GPU machine sets one for the packages it carries).
pc() { env -u PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" pkg-config "$@"; }
pc --modversion graphrun | grep -q '^[0-9]'
check "pkg-config --modversion graphrun" $?
# shellcheck disable=SC2046
cc -std=c11 -o "$tmp/detect_pc" "$src/examples/detect.c" $(pc --cflags --libs graphrun) >"$tmp/pc.log" 2>&1
check "pkg-config consumer builds" $? || cat "$tmp/pc.log"

# Each runs on the photo; the installed library reads nothing from the build tree.
"$tmp/cmake/detect" data/dog.jpg >"$tmp/shared.txt" 2>&1; check "CMake (shared) consumer runs" $?
"$tmp/cmake/detect_static" data/dog.jpg >"$tmp/static.txt" 2>&1; check "CMake (static) consumer runs" $?
# graphrun.pc's Libs carry the rpath: no LD_LIBRARY_PATH (cleared, so no caller's one helps).
env -u LD_LIBRARY_PATH "$tmp/detect_pc" data/dog.jpg >"$tmp/pc.txt" 2>&1
check "pkg-config consumer runs without LD_LIBRARY_PATH" $? || cat "$tmp/pc.txt"
# stb is compiled in: neither the .pc nor the shared library asks a user for it.
! pc --print-requires-private graphrun | grep -q stb; check "graphrun.pc does not require stb" $?
! readelf -d "$libdir/libgraphrun.so" | grep -q 'NEEDED.*libstb'
check "libgraphrun.so does not link libstb" $?
readelf -d "$prefix/bin/graphrun" | grep -Eq '(RPATH|RUNPATH).*\$ORIGIN/'
check "installed graphrun has an \$ORIGIN-relative RPATH" $?
ldd "$tmp/cmake/detect" | grep -q "$libdir/libgraphrun.so"; check "CMake consumer uses the installed .so" $?
# Same detections (the timing lines differ).
for f in static pc; do
  diff <(grep -v '^time' "$tmp/shared.txt") <(grep -v '^time' "$tmp/$f.txt") >/dev/null
  check "$f prints what shared prints" $?
done
grep -q 'data/dog.jpg on .*: [0-9]* detection' "$tmp/shared.txt"; check "detections printed" $? || cat "$tmp/shared.txt"

echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
