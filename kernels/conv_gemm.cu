/* The GEMM tactic of a tensor-core convolution: im2col + cuBLASLt + epilogue (kernels/conv_gemm.h).
 * The epilogue repeats conv_wmma.cu's arithmetic operation for operation (fmaf(acc, mul, bias),
 * activation, max over the pool window, round-half-even to int8 / half), so int8 results are
 * bit-identical to the implicit-GEMM kernel. */
#include <cfloat>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <cuda_fp16.h>

#include "kernels/common.cuh"
#include "kernels/conv_gemm.h"
#include "kernels/conv_internal.cuh"
#include "kernels/fast_div.h"

struct gr_conv_gemm {
    int is_i8, direct;
    int batch, in_h, in_w, cin_pad, ksize, stride, pad, out_h, out_w;
    int out_c, out_c_pad, ldc, K, chunks_per_tap;
    long long M;
    int pool, pool_stride, pool_offset, pool_h, pool_w;
    int activation, out_kind;
    float out_inv_scale;
    int sms; /* the device's SM count at create */
    size_t x_bytes, c_bytes, ws_bytes; /* scratch parts, each 256-aligned */
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
};

namespace
{

constexpr size_t kMaxWorkspace = 8u << 20; /* cuBLASLt workspace (split-K / stream-K partials) */

size_t align256(size_t n)
{
    return (n + 255) & ~static_cast<size_t>(255);
}

/* cuBLASLt statuses become cudaError_t here: the reason goes to gr_kernels_last_failure(). */
#define GR_LT_TRY(stmt)                                                                            \
    do {                                                                                           \
        cublasStatus_t gr_lt_st_ = (stmt);                                                         \
        if (gr_lt_st_ != CUBLAS_STATUS_SUCCESS) {                                                  \
            char gr_lt_what_[64];                                                                  \
            snprintf(gr_lt_what_, sizeof gr_lt_what_, "cuBLASLt status %d", (int)gr_lt_st_);       \
            gr_kernels_record_failure(__FILE__, __LINE__, #stmt, gr_lt_what_);                     \
            return gr_lt_st_ == CUBLAS_STATUS_NOT_SUPPORTED ? cudaErrorNotSupported                \
                                                            : cudaErrorUnknown;                    \
        }                                                                                          \
    } while (0)

struct Im2colParams {
    const unsigned char *in; /* at the channel offset */
    uint4 *out;
    long long total; /* 16-byte chunks */
    int chunks_per_tap, taps, ksize, stride, pad;
    int in_h, in_w, out_h, out_w;
    long long in_pixel_bytes; /* in_c_stride * element size */
    gr_fast_div by_row, by_tap, by_w, by_h, by_k; /* row chunks, chunks_per_tap, out_w, out_h, ksize */
};

/* One thread per 16-byte chunk of the [M][K] matrix, in memory order: chunk i is channel chunk
 * i % cpt of tap (i / cpt) % taps of row i / (cpt * taps). Taps outside the image are zeros.
 * 32-bit index arithmetic (total < 2^31, checked at launch) through kernels/fast_div.h: the 64-bit
 * divisions made the kernel instruction-bound, and its five 32-bit ones were ~100 of its
 * instructions per 16 bytes. */
__global__ void k_im2col(Im2colParams p)
{
    const unsigned total = static_cast<unsigned>(p.total);
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        const unsigned m = gr_fast_div_do(i, p.by_row), c = i - m * p.by_row.d;
        const int tap = static_cast<int>(gr_fast_div_do(c, p.by_tap));
        const int ch = static_cast<int>(c - tap * p.by_tap.d);
        const unsigned t = gr_fast_div_do(m, p.by_w);
        const int ox = static_cast<int>(m - t * p.by_w.d);
        const unsigned n = gr_fast_div_do(t, p.by_h);
        const int oy = static_cast<int>(t - n * p.by_h.d);
        const int ky = static_cast<int>(gr_fast_div_do(static_cast<unsigned>(tap), p.by_k));
        const int iy = oy * p.stride - p.pad + ky;
        const int ix = ox * p.stride - p.pad + tap - ky * p.ksize;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (iy >= 0 && iy < p.in_h && ix >= 0 && ix < p.in_w)
            v = __ldg(reinterpret_cast<const uint4 *>(
                p.in + ((static_cast<long long>(n) * p.in_h + iy) * p.in_w + ix) * p.in_pixel_bytes +
                ch * 16));
        p.out[i] = v;
    }
}

struct EpilogueParams {
    const void *acc; /* int32 or f32 [M][ldc] */
    int ldc;
    const float *mul, *bias;
    void *out;
    int out_c, out_c_pad, out_c_stride, out_c_offset, out_kind, activation;
    float out_inv_scale;
    int batch, out_h, out_w;                  /* the conv's map */
    int pool, pool_stride, pool_offset, ph, pw; /* the written map: pooled or the conv's */
    unsigned items;                            /* written pixels x channel vectors (< 2^31) */
    gr_fast_div by_vecs, by_pw, by_ph;         /* out_c_pad / V, pw, ph */
};

/* Loads 4 consecutive accumulators (16 bytes, aligned: ldc and n are multiples of 4). */
__device__ __forceinline__ void load4(const int *acc, float (&a)[4])
{
    const int4 v = *reinterpret_cast<const int4 *>(acc);
    a[0] = static_cast<float>(v.x);
    a[1] = static_cast<float>(v.y);
    a[2] = static_cast<float>(v.z);
    a[3] = static_cast<float>(v.w);
}
__device__ __forceinline__ void load4(const float *acc, float (&a)[4])
{
    const float4 v = *reinterpret_cast<const float4 *>(acc);
    a[0] = v.x;
    a[1] = v.y;
    a[2] = v.z;
    a[3] = v.w;
}

/* One thread per V channels (4 or 8) of a written pixel: consecutive threads read consecutive
 * 16- or 32-byte accumulator vectors and write consecutive channel groups (coalesced;
 * docs/performance.md: 16 channels per thread strided the warp's loads 64 bytes apart, 69 us per
 * 13x13 layer at batch 64). V = 8 (the launcher's choice for layers of more than one wave of
 * threads): half the items, so half the index arithmetic per byte, and 16-byte f16 stores. */
template <typename Acc, int V> __global__ void k_epilogue(EpilogueParams p)
{
    static_assert(V == 4 || V == 8, "4 or 8 channels per item");
    /* 32-bit indices through kernels/fast_div.h: the 64-bit divisions and remainders here were
     * ~400 instructions per item and made the pass instruction-bound (~40 us per 13x13 layer at
     * batch 64 int8 on the H100/H200, for 55 MB of traffic). */
    for (unsigned it = blockIdx.x * blockDim.x + threadIdx.x; it < p.items;
         it += gridDim.x * blockDim.x) {
        const unsigned pix = gr_fast_div_do(it, p.by_vecs); /* written pixel (n, py, px) */
        const int n_base = static_cast<int>(it - pix * p.by_vecs.d) * V;
        const unsigned row = gr_fast_div_do(pix, p.by_pw);
        const int px = static_cast<int>(pix - row * p.by_pw.d);
        const unsigned img32 = gr_fast_div_do(row, p.by_ph);
        const int py = static_cast<int>(row - img32 * p.by_ph.d);
        const long long img = img32;
        float bias[V], mul[V], y[V];
#pragma unroll
        for (int e = 0; e < V; ++e) {
            const int n = n_base + e;
            bias[e] = p.bias && n < p.out_c ? p.bias[n] : 0.0f;
            mul[e] = p.mul ? (n < p.out_c ? p.mul[n] : 0.0f) : 1.0f;
            y[e] = -FLT_MAX;
        }
        const int taps = p.pool ? 4 : 1;
        for (int q = 0; q < taps; ++q) {
            int oy = py, ox = px;
            if (p.pool) {
                oy = py * p.pool_stride + p.pool_offset + (q >> 1);
                ox = px * p.pool_stride + p.pool_offset + (q & 1);
                if (oy < 0 || oy >= p.out_h || ox < 0 || ox >= p.out_w)
                    continue;
            }
            const long long m = (img * p.out_h + oy) * p.out_w + ox;
            float acc[V];
#pragma unroll
            for (int h = 0; h < V / 4; ++h) {
                float t[4];
                load4(static_cast<const Acc *>(p.acc) + m * p.ldc + n_base + 4 * h, t);
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    acc[4 * h + e] = t[e];
            }
#pragma unroll
            for (int e = 0; e < V; ++e) {
                const float a = n_base + e < p.out_c ? acc[e] : 0.0f;
                const float v = gr_conv_activate(fmaf(a, mul[e], bias[e]), p.activation);
                y[e] = v > y[e] ? v : y[e];
            }
        }
        if (p.out_kind == GR_CONV_OUT_F32_NCHW) {
            const long long hw = static_cast<long long>(p.ph) * p.pw;
            float *o = static_cast<float *>(p.out);
#pragma unroll
            for (int e = 0; e < V; ++e)
                if (n_base + e < p.out_c)
                    o[(img * p.out_c_stride + p.out_c_offset + n_base + e) * hw + py * p.pw + px] =
                        y[e];
            continue;
        }
        float v[V];
#pragma unroll
        for (int e = 0; e < V; ++e)
            v[e] = n_base + e < p.out_c ? y[e] : 0.0f;
        const long long dst = static_cast<long long>(pix) * p.out_c_stride + p.out_c_offset + n_base;
        if (p.out_kind == GR_CONV_OUT_I8) {
            unsigned w[V / 4];
#pragma unroll
            for (int h = 0; h < V / 4; ++h) {
                w[h] = 0u;
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    w[h] |= (n_base + 4 * h + e < p.out_c ? gr_conv_i8_bits(v[4 * h + e], p.out_inv_scale)
                                                          : 0u)
                            << (8 * e);
            }
            signed char *o = static_cast<signed char *>(p.out) + dst;
            if constexpr (V == 8)
                *reinterpret_cast<uint2 *>(o) = make_uint2(w[0], w[1]);
            else
                *reinterpret_cast<unsigned *>(o) = w[0];
        } else if (p.out_kind == GR_CONV_OUT_F16) {
            __half *o = static_cast<__half *>(p.out) + dst;
            if constexpr (V == 8)
                *reinterpret_cast<uint4 *>(o) =
                    make_uint4(gr_conv_half2_bits(v[0], v[1]), gr_conv_half2_bits(v[2], v[3]),
                               gr_conv_half2_bits(v[4], v[5]), gr_conv_half2_bits(v[6], v[7]));
            else
                *reinterpret_cast<uint2 *>(o) =
                    make_uint2(gr_conv_half2_bits(v[0], v[1]), gr_conv_half2_bits(v[2], v[3]));
        } else {
#pragma unroll
            for (int h = 0; h < V / 4; ++h)
                reinterpret_cast<float4 *>(static_cast<float *>(p.out) + dst)[h] =
                    make_float4(v[4 * h], v[4 * h + 1], v[4 * h + 2], v[4 * h + 3]);
        }
    }
}

int grid_for(long long items, int threads)
{
    long long blocks = (items + threads - 1) / threads;
    return static_cast<int>(blocks < 65535LL * 8 ? blocks : 65535LL * 8);
}

cudaError_t make_descriptors(gr_conv_gemm *g, const gr_conv_args *a)
{
    const cudaDataType_t ab = g->is_i8 ? CUDA_R_8I : CUDA_R_16F;
    const cudaDataType_t ct = g->is_i8 ? CUDA_R_32I : CUDA_R_32F;
    GR_LT_TRY(cublasLtMatmulDescCreate(&g->op, g->is_i8 ? CUBLAS_COMPUTE_32I : CUBLAS_COMPUTE_32F, ct));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    GR_LT_TRY(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    GR_LT_TRY(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    /* Column-major views of the row-major buffers: weights K x out_c (ld K), the im2col matrix
     * K x M (ld K, or the input's channel stride when it is read in place), C out_c x M (ld ldc). */
    const int64_t ldb = g->direct ? a->in_c_stride : g->K;
    GR_LT_TRY(cublasLtMatrixLayoutCreate(&g->la, ab, (uint64_t)g->K, (uint64_t)g->out_c, g->K));
    GR_LT_TRY(cublasLtMatrixLayoutCreate(&g->lb, ab, (uint64_t)g->K, (uint64_t)g->M, ldb));
    GR_LT_TRY(cublasLtMatrixLayoutCreate(&g->lc, ct, (uint64_t)g->out_c, (uint64_t)g->M, g->ldc));
    cublasLtMatmulPreference_t pref;
    GR_LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = kMaxWorkspace;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    /* The contract promises 16-byte aligned pointers (channel slices, per-layer weights), not the
     * 256 bytes cuBLASLt's heuristic assumes by default. */
    const uint32_t align = 16;
    const cublasLtMatmulPreferenceAttributes_t aligns[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; ++i)
        st = cublasLtMatmulPreferenceSetAttribute(pref, aligns[i], &align, sizeof align);
    cublasLtMatmulHeuristicResult_t res[1];
    int found = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(g->lt, g->op, g->la, g->lb, g->lc, g->lc, pref, 1, res,
                                            &found);
    cublasLtMatmulPreferenceDestroy(pref);
    GR_LT_TRY(st);
    if (found < 1) {
        gr_kernels_record_failure(__FILE__, __LINE__, "cublasLtMatmulAlgoGetHeuristic",
                                  "no cuBLASLt algorithm for this shape");
        return cudaErrorNotSupported;
    }
    g->algo = res[0].algo;
    g->ws_bytes = align256(res[0].workspaceSize);
    return cudaSuccess;
}

} // namespace

extern "C" void gr_conv_gemm_destroy(gr_conv_gemm *g)
{
    if (!g)
        return;
    if (g->la)
        cublasLtMatrixLayoutDestroy(g->la);
    if (g->lb)
        cublasLtMatrixLayoutDestroy(g->lb);
    if (g->lc)
        cublasLtMatrixLayoutDestroy(g->lc);
    if (g->op)
        cublasLtMatmulDescDestroy(g->op);
    free(g);
}

extern "C" cudaError_t gr_conv_gemm_create(const gr_conv_args *a, int is_i8, cublasLtHandle_t lt,
                                           gr_conv_gemm **out, size_t *scratch_bytes)
{
    GR_ARG_CHECK(a != nullptr && out != nullptr && scratch_bytes != nullptr && lt != nullptr);
    *out = nullptr;
    *scratch_bytes = 0;
    gr_conv_args shape = *a;
    shape.tile_config = 0;
    shape.split_k = 0;
    shape.workspace = nullptr;
    const cudaError_t checked = gr_conv_check(&shape, is_i8);
    if (checked != cudaSuccess)
        return checked;
    if (a->in_u8 || a->fp16_accumulate || a->tile_config || a->split_k > 1) {
        gr_kernels_record_failure(__FILE__, __LINE__, "gr_conv_gemm_create",
                                  "the GEMM tactic takes no in_u8 / fp16_accumulate / tile / split");
        return cudaErrorNotSupported;
    }
    gr_conv_gemm *g = static_cast<gr_conv_gemm *>(calloc(1, sizeof *g));
    if (!g)
        return cudaErrorMemoryAllocation;
    const int elem = is_i8 ? 1 : 2, gran = is_i8 ? 16 : 8;
    g->is_i8 = is_i8 != 0;
    g->lt = lt;
    g->batch = a->batch;
    g->in_h = a->in_h;
    g->in_w = a->in_w;
    g->cin_pad = (a->in_c + gran - 1) / gran * gran;
    g->ksize = a->ksize;
    g->stride = a->stride;
    g->pad = a->pad;
    g->out_h = gr_conv_out_dim(a->in_h, a->ksize, a->stride, a->pad);
    g->out_w = gr_conv_out_dim(a->in_w, a->ksize, a->stride, a->pad);
    g->out_c = a->out_c;
    const int out_gran = a->out_kind == GR_CONV_OUT_I8 ? 16 : 8;
    g->out_c_pad = (a->out_c + out_gran - 1) / out_gran * out_gran;
    g->ldc = (a->out_c + 15) / 16 * 16;
    if (g->ldc < g->out_c_pad)
        g->ldc = g->out_c_pad;
    g->K = a->ksize * a->ksize * g->cin_pad;
    g->chunks_per_tap = g->cin_pad * elem / 16;
    g->M = static_cast<long long>(a->batch) * g->out_h * g->out_w;
    g->direct = a->ksize == 1 && a->stride == 1 && a->pad == 0;
    g->pool = a->pool_size != 0;
    g->pool_stride = a->pool_stride;
    g->pool_offset = -a->pool_pad / 2;
    g->pool_h = g->pool ? (g->out_h + a->pool_pad - 2) / a->pool_stride + 1 : g->out_h;
    g->pool_w = g->pool ? (g->out_w + a->pool_pad - 2) / a->pool_stride + 1 : g->out_w;
    g->activation = a->activation;
    g->out_kind = a->out_kind;
    g->out_inv_scale = a->out_inv_scale;
    g->x_bytes = g->direct ? 0 : align256(static_cast<size_t>(g->M) * g->K * elem);
    if (!g->direct && g->M * g->ksize * g->ksize * g->chunks_per_tap >= INT_MAX) {
        gr_kernels_record_failure(__FILE__, __LINE__, "GEMM tactic im2col",
                                  "the im2col matrix has 2^31 or more 16-byte chunks");
        gr_conv_gemm_destroy(g);
        return cudaErrorInvalidValue;
    }
    if (static_cast<long long>(g->batch) * g->pool_h * g->pool_w * (g->out_c_pad / 4) >= INT_MAX) {
        gr_kernels_record_failure(__FILE__, __LINE__, "GEMM tactic epilogue",
                                  "the output has 2^31 or more 4-channel vectors");
        gr_conv_gemm_destroy(g);
        return cudaErrorInvalidValue;
    }
    g->c_bytes = align256(static_cast<size_t>(g->M) * g->ldc * 4);
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&g->sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
        gr_kernels_record_failure(__FILE__, __LINE__, "GEMM tactic", "the device's SM count");
        gr_conv_gemm_destroy(g);
        return cudaErrorInvalidDevice;
    }
    const cudaError_t err = make_descriptors(g, a);
    if (err != cudaSuccess) {
        gr_conv_gemm_destroy(g);
        return err;
    }
    *scratch_bytes = g->x_bytes + g->c_bytes + g->ws_bytes;
    *out = g;
    return cudaSuccess;
}

extern "C" cudaError_t gr_conv_gemm_launch(const gr_conv_gemm *g, const gr_conv_args *a,
                                           void *scratch, cudaStream_t stream)
{
    GR_ARG_CHECK(g != nullptr && a != nullptr && scratch != nullptr);
    GR_ARG_CHECK(a->in != nullptr && a->weights != nullptr && a->out != nullptr);
    GR_ARG_CHECK(!g->is_i8 || a->mul != nullptr);
    const int elem = g->is_i8 ? 1 : 2;
    unsigned char *base = static_cast<unsigned char *>(scratch);
    const unsigned char *in = static_cast<const unsigned char *>(a->in) +
                              static_cast<size_t>(a->in_c_offset) * elem;
    const void *x = in;
    if (!g->direct) {
        Im2colParams p;
        p.in = in;
        p.out = reinterpret_cast<uint4 *>(base);
        p.total = g->M * g->ksize * g->ksize * g->chunks_per_tap;
        p.chunks_per_tap = g->chunks_per_tap;
        p.taps = g->ksize * g->ksize;
        p.ksize = g->ksize;
        p.stride = g->stride;
        p.pad = g->pad;
        p.in_h = g->in_h;
        p.in_w = g->in_w;
        p.out_h = g->out_h;
        p.out_w = g->out_w;
        p.in_pixel_bytes = static_cast<long long>(a->in_c_stride) * elem;
        GR_ARG_CHECK(p.total < INT_MAX);
        GR_ARG_CHECK(gr_fast_div_init(&p.by_row, static_cast<uint32_t>(p.chunks_per_tap * p.taps)) &&
                     gr_fast_div_init(&p.by_tap, static_cast<uint32_t>(p.chunks_per_tap)) &&
                     gr_fast_div_init(&p.by_w, static_cast<uint32_t>(p.out_w)) &&
                     gr_fast_div_init(&p.by_h, static_cast<uint32_t>(p.out_h)) &&
                     gr_fast_div_init(&p.by_k, static_cast<uint32_t>(p.ksize)));
        k_im2col<<<grid_for(p.total, 256), 256, 0, stream>>>(p);
        GR_LAUNCH_CHECK();
        x = base;
    }
    void *c = base + g->x_bytes;
    void *ws = base + g->x_bytes + g->c_bytes;
    if (g->is_i8) {
        const int32_t alpha = 1, beta = 0;
        GR_LT_TRY(cublasLtMatmul(g->lt, g->op, &alpha, a->weights, g->la, x, g->lb, &beta, c,
                                 g->lc, c, g->lc, &g->algo, ws, g->ws_bytes, stream));
    } else {
        const float alpha = 1.0f, beta = 0.0f;
        GR_LT_TRY(cublasLtMatmul(g->lt, g->op, &alpha, a->weights, g->la, x, g->lb, &beta, c,
                                 g->lc, c, g->lc, &g->algo, ws, g->ws_bytes, stream));
    }
    EpilogueParams e;
    e.acc = c;
    e.ldc = g->ldc;
    e.mul = a->mul;
    e.bias = a->bias;
    e.out = a->out;
    e.out_c = g->out_c;
    e.out_c_pad = g->out_c_pad;
    e.out_c_stride = a->out_c_stride;
    e.out_c_offset = a->out_c_offset;
    e.out_kind = g->out_kind;
    e.activation = g->activation;
    e.out_inv_scale = g->out_inv_scale;
    e.batch = g->batch;
    e.out_h = g->out_h;
    e.out_w = g->out_w;
    e.pool = g->pool;
    e.pool_stride = g->pool_stride;
    e.pool_offset = g->pool_offset;
    e.ph = g->pool_h;
    e.pw = g->pool_w;
    /* Channels per item (k_epilogue): 8 where the items of 4 would be more than one wave of
     * threads on the GPU (2048 per SM), else 4 - a small layer (batch 1) needs the threads more
     * than it saves index arithmetic. */
    const long long pixels = static_cast<long long>(g->batch) * g->pool_h * g->pool_w;
    const int vec = g->out_c_pad % 8 == 0 && pixels * (g->out_c_pad / 4) > 2048LL * g->sms ? 8 : 4;
    const long long items = pixels * (g->out_c_pad / vec);
    GR_ARG_CHECK(items < INT_MAX); /* refused at create */
    e.items = static_cast<unsigned>(items);
    GR_ARG_CHECK(gr_fast_div_init(&e.by_vecs, static_cast<uint32_t>(g->out_c_pad / vec)) &&
                 gr_fast_div_init(&e.by_pw, static_cast<uint32_t>(g->pool_w)) &&
                 gr_fast_div_init(&e.by_ph, static_cast<uint32_t>(g->pool_h)));
    const int blocks = grid_for(items, 128);
    if (g->is_i8 && vec == 8)
        k_epilogue<int32_t, 8><<<blocks, 128, 0, stream>>>(e);
    else if (g->is_i8)
        k_epilogue<int32_t, 4><<<blocks, 128, 0, stream>>>(e);
    else if (vec == 8)
        k_epilogue<float, 8><<<blocks, 128, 0, stream>>>(e);
    else
        k_epilogue<float, 4><<<blocks, 128, 0, stream>>>(e);
    GR_LAUNCH_CHECK();
    return cudaSuccess;
}
