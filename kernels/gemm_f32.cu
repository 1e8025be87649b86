/* FP32 convolution: im2col + cublasSgemmStridedBatched + bias/activation, or im2col + the 3xTF32
 * GEMM with its fused epilogue (kernels/gemm_tf32x3.cu) (kernels/gemm_f32.h).
 * GEMM in cuBLAS's column-major terms: for each image, C (hw x out_c, ld hw) = col^T-view (hw x K,
 * ld hw) x W^T-view (K x out_c, ld K), which is row-major out[out_c][hw] = W[out_c][K] x col[K][hw]
 * exactly as Darknet computes it. */
#include <climits>
#include <cstdint>

#include "kernels/common.cuh"
#include "kernels/conv.h"
#include "kernels/gemm_f32.h"
#include "kernels/conv_internal.cuh" /* gr_conv_activate */
#include "ops/activation.h"

namespace
{

/* im2col, one thread per 4 consecutive pixels of one col row (b, ci, ky, kx): the row's indices
 * are decoded once per thread (32-bit), the pixel's (oy, ox) once per 4 pixels and then stepped.
 * Vec: the row length hw is a multiple of 4 and col is 16-byte aligned, so the 4 values go out as
 * one float4 store (warp-contiguous 512 bytes); else 4 scalar stores. A block is ty rows of tx
 * threads (tx = the threads one row needs, rounded up to a warp, at most 256), so 13x13 maps do
 * not leave most of a block idle. A copy: bit-identical to the reference im2col. */
template <bool Vec>
__global__ void k_im2col_f32(const float *__restrict__ in, int in_c, int in_h, int in_w, int ksize,
                             int stride, int pad, int out_w, int hw, int rows_per_image, int rows,
                             float *__restrict__ col)
{
    const int row = blockIdx.x * blockDim.y + threadIdx.y; /* b * rows_per_image + (ci, ky, kx) */
    if (row >= rows)
        return;
    const int b = row / rows_per_image, r = row - b * rows_per_image;
    const int kk = ksize * ksize;
    const int ci = r / kk, kyx = r - ci * kk;
    const int ky = kyx / ksize, kx = kyx - ky * ksize;
    const float *__restrict__ plane =
        in + (static_cast<size_t>(b) * in_c + ci) * static_cast<size_t>(in_h) * in_w;
    float *__restrict__ dst = col + static_cast<size_t>(row) * hw;
    const int step = gridDim.y * blockDim.x * 4;
    for (int p0 = (blockIdx.y * blockDim.x + threadIdx.x) * 4; p0 < hw; p0 += step) {
        int oy = p0 / out_w, ox = p0 - oy * out_w;
        float v[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
            v[e] = p0 + e < hw && iy >= 0 && iy < in_h && ix >= 0 && ix < in_w
                       ? plane[iy * in_w + ix]
                       : 0.0f;
            if (++ox == out_w) {
                ox = 0;
                ++oy;
            }
        }
        if (Vec) {
            *reinterpret_cast<float4 *>(dst + p0) = make_float4(v[0], v[1], v[2], v[3]);
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e)
                if (p0 + e < hw)
                    dst[p0 + e] = v[e];
        }
    }
}

__global__ void k_bias_act_f32(float *__restrict__ data, const float *__restrict__ bias,
                               int channels, int hw, long long total, int act)
{
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < total;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        const int c = static_cast<int>((i / hw) % channels);
        data[i] = gr_conv_activate(data[i] + (bias ? bias[c] : 0.0f), act);
    }
}

unsigned grid_for(long long total, int threads)
{
    const long long blocks = (total + threads - 1) / threads;
    return static_cast<unsigned>(blocks < 65536 * 8 ? blocks : 65536 * 8); /* grid-stride beyond */
}

bool is_direct(const gr_conv_f32_args *a)
{
    return a->ksize == 1 && a->stride == 1 && a->pad == 0;
}

} // namespace

extern "C" size_t gr_conv_f32_workspace_floats(const gr_conv_f32_args *a, int *ok)
{
    *ok = 0;
    if (!a || a->batch <= 0 || a->in_c <= 0 || a->in_h <= 0 || a->in_w <= 0 || a->out_c <= 0 ||
        a->ksize <= 0 || a->stride <= 0 || a->pad < 0 || a->ksize > 64 || a->pad > 64)
        return 0;
    const int out_h = gr_conv_out_dim(a->in_h, a->ksize, a->stride, a->pad);
    const int out_w = gr_conv_out_dim(a->in_w, a->ksize, a->stride, a->pad);
    if (out_h <= 0 || out_w <= 0)
        return 0;
    const long long k = static_cast<long long>(a->in_c) * a->ksize * a->ksize;
    const long long hw = static_cast<long long>(out_h) * out_w;
    /* cuBLAS takes int dimensions and leading dimensions */
    if (k >= INT_MAX || hw >= INT_MAX || a->out_c >= INT_MAX / 2 ||
        static_cast<long long>(a->batch) * a->in_c * a->in_h * a->in_w >= (1LL << 40))
        return 0;
    if (a->algo == GR_CONV_F32_DIRECT3X3) {
        *ok = gr_conv_f32_direct3x3_fits(a);
        return 0;
    }
    if (a->pool_size != 0)
        return 0; /* only DIRECT3X3 pools */
    if (a->splits < 0 || a->splits > GR_TF32X3_MAX_SPLITS ||
        (a->splits > 1 && a->algo != GR_CONV_F32_TF32X3))
        return 0; /* only the im2col 3xTF32 GEMM splits K */
    *ok = 1;
    const size_t parts = a->splits > 1 ? static_cast<size_t>(a->splits) * a->batch * a->out_c * hw
                                       : 0; /* split-K partial sums */
    if (is_direct(a) || a->algo == GR_CONV_F32_TF32X3_IMPLICIT)
        return parts;
    return static_cast<size_t>(a->batch) * static_cast<size_t>(k) * static_cast<size_t>(hw) +
           parts;
}

extern "C" cudaError_t gr_launch_im2col_f32(const float *in, int batch, int in_c, int in_h,
                                            int in_w, int ksize, int stride, int pad, float *col,
                                            cudaStream_t stream)
{
    GR_ARG_CHECK(in != nullptr && col != nullptr && batch > 0 && in_c > 0 && in_h > 0 && in_w > 0);
    GR_ARG_CHECK(ksize > 0 && stride > 0 && pad >= 0 && ksize <= 64 && pad <= 64);
    const int out_h = gr_conv_out_dim(in_h, ksize, stride, pad);
    const int out_w = gr_conv_out_dim(in_w, ksize, stride, pad);
    GR_ARG_CHECK(out_h > 0 && out_w > 0);
    const long long hw = static_cast<long long>(out_h) * out_w;
    const long long rows_per_image = static_cast<long long>(in_c) * ksize * ksize;
    const long long rows = rows_per_image * batch;
    /* 32-bit row, pixel and in-plane indices (p0 + step stays below 2^31 too) */
    GR_ARG_CHECK(hw < INT_MAX / 2 && rows < INT_MAX &&
                 static_cast<long long>(in_h) * in_w < INT_MAX);
    const int per_row = gr_ceil_div(hw, 4); /* threads one row needs */
    const int tx = per_row >= 256 ? 256 : (per_row + 31) / 32 * 32;
    const int ty = 256 / tx;
    const long long gy = (per_row + tx - 1) / tx;
    const dim3 block(static_cast<unsigned>(tx), static_cast<unsigned>(ty));
    const dim3 grid(static_cast<unsigned>(gr_ceil_div(rows, ty)),
                    static_cast<unsigned>(gy < 65535 ? gy : 65535));
    const bool vec = hw % 4 == 0 && (reinterpret_cast<uintptr_t>(col) & 15u) == 0;
    if (vec)
        k_im2col_f32<true><<<grid, block, 0, stream>>>(in, in_c, in_h, in_w, ksize, stride, pad,
                                                       out_w, static_cast<int>(hw),
                                                       static_cast<int>(rows_per_image),
                                                       static_cast<int>(rows), col);
    else
        k_im2col_f32<false><<<grid, block, 0, stream>>>(in, in_c, in_h, in_w, ksize, stride, pad,
                                                        out_w, static_cast<int>(hw),
                                                        static_cast<int>(rows_per_image),
                                                        static_cast<int>(rows), col);
    GR_LAUNCH_CHECK();
    return cudaSuccess;
}

extern "C" cudaError_t gr_launch_bias_act_f32(float *data, const float *bias, int batch,
                                              int channels, int hw, int activation,
                                              cudaStream_t stream)
{
    GR_ARG_CHECK(data != nullptr && batch > 0 && channels > 0 && hw > 0);
    GR_ARG_CHECK(activation >= GR_CONV_ACT_LINEAR && activation < GR_CONV_ACT_COUNT);
    const long long total = static_cast<long long>(batch) * channels * hw;
    k_bias_act_f32<<<grid_for(total, 256), 256, 0, stream>>>(data, bias, channels, hw, total,
                                                             activation);
    GR_LAUNCH_CHECK();
    return cudaSuccess;
}

extern "C" cublasStatus_t gr_launch_conv_f32(cublasHandle_t handle, const gr_conv_f32_args *a,
                                             cudaStream_t stream, cudaError_t *cuda_error)
{
    if (cuda_error)
        *cuda_error = cudaSuccess;
    int ok = 0;
    const size_t ws = gr_conv_f32_workspace_floats(a, &ok);
    const bool tf32x3 =
        ok && (a->algo == GR_CONV_F32_TF32X3 || a->algo == GR_CONV_F32_TF32X3_IMPLICIT);
    const bool implicit = ok && a->algo == GR_CONV_F32_TF32X3_IMPLICIT && !is_direct(a);
    if (ok && a->algo == GR_CONV_F32_DIRECT3X3) {
        const cudaError_t err = gr_launch_conv_direct3x3_f32(a, stream);
        if (cuda_error)
            *cuda_error = err;
        return err == cudaSuccess ? CUBLAS_STATUS_SUCCESS
                                  : (err == cudaErrorInvalidValue ? CUBLAS_STATUS_INVALID_VALUE
                                                                  : CUBLAS_STATUS_EXECUTION_FAILED);
    }
    if (!ok || (!handle && !tf32x3) || !a->in || !a->weights || !a->out ||
        (ws > 0 && !a->workspace) || a->activation < GR_CONV_ACT_LINEAR ||
        a->activation >= GR_CONV_ACT_COUNT ||
        (a->algo != GR_CONV_F32_SGEMM && a->algo != GR_CONV_F32_TF32X3 &&
         a->algo != GR_CONV_F32_TF32X3_IMPLICIT) ||
        a->tile < GR_TF32X3_TILE_AUTO || a->tile > GR_TF32X3_TILES) {
        gr_kernels_record_failure(__FILE__, __LINE__, "gr_launch_conv_f32", "invalid argument");
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const int out_h = gr_conv_out_dim(a->in_h, a->ksize, a->stride, a->pad);
    const int out_w = gr_conv_out_dim(a->in_w, a->ksize, a->stride, a->pad);
    const int hw = out_h * out_w;
    const int k = a->in_c * a->ksize * a->ksize;

    cudaError_t err = cudaSuccess;
    if (tf32x3)
        err = gr_gemm_tf32x3_check_device(NULL); /* refuse before launching anything */
    const float *col = a->in;
    if (err == cudaSuccess && implicit)
        err = gr_launch_conv_tf32x3_f32(a->in, a->weights, a->bias, a->out, a->batch, a->in_c,
                                        a->in_h, a->in_w, a->out_c, a->ksize, a->stride, a->pad,
                                        a->activation, a->tile, stream);
    else if (err == cudaSuccess && !is_direct(a)) {
        err = gr_launch_im2col_f32(a->in, a->batch, a->in_c, a->in_h, a->in_w, a->ksize, a->stride,
                                   a->pad, a->workspace, stream);
        col = a->workspace;
    }
    if (err == cudaSuccess && tf32x3 && !implicit) {
        /* the parts' sums after the im2col matrix (a 1x1 conv has none: from the start) */
        const size_t im2col = col == a->in ? 0 : static_cast<size_t>(a->batch) * k * hw;
        float *partial = a->splits > 1 ? a->workspace + im2col : nullptr;
        err = gr_launch_gemm_tf32x3_splitk_f32(a->weights, col, a->bias, a->out, a->out_c, k, hw,
                                               a->batch, a->activation, a->tile,
                                               a->splits > 1 ? a->splits : 1, partial, stream);
    }
    if (err != cudaSuccess) {
        if (cuda_error)
            *cuda_error = err;
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    if (tf32x3)
        return CUBLAS_STATUS_SUCCESS;
    /* cublasSetStream resets a user workspace (cublasSetWorkspace) to cuBLAS's own pool, which then
     * allocates inside graph capture: only switch streams when the handle is on another one. */
    cudaStream_t current = nullptr;
    cublasStatus_t st = cublasGetStream(handle, &current);
    if (st == CUBLAS_STATUS_SUCCESS && current != stream)
        st = cublasSetStream(handle, stream);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasSetMathMode(handle, a->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
    if (st == CUBLAS_STATUS_SUCCESS) {
        const float one = 1.0f, zero = 0.0f;
        st = cublasSgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_N, hw, a->out_c, k, &one, col,
                                       hw, static_cast<long long>(k) * hw, a->weights, k, 0, &zero,
                                       a->out, hw, static_cast<long long>(a->out_c) * hw, a->batch);
    }
    if (st != CUBLAS_STATUS_SUCCESS) {
        gr_kernels_record_failure(__FILE__, __LINE__, "cublasSgemmStridedBatched",
                                  cublasGetStatusName(st));
        return st;
    }
    err = gr_launch_bias_act_f32(a->out, a->bias, a->batch, a->out_c, hw, a->activation, stream);
    if (err != cudaSuccess) {
        if (cuda_error)
            *cuda_error = err;
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    return CUBLAS_STATUS_SUCCESS;
}
