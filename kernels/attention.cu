// The attention op (ops/attention.c: YOLO11's C2PSA), f32 NCHW: one block per (image, head,
// query token). The query's scores against every key go to shared memory (at most
// GR_ATTENTION_MAX_TOKENS floats, 16 kB), a block-wide max and sum make the softmax (expf of the
// difference to the max), and each thread then sums one v channel weighted by it. f32 sums in
// another order than the CPU reference's sequential ones: equal within float rounding, not bit
// for bit (tests/test_gpu_ops.c holds it to the fp32 bound). fp16 / int8 engines convert around
// it (the op is GR_OPF_F32_ONLY).
#include "kernels/misc_common.cuh"

using namespace grk;

namespace {

constexpr int kAttnThreads = 128;
constexpr unsigned kFullMask = 0xffffffffu;

// The block's max (is_max) or sum of v; `scratch` holds one value per warp. Every thread gets it.
__device__ float block_reduce(float v, bool is_max, float *scratch)
{
    for (int offset = 16; offset > 0; offset /= 2) {
        float other = __shfl_xor_sync(kFullMask, v, offset);
        v = is_max ? fmaxf(v, other) : v + other;
    }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    __syncthreads(); // scratch may still be read from a previous reduction
    if (lane == 0)
        scratch[warp] = v;
    __syncthreads();
    v = scratch[0];
    for (int k = 1; k < warps; k++)
        v = is_max ? fmaxf(v, scratch[k]) : v + scratch[k];
    return v;
}

// in: the image's qkv channels [q of every head | k | v] (tokens apart); out: heads x head_dim.
__global__ void k_attention_f32(const float *in, size_t in_image, float *out, size_t out_image,
                                int heads, int key_dim, int head_dim, int tokens, float scale)
{
    extern __shared__ float smem[]; // scores[tokens], then one float per warp
    float *scores = smem, *scratch = smem + tokens;
    const int query = blockIdx.x, head = blockIdx.y;
    const float *x = in + (size_t)blockIdx.z * in_image;
    const float *q = x + (size_t)head * key_dim * tokens + query;
    const float *k = x + ((size_t)heads * key_dim + (size_t)head * key_dim) * tokens;
    const float *v = x + ((size_t)2 * heads * key_dim + (size_t)head * head_dim) * tokens;
    float largest = -FLT_MAX;
    for (int m = threadIdx.x; m < tokens; m += blockDim.x) {
        float dot = 0.0f;
        for (int j = 0; j < key_dim; j++)
            dot = __fadd_rn(dot, __fmul_rn(q[(size_t)j * tokens], k[(size_t)j * tokens + m]));
        scores[m] = __fmul_rn(dot, scale);
        largest = fmaxf(largest, scores[m]);
    }
    largest = block_reduce(largest, true, scratch);
    float sum = 0.0f;
    for (int m = threadIdx.x; m < tokens; m += blockDim.x) {
        float e = expf(__fsub_rn(scores[m], largest));
        scores[m] = e;
        sum += e;
    }
    sum = block_reduce(sum, false, scratch); // its __syncthreads also publishes the scores
    float *y = out + (size_t)blockIdx.z * out_image + (size_t)head * head_dim * tokens + query;
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
        const float *vd = v + (size_t)d * tokens;
        float acc = 0.0f;
        for (int m = 0; m < tokens; m++)
            acc = __fadd_rn(acc, __fmul_rn(vd[m], __fdiv_rn(scores[m], sum)));
        y[(size_t)d * tokens] = acc;
    }
}

} // namespace

extern "C" cudaError_t gr_launch_attention(gr_dtype dtype, const void *in, gr_kview in_view,
                                           void *out, gr_kview out_view, int heads, int key_dim,
                                           float scale, cudaStream_t stream)
{
    if (dtype != GR_DTYPE_F32)
        return no_kernel(__FILE__, __LINE__, "gr_launch_attention");
    GR_ARG_CHECK(in && out && heads >= 1 && key_dim >= 1 && view_ok(in_view, 1) &&
                 view_ok(out_view, 1));
    GR_ARG_CHECK(in_view.n == out_view.n && in_view.h == out_view.h && in_view.w == out_view.w &&
                 in_view.n <= 65535 && heads <= 65535);
    const int tokens = in_view.h * in_view.w, head_dim = out_view.c / heads;
    GR_ARG_CHECK(tokens <= GR_ATTENTION_MAX_TOKENS && out_view.c % heads == 0 && head_dim >= 1 &&
                 in_view.c == heads * (2 * key_dim + head_dim));
    const size_t hw = (size_t)tokens;
    const float *x = (const float *)in + (size_t)in_view.c_offset * hw;
    float *y = (float *)out + (size_t)out_view.c_offset * hw;
    dim3 grid((unsigned)tokens, (unsigned)heads, (unsigned)in_view.n);
    size_t shared = ((size_t)tokens + kAttnThreads / 32) * sizeof(float);
    k_attention_f32<<<grid, kAttnThreads, shared, stream>>>(
        x, (size_t)in_view.c_stride * hw, y, (size_t)out_view.c_stride * hw, heads, key_dim,
        head_dim, tokens, scale);
    return cudaGetLastError();
}
