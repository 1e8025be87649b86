"""Engine.detect_files: image files to records, the way `graphrun --input-list` runs them
(tools/cmd_stream.c), from Python.

The engine's slots (runs in flight, runtime.h) are the batch buffers. Image i belongs to batch
i // batch, which lives in slot (i // batch) % slots. Threads of this module claim the images in
order from a shared counter and put each straight into its batch's buffer: decoded with
graphrun's decoders and letterboxed there by gr_engine_letterbox (any thread may call it), or,
when the GPU decodes JPEGs, only read into a file buffer of their own; the thread that finishes
a batch then hands its JPEG bytes to gr_engine_decode_jpegs and decodes on the CPU what the GPU
did not take. ctypes releases the GIL in every C call, so the threads decode in parallel while
the calling thread - the only one that submits and waits (the engine's one-thread rule) - runs
batch k and turns batch k - 1's outputs into records: gr_engine_detect_outputs on the outputs the
slot kept, the dicts built straight from the C structs. A thread waits for a buffer only when it
is `slots` batches ahead of the records.

A file that cannot be read or decoded gets {"input", "error"} with the library's one-line message
(its part of the buffer grey, as the CLI's), a batch the engine fails on gets that message for
each of its files, and an image whose outputs hold NaN/Inf gets the CLI's record for it; nothing
else is raised once the pipeline runs (bar a failure of Python itself)."""

from __future__ import annotations

import ctypes
import itertools
import os
import stat
import struct
import threading
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _capi
from ._capi import Error

if TYPE_CHECKING:
    from ._engine import Engine

DECODES = ("auto", "cpu", "gpu")
_GR_ERR_NUMERIC = 13
# runtime/image/image.h and base/base.h: what the CPU decoder refuses before decoding. A file
# past them never goes to the GPU decoder: the CPU path reports it, as in the CLI.
_MAX_IMAGE_FILE_BYTES = 256 << 20
_MAX_IMAGE_PIXELS = 1 << 28
_MAX_DIM = 65536
# The frame headers (SOF0..SOF15 but DHT, JPG and DAC): the image's size and kind.
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# gr_detection's bytes (_capi.Detection): left, top, right, bottom, class_id, prob, objectness.
_DETECTION = struct.Struct("=4fi2f")


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask: a container's cpuset)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def check_image_file(path: str) -> Optional[str]:
    """Why the file is not opened (the CLI's check_image_file, word for word), or None: only a
    regular file within the image file limit is read (a FIFO would block the reader)."""
    try:
        sb = os.stat(path)
    except OSError as exc:
        return f"{path}: cannot open image file: {exc.strerror}"
    mode = sb.st_mode
    if not stat.S_ISREG(mode):
        kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                else "a socket" if stat.S_ISSOCK(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a file")
        return f"{path}: not a regular file ({kind})"
    if sb.st_size > _MAX_IMAGE_FILE_BYTES:
        return (f"{path}: {sb.st_size} bytes, larger than the image file limit "
                f"({_MAX_IMAGE_FILE_BYTES} bytes)")
    return None


def gpu_jpeg_size(data: memoryview) -> Optional[Tuple[int, int]]:
    """(width, height) from the frame header of a JPEG the GPU decoder may take - baseline or
    extended Huffman, 8-bit, 3 components at 4:4:4, 4:2:2, 4:2:0 or 4:4:0 (what
    gr_jpeg_gpu_decodable asks of the frame) - within the CPU decoder's limits; None for
    anything else, decoded on the CPU at once (the engine checks the rest: the file intact, one
    scan, not Adobe RGB/CMYK)."""
    n = len(data)
    if n < 4 or data[0] != 0xFF or data[1] != 0xD8:
        return None
    i = 2
    while i + 4 <= n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:  # no length
            i += 2
            continue
        if marker in _SOF_MARKERS:
            if marker not in (0xC0, 0xC1) or i + 19 > n or data[i + 4] != 8 or data[i + 9] != 3:
                return None
            sampling = (data[i + 11], data[i + 14], data[i + 17])  # H << 4 | V per component
            if sampling[0] not in (0x11, 0x21, 0x22, 0x12) or sampling[1:] != (0x11, 0x11):
                return None
            h = data[i + 5] << 8 | data[i + 6]
            w = data[i + 7] << 8 | data[i + 8]
            if 0 < w <= _MAX_DIM and 0 < h <= _MAX_DIM and w * h <= _MAX_IMAGE_PIXELS:
                return w, h
            return None
        if marker in (0xD9, 0xDA):  # the end, or a scan before any frame
            return None
        i += 2 + (data[i + 2] << 8 | data[i + 3])
    return None


class _Buffer:
    """One engine slot: its input buffer and what the images of the batch it holds became."""

    def __init__(self, slot: int, batch: int, address: int, n_out: int) -> None:
        self.slot = slot
        self.address = address
        self.batch_index = slot       # the batch it holds, or is being filled with
        self.left = 0                 # images of that batch not yet in place
        self.ready = False            # every image in place (and handed to the GPU decoder)
        self.width = [0] * batch
        self.height = [0] * batch
        self.error: List[Optional[str]] = [None] * batch
        self.batch_error: Optional[str] = None  # the GPU decoder or the run failed: every file
        self.in_flight = False
        self.outputs = (ctypes.POINTER(ctypes.c_float) * max(n_out, 1))()
        # decode on the GPU: each image's file bytes (buffers kept between batches) and the
        # gr_engine_decode_jpegs arguments
        self.files: List[Optional[np.ndarray[Any, Any]]] = [None] * batch
        self.jpeg_data = (ctypes.c_void_p * batch)()
        self.jpeg_bytes = (ctypes.c_size_t * batch)()
        self.decoded = (ctypes.c_int * batch)()


class FilePipeline:
    """One detect_files call (the engine's lock held by the caller for its whole run)."""

    def __init__(self, engine: "Engine", paths: Sequence[str], thresh: float, nms: float,
                 decode: str, threads: int) -> None:
        self.lib = _capi.lib()
        self.handle = engine._handle
        self.names = engine._class_names
        self.paths = paths
        self.batch = int(engine.batch)
        self.total = len(paths)
        self.n_batches = -(-self.total // self.batch)
        self.n_buf = max(1, min(int(self.lib.gr_engine_inflight(self.handle)), self.n_batches))
        self.u8 = int(self.lib.gr_engine_image_u8(self.handle))
        self.per_image = engine.channels * engine.width * engine.height
        self.image_bytes = self.per_image * (1 if self.u8 else 4)
        self.n_out = len(engine.output_shapes)
        self.out_elems = [c * h * w for _, c, h, w in engine.output_shapes]
        self.threads = max(1, min(threads, self.total))
        self.opt = _capi.DetectOptions()
        _capi.check(self.lib.gr_detect_options_init(ctypes.byref(self.opt),
                                                    ctypes.sizeof(self.opt)))
        self.opt.thresh, self.opt.nms = thresh, nms
        self.buffers: List[_Buffer] = []
        for slot in range(self.n_buf):
            address, size = _capi.P(), ctypes.c_size_t()
            _capi.check(self.lib.gr_engine_slot_input(self.handle, slot, self.u8,
                                                      ctypes.byref(address), ctypes.byref(size)),
                        self.handle)
            if size.value < self.batch * self.image_bytes:
                raise Error("internal error", f"slot {slot}'s input buffer holds {size.value} "
                            f"bytes, not {self.batch} images of {self.image_bytes}")
            self.buffers.append(_Buffer(slot, self.batch, int(address.value or 0), self.n_out))
        self.gpu_decode = self._choose_decoder(decode)
        self.decode_jpegs: Any = self.lib.gr_engine_decode_jpegs if self.gpu_decode else None
        self.cond = threading.Condition()
        self.claims = itertools.count()
        self.stop = False
        self.failure: Optional[BaseException] = None  # a thread's unexpected exception
        self.records: List[Dict[str, Any]] = []

    def _choose_decoder(self, decode: str) -> bool:
        """Whether the GPU decodes the JPEGs: asked ("gpu": else Error) or able ("auto": a GPU
        engine whose decoder opens; else the CPU, whatever the reason), as the CLI's --decode."""
        if decode == "cpu" or (decode == "auto" and not self.u8):
            return False
        fn = _capi.require("gr_engine_decode_jpegs", "detect_files(decode='gpu')") \
            if decode == "gpu" else getattr(self.lib, "gr_engine_decode_jpegs", None)
        if fn is None:
            return False
        status = fn(self.handle, 0, 0, None, None, None)  # opens the decoder
        if status != 0 and decode == "gpu":
            raise Error(_capi.status_name(status), "detect_files(decode='gpu'): no JPEG decoding "
                        f"on the GPU here: {self._message(status)}")
        return bool(status == 0)

    # ---- the decoding threads ------------------------------------------------------------------

    def _grey(self, dst: int) -> None:
        """A failed image's part of the buffer: the letterbox's border grey (it still runs)."""
        if self.u8:
            ctypes.memset(dst, 128, self.per_image)
        else:
            np.frombuffer((ctypes.c_float * self.per_image).from_address(dst), np.float32).fill(0.5)

    def _decode_cpu(self, b: _Buffer, pos: int, path: str, checked: bool = False) -> None:
        """Image pos of b decoded and letterboxed into its place; a failure is its record's."""
        lib = self.lib
        dst = b.address + pos * self.image_bytes
        message = None if checked else check_image_file(path)
        if message is None:
            im = ctypes.POINTER(_capi.Image)()
            status = lib.gr_image_load(os.fsencode(path), ctypes.byref(im))
            if status == 0:
                b.width[pos], b.height[pos] = im.contents.w, im.contents.h
                status = lib.gr_engine_letterbox(self.handle, im, dst)
            if status != 0:  # read on this thread: the message is thread-local
                message = lib.gr_last_error().decode(errors="replace") or \
                    _capi.status_name(status)
            lib.gr_image_destroy(im)
        b.error[pos] = message.replace("\n", " ") if message is not None else None
        if message is not None:
            self._grey(dst)

    def _read_jpeg(self, b: _Buffer, pos: int, path: str) -> bool:
        """The file's bytes kept for the GPU decoder when its frame is one the GPU decodes (its
        size from there): True; False leaves it to the CPU path (the CLI's read_for_gpu)."""
        b.jpeg_data[pos] = None
        if check_image_file(path) is not None:
            return False
        try:
            with open(path, "rb", buffering=0) as f:
                size = os.fstat(f.fileno()).st_size
                kept = b.files[pos]
                if kept is None or len(kept) < size:
                    kept = b.files[pos] = np.empty(max(size + size // 4, 1 << 16), np.uint8)
                view = kept.data[:size]
                if size < 4 or f.readinto(view) != size:
                    return False
        except OSError:
            return False
        found = gpu_jpeg_size(view)
        if found is None:
            return False
        b.width[pos], b.height[pos] = found
        b.jpeg_data[pos] = kept.ctypes.data
        b.jpeg_bytes[pos] = size
        return True

    def _hand_over(self, b: _Buffer, n: int) -> None:
        """The batch's JPEGs to the GPU decoder (the thread that finished the batch: one per slot
        at a time); the files it did not take decoded here on the CPU, as decode="cpu" would."""
        data = ctypes.cast(b.jpeg_data, ctypes.POINTER(ctypes.POINTER(ctypes.c_uint8)))
        status = self.decode_jpegs(self.handle, b.slot, n, data, b.jpeg_bytes, b.decoded)
        if status != 0:
            b.batch_error = "JPEG decoding on the GPU: " + \
                self.lib.gr_last_error().decode(errors="replace")
            return
        first = b.batch_index * self.batch
        for pos in range(n):
            if b.jpeg_data[pos] and not b.decoded[pos]:
                self._decode_cpu(b, pos, self.paths[first + pos], checked=True)

    def _worker(self) -> None:
        try:
            self._work()
        except BaseException as exc:  # noqa: BLE001 - the calling thread raises it
            with self.cond:
                if self.failure is None:
                    self.failure = exc
                self.stop = True
                self.cond.notify_all()

    def _work(self) -> None:
        batch, cond = self.batch, self.cond
        while True:
            i = next(self.claims)
            if i >= self.total:
                return
            k, pos = divmod(i, batch)
            b = self.buffers[k % self.n_buf]
            with cond:
                while b.batch_index != k and not self.stop:  # held by batch k - n_buf
                    cond.wait()
                if self.stop:
                    return
            path = self.paths[i]
            b.error[pos] = None  # not the last batch's: a file kept for the GPU sets none
            if not (self.gpu_decode and self._read_jpeg(b, pos, path)):
                self._decode_cpu(b, pos, path)
            with cond:
                b.left -= 1
                last = b.left == 0
            if last:
                if self.gpu_decode:
                    self._hand_over(b, self._batch_size(k))
                with cond:
                    b.ready = True
                    cond.notify_all()

    # ---- the calling thread: submit, wait, records ---------------------------------------------

    def _batch_size(self, k: int) -> int:
        return min(self.batch, self.total - k * self.batch)

    def _hold(self, b: _Buffer, k: int) -> None:
        """Give buffer b to batch k (its images may go in from now on)."""
        with self.cond:
            b.batch_index = k
            b.left = self._batch_size(k) if k < self.n_batches else 0
            b.ready = False
            b.batch_error = None
            self.cond.notify_all()

    def _wait_filled(self, b: _Buffer) -> None:
        with self.cond:
            while not b.ready and self.failure is None:
                self.cond.wait()
            if self.failure is not None:
                raise self.failure

    def _submit(self, b: _Buffer) -> None:
        if b.batch_error is None:
            status = self.lib.gr_engine_submit(self.handle, b.slot)
            if status == 0:
                b.in_flight = True
            else:
                b.batch_error = self._message(status)

    def _message(self, status: int) -> str:
        message = self.lib.gr_last_error().decode(errors="replace") or \
            self.lib.gr_engine_last_error(self.handle).decode(errors="replace")
        return (message or _capi.status_name(status)).replace("\n", " ")

    def _nonfinite(self, b: _Buffer, n: int) -> List[int]:
        """NaN/Inf values in each image's part of the outputs (a scan of the whole batch in C
        first: almost always none)."""
        lib, count, total = self.lib, ctypes.c_size_t(), 0
        for k in range(self.n_out):
            if lib.gr_engine_output_nonfinite(self.handle, k, ctypes.byref(count)) == 0:
                total += count.value
        if total == 0:
            return [0] * n
        bad = [0] * n
        for k in range(self.n_out):
            view = np.ctypeslib.as_array(b.outputs[k], shape=(self.batch, self.out_elems[k]))
            for pos in range(n):
                bad[pos] += int(np.count_nonzero(~np.isfinite(view[pos])))
        return bad

    def _report(self, b: _Buffer, k: int) -> None:
        """Batch k's records (after its run's wait), in order."""
        lib, handle, n = self.lib, self.handle, self._batch_size(k)
        if b.in_flight:
            b.in_flight = False
            status = lib.gr_engine_wait(handle, b.slot)
            if status not in (0, _GR_ERR_NUMERIC):  # NaN/Inf: the outputs stay readable
                b.batch_error = self._message(status)
        if b.batch_error is None:
            for j in range(self.n_out):
                status = lib.gr_engine_output(handle, j, ctypes.byref(b.outputs[j]))
                if status != 0:
                    b.batch_error = self._message(status)
        nonfinite = self._nonfinite(b, n) if b.batch_error is None else [0] * n
        opt, names, n_names = self.opt, self.names, len(self.names)
        dets = ctypes.POINTER(_capi.Detection)()
        count = ctypes.c_int()
        append = self.records.append
        first = k * self.batch
        for pos in range(n):
            path = self.paths[first + pos]
            error = b.error[pos] or b.batch_error
            if error is not None:
                append({"input": path, "error": error})
                continue
            w, h = b.width[pos], b.height[pos]
            if nonfinite[pos]:
                append({"input": path, "width": w, "height": h, "error":
                        f"its outputs hold {nonfinite[pos]} non-finite values (NaN/Inf): "
                        "activations overflow; use --prec fp32 or int8",
                        "nonfinite": nonfinite[pos]})
                continue
            opt.image_w, opt.image_h = w, h
            status = lib.gr_engine_detect_outputs(handle, b.outputs, pos, ctypes.byref(opt),
                                                  ctypes.byref(dets), ctypes.byref(count))
            if status != 0:
                append({"input": path, "error": self._message(status)})
                continue
            raw = ctypes.string_at(dets, count.value * _DETECTION.size) if count.value else b""
            lib.gr_detections_free(dets)
            found = []
            if raw:
                for left, top, right, bottom, cls, prob, objectness in _DETECTION.iter_unpack(raw):
                    found.append({"class": names[cls] if 0 <= cls < n_names else f"class {cls}",
                                  "class_id": cls, "prob": prob, "objectness": objectness,
                                  "left": left, "top": top, "right": right, "bottom": bottom})
            append({"input": path, "width": w, "height": h, "detections": found})

    def run(self) -> List[Dict[str, Any]]:
        if self.total == 0:
            return []
        for k, b in enumerate(self.buffers):
            self._hold(b, k)
        workers = [threading.Thread(target=self._worker, name=f"graphrun-files-{t}", daemon=True)
                   for t in range(self.threads)]
        for t in workers:
            t.start()
        lag = 1 if self.n_buf > 1 else 0  # runs queued while the one before is reported
        reported = 0
        try:
            for k in range(self.n_batches):
                b = self.buffers[k % self.n_buf]
                self._wait_filled(b)
                self._submit(b)
                while k - reported >= lag:
                    self._report_and_release(reported)
                    reported += 1
            while reported < self.n_batches:
                self._report_and_release(reported)
                reported += 1
        finally:
            with self.cond:
                self.stop = True
                self.cond.notify_all()
            for t in workers:
                t.join()
            for b in self.buffers:  # after a failure: no run left in flight on the engine
                if b.in_flight:
                    self.lib.gr_engine_wait(self.handle, b.slot)
                    b.in_flight = False
        return self.records

    def _report_and_release(self, k: int) -> None:
        b = self.buffers[k % self.n_buf]
        self._report(b, k)
        self._hold(b, k + self.n_buf)
