#!/usr/bin/python3
"""Second oracle for the ONNX importer, for the device machine (docs/onnx.md): on the test models
of tests/onnx/,
  - ONNX Runtime (CPU provider) against PyTorch's records (the files are what PyTorch exported),
  - graphrun's CPU reference against PyTorch and ONNX Runtime (fp32),
  - graphrun's GPU engine in each precision against the CPU engine's emulation of the same
    precision (int8: both calibrated on the CPU, --calib-device cpu, so the ranges are the same),
each as NRMSE (RMSE / range of the reference) per output, with the Darknet models' bounds
(fp32 <= 1e-5, fp16 <= 1e-3, int8 <= 1e-2), and, unbounded, for information, each precision's
CPU emulation against fp32 (the conditioned network, docs/onnx.md "Precision of the oracle
networks": measured on the CPU at most 1.6e-4 and 0.016; `graphrun compare --per-layer` shows
it per layer). Runs the graphrun CLI of BUILD_DIR (--save-output);
needs numpy and Pillow, and onnxruntime for its rows (skipped, saying so, without it).

Usage: tests/onnx/ort_check.py BUILD_DIR      (from the source root; exit 1 if a bound fails)
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ["yolov8n_like_op13.onnx", "yolov8n_like_op17.onnx"]
PHOTOS = ["dog", "horses"]
BOUND = {"fp32": 1e-5, "fp16": 1e-3, "int8": 1e-2}


def nrmse(got, ref):
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    span = ref.max() - ref.min()
    return float(np.sqrt(((got - ref) ** 2).mean()) / span) if span > 0 else float("inf")


def photo_input(photo):
    px = np.asarray(Image.open(os.path.join(HERE, f"input_{photo}.png")).convert("RGB"))
    return (px.astype(np.float32) / np.float32(255)).transpose(2, 0, 1)[None].copy()


def graphrun(binary, model, x, device, prec, tmp):
    src = os.path.join(tmp, "in.npy")
    np.save(src, x)
    out = os.path.join(tmp, f"{device}_{prec}.npy")
    cmd = [binary, "--model", os.path.join(HERE, model), "--input", src, "--device", device,
           "--prec", prec, "--calib-device", "cpu", "--output", "", "--save-output", out]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {run.returncode}: {run.stderr.strip()}")
    base = out[:-4]
    return [np.load(out)] + [np.load(f"{base}.{k}.npy") for k in (1, 2)]


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    binary = os.path.join(sys.argv[1], "graphrun")
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
        print("ort_check: no onnxruntime: its rows are skipped")
    failed = 0

    def row(what, value, bound):
        nonlocal failed
        ok = value <= bound
        failed += not ok
        print(f"{what:60s} NRMSE {value:.2e} (bound {bound:.0e}) {'ok' if ok else 'FAIL'}")

    with tempfile.TemporaryDirectory() as tmp:
        for model in MODELS:
            sess = ort.InferenceSession(os.path.join(HERE, model),
                                        providers=["CPUExecutionProvider"]) if ort else None
            for photo in PHOTOS:
                x = photo_input(photo)
                torch_out = [np.load(os.path.join(HERE, f"out_{photo}_{k}.npy")) for k in range(3)]
                cpu = graphrun(binary, model, x, "cpu", "fp32", tmp)
                ort_out = sess.run(None, {"images": x}) if sess else None
                for k in range(3):
                    tag = f"{model} {photo} output {k}"
                    row(f"{tag}: graphrun CPU vs PyTorch", nrmse(cpu[k], torch_out[k]), 1e-5)
                    if ort_out is not None:
                        row(f"{tag}: ORT vs PyTorch", nrmse(ort_out[k], torch_out[k]), 1e-5)
                        row(f"{tag}: graphrun CPU vs ORT", nrmse(cpu[k], ort_out[k]), 1e-5)
                for prec in ("fp32", "fp16", "int8"):
                    emulated = cpu if prec == "fp32" else graphrun(binary, model, x, "cpu", prec,
                                                                   tmp)
                    gpu = graphrun(binary, model, x, "gpu", prec, tmp)
                    for k in range(3):
                        tag = f"{model} {photo} output {k}"
                        row(f"{tag}: GPU {prec} vs CPU {prec}", nrmse(gpu[k], emulated[k]),
                            BOUND[prec])
                        if prec != "fp32":
                            print(f"{tag + f': CPU {prec} vs fp32 (information)':60s} NRMSE "
                                  f"{nrmse(emulated[k], cpu[k]):.2e}")
    print(f"ort_check: {failed} over their bound")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
