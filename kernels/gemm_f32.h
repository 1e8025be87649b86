/* FP32 convolution through cuBLAS: Darknet's im2col (NCHW f32) + SGEMM + a bias/activation
 * epilogue kernel. cuBLAS's default math mode gives exact FP32 products (IEEE float FMA in some
 * order); TF32 tensor-op math is an opt-in speed mode.
 *
 * Layouts: input [batch][in_c][in_h][in_w], weights Darknet's [out_c][in_c][ksize][ksize] with BN
 * folded in, output [batch][out_c][out_h][out_w], all dense f32. The im2col workspace holds
 * batch * (in_c*ksize*ksize) * (out_h*out_w) floats, rows ordered (ci, ky, kx) as in Darknet;
 * it is not used (and may be NULL) for a 1x1 stride-1 unpadded conv, which reads the input
 * directly. Plain C11 header. */
#ifndef GR_KERNELS_GEMM_F32_H
#define GR_KERNELS_GEMM_F32_H

#include <stddef.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gr_conv_f32_args {
    int batch;
    int in_c, in_h, in_w;
    int out_c;
    int ksize, stride, pad;
    const float *in;      /* device */
    const float *weights; /* device, [out_c][in_c][ksize][ksize] */
    const float *bias;    /* device, [out_c], or NULL */
    float *out;           /* device */
    float *workspace;     /* device, gr_conv_f32_workspace_floats() floats */
    int activation;       /* GR_CONV_ACT_* of kernels/conv.h (= gr_activation values) */
    int tf32;             /* 1: CUBLAS_TF32_TENSOR_OP_MATH, 0: CUBLAS_DEFAULT_MATH (exact FP32) */
} gr_conv_f32_args;

/* Floats of im2col workspace the conv needs (0 for a 1x1 / stride 1 / pad 0 conv), or 0 with
 * *ok = 0 when the shape is invalid or too large. */
size_t gr_conv_f32_workspace_floats(const gr_conv_f32_args *args, int *ok);

/* im2col of `batch` NCHW images into col[b][(ci*ksize + ky)*ksize + kx][oy*out_w + ox]. */
cudaError_t gr_launch_im2col_f32(const float *in, int batch, int in_c, int in_h, int in_w,
                                 int ksize, int stride, int pad, float *col, cudaStream_t stream);

/* In place on NCHW data: x = act(x + bias[c]) (bias NULL = 0). */
cudaError_t gr_launch_bias_act_f32(float *data, const float *bias, int batch, int channels, int hw,
                                   int activation, cudaStream_t stream);

/* The whole conv on `stream`, using the caller's handle (its stream and math mode are set here).
 * Returns CUBLAS_STATUS_SUCCESS; a cuBLAS failure's status; CUBLAS_STATUS_INVALID_VALUE for bad
 * arguments; CUBLAS_STATUS_EXECUTION_FAILED when a kernel launch failed, with the CUDA error in
 * *cuda_error (which may be NULL; set to cudaSuccess otherwise). Details of a failure are in
 * gr_kernels_last_failure(). */
cublasStatus_t gr_launch_conv_f32(cublasHandle_t handle, const gr_conv_f32_args *args,
                                  cudaStream_t stream, cudaError_t *cuda_error);

#ifdef __cplusplus
}
#endif

#endif
