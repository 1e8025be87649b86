#!/usr/bin/env bash
# The Python package installed as users install it, then imported from outside the source tree
# with no GRAPHRUN_LIBRARY, and run on a bundled photo:
#   pip:   python3 -m venv --system-site-packages; pip install --no-build-isolation --no-deps
#          ./python (offline: the system's setuptools and NumPy), with libgraphrun.so copied into
#          the package first (found beside the package); without it, the error lists the places
#          tried; GRAPHRUN_LIBRARY still wins.
#   cmake: cmake --install into a prefix, the prefix moved elsewhere, then
#          PYTHONPATH=<prefix>/lib/python3/dist-packages: the library found in the moved prefix.
#   tests/python_install.sh pip|cmake BUILD_DIR PYTHON   (from the source root; CTest:
#   python_pip_install, python_cmake_install)
set -u
how=$1
build=$(realpath "$2")
py=${3:-}
src=$(pwd)
source "$(dirname "$0")/lib/check.sh"
[ -n "$py" ] || { echo "python_${how}_install: no python3 with numpy (apt-get install python3-numpy)"; exit 77; }
lib=$(realpath "$build/libgraphrun.so")
photo=$src/data/dog.jpg
unset GRAPHRUN_LIBRARY PYTHONPATH
cd "$tmp" || exit 1

# Runs the installed package on the photo (a small region network: quick on the CPU; the
# detections themselves are python_cpu's business); prints the library it loaded.
printf '[net]\nwidth=32\nheight=32\nchannels=3\n[convolutional]\nfilters=14\nsize=3\nstride=2\npad=1\nactivation=linear\n[region]\nanchors=1.5,2.5,3,3\nclasses=2\ncoords=4\nnum=2\n' >small.cfg
probe='import sys, warnings, graphrun
warnings.simplefilter("ignore", graphrun.SyntheticWeightsWarning)  # synthetic on purpose
r = graphrun.Model(cfg="small.cfg").build(device="cpu").detect(sys.argv[1], thresh=0.0)
assert r.xyxy.shape == (len(r), 4) and r.image.shape == (576, 768, 3), r
print(graphrun.library_path)'

if [ "$how" = pip ]; then
  for m in venv pip setuptools; do
    "$py" -c "import $m" 2>/dev/null ||
      { echo "python_pip_install: $py lacks $m (apt-get install python3-venv python3-pip python3-setuptools)"; exit 77; }
  done
  cp -r "$src/python" pkg && rm -rf pkg/build pkg/*.egg-info pkg/graphrun/__pycache__
  cp "$lib" pkg/graphrun/libgraphrun.so
  # The system's pip runs inside the venv (visible through --system-site-packages): the same pip
  # ensurepip would copy in, without the copy's time.
  "$py" -m venv --system-site-packages --without-pip venv >venv.log 2>&1
  check "venv --system-site-packages" $?
  # The package needs NumPy, and offline it can only be the system's: a NumPy that $py finds
  # through PYTHONPATH or a user site (the GPU machine's) is not the venv's.
  venv/bin/python -c 'import numpy' 2>/dev/null ||
    { echo "python_pip_install: a venv of $py sees no NumPy (its NumPy is not in the system site-packages; apt-get install python3-numpy)"; exit 77; }
  export PIP_DISABLE_PIP_VERSION_CHECK=1
  venv/bin/python -m pip install --no-build-isolation --no-deps ./pkg >pip.log 2>&1
  check "pip install --no-build-isolation --no-deps ./python" $? || tail -n 20 pip.log
  site=$(venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  [ -f "$site/graphrun/py.typed" ]; check "py.typed installed" $?
  [ "$(venv/bin/python -c 'import graphrun; print(graphrun.__version__)')" = \
    "$(venv/bin/python -c 'import graphrun; print(graphrun.version())')" ]
  check "package version = library version" $?
  loaded=$(venv/bin/python -c "$probe" "$photo" 2>&1)
  check "runs with the bundled library" $? || echo "$loaded"
  [ "$loaded" = "$site/graphrun/libgraphrun.so" ]; check "bundled library found first ($loaded)" $?
  rm "$site/graphrun/libgraphrun.so"
  venv/bin/python -c 'import graphrun' ; check "import needs no library" $?
  err=$(venv/bin/python -c 'import graphrun; graphrun.version()' 2>&1)
  echo "$err" | grep -q "LibraryNotFoundError: graphrun: cannot load libgraphrun.so; tried: \$GRAPHRUN_LIBRARY (unset); $site/graphrun/libgraphrun.so (no such file)"
  check "no library: the error lists the places tried" $? || echo "$err"
  loaded=$(GRAPHRUN_LIBRARY=$lib venv/bin/python -c "$probe" "$photo" 2>&1)
  [ "$loaded" = "$lib" ]; check "GRAPHRUN_LIBRARY ($loaded)" $?
elif [ "$how" = cmake ]; then
  cmake --install "$build" --prefix "$tmp/prefix" >install.log 2>&1; check "cmake --install" $?
  mv prefix moved
  pkg=moved/lib/python3/dist-packages/graphrun
  for f in __init__.py _capi.py _engine.py results.py _install.py py.typed; do
    [ -f "$pkg/$f" ]; check "installed $pkg/$f" $?
  done
  loaded=$(PYTHONPATH=$tmp/moved/lib/python3/dist-packages "$py" -c "$probe" "$photo" 2>&1)
  check "import from the moved prefix runs" $? || echo "$loaded"
  case "$loaded" in "$tmp/moved/"*) true ;; *) false ;; esac
  check "library found in the moved prefix ($loaded)" $?
else
  echo "usage: tests/python_install.sh pip|cmake BUILD_DIR PYTHON"; exit 2
fi
echo "$pass passed, $fails failed"
[ "$fails" -eq 0 ]
