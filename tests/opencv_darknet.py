"""graphrun's CPU reference against OpenCV's DNN module (its Darknet importer, an independent
implementation) on yolov4-tiny with synthetic weights: the two head convolutions' outputs.

usage: opencv_darknet.py BUILD_DIR   (CTest test opencv_darknet; exits 77 without cv2)

NRMSE (RMSE / range of OpenCV's tensor) <= 2e-4 per head. Measured 5.3e-5 and 5.8e-5 (OpenCV
4.6, Debian python3-opencv): the size of the difference between AlexeyAB's batch norm and
pjreddie's over this net (6.7e-5), so OpenCV's normalisation is presumably not AlexeyAB's; against
AlexeyAB's own build graphrun agrees to 8.5e-7 (tests/test_alexeyab.c). A wrong layer gives
NRMSE of order 1e-1. yolov7-tiny is not compared: OpenCV 4.6 differs there by 0.1 NRMSE on every
head, while AlexeyAB's build agrees with graphrun to 2.3e-5, so the difference is OpenCV's.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import cv2
except ImportError:
    print("opencv_darknet: no cv2 (apt-get install python3-opencv)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import graphrun  # noqa: E402

LIMIT = 2e-4
HEAD_CONVS = [29, 36]  # the convolutions feeding yolov4-tiny's two [yolo] layers


def main():
    build = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        cfg = os.path.join(tmp, "yolov4-tiny.cfg")
        weights = os.path.join(tmp, "yolov4-tiny.weights")
        subprocess.run([os.path.join(build, "test_alexeyab"), "--write-weights", "yolov4-tiny",
                        "416", cfg, weights], check=True)
        x = np.random.default_rng(0).random((1, 3, 416, 416), dtype=np.float32)
        engine = graphrun.Model(cfg=cfg, weights=weights).build(device="cpu", precision="fp32")
        ours = engine.run(x)
        net = cv2.dnn.readNetFromDarknet(cfg, weights)
        net.setInput(x)
        theirs = net.forward(["conv_%d" % i for i in HEAD_CONVS])
    failed = False
    for k, (a, b) in enumerate(zip(ours, theirs)):
        a = np.asarray(a, dtype=np.float64).reshape(b.shape)
        e = np.sqrt(np.mean((a - b) ** 2)) / (b.max() - b.min())
        print("yolov4-tiny head %d %s: NRMSE %.3g (limit %g)" % (k, b.shape, e, LIMIT))
        failed |= not e <= LIMIT
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
