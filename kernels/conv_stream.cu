/* Resident-weights implicit GEMM ("stream" tiles 5 and 6 of conv.h) for convolutions whose
 * filters fit in shared memory: the early layers (YOLOv2-tiny's 16->32, 32->64, 64->128 at
 * 208x208 .. 52x52), where K is short (144-576 bytes per pixel) and the tiled kernel of
 * conv_wmma.cu spends most of its time in per-block prologue, 3-9 K steps and the epilogue, at
 * low occupancy (bench/LOG.md, 2026-11-23 evening).
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
    int m_tiles; /* ceil(M / BM) */
    int out_elem;
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

__host__ __device__ inline Layout layout(int bn, int bm, int warps, int rows_per_warp, int lds,
                                         int chunks, int out_elem)
{
    Layout l;
    l.b = 0;
    l.a = l.b + bn * lds;
    l.table = l.a + kStages * bm * lds;
    l.mul = l.table + (chunks * 8 + 15) / 16 * 16;
    l.bias = l.mul + bn * 4;
    l.stage = l.bias + bn * 4;
    l.total = l.stage + warps * rows_per_warp * bn * out_elem;
    return l;
}

template <typename In, int WARPS, int FM, int BN>
__global__ void __launch_bounds__(WARPS * 32) k_conv_stream(const StreamParams sp)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    using Acc = typename StreamAcc<In>::T;
    using Op = MmaOp<In, Acc>;
    constexpr int kThreads = WARPS * 32, BM = WARPS * 16 * FM, NJ = BN / 8;
    /* loader: TPR threads share an A row (alternate chunks), RPT rows per thread */
    constexpr int TPR = kThreads >= BM ? kThreads / BM : 1;
    constexpr int RPT = BM >= kThreads ? BM / kThreads : 1;
    static_assert(TPR * BM == kThreads * RPT, "rows divide among the threads");

    const ConvParams &p = sp.p;
    const int lds = sp.lds, kb = sp.kb, chunks = sp.chunks;
    const int rows_out = p.pool ? 4 * FM : 16 * FM; /* staged output rows per warp and tile */
    const Layout L = layout(BN, BM, WARPS, 16 * FM, lds, chunks, sp.out_elem);
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
    for (int c = tid; c < chunks; c += kThreads) {
        const int k = c * 16 / sp.elem, tap = k / p.cin_pad, ci = k - tap * p.cin_pad;
        const int ky = tap / p.ksize, kx = tap - ky * p.ksize;
        table[c] = make_int2((ky * p.in_w + kx) * p.in_c_stride + ci, (ky << 16) | kx);
    }
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
     * non-decreasing in acc when mul >= 0 and act is linear, leaky or relu (the logistic's expf
     * is left out), so the window's largest accumulator gives the window's largest y. */
    const bool pool_first = p.pool && !negative_mul && p.activation != GR_CONV_ACT_LOGISTIC;
    wait_for_producer(); /* the input is the previous kernel's output */

    auto load_tile = [&](int t, int stage) {
        unsigned char *dst = sA + stage * BM * lds;
#pragma unroll
        for (int rr = 0; rr < RPT; ++rr) {
            const int r = tid / TPR + rr * (kThreads / TPR);
            int img, oy, ox, iy0 = INT_MIN / 2, ix0 = 0, base = 0;
            if (row_pixel(p, t * BM + r, img, oy, ox)) {
                iy0 = oy * p.stride - p.pad;
                ix0 = ox * p.stride - p.pad;
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
        const unsigned char *a_st = sA + s * BM * lds + (warp * FM * 16) * lds;
        for (int kk = 0; kk < kb; kk += 32) {
            unsigned a[FM][4];
#pragma unroll
            for (int i = 0; i < FM; ++i) /* rows 0-7 / 8-15 x K bytes 0-15 / 16-31 */
                ldmatrix_x4(a[i], a_st + (i * 16 + (mat & 1) * 8 + r8) * lds + kk + (mat >> 1) * 16);
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
        const int m_warp = tile * BM + warp * 16 * FM;
        auto stage_value = [&](int out_row, int col, float v) {
            const bool real = n0 + col < p.out_c;
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
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int lr = i * 16 + h * 8 + g; /* row within the warp's rows */
                int img, oy, ox;
                const bool row_ok = row_pixel(p, m_warp + lr, img, oy, ox);
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
                                                     p.activation));
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
                                                   p.activation);
                        int out_row = lr;
                        if (p.pool) {
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
        const int m_out0 = p.pool ? m_warp >> 2 : m_warp, m_out_end = p.pool ? p.M >> 2 : p.M;
        const int per_vec = 16 / sp.out_elem;
        for (int it = lane; it < rows_out * vpr; it += 32) {
            const int r = it / vpr, v = it - r * vpr;
            const int m_out = m_out0 + r, n_base = n0 + v * per_vec;
            if (m_out >= m_out_end || n_base >= p.out_c_pad)
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
template <typename In, int WARPS, int FM, int BN>
cudaError_t launch_bn(const StreamParams &sp, size_t smem, bool pdl, cudaStream_t stream,
                      bool check_only)
{
    const auto kernel = k_conv_stream<In, WARPS, FM, BN>;
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

template <typename In, int WARPS, int FM_SMALL_N>
cudaError_t launch_shape(StreamParams sp, int max_smem, bool pdl, cudaStream_t stream,
                         bool check_only)
{
    /* BN from the filters, then narrower while the shared memory does not fit */
    int bn = sp.p.out_c <= 32 ? 32 : (sp.p.out_c <= 64 ? 64 : 128);
    for (; bn >= 32; bn /= 2) {
        const int fm = bn == 32 ? FM_SMALL_N : 1, bm = WARPS * 16 * fm;
        const Layout l = layout(bn, bm, WARPS, 16 * fm, sp.lds, sp.chunks, sp.out_elem);
        if (l.total > max_smem)
            continue;
        sp.m_tiles = gr_ceil_div(sp.p.M, bm);
        const size_t smem = static_cast<size_t>(l.total);
        switch (bn) {
        case 32: return launch_bn<In, WARPS, FM_SMALL_N, 32>(sp, smem, pdl, stream, check_only);
        case 64: return launch_bn<In, WARPS, 1, 64>(sp, smem, pdl, stream, check_only);
        default: return launch_bn<In, WARPS, 1, 128>(sp, smem, pdl, stream, check_only);
        }
    }
    gr_kernels_record_failure(__FILE__, __LINE__, "stream tile shared memory",
                              "the filters and two A tiles do not fit in shared memory");
    return cudaErrorInvalidValue;
}

} // namespace

cudaError_t gr_conv::stream_launch(const ConvParams &p, bool is_i8, int tile, bool pdl,
                                  cudaStream_t stream, bool check_only)
{
    GR_ARG_CHECK(tile == GR_CONV_TILE_STREAM || tile == GR_CONV_TILE_STREAM_SMALL);
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
    StreamParams sp;
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
    if (is_i8)
        return tile == GR_CONV_TILE_STREAM
                   ? launch_shape<signed char, 8, 2>(sp, max_smem, pdl, stream, check_only)
                   : launch_shape<signed char, 4, 1>(sp, max_smem, pdl, stream, check_only);
    return tile == GR_CONV_TILE_STREAM
               ? launch_shape<__half, 8, 2>(sp, max_smem, pdl, stream, check_only)
               : launch_shape<__half, 4, 1>(sp, max_smem, pdl, stream, check_only);
}
