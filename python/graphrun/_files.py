"""Engine.detect_files: image files to records through the C library's folder pipeline
(gr_pool_detect_files, runtime/files.c), the one `graphrun --input-list` runs.

The engine is wrapped as a pool of one engine (gr_pool_wrap). In C, worker threads decode and
letterbox the images straight into the engine's slots' input buffers (or hand the JPEGs to the
GPU decoder), this thread - inside the one ctypes call, which releases the GIL - submits and
waits, and the threads that are free decode each finished batch's detections and format each
image's JSON Lines record (gr_files_options.jsonl: the CLI's line, the same bytes). The callback
then gets each image's result in input order on this thread, which takes the GIL only to copy its
line (detect_lines: written as it is, no dict at all) or to parse it (detect_files: json.loads,
C-accelerated). So the GIL is held per image for a copy or a parse, never for decoding,
letterboxing, running or formatting.

A file that cannot be read or decoded gets {"input", "error"} with the library's one-line message
(its part of the buffer ran grey, as the CLI's), a batch the engine fails on gets that message
for each of its files, and an image whose outputs hold NaN/Inf gets the CLI's record for it;
nothing else is raised once the pipeline runs (bar a failure of Python itself, raised after the
pipeline stopped)."""

from __future__ import annotations

import ctypes
import json
import os
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Sequence

from . import _capi
from ._capi import Error

if TYPE_CHECKING:
    from ._engine import Engine

DECODES = ("auto", "cpu", "gpu")
_DECODE = {"auto": 0, "cpu": 1, "gpu": 2}  # gr_files_decode


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask: a container's cpuset)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _out_of_memory(path: str) -> bytes:
    """The record of an image whose line found no memory (the library's result carries none)."""
    return json.dumps({"input": path, "error": "out of memory for its JSON Lines record"}
                      ).encode() + b"\n"


def deliverer(paths: Sequence[str], line: Callable[[int, bytes], None],
              failure: List[BaseException]) -> Callable[[Any, Any], int]:
    """The gr_file_fn of detect_lines (bench/py_records.py times it): each result's line to
    line(); an exception is kept in `failure` and stops the run."""
    string_at = ctypes.string_at

    def deliver(user: Any, result: Any) -> int:
        try:
            r = result.contents
            if r.jsonl:
                line(r.index, string_at(r.jsonl, r.jsonl_len))
            else:
                line(r.index, _out_of_memory(paths[r.index]))
            return 0
        except BaseException as exc:  # noqa: BLE001 - raised once the pipeline stopped
            failure.append(exc)
            return 1

    return deliver


def open_jpeg_decoders(engine: "Engine") -> bool:
    """Open the GPU JPEG decoder of each of the engine's slots now (a hardware decoder's handle
    takes milliseconds; a slot's is otherwise opened by the first detect_files call that uses
    the slot). False where the GPU cannot decode JPEGs (decode="auto" then decodes on the CPU)."""
    lib = _capi.lib()
    if not _capi.has("gr_pool_open_jpeg_decoders"):
        return False
    pool = _capi.P()
    engines = (_capi.P * 1)(engine._handle)
    _capi.check(lib.gr_pool_wrap(engines, 1, ctypes.byref(pool)))
    try:
        return bool(lib.gr_pool_open_jpeg_decoders(pool) == 0)
    finally:
        lib.gr_pool_destroy(pool)


def detect_lines(engine: "Engine", paths: Sequence[str], thresh: float, nms: float, decode: str,
                 threads: int, line: Callable[[int, bytes], None]) -> None:
    """line(index, its JSON Lines record as bytes, newline included) for each path, in order
    (the engine's lock held by the caller for the call)."""
    run = _capi.require("gr_pool_detect_files", "Engine.detect_files")
    if not paths:
        return
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
        # The engine's names as this Engine knows them (Engine.load(names=...) may give others
        # than the file's), read by the library once per call, not per image.
        names = [n.encode() for n in engine._class_names]
        opt.jsonl, opt.n_class_names = 1, len(names)
        opt.class_names = (ctypes.c_char_p * (len(names) + 1))(*names, None)
        failure: List[BaseException] = []
        callback = _capi.FILE_FN(deliverer(paths, line, failure))
        stats = _capi.FilesStats()
        stats.struct_size = ctypes.sizeof(stats)
        status = run(pool, _capi.c_paths(paths), len(paths), ctypes.byref(opt), callback, None,
                     ctypes.byref(stats))
        engine._files_stats = stats.as_dict()
        if failure:
            raise failure[0]
        _capi.check(status, engine._handle)
    finally:
        lib.gr_pool_destroy(pool)


def detect_files(engine: "Engine", paths: Sequence[str], thresh: float, nms: float, decode: str,
                 threads: int) -> List[Dict[str, Any]]:
    """One record per path, in order: its line parsed, "input" the path as given (the line's is
    the path as JSON text, bytes that are not UTF-8 replaced)."""
    records: List[Dict[str, Any]] = []
    detect_lines(engine, paths, thresh, nms, decode, threads, parser(paths, records))
    return records


def parser(paths: Sequence[str], records: List[Dict[str, Any]]) -> Callable[[int, bytes], None]:
    """detect_files' line(): the line parsed (json.loads, C-accelerated: faster here than
    anything built from the gr_detection structs that gives the CLI's numbers) onto records."""
    loads = json.loads

    def parse(index: int, text: bytes) -> None:
        record = loads(text)
        record["input"] = paths[index]
        records.append(record)

    return parse
