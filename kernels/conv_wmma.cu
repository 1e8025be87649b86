/* Implicit-GEMM convolution on tensor cores through WMMA (FP16 x FP16 -> f32/f16, INT8 x INT8 ->
 * int32) with the fused epilogue of planner/plan.h's header comment. Contract, layouts and
 * epilogue math: kernels/conv.h.
 *
 * Design. A block computes a BM x BN tile of the output (BM pixels x BN filters) with WM x WN
 * warps, each warp FM x FN fragments of 16x16. K advances 64 bytes at a time (32 f16 or 64 i8
 * values). Every thread owns one 16-byte column of the 64-byte K slice (kc = tid & 3) for a fixed
 * set of rows: since in_c_pad is a multiple of 16 bytes, a 16-byte chunk never straddles a (ky, kx)
 * tap, so one chunk = one aligned 16-byte load from the NHWC input (or zero fill for padding / K
 * tail). Tiles go through a 3-stage cp.async pipeline (sm_80+; plain loads before that). Shared
 * memory holds each stage as K "slabs" of 16 values: slab s, row r at (s*rows + r)*slab_bytes, so
 * every WMMA fragment pointer is 32-byte aligned with ldm = 16 and reads one contiguous block.
 * After the K loop the accumulators go through shared memory so each thread can emit whole
 * 16-byte vectors of one output pixel (NHWC), or pixel-contiguous runs (NCHW). */
#include <algorithm>
#include <cfloat>
#include <climits>
#include <type_traits>
#include <cstring>

#include <cuda_fp16.h>
#include <mma.h>

#include "kernels/common.cuh"
#include "kernels/conv.h"
#include "kernels/conv_internal.cuh"
#include "kernels/conv_mma.cuh"

using namespace nvcuda;
using namespace gr_conv;

namespace
{

constexpr int kMaxStages = 4;                /* as deep as 48 KB of static shared memory allows */
constexpr int kStaticSmem = 48 * 1024 - 256; /* leave room for the split-K flag */
constexpr int kSliceBytes = 64;              /* K bytes per pipeline step */

template <typename In> struct InTraits;
template <> struct InTraits<__half> {
    static constexpr int chunk_elems = 8; /* values per 16-byte chunk */
    static constexpr int slab_bytes = 32; /* 16 values */
};
template <> struct InTraits<signed char> {
    static constexpr int chunk_elems = 16;
    static constexpr int slab_bytes = 16;
};

/* The epilogue of one value: bias, multiplier, activation (conversion is the caller's). */
__device__ __forceinline__ float epilogue(const ConvParams &p, float acc, int n)
{
    return gr_conv_epilogue(acc, p.mul, p.bias, n, p.activation);
}

/* One warp's FM x FN tile of 16x16 accumulators, fed one pipeline stage (64 bytes of K) at a
 * time from the shared-memory slabs (slab s, row r at (s*rows + r)*SB: 16-byte rows, so every
 * 8-row block is 128 contiguous bytes).
 * sm_80+: ldmatrix + mma.sync (m16n8k32 INT8, m16n8k16 FP16): per 32 bytes of K one ldmatrix.x4
 * per 16 rows of A and per 16 filters of B, and two MMAs per 16x16 - a fraction of WMMA's
 * fragment-load instructions, which made the old loop issue-bound (docs/performance.md).
 * Before sm_80: WMMA 16x16x16 (Turing has neither MMA shape). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
template <typename In, typename Acc, int FM, int FN> struct WarpTile {
    using Op = MmaOp<In, Acc>;
    typename Op::Reg c[FM][2 * FN][Op::regs]; /* MMA tiles of 16 rows x 8 filters */

    __device__ __forceinline__ void zero()
    {
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int j = 0; j < 2 * FN; ++j)
#pragma unroll
                for (int r = 0; r < Op::regs; ++r)
                    c[i][j][r] = 0;
    }

    /* Byte address of row `row`, K byte `col` (0..63) of a stage holding `rows` rows. */
    template <int rows>
    static __device__ __forceinline__ const unsigned char *at(const unsigned char *stage, int row,
                                                              int col)
    {
        constexpr int SB = InTraits<In>::slab_bytes;
        return stage + ((col / SB) * rows + row) * SB + col % SB;
    }

    template <int BM, int BN>
    __device__ __forceinline__ void step(const unsigned char *sA, const unsigned char *sB,
                                         int warp_m, int warp_n, int lane)
    {
        const int mat = lane >> 3, r8 = lane & 7;
#pragma unroll
        for (int chunk = 0; chunk < kSliceBytes / 32; ++chunk) {
            unsigned a[FM][4], b[FN][4];
#pragma unroll
            for (int i = 0; i < FM; ++i) /* rows 0-7 / 8-15 x K bytes 0-15 / 16-31 */
                ldmatrix_x4(a[i], at<BM>(sA, (warp_m * FM + i) * 16 + (mat & 1) * 8 + r8,
                                         chunk * 32 + (mat >> 1) * 16));
#pragma unroll
            for (int j = 0; j < FN; ++j) /* filters 0-7 x K 0-15 / 16-31, then filters 8-15 */
                ldmatrix_x4(b[j], at<BN>(sB, (warp_n * FN + j) * 16 + (mat >> 1) * 8 + r8,
                                         chunk * 32 + (mat & 1) * 16));
#pragma unroll
            for (int i = 0; i < FM; ++i)
#pragma unroll
                for (int j = 0; j < FN; ++j) {
                    Op::mma(c[i][2 * j], a[i], b[j][0], b[j][1]);
                    Op::mma(c[i][2 * j + 1], a[i], b[j][2], b[j][3]);
                }
        }
    }

    /* Row-major into shared memory: thread (g, t) of an MMA tile holds rows g and g+8, columns
     * 2t and 2t+1. */
    __device__ __forceinline__ void store(Acc *sC, int ldc, int warp_m, int warp_n, int lane)
    {
        const int g = lane >> 2, t = lane & 3;
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int j = 0; j < 2 * FN; ++j) {
                Acc *dst = sC + ((warp_m * FM + i) * 16 + g) * ldc + (warp_n * FN * 16 + j * 8 + 2 * t);
                if constexpr (Op::regs == 4) {
                    dst[0] = c[i][j][0];
                    dst[1] = c[i][j][1];
                    dst[8 * ldc] = c[i][j][2];
                    dst[8 * ldc + 1] = c[i][j][3];
                } else { /* half2 pairs */
                    *reinterpret_cast<unsigned *>(dst) = c[i][j][0];
                    *reinterpret_cast<unsigned *>(dst + 8 * ldc) = c[i][j][1];
                }
            }
    }
};
#else
template <typename In, typename Acc, int FM, int FN> struct WarpTile {
    wmma::fragment<wmma::accumulator, 16, 16, 16, Acc> c[FM][FN];

    __device__ __forceinline__ void zero()
    {
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int j = 0; j < FN; ++j)
                wmma::fill_fragment(c[i][j], static_cast<Acc>(0));
    }

    template <int BM, int BN>
    __device__ __forceinline__ void step(const unsigned char *sA, const unsigned char *sB,
                                         int warp_m, int warp_n, int)
    {
        constexpr int SB = InTraits<In>::slab_bytes;
#pragma unroll
        for (int s = 0; s < kSliceBytes / SB; ++s) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, In, wmma::row_major> fa[FM];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, In, wmma::col_major> fb[FN];
#pragma unroll
            for (int i = 0; i < FM; ++i)
                wmma::load_matrix_sync(
                    fa[i], reinterpret_cast<const In *>(sA + s * BM * SB + (warp_m * FM + i) * 16 * SB),
                    16);
#pragma unroll
            for (int j = 0; j < FN; ++j)
                wmma::load_matrix_sync(
                    fb[j], reinterpret_cast<const In *>(sB + s * BN * SB + (warp_n * FN + j) * 16 * SB),
                    16);
#pragma unroll
            for (int i = 0; i < FM; ++i)
#pragma unroll
                for (int j = 0; j < FN; ++j)
                    wmma::mma_sync(c[i][j], fa[i], fb[j], c[i][j]);
        }
    }

    __device__ __forceinline__ void store(Acc *sC, int ldc, int warp_m, int warp_n, int)
    {
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int j = 0; j < FN; ++j)
                wmma::store_matrix_sync(sC + (warp_m * FM + i) * 16 * ldc + (warp_n * FN + j) * 16,
                                        c[i][j], ldc, wmma::mem_row_major);
    }
};
#endif

/* NHWC outputs: one 16-byte vector (V = 16 i8 or 8 f16) or two (8 f32) of one output pixel per
 * item. Pooled: an item takes its window's four rows, activated, and keeps the maximum of the
 * taps inside the conv output (in tap order, as the CPU reference: v > best). */
template <int V, int BM, int BN, int LDC, int kThreads, typename Acc>
__device__ __forceinline__ void store_nhwc(const ConvParams &p, const Acc *sC, int m0, int n0,
                                           int tid)
{
    const int rows = p.pool ? 4 : 1;
    constexpr int per_row = BN / V;
    for (int it = tid; it < BM / rows * per_row; it += kThreads) {
        const int r0 = it / per_row * rows, c0 = it % per_row * V;
        const int m = m0 + r0, n_base = n0 + c0;
        if (m >= p.M || n_base >= p.out_c_pad)
            continue;
        const long long dst =
            static_cast<long long>(m / rows) * p.out_c_stride + p.out_c_offset + n_base;
        /* Per channel once: y = fmaf(acc, mul, bias) (mul 1 without a multiplier: fmaf(a, 1, b)
         * rounds a + b exactly as the plain sum does). */
        float bias[V], mul[V];
#pragma unroll
        for (int e = 0; e < V; ++e) {
            const int n = n_base + e;
            bias[e] = p.bias && n < p.out_c ? p.bias[n] : 0.0f;
            mul[e] = p.mul ? (n < p.out_c ? p.mul[n] : 0.0f) : 1.0f;
        }
        /* Which of the window's taps lie inside the conv output (one division per item). */
        unsigned inside = 1u;
        if (p.pool) {
            const int pooled = m >> 2, phw = p.pool_h * p.pool_w;
            const int rem = pooled % phw, py = rem / p.pool_w, px = rem - py * p.pool_w;
            const int oy = py * p.pool_stride + p.pool_offset, ox = px * p.pool_stride + p.pool_offset;
            inside = 0u;
#pragma unroll
            for (int q = 0; q < 4; ++q)
                if (oy + (q >> 1) >= 0 && oy + (q >> 1) < p.out_h && ox + (q & 1) >= 0 &&
                    ox + (q & 1) < p.out_w)
                    inside |= 1u << q;
        }
        float y[V];
#pragma unroll
        for (int e = 0; e < V; ++e)
            y[e] = -FLT_MAX;
        for (int q = 0; q < rows; ++q) {
            if (!((inside >> q) & 1u))
                continue;
            const Acc *acc = sC + (r0 + q) * LDC + c0; /* scalar reads: no local copy */
#pragma unroll
            for (int e = 0; e < V; ++e) {
                const float v = gr_conv_activate_lean(fmaf(acc_to_float(acc[e]), mul[e], bias[e]), p.activation);
                y[e] = v > y[e] ? v : y[e];
            }
        }
        /* Pack into 32-bit words by value (a byte array whose address is taken would live in
         * local memory, as ncu showed), then one or two 16-byte stores. */
        if (V == 16) { /* i8 */
            unsigned w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
            for (int e = 0; e < V; ++e) {
                const unsigned q = n_base + e < p.out_c ? gr_conv_i8_bits(y[e], p.out_inv_scale) : 0u;
                w[e / 4] |= q << (8 * (e % 4));
            }
            *reinterpret_cast<uint4 *>(static_cast<signed char *>(p.out) + dst) =
                make_uint4(w[0], w[1], w[2], w[3]);
        } else if (p.out_kind == GR_CONV_OUT_F16) {
            unsigned w[4];
#pragma unroll
            for (int h = 0; h < 4; ++h) {
                w[h] = gr_conv_half2_bits(n_base + 2 * h < p.out_c ? y[2 * h] : 0.0f,
                                          n_base + 2 * h + 1 < p.out_c ? y[2 * h + 1] : 0.0f);
            }
            *reinterpret_cast<uint4 *>(static_cast<__half *>(p.out) + dst) =
                make_uint4(w[0], w[1], w[2], w[3]);
        } else {
            float4 *o = reinterpret_cast<float4 *>(static_cast<float *>(p.out) + dst);
#pragma unroll
            for (int h = 0; h < V / 4; ++h) {
                float v[4];
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    v[e] = n_base + 4 * h + e < p.out_c ? y[4 * h + e] : 0.0f;
                o[h] = make_float4(v[0], v[1], v[2], v[3]);
            }
        }
    }
}

/* kTap: in_c_pad is a multiple of the K step, so every K step lies inside one filter tap
 * (ky, kx): the loader keeps, per A row, the offset of the top-left tap and a bit mask of the
 * taps inside the image, and a step costs one mask test and one add per row. Otherwise (the
 * first layers, few channels) the step's chunks can straddle taps and each is checked. */
template <typename In, typename Acc, int WM, int WN, int FM, int FN, bool kTap>
__device__ __forceinline__ void conv_body(const ConvParams &p)
{
    using Tr = InTraits<In>;
    constexpr int kThreads = WM * WN * 32;
    constexpr int BM = WM * FM * 16, BN = WN * FN * 16;
    constexpr int SB = Tr::slab_bytes, CH = Tr::chunk_elems, BK = 4 * CH;
    constexpr int A_STAGE = BM * kSliceBytes, B_STAGE = BN * kSliceBytes;
    constexpr int kStages = kMaxStages * (A_STAGE + B_STAGE) <= kStaticSmem ? kMaxStages : 3;
    constexpr int PIPE = kStages * (A_STAGE + B_STAGE);
    constexpr int LDC = BN + 8;
    constexpr int EPI = BM * LDC * static_cast<int>(sizeof(Acc));
    constexpr int SMEM = PIPE > EPI ? PIPE : EPI;
    constexpr int A_ITERS = BM * 4 / kThreads;
    constexpr int B_ITERS = (BN * 4 + kThreads - 1) / kThreads;
    static_assert(BM * 4 % kThreads == 0, "A tile chunks must divide among the threads");
    static_assert(kThreads % 4 == 0, "a thread keeps one chunk column");
    static_assert(BM % 4 == 0, "a pooling window's four rows stay in one tile");

    __shared__ __align__(128) unsigned char smem[SMEM];

    const In *in = static_cast<const In *>(p.in);
    const In *wts = static_cast<const In *>(p.weights);
    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int warp_m = warp % WM, warp_n = warp / WM;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    const int kc = tid & 3;
    const int slab = kc * 16 / SB, slab_off = kc * 16 % SB;

    /* Rows of the A tile this thread loads: element offset of the (unclipped) top-left tap and
     * its input coordinates (32-bit: the launcher checks the input has < 2^31 elements). A row
     * that computes nothing gets coordinates that fail every bounds test. */
    int a_base[A_ITERS], a_iy[A_ITERS], a_ix[A_ITERS];
    unsigned a_taps[A_ITERS]; /* kTap: bit ky*ksize+kx set when that tap is inside the image */
#pragma unroll
    for (int i = 0; i < A_ITERS; ++i) {
        int img, oy, ox;
        const int m = m0 + (tid >> 2) + i * (kThreads / 4);
        a_taps[i] = 0;
        if (row_pixel(p, m, img, oy, ox)) {
            a_iy[i] = oy * p.stride - p.pad;
            a_ix[i] = ox * p.stride - p.pad;
            a_base[i] = ((img * p.in_h + a_iy[i]) * p.in_w + a_ix[i]) * p.in_c_stride +
                        p.in_c_offset;
            if (kTap)
                for (int ky = 0; ky < p.ksize; ++ky)
                    for (int kx = 0; kx < p.ksize; ++kx)
                        if (static_cast<unsigned>(a_iy[i] + ky) < static_cast<unsigned>(p.in_h) &&
                            static_cast<unsigned>(a_ix[i] + kx) < static_cast<unsigned>(p.in_w))
                            a_taps[i] |= 1u << (ky * p.ksize + kx);
        } else {
            a_base[i] = 0;
            a_iy[i] = INT_MIN / 2;
            a_ix[i] = 0;
        }
    }
    /* Rows of the B tile: filter offsets (-1: past out_c). */
    int b_base[B_ITERS];
#pragma unroll
    for (int i = 0; i < B_ITERS; ++i) {
        const int n = n0 + ((tid + i * kThreads) >> 2);
        b_base[i] = n < p.out_c ? n * p.K : -1;
    }

    /* This block's share of K: tiles [kt_begin, kt_begin + n_local). */
    const int kt_begin = blockIdx.z * p.kt_per_split;
    const int n_local = min(p.kt_per_split, p.k_tiles - kt_begin);

    /* The K position this thread loads next, k = (ky*ksize + kx)*cin_pad + ci. load_tile() is
     * called for consecutive K tiles, so it advances (ky, kx, ci) instead of dividing. */
    int k_cur = kt_begin * BK + kc * CH;
    int ci, ky, kx;
    {
        const int tap = k_cur / p.cin_pad;
        ci = k_cur - tap * p.cin_pad;
        ky = tap / p.ksize;
        kx = tap - ky * p.ksize;
    }
    int tap_bit = ky * p.ksize + kx;                  /* kTap: the current tap's mask bit */
    int tap_off = (ky * p.in_w + kx) * p.in_c_stride; /* kTap: its offset from the top-left */

    auto load_tile = [&](int stage) {
        unsigned char *sA = smem + stage * (A_STAGE + B_STAGE);
        unsigned char *sB = sA + A_STAGE;
        if (kTap) {
#pragma unroll
            for (int i = 0; i < A_ITERS; ++i) {
                const int row = (tid >> 2) + i * (kThreads / 4);
                const bool ok = (a_taps[i] >> tap_bit) & 1u;
                const In *src = ok ? in + (a_base[i] + tap_off + ci) : in;
                copy16(sA + slab * BM * SB + row * SB + slab_off, src, ok);
            }
        } else {
            const bool k_ok = k_cur < p.K;
            const int t_off = (ky * p.in_w + kx) * p.in_c_stride + ci;
#pragma unroll
            for (int i = 0; i < A_ITERS; ++i) {
                const int row = (tid >> 2) + i * (kThreads / 4);
                const int iy = a_iy[i] + ky, ix = a_ix[i] + kx;
                const bool ok = k_ok && static_cast<unsigned>(iy) < static_cast<unsigned>(p.in_h) &&
                                static_cast<unsigned>(ix) < static_cast<unsigned>(p.in_w);
                const In *src = ok ? in + (a_base[i] + t_off) : in;
                copy16(sA + slab * BM * SB + row * SB + slab_off, src, ok);
            }
        }
#pragma unroll
        for (int i = 0; i < B_ITERS; ++i) {
            const int chunk = tid + i * kThreads;
            if (BN * 4 % kThreads != 0 && chunk >= BN * 4)
                break;
            const int row = chunk >> 2;
            const bool ok = (kTap || k_cur < p.K) && b_base[i] >= 0;
            const In *src = ok ? wts + (b_base[i] + k_cur) : wts;
            copy16(sB + slab * BN * SB + row * SB + slab_off, src, ok);
        }
        k_cur += BK;
        ci += BK;
        if (kTap) {
            if (ci >= p.cin_pad) { /* BK divides cin_pad: at most one tap per step */
                ci -= p.cin_pad;
                ++tap_bit;
                if (++kx == p.ksize) {
                    kx = 0;
                    ++ky;
                }
                tap_off = (ky * p.in_w + kx) * p.in_c_stride;
            }
        } else {
            while (ci >= p.cin_pad) {
                ci -= p.cin_pad;
                if (++kx == p.ksize) {
                    kx = 0;
                    ++ky;
                }
            }
        }
    };

    WarpTile<In, Acc, FM, FN> acc;
    acc.zero();

    wait_for_producer(); /* the input is the previous kernel's output */
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < n_local)
            load_tile(s);
        cp_async_commit();
    }

    for (int t = 0; t < n_local; ++t) {
        cp_async_wait<kStages - 2>();
        __syncthreads(); /* tile t landed for everyone; stage (t-1) is free again */
        const int next = t + kStages - 1;
        if (next < n_local)
            load_tile(next % kStages);
        cp_async_commit();

        const unsigned char *sA = smem + (t % kStages) * (A_STAGE + B_STAGE);
        acc.template step<BM, BN>(sA, sA + A_STAGE, warp_m, warp_n, tid & 31);
    }
    cp_async_wait<0>();
    __syncthreads(); /* pipeline buffers are reused for the accumulator tile */

    Acc *sC = reinterpret_cast<Acc *>(smem);
    acc.store(sC, LDC, warp_m, warp_n, tid & 31);
    __syncthreads();

    if (p.splits > 1) {
        /* Split-K: publish this part, and let the last block of the tile reduce all parts in
         * split order (a fixed order: the result does not depend on which block came last). */
        __shared__ int is_last;
        const int tile_id = blockIdx.y * gridDim.x + blockIdx.x;
        Acc *parts =
            static_cast<Acc *>(p.partials) + static_cast<size_t>(tile_id) * p.splits * BM * BN;
        Acc *mine = parts + static_cast<size_t>(blockIdx.z) * BM * BN;
        static_assert(sizeof(Acc) == 4 || sizeof(Acc) == 2, "accumulator of 2 or 4 bytes");
        /* 16-byte vectors where the accumulator is 4 bytes (the split paths: f32, int32) */
        constexpr int VE = sizeof(Acc) == 4 ? 4 : 1;
        using Vec = typename std::conditional<sizeof(Acc) == 4, int4, Acc>::type;
        for (int i = tid * VE; i < BM * BN; i += kThreads * VE)
            *reinterpret_cast<Vec *>(mine + i) =
                *reinterpret_cast<const Vec *>(sC + (i / BN) * LDC + i % BN);
        __threadfence();
        __syncthreads();
        if (tid == 0)
            is_last = atomicAdd(&p.counters[tile_id], 1) == p.splits - 1;
        __syncthreads();
        if (!is_last)
            return;
        __threadfence();
        for (int i = tid * VE; i < BM * BN; i += kThreads * VE) {
            Acc sum[VE];
#pragma unroll
            for (int e = 0; e < VE; ++e)
                sum[e] = static_cast<Acc>(0);
            int z = 0;
            /* four parts' loads in flight before their adds; the order of the sums is fixed */
            for (; z + 4 <= p.splits; z += 4) {
                Vec v[4];
#pragma unroll
                for (int u = 0; u < 4; ++u)
                    v[u] = __ldcg(reinterpret_cast<const Vec *>(
                        parts + static_cast<size_t>(z + u) * BM * BN + i));
#pragma unroll
                for (int u = 0; u < 4; ++u)
#pragma unroll
                    for (int e = 0; e < VE; ++e)
                        sum[e] = sum[e] + reinterpret_cast<const Acc *>(&v[u])[e];
            }
            for (; z < p.splits; ++z) {
                const Vec v = __ldcg(
                    reinterpret_cast<const Vec *>(parts + static_cast<size_t>(z) * BM * BN + i));
#pragma unroll
                for (int e = 0; e < VE; ++e)
                    sum[e] = sum[e] + reinterpret_cast<const Acc *>(&v)[e];
            }
#pragma unroll
            for (int e = 0; e < VE; ++e)
                sC[(i / BN) * LDC + i % BN + e] = sum[e];
        }
        if (tid == 0)
            p.counters[tile_id] = 0; /* ready for the next launch */
        __syncthreads();
    }

    if (p.out_kind == GR_CONV_OUT_F32_NCHW) { /* never pooled (the launcher checks) */
        const int hw_out = p.out_h * p.out_w;
        float *out = static_cast<float *>(p.out);
        for (int it = tid; it < BM * BN; it += kThreads) {
            const int r = it % BM, c = it / BM; /* consecutive threads: consecutive pixels */
            const int m = m0 + r, n = n0 + c;
            if (m >= p.M || n >= p.out_c)
                continue;
            const int img = m / hw_out, rem = m - img * hw_out;
            out[(static_cast<long long>(img) * p.out_c_stride + p.out_c_offset + n) * hw_out + rem] =
                epilogue(p, acc_to_float(sC[r * LDC + c]), n);
        }
        return;
    }

    if (p.out_kind == GR_CONV_OUT_I8)
        store_nhwc<16, BM, BN, LDC, kThreads>(p, sC, m0, n0, tid);
    else
        store_nhwc<8, BM, BN, LDC, kThreads>(p, sC, m0, n0, tid);
}

/* Blocks per SM a tile's occupancy variant asks the compiler for (__launch_bounds__' minimum):
 * unbounded, ptxas gives the 8-warp tiles 103-106 registers and the 4-warp tiles up to 111 (sm_90,
 * f32/int32 accumulators), which holds them to 2 and 4 blocks per SM, a quarter of the warps the
 * SM can hold: ncu showed these kernels latency-bound there (~10 cycles per issued instruction,
 * 24% of the warps active; YOLOv8n at 640, batch 64). Bounded to 3 and 5 blocks they get 80 and
 * 90-94 registers (the 8-warp tiles spill 28-36 bytes, the 4-warp tiles nothing). The launcher
 * takes the bounded variant only for a grid that can fill those blocks on every SM: on a smaller
 * grid (batch 1) the extra warps would not exist and the spills would be pure cost. */
template <int WM, int WN> constexpr int occupancy_blocks()
{
    return WM * WN == 8 ? 3 : 5;
}

/* kMinBlocks 0: no minimum (the compiler's register choice); else occupancy_blocks(). */
template <typename Acc, int WM, int WN, int FM, int FN, bool kTap, int kMinBlocks>
__global__ void __launch_bounds__(WM *WN * 32, kMinBlocks) k_conv_f16(const ConvParams p)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    conv_body<__half, Acc, WM, WN, FM, FN, kTap>(p);
#endif
}

template <int WM, int WN, int FM, int FN, bool kTap, int kMinBlocks>
__global__ void __launch_bounds__(WM *WN * 32, kMinBlocks) k_conv_i8(const ConvParams p)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 720
    conv_body<signed char, int, WM, WN, FM, FN, kTap>(p);
#endif
}

enum Dtype { kF16Float, kF16Half, kI8 };

template <int WM, int WN, int FM, int FN, bool kTap>
cudaError_t launch_tile(Dtype dt, ConvParams &p, int sms, bool pdl, cudaStream_t stream)
{
    constexpr int BM = WM * FM * 16, BN = WN * FN * 16;
    constexpr int kOcc = occupancy_blocks<WM, WN>();
    const dim3 grid(static_cast<unsigned>(gr_ceil_div(p.M, BM)),
                    static_cast<unsigned>(gr_ceil_div(p.out_c, BN)),
                    static_cast<unsigned>(p.splits));
    GR_ARG_CHECK(grid.y <= 65535 && grid.z <= 64);
    const dim3 block(WM * WN * 32);
    const long long blocks = static_cast<long long>(grid.x) * grid.y * grid.z;
    const bool occ = blocks >= static_cast<long long>(kOcc) * sms; /* fills the bounded variant */
    const auto go = [&](auto kernel) {
        return gr_conv::launch_kernel(kernel, grid, block, 0, pdl, stream, p);
    };
    switch (dt) {
    case kF16Float:
        return occ ? go(k_conv_f16<float, WM, WN, FM, FN, kTap, kOcc>)
                   : go(k_conv_f16<float, WM, WN, FM, FN, kTap, 0>);
    case kF16Half: /* --fp16-accumulate: the unbounded kernel only (fewer registers already) */
        return go(k_conv_f16<__half, WM, WN, FM, FN, kTap, 0>);
    default:
        return occ ? go(k_conv_i8<WM, WN, FM, FN, kTap, kOcc>) : go(k_conv_i8<WM, WN, FM, FN, kTap, 0>);
    }
}

template <int WM, int WN, int FM, int FN>
cudaError_t launch_tile(Dtype dt, ConvParams &p, bool tap_aligned, int sms, bool pdl,
                        cudaStream_t stream)
{
    return tap_aligned ? launch_tile<WM, WN, FM, FN, true>(dt, p, sms, pdl, stream)
                       : launch_tile<WM, WN, FM, FN, false>(dt, p, sms, pdl, stream);
}

int round_up(int v, int to)
{
    return (v + to - 1) / to * to;
}

bool aligned16(const void *ptr)
{
    return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0;
}

/* Tile shapes by tile_config (1-based): BM x BN. */
constexpr int kTileBM[GR_CONV_TILES + 1] = {0, 128, 64, 128, 32, 128, 64, 128}; /* 5-7: nominal */
constexpr int kTileBN[GR_CONV_TILES + 1] = {0, 64, 64, 16, 64, 64, 64, 64};

struct Plan {
    ConvParams p;
    int tile;
    bool tap_aligned;
    int sms;                /* the device's SM count */
    size_t workspace_bytes; /* 0 unless split */
};

/* Validate, and choose the tile shape and the split for the current device. `split_allowed`:
 * a workspace is (or will be) given. */
cudaError_t make_plan(const gr_conv_args *a, bool is_i8, bool split_allowed, Plan *plan)
{
    GR_ARG_CHECK(a != nullptr);
    GR_ARG_CHECK(a->batch > 0 && a->in_h > 0 && a->in_w > 0 && a->in_c > 0 && a->out_c > 0);
    GR_ARG_CHECK(a->ksize > 0 && a->stride > 0 && a->pad >= 0);
    GR_ARG_CHECK(a->in_c <= 65536 && a->out_c <= 65536 && a->ksize <= 64 && a->pad <= 64);
    GR_ARG_CHECK(a->activation >= GR_CONV_ACT_LINEAR && a->activation < GR_CONV_ACT_COUNT);
    GR_ARG_CHECK(a->out_kind >= GR_CONV_OUT_I8 && a->out_kind <= GR_CONV_OUT_F32_NCHW);
    GR_ARG_CHECK(a->tile_config >= 0 && a->tile_config <= GR_CONV_TILES);
    GR_ARG_CHECK(a->split_k >= 0 && a->split_k <= 64);
    GR_ARG_CHECK(!(is_i8 && a->fp16_accumulate));
    GR_ARG_CHECK(!a->in_u8); /* the first-layer kernel's arguments (conv_first.cu) */
    const int in_gran = is_i8 ? 16 : 8;
    const int cin_pad = round_up(a->in_c, in_gran);
    GR_ARG_CHECK(a->in_c_offset >= 0 && a->in_c_offset % in_gran == 0);
    GR_ARG_CHECK(a->in_c_stride % in_gran == 0 && a->in_c_offset + cin_pad <= a->in_c_stride);
    const int out_h = gr_conv_out_dim(a->in_h, a->ksize, a->stride, a->pad);
    const int out_w = gr_conv_out_dim(a->in_w, a->ksize, a->stride, a->pad);
    GR_ARG_CHECK(out_h > 0 && out_w > 0);
    const int out_gran = a->out_kind == GR_CONV_OUT_I8 ? 16 : 8;
    const int out_c_pad = round_up(a->out_c, out_gran);
    if (a->out_kind != GR_CONV_OUT_F32_NCHW) {
        GR_ARG_CHECK(a->out_c_offset >= 0 && a->out_c_offset % out_gran == 0);
        GR_ARG_CHECK(a->out_c_stride % out_gran == 0 &&
                     a->out_c_offset + out_c_pad <= a->out_c_stride);
    } else { /* a channel slice of out_c_stride channels per image, unpadded */
        GR_ARG_CHECK(a->out_c_offset >= 0 && a->out_c_offset + a->out_c <= a->out_c_stride);
    }
    int pool_h = 0, pool_w = 0;
    if (a->pool_size != 0) {
        GR_ARG_CHECK(a->pool_size == 2 && (a->pool_stride == 1 || a->pool_stride == 2));
        GR_ARG_CHECK(a->pool_pad >= 0 && a->pool_pad <= 2);
        GR_ARG_CHECK(a->out_kind != GR_CONV_OUT_F32_NCHW);
        pool_h = (out_h + a->pool_pad - 2) / a->pool_stride + 1;
        pool_w = (out_w + a->pool_pad - 2) / a->pool_stride + 1;
        GR_ARG_CHECK(pool_h > 0 && pool_w > 0);
    }
    const long long M = static_cast<long long>(a->batch) *
                        (a->pool_size ? 4LL * pool_h * pool_w : static_cast<long long>(out_h) * out_w);
    const long long K = static_cast<long long>(a->ksize) * a->ksize * cin_pad;
    const long long in_elems = static_cast<long long>(a->batch) * a->in_h * a->in_w;
    GR_ARG_CHECK(M < INT_MAX && K < INT_MAX / 2 && in_elems * a->in_c_stride < INT_MAX);
    GR_ARG_CHECK(static_cast<long long>(a->out_c) * K < INT_MAX);

    int dev = 0, major = 0, minor = 0, sms = 0;
    GR_CUDA_TRY(cudaGetDevice(&dev));
    GR_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    GR_CUDA_TRY(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    GR_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const int cc = major * 10 + minor;
    if (cc < (is_i8 ? 72 : 70)) {
        gr_kernels_record_failure(__FILE__, __LINE__, "compute capability check",
                                  is_i8 ? "INT8 WMMA needs sm_72+" : "FP16 WMMA needs sm_70+");
        return cudaErrorNotSupported;
    }

    ConvParams &p = plan->p;
    p.in = a->in;
    p.weights = a->weights;
    p.mul = a->mul;
    p.bias = a->bias;
    p.out = a->out;
    p.in_h = a->in_h;
    p.in_w = a->in_w;
    p.in_c_stride = a->in_c_stride;
    p.in_c_offset = a->in_c_offset;
    p.cin_pad = cin_pad;
    p.out_h = out_h;
    p.out_w = out_w;
    p.out_c = a->out_c;
    p.out_c_pad = out_c_pad;
    p.out_c_stride = a->out_c_stride;
    p.out_c_offset = a->out_c_offset;
    p.ksize = a->ksize;
    p.stride = a->stride;
    p.pad = a->pad;
    p.M = static_cast<int>(M);
    p.K = static_cast<int>(K);
    const int bk = kSliceBytes / (is_i8 ? 1 : 2);
    p.k_tiles = gr_ceil_div(K, bk);
    p.activation = a->activation;
    p.out_kind = a->out_kind;
    p.out_inv_scale = a->out_inv_scale;
    p.pool = a->pool_size != 0;
    p.pool_stride = a->pool_stride;
    p.pool_offset = -a->pool_pad / 2;
    p.pool_h = pool_h;
    p.pool_w = pool_w;
    plan->tap_aligned = cin_pad % bk == 0 && a->ksize * a->ksize <= 32;

    const bool stream_tile = a->tile_config >= GR_CONV_TILE_STREAM;
    GR_ARG_CHECK(!(stream_tile && a->fp16_accumulate));
    split_allowed = split_allowed && !a->fp16_accumulate && a->split_k != 1 && !stream_tile;
    const auto tiles_of = [&](int t) {
        return static_cast<long long>(gr_ceil_div(M, kTileBM[t])) *
               gr_ceil_div(a->out_c, kTileBN[t]);
    };
    /* Automatic tile and split, from the sweep of bench/04_fused on an H100 (docs/performance.md):
     * long K (>= 4 KB per filter) on few tiles: 128x64 tiles split along K until about one
     * block per SM (the 13x13 layers: fewer re-reads of the weights than narrower tiles, and
     * enough blocks); otherwise the widest tile that still gives half a block per SM, no split. */
    const long long k_bytes = K * (is_i8 ? 1 : 2);
    int tile = a->tile_config;
    bool long_k = false;
    if (tile == 0) {
        if (a->out_c <= 16)
            tile = 3;
        else if (k_bytes >= 4096 && tiles_of(1) < sms)
            tile = 1, long_k = true;
        else if (tiles_of(1) >= 2LL * sms)
            tile = 1;
        else if (2 * tiles_of(2) >= sms)
            tile = 2;
        else
            tile = 4;
    }
    const long long tiles = tiles_of(tile);
    int splits = 1;
    if (split_allowed) {
        if (a->split_k > 1)
            splits = a->split_k;
        else if (long_k)
            splits = static_cast<int>(std::min<long long>(std::max<long long>(sms / tiles, 1), 8));
        splits = std::max(1, std::min(splits, p.k_tiles / (a->split_k > 1 ? 1 : 2)));
    }
    p.kt_per_split = gr_ceil_div(p.k_tiles, splits);
    p.splits = gr_ceil_div(p.k_tiles, p.kt_per_split); /* no empty parts */
    p.counters = nullptr;
    p.partials = nullptr;
    plan->tile = tile;
    plan->sms = sms;
    plan->workspace_bytes = 0;
    if (p.splits > 1) {
        const size_t counter_bytes = (static_cast<size_t>(tiles) * sizeof(int) + 255) / 256 * 256;
        plan->workspace_bytes = counter_bytes + static_cast<size_t>(tiles) * p.splits *
                                                    kTileBM[tile] * kTileBN[tile] * sizeof(float);
    }
    return cudaSuccess;
}

cudaError_t launch_conv(const gr_conv_args *a, bool is_i8, cudaStream_t stream)
{
    GR_ARG_CHECK(a != nullptr);
    GR_ARG_CHECK(a->in != nullptr && a->weights != nullptr && a->out != nullptr);
    GR_ARG_CHECK(aligned16(a->in) && aligned16(a->weights) && aligned16(a->out));
    if (a->in_u8)
        return gr_conv_first_launch(a, is_i8, stream, false);
    Plan plan;
    const cudaError_t err = make_plan(a, is_i8, a->workspace != nullptr, &plan);
    if (err != cudaSuccess)
        return err;
    ConvParams &p = plan.p;
    if (p.splits > 1) {
        GR_ARG_CHECK(a->workspace_bytes >= plan.workspace_bytes && aligned16(a->workspace));
        const long long tiles = static_cast<long long>(gr_ceil_div(p.M, kTileBM[plan.tile])) *
                                gr_ceil_div(p.out_c, kTileBN[plan.tile]);
        p.counters = static_cast<int *>(a->workspace);
        p.partials = static_cast<unsigned char *>(a->workspace) +
                     (static_cast<size_t>(tiles) * sizeof(int) + 255) / 256 * 256;
    }
    const Dtype dt = is_i8 ? kI8 : (a->fp16_accumulate ? kF16Half : kF16Float);
    const bool pdl = a->pdl && gr_conv_pdl_supported();
    if (plan.tile >= GR_CONV_TILE_STREAM)
        return stream_launch(p, is_i8, plan.tile, pdl, stream, false);
    const bool tap = plan.tap_aligned;
    switch (plan.tile) {
    case 1: return launch_tile<4, 2, 2, 2>(dt, p, tap, plan.sms, pdl, stream);
    case 2: return launch_tile<2, 2, 2, 2>(dt, p, tap, plan.sms, pdl, stream);
    case 3: return launch_tile<4, 1, 2, 1>(dt, p, tap, plan.sms, pdl, stream);
    default: return launch_tile<1, 4, 2, 1>(dt, p, tap, plan.sms, pdl, stream);
    }
}

size_t workspace_bytes(const gr_conv_args *a, bool is_i8)
{
    Plan plan;
    if (make_plan(a, is_i8, true, &plan) != cudaSuccess)
        return 0;
    return plan.workspace_bytes;
}

} // namespace

extern "C" int gr_conv_out_dim(int in, int ksize, int stride, int pad)
{
    if (stride <= 0)
        return 0;
    return (in + 2 * pad - ksize) / stride + 1;
}

extern "C" const char *gr_conv_tile_name(int tile_config)
{
    switch (tile_config) {
    case 0: return "auto";
    case 1: return "128x64";
    case 2: return "64x64";
    case 3: return "128x16";
    case 4: return "32x64";
    case 5: return "stream";
    case 6: return "stream-64";
    case 7: return "patch";
    default: return "?";
    }
}

extern "C" cudaError_t gr_launch_conv_f16(const gr_conv_args *args, cudaStream_t stream)
{
    return launch_conv(args, false, stream);
}

extern "C" cudaError_t gr_launch_conv_i8(const gr_conv_args *args, cudaStream_t stream)
{
    return launch_conv(args, true, stream);
}

extern "C" cudaError_t gr_conv_check(const gr_conv_args *args, int is_i8)
{
    GR_ARG_CHECK(args != nullptr);
    if (args->in_u8)
        return gr_conv_first_launch(args, is_i8 != 0, nullptr, true);
    Plan plan;
    const cudaError_t err = make_plan(args, is_i8 != 0, false, &plan);
    if (err != cudaSuccess || plan.tile < GR_CONV_TILE_STREAM)
        return err;
    return stream_launch(plan.p, is_i8 != 0, plan.tile, false, nullptr, true);
}

extern "C" size_t gr_conv_workspace_bytes_f16(const gr_conv_args *args)
{
    return workspace_bytes(args, false);
}

extern "C" size_t gr_conv_workspace_bytes_i8(const gr_conv_args *args)
{
    return workspace_bytes(args, true);
}
