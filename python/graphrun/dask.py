"""graphrun on a Dask cluster: detection over a collection of image paths, one engine per worker.

    import graphrun.dask
    from distributed import Client
    client = Client("tcp://scheduler:8786")          # or distributed.LocalCluster(...)
    bag = graphrun.dask.detect("photos/*.jpg", model="yolo", prec="int8", batch=64)
    for record in bag.compute():                      # in input order
        print(record["input"], record.get("error") or len(record["detections"]))
    files = graphrun.dask.detect(paths, output_dir="out/")   # part-00000.jsonl, ... (computed)

Paths come as a list, a glob ("photos/*.jpg"), a folder (its .jpg/.jpeg/.png/.bmp files sorted by
name, as `graphrun --input DIR`), or a dask.bag of paths (its partitions kept). Each partition is
a task: Engine.detect_files on an engine built once per worker process and kept (a module-level
cache keyed by the engine's options, so later partitions and later detect() calls with the same
options reuse it), the CLI's folder pipeline: decoding threads letterbox the images straight into
the engine's input buffers (or, decode="auto" on a GPU with nvJPEG, only read the JPEG files,
which the GPU decodes) while batches of `batch` run three in flight. It returns one record per
path, the CLI's JSON Lines record of it parsed (`{"input", "width", "height", "detections":
[{"class", "class_id", "prob", "objectness", "left", "top", "right", "bottom"}]}`, the CLI's
numbers: prob and objectness to 6 decimals, the box to 0.1 pixel). With output_dir a task writes
its partition's lines as the library formats them (the CLI's bytes; no dict is made) to
part-NNNNN.jsonl. A file that cannot be read or decoded, or a batch the engine fails on, gets
`{"input", "error"}` with the CLI's one-line message (an image whose outputs hold NaN/Inf: the
CLI's record for it, with "width", "height", "error" and "nonfinite"); the partition never fails
for it. A worker that dies takes its tasks with it and the scheduler runs
them again elsewhere (Dask's own retry: distributed.scheduler.allowed-failures); a partition file
is written atomically, so a rerun replaces it whole.

The device: "auto" (default) takes the worker's GPU where one is visible, else the CPU reference.
Pin each worker to one GPU with CUDA_VISIBLE_DEVICES (one `dask worker` per GPU: README, "Dask");
without it, worker k of a LocalCluster (its name is k) takes GPU k mod the visible count.
`resources={"GPU": 1}` passes through to the scheduler when workers declare such a resource.
"""

from __future__ import annotations

import glob as _glob
import importlib
import math
import os
import tempfile
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ._engine import Engine, Model, cuda_device_count
from ._files import DECODES, open_jpeg_decoders, usable_cores

__all__ = ["PathList", "detect", "detect_partition", "detect_partition_jsonl", "list_paths"]

_IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp")
_INFLIGHT = 3  # batches per engine: one running, one filling, one reported (runtime.h, slots)

# The engines of this process, by their options: one per worker process, built on its first
# partition and reused by every later one (building calibrates and searches tactics: seconds).
_ENGINES: Dict[Tuple[Any, ...], Engine] = {}
_ENGINES_LOCK = threading.Lock()


def list_paths(source: Union[str, os.PathLike[str], Sequence[Union[str, os.PathLike[str]]]]
               ) -> List[str]:
    """The image paths of a folder (sorted by name, images only, as `graphrun --input DIR`), a
    glob (sorted), or a list (kept as given)."""
    if isinstance(source, (str, os.PathLike)):
        text = os.fspath(source)
        if os.path.isdir(text):
            names = [n for n in os.listdir(text)
                     if not n.startswith(".") and n.lower().endswith(_IMAGE_EXTENSIONS)]
            return sorted(os.path.join(text.rstrip("/") or "/", n) for n in names)
        if _glob.has_magic(text):
            return sorted(_glob.glob(text))
        return [text]
    return [os.fspath(p) for p in source]


class PathList:
    """One partition's paths as one object in a task graph. Dask walks a list in a graph element
    by element (looking for keys): 20,000 paths cost 0.9 s on a 2-core machine and about 1.6 s
    on a 16-core GPU host per detect(), half of what the detection itself took on an H100. An
    object of this class travels pickled, whole. It is a sequence of str (len, iteration,
    indexing), so detect_partition and detect_partition_jsonl take it as they take a list."""

    __slots__ = ("paths",)

    def __init__(self, paths: Sequence[Union[str, os.PathLike[str]]]) -> None:
        self.paths = [os.fspath(p) for p in paths]

    def __len__(self) -> int:
        return len(self.paths)

    def __iter__(self) -> Any:
        return iter(self.paths)

    def __getitem__(self, index: Any) -> Any:
        return self.paths[index]

    def __getstate__(self) -> List[str]:
        return self.paths

    def __setstate__(self, state: List[str]) -> None:
        self.paths = state


def _worker_gpu() -> int:
    """The GPU of this worker process: 0 where CUDA_VISIBLE_DEVICES pins it (or outside Dask);
    worker k of a LocalCluster (named k) otherwise takes GPU k mod the visible count."""
    count = cuda_device_count()
    if count <= 1 or os.environ.get("CUDA_VISIBLE_DEVICES"):
        return 0
    try:
        name = importlib.import_module("distributed").get_worker().name
    except (ImportError, ValueError):
        return 0
    return int(name) % count if isinstance(name, int) or str(name).isdigit() else 0


def _engine(options: Tuple[Any, ...]) -> Engine:
    """This process's engine for `options` (built once; the lock keeps two threads of one worker
    from building it twice)."""
    with _ENGINES_LOCK:
        engine = _ENGINES.get(options)
        if engine is None:
            model, cfg, weights, names, precision, batch, device, calib_cache = options
            m = Model(model, cfg=cfg, weights=weights, names=names)
            if device == "auto":
                device = "gpu" if cuda_device_count() > 0 else "cpu"
            engine = m.build(device=device, precision=precision, batch=batch,
                             calib_cache=calib_cache, inflight=_INFLIGHT,
                             gpu_index=_worker_gpu() if device == "gpu" else 0)
            if device == "gpu":  # each slot's JPEG decoder now, not in the first tasks' time
                open_jpeg_decoders(engine)
            _ENGINES[options] = engine
        return engine


def _decode_threads(asked: Optional[int]) -> int:
    if asked:
        return max(1, int(asked))
    return max(1, min(usable_cores(), 16))


def detect_partition(paths: Sequence[str], options: Tuple[Any, ...], thresh: float,
                     nms: float, decode_threads: Optional[int] = None,
                     decode: str = "auto") -> List[Dict[str, Any]]:
    """One partition's records, in the order of `paths` (what each Dask task runs):
    Engine.detect_files on this process's engine, images decoded on decode_threads threads
    (graphrun's decoders run outside the GIL; default: the cores this process may use, at most
    16) straight into the engine's input buffers while it runs the batches before them; decode
    "auto" | "cpu" | "gpu" as detect_files'. Per-file failures are records; only a failure to
    build the engine (every file would fail) or decode="gpu" where the GPU cannot decode raises."""
    engine = _engine(options)
    return engine.detect_files([os.fspath(p) for p in paths], thresh=thresh, nms=nms,
                               decode=decode, threads=_decode_threads(decode_threads))


def detect_partition_jsonl(paths: Sequence[str], options: Tuple[Any, ...], thresh: float,
                           nms: float, output_dir: str, index: int,
                           decode_threads: Optional[int] = None, decode: str = "auto") -> str:
    """One partition as output_dir/part-NNNNN.jsonl (NNNNN = index), what each output_dir task
    runs: Engine.detect_files_jsonl on this process's engine, each image's line (the library's
    bytes, the CLI's) written as it comes, in the order of `paths`. Atomic: the lines go to a
    temporary file in output_dir, renamed when the partition is done (a rerun of a lost task
    replaces it whole). Returns the file's path."""
    engine = _engine(options)
    path = os.path.join(output_dir, f"part-{index:05d}.jsonl")
    fd, tmp = tempfile.mkstemp(prefix=".part-", dir=output_dir)
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as f:
            engine.detect_files_jsonl([os.fspath(p) for p in paths], f, thresh=thresh, nms=nms,
                                      decode=decode, threads=_decode_threads(decode_threads))
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


def detect(paths: Any, model: str = "yolo", prec: str = "fp32", batch: int = 1,
           device: str = "auto", output_dir: Optional[Union[str, os.PathLike[str]]] = None,
           thresh: float = 0.5, nms: float = 0.45, cfg: Optional[str] = None,
           weights: Optional[str] = None, names: Optional[str] = None,
           calib_cache: Optional[str] = None, partition_size: Optional[int] = None,
           npartitions: Optional[int] = None, resources: Optional[Dict[str, float]] = None,
           decode_threads: Optional[int] = None, decode: str = "auto") -> Any:
    """Detection over `paths` (a list, a glob, a folder or a dask.bag of paths) on the current
    Dask scheduler (a distributed.Client made before, or Dask's local one).

    Returns a dask.bag of records in input order (lazy: .compute() them, or iterate its
    partitions with to_delayed() as they finish), or, with output_dir, writes each partition as
    output_dir/part-NNNNN.jsonl (made if missing; the CLI's JSON Lines, written by the task as
    the library formats them, no records made or sent back) and returns those paths
    (computed).
    partition_size (default 8 batches) or npartitions cut a list into tasks. model/cfg/weights/
    names, prec, batch, device: as graphrun.Model and Model.build; thresh, nms: as Engine.detect;
    decode_threads: each task's decoding threads (default: the worker's cores, at most 16);
    decode: "auto" (JPEGs decoded on the worker's GPU where it can, else on the CPU), "cpu" or
    "gpu" (raises where a worker's engine cannot), as Engine.detect_files.
    """
    # Imported here, untyped (Debian's dask ships no type hints): graphrun itself needs no Dask.
    dask: Any = importlib.import_module("dask")
    db: Any = importlib.import_module("dask.bag")

    if device not in ("auto", "cpu", "gpu"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'gpu', not {device!r}")
    if decode not in DECODES:
        raise ValueError(f"decode must be one of {list(DECODES)}, not {decode!r}")
    options = (model, cfg, weights, names, prec, int(batch), device, calib_cache)
    bag = paths if isinstance(paths, db.Bag) else None
    chunks: List[PathList] = []
    if bag is None:
        listed = list_paths(paths)
        if not listed:
            raise ValueError(f"no image paths in {paths!r}")
        # dask.bag.from_sequence's cut (the same partitions), each partition one PathList
        size = (int(math.ceil(len(listed) / npartitions)) if npartitions
                else int(partition_size or 8 * int(batch)))
        chunks = [PathList(listed[i:i + size]) for i in range(0, len(listed), size)]
    args = (options, float(thresh), float(nms))
    with dask.annotate(resources=resources) if resources else _no_annotation():
        if output_dir is None:
            if bag is not None:
                return bag.map_partitions(detect_partition, *args, decode_threads, decode)
            return db.from_delayed([dask.delayed(detect_partition)(c, *args, decode_threads,
                                                                   decode) for c in chunks])
        out = os.fspath(output_dir)
        os.makedirs(out, exist_ok=True)
        parts = chunks if bag is None else bag.to_delayed()
        tasks = [dask.delayed(detect_partition_jsonl)(part, *args, out, i, decode_threads, decode)
                 for i, part in enumerate(parts)]
    return list(dask.compute(*tasks))


class _no_annotation:
    """A context that annotates nothing (dask.annotate without resources)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None
