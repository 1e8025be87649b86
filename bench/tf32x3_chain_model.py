"""A pure-Python model of the 3xTF32 kernels' rounding (kernels/gemm_tf32x3.cu) on single dot
products, against test_gpu_gemm_f32's tolerance 1e-5 * sum_k |w x| + 4 eps |y|:

  K16 tiles: small halves rounded to nearest (cvt.rna), a zeroed partial per k8 step (3 MMAs);
  K32 tiles: small halves truncated (the tensor core's reading of an f32 bit pattern), one zeroed
             partial per 32-k stage (a chain of 12 MMAs);
  plain TF32, for scale.

Each MMA's sum is rounded toward zero to f32 (the pessimistic model of the tensor core), partials
are added to an f32 accumulator with round-to-nearest. Data: test_gpu_gemm_f32's wide values
(exponents -8..8, random signs), or with "pos" all positive (the tensor core's truncation then
biases every partial the same way). Usage: python3 bench/tf32x3_chain_model.py [K] [pos]
Seen 2026-11-23: K 4608 wide: K16 0.9%, K32 1.2% of the tolerance (plain TF32 4.6x);
K 9216 positive: K16 12.8%, K32 5.5% (plain TF32 3.3x); K 100 wide: K16 1.1%, K32 3.8%.
"""
import math
import random
import struct
import sys

K = int(sys.argv[1]) if len(sys.argv) > 1 else 4608
POSITIVE = len(sys.argv) > 2 and sys.argv[2] == "pos"
rng = random.Random(1)


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def bits(x):
    return struct.unpack("I", struct.pack("f", x))[0]


def from_bits(u):
    return struct.unpack("f", struct.pack("I", u & 0xFFFFFFFF))[0]


def rna(x):
    return from_bits((bits(x) + 0x1000) & 0xFFFFE000)


def trunc(x):
    return from_bits(bits(x) & 0xFFFFE000)


def rz32(x):
    f = f32(x)
    if abs(f) > abs(x):
        f = from_bits(bits(f) - 1)  # one f32 ulp toward zero
    return f


def wide():
    x = f32(math.ldexp(1 + rng.random(), rng.randint(-8, 8)))
    return x if POSITIVE or rng.random() < 0.5 else -x


def three_tf32(w, x, small, steps_per_partial):
    wb, xb = [rna(a) for a in w], [rna(a) for a in x]
    ws = [small(f32(a - b)) for a, b in zip(w, wb)]
    xs = [small(f32(a - b)) for a, b in zip(x, xb)]
    acc = 0.0
    for k0 in range(0, K, 8 * steps_per_partial):
        part = 0.0
        for k1 in range(k0, min(K, k0 + 8 * steps_per_partial), 8):
            ks = range(k1, min(K, k1 + 8))
            part = rz32(part + sum(ws[k] * xb[k] for k in ks))
            part = rz32(part + sum(wb[k] * xs[k] for k in ks))
            part = rz32(part + sum(wb[k] * xb[k] for k in ks))
        acc = f32(acc + part)
    return acc


worst = {"K16": 0.0, "K32": 0.0, "plain TF32": 0.0}
for trial in range(30):
    w = [wide() for _ in range(K)]
    x = [wide() for _ in range(K)]
    ref = math.fsum(a * b for a, b in zip(w, x))
    tol = 1e-5 * math.fsum(abs(a * b) for a, b in zip(w, x)) + 4 * 2.0**-23 * abs(ref)
    got = {"K16": three_tf32(w, x, rna, 1), "K32": three_tf32(w, x, trunc, 4),
           "plain TF32": math.fsum(rna(a) * rna(b) for a, b in zip(w, x))}
    for name, y in got.items():
        worst[name] = max(worst[name], abs(y - ref) / tol)
print(f"K {K}{' positive' if POSITIVE else ' wide'}: worst error / tolerance over 30 dot products: "
      + ", ".join(f"{name} {v:.3f}" for name, v in worst.items()))
sys.exit(0 if worst["K16"] < 1 and worst["K32"] < 1 else 1)
