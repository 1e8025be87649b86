#!/usr/bin/env bash
# A relocatable install: install to a temporary prefix, move the whole tree elsewhere, and use it
# from a working directory outside the source tree as a user would - the installed graphrun's
# default command (the bundled photo), --model shapes (its bundled weights), --model shapes
# --prec int8 (calibration on the bundled photos), a program built with pkg-config run without
# LD_LIBRARY_PATH, and `import graphrun` - then check that nothing installed names the source tree
# (no path compiled in: data is found relative to the program or library, gr_data_path).
#   tests/install_relocated.sh BUILD_DIR    (from the source root; CTest: install_relocated)
# Python: until `cmake --install` installs the package itself, the test copies python/graphrun
# beside the moved prefix and points PYTHONPATH and GRAPHRUN_LIBRARY at them (README, Install);
# when the prefix holds a graphrun package, that one is imported instead.
set -u
build=$(realpath "$1")
src=$(pwd)
source "$(dirname "$0")/lib/check.sh"
cmake --install "$build" --prefix "$tmp/first" >"$tmp/install.log" 2>&1
check "cmake --install" $?
mkdir -p "$tmp/elsewhere" "$tmp/cwd"
mv "$tmp/first" "$tmp/elsewhere/prefix"
prefix=$tmp/elsewhere/prefix
libdir=$(dirname "$(find "$prefix" -name 'libgraphrun.so' | head -n 1)")
[ -f "$prefix/share/graphrun/dog.jpg" ] && [ -f "$prefix/share/graphrun/shapes.weights" ] &&
  [ -d "$prefix/share/graphrun/shapes-calib" ]
check "data installed in share/graphrun" $?

# Nothing installed names the source tree (its data, its build): strings of every program and
# library. GR_ASSERT's __FILE__ is made relative (-fmacro-prefix-map).
for f in "$prefix/bin/graphrun" "$libdir"/libgraphrun.so.* "$libdir/libgraphrun.a"; do
  ! strings "$f" | grep -qF "$src"; check "$(basename "$f") does not name the source tree $src" $?
done

cd "$tmp/cwd" || exit 1
gr=$prefix/bin/graphrun
run() { # run NAME ARGS...: the installed CLI from elsewhere, no LD_LIBRARY_PATH
  local name=$1; shift
  env -u LD_LIBRARY_PATH "$gr" --no-output "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  check "$name" $rc
  [ $rc = 0 ] || { echo "  graphrun $*: exit $rc"; head -n 5 "$tmp/err"; }
}
run "default command (the bundled photo)"
if grep -q "^$prefix/share/graphrun/dog.jpg: [0-9]* detection" "$tmp/out"; then
  check "the default input is the moved prefix's dog.jpg" 0
else
  check "the default input is the moved prefix's dog.jpg" 1; head -n 3 "$tmp/out"
fi
run "--model shapes (bundled weights)" --model shapes
! grep -q SYNTHETIC "$tmp/err"; check "--model shapes loaded its trained weights" $?
run "--model shapes --prec int8 (calibration on the bundled photos)" --model shapes --prec int8
grep -q "calibrat" "$tmp/err"; check "--prec int8 calibrated" $? 

# A program built with pkg-config runs without LD_LIBRARY_PATH (graphrun.pc's rpath).
pc() { env -u PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config "$@"; }
# shellcheck disable=SC2046
cc -std=c11 -o "$tmp/detect_pc" "$src/examples/detect.c" $(pc --cflags --libs graphrun) \
  >"$tmp/cc.log" 2>&1
check "pkg-config build against the moved prefix" $?
env -u LD_LIBRARY_PATH "$tmp/detect_pc" "$prefix/share/graphrun/dog.jpg" >"$tmp/pc.txt" 2>&1
check "the pkg-config program runs without LD_LIBRARY_PATH" $?
grep -q 'detections' "$tmp/pc.txt" || cat "$tmp/pc.txt"
used=$(env -u LD_LIBRARY_PATH ldd "$tmp/detect_pc" | awk '$1 ~ /^libgraphrun\.so/ {print $3}')
[ -n "$used" ] && [ "$(realpath "$used")" = "$(realpath "$libdir"/libgraphrun.so)" ]
check "it uses the moved prefix's libgraphrun.so" $?

# Python: the package against the moved library, from elsewhere.
py=$(command -v python3 || true)
if [ -n "$py" ] && "$py" -c "import numpy" 2>/dev/null; then
  pkg=$(find "$prefix" -path '*/graphrun/__init__.py' | head -n 1)
  if [ -n "$pkg" ]; then
    pypath=$(dirname "$(dirname "$pkg")"); pylib=""
  else
    mkdir -p "$tmp/pylib" && cp -r "$src/python/graphrun" "$tmp/pylib/"
    pypath=$tmp/pylib; pylib=$libdir/libgraphrun.so
  fi
  env -u LD_LIBRARY_PATH PYTHONPATH="$pypath" ${pylib:+GRAPHRUN_LIBRARY=$pylib} "$py" -c '
import graphrun, sys
assert graphrun.library_path.startswith(sys.argv[1]), graphrun.library_path
graphrun.Model("shapes")  # its bundled weights, found relative to the moved library
print("ok")' "$prefix" >"$tmp/py.txt" 2>&1
  grep -qx ok "$tmp/py.txt"; check "import graphrun from the moved prefix" $?
  grep -qx ok "$tmp/py.txt" || cat "$tmp/py.txt"
else
  echo "install_relocated: no python3 with numpy: the Python step is skipped"
fi

echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
