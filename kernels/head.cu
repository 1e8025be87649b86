// Detection-head activations on the dequantized f32 NCHW head output, with Darknet's CPU
// arithmetic (forward_region_layer / forward_yolo_layer): logistic computed in double
// (1./(1.+exp(-x))) and rounded to f32; softmax with a double exp of the f32 difference, an f32
// sequential sum and an f32 division; without softmax the classes get the logistic too (as
// forward_region_layer does). One thread per (image, anchor, cell) owns every entry of its
// box, so in-place use (out == in) is safe.
#include "kernels/misc_common.cuh"

using namespace grk;

namespace {

// A head has few boxes (845 for YOLOv2-tiny), each a long serial chain of double-precision work:
// small blocks spread them over more SMs.
constexpr int kHeadThreads = 32;

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
        for (int k = 0; k < entries; k++) {
            size_t i = base + (size_t)k * cells;
            bool logistic = k < 2 || k == coords || (k > coords && !softmax);
            out[i] = logistic ? darknet_logistic(in[i]) : in[i];
        }
        if (!softmax || classes < 1)
            continue;
        const float *cls_in = in + base + (size_t)(coords + 1) * cells;
        float *cls_out = out + base + (size_t)(coords + 1) * cells;
        float largest = -FLT_MAX;
        for (int c = 0; c < classes; c++) {
            float v = cls_in[(size_t)c * cells];
            largest = v > largest ? v : largest;
        }
        float sum = 0.0f;
        for (int c = 0; c < classes; c++) {
            float ex = (float)exp((double)__fsub_rn(cls_in[(size_t)c * cells], largest));
            sum = __fadd_rn(sum, ex);
            cls_out[(size_t)c * cells] = ex;
        }
        for (int c = 0; c < classes; c++)
            cls_out[(size_t)c * cells] = __fdiv_rn(cls_out[(size_t)c * cells], sum);
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
        for (int k = 0; k < entries; k++) {
            size_t i = base + (size_t)k * cells;
            out[i] = (k < 2 || k >= 4) ? darknet_logistic(in[i]) : in[i];
        }
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
