/* First-layer convolution straight from the network's uint8 input (NHWC, 3 channels, value v
 * meaning v/255), with the input quantization, the epilogue and an optional 2x2 maxpool fused:
 * one kernel replaces quantize -> conv -> maxpool. Contract: kernels/conv.h (in_u8); arithmetic:
 * planner/plan.h (GR_FUSED_QUANTIZE_IN).
 *
 * Why SIMT and not tensor cores: with 3 input channels K is 27 (3x3x3), so the GEMM is thin and
 * the layer is bound by its bytes (the 0.5 MB input, the pooled output), not its 75 M
 * multiply-adds. A block stages the input pixels of an 8x8 tile of output pixels in shared memory,
 * each quantized and packed once; a thread then computes one output pixel - a pooling window of
 * up to four conv pixels - for 4 filters: INT8 packs a pixel's channels into one word and multiplies
 * with dp4a (exact int32 sums, so the result equals the CPU emulation bit for bit); FP16 multiplies
 * the half-rounded operands in f32 (the same operands as the tensor-core path, another order).
 * The input's quantization is a 256-entry table built per block with the exact formula; all
 * filters' weights sit in shared memory too.
 *
 * That SIMT kernel is instruction-bound at large batches (docs/performance.md: 597 us at batch 64 on the
 * H100, a third of the INT8 forward pass), so tile_config GR_CONV_TILE_STREAM selects a
 * tensor-core kernel for the common case (3x3 of strides <= 2, pooled or not, sm_80+; see
 * k_conv_first_mma below). */
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <climits>
#include <cstdint>
#include <type_traits>

#include <cuda_fp16.h>

#include "kernels/common.cuh"
#include "kernels/conv.h"
#include "kernels/conv_internal.cuh"
#include "kernels/conv_mma.cuh"

namespace
{

constexpr int kThreads = 256;
constexpr int kTile = 8;        /* output pixels per block: kTile x kTile */
constexpr int kMaxPatch = 1600; /* input pixels staged per block (40 x 40) */
constexpr int kGroup = 4; /* filters per thread */
constexpr int kMaxK = 7;
constexpr int kMaxC = 4;
constexpr int kMaxWeights = 1024; /* out_c_pad * ksize^2 words in shared memory */

struct FirstParams {
    const unsigned char *in;
    const void *weights; /* packed [out_c][k][k][cin_pad] (conv.h) */
    const float *mul;
    const float *bias;
    void *out;
    int in_h, in_w, in_c, in_c_stride, in_c_offset, cin_pad;
    int out_h, out_w, out_c, out_c_pad, out_c_stride, out_c_offset;
    int ksize, stride, pad, activation;
    float out_inv_scale, in_scale;
    int pool, pool_stride, pool_offset, pool_h, pool_w;
    int patch_h, patch_w; /* input pixels a block stages */
    int pitch;            /* the tensor-core kernel: words per patch row */
    int raw_words;        /* the tensor-core kernel: 32-bit words of raw input per patch row */
    int in_bytes;         /* the tensor-core kernel: bytes of the whole input */
    int batch;
};

/* INT8: words of 4 quantized channels, dp4a, int32 sums. */
struct I8Math {
    using Acc = int;
    using Word = int;
    static constexpr bool is_i8 = true;
    static __device__ int lut_entry(int v, float s)
    {
        return gr_conv_quantize_u8_i8(v, s); /* the quantize node's formula */
    }
    static __device__ Word pack(const int *lut, const unsigned char *px, int c)
    {
        unsigned w = 0;
        for (int i = 0; i < c; ++i)
            w |= (static_cast<unsigned>(lut[px[i]]) & 0xffu) << (8 * i);
        return static_cast<int>(w);
    }
    static __device__ Word weight(const void *packed, size_t at, int c)
    {
        const signed char *w = static_cast<const signed char *>(packed) + at;
        unsigned v = 0;
        for (int i = 0; i < c; ++i)
            v |= (static_cast<unsigned>(w[i]) & 0xffu) << (8 * i);
        return static_cast<int>(v);
    }
    static __device__ Acc fma(Word x, Word w, Acc acc) { return __dp4a(x, w, acc); }
};

/* FP16: half-rounded operands multiplied and summed in f32. Words hold 4 channels as floats. */
struct F16Math {
    using Acc = float;
    using Word = float4;
    static constexpr bool is_i8 = false;
    static __device__ float lut_entry(int v, float)
    {
        return __half2float(gr_conv_quantize_u8_f16(v));
    }
    static __device__ Word pack(const float *lut, const unsigned char *px, int c)
    {
        float x[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int i = 0; i < c; ++i)
            x[i] = lut[px[i]];
        return make_float4(x[0], x[1], x[2], x[3]);
    }
    static __device__ Word weight(const void *packed, size_t at, int c)
    {
        const __half *w = static_cast<const __half *>(packed) + at;
        float x[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int i = 0; i < c; ++i)
            x[i] = __half2float(w[i]);
        return make_float4(x[0], x[1], x[2], x[3]);
    }
    static __device__ Acc fma(Word x, Word w, Acc acc)
    {
        acc = fmaf(x.x, w.x, acc);
        acc = fmaf(x.y, w.y, acc);
        acc = fmaf(x.z, w.z, acc);
        return fmaf(x.w, w.w, acc);
    }
};

template <typename Math, int P>
__global__ void __launch_bounds__(kThreads) k_conv_first(const FirstParams p)
{
    using Acc = typename Math::Acc;
    using Word = typename Math::Word;
    using Lut = typename std::conditional<Math::is_i8, int, float>::type;
    __shared__ Lut lut[256];
    __shared__ Word w_s[kMaxWeights];  /* [filter][tap] */
    __shared__ Word patch[kMaxPatch];  /* the block's input pixels, quantized and packed */

    gr_conv::wait_for_producer();
    const int kk = p.ksize * p.ksize;
    for (int v = threadIdx.x; v < 256; v += kThreads)
        lut[v] = Math::lut_entry(v, p.in_scale);
    for (int i = threadIdx.x; i < p.out_c_pad * kk; i += kThreads) {
        const int n = i / kk, tap = i - n * kk;
        w_s[i] = n < p.out_c
                     ? Math::weight(p.weights, (static_cast<size_t>(n) * kk + tap) * p.cin_pad, p.in_c)
                     : Math::weight(p.weights, 0, 0);
    }
    /* This block: kTile x kTile output pixels of image blockIdx.z. The conv pixels they need start
     * at (cy0, cx0), the input pixels at (iy0, ix0); the patch is patch_h x patch_w. */
    const int img = blockIdx.z;
    const int ty0 = blockIdx.y * kTile, tx0 = blockIdx.x * kTile;
    const int cy0 = P == 2 ? ty0 * p.pool_stride + p.pool_offset : ty0;
    const int cx0 = P == 2 ? tx0 * p.pool_stride + p.pool_offset : tx0;
    const int iy0 = cy0 * p.stride - p.pad, ix0 = cx0 * p.stride - p.pad;
    __syncthreads(); /* the table is ready */
    for (int i = threadIdx.x; i < p.patch_h * p.patch_w; i += kThreads) {
        const int r = i / p.patch_w, c = i - r * p.patch_w;
        const int iy = iy0 + r, ix = ix0 + c;
        Word w = Math::weight(p.weights, 0, 0); /* zero padding */
        if (iy >= 0 && iy < p.in_h && ix >= 0 && ix < p.in_w)
            w = Math::pack(lut, p.in + (static_cast<size_t>(img * p.in_h + iy) * p.in_w + ix) *
                                           p.in_c_stride + p.in_c_offset, p.in_c);
        patch[i] = w;
    }
    __syncthreads();

    /* Items: an output pixel (a pooling window of up to four conv pixels) x kGroup filters;
     * consecutive threads take consecutive filter groups of a pixel, so stores are contiguous. */
    const int groups = p.out_c_pad / kGroup;
    const int map_h = P == 2 ? p.pool_h : p.out_h, map_w = P == 2 ? p.pool_w : p.out_w;
    for (int it = threadIdx.x; it < kTile * kTile * groups; it += kThreads) {
        const int lp = it / groups, g0 = (it - lp * groups) * kGroup;
        const int y = ty0 + lp / kTile, x = tx0 + lp % kTile;
        if (y >= map_h || x >= map_w)
            continue;
        Acc acc[P * P][kGroup];
        bool valid[P * P];
        int base[P * P]; /* patch index of the window tap's top-left input pixel */
#pragma unroll
        for (int q = 0; q < P * P; ++q) {
            const int oy = P == 2 ? y * p.pool_stride + p.pool_offset + q / 2 : y;
            const int ox = P == 2 ? x * p.pool_stride + p.pool_offset + q % 2 : x;
            valid[q] = oy >= 0 && oy < p.out_h && ox >= 0 && ox < p.out_w;
            base[q] = (oy - cy0) * p.stride * p.patch_w + (ox - cx0) * p.stride;
#pragma unroll
            for (int f = 0; f < kGroup; ++f)
                acc[q][f] = Acc(0);
        }
        for (int ky = 0; ky < p.ksize; ++ky)
            for (int kx = 0; kx < p.ksize; ++kx) {
                const int tap = ky * p.ksize + kx, off = ky * p.patch_w + kx;
                Word w[kGroup];
#pragma unroll
                for (int f = 0; f < kGroup; ++f)
                    w[f] = w_s[(g0 + f) * kk + tap];
#pragma unroll
                for (int q = 0; q < P * P; ++q) {
                    const Word xw = patch[valid[q] ? base[q] + off : 0];
#pragma unroll
                    for (int f = 0; f < kGroup; ++f)
                        acc[q][f] = Math::fma(xw, w[f], acc[q][f]);
                }
            }

        /* Epilogue: multiplier/bias, activation, max over the window (in tap order, as the CPU
         * reference: v > best), conversion; filters past out_c write 0. */
        float out[kGroup];
#pragma unroll
        for (int f = 0; f < kGroup; ++f) {
            const int n = g0 + f;
            out[f] = -FLT_MAX;
#pragma unroll
            for (int q = 0; q < P * P; ++q) {
                if (!valid[q] || n >= p.out_c)
                    continue;
                const float a = static_cast<float>(acc[q][f]);
                const float b = p.bias ? p.bias[n] : 0.0f;
                const float v = gr_conv_activate_lean(p.mul ? fmaf(a, p.mul[n], b) : a + b, p.activation);
                out[f] = v > out[f] ? v : out[f];
            }
            if (n >= p.out_c)
                out[f] = 0.0f;
        }
        const size_t dst = (static_cast<size_t>(img * map_h + y) * map_w + x) * p.out_c_stride +
                           p.out_c_offset + g0;
        /* Packed by value into words (no addressable byte array: that would be local memory). */
        static_assert(kGroup == 4, "one 32-bit word of int8, two of f16");
        if (Math::is_i8) {
            unsigned w = 0u;
#pragma unroll
            for (int f = 0; f < kGroup; ++f) {
                w |= gr_conv_i8_bits(out[f], p.out_inv_scale) << (8 * f);
            }
            *reinterpret_cast<unsigned *>(static_cast<signed char *>(p.out) + dst) = w;
        } else {
            const unsigned lo = gr_conv_half2_bits(out[0], out[1]);
            const unsigned hi = gr_conv_half2_bits(out[2], out[3]);
            *reinterpret_cast<uint2 *>(static_cast<__half *>(p.out) + dst) = make_uint2(lo, hi);
        }
    }
}


/* ---- The tensor-core first layer (tile_config GR_CONV_TILE_STREAM; sm_80+) ----
 *
 * The same arithmetic as k_conv_first, on mma.sync m16n8k16: one GEMM row per conv pixel, K = the
 * 9 taps x 4 channel slots (3 channels and a zero), 12 tap slots in three K steps of 4 taps (the
 * slots past tap 8 meet zero filters). A block stages its input patch once, quantized and packed
 * (INT8: one 32-bit word per pixel, 4 channel bytes; FP16: two words, 4 halves), and every A
 * register of the MMA fragments is one 32-bit shared-memory read at (row's pixel + tap offset):
 * the patch is the im2col matrix, nothing is copied per row. The filters live in registers (their
 * B fragments). Pooled layers (the first layers of YOLOv2/v3-tiny): a warp computes 16 pooled
 * pixels of one row in 4 fragments of 16 rows; fragments 2p and 2p + 1 hold the four window taps
 * of pooled pixels 8p..8p+7 in the rows g and g + 8 a thread owns, so each thread pools its own
 * accumulators. The maximum is taken on the accumulators where the epilogue is non-decreasing in
 * them (multipliers >= 0, activation linear, leaky or relu), else on the activated values.
 * Unpooled layers (yolov4-tiny's stride-2 first conv; kPool false) keep the same mapping over a
 * grid of 2x2 blocks of conv pixels (a "pooled" grid of stride 2, offset 0, set up by mma_first):
 * the four "taps" are four distinct conv pixels, each activated and written instead of maxed. The
 * patch geometry, the fragments and the pipeline are then the pooled kernel's unchanged (a block:
 * 16 x 32 conv pixels), so the two share every instruction but the epilogue's.
 *
 * Blocks are persistent and run a two-step pipeline per tile: the raw input rows of the NEXT tile
 * go to shared memory by cp.async (4-byte words) while this tile's MMAs and epilogue run; then
 * the threads quantize and pack them through the table, a pixel each (a warp per row measured
 * slower: rows of 34 pixels leave most lanes idle in a second pass, docs/performance.md). The
 * epilogue is instantiated per activation and for full tiles (no bounds checks): the per-element
 * switch and checks were a third of the kernel's instructions (ncu source counters, docs/performance.md). */
constexpr int kMmaWarps = 8;
constexpr int kMmaFrags = 4;                   /* m16 fragments per warp */
constexpr int kMmaTileW = kMmaFrags * 4;       /* pooled pixels per warp (one row) */
constexpr int kMmaTileH = kMmaWarps;           /* pooled rows per block: one per warp */
constexpr int kMmaMaxStride = 2;               /* conv stride and pool stride */
constexpr int kMmaMaxPatchH = ((kMmaTileH - 1) * kMmaMaxStride + 1) * kMmaMaxStride + 3;
constexpr int kMmaMaxPatchW = ((kMmaTileW - 1) * kMmaMaxStride + 1) * kMmaMaxStride + 3;
constexpr int kMmaMaxPitch = kMmaMaxPatchW * 2 + 32; /* words: 2 per FP16 pixel, + bank padding */
constexpr int kMmaRawWords = 2304; /* the next tile's raw input rows (9 KB) */

/* mma.sync m16n8k16: INT8 (A in a[0..1], B in b[0]) and FP16 */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
template <bool kI8> struct MmaK16;
template <> struct MmaK16<true> {
    static __device__ __forceinline__ void mma(int (&c)[4], const unsigned (&a)[4],
                                               const unsigned (&b)[2])
    {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, "
                     "{%6}, {%0,%1,%2,%3};\n"
                     : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(b[0]));
    }
};
template <> struct MmaK16<false> {
    static __device__ __forceinline__ void mma(float (&c)[4], const unsigned (&a)[4],
                                               const unsigned (&b)[2])
    {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
};
#endif

/* NJ: 8-filter column blocks (2 or 4: out_c_pad <= 16 or 32). 16 filters: INT8 at 3 blocks per SM
 * (80 registers, ~100 bytes spilled; 2 blocks without spills: 215 vs 199 us at batch 64, docs/performance.md),
 * FP16 at 2 (128 registers; unbounded it takes 130, 1 block). 32 filters: kBlocks 1 (tile 5:
 * 156-191 registers, no spills) or 2 (tile 6: 128 registers, 90-200 bytes spilled), both
 * candidates of the tactic search, which measures which wins. */
template <bool kI8, int NJ, bool kPool, int kBlocks, bool kSwish>
__global__ void __launch_bounds__(kMmaWarps * 32, kBlocks) k_conv_first_mma(const FirstParams p)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    using Acc = typename std::conditional<kI8, int, float>::type;
    constexpr int kThreadsMma = kMmaWarps * 32;
    constexpr int WPP = kI8 ? 1 : 2; /* patch words per pixel */
    static_assert(NJ == 2 || NJ == 4, "16 or 32 filters");
    __shared__ unsigned lut[256];
    __shared__ unsigned patch[kMmaMaxPatchH * kMmaMaxPitch];
    __shared__ unsigned raw[kMmaRawWords]; /* the input bytes of a tile's patch rows, word-aligned */

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t4 = lane & 3;
    /* kSwish: a kernel of its own for swish (SiLU) layers, the activation inline; the others keep
     * the lean switch, so swish's code adds no registers to them (conv_internal.cuh) */
    auto activate = [](float y, int act) {
        if constexpr (kSwish)
            return gr_conv_activate(y, act);
        else
            return gr_conv_activate_lean(y, act);
    };

    /* Constants first (nothing of the engine writes them): the quantization table, the filters'
     * B fragments (b0: K slots 4*t4.. (INT8) or 2*t4.. (FP16) of filter 8j + g; FP16's b1 the
     * slots 8 further), the multipliers and biases each lane's epilogue needs. */
    for (int v = tid; v < 256; v += kThreadsMma) {
        if constexpr (kI8) {
            int q = __float2int_rn((static_cast<float>(v) / 255.0f) / p.in_scale);
            lut[v] = static_cast<unsigned>(q < -127 ? -127 : (q > 127 ? 127 : q)) & 0xffu;
        } else {
            lut[v] = __half_as_ushort(__float2half_rn(static_cast<float>(v) / 255.0f));
        }
    }
    unsigned b[3][NJ][2];
#pragma unroll
    for (int s = 0; s < 3; ++s)
#pragma unroll
        for (int j = 0; j < NJ; ++j)
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const int n = 8 * j + g;
                const int tap = kI8 ? 4 * s + t4 : 4 * s + 2 * r + (t4 >> 1);
                unsigned v = 0u;
                if (n < p.out_c && tap < 9 && (kI8 ? r == 0 : true)) {
                    const size_t at = (static_cast<size_t>(n) * 9 + tap) * p.cin_pad; /* values */
                    v = kI8 ? *reinterpret_cast<const unsigned *>(
                                  static_cast<const signed char *>(p.weights) + at)
                            : *reinterpret_cast<const unsigned *>(
                                  static_cast<const __half *>(p.weights) + at + (t4 & 1) * 2);
                }
                b[s][j][r] = v;
            }
    /* the epilogue's multiplier and bias of filter n (the rare path that activates before
     * pooling reads them from global memory: registers are short) */
    auto mul_of = [&](int n) { return p.mul ? (n < p.out_c ? p.mul[n] : 0.0f) : 1.0f; };
    auto bias_of = [&](int n) { return p.bias && n < p.out_c ? p.bias[n] : 0.0f; };
    int negative = 0;
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e)
            negative |= !(mul_of(8 * j + 2 * t4 + e) >= 0.0f);
    float sm[NJ][2], sb[NJ][2]; /* this thread's filters 8j + 2t4 + e */
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            sm[j][e] = mul_of(8 * j + 2 * t4 + e);
            sb[j][e] = bias_of(8 * j + 2 * t4 + e);
        }
    const bool pool_first =
        kPool && !__syncthreads_or(negative) && gr_conv_act_pools_first(p.activation);

    /* Tap offsets (words) of this lane's A registers: INT8 a0/a1 hold tap 4s + t4 (rows g, g+8),
     * FP16 a0/a1 tap 4s + t4/2 and a2/a3 tap 4s + 2 + t4/2, channel pair t4 & 1. Slots past tap 8
     * read tap 8 (any finite value: their filters are 0). */
    int ta[3][2];
#pragma unroll
    for (int s = 0; s < 3; ++s)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            int tap = kI8 ? 4 * s + t4 : 4 * s + 2 * r + (t4 >> 1);
            tap = tap < 9 ? tap : 8;
            ta[s][r] = (tap / 3) * p.pitch + (tap % 3) * WPP + (kI8 ? 0 : (t4 & 1));
        }

    /* Row r of fragment i: pooled pixel 8 * (i / 2) + (r & 7) of this warp's row, window tap
     * q = 2 * (i & 1) + (r >> 3). Thread (g, t4) then holds all four taps of pooled pixel
     * 8 * (i / 2) + g in fragments i, i + 1 (rows g and g + 8 of each): the pool is in-thread.
     * Its patch word: row0 (fragment 0, row g) + steps that are the same for every thread. */
    const int row0 = warp * p.pool_stride * p.stride * p.pitch + g * p.pool_stride * p.stride * WPP;
    const int step_tap_y = p.stride * p.pitch;                  /* fragments 2p + 1: tap row + 1 */
    const int step_tap_x = p.stride * WPP;                      /* row g + 8: tap column + 1 */
    const int step_8px = 8 * p.pool_stride * p.stride * WPP;    /* fragments 2, 3: 8 pixels on */

    gr_conv::wait_for_producer(); /* the input is the previous node's output */
    /* Persistent: tile t = (image, pooled row block, pooled column block), t = blockIdx.x, +
     * gridDim.x, ...; the constants above are loaded once per block. */
    const int tiles_x = (p.pool_w + kMmaTileW - 1) / kMmaTileW;
    const int tiles_y = (p.pool_h + kMmaTileH - 1) / kMmaTileH;
    const int tiles = tiles_x * tiles_y * p.batch;
    const float inv_patch_w = 1.0f / static_cast<float>(p.patch_w);
    const float inv_raw_words = 1.0f / static_cast<float>(p.raw_words);
    struct Origin {
        int img, py0, px0, iy0, ix0;
    };
    /* a / d for 0 <= a < 2^24 through the float reciprocal and one correction (a few
     * instructions instead of an integer division's ~20; tiles < 2^24 is checked at launch) */
    const int tiles_xy = tiles_x * tiles_y;
    const float inv_tiles_x = 1.0f / static_cast<float>(tiles_x);
    const float inv_tiles_xy = 1.0f / static_cast<float>(tiles_xy);
    auto div = [](int a, int d, float inv) {
        int q = static_cast<int>(static_cast<float>(a) * inv);
        const int r = a - q * d;
        q += r >= d ? 1 : (r < 0 ? -1 : 0);
        return q;
    };
    auto origin = [&](int t) {
        Origin o;
        o.img = div(t, tiles_xy, inv_tiles_xy);
        const int rest = t - o.img * tiles_xy;
        const int ty = div(rest, tiles_x, inv_tiles_x);
        o.py0 = ty * kMmaTileH;
        o.px0 = (rest - ty * tiles_x) * kMmaTileW;
        o.iy0 = (o.py0 * p.pool_stride + p.pool_offset) * p.stride - p.pad;
        o.ix0 = (o.px0 * p.pool_stride + p.pool_offset) * p.stride - p.pad;
        return o;
    };
    /* Byte offset (in the whole input) of patch row r's first pixel; may be negative or past the
     * end for rows outside the image, which are never read back. */
    auto row_start = [&](const Origin &o, int r) {
        return ((o.img * p.in_h + o.iy0 + r) * p.in_w + o.ix0) * p.in_c_stride;
    };
    /* The raw bytes of tile t's patch rows: cp.async of 4-byte words from the row start rounded
     * down to 4 bytes; words outside the input are zero-filled (src-size 0, or the bytes left at
     * the end). One round of coalesced copies per tile instead of 3 byte loads per pixel, issued
     * a tile ahead so that their latency hides behind this tile's MMAs. */
    auto prefetch = [&](int t) {
        const Origin o = origin(t);
        for (int i = tid; i < p.patch_h * p.raw_words; i += kThreadsMma) {
            const int r = static_cast<int>((static_cast<float>(i) + 0.5f) * inv_raw_words);
            const int k = i - r * p.raw_words;
            const int iy = o.iy0 + r;
            const int at = (row_start(o, r) & ~3) + 4 * k;
            const int left = p.in_bytes - at;
            const bool outside = iy < 0 || iy >= p.in_h || at < 0 || left <= 0;
            if (!outside && left < 4) { /* the input's last bytes: never read past its end */
                unsigned v = 0u;
                for (int e = 0; e < left; ++e)
                    v |= static_cast<unsigned>(p.in[at + e]) << (8 * e);
                raw[r * p.raw_words + k] = v;
                continue;
            }
            const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(raw + r * p.raw_words + k));
            asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst),
                         "l"(p.in + (outside ? 0 : at)), "r"(outside ? 0 : 4));
        }
        cp_async_commit();
    };
    if (blockIdx.x < tiles)
        prefetch(blockIdx.x);
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        const Origin o = origin(t);
        const int img = o.img, py0 = o.py0, px0 = o.px0;
        (void)img;
        cp_async_wait<0>();
        __syncthreads(); /* the raw rows have landed; the previous tile's reads of the patch are done */
        const unsigned char *raw_bytes = reinterpret_cast<const unsigned char *>(raw);
        for (int i = tid; i < p.patch_h * p.patch_w; i += kThreadsMma) {
            /* i / patch_w through the float reciprocal: exact for i < 2^16 (checked at launch) */
            const int r = static_cast<int>((static_cast<float>(i) + 0.5f) * inv_patch_w);
            const int c = i - r * p.patch_w;
            const int iy = o.iy0 + r, ix = o.ix0 + c;
            unsigned w0 = 0u, w1 = 0u;
            if (iy >= 0 && iy < p.in_h && ix >= 0 && ix < p.in_w) {
                const unsigned char *px = raw_bytes + r * p.raw_words * 4 + (row_start(o, r) & 3) +
                                          c * p.in_c_stride + p.in_c_offset;
#pragma unroll
                for (int ch = 0; ch < kMaxC; ++ch) {
                    if (ch >= p.in_c)
                        break;
                    const unsigned q = lut[px[ch]];
                    if (kI8)
                        w0 |= q << (8 * ch);
                    else if (ch < 2)
                        w0 |= q << (16 * ch);
                    else
                        w1 |= q << (16 * (ch - 2));
                }
            }
            patch[r * p.pitch + c * WPP] = w0;
            if (!kI8)
                patch[r * p.pitch + c * WPP + 1] = w1;
        }
        __syncthreads(); /* the patch is ready; the raw rows are free */
        if (t + static_cast<int>(gridDim.x) < tiles)
            prefetch(t + static_cast<int>(gridDim.x));

        Acc c[kMmaFrags][NJ][4];
#pragma unroll
        for (int i = 0; i < kMmaFrags; ++i) {
#pragma unroll
            for (int j = 0; j < NJ; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    c[i][j][e] = Acc(0);
            /* rows g and g + 8 of fragment i: + the tile-invariant steps (uniform registers) */
            const int r0 = row0 + (i & 1) * step_tap_y + (i >> 1) * step_8px, r1 = r0 + step_tap_x;
#pragma unroll
            for (int s = 0; s < 3; ++s) {
                unsigned a[4];
                a[0] = patch[r0 + ta[s][0]];
                a[1] = patch[r1 + ta[s][0]];
                if (!kI8) {
                    a[2] = patch[r0 + ta[s][1]];
                    a[3] = patch[r1 + ta[s][1]];
                } else {
                    a[2] = a[3] = 0u;
                }
#pragma unroll
                for (int j = 0; j < NJ; ++j)
                    MmaK16<kI8>::mma(c[i][j], a, b[s][j]);
            }
        }

        /* Epilogue per fragment pair: this thread's pooled pixel, filters 8j + 2t4 + e. Tap q is
         * accumulator c[2ip + q / 2][j][2 * (q & 1) + e]. A tile whose pooled pixels and window
         * taps all lie inside the maps (every tile of a 416x416 input) skips the bounds checks. */
        const int py = py0 + warp;
        /* Output element `at` and the next (filters n0, n0 + 1), converted: two int8 codes or two
         * halves in one store. */
        auto store_pair = [&](size_t at, float y0, float y1) {
            if (kI8)
                *reinterpret_cast<unsigned short *>(static_cast<unsigned char *>(p.out) + at) =
                    static_cast<unsigned short>(gr_conv_i8_bits(y0, p.out_inv_scale) |
                                                (gr_conv_i8_bits(y1, p.out_inv_scale) << 8));
            else
                *reinterpret_cast<unsigned *>(static_cast<__half *>(p.out) + at) =
                    gr_conv_half2_bits(y0, y1);
        };
        /* Unpooled: tap q of block (py, px) is conv pixel (2py + q / 2, 2px + q % 2), its
         * accumulators c[2ip + q / 2][j][2 * (q & 1) + e]; each is activated and written. Filters
         * past out_c come out 0 as in the pooled epilogue. */
        auto unpooled_epilogue = [&](auto full_tile, int act) {
            constexpr bool kFull = decltype(full_tile)::value;
#pragma unroll
            for (int ip = 0; ip < kMmaFrags / 2; ++ip) {
                const int px = px0 + 8 * ip + g;
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const int oy = 2 * py + (q >> 1), ox = 2 * px + (q & 1);
                    if (!kFull && (oy >= p.out_h || ox >= p.out_w))
                        continue;
                    const size_t dst = (static_cast<size_t>(img * p.out_h + oy) * p.out_w + ox) *
                                           p.out_c_stride + p.out_c_offset;
#pragma unroll
                    for (int j = 0; j < NJ; ++j) {
                        const int n0 = 8 * j + 2 * t4;
                        float y[2];
#pragma unroll
                        for (int e = 0; e < 2; ++e) {
                            const float v = activate(
                                fmaf(static_cast<float>(c[2 * ip + (q >> 1)][j][2 * (q & 1) + e]),
                                     sm[j][e], sb[j][e]),
                                act);
                            y[e] = gr_conv_act_zero_at_zero(act) || n0 + e < p.out_c ? v : 0.0f;
                        }
                        if (n0 >= p.out_c_pad)
                            continue;
                        store_pair(dst + n0, y[0], y[1]);
                    }
                }
            }
        };
        auto pooled_epilogue = [&](auto full_tile, int kAct) {
            constexpr bool kFull = decltype(full_tile)::value;
#pragma unroll
            for (int ip = 0; ip < kMmaFrags / 2; ++ip) {
                const int px = px0 + 8 * ip + g;
                bool tap_ok[4];
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const int oy = py * p.pool_stride + p.pool_offset + (q >> 1);
                    const int ox = px * p.pool_stride + p.pool_offset + (q & 1);
                    tap_ok[q] = kFull || (oy >= 0 && oy < p.out_h && ox >= 0 && ox < p.out_w);
                }
                if (!kFull && (py >= p.pool_h || px >= p.pool_w))
                    continue;
                const size_t dst = (static_cast<size_t>(img * p.pool_h + py) * p.pool_w + px) *
                                       p.out_c_stride + p.out_c_offset;
#pragma unroll
                for (int j = 0; j < NJ; ++j) {
                    float y[2];
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const int n = 8 * j + 2 * t4 + e;
                        float best;
                        if (pool_first) {
                            /* the maximum of the accumulators themselves (INT8: int32, then one
                             * exact conversion); a valid pooled pixel has a valid tap */
                            Acc m;
                            if constexpr (kI8)
                                m = INT_MIN;
                            else
                                m = -INFINITY;
#pragma unroll
                            for (int q = 0; q < 4; ++q) {
                                const Acc x = c[2 * ip + (q >> 1)][j][2 * (q & 1) + e];
                                m = tap_ok[q] ? (x > m ? x : m) : m;
                            }
                            best = activate(fmaf(static_cast<float>(m), sm[j][e], sb[j][e]),
                                                    kAct);
                        } else {
                            best = -INFINITY; /* Darknet's pool padding never wins */
#pragma unroll
                            for (int q = 0; q < 4; ++q) {
                                const float x = activate(
                                    fmaf(static_cast<float>(c[2 * ip + (q >> 1)][j][2 * (q & 1) + e]),
                                         mul_of(n), bias_of(n)),
                                    kAct);
                                best = tap_ok[q] ? fmaxf(best, x) : best;
                            }
                        }
                        /* filters past out_c: zero weights, multiplier and bias, so 0 after
                         * the activations with act(0) = 0 (not the logistic, plse, ...) */
                        y[e] = gr_conv_act_zero_at_zero(kAct) || n < p.out_c ? best : 0.0f;
                    }
                    const int n0 = 8 * j + 2 * t4;
                    if (n0 >= p.out_c_pad)
                        continue;
                    store_pair(dst + n0, y[0], y[1]);
                }
            }
        };
        auto epilogue = [&](auto full_tile, auto activation) {
            /* a constant folds gr_conv_activate's switch; -1: the rarer ones, switched at run time */
            constexpr int kActConst = decltype(activation)::value;
            const int kAct = kActConst >= 0 ? kActConst : p.activation;
            if constexpr (kPool)
                pooled_epilogue(full_tile, kAct);
            else
                unpooled_epilogue(full_tile, kAct);
        };
        const int last_y = (py0 + kMmaTileH - 1) * p.pool_stride + p.pool_offset + 1;
        const int last_x = (px0 + kMmaTileW - 1) * p.pool_stride + p.pool_offset + 1;
        const bool full = p.pool_offset >= 0 && py0 + kMmaTileH <= p.pool_h &&
                          px0 + kMmaTileW <= p.pool_w && last_y < p.out_h && last_x < p.out_w;
        auto with_act = [&](auto full_tile) {
            using std::integral_constant;
            if constexpr (kSwish) {
                epilogue(full_tile, integral_constant<int, GR_CONV_ACT_SWISH>());
                return;
            }
            switch (p.activation) {
            case GR_CONV_ACT_LEAKY:
                epilogue(full_tile, integral_constant<int, GR_CONV_ACT_LEAKY>());
                break;
            case GR_CONV_ACT_RELU:
                epilogue(full_tile, integral_constant<int, GR_CONV_ACT_RELU>());
                break;
            case GR_CONV_ACT_LOGISTIC:
                epilogue(full_tile, integral_constant<int, GR_CONV_ACT_LOGISTIC>());
                break;
            case GR_CONV_ACT_LINEAR:
                epilogue(full_tile, integral_constant<int, GR_CONV_ACT_LINEAR>());
                break;
            default:
                epilogue(full_tile, integral_constant<int, -1>());
                break;
            }
        };
        if (full)
            with_act(std::true_type());
        else
            with_act(std::false_type());
    } /* tiles */
#endif
}

template <bool kI8, int NJ, bool kPool, int kBlocks>
cudaError_t launch_mma(const FirstParams &p, bool pdl, cudaStream_t stream)
{
    /* swish's own kernel for unpooled layers (the stride-2 first conv of YOLOv5/v8/11); a pooled
     * swish layer takes the generic one, the activation through one call */
    constexpr bool kSwishKernel = !kPool;
    const auto kernel = kSwishKernel && p.activation == GR_CONV_ACT_SWISH
                            ? k_conv_first_mma<kI8, NJ, kPool, kBlocks, kSwishKernel>
                            : k_conv_first_mma<kI8, NJ, kPool, kBlocks, false>;
    int dev = 0, sms = 0, per_sm = 0;
    GR_CUDA_TRY(cudaGetDevice(&dev));
    GR_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    GR_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kMmaWarps * 32, 0));
    GR_ARG_CHECK(per_sm > 0);
    const long long tiles = static_cast<long long>(gr_ceil_div(p.pool_w, kMmaTileW)) *
                            gr_ceil_div(p.pool_h, kMmaTileH) * p.batch;
    GR_ARG_CHECK(tiles < (1 << 24)); /* the kernel's float-reciprocal divisions */
    const long long grid = std::min<long long>(tiles, static_cast<long long>(per_sm) * sms);
    return gr_conv::launch_kernel(kernel, dim3(static_cast<unsigned>(grid)), dim3(kMmaWarps * 32),
                                  0, pdl, stream, p);
}

/* The instantiation for the filters (NJ) and the blocks per SM the tile asks for. */
template <bool kI8, bool kPool>
cudaError_t launch_mma_for(const FirstParams &p, bool two_blocks, bool pdl, cudaStream_t stream)
{
    if (p.out_c_pad <= 16)
        return launch_mma<kI8, 2, kPool, kI8 ? 3 : 2>(p, pdl, stream);
    return two_blocks ? launch_mma<kI8, 4, kPool, 2>(p, pdl, stream)
                      : launch_mma<kI8, 4, kPool, 1>(p, pdl, stream);
}

/* Checks of the tensor-core kernel on top of gr_conv_first_launch's; the patch geometry. Tile
 * GR_CONV_TILE_STREAM_SMALL: the same kernel bounded to 2 blocks per SM, for 17-32 filters only
 * (with 16 the one kernel already runs 2 or 3). */
cudaError_t mma_first(FirstParams &p, const gr_conv_args *a, bool is_i8, bool pdl,
                      cudaStream_t stream, bool check_only)
{
    int dev = 0, major = 0;
    GR_CUDA_TRY(cudaGetDevice(&dev));
    GR_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    if (major < 8) {
        gr_kernels_record_failure(__FILE__, __LINE__, "compute capability check",
                                  "the tensor-core first layer needs sm_80+ (mma.sync)");
        return cudaErrorNotSupported;
    }
    /* 3x3 layers, strides <= 2, at most 32 filters (their B fragments in registers) */
    GR_ARG_CHECK(a->ksize == 3 && a->stride <= kMmaMaxStride && p.out_c_pad <= 32);
    const bool two_blocks = a->tile_config == GR_CONV_TILE_STREAM_SMALL;
    GR_ARG_CHECK(!two_blocks || p.out_c_pad > 16);
    if (!p.pool) {
        /* unpooled: the grid of 2x2 conv-pixel blocks the kernel maps like pooling windows */
        p.pool_stride = 2;
        p.pool_offset = 0;
        p.pool_h = gr_ceil_div(p.out_h, 2);
        p.pool_w = gr_ceil_div(p.out_w, 2);
    }
    GR_ARG_CHECK(p.pool_stride <= kMmaMaxStride);
    const int conv_h = (kMmaTileH - 1) * p.pool_stride + 2;
    const int conv_w = (kMmaTileW - 1) * p.pool_stride + 2;
    p.patch_h = (conv_h - 1) * a->stride + 3;
    p.patch_w = (conv_w - 1) * a->stride + 3;
    /* a row pitch of 8 (mod 32) words: the 3 tap rows a warp reads start in different banks */
    const int words = p.patch_w * (is_i8 ? 1 : 2);
    p.pitch = words + ((8 - words % 32) + 32) % 32;
    GR_ARG_CHECK(p.patch_h <= kMmaMaxPatchH && p.pitch <= kMmaMaxPitch);
    /* the raw rows: from the row's first byte rounded down to 4, its pixels' bytes */
    p.raw_words = (3 + p.patch_w * a->in_c_stride + 3) / 4;
    GR_ARG_CHECK(p.patch_h * p.raw_words <= kMmaRawWords);
    /* the float-reciprocal divisions of the fill and the prefetch: exact below 2^16 */
    GR_ARG_CHECK(p.patch_h * p.patch_w < (1 << 16) && p.patch_h * p.raw_words < (1 << 16));
    /* byte offsets of every patch row, the tiles' overhang included, fit an int */
    GR_ARG_CHECK((static_cast<long long>(a->batch) * a->in_h + p.patch_h) * a->in_w * a->in_c_stride +
                     p.patch_w * a->in_c_stride < INT_MAX);
    p.in_bytes = a->batch * a->in_h * a->in_w * a->in_c_stride;
    /* 4-byte copies (cp.async) need a 4-byte aligned input */
    GR_ARG_CHECK(check_only || reinterpret_cast<uintptr_t>(a->in) % 4 == 0);
    if (check_only)
        return cudaSuccess;
    p.batch = a->batch;
    if (is_i8)
        return p.pool ? launch_mma_for<true, true>(p, two_blocks, pdl, stream)
                      : launch_mma_for<true, false>(p, two_blocks, pdl, stream);
    return p.pool ? launch_mma_for<false, true>(p, two_blocks, pdl, stream)
                  : launch_mma_for<false, false>(p, two_blocks, pdl, stream);
}

int round_up(int v, int to)
{
    return (v + to - 1) / to * to;
}

template <typename Math, int P>
cudaError_t launch(const FirstParams &p, int batch, bool pdl, cudaStream_t stream)
{
    const int map_h = P == 2 ? p.pool_h : p.out_h, map_w = P == 2 ? p.pool_w : p.out_w;
    const dim3 grid(static_cast<unsigned>(gr_ceil_div(map_w, kTile)),
                    static_cast<unsigned>(gr_ceil_div(map_h, kTile)), static_cast<unsigned>(batch));
    return gr_conv::launch_kernel(k_conv_first<Math, P>, grid, dim3(kThreads), 0, pdl, stream, p);
}

} // namespace

cudaError_t gr_conv_first_launch(const gr_conv_args *a, bool is_i8, cudaStream_t stream, bool check_only)
{
    GR_ARG_CHECK(a->in_c >= 1 && a->in_c <= kMaxC && a->ksize >= 1 && a->ksize <= kMaxK);
    GR_ARG_CHECK(a->stride > 0 && a->pad >= 0 && a->pad <= kMaxK);
    GR_ARG_CHECK(a->batch > 0 && a->in_h > 0 && a->in_w > 0 && a->out_c > 0 && a->out_c <= 65536);
    GR_ARG_CHECK(a->in_c_offset >= 0 && a->in_c_offset + a->in_c <= a->in_c_stride);
    GR_ARG_CHECK(a->out_kind == (is_i8 ? GR_CONV_OUT_I8 : GR_CONV_OUT_F16));
    GR_ARG_CHECK(a->activation >= GR_CONV_ACT_LINEAR && a->activation < GR_CONV_ACT_COUNT);
    /* the pointers are not known yet when the runtime only checks a plan */
    GR_ARG_CHECK(!is_i8 || ((check_only || a->mul != nullptr) && a->in_scale > 0.0f));
    GR_ARG_CHECK(!a->fp16_accumulate && a->split_k <= 1);
    /* the SIMT kernel, or the tensor-core one (tile 5; tile 6: at 2 blocks per SM) */
    GR_ARG_CHECK(a->tile_config == 0 || a->tile_config == GR_CONV_TILE_STREAM ||
                 a->tile_config == GR_CONV_TILE_STREAM_SMALL);
    const int out_gran = is_i8 ? 16 : 8;
    const int out_h = gr_conv_out_dim(a->in_h, a->ksize, a->stride, a->pad);
    const int out_w = gr_conv_out_dim(a->in_w, a->ksize, a->stride, a->pad);
    GR_ARG_CHECK(out_h > 0 && out_w > 0);
    FirstParams p = {};
    p.in = static_cast<const unsigned char *>(a->in);
    p.weights = a->weights;
    p.mul = a->mul;
    p.bias = a->bias;
    p.out = a->out;
    p.in_h = a->in_h;
    p.in_w = a->in_w;
    p.in_c = a->in_c;
    p.in_c_stride = a->in_c_stride;
    p.in_c_offset = a->in_c_offset;
    p.cin_pad = round_up(a->in_c, is_i8 ? 16 : 8);
    p.out_h = out_h;
    p.out_w = out_w;
    p.out_c = a->out_c;
    p.out_c_pad = round_up(a->out_c, out_gran);
    p.out_c_stride = a->out_c_stride;
    p.out_c_offset = a->out_c_offset;
    GR_ARG_CHECK(p.out_c_offset >= 0 && p.out_c_offset % out_gran == 0 &&
                 p.out_c_stride % out_gran == 0 && p.out_c_offset + p.out_c_pad <= p.out_c_stride);
    /* 16-byte stores of 16 (i8) or 8 (f16) channels: the slice must start on 16 bytes. */
    GR_ARG_CHECK(is_i8 || p.out_c_offset % 8 == 0);
    p.ksize = a->ksize;
    p.stride = a->stride;
    p.pad = a->pad;
    p.activation = a->activation;
    p.out_inv_scale = a->out_inv_scale;
    p.in_scale = a->in_scale;
    int conv_span = kTile; /* conv rows (and columns) a block's output tile needs */
    if (a->pool_size != 0) {
        GR_ARG_CHECK(a->pool_size == 2 && (a->pool_stride == 1 || a->pool_stride == 2));
        GR_ARG_CHECK(a->pool_pad >= 0 && a->pool_pad <= 2);
        p.pool = 1;
        p.pool_stride = a->pool_stride;
        p.pool_offset = -a->pool_pad / 2;
        p.pool_h = (out_h + a->pool_pad - 2) / a->pool_stride + 1;
        p.pool_w = (out_w + a->pool_pad - 2) / a->pool_stride + 1;
        GR_ARG_CHECK(p.pool_h > 0 && p.pool_w > 0);
        conv_span = (kTile - 1) * a->pool_stride + 2;
    }
    const bool pdl = a->pdl && gr_conv_pdl_supported();
    if (a->tile_config != 0)
        return mma_first(p, a, is_i8, pdl, stream, check_only);
    p.patch_h = p.patch_w = (conv_span - 1) * a->stride + a->ksize;
    GR_ARG_CHECK(p.patch_h * p.patch_w <= kMaxPatch);
    GR_ARG_CHECK(p.out_c_pad * a->ksize * a->ksize <= kMaxWeights);
    GR_ARG_CHECK(static_cast<long long>(a->batch) * a->in_h * a->in_w * a->in_c_stride < INT_MAX);
    GR_ARG_CHECK(a->batch <= 65535);
    if (check_only)
        return cudaSuccess;
    const int b = a->batch;
    if (is_i8)
        return p.pool ? launch<I8Math, 2>(p, b, pdl, stream) : launch<I8Math, 1>(p, b, pdl, stream);
    return p.pool ? launch<F16Math, 2>(p, b, pdl, stream) : launch<F16Math, 1>(p, b, pdl, stream);
}

bool gr_conv_pdl_supported()
{
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return major >= 9;
}
