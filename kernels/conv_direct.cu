/* Direct convolution (grouped, depthwise, dilated, stride_x != stride_y): kernels/conv_direct.h
 * is the contract. FP32: a block covers 256 consecutive output values of one (image, filter)
 * plane, so its threads share the filter's weights (broadcast reads) and read neighbouring input
 * columns. FP16 / INT8: consecutive threads take consecutive output channels of one pixel
 * (channels-last), so a depthwise conv's threads read neighbouring input channels. */
#include <climits>
#include <cstdint>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/common.cuh"
#include "kernels/conv.h"
#include "kernels/conv_direct.h"
#include "kernels/conv_internal.cuh"
#include "ops/activation.h"

namespace {

constexpr int kThreads = 256;

/* One (image, filter) plane: its outputs from blockIdx.x on, a grid stride apart. */
__device__ void conv_direct_plane(const gr_conv_direct_f32_args &a, int plane)
{
    const int n = plane / a.out_c, oc = plane - n * a.out_c;
    const int out_hw = a.out_h * a.out_w;
    const int in_per_group = a.in_c / a.groups, out_per_group = a.out_c / a.groups;
    const int first_in = (oc / out_per_group) * in_per_group;
    const float *w = a.weights + static_cast<size_t>(oc) * in_per_group * a.ksize * a.ksize;
    const float *image = a.in + static_cast<size_t>(n) * a.in_image_stride;
    for (int i = blockIdx.x * kThreads + threadIdx.x; i < out_hw; i += gridDim.x * kThreads) {
        const int oy = i / a.out_w, ox = i - oy * a.out_w;
        float sum = 0.0f;
        for (int ic = 0; ic < in_per_group; ++ic) {
            const float *src = image + static_cast<size_t>(first_in + ic) * a.in_h * a.in_w;
            const float *wk = w + static_cast<size_t>(ic) * a.ksize * a.ksize;
            for (int ky = 0; ky < a.ksize; ++ky) {
                const int iy = oy * a.stride_y + (ky - a.pad) * a.dilation;
                if (iy < 0 || iy >= a.in_h)
                    continue;
                for (int kx = 0; kx < a.ksize; ++kx) {
                    const int ix = ox * a.stride_x + (kx - a.pad) * a.dilation;
                    if (ix >= 0 && ix < a.in_w)
                        sum = __fadd_rn(sum, __fmul_rn(wk[ky * a.ksize + kx],
                                                       src[static_cast<size_t>(iy) * a.in_w + ix]));
                }
            }
        }
        const float y = __fadd_rn(sum, a.bias ? a.bias[oc] : 0.0f);
        a.out[static_cast<size_t>(n) * a.out_image_stride + static_cast<size_t>(oc) * out_hw + i] =
            gr_act_epilogue(y, static_cast<gr_activation>(a.activation));
    }
}

__global__ void k_conv_direct_f32(gr_conv_direct_f32_args a)
{
    const int planes = a.batch * a.out_c; /* image * out_c + filter */
    for (int plane = blockIdx.y; plane < planes; plane += gridDim.y)
        conv_direct_plane(a, plane);
}

/* ---- FP16 / INT8 on channels-last tensors ------------------------------------------------ */

/* The arithmetic of one precision: the stored input value as an operand, the weight, the
 * accumulation and the epilogue's first step (conv_direct.h). */
struct I8Direct {
    using Acc = int;
    static __device__ int input(const gr_conv_direct_nhwc_args &a, size_t at)
    {
        if (!a.in_u8)
            return static_cast<const int8_t *>(a.in)[at];
        const float v = static_cast<const unsigned char *>(a.in)[at];
        const int q = __float2int_rn(__fdiv_rn(__fdiv_rn(v, 255.0f), a.in_scale));
        return q < -127 ? -127 : (q > 127 ? 127 : q);
    }
    static __device__ int weight(const void *w, size_t at)
    {
        return static_cast<const int8_t *>(w)[at];
    }
    static __device__ int add(int acc, int w, int x) { return acc + w * x; }
    static __device__ float bias_step(const gr_conv_direct_nhwc_args &a, int acc, int oc)
    {
        return __fmaf_rn(static_cast<float>(acc), a.mul[oc], a.bias ? a.bias[oc] : 0.0f);
    }
};

struct F16Direct {
    using Acc = float;
    static __device__ float input(const gr_conv_direct_nhwc_args &a, size_t at)
    {
        if (!a.in_u8)
            return __half2float(static_cast<const __half *>(a.in)[at]);
        const float v = static_cast<const unsigned char *>(a.in)[at];
        return __half2float(__float2half_rn(__fdiv_rn(v, 255.0f)));
    }
    static __device__ float weight(const void *w, size_t at)
    {
        return __half2float(static_cast<const __half *>(w)[at]);
    }
    static __device__ float add(float acc, float w, float x)
    {
        return __fadd_rn(acc, __fmul_rn(w, x));
    }
    static __device__ float bias_step(const gr_conv_direct_nhwc_args &a, float acc, int oc)
    {
        return __fadd_rn(acc, a.bias ? a.bias[oc] : 0.0f);
    }
};

__host__ __device__ inline int direct_out_c_pad(const gr_conv_direct_nhwc_args &a)
{
    if (a.out_kind == GR_CONV_OUT_F32_NCHW)
        return a.out_c;
    const int granule = a.out_kind == GR_CONV_OUT_I8 ? 16 : 8;
    return (a.out_c + granule - 1) / granule * granule;
}

/* Output (n, oy, ox, oc)'s sum over its group's input channels, then ky, then kx. */
template <typename M>
__device__ typename M::Acc direct_sum(const gr_conv_direct_nhwc_args &a, int n, int oy, int ox,
                                      int oc)
{
    const int in_per_group = a.in_c / a.groups, out_per_group = a.out_c / a.groups;
    const int first_in = (oc / out_per_group) * in_per_group;
    const size_t taps = static_cast<size_t>(a.ksize) * a.ksize;
    typename M::Acc acc = 0;
    for (int ic = 0; ic < in_per_group; ++ic) {
        const size_t w0 = (static_cast<size_t>(oc) * in_per_group + ic) * taps;
        const int channel = a.in_c_offset + first_in + ic;
        for (int ky = 0; ky < a.ksize; ++ky) {
            const int iy = oy * a.stride_y + (ky - a.pad) * a.dilation;
            if (iy < 0 || iy >= a.in_h)
                continue;
            const size_t row = (static_cast<size_t>(n) * a.in_h + iy) * a.in_w;
            for (int kx = 0; kx < a.ksize; ++kx) {
                const int ix = ox * a.stride_x + (kx - a.pad) * a.dilation;
                if (ix < 0 || ix >= a.in_w)
                    continue;
                const size_t at = (row + ix) * a.in_c_stride + channel;
                acc = M::add(acc, M::weight(a.weights, w0 + ky * a.ksize + kx), M::input(a, at));
            }
        }
    }
    return acc;
}

/* y (activated) or 0 for a padding channel, converted and stored where out_kind says. */
__device__ void direct_store(const gr_conv_direct_nhwc_args &a, int n, int oy, int ox, int oc,
                             float y)
{
    if (a.out_kind == GR_CONV_OUT_F32_NCHW) {
        const size_t channel = static_cast<size_t>(n) * a.out_c_stride + a.out_c_offset + oc;
        static_cast<float *>(a.out)[(channel * a.out_h + oy) * a.out_w + ox] = y;
        return;
    }
    const size_t at = ((static_cast<size_t>(n) * a.out_h + oy) * a.out_w + ox) * a.out_c_stride +
                      a.out_c_offset + oc;
    if (a.out_kind == GR_CONV_OUT_I8)
        static_cast<unsigned char *>(a.out)[at] = static_cast<unsigned char>(
            oc < a.out_c ? gr_conv_i8_bits(y, a.out_inv_scale) : 0u);
    else
        static_cast<__half *>(a.out)[at] =
            oc < a.out_c ? __float2half_rn(y) : __ushort_as_half(static_cast<unsigned short>(0));
}

template <typename M> __device__ void conv_direct_nhwc(const gr_conv_direct_nhwc_args &a)
{
    const int c_pad = direct_out_c_pad(a);
    const size_t total = static_cast<size_t>(a.batch) * a.out_h * a.out_w * c_pad;
    const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += step) {
        const int oc = static_cast<int>(i % c_pad);
        const size_t pixel = i / c_pad;
        const int ox = static_cast<int>(pixel % a.out_w);
        const int oy = static_cast<int>((pixel / a.out_w) % a.out_h);
        const int n = static_cast<int>(pixel / a.out_w / a.out_h);
        float y = 0.0f;
        if (oc < a.out_c)
            y = gr_conv_activate(M::bias_step(a, direct_sum<M>(a, n, oy, ox, oc), oc),
                                 a.activation);
        direct_store(a, n, oy, ox, oc, y);
    }
}

__global__ void k_conv_direct_f16(gr_conv_direct_nhwc_args a) { conv_direct_nhwc<F16Direct>(a); }

__global__ void k_conv_direct_i8(gr_conv_direct_nhwc_args a) { conv_direct_nhwc<I8Direct>(a); }

/* Argument checks shared by the FP16 and INT8 launchers. */
cudaError_t check_nhwc(const gr_conv_direct_nhwc_args *a, bool is_i8)
{
    GR_ARG_CHECK(a != nullptr && a->in != nullptr && a->weights != nullptr && a->out != nullptr);
    GR_ARG_CHECK(!is_i8 || a->mul != nullptr);
    GR_ARG_CHECK(a->batch > 0 && a->in_c > 0 && a->in_h > 0 && a->in_w > 0 && a->out_c > 0);
    GR_ARG_CHECK(a->out_h > 0 && a->out_w > 0 && a->ksize > 0 && a->pad >= 0);
    GR_ARG_CHECK(a->stride_x > 0 && a->stride_y > 0 && a->dilation > 0 && a->groups > 0);
    GR_ARG_CHECK(a->in_c % a->groups == 0 && a->out_c % a->groups == 0);
    GR_ARG_CHECK(a->in_c_offset >= 0 && a->in_c_stride >= a->in_c_offset + a->in_c);
    GR_ARG_CHECK(a->out_kind == GR_CONV_OUT_I8 || a->out_kind == GR_CONV_OUT_F16 ||
                 a->out_kind == GR_CONV_OUT_F32_NCHW);
    /* NHWC: the padded channels of a pixel; NCHW: the channels of an image (unpadded) */
    GR_ARG_CHECK(a->out_c_offset >= 0 && a->out_c_stride >= a->out_c_offset + direct_out_c_pad(*a));
    GR_ARG_CHECK(!a->in_u8 || !is_i8 || a->in_scale > 0.0f);
    GR_ARG_CHECK(a->activation >= GR_CONV_ACT_LINEAR && a->activation < GR_CONV_ACT_COUNT);
    return cudaSuccess;
}

} // namespace

extern "C" cudaError_t gr_launch_conv_direct_f16(const gr_conv_direct_nhwc_args *a,
                                                 cudaStream_t stream)
{
    const cudaError_t invalid = check_nhwc(a, false);
    if (invalid != cudaSuccess)
        return invalid; /* the reason is recorded */
    const long long total = static_cast<long long>(a->batch) * a->out_h * a->out_w *
                            direct_out_c_pad(*a);
    const long long blocks = (total + kThreads - 1) / kThreads;
    k_conv_direct_f16<<<static_cast<unsigned>(blocks < (1 << 20) ? blocks : (1 << 20)), kThreads,
                        0, stream>>>(*a);
    GR_LAUNCH_CHECK();
    return cudaSuccess;
}

extern "C" cudaError_t gr_launch_conv_direct_i8(const gr_conv_direct_nhwc_args *a,
                                                cudaStream_t stream)
{
    const cudaError_t invalid = check_nhwc(a, true);
    if (invalid != cudaSuccess)
        return invalid; /* the reason is recorded */
    const long long total = static_cast<long long>(a->batch) * a->out_h * a->out_w *
                            direct_out_c_pad(*a);
    const long long blocks = (total + kThreads - 1) / kThreads;
    k_conv_direct_i8<<<static_cast<unsigned>(blocks < (1 << 20) ? blocks : (1 << 20)), kThreads,
                       0, stream>>>(*a);
    GR_LAUNCH_CHECK();
    return cudaSuccess;
}

extern "C" cudaError_t gr_launch_conv_direct_f32(const gr_conv_direct_f32_args *a,
                                                 cudaStream_t stream)
{
    GR_ARG_CHECK(a != nullptr && a->in != nullptr && a->weights != nullptr && a->out != nullptr);
    GR_ARG_CHECK(a->batch > 0 && a->in_c > 0 && a->in_h > 0 && a->in_w > 0 && a->out_c > 0);
    GR_ARG_CHECK(a->out_h > 0 && a->out_w > 0 && a->ksize > 0 && a->pad >= 0);
    GR_ARG_CHECK(a->stride_x > 0 && a->stride_y > 0 && a->dilation > 0 && a->groups > 0);
    GR_ARG_CHECK(a->in_c % a->groups == 0 && a->out_c % a->groups == 0);
    GR_ARG_CHECK(static_cast<long long>(a->batch) * a->out_c <= INT_MAX);
    GR_ARG_CHECK(a->activation >= GR_CONV_ACT_LINEAR && a->activation < GR_CONV_ACT_COUNT);
    const int out_hw = a->out_h * a->out_w;
    const int blocks_x = (out_hw + kThreads - 1) / kThreads;
    const int planes = a->batch * a->out_c;
    dim3 grid(static_cast<unsigned>(blocks_x < 1024 ? blocks_x : 1024),
              static_cast<unsigned>(planes < 65535 ? planes : 65535));
    k_conv_direct_f32<<<grid, kThreads, 0, stream>>>(*a);
    GR_LAUNCH_CHECK();
    return cudaSuccess;
}
