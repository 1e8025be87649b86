#!/usr/bin/env python3
"""Peer numbers for graphrun: PyTorch's best YOLOv2-tiny (VOC) runs on the same GPU.

With --torchscript FILE --size N the network is a TorchScript module taking [B, 3, N, N] (e.g. the
YOLOv8n twin of an ONNX benchmark model, bench/onnx_models.py).
With --cfg FILE [--weights FILE] the network is any Darknet cfg instead, built by
bench/darknet_torch.py (conv/bn/activations incl. mish/swish/logistic, maxpool, route with groups,
shortcut, upsample, dropout; [yolo] layers give their raw inputs as outputs, concatenated): e.g.
--cfg models/yolov4-tiny.cfg. Its input must be square.

The network is models/yolov2-tiny-voc.cfg rebuilt in PyTorch: nine convolutions (16..1024, 1024,
125), batch norm folded into the convolutions (as any inference runtime does, graphrun included),
leaky 0.1, five 2x2/2 max pools and Darknet's 2x2/1 max pool, which pads only right and bottom with
taps that never win (-inf). Weights are deterministic random (seed 1), He-scaled by fan-in so the
activations stay finite in FP16. The input is deterministic random uint8 (never zeros).

Measured, each as the median and p99 of --iters synchronous iterations after --warmup ones:
  (a) FP16 channels-last eager, batch 1, compute only
  (b) FP16 channels-last CUDA graph, batch 1, compute only ((b2): the same in NCHW, for context;
      --no-nchw: skipped)
  (c) (b) plus the copies inside the graph: pinned uint8 HWC 416x416x3 -> device, convert to FP16,
      network, FP32 output -> pinned host (what graphrun's gr_engine_run_u8 does)
  (d) INT8: eager PyTorch has no INT8 convolution on CUDA; reported as not offered
  (b), (c) again at batch 64 (--batch)
  (e) torch.compile of the FP16 channels-last model, compute only, at batch 1 (mode reduce-overhead)
      and batch 64 (reduce-overhead and max-autotune-no-cudagraphs); compile time excluded; each
      runs in a child process with a time limit; if one fails the CUDA-graph number stands
  (f) exact FP32 (TF32 off in cuDNN and cuBLAS), CUDA graph, compute only, at --batch, NCHW and
      channels-last; (g) the faster of the two with the copies as in (c)   (--no-fp32: skipped)
  --batch-curve 1,8,32,64,128,256: (c) and (f)+(g) again at each of those batches, with
      --curve-iters iterations (the batch curve beside graphrun_bench's; bench/batch_curve.py
      tables both)
Every iteration is timed twice: CUDA events around the work (GPU time) and the host clock from
just before the launch to after the synchronisation (what a caller waits; graphrun_bench measures
this way). The table prints both; JSON (--json FILE) keeps everything.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

NET_SIZE = 416
# (filters, size, batch-normalised + leaky, pool after: None, 2 = 2x2/2, 1 = Darknet's 2x2/1)
LAYERS = [(16, 3, True, 2), (32, 3, True, 2), (64, 3, True, 2), (128, 3, True, 2),
          (256, 3, True, 2), (512, 3, True, 1), (1024, 3, True, None), (1024, 3, True, None),
          (125, 1, False, None)]


class YoloV2TinyVoc(nn.Module):
    def __init__(self, seed=1):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.convs = nn.ModuleList()
        self.plan = []
        channels = 3
        for filters, size, leaky, pool in LAYERS:
            conv = nn.Conv2d(channels, filters, size, padding=size // 2, bias=True)
            fan_in = channels * size * size
            with torch.no_grad():
                he_std = (2.0 / fan_in) ** 0.5
                conv.weight.copy_(torch.randn(conv.weight.shape, generator=gen) * he_std)
                conv.bias.copy_(torch.randn(filters, generator=gen) * 0.1)
            self.convs.append(conv)
            self.plan.append((leaky, pool))
            channels = filters

    def forward(self, x):
        for conv, (leaky, pool) in zip(self.convs, self.plan):
            x = conv(x)
            if leaky:
                x = F.leaky_relu(x, 0.1)
            if pool == 2:
                x = F.max_pool2d(x, 2, 2)
            elif pool == 1:
                # Darknet: padding = size-1 = 1, window offset -padding/2 = 0, so only the right and
                # bottom are padded, and padded taps never win.
                x = F.max_pool2d(F.pad(x, (0, 1, 0, 1), value=float("-inf")), 2, 1)
        return x


def percentile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, int(round(q / 100.0 * (len(sorted_values) - 1)))))
    return sorted_values[k]


def summarise(name, batch, event_us, wall_us, note=""):
    ev = sorted(event_us)
    wa = sorted(wall_us)
    p50 = percentile(ev, 50)
    return {
        "name": name, "batch": batch, "iters": len(ev), "note": note,
        "event_p50_us": p50, "event_p99_us": percentile(ev, 99), "event_max_us": ev[-1],
        "event_mean_us": sum(ev) / len(ev),
        "wall_p50_us": percentile(wa, 50), "wall_p99_us": percentile(wa, 99), "wall_max_us": wa[-1],
        "images_per_s_event": batch / (p50 * 1e-6),
        "images_per_s_wall": batch / (percentile(wa, 50) * 1e-6),
    }


def time_it(fn, iters, warmup):
    """Synchronous iterations: events around the work and the host clock around launch + sync."""
    stream = torch.cuda.current_stream()
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    event_us, wall_us = [], []
    for _ in range(iters):
        t0 = time.perf_counter_ns()
        start.record(stream)
        fn()
        end.record(stream)
        end.synchronize()
        t1 = time.perf_counter_ns()
        event_us.append(start.elapsed_time(end) * 1e3)
        wall_us.append((t1 - t0) * 1e-3)
    return event_us, wall_us


CFG = None  # (cfg path, weights path or None) from --cfg / --weights
TORCHSCRIPT = None  # a TorchScript file from --torchscript


class FlatHeads(nn.Module):
    """A DarknetNet whose head tensors come back as one (batch, n) tensor, as peers.py times."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return torch.cat([h.flatten(1) for h in self.net(x)], 1)


def base_model():
    if TORCHSCRIPT is not None:
        return torch.jit.load(TORCHSCRIPT, map_location="cpu").float()
    if CFG is None:
        return YoloV2TinyVoc()
    from darknet_torch import DarknetNet
    with open(CFG[0]) as f:
        return FlatHeads(DarknetNet(f.read(), CFG[1]))


def make_model(device):
    model = base_model().eval().to(device).half().to(memory_format=torch.channels_last)
    return model


def input_u8(batch):
    gen = torch.Generator().manual_seed(7)
    # 1..255: never zero, so nothing measures a shortcut on zeros.
    return torch.randint(1, 256, (batch, NET_SIZE, NET_SIZE, 3), dtype=torch.uint8, generator=gen)


def to_network_input(u8_nhwc):
    # uint8 NHWC is channels-last NCHW after a permute: no layout change, one convert kernel.
    return u8_nhwc.permute(0, 3, 1, 2).half().mul_(1.0 / 255.0).contiguous(
        memory_format=torch.channels_last)


def capture(fn, warmup=3):
    """Capture fn() into a CUDA graph (warm-up on a side stream first, as PyTorch requires)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def output_shape(model, x):
    """The shape of model(x): YOLOv2-tiny's (batch, 125, 13, 13), a --cfg network's (batch, n)
    (its heads flattened and concatenated)."""
    with torch.no_grad():
        return tuple(model(x).shape)


def check_finite(t, what):
    if not torch.isfinite(t.float()).all():
        raise RuntimeError(f"{what}: output has non-finite values")


def bench_compute(model, batch, args, results):
    dev = torch.device("cuda")
    x = to_network_input(input_u8(batch).to(dev))
    if batch == 1:
        ev, wa = time_it(lambda: model(x), args.iters, args.warmup)
        check_finite(model(x), "eager")
        results.append(summarise("(a) fp16 channels-last eager, compute only", batch, ev, wa))
        log(results[-1])
    graph, out = capture(lambda: model(x))
    ev, wa = time_it(graph.replay, args.iters, args.warmup)
    check_finite(out, "graph")
    results.append(summarise("(b) fp16 channels-last CUDA graph, compute only", batch, ev, wa))
    log(results[-1])
    if batch == 1 and not args.no_nchw:
        # Context, not a peer row: the same graph in the default NCHW layout.
        model_nchw = make_model(dev).to(memory_format=torch.contiguous_format)
        x_nchw = x.contiguous()
        graph_nchw, out = capture(lambda: model_nchw(x_nchw))
        ev, wa = time_it(graph_nchw.replay, args.iters, args.warmup)
        check_finite(out, "graph nchw")
        results.append(summarise("(b2) fp16 NCHW CUDA graph, compute only (layout check)", batch,
                                 ev, wa))
        log(results[-1])


def bench_with_copies(model, batch, args, results):
    dev = torch.device("cuda")
    host_in = input_u8(batch).pin_memory()
    dev_in = torch.empty(host_in.shape, dtype=torch.uint8, device=dev)
    host_out = torch.empty(output_shape(model, to_network_input(dev_in)),
                           dtype=torch.float32).pin_memory()

    def run():
        dev_in.copy_(host_in, non_blocking=True)
        y = model(to_network_input(dev_in))
        host_out.copy_(y.float(), non_blocking=True)
        return y

    note = "H2D uint8 HWC + convert + network + FP32 D2H, all in one graph (pinned host buffers)"
    try:
        graph, _ = capture(run)
        fn = graph.replay
    except RuntimeError as exc:  # capture of the copies refused: copies eager around the graph
        note = f"copies outside the graph (capture failed: {str(exc).splitlines()[0]})"
        torch.cuda.synchronize()
        x = torch.empty((batch, 3, NET_SIZE, NET_SIZE), dtype=torch.half, device=dev).to(
            memory_format=torch.channels_last)
        graph, out = capture(lambda: model(x))

        def fn():
            dev_in.copy_(host_in, non_blocking=True)
            x.copy_(to_network_input(dev_in))
            graph.replay()
            host_out.copy_(out.float(), non_blocking=True)
    ev, wa = time_it(fn, args.iters, args.warmup)
    check_finite(host_out, "graph with copies")
    results.append(summarise("(c) fp16 channels-last CUDA graph + input/output copies", batch, ev,
                             wa, note))
    log(results[-1])


def bench_fp32(batch, args, results):
    torch.backends.cudnn.allow_tf32 = False  # exact FP32, what graphrun's fp32 engine promises
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    best = None
    for layout, fmt in (("NCHW", torch.contiguous_format), ("channels-last", torch.channels_last)):
        model = base_model().eval().to(dev).to(memory_format=fmt)
        x = input_u8(batch).to(dev).permute(0, 3, 1, 2).float().mul_(1.0 / 255.0).contiguous(
            memory_format=fmt)
        graph, out = capture(lambda: model(x))
        ev, wa = time_it(graph.replay, args.iters, args.warmup)
        check_finite(out, f"fp32 {layout}")
        results.append(summarise(f"(f) fp32 {layout} CUDA graph, compute only (TF32 off)", batch,
                                 ev, wa))
        log(results[-1])
        if best is None or results[-1]["event_p50_us"] < best[0]["event_p50_us"]:
            best = (results[-1], model, fmt, layout)
        del graph, out
    _, model, fmt, layout = best
    host_in = input_u8(batch).pin_memory()
    dev_in = torch.empty(host_in.shape, dtype=torch.uint8, device=dev)
    host_out = torch.empty(output_shape(model, dev_in.permute(0, 3, 1, 2).float().contiguous(
        memory_format=fmt)), dtype=torch.float32).pin_memory()

    def run():
        dev_in.copy_(host_in, non_blocking=True)
        y = model(dev_in.permute(0, 3, 1, 2).float().mul_(1.0 / 255.0).contiguous(
            memory_format=fmt))
        host_out.copy_(y, non_blocking=True)
        return y

    graph, _ = capture(run)
    ev, wa = time_it(graph.replay, args.iters, args.warmup)
    check_finite(host_out, "fp32 graph with copies")
    results.append(summarise(f"(g) fp32 {layout} CUDA graph + input/output copies", batch, ev, wa,
                             "H2D uint8 HWC + convert + network + D2H, one graph, TF32 off"))
    log(results[-1])


def compile_child(args):
    """Child process: torch.compile at one batch, compile time excluded; writes JSON."""
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    model = make_model(dev)
    x = to_network_input(input_u8(args.batch).to(dev))
    t0 = time.time()
    with torch.inference_mode():
        compiled = torch.compile(model, mode=args.compile_mode)
        for _ in range(3):
            compiled(x)
        torch.cuda.synchronize()
        compile_s = time.time() - t0
        ev, wa = time_it(lambda: compiled(x), args.iters, args.warmup)
        # Checked on a fresh call: with CUDA graphs (reduce-overhead) older outputs are overwritten.
        check_finite(compiled(x).clone(), "compiled")
    r = summarise(f"(e) fp16 channels-last torch.compile mode={args.compile_mode}",
                  args.batch, ev, wa, f"compile + first runs took {compile_s:.1f} s")
    with open(args.child_json, "w") as f:
        json.dump(r, f)


def log(r):
    print(f"  {r['name']} b{r['batch']}: event p50 {r['event_p50_us']:.1f} us, "
          f"wall p50 {r['wall_p50_us']:.1f} us", flush=True)


def print_table(meta, results):
    print()
    print(f"PyTorch {meta['torch']} on {meta['device']} "
          f"(CUDA {meta['cuda']}, cuDNN {meta['cudnn']})")
    hdr = (f"{'run':<62} {'batch':>5} {'ev p50':>9} {'ev p99':>9} {'wall p50':>9} {'wall p99':>9} "
           f"{'img/s(wall)':>12}")
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        if "event_p50_us" not in r:
            print(f"{r['name']:<62} {r['batch']:>5}  {r['note']}")
            continue
        print(f"{r['name'][:62]:<62} {r['batch']:>5} {r['event_p50_us']:>9.1f} "
              f"{r['event_p99_us']:>9.1f} {r['wall_p50_us']:>9.1f} {r['wall_p99_us']:>9.1f} "
              f"{r['images_per_s_wall']:>12.0f}")
    print("times in microseconds; ev = CUDA events around the work, "
          "wall = host clock from launch to synchronised")
    for r in results:
        if r.get("note") and "event_p50_us" in r:
            print(f"note {r['name'][:3]} b{r['batch']}: {r['note']}")


def bench_curve(model, args, results):
    """(c) fp16 and (g) fp32 with copies at every batch of --batch-curve, fewer iterations."""
    curve = argparse.Namespace(**vars(args))
    curve.iters, curve.warmup = args.curve_iters, min(args.warmup, 20)
    for batch in sorted({int(b) for b in args.batch_curve.split(",")}):
        bench_with_copies(model, batch, curve, results)
        if not args.no_fp32:
            bench_fp32(batch, curve, results)
        torch.cuda.empty_cache()


def main():
    global CFG, NET_SIZE, TORCHSCRIPT
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--batch", type=int, default=64, help="the large batch (default 64)")
    ap.add_argument("--compile-batch", type=int, action="append", default=None,
                    help="batch(es) run through torch.compile (default: 1 and --batch)")
    ap.add_argument("--compile-mode", action="append", default=None,
                    help="torch.compile mode(s), tried in order (default: reduce-overhead, then, "
                         "for batches > 1, max-autotune-no-cudagraphs)")
    ap.add_argument("--no-baseline", action="store_true", help="only the torch.compile runs")
    ap.add_argument("--compile-timeout", type=float, default=150.0,
                    help="seconds allowed per torch.compile child (compile + timing)")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--no-fp32", action="store_true", help="skip (f) and (g)")
    ap.add_argument("--no-nchw", action="store_true",
                    help="skip (b2), the NCHW layout check (a second model and its cuDNN search)")
    ap.add_argument("--batch-curve", metavar="B,B,...",
                    help="also (c) and (f)/(g) at each of these batches (e.g. 1,8,32,64,128,256)")
    ap.add_argument("--curve-iters", type=int, default=200,
                    help="iterations per batch-curve point (default 200, after 20 warm-up)")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--cfg", metavar="FILE", help="any Darknet cfg instead of YOLOv2-tiny VOC")
    ap.add_argument("--weights", metavar="FILE", help="its .weights (default: random, seed 1)")
    ap.add_argument("--torchscript", metavar="FILE",
                    help="a TorchScript network instead (input [B, 3, --size, --size])")
    ap.add_argument("--size", type=int, default=None, help="--torchscript's input side")
    ap.add_argument("--child-json", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torchscript:
        if not args.size or args.cfg:
            print("peers.py: --torchscript needs --size and excludes --cfg")
            return 2
        TORCHSCRIPT, NET_SIZE = args.torchscript, args.size
    if args.cfg:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from darknet_torch import parse_cfg
        with open(args.cfg) as f:
            net = parse_cfg(f.read())[0][1]
        if int(net["width"]) != int(net["height"]):
            print("peers.py: %s: input %sx%s is not square" % (args.cfg, net["width"],
                                                              net["height"]))
            return 2
        CFG, NET_SIZE = (args.cfg, args.weights), int(net["width"])

    if not torch.cuda.is_available():
        print("peers.py: no CUDA device visible (torch.cuda.is_available() is False)")
        return 77
    if args.child_json:
        args.compile_mode = args.compile_mode[0]
        compile_child(args)
        return 0

    torch.backends.cudnn.benchmark = True  # best convolution algorithms for the peer
    dev = torch.device("cuda")
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "device": torch.cuda.get_device_name(dev), "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "iters": args.iters, "warmup": args.warmup, "command": " ".join(sys.argv)}
    results = []
    if not args.no_baseline:
        model = make_model(dev)
        with torch.inference_mode():
            # Saved after each step: a run cut short (time limit, error) keeps what it measured.
            bench_compute(model, 1, args, results)
            save(args.json, meta, results)
            bench_with_copies(model, 1, args, results)
            results.append({"name": "(d) int8", "batch": 1,
                            "note": "not offered: eager PyTorch has no INT8 convolution on CUDA"})
            save(args.json, meta, results)
            bench_compute(model, args.batch, args, results)
            save(args.json, meta, results)
            bench_with_copies(model, args.batch, args, results)
            save(args.json, meta, results)
            if not args.no_fp32:
                bench_fp32(args.batch, args, results)
                save(args.json, meta, results)
            if args.batch_curve:
                bench_curve(model, args, results)
        del model
        torch.cuda.empty_cache()
        save(args.json, meta, results)

    compile_runs = []
    for batch in args.compile_batch or [1, args.batch]:
        # At batch 1 a compiled model without CUDA graphs is launch-bound: not worth a child.
        default_modes = ["reduce-overhead"] + (["max-autotune-no-cudagraphs"] if batch > 1 else [])
        compile_runs += [(batch, mode) for mode in (args.compile_mode or default_modes)]
    if not args.no_compile:
        for batch, mode in compile_runs:
            with tempfile.TemporaryDirectory() as tmp:
                child = os.path.join(tmp, "r.json")
                cmd = [sys.executable, os.path.abspath(__file__), "--child-json", child,
                       "--compile-mode", mode, "--batch", str(batch),
                       "--iters", str(args.iters), "--warmup", str(args.warmup)]
                if args.torchscript:
                    cmd += ["--torchscript", args.torchscript, "--size", str(args.size)]
                if args.cfg:
                    cmd += ["--cfg", args.cfg] + (["--weights", args.weights] if args.weights else [])
                t0 = time.time()
                try:
                    proc = subprocess.run(cmd, timeout=args.compile_timeout, capture_output=True,
                                          text=True)
                    if proc.returncode == 0 and os.path.exists(child):
                        with open(child) as f:
                            results.append(json.load(f))
                        log(results[-1])
                    else:
                        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
                        results.append({"name": f"(e) torch.compile mode={mode}",
                                        "batch": batch,
                                        "note": f"failed (rc {proc.returncode}): {' '.join(tail)}; "
                                                "the CUDA-graph number above stands"})
                except subprocess.TimeoutExpired:
                    results.append({"name": f"(e) torch.compile mode={mode}",
                                    "batch": batch,
                                    "note": f"gave up after {time.time() - t0:.0f} s "
                                            "(--compile-timeout); the CUDA-graph number stands"})
            save(args.json, meta, results)
    print_table(meta, results)
    return 0


def save(path, meta, results):
    """The JSON so far, replaced whole (written aside, then renamed): never half a file."""
    if path:
        with open(path + ".tmp", "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
        os.replace(path + ".tmp", path)


if __name__ == "__main__":
    sys.exit(main())
