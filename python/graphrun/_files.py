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
pipeline stopped).

Interrupts: ctypes releases the GIL for the call, and Python runs signal handlers only on the
main thread between bytecodes, so a Ctrl-C during one long C call would land only inside a
callback (where ctypes prints and swallows it: the run went on, that image's record was lost) or
after the call returned. So the C call runs on a helper thread (the callback with it), and the
calling thread waits on that thread, where KeyboardInterrupt lands at once. It sets `stop`; the
callback's next result then returns non-zero, which stops gr_pool_detect_files cleanly (no
further result, the runs in flight waited for); the interrupt is raised once the helper thread
has ended. The records delivered are counted (files_stats["records"])."""

from __future__ import annotations

import ctypes
import json
import _thread
import os
import threading
from typing import (Any, Callable, ContextManager, Dict, List, Optional, Protocol, Sequence)

from . import _capi
from ._capi import Error


class Engine(Protocol):
    """What this module needs of a graphrun.Engine (_engine.py imports this module, never the
    other way round): the handle under the engine's reader/closer protocol, its run lock, its
    class names, and where the last call's stats go."""

    _lock: Any
    _class_names: List[str]
    _files_stats: Optional[Dict[str, Any]]

    def _use(self, what: str) -> ContextManager[Any]:
        ...

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
              failure: List[BaseException], stop: Optional[threading.Event] = None,
              delivered: Optional[List[int]] = None) -> Callable[[Any, Any], int]:
    """The gr_file_fn of detect_lines (bench/py_records.py times it): each result's line to
    line(), counted in delivered[0]; an exception is kept in `failure` and stops the run, and so
    does `stop` once set (before the next line)."""
    string_at = ctypes.string_at
    count = delivered if delivered is not None else [0]
    stopped = stop.is_set if stop is not None else (lambda: False)

    def deliver(user: Any, result: Any) -> int:
        try:
            if stopped():
                return 1
            r = result.contents
            if r.jsonl:
                line(r.index, string_at(r.jsonl, r.jsonl_len))
            else:
                line(r.index, _out_of_memory(paths[r.index]))
            count[0] += 1
            return 0
        except BaseException as exc:  # noqa: BLE001 - raised once the pipeline stopped
            failure.append(exc)
            return 1

    return deliver


def _call_interruptibly(call: Callable[[], int], stop: threading.Event) -> int:
    """call() on a helper thread, this thread waiting for it: an exception here (Ctrl-C's
    KeyboardInterrupt, another signal handler's) sets `stop`, waits for call() to end and is then
    raised. call()'s own exception is raised as it is."""
    box: List[Any] = []
    done = threading.Event()

    def target() -> None:
        try:
            box.append(call())
        except BaseException as exc:  # noqa: BLE001 - raised on the calling thread
            box.append(exc)
        finally:
            done.set()

    # _thread.start_new_thread, not threading.Thread.start: the latter runs Python code (its
    # wait for the thread's start) where an interrupt could land after the thread exists, and
    # the engine would be left to it. The C function runs no Python code: an exception before
    # `started` is set means no thread.
    started = False
    interrupt: Optional[BaseException] = None
    while True:
        try:
            if not started:
                _thread.start_new_thread(target, ())
                started = True
            done.wait()
            break
        except BaseException as exc:  # noqa: BLE001 - a second Ctrl-C still waits for C
            if not started:
                raise  # no thread: nothing runs
            stop.set()
            interrupt = interrupt or exc
    if interrupt is not None:
        raise interrupt
    result = box[0]
    if isinstance(result, BaseException):
        raise result
    return int(result)


def open_jpeg_decoders(engine: "Engine") -> bool:
    """Open the GPU JPEG decoder of each of the engine's slots now (a hardware decoder's handle
    takes milliseconds; a slot's is otherwise opened by the first detect_files call that uses
    the slot). False where the GPU cannot decode JPEGs (decode="auto" then decodes on the CPU)."""
    lib = _capi.lib()
    if not _capi.has("gr_pool_open_jpeg_decoders"):
        return False
    with engine._use("open_jpeg_decoders") as handle, engine._lock:
        pool = _capi.P()
        engines = (_capi.P * 1)(handle)
        _capi.check(lib.gr_pool_wrap(engines, 1, ctypes.byref(pool)))
        try:
            return bool(lib.gr_pool_open_jpeg_decoders(pool) == 0)
        finally:
            lib.gr_pool_destroy(pool)


def detect_lines(engine: "Engine", handle: Any, paths: Sequence[str], thresh: float, nms: float,
                 decode: str, threads: int, line: Callable[[int, bytes], None]) -> int:
    """line(index, its JSON Lines record as bytes, newline included) for each path, in order
    (the engine's handle and lock held by the caller for the call). Returns the lines given to
    line(): len(paths), as an interrupt or a failure of line() is raised."""
    run = _capi.require("gr_pool_detect_files", "Engine.detect_files")
    if not paths:
        return 0
    lib = _capi.lib()
    pool = _capi.P()
    engines = (_capi.P * 1)(handle)  # a c_void_p
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
        stop = threading.Event()
        delivered = [0]
        callback = _capi.FILE_FN(deliverer(paths, line, failure, stop, delivered))
        stats = _capi.FilesStats()
        stats.struct_size = ctypes.sizeof(stats)
        c_paths = _capi.c_paths(paths)
        said: List[str] = []

        def call() -> int:
            status = int(run(pool, c_paths, len(paths), ctypes.byref(opt), callback, None,
                             ctypes.byref(stats)))
            if status != 0:  # gr_last_error() is the helper thread's
                said.append(lib.gr_last_error().decode(errors="replace"))
            return status

        try:
            status = _call_interruptibly(call, stop)
        finally:
            engine._files_stats = dict(stats.as_dict(), records=delivered[0])
        if failure:
            raise failure[0]
        _capi.check(status, handle, said[0] if said else None)
        return delivered[0]
    finally:
        lib.gr_pool_destroy(pool)


def detect_files(engine: "Engine", handle: Any, paths: Sequence[str], thresh: float, nms: float,
                 decode: str, threads: int) -> List[Dict[str, Any]]:
    """One record per path, in order: its line parsed, "input" the path as given (the line's is
    the path as JSON text, bytes that are not UTF-8 replaced)."""
    records: List[Dict[str, Any]] = []
    detect_lines(engine, handle, paths, thresh, nms, decode, threads, parser(paths, records))
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
