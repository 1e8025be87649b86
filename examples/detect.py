#!/usr/bin/env python3
"""Embedding graphrun from Python: the smallest complete program.

    python3 examples/detect.py IMAGE [OUTPUT.png] [--model yolo] [--precision fp32|fp16|int8]
                               [--bgr]

Builds an engine for a built-in model on the GPU when one is visible (else the CPU reference),
detects on IMAGE and prints one line per box; with OUTPUT, writes the picture with the boxes drawn.
--bgr reads the image with OpenCV when it is installed, to show the colour order of its arrays.
Failures print graphrun's one-line message and exit 1. Install the package first (README, "Python")
or run from a checkout with PYTHONPATH=python."""

import argparse
import sys

import graphrun


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("image")
    parser.add_argument("output", nargs="?")
    parser.add_argument("--model", default="yolo")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "fp16", "int8"])
    parser.add_argument("--bgr", action="store_true", help="decode with OpenCV (BGR arrays)")
    args = parser.parse_args()
    try:
        with graphrun.Model(args.model) as model, model.build(precision=args.precision) as engine:
            image = args.image
            if args.bgr:
                import cv2  # only for this demonstration: any (h, w, 3) array works
                image = cv2.imread(args.image)
            r = engine.detect(image, color="bgr" if args.bgr else "rgb")
            print(f"{args.image}: {len(r)} detections on {engine.device_name} ({engine.precision})")
            for d in r:
                print(f"  {d.class_name:12s} {d.prob:.3f}  {d.left:7.1f} {d.top:7.1f} "
                      f"{d.right:7.1f} {d.bottom:7.1f}")
            if args.output:
                r.save(args.output)
    except (graphrun.Error, OSError, ValueError, TypeError, ImportError) as e:
        print(f"detect.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
