// Detection-head activations on the dequantized f32 NCHW head output, with Darknet's CPU
// arithmetic (forward_region_layer / forward_yolo_layer): logistic computed in double
// (1./(1.+exp(-x))) and rounded to f32; softmax with a double exp of the f32 difference, an f32
// sequential sum and an f32 division; without softmax the classes get the logistic too (as
// forward_region_layer does). One warp per (image, anchor, cell); each lane reads an entry before
// writing it and touches only its own entries, so in-place use (out == in) is safe.
// The classifier's [softmax] layer uses the same warp softmax, one warp per (image, group).
#include "kernels/misc_common.cuh"

using namespace grk;

namespace {

// One warp per (image, anchor, cell): a head has few boxes (845 for YOLOv2-tiny) and each entry
// costs a double-precision exp, so the entries of a box are spread over the lanes (a thread per box
// leaves the SMs nearly empty and runs ~40 dependent double exps in a row: ~10 us measured).
constexpr int kHeadThreads = 128;
constexpr unsigned kFullMask = 0xffffffffu;

// Lanes map entries [first, first + count) of one box (`cells` apart): out = logistic(in) where
// is_logistic(k), else in. Each lane reads an entry before writing it and touches no other lane's
// entries, so out may alias in.
template <typename IsLogistic>
__device__ __forceinline__ void map_entries(const float *in, float *out, int first, int count,
                                            int cells, int lane, IsLogistic is_logistic)
{
    for (int k = first + lane; k < first + count; k += 32) {
        float v = in[(size_t)k * cells];
        out[(size_t)k * cells] = is_logistic(k) ? darknet_logistic(v) : v;
    }
}

// Darknet's softmax() over `classes` values `cells` apart, by a warp: the max is a warp reduction
// (exact in any order); the sum of the exps is accumulated in class order, one class at a time
// broadcast from its lane, so it is Darknet's sequential f32 sum; each lane then recomputes its
// exps (same values) and stores e / sum.
__device__ __forceinline__ void darknet_softmax(const float *in, float *out, int classes, int cells,
                                                int lane)
{
    float largest = -FLT_MAX;
    for (int c = lane; c < classes; c += 32) {
        float v = in[(size_t)c * cells];
        largest = v > largest ? v : largest;
    }
    for (int offset = 16; offset > 0; offset /= 2) {
        float other = __shfl_xor_sync(kFullMask, largest, offset);
        largest = other > largest ? other : largest;
    }
    float sum = 0.0f;
    for (int c0 = 0; c0 < classes; c0 += 32) {
        int c = c0 + lane;
        float ex =
            c < classes ? (float)exp((double)__fsub_rn(in[(size_t)c * cells], largest)) : 0.0f;
        int in_chunk = classes - c0 < 32 ? classes - c0 : 32;
        for (int j = 0; j < in_chunk; j++)
            sum = __fadd_rn(sum, __shfl_sync(kFullMask, ex, j));
    }
    for (int c = lane; c < classes; c += 32)
        out[(size_t)c * cells] =
            __fdiv_rn((float)exp((double)__fsub_rn(in[(size_t)c * cells], largest)), sum);
}

} // namespace

// Every lane of a warp stays in the loop together (the bound is per warp), as the shuffles need.
__global__ void k_region_f32(const float *in, float *out, int n, int cells, int num, int coords,
                             int classes, int softmax)
{
    const unsigned boxes = (unsigned)n * num * cells;
    const int entries = coords + 1 + classes, lane = threadIdx.x % 32;
    const unsigned warps = gridDim.x * (blockDim.x / 32);
    for (unsigned e = (blockIdx.x * blockDim.x + threadIdx.x) / 32; e < boxes; e += warps) {
        unsigned cell = e % cells, box = e / cells; // box = image * num + anchor
        size_t base = (size_t)box * entries * cells + cell;
        if (softmax) {
            map_entries(in + base, out + base, 0, coords + 1, cells, lane,
                        [coords](int k) { return k < 2 || k == coords; });
            if (classes > 0)
                darknet_softmax(in + base + (size_t)(coords + 1) * cells,
                                out + base + (size_t)(coords + 1) * cells, classes, cells, lane);
        } else {
            map_entries(in + base, out + base, 0, entries, cells, lane,
                        [coords](int k) { return k < 2 || k >= coords; });
        }
    }
}

// AlexeyAB's forward_yolo_layer: logistic on x, y, objectness and classes unless new_coords (the
// conv applied it), then x, y = v * scale + offset in f32 (scal_add_cpu; no FMA, as the CPU
// reference ops/yolo.c gr_yolo_scale_xy computes it).
__global__ void k_yolo_f32(const float *in, float *out, int n, int cells, int n_anchors,
                           int classes, float scale, float offset, int new_coords)
{
    const unsigned boxes = (unsigned)n * n_anchors * cells;
    const int entries = 5 + classes, lane = threadIdx.x % 32;
    const unsigned warps = gridDim.x * (blockDim.x / 32);
    for (unsigned e = (blockIdx.x * blockDim.x + threadIdx.x) / 32; e < boxes; e += warps) {
        unsigned cell = e % cells, box = e / cells;
        size_t base = (size_t)box * entries * cells + cell;
        for (int k = lane; k < entries; k += 32) {
            float v = in[base + (size_t)k * cells];
            bool logistic = !new_coords && (k < 2 || k >= 4);
            v = logistic ? darknet_logistic(v) : v;
            out[base + (size_t)k * cells] = k < 2 ? __fadd_rn(__fmul_rn(v, scale), offset) : v;
        }
    }
}

// [softmax]: one warp per (image, group) of group_size consecutive values; an image's c*h*w values
// are contiguous in f32 NCHW (a channel slice starts c_offset*h*w in, images c_stride*h*w apart).
__global__ void k_softmax_f32(const float *in, size_t in_image, float *out, size_t out_image,
                              int n, int groups, int group_size)
{
    const unsigned rows = (unsigned)n * groups;
    const int lane = threadIdx.x % 32;
    const unsigned warps = gridDim.x * (blockDim.x / 32);
    for (unsigned r = (blockIdx.x * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
        unsigned b = r / groups, g = r % groups;
        size_t at = (size_t)g * group_size;
        darknet_softmax(in + b * in_image + at, out + b * out_image + at, group_size, 1, lane);
    }
}

namespace {

bool head_size_ok(int n, int h, int w, int anchors, int entries)
{
    if (n < 1 || h < 1 || w < 1 || anchors < 1 || entries < 1)
        return false;
    size_t elems = (size_t)n * h * w * (size_t)anchors * (size_t)entries;
    return elems < kMaxElems;
}

} // namespace

extern "C" cudaError_t gr_launch_region(gr_dtype dtype, const void *in, void *out, int n, int h,
                                        int w, int num, int coords, int classes, int softmax,
                                        cudaStream_t stream)
{
    if (dtype != GR_DTYPE_F32)
        return no_kernel(__FILE__, __LINE__, "gr_launch_region");
    GR_ARG_CHECK(in && out && coords >= 2 && classes >= 0 &&
                 head_size_ok(n, h, w, num, coords + 1 + classes));
    k_region_f32<<<blocks_for((size_t)n * num * h * w * 32, kHeadThreads), kHeadThreads, 0,
                   stream>>>((const float *)in, (float *)out, n, h * w, num, coords, classes,
                             softmax != 0);
    return cudaGetLastError();
}

extern "C" cudaError_t gr_launch_yolo(gr_dtype dtype, const void *in, void *out, int n, int h,
                                      int w, int n_anchors, int classes, float scale_x_y,
                                      int new_coords, cudaStream_t stream)
{
    if (dtype != GR_DTYPE_F32)
        return no_kernel(__FILE__, __LINE__, "gr_launch_yolo");
    GR_ARG_CHECK(in && out && classes >= 0 && head_size_ok(n, h, w, n_anchors, 5 + classes));
    GR_ARG_CHECK(scale_x_y > 0.0f && (new_coords == 0 || new_coords == 1));
    const float offset = (float)(-0.5 * ((double)scale_x_y - 1.0)); // as ops/yolo.c
    k_yolo_f32<<<blocks_for((size_t)n * n_anchors * h * w * 32, kHeadThreads), kHeadThreads, 0,
                 stream>>>((const float *)in, (float *)out, n, h * w, n_anchors, classes,
                           scale_x_y, offset, new_coords);
    return cudaGetLastError();
}

extern "C" cudaError_t gr_launch_softmax(gr_dtype dtype, const void *in, gr_kview in_view,
                                         void *out, gr_kview out_view, int groups,
                                         cudaStream_t stream)
{
    if (dtype != GR_DTYPE_F32)
        return no_kernel(__FILE__, __LINE__, "gr_launch_softmax");
    GR_ARG_CHECK(in && out && groups >= 1 && view_ok(in_view, 1) && view_ok(out_view, 1));
    GR_ARG_CHECK(in_view.n == out_view.n && in_view.c == out_view.c && in_view.h == out_view.h &&
                 in_view.w == out_view.w);
    const size_t hw = (size_t)in_view.h * in_view.w, elems = (size_t)in_view.c * hw;
    GR_ARG_CHECK(elems % (size_t)groups == 0);
    const float *x = (const float *)in + (size_t)in_view.c_offset * hw;
    float *y = (float *)out + (size_t)out_view.c_offset * hw;
    k_softmax_f32<<<blocks_for((size_t)in_view.n * groups * 32, kHeadThreads), kHeadThreads, 0,
                    stream>>>(x, (size_t)in_view.c_stride * hw, y, (size_t)out_view.c_stride * hw,
                              in_view.n, groups, (int)(elems / (size_t)groups));
    return cudaGetLastError();
}

// ---- dfl_head: YOLOv8 / YOLO11's anchor-free head decode (ops/dfl_head.c) ----------------------
// A thread per anchor: blockIdx.y 0 decodes the anchor's box (four softmax expectations over the
// bins, each side's bins a plane apart: adjacent threads read adjacent floats), blockIdx.y >= 1
// a group of kDflClasses class sigmoids; blockIdx.z is the image.
namespace {

constexpr int kDflMaxInputs = 8;
constexpr int kDflClasses = 16;
constexpr int kDflThreads = 128;

struct DflScales {
    const float *in[kDflMaxInputs]; // image 0's first channel
    size_t image[kDflMaxInputs];     // floats between images
    int plane[kDflMaxInputs];        // h * w
    int w[kDflMaxInputs];
    int first[kDflMaxInputs + 1];    // the scale's first anchor; first[n] = A
    float stride[kDflMaxInputs];
    int n;
};

// ops/dfl_head.c's expectation(): max, float sum of expf in bin order, sum of p_i * i.
// kBins > 0: that many bins, loaded once into registers with every load issued before the first
// is used (the bins are a plane apart, each a separate DRAM access: one after the other they made
// the kernel latency-bound, 2x its floor at batch 64); 0: any count, read in each pass.
template <int kBins>
__device__ __forceinline__ float dfl_expectation(const float *bins, int n_bins, size_t plane)
{
    if constexpr (kBins > 0) {
        float x[kBins];
#pragma unroll
        for (int i = 0; i < kBins; i++)
            x[i] = __ldg(bins + (size_t)i * plane);
        float hi = x[0];
#pragma unroll
        for (int i = 1; i < kBins; i++)
            hi = fmaxf(hi, x[i]);
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < kBins; i++) {
            x[i] = expf(__fsub_rn(x[i], hi));
            sum = __fadd_rn(sum, x[i]);
        }
        float d = 0.0f;
#pragma unroll
        for (int i = 0; i < kBins; i++)
            d = __fadd_rn(d, __fmul_rn(__fdiv_rn(x[i], sum), (float)i));
        return d;
    } else {
        float hi = bins[0];
        for (int i = 1; i < n_bins; i++)
            hi = fmaxf(hi, bins[(size_t)i * plane]);
        float sum = 0.0f;
        for (int i = 0; i < n_bins; i++)
            sum = __fadd_rn(sum, expf(__fsub_rn(bins[(size_t)i * plane], hi)));
        float d = 0.0f;
        for (int i = 0; i < n_bins; i++)
            d = __fadd_rn(d, __fmul_rn(__fdiv_rn(expf(__fsub_rn(bins[(size_t)i * plane], hi)), sum),
                                       (float)i));
        return d;
    }
}

template <int kBins>
__global__ void k_dfl_head_f32(DflScales s, float *out, size_t out_image, int bins, int classes)
{
    const int anchors = s.first[s.n];
    const int a = blockIdx.x * blockDim.x + threadIdx.x;
    if (a >= anchors)
        return;
    int k = 0;
    while (k + 1 < s.n && a >= s.first[k + 1])
        k++;
    const int cell = a - s.first[k];
    const size_t plane = (size_t)s.plane[k];
    const float *v = s.in[k] + (size_t)blockIdx.z * s.image[k] + cell;
    float *y = out + (size_t)blockIdx.z * out_image + a;
    if (blockIdx.y == 0) {
        float d[4];
        for (int j = 0; j < 4; j++)
            d[j] = dfl_expectation<kBins>(v + (size_t)j * bins * plane, bins, plane);
        const float ax = (float)(cell % s.w[k]) + 0.5f, ay = (float)(cell / s.w[k]) + 0.5f;
        const float x1 = __fsub_rn(ax, d[0]), y1 = __fsub_rn(ay, d[1]);
        const float x2 = __fadd_rn(ax, d[2]), y2 = __fadd_rn(ay, d[3]);
        const float stride = s.stride[k];
        y[0] = __fmul_rn(__fdiv_rn(__fadd_rn(x1, x2), 2.0f), stride);
        y[(size_t)anchors] = __fmul_rn(__fdiv_rn(__fadd_rn(y1, y2), 2.0f), stride);
        y[2 * (size_t)anchors] = __fmul_rn(__fsub_rn(x2, x1), stride);
        y[3 * (size_t)anchors] = __fmul_rn(__fsub_rn(y2, y1), stride);
        return;
    }
    // The group's logits loaded together (each a plane apart), then the sigmoids.
    const int c0 = ((int)blockIdx.y - 1) * kDflClasses;
    float logit[kDflClasses];
#pragma unroll
    for (int i = 0; i < kDflClasses; i++)
        logit[i] = c0 + i < classes ? __ldg(v + (size_t)(4 * bins + c0 + i) * plane) : 0.0f;
#pragma unroll
    for (int i = 0; i < kDflClasses; i++)
        if (c0 + i < classes)
            y[(size_t)(4 + c0 + i) * anchors] = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-logit[i])));
}

} // namespace

extern "C" cudaError_t gr_launch_dfl_head(gr_dtype dtype, const void *const *in,
                                          const gr_kview *in_views, const float *strides, int n_in,
                                          void *out, gr_kview out_view, int bins, int classes,
                                          cudaStream_t stream)
{
    if (dtype != GR_DTYPE_F32)
        return no_kernel(__FILE__, __LINE__, "gr_launch_dfl_head");
    GR_ARG_CHECK(in && in_views && strides && out && n_in >= 1 && n_in <= kDflMaxInputs);
    GR_ARG_CHECK(bins >= 1 && classes >= 1 && view_ok(out_view, 1));
    GR_ARG_CHECK(out_view.c == 4 + classes && out_view.h == 1 && out_view.n <= 65535);
    DflScales s = {};
    s.n = n_in;
    long long anchors = 0;
    for (int k = 0; k < n_in; k++) {
        const gr_kview &v = in_views[k];
        GR_ARG_CHECK(in[k] && view_ok(v, 1) && v.n == out_view.n && strides[k] >= 1.0f);
        GR_ARG_CHECK((long long)v.c == 4LL * bins + classes);
        const size_t plane = (size_t)v.h * v.w;
        s.in[k] = (const float *)in[k] + (size_t)v.c_offset * plane;
        s.image[k] = (size_t)v.c_stride * plane;
        s.plane[k] = (int)plane;
        s.w[k] = v.w;
        s.first[k] = (int)anchors;
        s.stride[k] = strides[k];
        anchors += (long long)plane;
    }
    GR_ARG_CHECK(anchors == out_view.w);
    s.first[n_in] = (int)anchors;
    const size_t hw = (size_t)out_view.w;
    dim3 grid((unsigned)((anchors + kDflThreads - 1) / kDflThreads),
              1 + (unsigned)((classes + kDflClasses - 1) / kDflClasses), (unsigned)out_view.n);
    float *y = (float *)out + (size_t)out_view.c_offset * hw;
    const size_t y_image = (size_t)out_view.c_stride * hw;
    if (bins == 16) // YOLOv8 / YOLO11 (reg_max 16)
        k_dfl_head_f32<16><<<grid, kDflThreads, 0, stream>>>(s, y, y_image, bins, classes);
    else
        k_dfl_head_f32<0><<<grid, kDflThreads, 0, stream>>>(s, y, y_image, bins, classes);
    return cudaGetLastError();
}
