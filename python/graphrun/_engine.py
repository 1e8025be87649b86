"""Model and Engine: the C handles gr_model / gr_engine with NumPy in and out. Arguments are
checked here before they reach C (ctypes would silently truncate an integer that does not fit its
C type); the library's own failures raise Error with its one-line message."""

from __future__ import annotations

import contextlib
import ctypes
import math
import numbers
import os
import threading
import warnings
from typing import (Any, Callable, Dict, Iterator, List, NoReturn, Optional, Sequence, Tuple,
                    TypeVar, Union, overload)

import numpy as np
import numpy.typing as npt

from . import _capi, _files
from ._capi import ClosedError, Error
from .results import Detection, ImageLike, PathLike, Results, c_image, to_rgb

DEVICES = {"auto": 0, "cpu": 1, "gpu": 2}                       # gr_device
PRECISIONS = {"fp32": 0, "fp16": 1, "int8": 2, "auto": 3}       # gr_precision
F32_ALGOS = {"auto": 0, "sgemm": 1, "tf32x3": 2, "implicit": 3, "direct3x3": 4}  # gr_f32_algo
PREPROCESS = {"auto": 0, "letterbox": 1, "stretch": 2, "letterbox114": 3}  # gr_preprocess
_INT_MAX = 2**31 - 1
_MAX_BATCH = 4096  # GR_MAX_BATCH (base/base.h)
_MAX_INFLIGHT = 8  # GR_MAX_INFLIGHT (runtime.h)
_GR_ERR_INVALID_ARGUMENT = 1
_GR_ERR_NUMERIC = 13


class NonFiniteWarning(RuntimeWarning):
    """Weights or outputs hold NaN/Inf: the results are meaningless."""


class SyntheticWeightsWarning(UserWarning):
    """The model (or the model an engine file was built from) has generated weights, not trained
    ones: its boxes are not meaningful (the CLI says the same). Filter it to silence it:
    warnings.filterwarnings("ignore", category=graphrun.SyntheticWeightsWarning)."""


def _int_arg(name: str, value: Any, lo: int, hi: int) -> int:
    """value as an int within [lo, hi], or TypeError / ValueError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}")
    number = int(value)
    if not lo <= number <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], not {number}")
    return number


def _float_arg(name: str, value: Any, lo: float, hi: float) -> float:
    """value as a finite float within [lo, hi], or TypeError / ValueError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    number = float(value)
    if not (math.isfinite(number) and lo <= number <= hi):
        raise ValueError(f"{name} must be a finite number in [{lo}, {hi}], not {number}")
    return number


def _choice(name: str, value: Any, table: Dict[str, int]) -> int:
    if value not in table:
        raise ValueError(f"{name} {value!r} is not one of {sorted(table)}")
    return table[value]


def _path(name: str, p: Optional[PathLike]) -> Optional[bytes]:
    """An optional path argument for C (None stays NULL), checked as _capi.c_path checks."""
    return _capi.c_path(name, p) if p is not None else None


def version() -> str:
    """The library's version, e.g. "0.1.0"."""
    return str(_capi.lib().gr_version().decode())


def cuda_device_count() -> int:
    """CUDA devices visible to graphrun (0 without a GPU or driver)."""
    return int(_capi.lib().gr_cuda_device_count())


def letterbox(image: ImageLike, width: int, height: int, dtype: Any = np.uint8,
              color: str = "rgb", how: str = "letterbox") -> npt.NDArray[Any]:
    """Darknet's letterbox of an image (anything detect() takes) to width x height: uint8
    (height, width, 3) HWC, or float32 (3, height, width) CHW in [0, 1] exactly as Darknet
    computes it (dtype=np.float32). how="stretch": AlexeyAB's resize straight to width x height
    instead (what its cfgs get without letter_box=1: Engine.preprocess)."""
    width = _int_arg("width", width, 1, 1 << 16)
    height = _int_arg("height", height, 1, 1 << 16)
    kind = _choice("how", how, {k: v for k, v in PREPROCESS.items() if k != "auto"})
    rgb = to_rgb(image, color)
    im = c_image(rgb)
    lib = _capi.lib()
    if dtype == np.uint8:
        out = np.empty((height, width, 3), np.uint8)
        _capi.check(lib.gr_image_preprocess_u8(ctypes.byref(im), kind, width, height,
                                               out.ctypes.data))
    elif dtype == np.float32:
        out = np.empty((3, height, width), np.float32)
        _capi.check(lib.gr_image_preprocess(ctypes.byref(im), kind, width, height,
                                            out.ctypes.data))
    else:
        raise ValueError("letterbox dtype is np.uint8 or np.float32")
    return out


_H = TypeVar("_H", bound="_Handle")


class _Handle:
    """Owns a C handle, once: close() (or leaving a with-block, or collection) releases it.

    Every method that passes the handle to C holds it through _use(): a call in flight counts as
    a user, close() first refuses new calls (ClosedError) and then waits for the calls in flight
    to return before the C object is destroyed, so closing from another thread never frees what
    a call is using. Copies and pickles are refused (TypeError): two objects would free one
    handle."""

    _handle: Any = None  # until built: close() and __del__ after a failed __init__ do nothing
    _destroy_name = ""
    _kind = "object"  # what messages call it
    _guard: Optional[threading.Condition] = None
    _users = 0

    def _own(self, handle: Any) -> None:
        """Take the C handle (once it exists) under the reader/closer protocol."""
        self._guard = threading.Condition(threading.Lock())
        self._users = 0
        self._handle = handle

    @contextlib.contextmanager
    def _use(self, what: str) -> Iterator[Any]:
        """The handle for the duration of a call `what` ("Engine.run"); ClosedError once closed."""
        guard = self._guard
        if guard is None:
            raise ClosedError(f"{what}: the {self._kind} is not open")
        counted = False
        try:  # counted and uncounted in one try: an interrupt anywhere leaves the count right
            with guard:
                handle = self._handle
                if not handle:
                    raise ClosedError(f"{what}: the {self._kind} is closed")
                self._users += 1
                counted = True
            yield handle
        finally:
            if counted:
                with guard:
                    self._users -= 1
                    if self._users == 0:
                        guard.notify_all()

    def _detach(self) -> Any:
        """Refuse new calls, wait for those in flight, and return the handle (None if closed)."""
        guard = self._guard
        if guard is None:
            return None
        with guard:
            handle, self._handle = self._handle, None
            while self._users:
                guard.wait()
        return handle

    def close(self) -> None:
        """Release the C object: waits for calls in flight on other threads (they finish
        normally), and every later call raises graphrun.ClosedError. Closing twice is a no-op.
        Not from inside one of this object's own calls (a detect_files_jsonl out.write): it would
        wait for itself."""
        handle = self._detach()
        if handle:
            getattr(_capi.lib(), self._destroy_name)(handle)

    def __del__(self) -> None:
        self.close()

    def _refuse_copy(self) -> NoReturn:
        raise TypeError(f"a graphrun.{self._kind} owns a C handle and "
                        "cannot be copied or pickled (share the object itself; Engine: "
                        "to_bytes() and Engine.load() make a second engine)")

    def __copy__(self) -> NoReturn:
        self._refuse_copy()

    def __deepcopy__(self, memo: Any) -> NoReturn:
        self._refuse_copy()

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        self._refuse_copy()

    def __enter__(self: _H) -> _H:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Model(_Handle):
    """A network: a built-in name ("yolo", "yolov2-tiny", "yolov3-tiny", ...) or a Darknet cfg,
    with Darknet weights or deterministic synthetic ones (seed); or an ONNX file, by name
    (Model("model.onnx")) or as cfg, with its own weights (docs/onnx.md). names: a file of class names, one
    per line. Weights holding NaN/Inf warn (NonFiniteWarning), or fail with strict_weights.
    Synthetic weights warn (SyntheticWeightsWarning, once, when the model loads) as the CLI does:
    .synthetic_weights is True and .notice says so.

    Threads may share a model (build engines from it at once); close() waits for the builds in
    flight, and calls after it raise graphrun.ClosedError. Engines built from it do not need it
    after their build. Copies and pickles are refused (TypeError)."""

    _destroy_name = "gr_model_destroy"
    _kind = "Model"

    def __init__(self, builtin: str = "yolo", cfg: Optional[PathLike] = None,
                 weights: Optional[PathLike] = None, seed: int = 1,
                 names: Optional[PathLike] = None, strict_weights: bool = False) -> None:
        seed = _int_arg("seed", seed, 0, 2**64 - 1)
        if not isinstance(builtin, str):
            raise TypeError(f"builtin must be a str, not {type(builtin).__name__}")
        if "\0" in builtin:
            raise ValueError(f"builtin {builtin!r} holds a NUL character")
        lib = _capi.lib()
        opt = _capi.ModelOptions()
        _capi.check(lib.gr_model_options_init(ctypes.byref(opt), ctypes.sizeof(opt)))
        opt.builtin = None if cfg else builtin.encode()
        opt.cfg_path = _path("cfg", cfg)
        opt.weights_path = _path("weights", weights)
        names_path = _path("names", names) if names else None
        opt.seed = seed
        opt.nonfinite_weights_is_error = 1 if strict_weights else 0
        handle = _capi.P()
        _capi.check(lib.gr_model_load(ctypes.byref(opt), ctypes.byref(handle)))
        self._own(handle)
        if names_path:
            _capi.check(lib.gr_model_set_class_names(handle, names_path))
        info = _capi.ModelInfo()
        _capi.check(lib.gr_model_get_info(handle, ctypes.byref(info)))
        self.name: str = info.name.decode()
        self.width, self.height, self.channels = info.width, info.height, info.channels
        self.n_layers: int = info.n_layers
        self.classes: int = info.classes
        self.synthetic_weights = bool(info.synthetic_weights)
        self.gflops: float = info.gflops
        self.nonfinite_weights: int = info.nonfinite_weights
        self.notice: str = lib.gr_model_notice(handle).decode(errors="replace")
        if self.nonfinite_weights:
            warnings.warn(self.notice, NonFiniteWarning, stacklevel=2)
        if self.synthetic_weights:
            synthetic = _synthetic_notice(seed)
            self.notice = "\n".join(line for line in (self.notice, synthetic) if line)
            warnings.warn(synthetic, SyntheticWeightsWarning, stacklevel=2)

    def class_name(self, class_id: int) -> str:
        class_id = _int_arg("class_id", class_id, -2**31, _INT_MAX)
        with self._use("Model.class_name") as handle:
            return str(_capi.lib().gr_model_class_name(handle, class_id).decode())

    def build(self, device: str = "auto", precision: str = "fp32", batch: int = 1,
              use_cuda_graph: bool = True, calib_cache: Optional[PathLike] = None,
              calib_images: Optional[Sequence[PathLike]] = None, f32_algo: str = "auto",
              nonfinite_is_error: bool = False, micro_batch: int = 0,
              gpu_index: int = 0, inflight: int = 1, preprocess: str = "auto") -> "Engine":
        """An engine for this model (see Engine)."""
        return Engine(self, device, precision, batch, use_cuda_graph, calib_cache, calib_images,
                      f32_algo, nonfinite_is_error, micro_batch, gpu_index, inflight, preprocess)


def _synthetic_notice(seed: Optional[int]) -> str:
    """The CLI's line for synthetic weights (tools/cli_common.c), in this package's terms."""
    of = f" (seed {seed})" if seed is not None else ""
    return (f"weights: SYNTHETIC{of} - boxes are not meaningful; pass weights=FILE for trained "
            "Darknet weights")


def _engine_class_names(handle: Any) -> List[str]:
    """The class names of an engine's own network (a loaded engine file holds them)."""
    lib = _capi.lib()
    model = lib.gr_engine_model(handle)
    info = _capi.ModelInfo()
    if not model or lib.gr_model_get_info(model, ctypes.byref(info)) != 0:
        return []
    return [lib.gr_model_class_name(model, i).decode(errors="replace")
            for i in range(info.classes)]


def _engine_options(device: str, use_cuda_graph: bool,
                    inflight: int = 1) -> _capi.EngineOptions:
    opt = _capi.EngineOptions()
    _capi.check(_capi.lib().gr_engine_options_init(ctypes.byref(opt), ctypes.sizeof(opt)))
    opt.device = _choice("device", device, DEVICES)
    opt.use_cuda_graph = 1 if use_cuda_graph else 0
    opt.inflight = _int_arg("inflight", inflight, 1, _MAX_INFLIGHT)
    return opt


Images = Union[ImageLike, List[ImageLike], Tuple[ImageLike, ...]]


class Engine(_Handle):
    """A built (or loaded) engine.

    device "auto" | "cpu" | "gpu"; precision "fp32" | "fp16" | "int8" | "auto" (int8 or fp16 per
    layer within an output NRMSE of 0.003, docs/calibration.md); batch: images per run; f32_algo
    "auto" | "sgemm" | "tf32x3" | "implicit" | "direct3x3" picks the GPU's fp32 convolution
    algorithm (runtime.h, gr_f32_algo). Outputs holding NaN/Inf raise NonFiniteWarning, or
    graphrun.Error (status "non-finite output") with nonfinite_is_error=True; the outputs stay
    readable through outputs() either way. micro_batch: images per pass of the GPU graph, 0 (auto:
    measured at build) or a divisor of batch (runtime.h); the engine's choice is its micro_batch
    attribute. gpu_index: the CUDA device ordinal of a GPU engine (0 default). inflight: runs in
    flight at once, 1..8 (runtime.h, "Runs in flight": each its own input buffer, outputs and, on
    the GPU, stream and graph; the weights shared): detect_files() keeps that many batches going.
    preprocess "auto" | "letterbox" | "stretch" | "letterbox114": how images become the input and
    how boxes map back (runtime.h, gr_preprocess); auto is the model's (AlexeyAB cfgs stretch
    unless their [net] says letter_box=1, every other cfg letterboxes, ONNX models letterbox with
    Ultralytics' border 114: letterbox114); the result is the preprocess attribute.
    One engine serializes its own calls with a lock, so threads may share it (runtime.h's
    one-thread-at-a-time rule is kept for them). close() (from any thread) waits for the call in
    flight and those already waiting for the lock; every call after it raises
    graphrun.ClosedError. copy.copy, copy.deepcopy and pickle raise TypeError (the C engine is
    owned once; to_bytes() and Engine.load() give a second one). Ctrl-C (KeyboardInterrupt)
    during detect_files / detect_files_jsonl stops the pipeline cleanly and is raised once it has
    stopped (see detect_files). synthetic_weights: True when the network's weights were generated
    (Model's SyntheticWeightsWarning; Engine.load warns for such a file)."""

    _destroy_name = "gr_engine_destroy"
    _kind = "Engine"

    def __init__(self, model: Model, device: str = "auto", precision: str = "fp32",
                 batch: int = 1, use_cuda_graph: bool = True,
                 calib_cache: Optional[PathLike] = None,
                 calib_images: Optional[Sequence[PathLike]] = None, f32_algo: str = "auto",
                 nonfinite_is_error: bool = False, micro_batch: int = 0,
                 gpu_index: int = 0, inflight: int = 1, preprocess: str = "auto") -> None:
        batch = _int_arg("batch", batch, 1, _MAX_BATCH)
        micro_batch = _int_arg("micro_batch", micro_batch, 0, batch)
        opt = _engine_options(device, use_cuda_graph, inflight)
        opt.precision = _choice("precision", precision, PRECISIONS)
        opt.f32_algo = _choice("f32_algo", f32_algo, F32_ALGOS)
        opt.preprocess = _choice("preprocess", preprocess, PREPROCESS)
        opt.batch = batch
        opt.micro_batch = micro_batch
        opt.gpu_index = _int_arg("gpu_index", gpu_index, 0, _INT_MAX)
        opt.calib_cache = _path("calib_cache", calib_cache)
        keep = None
        if calib_images is not None:
            if isinstance(calib_images, (str, bytes, os.PathLike)):
                raise TypeError("calib_images takes a list of paths (a single path: [path])")
            keep = _capi.c_paths(calib_images, "calib_images")
            opt.calib_images = keep
        handle = _capi.P()
        with model._use("Model.build") as model_handle:
            _capi.check(_capi.lib().gr_engine_build(model_handle, ctypes.byref(opt),
                                                    ctypes.byref(handle)))
        del keep
        self._own(handle)
        names = [model.class_name(i) for i in range(model.classes)]
        self._setup(handle, names, model, precision, nonfinite_is_error)

    @classmethod
    def load(cls, source: Union[PathLike, bytes, bytearray, memoryview], device: str = "auto",
             use_cuda_graph: bool = True, nonfinite_is_error: bool = False,
             names: Optional[Union[Sequence[str], PathLike]] = None,
             inflight: int = 1) -> "Engine":
        """An engine from a file Engine.save() wrote (a path), or from its bytes (to_bytes()),
        built for `device` without calibrating or measuring again. names: the class names (a list,
        or a file of one name per line); without them, the names the engine file holds (those of
        the model it was built from; "class N" where it had none). plot() labels boxes "class N"
        either way: drawing takes its labels from a Model. .precision is read
        from the engine's layer map: "fp32", "fp16", "int8", or "auto" where int8 and fp16 mix.
        inflight: as Model.build's (a run-time option: the file does not fix it).
        device: the file fixes it; "cpu" or "gpu" that contradicts the file is refused
        (graphrun.Error "invalid argument", as the CLI's --device with --engine), "auto" takes
        the file's. An engine built from synthetic weights warns (SyntheticWeightsWarning).

        A path is mapped, not copied, for the engine's life: replace a loaded engine file by
        rename (save() does; os.replace, mv, install), never by copying over it (shutil.copy,
        cp) - the engine's next run then raises instead of using the changed weights."""
        opt = _engine_options(device, use_cuda_graph, inflight)
        handle = _capi.P()
        if isinstance(source, (bytes, bytearray, memoryview)):
            fn = _capi.require("gr_engine_load_from_memory", "Engine.load(bytes)")
            data = bytes(source)
            what = f"an engine of {len(data)} bytes"
            _capi.check(fn(data, len(data), ctypes.byref(opt), ctypes.byref(handle)))
        else:
            fn = _capi.require("gr_engine_load", "Engine.load(path)")
            path = _capi.c_path("source", source)
            what = os.fsdecode(path)
            _capi.check(fn(path, ctypes.byref(opt), ctypes.byref(handle)))
        engine = cls.__new__(cls)
        engine._own(handle)  # from here on, any failure closes it (collection or close())
        lib = _capi.lib()
        runs_on = "gpu" if lib.gr_engine_device(handle) == DEVICES["gpu"] else "cpu"
        if device != "auto" and device != runs_on:
            engine.close()
            raise Error(_capi.status_name(_GR_ERR_INVALID_ARGUMENT),
                        f"Engine.load: device={device!r} contradicts {what}: it runs on the "
                        f"{runs_on.upper()} (leave device out, or rebuild the engine)")
        if names is not None and isinstance(names, (str, bytes, os.PathLike)):
            with open(names, encoding="utf-8") as f:
                names = [line.strip() for line in f if line.strip()]
        if names is None:
            names = _engine_class_names(handle)
        engine._setup(handle, list(names or []), None, None, nonfinite_is_error)
        if engine.synthetic_weights:
            warnings.warn(f"{what}: {_synthetic_notice(None)}", SyntheticWeightsWarning,
                          stacklevel=2)
        return engine

    def save(self, path: PathLike) -> None:
        """Write the engine to a file Engine.load() reads back (same graphrun version and, for a
        GPU engine, the same kind of GPU): a new file renamed over path (its mode kept), so an
        engine loaded from the old file keeps running; a link to a regular file is written
        through, a device or FIFO refused."""
        fn = _capi.require("gr_engine_save", "Engine.save")
        encoded = _capi.c_path("path", path)
        with self._use("Engine.save") as handle, self._lock:
            _capi.check(fn(handle, encoded), handle)

    def to_bytes(self) -> bytes:
        """The engine file's bytes (what save() writes)."""
        fn = _capi.require("gr_engine_save_to_memory", "Engine.to_bytes")
        free = _capi.require("gr_free", "Engine.to_bytes")
        data, size = _capi.P(), ctypes.c_size_t()
        with self._use("Engine.to_bytes") as handle, self._lock:
            _capi.check(fn(handle, ctypes.byref(data), ctypes.byref(size)), handle)
        try:
            return ctypes.string_at(data, size.value)
        finally:
            free(data)

    def _setup(self, handle: Any, names: List[str], model: Optional[Model],
               precision: Optional[str], nonfinite_is_error: bool) -> None:
        """Everything after the handle exists: what the engine reports about itself."""
        lib = _capi.lib()
        self._lock = threading.Lock()  # a run and the reading of its outputs are one operation
        self._model = model
        self._nonfinite_is_error = bool(nonfinite_is_error)
        self._class_names = names
        self._files_stats: Optional[Dict[str, Any]] = None
        self.nonfinite: List[int] = []  # NaN/Inf count per output of the last run
        info = _capi.ModelInfo()
        own_model = lib.gr_engine_model(handle)
        # Built from synthetic weights (a loaded engine file says so too): its boxes mean nothing.
        self.synthetic_weights = bool(own_model and lib.gr_model_get_info(
            own_model, ctypes.byref(info)) == 0 and info.synthetic_weights)
        self.precision: str = precision or self._built_precision()
        self.device: str = "gpu" if lib.gr_engine_device(handle) == DEVICES["gpu"] else "cpu"
        self.device_name: str = lib.gr_engine_device_name(handle).decode()
        # "letterbox" or "stretch": how detect() makes the input of an image (the preprocess
        # option, else the model's: AlexeyAB cfgs stretch unless letter_box=1)
        how = int(lib.gr_model_preprocess(lib.gr_engine_model(handle)))
        self.preprocess: str = {v: k for k, v in PREPROCESS.items()}[how]
        desc = _capi.TensorDesc()
        _capi.check(lib.gr_engine_input_desc(handle, ctypes.byref(desc)), handle)
        self.batch, self.channels, self.width, self.height = desc.n, desc.c, desc.w, desc.h
        self.micro_batch: int = int(lib.gr_engine_micro_batch(handle))
        self.inflight: int = int(lib.gr_engine_inflight(handle))
        self.output_shapes: List[Tuple[int, int, int, int]] = []
        for k in range(lib.gr_engine_output_count(handle)):
            _capi.check(lib.gr_engine_output_desc(handle, k, ctypes.byref(desc)), handle)
            self.output_shapes.append((desc.n, desc.c, desc.h, desc.w))

    def _built_precision(self) -> str:
        """A loaded engine's precision, from its layer map: the one reduced precision its layers
        use (layers without an int8/fp16 kernel stay fp32 in any engine), "fp32" when none does,
        "auto" when int8 and fp16 layers mix."""
        n = ctypes.c_int()
        with self._use("Engine.precision") as handle:
            per_layer = _capi.lib().gr_engine_layer_precision(handle, ctypes.byref(n))
        found = {per_layer[i] for i in range(n.value)} if per_layer else set()
        reduced = found - {PRECISIONS["fp32"]}
        if not reduced:
            return "fp32"
        names = {v: k for k, v in PRECISIONS.items()}
        return names[reduced.pop()] if len(reduced) == 1 else "auto"

    @property
    def files_stats(self) -> Optional[Dict[str, Any]]:
        """Where the last detect_files / detect_files_jsonl call's time went (runtime.h,
        gr_files_stats; seconds): "elapsed_s", the calling thread's waits ("main_wait_decoded_s",
        "main_wait_engine_s") and its time in this package's callback ("main_deliver_s"), the
        workers' busy time per stage ("read_s", "decode_s", "letterbox_s", "handoff_s"), the
        decoder ("gpu_decode", "decoder"), "threads", "images", and the call's time before and
        after its pipeline ran ("setup_s", "finish_s"), a device that failed mid-run
        ("devices_failed", "failed_device", "files_lost": records that are its error,
        "failed_device_error"), and "records": the records (lines) the
        call made - fewer than "images" when Ctrl-C or an exception stopped it. The last call's
        on this engine, from any thread. None before any such call."""
        return self._files_stats

    @property
    def names(self) -> Dict[int, str]:
        """Class id -> name, as detections are labelled."""
        return dict(enumerate(self._class_names))

    def run(self, x: npt.NDArray[Any]) -> List[npt.NDArray[np.float32]]:
        """Run on a whole batch: float32 (batch, channels, h, w) in [0, 1] (planar, as Darknet)
        or uint8 (batch, h, w, channels) (letterboxed bytes, what the GPU's input copy moves).
        Returns the raw outputs of this run, one float32 NCHW array per head (copies), even when
        other threads use the engine: the run and the copies happen under the engine's lock."""
        fn, x = self._input(x)
        with self._use("Engine.run") as handle, self._lock:
            _capi.check(fn(handle, x.ctypes.data), handle)
            outputs = self._outputs_locked(handle)
            self._count_nonfinite_locked(handle)
        self._check_finite()
        return outputs

    def _input(self, x: Any) -> Tuple[Callable[..., int], npt.NDArray[Any]]:
        """The C entry point for x and x as a contiguous array, after checking its shape against
        the engine's input: the C side reads batch x channels x h x w values whatever it gets."""
        b, c, h, w = self.batch, self.channels, self.height, self.width
        if not isinstance(x, np.ndarray):
            raise TypeError("run() takes a numpy array")
        lib = _capi.lib()
        if x.dtype == np.float32 and x.shape == (b, c, h, w):
            fn = lib.gr_engine_run_f32
        elif x.dtype == np.uint8 and x.shape == (b, h, w, c):
            fn = lib.gr_engine_run_u8
        else:
            raise ValueError(f"input must be float32 {(b, c, h, w)} or uint8 {(b, h, w, c)}, "
                             f"not {x.dtype} {x.shape}")
        return fn, np.ascontiguousarray(x)

    def outputs(self) -> List[npt.NDArray[np.float32]]:
        """The raw outputs of the last run (copies). With several threads on one engine, use
        what run() returns: another thread's run may come between a run and this call."""
        with self._use("Engine.outputs") as handle, self._lock:
            return self._outputs_locked(handle)

    def _outputs_locked(self, handle: Any) -> List[npt.NDArray[np.float32]]:
        result = []
        for k, shape in enumerate(self.output_shapes):
            data = ctypes.POINTER(ctypes.c_float)()
            _capi.check(_capi.lib().gr_engine_output(handle, k, ctypes.byref(data)), handle)
            result.append(np.ctypeslib.as_array(data, shape=shape).copy())
        return result

    def _count_nonfinite_locked(self, handle: Any) -> None:
        counts = []
        for k in range(len(self.output_shapes)):
            count = ctypes.c_size_t()
            _capi.check(_capi.lib().gr_engine_output_nonfinite(handle, k, ctypes.byref(count)),
                        handle)
            counts.append(count.value)
        self.nonfinite = counts

    def _check_finite(self) -> None:
        """Never silent about NaN/Inf outputs: a warning, or an error when asked for one."""
        bad = [(k, n) for k, n in enumerate(self.nonfinite) if n]
        if not bad:
            return
        message = "; ".join(f"output {k} holds {n} NaN/Inf values" for k, n in bad) + \
            " (try precision='fp32' or 'int8': fp16 overflows above 65504)"
        if self._nonfinite_is_error:
            raise Error(_capi.status_name(_GR_ERR_NUMERIC), message)
        warnings.warn(message, NonFiniteWarning, stacklevel=3)

    @overload
    def detect(self, images: ImageLike, thresh: float = ..., nms: float = ...,
               color: str = ...) -> Results: ...
    @overload
    def detect(self, images: Union[List[ImageLike], Tuple[ImageLike, ...]], thresh: float = ...,
               nms: float = ..., color: str = ...) -> List[Results]: ...

    def detect(self, images: Images, thresh: float = 0.5, nms: float = 0.45,
               color: str = "rgb") -> Union[Results, List[Results]]:
        """Detections of one image (a Results) or of each image of a list (a list of Results).

        An image is a path (str or os.PathLike), a uint8 (h, w, 3) array, a float (h, w, 3) array
        in [0, 1], or a PIL image; a (n, h, w, 3) array is n images. color: the channel order of
        arrays, "rgb" (default: load_image, PIL, imageio) or "bgr" (OpenCV's cv2.imread); paths
        and PIL images are always decoded to RGB. Images run in batches of the engine's size (a
        short last batch is padded, its padding dropped), letterboxed as the CLI does: uint8 on
        the GPU, Darknet's floats on the CPU."""
        single = not isinstance(images, (list, tuple)) and not (
            isinstance(images, np.ndarray) and images.ndim == 4)
        items: List[Any] = [images] if single else list(images)  # type: ignore[arg-type]
        if self.channels != 3:
            raise ValueError(f"detect() letterboxes RGB images; this network takes "
                             f"{self.channels} channels (use run())")
        thresh = _float_arg("thresh", thresh, 0.0, 1.0)
        nms = _float_arg("nms", nms, 0.0, 1.0)
        if color not in ("rgb", "bgr"):
            raise ValueError(f"color must be 'rgb' or 'bgr', not {color!r}")
        with self._use("Engine.detect") as handle:
            rgb = [to_rgb(im, color, f"images[{k}]" if not single else "image")
                   for k, im in enumerate(items)]
            paths = [os.fspath(im) if isinstance(im, (str, os.PathLike)) else None for im in items]
            results: List[Results] = []
            for start in range(0, len(rgb), self.batch):
                chunk = rgb[start:start + self.batch]
                boxes = self._detect_batch(handle, chunk, thresh, nms)
                results.extend(Results(b, im, self.names, p, self._model)
                               for b, im, p in zip(boxes, chunk, paths[start:start + self.batch]))
        return results[0] if single else results

    def detect_files(self, paths: Sequence[PathLike], thresh: float = 0.5, nms: float = 0.45,
                     decode: str = "auto", threads: Optional[int] = None) -> List[Dict[str, Any]]:
        """Detections of image files, one record per path in order: the CLI's JSON Lines record
        of each, parsed (the library formats it; json.loads reads it), {"input", "width",
        "height", "detections": [{"class", "class_id", "prob", "objectness", "left", "top",
        "right", "bottom"}]} with the CLI's numbers (prob and objectness to 6 decimals, the box
        to 0.1 pixel: 0.9, not float32's 0.8999999761581421), or {"input", "error"} with the
        library's one-line message for a file that cannot be read or decoded (or for each file of
        a batch the engine fails on). An image whose outputs hold NaN/Inf gets the CLI's record
        for it ("width", "height", "error", "nonfinite"). "input" is the path as given.

        The folder mode's pipeline, the C library's (gr_pool_detect_files, which `graphrun
        --input-list` runs): `threads` threads (default: the cores this process may use, at most
        16) decode and letterbox the images straight into the engine's input buffers (one per
        slot: build with inflight=3 to keep a batch running while the next fill and the last is
        reported), decode the detections and format each image's line, all in C outside the
        GIL, while this thread submits and waits in C and takes the GIL only to parse each line.
        decode: "cpu" (graphrun's decoders), "gpu" (JPEGs decoded on the engine's GPU by nvJPEG,
        other files and those it does not take on the CPU; graphrun.Error where it cannot: a CPU
        engine, a build without nvJPEG) or "auto" (the GPU where it can, else the CPU). The
        records equal the CLI's lines for the same decode; detect() on the same images gives the
        same detections (at full float precision). The engine is held for the whole call (other
        threads' calls on it wait, and so does close()).

        Ctrl-C: the pipeline's one C call runs on a helper thread while the calling thread waits,
        so a KeyboardInterrupt (or another exception from a signal handler) lands at once; it
        stops the pipeline at the next image (the runs in flight are waited for, nothing is left
        running on the engine) and is then raised: no partial list is returned.
        files_stats["records"] says how many records had been made. A path that is not str or
        os.PathLike raises TypeError, one holding a NUL character ValueError, both naming it
        (paths[k])."""
        listed, thresh, nms, threads = self._files_args(paths, thresh, nms, decode, threads)
        with self._use("Engine.detect_files") as handle, self._lock:
            return _files.detect_files(self, handle, listed, thresh, nms, decode, threads)

    def detect_files_jsonl(self, paths: Sequence[PathLike], out: Any, thresh: float = 0.5,
                           nms: float = 0.45, decode: str = "auto",
                           threads: Optional[int] = None) -> int:
        """detect_files() as JSON Lines: each image's record as the library formats it - the
        bytes `graphrun --input-list` writes for it, newline included - passed to out.write() in
        input order as it comes (out: a file opened "wb", or anything whose write takes bytes).
        No dict is made. Returns the number of lines written (len(paths)). Ctrl-C: as
        detect_files, KeyboardInterrupt once the pipeline stopped; the lines written before it
        are whole, and files_stats["records"] is their count. An exception from out.write stops
        the run the same way and is raised."""
        listed, thresh, nms, threads = self._files_args(paths, thresh, nms, decode, threads)
        write = out.write

        def line(index: int, text: bytes) -> None:
            write(text)

        with self._use("Engine.detect_files_jsonl") as handle, self._lock:
            return _files.detect_lines(self, handle, listed, thresh, nms, decode, threads, line)

    def _files_args(self, paths: Sequence[PathLike], thresh: float, nms: float, decode: str,
                    threads: Optional[int]) -> Tuple[List[str], float, float, int]:
        """detect_files' arguments checked: the paths as str, thresh, nms, threads."""
        if self.channels != 3:
            raise ValueError(f"detect_files() letterboxes RGB images; this network takes "
                             f"{self.channels} channels (use run())")
        thresh = _float_arg("thresh", thresh, 0.0, 1.0)
        nms = _float_arg("nms", nms, 0.0, 1.0)
        if decode not in _files.DECODES:
            raise ValueError(f"decode must be one of {list(_files.DECODES)}, not {decode!r}")
        if threads is None:
            threads = min(_files.usable_cores(), 16)
        threads = _int_arg("threads", threads, 1, 1024)
        if isinstance(paths, (str, bytes, os.PathLike)):
            raise TypeError("detect_files() takes a list of paths (a single path: [path])")
        listed = []
        for k, p in enumerate(paths):
            if not isinstance(p, (str, os.PathLike)) or not isinstance(os.fspath(p), str):
                raise TypeError(f"detect_files() paths[{k}] must be str or os.PathLike (of "
                                f"str), not {type(p).__name__}")
            _capi.c_path(f"detect_files() paths[{k}]", p)  # a NUL: ValueError naming it
            listed.append(os.fspath(p))
        return listed, thresh, nms, threads

    def _detect_batch(self, handle: Any, chunk: List[npt.NDArray[np.uint8]], thresh: float,
                      nms: float) -> List[List[Detection]]:
        padded = chunk + [chunk[-1]] * (self.batch - len(chunk))
        dtype = np.uint8 if self.device == "gpu" else np.float32
        fn, x = self._input(np.stack([letterbox(im, self.width, self.height, dtype,
                                                how=self.preprocess) for im in padded]))
        with self._lock:  # the run and its detections: one operation
            _capi.check(fn(handle, x.ctypes.data), handle)
            self._count_nonfinite_locked(handle)
            found = [self._detections(handle, i, im.shape[1], im.shape[0], thresh, nms)
                     for i, im in enumerate(chunk)]
        self._check_finite()
        return found

    def _detections(self, handle: Any, index: int, image_w: int, image_h: int, thresh: float,
                    nms: float) -> List[Detection]:
        lib = _capi.lib()
        opt = _capi.DetectOptions()
        _capi.check(lib.gr_detect_options_init(ctypes.byref(opt), ctypes.sizeof(opt)))
        opt.thresh, opt.nms, opt.image_w, opt.image_h = thresh, nms, image_w, image_h
        dets = ctypes.POINTER(_capi.Detection)()
        n = ctypes.c_int()
        _capi.check(lib.gr_engine_detect(handle, index, ctypes.byref(opt),
                                         ctypes.byref(dets), ctypes.byref(n)), handle)
        try:
            out = []
            for i in range(n.value):
                d = dets[i]
                name = self._class_names[d.class_id] if 0 <= d.class_id < len(
                    self._class_names) else f"class {d.class_id}"
                out.append(Detection(d.left, d.top, d.right, d.bottom, d.class_id, name, d.prob,
                                     d.objectness))
            return out
        finally:
            lib.gr_detections_free(dets)


class _PoolEngine(Engine):
    """An engine of a Pool: borrowed (the pool frees it), and keeping the pool alive."""

    def __init__(self, pool: "Pool", handle: Any, names: List[str], model: Model,
                 precision: str, nonfinite_is_error: bool) -> None:
        self._pool = pool
        self._own(handle)
        self._setup(handle, names, model, precision, nonfinite_is_error)

    def close(self) -> None:
        """Waits for the calls in flight; the pool destroys the C engine (Pool.close())."""
        self._detach()


class Pool(_Handle):
    """One engine per device (runtime.h, gr_pool_build): devices a list of CUDA ordinals, or None
    for every visible GPU (a CPU pool has one engine). The first device's engine is built (int8
    calibration and the tactic search happen there once), the others load it. .engines are
    ordinary Engines (detect, run, ...), valid until the pool is closed; .devices their ordinals
    (-1: the CPU). Spread work over them from one thread each, or from one thread in turn.
    close() closes each engine (waiting for its calls in flight) before the pool; calls after it
    raise graphrun.ClosedError. Copies and pickles are refused (TypeError)."""

    _destroy_name = "gr_pool_destroy"
    _kind = "Pool"

    def __init__(self, model: Model, devices: Optional[Sequence[int]] = None,
                 device: str = "auto", precision: str = "fp32", batch: int = 1,
                 use_cuda_graph: bool = True, calib_cache: Optional[PathLike] = None,
                 nonfinite_is_error: bool = False) -> None:
        build = _capi.require("gr_pool_build", "graphrun.Pool")
        opt = _engine_options(device, use_cuda_graph)
        opt.precision = _choice("precision", precision, PRECISIONS)
        opt.batch = _int_arg("batch", batch, 1, _MAX_BATCH)
        opt.calib_cache = _path("calib_cache", calib_cache)
        listed = [_int_arg("devices[]", d, -_INT_MAX, _INT_MAX) for d in devices or []]
        array = (ctypes.c_int * max(len(listed), 1))(*listed)
        handle = _capi.P()
        with model._use("Pool") as model_handle:
            _capi.check(build(model_handle, ctypes.byref(opt), array if listed else None,
                              len(listed), ctypes.byref(handle)))
        self._own(handle)
        lib = _capi.lib()
        names = [model.class_name(i) for i in range(model.classes)]
        count = lib.gr_pool_devices(handle)
        self.devices: List[int] = [int(lib.gr_pool_device(handle, k)) for k in range(count)]
        self.engines: List[Engine] = [
            _PoolEngine(self, lib.gr_pool_engine(handle, k), names, model, precision,
                        nonfinite_is_error) for k in range(count)]
        self.notice: str = lib.gr_pool_notice(handle).decode(errors="replace")

    def close(self) -> None:
        for engine in getattr(self, "engines", []):
            engine.close()
        super().close()

