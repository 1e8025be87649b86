"""Engine.detect_files: image files to records through the C library's folder pipeline
(gr_pool_detect_files, runtime/files.c), the one `graphrun --input-list` runs.

The engine is wrapped as a pool of one engine (gr_pool_wrap). In C, worker threads decode and
letterbox the images straight into the engine's slots' input buffers (or hand the JPEGs to the
GPU decoder), this thread - inside the one ctypes call, which releases the GIL - submits and
waits, and the threads that are free decode each finished batch's detections. The callback then
gets each image's result in input order on this thread, which takes the GIL only to turn it into
its record. So the GIL is held per image for a dict, never for decoding, letterboxing or running.

A file that cannot be read or decoded gets {"input", "error"} with the library's one-line message
(its part of the buffer ran grey, as the CLI's), a batch the engine fails on gets that message
for each of its files, and an image whose outputs hold NaN/Inf gets the CLI's record for it;
nothing else is raised once the pipeline runs (bar a failure of Python itself, raised after the
pipeline stopped)."""

from __future__ import annotations

import ctypes
import os
import struct
from typing import TYPE_CHECKING, Any, Dict, List, Sequence

from . import _capi
from ._capi import Error

if TYPE_CHECKING:
    from ._engine import Engine

DECODES = ("auto", "cpu", "gpu")
_DECODE = {"auto": 0, "cpu": 1, "gpu": 2}  # gr_files_decode
# gr_detection's bytes (_capi.Detection): left, top, right, bottom, class_id, prob, objectness.
_DETECTION = struct.Struct("=4fi2f")


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask: a container's cpuset)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _record(r: Any, path: str, names: Sequence[str]) -> Dict[str, Any]:
    """The record of one gr_file_result: the CLI's JSON Lines fields."""
    if r.failure:  # the file, its batch's run, or its detections
        message = (r.error or b"").decode(errors="replace") or _capi.status_name(r.status)
        return {"input": path, "error": message.replace("\n", " ")}
    if r.nonfinite:
        return {"input": path, "width": r.width, "height": r.height, "error":
                f"its outputs hold {r.nonfinite} non-finite values (NaN/Inf): activations "
                "overflow; use --prec fp32 or int8", "nonfinite": r.nonfinite}
    found = []
    if r.n_detections:
        raw = ctypes.string_at(r.detections, r.n_detections * _DETECTION.size)
        n_names = len(names)
        for left, top, right, bottom, cls, prob, objectness in _DETECTION.iter_unpack(raw):
            found.append({"class": names[cls] if 0 <= cls < n_names else f"class {cls}",
                          "class_id": cls, "prob": prob, "objectness": objectness,
                          "left": left, "top": top, "right": right, "bottom": bottom})
    return {"input": path, "width": r.width, "height": r.height, "detections": found}


def detect_files(engine: "Engine", paths: Sequence[str], thresh: float, nms: float, decode: str,
                 threads: int) -> List[Dict[str, Any]]:
    """One record per path, in order (the engine's lock held by the caller for the call)."""
    run = _capi.require("gr_pool_detect_files", "Engine.detect_files")
    if not paths:
        return []
    lib = _capi.lib()
    pool = _capi.P()
    engines = (_capi.P * 1)(engine._handle)  # a c_void_p
    _capi.check(lib.gr_pool_wrap(engines, 1, ctypes.byref(pool)))
    try:
        if decode == "gpu":  # said as detect_files' own failure, before any image
            status = lib.gr_pool_open_jpeg_decoders(pool)
            if status != 0:
                message = lib.gr_last_error().decode(errors="replace")
                raise Error(_capi.status_name(status), "detect_files(decode='gpu'): no JPEG "
                            f"decoding on the GPU here: {message}")
        opt = _capi.FilesOptions()
        _capi.check(lib.gr_files_options_init(ctypes.byref(opt), ctypes.sizeof(opt)))
        opt.threads, opt.thresh, opt.nms, opt.decode = threads, thresh, nms, _DECODE[decode]
        names = engine._class_names
        records: List[Dict[str, Any]] = []
        failure: List[BaseException] = []

        def deliver(user: Any, result: Any) -> int:
            try:
                r = result.contents
                records.append(_record(r, paths[r.index], names))
                return 0
            except BaseException as exc:  # noqa: BLE001 - raised once the pipeline stopped
                failure.append(exc)
                return 1

        callback = _capi.FILE_FN(deliver)
        status = run(pool, _capi.c_paths(paths), len(paths), ctypes.byref(opt), callback, None,
                     None)
        if failure:
            raise failure[0]
        _capi.check(status, engine._handle)
        return records
    finally:
        lib.gr_pool_destroy(pool)
