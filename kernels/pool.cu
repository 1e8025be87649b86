// Pooling kernels: Darknet maxpool (any size/stride/padding) and global average pool, for f32
// NCHW and f16 / i8 NHWC with padded channels. Maxpool: one thread per output element, or for
// granule-aligned NHWC views one thread per 16-byte channel granule (vector loads; same result).
// Avgpool: one thread per output channel (a sequential sum, reproducible bit for bit).
// Local avgpool (AlexeyAB's [local_avgpool], f32 NCHW): maxpool's windows, one thread per output
// element, the mean of the taps inside the input summed in window order (ops/local_avgpool.c).
#include "kernels/misc_common.cuh"

using namespace grk;

namespace {

template <typename T>
__device__ void maxpool_body(const T *in, gr_kview iv, T *out, gr_kview ov, int c_written, int size,
                             int stride, int window_offset)
{
    constexpr bool nhwc = Dtype<T>::nhwc;
    const unsigned total = (unsigned)ov.n * c_written * ov.h * ov.w;
    GRK_GRID_STRIDE(e, total)
    {
        Pos p = decompose<nhwc>(e, c_written, ov.h, ov.w);
        size_t o = offset_of<nhwc>(ov, p.n, p.ch, p.y, p.x);
        if (p.ch >= (unsigned)ov.c) {
            out[o] = Dtype<T>::zero();
            continue;
        }
        T best = Dtype<T>::lowest();
        int y0 = (int)p.y * stride + window_offset;
        int x0 = (int)p.x * stride + window_offset;
        for (int dy = 0; dy < size; dy++) {
            int y = y0 + dy;
            if (y < 0 || y >= iv.h)
                continue;
            for (int dx = 0; dx < size; dx++) {
                int x = x0 + dx;
                if (x < 0 || x >= iv.w)
                    continue;
                T v = in[offset_of<nhwc>(iv, p.n, p.ch, y, x)];
                if (Dtype<T>::greater(v, best))
                    best = v;
            }
        }
        out[o] = best;
    }
}

// Vector path for NHWC: one thread per 16-byte channel granule (8 f16 / 16 i8 channels) of one
// output pixel, 16-byte loads and stores. Same comparison and tap order as maxpool_body, so the
// result is bit-identical; lanes past the slice's channels are written as 0 (padding).
__device__ __forceinline__ void granule_max(Granule &best, const Granule &tap, int8_t)
{
    best.v.x = __vmaxs4(best.v.x, tap.v.x);
    best.v.y = __vmaxs4(best.v.y, tap.v.y);
    best.v.z = __vmaxs4(best.v.z, tap.v.z);
    best.v.w = __vmaxs4(best.v.w, tap.v.w);
}

__device__ __forceinline__ void granule_max(Granule &best, const Granule &tap, __half)
{
#pragma unroll
    for (int l = 0; l < 8; l++)
        if (__half2float(__ushort_as_half(tap.f16[l])) >
            __half2float(__ushort_as_half(best.f16[l])))
            best.f16[l] = tap.f16[l];
}

template <typename T>
__device__ void maxpool_vec_body(const T *in, gr_kview iv, T *out, gr_kview ov, int granules,
                                 int size, int stride, int window_offset)
{
    constexpr int lanes = 16 / sizeof(T);
    const unsigned total = (unsigned)ov.n * ov.h * ov.w * granules;
    Granule lowest;
    if (sizeof(T) == 1)
        lowest.v = make_uint4(0x81818181u, 0x81818181u, 0x81818181u, 0x81818181u); // -127
    else
        lowest.v = make_uint4(0xFC00FC00u, 0xFC00FC00u, 0xFC00FC00u, 0xFC00FC00u); // -inf
    GRK_GRID_STRIDE(e, total)
    {
        unsigned g = e % granules, pixel = e / granules;
        unsigned x = pixel % ov.w, y = (pixel / ov.w) % ov.h, n = pixel / ((unsigned)ov.w * ov.h);
        Granule best = lowest;
        int y0 = (int)y * stride + window_offset, x0 = (int)x * stride + window_offset;
        for (int dy = 0; dy < size; dy++) {
            int yy = y0 + dy;
            if (yy < 0 || yy >= iv.h)
                continue;
            for (int dx = 0; dx < size; dx++) {
                int xx = x0 + dx;
                if (xx < 0 || xx >= iv.w)
                    continue;
                Granule tap;
                tap.v = *reinterpret_cast<const uint4 *>(in +
                                                         offset_of<true>(iv, n, g * lanes, yy, xx));
                granule_max(best, tap, T());
            }
        }
        int valid = ov.c - (int)(g * lanes); // lanes at or past this are padding
        if (valid < lanes) {
#pragma unroll
            for (int l = 0; l < lanes; l++)
                if (l >= valid) {
                    if (sizeof(T) == 1)
                        best.i8[l] = 0;
                    else
                        best.f16[l] = 0;
                }
        }
        *reinterpret_cast<uint4 *>(out + offset_of<true>(ov, n, g * lanes, y, x)) = best.v;
    }
}

// avgpool: one thread per (image, written channel).
template <typename T>
__device__ void avgpool_body(const T *in, gr_kview iv, T *out, gr_kview ov, int c_written)
{
    constexpr bool nhwc = Dtype<T>::nhwc;
    const unsigned total = (unsigned)ov.n * c_written;
    const float count = (float)(iv.h * iv.w);
    GRK_GRID_STRIDE(e, total)
    {
        unsigned ch = e % c_written, n = e / c_written;
        size_t o = offset_of<nhwc>(ov, n, ch, 0, 0);
        if (ch >= (unsigned)ov.c) {
            out[o] = Dtype<T>::zero();
            continue;
        }
        float sum = 0.0f;
        for (int y = 0; y < iv.h; y++)
            for (int x = 0; x < iv.w; x++)
                sum = __fadd_rn(sum, Dtype<T>::to_f32(in[offset_of<nhwc>(iv, n, ch, y, x)]));
        out[o] = Store<T>::from_f32(__fdiv_rn(sum, count), 1.0f);
    }
}

} // namespace

__global__ void k_maxpool_f32(const float *in, gr_kview iv, float *out, gr_kview ov, int cw,
                              int size, int stride, int offset)
{
    maxpool_body<float>(in, iv, out, ov, cw, size, stride, offset);
}
__global__ void k_maxpool_f16(const __half *in, gr_kview iv, __half *out, gr_kview ov, int cw,
                              int size, int stride, int offset)
{
    maxpool_body<__half>(in, iv, out, ov, cw, size, stride, offset);
}
__global__ void k_maxpool_i8(const int8_t *in, gr_kview iv, int8_t *out, gr_kview ov, int cw,
                             int size, int stride, int offset)
{
    maxpool_body<int8_t>(in, iv, out, ov, cw, size, stride, offset);
}

__global__ void k_maxpool_vec_f16(const __half *in, gr_kview iv, __half *out, gr_kview ov,
                                  int granules, int size, int stride, int offset)
{
    maxpool_vec_body<__half>(in, iv, out, ov, granules, size, stride, offset);
}
__global__ void k_maxpool_vec_i8(const int8_t *in, gr_kview iv, int8_t *out, gr_kview ov,
                                 int granules, int size, int stride, int offset)
{
    maxpool_vec_body<int8_t>(in, iv, out, ov, granules, size, stride, offset);
}

__global__ void k_avgpool_f32(const float *in, gr_kview iv, float *out, gr_kview ov, int cw)
{
    avgpool_body<float>(in, iv, out, ov, cw);
}
__global__ void k_avgpool_f16(const __half *in, gr_kview iv, __half *out, gr_kview ov, int cw)
{
    avgpool_body<__half>(in, iv, out, ov, cw);
}
// i8: the integer sum is exact; the mean is dequantized once and requantized with the output scale.
__global__ void k_avgpool_i8(const int8_t *in, gr_kview iv, float in_scale, int8_t *out,
                             gr_kview ov, float inv_out_scale, int cw)
{
    const unsigned total = (unsigned)ov.n * cw;
    const float count = (float)(iv.h * iv.w);
    GRK_GRID_STRIDE(e, total)
    {
        unsigned ch = e % cw, n = e / cw;
        size_t o = offset_of<true>(ov, n, ch, 0, 0);
        if (ch >= (unsigned)ov.c) {
            out[o] = 0;
            continue;
        }
        int sum = 0;
        for (int y = 0; y < iv.h; y++)
            for (int x = 0; x < iv.w; x++)
                sum += in[offset_of<true>(iv, n, ch, y, x)];
        float mean = __fdiv_rn(__fmul_rn((float)sum, in_scale), count);
        out[o] = Store<int8_t>::from_f32(mean, inv_out_scale);
    }
}

__global__ void k_local_avgpool_f32(const float *in, gr_kview iv, float *out, gr_kview ov,
                                   int size, int stride, int window_offset)
{
    const unsigned total = (unsigned)ov.n * ov.c * ov.h * ov.w;
    GRK_GRID_STRIDE(e, total)
    {
        Pos p = decompose<false>(e, ov.c, ov.h, ov.w);
        const int y0 = (int)p.y * stride + window_offset, x0 = (int)p.x * stride + window_offset;
        float sum = 0.0f;
        int taps = 0;
        for (int dy = 0; dy < size; dy++) {
            const int y = y0 + dy;
            for (int dx = 0; dx < size; dx++) {
                const int x = x0 + dx;
                if (y < 0 || y >= iv.h || x < 0 || x >= iv.w)
                    continue;
                sum = __fadd_rn(sum, in[offset_of<false>(iv, p.n, p.ch, y, x)]);
                taps++;
            }
        }
        out[offset_of<false>(ov, p.n, p.ch, p.y, p.x)] = __fdiv_rn(sum, (float)taps);
    }
}

namespace {

template <typename T>
bool maxpool_args_ok(const void *in, const gr_kview &iv, const void *out, const gr_kview &ov,
                     int size, int stride, int padding)
{
    const int a = Dtype<T>::align;
    if (!in || !out || !view_ok(iv, a) || !view_ok(ov, a) || size < 1 || stride < 1 || padding < 0)
        return false;
    if (ov.n != iv.n || ov.c != iv.c)
        return false;
    if (iv.h + padding < size || iv.w + padding < size)
        return false;
    return ov.h == (iv.h + padding - size) / stride + 1 &&
           ov.w == (iv.w + padding - size) / stride + 1;
}

template <typename T>
bool avgpool_args_ok(const void *in, const gr_kview &iv, const void *out, const gr_kview &ov)
{
    const int a = Dtype<T>::align;
    return in && out && view_ok(iv, a) && view_ok(ov, a) && ov.n == iv.n && ov.c == iv.c &&
           ov.h == 1 && ov.w == 1 && (long long)iv.h * iv.w < (1 << 24);
}

} // namespace

template <typename T>
using maxpool_kernel = void (*)(const T *, gr_kview, T *, gr_kview, int, int, int, int);

// vec_kernel: NULL where the dtype has no vector path (f32).
template <typename T>
static cudaError_t launch_maxpool(maxpool_kernel<T> scalar_kernel, maxpool_kernel<T> vec_kernel,
                                  const void *in, gr_kview iv, void *out, gr_kview ov, int size,
                                  int stride, int padding, cudaStream_t stream)
{
    GR_ARG_CHECK(maxpool_args_ok<T>(in, iv, out, ov, size, stride, padding));
    const int cw = channels_written(ov, Dtype<T>::align), lanes = 16 / (int)sizeof(T);
    const bool vec = granule_aligned(out, ov, cw, lanes) && granule_aligned(in, iv, lanes, lanes);
    if (vec_kernel && vec) {
        const int granules = cw / lanes;
        vec_kernel<<<blocks_for((size_t)ov.n * granules * ov.h * ov.w), kThreads, 0, stream>>>(
            (const T *)in, iv, (T *)out, ov, granules, size, stride, -padding / 2);
    } else {
        scalar_kernel<<<blocks_for((size_t)ov.n * cw * ov.h * ov.w), kThreads, 0, stream>>>(
            (const T *)in, iv, (T *)out, ov, cw, size, stride, -padding / 2);
    }
    return cudaGetLastError();
}

extern "C" cudaError_t gr_launch_local_avgpool(gr_dtype dtype, const void *in, gr_kview iv,
                                               void *out, gr_kview ov, int size, int stride,
                                               int padding, cudaStream_t stream)
{
    if (dtype != GR_DTYPE_F32)
        return no_kernel(__FILE__, __LINE__, "gr_launch_local_avgpool");
    // maxpool's shape rule, and no window wholly in the padding (it would average no taps)
    GR_ARG_CHECK(maxpool_args_ok<float>(in, iv, out, ov, size, stride, padding) &&
                 (padding + 1) / 2 < size);
    k_local_avgpool_f32<<<blocks_for((size_t)ov.n * ov.c * ov.h * ov.w), kThreads, 0, stream>>>(
        (const float *)in, iv, (float *)out, ov, size, stride, -padding / 2);
    return cudaGetLastError();
}

extern "C" cudaError_t gr_launch_maxpool(gr_dtype dtype, const void *in, gr_kview iv, void *out,
                                         gr_kview ov, int size, int stride, int padding,
                                         cudaStream_t stream)
{
    switch (dtype) {
    case GR_DTYPE_F32:
        return launch_maxpool<float>(k_maxpool_f32, nullptr, in, iv, out, ov, size, stride,
                                     padding, stream);
    case GR_DTYPE_F16:
        return launch_maxpool<__half>(k_maxpool_f16, k_maxpool_vec_f16, in, iv, out, ov, size,
                                      stride, padding, stream);
    case GR_DTYPE_I8:
        return launch_maxpool<int8_t>(k_maxpool_i8, k_maxpool_vec_i8, in, iv, out, ov, size,
                                      stride, padding, stream);
    default: return no_kernel(__FILE__, __LINE__, "gr_launch_maxpool");
    }
}

extern "C" cudaError_t gr_launch_avgpool(gr_dtype dtype, const void *in, gr_kview iv,
                                         float in_scale, void *out, gr_kview ov, float out_scale,
                                         cudaStream_t stream)
{
    switch (dtype) {
    case GR_DTYPE_F32: {
        GR_ARG_CHECK(avgpool_args_ok<float>(in, iv, out, ov));
        int cw = channels_written(ov, 1);
        k_avgpool_f32<<<blocks_for((size_t)ov.n * cw), kThreads, 0, stream>>>(
            (const float *)in, iv, (float *)out, ov, cw);
        break;
    }
    case GR_DTYPE_F16: {
        GR_ARG_CHECK(avgpool_args_ok<__half>(in, iv, out, ov));
        int cw = channels_written(ov, GR_KALIGN_F16);
        k_avgpool_f16<<<blocks_for((size_t)ov.n * cw), kThreads, 0, stream>>>(
            (const __half *)in, iv, (__half *)out, ov, cw);
        break;
    }
    case GR_DTYPE_I8: {
        GR_ARG_CHECK(avgpool_args_ok<int8_t>(in, iv, out, ov) && in_scale > 0.0f &&
                     out_scale > 0.0f);
        int cw = channels_written(ov, GR_KALIGN_I8);
        k_avgpool_i8<<<blocks_for((size_t)ov.n * cw), kThreads, 0, stream>>>(
            (const int8_t *)in, iv, in_scale, (int8_t *)out, ov, 1.0f / out_scale, cw);
        break;
    }
    default: return no_kernel(__FILE__, __LINE__, "gr_launch_avgpool");
    }
    return cudaGetLastError();
}
