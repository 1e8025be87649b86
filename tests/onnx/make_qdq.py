#!/usr/bin/python3
"""The explicit Q/DQ oracle (docs/onnx.md "Explicit Q/DQ"): a small conv network with PyTorch's
fake quantization on its weights (int8, per output channel; one conv per tensor) and on every
activation graphrun stores in int8 (int8 with zero point 0; the input uint8 with zero point 128),
exported with torch.onnx.export at opset 13, which writes QuantizeLinear/DequantizeLinear pairs.

Writes, into tests/onnx/ (committed; needs Debian's python3-torch and python3-onnx only to
regenerate):
  qdq.onnx             the network (input 1x3x16x16: tiny_input.npy)
  qdq_out.npy          PyTorch's output with fake quantization (the int8 arithmetic's oracle)
  qdq_float_out.npy    PyTorch's output with the weights quantized but the activations not
                       (what graphrun's fp32 engine computes on the file: docs/onnx.md)
  qdq_scales.txt       the activation scales used, for reading
  qdq_bad_*.onnx       qdq.onnx edited into what the importer must refuse (one line naming the
                       node): zero point 3, scale 0, scale NaN, int32 codes on the Q/DQ after
                       conv1's Relu; a Conv reading a QuantizeLinear's int8 output (Q without
                       DQ); a DequantizeLinear of a float tensor
  qdq_partial.onnx     qdq.onnx without the Q/DQ pair after conv3's SiLU: imports (fp32 runs),
                       but an int8 build is refused naming that layer
  qdq_mixed.onnx       qdq.onnx with the concat's two inputs on different scales (the Add's
                       doubled): runs, with a notice that graphrun's int8 uses one for both
  qdq_bn.onnx, qdq_bn_out.npy  a conv with int8 weights (Q/DQ) followed by an unfolded
                       BatchNormalization (a QAT export that kept it): graphrun folds the batch
                       norm into the weights and the factor into the weight scales, keeping the
                       file's integers; PyTorch's fake-quant output on tiny_input.npy

Scales: weights max|w| / 127.5 per channel (PyTorch's symmetric observer: the largest negative
weight of a channel may become -128, which graphrun must keep), the weights stored already on
their grid so the export and PyTorch agree on them exactly; activations max|x| / 127 on
tiny_input.npy (no value saturates), the concat's two inputs sharing one scale (graphrun's route
has one scale for its inputs and output).
"""
import os
import sys

import numpy as np
import onnx
import torch
from onnx import helper, numpy_helper
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))


def quantize_weights(conv, per_channel):
    w = conv.weight.detach().numpy().astype(np.float32)
    if per_channel:
        s = (np.abs(w).reshape(w.shape[0], -1).max(1) / np.float32(127.5)).astype(np.float32)
        q = np.clip(np.rint(w / s[:, None, None, None]), -128, 127)
        conv.weight.data = torch.from_numpy((q * s[:, None, None, None]).astype(np.float32))
    else:
        s = np.float32(np.abs(w).max() / np.float32(127.5))
        conv.weight.data = torch.from_numpy((np.clip(np.rint(w / s), -128, 127) * s)
                                            .astype(np.float32))
    return torch.from_numpy(np.asarray(s, dtype=np.float32))


class QdqNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 1, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 2, 1)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv3 = nn.Conv2d(16, 16, 1)
        self.conv4 = nn.Conv2d(16, 16, 3, 1, 1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.out = nn.Conv2d(32, 6, 1)
        self.convs = [self.conv1, self.conv2, self.conv3, self.conv4, self.out]
        self.wscale = None  # per conv, after quantize()
        self.ascale = None  # per activation point, after calibrate()
        self.fake_activations = True
        self.record = None

    def quantize(self):
        self.wscale = [quantize_weights(c, per_channel=(c is not self.conv3)) for c in self.convs]

    def w(self, i):
        c = self.convs[i]
        s = self.wscale[i]
        if s.ndim == 0:
            return torch.fake_quantize_per_tensor_affine(c.weight, float(s), 0, -128, 127)
        return torch.fake_quantize_per_channel_affine(c.weight, s, torch.zeros(s.shape[0],
                                                      dtype=torch.int32), 0, -128, 127)

    def fq(self, x, name, uint8=False):
        if self.record is not None:
            self.record[name] = max(self.record.get(name, 0.0), float(x.abs().max()))
            return x
        if not self.fake_activations:
            return x
        s = self.ascale[name]
        if uint8:
            return torch.fake_quantize_per_tensor_affine(x, s, 128, 0, 255)
        return torch.fake_quantize_per_tensor_affine(x, s, 0, -128, 127)

    def conv(self, i, x):
        c = self.convs[i]
        return nn.functional.conv2d(x, self.w(i), c.bias, c.stride, c.padding)

    def forward(self, x):
        x = self.fq(x, "input", uint8=True)
        a = self.fq(torch.relu(self.conv(0, x)), "relu1")
        b = self.fq(nn.functional.leaky_relu(self.conv(1, a), 0.1), "cat")
        p = self.pool(b)
        c = self.fq(nn.functional.silu(self.conv(2, p)), "silu3")
        d = self.fq(self.conv(3, c), "conv4")
        e = self.fq(d + p, "cat")
        y = torch.cat([self.up(e), b], 1)
        return self.fq(self.conv(4, y), "out")


class QdqBn(nn.Module):
    """Conv(DQ(int8 weights)) -> BatchNormalization -> ReLU -> Q/DQ -> 1x1 conv -> Q/DQ."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.out = nn.Conv2d(8, 4, 1)
        self.ws = [quantize_weights(self.conv, True), quantize_weights(self.out, True)]
        self.ascale = None
        self.record = None

    def fq(self, x, name):
        if self.record is not None:
            self.record[name] = float(x.abs().max())
            return x
        return torch.fake_quantize_per_tensor_affine(x, self.ascale[name], 0, -128, 127)

    def w(self, conv, s):
        return torch.fake_quantize_per_channel_affine(
            conv.weight, s, torch.zeros(s.shape[0], dtype=torch.int32), 0, -128, 127)

    def forward(self, x):
        x = self.fq(x, "input")
        y = nn.functional.conv2d(x, self.w(self.conv, self.ws[0]), None, 1, 1)
        y = self.fq(torch.relu(self.bn(y)), "relu")
        return self.fq(nn.functional.conv2d(y, self.w(self.out, self.ws[1]), self.out.bias),
                       "out")


def bn_model(x):
    torch.manual_seed(6)
    net = QdqBn()
    g = torch.Generator().manual_seed(8)
    net.bn.weight.data = 0.5 + torch.rand(8, generator=g)  # positive: the integers stay int8
    net.bn.bias.data = 0.2 * torch.randn(8, generator=g)
    net.bn.running_mean.data = 0.1 * torch.randn(8, generator=g)
    net.bn.running_var.data = 0.5 + torch.rand(8, generator=g)
    net.eval()
    with torch.no_grad():
        net.record = {}
        net(x)
        maxima, net.record = net.record, None
        net.ascale = {k: float(np.float32(v / 127.0)) for k, v in maxima.items()}
        out = net(x).numpy()
    torch.onnx.export(net, x, os.path.join(HERE, "qdq_bn.onnx"), opset_version=13,
                      input_names=["images"], output_names=["out"],
                      training=torch.onnx.TrainingMode.PRESERVE)
    np.save(os.path.join(HERE, "qdq_bn_out.npy"), out.astype(np.float32))
    with open(os.path.join(HERE, "qdq_scales.txt"), "a") as f:
        f.write(f"qdq_bn out {net.ascale['out']!r}\n")


def producer(graph, name):
    return next(n for n in graph.node if name in n.output)


def set_const(graph, name, array):
    node = producer(graph, name)
    node.attribute[0].t.CopyFrom(numpy_helper.from_array(array, name=""))


def bad_models():
    """The refusals: each an edit of qdq.onnx at the Q/DQ pair after conv1's Relu."""
    def load():
        m = onnx.load(os.path.join(HERE, "qdq.onnx"))
        q = next(n for n in m.graph.node if n.op_type == "QuantizeLinear" and
                 n.input[0] == "/Relu_output_0")
        dq = next(n for n in m.graph.node if n.op_type == "DequantizeLinear" and
                  n.input[0] == q.output[0])
        return m, q, dq

    edits = {
        "zp": lambda g, q, dq: set_const(g, q.input[2], np.array(3, dtype=np.int8)),
        "scale0": lambda g, q, dq: set_const(g, q.input[1], np.array(0, dtype=np.float32)),
        "scalenan": lambda g, q, dq: set_const(g, q.input[1], np.array(np.nan, dtype=np.float32)),
        "dtype": lambda g, q, dq: set_const(g, q.input[2], np.array(0, dtype=np.int32)),
    }
    for name, edit in edits.items():
        m, q, dq = load()
        edit(m.graph, q, dq)
        onnx.save(m, os.path.join(HERE, f"qdq_bad_{name}.onnx"))
    m, q, dq = load()  # Q without DQ: the next Conv reads the int8 codes
    for n in m.graph.node:
        if n.op_type == "Conv" and n.input[0] == dq.output[0]:
            n.input[0] = q.output[0]
    m.graph.node.remove(dq)
    onnx.save(m, os.path.join(HERE, "qdq_bad_noq.onnx"))
    m, q, dq = load()  # a DQ of the float tensor itself
    dq.input[0] = q.input[0]
    m.graph.node.remove(q)
    onnx.save(m, os.path.join(HERE, "qdq_bad_float.onnx"))
    m = onnx.load(os.path.join(HERE, "qdq.onnx"))  # the concat's inputs on different scales
    q = next(n for n in m.graph.node if n.op_type == "QuantizeLinear" and
             n.input[0] == "/Add_output_0")
    s = numpy_helper.to_array(producer(m.graph, q.input[1]).attribute[0].t)
    set_const(m.graph, q.input[1], (s * 2).astype(np.float32))
    onnx.save(m, os.path.join(HERE, "qdq_mixed.onnx"))
    m = onnx.load(os.path.join(HERE, "qdq.onnx"))  # no Q/DQ after the SiLU
    q = next(n for n in m.graph.node if n.op_type == "QuantizeLinear" and
             n.input[0] == "/Mul_output_0")
    dq = next(n for n in m.graph.node if n.op_type == "DequantizeLinear" and
              n.input[0] == q.output[0])
    for n in m.graph.node:
        for k, name in enumerate(n.input):
            if name == dq.output[0]:
                n.input[k] = q.input[0]
    m.graph.node.remove(q)
    m.graph.node.remove(dq)
    onnx.save(m, os.path.join(HERE, "qdq_partial.onnx"))


def main():
    torch.manual_seed(5)
    x = torch.from_numpy(np.load(os.path.join(HERE, "tiny_input.npy")))
    net = QdqNet().eval()
    net.quantize()
    with torch.no_grad():
        net.record = {}
        net(x)
        maxima, net.record = net.record, None
        net.ascale = {k: float(np.float32(v / 127.0)) for k, v in maxima.items()}
        out = net(x).numpy()
        net.fake_activations = False
        out_float = net(x).numpy()
        net.fake_activations = True
    torch.onnx.export(net, x, os.path.join(HERE, "qdq.onnx"), opset_version=13,
                      input_names=["images"], output_names=["out"], do_constant_folding=True)
    np.save(os.path.join(HERE, "qdq_out.npy"), out.astype(np.float32))
    np.save(os.path.join(HERE, "qdq_float_out.npy"), out_float.astype(np.float32))
    with open(os.path.join(HERE, "qdq_scales.txt"), "w") as f:
        for k, v in net.ascale.items():
            f.write(f"{k} {v!r}\n")
    bad_models()
    bn_model(x)
    d = out - out_float
    print("fake-quant vs float: NRMSE", float(np.sqrt((d ** 2).mean()) /
                                             (out_float.max() - out_float.min())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
