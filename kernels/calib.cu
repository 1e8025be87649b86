// Calibration statistics (kernels/calib.h): a grid-stride pass for max |x| and the NaN/Inf count,
// then a grid-stride pass binning |x| into a per-block shared histogram flushed to the global
// counts with atomics. Both are exact whatever the order (max and integer counts), so the launch
// configuration never changes a result. Element i of the view (in its layout's order) is found
// with 32-bit index arithmetic: every tensor is below GR_MAX_TENSOR_ELEMS (2^31) elements and the
// launchers check that the whole buffer extent fits.
#include <stdint.h>

#include "kernels/calib.h"
#include "kernels/common.cuh"

namespace {

constexpr int kMaxThreads = 256, kMaxBlocks = 1024;
constexpr int kHistThreads = 512, kHistBlocks = 256; // each block flushes up to 2048 atomics

// Where the view's element i (its layout's order) lies in the buffer.
struct Addr {
    unsigned c, hw, c_stride, c_offset;
    int nhwc, dense;
    __device__ __forceinline__ unsigned operator()(unsigned i) const
    {
        if (dense)
            return i;
        if (nhwc) {
            unsigned pix = i / c, ch = i - pix * c;
            return pix * c_stride + c_offset + ch;
        }
        unsigned row = i / hw, p = i - row * hw, img = row / c, ch = row - img * c;
        return (img * c_stride + c_offset + ch) * hw + p;
    }
};

__device__ __forceinline__ float abs_value(const float *x, unsigned at) { return fabsf(x[at]); }
__device__ __forceinline__ float abs_value(const uint8_t *x, unsigned at)
{
    return __fdiv_rn((float)x[at], 255.0f);
}

template <typename T>
__global__ void k_calib_absmax(const T *x, Addr addr, unsigned long long total,
                               gr_calib_stats *stats)
{
    float m = 0.0f;
    unsigned long long bad = 0;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < total; i += (unsigned long long)gridDim.x * blockDim.x) {
        float a = abs_value(x, addr((unsigned)i));
        if (isfinite(a))
            m = fmaxf(m, a);
        else
            bad++;
    }
    for (int o = 16; o > 0; o >>= 1) {
        m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, o));
        bad += __shfl_down_sync(0xffffffffu, bad, o);
    }
    __shared__ float warp_max[32];
    __shared__ unsigned long long warp_bad[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    if (lane == 0) {
        warp_max[warp] = m;
        warp_bad[warp] = bad;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int k = 1; k < warps; k++) {
            m = fmaxf(m, warp_max[k]);
            bad += warp_bad[k];
        }
        atomicMax(&stats->max_bits, __float_as_uint(m));
        if (bad)
            atomicAdd(&stats->nonfinite, bad);
    }
}

template <typename T>
__global__ void k_calib_hist(const T *x, Addr addr, unsigned long long total,
                             const gr_calib_stats *stats, unsigned long long *counts)
{
    __shared__ unsigned int bins[GR_CALIB_BINS];
    for (int k = threadIdx.x; k < GR_CALIB_BINS; k += blockDim.x)
        bins[k] = 0;
    __syncthreads();
    float max = __uint_as_float(stats->max_bits);
    double to_bin = 0.0; // all finite values in bin 0 while the max is 0
    if (max > 0.0f) {
        int e;
        frexpf(max, &e);
        to_bin = ldexp(1.0, GR_CALIB_LOG2_BINS - e);
    }
    unsigned int zeros = 0; // bin 0 is the crowded one (small values): counted in a register
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < total; i += (unsigned long long)gridDim.x * blockDim.x) {
        float a = abs_value(x, addr((unsigned)i));
        if (!isfinite(a))
            continue;
        int b = (int)((double)a * to_bin);
        b = b < GR_CALIB_BINS - 1 ? b : GR_CALIB_BINS - 1; // a <= max < 2^e: never taken
        if (b == 0)
            zeros++;
        else
            atomicAdd(&bins[b], 1u);
    }
    if (zeros)
        atomicAdd(&bins[0], zeros);
    __syncthreads();
    for (int k = threadIdx.x; k < GR_CALIB_BINS; k += blockDim.x)
        if (bins[k])
            atomicAdd(&counts[k], (unsigned long long)bins[k]);
}

// The view's element count and addressing; cudaErrorInvalidValue for an inconsistent view.
cudaError_t prepare(gr_dtype dtype, const void *x, gr_kview v, int nhwc, const void *stats,
                    Addr *addr, unsigned long long *total)
{
    if (dtype != GR_DTYPE_F32 && dtype != GR_DTYPE_U8) {
        gr_kernels_record_failure(__FILE__, __LINE__, "dtype is f32 or u8", "not supported");
        return cudaErrorNotSupported;
    }
    GR_ARG_CHECK(v.n >= 0 && v.c > 0 && v.h > 0 && v.w > 0 && v.c_offset >= 0 &&
                 v.c_offset + v.c <= v.c_stride && stats != NULL);
    unsigned long long extent =
        (unsigned long long)v.n * (unsigned long long)v.c_stride * (unsigned long long)v.h * v.w;
    GR_ARG_CHECK(extent <= 0xffffffffull);
    GR_ARG_CHECK(x != NULL || extent == 0);
    *total = (unsigned long long)v.n * (unsigned long long)v.c * (unsigned long long)v.h * v.w;
    *addr = Addr{(unsigned)v.c, (unsigned)(v.h * v.w), (unsigned)v.c_stride, (unsigned)v.c_offset,
                 nhwc != 0, v.c == v.c_stride};
    return cudaSuccess;
}

int blocks_for(unsigned long long total, int threads, int cap)
{
    unsigned long long b = (total + (unsigned long long)threads * 4 - 1) / ((unsigned long long)threads * 4);
    return b < 1 ? 1 : b > (unsigned long long)cap ? cap : (int)b;
}

} // namespace

extern "C" cudaError_t gr_launch_calib_absmax(gr_dtype dtype, const void *x, gr_kview view,
                                              int nhwc, gr_calib_stats *stats, cudaStream_t stream)
{
    Addr addr;
    unsigned long long total = 0;
    cudaError_t err = prepare(dtype, x, view, nhwc, stats, &addr, &total);
    if (err != cudaSuccess || total == 0)
        return err;
    int blocks = blocks_for(total, kMaxThreads, kMaxBlocks);
    if (dtype == GR_DTYPE_F32)
        k_calib_absmax<<<blocks, kMaxThreads, 0, stream>>>((const float *)x, addr, total, stats);
    else
        k_calib_absmax<<<blocks, kMaxThreads, 0, stream>>>((const uint8_t *)x, addr, total, stats);
    GR_LAUNCH_CHECK();
    return cudaSuccess;
}

extern "C" cudaError_t gr_launch_calib_hist(gr_dtype dtype, const void *x, gr_kview view,
                                            int nhwc, const gr_calib_stats *stats,
                                            unsigned long long *counts, cudaStream_t stream)
{
    Addr addr;
    unsigned long long total = 0;
    cudaError_t err = prepare(dtype, x, view, nhwc, stats, &addr, &total);
    if (err != cudaSuccess || total == 0)
        return err;
    GR_ARG_CHECK(counts != NULL);
    int blocks = blocks_for(total, kHistThreads, kHistBlocks);
    if (dtype == GR_DTYPE_F32)
        k_calib_hist<<<blocks, kHistThreads, 0, stream>>>((const float *)x, addr, total, stats,
                                                         counts);
    else
        k_calib_hist<<<blocks, kHistThreads, 0, stream>>>((const uint8_t *)x, addr, total, stats,
                                                         counts);
    GR_LAUNCH_CHECK();
    return cudaSuccess;
}
