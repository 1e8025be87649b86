"""A Darknet .cfg (+ optional .weights) as a PyTorch module, for bench/peers.py.

Layers: [convolutional] (groups, batch norm folded with the fork's epsilon, activations linear,
leaky, relu, logistic, mish, swish), [maxpool] (Darknet's padding: `padding` total, offset
-padding/2, taps outside never win), [route] (layers, groups/group_id), [shortcut] (one from,
Darknet's shape rule for equal shapes only), [upsample], [dropout] (identity), [yolo] (outputs
only: the module returns the raw tensors the [yolo] layers read, as graphrun's engine outputs).
Anything else raises ValueError naming the section, so a number is never taken from a network
that is not the cfg's. The batch norm follows models/parse.c: AlexeyAB's x / sqrt(var + 1e-5)
for cfgs using its keys or activations, else pjreddie's x / (sqrt(var) + 1e-6).
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ALEXEYAB_KEYS = {"scale_x_y", "new_coords", "nms_kind", "beta_nms", "iou_loss", "iou_normalizer",
                 "cls_normalizer", "obj_normalizer", "iou_thresh", "max_delta", "group_id",
                 "mosaic", "letter_box", "cutmix", "stride_x", "stride_y", "weights_type",
                 "maxpool_depth"}
ALEXEYAB_ACTS = {"mish", "swish", "hard_mish", "gelu"}


def parse_cfg(text):
    """[(section, {key: value})] with Darknet's strip(): whitespace removed, first key wins."""
    sections = []
    for raw in text.splitlines():
        line = "".join(raw.split())
        if not line or line[0] in "#;":
            continue
        if line[0] == "[":
            sections.append((line[1:-1], {}))
        elif "=" in line:
            key, value = line.split("=", 1)
            sections[-1][1].setdefault(key, value.split("#")[0])
    return sections


def activate(x, name):
    if name == "linear":
        return x
    if name == "leaky":
        return F.leaky_relu(x, 0.1)
    if name == "relu":
        return F.relu(x)
    if name == "logistic":
        return torch.sigmoid(x)
    if name == "mish":
        return x * torch.tanh(F.softplus(x, threshold=20))
    if name == "swish":
        return x * torch.sigmoid(x)
    raise ValueError("activation %s is not implemented here" % name)


class DarknetNet(nn.Module):
    def __init__(self, cfg_text, weights_path=None, seed=1):
        super().__init__()
        sections = parse_cfg(cfg_text)
        net = sections[0][1]
        self.shape = (int(net.get("channels", 3)), int(net["height"]), int(net["width"]))
        alexeyab = any(k in ALEXEYAB_KEYS or (k == "activation" and v in ALEXEYAB_ACTS)
                       for _, opts in sections for k, v in opts.items())
        self.layers = sections[1:]
        self.convs = nn.ModuleDict()
        blob = None
        if weights_path:
            raw = open(weights_path, "rb").read()
            major, minor = np.frombuffer(raw[:8], dtype=np.int32)
            header = 20 if major * 10 + minor >= 2 else 16
            blob = np.frombuffer(raw[header:], dtype=np.float32)
        gen = torch.Generator().manual_seed(seed)
        self.offset = 0
        channels = []  # output channels per layer
        for i, (name, o) in enumerate(self.layers):
            c_in = channels[i - 1] if i else self.shape[0]
            if name in ("convolutional", "conv"):
                channels.append(int(o["filters"]))
                self.convs[str(i)] = self._conv(o, c_in, blob, gen, alexeyab)
            elif name == "route":
                idx = [self._abs(i, int(v)) for v in o["layers"].split(",")]
                channels.append(sum(channels[j] for j in idx) // int(o.get("groups", 1)))
            elif name in ("maxpool", "max", "shortcut", "upsample", "dropout", "yolo"):
                channels.append(c_in)
            else:
                raise ValueError("section [%s] (layer %d) is not implemented here" % (name, i))
        if blob is not None and self.offset != blob.size:
            raise ValueError("weights: %d floats, the cfg needs %d" % (blob.size, self.offset))

    @staticmethod
    def _abs(i, ref):
        return i + ref if ref < 0 else ref

    def _take(self, blob, n, gen, std):
        if blob is None:
            return torch.randn(n, generator=gen) * std
        out = torch.from_numpy(blob[self.offset:self.offset + n].copy())
        self.offset += n
        return out

    def _conv(self, o, c_in, blob, gen, alexeyab):
        filters, size = int(o["filters"]), int(o.get("size", 1))
        stride, groups = int(o.get("stride", 1)), int(o.get("groups", 1))
        pad = size // 2 if int(o.get("pad", 0)) else int(o.get("padding", 0))
        if int(o.get("dilation", 1)) != 1:
            raise ValueError("dilation is not implemented here")
        conv = nn.Conv2d(c_in, filters, size, stride, pad, groups=groups, bias=True)
        fan_in = c_in // groups * size * size
        bias = self._take(blob, filters, gen, 0.1)
        bn = int(o.get("batch_normalize", 0))
        if bn:
            scales = self._take(blob, filters, gen, 0.1) + (0 if blob is not None else 1)
            mean = self._take(blob, filters, gen, 0.1)
            var = self._take(blob, filters, gen, 0.1).abs() + (0 if blob is not None else 1)
        w = self._take(blob, conv.weight.numel(), gen, (2.0 / fan_in) ** 0.5)
        w = w.reshape(conv.weight.shape).double()
        b = bias.double()
        if bn:
            denom = (var.double() + 1e-5).sqrt() if alexeyab else var.double().sqrt() + 1e-6
            factor = scales.double() / denom
            w = w * factor[:, None, None, None]
            b = b - mean.double() * factor
        with torch.no_grad():
            conv.weight.copy_(w.float())
            conv.bias.copy_(b.float())
        conv.darknet_activation = o.get("activation", "logistic")
        return conv

    def forward(self, x):
        outs, heads = [], []
        for i, (name, o) in enumerate(self.layers):
            prev = outs[i - 1] if i else x
            if name in ("convolutional", "conv"):
                conv = self.convs[str(i)]
                y = activate(conv(prev), conv.darknet_activation)
            elif name in ("maxpool", "max"):
                stride = int(o.get("stride", 1))
                size = int(o.get("size", stride))
                padding = int(o.get("padding", size - 1))
                lo = padding // 2  # window offset -padding/2; the rest pads right/bottom
                y = F.max_pool2d(F.pad(prev, (lo, padding - lo, lo, padding - lo),
                                       value=float("-inf")), size, stride)
            elif name == "route":
                groups, gid = int(o.get("groups", 1)), int(o.get("group_id", 0))
                parts = []
                for v in o["layers"].split(","):
                    t = outs[self._abs(i, int(v))]
                    c = t.shape[1] // groups
                    parts.append(t[:, gid * c:(gid + 1) * c])
                y = torch.cat(parts, 1)
            elif name == "shortcut":
                src = outs[self._abs(i, int(o["from"]))]
                if src.shape != prev.shape:
                    raise ValueError("shortcut of different shapes is not implemented here")
                y = activate(prev + src, o.get("activation", "linear"))
            elif name == "upsample":
                y = F.interpolate(prev, scale_factor=int(o.get("stride", 2)), mode="nearest")
            elif name == "yolo":
                heads.append(prev)
                y = prev
            else:  # dropout
                y = prev
            outs.append(y)
        return heads if heads else [outs[-1]]
