#!/usr/bin/python3
"""Full-size ONNX benchmark networks for graphrun and their PyTorch twins (the ONNX speed
measurement: YOLOv8n at 640 x 640 beside PyTorch's fp16 CUDA graph of the same network).

  python3 bench/onnx_models.py OUTDIR
writes OUTDIR/yolov8n-640.onnx (opset 17, what `yolo export format=onnx` gives for a 640 x 640
YOLOv8n: one input [1, 3, 640, 640], one output [1, 84, 8400]) and OUTDIR/yolov8n-640.pt (the same
module and weights as TorchScript, which bench/peers.py --torchscript loads without this source).
Needs PyTorch and the onnx package: Debian's python3-torch and python3-onnx here (~30 s on 2
cores), or the GPU machine's own (~5 s; its exporter writes the weights to a side file, which
embed_weights folds back in).

The network is YOLOv8n's published structure (width 0.25, depth 0.33: channels 16, 32, 64, 128, 256;
C2f repeats 1, 2, 2, 1 in the backbone and 1 in the neck; SPPF; the anchor-free head with 64-channel
box and 80-channel class branches, DFL, 80 classes), built from the oracle's own modules
(tests/onnx/make_models.py: written from the description, no Ultralytics code), with seeded weights
and batch-norm statistics measured on random images, as the oracle networks are. Synthetic weights
time like trained ones: the kernels do not look at the values (never zeros: see bench/README.md).
"""
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "onnx"))
from make_models import (AnchorFreeHead, ConvBnSilu, SplitBlock, Sppf, YoloV8nLike,  # noqa: E402
                         seed_statistics)

SIZE = 640


class YoloV8n(YoloV8nLike):
    """The oracle's YoloV8nLike topology (its `features`: backbone, SPPF, neck) at YOLOv8n's widths
    and depths, with the anchor-free head."""

    def __init__(self, nc=80, size=SIZE):
        nn.Module.__init__(self)
        self.stem = ConvBnSilu(3, 16, 3, 2)
        self.s2 = nn.Sequential(ConvBnSilu(16, 32, 3, 2), SplitBlock(32, 32, n=1))
        self.s3 = nn.Sequential(ConvBnSilu(32, 64, 3, 2), SplitBlock(64, 64, n=2))
        self.s4 = nn.Sequential(ConvBnSilu(64, 128, 3, 2), SplitBlock(128, 128, n=2))
        self.s5 = nn.Sequential(ConvBnSilu(128, 256, 3, 2), SplitBlock(256, 256, n=1),
                                Sppf(256, 256))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.n4 = SplitBlock(256 + 128, 128, residual=False)
        self.n3 = SplitBlock(128 + 64, 64, residual=False)
        self.down3 = ConvBnSilu(64, 64, 3, 2)
        self.m4 = SplitBlock(64 + 128, 128, residual=False)
        self.down4 = ConvBnSilu(128, 128, 3, 2)
        self.m5 = SplitBlock(128 + 256, 256, residual=False)
        self.head = AnchorFreeHead(nc, (64, 128, 256), (8, 16, 32), size, c2=64, c3=80)

    def forward(self, x):
        return self.head(list(self.features(x)))


def embed_weights(path):
    """Newer PyTorch exporters (2.11 on the GPU machine) write the initializers to a side file
    (PATH.data), which graphrun refuses ("keeps its data in an external file"): re-save the model
    with the weights inside, as `yolo export` and Debian's PyTorch give it."""
    side = path + ".data"
    if not os.path.exists(side):
        return
    import onnx
    onnx.save(onnx.load(path), path, save_as_external_data=False)
    os.remove(side)


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = YoloV8n()
    seed_statistics(model, torch.rand(2, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(5)))
    model.eval()
    x = torch.rand(1, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(6))
    onnx_path = os.path.join(out, f"yolov8n-{SIZE}.onnx")
    torch.onnx.export(model, x, onnx_path, opset_version=17, input_names=["images"],
                      output_names=["output0"], do_constant_folding=True)
    embed_weights(onnx_path)
    with torch.no_grad():
        traced = torch.jit.trace(model, x)
        y = model(x)
    traced.save(os.path.join(out, f"yolov8n-{SIZE}.pt"))
    params = sum(p.numel() for p in model.parameters())
    print(f"{onnx_path}: {params / 1e6:.2f} M parameters, output {list(y.shape)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
