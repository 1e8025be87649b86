// Detection-head activations on the dequantized f32 NCHW head output, with Darknet's CPU
// arithmetic (forward_region_layer / forward_yolo_layer): logistic computed in double
// (1./(1.+exp(-x))) and rounded to f32; softmax with a double exp of the f32 difference, an f32
// sequential sum and an f32 division; without softmax the classes get the logistic too (as
// forward_region_layer does). One thread per (image, anchor, cell) owns every entry of its
// box and reads each entry before writing it, so in-place use (out == in) is safe.
#include "kernels/misc_common.cuh"

using namespace grk;

namespace {

// A head has few boxes (845 for YOLOv2-tiny), each a long serial chain of double-precision work:
// small blocks spread them over more SMs.
constexpr int kHeadThreads = 32;

// Entries [first, first + count) of one box at one cell, `cells` apart: out = logistic(in) where
// is_logistic(k) else in. Loads go in chunks of kChunk before their stores, so the loads of a chunk
// are in flight together even though out may alias in (the compiler cannot move a load above a
// store to a possibly-equal address).
constexpr int kChunk = 8;

template <typename IsLogistic>
__device__ __forceinline__ void map_entries(const float *in, float *out, int first, int count,
                                            int cells, IsLogistic is_logistic)
{
    for (int k0 = 0; k0 < count; k0 += kChunk) {
        float v[kChunk];
#pragma unroll
        for (int j = 0; j < kChunk; j++)
            if (k0 + j < count)
                v[j] = in[(size_t)(first + k0 + j) * cells];
#pragma unroll
        for (int j = 0; j < kChunk; j++)
            if (k0 + j < count)
                out[(size_t)(first + k0 + j) * cells] =
                    is_logistic(first + k0 + j) ? darknet_logistic(v[j]) : v[j];
    }
}

// Darknet's softmax() over `classes` values `cells` apart: two load-only passes (max, then the
// sequential sum of exp), then a chunked pass recomputing each exp (same value) and storing e/sum.
__device__ __forceinline__ void darknet_softmax(const float *in, float *out, int classes, int cells)
{
    float largest = -FLT_MAX;
    for (int c = 0; c < classes; c++) {
        float v = in[(size_t)c * cells];
        largest = v > largest ? v : largest;
    }
    float sum = 0.0f;
    for (int c = 0; c < classes; c++)
        sum = __fadd_rn(sum, (float)exp((double)__fsub_rn(in[(size_t)c * cells], largest)));
    for (int c0 = 0; c0 < classes; c0 += kChunk) {
        float v[kChunk];
#pragma unroll
        for (int j = 0; j < kChunk; j++)
            if (c0 + j < classes)
                v[j] = in[(size_t)(c0 + j) * cells];
#pragma unroll
        for (int j = 0; j < kChunk; j++)
            if (c0 + j < classes)
                out[(size_t)(c0 + j) * cells] =
                    __fdiv_rn((float)exp((double)__fsub_rn(v[j], largest)), sum);
    }
}

} // namespace

__global__ void k_region_f32(const float *in, float *out, int n, int cells, int num, int coords,
                             int classes, int softmax)
{
    const unsigned total = (unsigned)n * num * cells;
    const int entries = coords + 1 + classes;
    GRK_GRID_STRIDE(e, total)
    {
        unsigned cell = e % cells, box = e / cells; // box = image * num + anchor
        size_t base = (size_t)box * entries * cells + cell;
        if (softmax) {
            map_entries(in + base, out + base, 0, coords + 1, cells,
                        [coords](int k) { return k < 2 || k == coords; });
            if (classes > 0)
                darknet_softmax(in + base + (size_t)(coords + 1) * cells,
                                out + base + (size_t)(coords + 1) * cells, classes, cells);
        } else {
            map_entries(in + base, out + base, 0, entries, cells,
                        [coords](int k) { return k < 2 || k >= coords; });
        }
    }
}

__global__ void k_yolo_f32(const float *in, float *out, int n, int cells, int n_anchors,
                           int classes)
{
    const unsigned total = (unsigned)n * n_anchors * cells;
    const int entries = 5 + classes;
    GRK_GRID_STRIDE(e, total)
    {
        unsigned cell = e % cells, box = e / cells;
        size_t base = (size_t)box * entries * cells + cell;
        map_entries(in + base, out + base, 0, entries, cells,
                    [](int k) { return k < 2 || k >= 4; });
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

extern "C" cudaError_t gr_launch_region_f32(const float *in, float *out, int n, int h, int w,
                                            int num, int coords, int classes, int softmax,
                                            cudaStream_t stream)
{
    if (!in || !out || coords < 2 || classes < 0 ||
        !head_size_ok(n, h, w, num, coords + 1 + classes))
        return cudaErrorInvalidValue;
    k_region_f32<<<blocks_for((size_t)n * num * h * w, kHeadThreads), kHeadThreads, 0, stream>>>(
        in, out, n, h * w, num, coords, classes, softmax != 0);
    return cudaGetLastError();
}

extern "C" cudaError_t gr_launch_yolo_f32(const float *in, float *out, int n, int h, int w,
                                          int n_anchors, int classes, cudaStream_t stream)
{
    if (!in || !out || classes < 0 || !head_size_ok(n, h, w, n_anchors, 5 + classes))
        return cudaErrorInvalidValue;
    k_yolo_f32<<<blocks_for((size_t)n * n_anchors * h * w, kHeadThreads), kHeadThreads, 0,
                 stream>>>(in, out, n, h * w, n_anchors, classes);
    return cudaGetLastError();
}
