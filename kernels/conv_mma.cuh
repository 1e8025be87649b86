/* The tensor-core convolution kernels' shared pieces (CUDA side only): the parameters of a
 * launch after validation (made by conv_wmma.cu's planner, read by the implicit-GEMM kernels of
 * conv_wmma.cu and conv_stream.cu), the ldmatrix + mma.sync operations (sm_80+),
 * the GEMM-row -> output-pixel map with the fused 2x2 maxpool, and the launch helper
 * (programmatic dependent launch on sm_90). */
#ifndef GR_KERNELS_CONV_MMA_CUH
#define GR_KERNELS_CONV_MMA_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/common.cuh"
#include "kernels/conv.h"
#include "kernels/cp_async.cuh"

namespace gr_conv
{

struct ConvParams {
    const void *in;
    const void *weights;
    const float *mul;
    const float *bias;
    void *out;
    int in_h, in_w, in_c_stride, in_c_offset, cin_pad;
    int out_h, out_w, out_c, out_c_pad, out_c_stride, out_c_offset; /* out_h/w: the conv's map */
    int ksize, stride, pad;
    int M, K, k_tiles;
    int activation, out_kind;
    float out_inv_scale;
    int splits, kt_per_split; /* split-K: gridDim.z = splits */
    int *counters;            /* [tiles]: blocks of a tile done so far (split-K) */
    void *partials;           /* [tiles][splits][BM*BN] Acc (split-K) */
    /* Fused 2x2 maxpool: GEMM row m is tap (m & 3) of pooled pixel m >> 2 (tap q at row offset
     * q >> 1, column offset q & 1 of the window). M = batch * pool_h * pool_w * 4. */
    int pool, pool_stride, pool_offset, pool_h, pool_w;
};

__device__ __forceinline__ float acc_to_float(float a)
{
    return a;
}
__device__ __forceinline__ float acc_to_float(__half a)
{
    return __half2float(a);
}
__device__ __forceinline__ float acc_to_float(int a)
{
    return static_cast<float>(a);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
template <typename In, typename Acc> struct MmaOp;
template <> struct MmaOp<signed char, int> {
    static constexpr int regs = 4;
    using Reg = int;
    static __device__ __forceinline__ void mma(int (&c)[4], const unsigned (&a)[4], unsigned b0,
                                               unsigned b1)
    {
        asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};
template <> struct MmaOp<__half, float> {
    static constexpr int regs = 4;
    using Reg = float;
    static __device__ __forceinline__ void mma(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                               unsigned b1)
    {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};
template <> struct MmaOp<__half, __half> { /* f16 accumulators: two half2 registers */
    static constexpr int regs = 2;
    using Reg = unsigned;
    static __device__ __forceinline__ void mma(unsigned (&c)[2], const unsigned (&a)[4],
                                               unsigned b0, unsigned b1)
    {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, "
                     "{%2,%3,%4,%5}, {%6,%7}, {%0,%1};\n"
                     : "+r"(c[0]), "+r"(c[1])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void *smem_row)
{
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
#endif

/* The conv output pixel GEMM row m computes, or false when it computes nothing: a row past M,
 * or a pooling-window tap outside the conv output (Darknet's pool padding never wins). */
__device__ __forceinline__ bool row_pixel(const ConvParams &p, int m, int &img, int &oy, int &ox)
{
    if (m >= p.M)
        return false;
    if (!p.pool) {
        const int hw = p.out_h * p.out_w;
        img = m / hw;
        const int rem = m - img * hw;
        oy = rem / p.out_w;
        ox = rem - oy * p.out_w;
        return true;
    }
    const int q = m & 3, pooled = m >> 2, phw = p.pool_h * p.pool_w;
    img = pooled / phw;
    const int rem = pooled - img * phw;
    const int py = rem / p.pool_w, px = rem - py * p.pool_w;
    oy = py * p.pool_stride + p.pool_offset + (q >> 1);
    ox = px * p.pool_stride + p.pool_offset + (q & 1);
    return oy >= 0 && oy < p.out_h && ox >= 0 && ox < p.out_w;
}

/* Programmatic dependent launch (sm_90): wait until the previous kernel's writes are visible;
 * a no-op for a kernel launched without the attribute. */
__device__ __forceinline__ void wait_for_producer()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

/* Launch on `stream` with `smem` bytes of dynamic shared memory, as a programmatic dependent launch when `pdl` (sm_90+). */
template <typename... KArgs, typename... Args>
cudaError_t launch_kernel(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, bool pdl,
                          cudaStream_t stream, Args... args)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    GR_CUDA_TRY(cudaLaunchKernelEx(&cfg, kernel, args...));
    return cudaSuccess;
}

/* The resident-weights kernel (conv_stream.cu) for tile GR_CONV_TILE_STREAM(_SMALL) on the
 * validated parameters of conv_wmma.cu's planner (splits 1). check_only: the checks (shared
 * memory fit, device) without launching. */
cudaError_t stream_launch(const ConvParams &p, bool is_i8, int tile, bool pdl, cudaStream_t stream,
                          bool check_only);

} // namespace gr_conv

#endif
