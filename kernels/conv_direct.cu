/* FP32 direct convolution (grouped, depthwise, dilated, stride_x != stride_y): kernels/conv_direct.h
 * is the contract. A block covers 256 consecutive output values of one (image, filter) plane, so
 * its threads share the filter's weights (broadcast reads) and read neighbouring input columns. */
#include <climits>

#include <cuda_runtime.h>

#include "kernels/common.cuh"
#include "kernels/conv.h"
#include "kernels/conv_direct.h"
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

} // namespace

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
