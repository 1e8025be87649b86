"""Tests of the package's rules for threads, close(), copies, Ctrl-C and path arguments:
every entry point under the engine's (or model's) reader/closer protocol, every C handle owned
once, KeyboardInterrupt raised after the C pipeline stopped, counts equal to what was written,
paths checked before C reads them, synthetic weights said. Scenarios that could crash (a
segfault, an abort on a double free) run in a child interpreter, so a crash is a failed test with
its signal, not a dead runner. Device-agnostic: engines are built with device "auto" (a GPU engine
where there is one). Run from the source root: python3 python/tests/test_safety.py (CTest:
python_safety). $GR_BUILD_DIR names the build directory (libgraphrun.so)."""

import io
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
import warnings
from unittest import mock

import numpy as np

BUILD = os.environ.get("GR_BUILD_DIR", "build")
os.environ.setdefault("GRAPHRUN_LIBRARY", os.path.join(BUILD, "libgraphrun.so"))
PACKAGE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, PACKAGE_DIR)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import graphrun  # noqa: E402
from graphrun import _capi  # noqa: E402

from test_graphrun import SMALL_CFG  # noqa: E402 - a small region network, quick on the CPU

# What every child starts with: the package, a small model (its synthetic-weights warning
# silenced: test_synthetic_weights_warn checks it), an engine builder, a few photos, and check()
# for the exceptions a scenario may see.
PRELUDE = """
import copy, io, json, os, pickle, random, signal, sys, threading, time, warnings
sys.path.insert(0, {package!r})
import numpy as np
import graphrun
warnings.simplefilter("ignore", graphrun.SyntheticWeightsWarning)
CFG = {cfg!r}
PHOTOS = ["data/dog.jpg", "data/horses.jpg", "data/person.jpg"]
MODEL = graphrun.Model(cfg=CFG)
IMAGE = np.full((48, 64, 3), 100, np.uint8)

def build(model=None, batch=2):
    return (model or MODEL).build(device="auto", batch=batch)

def fail(*what):
    print("FAIL:", *what, flush=True)
    os._exit(3)
"""


class WithCfg(unittest.TestCase):
    """A temporary folder (tmp) holding SMALL_CFG (cfg) for the class's tests."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.TemporaryDirectory()
        cls.cfg = os.path.join(cls.tmp.name, "small.cfg")
        with open(cls.cfg, "w") as f:
            f.write(SMALL_CFG)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.tmp.cleanup()


class Child(WithCfg):
    """Runs a scenario in a child interpreter; rc 0 and its last line "ok" pass."""

    def child(self, body: str, timeout: float = 120) -> str:
        code = PRELUDE.format(package=PACKAGE_DIR, cfg=self.cfg) + textwrap.dedent(body) + \
            "\nprint('ok', flush=True)\n"
        try:
            r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired as e:
            self.fail(f"the child ran past {timeout} s (a hang)\nstdout: {e.stdout!r}\n"
                      f"stderr: {e.stderr!r}")
        if os.environ.get("GR_TEST_VERBOSE"):
            sys.stderr.write(r.stdout)
        tail = r.stdout.strip().splitlines()[-1:] if r.stdout.strip() else []
        self.assertTrue(r.returncode == 0 and tail == ["ok"],
                        f"child rc {r.returncode} (negative: killed by that signal, -11 SIGSEGV, "
                        f"-6 SIGABRT)\nstdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}")
        return r.stdout


class SafetyTests(Child):

    def test_close_waits_for_calls_in_flight(self) -> None:
        """Engine.close() from another thread while threads are inside run, detect and
        detect_files (once a segfault): close waits for them, later calls raise ClosedError;
        every call that returned has its full results. Model.close() likewise while threads
        build engines from it and read its class names."""
        self.child("""
        errors = []
        def loop(engine, call, stop):
            try:
                while not stop.is_set():
                    call(engine)
            except graphrun.ClosedError:
                pass
            except BaseException as e:
                errors.append(repr(e))

        def run(e):
            out = e.run(np.zeros((e.batch, 3, e.height, e.width), np.float32))
            if len(out) != len(e.output_shapes):
                errors.append("run: outputs")
        def detect(e):
            if len(e.detect([IMAGE, IMAGE, IMAGE])) != 3:
                errors.append("detect: count")
        def files(e):
            if len(e.detect_files(PHOTOS, threads=2)) != len(PHOTOS):
                errors.append("detect_files: count")
        def jsonl(e):
            buf = io.BytesIO()
            n = e.detect_files_jsonl(PHOTOS, buf, threads=2)
            if n != len(PHOTOS) or len(buf.getvalue().splitlines()) != n:
                errors.append("detect_files_jsonl: count")

        rng = random.Random(1)
        for round in range(12):
            engine = build()
            stop = threading.Event()
            threads = [threading.Thread(target=loop, args=(engine, f, stop))
                       for f in (run, detect, files, jsonl)]
            for t in threads:
                t.start()
            time.sleep(rng.uniform(0.0, 0.05))
            engine.close()
            try:
                engine.run(np.zeros((engine.batch, 3, engine.height, engine.width), np.float32))
                fail("run after close did not raise")
            except graphrun.ClosedError as e:
                if "closed" not in str(e):
                    fail("ClosedError says", e)
            stop.set()
            for t in threads:
                t.join()
            engine.close()  # twice: nothing
        if errors:
            fail(errors[:5])

        def builder(model, stop):
            try:
                while not stop.is_set():
                    model.class_name(0)
                    model.build(device="auto").close()
            except graphrun.ClosedError:
                pass
            except BaseException as e:
                errors.append(repr(e))
        for round in range(6):
            model = graphrun.Model(cfg=CFG)
            stop = threading.Event()
            threads = [threading.Thread(target=builder, args=(model, stop)) for _ in range(2)]
            for t in threads:
                t.start()
            time.sleep(rng.uniform(0.0, 0.05))
            model.close()
            stop.set()
            for t in threads:
                t.join()
        if errors:
            fail(errors[:5])
        """)

    def test_copies_and_pickles_refused(self) -> None:
        """copy.copy / copy.deepcopy / pickle of a Model, an Engine or a Pool raise TypeError
        (copy.copy(engine) once shared the C handle: a double free, abort). Results copy and
        pickle (sharing, or dropping, the model)."""
        self.child("""
        engine = build()
        pool = graphrun.Pool(MODEL, device="cpu")
        for obj in (MODEL, engine, pool, pool.engines[0]):
            for make in (copy.copy, copy.deepcopy, pickle.dumps):
                try:
                    other = make(obj)
                    fail(make.__name__, type(obj).__name__, "made", other)
                except TypeError as e:
                    if "cannot be copied" not in str(e):
                        fail(make.__name__, "says", e)
        r = engine.detect(IMAGE)
        deep = copy.deepcopy(r)
        if deep._model is not MODEL or deep.boxes != r.boxes or deep.image is r.image:
            fail("deepcopy of Results")
        back = pickle.loads(pickle.dumps(r))
        if back.boxes != r.boxes or back.plot().shape != IMAGE.shape:
            fail("pickle of Results")
        pool.close()
        del engine, pool, r, deep
        import gc
        gc.collect()
        """)

    def _interrupt_body(self) -> str:
        return """
        engine = build()
        PATHS = PHOTOS * 10000  # far longer than the interrupt's delay, on any device

        def interrupt_after(seconds):
            def send():
                time.sleep(seconds)
                os.kill(os.getpid(), signal.SIGINT)
            threading.Thread(target=send, daemon=True).start()

        for attempt in range(3):
            interrupt_after(0.3)
            start = time.monotonic()
            try:
                records = engine.detect_files(PATHS, threads=2)
                fail("detect_files returned", len(records), "records: no KeyboardInterrupt")
            except KeyboardInterrupt:
                pass
            took = time.monotonic() - start
            made = engine.files_stats["records"]
            if not 0 <= made < len(PATHS) or took > 20:
                fail("detect_files: records", made, "in", took, "s")

            buf = io.BytesIO()
            interrupt_after(0.3)
            try:
                n = engine.detect_files_jsonl(PATHS, buf, threads=2)
                fail("detect_files_jsonl returned", n, "with", len(buf.getvalue().splitlines()),
                     "lines: no KeyboardInterrupt")
            except KeyboardInterrupt:
                pass
            lines = buf.getvalue().splitlines()
            if len(lines) != engine.files_stats["records"]:
                fail("detect_files_jsonl wrote", len(lines), "lines, records say",
                     engine.files_stats["records"])
            for k, line in enumerate(lines):
                if json.loads(line)["input"] != PATHS[k]:
                    fail("line", k, "is", line)
            # The engine is whole after an interrupt.
            buf = io.BytesIO()
            if engine.detect_files_jsonl(PHOTOS, buf) != 3 or \\
                    len(buf.getvalue().splitlines()) != 3:
                fail("detect_files_jsonl after the interrupt")
            if len(engine.detect_files(PHOTOS)) != 3:
                fail("detect_files after the interrupt")
        """

    def test_ctrl_c_during_detect_files(self) -> None:
        """SIGINT during detect_files / detect_files_jsonl raises KeyboardInterrupt once the
        pipeline stopped (it used to return partial results without an exception), quickly; the
        lines written are whole and files_stats["records"] counts them; the engine runs again."""
        self.child(self._interrupt_body())

    def test_stress_threads_close_and_sigint(self) -> None:
        """A few seconds of everything at once: threads in run / detect / detect_files /
        detect_files_jsonl on one engine, SIGINT during the main thread's detect_files, another
        thread closing the engine. No crash; only ClosedError and KeyboardInterrupt; every call
        that returned has its full count."""
        self.child("""
        errors = []
        PATHS = PHOTOS * 2000

        def worker(engine, stop, k):
            try:
                while not stop.is_set():
                    if k == 0:
                        engine.run(np.zeros((engine.batch, 3, engine.height, engine.width),
                                            np.float32))
                    elif k == 1:
                        if len(engine.detect([IMAGE] * 3)) != 3:
                            errors.append("detect count")
                    else:
                        buf = io.BytesIO()
                        n = engine.detect_files_jsonl(PHOTOS, buf, threads=2)
                        if n != 3 or len(buf.getvalue().splitlines()) != 3:
                            errors.append("jsonl count")
            except graphrun.ClosedError:
                pass
            except BaseException as e:
                errors.append(repr(e))

        rng = random.Random(2)
        checked = []
        deadline = time.monotonic() + 3.0
        rounds = 0
        while time.monotonic() < deadline or rounds < 3:
            rounds += 1
            engine = build()
            stop = threading.Event()
            threads = [threading.Thread(target=worker, args=(engine, stop, k)) for k in range(3)]
            closer = threading.Timer(rng.uniform(0.05, 0.4), engine.close)
            sigint = threading.Timer(rng.uniform(0.0, 0.3), os.kill, (os.getpid(), signal.SIGINT))
            for t in threads:
                t.start()
            closer.start()
            sigint.start()
            try:
                buf = io.BytesIO()
                try:
                    n = engine.detect_files_jsonl(PATHS, buf, threads=2)
                    if n != len(PATHS) or len(buf.getvalue().splitlines()) != n:
                        errors.append("main jsonl count")
                except KeyboardInterrupt:
                    # Whole lines, in order; their count where files_stats is still this call's
                    # (the workers' calls on the engine replace it: theirs have 3 images).
                    lines = buf.getvalue().splitlines()
                    if any(json.loads(line)["input"] != PATHS[k] for k, line in enumerate(lines)):
                        errors.append("interrupted jsonl: lines out of order")
                    stats = engine.files_stats
                    if stats and stats["images"] == len(PATHS) and \
                            len(lines) != stats["records"]:
                        errors.append(f"interrupted jsonl: {len(lines)} lines, "
                                      f"{stats['records']} records")
                    checked.append(bool(stats and stats["images"] == len(PATHS)))
                except graphrun.ClosedError:
                    pass
                sigint.join()  # its SIGINT may still be pending: taken here, or below
                time.sleep(0.01)
            except KeyboardInterrupt:
                pass
            closer.join()
            stop.set()
            for t in threads:
                t.join()
        if errors:
            fail(errors[:5])
        print("rounds", rounds, "interrupted", len(checked), "counts checked", sum(checked))
        """)


class PathTests(WithCfg):
    """Path arguments are checked before C reads them ("dog.jpg\\0x" used to run dog.jpg)."""

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", graphrun.SyntheticWeightsWarning)
            cls.model = graphrun.Model(cfg=cls.cfg)
        cls.engine = cls.model.build(device="cpu")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.engine.close()
        cls.model.close()
        super().tearDownClass()

    def test_nul_and_wrong_types_refused(self) -> None:
        e, nul = self.engine, "data/dog.jpg\0x"
        for call, name in [
                (lambda: e.detect_files(["data/dog.jpg", nul]), "paths[1]"),
                (lambda: e.detect_files_jsonl([nul], io.BytesIO()), "paths[0]"),
                (lambda: e.detect(nul), "image"),
                (lambda: e.detect(["data/dog.jpg", nul]), "images[1]"),
                (lambda: graphrun.load_image(nul), "path"),
                (lambda: graphrun.Model(cfg=self.cfg + "\0x"), "cfg"),
                (lambda: graphrun.Model(cfg=self.cfg, weights="w\0x"), "weights"),
                (lambda: graphrun.Model(cfg=self.cfg, names="n\0x"), "names"),
                (lambda: graphrun.Model("yolo\0x"), "builtin"),
                (lambda: e.save(os.path.join(self.tmp.name, "e\0x")), "path"),
                (lambda: graphrun.Engine.load(os.path.join(self.tmp.name, "e\0x")), "source"),
                (lambda: self.model.build(device="cpu", calib_cache="c\0x"), "calib_cache"),
                (lambda: self.model.build(device="cpu", precision="int8",
                                          calib_images=["data/dog.jpg", nul]), "calib_images[1]"),
                (lambda: e.detect(IMAGE_ARRAY).save(os.path.join(self.tmp.name, "a\0.png")),
                 "path")]:
            with self.subTest(name=name):
                with self.assertRaises(ValueError) as caught:
                    call()
                self.assertIn(name, str(caught.exception))
                self.assertIn("NUL", str(caught.exception))
        for bad, name in [([3], "paths[0]"), (["data/dog.jpg", b"data/dog.jpg"], "paths[1]"),
                          ([None], "paths[0]")]:
            with self.subTest(bad=bad):
                with self.assertRaises(TypeError) as caught:
                    e.detect_files(bad)  # type: ignore[arg-type]
                self.assertIn(name, str(caught.exception))
        with self.assertRaises(TypeError):
            graphrun.Model(cfg=self.cfg, weights=3)  # type: ignore[arg-type]
        # Nothing was run for a refused list (the records of a good one still come).
        self.assertEqual(len(e.detect_files(["data/dog.jpg"])), 1)

    def test_pipeline_failure_keeps_its_message(self) -> None:
        """A failure of the C pipeline (which runs on a helper thread, so Ctrl-C lands) keeps the
        library's one-line message: gr_last_error() is per thread. Here stats->struct_size 0."""

        class ZeroSize(_capi.FilesStats):
            def __setattr__(self, name: str, value: object) -> None:
                super().__setattr__(name, 0 if name == "struct_size" else value)

        with mock.patch.object(_capi, "FilesStats", ZeroSize):
            with self.assertRaises(graphrun.Error) as caught:
                self.engine.detect_files(["data/dog.jpg"])
        self.assertEqual(caught.exception.status, "invalid argument")
        self.assertIn("gr_pool_detect_files: stats->struct_size is 0", str(caught.exception))
        self.assertEqual(len(self.engine.detect_files(["data/dog.jpg"])), 1)

    def test_load_refuses_another_device(self) -> None:
        """Engine.load(cpu file, device="gpu") is refused as the CLI's --device with --engine
        (it used to give a CPU engine); "auto" and "cpu" load it."""
        path = os.path.join(self.tmp.name, "cpu.grengine")
        self.engine.save(path)
        for source in (path, self.engine.to_bytes()):
            with self.assertRaises(graphrun.Error) as caught:
                graphrun.Engine.load(source, device="gpu")
            self.assertEqual(caught.exception.status, "invalid argument")
            self.assertIn("device='gpu' contradicts", str(caught.exception))
            self.assertIn("CPU", str(caught.exception))
            for device in ("auto", "cpu"):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", graphrun.SyntheticWeightsWarning)
                    with graphrun.Engine.load(source, device=device) as loaded:
                        self.assertEqual(loaded.device, "cpu")


IMAGE_ARRAY = np.full((48, 64, 3), 100, np.uint8)


class SyntheticWeightsTests(WithCfg):

    def test_synthetic_weights_warn(self) -> None:
        """Synthetic weights warn once per model with a category users can filter, and the
        notice says so (it used to say nothing; the CLI warns). Trained weights do
        not warn; a loaded engine built from synthetic weights warns too."""
        cfg = self.cfg
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = graphrun.Model(cfg=cfg, seed=7)
            engine = model.build(device="auto")
            engine.detect(IMAGE_ARRAY)
            engine.detect(IMAGE_ARRAY)
        synthetic = [w for w in caught
                     if issubclass(w.category, graphrun.SyntheticWeightsWarning)]
        self.assertEqual(len(synthetic), 1, [str(w.message) for w in caught])
        self.assertTrue(issubclass(graphrun.SyntheticWeightsWarning, UserWarning))
        self.assertIn("SYNTHETIC (seed 7)", str(synthetic[0].message))
        self.assertEqual(synthetic[0].filename, __file__)  # points at the caller's line
        self.assertTrue(model.synthetic_weights)
        self.assertIn("SYNTHETIC (seed 7)", model.notice)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with graphrun.Engine.load(engine.to_bytes()) as loaded:
                self.assertTrue(loaded.synthetic_weights)
        self.assertEqual([w.category for w in caught], [graphrun.SyntheticWeightsWarning])
        self.assertTrue(engine.synthetic_weights)
        with warnings.catch_warnings():  # the filter users would set
            warnings.simplefilter("error")
            warnings.filterwarnings("ignore", category=graphrun.SyntheticWeightsWarning)
            graphrun.Model(cfg=cfg).close()
        engine.close()
        model.close()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            trained = graphrun.Model("shapes")  # data/shapes.weights: trained
        self.assertFalse(trained.synthetic_weights)
        with trained.build(device="cpu") as engine:
            self.assertFalse(engine.synthetic_weights)
        self.assertNotIn("SYNTHETIC", trained.notice)
        self.assertEqual([w for w in caught
                          if issubclass(w.category, graphrun.SyntheticWeightsWarning)], [])
        trained.close()


if __name__ == "__main__":
    unittest.main()
