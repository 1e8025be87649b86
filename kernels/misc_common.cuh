// Shared device/host helpers of the non-GEMM kernels (pool.cu, data.cu, quant.cu, head.cu):
// per-dtype storage traits, layout-aware element offsets, view validation, activations and the
// requantize rule. Everything here follows kernels/misc.h's numeric contract; keep the two in step.
#ifndef GR_KERNELS_MISC_COMMON_CUH
#define GR_KERNELS_MISC_COMMON_CUH

#include <cfloat>
#include <cstddef>
#include <cstdint>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/common.cuh"
#include "kernels/misc.h"
#include "ops/activation.h"

namespace grk {

constexpr int kThreads = 256;
// Largest element count of one view (flat indices are 32-bit unsigned; the grid-stride step
// cannot wrap below 2^32).
constexpr size_t kMaxElems = (size_t)1 << 31;

// Storage traits: layout, channel granule and the f32 view of a stored value.
template <typename T> struct Dtype;
template <> struct Dtype<float> {
    static constexpr bool nhwc = false;
    static constexpr int align = 1;
    __device__ static float to_f32(float v) { return v; }
    __device__ static float zero() { return 0.0f; }
    __device__ static float lowest() { return -FLT_MAX; }
    __device__ static bool greater(float a, float b) { return a > b; }
};
template <> struct Dtype<__half> {
    static constexpr bool nhwc = true;
    static constexpr int align = GR_KALIGN_F16;
    __device__ static float to_f32(__half v) { return __half2float(v); }
    __device__ static __half zero() { return __ushort_as_half((unsigned short)0); }
    __device__ static __half lowest() { return __ushort_as_half((unsigned short)0xFC00); } // -inf
    __device__ static bool greater(__half a, __half b) { return __half2float(a) > __half2float(b); }
};
template <> struct Dtype<int8_t> {
    static constexpr bool nhwc = true;
    static constexpr int align = GR_KALIGN_I8;
    __device__ static float to_f32(int8_t v) { return (float)v; }
    __device__ static int8_t zero() { return 0; }
    __device__ static int8_t lowest() { return -127; }
    __device__ static bool greater(int8_t a, int8_t b) { return a > b; }
};

// Element offset of logical (n, ch, y, x) in view v.
template <bool Nhwc>
__device__ __forceinline__ size_t offset_of(const gr_kview &v, unsigned n, unsigned ch, unsigned y,
                                            unsigned x)
{
    if (Nhwc)
        return (((size_t)n * v.h + y) * v.w + x) * v.c_stride + v.c_offset + ch;
    return (((size_t)n * v.c_stride + v.c_offset + ch) * v.h + y) * v.w + x;
}

struct Pos {
    unsigned n, ch, y, x;
};

// Flat index -> position, with the memory-fastest dimension varying fastest (coalescing):
// channels for NHWC, columns for NCHW. `c` is the channel extent iterated (may include padding).
template <bool Nhwc>
__device__ __forceinline__ Pos decompose(unsigned e, unsigned c, unsigned h, unsigned w)
{
    Pos p;
    if (Nhwc) {
        p.ch = e % c;
        e /= c;
        p.x = e % w;
        e /= w;
        p.y = e % h;
        p.n = e / h;
    } else {
        p.x = e % w;
        e /= w;
        p.y = e % h;
        e /= h;
        p.ch = e % c;
        p.n = e / c;
    }
    return p;
}

// A view is usable if its shape is positive and its channels fit in the buffer; NHWC buffers
// must be padded to the dtype's granule.
inline bool view_ok(const gr_kview &v, int align)
{
    if (v.n < 1 || v.c < 1 || v.h < 1 || v.w < 1 || v.c_offset < 0 || v.c_stride < 1)
        return false;
    if ((long long)v.c_offset + v.c > v.c_stride)
        return false;
    if (align > 1 && v.c_stride % align != 0)
        return false;
    size_t elems = (size_t)v.n * (size_t)v.c_stride * (size_t)v.h * (size_t)v.w;
    return elems < kMaxElems;
}

// Channels a kernel writes into output view v (misc.h's padding rule): the slice's own channels,
// plus the buffer's zero padding when the slice ends in the buffer's last granule.
inline int channels_written(const gr_kview &v, int align)
{
    if (align > 1 && v.c_offset + v.c > v.c_stride - align)
        return v.c_stride - v.c_offset;
    return v.c;
}

inline unsigned blocks_for(size_t elems, int threads = kThreads)
{
    size_t blocks = (elems + threads - 1) / threads;
    const size_t cap = (size_t)1 << 20; // grid-stride loops cover the rest
    return (unsigned)(blocks < cap ? (blocks > 0 ? blocks : 1) : cap);
}

// A dtype (or dtype pair) without a kernel: recorded like a failed argument check, and
// cudaErrorNotSupported (kernels/misc.h).
inline cudaError_t no_kernel(const char *file, int line, const char *launcher)
{
    gr_kernels_record_failure(file, line, launcher, "no kernel for this dtype");
    return cudaErrorNotSupported;
}

#define GRK_GRID_STRIDE(e, total)                                                                  \
    for (unsigned e = blockIdx.x * blockDim.x + threadIdx.x; e < (total);                          \
         e += gridDim.x * blockDim.x)

// Darknet's CPU logistic: 1./(1.+exp(-x)) in double, stored as float (ops/ops.c does the same).
__device__ __forceinline__ float darknet_logistic(float x)
{
    return (float)(1.0 / (1.0 + exp(-(double)x)));
}

// Activations exactly as the CPU reference gr_activate() (ops/ops.c), i.e. Darknet's CPU code:
// leaky with a double .1, relu as x*(x>0) (-0 for negative x), logistic in double; mish, swish
// and the rest through the shared float formulas of ops/activation.h.
__device__ __forceinline__ float activate(float y, gr_activation act)
{
    switch (act) {
    case GR_ACT_LEAKY: return y > 0.0f ? y : (float)(0.1 * (double)y);
    case GR_ACT_RELU: return __fmul_rn(y, y > 0.0f ? 1.0f : 0.0f);
    case GR_ACT_LOGISTIC: return darknet_logistic(y);
    default: return gr_act_common(y, act); /* AlexeyAB's float formulas (ops/activation.h) */
    }
}

// One 16-byte channel granule of an NHWC pixel (8 f16 or 16 i8 lanes), for vector loads/stores.
union Granule {
    uint4 v;
    int8_t i8[16];
    unsigned short f16[8];
};

// Vector paths need granule-aligned slices (channel offsets and written channel counts multiples of
// the lane count) and 16-byte aligned buffers.
inline bool granule_aligned(const void *ptr, const gr_kview &v, int cw, int lanes)
{
    return (uintptr_t)ptr % 16 == 0 && v.c_offset % lanes == 0 && cw % lanes == 0;
}

inline bool activation_ok(gr_activation act) { return act >= GR_ACT_LINEAR && act < GR_ACT_COUNT; }

// Output-side conversion of an f32 value y into each dtype (i8: rint(y * inv_scale), clamped).
template <typename T> struct Store;
template <> struct Store<float> {
    __device__ static float from_f32(float y, float) { return y; }
};
template <> struct Store<__half> {
    __device__ static __half from_f32(float y, float) { return __float2half_rn(y); }
};
template <> struct Store<int8_t> {
    __device__ static int8_t from_f32(float y, float inv_scale)
    {
        int q = __float2int_rn(__fmul_rn(y, inv_scale));
        return (int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
    }
};

} // namespace grk

#endif
