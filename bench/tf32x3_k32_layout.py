"""A CPU check of the K32 main loop's shared-memory layout and fragment mapping
(kernels/gemm_tf32x3.cu, mma_stage_k32 and b_index), written where no GPU was at hand.

One pipeline stage of a BM x 128 tile (8 warps, 2 x 4) is laid out as the loaders lay it out
(As rows of 36 floats, k natural; Bs rows of 128 floats with b_index's 16-byte chunk XOR), every
lane's reads are made as the kernel makes them (two 128-bit A reads per 16-row tile and step
pair, 4-byte B reads of stage rows 8t + 2s (+1)), the m16n8k8 products are formed from the
fragments by the PTX ISA's layout (a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4);
b0 (t, g), b1 (t+4, g); c0 (g, 2t), c1 (g, 2t+1), c2 (g+8, 2t), c3 (g+8, 2t+1)) and scattered by
the epilogue's mapping; the result must equal A x B exactly (small integers). It also counts
shared-memory bank conflicts: the 128-bit A reads per quarter warp, the B reads per warp.
Pure Python. Usage: python3 bench/tf32x3_k32_layout.py   (exit status 1 on a failure)
"""
import random
import sys


def check(bm, bn=128, bk=32, wm=2, wn=4):
    lda, ldb = bk + 4, bn
    warp_m, warp_n = bm // wm, bn // wn
    mt, nt = warp_m // 16, warp_n // 8
    rng = random.Random(bm)
    a = [[rng.randint(-9, 9) for _ in range(bk)] for _ in range(bm)]
    b = [[rng.randint(-9, 9) for _ in range(bn)] for _ in range(bk)]

    def b_index(r, c):
        return r * ldb + ((((c >> 2) ^ ((r >> 2) & 6)) << 2) | (c & 3))

    a_s = [None] * (bm * lda)
    b_s = [None] * (bk * ldb)
    for r in range(bm):
        for k in range(bk):
            a_s[r * lda + k] = a[r][k]
    for r in range(bk):
        for c in range(bn):
            assert b_s[b_index(r, c)] is None, "b_index maps two elements to one place"
            b_s[b_index(r, c)] = b[r][c]
    out = [[0] * bn for _ in range(bm)]
    conflicts = 0
    for warp in range(wm * wn):
        warp_row, warp_col = (warp // wn) * warp_m, (warp % wn) * warp_n
        part = {(lane, i, j): [0] * 4 for lane in range(32) for i in range(mt) for j in range(nt)}
        for h in range(2):
            bfr, b_addr = {}, {}
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                for s in range(2):
                    r = 8 * t + 4 * h + 2 * s
                    for j in range(nt):
                        c = warp_col + j * 8 + g
                        bfr[lane, s, j] = (b_s[b_index(r, c)], b_s[b_index(r + 1, c)])
                        b_addr.setdefault((s, j, 0), []).append(b_index(r, c))
                        b_addr.setdefault((s, j, 1), []).append(b_index(r + 1, c))
            for addrs in b_addr.values():
                conflicts += len(addrs) - len({x % 32 for x in addrs})
            for i in range(mt):
                afr, a_addr = {}, []
                for lane in range(32):
                    g, t = lane >> 2, lane & 3
                    base = (warp_row + i * 16 + g) * lda + 8 * t + 4 * h
                    assert base % 4 == 0, "128-bit reads stay 16-byte aligned"
                    lo, hi = a_s[base:base + 4], a_s[base + 8 * lda:base + 8 * lda + 4]
                    a_addr.append(base)
                    afr[lane, 0] = (lo[0], hi[0], lo[1], hi[1])
                    afr[lane, 1] = (lo[2], hi[2], lo[3], hi[3])
                for q in range(4):
                    banks = {(x + e) % 32 for x in a_addr[8 * q:8 * q + 8] for e in range(4)}
                    conflicts += 32 - len(banks)
                for s in range(2):
                    for j in range(nt):
                        am = [[None] * 8 for _ in range(16)]
                        bmat = [[None] * 8 for _ in range(8)]
                        for lane in range(32):
                            g, t = lane >> 2, lane & 3
                            am[g][t], am[g + 8][t], am[g][t + 4], am[g + 8][t + 4] = afr[lane, s]
                            bmat[t][g], bmat[t + 4][g] = bfr[lane, s, j]
                        for lane in range(32):
                            g, t = lane >> 2, lane & 3
                            cells = ((g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1))
                            for e, (m, n) in enumerate(cells):
                                part[lane, i, j][e] += sum(am[m][k] * bmat[k][n] for k in range(8))
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            for i in range(mt):
                for hh in range(2):
                    n = warp_row + i * 16 + g + hh * 8
                    for j in range(nt):
                        for e in range(2):
                            out[n][warp_col + j * 8 + 2 * t + e] += part[lane, i, j][hh * 2 + e]
    bad = sum(out[n][c] != sum(a[n][k] * b[k][c] for k in range(bk))
              for n in range(bm) for c in range(bn))
    print(f"K32 stage {bm}x{bn}: {bad} wrong outputs, {conflicts} bank conflicts")
    return bad == 0 and conflicts == 0


ok = all([check(128), check(64)])
sys.exit(0 if ok else 1)
