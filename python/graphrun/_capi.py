"""The C API through ctypes: where libgraphrun.so is found, the mirrors of runtime.h's structs and
the signatures of the functions the package calls. Nothing here is public; graphrun/__init__.py
re-exports what is.

The library is loaded on first use (not at import), from the first of:
  1. load_library(path), or $GRAPHRUN_LIBRARY: that file and nothing else;
  2. beside this package: a copy bundled in graphrun/ (libgraphrun.so[.0]);
  3. the prefix the package was installed into: `cmake --install` writes graphrun/_install.py with
     the library directory relative to the package, and <prefix>/lib*/libgraphrun.so is tried for a
     package under <prefix>/lib*/python3*/{dist,site}-packages/graphrun;
  4. build/ of the source checkout the package lies in (python/graphrun -> build/);
  5. the system's loader (LD_LIBRARY_PATH, rpath, ld.so.cache).
Every path is relative to this file, so a moved prefix or checkout still finds its library.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import sysconfig
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

LIBRARY_ENV = "GRAPHRUN_LIBRARY"
_SOVERSION = 0  # SOVERSION in CMakeLists.txt
_FILE_NAMES = ("libgraphrun.so", f"libgraphrun.so.{_SOVERSION}")
_HERE = os.path.dirname(os.path.abspath(__file__))


class Error(RuntimeError):
    """A graphrun call failed: .status is the status name ("parse error"), str() the message."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


class ClosedError(Error):
    """A call on a Model, Engine or Pool after its close() (or on a Pool's engine after the
    pool's): .status is "invalid state" (GR_ERR_STATE's name)."""

    def __init__(self, message: str) -> None:
        super().__init__("invalid state", message)


class LibraryNotFoundError(OSError):
    """libgraphrun.so was not found or could not be loaded; the message lists every place tried."""


# ---- the mirrors of runtime.h's structs ----------------------------------------------------------
# Field for field, in runtime.h's order (enums are C ints). runtime.h only appends fields: append
# them here too (python/tests/test_graphrun.py compares these lists with the header). The option
# structs need no padding: they begin with struct_size, set to ctypes.sizeof(mirror) by the C
# *_init functions, and the library gives the fields past it their defaults.

MODEL_OPTIONS_FIELDS: List[Tuple[str, Any]] = [
    ("struct_size", ctypes.c_uint32), ("builtin", ctypes.c_char_p), ("cfg_path", ctypes.c_char_p),
    ("weights_path", ctypes.c_char_p), ("seed", ctypes.c_uint64),
    ("nonfinite_weights_is_error", ctypes.c_int),
]

ENGINE_OPTIONS_FIELDS: List[Tuple[str, Any]] = [
    ("struct_size", ctypes.c_uint32), ("device", ctypes.c_int), ("precision", ctypes.c_int),
    ("batch", ctypes.c_int), ("gpu_index", ctypes.c_int), ("use_cuda_graph", ctypes.c_int),
    ("tf32", ctypes.c_int), ("fp16_accumulate", ctypes.c_int), ("calib_method", ctypes.c_int),
    ("calib_percentile", ctypes.c_float), ("calib_images", ctypes.POINTER(ctypes.c_char_p)),
    ("calib_cache", ctypes.c_char_p), ("calib_threads", ctypes.c_int),
    ("calib_progress", ctypes.c_void_p), ("calib_progress_user", ctypes.c_void_p),
    ("nonfinite_is_error", ctypes.c_int), ("inflight", ctypes.c_int),
    ("calib_device", ctypes.c_int), ("layer_precision", ctypes.c_void_p),
    ("n_layer_precision", ctypes.c_int), ("max_nrmse", ctypes.c_float),
    ("tactic_search", ctypes.c_int), ("timing_cache", ctypes.c_char_p),
    ("f32_algo", ctypes.c_int), ("f32_split_k", ctypes.c_int), ("pdl", ctypes.c_int),
    ("gemm_tactic", ctypes.c_int), ("micro_batch", ctypes.c_int),
    ("jpeg_decoder", ctypes.c_int), ("executor", ctypes.c_int), ("preprocess", ctypes.c_int),
    ("calib_max_images", ctypes.c_int),
]

DETECT_OPTIONS_FIELDS: List[Tuple[str, Any]] = [
    ("struct_size", ctypes.c_uint32), ("thresh", ctypes.c_float), ("hier_thresh", ctypes.c_float),
    ("nms", ctypes.c_float), ("image_w", ctypes.c_int), ("image_h", ctypes.c_int),
    ("preprocess", ctypes.c_int),
]


FILES_OPTIONS_FIELDS: List[Tuple[str, Any]] = [
    ("struct_size", ctypes.c_uint32), ("threads", ctypes.c_int), ("thresh", ctypes.c_float),
    ("nms", ctypes.c_float), ("decode", ctypes.c_int), ("fast_decode", ctypes.c_int),
    ("prepare", ctypes.c_void_p), ("started", ctypes.c_void_p), ("jsonl", ctypes.c_int),
    ("class_names", ctypes.POINTER(ctypes.c_char_p)), ("n_class_names", ctypes.c_int),
]


class ModelOptions(ctypes.Structure):
    _fields_ = MODEL_OPTIONS_FIELDS


class EngineOptions(ctypes.Structure):
    _fields_ = ENGINE_OPTIONS_FIELDS


class DetectOptions(ctypes.Structure):
    _fields_ = DETECT_OPTIONS_FIELDS


class ModelInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("width", ctypes.c_int), ("height", ctypes.c_int),
                ("channels", ctypes.c_int), ("n_layers", ctypes.c_int), ("n_outputs", ctypes.c_int),
                ("classes", ctypes.c_int), ("synthetic_weights", ctypes.c_int),
                ("gflops", ctypes.c_double), ("n_params", ctypes.c_size_t),
                ("nonfinite_weights", ctypes.c_size_t)]


class TensorDesc(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int), ("c", ctypes.c_int), ("h", ctypes.c_int),
                ("w", ctypes.c_int), ("dtype", ctypes.c_int)]


class Image(ctypes.Structure):
    _fields_ = [("w", ctypes.c_int), ("h", ctypes.c_int), ("c", ctypes.c_int),
                ("data", ctypes.POINTER(ctypes.c_uint8))]


class Detection(ctypes.Structure):
    _fields_ = [("left", ctypes.c_float), ("top", ctypes.c_float), ("right", ctypes.c_float),
                ("bottom", ctypes.c_float), ("class_id", ctypes.c_int), ("prob", ctypes.c_float),
                ("objectness", ctypes.c_float)]


class FilesOptions(ctypes.Structure):
    _fields_ = FILES_OPTIONS_FIELDS


class FilesStats(ctypes.Structure):
    """gr_files_stats: where a gr_pool_detect_files call's time went (seconds), its setup."""
    _d = ctypes.c_double
    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("images", ctypes.c_int), ("batch", ctypes.c_int),
        ("buffers", ctypes.c_int), ("devices", ctypes.c_int), ("threads", ctypes.c_int),
        ("cores", ctypes.c_int), ("gpu_decode", ctypes.c_int), ("decoder", ctypes.c_char * 256),
        ("elapsed_s", _d), ("main_cpu_s", _d), ("main_wait_decoded_s", _d),
        ("main_wait_engine_s", _d), ("main_report_s", _d), ("main_report_own_s", _d),
        ("main_deliver_s", _d), ("main_deliver_cpu_s", _d), ("workers_blocked_s", _d),
        ("workers_report_s", _d), ("read_s", _d), ("decode_s", _d), ("letterbox_s", _d),
        ("engine_s", _d), ("gpu_decode_s", _d), ("handoff_s", _d),
        ("gpu_decoded", ctypes.c_int), ("latency_p50_s", _d), ("latency_p99_s", _d),
        ("setup_s", _d), ("finish_s", _d),
        ("devices_failed", ctypes.c_int), ("failed_device", ctypes.c_int),
        ("files_lost", ctypes.c_int), ("batches_moved", ctypes.c_int),
        ("failed_device_error", ctypes.c_char * 512),
    ]

    def as_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for name, _ in self._fields_:
            if name != "struct_size":
                value = getattr(self, name)
                out[name] = value.decode(errors="replace") if isinstance(value, bytes) else value
        return out


class FileResult(ctypes.Structure):
    """gr_file_result: what gr_pool_detect_files gives its callback for one file."""
    _fields_ = [
        ("path", ctypes.c_char_p),
        ("index", ctypes.c_int),
        ("width", ctypes.c_int),
        ("height", ctypes.c_int),
        ("failure", ctypes.c_int),  # gr_file_failure: 0 none, else read / run / detections / device
        ("status", ctypes.c_int),
        ("error", ctypes.c_char_p),
        ("nonfinite", ctypes.c_size_t),
        ("detections", ctypes.POINTER(Detection)),
        ("n_detections", ctypes.c_int),
        ("batch_end", ctypes.c_int),
        ("jsonl", ctypes.c_void_p),  # the image's JSON Lines record (FilesOptions.jsonl = 1)
        ("jsonl_len", ctypes.c_size_t),
    ]


# gr_file_fn: called on the thread that called gr_pool_detect_files (ctypes takes the GIL).
FILE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(FileResult))


# ---- signatures ----------------------------------------------------------------------------------

P = ctypes.c_void_p
_I = ctypes.c_int
_S = ctypes.c_char_p
_ptr = ctypes.POINTER

_SIGNATURES: Dict[str, Tuple[Any, List[Any]]] = {
    "gr_version": (_S, []),
    "gr_status_str": (_S, [_I]),
    "gr_last_error": (_S, []),
    "gr_cuda_device_count": (_I, []),
    "gr_model_options_init": (_I, [_ptr(ModelOptions), ctypes.c_size_t]),
    "gr_model_load": (_I, [_ptr(ModelOptions), _ptr(P)]),
    "gr_model_destroy": (None, [P]),
    "gr_model_get_info": (_I, [P, _ptr(ModelInfo)]),
    "gr_model_class_name": (_S, [P, _I]),
    "gr_model_notice": (_S, [P]),
    "gr_model_set_class_names": (_I, [P, _S]),
    "gr_engine_options_init": (_I, [_ptr(EngineOptions), ctypes.c_size_t]),
    "gr_engine_build": (_I, [P, _ptr(EngineOptions), _ptr(P)]),
    "gr_engine_destroy": (None, [P]),
    "gr_engine_device": (_I, [P]),
    "gr_engine_device_name": (_S, [P]),
    "gr_engine_model": (P, [P]),
    "gr_engine_input_desc": (_I, [P, _ptr(TensorDesc)]),
    "gr_engine_output_count": (_I, [P]),
    "gr_engine_output_desc": (_I, [P, _I, _ptr(TensorDesc)]),
    "gr_engine_run_f32": (_I, [P, P]),
    "gr_engine_run_u8": (_I, [P, P]),
    "gr_engine_output": (_I, [P, _I, _ptr(_ptr(ctypes.c_float))]),
    "gr_engine_inflight": (_I, [P]),
    "gr_engine_detect": (_I, [P, _I, _ptr(DetectOptions), _ptr(_ptr(Detection)), _ptr(_I)]),
    "gr_engine_output_nonfinite": (_I, [P, _I, _ptr(ctypes.c_size_t)]),
    "gr_engine_micro_batch": (_I, [P]),
    "gr_engine_layer_precision": (_ptr(_I), [P, _ptr(_I)]),
    "gr_engine_last_error": (_S, [P]),
    "gr_detect_options_init": (_I, [_ptr(DetectOptions), ctypes.c_size_t]),
    "gr_detections_free": (None, [_ptr(Detection)]),
    "gr_image_load": (_I, [_S, _ptr(_ptr(Image))]),
    "gr_image_write": (_I, [_ptr(Image), _S]),
    "gr_image_destroy": (None, [_ptr(Image)]),
    "gr_image_letterbox": (_I, [_ptr(Image), _I, _I, P]),
    "gr_image_letterbox_u8": (_I, [_ptr(Image), _I, _I, P]),
    "gr_image_preprocess": (_I, [_ptr(Image), _I, _I, _I, P]),
    "gr_image_preprocess_u8": (_I, [_ptr(Image), _I, _I, _I, P]),
    "gr_model_preprocess": (_I, [P]),
    "gr_image_draw_detections": (_I, [_ptr(Image), _ptr(Detection), _I, P]),
}

# Engine files (runtime.h, "engine files"): newer than some libraries; Engine.save/load say so
# when the loaded library lacks them.
_OPTIONAL_SIGNATURES: Dict[str, Tuple[Any, List[Any]]] = {
    "gr_engine_save": (_I, [P, _S]),
    "gr_engine_save_to_memory": (_I, [P, _ptr(P), _ptr(ctypes.c_size_t)]),
    "gr_free": (None, [P]),
    "gr_engine_load": (_I, [_S, _ptr(EngineOptions), _ptr(P)]),
    "gr_engine_load_from_memory": (_I, [P, ctypes.c_size_t, _ptr(EngineOptions), _ptr(P)]),
    # Pools (runtime.h, "pools"): graphrun.Pool.
    "gr_pool_build": (_I, [P, _ptr(EngineOptions), _ptr(_I), _I, _ptr(P)]),
    "gr_pool_destroy": (None, [P]),
    "gr_pool_devices": (_I, [P]),
    "gr_pool_engine": (P, [P, _I]),
    "gr_pool_device": (_I, [P, _I]),
    "gr_pool_notice": (_S, [P]),
    # The folder pipeline (runtime.h, "image files to detections"): Engine.detect_files, on a
    # pool of its one engine.
    "gr_pool_wrap": (_I, [_ptr(P), _I, _ptr(P)]),
    "gr_pool_open_jpeg_decoders": (_I, [P]),
    "gr_files_options_init": (_I, [_ptr(FilesOptions), ctypes.c_size_t]),
    "gr_pool_detect_files": (_I, [P, _ptr(_S), _I, _ptr(FilesOptions), FILE_FN, P,
                             _ptr(FilesStats)]),
}


# ---- finding and loading the library -------------------------------------------------------------

def _installed_library_dirs() -> List[str]:
    """The library directories of the prefix this package was installed into, if any."""
    dirs = []
    try:  # written by cmake --install
        installed = importlib.import_module(f"{__package__}._install")
        dirs.append(os.path.normpath(os.path.join(_HERE, str(installed.LIBDIR_FROM_PACKAGE))))
    except ImportError:
        pass
    site = os.path.dirname(_HERE)                    # <prefix>/lib/python3/dist-packages
    python_dir = os.path.dirname(site)               # <prefix>/lib/python3
    if os.path.basename(site) in ("dist-packages", "site-packages") and \
            os.path.basename(python_dir).startswith("python"):
        prefix = os.path.dirname(os.path.dirname(python_dir))
        multiarch = sysconfig.get_config_var("MULTIARCH")
        for sub in ["lib", "lib64"] + ([os.path.join("lib", multiarch)] if multiarch else []):
            path = os.path.join(prefix, sub)
            if path not in dirs:
                dirs.append(path)
    return dirs


def candidates(explicit: Optional[str] = None) -> List[str]:
    """The files to try, in order (a bare name is left to the system's loader)."""
    if explicit:
        return [explicit]
    env = os.environ.get(LIBRARY_ENV)
    if env:
        return [env]  # asked for explicitly: nothing else
    dirs = [_HERE] + _installed_library_dirs()
    checkout = os.path.normpath(os.path.join(_HERE, "..", ".."))
    if os.path.exists(os.path.join(checkout, "CMakeLists.txt")):  # python/graphrun in the source
        dirs.append(os.path.join(checkout, "build"))
    found = [os.path.join(d, name) for d in dirs for name in _FILE_NAMES]
    return found + [f"libgraphrun.so.{_SOVERSION}", "libgraphrun.so"]


class _Loaded:
    lib: Optional[ctypes.CDLL] = None
    path: Optional[str] = None
    lock = threading.Lock()


def _bind(lib: ctypes.CDLL) -> None:
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)  # AttributeError names a symbol an old library lacks
        fn.restype = restype
        fn.argtypes = argtypes
    for name, (restype, argtypes) in _OPTIONAL_SIGNATURES.items():
        if hasattr(lib, name):
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes


def load_library(path: Optional[str] = None) -> str:
    """Load libgraphrun.so now: `path` if given (else $GRAPHRUN_LIBRARY, else the search in this
    module's docstring). Returns the path loaded. Calling it again with the same or no path is a
    no-op; another path once a library is loaded raises Error."""
    path = os.fspath(path) if path is not None else None
    with _Loaded.lock:
        if _Loaded.lib is not None:
            if path and os.path.realpath(path) != os.path.realpath(str(_Loaded.path)):
                raise Error("invalid argument", f"graphrun: {_Loaded.path} is loaded already; "
                            f"cannot switch to {path} in this process")
            return str(_Loaded.path)
        tried = []
        if not path and not os.environ.get(LIBRARY_ENV):
            tried.append(f"${LIBRARY_ENV} (unset)")
        for candidate in candidates(path):
            if os.sep in candidate and not os.path.exists(candidate):
                tried.append(f"{candidate} (no such file)")
                continue
            try:
                lib = ctypes.CDLL(candidate)
            except OSError as e:
                tried.append(f"{candidate} ({e})")
                continue
            try:
                _bind(lib)
            except AttributeError as e:
                tried.append(f"{candidate} (too old for this package: {e})")
                continue
            _Loaded.lib, _Loaded.path = lib, candidate
            return candidate
        raise LibraryNotFoundError(
            "graphrun: cannot load libgraphrun.so; tried: " + "; ".join(tried) +
            f". Set {LIBRARY_ENV}=/path/to/libgraphrun.so, or build it "
            "(cmake -S . -B build && cmake --build build)")


def lib() -> Any:
    """The loaded library (loading it on first use). Typed Any: ctypes attributes are dynamic."""
    if _Loaded.lib is None:
        load_library()
    return _Loaded.lib


def library_path() -> str:
    """The path of the loaded libgraphrun.so (loading it on first use)."""
    lib()
    return str(_Loaded.path)


def has(name: str) -> bool:
    """Whether the loaded library exports `name` (for functions newer than some libraries)."""
    return hasattr(lib(), name)


def require(name: str, what: str) -> Callable[..., Any]:
    """The function `name`, or Error saying the loaded library is too old for `what`."""
    if not has(name):
        raise Error("unsupported", f"{what} needs {name}, which {library_path()} lacks: the "
                    "library is older than this graphrun package (rebuild or reinstall it)")
    return getattr(lib(), name)  # type: ignore[no-any-return]


def check(status: int, engine: Optional[int] = None, message: Optional[str] = None) -> None:
    """Raise Error with graphrun's message unless status is GR_OK. message: the call's
    gr_last_error() where the call ran on another thread (the message is per thread)."""
    if status == 0:
        return
    if message is None:
        message = lib().gr_last_error().decode(errors="replace")
    if not message and engine:
        message = lib().gr_engine_last_error(engine).decode(errors="replace")
    raise Error(lib().gr_status_str(status).decode(), message or "graphrun call failed")


def status_name(status: int) -> str:
    return str(lib().gr_status_str(status).decode())


def c_path(name: str, path: Any) -> bytes:
    """A path argument as the bytes C reads: str, bytes or os.PathLike, else TypeError; a NUL
    byte (C would read the path only up to it: "dog.jpg\\0x" would open dog.jpg) is a ValueError.
    Both name the argument (`name`, e.g. "paths[3]") and show the path."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"{name} must be a path (str, bytes or os.PathLike), not "
                        f"{type(path).__name__}")
    encoded = os.fsencode(path)
    if b"\0" in encoded:
        head = os.fsdecode(encoded.split(b"\0")[0])
        raise ValueError(f"{name} {os.fsdecode(encoded)!r} holds a NUL character (C would read "
                         f"only {head!r})")
    return encoded


def c_paths(paths: Sequence[Any], name: str = "paths") -> Any:
    """A NULL-terminated char *[] of paths, each checked by c_path (keep the result alive while C
    reads it)."""
    encoded = [c_path(f"{name}[{k}]", p) for k, p in enumerate(paths)]
    return (ctypes.c_char_p * (len(encoded) + 1))(*encoded, None)
