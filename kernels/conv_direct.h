/* Direct convolution for what the GEMM and tensor-core paths do not fit: grouped and depthwise
 * convs, dilation, stride_x != stride_y (AlexeyAB's [convolutional] keys).
 *
 * FP32 (gr_launch_conv_direct_f32): groups with few input channels per group, dilation and
 * unequal strides of fp32 engines. One thread per output value sums its taps in Darknet's order
 * (input channel of the group, then ky, then kx) with IEEE-rounded multiplies and adds (no fma),
 * the order and arithmetic of the CPU reference ops/conv.c, then adds the bias and applies the
 * activation (ops/activation.h's gr_act_epilogue). Taps outside the input are skipped (Darknet
 * adds exact zeros there).
 *
 * FP32 layouts: NCHW f32. Image n's input starts at in + n*in_image_stride, its output at out +
 * n*out_image_stride (a channel slice of a concat buffer: the caller offsets the pointers);
 * weights Darknet's [out_c][in_c/groups][ksize][ksize] with BN folded in; bias [out_c] or NULL.
 * Every precision: tap (ky, kx) of output (oy, ox) reads input (oy*stride_y + (ky - pad)*dilation,
 * ox*stride_x + (kx - pad)*dilation). Plain C11 header; the launchers neither allocate nor
 * synchronize. */
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

/* FP16 and INT8 (gr_launch_conv_direct_f16 / _i8): every grouped, dilated or stride_x != stride_y
 * conv of an fp16 / int8 engine (the tensor-core kernels take none of them), on the planner's
 * channels-last tensors as they are, so no conversion surrounds the conv. One thread per output
 * value, the channel fastest (neighbouring threads read neighbouring channels: coalesced for
 * depthwise), the arithmetic of planner/plan.h's epilogue spec, which the CPU emulation
 * (planner/exec.c) computes the same way:
 *   INT8: acc = sum q_in * q_w in int32 (exact, any order); y = fmaf((float)acc, mul[c], bias[c]);
 *   FP16: acc = f32 sum of half(w) * half(x), IEEE-rounded multiplies and adds (no fma) in
 *         Darknet's order (input channel of the group, ky, kx), the emulation's order; y = acc +
 *         bias[c]. Always f32 accumulation (the engine's fp16_accumulate does not apply here);
 *   then y = act(y) (ops/activation.h's gr_act_epilogue) and the output conversion of kernels/
 *   conv.h: i8 clamp(rint(y * out_inv_scale), -127, 127), f16 half_rn(y), f32 y.
 *
 * Layouts (planner/plan.h):
 *   - Input NHWC, element (n, y, x, ch) at ((n*in_h + y)*in_w + x)*in_c_stride + in_c_offset + ch:
 *     f16 bits (the f16 launcher) or i8 (the i8 launcher); with in_u8 the uint8 network input
 *     (value v means v / 255) quantized as it is read, i8 clamp(rint((v / 255.0f) / in_scale),
 *     -127, 127), f16 half_rn(v / 255.0f) (the quantize node's formulas).
 *   - Weights in Darknet's order [out_c][in_c/groups][ksize][ksize], dense, f16 bits or the
 *     planner's int8 values; mul [out_c] (INT8 only: s_in * s_w[c]), bias [out_c] or NULL.
 *   - Output GR_CONV_OUT_I8 / GR_CONV_OUT_F16: NHWC at ((n*out_h + y)*out_w + x)*out_c_stride +
 *     out_c_offset + ch for ch in [0, out_c_pad), out_c_pad = round_up(out_c, 16) (i8) or 8 (f16);
 *     channels in [out_c, out_c_pad) are written as 0 and nothing else is touched (conv.h's
 *     contract, so a conv can write a concat slice). GR_CONV_OUT_F32_NCHW: f32 (a fused
 *     dequantize: nothing rounded) at ((n*out_c_stride + out_c_offset + ch)*out_h + y)*out_w + x
 *     for ch in [0, out_c), conv.h's channel slice of an NCHW tensor (dense: out_c / 0). */
typedef struct gr_conv_direct_nhwc_args {
    int batch;
    int in_c, in_h, in_w;
    int in_c_stride, in_c_offset; /* elements per input pixel, the first channel's */
    int out_c, out_h, out_w;
    int out_c_stride, out_c_offset; /* per pixel (NHWC) or channels per image (NCHW) */
    int ksize, stride_x, stride_y, pad, dilation, groups;
    const void *in;          /* device: f16 bits, i8, or u8 with in_u8 */
    const void *weights;     /* device: f16 bits or i8, Darknet order */
    const float *mul, *bias; /* device: mul INT8 only; bias may be NULL */
    void *out;               /* device */
    int activation;          /* a gr_activation value (kernels/conv.h codes) */
    int out_kind;            /* gr_conv_out_kind (kernels/conv.h): I8, F16 or F32_NCHW */
    float out_inv_scale;     /* i8 output: 1.0f / s_out */
    int in_u8;               /* 1: `in` is the uint8 network input */
    float in_scale;          /* in_u8 with INT8: s_in */
} gr_conv_direct_nhwc_args;

cudaError_t gr_launch_conv_direct_f16(const gr_conv_direct_nhwc_args *a, cudaStream_t stream);
cudaError_t gr_launch_conv_direct_i8(const gr_conv_direct_nhwc_args *a, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
