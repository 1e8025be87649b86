"""bench/darknet_torch.py (the PyTorch network bench/peers.py times for --cfg) against graphrun's
CPU reference: yolov4-tiny and yolov7-tiny with the same synthetic weights, head by head, so the
peer numbers are for the same network. CTest test torch_darknet; exits 77 without torch (it is
not in quickstart's packages: Debian python3-torch).

usage: torch_darknet.py BUILD_DIR

NRMSE (RMSE / range of graphrun's tensor) <= 1e-4 per head: both are f32 with the batch norm
folded in double, so only summation order differs. Measured (torch 1.13 CPU): yolov4-tiny
5.7e-7 / 5.9e-7, yolov7-tiny 9.5e-6 / 1.5e-5 / 2.2e-5, the same sizes as graphrun against
AlexeyAB's own build (tests/data/alexeyab/README.md), which a third summation order reproducing
them supports as rounding, not semantics; a wrong layer gives 1e-2 and more.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import torch
except ImportError:
    print("torch_darknet: no torch (apt-get install python3-torch)")
    sys.exit(77)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import graphrun  # noqa: E402
from darknet_torch import DarknetNet  # noqa: E402

LIMIT = 1e-4


def check(build, model, tmp):
    cfg = os.path.join(tmp, model + ".cfg")
    weights = os.path.join(tmp, model + ".weights")
    subprocess.run([os.path.join(build, "test_alexeyab"), "--write-weights", model, "416", cfg,
                    weights], check=True)
    x = np.random.default_rng(0).random((1, 3, 416, 416), dtype=np.float32)
    ours = graphrun.Model(cfg=cfg, weights=weights).build(device="cpu", precision="fp32").run(x)
    with open(cfg) as f:
        net = DarknetNet(f.read(), weights).eval()
    with torch.no_grad():
        theirs = [t.numpy() for t in net(torch.from_numpy(x))]
    ok = len(ours) == len(theirs)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        a = np.asarray(a, dtype=np.float64).reshape(b.shape)
        e = np.sqrt(np.mean((a - b) ** 2)) / (a.max() - a.min())
        print("%s head %d %s: NRMSE %.3g (limit %g)" % (model, k, b.shape, e, LIMIT))
        ok &= bool(e <= LIMIT)
    return ok


def main():
    with tempfile.TemporaryDirectory() as tmp:
        results = [check(sys.argv[1], m, tmp) for m in ("yolov4-tiny", "yolov7-tiny")]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
