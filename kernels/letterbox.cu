// Darknet's letterbox (and AlexeyAB's stretch: the same job, its geometry from the host) on the
// GPU (kernels/image.h): one thread per output pixel of one image,
// its three bytes. The arithmetic is runtime/image/letterbox.c's fast letterbox, operation by
// operation: each product and sum rounded on its own (__fmul_rn / __fadd_rn / __fsub_rn keep
// nvcc from contracting them into an fma), the byte-to-unit table's (float)(v / 255.) in double.
#include "kernels/common.cuh"
#include "kernels/image.h"

namespace {

struct letterbox_batch {
    gr_letterbox_job job[GR_LETTERBOX_PER_LAUNCH];
};

__device__ __forceinline__ float to_unit(uint8_t v)
{
    return __double2float_rn(__ddiv_rn((double)v, 255.0));
}

// Source row `row` resized horizontally at output column x, channel k: the CPU's
// row[3x+k] = w0 * to_unit[a] + w1 * to_unit[b], with its last-column case (w0 = 1, w1 = 0).
__device__ __forceinline__ float hpass(const gr_letterbox_job &j, int row, int x, int k)
{
    const uint8_t *in = j.src + (size_t)row * (size_t)j.pitch;
    int off0, off1;
    float w0, w1;
    if (x == j.new_w - 1 || j.src_w == 1) {
        off0 = off1 = (j.src_w - 1) * 3;
        w0 = 1.0f;
        w1 = 0.0f;
    } else {
        float sx = __fmul_rn((float)x, j.w_scale);
        int ix = (int)sx;
        float dx = __fsub_rn(sx, (float)ix);
        int ix1 = ix + 1 < j.src_w ? ix + 1 : j.src_w - 1;
        off0 = ix * 3;
        off1 = ix1 * 3;
        w0 = __fsub_rn(1.0f, dx);
        w1 = dx;
    }
    return __fadd_rn(__fmul_rn(w0, to_unit(in[off0 + k])), __fmul_rn(w1, to_unit(in[off1 + k])));
}

__global__ void k_letterbox_u8(letterbox_batch b, int net_w, int net_h)
{
    const gr_letterbox_job &j = b.job[blockIdx.y];
    const unsigned total = (unsigned)net_w * (unsigned)net_h;
    for (unsigned p = blockIdx.x * blockDim.x + threadIdx.x; p < total;
         p += gridDim.x * blockDim.x) {
        int y = (int)(p / (unsigned)net_w), x = (int)(p % (unsigned)net_w);
        uint8_t *o = j.dst + (size_t)p * 3;
        int r = y - j.top, c = x - j.left;
        if (r < 0 || r >= j.new_h || c < 0 || c >= j.new_w) {
            o[0] = o[1] = o[2] = j.pad;
            continue;
        }
        // Output row r: source rows iy, iy1 and their weights (the CPU's output_row).
        float sy = __fmul_rn((float)r, j.h_scale);
        int iy = (int)sy;
        float dy = __fsub_rn(sy, (float)iy);
        if (iy > j.src_h - 1)
            iy = j.src_h - 1;
        int iy1 = iy + 1 < j.src_h ? iy + 1 : iy;
        float w0 = __fsub_rn(1.0f, dy);
        float w1 = (r == j.new_h - 1 || j.src_h == 1) ? 0.0f : dy;
        for (int k = 0; k < 3; k++) {
            float v = __fadd_rn(__fmul_rn(w0, hpass(j, iy, c, k)), __fmul_rn(w1, hpass(j, iy1, c, k)));
            v = __fadd_rn(__fmul_rn(v, 255.0f), 0.5f);
            v = v < 0.0f ? 0.0f : (v > 255.0f ? 255.0f : v);
            o[k] = (uint8_t)v;
        }
    }
}

} // namespace

extern "C" cudaError_t gr_launch_letterbox_u8(const gr_letterbox_job *jobs, int n, int net_w,
                                              int net_h, cudaStream_t stream)
{
    GR_ARG_CHECK(n >= 0 && (n == 0 || jobs) && net_w > 0 && net_h > 0);
    for (int i = 0; i < n; i++) {
        const gr_letterbox_job &j = jobs[i];
        GR_ARG_CHECK(j.src && j.dst && j.src_w > 0 && j.src_h > 0 && j.pitch >= 3 * j.src_w);
        GR_ARG_CHECK(j.new_w > 0 && j.new_h > 0 && j.left >= 0 && j.top >= 0 &&
                     j.left + j.new_w <= net_w && j.top + j.new_h <= net_h);
    }
    const unsigned total = (unsigned)net_w * (unsigned)net_h;
    const int threads = 256;
    int blocks = gr_ceil_div(total, threads);
    if (blocks > 1024)
        blocks = 1024;
    for (int first = 0; first < n; first += GR_LETTERBOX_PER_LAUNCH) {
        int count = n - first < GR_LETTERBOX_PER_LAUNCH ? n - first : GR_LETTERBOX_PER_LAUNCH;
        letterbox_batch b;
        for (int i = 0; i < count; i++)
            b.job[i] = jobs[first + i];
        k_letterbox_u8<<<dim3(blocks, count), threads, 0, stream>>>(b, net_w, net_h);
        GR_LAUNCH_CHECK();
    }
    return cudaSuccess;
}
