#!/usr/bin/python3
"""The ONNX importer's oracle (docs/onnx.md): a small YOLOv8n-like network in PyTorch, exported
with torch.onnx.export at two opsets, and PyTorch's outputs on two bundled photos.

The modules are written here from the published structure of such networks (Conv-BN-SiLU blocks,
C2f-like blocks that split their channels and concatenate their bottlenecks, an SPPF with three
stride-1 max pools, an upsample + concat neck); no Ultralytics code. The network ends before the
detection head's DFL decode: each of the three scales ends in a plain 1x1 conv, so its outputs are
plain tensors.

Writes, into tests/onnx/ (committed; run again only to regenerate, needs Debian's python3-torch
and python3-onnx, not needed by the tests):
  yolov8n_like_op13.onnx, yolov8n_like_op17.onnx  the same network and weights at opsets 13, 17
  input_<photo>.png       the photo letterboxed (value 114, centred) to SIZE x SIZE, RGB: the test
                          feeds these pixels / 255 (float32), in NCHW order
  out_<photo>_<k>.npy     PyTorch's output k (float32, [1, C, H, W]) on that input
  tiny_ops.onnx, tiny_input.npy, tiny_out.npy  the other mappings (TinyOps) on a fixed input
  tiny_classifier.onnx, tiny_classifier_out.npy  TinyClassifier on tiny_input.npy
  const_arith.onnx, const_arith_out.npy  ConstArith on tiny_input.npy
  alias.onnx              a Relu after an Identity of a conv output that is also a graph output
                          (refused: folding it would change the other output)
  erf.onnx                a conv and an Erf node, which the importer refuses (the refusal test)
Deterministic: the same torch build writes the same files.
"""
import os
import sys

import numpy as np
import torch
from PIL import Image
from torch import nn

SIZE = 128
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PHOTOS = ["dog", "horses"]


class ConvBnSilu(nn.Module):
    def __init__(self, c_in, c_out, k=1, s=1, groups=1):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, k, s, k // 2, groups=groups, bias=False)
        self.bn = nn.BatchNorm2d(c_out)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c, residual):
        super().__init__()
        self.cv1 = ConvBnSilu(c, c, 3)
        self.cv2 = ConvBnSilu(c, c, 3)
        self.residual = residual

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.residual else y


class SplitBlock(nn.Module):
    """C2f-like: 1x1 conv to 2c channels, halves, n bottlenecks on the second half, concat of all,
    1x1 conv. `slicing` takes the halves with x[:, :c] / x[:, c:] (ONNX Slice) instead of
    chunk (ONNX Split)."""

    def __init__(self, c_in, c_out, n=1, residual=True, slicing=False):
        super().__init__()
        self.c = c_out // 2
        self.cv1 = ConvBnSilu(c_in, 2 * self.c)
        self.m = nn.ModuleList(Bottleneck(self.c, residual) for _ in range(n))
        self.cv2 = ConvBnSilu((2 + n) * self.c, c_out)
        self.slicing = slicing

    def forward(self, x):
        y = self.cv1(x)
        if self.slicing:
            parts = [y[:, : self.c], y[:, self.c :]]
        else:
            parts = list(y.chunk(2, 1))
        for m in self.m:
            parts.append(m(parts[-1]))
        return self.cv2(torch.cat(parts, 1))


class Sppf(nn.Module):
    def __init__(self, c_in, c_out, k=5):
        super().__init__()
        c = c_in // 2
        self.cv1 = ConvBnSilu(c_in, c)
        self.cv2 = ConvBnSilu(4 * c, c_out)
        self.pool = nn.MaxPool2d(k, 1, k // 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.pool(x)
        y2 = self.pool(y1)
        return self.cv2(torch.cat([x, y1, y2, self.pool(y2)], 1))


class ScaleOut(nn.Module):
    """Per-scale output branch: a Conv-BN-SiLU then a plain 1x1 conv with bias (no decode)."""

    def __init__(self, c_in, c_out):
        super().__init__()
        self.cv = ConvBnSilu(c_in, c_in, 3)
        self.out = nn.Conv2d(c_in, c_out, 1)

    def forward(self, x):
        return self.out(self.cv(x))


class YoloV8nLike(nn.Module):
    def __init__(self, w=(8, 16, 32, 48), outputs=24):
        super().__init__()
        a, b, c, d = w
        self.stem = ConvBnSilu(3, a, 3, 2)
        self.s2 = nn.Sequential(ConvBnSilu(a, b, 3, 2), SplitBlock(b, b))
        self.s3 = nn.Sequential(ConvBnSilu(b, c, 3, 2), SplitBlock(c, c, slicing=True))
        self.s4 = nn.Sequential(ConvBnSilu(c, d, 3, 2), SplitBlock(d, d))
        self.s5 = nn.Sequential(ConvBnSilu(d, d, 3, 2), SplitBlock(d, d), Sppf(d, d))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.n4 = SplitBlock(d + d, c, residual=False)
        self.n3 = SplitBlock(c + c, b, residual=False)
        self.down3 = ConvBnSilu(b, b, 3, 2)
        self.m4 = SplitBlock(b + c, c, residual=False)
        self.down4 = ConvBnSilu(c, c, 3, 2)
        self.m5 = SplitBlock(c + d, d, residual=False)
        self.o3 = ScaleOut(b, outputs)
        self.o4 = ScaleOut(c, outputs)
        self.o5 = ScaleOut(d, outputs)

    def forward(self, x):
        p3 = self.s3(self.s2(self.stem(x)))
        p4 = self.s4(p3)
        p5 = self.s5(p4)
        n4 = self.n4(torch.cat([self.up(p5), p4], 1))
        n3 = self.n3(torch.cat([self.up(n4), p3], 1))
        m4 = self.m4(torch.cat([self.down3(n3), n4], 1))
        m5 = self.m5(torch.cat([self.down4(m4), p5], 1))
        return self.o3(n3), self.o4(m4), self.o5(m5)


class TinyOps(nn.Module):
    """One of each other mapping the importer does, small enough for the fuzz corpus: an unfused
    BatchNormalization (exported with TrainingMode.PRESERVE), LeakyRelu(0.1), a grouped strided
    conv with Relu, Split with sizes, a dilated conv with Sigmoid, a 2x2 MaxPool, Add + Relu."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, 2, 1, groups=2)
        self.conv3 = nn.Conv2d(4, 4, 3, 1, 2, dilation=2)
        self.pool = nn.MaxPool2d(2, 2)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.out = nn.Conv2d(8, 6, 1)

    def forward(self, x):
        y = torch.relu(self.conv2(nn.functional.leaky_relu(self.bn1(self.conv1(x)), 0.1)))
        a, b = torch.split(y, [4, 4], 1)
        z = torch.cat([a, torch.sigmoid(self.conv3(b))], 1)
        return self.out(torch.relu(y + self.up(self.pool(z))))


class TinyClassifier(nn.Module):
    """The classifier-side mappings: ReLU6 (Clip), Tanh, ELU, global average pool, Flatten,
    Linear (Gemm) + Sigmoid, Linear + Softmax."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 2, 1)
        self.conv2 = nn.Conv2d(8, 8, 3, 1, 1)
        self.conv3 = nn.Conv2d(8, 16, 3, 2, 1)
        self.fc1 = nn.Linear(16, 12)
        self.fc2 = nn.Linear(12, 10)

    def forward(self, x):
        x = torch.tanh(self.conv2(nn.functional.relu6(self.conv1(x))))
        x = nn.functional.elu(self.conv3(x))
        x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return torch.softmax(self.fc2(torch.sigmoid(self.fc1(x))), 1)


class ConstArith(nn.Module):
    """Constants applied to conv and linear outputs (folded into their weights): a per-channel
    scale and shift after a conv, a scalar division, a subtraction after a Linear."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(11)
        self.conv = nn.Conv2d(3, 6, 3, 1, 1)
        self.conv2 = nn.Conv2d(6, 4, 1)
        self.fc = nn.Linear(4 * 16 * 16, 5)
        self.register_buffer("scale", 0.5 + torch.rand(1, 6, 1, 1, generator=g))
        self.register_buffer("shift", torch.randn(1, 6, 1, 1, generator=g))
        self.register_buffer("offset", torch.randn(5, generator=g))

    def forward(self, x):
        y = torch.relu(self.conv(x) * self.scale + self.shift)
        y = torch.flatten(self.conv2(y) / 3.0, 1)
        return self.fc(y) - self.offset


class ErfNet(nn.Module):
    """A conv, then an op the importer refuses (Erf: GELU's core)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, 1, 1)

    def forward(self, x):
        return torch.erf(self.conv(x))


def alias_model(path):
    """Conv -> Identity -> Relu with the conv's output also a graph output: the Relu cannot be
    folded into the conv (the second output would see it), so the importer must refuse it."""
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((2, 1, 1, 1), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Identity", ["c"], ["i"], name="identity"),
             helper.make_node("Relu", ["i"], ["r"], name="relu")]
    graph = helper.make_graph(
        nodes, "alias", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, 2, 4, 4]),
         helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 2, 4, 4])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def letterbox(name):
    """The photo scaled to fit SIZE x SIZE (aspect kept), centred on grey 114."""
    im = Image.open(os.path.join(ROOT, "data", name + ".jpg")).convert("RGB")
    scale = min(SIZE / im.width, SIZE / im.height)
    w, h = round(im.width * scale), round(im.height * scale)
    canvas = Image.new("RGB", (SIZE, SIZE), (114, 114, 114))
    canvas.paste(im.resize((w, h), Image.BILINEAR), ((SIZE - w) // 2, (SIZE - h) // 2))
    return canvas


def seed_statistics(model, images):
    """BN statistics that keep activations in range: random affine parameters, then the running
    mean and variance measured on the inputs (one cumulative pass in training mode)."""
    g = torch.Generator().manual_seed(7)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.weight.data = 0.5 + torch.rand(m.num_features, generator=g)
            m.bias.data = 0.2 * torch.randn(m.num_features, generator=g)
            m.momentum = None
            m.reset_running_stats()
    model.train()
    with torch.no_grad():
        model(images)
    model.eval()


def export(model, example, path, opset, names):
    torch.onnx.export(model, example, path, opset_version=opset, input_names=["images"],
                      output_names=names, do_constant_folding=True)


def main():
    torch.manual_seed(0)
    model = YoloV8nLike()
    photos = [letterbox(p) for p in PHOTOS]
    batch = torch.stack([torch.from_numpy(np.asarray(im, dtype=np.float32) / np.float32(255))
                         .permute(2, 0, 1) for im in photos])
    seed_statistics(model, batch)
    names = ["out_stride8", "out_stride16", "out_stride32"]
    for opset in (13, 17):
        export(model, batch[:1], os.path.join(HERE, f"yolov8n_like_op{opset}.onnx"), opset, names)
    with torch.no_grad():
        for i, name in enumerate(PHOTOS):
            photos[i].save(os.path.join(HERE, f"input_{name}.png"))
            outs = model(batch[i : i + 1])
            for k, out in enumerate(outs):
                arr = out.numpy().astype(np.float32)
                np.save(os.path.join(HERE, f"out_{name}_{k}.npy"), arr)
                print(f"{name} output {k}: {list(arr.shape)}, rms {np.sqrt((arr ** 2).mean()):.3f}")
    tiny = TinyOps()
    seed_statistics(tiny, torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(3)))
    tiny_in = torch.rand(1, 3, 16, 16, generator=torch.Generator().manual_seed(4))
    torch.onnx.export(tiny, tiny_in, os.path.join(HERE, "tiny_ops.onnx"), opset_version=13,
                      input_names=["images"], output_names=["out"],
                      training=torch.onnx.TrainingMode.PRESERVE)
    np.save(os.path.join(HERE, "tiny_input.npy"), tiny_in.numpy())
    with torch.no_grad():
        np.save(os.path.join(HERE, "tiny_out.npy"), tiny(tiny_in).numpy())
    classifier = TinyClassifier().eval()
    torch.onnx.export(classifier, tiny_in, os.path.join(HERE, "tiny_classifier.onnx"),
                      opset_version=13, input_names=["images"], output_names=["probabilities"])
    with torch.no_grad():
        np.save(os.path.join(HERE, "tiny_classifier_out.npy"), classifier(tiny_in).numpy())
    arith = ConstArith().eval()
    torch.onnx.export(arith, tiny_in, os.path.join(HERE, "const_arith.onnx"), opset_version=13,
                      input_names=["images"], output_names=["out"])
    with torch.no_grad():
        np.save(os.path.join(HERE, "const_arith_out.npy"), arith(tiny_in).numpy())
    alias_model(os.path.join(HERE, "alias.onnx"))
    torch.onnx.export(ErfNet().eval(), torch.zeros(1, 3, 8, 8), os.path.join(HERE, "erf.onnx"),
                      opset_version=13, input_names=["images"], output_names=["out"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
