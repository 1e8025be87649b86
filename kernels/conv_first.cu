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
 * filters' weights sit in shared memory too. */
#include <cfloat>
#include <climits>
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
};

/* INT8: words of 4 quantized channels, dp4a, int32 sums. */
struct I8Math {
    using Acc = int;
    using Word = int;
    static constexpr bool is_i8 = true;
    static __device__ int lut_entry(int v, float s)
    {
        int q = __float2int_rn(((float)v / 255.0f) / s); /* the quantize node's formula */
        return q < -127 ? -127 : (q > 127 ? 127 : q);
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
        return __half2float(__float2half_rn((float)v / 255.0f));
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
                const float v = gr_conv_activate(p.mul ? fmaf(a, p.mul[n], b) : a + b, p.activation);
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
    GR_ARG_CHECK(a->activation >= GR_CONV_ACT_LINEAR && a->activation <= GR_CONV_ACT_LOGISTIC);
    /* the pointers are not known yet when the runtime only checks a plan */
    GR_ARG_CHECK(!is_i8 || ((check_only || a->mul != nullptr) && a->in_scale > 0.0f));
    GR_ARG_CHECK(!a->fp16_accumulate && a->split_k <= 1);
    /* this SIMT kernel, or the stream kernel's first-layer mode (conv_stream.cu) */
    GR_ARG_CHECK(a->tile_config == 0 || a->tile_config == GR_CONV_TILE_STREAM);
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
    if (a->tile_config == GR_CONV_TILE_STREAM) {
        GR_ARG_CHECK(a->in_c == 3 && a->ksize == 3);
        gr_conv::ConvParams c = {};
        c.in = a->in;
        c.weights = a->weights;
        c.mul = a->mul;
        c.bias = a->bias;
        c.out = a->out;
        c.in_h = p.in_h;
        c.in_w = p.in_w;
        c.in_c_stride = p.in_c_stride;
        c.in_c_offset = p.in_c_offset;
        c.cin_pad = p.cin_pad;
        c.out_h = out_h;
        c.out_w = out_w;
        c.out_c = p.out_c;
        c.out_c_pad = p.out_c_pad;
        c.out_c_stride = p.out_c_stride;
        c.out_c_offset = p.out_c_offset;
        c.ksize = p.ksize;
        c.stride = p.stride;
        c.pad = p.pad;
        const long long m = static_cast<long long>(a->batch) *
                            (p.pool ? 4LL * p.pool_h * p.pool_w : static_cast<long long>(out_h) * out_w);
        GR_ARG_CHECK(m < INT_MAX);
        GR_ARG_CHECK(static_cast<long long>(a->batch) * a->in_h * a->in_w * a->in_c_stride < INT_MAX);
        c.M = static_cast<int>(m);
        c.K = 27;
        c.k_tiles = 1;
        c.activation = p.activation;
        c.out_kind = a->out_kind;
        c.out_inv_scale = p.out_inv_scale;
        c.splits = c.kt_per_split = 1;
        c.pool = p.pool;
        c.pool_stride = p.pool_stride;
        c.pool_offset = p.pool_offset;
        c.pool_h = p.pool_h;
        c.pool_w = p.pool_w;
        c.in_u8 = 1;
        c.in_scale = a->in_scale;
        return gr_conv::stream_launch(c, is_i8, GR_CONV_TILE_STREAM, pdl, stream, check_only);
    }
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
