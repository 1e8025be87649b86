/* Exact FP32 3x3 convolution (stride 1, pad 1) on the CUDA cores, with Darknet's 2x2 / stride 2
 * maxpool optionally fused into the epilogue (kernels/gemm_f32.h, GR_CONV_F32_DIRECT3X3).
 *
 * Why: the early layers of a detector (3 -> 16 -> 32 -> 64 channels on 416..104-pixel maps) have
 * a K of 27..288. Through im2col their FP32 GEMM reads and writes a 9x copy of the input, and the
 * unfused maxpool another 4x of the output: the traffic costs more than the math. Here each block
 * stages an input tile once per channel chunk and every FMA reads shared memory; nothing but the
 * input, the weights and the (pooled) output touches global memory.
 *
 *   out[n][o][y][x] = act(bias[o] + sum_{c, ky, kx} w[o][c][ky][kx] * in[n][c][y+ky-1][x+kx-1])
 *
 * summed in Darknet's order (c, then ky, then kx), one fmaf per product, zero outside the image;
 * with the pool, out is max over the 2x2 window of those values (taps outside the map never win,
 * Darknet's -FLT_MAX padding).
 *
 * Work split: a block of 8 warps computes an output tile of TH x TW pixels for 8*G output channels
 * (G channel groups of 8; the block's 8/G warps per group split the tile into 16x16 regions).
 * A thread owns 8 channels x a 2x4 pixel block: 64 accumulators, so each input value read from
 * shared memory feeds 8 FMAs and each weight 8 (weights are warp-uniform: broadcast reads).
 * Per (channel, ky) a thread reads 2 input rows of 6 floats (a 16-byte and an 8-byte read each)
 * and 3 taps x 8 weights (six 16-byte reads) for 192 FMAs. Input and weights of the next chunk of
 * CC channels are copied by cp.async while this chunk computes (two stages). The 2x4 block holds
 * two whole 2x2 pool windows, so the fused pool needs no exchange between threads. */
#include <cfloat>
#include <climits>
#include <cstdint>

#include "kernels/common.cuh"
#include "kernels/conv.h"
#include "kernels/conv_internal.cuh"
#include "kernels/cp_async.cuh"
#include "kernels/gemm_f32.h"

namespace
{

constexpr int kThreads = 256; /* 8 warps */

/* G channel groups of 8 per block: G = 8 for out_c > 32, fewer for narrow layers so the tile
 * grows instead (16x16, 16x32, 32x32, 32x64 pixels for G = 8, 4, 2, 1). */
template <int G_> struct Cfg {
    static constexpr int G = G_;
    static constexpr int M = 8 * G;              /* output channels per block */
    static constexpr int warps_per_group = 8 / G;
    static constexpr int WR = G >= 4 ? 1 : 2;    /* 16x16 warp regions down the tile */
    static constexpr int WC = warps_per_group / WR;
    static constexpr int TH = 16 * WR, TW = 16 * WC;
    /* Shared input row stride: >= TW + 2 and = 8 (mod 16), so the two rows that a quarter warp's
     * 16-byte reads touch (2 pixel rows apart) fall in different halves of the 32 banks. */
    static constexpr int S = ((TW + 2 - 8 + 15) / 16) * 16 + 8;
    static constexpr int PL = (TH + 2) * S; /* one channel's plane */
    /* channels per pipeline stage: two stages within 64 KiB (sm_75's opt-in limit) */
    static constexpr int CC = G >= 4 ? 8 : (G == 2 ? 4 : 3);
    static constexpr int in_stage = CC * PL;      /* floats */
    static constexpr int w_stage = CC * 9 * M;    /* [c][tap][M] */
    static constexpr int stage = in_stage + w_stage;
    static constexpr int smem_bytes = 2 * stage * static_cast<int>(sizeof(float));
    static_assert(G == 1 || G == 2 || G == 4 || G == 8, "8 warps split into whole groups");
    static_assert(WR * WC == warps_per_group, "the group's warps tile the block");
    static_assert(S % 4 == 0 && PL % 4 == 0 && in_stage % 4 == 0 && stage % 4 == 0 && M % 4 == 0,
                  "16-byte shared reads stay aligned");
    static_assert(smem_bytes <= 64 * 1024, "two stages fit every supported GPU");
};

struct Params {
    const float *in;      /* [batch][C][H][W] */
    const float *w;       /* [O][C][3][3] */
    const float *bias;    /* [O] or NULL */
    float *out;           /* [batch][O][OH][OW]: the conv's map, or the pooled one */
    int C, H, W, O;
    int tiles_x;          /* output tiles per row; blockIdx.x = ty * tiles_x + tx */
    int pool;             /* 1: 2x2 / stride 2 maxpool, window origin 2i */
    int OH, OW;           /* the written map: H x W, or the pool's */
    int activation;
    int vec_out;          /* no pool, W % 4 == 0 and out 16-byte aligned: float4 row stores */
};

/* One stage: channels [c0, c0 + CC) of the tile's input window (rows y0-1 .. y0+TH, columns
 * x0-1 .. x0+TW; zero outside the image and past C) and of the block's weights, by cp.async. */
template <class T>
__device__ __forceinline__ void load_stage(const Params &p, const float *img, int y0, int x0,
                                           int o0, int c0, float *s_in, float *s_w)
{
    constexpr int rows = T::TH + 2, cols = T::TW + 2, plane = rows * cols;
    for (int e = threadIdx.x; e < T::CC * plane; e += kThreads) {
        const int c = e / plane, rem = e - c * plane;
        const int r = rem / cols, col = rem - r * cols;
        const int y = y0 - 1 + r, x = x0 - 1 + col;
        const bool ok = c0 + c < p.C && y >= 0 && y < p.H && x >= 0 && x < p.W;
        const float *src = ok ? img + (static_cast<size_t>(c0 + c) * p.H + y) * p.W + x : img;
        copy4(s_in + c * T::PL + r * T::S + col, src, ok);
    }
    for (int e = threadIdx.x; e < T::w_stage; e += kThreads) {
        const int m = e % T::M, ct = e / T::M;
        const int c = ct / 9, tap = ct - c * 9;
        const bool ok = o0 + m < p.O && c0 + c < p.C;
        const float *src =
            ok ? p.w + (static_cast<size_t>(o0 + m) * p.C + (c0 + c)) * 9 + tap : p.w;
        copy4(s_w + e, src, ok);
    }
    cp_async_commit();
}

template <class T>
__global__ void __launch_bounds__(kThreads, 2) k_conv3x3_f32(const Params p)
{
    extern __shared__ __align__(16) float smem[];
    const int tile_y = blockIdx.x / p.tiles_x, tile_x = blockIdx.x - tile_y * p.tiles_x;
    const int y0 = tile_y * T::TH, x0 = tile_x * T::TW;
    const int n = blockIdx.y, o0 = blockIdx.z * T::M;
    const float *img = p.in + static_cast<size_t>(n) * p.C * p.H * p.W;

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = warp / T::warps_per_group, wig = warp - g * T::warps_per_group;
    const int wr = wig / T::WC, wc = wig - wr * T::WC;
    const int ty = wr * 16 + 2 * (lane >> 2), tx = wc * 16 + 4 * (lane & 3); /* block's pixels */

    float acc[2][4][8];
#pragma unroll
    for (int dy = 0; dy < 2; ++dy)
#pragma unroll
        for (int dx = 0; dx < 4; ++dx)
#pragma unroll
            for (int m = 0; m < 8; ++m)
                acc[dy][dx][m] = 0.0f;

    const int chunks = (p.C + T::CC - 1) / T::CC;
    load_stage<T>(p, img, y0, x0, o0, 0, smem, smem + T::in_stage);
    for (int k = 0; k < chunks; ++k) {
        float *stage = smem + (k & 1) * T::stage;
        if (k + 1 < chunks) {
            float *next = smem + ((k + 1) & 1) * T::stage;
            load_stage<T>(p, img, y0, x0, o0, (k + 1) * T::CC, next, next + T::in_stage);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        const int cc = min(T::CC, p.C - k * T::CC);
        const float *s_in = stage + ty * T::S + tx;
        const float *s_w = stage + T::in_stage + 8 * g;
#pragma unroll 1
        for (int c = 0; c < cc; ++c) {
#pragma unroll
            for (int ky = 0; ky < 3; ++ky) {
                float xv[2][6];
#pragma unroll
                for (int dy = 0; dy < 2; ++dy) {
                    const float *row = s_in + c * T::PL + (dy + ky) * T::S;
                    const float4 a = *reinterpret_cast<const float4 *>(row);
                    const float2 b = *reinterpret_cast<const float2 *>(row + 4);
                    xv[dy][0] = a.x, xv[dy][1] = a.y, xv[dy][2] = a.z, xv[dy][3] = a.w;
                    xv[dy][4] = b.x, xv[dy][5] = b.y;
                }
#pragma unroll
                for (int kx = 0; kx < 3; ++kx) {
                    const float *wp = s_w + (c * 9 + ky * 3 + kx) * T::M;
                    const float4 lo = *reinterpret_cast<const float4 *>(wp);
                    const float4 hi = *reinterpret_cast<const float4 *>(wp + 4);
                    const float wv[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
                    for (int dy = 0; dy < 2; ++dy)
#pragma unroll
                        for (int dx = 0; dx < 4; ++dx)
#pragma unroll
                            for (int m = 0; m < 8; ++m)
                                acc[dy][dx][m] = fmaf(xv[dy][dx + kx], wv[m], acc[dy][dx][m]);
                }
            }
        }
        __syncthreads(); /* the stage is overwritten by the load two chunks on */
    }

    /* Epilogue: bias, activation, the pool; write what lies inside the output map. */
    const int y = y0 + ty, x = x0 + tx;
    const size_t plane = static_cast<size_t>(p.OH) * p.OW;
    float *out_n = p.out + static_cast<size_t>(n) * p.O * plane;
    const bool vec4 = p.vec_out && x + 3 < p.W;
#pragma unroll
    for (int m = 0; m < 8; ++m) {
        const int o = o0 + 8 * g + m;
        if (o >= p.O)
            break; /* uniform over the warp */
        const float b = p.bias ? p.bias[o] : 0.0f;
        float v[2][4];
#pragma unroll
        for (int dy = 0; dy < 2; ++dy)
#pragma unroll
            for (int dx = 0; dx < 4; ++dx)
                v[dy][dx] = gr_conv_activate(acc[dy][dx][m] + b, p.activation);
        float *out_o = out_n + static_cast<size_t>(o) * plane;
        if (p.pool) {
            const int py = y >> 1;
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const int px = (x >> 1) + j;
                if (py >= p.OH || px >= p.OW)
                    continue;
                float mx = -FLT_MAX;
#pragma unroll
                for (int dy = 0; dy < 2; ++dy)
#pragma unroll
                    for (int dx = 0; dx < 2; ++dx)
                        if (y + dy < p.H && x + 2 * j + dx < p.W)
                            mx = fmaxf(mx, v[dy][2 * j + dx]);
                out_o[static_cast<size_t>(py) * p.OW + px] = mx;
            }
        } else {
#pragma unroll
            for (int dy = 0; dy < 2; ++dy) {
                if (y + dy >= p.H)
                    continue;
                float *row = out_o + static_cast<size_t>(y + dy) * p.W + x;
                if (vec4) {
                    *reinterpret_cast<float4 *>(row) =
                        make_float4(v[dy][0], v[dy][1], v[dy][2], v[dy][3]);
                } else {
#pragma unroll
                    for (int dx = 0; dx < 4; ++dx)
                        if (x + dx < p.W)
                            row[dx] = v[dy][dx];
                }
            }
        }
    }
}

template <int G> cudaError_t launch(const Params &base, int batch, cudaStream_t stream)
{
    using T = Cfg<G>;
    int dev = 0;
    GR_CUDA_TRY(cudaGetDevice(&dev));
    const cudaError_t raised = gr_raise_dynamic_smem<k_conv3x3_f32<T>>(dev, T::smem_bytes);
    if (raised != cudaSuccess)
        return raised;
    Params p = base;
    p.tiles_x = gr_ceil_div(p.W, T::TW);
    const long long tiles = static_cast<long long>(p.tiles_x) * gr_ceil_div(p.H, T::TH);
    const long long o_blocks = gr_ceil_div(p.O, T::M);
    GR_ARG_CHECK(tiles < INT_MAX && batch <= 65535 && o_blocks <= 65535);
    const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(batch),
                    static_cast<unsigned>(o_blocks));
    k_conv3x3_f32<T><<<grid, kThreads, T::smem_bytes, stream>>>(p);
    GR_LAUNCH_CHECK();
    return cudaSuccess;
}

} // namespace

extern "C" int gr_conv_f32_direct3x3_fits(const gr_conv_f32_args *a)
{
    if (!a || a->ksize != 3 || a->stride != 1 || a->pad != 1 || a->batch <= 0 ||
        a->batch > 65535 || a->in_c <= 0 || a->in_h <= 0 || a->in_w <= 0 || a->out_c <= 0)
        return 0;
    /* Darknet's maxpool with size 2, stride 2 and a total padding of 0 or 1 has its windows at
     * 2i, 2i+1 (offset -padding/2 = 0): the only pool fused here */
    if (a->pool_size != 0 && !(a->pool_size == 2 && a->pool_stride == 2 && a->pool_pad >= 0 &&
                               a->pool_pad <= 1))
        return 0;
    const long long plane = static_cast<long long>(a->in_h) * a->in_w;
    return plane * a->in_c < (1LL << 40) && plane * a->out_c < (1LL << 40) && a->in_c < INT_MAX / 9;
}

extern "C" int gr_conv_f32_direct3x3_preferred(const gr_conv_f32_args *a)
{
    /* K = in_c * 9 <= 288: YOLOv2-tiny's layers 0-2 (docs/performance.md, 2026-11-24) */
    return gr_conv_f32_direct3x3_fits(a) && a->in_c <= 32;
}

extern "C" void gr_conv_f32_direct3x3_out_dims(const gr_conv_f32_args *a, int *out_h, int *out_w)
{
    *out_h = a->in_h;
    *out_w = a->in_w;
    if (a->pool_size) {
        *out_h = (a->in_h + a->pool_pad - 2) / 2 + 1;
        *out_w = (a->in_w + a->pool_pad - 2) / 2 + 1;
    }
}

extern "C" cudaError_t gr_launch_conv_direct3x3_f32(const gr_conv_f32_args *a, cudaStream_t stream)
{
    GR_ARG_CHECK(gr_conv_f32_direct3x3_fits(a) && a->in && a->weights && a->out);
    GR_ARG_CHECK(a->activation >= GR_CONV_ACT_LINEAR && a->activation < GR_CONV_ACT_COUNT);
    Params p{};
    p.in = a->in;
    p.w = a->weights;
    p.bias = a->bias;
    p.out = a->out;
    p.C = a->in_c;
    p.H = a->in_h;
    p.W = a->in_w;
    p.O = a->out_c;
    p.pool = a->pool_size != 0;
    gr_conv_f32_direct3x3_out_dims(a, &p.OH, &p.OW);
    p.activation = a->activation;
    p.vec_out = !p.pool && p.W % 4 == 0 && reinterpret_cast<uintptr_t>(a->out) % 16 == 0;
    if (a->out_c > 32)
        return launch<8>(p, a->batch, stream);
    if (a->out_c > 16)
        return launch<4>(p, a->batch, stream);
    if (a->out_c > 8)
        return launch<2>(p, a->batch, stream);
    return launch<1>(p, a->batch, stream);
}
