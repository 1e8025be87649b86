"""graphrun from Python: ctypes over the C API (include/graphrun/runtime.h), no compiled extension.

    import graphrun
    model = graphrun.Model("yolo")                      # or Model(cfg="x.cfg", weights="x.weights")
    engine = model.build(device="auto", precision="int8", batch=8)
    for dets in engine.detect(["data/dog.jpg", "data/horses.jpg"]):
        for d in dets:
            print(d.class_name, d.prob, d.left, d.top, d.right, d.bottom)
    outputs = engine.run(x)     # x: float32 (batch, 3, h, w) in [0, 1] or uint8 (batch, h, w, 3)

Failures raise graphrun.Error carrying graphrun's one-line message; arguments of the wrong
shape, type or range raise ValueError / TypeError before reaching the library (ctypes would
silently truncate an integer that does not fit its C type). Outputs holding NaN/Inf raise
NonFiniteWarning (or graphrun.Error with nonfinite_is_error=True), like the C API's
gr_engine_output_nonfinite / nonfinite_is_error; weights holding NaN/Inf warn when the model
loads (or fail it with strict_weights=True).

The shared library (libgraphrun.so) is found through $GRAPHRUN_LIBRARY, then next to this
package, then in a source checkout's build/ directory, then by ctypes.util.find_library (an
installed prefix on the loader's path). Objects hold C handles and free them when collected or
closed. An engine serializes its own calls with a lock: run() returns the outputs of that run
even when other threads run the same engine (runtime.h's rule of one thread at a time per engine
is kept for them).
"""

import ctypes
import ctypes.util
import math
import numbers
import os
import threading
import warnings
from dataclasses import dataclass

import numpy as np

__all__ = ["Error", "NonFiniteWarning", "Model", "Engine", "Detection", "load_image", "letterbox",
           "version", "cuda_device_count", "library_path"]

_DEVICES = {"auto": 0, "cpu": 1, "gpu": 2}
_PRECISIONS = {"fp32": 0, "fp16": 1, "int8": 2, "auto": 3}  # auto: max_nrmse 0.003 (runtime.h)
_F32_ALGOS = {"auto": 0, "sgemm": 1, "tf32x3": 2, "implicit": 3, "direct3x3": 4}  # gr_f32_algo
# Option structs get room to grow: runtime.h only appends fields, and the *_default() functions
# fill whatever the library knows about.
_SPARE = 256
_INT_MAX = 2**31 - 1
_MAX_BATCH = 4096  # GR_MAX_BATCH (base/base.h)


class Error(RuntimeError):
    """A graphrun call failed: .status is the status name ("parse error"), str() the message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class NonFiniteWarning(RuntimeWarning):
    """Weights or outputs hold NaN/Inf: the results are meaningless."""


def _int_arg(name, value, lo, hi):
    """value as an int within [lo, hi], or TypeError / ValueError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}")
    value = int(value)
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], not {value}")
    return value


def _float_arg(name, value, lo, hi):
    """value as a finite float within [lo, hi], or TypeError / ValueError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    value = float(value)
    if not (math.isfinite(value) and lo <= value <= hi):
        raise ValueError(f"{name} must be a finite number in [{lo}, {hi}], not {value}")
    return value


class _ModelOptions(ctypes.Structure):
    _fields_ = [("builtin", ctypes.c_char_p), ("cfg_path", ctypes.c_char_p),
                ("weights_path", ctypes.c_char_p), ("seed", ctypes.c_uint64),
                ("nonfinite_weights_is_error", ctypes.c_int),
                ("_spare", ctypes.c_char * _SPARE)]


class _ModelInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("width", ctypes.c_int), ("height", ctypes.c_int),
                ("channels", ctypes.c_int), ("n_layers", ctypes.c_int), ("n_outputs", ctypes.c_int),
                ("classes", ctypes.c_int), ("synthetic_weights", ctypes.c_int),
                ("gflops", ctypes.c_double), ("n_params", ctypes.c_size_t),
                ("nonfinite_weights", ctypes.c_size_t), ("_spare", ctypes.c_char * _SPARE)]


class _EngineOptions(ctypes.Structure):
    # gr_engine_options field for field (enums are C ints).
    _fields_ = [("device", ctypes.c_int), ("precision", ctypes.c_int), ("batch", ctypes.c_int),
                ("gpu_index", ctypes.c_int), ("use_cuda_graph", ctypes.c_int),
                ("tf32", ctypes.c_int), ("fp16_accumulate", ctypes.c_int),
                ("calib_method", ctypes.c_int), ("calib_percentile", ctypes.c_float),
                ("calib_images", ctypes.POINTER(ctypes.c_char_p)),
                ("calib_cache", ctypes.c_char_p), ("calib_threads", ctypes.c_int),
                ("calib_progress", ctypes.c_void_p), ("calib_progress_user", ctypes.c_void_p),
                ("nonfinite_is_error", ctypes.c_int), ("inflight", ctypes.c_int),
                ("calib_device", ctypes.c_int), ("layer_precision", ctypes.c_void_p),
                ("n_layer_precision", ctypes.c_int), ("max_nrmse", ctypes.c_float),
                ("tactic_search", ctypes.c_int), ("timing_cache", ctypes.c_char_p),
                ("f32_algo", ctypes.c_int), ("f32_split_k", ctypes.c_int), ("pdl", ctypes.c_int),
                ("gemm_tactic", ctypes.c_int), ("micro_batch", ctypes.c_int),
                ("_spare", ctypes.c_char * _SPARE)]


class _TensorDesc(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int), ("c", ctypes.c_int), ("h", ctypes.c_int),
                ("w", ctypes.c_int), ("dtype", ctypes.c_int)]


class _Image(ctypes.Structure):
    _fields_ = [("w", ctypes.c_int), ("h", ctypes.c_int), ("c", ctypes.c_int),
                ("data", ctypes.POINTER(ctypes.c_uint8))]


class _Detection(ctypes.Structure):
    _fields_ = [("left", ctypes.c_float), ("top", ctypes.c_float), ("right", ctypes.c_float),
                ("bottom", ctypes.c_float), ("class_id", ctypes.c_int), ("prob", ctypes.c_float),
                ("objectness", ctypes.c_float)]


class _DetectOptions(ctypes.Structure):
    _fields_ = [("thresh", ctypes.c_float), ("hier_thresh", ctypes.c_float),
                ("nms", ctypes.c_float), ("image_w", ctypes.c_int), ("image_h", ctypes.c_int),
                ("_spare", ctypes.c_char * _SPARE)]


def _candidates():
    env = os.environ.get("GRAPHRUN_LIBRARY")
    if env:
        return [env]  # asked for explicitly: nothing else
    here = os.path.dirname(os.path.abspath(__file__))
    found = [os.path.join(here, "libgraphrun.so"),
             os.path.join(here, "..", "..", "build", "libgraphrun.so")]
    name = ctypes.util.find_library("graphrun")
    if name:
        found.append(name)
    return found


def _load():
    tried = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError("graphrun: cannot find libgraphrun.so (set GRAPHRUN_LIBRARY, or build it: "
                      "cmake -S . -B build && cmake --build build); tried: " + ", ".join(tried))


_lib, library_path = _load()

_P = ctypes.c_void_p
_signatures = {
    "gr_version": (ctypes.c_char_p, []),
    "gr_status_str": (ctypes.c_char_p, [ctypes.c_int]),
    "gr_last_error": (ctypes.c_char_p, []),
    "gr_cuda_device_count": (ctypes.c_int, []),
    "gr_model_options_default": (None, [ctypes.POINTER(_ModelOptions)]),
    "gr_model_load": (ctypes.c_int, [ctypes.POINTER(_ModelOptions), ctypes.POINTER(_P)]),
    "gr_model_destroy": (None, [_P]),
    "gr_model_get_info": (ctypes.c_int, [_P, ctypes.POINTER(_ModelInfo)]),
    "gr_model_class_name": (ctypes.c_char_p, [_P, ctypes.c_int]),
    "gr_model_notice": (ctypes.c_char_p, [_P]),
    "gr_model_set_class_names": (ctypes.c_int, [_P, ctypes.c_char_p]),
    "gr_engine_options_default": (None, [ctypes.POINTER(_EngineOptions)]),
    "gr_engine_build": (ctypes.c_int, [_P, ctypes.POINTER(_EngineOptions), ctypes.POINTER(_P)]),
    "gr_engine_destroy": (None, [_P]),
    "gr_engine_device": (ctypes.c_int, [_P]),
    "gr_engine_micro_batch": (ctypes.c_int, [_P]),
    "gr_engine_device_name": (ctypes.c_char_p, [_P]),
    "gr_engine_input_desc": (ctypes.c_int, [_P, ctypes.POINTER(_TensorDesc)]),
    "gr_engine_output_count": (ctypes.c_int, [_P]),
    "gr_engine_output_desc": (ctypes.c_int, [_P, ctypes.c_int, ctypes.POINTER(_TensorDesc)]),
    "gr_engine_run_f32": (ctypes.c_int, [_P, _P]),
    "gr_engine_run_u8": (ctypes.c_int, [_P, _P]),
    "gr_engine_output": (ctypes.c_int, [_P, ctypes.c_int,
                                        ctypes.POINTER(ctypes.POINTER(ctypes.c_float))]),
    "gr_engine_detect": (ctypes.c_int, [_P, ctypes.c_int, ctypes.POINTER(_DetectOptions),
                                        ctypes.POINTER(ctypes.POINTER(_Detection)),
                                        ctypes.POINTER(ctypes.c_int)]),
    "gr_engine_output_nonfinite": (ctypes.c_int, [_P, ctypes.c_int,
                                                  ctypes.POINTER(ctypes.c_size_t)]),
    "gr_engine_last_error": (ctypes.c_char_p, [_P]),
    "gr_detect_options_default": (None, [ctypes.POINTER(_DetectOptions)]),
    "gr_detections_free": (None, [ctypes.POINTER(_Detection)]),
    "gr_image_load": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(ctypes.POINTER(_Image))]),
    "gr_image_destroy": (None, [ctypes.POINTER(_Image)]),
    "gr_image_letterbox": (ctypes.c_int, [ctypes.POINTER(_Image), ctypes.c_int, ctypes.c_int, _P]),
    "gr_image_letterbox_u8": (ctypes.c_int, [ctypes.POINTER(_Image), ctypes.c_int, ctypes.c_int,
                                             _P]),
}
for _name, (_res, _args) in _signatures.items():
    _fn = getattr(_lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args


def _check(status, engine=None):
    if status == 0:
        return
    message = _lib.gr_last_error().decode(errors="replace")
    if not message and engine:
        message = _lib.gr_engine_last_error(engine).decode(errors="replace")
    raise Error(_lib.gr_status_str(status).decode(), message or "graphrun call failed")


def _path(p):
    return os.fsencode(p) if p is not None else None


def version():
    """The library's version, e.g. "0.1.0"."""
    return _lib.gr_version().decode()


def cuda_device_count():
    """CUDA devices visible to graphrun (0 without a GPU or driver)."""
    return _lib.gr_cuda_device_count()


@dataclass
class Detection:
    """One box, in pixels of the original image."""
    left: float
    top: float
    right: float
    bottom: float
    class_id: int
    class_name: str
    prob: float        # objectness x class probability
    objectness: float


def load_image(path):
    """Decode an image file (JPEG, PNG or BMP) with graphrun's decoders: uint8 (h, w, 3) RGB."""
    im = ctypes.POINTER(_Image)()
    _check(_lib.gr_image_load(_path(path), ctypes.byref(im)))
    try:
        c = im.contents
        return np.ctypeslib.as_array(c.data, shape=(c.h, c.w, c.c)).copy()
    finally:
        _lib.gr_image_destroy(im)


def _as_image(array):
    """A gr_image viewing a (h, w, 3) uint8 array (kept alive by the caller)."""
    if not isinstance(array, np.ndarray) or array.dtype != np.uint8 or array.ndim != 3 \
            or array.shape[2] != 3:
        raise TypeError("an image is a path or a uint8 numpy array of shape (h, w, 3), RGB")
    array = np.ascontiguousarray(array)
    im = _Image(array.shape[1], array.shape[0], 3,
                array.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)))
    return im, array


def letterbox(image, width, height, dtype=np.uint8):
    """Darknet's letterbox of an image (a path or a (h, w, 3) uint8 array) to width x height:
    uint8 (height, width, 3) HWC, or float32 (3, height, width) CHW in [0, 1] exactly as Darknet
    computes it (dtype=np.float32)."""
    width = _int_arg("width", width, 1, 1 << 16)
    height = _int_arg("height", height, 1, 1 << 16)
    if not isinstance(image, np.ndarray):
        image = load_image(image)
    im, keep = _as_image(image)
    if dtype == np.uint8:
        out = np.empty((height, width, 3), np.uint8)
        _check(_lib.gr_image_letterbox_u8(ctypes.byref(im), width, height, out.ctypes.data))
    elif dtype == np.float32:
        out = np.empty((3, height, width), np.float32)
        _check(_lib.gr_image_letterbox(ctypes.byref(im), width, height, out.ctypes.data))
    else:
        raise ValueError("letterbox dtype is np.uint8 or np.float32")
    del keep
    return out


class _Handle:
    """Owns a C handle: close() (or leaving a with-block, or collection) releases it once."""

    _handle = None  # until built: close() and __del__ after a failed __init__ do nothing
    _destroy = None

    def close(self):
        if self._handle:
            type(self)._destroy(self._handle)
            self._handle = _P()

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Model(_Handle):
    """A network: a built-in name ("yolo", "yolov2-tiny", "yolov3-tiny") or a Darknet cfg, with
    Darknet weights or deterministic synthetic ones (seed)."""

    _destroy = _lib.gr_model_destroy

    def __init__(self, builtin="yolo", cfg=None, weights=None, seed=1, names=None,
                 strict_weights=False):
        seed = _int_arg("seed", seed, 0, 2**64 - 1)
        opt = _ModelOptions()
        _lib.gr_model_options_default(ctypes.byref(opt))
        opt.builtin = None if cfg else builtin.encode()
        opt.cfg_path = _path(cfg)
        opt.weights_path = _path(weights)
        opt.seed = seed
        opt.nonfinite_weights_is_error = 1 if strict_weights else 0
        self._handle = _P()
        _check(_lib.gr_model_load(ctypes.byref(opt), ctypes.byref(self._handle)))
        if names:
            _check(_lib.gr_model_set_class_names(self._handle, _path(names)))
        info = _ModelInfo()
        _check(_lib.gr_model_get_info(self._handle, ctypes.byref(info)))
        self.name = info.name.decode()
        self.width, self.height, self.channels = info.width, info.height, info.channels
        self.n_layers, self.classes = info.n_layers, info.classes
        self.synthetic_weights = bool(info.synthetic_weights)
        self.gflops = info.gflops
        self.nonfinite_weights = info.nonfinite_weights
        self.notice = _lib.gr_model_notice(self._handle).decode(errors="replace")
        if self.nonfinite_weights:
            warnings.warn(self.notice, NonFiniteWarning, stacklevel=2)

    def class_name(self, class_id):
        class_id = _int_arg("class_id", class_id, -2**31, _INT_MAX)
        return _lib.gr_model_class_name(self._handle, class_id).decode()

    def build(self, device="auto", precision="fp32", batch=1, use_cuda_graph=True,
              calib_cache=None, calib_images=None, f32_algo="auto", nonfinite_is_error=False,
              micro_batch=0):
        """An engine for this model (see Engine)."""
        return Engine(self, device, precision, batch, use_cuda_graph, calib_cache, calib_images,
                      f32_algo, nonfinite_is_error, micro_batch)


class Engine(_Handle):
    """A built engine: device "auto" | "cpu" | "gpu", precision "fp32" | "fp16" | "int8" | "auto"
    (int8 or fp16 per layer within an output NRMSE of 0.003, docs/calibration.md), and the
    number of images per run; f32_algo "auto" | "sgemm" | "tf32x3" | "implicit" | "direct3x3"
    picks the GPU's fp32 convolution algorithm (runtime.h, gr_f32_algo). Keeps the class names of
    its model. Outputs holding NaN/Inf raise NonFiniteWarning, or graphrun.Error (status
    "non-finite output") with nonfinite_is_error=True; the outputs stay readable through outputs()
    either way. micro_batch: images per pass of the GPU graph, 0 (auto: measured at build) or a
    divisor of batch (runtime.h); the engine's choice is its micro_batch attribute."""

    _destroy = _lib.gr_engine_destroy

    def __init__(self, model, device="auto", precision="fp32", batch=1, use_cuda_graph=True,
                 calib_cache=None, calib_images=None, f32_algo="auto", nonfinite_is_error=False,
                 micro_batch=0):
        batch = _int_arg("batch", batch, 1, _MAX_BATCH)
        micro_batch = _int_arg("micro_batch", micro_batch, 0, batch)
        self._lock = threading.Lock()  # a run and the reading of its outputs are one operation
        self._nonfinite_is_error = bool(nonfinite_is_error)
        self.nonfinite = []  # NaN/Inf count per output of the last run
        if device not in _DEVICES:
            raise ValueError(f"device {device!r} is not one of {sorted(_DEVICES)}")
        if precision not in _PRECISIONS:
            raise ValueError(f"precision {precision!r} is not one of {sorted(_PRECISIONS)}")
        if f32_algo not in _F32_ALGOS:
            raise ValueError(f"f32_algo {f32_algo!r} is not one of {sorted(_F32_ALGOS)}")
        opt = _EngineOptions()
        _lib.gr_engine_options_default(ctypes.byref(opt))
        opt.device = _DEVICES[device]
        opt.precision = _PRECISIONS[precision]
        opt.batch = batch
        opt.use_cuda_graph = 1 if use_cuda_graph else 0
        opt.f32_algo = _F32_ALGOS[f32_algo]
        opt.micro_batch = micro_batch
        opt.calib_cache = _path(calib_cache)
        if calib_images is not None:
            paths = (ctypes.c_char_p * (len(calib_images) + 1))(
                *[_path(p) for p in calib_images], None)
            opt.calib_images = paths
        self._handle = _P()
        _check(_lib.gr_engine_build(model._handle, ctypes.byref(opt), ctypes.byref(self._handle)))
        self._class_names = [model.class_name(i) for i in range(model.classes)]
        self.precision = precision
        self.device = "gpu" if _lib.gr_engine_device(self._handle) == _DEVICES["gpu"] else "cpu"
        self.device_name = _lib.gr_engine_device_name(self._handle).decode()
        self.micro_batch = _lib.gr_engine_micro_batch(self._handle)
        desc = _TensorDesc()
        _check(_lib.gr_engine_input_desc(self._handle, ctypes.byref(desc)), self._handle)
        self.batch, self.channels, self.width, self.height = desc.n, desc.c, desc.w, desc.h
        self.output_shapes = []
        for k in range(_lib.gr_engine_output_count(self._handle)):
            _check(_lib.gr_engine_output_desc(self._handle, k, ctypes.byref(desc)), self._handle)
            self.output_shapes.append((desc.n, desc.c, desc.h, desc.w))

    def run(self, x):
        """Run on a whole batch: float32 (batch, channels, h, w) in [0, 1] (planar, as Darknet)
        or uint8 (batch, h, w, channels) (letterboxed bytes, what the GPU's input copy moves).
        Returns the raw outputs of this run, one float32 NCHW array per head (copies), even when
        other threads use the engine: the run and the copies happen under the engine's lock."""
        fn, x = self._input(x)
        with self._lock:
            _check(fn(self._handle, x.ctypes.data), self._handle)
            outputs = self._outputs_locked()
            self._count_nonfinite_locked()
        self._check_finite()
        return outputs

    def _input(self, x):
        """The C entry point for x and x as a contiguous array, after checking its shape against
        the engine's input: the C side reads batch x channels x h x w values whatever it gets."""
        b, c, h, w = self.batch, self.channels, self.height, self.width
        if not isinstance(x, np.ndarray):
            raise TypeError("run() takes a numpy array")
        if x.dtype == np.float32 and x.shape == (b, c, h, w):
            fn = _lib.gr_engine_run_f32
        elif x.dtype == np.uint8 and x.shape == (b, h, w, c):
            fn = _lib.gr_engine_run_u8
        else:
            raise ValueError(f"input must be float32 {(b, c, h, w)} or uint8 {(b, h, w, c)}, "
                             f"not {x.dtype} {x.shape}")
        return fn, np.ascontiguousarray(x)

    def outputs(self):
        """The raw outputs of the last run (copies). With several threads on one engine, use
        what run() returns: another thread's run may come between a run and this call."""
        with self._lock:
            return self._outputs_locked()

    def _outputs_locked(self):
        result = []
        for k, shape in enumerate(self.output_shapes):
            data = ctypes.POINTER(ctypes.c_float)()
            _check(_lib.gr_engine_output(self._handle, k, ctypes.byref(data)), self._handle)
            result.append(np.ctypeslib.as_array(data, shape=shape).copy())
        return result

    def _count_nonfinite_locked(self):
        """NaN/Inf per output of the last run, into self.nonfinite."""
        counts = []
        for k in range(len(self.output_shapes)):
            count = ctypes.c_size_t()
            _check(_lib.gr_engine_output_nonfinite(self._handle, k, ctypes.byref(count)),
                   self._handle)
            counts.append(count.value)
        self.nonfinite = counts

    def _check_finite(self):
        """Never silent about NaN/Inf outputs: a warning, or an error when asked for one."""
        bad = [(k, n) for k, n in enumerate(self.nonfinite) if n]
        if not bad:
            return
        message = "; ".join(f"output {k} holds {n} NaN/Inf values" for k, n in bad) + \
            " (try precision='fp32' or 'int8': fp16 overflows above 65504)"
        if self._nonfinite_is_error:
            raise Error(_lib.gr_status_str(13).decode(), message)  # GR_ERR_NUMERIC
        warnings.warn(message, NonFiniteWarning, stacklevel=3)

    def detect(self, images, thresh=0.5, nms=0.45):
        """Detections for each image (paths or (h, w, 3) uint8 RGB arrays), a list per image,
        in batches of the engine's size (a short last batch is padded, its padding dropped).
        Images are letterboxed as the CLI does: uint8 for the GPU, Darknet's floats on the CPU."""
        if isinstance(images, (str, bytes, os.PathLike, np.ndarray)):
            raise TypeError("detect() takes a list of images")
        if self.channels != 3:
            raise ValueError(f"detect() letterboxes RGB images; this network takes "
                             f"{self.channels} channels (use run())")
        thresh = _float_arg("thresh", thresh, 0.0, 1.0)
        nms = _float_arg("nms", nms, 0.0, 1.0)
        images = [im if isinstance(im, np.ndarray) else load_image(im) for im in images]
        results = []
        u8 = self.device == "gpu"
        for start in range(0, len(images), self.batch):
            chunk = images[start:start + self.batch]
            padded = chunk + [chunk[-1]] * (self.batch - len(chunk))
            dtype = np.uint8 if u8 else np.float32
            fn, x = self._input(
                np.stack([letterbox(im, self.width, self.height, dtype) for im in padded]))
            with self._lock:  # the run and its detections: one operation
                _check(fn(self._handle, x.ctypes.data), self._handle)
                self._count_nonfinite_locked()
                found = [self._detections(i, im.shape[1], im.shape[0], thresh, nms)
                         for i, im in enumerate(chunk)]
            self._check_finite()
            results.extend(found)
        return results

    def _detections(self, index, image_w, image_h, thresh, nms):
        opt = _DetectOptions()
        _lib.gr_detect_options_default(ctypes.byref(opt))
        opt.thresh, opt.nms, opt.image_w, opt.image_h = thresh, nms, image_w, image_h
        dets = ctypes.POINTER(_Detection)()
        n = ctypes.c_int()
        _check(_lib.gr_engine_detect(self._handle, index, ctypes.byref(opt), ctypes.byref(dets),
                                     ctypes.byref(n)), self._handle)
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
            _lib.gr_detections_free(dets)
