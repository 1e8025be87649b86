// Data-movement kernels: nearest upsample, Darknet reorg, route/concat channel copy, shortcut and
// the broadcast product of [sam] / [scale_channels], for f32 NCHW and f16 / i8 NHWC with padded channels. One thread per written output element;
// flat indices enumerate the output in memory order so neighbouring threads write neighbouring
// addresses.
#include "kernels/misc_common.cuh"

using namespace grk;

namespace {

template <typename T>
__device__ void upsample_body(const T *in, gr_kview iv, T *out, gr_kview ov, int cw, int factor)
{
    constexpr bool nhwc = Dtype<T>::nhwc;
    const unsigned total = (unsigned)ov.n * cw * ov.h * ov.w;
    GRK_GRID_STRIDE(e, total)
    {
        Pos p = decompose<nhwc>(e, cw, ov.h, ov.w);
        size_t o = offset_of<nhwc>(ov, p.n, p.ch, p.y, p.x);
        out[o] = p.ch < (unsigned)ov.c
                     ? in[offset_of<nhwc>(iv, p.n, p.ch, p.y / factor, p.x / factor)]
                     : Dtype<T>::zero();
    }
}

// Darknet reorg_cpu(forward = 0): output flat index f (per image) reads input flat index g, both
// flat over the input's (C, H, W); see docs/darknet.md.
template <typename T>
__device__ void reorg_body(const T *in, gr_kview iv, T *out, gr_kview ov, int cw, int s)
{
    constexpr bool nhwc = Dtype<T>::nhwc;
    const unsigned total = (unsigned)ov.n * cw * ov.h * ov.w;
    const unsigned W = iv.w, H = iv.h, oc = iv.c / (s * s);
    GRK_GRID_STRIDE(e, total)
    {
        Pos p = decompose<nhwc>(e, cw, ov.h, ov.w);
        size_t o = offset_of<nhwc>(ov, p.n, p.ch, p.y, p.x);
        if (p.ch >= (unsigned)ov.c) {
            out[o] = Dtype<T>::zero();
            continue;
        }
        unsigned f = p.x + ov.w * (p.y + ov.h * p.ch);
        unsigned i = f % W, j = (f / W) % H, k = f / (W * H);
        unsigned block = k / oc;
        unsigned g = (i * s + block % s) + W * s * ((j * s + block / s) + H * s * (k % oc));
        out[o] = in[offset_of<nhwc>(iv, p.n, g / (W * H), (g / W) % H, g % W)];
    }
}

template <typename T>
__device__ void route_copy_body(const T *in, gr_kview iv, T *out, gr_kview ov, int cw)
{
    constexpr bool nhwc = Dtype<T>::nhwc;
    const unsigned total = (unsigned)ov.n * cw * ov.h * ov.w;
    GRK_GRID_STRIDE(e, total)
    {
        Pos p = decompose<nhwc>(e, cw, ov.h, ov.w);
        size_t o = offset_of<nhwc>(ov, p.n, p.ch, p.y, p.x);
        out[o] =
            p.ch < (unsigned)ov.c ? in[offset_of<nhwc>(iv, p.n, p.ch, p.y, p.x)] : Dtype<T>::zero();
    }
}

// Darknet shortcut_cpu with alpha = beta = 1, then the activation over every element.
// Scales are 1 for f32/f16 (the products are then exact).
template <typename T>
__device__ void shortcut_body(const T *x, gr_kview xv, float x_scale, const T *from, gr_kview fv,
                              float from_scale, T *out, gr_kview ov, float inv_out_scale, int cw,
                              gr_activation act)
{
    constexpr bool nhwc = Dtype<T>::nhwc;
    const unsigned total = (unsigned)ov.n * cw * ov.h * ov.w;
    int stride = fv.w / xv.w, sample = xv.w / fv.w;
    stride = stride < 1 ? 1 : stride;
    sample = sample < 1 ? 1 : sample;
    const unsigned minc = min(xv.c, fv.c), minh = min(xv.h, fv.h), minw = min(xv.w, fv.w);
    GRK_GRID_STRIDE(e, total)
    {
        Pos p = decompose<nhwc>(e, cw, ov.h, ov.w);
        size_t o = offset_of<nhwc>(ov, p.n, p.ch, p.y, p.x);
        if (p.ch >= (unsigned)ov.c) {
            out[o] = Dtype<T>::zero();
            continue;
        }
        float y = __fmul_rn(Dtype<T>::to_f32(x[offset_of<nhwc>(xv, p.n, p.ch, p.y, p.x)]), x_scale);
        unsigned j = p.y / sample, i = p.x / sample;
        if (p.ch < minc && p.y % sample == 0 && p.x % sample == 0 && j < minh && i < minw) {
            T f = from[offset_of<nhwc>(fv, p.n, p.ch, j * stride, i * stride)];
            y = __fadd_rn(y, __fmul_rn(Dtype<T>::to_f32(f), from_scale));
        }
        out[o] = Store<T>::from_f32(activate(y, act), inv_out_scale);
    }
}

// out = act(x * s), s read at channel 0 when it has one channel and at (0, 0) when it is 1 x 1
// (gr_launch_mul). Each operand widened (and for i8 scaled) with its own rounded product, the
// product of the two rounded once: the CPU emulation's order (planner/exec.c gathers real values,
// ops/sam.c and ops/scale_channels.c multiply), no fma.
template <typename T>
__device__ void mul_body(const T *x, gr_kview xv, float x_scale, const T *s, gr_kview sv,
                         float s_scale, T *out, gr_kview ov, float inv_out_scale, int cw,
                         gr_activation act)
{
    constexpr bool nhwc = Dtype<T>::nhwc;
    const unsigned total = (unsigned)ov.n * cw * ov.h * ov.w;
    const bool per_channel = sv.c != 1, per_position = sv.h != 1 || sv.w != 1;
    GRK_GRID_STRIDE(e, total)
    {
        Pos p = decompose<nhwc>(e, cw, ov.h, ov.w);
        size_t o = offset_of<nhwc>(ov, p.n, p.ch, p.y, p.x);
        if (p.ch >= (unsigned)ov.c) {
            out[o] = Dtype<T>::zero();
            continue;
        }
        float a = __fmul_rn(Dtype<T>::to_f32(x[offset_of<nhwc>(xv, p.n, p.ch, p.y, p.x)]), x_scale);
        size_t si = offset_of<nhwc>(sv, p.n, per_channel ? p.ch : 0, per_position ? p.y : 0,
                                    per_position ? p.x : 0);
        float b = __fmul_rn(Dtype<T>::to_f32(s[si]), s_scale);
        out[o] = Store<T>::from_f32(activate(__fmul_rn(a, b), act), inv_out_scale);
    }
}

// Vector paths for granule-aligned NHWC views (f16 / i8; kernels/pool.cu's maxpool does the
// same): one thread per 16-byte channel granule of an output pixel instead of one per channel,
// the same values. Lanes at or past the view's channels are written 0 (misc.h's padding rule).
// Measured: the scalar kernels ran YOLOv8n's upsample and residual adds at 6-10% of the copy rate
// (H100 roofline, 2026-12-07; docs/performance.md).
template <typename T> struct Lanes {
    static constexpr int n = 16 / (int)sizeof(T);
    __device__ static T get(const Granule &g, int l)
    {
        if constexpr (sizeof(T) == 1)
            return g.i8[l];
        else
            return __ushort_as_half(g.f16[l]);
    }
    __device__ static void set(Granule &g, int l, T v)
    {
        if constexpr (sizeof(T) == 1)
            g.i8[l] = v;
        else
            g.f16[l] = __half_as_ushort(v);
    }
};

// Output granule e: pixel (n, y, x) and granule index g of its channels.
struct GranulePos {
    unsigned n, y, x, g;
};
__device__ __forceinline__ GranulePos granule_pos(unsigned e, unsigned granules, const gr_kview &ov)
{
    GranulePos q;
    q.g = e % granules;
    const unsigned pixel = e / granules;
    q.x = pixel % ov.w;
    q.y = (pixel / ov.w) % ov.h;
    q.n = pixel / ((unsigned)ov.w * ov.h);
    return q;
}

// Zero the lanes of granule g at or past channel count c.
template <typename T> __device__ __forceinline__ void zero_past(Granule &v, unsigned g, int c)
{
    const int valid = c - (int)(g * Lanes<T>::n);
    if (valid < Lanes<T>::n) {
#pragma unroll
        for (int l = 0; l < Lanes<T>::n; l++)
            if (l >= valid)
                Lanes<T>::set(v, l, Dtype<T>::zero());
    }
}

// Upsample (factor >= 1) and route copy (factor 1): output pixel (y, x) reads (y / f, x / f).
template <typename T>
__device__ void copy_vec_body(const T *in, gr_kview iv, T *out, gr_kview ov, int granules,
                              int factor)
{
    const unsigned total = (unsigned)ov.n * ov.h * ov.w * granules;
    GRK_GRID_STRIDE(e, total)
    {
        const GranulePos q = granule_pos(e, granules, ov);
        Granule v;
        v.v = *reinterpret_cast<const uint4 *>(
            in + offset_of<true>(iv, q.n, q.g * Lanes<T>::n, q.y / factor, q.x / factor));
        zero_past<T>(v, q.g, ov.c);
        *reinterpret_cast<uint4 *>(out + offset_of<true>(ov, q.n, q.g * Lanes<T>::n, q.y, q.x)) = v.v;
    }
}

// Shortcut of two tensors of the output's shape (no Darknet sampling): shortcut_body's arithmetic
// per lane.
template <typename T>
__device__ void shortcut_vec_body(const T *x, gr_kview xv, float x_scale, const T *from,
                                  gr_kview fv, float from_scale, T *out, gr_kview ov,
                                  float inv_out_scale, int granules, gr_activation act)
{
    const unsigned total = (unsigned)ov.n * ov.h * ov.w * granules;
    GRK_GRID_STRIDE(e, total)
    {
        const GranulePos q = granule_pos(e, granules, ov);
        const unsigned ch = q.g * Lanes<T>::n;
        Granule a, b, r;
        a.v = *reinterpret_cast<const uint4 *>(x + offset_of<true>(xv, q.n, ch, q.y, q.x));
        b.v = *reinterpret_cast<const uint4 *>(from + offset_of<true>(fv, q.n, ch, q.y, q.x));
#pragma unroll
        for (int l = 0; l < Lanes<T>::n; l++) {
            float y = __fmul_rn(Dtype<T>::to_f32(Lanes<T>::get(a, l)), x_scale);
            y = __fadd_rn(y, __fmul_rn(Dtype<T>::to_f32(Lanes<T>::get(b, l)), from_scale));
            Lanes<T>::set(r, l, Store<T>::from_f32(activate(y, act), inv_out_scale));
        }
        zero_past<T>(r, q.g, ov.c);
        *reinterpret_cast<uint4 *>(out + offset_of<true>(ov, q.n, ch, q.y, q.x)) = r.v;
    }
}

} // namespace

#define GRK_DEFINE_KERNELS(suffix, DT)                                                             \
    __global__ void k_upsample_##suffix(const DT *in, gr_kview iv, DT *out, gr_kview ov, int cw,   \
                                        int factor)                                                \
    {                                                                                              \
        upsample_body<DT>(in, iv, out, ov, cw, factor);                                            \
    }                                                                                              \
    __global__ void k_reorg_##suffix(const DT *in, gr_kview iv, DT *out, gr_kview ov, int cw,      \
                                     int stride)                                                   \
    {                                                                                              \
        reorg_body<DT>(in, iv, out, ov, cw, stride);                                               \
    }                                                                                              \
    __global__ void k_route_copy_##suffix(const DT *in, gr_kview iv, DT *out, gr_kview ov, int cw) \
    {                                                                                              \
        route_copy_body<DT>(in, iv, out, ov, cw);                                                  \
    }                                                                                              \
    __global__ void k_shortcut_##suffix(const DT *x, gr_kview xv, float x_scale, const DT *from,   \
                                        gr_kview fv, float from_scale, DT *out, gr_kview ov,       \
                                        float inv_out_scale, int cw, gr_activation act)            \
    {                                                                                              \
        shortcut_body<DT>(x, xv, x_scale, from, fv, from_scale, out, ov, inv_out_scale, cw, act);  \
    }                                                                                              \
    __global__ void k_mul_##suffix(const DT *x, gr_kview xv, float x_scale, const DT *s,           \
                                   gr_kview sv, float s_scale, DT *out, gr_kview ov,               \
                                   float inv_out_scale, int cw, gr_activation act)                 \
    {                                                                                              \
        mul_body<DT>(x, xv, x_scale, s, sv, s_scale, out, ov, inv_out_scale, cw, act);             \
    }

GRK_DEFINE_KERNELS(f32, float)
GRK_DEFINE_KERNELS(f16, __half)
GRK_DEFINE_KERNELS(i8, int8_t)

#define GRK_DEFINE_VEC_KERNELS(suffix, DT)                                                         \
    __global__ void k_copy_vec_##suffix(const DT *in, gr_kview iv, DT *out, gr_kview ov,           \
                                        int granules, int factor)                                  \
    {                                                                                              \
        copy_vec_body<DT>(in, iv, out, ov, granules, factor);                                      \
    }                                                                                              \
    __global__ void k_shortcut_vec_##suffix(const DT *x, gr_kview xv, float x_scale,               \
                                            const DT *from, gr_kview fv, float from_scale,         \
                                            DT *out, gr_kview ov, float inv_out_scale,             \
                                            int granules, gr_activation act)                       \
    {                                                                                              \
        shortcut_vec_body<DT>(x, xv, x_scale, from, fv, from_scale, out, ov, inv_out_scale,        \
                              granules, act);                                                      \
    }

GRK_DEFINE_VEC_KERNELS(f16, __half)
GRK_DEFINE_VEC_KERNELS(i8, int8_t)

namespace {

template <typename T>
bool views_ok(const void *in, const gr_kview &iv, const void *out, const gr_kview &ov)
{
    return in && out && view_ok(iv, Dtype<T>::align) && view_ok(ov, Dtype<T>::align) &&
           iv.n == ov.n;
}

template <typename T>
bool upsample_args_ok(const void *in, const gr_kview &iv, const void *out, const gr_kview &ov,
                      int factor)
{
    return views_ok<T>(in, iv, out, ov) && factor >= 1 && ov.c == iv.c &&
           (long long)ov.h == (long long)iv.h * factor &&
           (long long)ov.w == (long long)iv.w * factor;
}

template <typename T>
bool reorg_args_ok(const void *in, const gr_kview &iv, const void *out, const gr_kview &ov, int s)
{
    if (!views_ok<T>(in, iv, out, ov) || s < 1 || s > 256)
        return false;
    return iv.c % (s * s) == 0 && iv.h % s == 0 && iv.w % s == 0 &&
           (long long)ov.c == (long long)iv.c * s * s && ov.h == iv.h / s && ov.w == iv.w / s;
}

template <typename T>
bool route_copy_args_ok(const void *in, const gr_kview &iv, const void *out, const gr_kview &ov)
{
    return views_ok<T>(in, iv, out, ov) && iv.c == ov.c && iv.h == ov.h && iv.w == ov.w;
}

// Darknet asserts stride == h1/h2 and sample == h2/h1 (before clamping to 1).
template <typename T>
bool shortcut_args_ok(const void *x, const gr_kview &xv, const void *from, const gr_kview &fv,
                      const void *out, const gr_kview &ov, gr_activation act)
{
    if (!views_ok<T>(x, xv, out, ov) || !from || !view_ok(fv, Dtype<T>::align) || fv.n != xv.n ||
        !activation_ok(act))
        return false;
    if (ov.c != xv.c || ov.h != xv.h || ov.w != xv.w)
        return false;
    return fv.w / xv.w == fv.h / xv.h && xv.w / fv.w == xv.h / fv.h;
}

// s has one channel or x's, and is 1 x 1 or x's h x w (kernels/misc.h, gr_launch_mul).
template <typename T>
bool mul_args_ok(const void *x, const gr_kview &xv, const void *s, const gr_kview &sv,
                 const void *out, const gr_kview &ov, gr_activation act)
{
    if (!views_ok<T>(x, xv, out, ov) || !s || !view_ok(sv, Dtype<T>::align) || sv.n != xv.n ||
        !activation_ok(act))
        return false;
    if (ov.c != xv.c || ov.h != xv.h || ov.w != xv.w)
        return false;
    return (sv.c == 1 || sv.c == xv.c) &&
           ((sv.h == 1 && sv.w == 1) || (sv.h == xv.h && sv.w == xv.w));
}

template <typename T>
cudaError_t mul(void (*kernel)(const T *, gr_kview, float, const T *, gr_kview, float, T *,
                               gr_kview, float, int, gr_activation),
                const void *x, gr_kview xv, float x_scale, const void *s, gr_kview sv,
                float s_scale, void *out, gr_kview ov, float out_scale, gr_activation act,
                cudaStream_t stream)
{
    const bool is_i8 = Dtype<T>::align == GR_KALIGN_I8;
    GR_ARG_CHECK(mul_args_ok<T>(x, xv, s, sv, out, ov, act) &&
                 (!is_i8 || (x_scale > 0.0f && s_scale > 0.0f && out_scale > 0.0f)));
    int cw = channels_written(ov, Dtype<T>::align);
    kernel<<<blocks_for((size_t)ov.n * cw * ov.h * ov.w), kThreads, 0, stream>>>(
        (const T *)x, xv, is_i8 ? x_scale : 1.0f, (const T *)s, sv, is_i8 ? s_scale : 1.0f,
        (T *)out, ov, is_i8 ? 1.0f / out_scale : 1.0f, cw, act);
    return cudaGetLastError();
}

// One launch of `kernel` over the written channels of ov: T is the stored type, Args the
// kernel's arguments after the channel count.
template <typename T, typename... Args>
cudaError_t launch_data(void (*kernel)(const T *, gr_kview, T *, gr_kview, int, Args...),
                        const void *in, const gr_kview &iv, void *out, const gr_kview &ov,
                        cudaStream_t stream, Args... args)
{
    int cw = channels_written(ov, Dtype<T>::align);
    kernel<<<blocks_for((size_t)ov.n * cw * ov.h * ov.w), kThreads, 0, stream>>>(
        (const T *)in, iv, (T *)out, ov, cw, args...);
    return cudaGetLastError();
}

template <typename T> using copy_vec_kernel = void (*)(const T *, gr_kview, T *, gr_kview, int, int);

// The vector path where both views are granule-aligned (vec NULL: f32, none): true when launched.
template <typename T>
bool launch_copy_vec(copy_vec_kernel<T> vec, const void *in, const gr_kview &iv, void *out,
                     const gr_kview &ov, int factor, cudaStream_t stream)
{
    const int cw = channels_written(ov, Dtype<T>::align), lanes = 16 / (int)sizeof(T);
    if (!vec || !granule_aligned(out, ov, cw, lanes) || !granule_aligned(in, iv, lanes, lanes))
        return false;
    const int granules = cw / lanes;
    vec<<<blocks_for((size_t)ov.n * granules * ov.h * ov.w), kThreads, 0, stream>>>(
        (const T *)in, iv, (T *)out, ov, granules, factor);
    return true;
}

template <typename T>
cudaError_t upsample(void (*kernel)(const T *, gr_kview, T *, gr_kview, int, int),
                     copy_vec_kernel<T> vec, const void *in, gr_kview iv, void *out, gr_kview ov,
                     int factor, cudaStream_t stream)
{
    GR_ARG_CHECK(upsample_args_ok<T>(in, iv, out, ov, factor));
    if (launch_copy_vec<T>(vec, in, iv, out, ov, factor, stream))
        return cudaGetLastError();
    return launch_data<T, int>(kernel, in, iv, out, ov, stream, factor);
}

template <typename T>
cudaError_t reorg(void (*kernel)(const T *, gr_kview, T *, gr_kview, int, int), const void *in,
                  gr_kview iv, void *out, gr_kview ov, int stride, cudaStream_t stream)
{
    GR_ARG_CHECK(reorg_args_ok<T>(in, iv, out, ov, stride));
    return launch_data<T, int>(kernel, in, iv, out, ov, stream, stride);
}

template <typename T>
cudaError_t route_copy(void (*kernel)(const T *, gr_kview, T *, gr_kview, int),
                       copy_vec_kernel<T> vec, const void *in, gr_kview iv, void *out, gr_kview ov,
                       cudaStream_t stream)
{
    GR_ARG_CHECK(route_copy_args_ok<T>(in, iv, out, ov));
    if (launch_copy_vec<T>(vec, in, iv, out, ov, 1, stream))
        return cudaGetLastError();
    return launch_data<T>(kernel, in, iv, out, ov, stream);
}

// The shortcut's vector path: both operands of the output's shape (no sampling) and every view
// granule-aligned.
bool shortcut_vec_ok(const void *x, const gr_kview &xv, const void *from, const gr_kview &fv,
                     const void *out, const gr_kview &ov, int cw, int lanes)
{
    return fv.c == xv.c && fv.h == xv.h && fv.w == xv.w && granule_aligned(out, ov, cw, lanes) &&
           granule_aligned(x, xv, lanes, lanes) && granule_aligned(from, fv, lanes, lanes);
}

} // namespace

extern "C" cudaError_t gr_launch_upsample(gr_dtype dtype, const void *in, gr_kview iv, void *out,
                                          gr_kview ov, int factor, cudaStream_t stream)
{
    switch (dtype) {
    case GR_DTYPE_F32:
        return upsample<float>(k_upsample_f32, nullptr, in, iv, out, ov, factor, stream);
    case GR_DTYPE_F16:
        return upsample<__half>(k_upsample_f16, k_copy_vec_f16, in, iv, out, ov, factor, stream);
    case GR_DTYPE_I8:
        return upsample<int8_t>(k_upsample_i8, k_copy_vec_i8, in, iv, out, ov, factor, stream);
    default: return no_kernel(__FILE__, __LINE__, "gr_launch_upsample");
    }
}

extern "C" cudaError_t gr_launch_reorg(gr_dtype dtype, const void *in, gr_kview iv, void *out,
                                       gr_kview ov, int stride, cudaStream_t stream)
{
    switch (dtype) {
    case GR_DTYPE_F32: return reorg<float>(k_reorg_f32, in, iv, out, ov, stride, stream);
    case GR_DTYPE_F16: return reorg<__half>(k_reorg_f16, in, iv, out, ov, stride, stream);
    case GR_DTYPE_I8: return reorg<int8_t>(k_reorg_i8, in, iv, out, ov, stride, stream);
    default: return no_kernel(__FILE__, __LINE__, "gr_launch_reorg");
    }
}

extern "C" cudaError_t gr_launch_route_copy(gr_dtype dtype, const void *in, gr_kview iv, void *out,
                                            gr_kview ov, cudaStream_t stream)
{
    switch (dtype) {
    case GR_DTYPE_F32: return route_copy<float>(k_route_copy_f32, nullptr, in, iv, out, ov, stream);
    case GR_DTYPE_F16:
        return route_copy<__half>(k_route_copy_f16, k_copy_vec_f16, in, iv, out, ov, stream);
    case GR_DTYPE_I8:
        return route_copy<int8_t>(k_route_copy_i8, k_copy_vec_i8, in, iv, out, ov, stream);
    default: return no_kernel(__FILE__, __LINE__, "gr_launch_route_copy");
    }
}

/* The kernel reads the scales only for i8 (Store<T>): f32 / f16 pass 1.0f as before. */
extern "C" cudaError_t gr_launch_shortcut(gr_dtype dtype, const void *x, gr_kview xv, float x_scale,
                                          const void *from, gr_kview fv, float from_scale,
                                          void *out, gr_kview ov, float out_scale,
                                          gr_activation act, cudaStream_t stream)
{
    int cw = 0;
    switch (dtype) {
    case GR_DTYPE_F32:
        GR_ARG_CHECK(shortcut_args_ok<float>(x, xv, from, fv, out, ov, act));
        cw = channels_written(ov, 1);
        k_shortcut_f32<<<blocks_for((size_t)ov.n * cw * ov.h * ov.w), kThreads, 0, stream>>>(
            (const float *)x, xv, 1.0f, (const float *)from, fv, 1.0f, (float *)out, ov, 1.0f, cw,
            act);
        break;
    case GR_DTYPE_F16:
        GR_ARG_CHECK(shortcut_args_ok<__half>(x, xv, from, fv, out, ov, act));
        cw = channels_written(ov, GR_KALIGN_F16);
        if (shortcut_vec_ok(x, xv, from, fv, out, ov, cw, 8))
            k_shortcut_vec_f16<<<blocks_for((size_t)ov.n * (cw / 8) * ov.h * ov.w), kThreads, 0,
                                 stream>>>((const __half *)x, xv, 1.0f, (const __half *)from, fv,
                                           1.0f, (__half *)out, ov, 1.0f, cw / 8, act);
        else
            k_shortcut_f16<<<blocks_for((size_t)ov.n * cw * ov.h * ov.w), kThreads, 0, stream>>>(
                (const __half *)x, xv, 1.0f, (const __half *)from, fv, 1.0f, (__half *)out, ov,
                1.0f, cw, act);
        break;
    case GR_DTYPE_I8:
        GR_ARG_CHECK(shortcut_args_ok<int8_t>(x, xv, from, fv, out, ov, act) && x_scale > 0.0f &&
                     from_scale > 0.0f && out_scale > 0.0f);
        cw = channels_written(ov, GR_KALIGN_I8);
        if (shortcut_vec_ok(x, xv, from, fv, out, ov, cw, 16))
            k_shortcut_vec_i8<<<blocks_for((size_t)ov.n * (cw / 16) * ov.h * ov.w), kThreads, 0,
                                stream>>>((const int8_t *)x, xv, x_scale, (const int8_t *)from, fv,
                                          from_scale, (int8_t *)out, ov, 1.0f / out_scale, cw / 16,
                                          act);
        else
            k_shortcut_i8<<<blocks_for((size_t)ov.n * cw * ov.h * ov.w), kThreads, 0, stream>>>(
                (const int8_t *)x, xv, x_scale, (const int8_t *)from, fv, from_scale,
                (int8_t *)out, ov, 1.0f / out_scale, cw, act);
        break;
    default: return no_kernel(__FILE__, __LINE__, "gr_launch_shortcut");
    }
    return cudaGetLastError();
}

extern "C" cudaError_t gr_launch_mul(gr_dtype dtype, const void *x, gr_kview xv, float x_scale,
                                     const void *s, gr_kview sv, float s_scale, void *out,
                                     gr_kview ov, float out_scale, gr_activation act,
                                     cudaStream_t stream)
{
    switch (dtype) {
    case GR_DTYPE_F32:
        return mul<float>(k_mul_f32, x, xv, x_scale, s, sv, s_scale, out, ov, out_scale, act,
                          stream);
    case GR_DTYPE_F16:
        return mul<__half>(k_mul_f16, x, xv, x_scale, s, sv, s_scale, out, ov, out_scale, act,
                           stream);
    case GR_DTYPE_I8:
        return mul<int8_t>(k_mul_i8, x, xv, x_scale, s, sv, s_scale, out, ov, out_scale, act,
                           stream);
    default: return no_kernel(__FILE__, __LINE__, "gr_launch_mul");
    }
}
