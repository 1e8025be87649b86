"""graphrun from Python: ctypes over the C API (include/graphrun/runtime.h), no compiled extension.

    import graphrun
    model = graphrun.Model("yolo")                      # or Model(cfg="x.cfg", weights="x.weights")
    engine = model.build(device="auto", precision="int8", batch=8)
    r = engine.detect("data/dog.jpg")                   # one image in, one Results out
    print(r.xyxy, r.conf, r.cls, [r.names[c] for c in r.cls])
    r.save("predictions.png")                           # boxes drawn as the CLI draws them
    for r in engine.detect(["data/dog.jpg", frame_bgr], color="bgr"):   # a list in, a list out
        for d in r:                                     # Detection records
            print(d.class_name, d.prob, d.left, d.top, d.right, d.bottom)
    outputs = engine.run(x)     # x: float32 (batch, 3, h, w) in [0, 1] or uint8 (batch, h, w, 3)
    engine.save("yolo.engine"); engine = graphrun.Engine.load("yolo.engine")
    pool = graphrun.Pool(model, devices=None, precision="int8", batch=64)  # an engine per GPU

Images: paths, uint8 (h, w, 3) arrays (RGB by default, color="bgr" for OpenCV), float arrays in
[0, 1], PIL images (see Engine.detect). Failures raise graphrun.Error carrying graphrun's one-line
message; arguments of the wrong shape, type or range raise ValueError / TypeError before reaching
the library. Outputs holding NaN/Inf raise NonFiniteWarning (or graphrun.Error with
nonfinite_is_error=True); weights holding NaN/Inf warn when the model loads (or fail it with
strict_weights=True).

libgraphrun.so is loaded on first use: load_library(path) or $GRAPHRUN_LIBRARY, else a copy
bundled in this package, else the prefix the package was installed into, else build/ of the
source checkout, else the system's loader (graphrun/_capi.py says exactly where; the error lists
the places tried). Objects hold C handles and free them when collected or closed (with-blocks);
each handle is owned once: copies and pickles of a Model, Engine or Pool raise TypeError. Threads
may share a Model or an Engine; close() from any thread waits for the calls in flight, and later
calls raise ClosedError. Ctrl-C during detect_files raises KeyboardInterrupt once the C pipeline
stopped. Paths holding a NUL character raise ValueError. Synthetic weights warn
(SyntheticWeightsWarning). python/README.md has the rules.
"""

from __future__ import annotations

from typing import Any

from ._capi import ClosedError, Error, LibraryNotFoundError, load_library
from ._capi import library_path as _library_path
from ._engine import (Engine, Model, NonFiniteWarning, Pool, SyntheticWeightsWarning,
                      cuda_device_count, letterbox, version)
from .results import Detection, Results, load_image

__version__ = "0.1.0"  # the library's (GRAPHRUN_VERSION_*); version() reports the loaded one

__all__ = ["Error", "ClosedError", "LibraryNotFoundError", "NonFiniteWarning",
           "SyntheticWeightsWarning", "Model", "Engine", "Pool",
           "Results", "Detection", "load_image", "letterbox", "version", "cuda_device_count",
           "load_library", "library_path"]


def __getattr__(name: str) -> Any:
    """graphrun.library_path: the libgraphrun.so loaded (loading it on first use)."""
    if name == "library_path":
        return _library_path()
    raise AttributeError(f"module 'graphrun' has no attribute {name!r}")
