/* The GEMM tactic of a tensor-core convolution: the same contract as kernels/conv.h (same
 * gr_conv_args, layouts, epilogue and rounding, fused 2x2 maxpool included), computed in three
 * steps instead of one kernel:
 *   1. im2col: the NHWC input to a dense [M][K] matrix (M = batch*out_h*out_w conv pixels in
 *      image order, K = ksize*ksize*in_c_pad in the weights' (ky, kx, c) order); skipped for a 1x1
 *      stride-1 conv whose input rows are already that matrix;
 *   2. one cuBLASLt matmul on tensor cores: C[M][ldc] = X[M][K] . W[N][K]^T, int8 x int8 -> int32
 *      or f16 x f16 -> f32 (C is the accumulator, as in the implicit-GEMM kernel);
 *   3. the epilogue kernel: multiplier, bias, activation, maxpool over the window, conversion.
 * For INT8 the result is bit-identical to gr_launch_conv_i8 (exact int32 sums, same epilogue
 * arithmetic); FP16 differs only by the order of the f32 sums.
 *
 * Where it pays: small feature maps with long K (13x13 layers at batch 1: the implicit GEMM has
 * few tiles there) and large batches, where cuBLASLt's kernels (Hopper wgmma, stream-K) outrun
 * the portable kernel. The runtime chooses per layer by measuring (tactic selection).
 *
 * Not supported (gr_conv_gemm_create answers cudaErrorNotSupported): in_u8 first layers,
 * fp16_accumulate, split_k/tile_config (they belong to the implicit-GEMM kernel). Plain C. */
#ifndef GR_KERNELS_CONV_GEMM_H
#define GR_KERNELS_CONV_GEMM_H

#include <stddef.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "kernels/conv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A conv shape planned for cuBLASLt: layouts, the matmul descriptor and the algorithm. Built once
 * per layer at engine build; the device pointers of the launch come from the args then. */
typedef struct gr_conv_gemm gr_conv_gemm;

/* Plan `args` (pointers ignored) for handle `lt`. *scratch_bytes receives the device memory a
 * launch needs (im2col matrix + accumulator + cuBLASLt workspace, 256-byte aligned parts), which
 * the caller allocates once per concurrent launch. cudaErrorNotSupported when cuBLASLt has no
 * algorithm for the shape or the args use what this tactic does not do; cudaErrorInvalidValue for
 * arguments gr_conv_check would refuse; the reason is in gr_kernels_last_failure(). */
cudaError_t gr_conv_gemm_create(const gr_conv_args *args, int is_i8, cublasLtHandle_t lt,
                                gr_conv_gemm **out, size_t *scratch_bytes);
/* Launch the three steps on `stream` with the pointers in `args` (same shapes as at create). */
cudaError_t gr_conv_gemm_launch(const gr_conv_gemm *gemm, const gr_conv_args *args, void *scratch,
                                cudaStream_t stream);
void gr_conv_gemm_destroy(gr_conv_gemm *gemm);

#ifdef __cplusplus
}
#endif

#endif
