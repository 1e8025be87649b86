"""Tests of the Python package (python/graphrun) against the graphrun CLI, an independent client
of the same library: raw outputs through --input x.npy --save-output, detections through --json,
Engine.detect_files' records through --input-list (--decode cpu and gpu on a GPU); and of what detect() takes (paths, arrays in either colour order, float arrays, PIL images), the
Results it gives (arrays, plot, save) and engine files (Engine.save / Engine.load). Installing the
package is tests/python_install.sh's. Run from the source root: python3 python/tests/test_graphrun.py [CPUTests|GPUTests] (CTest:
python_cpu and, label gpu, python_gpu). $GR_BUILD_DIR names the build directory (the CLI and libgraphrun.so)."""

import ctypes
import io
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import warnings

import numpy as np

BUILD = os.environ.get("GR_BUILD_DIR", "build")
os.environ.setdefault("GRAPHRUN_LIBRARY", os.path.join(BUILD, "libgraphrun.so"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import graphrun  # noqa: E402
from graphrun import _capi  # noqa: E402

try:
    import PIL.Image
except ImportError:
    PIL = None

CLI = os.path.join(BUILD, "graphrun")
# A small region network: quick on the CPU reference, still a conv, a pool and a detection head.
SMALL_CFG = """[net]
width=32
height=32
channels=3
[convolutional]
batch_normalize=1
filters=8
size=3
stride=1
pad=1
activation=leaky
[maxpool]
size=2
stride=2
[convolutional]
filters=14
size=1
stride=1
activation=linear
[region]
anchors=1.5,2.5,3,3
classes=2
coords=4
num=2
softmax=1
"""
PHOTOS = ["data/dog.jpg", "data/horses.jpg", "data/person.jpg"]


def cli(*args):
    return subprocess.run([CLI, *args], check=True, capture_output=True, text=True).stdout


def header_fields(header, c_name):
    """The field names of struct c_name in runtime.h's text (comments removed), in order, or
    None when the header has no such struct."""
    body = (re.search(r"typedef struct %s \{(.*?)\} %s;" % (c_name, c_name), header, re.S)
            or re.search(r"\nstruct %s \{(.*?)\};" % c_name, header, re.S))
    if not body:
        return None
    fields = []
    for decl in body.group(1).split(";"):
        decl = decl.strip()
        if not decl:
            continue
        pointer_to_function = re.search(r"\(\s*\*\s*(\w+)\s*\)", decl)
        if pointer_to_function:
            fields.append(pointer_to_function.group(1))
            continue
        # "int w, h, c" declares three; the name is the last word before any [..].
        first, *rest = decl.split(",")
        fields.append(re.findall(r"\w+", first.split("[")[0])[-1])
        fields += [re.findall(r"\w+", r.split("[")[0])[-1] for r in rest]
    return fields


def files_folder(root, copies=1):
    """A folder for detect_files: the photos (`copies` times each), a PNG, a JPEG cut short, a
    file of garbage named .jpg and, with Pillow, a progressive JPEG. Returns the paths in an order
    of their own (not sorted: detect_files keeps the order it is given) and the bad ones."""
    folder = os.path.join(root, "files")
    os.makedirs(folder)
    paths = []
    for k in range(copies):
        for p in PHOTOS + ["data/eagle.jpg", "data/giraffe.jpg"]:
            dst = os.path.join(folder, f"{k:03d}-{os.path.basename(p)}")
            with open(p, "rb") as src, open(dst, "wb") as out:
                out.write(src.read())
            paths.append(dst)
    png = os.path.join(folder, "shapes.png")
    with open("data/shapes-val/000.png", "rb") as src, open(png, "wb") as out:
        out.write(src.read())
    cut = os.path.join(folder, "cut.jpg")
    with open(PHOTOS[0], "rb") as src, open(cut, "wb") as out:
        whole = src.read()
        out.write(whole[:len(whole) // 2])  # its headers whole, its scan cut short
    garbage = os.path.join(folder, "garbage.jpg")
    with open(garbage, "wb") as out:
        out.write(np.random.default_rng(5).integers(0, 256, 5000, dtype=np.uint8).tobytes())
    extra = [png]
    if PIL is not None:
        progressive = os.path.join(folder, "progressive.jpg")
        with PIL.Image.open(PHOTOS[1]) as im:
            im.save(progressive, progressive=True, quality=90)
        extra.append(progressive)
    bad = [cut, garbage, os.path.join(folder, "missing.jpg")]
    order = paths[::-1] + extra + bad
    order.insert(len(order) // 2, order.pop())  # a missing file in the middle of a batch
    return order, bad


def cli_output(args, paths):
    """The CLI's JSON Lines for `paths` as bytes, and its stderr (--input-list; it exits 3 when a
    file fails)."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(paths) + "\n")
    try:
        run = subprocess.run([CLI, *args, "--input-list", f.name], capture_output=True,
                             check=False)
    finally:
        os.unlink(f.name)
    stderr = run.stderr.decode(errors="replace")
    if run.returncode not in (0, 1, 3):  # 3: a file failed; 1: NaN/Inf outputs
        raise AssertionError(f"graphrun exit {run.returncode}: {stderr}")
    return run.stdout, stderr


def cli_records(args, paths):
    """The CLI's JSON Lines for `paths`, parsed, and its stderr."""
    text, stderr = cli_output(args, paths)
    return [json.loads(line) for line in text.splitlines()], stderr


def assert_same_as_cli(test, mine, cli_line):
    """A detect_files record is the CLI's line parsed: the library formats both (the same engine
    and input give the same float32 values, so the same text), every number equal."""
    test.assertEqual(mine, cli_line, mine["input"])


class CPUTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.cfg = os.path.join(cls.tmp.name, "small.cfg")
        with open(cls.cfg, "w") as f:
            f.write(SMALL_CFG)
        cls.model = graphrun.Model(cfg=cls.cfg)

    @classmethod
    def tearDownClass(cls):
        cls.model.close()
        cls.tmp.cleanup()

    def test_builtin_model_info(self):
        with graphrun.Model("yolo") as m:
            self.assertEqual((m.width, m.height, m.channels, m.classes), (416, 416, 3, 20))
            self.assertTrue(m.synthetic_weights)
            self.assertEqual(m.class_name(11), "dog")
        self.assertRegex(graphrun.version(), r"^\d+\.\d+\.\d+$")

    def test_onnx_model(self):
        # An ONNX file loads by name or as a cfg (docs/onnx.md) and runs as PyTorch did.
        path = "tests/onnx/tiny_ops.onnx"
        try:
            graphrun.Model(path).close()
        except graphrun.Error as e:
            if "built without ONNX import" in str(e):
                self.skipTest(str(e))
            raise
        x = np.load("tests/onnx/tiny_input.npy")
        want = np.load("tests/onnx/tiny_out.npy")
        for model in (graphrun.Model(path), graphrun.Model(cfg=path)):
            with model, model.build(device="cpu") as engine:
                self.assertFalse(model.synthetic_weights)
                got = engine.run(x)[0]
            self.assertEqual(got.shape, want.shape)
            nrmse = np.sqrt(np.mean((got - want) ** 2)) / (want.max() - want.min())
            self.assertLess(nrmse, 1e-5)

    def test_run_matches_cli_save_output(self):
        rng = np.random.default_rng(7)
        x = rng.random((1, 3, 32, 32), dtype=np.float32)
        npy = os.path.join(self.tmp.name, "x.npy")
        out = os.path.join(self.tmp.name, "out.npy")
        np.save(npy, x[0])
        cli("--device", "cpu", "--cfg", self.cfg, "--no-output", "--input", npy,
            "--save-output", out)
        with self.model.build(device="cpu") as engine:
            self.assertEqual(engine.device, "cpu")
            self.assertEqual(engine.output_shapes, [(1, 14, 16, 16)])
            outputs = engine.run(x)
        self.assertEqual(len(outputs), 1)
        # Same CPU reference, same input floats: bit for bit.
        np.testing.assert_array_equal(outputs[0], np.load(out))

    def test_detect_matches_cli_json(self):
        # The model's preprocessing (a pjreddie cfg: letterbox) and the stretch, both ways.
        found = {}
        for how, flags in (("auto", []), ("stretch", ["--stretch"])):
            expected = json.loads(cli("--device", "cpu", "--cfg", self.cfg, "--no-output",
                                      "--json", "--thresh", "0.2", "--input", PHOTOS[0], *flags))
            want = expected["images"][0]["detections"]
            self.assertGreater(len(want), 0)
            with self.model.build(device="cpu", preprocess=how) as engine:
                self.assertEqual(engine.preprocess, "letterbox" if how == "auto" else how)
                got = engine.detect([PHOTOS[0]], thresh=0.2)[0]
            self.assertEqual(len(got), len(want))
            for d, w in zip(got, want):
                self.assertEqual((d.class_id, d.class_name), (w["class_id"], w["class"]))
                self.assertAlmostEqual(d.prob, w["prob"], places=5)   # the CLI prints 6 decimals
                for k in ("left", "top", "right", "bottom"):
                    self.assertAlmostEqual(getattr(d, k), w[k], delta=0.051)  # printed to 0.1
            found[how] = got
        self.assertNotEqual(found["auto"], found["stretch"])
        stretched = graphrun.letterbox(PHOTOS[0], 40, 24, np.float32, how="stretch")
        self.assertEqual(stretched.shape, (3, 24, 40))
        self.assertFalse(np.array_equal(stretched, graphrun.letterbox(PHOTOS[0], 40, 24,
                                                                      np.float32)))

    def test_arrays_and_paths_and_batches_agree(self):
        arrays = [graphrun.load_image(p) for p in PHOTOS]
        self.assertEqual(arrays[0].shape, (576, 768, 3))
        self.assertEqual(arrays[0].dtype, np.uint8)
        with self.model.build(device="cpu", batch=1) as one, \
                self.model.build(device="cpu", batch=2) as two:
            alone = [one.detect([p], thresh=0.2)[0] for p in PHOTOS]
            self.assertEqual(two.detect(PHOTOS, thresh=0.2), alone)    # 2 + padded 1
            self.assertEqual(one.detect(arrays, thresh=0.2), alone)

    def test_letterbox_u8_is_rounded_float_letterbox(self):
        im = graphrun.load_image(PHOTOS[1])
        f = graphrun.letterbox(im, 40, 24, np.float32)
        u = graphrun.letterbox(im, 40, 24)
        self.assertEqual(f.shape, (3, 24, 40))
        self.assertEqual(u.shape, (24, 40, 3))
        expect = np.clip(np.floor(f.transpose(1, 2, 0) * np.float32(255) + np.float32(0.5)), 0, 255)
        np.testing.assert_array_equal(u, expect.astype(np.uint8))

    def test_errors_raise_with_graphrun_message(self):
        bad = os.path.join(self.tmp.name, "bad.cfg")
        with open(bad, "w") as f:
            f.write("[net]\nwidth=8\nheight=8\nchannels=3\n[convolutional]\nfilters=banana\n")
        with self.assertRaises(graphrun.Error) as ctx:
            graphrun.Model(cfg=bad)
        self.assertIn("bad.cfg:6: [convolutional] key 'filters'", str(ctx.exception))
        self.assertEqual(ctx.exception.status, "parse error")
        with self.assertRaises(graphrun.Error) as ctx:
            graphrun.load_image(os.path.join(self.tmp.name, "missing.jpg"))
        self.assertIn("missing.jpg", str(ctx.exception))
        with self.model.build(device="cpu") as engine:
            with self.assertRaises(ValueError):
                engine.run(np.zeros((1, 3, 16, 16), np.float32))
            with self.assertRaises(TypeError):
                engine.detect(42)
        with self.assertRaises(ValueError):
            self.model.build(precision="int4")
        with self.assertRaises(ValueError) as ctx:  # checked before it reaches the library
            self.model.build(device="cpu", batch=0)
        self.assertIn("batch must be in [1, 4096]", str(ctx.exception))

    def test_integer_arguments_are_range_checked(self):
        """ctypes truncates silently (batch 2**32 + 1 became 1, seed -1 wrapped): every integer
        argument is checked in Python, the error naming it and its range."""
        cases = [(lambda: self.model.build(device="cpu", batch=2**32 + 1), "batch", "[1, 4096]"),
                 (lambda: self.model.build(device="cpu", batch=-1), "batch", "[1, 4096]"),
                 (lambda: graphrun.Model(cfg=self.cfg, seed=-1), "seed",
                  "[0, 18446744073709551615]"),
                 (lambda: graphrun.Model(cfg=self.cfg, seed=2**64), "seed", "[0, "),
                 (lambda: self.model.class_name(2**32), "class_id", "[-2147483648, 2147483647]"),
                 (lambda: graphrun.letterbox(PHOTOS[0], 2**32 + 32, 32), "width", "[1, 65536]"),
                 (lambda: graphrun.letterbox(PHOTOS[0], 32, 0), "height", "[1, 65536]")]
        for call, name, allowed in cases:
            with self.assertRaises(ValueError, msg=name) as ctx:
                call()
            self.assertIn(f"{name} must be in {allowed}", str(ctx.exception))
        for bad in (True, 2.0, "2"):
            with self.assertRaises(TypeError):
                self.model.build(device="cpu", batch=bad)
        with self.model.build(device="cpu") as engine:
            for thresh in (float("nan"), -0.1, 1.5):
                with self.assertRaises(ValueError) as ctx:
                    engine.detect(PHOTOS[:1], thresh=thresh)
                self.assertIn("thresh must be a finite number in [0.0, 1.0]", str(ctx.exception))
        # The largest values that fit are passed through.
        graphrun.Model(cfg=self.cfg, seed=2**64 - 1).close()
        self.assertEqual(self.model.class_name(2**31 - 1), "class 2147483647")

    def test_input_channels_are_checked_before_c(self):
        """A network of 1 or 4 input channels: run() refuses a 3-channel array (the C side would
        read batch x channels x h x w values from it: a heap overflow for 4) and takes its own."""
        for channels in (1, 4):
            cfg = os.path.join(self.tmp.name, f"c{channels}.cfg")
            with open(cfg, "w") as f:
                f.write(SMALL_CFG.replace("channels=3", f"channels={channels}"))
            with graphrun.Model(cfg=cfg) as m, m.build(device="cpu") as engine:
                for x in (np.zeros((1, 3, 32, 32), np.float32), np.zeros((1, 32, 32, 3), np.uint8)):
                    with self.assertRaises(ValueError) as ctx:
                        engine.run(x)
                    self.assertIn(f"float32 (1, {channels}, 32, 32)", str(ctx.exception))
                with self.assertRaises(ValueError):
                    engine.detect(PHOTOS[:1])
                self.assertEqual(engine.channels, channels)
                f32 = engine.run(np.full((1, channels, 32, 32), 0.5, np.float32))
                u8 = engine.run(np.full((1, 32, 32, channels), 128, np.uint8))
                self.assertEqual(f32[0].shape, (1, 14, 16, 16))
                # 128 / 255 against 0.5: close, computed from the engine's own input type.
                np.testing.assert_allclose(u8[0], f32[0], atol=0.05)

    def test_run_returns_its_own_outputs_across_threads(self):
        """Threads sharing one engine: each run() returns the outputs of its own input (a run and
        the reading of its outputs are one locked operation)."""
        rng = np.random.default_rng(3)
        inputs = [rng.random((1, 3, 32, 32), dtype=np.float32) for _ in range(4)]
        with self.model.build(device="cpu") as engine:
            expected = [engine.run(x)[0] for x in inputs]
            for a in range(4):
                for b in range(a):
                    self.assertFalse(np.array_equal(expected[a], expected[b]))
            failures = []

            def worker(i):
                try:
                    for _ in range(40):
                        got = engine.run(inputs[i])[0]
                        if not np.array_equal(got, expected[i]):
                            failures.append(f"thread {i}: another run's outputs")
                            return
                except Exception as e:  # noqa: BLE001 - reported below
                    failures.append(f"thread {i}: {e!r}")

            threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(failures, [])

    def test_nonfinite_outputs_warn_or_raise(self):
        """fp16 overflows on inputs of 60000 (conv + batch norm exceed 65504): the run warns, or
        raises with nonfinite_is_error, as the C API's nonfinite_is_error does; fp32 is quiet."""
        x = np.full((1, 3, 32, 32), 60000.0, np.float32)
        with self.model.build(device="cpu", precision="fp16") as engine:
            with self.assertWarns(graphrun.NonFiniteWarning) as ctx:
                engine.run(x)
            self.assertIn("output 0 holds", str(ctx.warning))
            self.assertGreater(engine.nonfinite[0], 0)
        with self.model.build(device="cpu", precision="fp16", nonfinite_is_error=True) as engine:
            with self.assertRaises(graphrun.Error) as ctx:
                engine.run(x)
            self.assertEqual(ctx.exception.status, "non-finite output")  # GR_ERR_NUMERIC
            self.assertEqual(engine.outputs()[0].shape, (1, 14, 16, 16))  # still readable
        with self.model.build(device="cpu", precision="fp32") as engine:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                engine.run(x)
            self.assertEqual(engine.nonfinite, [0])

    def test_nonfinite_weights_warn_or_refuse(self):
        """SMALL_CFG's 374 weights (conv 8 + 24 BN + 216, conv 14 + 112), one NaN and one Inf."""
        values = np.full(374, 0.01, np.float32)
        values[100], values[300] = np.nan, np.inf
        path = os.path.join(self.tmp.name, "bad.weights")
        with open(path, "wb") as f:
            f.write(np.array([0, 2, 0], np.int32).tobytes() + np.zeros(1, np.uint64).tobytes())
            f.write(values.tobytes())
        with self.assertWarns(graphrun.NonFiniteWarning) as ctx:
            m = graphrun.Model(cfg=self.cfg, weights=path)
        self.assertIn("2 non-finite weights (NaN/Inf), the first in layer 0 (conv)",
                      str(ctx.warning))
        self.assertEqual(m.nonfinite_weights, 2)
        m.close()
        with self.assertRaises(graphrun.Error) as ctx:
            graphrun.Model(cfg=self.cfg, weights=path, strict_weights=True)
        self.assertEqual(ctx.exception.status, "non-finite output")  # GR_ERR_NUMERIC
        self.assertIn("2 non-finite weights", str(ctx.exception))


    def test_mirrors_follow_runtime_h(self):
        """Each ctypes mirror lists runtime.h's fields by name in the header's order: a field
        appended to a C struct (runtime.h only appends) and not to graphrun/_capi.py fails here,
        naming it. The option mirrors carry no padding: their struct_size is their own size."""
        with open("include/graphrun/runtime.h") as f:
            header = f.read()
        header = re.sub(r"/\*.*?\*/", "", header, flags=re.S)
        mirrors = {"gr_model_options": _capi.ModelOptions, "gr_engine_options": _capi.EngineOptions,
                   "gr_detect_options": _capi.DetectOptions, "gr_model_info": _capi.ModelInfo,
                   "gr_tensor_desc": _capi.TensorDesc, "gr_image": _capi.Image,
                   "gr_detection": _capi.Detection, "gr_files_options": _capi.FilesOptions,
                   "gr_file_result": _capi.FileResult, "gr_files_stats": _capi.FilesStats}
        for c_name, mirror in mirrors.items():
            fields = header_fields(header, c_name)
            self.assertIsNotNone(fields, c_name)
            self.assertEqual([f[0] for f in mirror._fields_], fields,
                             f"graphrun/_capi.py's mirror of {c_name} differs from runtime.h")
        for mirror, init in ((_capi.ModelOptions, "gr_model_options_init"),
                             (_capi.EngineOptions, "gr_engine_options_init"),
                             (_capi.DetectOptions, "gr_detect_options_init"),
                             (_capi.FilesOptions, "gr_files_options_init")):
            opt = mirror()
            self.assertEqual(getattr(_capi.lib(), init)(ctypes.byref(opt), ctypes.sizeof(opt)), 0,
                             _capi.lib().gr_last_error())
            self.assertEqual(opt.struct_size, ctypes.sizeof(mirror))

    def test_mirrors_follow_the_option_table(self):
        """include/graphrun/options.def field by field (tests/test_option_table.c --dump gives its
        rows with C's offsets and sizes): runtime.h's fields are the rows, in order (a field
        without a row fails here even where it fits the struct's tail padding); each ctypes mirror
        has the rows' names at C's offsets with C's sizes; the library's *_init gives each row's
        default through the mirror; every row with a flag parses in (and, but for compare, is
        in the --help of) each subcommand its row names."""
        dumper = os.path.join(BUILD, "test_option_table")
        if not os.path.exists(dumper):
            self.skipTest(f"{dumper} is not built")
        rows = [line.split("\t") for line in
                subprocess.run([dumper, "--dump"], check=True, capture_output=True,
                               text=True).stdout.splitlines()]
        with open("include/graphrun/runtime.h") as f:
            header = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
        mirrors = {"gr_model_options": (_capi.ModelOptions, "gr_model_options_init"),
                   "gr_engine_options": (_capi.EngineOptions, "gr_engine_options_init"),
                   "gr_detect_options": (_capi.DetectOptions, "gr_detect_options_init"),
                   "gr_files_options": (_capi.FilesOptions, "gr_files_options_init")}
        for c_name, (mirror, init) in mirrors.items():
            mine = [r for r in rows if r[0] == c_name]
            fields = header_fields(header, c_name)
            self.assertEqual([r[1] for r in mine], fields,
                             f"options.def's rows of {c_name} differ from runtime.h's fields")
            self.assertEqual([f[0] for f in mirror._fields_], fields,
                             f"graphrun/_capi.py's mirror of {c_name} differs from the table")
            opt = mirror()
            self.assertEqual(getattr(_capi.lib(), init)(ctypes.byref(opt), ctypes.sizeof(opt)), 0)
            for _, field, kind, offset, size, default, *_ in mine:
                desc = getattr(mirror, field)
                self.assertEqual((desc.offset, desc.size), (int(offset), int(size)),
                                 f"{c_name}.{field}: ctypes offset/size vs C's")
                value = getattr(opt, field)
                if kind == "SIZE":
                    self.assertEqual(value, ctypes.sizeof(mirror))
                elif kind in ("STR", "PTR"):
                    want = None if default == "NULL" else default.encode()
                    self.assertEqual(value or None, want, f"{c_name}.{field}'s default")
                elif kind == "FLOAT":  # the dump's 9 digits name one float32
                    self.assertEqual(value, ctypes.c_float(float(default)).value,
                                     f"{c_name}.{field}'s default")
                else:
                    self.assertEqual(value, int(default), f"{c_name}.{field}'s default")
        helps = {}
        for cmd_bit, commands in ((0x1, ["detect", "build", "compare"]), (0x4, ["plan"]),
                                  (0x8, ["eval"]), (0x10, ["bench"]), (0x20, ["build"])):
            for _, field, kind, _, _, _, flag, bits, value in rows:
                if flag == "-" or not int(bits, 16) & cmd_bit:
                    continue
                for command in commands:
                    args = [command] if command != "detect" else []
                    run = subprocess.run([CLI, *args, flag, value, "--help"], capture_output=True,
                                         text=True)
                    self.assertEqual(run.returncode, 0,
                                     f"graphrun {command} {flag} {value}: {run.stderr}")
                    if command == "compare" or (command == "build" and cmd_bit == 0x1):
                        continue  # their help refers to detect's
                    if command not in helps:
                        helps[command] = subprocess.run([CLI, *args, "--help"], check=True,
                                                        capture_output=True, text=True).stdout
                    self.assertIn(flag, helps[command], f"graphrun {command} --help")

    def test_engine_options_mirror_the_c_struct(self):
        # The library fills the mirror: fields past the first that land where the header puts
        # them read the header's defaults (a shifted mirror reads padding or a neighbour).
        opt = _capi.EngineOptions()
        self.assertEqual(_capi.lib().gr_engine_options_init(ctypes.byref(opt),
                                                            ctypes.sizeof(opt)), 0)
        self.assertEqual(opt.struct_size, ctypes.sizeof(opt))
        self.assertEqual((opt.batch, opt.use_cuda_graph, opt.inflight), (1, 1, 1))
        self.assertAlmostEqual(opt.calib_percentile, 99.99, places=3)
        self.assertAlmostEqual(opt.max_nrmse, 0.003, places=6)
        self.assertEqual(opt.tactic_search, 1)
        self.assertIsNone(opt.timing_cache)
        self.assertEqual((opt.f32_algo, opt.f32_split_k, opt.pdl, opt.gemm_tactic), (0, 0, 0, 0))
        self.assertEqual(opt.micro_batch, 0)  # the last field: auto
        with self.model.build(device="cpu", f32_algo="sgemm") as engine:
            self.assertEqual(engine.device, "cpu")
        with self.model.build(device="cpu", batch=4, micro_batch=2) as engine:
            self.assertEqual(engine.micro_batch, 4)  # the CPU engine runs whole batches
        with self.assertRaises(graphrun.Error) as ctx:
            self.model.build(device="cpu", batch=4, micro_batch=3)
        self.assertIn("micro_batch=3 does not divide batch=4", str(ctx.exception))
        with self.assertRaises(ValueError):
            self.model.build(device="cpu", f32_algo="banana")

    # ---- what detect() takes, what it gives ----------------------------------------------------

    def test_detect_takes_one_path_or_a_list(self):
        """One image in (str or os.PathLike): one Results; a list in: a list, in order."""
        with self.model.build(device="cpu") as engine:
            one = engine.detect(PHOTOS[0], thresh=0.2)
            self.assertIsInstance(one, graphrun.Results)
            self.assertEqual(one.path, PHOTOS[0])
            self.assertGreater(len(one), 0)
            self.assertEqual(engine.detect(pathlib.Path(PHOTOS[0]), thresh=0.2), one)
            listed = engine.detect(PHOTOS, thresh=0.2)
            self.assertIsInstance(listed, list)
            self.assertEqual(len(listed), 3)
            self.assertEqual(listed[0], one)
            self.assertNotEqual(listed[1], one)
            self.assertEqual(engine.detect(tuple(PHOTOS[:1]), thresh=0.2), [one])

    def test_bgr_array_detects_as_its_rgb(self):
        """An OpenCV-style BGR array with color="bgr" gives the RGB image's detections exactly;
        passed as RGB (the default) it is another picture (red and blue swapped)."""
        rgb = graphrun.load_image(PHOTOS[1])
        bgr = np.ascontiguousarray(rgb[..., ::-1])
        with self.model.build(device="cpu") as engine:
            want = engine.detect(rgb, thresh=0.2)
            self.assertGreater(len(want), 0)
            self.assertEqual(engine.detect(bgr, thresh=0.2, color="bgr"), want)
            self.assertEqual(engine.detect(rgb[..., ::-1], thresh=0.2, color="bgr"), want)  # a view
            self.assertNotEqual(engine.detect(bgr, thresh=0.2), want)
            batch = engine.detect(np.stack([bgr, bgr]), thresh=0.2, color="bgr")  # (n, h, w, 3)
            self.assertEqual(batch, [want, want])
            with self.assertRaises(ValueError) as ctx:
                engine.detect(rgb, color="BGR")
            self.assertIn("color must be 'rgb' or 'bgr'", str(ctx.exception))

    def test_float_arrays_in_0_1(self):
        """A float (h, w, 3) array in [0, 1] is byte / 255 (Darknet's loader): rounded back to the
        same bytes, so its detections equal the uint8 image's exactly, float32 or float64."""
        rgb = graphrun.load_image(PHOTOS[0])
        with self.model.build(device="cpu") as engine:
            want = engine.detect(rgb, thresh=0.2)
            for dtype in (np.float32, np.float64):
                self.assertEqual(engine.detect(rgb.astype(dtype) / 255, thresh=0.2), want, dtype)
            for bad, span in ((rgb.astype(np.float32), "spans [0.0, 255.0]"),
                              (np.full((8, 8, 3), np.nan, np.float32), "spans [nan, nan]")):
                with self.assertRaises(ValueError) as ctx:
                    engine.detect(bad)
                self.assertIn("a float image holds values in [0, 1]", str(ctx.exception))
                self.assertIn(span, str(ctx.exception))

    def test_wrong_arrays_are_named_in_the_error(self):
        with self.model.build(device="cpu") as engine:
            cases = [(np.zeros((3, 32, 32), np.float32), "not a float32 array of shape (3, 32, 32)"),
                     (np.zeros((32, 32), np.uint8), "not a uint8 array of shape (32, 32)"),
                     (np.zeros((32, 32, 4), np.uint8), "not a uint8 array of shape (32, 32, 4)"),
                     (np.zeros((32, 32, 3), np.int16), "not a int16 array of shape (32, 32, 3)")]
            for array, what in cases:
                with self.assertRaises(ValueError, msg=what) as ctx:
                    engine.detect(array)
                self.assertIn(what, str(ctx.exception))
            with self.assertRaises(TypeError) as ctx:
                engine.detect([PHOTOS[0], 3.5])
            self.assertIn("not a float", str(ctx.exception))

    @unittest.skipIf(PIL is None, "Pillow is not installed (apt-get install python3-pil)")
    def test_pil_images(self):
        """A PIL image (any mode: converted to RGB) detects as its file does."""
        with self.model.build(device="cpu") as engine:
            want = engine.detect(PHOTOS[2], thresh=0.2)
            with PIL.Image.open(PHOTOS[2]) as im:
                self.assertEqual(engine.detect(im, thresh=0.2), want)
                rgba = im.convert("RGBA")
            self.assertEqual(engine.detect([rgba], thresh=0.2), [want])

    def test_results_arrays_plot_and_save(self):
        with self.model.build(device="cpu") as engine:
            r = engine.detect(PHOTOS[0], thresh=0.2)
        n = len(r)
        self.assertGreater(n, 0)
        self.assertEqual((r.xyxy.shape, r.xyxy.dtype), ((n, 4), np.float32))
        self.assertEqual((r.conf.shape, r.conf.dtype), ((n,), np.float32))
        self.assertEqual((r.cls.shape, r.cls.dtype), ((n,), np.int64))
        for i, d in enumerate(r):  # the arrays hold the records' values
            self.assertEqual(list(r.xyxy[i]), [np.float32(v) for v in (d.left, d.top, d.right,
                                                                        d.bottom)])
            self.assertEqual((r.conf[i], r.cls[i]), (np.float32(d.prob), d.class_id))
            self.assertEqual(r.names[d.class_id], d.class_name)
        self.assertEqual(r.boxes[0], r[0])
        self.assertEqual(r.names, {0: "class 0", 1: "class 1"})
        self.assertEqual(r.image.shape, (576, 768, 3))
        plotted = r.plot()
        self.assertEqual((plotted.shape, plotted.dtype), (r.image.shape, np.uint8))
        changed = np.any(plotted != r.image, axis=2)
        self.assertGreater(changed.sum(), 1000)  # boxes and labels drawn
        self.assertTrue(np.array_equal(r.image, graphrun.load_image(PHOTOS[0])))  # not in place
        # Drawn where the boxes are: every changed pixel lies on a box (grown by the line width)
        # or on its label: runtime/image/draw.c scales its 6-pixel glyphs to 3% of the image's
        # height (2x here), a band of at most 30 rows at the box's top, 14 columns a character.
        ys, xs = np.nonzero(changed)
        inside = np.zeros(len(xs), bool)
        for (left, top, right, bottom), d in zip(r.xyxy, r):
            inside |= (xs >= left - 3) & (xs <= right + 3) & (ys >= top - 3) & (ys <= bottom + 3)
            label_w = 14 * len(f"{d.class_name} 0.00")
            inside |= (xs >= left - 3) & (xs <= left + label_w) & (ys >= top - 30) & \
                (ys <= top + 30)
        self.assertTrue(inside.all(), f"{(~inside).sum()} drawn pixels outside every box")
        png = os.path.join(self.tmp.name, "plotted.png")
        r.save(png)
        np.testing.assert_array_equal(graphrun.load_image(png), plotted)  # PNG is lossless
        jpg = pathlib.Path(self.tmp.name) / "plotted.jpg"
        r.save(jpg)
        back = graphrun.load_image(jpg).astype(np.int16)
        self.assertLess(np.abs(back - plotted).mean(), 8)  # JPEG: close, not exact
        with self.assertRaises(graphrun.Error) as ctx:
            r.save(os.path.join(self.tmp.name, "plotted.gif"))
        self.assertIn("plotted.gif", str(ctx.exception))

    def test_empty_results(self):
        with self.model.build(device="cpu") as engine:
            r = engine.detect(PHOTOS[0], thresh=1.0)
        self.assertEqual(len(r), 0)
        self.assertEqual((r.xyxy.shape, r.conf.shape, r.cls.shape), ((0, 4), (0,), (0,)))
        np.testing.assert_array_equal(r.plot(), r.image)

    def test_version_and_library(self):
        self.assertEqual(graphrun.__version__, graphrun.version())
        self.assertEqual(os.path.realpath(graphrun.library_path),
                         os.path.realpath(os.environ["GRAPHRUN_LIBRARY"]))
        self.assertEqual(graphrun.load_library(), graphrun.library_path)  # loaded already: no-op
        with self.assertRaises(graphrun.Error) as ctx:
            graphrun.load_library("/elsewhere/libgraphrun.so")
        self.assertIn("cannot switch to /elsewhere/libgraphrun.so", str(ctx.exception))
        with self.assertRaises(graphrun.Error) as ctx:
            _capi.require("gr_engine_save_as_banana", "Engine.banana")
        self.assertIn("the library is older than this graphrun package", str(ctx.exception))

    def test_precision_read_back_from_the_layer_map(self):
        """What a loaded engine reports as its precision (it has no request to copy): the layer
        map of a uniform engine reads as the precision it was built with, although layers without
        a reduced-precision kernel (the region head here) stay fp32."""
        for precision in ("fp32", "fp16", "int8"):
            with self.model.build(device="cpu", precision=precision) as engine:
                self.assertEqual(engine._built_precision(), precision)

    # ---- engine files (gr_engine_save / gr_engine_load, branch engfile) ------------------------

    @unittest.skipUnless(_capi.has("gr_engine_save") and _capi.has("gr_engine_load"),
                         "this libgraphrun has no gr_engine_save/gr_engine_load (engine files)")
    def test_saved_engine_round_trip(self):
        """An engine saved to a file, and to bytes, loads back into an engine whose outputs and
        detections equal the original's bit for bit (the same CPU reference on the same input)."""
        x = np.random.default_rng(11).random((1, 3, 32, 32), dtype=np.float32)
        path = os.path.join(self.tmp.name, "small.engine")
        with self.model.build(device="cpu") as engine:
            want = engine.run(x)
            want_dets = engine.detect(PHOTOS[0], thresh=0.2)
            engine.save(path)
            data = engine.to_bytes()
        self.assertGreater(os.path.getsize(path), 0)
        self.assertEqual(open(path, "rb").read(), data)
        names = ["class 0", "class 1"]
        for source in (path, pathlib.Path(path), data):
            with graphrun.Engine.load(source, device="cpu", names=names) as loaded:
                self.assertEqual(loaded.output_shapes, [(1, 14, 16, 16)])
                self.assertEqual(loaded.precision, "fp32")
                np.testing.assert_array_equal(loaded.run(x)[0], want[0])
                self.assertEqual(loaded.detect(PHOTOS[0], thresh=0.2), want_dets)
        with self.assertRaises(graphrun.Error) as ctx:
            graphrun.Engine.load(os.path.join(self.tmp.name, "missing.engine"))
        self.assertIn("missing.engine", str(ctx.exception))
        with self.assertRaises(graphrun.Error):
            graphrun.Engine.load(b"not an engine file")

    @unittest.skipUnless(_capi.has("gr_engine_save") and _capi.has("gr_engine_load"),
                         "this libgraphrun has no gr_engine_save/gr_engine_load (engine files)")
    def test_loaded_engine_keeps_class_names(self):
        """Engine.load without names= labels classes with the names the file holds (the model's,
        given when it was built); names= still replaces them."""
        names_file = os.path.join(self.tmp.name, "two.names")
        with open(names_file, "w", encoding="utf-8") as f:
            f.write("circle\nsquare\n")
        path = os.path.join(self.tmp.name, "named.engine")
        with graphrun.Model(cfg=self.cfg, names=names_file) as m, m.build(device="cpu") as engine:
            self.assertEqual(engine.names, {0: "circle", 1: "square"})
            engine.save(path)
        with graphrun.Engine.load(path, device="cpu") as loaded:
            self.assertEqual(loaded.names, {0: "circle", 1: "square"})
        with graphrun.Engine.load(path, device="cpu", names=["a", "b"]) as loaded:
            self.assertEqual(loaded.names, {0: "a", 1: "b"})
        path = os.path.join(self.tmp.name, "unnamed.engine")
        with self.model.build(device="cpu") as engine:
            engine.save(path)
        with graphrun.Engine.load(path, device="cpu") as loaded:
            self.assertEqual(loaded.names, {0: "class 0", 1: "class 1"})

    # ---- files to records (Engine.detect_files) -------------------------------------------------

    def test_detect_files_equals_detect(self):
        """Each record holds detect()'s detections of its file (the same CPU letterbox: equal
        within 1e-4) and its size, in the order given, for batches of 2 and 3 (a short last
        batch); the files that cannot be read or decoded get the library's message naming them,
        and the rest go on. Fewer threads or slots change nothing."""
        paths, bad = files_folder(self.tmp.name)
        good = [p for p in paths if p not in bad]
        with self.model.build(device="cpu") as one:
            want = {p: one.detect(p, thresh=0.2) for p in good}
        self.assertTrue(any(len(r) for r in want.values()), "no detections: nothing compared")
        for batch in (2, 3):
            with self.model.build(device="cpu", batch=batch, inflight=3) as engine:
                self.assertEqual(engine.inflight, 3)
                records = engine.detect_files(paths, thresh=0.2)
                self.assertEqual([r["input"] for r in records], paths)
                for r in records:
                    if r["input"] in bad:
                        self.assertEqual(set(r), {"input", "error"})
                        self.assertIn(r["input"], r["error"])
                        continue
                    image = graphrun.load_image(r["input"])
                    self.assertEqual((r["width"], r["height"]), image.shape[1::-1])
                    expected = want[r["input"]]
                    self.assertEqual(len(r["detections"]), len(expected), r["input"])
                    for d, e in zip(r["detections"], expected):
                        self.assertEqual(set(d), {"class", "class_id", "prob", "objectness",
                                                  "left", "top", "right", "bottom"})
                        self.assertEqual((d["class"], d["class_id"]), (e.class_name, e.class_id))
                        # The CLI's numbers: detect()'s float32 values printed as it prints them.
                        for key, digits in (("prob", 6), ("objectness", 6), ("left", 1),
                                            ("top", 1), ("right", 1), ("bottom", 1)):
                            self.assertEqual(d[key], float(f"{getattr(e, key):.{digits}f}"),
                                             f"{r['input']}: {key}")
                self.assertIn("cannot open image file", records[paths.index(bad[2])]["error"])
                # files_stats: the call's setup and where its time went (gr_files_stats)
                stats = engine.files_stats
                self.assertEqual((stats["images"], stats["batch"], stats["devices"]),
                                 (len(paths), batch, 1))
                self.assertEqual((stats["gpu_decode"], stats["decoder"]), (0, "a CPU engine"))
                self.assertGreater(stats["elapsed_s"], 0.0)
                self.assertGreater(stats["decode_s"], 0.0)
                self.assertGreaterEqual(stats["elapsed_s"], stats["main_deliver_s"])
                self.assertEqual(engine.detect_files(paths, thresh=0.2, threads=1), records)
                self.assertEqual(engine.files_stats["threads"], 1)
                self.assertEqual(engine.detect_files(paths[:batch], thresh=0.2),
                                 records[:batch])  # one batch, fewer slots than the engine's
                self.assertEqual(engine.detect_files([], thresh=0.2), [])
                # the engine's other calls still work after it (input type, slot 0)
                self.assertEqual(engine.detect(good[0], thresh=0.2), want[good[0]])
        with self.model.build(device="cpu", batch=2) as single_slot:
            self.assertEqual(single_slot.detect_files(paths, thresh=0.2), records)

    def test_detect_files_equals_the_cli(self):
        """The same records as `graphrun --input-list` on the same files, errors word for word."""
        paths, _ = files_folder(self.tmp.name + "/cli")
        want, _ = cli_records(["--device", "cpu", "--cfg", self.cfg, "--batch", "3",
                               "--thresh", "0.2"], paths)
        with self.model.build(device="cpu", batch=3, inflight=3) as engine:
            records = engine.detect_files(paths, thresh=0.2, decode="auto")
        self.assertEqual(len(records), len(want))
        for mine, theirs in zip(records, want):
            assert_same_as_cli(self, mine, theirs)

    def test_detect_files_jsonl_is_the_clis_bytes(self):
        """detect_files_jsonl writes the CLI's stdout byte for byte (error lines included), and
        detect_files' records are those lines parsed. A loaded engine's names given to
        Engine.load name the classes of its lines as they do detect()'s."""
        paths, _ = files_folder(self.tmp.name + "/jsonl")
        want, _ = cli_output(["--device", "cpu", "--cfg", self.cfg, "--batch", "3",
                              "--thresh", "0.2"], paths)
        with self.model.build(device="cpu", batch=3, inflight=3) as engine:
            out = io.BytesIO()
            self.assertEqual(engine.detect_files_jsonl(paths, out, thresh=0.2), len(paths))
            self.assertEqual(out.getvalue(), want)
            self.assertEqual(engine.detect_files(paths, thresh=0.2),
                             [json.loads(line) for line in want.splitlines()])
            data = engine.to_bytes()
        names = [f"thing {i}" for i in range(self.model.classes)]
        with graphrun.Engine.load(data, device="cpu", names=names) as loaded:
            records = loaded.detect_files(paths, thresh=0.2)
            classes = {d["class_id"]: d["class"] for r in records for d in r.get("detections", [])}
            self.assertTrue(classes, "no detections: nothing compared")
            self.assertEqual(classes, {k: names[k] for k in classes})

    def test_detect_files_arguments(self):
        """decode="gpu" on a CPU engine raises graphrun's reason; bad arguments raise before any
        file is read."""
        with self.model.build(device="cpu", batch=2) as engine:
            with self.assertRaises(graphrun.Error) as ctx:
                engine.detect_files(PHOTOS, decode="gpu")
            self.assertEqual(ctx.exception.status, "unsupported")
            self.assertIn("detect_files(decode='gpu'): no JPEG decoding on the GPU here",
                          str(ctx.exception))
            for kwargs, error, text in (({"decode": "nvjpeg"}, ValueError, "decode must be"),
                                        ({"threads": 0}, ValueError, "threads must be in"),
                                        ({"thresh": 2.0}, ValueError, "thresh must be")):
                with self.assertRaises(error) as ctx:
                    engine.detect_files(PHOTOS, **kwargs)
                self.assertIn(text, str(ctx.exception))
            with self.assertRaises(TypeError):
                engine.detect_files(PHOTOS[0])  # one path, not a list
            self.assertEqual(len(engine.detect_files([pathlib.Path(PHOTOS[0])])), 1)
        with self.assertRaises(ValueError) as ctx:
            self.model.build(device="cpu", inflight=9)
        self.assertIn("inflight must be in [1, 8]", str(ctx.exception))

    def test_detect_files_nonfinite_records(self):
        """Images whose outputs hold NaN/Inf (fp16 overflowing on weights of 1000) get the CLI's
        record for them, not detections."""
        path = os.path.join(self.tmp.name, "huge.weights")
        with open(path, "wb") as f:
            f.write(np.array([0, 2, 0], np.int32).tobytes() + np.zeros(1, np.uint64).tobytes())
            f.write(np.full(374, 1000.0, np.float32).tobytes())
        paths = PHOTOS + ["data/eagle.jpg"]
        want, _ = cli_records(["--device", "cpu", "--cfg", self.cfg, "--weights", path,
                               "--prec", "fp16", "--batch", "2"], paths)
        with graphrun.Model(cfg=self.cfg, weights=path) as m, \
                m.build(device="cpu", precision="fp16", batch=2, inflight=2) as engine:
            records = engine.detect_files(paths)
        self.assertTrue(all(r.get("nonfinite", 0) > 0 for r in records), records)
        self.assertIn("non-finite values (NaN/Inf)", records[0]["error"])
        self.assertEqual(records, want)

    # ---- pools (gr_pool_build) -------------------------------------------------------------------

    @unittest.skipUnless(_capi.has("gr_pool_build"), "this libgraphrun has no gr_pool_build")
    def test_pool_on_the_cpu_is_one_plain_engine(self):
        """A CPU pool holds one engine, the CPU reference: its outputs and detections equal a
        plain engine's bit for bit; a bad device list raises with graphrun's message."""
        x = np.random.default_rng(12).random((1, 3, 32, 32), dtype=np.float32)
        with self.model.build(device="cpu") as engine:
            want = engine.run(x)
            want_dets = engine.detect(PHOTOS[0], thresh=0.2)
        with graphrun.Pool(self.model, device="cpu") as pool:
            self.assertEqual(pool.devices, [-1])
            self.assertEqual(len(pool.engines), 1)
            self.assertEqual(pool.notice, "")
            np.testing.assert_array_equal(pool.engines[0].run(x)[0], want[0])
            self.assertEqual(pool.engines[0].detect(PHOTOS[0], thresh=0.2), want_dets)
        with self.assertRaises(graphrun.Error) as ctx:
            graphrun.Pool(self.model, devices=[1, 1], device="cpu")
        self.assertIn("gpu 1 given twice", str(ctx.exception))


class GPUTests(unittest.TestCase):
    """On a GPU: the engine against the CPU reference through the same Python calls."""

    @classmethod
    def setUpClass(cls):
        if graphrun.cuda_device_count() == 0:
            raise unittest.SkipTest("no CUDA device visible")
        cls.model = graphrun.Model("yolo")

    def test_fp32_outputs_match_cpu(self):
        x = np.stack([graphrun.letterbox(p, 416, 416) for p in PHOTOS[:2]])
        with self.model.build(device="cpu", batch=2) as cpu, \
                self.model.build(device="gpu", batch=2) as gpu:
            self.assertEqual(gpu.device, "gpu")
            ref = cpu.run(x)[0]
            got = gpu.run(x)[0]
        # Exact fp32 (no TF32) against the same uint8 input: summation order only
        # (tests/test_gpu_engine.c holds the kernels to 1e-5; this checks the Python path).
        nrmse = np.sqrt(np.mean((got - ref) ** 2)) / (ref.max() - ref.min())
        self.assertLess(nrmse, 1e-4)

    def test_int8_detect_and_eager(self):
        with self.model.build(device="gpu", precision="int8", batch=4) as graph, \
                self.model.build(device="gpu", precision="int8", batch=4,
                                 use_cuda_graph=False) as eager:
            a = graph.detect(PHOTOS)
            b = eager.detect(PHOTOS)
        self.assertEqual(len(a), 3)
        self.assertEqual(a, b)   # the graph replays exactly the eager launches

    def test_detect_inputs_agree(self):
        """On the GPU's uint8 path too: a path, its RGB array, its BGR array with color="bgr" and
        its float array give the same detections, exactly."""
        rgb = graphrun.load_image(PHOTOS[0])
        with self.model.build(device="gpu", precision="fp16") as engine:
            want = engine.detect(PHOTOS[0], thresh=0.25)
            self.assertEqual(engine.detect(rgb, thresh=0.25), want)
            self.assertEqual(engine.detect(rgb[..., ::-1], thresh=0.25, color="bgr"), want)
            self.assertEqual(engine.detect(rgb.astype(np.float32) / 255, thresh=0.25), want)
            self.assertEqual(want.plot().shape, rgb.shape)

    def test_detect_files_equals_the_cli(self):
        """detect_files gives the CLI's records on the same files: decode="cpu" the lines of
        `--decode cpu`, decode="gpu" those of `--decode gpu` (int8 engines from one calibration
        cache compute bit-identical outputs, and GPU decoding is deterministic), errors word for
        word; images/s of each printed beside the CLI's (one GPU, the same batch)."""
        batch, thresh = 16, 0.25
        with tempfile.TemporaryDirectory() as tmp:
            paths, _ = files_folder(tmp, copies=40)
            cache = os.path.join(tmp, "calib.cache")
            with self.model.build(device="gpu", precision="int8", batch=batch, inflight=3,
                                  calib_cache=cache) as engine:
                decodes = ["cpu", "gpu"]
                try:
                    engine.detect_files(paths[:1], decode="gpu")
                except graphrun.Error as exc:  # a build without nvJPEG
                    print(f"\ndetect_files: decode='gpu' not tested: {exc}")
                    decodes = ["cpu"]
                for decode in decodes:
                    engine.detect_files(paths[:3 * batch], thresh=thresh, decode=decode)  # warm
                    t0 = time.perf_counter()
                    records = engine.detect_files(paths, thresh=thresh, decode=decode)
                    rate = len(paths) / (time.perf_counter() - t0)
                    want, stderr = cli_records(
                        ["--device", "gpu", "--model", "yolo", "--prec", "int8", "--batch",
                         str(batch), "--calib-cache", cache, "--thresh", str(thresh),
                         "--decode", decode], paths)
                    self.assertEqual(len(records), len(want))
                    for mine, theirs in zip(records, want):
                        assert_same_as_cli(self, mine, theirs)
                    self.assertGreater(sum(len(r.get("detections", [])) for r in records), 0)
                    found = re.search(r"images in [0-9.]+ s: ([0-9.e+]+) images/s", stderr)
                    print(f"\ndetect_files decode={decode}: {len(paths)} files, {rate:.0f} "
                          f"images/s; the CLI: {found.group(1) if found else '?'} images/s "
                          f"({engine.device_name}, yolo int8, batch {batch})")

    @unittest.skipUnless(_capi.has("gr_engine_save") and _capi.has("gr_engine_load"),
                         "this libgraphrun has no gr_engine_save/gr_engine_load (engine files)")
    def test_saved_int8_engine_round_trip(self):
        """An int8 GPU engine saved and loaded again: the same raw outputs bit for bit on the same
        uint8 input (same kernels, same ranges, same tactics) and the same detections."""
        x = np.stack([graphrun.letterbox(p, 416, 416) for p in PHOTOS[:2]])
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "yolo-int8.engine")
            with self.model.build(device="gpu", precision="int8", batch=2) as engine:
                want = engine.run(x)
                want_dets = engine.detect(PHOTOS[:2])
                engine.save(path)
            with graphrun.Engine.load(path, device="gpu") as loaded:
                self.assertEqual(loaded.device, "gpu")
                self.assertEqual(loaded.precision, "int8")
                got = loaded.run(x)
                for k, (g, w) in enumerate(zip(got, want)):
                    np.testing.assert_array_equal(g, w, err_msg=f"output {k}")
                got_dets = loaded.detect(PHOTOS[:2])
        self.assertEqual([[(d.class_id, d.prob, d.left) for d in r] for r in got_dets],
                         [[(d.class_id, d.prob, d.left) for d in r] for r in want_dets])


if __name__ == "__main__":
    if sys.argv[1:] == ["GPUTests"] and graphrun.cuda_device_count() == 0:
        print("python_gpu: no CUDA device visible (skipped)")
        sys.exit(77)  # CTest's skip code
    unittest.main()
