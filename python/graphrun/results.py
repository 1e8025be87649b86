"""Images in and detections out: what detect() accepts (paths, uint8 or float arrays in either
colour order, PIL images), the Detection record and the per-image Results with NumPy arrays,
plot() and save(). Drawing and writing go through the C library (gr_image_draw_detections,
gr_image_write), so a picture from Python looks like the CLI's."""

from __future__ import annotations

import contextlib
import copy
import ctypes
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Protocol, Sequence, Union, overload

import numpy as np
import numpy.typing as npt

from . import _capi


class PILImage(Protocol):
    """What detect() needs of a PIL image (Pillow is optional: never imported here)."""

    def convert(self, mode: str) -> Any: ...


PathLike = Union[str, "os.PathLike[str]"]
ImageLike = Union[PathLike, npt.NDArray[Any], PILImage]
COLORS = ("rgb", "bgr")


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


def load_image(path: Union[PathLike, bytes], name: str = "path") -> npt.NDArray[np.uint8]:
    """Decode an image file (JPEG, PNG or BMP) with graphrun's decoders: uint8 (h, w, 3) RGB.
    A path holding a NUL character is a ValueError (name: what the error calls it)."""
    encoded = _capi.c_path(name, path)
    lib = _capi.lib()
    im = ctypes.POINTER(_capi.Image)()
    _capi.check(lib.gr_image_load(encoded, ctypes.byref(im)))
    try:
        c = im.contents
        return np.ctypeslib.as_array(c.data, shape=(c.h, c.w, c.c)).copy()
    finally:
        lib.gr_image_destroy(im)


def _is_pil(image: Any) -> bool:
    return type(image).__module__.startswith("PIL.") and hasattr(image, "convert")


def _describe(image: Any) -> str:
    if isinstance(image, np.ndarray):
        return f"a {image.dtype} array of shape {image.shape}"
    return f"a {type(image).__name__}"


def to_rgb(image: ImageLike, color: str = "rgb", name: str = "image") -> npt.NDArray[np.uint8]:
    """An image as a contiguous uint8 (h, w, 3) RGB array.

    Paths are decoded (graphrun's decoders give RGB) and PIL images converted to RGB: `color`
    does not apply to them. A uint8 (h, w, 3) array is taken in `color` order ("rgb", the default,
    as load_image, PIL and imageio give; "bgr" for OpenCV's cv2.imread). A float (h, w, 3) array
    holds values in [0, 1] (what Darknet's loader computes, byte / 255), rounded to the nearest
    byte; anything outside [0, 1] or NaN is a ValueError. name: what errors call the image."""
    if color not in COLORS:
        raise ValueError(f"color must be 'rgb' or 'bgr', not {color!r}")
    if isinstance(image, (str, bytes, os.PathLike)):
        return load_image(image, name)
    if _is_pil(image):
        pil: Any = image
        return np.ascontiguousarray(np.asarray(pil.convert("RGB")), dtype=np.uint8)
    if not isinstance(image, np.ndarray):
        raise TypeError(f"an image is a path, a (h, w, 3) array or a PIL image, not "
                        f"{_describe(image)}")
    if image.ndim != 3 or image.shape[2] != 3 or image.shape[0] < 1 or image.shape[1] < 1:
        raise ValueError(f"an image array is (h, w, 3) (uint8, or float in [0, 1]), not "
                         f"{_describe(image)}")
    if image.dtype == np.uint8:
        rgb = image
    elif np.issubdtype(image.dtype, np.floating):
        lo, hi = float(np.min(image)), float(np.max(image))
        if not (0.0 <= lo and hi <= 1.0):  # NaN fails both
            raise ValueError(f"a float image holds values in [0, 1]; this {image.dtype} array "
                             f"{image.shape} spans [{lo}, {hi}]")
        rgb = np.floor(image.astype(np.float32) * np.float32(255) + np.float32(0.5)).astype(np.uint8)
    else:
        raise ValueError(f"an image array is uint8, or float in [0, 1], not {_describe(image)}")
    if color == "bgr":
        rgb = rgb[..., ::-1]
    return np.ascontiguousarray(rgb)


def c_image(rgb: npt.NDArray[np.uint8]) -> _capi.Image:
    """A gr_image viewing a contiguous (h, w, 3) uint8 array (the caller keeps it alive)."""
    return _capi.Image(rgb.shape[1], rgb.shape[0], rgb.shape[2],
                       rgb.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)))


@contextlib.contextmanager
def _model_handle(model: Any) -> Iterator[Any]:
    """The C handle of a Model for drawing (held open for the call), or None: no model, or one
    closed since ("class N" labels then)."""
    with contextlib.ExitStack() as stack:
        try:
            handle = stack.enter_context(model._use("Results.plot")) if model is not None else None
        except _capi.ClosedError:
            handle = None
        yield handle


class Results:
    """The detections of one image, as arrays and as records.

    xyxy: float32 (n, 4) left, top, right, bottom in pixels of the original image; conf: float32
    (n,) objectness x class probability; cls: int64 (n,) class ids; objectness: float32 (n,);
    names: {class id: name}; image: the uint8 (h, w, 3) RGB image detected on; path: its file or
    None. Iterating (or .boxes) gives Detection records, in the library's order (by class, then
    decreasing probability within NMS)."""

    def __init__(self, boxes: List[Detection], image: npt.NDArray[np.uint8], names: Dict[int, str],
                 path: Optional[str] = None, model: Any = None) -> None:
        self.boxes = boxes
        self.image = image
        self.names = names
        self.path = path
        self._model = model  # a Model (kept alive): its class names label plot()
        n = len(boxes)
        self.xyxy = np.array([[d.left, d.top, d.right, d.bottom] for d in boxes],
                             np.float32).reshape(n, 4)
        self.conf = np.array([d.prob for d in boxes], np.float32)
        self.cls = np.array([d.class_id for d in boxes], np.int64)
        self.objectness = np.array([d.objectness for d in boxes], np.float32)

    def __len__(self) -> int:
        return len(self.boxes)

    def __iter__(self) -> Iterator[Detection]:
        return iter(self.boxes)

    @overload
    def __getitem__(self, index: int) -> Detection: ...
    @overload
    def __getitem__(self, index: slice) -> List[Detection]: ...

    def __getitem__(self, index: Union[int, slice]) -> Union[Detection, List[Detection]]:
        return self.boxes[index]

    def __eq__(self, other: object) -> bool:
        """Equal detections (a Results, or a list of Detection records as detect() gave before)."""
        if isinstance(other, Results):
            return self.boxes == other.boxes
        if isinstance(other, Sequence):
            return self.boxes == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __deepcopy__(self, memo: Dict[int, Any]) -> "Results":
        """A deep copy sharing the Model (which owns a C handle and is never copied)."""
        new = Results.__new__(type(self))
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            setattr(new, key, value if key == "_model" else copy.deepcopy(value, memo))
        return new

    def __getstate__(self) -> Dict[str, Any]:
        """Pickled without the Model (a C handle): plot() then labels from names' fallback,
        "class N"."""
        state = dict(self.__dict__)
        state["_model"] = None
        return state

    def __repr__(self) -> str:
        h, w = self.image.shape[:2]
        found = ", ".join(f"{d.class_name} {d.prob:.2f}" for d in self.boxes[:5])
        more = f", ... ({len(self.boxes)} in all)" if len(self.boxes) > 5 else ""
        return f"<graphrun.Results {w}x{h}{' ' + self.path if self.path else ''}: [{found}{more}]>"

    def plot(self) -> npt.NDArray[np.uint8]:
        """A copy of the image with the boxes drawn and labelled as the CLI draws them (uint8
        (h, w, 3) RGB; labels from the model's class names, else "class N")."""
        lib = _capi.lib()
        canvas = np.array(self.image, dtype=np.uint8, order="C", copy=True)
        dets = (_capi.Detection * max(len(self.boxes), 1))()
        for i, d in enumerate(self.boxes):
            dets[i] = _capi.Detection(d.left, d.top, d.right, d.bottom, d.class_id, d.prob,
                                      d.objectness)
        im = c_image(canvas)
        with _model_handle(self._model) as model:
            _capi.check(lib.gr_image_draw_detections(ctypes.byref(im), dets, len(self.boxes),
                                                     model))
        return canvas

    def save(self, path: PathLike) -> None:
        """Write plot() to `path`: PNG or JPEG by its extension (.png, .jpg, .jpeg)."""
        encoded = _capi.c_path("path", path)
        canvas = self.plot()
        im = c_image(canvas)
        _capi.check(_capi.lib().gr_image_write(ctypes.byref(im), encoded))
