"""A CPU model of the 3xTF32 GEMM's rounding (kernels/gemm_tf32x3.cu) on test_gpu_gemm_f32's GEMM
shapes and data (operand exponents spread over 2^-8 .. 2^8, never zero), against the test's
per-element tolerance 1e-5 * (sum_k |w x| + |bias|) + 4 eps |y|:

  - plain TF32 (both operands rounded to 10-bit mantissas, exact sums): how far past the
    tolerance it lands (the test asserts it does: > 1);
  - 3xTF32 as the kernel computes it: x = big + small (cvt.rna), per k8 step a zeroed partial
    gets small_a*big_b, big_a*small_b, big_a*big_b with each tensor-core sum rounded toward zero
    (the pessimistic model of the MMA's accumulation), then is added to an f32 accumulator with
    round-to-nearest: how much of the tolerance it uses.

Needs NumPy (Debian: python3-numpy). Usage: python3 bench/tf32x3_model.py [seed]
Seen 2026-11-23 (seed 1): plain TF32 6-76x over the tolerance; 3xTF32 at 1.3-4% of it.
"""
import sys

import numpy as np

rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 1)


def wide(n):
    e = rng.integers(-8, 9, size=n)
    m = 1 + rng.random(n)
    s = np.where(rng.integers(0, 2, size=n) == 1, -1, 1)
    return (s * np.ldexp(m, e)).astype(np.float32)


def tf32(x):
    """cvt.rna.tf32.f32: keep 10 mantissa bits, round to nearest, ties away from zero."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x1000) & 0xFFFFE000).astype(np.uint32).view(np.float32)


def rz32(x):
    """double -> float32 rounded toward zero."""
    f = x.astype(np.float32)
    over = np.abs(f.astype(np.float64)) > np.abs(x)
    return np.where(over, np.nextafter(f, np.float32(0)), f)


def gemm(a, b):
    return np.einsum("nk,bkp->bnp", a.astype(np.float64), b.astype(np.float64))


CASES = [(1, 27, 169, 2), (13, 27, 1, 3), (16, 144, 256, 2), (64, 36, 37, 3), (130, 68, 100, 2),
         (33, 4608, 13, 1), (125, 4608, 169, 1), (40, 64, 64, 2), (20, 9, 12, 3)]

for n, k, p, batch in CASES:
    w = wide(n * k).reshape(n, k)
    x = wide(batch * k * p).reshape(batch, k, p)
    bias = wide(n).astype(np.float64)[None, :, None]
    ref = gemm(w, x)
    s = gemm(np.abs(w), np.abs(x))
    tol = 1e-5 * (s + np.abs(bias)) + 4 * np.finfo(np.float32).eps * np.abs(ref + bias)
    plain = np.max(np.abs(gemm(tf32(w), tf32(x)) - ref) / tol)
    wb, xb = tf32(w), tf32(x)
    ws, xs = tf32(w - wb), tf32(x - xb)
    kp = (k + 7) // 8 * 8
    wb, ws = (np.pad(a, [(0, 0), (0, kp - k)]) for a in (wb, ws))
    xb, xs = (np.pad(a, [(0, 0), (0, kp - k), (0, 0)]) for a in (xb, xs))
    acc = np.zeros((batch, n, p), np.float32)
    for k0 in range(0, kp, 8):
        sl = slice(k0, k0 + 8)
        part = rz32(gemm(ws[:, sl], xb[:, sl]))
        part = rz32(part.astype(np.float64) + gemm(wb[:, sl], xs[:, sl]))
        part = rz32(part.astype(np.float64) + gemm(wb[:, sl], xb[:, sl]))
        acc = (acc + part).astype(np.float32)
    three = np.max(np.abs(acc.astype(np.float64) - ref) / tol)
    print(f"N {n:4d} K {k:5d} P {p:4d} batch {batch}: plain TF32 {plain:6.2f}x the tolerance, "
          f"3xTF32 {three:.3f}x")
