"""graphrun's CPU reference against OpenCV's DNN module (its Darknet importer, an independent
implementation) with synthetic weights on yolov4-tiny, yolov7-tiny and yolov4-csp: the outputs of
the convolutions that feed the [yolo] layers.

usage: opencv_darknet.py BUILD_DIR   (CTest test opencv_darknet; exits 77 without cv2)

NRMSE = RMSE / range of OpenCV's tensor, per head. OpenCV's layer conv_N is the convolution before
its activation: yolov7-tiny's and yolov4-csp's head convs end in a logistic (new_coords), which is
applied to OpenCV's tensor here (graphrun's output has it).
  yolov4-tiny (416 x 416) <= 2e-4: measured 5.3e-5 and 5.8e-5 (OpenCV 4.6, Debian python3-opencv).
  yolov7-tiny (416 x 416) and yolov4-csp (160 x 160, as test_alexeyab) <= 1e-2: measured 0.9e-3 to
  1.7e-3 and 2.0e-3 to 3.1e-3.
The differences are OpenCV's: graphrun agrees with AlexeyAB's own build to 3e-10 on these nets
(tests/test_alexeyab.c), while OpenCV 4.6's importer normalises as pjreddie's Darknet does:
with graphrun's parser made to read these cfgs as pjreddie's (batch norm
(x - mean) / (sqrt(var) + 1e-6), unfolded; double leaky and logistic) the same comparison gave
2.2e-6 (yolov4-tiny), 7.7e-5 (yolov7-tiny) and 1.0e-4 (yolov4-csp). A wrong layer gives NRMSE of
order 1e-1 (comparing yolov7-tiny's heads without the logistic gave 0.12).
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

# (model, input size, the head convolutions, whether they end in a logistic, NRMSE limit)
CASES = [("yolov4-tiny", 416, [29, 36], False, 2e-4),
         ("yolov7-tiny", 416, [89, 93, 97], True, 1e-2),
         ("yolov4-csp", 160, [143, 158, 173], True, 1e-2)]


def compare(build, model, size, heads, logistic, limit):
    with tempfile.TemporaryDirectory() as tmp:
        cfg = os.path.join(tmp, model + ".cfg")
        weights = os.path.join(tmp, model + ".weights")
        subprocess.run([os.path.join(build, "test_alexeyab"), "--write-weights", model,
                        str(size), cfg, weights], check=True)
        x = np.random.default_rng(0).random((1, 3, size, size), dtype=np.float32)
        engine = graphrun.Model(cfg=cfg, weights=weights).build(device="cpu", precision="fp32")
        ours = engine.run(x)
        net = cv2.dnn.readNetFromDarknet(cfg, weights)
        net.setInput(x)
        theirs = net.forward(["conv_%d" % i for i in heads])
    failed = False
    for k, (a, b) in enumerate(zip(ours, theirs)):
        b = np.asarray(b, dtype=np.float64)
        if logistic:
            b = 1.0 / (1.0 + np.exp(-b))
        a = np.asarray(a, dtype=np.float64).reshape(b.shape)
        e = np.sqrt(np.mean((a - b) ** 2)) / (b.max() - b.min())
        print("%s head %d %s: NRMSE %.3g (limit %g)" % (model, k, b.shape, e, limit))
        failed |= not e <= limit
    return failed


def main():
    failed = False
    for case in CASES:
        failed |= compare(sys.argv[1], *case)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
