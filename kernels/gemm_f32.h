/* FP32 convolution: Darknet's im2col (NCHW f32), then either cuBLAS SGEMM + a bias/activation
 * epilogue kernel (GR_CONV_F32_SGEMM), or the 3xTF32 tensor-core GEMM with the epilogue fused
 * (GR_CONV_F32_TF32X3, sm_80+, kernels/gemm_tf32x3.cu). cuBLAS's default math mode gives exact FP32
 * products (IEEE float FMA in some order); 3xTF32 splits each operand into two TF32 halves and
 * reaches FP32-level accuracy (not bit-identical: another summation order); cuBLAS's TF32
 * tensor-op math (`tf32`) is an opt-in speed mode with 10-bit mantissas.
 *
 * Layouts: input [batch][in_c][in_h][in_w], weights Darknet's [out_c][in_c][ksize][ksize] with BN
 * folded in, output [batch][out_c][out_h][out_w], all dense f32. The im2col workspace holds
 * batch * (in_c*ksize*ksize) * (out_h*out_w) floats, rows ordered (ci, ky, kx) as in Darknet;
 * it is not used (and may be NULL) for a 1x1 stride-1 unpadded conv, which reads the input
 * directly.
 *
 * GR_CONV_F32_DIRECT3X3 (kernels/conv3x3_f32.cu, any GPU) computes a 3x3 / stride 1 / pad 1 conv
 * without im2col, in FP32 FMAs on the CUDA cores (exact FP32, Darknet's summation order), and can
 * apply Darknet's 2x2 / stride 2 maxpool in its epilogue (pool_size 2): then out is the pooled map,
 * [batch][out_c][(in_h + pool_pad - 2)/2 + 1][(in_w + pool_pad - 2)/2 + 1]. Plain C11 header. */
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
    int tf32;             /* SGEMM: 1 CUBLAS_TF32_TENSOR_OP_MATH, 0 CUBLAS_DEFAULT_MATH */
    int algo;             /* GR_CONV_F32_SGEMM (0, the default), _TF32X3, _TF32X3_IMPLICIT or
                             _DIRECT3X3 */
    int tile;             /* TF32X3: GR_TF32X3_TILE_*, 0 = automatic */
    /* DIRECT3X3 only (0 elsewhere): a fused maxpool, Darknet's size / stride / total padding;
     * pool_size 0 = none, else 2 / 2 / 0 or 1 */
    int pool_size, pool_stride, pool_pad;
    /* TF32X3 (im2col) only: split-K parts (0 or 1: none; gr_gemm_tf32x3_auto_splits); the
     * parts' sums go to the workspace after the im2col matrix */
    int splits;
} gr_conv_f32_args;

enum {
    GR_CONV_F32_SGEMM = 0,  /* cuBLAS SGEMM (handle required) + k_bias_act_f32 */
    GR_CONV_F32_TF32X3 = 1, /* 3xTF32 GEMM, fused epilogue; sm_80+ (else cudaErrorNotSupported) */
    GR_CONV_F32_TF32X3_IMPLICIT = 2, /* the same GEMM reading the input through an implicit
                                        im2col: no workspace, no im2col pass (1x1 stride-1 convs
                                        run as TF32X3, which reads the input directly too) */
    GR_CONV_F32_DIRECT3X3 = 3, /* 3x3 / stride 1 / pad 1 only, FP32 FMAs, maxpool fusable; no
                                  workspace, no handle, any GPU */
};

/* The 3xTF32 GEMM's block tiles (out channels x columns), for tests and benchmarks to force one. */
enum {
    GR_TF32X3_TILE_AUTO = 0,
    GR_TF32X3_TILE_16x256 = 1,
    GR_TF32X3_TILE_32x256 = 2,
    GR_TF32X3_TILE_64x128 = 3,
    GR_TF32X3_TILE_128x128 = 4,
    GR_TF32X3_TILE_128x128_2 = 5, /* 128x128 compiled for 2 blocks per SM (not chosen by AUTO) */
    GR_TF32X3_TILE_128x128_K32 = 6, /* 128x128, K 32 per stage, 4 stages (AUTO for out_c > 64) */
    GR_TF32X3_TILE_64x128_K32 = 7,  /* 64x128, K 32 per stage, 4 stages (not chosen by AUTO);
                                       6 and 7 run as 4 and 3 where a block cannot have their
                                       136 / 100 KiB of shared memory (sm_86, sm_89) */
    GR_TF32X3_TILES = 7
};

/* Floats of im2col workspace the conv needs (0 for a 1x1 / stride 1 / pad 0 conv, and for
 * GR_CONV_F32_TF32X3_IMPLICIT), or 0 with *ok = 0 when the shape is invalid or too large. */
size_t gr_conv_f32_workspace_floats(const gr_conv_f32_args *args, int *ok);

/* im2col of `batch` NCHW images into col[b][(ci*ksize + ky)*ksize + kx][oy*out_w + ox]. */
cudaError_t gr_launch_im2col_f32(const float *in, int batch, int in_c, int in_h, int in_w,
                                 int ksize, int stride, int pad, float *col, cudaStream_t stream);

/* In place on NCHW data: x = act(x + bias[c]) (bias NULL = 0). */
cudaError_t gr_launch_bias_act_f32(float *data, const float *bias, int batch, int channels, int hw,
                                   int activation, cudaStream_t stream);

/* out[b][n][p] = act(bias[n] + sum_k w[n][k] * col[b][k][p]) for b < batch, n < n_out, p < p, in
 * 3xTF32 (FP32-level accuracy) on tensor cores; w [n_out][k], col [batch][k][p], out
 * [batch][n_out][p], bias NULL = 0, activation GR_CONV_ACT_*, tile GR_TF32X3_TILE_* (0 = chosen
 * from the shape). Any alignment (16-byte copies where w/k and col/p allow them).
 * cudaErrorNotSupported (recorded) before sm_80, cudaErrorInvalidValue for bad arguments or k*p,
 * n_out*p or batch*p >= 2^31. */
cudaError_t gr_launch_gemm_tf32x3_f32(const float *w, const float *col, const float *bias,
                                      float *out, int n_out, int k, int p, int batch,
                                      int activation, int tile, cudaStream_t stream);

/* The same GEMM with K split into `splits` parts (1..GR_TF32X3_MAX_SPLITS, at most one per K
 * tile): each part's blocks write their raw sums to `partial` [splits][batch][n_out][p] (device,
 * gr_conv_f32_workspace_floats counts it), then one pass adds the parts in order, the bias and the
 * activation (deterministic). splits 1: gr_launch_gemm_tf32x3_f32, partial unused. Fills the
 * last wave of a large-K GEMM whose blocks do not divide evenly over the SMs. */
#define GR_TF32X3_MAX_SPLITS 8
cudaError_t gr_launch_gemm_tf32x3_splitk_f32(const float *w, const float *col, const float *bias,
                                             float *out, int n_out, int k, int p, int batch,
                                             int activation, int tile, int splits, float *partial,
                                             cudaStream_t stream);

/* The split gr_conv_f32_args.splits should use on sm_count SMs for an automatic tile: 2 or 3 where
 * it shortens the wave-quantised time by 6% or more (the 13x13 layers with K >= 2,048 at batch
 * 64), else 1. */
int gr_gemm_tf32x3_auto_splits(int n_out, int k, int columns, int sm_count);

/* The same GEMM on a conv: col is read from `in` [batch][in_c][in_h][in_w] through an implicit
 * im2col (4-byte copies, zero outside the image), out [batch][out_c][out_h][out_w], w
 * [out_c][in_c][ksize][ksize]. Errors as gr_launch_gemm_tf32x3_f32. */
cudaError_t gr_launch_conv_tf32x3_f32(const float *in, const float *w, const float *bias,
                                      float *out, int batch, int in_c, int in_h, int in_w,
                                      int out_c, int ksize, int stride, int pad, int activation,
                                      int tile, cudaStream_t stream);

/* 1 when GR_CONV_F32_DIRECT3X3 takes the conv (ksize 3, stride 1, pad 1, batch <= 65535, the
 * pool none or 2 / 2 / padding 0..1), else 0. Pure host code. */
int gr_conv_f32_direct3x3_fits(const gr_conv_f32_args *args);

/* 1 where DIRECT3X3 fits and measured faster than im2col + 3xTF32 + a separate maxpool (the
 * narrow early layers; the engine's rule with f32_algo AUTO), else 0. */
int gr_conv_f32_direct3x3_preferred(const gr_conv_f32_args *args);

/* The map DIRECT3X3 writes: in_h x in_w, or the fused pool's. */
void gr_conv_f32_direct3x3_out_dims(const gr_conv_f32_args *args, int *out_h, int *out_w);

/* The DIRECT3X3 conv on `stream` (gr_launch_conv_f32 calls it); cudaErrorInvalidValue (recorded)
 * when it does not fit or a pointer is NULL. */
cudaError_t gr_launch_conv_direct3x3_f32(const gr_conv_f32_args *args, cudaStream_t stream);

/* cudaSuccess when the current device runs the 3xTF32 GEMM (sm_80+), else cudaErrorNotSupported
 * with the reason recorded (gr_kernels_last_failure); *device (may be NULL): the current device. */
cudaError_t gr_gemm_tf32x3_check_device(int *device);

/* The tile GR_TF32X3_TILE_AUTO picks for n_out rows, `columns` (= batch * p) columns, and how many
 * blocks (one per SM at a time on the 128x128 tile) it launches. */
int gr_gemm_tf32x3_auto_tile(int n_out, int columns, int sm_count);
long long gr_gemm_tf32x3_blocks(int n_out, int columns, int sm_count);

/* The whole conv on `stream`. SGEMM: with the caller's handle (its stream and math mode are set
 * here); TF32X3: the handle is not used (may be NULL), im2col + one fused GEMM kernel;
 * TF32X3_IMPLICIT and DIRECT3X3: one kernel.
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
