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
  yolov8n_head_op13.onnx, yolov8n_head_op17.onnx  YoloV8nDetect (the anchor-free detection head;
                          opset 17's file with Ultralytics-style metadata_props names, imgsz,
                          stride), yolov5n_head_op13.onnx, yolov5n_head_op17.onnx  YoloV5nDetect
                          (the anchor head), yolo11n_head_op13.onnx, yolo11n_head_op17.onnx
                          Yolo11nDetect (YOLO11n-like without C2PSA)
  <stem>_<photo>.npy      their graph output on the photo ([1, 7, 336] / [1, 1008, 8])
  <stem>_<photo>.txt      the detections reference_detections decodes from it (thresh 0.25,
                          NMS 0.45, network pixels): what graphrun's decode must give
  tiny_head.onnx, tiny_head_input.npy, tiny_head_out.npy  TinyHead on a fixed 32 x 32 input
  head_erf.onnx, head_not_boxes.onnx, head_two_outputs.onnx, conv_dilations.onnx,
  bad_metadata.onnx       head_refusals()
  tail_ops.onnx, tail_ops_input.npy, tail_ops_out.npy  tail_ops_model() and numpy's output
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
    def __init__(self, c_in, c_out, k=1, s=1, groups=1, act=True):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, k, s, k // 2, groups=groups, bias=False)
        self.bn = nn.BatchNorm2d(c_out)
        self.act = nn.SiLU() if act else nn.Identity()

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

    def features(self, x):
        """The neck's three scales (strides 8, 16, 32)."""
        p3 = self.s3(self.s2(self.stem(x)))
        p4 = self.s4(p3)
        p5 = self.s5(p4)
        n4 = self.n4(torch.cat([self.up(p5), p4], 1))
        n3 = self.n3(torch.cat([self.up(n4), p3], 1))
        m4 = self.m4(torch.cat([self.down3(n3), n4], 1))
        m5 = self.m5(torch.cat([self.down4(m4), p5], 1))
        return n3, m4, m5

    def forward(self, x):
        n3, m4, m5 = self.features(x)
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


class Dfl(nn.Module):
    """Distribution focal loss decode: per side, softmax over `bins` bins, then the expectation
    (a fixed 1x1 conv whose weights are 0, 1, ..., bins - 1)."""

    def __init__(self, bins=16):
        super().__init__()
        self.bins = bins
        self.conv = nn.Conv2d(bins, 1, 1, bias=False).requires_grad_(False)
        self.conv.weight.data[:] = torch.arange(bins, dtype=torch.float32).view(1, bins, 1, 1)

    def forward(self, x):
        b, _, a = x.shape
        return self.conv(x.view(b, 4, self.bins, a).transpose(2, 1).softmax(1)).view(b, 4, a)


class AnchorFreeHead(nn.Module):
    """A YOLOv8 / YOLO11-style detect head written from its published description: per scale a
    box branch (two 3x3 Conv-BN-SiLU, a 1x1 conv to 4 x 16 DFL bins) and a class branch (two 3x3
    Conv-BN-SiLU, a 1x1 conv to nc logits); the scales' [1, 4*16+nc, H*W] concatenated on the
    anchors, the DFL decode, distances to centre + size around the anchor points (cell centres)
    times the stride, class sigmoid: [1, 4 + nc, A], boxes in input pixels."""

    def __init__(self, nc, channels, strides, size, c2=16, c3=16, depthwise=False):
        super().__init__()
        self.nc, self.bins = nc, 16
        self.cv2 = nn.ModuleList(nn.Sequential(ConvBnSilu(c, c2, 3), ConvBnSilu(c2, c2, 3),
                                               nn.Conv2d(c2, 4 * self.bins, 1)) for c in channels)
        if depthwise:  # YOLO11's class branch: depthwise 3x3 + pointwise 1x1, twice
            self.cv3 = nn.ModuleList(nn.Sequential(
                ConvBnSilu(c, c, 3, groups=c), ConvBnSilu(c, c3), ConvBnSilu(c3, c3, 3, groups=c3),
                ConvBnSilu(c3, c3), nn.Conv2d(c3, nc, 1)) for c in channels)
        else:
            self.cv3 = nn.ModuleList(nn.Sequential(ConvBnSilu(c, c3, 3), ConvBnSilu(c3, c3, 3),
                                                   nn.Conv2d(c3, nc, 1)) for c in channels)
        self.dfl = Dfl(self.bins)
        points, stride = [], []
        for s in strides:
            n = size // s
            ys, xs = torch.meshgrid(torch.arange(n) + 0.5, torch.arange(n) + 0.5, indexing="ij")
            points.append(torch.stack((xs, ys), -1).view(-1, 2))
            stride.append(torch.full((n * n, 1), float(s)))
        self.register_buffer("anchors", torch.cat(points).transpose(0, 1).contiguous())
        self.register_buffer("strides", torch.cat(stride).transpose(0, 1).contiguous())

    def forward(self, xs):
        no = 4 * self.bins + self.nc
        y = torch.cat([torch.cat((b(x), c(x)), 1).view(x.shape[0], no, -1)
                       for x, b, c in zip(xs, self.cv2, self.cv3)], 2)
        box, cls = y.split((4 * self.bins, self.nc), 1)
        lt, rb = self.dfl(box).chunk(2, 1)
        p = self.anchors.unsqueeze(0)
        x1y1, x2y2 = p - lt, p + rb
        xywh = torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), 1)
        return torch.cat((xywh * self.strides, cls.sigmoid()), 1)


class YoloV8nDetect(nn.Module):
    """The YOLOv8n-like backbone and neck above (narrower) with the anchor-free head."""

    def __init__(self, nc=3, w=(8, 16, 24, 32)):
        super().__init__()
        self.body = YoloV8nLike(w)
        b, c, d = w[1], w[2], w[3]
        self.body.o3 = self.body.o4 = self.body.o5 = None
        self.head = AnchorFreeHead(nc, (b, c, d), (8, 16, 32), SIZE)

    def forward(self, x):
        return self.head(list(self.body.features(x)))


class C3(nn.Module):
    """YOLOv5's CSP block: two 1x1 branches, bottlenecks on the first, concat, 1x1 conv."""

    def __init__(self, c_in, c_out, n=1, residual=True):
        super().__init__()
        c = c_out // 2
        self.cv1 = ConvBnSilu(c_in, c)
        self.cv2 = ConvBnSilu(c_in, c)
        self.cv3 = ConvBnSilu(2 * c, c_out)
        self.m = nn.Sequential(*(Bottleneck(c, residual) for _ in range(n)))

    def forward(self, x):
        return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))


class AnchorHead(nn.Module):
    """A YOLOv5-style detect head from its published description: per scale a 1x1 conv to
    3 x (5 + nc), viewed [1, 3, 5 + nc, H, W] and permuted to [1, 3, H, W, 5 + nc], sigmoid;
    xy = (2 sig - 0.5 + grid) * stride, wh = (2 sig)^2 * anchor (pixels); [1, 3HW, 5 + nc] per
    scale concatenated: [1, A, 5 + nc], objectness at 4."""

    ANCHORS = ((10, 13, 16, 30, 33, 23), (30, 61, 62, 45, 59, 119), (116, 90, 156, 198, 373, 326))

    def __init__(self, nc, channels, strides, size):
        super().__init__()
        self.no = 5 + nc
        self.m = nn.ModuleList(nn.Conv2d(c, 3 * self.no, 1) for c in channels)
        self.strides = strides
        for i, s in enumerate(strides):
            n = size // s
            ys, xs = torch.meshgrid(torch.arange(n, dtype=torch.float32),
                                    torch.arange(n, dtype=torch.float32), indexing="ij")
            grid = torch.stack((xs, ys), 2).expand(1, 3, n, n, 2) - 0.5
            anchor = torch.tensor(self.ANCHORS[i], dtype=torch.float32).view(1, 3, 1, 1, 2)
            self.register_buffer(f"grid{i}", grid.contiguous())
            self.register_buffer(f"anchor{i}", anchor.expand(1, 3, n, n, 2).contiguous())

    def forward(self, xs):
        z = []
        for i, x in enumerate(xs):
            x = self.m[i](x)
            bs, n = x.shape[0], x.shape[2]
            y = x.view(bs, 3, self.no, n, n).permute(0, 1, 3, 4, 2).sigmoid()
            xy, wh, conf = y.split((2, 2, self.no - 4), 4)
            xy = (xy * 2 + getattr(self, f"grid{i}")) * self.strides[i]
            wh = (wh * 2) ** 2 * getattr(self, f"anchor{i}")
            z.append(torch.cat((xy, wh, conf), 4).view(bs, -1, self.no))
        return torch.cat(z, 1)


class C3k2(SplitBlock):
    """YOLO11's C3k2: the C2f-like block whose inner blocks are C3 blocks of two 3x3 bottlenecks
    (c3k) or plain bottlenecks."""

    def __init__(self, c_in, c_out, c3k=False, residual=True):
        super().__init__(c_in, c_out, 1, residual)
        if c3k:
            self.m = nn.ModuleList([C3(self.c, self.c, 2, residual)])


class Yolo11nDetect(YoloV8nDetect):
    """A YOLO11n-like network without the C2PSA attention block (its MatMul of computed tensors
    and the attention's Reshape / Transpose inside the backbone are not graphrun layers): the
    YOLOv8n-like topology with C3k2 blocks and the head's depthwise class branch."""

    def __init__(self, nc=3, w=(8, 16, 24, 32)):
        super().__init__(nc, w)
        a, b, c, d = w
        m = self.body
        m.s2[1] = C3k2(b, b)
        m.s3[1] = C3k2(c, c)
        m.s4[1] = C3k2(d, d, c3k=True)
        m.s5[1] = C3k2(d, d, c3k=True)
        m.n4 = C3k2(d + d, c, residual=False)
        m.n3 = C3k2(c + c, b, residual=False)
        m.m4 = C3k2(b + c, c, residual=False)
        m.m5 = C3k2(c + d, d, c3k=True, residual=False)
        self.head = AnchorFreeHead(nc, (b, c, d), (8, 16, 32), SIZE, depthwise=True)


class Attention(nn.Module):
    """YOLO11's PSA attention from its published structure: a 1x1 Conv-BN (no activation) to
    q, k, v of every head (per head key_dim, key_dim, head_dim channels; key_dim = head_dim / 2),
    softmax(q^T k * key_dim^-0.5) over the keys, v times it, plus a depthwise 3x3 Conv-BN of v
    (positional encoding), a 1x1 Conv-BN projection. Variants for the importer's tests:
    `prescale` scales q before the MatMul; `softmax_dim` / `head_scale` make near misses."""

    def __init__(self, c, heads, prescale=False, softmax_dim=-1, head_scale=False):
        super().__init__()
        self.heads, self.head_dim = heads, c // heads
        self.key_dim = self.head_dim // 2
        self.scale = self.key_dim ** -0.5
        self.qkv = ConvBnSilu(c, c + 2 * self.key_dim * heads, act=False)
        self.proj = ConvBnSilu(c, c, act=False)
        self.pe = ConvBnSilu(c, c, 3, groups=c, act=False)
        self.prescale, self.softmax_dim = prescale, softmax_dim
        if head_scale:  # one factor per head: not the pattern's scalar
            self.register_buffer("head_scale", torch.full((1, heads, 1, 1), self.scale))
        else:
            self.head_scale = None

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv(x).view(b, self.heads, 2 * self.key_dim + self.head_dim, h * w).split(
            [self.key_dim, self.key_dim, self.head_dim], dim=2)
        if self.prescale:
            attn = (q * self.scale).transpose(-2, -1) @ k
        else:
            attn = (q.transpose(-2, -1) @ k) * (self.scale if self.head_scale is None
                                                else self.head_scale)
        attn = attn.softmax(dim=self.softmax_dim)
        x = (v @ attn.transpose(-2, -1)).view(b, c, h, w) + self.pe(v.reshape(b, c, h, w))
        return self.proj(x)


class PsaBlock(nn.Module):
    """x + attention(x), then x + ffn(x) (1x1 Conv-BN-SiLU to 2c, 1x1 Conv-BN back)."""

    def __init__(self, c, heads):
        super().__init__()
        self.attn = Attention(c, heads)
        self.ffn = nn.Sequential(ConvBnSilu(c, 2 * c), ConvBnSilu(2 * c, c, act=False))

    def forward(self, x):
        x = x + self.attn(x)
        return x + self.ffn(x)


class C2Psa(nn.Module):
    """YOLO11's C2PSA: a 1x1 conv to 2c, the halves, PSA blocks on the second, concat, 1x1 conv
    (C2f's wrapping). YOLO11 takes heads = c // 64; these narrow tests set it."""

    def __init__(self, c_in, c_out, heads, n=1):
        super().__init__()
        self.c = c_in // 2
        self.cv1 = ConvBnSilu(c_in, 2 * self.c)
        self.cv2 = ConvBnSilu(2 * self.c, c_out)
        self.m = nn.Sequential(*(PsaBlock(self.c, heads) for _ in range(n)))

    def forward(self, x):
        a, b = self.cv1(x).split((self.c, self.c), dim=1)
        return self.cv2(torch.cat((a, self.m(b)), 1))


class Yolo11nPsaDetect(Yolo11nDetect):
    """Yolo11nDetect with YOLO11n's C2PSA after the SPPF (2 heads of 8 channels on the 16-channel
    half, 4 x 4 = 16 tokens at 128 x 128)."""

    def __init__(self, nc=3, w=(8, 16, 24, 32)):
        super().__init__(nc, w)
        d = w[3]
        self.body.s5.append(C2Psa(d, d, heads=2))


class AttentionNet(nn.Module):
    """The attention alone after a stride-2 Conv-BN-SiLU: 16 channels, 2 heads, 8 x 8 tokens."""

    def __init__(self, **variant):
        super().__init__()
        self.stem = ConvBnSilu(3, 16, 3, 2)
        self.attn = Attention(16, 2, **variant)

    def forward(self, x):
        return self.attn(self.stem(x))


def attention_models(batch, tiny_in):
    """The attention's oracle files (docs/onnx.md): AttentionNet at opsets 11 (Split by
    attribute) and 13, the q-prescaled variant, three near misses, one with too many tokens,
    and Yolo11nPsaDetect."""
    variants = [("attention_op11", 11, {}), ("attention_op13", 13, {}),
                ("attention_prescale", 13, {"prescale": True}),
                ("attention_bad_axis", 13, {"softmax_dim": -2}),
                ("attention_bad_scale", 13, {"head_scale": True})]
    for stem, opset, variant in variants:
        torch.manual_seed(5)
        net = AttentionNet(**variant)
        seed_statistics(net, torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(3)))
        torch.onnx.export(net, tiny_in, os.path.join(HERE, stem + ".onnx"), opset_version=opset,
                          input_names=["images"], output_names=["out"])
        if not variant or "prescale" in variant:
            with torch.no_grad():
                np.save(os.path.join(HERE, stem + "_out.npy"), net(tiny_in).numpy())
    import onnx  # a third near miss: q transposed with another permutation

    m = onnx.load(os.path.join(HERE, "attention_op13.onnx"))
    first = next(n for n in m.graph.node if n.op_type == "Transpose")
    del first.attribute[:]
    first.attribute.append(onnx.helper.make_attribute("perm", [0, 2, 1, 3]))
    onnx.save(m, os.path.join(HERE, "attention_bad_perm.onnx"))
    torch.manual_seed(5)  # 66 x 66 = 4356 tokens: past graphrun's 4096, refused at load
    big = AttentionNet()
    seed_statistics(big, torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(3)))
    torch.onnx.export(big, torch.zeros(1, 3, 132, 132), os.path.join(HERE, "attention_big.onnx"),
                      opset_version=13, input_names=["images"], output_names=["out"])
    torch.manual_seed(6)
    psa = Yolo11nPsaDetect()
    export_detector(psa, batch, "yolo11n_psa", "v8", [s[-1] for s in psa.head.cv3], 0, 3, 0)


class YoloV5nDetect(nn.Module):
    """A YOLOv5n-like network: Conv-BN-SiLU stem, C3 stages, SPPF, a PANet neck (1x1 convs,
    upsample + concat, downsampling convs, C3 without residuals) and the anchor head."""

    def __init__(self, nc=3, w=(8, 16, 24, 32)):
        super().__init__()
        a, b, c, d = w
        self.stem = ConvBnSilu(3, a, 3, 2)
        self.s2 = nn.Sequential(ConvBnSilu(a, b, 3, 2), C3(b, b))
        self.s3 = nn.Sequential(ConvBnSilu(b, c, 3, 2), C3(c, c, 2))
        self.s4 = nn.Sequential(ConvBnSilu(c, d, 3, 2), C3(d, d))
        self.s5 = nn.Sequential(ConvBnSilu(d, d, 3, 2), C3(d, d), Sppf(d, d))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.l5 = ConvBnSilu(d, c)
        self.n4 = C3(c + d, c, residual=False)
        self.l4 = ConvBnSilu(c, b)
        self.n3 = C3(b + c, b, residual=False)
        self.down3 = ConvBnSilu(b, b, 3, 2)
        self.m4 = C3(b + b, c, residual=False)
        self.down4 = ConvBnSilu(c, c, 3, 2)
        self.m5 = C3(c + c, d, residual=False)
        self.head = AnchorHead(nc, (b, c, d), (8, 16, 32), SIZE)

    def forward(self, x):
        p3 = self.s3(self.s2(self.stem(x)))
        p4 = self.s4(p3)
        p5 = self.l5(self.s5(p4))
        n4 = self.l4(self.n4(torch.cat([self.up(p5), p4], 1)))
        n3 = self.n3(torch.cat([self.up(n4), p3], 1))
        m4 = self.m4(torch.cat([self.down3(n3), n4], 1))
        m5 = self.m5(torch.cat([self.down4(m4), p5], 1))
        return self.head([n3, m4, m5])


class TinyHead(nn.Module):
    """The anchor-free head on three narrow scales of a 32 x 32 input (strides 8, 16, 32; two
    classes; output [1, 6, 21]): the fuzz corpus's detection-head model."""

    def __init__(self):
        super().__init__()
        self.p3 = nn.Sequential(ConvBnSilu(3, 4, 3, 2), ConvBnSilu(4, 4, 3, 2),
                                ConvBnSilu(4, 4, 3, 2))
        self.p4 = ConvBnSilu(4, 4, 3, 2)
        self.p5 = ConvBnSilu(4, 4, 3, 2)
        self.head = AnchorFreeHead(2, (4, 4, 4), (8, 16, 32), 32, c2=4, c3=4)

    def forward(self, x):
        p3 = self.p3(x)
        p4 = self.p4(p3)
        return self.head([p3, p4, self.p5(p4)])


THRESH, NMS = 0.25, 0.45


def reference_detections(out, layout):
    """The numpy decode graphrun must match (docs/onnx.md): per anchor the best class (first on
    ties); score = its sigmoid score (v8) or objectness x class score (v5); kept above THRESH;
    corners cx -+ w / 2 in input pixels; per-class NMS (sorted by score, IoU > NMS suppresses);
    clipped to the image; sorted by score. Rows: class, score, left, top, right, bottom."""
    a = out[0].T if layout == "v8" else out[0]
    xywh = a[:, :4].astype(np.float32)
    if layout == "v8":
        cls = a[:, 4:]
        k = cls.argmax(1)
        score = cls[np.arange(len(a)), k]
    else:
        cls = a[:, 5:] * a[:, 4:5]
        k = cls.argmax(1)
        score = cls[np.arange(len(a)), k]
    half_w, half_h = xywh[:, 2] * np.float32(0.5), xywh[:, 3] * np.float32(0.5)
    box = np.stack((xywh[:, 0] - half_w, xywh[:, 1] - half_h, xywh[:, 0] + half_w,
                    xywh[:, 1] + half_h), 1)
    keep = score > THRESH
    dets = [(int(k[i]), float(score[i]), box[i], i) for i in np.nonzero(keep)[0]]
    dets.sort(key=lambda d: (d[0], -d[1], d[3]))
    kept = []
    for i, d in enumerate(dets):
        ok = True
        for e in kept:
            if e[0] != d[0]:
                continue
            ow = min(e[2][2], d[2][2]) - max(e[2][0], d[2][0])
            oh = min(e[2][3], d[2][3]) - max(e[2][1], d[2][1])
            if ow < 0 or oh < 0:
                continue
            inter = ow * oh
            union = ((e[2][2] - e[2][0]) * (e[2][3] - e[2][1]) +
                     (d[2][2] - d[2][0]) * (d[2][3] - d[2][1]) - inter)
            if union > 0 and inter / union > NMS:
                ok = False
                break
        if ok:
            kept.append(d)
    kept.sort(key=lambda d: (-d[1], d[0], d[3]))
    return [(d[0], d[1], *np.clip(d[2], 0, SIZE - 1)) for d in kept]


def confident(model, head_convs, batch):
    """The class logits' convs' outputs on every photo of the batch (export_detector shifts
    their biases from them)."""
    logits = []
    hooks = [conv.register_forward_hook(lambda m, i, o: logits.append(o)) for conv in head_convs]
    with torch.no_grad():
        model(batch)
    for h in hooks:
        h.remove()
    return logits


def export_detector(model, batch, stem, layout, head_logit_convs, no, nc, first_class):
    """Seed, make confident, export at two opsets, record outputs and reference detections."""
    seed_statistics(model, batch, condition=True)
    for conv in head_logit_convs:  # a wider spread of class logits: few pass, clearly
        conv.weight.data *= 4
    logits = confident(model, head_logit_convs, batch)
    for c in range(nc):  # per class: about four anchors pass 0.9 per photo (their mean)
        ch = first_class + c
        per_photo = [torch.cat([l[i, ch::no].flatten() if layout == "v5" else l[i, c].flatten()
                                for l in logits]) for i in range(len(batch))]
        fourth = np.mean([float(v.sort(descending=True)[0][3]) for v in per_photo])
        shift = float(torch.logit(torch.tensor(0.9))) - fourth
        for conv in head_logit_convs:
            if layout == "v5":
                conv.bias.data[ch::no] += shift
            else:
                conv.bias.data[c] += shift
    if layout == "v5":  # objectness: confident where the classes are
        for conv in head_logit_convs:
            conv.bias.data[4::no] += 1.0
    for opset in (13, 17):
        export(model, batch[:1], os.path.join(HERE, f"{stem}_op{opset}.onnx"), opset, ["output0"])
    with torch.no_grad():
        for i, name in enumerate(PHOTOS):
            out = model(batch[i : i + 1]).numpy().astype(np.float32)
            np.save(os.path.join(HERE, f"{stem}_{name}.npy"), out)
            dets = reference_detections(out, layout)
            with open(os.path.join(HERE, f"{stem}_{name}.txt"), "w") as f:
                f.write("# class score left top right bottom (tests/onnx/make_models.py)\n")
                for d in dets:
                    f.write("%d %.7g %.7g %.7g %.7g %.7g\n" % d)
            print(f"{stem} {name}: {list(out.shape)}, {len(dets)} detections")


def add_metadata(path, names="{0: 'person', 1: 'bicycle', 2: 'dog'}", size=SIZE):
    """Ultralytics-style metadata_props: names as a Python dict literal, imgsz, stride."""
    import onnx

    m = onnx.load(path)
    for key, value in (("names", names), ("imgsz", f"[{size}, {size}]"), ("stride", "32"),
                       ("task", "detect")):
        p = m.metadata_props.add()
        p.key, p.value = key, value
    onnx.save(m, path)


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


def head_refusals():
    """Small files the detection-head import refuses or warns about: a head tail with an op it
    does not run (Erf after a Reshape), a tail whose output is no detection head's ([1, 2, 256]),
    a head with another graph output before its own, a conv no layer runs (unequal dilations:
    refused for that, not moved to the host), and a
    file with malformed metadata_props (it loads, with a one-line notice). Input 3x16x16,
    as tiny_input.npy."""
    from onnx import TensorProto, helper, numpy_helper

    def model(nodes, out_dims, path, extra=(), meta=(), first_outputs=()):
        inits = [numpy_helper.from_array(np.ones((2, 3, 1, 1), np.float32), "w"),
                 numpy_helper.from_array(np.array([1, 2, 256], np.int64), "shape")]
        graph = helper.make_graph(
            [helper.make_node("Conv", ["x", "w"], ["c"], name="conv")] + nodes, "head",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
            [helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)
             for name, dims in first_outputs] +
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_dims)], inits + list(extra))
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 7
        for key, value in meta:
            p = m.metadata_props.add()
            p.key, p.value = key, value
        with open(path, "wb") as f:
            f.write(m.SerializeToString())

    reshape = helper.make_node("Reshape", ["c", "shape"], ["r"], name="reshape")
    model([reshape, helper.make_node("Erf", ["r"], ["y"], name="erf")], [1, 2, 256],
          os.path.join(HERE, "head_erf.onnx"))
    model([helper.make_node("Reshape", ["c", "shape"], ["y"], name="reshape")], [1, 2, 256],
          os.path.join(HERE, "head_not_boxes.onnx"))
    model([helper.make_node("Reshape", ["c", "shape"], ["y"], name="reshape")], [1, 2, 256],
          os.path.join(HERE, "head_two_outputs.onnx"), first_outputs=[("c", [1, 2, 16, 16])])
    model([helper.make_node("Conv", ["c", "w2"], ["y"], name="conv2", dilations=[1, 2])],
          [1, 2, 16, 16], os.path.join(HERE, "conv_dilations.onnx"),
          extra=[numpy_helper.from_array(np.ones((2, 2, 1, 1), np.float32), "w2")])
    model([helper.make_node("Relu", ["c"], ["y"], name="relu")], [1, 2, 16, 16],
          os.path.join(HERE, "bad_metadata.onnx"),
          meta=(("names", "{0: 'a', 1: }"), ("imgsz", "[64, x]"), ("stride", "7")))


def tail_ops_model():
    """The host-side head's other ONNX forms, at opset 11 (the attribute forms of Squeeze,
    Unsqueeze and Split; Softmax flattening at its axis), after a conv on a fixed input: Reshape
    with -1, Transpose, Softmax, Slice with a negative start, an end past the dim and step 2,
    Split with sizes, Pow, Div by a broadcast constant, Unsqueeze + Squeeze, Concat on a negative
    axis, Mul broadcasting [1, 30, 1] over [1, 30, 8], Mul by a scalar, Sub with the constant
    first, Sigmoid,
    Flatten, Reshape; output [1, 30, 8]. The reference is numpy's (float64 rounded to float32)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(21)
    x = rng.random((1, 3, 8, 8), dtype=np.float32)
    w = (rng.standard_normal((8, 3, 1, 1)) * 0.5).astype(np.float32)
    div = (1.0 + rng.random(5)).astype(np.float32)
    consts = {"w": w, "shape": np.array([1, 8, -1], np.int64), "half": np.array(0.5, np.float32),
              "div": div, "one": np.array(1.0, np.float32), "gain": np.array(2000.0, np.float32),
              "final": np.array([1, 30, 8], np.int64)}
    n = helper.make_node
    nodes = [n("Conv", ["x", "w"], ["c"], name="conv"),
             n("Reshape", ["c", "shape"], ["r"], name="reshape"),
             n("Transpose", ["r"], ["t"], name="transpose", perm=[0, 2, 1]),
             n("Softmax", ["t"], ["sm"], name="softmax", axis=1),
             n("Slice", ["sm", "starts", "ends", "axes", "steps"], ["sl"], name="slice"),
             n("Split", ["sl"], ["a", "b"], name="split", axis=2, split=[3, 5]),
             n("Pow", ["a", "half"], ["p"], name="pow"),
             n("Div", ["b", "div"], ["d"], name="div"),
             n("Unsqueeze", ["p"], ["uq"], name="unsqueeze", axes=[0]),
             n("Squeeze", ["uq"], ["sq"], name="squeeze", axes=[0]),
             n("Concat", ["sq", "d"], ["cat"], name="concat", axis=-1),
             n("Slice", ["cat", "zero", "one_i", "two"], ["first"], name="first"),
             n("Mul", ["cat", "first"], ["m"], name="mul"),
             n("Mul", ["m", "gain"], ["mg"], name="gain"),
             n("Sub", ["one", "mg"], ["s"], name="sub"),
             n("Sigmoid", ["s"], ["g"], name="sigmoid"),
             n("Flatten", ["g"], ["f"], name="flatten", axis=2),
             n("Reshape", ["f", "final"], ["y"], name="final")]
    consts.update(starts=np.array([-60], np.int64), ends=np.array([1000], np.int64),
                  axes=np.array([1], np.int64), steps=np.array([2], np.int64),
                  zero=np.array([0], np.int64), one_i=np.array([1], np.int64),
                  two=np.array([2], np.int64))
    graph = helper.make_graph(
        nodes, "tail_ops", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 30, 8])],
        [numpy_helper.from_array(v, k) for k, v in consts.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    m.ir_version = 6
    with open(os.path.join(HERE, "tail_ops.onnx"), "wb") as f:
        f.write(m.SerializeToString())
    c = np.einsum("oc,nchw->nohw", w[:, :, 0, 0].astype(np.float64), x.astype(np.float64))
    t = c.reshape(1, 8, 64).transpose(0, 2, 1)
    e = np.exp(t - t.max())
    sm = e / e.sum()                      # opset 11: over everything from axis 1 on
    sl = sm[:, 4::2, :]                   # start -60 of 64, end clamped, step 2: 30 rows
    cat = np.concatenate((sl[:, :, :3] ** 0.5, sl[:, :, 3:] / div), -1)
    g = 1 / (1 + np.exp(-(1 - cat * cat[:, :, 0:1] * 2000)))
    np.save(os.path.join(HERE, "tail_ops_input.npy"), x)
    np.save(os.path.join(HERE, "tail_ops_out.npy"),
            np.ascontiguousarray(g.reshape(1, 30, 8), np.float32))


def letterbox(name):
    """The photo scaled to fit SIZE x SIZE (aspect kept), centred on grey 114."""
    im = Image.open(os.path.join(ROOT, "data", name + ".jpg")).convert("RGB")
    scale = min(SIZE / im.width, SIZE / im.height)
    w, h = round(im.width * scale), round(im.height * scale)
    canvas = Image.new("RGB", (SIZE, SIZE), (114, 114, 114))
    canvas.paste(im.resize((w, h), Image.BILINEAR), ((SIZE - w) // 2, (SIZE - h) // 2))
    return canvas


def seed_statistics(model, images, condition=False):
    """BN statistics that keep activations in range: random affine parameters, then the running
    mean and variance measured on the inputs (one cumulative pass in training mode). With
    `condition`, the convolutions' weights are first moved into their inputs' principal subspace
    (condition_weights), as the large networks' are."""
    g = torch.Generator().manual_seed(7)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.weight.data = 0.5 + torch.rand(m.num_features, generator=g)
            m.bias.data = 0.2 * torch.randn(m.num_features, generator=g)
            m.momentum = None
            m.reset_running_stats()
    if condition:
        condition_weights(model, images)
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.reset_running_stats()
    model.train()
    with torch.no_grad():
        model(images)
    model.eval()


def condition_weights(model, images, energy=0.95):
    """Trained-like conditioning of a random network (docs/onnx.md, "Precision of the oracle
    networks"). PyTorch's initialisation spreads a filter's norm evenly over all c_in x k x k
    directions of its input patches, while the patches' variance lies in a few of them, and the
    batch norm scales each output to the variance the filter caught. Rounding (fp16, int8) is
    spread over every direction and passes in full: measured on the seeded networks, 1.1 to 1.3
    times the input's relative error per conv, 10 to 40 times over the network, 3 to 5 times at
    the SPPF alone (5 x 5 pools on a 4 x 4 map: the pooled channels hardly vary). Trained
    filters look at the directions the data varies in. So, conv by conv in execution order
    (each sees its inputs through the conditioned convs before it, batch norms in training
    mode), every ungrouped conv with trainable weights gets random Gaussian combinations of the
    principal directions of its input patches (centred, over the images) that hold `energy` of
    their variance, each output channel scaled to vary over the images as much as with the
    initial weights (the head's plain convs, which no batch norm follows, keep their spread).
    Depthwise convs and fixed ones (the DFL's) are kept."""
    g = torch.Generator().manual_seed(9)
    convs = []
    hooks = [m.register_forward_pre_hook(lambda mod, i: convs.append(mod))
             for m in model.modules() if isinstance(m, nn.Conv2d)]
    model.train()
    with torch.no_grad():
        model(images)
    for h in hooks:
        h.remove()
    done = set()
    for conv in convs:
        if id(conv) in done or conv.groups != 1 or not conv.weight.requires_grad:
            continue
        done.add(id(conv))
        seen = []
        hook = conv.register_forward_pre_hook(lambda mod, i: seen.append(i[0]))
        with torch.no_grad():
            model(images)
        hook.remove()
        p = nn.functional.unfold(seen[0].double(), conv.kernel_size, conv.dilation, conv.padding,
                                 conv.stride)
        p = p.transpose(1, 2).reshape(-1, p.shape[1])
        p = p - p.mean(0)
        lam, vec = torch.linalg.eigh(p.T @ p / p.shape[0])
        lam, vec = lam.flip(0), vec.flip(1)
        r = int((lam.cumsum(0) / lam.sum() < energy).sum()) + 1
        w = torch.randn(conv.out_channels, r, generator=g, dtype=torch.float64) @ vec[:, :r].T
        w0 = conv.weight.data.flatten(1).double()
        w *= ((p @ w0.T).std(0) / (p @ w.T).std(0)).unsqueeze(1)
        conv.weight.data = w.float().view_as(conv.weight).contiguous()
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
    seed_statistics(model, batch, condition=True)
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
    head_refusals()
    tail_ops_model()
    torch.onnx.export(ErfNet().eval(), torch.zeros(1, 3, 8, 8), os.path.join(HERE, "erf.onnx"),
                      opset_version=13, input_names=["images"], output_names=["out"])
    torch.manual_seed(1)
    v8 = YoloV8nDetect()
    export_detector(v8, batch, "yolov8n_head", "v8", [s[2] for s in v8.head.cv3], 0, 3, 0)
    add_metadata(os.path.join(HERE, "yolov8n_head_op17.onnx"))
    torch.manual_seed(2)
    v5 = YoloV5nDetect()
    export_detector(v5, batch, "yolov5n_head", "v5", list(v5.head.m), 8, 3, 5)
    torch.manual_seed(4)
    v11 = Yolo11nDetect()
    export_detector(v11, batch, "yolo11n_head", "v8", [s[-1] for s in v11.head.cv3], 0, 3, 0)
    torch.manual_seed(3)
    small = TinyHead()
    small_in = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(5))
    seed_statistics(small, small_in)
    torch.onnx.export(small, small_in[:1], os.path.join(HERE, "tiny_head.onnx"), opset_version=13,
                      input_names=["images"], output_names=["output0"])
    add_metadata(os.path.join(HERE, "tiny_head.onnx"), "['a', 'b', 'c']", 32)  # 3 names, 2 classes
    np.save(os.path.join(HERE, "tiny_head_input.npy"), small_in[:1].numpy())
    with torch.no_grad():
        np.save(os.path.join(HERE, "tiny_head_out.npy"), small(small_in[:1]).numpy())
    attention_models(batch, tiny_in)
    return 0


if __name__ == "__main__":
    sys.exit(main())
