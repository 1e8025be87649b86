/* FP32 direct convolution for what the GEMM paths do not fit: grouped and depthwise convs with few
 * input channels per group, dilation, stride_x != stride_y (AlexeyAB's [convolutional] keys). One
 * thread per output value sums its taps in Darknet's order (input channel of the group, then ky,
 * then kx) with IEEE-rounded multiplies and adds (no fma), the order and arithmetic of the CPU
 * reference ops/conv.c, then adds the bias and applies the activation (ops/activation.h's
 * gr_act_epilogue). Taps outside the input are skipped (Darknet adds exact zeros there).
 *
 * Layouts: NCHW f32. Image n's input starts at in + n*in_image_stride, its output at out +
 * n*out_image_stride (a channel slice of a concat buffer: the caller offsets the pointers);
 * weights Darknet's [out_c][in_c/groups][ksize][ksize] with BN folded in; bias [out_c] or NULL.
 * Tap (ky, kx) of output (oy, ox) reads input (oy*stride_y + (ky - pad)*dilation,
 * ox*stride_x + (kx - pad)*dilation). Plain C11 header; the launcher neither allocates nor
 * synchronizes. */
#ifndef GR_KERNELS_CONV_DIRECT_H
#define GR_KERNELS_CONV_DIRECT_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gr_conv_direct_f32_args {
    int batch;
    int in_c, in_h, in_w;
    int out_c, out_h, out_w;
    int ksize, stride_x, stride_y, pad, dilation, groups;
    size_t in_image_stride, out_image_stride; /* floats from one image to the next */
    const float *in, *weights, *bias;         /* device; bias may be NULL */
    float *out;                               /* device */
    int activation;                           /* a gr_activation value (kernels/conv.h codes) */
} gr_conv_direct_f32_args;

/* cudaErrorInvalidValue for inconsistent arguments (the reason in gr_kernels_last_failure()),
 * else the launch's cudaGetLastError(). */
cudaError_t gr_launch_conv_direct_f32(const gr_conv_direct_f32_args *a, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
