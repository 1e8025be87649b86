#!/usr/bin/env python3
"""Train graphrun's bundled `shapes` detector and export it as Darknet .weights.

The network is models/shapes.cfg: a YOLOv3-style tiny detector made only of Darknet layers
([convolutional] with batch norm and leaky, [maxpool], one [yolo] head) on 160x160 RGB input, for
five classes of coloured shapes (models/shapes.names) drawn on textured backgrounds. Training
images are generated on the fly (scene parameters from NumPy, pixels rendered with torch on the
training device); the validation set is data/shapes-val/ (PNG + YOLO labels), written once by
`--make-data` from a fixed seed.

Validation decodes the head exactly as graphrun does (runtime/detect.c: logistic x/y/objectness/
classes, exp(w/h) * anchor / net size, objectness and class-probability thresholds, class-wise NMS
sorted by probability, clipping) and computes mAP exactly as tools/eval.c does, so the mAP printed
here is the one `graphrun eval --model shapes` reports in fp32.

Runs with torch 1.13 (CPU) and torch 2.x (CUDA); needs only torch and numpy.

  python3 tools/train/train_shapes.py --make-data            # data/shapes-{val,calib}/, shapes.png
  python3 tools/train/train_shapes.py --out DIR --minutes 4  # train, export DIR/shapes.weights

Everything a training run produces goes under --out: shapes.weights (best validation mAP@0.5),
shapes_best.pt (its PyTorch state), shapes_head_ref.npy and shapes_dets_ref.txt (PyTorch's raw
head output and detections for data/shapes-val/000.png, which tests/test_shapes.c compares with
graphrun), and train_log.txt.
"""
import argparse
import copy
import math
import os
import struct
import sys
import time
import zlib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

NET = 160                       # network input, square
CLASSES = ["circle", "square", "triangle", "diamond", "cross"]
ANCHORS = [(20, 20), (34, 34), (54, 54)]   # network pixels, as in [yolo] anchors=
# (filters, size, pool_after) of the batch-normalised leaky convolutions, then the 1x1 head.
BODY = [(16, 3, True), (32, 3, True), (64, 3, True), (128, 3, True), (128, 3, False),
        (128, 3, False)]
HEAD_FILTERS = len(ANCHORS) * (5 + len(CLASSES))
GRID = NET // 16
BN_EPS_TORCH = 1e-5
BN_EPS_DARKNET = 1e-6           # Darknet adds it to the standard deviation
MAX_OBJECTS = 7
VAL_COUNT = 240
VAL_SEED = 20261123
CALIB_COUNT = 16
EVAL_THRESH = 0.005             # as tools/eval.c and Darknet's `detector map`
NMS = 0.45
REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def cfg_text():
    """models/shapes.cfg, generated from the constants above (--make-data checks the file)."""
    out = ["# graphrun's bundled detector: 5 classes of coloured shapes (models/shapes.names),",
           "# trained by tools/train/train_shapes.py (see tools/train/README.md).",
           "[net]", "batch=1", "subdivisions=1", "width=%d" % NET, "height=%d" % NET,
           "channels=3", ""]
    for filters, size, pool in BODY:
        out += ["[convolutional]", "batch_normalize=1", "filters=%d" % filters,
                "size=%d" % size, "stride=1", "pad=1", "activation=leaky", ""]
        if pool:
            out += ["[maxpool]", "size=2", "stride=2", ""]
    out += ["[convolutional]", "size=1", "stride=1", "pad=1", "filters=%d" % HEAD_FILTERS,
            "activation=linear", "", "[yolo]", "mask=%s" % ",".join(str(i) for i in range(len(ANCHORS))),
            "anchors=%s" % ", ".join("%d,%d" % a for a in ANCHORS),
            "classes=%d" % len(CLASSES), "num=%d" % len(ANCHORS), ""]
    return "\n".join(out)


# ---- PNG (8-bit RGB) without PIL: the Sub filter on write; None, Sub and Up on read ------------

def png_write(path, rgb):
    h, w, _ = rgb.shape
    a = rgb.astype(np.int16)
    sub = a.copy()
    sub[:, 1:, :] = a[:, 1:, :] - a[:, :-1, :]
    rows = (sub.reshape(h, w * 3) & 0xFF).astype(np.uint8)
    raw = np.concatenate([np.ones((h, 1), np.uint8), rows], axis=1).tobytes()

    def chunk(tag, data):
        return (struct.pack(">I", len(data)) + tag + data +
                struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def png_read(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, tag = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if tag == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype == 2 and interlace == 0, path + ": not 8-bit RGB"
        elif tag == b"IDAT":
            idat += body
        pos += 12 + n
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + w * 3)
    out = np.zeros((h, w * 3), np.int32)
    for r in range(h):
        ft, line = raw[r, 0], raw[r, 1:].astype(np.int32)
        up = out[r - 1] if r else np.zeros(w * 3, np.int32)
        if ft == 0:
            out[r] = line
        elif ft == 2:
            out[r] = (line + up) & 0xFF
        elif ft == 1:
            out[r] = np.cumsum(line.reshape(w, 3), axis=0).reshape(-1) & 0xFF
        else:
            raise ValueError("%s: PNG filter %d (only the None, Sub and Up filters this script "
                             "writes are read)" % (path, ft))
    return out.astype(np.uint8).reshape(h, w, 3)


# ---- scenes ------------------------------------------------------------------------------------

def sample_scenes(rng, n):
    """Scene parameters for n images: background (two colours, gradient direction, texture kind,
    frequency, phase, amplitude) and up to MAX_OBJECTS objects (class, centre, size, colour) that
    overlap little (IoU < 0.1 with every earlier one) and lie inside the image."""
    bg = {
        "c0": rng.uniform(0, 1, (n, 3)), "c1": rng.uniform(0, 1, (n, 3)),
        "dir": rng.uniform(0, 2 * np.pi, n), "kind": rng.randint(0, 3, n),
        "freq": rng.uniform(3, 14, n), "tdir": rng.uniform(0, np.pi, n),
        "phase": rng.uniform(0, 2 * np.pi, n), "amp": rng.uniform(0.05, 0.25, n),
    }
    count = rng.randint(1, MAX_OBJECTS + 1, n)
    cls = rng.randint(0, len(CLASSES), (n, MAX_OBJECTS))
    size = rng.uniform(14, 56, (n, MAX_OBJECTS)) / NET
    aspect = np.exp(rng.uniform(-0.3, 0.3, (n, MAX_OBJECTS)))
    w = np.clip(size * aspect, 12 / NET, 64 / NET)
    h = np.clip(size / aspect, 12 / NET, 64 / NET)
    cx = rng.uniform(0, 1, (n, MAX_OBJECTS)) * (1 - w - 4 / NET) + w / 2 + 2 / NET
    cy = rng.uniform(0, 1, (n, MAX_OBJECTS)) * (1 - h - 4 / NET) + h / 2 + 2 / NET
    color = rng.uniform(0, 1, (n, MAX_OBJECTS, 3))
    # Objects contrast with the background: push each colour away from the mean background.
    bg_mean = (bg["c0"] + bg["c1"])[:, None, :] / 2
    far = np.where(bg_mean > 0.5, color * 0.4, 0.6 + color * 0.4)
    mix = rng.uniform(0, 1, (n, MAX_OBJECTS, 1)) < 0.5
    color = np.where(mix, far, np.clip(color, 0, 1))
    dist = np.abs(color - bg_mean).sum(-1)
    color = np.where((dist < 0.6)[..., None], far, color)
    valid = np.arange(MAX_OBJECTS)[None, :] < count[:, None]
    x0, y0, x1, y1 = cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2
    for k in range(1, MAX_OBJECTS):
        iw = np.clip(np.minimum(x1[:, k:k + 1], x1[:, :k]) - np.maximum(x0[:, k:k + 1], x0[:, :k]), 0, None)
        ih = np.clip(np.minimum(y1[:, k:k + 1], y1[:, :k]) - np.maximum(y0[:, k:k + 1], y0[:, :k]), 0, None)
        inter = iw * ih
        iou = inter / (w[:, k:k + 1] * h[:, k:k + 1] + w[:, :k] * h[:, :k] - inter)
        clash = ((iou > 0.1) & valid[:, :k]).any(1)
        valid[:, k] &= ~clash
    obj = np.stack([cls, cx, cy, w, h], -1).astype(np.float64)
    return bg, obj, color, valid


def render(bg, obj, color, valid, size, device, noise=None):
    """Images (n x 3 x size x size, float in [0,1]) for the scenes, on `device`."""
    t = lambda a: torch.as_tensor(np.asarray(a), dtype=torch.float32, device=device)
    n = obj.shape[0]
    coord = (torch.arange(size, device=device, dtype=torch.float32) + 0.5) / size
    yy, xx = coord.view(1, size, 1), coord.view(1, 1, size)
    d = t(bg["dir"]).view(n, 1, 1)
    grad = ((xx - 0.5) * torch.cos(d) + (yy - 0.5) * torch.sin(d)) / 1.42 + 0.5
    img = t(bg["c0"]).view(n, 3, 1, 1) * (1 - grad[:, None]) + t(bg["c1"]).view(n, 3, 1, 1) * grad[:, None]
    td = t(bg["tdir"]).view(n, 1, 1)
    proj = (xx * torch.cos(td) + yy * torch.sin(td)) * t(bg["freq"]).view(n, 1, 1) * 2 * math.pi
    proj = proj + t(bg["phase"]).view(n, 1, 1)
    stripes = torch.sin(proj)
    checker = torch.sign(torch.sin(xx * t(bg["freq"]).view(n, 1, 1) * 2 * math.pi) *
                         torch.sin(yy * t(bg["freq"]).view(n, 1, 1) * 2 * math.pi))
    kind = t(bg["kind"]).view(n, 1, 1)
    tex = torch.where(kind == 0, stripes, torch.where(kind == 1, checker, torch.zeros_like(stripes)))
    img = img + (t(bg["amp"]).view(n, 1, 1) * tex)[:, None]
    o = t(obj)
    col = t(color)
    for k in range(obj.shape[1]):
        c = o[:, k, 0].view(n, 1, 1)
        dx = (xx - o[:, k, 1].view(n, 1, 1)) / (o[:, k, 3].view(n, 1, 1) / 2)
        dy = (yy - o[:, k, 2].view(n, 1, 1)) / (o[:, k, 4].view(n, 1, 1) / 2)
        ax, ay = dx.abs(), dy.abs()
        inside = [dx * dx + dy * dy <= 1,                              # circle (ellipse)
                  (ax <= 1) & (ay <= 1),                               # square (rectangle)
                  (dy <= 1) & (dy >= -1) & (ax <= (dy + 1) / 2),       # triangle, apex up
                  ax + ay <= 1,                                        # diamond
                  ((ax <= 1) & (ay <= 0.3)) | ((ax <= 0.3) & (ay <= 1))]  # cross
        m = torch.zeros_like(dx, dtype=torch.bool)
        for i, ins in enumerate(inside):
            m = m | ((c == i) & ins)
        m = m & t(valid[:, k]).bool().view(n, 1, 1)
        img = torch.where(m[:, None], col[:, k].view(n, 3, 1, 1), img)
    if noise is not None:
        img = img + noise.view(n, 1, 1, 1) * torch.randn_like(img)
    return img.clamp(0, 1)


def quantize(img):
    """Float images -> uint8 HWC arrays (what a PNG stores)."""
    return (img * 255 + 0.5).floor().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).cpu().numpy()


def make_data(args):
    rng = np.random.RandomState(VAL_SEED)
    bg, obj, color, valid = sample_scenes(rng, VAL_COUNT + 1)
    val_dir = os.path.join(REPO, "data", "shapes-val")
    os.makedirs(val_dir, exist_ok=True)
    pixels = quantize(render(bg, obj, color, valid, NET, "cpu"))
    for i in range(VAL_COUNT):
        png_write(os.path.join(val_dir, "%03d.png" % i), pixels[i])
        with open(os.path.join(val_dir, "%03d.txt" % i), "w") as f:
            for k in range(MAX_OBJECTS):
                if valid[i, k]:
                    f.write("%d %.6f %.6f %.6f %.6f\n" % tuple([int(obj[i, k, 0])] + list(obj[i, k, 1:])))
    # The demo picture: the last scene rendered at 3x the network size.
    last = slice(VAL_COUNT, VAL_COUNT + 1)
    demo = quantize(render({k: v[last] for k, v in bg.items()}, obj[last], color[last], valid[last],
                           3 * NET, "cpu"))
    png_write(os.path.join(REPO, "data", "shapes.png"), demo[0])
    # int8 calibration images for `graphrun eval --model shapes`: other scenes, no labels.
    calib_dir = os.path.join(REPO, "data", "shapes-calib")
    os.makedirs(calib_dir, exist_ok=True)
    pixels = quantize(render(*sample_scenes(np.random.RandomState(VAL_SEED + 1), CALIB_COUNT), NET, "cpu"))
    for i in range(CALIB_COUNT):
        png_write(os.path.join(calib_dir, "%02d.png" % i), pixels[i])
    with open(os.path.join(REPO, "models", "shapes.cfg"), "w") as f:
        f.write(cfg_text())
    with open(os.path.join(REPO, "models", "shapes.names"), "w") as f:
        f.write("\n".join(CLASSES) + "\n")
    print("wrote %d validation images to %s, %d calibration images to %s, data/shapes.png, "
          "models/shapes.cfg, models/shapes.names" % (VAL_COUNT, val_dir, CALIB_COUNT, calib_dir))


def load_val(val_dir):
    images, labels = [], []
    for i in range(VAL_COUNT):
        images.append(png_read(os.path.join(val_dir, "%03d.png" % i)))
        rows = []
        with open(os.path.join(val_dir, "%03d.txt" % i)) as f:
            for line in f:
                if line.strip():
                    rows.append([float(v) for v in line.split()])
        labels.append(np.array(rows, np.float64).reshape(-1, 5))
    return np.stack(images), labels


# ---- network -------------------------------------------------------------------------------------

class Shapes(nn.Module):
    def __init__(self):
        super().__init__()
        layers, c = [], 3
        for filters, size, pool in BODY:
            layers += [nn.Conv2d(c, filters, size, 1, size // 2, bias=False),
                       nn.BatchNorm2d(filters, eps=BN_EPS_TORCH, momentum=0.03),
                       nn.LeakyReLU(0.1)]
            if pool:
                layers.append(nn.MaxPool2d(2, 2))
            c = filters
        self.body = nn.Sequential(*layers)
        self.head = nn.Conv2d(c, HEAD_FILTERS, 1, 1, 0, bias=True)
        with torch.no_grad():   # start with low objectness so early training is stable
            self.head.bias.view(len(ANCHORS), 5 + len(CLASSES))[:, 4] = -4.0

    def forward(self, x):
        return self.head(self.body(x))


def export_weights(model, path):
    """Darknet .weights: header 0.2.0 with a 64-bit `seen`, then per conv biases, [BN scales,
    rolling mean, rolling variance], weights. Torch's BN divides by sqrt(var + 1e-5), Darknet's by
    sqrt(var') + 1e-6: var' = (sqrt(var + 1e-5) - 1e-6)^2 makes them equal."""
    parts = []
    mods = list(model.body)
    for i, m in enumerate(mods):
        if isinstance(m, nn.Conv2d):
            bn = mods[i + 1]
            std = torch.sqrt(bn.running_var.double() + BN_EPS_TORCH) - BN_EPS_DARKNET
            parts += [bn.bias.double(), bn.weight.double(), bn.running_mean.double(), std * std,
                      m.weight.double().flatten()]
    parts += [model.head.bias.double(), model.head.weight.double().flatten()]
    flat = torch.cat([p.detach().cpu().flatten() for p in parts]).float().numpy()
    with open(path, "wb") as f:
        f.write(struct.pack("<iiiq", 0, 2, 0, 0))
        f.write(flat.astype("<f4").tobytes())
    return flat.size


# ---- decoding and mAP: the same as runtime/detect.c and tools/eval.c ----------------------------

def decode(raw, thresh, nms=NMS):
    """Detections of one image from its raw head output (HEAD_FILTERS x GRID x GRID, float32
    numpy): list of (class, prob, [left, top, right, bottom]) in network pixels, sorted by prob,
    as runtime/detect.c decodes a [yolo] head (candidates in row, column, anchor, class order)."""
    e = 5 + len(CLASSES)
    g = raw.shape[-1]
    a = raw.reshape(len(ANCHORS), e, g, g).transpose(2, 3, 0, 1).astype(np.float32)  # row col k e
    sig = (1 / (1 + np.exp(-a.astype(np.float64)))).astype(np.float32)
    obj = sig[..., 4]
    prob = (obj[..., None] * sig[..., 5:]).astype(np.float32)
    keep = (obj[..., None] > thresh) & (prob > thresh)
    row, col, k, c = np.nonzero(keep)
    if len(row) == 0:
        return []
    anchors = np.array(ANCHORS, np.float64)
    x = ((col.astype(np.float32) + sig[row, col, k, 0]) / np.float32(g)).astype(np.float64)
    y = ((row.astype(np.float32) + sig[row, col, k, 1]) / np.float32(g)).astype(np.float64)
    w = (np.exp(a[row, col, k, 2].astype(np.float64)) * anchors[k, 0] / NET).astype(np.float32)
    h = (np.exp(a[row, col, k, 3].astype(np.float64)) * anchors[k, 1] / NET).astype(np.float32)
    w, h = w.astype(np.float64), h.astype(np.float64)
    boxes = np.stack([(x - w / 2) * NET, (y - h / 2) * NET, (x + w / 2) * NET, (y + h / 2) * NET],
                     1).astype(np.float32)
    p = prob[row, col, k, c]
    kept = []
    for cls in np.unique(c):
        idx = np.nonzero(c == cls)[0]
        idx = idx[np.argsort(-p[idx], kind="stable")]
        bx = boxes[idx]
        area = (bx[:, 2] - bx[:, 0]) * (bx[:, 3] - bx[:, 1])
        supp = np.zeros(len(idx), bool)
        for i in range(len(idx)):
            if supp[i]:
                continue
            ow = np.minimum(bx[i, 2], bx[i + 1:, 2]) - np.maximum(bx[i, 0], bx[i + 1:, 0])
            oh = np.minimum(bx[i, 3], bx[i + 1:, 3]) - np.maximum(bx[i, 1], bx[i + 1:, 1])
            inter = ow * oh
            union = area[i] + area[i + 1:] - inter
            with np.errstate(divide="ignore", invalid="ignore"):
                iou = np.where((ow >= 0) & (oh >= 0) & (union > 0), inter / union, 0)
            supp[i + 1:] |= iou > nms
        kept += list(idx[~supp])
    kept = sorted(kept, key=lambda i: (-p[i], c[i], i))
    clip = np.clip(boxes, 0, NET - 1)
    return [(int(c[i]), float(p[i]), [float(v) for v in clip[i]]) for i in kept]


def average_precision(scores, tp, n_gt):
    """All-point interpolated AP; equal scores form one step (tools/eval.c)."""
    if n_gt == 0:
        return None
    if len(scores) == 0:
        return 0.0
    order = np.argsort(-np.asarray(scores), kind="stable")
    s, t = np.asarray(scores)[order], np.asarray(tp, np.float64)[order]
    ctp, cfp = np.cumsum(t), np.cumsum(1 - t)
    last = np.append(s[1:] != s[:-1], True)          # end of each group of equal scores
    rec, prec = ctp[last] / n_gt, ctp[last] / (ctp[last] + cfp[last])
    prec = np.maximum.accumulate(prec[::-1])[::-1]
    return float(np.sum(np.diff(np.concatenate([[0.0], rec])) * prec))


def mean_aps(all_dets, labels, thresholds):
    """mAP (over classes with ground truth) at each IoU threshold, matching as tools/eval.c: in
    each image, detections by decreasing probability take the ground-truth box of their class they
    overlap most; a true positive needs IoU >= threshold and that box not yet taken."""
    out = []
    for thr in thresholds:
        aps = []
        for cls in range(len(CLASSES)):
            scores, tp, n_gt = [], [], 0
            for dets, lab in zip(all_dets, labels):
                gt = lab[lab[:, 0] == cls]
                n_gt += len(gt)
                d = [x for x in dets if x[0] == cls]
                if not d:
                    continue
                scores += [x[1] for x in d]
                if len(gt) == 0:
                    tp += [0] * len(d)
                    continue
                gtb = np.stack([(gt[:, 1] - gt[:, 3] / 2) * NET, (gt[:, 2] - gt[:, 4] / 2) * NET,
                                (gt[:, 1] + gt[:, 3] / 2) * NET, (gt[:, 2] + gt[:, 4] / 2) * NET], 1)
                b = np.array([x[2] for x in d])
                iw = np.clip(np.minimum(b[:, None, 2], gtb[None, :, 2]) - np.maximum(b[:, None, 0], gtb[None, :, 0]), 0, None)
                ih = np.clip(np.minimum(b[:, None, 3], gtb[None, :, 3]) - np.maximum(b[:, None, 1], gtb[None, :, 1]), 0, None)
                inter = iw * ih
                union = ((b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]))[:, None] + \
                    ((gtb[:, 2] - gtb[:, 0]) * (gtb[:, 3] - gtb[:, 1]))[None, :] - inter
                iou = np.where(union > 0, inter / np.maximum(union, 1e-12), 0)
                used = np.zeros(len(gt), bool)
                for i in range(len(d)):
                    j = int(np.argmax(iou[i]))
                    hit = iou[i, j] >= thr - 1e-9 and not used[j]
                    used[j] |= hit
                    tp.append(int(hit))
            ap = average_precision(scores, tp, n_gt)
            if ap is not None:
                aps.append(ap)
        out.append(float(np.mean(aps)) if aps else 0.0)
    return out


def evaluate(model, images, labels, device):
    model.eval()
    raws = []
    with torch.no_grad():
        for i in range(0, len(images), 64):
            x = torch.as_tensor(images[i:i + 64], device=device).permute(0, 3, 1, 2).float() / 255
            raws.append(model(x).float().cpu().numpy())
    model.train()
    raws = np.concatenate(raws)
    dets = [decode(r, EVAL_THRESH) for r in raws]
    maps = mean_aps(dets, labels, [0.5 + 0.05 * i for i in range(10)])
    return maps[0], float(np.mean(maps))


# ---- training ------------------------------------------------------------------------------------

def yolo_loss(out, obj, valid, device):
    n = out.shape[0]
    e = 5 + len(CLASSES)
    p = out.view(n, len(ANCHORS), e, GRID, GRID).permute(0, 1, 3, 4, 2).float()
    anchors = torch.tensor(ANCHORS, dtype=torch.float32, device=device) / NET
    gt = torch.as_tensor(obj, dtype=torch.float32, device=device)
    vm = torch.as_tensor(valid, device=device)
    b_idx, k_idx = vm.nonzero(as_tuple=True)
    g = gt[b_idx, k_idx]
    cls, cx, cy, w, h = g[:, 0].long(), g[:, 1], g[:, 2], g[:, 3], g[:, 4]
    inter = torch.min(w[:, None], anchors[None, :, 0]) * torch.min(h[:, None], anchors[None, :, 1])
    iou = inter / (w[:, None] * h[:, None] + anchors[None, :, 0] * anchors[None, :, 1] - inter)
    a_idx = iou.argmax(1)
    col = (cx * GRID).long().clamp(0, GRID - 1)
    row = (cy * GRID).long().clamp(0, GRID - 1)
    # Predicted boxes, to leave out of the no-object loss those that already overlap an object.
    gy, gx = torch.meshgrid(torch.arange(GRID, device=device), torch.arange(GRID, device=device), indexing="ij")
    with torch.no_grad():
        px = (gx + torch.sigmoid(p[..., 0])) / GRID
        py = (gy + torch.sigmoid(p[..., 1])) / GRID
        pw = torch.exp(p[..., 2].clamp(max=4)) * anchors[:, 0].view(1, -1, 1, 1)
        ph = torch.exp(p[..., 3].clamp(max=4)) * anchors[:, 1].view(1, -1, 1, 1)
        pb = torch.stack([px - pw / 2, py - ph / 2, px + pw / 2, py + ph / 2], -1).view(n, -1, 1, 4)
        gb = torch.stack([gt[..., 1] - gt[..., 3] / 2, gt[..., 2] - gt[..., 4] / 2,
                          gt[..., 1] + gt[..., 3] / 2, gt[..., 2] + gt[..., 4] / 2], -1).view(n, 1, -1, 4)
        iw = (torch.min(pb[..., 2], gb[..., 2]) - torch.max(pb[..., 0], gb[..., 0])).clamp(min=0)
        ih = (torch.min(pb[..., 3], gb[..., 3]) - torch.max(pb[..., 1], gb[..., 1])).clamp(min=0)
        inter = iw * ih
        union = (pb[..., 2] - pb[..., 0]) * (pb[..., 3] - pb[..., 1]) + \
                (gb[..., 2] - gb[..., 0]) * (gb[..., 3] - gb[..., 1]) - inter
        best = torch.where(vm.view(n, 1, -1), inter / union.clamp(min=1e-9), torch.zeros_like(inter)).max(-1)[0]
        ignore = (best > 0.5).view(n, len(ANCHORS), GRID, GRID)
    obj_t = torch.zeros(n, len(ANCHORS), GRID, GRID, device=device)
    obj_t[b_idx, a_idx, row, col] = 1
    noobj = (~ignore) & (obj_t == 0)
    bce = F.binary_cross_entropy_with_logits
    l_obj = bce(p[..., 4][obj_t == 1], obj_t[obj_t == 1], reduction="sum") + \
        bce(p[..., 4][noobj], obj_t[noobj], reduction="sum")
    pp = p[b_idx, a_idx, row, col]
    scale = 2 - w * h
    l_xy = (scale[:, None] * bce(pp[:, 0:2], torch.stack([cx * GRID - col, cy * GRID - row], 1),
                                 reduction="none")).sum()
    l_wh = (scale[:, None] * (pp[:, 2:4] - torch.stack([torch.log(w / anchors[a_idx, 0]),
                                                         torch.log(h / anchors[a_idx, 1])], 1)) ** 2).sum()
    l_cls = bce(pp[:, 5:], F.one_hot(cls, len(CLASSES)).float(), reduction="sum")
    return (l_obj + l_xy + 2 * l_wh + l_cls) / n


def save_refs(model, images, out_dir):
    """PyTorch's raw head output and detections (thresh 0.5) on data/shapes-val/000.png: graphrun's
    CPU fp32 output must match them (tests/test_shapes.c)."""
    cpu = copy.deepcopy(model).cpu().eval()   # the CPU's exact fp32, as graphrun's CPU reference
    with torch.no_grad():
        x = torch.as_tensor(images[:1]).permute(0, 3, 1, 2).float() / 255
        raw = cpu(x).numpy()
    np.save(os.path.join(out_dir, "shapes_head_ref.npy"), raw.astype(np.float32))
    with open(os.path.join(out_dir, "shapes_dets_ref.txt"), "w") as f:
        for c, p, b in decode(raw[0], 0.5):
            f.write("%s %.4f %.2f %.2f %.2f %.2f\n" % (CLASSES[c], p, *b))


def train(args):
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "train_log.txt"), "w")

    def say(msg):
        print(msg, flush=True)
        log.write(msg + "\n")
        log.flush()
    torch.manual_seed(args.seed)
    rng = np.random.RandomState(args.seed)
    # Validation must be exact fp32 like graphrun's: no TF32 in convolutions or matmuls.
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    images, labels = load_val(args.val)
    model = Shapes().to(device)
    if args.init:
        model.load_state_dict(torch.load(args.init, map_location=device))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=5e-4)
    say("torch %s, device %s, batch %d, budget %.1f min, %d validation images"
        % (torch.__version__, device, args.batch, args.minutes, len(images)))
    budget = args.minutes * 60
    start = time.time()
    next_eval = start + args.eval_every
    best = {"map50": -1.0, "map50_95": 0.0}
    step, seen, loss = 0, 0, torch.zeros(())
    use_amp = device.type == "cuda"

    def validate(lr):
        m50, m5095 = evaluate(model, images, labels, device)
        mark = ""
        if (m50, m5095) > (best["map50"], best["map50_95"]):   # ties: the better mAP@0.5:0.95
            best.update(map50=m50, map50_95=m5095)
            torch.save(model.state_dict(), os.path.join(args.out, "shapes_best.pt"))
            mark = " (best)"
        say("%6.1fs step %6d images %8d lr %.5f loss %.3f  val mAP@0.5 %.4f mAP@0.5:0.95 %.4f%s"
            % (time.time() - start, step, seen, lr, loss.item(), m50, m5095, mark))

    lr = args.lr
    while time.time() - start < budget:
        frac = (time.time() - start) / budget
        lr = args.lr * min(1.0, (step + 1) / 200) * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * frac)))
        for gparam in opt.param_groups:
            gparam["lr"] = lr
        bg, obj, color, valid = sample_scenes(rng, args.batch)
        noise = torch.rand(args.batch, device=device) * 0.05
        x = render(bg, obj, color, valid, NET, device, noise)
        if use_amp:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(x)
        else:
            out = model(x)
        loss = yolo_loss(out, obj, valid, device)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        opt.step()
        step += 1
        seen += args.batch
        if time.time() >= next_eval:
            validate(lr)
            next_eval = time.time() + args.eval_every
    validate(lr)
    model.load_state_dict(torch.load(os.path.join(args.out, "shapes_best.pt"), map_location=device))
    n = export_weights(model, os.path.join(args.out, "shapes.weights"))
    save_refs(model, images, args.out)
    say("done in %.1fs: %d steps, %d images; exported %d floats (%.2f MB) to %s"
        % (time.time() - start, step, seen, n, n * 4 / 1e6, os.path.join(args.out, "shapes.weights")))
    say("final (best checkpoint) PyTorch fp32 validation: mAP@0.5 %.4f  mAP@0.5:0.95 %.4f"
        % (best["map50"], best["map50_95"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--make-data", action="store_true", help="write data/shapes-val, data/shapes.png, the cfg and names")
    ap.add_argument("--out", help="directory for everything training writes")
    ap.add_argument("--minutes", type=float, default=4.0, help="wall-clock training budget")
    ap.add_argument("--device", default="auto", help="auto (CUDA when available), cpu, cuda")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--eval-every", type=float, default=30.0, help="seconds between validations")
    ap.add_argument("--val", default=os.path.join(REPO, "data", "shapes-val"))
    ap.add_argument("--init", help="start from this shapes_best.pt")
    ap.add_argument("--eval", metavar="CKPT", help="only print the validation mAP of this shapes_best.pt")
    ap.add_argument("--max-images", type=int, default=VAL_COUNT, help="with --eval: the first N images")
    args = ap.parse_args()
    if args.make_data:
        make_data(args)
    elif args.eval:
        images, labels = load_val(args.val)
        model = Shapes()
        model.load_state_dict(torch.load(args.eval, map_location="cpu"))
        n = args.max_images
        m50, m5095 = evaluate(model, images[:n], labels[:n], "cpu")
        print("PyTorch fp32, %d images: mAP@0.5 %.4f  mAP@0.5:0.95 %.4f" % (len(images[:n]), m50, m5095))
    elif args.out:
        train(args)
    else:
        ap.error("give --make-data or --out DIR")


if __name__ == "__main__":
    main()
