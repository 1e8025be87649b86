/* Resident-weights implicit GEMM ("stream" tiles 5 and 6 of conv.h) for convolutions whose
 * filters fit in shared memory: the early layers (YOLOv2-tiny's 16->32, 32->64, 64->128 at
 * 208x208 .. 52x52), where K is short (144-576 bytes per pixel) and the tiled kernel of
 * conv_wmma.cu spends most of its time in per-block prologue, 3-9 K steps and the epilogue, at
 * low occupancy (docs/performance.md, 2026-11-23 evening).
 *
 * A block loads its BN filters' whole K once (cp.async, before waiting for the producer kernel:
 * weights are constant), then walks M tiles of BM pixels (tile blockIdx.x, + gridDim.x, ...):
 * persistent, with the next tile's A rows (the full K of BM im2col rows) in flight while the
 * current tile multiplies. Every A row is ksize*ksize*cin_pad values: 16-byte chunks, one
 * cp.async each (zero-fill outside the image), addressed through a per-block table of the
 * chunks' offsets and taps, so a chunk costs a table read, a bounds test and an add.
 * Shared-memory rows are kb + 16 bytes apart (kb = K bytes rounded up to 32), which makes every
 * ldmatrix phase conflict-free. The epilogue works on the MMA fragments in registers: per value
 * the multiplier, bias and activation (conv.h's formula), a fused 2x2 maxpool through two warp
 * shuffles (a window's four GEMM rows are four lanes), then the conversion into a per-warp
 * staging area and 16-byte stores.
 *
 * The pooled maximum is taken over the window's taps inside the conv output: on the accumulators
 * before the epilogue where the epilogue is non-decreasing (multipliers >= 0, activation linear,
 * leaky or relu: then the largest accumulator gives the largest y, exactly), each of the
 * window's four lanes finishing a quarter of the filters; otherwise with fmaxf on the activated
 * values. For the finite values of an INT8 conv both are exactly the CPU reference's "v > best"
 * scan; they differ only for NaN taps (FP16 with non-finite inputs) and in the sign of zeros.
 *
 * Requirements on top of conv.h's: NHWC output, no split-K, f32 accumulation for FP16, sm_80+
 * (mma.sync), and the filters plus two A tiles within the device's opt-in shared memory. */
#include <algorithm>
#include <cfloat>
#include <climits>
#include <limits>
#include <mutex>

#include <cuda_fp16.h>

#include "kernels/common.cuh"
#include "kernels/conv.h"
#include "kernels/conv_internal.cuh"
#include "kernels/conv_mma.cuh"

using namespace gr_conv;

/* Outside the anonymous namespace: sm_75's pass compiles the kernels' bodies out, and an unused
 * internal function would be warned about there. */
namespace gr_conv_stream
{

/* n / d for 0 <= n < a bound the host checked (fast_div_init): __umulhi(n, m) with
 * m = ceil(2^32 / d), exact while n * (m * d - 2^32) < 2^32; d == 1 is n itself. An integer
 * division is ~25 instructions, and a tile's origin took two, twice per tile (loader and
 * epilogue): ~100 of the 1,044 instructions per tile and warp (ncu, 2026-12-07). */
struct FastDiv {
    unsigned m;
    int d;
};

__host__ __device__ inline int fast_div(int n, FastDiv f)
{
#if defined(__CUDA_ARCH__)
    return f.d == 1 ? n : static_cast<int>(__umulhi(static_cast<unsigned>(n), f.m));
#else
    return n / f.d;
#endif
}

/* False when d < 1 or some n < bound would divide inexactly. */
inline bool fast_div_init(FastDiv &f, int d, long long bound)
{
    if (d < 1 || bound < 0)
        return false;
    f.d = d;
    if (d == 1) {
        f.m = 0;
        return true;
    }
    const unsigned long long two32 = 1ull << 32;
    const unsigned long long m = (two32 + static_cast<unsigned long long>(d) - 1) / static_cast<unsigned long long>(d);
    f.m = static_cast<unsigned>(m);
    const unsigned long long err = m * static_cast<unsigned long long>(d) - two32;
    return bound <= 1 || static_cast<unsigned long long>(bound - 1) * err < two32;
}

} // namespace gr_conv_stream

using namespace gr_conv_stream;

namespace
{

constexpr int kStages = 2; /* A tiles in shared memory: the one multiplied, the one landing */
constexpr int kMaxDevices = 64;

struct StreamParams {
    ConvParams p;
    int elem;    /* input bytes per value: 1 (i8) or 2 (f16) */
    int kb;      /* K bytes rounded up to 32 (the MMA's K step) */
    int lds;     /* shared-memory row pitch, kb + 16 */
    int chunks;  /* 16-byte chunks of a row that hold K (the rest up to kb is zero) */
    int m_tiles; /* ceil(M / BM); patch mode: the 2D tiles */
    int out_elem;
    /* Patch mode (tile 7): a tile is th x tw output pixels (pooled ones where the conv is pooled)
     * of one image; its input patch, patch_h x patch_w pixels of pb bytes (the conv's channels),
     * lands at ppb bytes per pixel and pitch bytes per row, patch_bytes per stage. */
    int tw_shift, th, tiles_x, tiles_y, map_h, map_w;
    int patch_h, patch_w, pb, ppb, pitch, patch_bytes;
    float inv_patch_w;
    int m_tiles_batch; /* images (host side, for the tile count) */
    /* t / (tiles_x * tiles_y) and r / tiles_x without an integer division (patch mode): */
    FastDiv div_img, div_x;
};

template <typename In> struct StreamAcc;
template <> struct StreamAcc<signed char> {
    using T = int;
};
template <> struct StreamAcc<__half> {
    using T = float;
};

/* Shared memory of one block: filters, two A tiles, chunk table, multipliers and biases, and
 * one staging area per warp for the converted outputs. */
struct Layout {
    int b, a, table, mul, bias, stage, total;
};

__host__ __device__ inline Layout layout(int bn, int a_stage, int warps, int rows_per_warp, int lds,
                                         int chunks, int out_elem)
{
    Layout l;
    l.b = 0;
    l.a = l.b + bn * lds;
    l.table = l.a + kStages * a_stage;
    l.mul = l.table + (chunks * 8 + 15) / 16 * 16;
    l.bias = l.mul + bn * 4;
    l.stage = l.bias + bn * 4;
    l.total = l.stage + warps * rows_per_warp * bn * out_elem;
    return l;
}

/* kFast (patch mode only): the shape of a detector's early layers, 3x3 stride-1 convs with a
 * leaky activation and a fused 2x2 stride-2 maxpool, with those parameters as constants: the
 * activation's switch and every pool/stride select fold away (kFast_applies below). */
template <typename In, int WARPS, int FM, int BN, bool kPatch, bool kFast>
__global__ void __launch_bounds__(WARPS * 32, kFast && BN == 32 ? 3 : 1) k_conv_stream(const StreamParams sp)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    using Acc = typename StreamAcc<In>::T;
    using Op = MmaOp<In, Acc>;
    constexpr int kThreads = WARPS * 32, BM = WARPS * 16 * FM, NJ = BN / 8;
    /* loader: TPR threads share an A row (alternate chunks), RPT rows per thread */
    constexpr int TPR = kThreads >= BM ? kThreads / BM : 1;
    constexpr int RPT = BM >= kThreads ? BM / kThreads : 1;
    static_assert(TPR * BM == kThreads * RPT, "rows divide among the threads");

    static_assert(kPatch || !kFast, "the fast shape is a patch-mode variant");
    /* Window rows: with two fragments per warp, each thread pools in its own registers (no
     * shuffles; the epilogue runs once per window and filter) */
    constexpr bool kWin = kFast && FM == 2;
    const ConvParams &p = sp.p;
    const bool pool = kFast ? true : p.pool != 0;
    const int act = kFast ? static_cast<int>(GR_CONV_ACT_LEAKY) : p.activation;
    const int stride = kFast ? 1 : p.stride, pool_stride = kFast ? 2 : p.pool_stride;
    const int lds = sp.lds, kb = sp.kb, chunks = sp.chunks;
    const int rows_out = pool ? 4 * FM : 16 * FM; /* staged output rows per warp and tile */
    const int a_stage = kPatch ? sp.patch_bytes : BM * lds;
    const Layout L = layout(BN, a_stage, WARPS, 16 * FM, lds, kPatch ? kb / 16 : chunks, sp.out_elem);
    extern __shared__ __align__(128) unsigned char smem[];
    unsigned char *sB = smem + L.b;
    unsigned char *sA = smem + L.a;
    int2 *table = reinterpret_cast<int2 *>(smem + L.table);
    float *s_mul = reinterpret_cast<float *>(smem + L.mul);
    float *s_bias = reinterpret_cast<float *>(smem + L.bias);

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int n0 = blockIdx.y * BN;
    const In *in = static_cast<const In *>(p.in);
    const unsigned char *wts = static_cast<const unsigned char *>(p.weights);
    const int k_bytes = p.K * sp.elem;

    /* Filters, multipliers and biases are read before waiting for the producer kernel: no kernel
     * of the engine writes them (they are uploaded at build), so they are ready already. */
    const int kc = kb / 16;
    for (int it = tid; it < BN * kc; it += kThreads) {
        const int r = it / kc, c = it - r * kc, n = n0 + r;
        const bool ok = n < p.out_c && c < chunks;
        copy16(sB + r * lds + c * 16,
               ok ? wts + static_cast<size_t>(n) * k_bytes + c * 16 : wts, ok);
    }
    cp_async_commit();
    /* The chunk table: chunk c of an A row is tap (ky, kx), channels ci.. Patch mode: its byte
     * offset from the row's pixel in the patch; the K padding up to kb reads chunk 0 (its
     * filters are zero; for finite inputs the product is 0). */
    for (int c = tid; c < (kPatch ? kc : chunks); c += kThreads) {
        const int k = (c < chunks ? c : 0) * 16 / sp.elem, tap = k / p.cin_pad, ci = k - tap * p.cin_pad;
        const int ky = tap / p.ksize, kx = tap - ky * p.ksize;
        table[c] = kPatch ? make_int2(ky * sp.pitch + kx * sp.ppb + ci * sp.elem, 0)
                          : make_int2((ky * p.in_w + kx) * p.in_c_stride + ci, (ky << 16) | kx);
    }
    if (!kPatch)
        for (int it = tid; it < kStages * BM * (kc - chunks); it += kThreads) { /* K pad: 0 */
            const int r = it / (kc - chunks), c = chunks + it % (kc - chunks);
            *reinterpret_cast<uint4 *>(sA + r * lds + c * 16) = make_uint4(0, 0, 0, 0);
        }
    for (int c = tid; c < BN; c += kThreads) {
        const int n = n0 + c;
        s_bias[c] = p.bias && n < p.out_c ? p.bias[n] : 0.0f;
        s_mul[c] = p.mul ? (n < p.out_c ? p.mul[n] : 0.0f) : 1.0f;
    }
    static_assert(BN <= kThreads, "one multiplier per thread in the check below");
    const int negative_mul = __syncthreads_or(tid < BN && !(s_mul[tid] >= 0.0f));
    /* Pool before the epilogue where that is exact: y = act(fmaf(acc, mul, bias)) is
     * non-decreasing in acc when mul >= 0 and act is linear, leaky or relu (the others are left
     * out), so the window's largest accumulator gives the window's largest y. */
    const bool pool_first = pool && !negative_mul && gr_conv_act_pools_first(act);
    wait_for_producer(); /* the input is the previous kernel's output */

    /* Patch mode: tile t is image t / (tiles_x * tiles_y), output pixels from (oy0, ox0); local
     * GEMM row lr is output pixel lr (unpooled) or tap lr & 3 of pooled pixel lr >> 2, row-major
     * over th x tw. Its conv pixel relative to the tile's conv origin: */
    const int tw = 1 << sp.tw_shift;
    auto tile_origin = [&](int t, int &img, int &oy0, int &ox0) {
        img = fast_div(t, sp.div_img);
        const int r = t - img * sp.div_img.d, ty = fast_div(r, sp.div_x);
        oy0 = ty * sp.th;
        ox0 = (r - ty * sp.tiles_x) << sp.tw_shift;
    };
    auto local_conv = [&](int lr, int &cy, int &cx, int &oy, int &ox) {
        /* kWin: a warp's 32 rows are its 8 windows x 4 taps, row i * 16 + h * 8 + w being tap
         * 2i + h of window w, so that a thread's accumulators (rows g, g + 8 of fragments 0
         * and 1) are the four taps of one window */
        const int idx = kWin ? ((lr >> 5) << 3) | (lr & 7) : (pool ? lr >> 2 : lr);
        const int q = kWin ? (lr >> 3) & 3 : lr & 3;
        oy = idx >> sp.tw_shift;
        ox = idx & (tw - 1);
        cy = pool ? oy * pool_stride + (q >> 1) : oy;
        cx = pool ? ox * pool_stride + (q & 1) : ox;
    };
    auto conv_origin = [&](int oy0, int ox0, int &cy0, int &cx0) {
        cy0 = pool ? oy0 * pool_stride + p.pool_offset : oy0;
        cx0 = pool ? ox0 * pool_stride + p.pool_offset : ox0;
    };

    auto load_tile = [&](int t, int stage) {
        if constexpr (kPatch) {
            int img, oy0, ox0, cy0, cx0;
            tile_origin(t, img, oy0, ox0);
            conv_origin(oy0, ox0, cy0, cx0);
            const int iy0 = cy0 * stride - p.pad, ix0 = cx0 * stride - p.pad;
            unsigned char *dst = sA + stage * sp.patch_bytes;
            const int cpp = sp.pb / 16; /* 16-byte chunks per pixel */
            for (int i = tid; i < sp.patch_h * sp.patch_w; i += kThreads) {
                /* i / patch_w through the float reciprocal: exact for i < 2^16 (checked) */
                const int r = static_cast<int>((static_cast<float>(i) + 0.5f) * sp.inv_patch_w);
                const int c = i - r * sp.patch_w, iy = iy0 + r, ix = ix0 + c;
                const bool ok = static_cast<unsigned>(iy) < static_cast<unsigned>(p.in_h) &&
                                static_cast<unsigned>(ix) < static_cast<unsigned>(p.in_w);
                const In *src = ok ? in + ((img * p.in_h + iy) * p.in_w + ix) * p.in_c_stride +
                                         p.in_c_offset
                                   : in;
                for (int j = 0; j < cpp; ++j)
                    copy16(dst + r * sp.pitch + c * sp.ppb + j * 16, ok ? src + j * 16 / sp.elem : in, ok);
            }
            return;
        }
        unsigned char *dst = sA + stage * BM * lds;
#pragma unroll
        for (int rr = 0; rr < RPT; ++rr) {
            const int r = tid / TPR + rr * (kThreads / TPR);
            int img, oy, ox, iy0 = INT_MIN / 2, ix0 = 0, base = 0;
            if (row_pixel(p, t * BM + r, img, oy, ox)) {
                iy0 = oy * stride - p.pad;
                ix0 = ox * stride - p.pad;
                base = ((img * p.in_h + iy0) * p.in_w + ix0) * p.in_c_stride + p.in_c_offset;
            }
            for (int c = tid % TPR; c < chunks; c += TPR) {
                const int2 e = table[c];
                const int iy = iy0 + (e.y >> 16), ix = ix0 + (e.y & 0xffff);
                const bool ok = static_cast<unsigned>(iy) < static_cast<unsigned>(p.in_h) &&
                                static_cast<unsigned>(ix) < static_cast<unsigned>(p.in_w);
                copy16(dst + r * lds + c * 16, ok ? in + (base + e.x) : in, ok);
            }
        }
    };

    const int g = lane >> 2, t4 = lane & 3, mat = lane >> 3, r8 = lane & 7;
    const bool full_n = n0 + BN <= p.out_c; /* every column of the block is a real filter */
    unsigned char *stage_out = smem + L.stage + warp * (16 * FM) * BN * sp.out_elem;
    int tile = blockIdx.x;
    if (tile < sp.m_tiles)
        load_tile(tile, 0);
    cp_async_commit();

    for (int s = 0; tile < sp.m_tiles; tile += gridDim.x, s ^= 1) {
        cp_async_wait<0>();
        __syncthreads(); /* tile landed for everyone; the other stage is free again */
        if (tile + static_cast<int>(gridDim.x) < sp.m_tiles)
            load_tile(tile + gridDim.x, s ^ 1);
        cp_async_commit();

        typename Op::Reg c[FM][NJ][Op::regs];
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int j = 0; j < NJ; ++j)
#pragma unroll
                for (int r = 0; r < Op::regs; ++r)
                    c[i][j][r] = 0;
        /* This lane's ldmatrix rows of A: rows 0-7 / 8-15 (mat & 1) x K bytes 0-15 / 16-31
         * (mat >> 1) of each fragment: an im2col row, or (patch mode) the row's pixel in the
         * patch, then the chunk's offset from the table. */
        const unsigned char *a_row[FM];
#pragma unroll
        for (int i = 0; i < FM; ++i) {
            const int lr = warp * FM * 16 + i * 16 + (mat & 1) * 8 + r8;
            if constexpr (kPatch) {
                int cy, cx, oy, ox;
                local_conv(lr, cy, cx, oy, ox);
                a_row[i] = sA + s * sp.patch_bytes + cy * stride * sp.pitch + cx * stride * sp.ppb;
            } else {
                a_row[i] = sA + s * BM * lds + lr * lds + (mat >> 1) * 16;
            }
        }
        for (int kk = 0; kk < kb; kk += 32) {
            unsigned a[FM][4];
            const int koff = kPatch ? table[(kk >> 4) + (mat >> 1)].x : kk;
#pragma unroll
            for (int i = 0; i < FM; ++i)
                ldmatrix_x4(a[i], a_row[i] + koff);
            if (kPatch && kk + 16 >= k_bytes) /* K bytes 16-31 are padding: zeros, as in an im2col row */
#pragma unroll
                for (int i = 0; i < FM; ++i)
                    a[i][2] = a[i][3] = 0u;
#pragma unroll
            for (int j = 0; j < NJ / 2; ++j) { /* filters 0-7 x K 0-15 / 16-31, then 8-15 */
                unsigned b[4];
                ldmatrix_x4(b, sB + (j * 16 + (mat >> 1) * 8 + r8) * lds + kk + (mat & 1) * 16);
#pragma unroll
                for (int i = 0; i < FM; ++i) {
                    Op::mma(c[i][2 * j], a[i], b[0], b[1]);
                    Op::mma(c[i][2 * j + 1], a[i], b[2], b[3]);
                }
            }
        }

        /* Epilogue. Thread (g, t4) holds rows g and g + 8 of each 16-row fragment, filters
         * 8j + 2t4 and + 1. A pooled window's rows 4w..4w+3 are lanes g = 4w'..4w'+3: lane bits
         * 2-3, so two xor-shuffles give every lane its window's maximum. */
        const int m_warp = kPatch ? 0 : tile * BM + warp * 16 * FM; /* the linear modes' rows */
        int t_img = 0, t_oy0 = 0, t_ox0 = 0, t_cy0 = 0, t_cx0 = 0;
        if (kPatch) {
            tile_origin(tile, t_img, t_oy0, t_ox0);
            conv_origin(t_oy0, t_ox0, t_cy0, t_cx0);
        }
        /* GEMM row lr of this warp computes a conv pixel that exists (and, in patch mode, whose
         * output pixel is inside the map) */
        auto row_valid = [&](int lr) {
            if constexpr (kPatch) {
                int cy, cx, oy, ox;
                local_conv(warp * 16 * FM + lr, cy, cx, oy, ox);
                cy += t_cy0;
                cx += t_cx0;
                return t_oy0 + oy < sp.map_h && t_ox0 + ox < sp.map_w && cy >= 0 &&
                       cy < p.out_h && cx >= 0 && cx < p.out_w;
            } else {
                int img, oy, ox;
                return row_pixel(p, m_warp + lr, img, oy, ox);
            }
        };
        auto stage_value = [&](int out_row, int col, float v) {
            const bool real = full_n || n0 + col < p.out_c;
            if (sp.out_elem == 1) {
                stage_out[out_row * BN + col] =
                    static_cast<unsigned char>(real ? gr_conv_i8_bits(v, p.out_inv_scale) : 0u);
            } else if (sp.out_elem == 2) {
                reinterpret_cast<__half *>(stage_out)[out_row * BN + col] =
                    __float2half_rn(real ? v : 0.0f);
            } else {
                reinterpret_cast<float *>(stage_out)[out_row * BN + col] = real ? v : 0.0f;
            }
        };
        if constexpr (kWin) {
            /* This thread's window is g (staged row g); its taps are (i, h): rows i * 16 + h * 8
             * + g. A tap outside the conv output never wins (lowest / -FLT_MAX), as below. */
            bool tap_ok[2][2];
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    tap_ok[i][h] = row_valid(i * 16 + h * 8 + g);
#pragma unroll
            for (int j = 0; j < NJ; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int col = j * 8 + 2 * t4 + e;
                    float y;
                    if (pool_first) {
                        Acc best = std::numeric_limits<Acc>::lowest();
#pragma unroll
                        for (int i = 0; i < 2; ++i)
#pragma unroll
                            for (int h = 0; h < 2; ++h) {
                                const Acc a = tap_ok[i][h] ? c[i][j][2 * h + e] : std::numeric_limits<Acc>::lowest();
                                best = a > best ? a : best;
                            }
                        y = gr_conv_activate(fmaf(acc_to_float(best), s_mul[col], s_bias[col]), act);
                    } else {
                        y = -FLT_MAX;
#pragma unroll
                        for (int i = 0; i < 2; ++i)
#pragma unroll
                            for (int h = 0; h < 2; ++h) {
                                const float v = gr_conv_activate(
                                    fmaf(acc_to_float(c[i][j][2 * h + e]), s_mul[col], s_bias[col]), act);
                                y = fmaxf(y, tap_ok[i][h] ? v : -FLT_MAX);
                            }
                    }
                    stage_value(g, col, y);
                }
        } else
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int lr = i * 16 + h * 8 + g; /* row within the warp's rows */
                const bool row_ok = row_valid(lr);
                if (pool_first) {
                    /* Reduce-scatter the window's 4 lanes (lane bits 3, then 2): each ends with
                     * the maximum of a quarter of the 2*NJ values, then runs the epilogue on
                     * those only. Value k is filter 8 * (k / 2) + 2 * t4 + k % 2. */
                    constexpr int NV = 2 * NJ;
                    const Acc lowest = std::numeric_limits<Acc>::lowest();
                    const bool b3 = (lane >> 3) & 1, b2 = (lane >> 2) & 1;
                    Acc v1[NV / 2], v2[NV / 4];
#pragma unroll
                    for (int k = 0; k < NV / 2; ++k) {
                        const Acc lo = row_ok ? c[i][k / 2][2 * h + k % 2] : lowest;
                        const int k2 = k + NV / 2;
                        const Acc hi = row_ok ? c[i][k2 / 2][2 * h + k2 % 2] : lowest;
                        const Acc other = __shfl_xor_sync(0xffffffffu, b3 ? lo : hi, 8);
                        const Acc mine = b3 ? hi : lo;
                        v1[k] = mine > other ? mine : other;
                    }
#pragma unroll
                    for (int k = 0; k < NV / 4; ++k) {
                        const Acc lo = v1[k], hi = v1[k + NV / 4];
                        const Acc other = __shfl_xor_sync(0xffffffffu, b2 ? lo : hi, 4);
                        const Acc mine = b2 ? hi : lo;
                        v2[k] = mine > other ? mine : other;
                    }
#pragma unroll
                    for (int k = 0; k < NV / 4; ++k) {
                        const int orig = k + (b2 ? NV / 4 : 0) + (b3 ? NV / 2 : 0);
                        const int col = (orig >> 1) * 8 + 2 * t4 + (orig & 1);
                        stage_value(lr >> 2, col,
                                    gr_conv_activate(fmaf(acc_to_float(v2[k]), s_mul[col], s_bias[col]),
                                                     act));
                    }
                    continue;
                }
#pragma unroll
                for (int j = 0; j < NJ; ++j)
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const int col = j * 8 + 2 * t4 + e;
                        float v = gr_conv_activate(fmaf(acc_to_float(c[i][j][2 * h + e]), s_mul[col],
                                                        s_bias[col]),
                                                   act);
                        int out_row = lr;
                        if (pool) {
                            v = row_ok ? v : -FLT_MAX;
                            v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 4));
                            v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 8));
                            if (g & 3)
                                continue;
                            out_row = lr >> 2;
                        }
                        stage_value(out_row, col, v);
                    }
            }
        __syncwarp();
        const int vpr = BN * sp.out_elem / 16; /* 16-byte vectors per staged row */
        const int m_out0 = pool ? m_warp >> 2 : m_warp, m_out_end = pool ? p.M >> 2 : p.M;
        const int per_vec = 16 / sp.out_elem;
        /* patch mode: the warp's output pixels are consecutive in one row of the map */
        int w_oy = 0, w_ox = 0;
        if (kPatch) {
            int cy, cx;
            local_conv(warp * 16 * FM, cy, cx, w_oy, w_ox);
            w_oy += t_oy0;
            w_ox += t_ox0;
        }
        for (int it = lane; it < rows_out * vpr; it += 32) {
            const int r = it / vpr, v = it - r * vpr;
            int m_out = m_out0 + r;
            const int n_base = n0 + v * per_vec;
            if (kPatch) {
                if (w_oy >= sp.map_h || w_ox + r >= sp.map_w)
                    continue;
                m_out = (t_img * sp.map_h + w_oy) * sp.map_w + w_ox + r;
            } else if (m_out >= m_out_end) {
                continue;
            }
            if (n_base >= p.out_c_pad)
                continue;
            const long long dst =
                (static_cast<long long>(m_out) * p.out_c_stride + p.out_c_offset + n_base) * sp.out_elem;
            *reinterpret_cast<uint4 *>(static_cast<unsigned char *>(p.out) + dst) =
                *reinterpret_cast<const uint4 *>(stage_out + (r * BN + v * per_vec) * sp.out_elem);
        }
        __syncwarp(); /* the staging area is rewritten by the next tile */
    }
    cp_async_wait<0>();
#endif
}

/* The block shape of tile 5 ("stream": 8 warps, 256 x 32 or 128 x BN) and 6 ("stream-s": 4
 * warps, 64 x BN, for small maps), and the widest BN <= 128 whose shared memory fits. */
template <typename In, int WARPS, int FM, int BN, bool kPatch, bool kFast>
cudaError_t launch_bn(const StreamParams &sp, size_t smem, bool pdl, cudaStream_t stream,
                      bool check_only)
{
    const auto kernel = k_conv_stream<In, WARPS, FM, BN, kPatch, kFast>;
    if (check_only)
        return cudaSuccess;
    int dev = 0, sms = 0, per_sm = 0;
    GR_CUDA_TRY(cudaGetDevice(&dev));
    /* The dynamic shared memory limit is an attribute of the kernel, shared by every thread of
     * the process: raise it once per device to the opt-in maximum (never lower it, so that a
     * launch of another thread cannot lose its limit between the set and its launch). */
    {
        static std::mutex mutex;
        static bool raised[kMaxDevices];
        std::lock_guard<std::mutex> lock(mutex);
        GR_ARG_CHECK(dev >= 0 && dev < kMaxDevices);
        if (!raised[dev]) {
            int max_smem = 0;
            cudaFuncAttributes fa;
            GR_CUDA_TRY(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
            GR_CUDA_TRY(cudaFuncGetAttributes(&fa, kernel));
            GR_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             max_smem - static_cast<int>(fa.sharedSizeBytes)));
            raised[dev] = true;
        }
    }
    GR_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    GR_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, WARPS * 32, smem));
    GR_ARG_CHECK(per_sm > 0);
    const int n_tiles = gr_ceil_div(sp.p.out_c, BN);
    GR_ARG_CHECK(n_tiles <= 65535);
    const int resident = std::max(1, per_sm * sms / n_tiles);
    const dim3 grid(static_cast<unsigned>(std::min(sp.m_tiles, resident)),
                    static_cast<unsigned>(n_tiles));
    return launch_kernel(kernel, grid, dim3(WARPS * 32), smem, pdl, stream, sp);
}

/* Patch mode's tile geometry for blocks of bm GEMM rows, fm fragments per warp: the tile's
 * width tw (a power of two, a whole number of warps' output pixels, no wider than the map needs),
 * its height, the patch and its pitch (the one of 8 paddings whose ldmatrix rows meet the fewest
 * bank conflicts). False when the patch is too large for the fill's index arithmetic. */
bool patch_geometry(StreamParams &sp, int bm, int fm)
{
    const ConvParams &p = sp.p;
    const int per_tile = p.pool ? bm / 4 : bm, per_warp = p.pool ? 4 * fm : 16 * fm;
    sp.map_h = p.pool ? p.pool_h : p.out_h;
    sp.map_w = p.pool ? p.pool_w : p.out_w;
    int tw = per_warp;
    while (tw < sp.map_w && tw < per_tile)
        tw *= 2;
    sp.tw_shift = 0;
    while ((1 << sp.tw_shift) < tw)
        ++sp.tw_shift;
    sp.th = per_tile / tw;
    sp.tiles_x = gr_ceil_div(sp.map_w, tw);
    sp.tiles_y = gr_ceil_div(sp.map_h, sp.th);
    const int ch = p.pool ? (sp.th - 1) * p.pool_stride + 2 : sp.th;
    const int cw = p.pool ? (tw - 1) * p.pool_stride + 2 : tw;
    const long long patch_h = static_cast<long long>(ch - 1) * p.stride + p.ksize;
    const long long patch_w = static_cast<long long>(cw - 1) * p.stride + p.ksize;
    if (patch_h * patch_w >= (1 << 16)) /* the fill's float division; and no patch this large fits */
        return false;
    sp.patch_h = static_cast<int>(patch_h);
    sp.patch_w = static_cast<int>(patch_w);
    sp.inv_patch_w = 1.0f / static_cast<float>(sp.patch_w);
    sp.pb = p.cin_pad * sp.elem;
    sp.ppb = sp.pb + (sp.pb / 16 % 2 == 0 ? 16 : 0); /* an odd number of 16-byte units */
    int best = 99;
    for (int u = 0; u < 8; ++u) {
        const int pitch = sp.patch_w * sp.ppb + u * 16;
        int count[8] = {0, 0, 0, 0, 0, 0, 0, 0}, worst = 0;
        for (int r8 = 0; r8 < 8; ++r8) { /* one ldmatrix matrix: 8 consecutive GEMM rows */
            const int idx = p.pool ? r8 >> 2 : r8, q = r8 & 3;
            const int cy = p.pool ? q >> 1 : 0, cx = p.pool ? idx * p.pool_stride + (q & 1) : idx;
            const int unit = (cy * p.stride * pitch + cx * p.stride * sp.ppb) / 16 % 8;
            worst = std::max(worst, ++count[unit]);
        }
        if (worst < best) {
            best = worst;
            sp.pitch = pitch;
        }
    }
    sp.patch_bytes = (sp.patch_h * sp.pitch + 127) / 128 * 128;
    sp.m_tiles = 0;
    const long long per_img = static_cast<long long>(sp.tiles_x) * sp.tiles_y;
    const long long tiles = per_img * sp.m_tiles_batch;
    if (tiles >= INT_MAX || !fast_div_init(sp.div_img, static_cast<int>(per_img), tiles) ||
        !fast_div_init(sp.div_x, sp.tiles_x, per_img))
        return false;
    sp.m_tiles = static_cast<int>(tiles);
    return true;
}

/* The early-layer shape that k_conv_stream's kFast variant has as constants. */
bool fast_applies(const ConvParams &p)
{
    return p.ksize == 3 && p.stride == 1 && p.activation == GR_CONV_ACT_LEAKY && p.pool &&
           p.pool_stride == 2;
}

template <typename In, int WARPS, int FM_SMALL_N, bool kPatch, bool kFast = false>
cudaError_t launch_shape(StreamParams sp, int max_smem, bool pdl, cudaStream_t stream,
                         bool check_only)
{
    /* BN from the filters, then narrower while the shared memory does not fit */
    int bn = sp.p.out_c <= 32 ? 32 : (sp.p.out_c <= 64 ? 64 : 128);
    for (; bn >= 32; bn /= 2) {
        const int fm = bn == 32 ? FM_SMALL_N : 1, bm = WARPS * 16 * fm;
        if (kPatch && !patch_geometry(sp, bm, fm))
            continue;
        const int a_stage = kPatch ? sp.patch_bytes : bm * sp.lds;
        const Layout l = layout(bn, a_stage, WARPS, 16 * fm, sp.lds,
                                kPatch ? sp.kb / 16 : sp.chunks, sp.out_elem);
        if (l.total > max_smem)
            continue;
        if (!kPatch)
            sp.m_tiles = gr_ceil_div(sp.p.M, bm);
        const size_t smem = static_cast<size_t>(l.total);
        switch (bn) {
        case 32: return launch_bn<In, WARPS, FM_SMALL_N, 32, kPatch, kFast>(sp, smem, pdl, stream, check_only);
        case 64: return launch_bn<In, WARPS, 1, 64, kPatch, kFast>(sp, smem, pdl, stream, check_only);
        default: return launch_bn<In, WARPS, 1, 128, kPatch, kFast>(sp, smem, pdl, stream, check_only);
        }
    }
    gr_kernels_record_failure(__FILE__, __LINE__, "stream tile shared memory",
                              kPatch ? "the filters and two input patches do not fit in shared memory"
                                     : "the filters and two A tiles do not fit in shared memory");
    return cudaErrorInvalidValue;
}

} // namespace

cudaError_t gr_conv::stream_launch(const ConvParams &p, bool is_i8, int tile, bool pdl,
                                  cudaStream_t stream, bool check_only)
{
    GR_ARG_CHECK(tile == GR_CONV_TILE_STREAM || tile == GR_CONV_TILE_STREAM_SMALL ||
                 tile == GR_CONV_TILE_PATCH);
    GR_ARG_CHECK(p.splits == 1 && p.out_kind != GR_CONV_OUT_F32_NCHW);
    int dev = 0, major = 0, max_smem = 0;
    GR_CUDA_TRY(cudaGetDevice(&dev));
    GR_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    GR_CUDA_TRY(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    if (major < 8) {
        gr_kernels_record_failure(__FILE__, __LINE__, "compute capability check",
                                  "the stream tiles need sm_80+ (mma.sync)");
        return cudaErrorNotSupported;
    }
    StreamParams sp = {};
    sp.p = p;
    sp.elem = is_i8 ? 1 : 2;
    sp.out_elem = p.out_kind == GR_CONV_OUT_I8 ? 1 : (p.out_kind == GR_CONV_OUT_F16 ? 2 : 4);
    GR_ARG_CHECK(p.ksize < 256 && p.in_w < 65536);
    const long long k_bytes = static_cast<long long>(p.K) * sp.elem;
    GR_ARG_CHECK(k_bytes % 16 == 0 && k_bytes <= 16384);
    sp.chunks = static_cast<int>(k_bytes / 16);
    sp.kb = static_cast<int>((k_bytes + 31) / 32 * 32);
    sp.lds = sp.kb + 16; /* (kb + 16) / 16 is odd: the 8 rows of an ldmatrix hit distinct banks */
    sp.m_tiles = 0;
    if (tile == GR_CONV_TILE_PATCH) {
        /* M is batch x the map's pixels (x 4 window taps when pooled) */
        const int map_h = p.pool ? p.pool_h : p.out_h, map_w = p.pool ? p.pool_w : p.out_w;
        const long long per_image = static_cast<long long>(map_h) * map_w * (p.pool ? 4 : 1);
        GR_ARG_CHECK(per_image > 0 && p.M % per_image == 0);
        sp.m_tiles_batch = static_cast<int>(p.M / per_image);
        if (fast_applies(p))
            return is_i8 ? launch_shape<signed char, 8, 2, true, true>(sp, max_smem, pdl, stream, check_only)
                         : launch_shape<__half, 8, 2, true, true>(sp, max_smem, pdl, stream, check_only);
        return is_i8 ? launch_shape<signed char, 8, 2, true>(sp, max_smem, pdl, stream, check_only)
                     : launch_shape<__half, 8, 2, true>(sp, max_smem, pdl, stream, check_only);
    }
    if (is_i8)
        return tile == GR_CONV_TILE_STREAM
                   ? launch_shape<signed char, 8, 2, false>(sp, max_smem, pdl, stream, check_only)
                   : launch_shape<signed char, 4, 1, false>(sp, max_smem, pdl, stream, check_only);
    return tile == GR_CONV_TILE_STREAM
               ? launch_shape<__half, 8, 2, false>(sp, max_smem, pdl, stream, check_only)
               : launch_shape<__half, 4, 1, false>(sp, max_smem, pdl, stream, check_only);
}
