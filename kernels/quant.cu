// Precision/layout conversion kernels at the edges of a quantized region (the Q/DQ rules of
// planner/plan.h's header comment and docs/planner.md):
//   network input u8 NHWC (v/255) -> f16 / i8 NHWC padded, or -> f32 NCHW;
//   f32 NCHW -> f16 / i8 NHWC padded (quantize);  f16 / i8 NHWC padded -> f32 NCHW (dequantize);
//   i8 <-> f16 NHWC padded (convert, where a mixed-precision plan changes precision).
// One thread per written output element, enumerated in the output's memory order (the u8 input
// quantize: one thread per 16-byte output granule where the output is granule-aligned). Divisions
// use the IEEE-rounded intrinsics so no compiler flag can change the result.
#include "kernels/misc_common.cuh"

using namespace grk;

namespace {

__device__ __forceinline__ int8_t quantize_i8(float real, float scale)
{
    int q = __float2int_rn(__fdiv_rn(real, scale));
    return (int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
}

__device__ __forceinline__ float u8_real(uint8_t v) { return __fdiv_rn((float)v, 255.0f); }

} // namespace

__device__ __forceinline__ void set_lane(Granule &g, int l, const uint8_t *src, float scale, int8_t)
{
    g.i8[l] = quantize_i8(u8_real(*src), scale);
}

__device__ __forceinline__ void set_lane(Granule &g, int l, const uint8_t *src, float, __half)
{
    g.f16[l] = __half_as_ushort(__float2half_rn(u8_real(*src)));
}

// Vector path of the network-input quantize: one thread per 16-byte granule of an output pixel
// (for c = 3 one granule per pixel), lanes past the channels written as 0.
template <typename T>
__device__ void quantize_u8_vec_body(const uint8_t *in, T *out, gr_kview ov, float scale,
                                     int granules)
{
    constexpr int lanes = 16 / sizeof(T);
    const unsigned total = (unsigned)ov.n * ov.h * ov.w * granules;
    GRK_GRID_STRIDE(e, total)
    {
        unsigned g = e % granules, pixel = e / granules;
        unsigned x = pixel % ov.w, y = (pixel / ov.w) % ov.h, n = pixel / ((unsigned)ov.w * ov.h);
        const uint8_t *src = in + (size_t)pixel * ov.c;
        Granule out_lanes;
        out_lanes.v = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
        for (int l = 0; l < lanes; l++) {
            int ch = (int)g * lanes + l;
            if (ch < ov.c)
                set_lane(out_lanes, l, src + ch, scale, T());
        }
        *reinterpret_cast<uint4 *>(out + offset_of<true>(ov, n, g * lanes, y, x)) = out_lanes.v;
    }
}

// u8 input: dense NHWC with ov.c channels per pixel.
__global__ void k_quantize_u8_f16(const uint8_t *in, __half *out, gr_kview ov, int cw)
{
    const unsigned total = (unsigned)ov.n * cw * ov.h * ov.w;
    GRK_GRID_STRIDE(e, total)
    {
        Pos p = decompose<true>(e, cw, ov.h, ov.w);
        size_t pixel = ((size_t)p.n * ov.h + p.y) * ov.w + p.x;
        out[offset_of<true>(ov, p.n, p.ch, p.y, p.x)] =
            p.ch < (unsigned)ov.c ? __float2half_rn(u8_real(in[pixel * ov.c + p.ch]))
                                  : Dtype<__half>::zero();
    }
}

__global__ void k_quantize_u8_vec_f16(const uint8_t *in, __half *out, gr_kview ov, int granules)
{
    quantize_u8_vec_body<__half>(in, out, ov, 1.0f, granules);
}

__global__ void k_quantize_u8_vec_i8(const uint8_t *in, int8_t *out, gr_kview ov, float scale,
                                     int granules)
{
    quantize_u8_vec_body<int8_t>(in, out, ov, scale, granules);
}

__global__ void k_quantize_u8_i8(const uint8_t *in, int8_t *out, gr_kview ov, float scale, int cw)
{
    const unsigned total = (unsigned)ov.n * cw * ov.h * ov.w;
    GRK_GRID_STRIDE(e, total)
    {
        Pos p = decompose<true>(e, cw, ov.h, ov.w);
        size_t pixel = ((size_t)p.n * ov.h + p.y) * ov.w + p.x;
        out[offset_of<true>(ov, p.n, p.ch, p.y, p.x)] =
            p.ch < (unsigned)ov.c ? quantize_i8(u8_real(in[pixel * ov.c + p.ch]), scale)
                                  : (int8_t)0;
    }
}

__global__ void k_convert_u8_f32(const uint8_t *in, float *out, gr_kview ov)
{
    const unsigned total = (unsigned)ov.n * ov.c * ov.h * ov.w;
    GRK_GRID_STRIDE(e, total)
    {
        Pos p = decompose<false>(e, ov.c, ov.h, ov.w);
        size_t pixel = ((size_t)p.n * ov.h + p.y) * ov.w + p.x;
        out[offset_of<false>(ov, p.n, p.ch, p.y, p.x)] = u8_real(in[pixel * ov.c + p.ch]);
    }
}

__global__ void k_quantize_f32_f16(const float *in, gr_kview iv, __half *out, gr_kview ov, int cw)
{
    const unsigned total = (unsigned)ov.n * cw * ov.h * ov.w;
    GRK_GRID_STRIDE(e, total)
    {
        Pos p = decompose<true>(e, cw, ov.h, ov.w);
        out[offset_of<true>(ov, p.n, p.ch, p.y, p.x)] =
            p.ch < (unsigned)ov.c ? __float2half_rn(in[offset_of<false>(iv, p.n, p.ch, p.y, p.x)])
                                  : Dtype<__half>::zero();
    }
}

__global__ void k_quantize_f32_i8(const float *in, gr_kview iv, int8_t *out, gr_kview ov,
                                  float scale, int cw)
{
    const unsigned total = (unsigned)ov.n * cw * ov.h * ov.w;
    GRK_GRID_STRIDE(e, total)
    {
        Pos p = decompose<true>(e, cw, ov.h, ov.w);
        out[offset_of<true>(ov, p.n, p.ch, p.y, p.x)] =
            p.ch < (unsigned)ov.c
                ? quantize_i8(in[offset_of<false>(iv, p.n, p.ch, p.y, p.x)], scale)
                : (int8_t)0;
    }
}

__global__ void k_dequantize_f16_f32(const __half *in, gr_kview iv, float *out, gr_kview ov)
{
    const unsigned total = (unsigned)ov.n * ov.c * ov.h * ov.w;
    GRK_GRID_STRIDE(e, total)
    {
        Pos p = decompose<false>(e, ov.c, ov.h, ov.w);
        out[offset_of<false>(ov, p.n, p.ch, p.y, p.x)] =
            __half2float(in[offset_of<true>(iv, p.n, p.ch, p.y, p.x)]);
    }
}

__global__ void k_dequantize_i8_f32(const int8_t *in, gr_kview iv, float scale, float *out,
                                    gr_kview ov)
{
    const unsigned total = (unsigned)ov.n * ov.c * ov.h * ov.w;
    GRK_GRID_STRIDE(e, total)
    {
        Pos p = decompose<false>(e, ov.c, ov.h, ov.w);
        out[offset_of<false>(ov, p.n, p.ch, p.y, p.x)] =
            __fmul_rn((float)in[offset_of<true>(iv, p.n, p.ch, p.y, p.x)], scale);
    }
}

// Mixed precision boundaries (planner/plan.h): i8 -> f16 half_rn(q * s_in); f16 -> i8
// clamp(rint(x / s_out), -127, 127). Both NHWC; the output's padding channels are written as 0.
__global__ void k_convert_i8_f16(const int8_t *in, gr_kview iv, float in_scale, __half *out,
                                 gr_kview ov, int cw)
{
    const unsigned total = (unsigned)ov.n * cw * ov.h * ov.w;
    GRK_GRID_STRIDE(e, total)
    {
        Pos p = decompose<true>(e, cw, ov.h, ov.w);
        out[offset_of<true>(ov, p.n, p.ch, p.y, p.x)] =
            p.ch < (unsigned)ov.c
                ? __float2half_rn(
                      __fmul_rn((float)in[offset_of<true>(iv, p.n, p.ch, p.y, p.x)], in_scale))
                : Dtype<__half>::zero();
    }
}

__global__ void k_convert_f16_i8(const __half *in, gr_kview iv, int8_t *out, gr_kview ov,
                                 float out_scale, int cw)
{
    const unsigned total = (unsigned)ov.n * cw * ov.h * ov.w;
    GRK_GRID_STRIDE(e, total)
    {
        Pos p = decompose<true>(e, cw, ov.h, ov.w);
        out[offset_of<true>(ov, p.n, p.ch, p.y, p.x)] =
            p.ch < (unsigned)ov.c
                ? quantize_i8(__half2float(in[offset_of<true>(iv, p.n, p.ch, p.y, p.x)]), out_scale)
                : (int8_t)0;
    }
}

namespace {

bool same_shape(const gr_kview &a, const gr_kview &b)
{
    return a.n == b.n && a.c == b.c && a.h == b.h && a.w == b.w;
}

size_t written_elems(const gr_kview &v, int cw) { return (size_t)v.n * cw * v.h * v.w; }

cudaError_t quantize_u8_f16(const uint8_t *in, uint16_t *out, gr_kview ov,
                            cudaStream_t stream)
{
    GR_ARG_CHECK(in && out && view_ok(ov, GR_KALIGN_F16));
    int cw = channels_written(ov, GR_KALIGN_F16);
    if (granule_aligned(out, ov, cw, 8))
        k_quantize_u8_vec_f16<<<blocks_for(written_elems(ov, cw / 8)), kThreads, 0, stream>>>(
            in, (__half *)out, ov, cw / 8);
    else
        k_quantize_u8_f16<<<blocks_for(written_elems(ov, cw)), kThreads, 0, stream>>>(
            in, (__half *)out, ov, cw);
    return cudaGetLastError();
}

cudaError_t quantize_u8_i8(const uint8_t *in, int8_t *out, gr_kview ov,
                           float out_scale, cudaStream_t stream)
{
    GR_ARG_CHECK(in && out && view_ok(ov, GR_KALIGN_I8) && out_scale > 0.0f);
    int cw = channels_written(ov, GR_KALIGN_I8);
    if (granule_aligned(out, ov, cw, 16))
        k_quantize_u8_vec_i8<<<blocks_for(written_elems(ov, cw / 16)), kThreads, 0, stream>>>(
            in, out, ov, out_scale, cw / 16);
    else
        k_quantize_u8_i8<<<blocks_for(written_elems(ov, cw)), kThreads, 0, stream>>>(in, out, ov,
                                                                                     out_scale, cw);
    return cudaGetLastError();
}

cudaError_t convert_u8_f32(const uint8_t *in, float *out, gr_kview ov,
                           cudaStream_t stream)
{
    GR_ARG_CHECK(in && out && view_ok(ov, 1));
    k_convert_u8_f32<<<blocks_for(written_elems(ov, ov.c)), kThreads, 0, stream>>>(in, out, ov);
    return cudaGetLastError();
}

cudaError_t quantize_f32_f16(const float *in, gr_kview iv, uint16_t *out,
                             gr_kview ov, cudaStream_t stream)
{
    GR_ARG_CHECK(in && out && view_ok(iv, 1) && view_ok(ov, GR_KALIGN_F16) && same_shape(iv, ov));
    int cw = channels_written(ov, GR_KALIGN_F16);
    k_quantize_f32_f16<<<blocks_for(written_elems(ov, cw)), kThreads, 0, stream>>>(
        in, iv, (__half *)out, ov, cw);
    return cudaGetLastError();
}

cudaError_t quantize_f32_i8(const float *in, gr_kview iv, int8_t *out,
                            gr_kview ov, float out_scale, cudaStream_t stream)
{
    GR_ARG_CHECK(in && out && view_ok(iv, 1) && view_ok(ov, GR_KALIGN_I8) && same_shape(iv, ov) &&
                 out_scale > 0.0f);
    int cw = channels_written(ov, GR_KALIGN_I8);
    k_quantize_f32_i8<<<blocks_for(written_elems(ov, cw)), kThreads, 0, stream>>>(in, iv, out, ov,
                                                                                  out_scale, cw);
    return cudaGetLastError();
}

cudaError_t dequantize_f16_f32(const uint16_t *in, gr_kview iv, float *out,
                               gr_kview ov, cudaStream_t stream)
{
    GR_ARG_CHECK(in && out && view_ok(iv, GR_KALIGN_F16) && view_ok(ov, 1) && same_shape(iv, ov));
    k_dequantize_f16_f32<<<blocks_for(written_elems(ov, ov.c)), kThreads, 0, stream>>>(
        (const __half *)in, iv, out, ov);
    return cudaGetLastError();
}

cudaError_t dequantize_i8_f32(const int8_t *in, gr_kview iv, float in_scale,
                              float *out, gr_kview ov, cudaStream_t stream)
{
    GR_ARG_CHECK(in && out && view_ok(iv, GR_KALIGN_I8) && view_ok(ov, 1) && same_shape(iv, ov) &&
                 in_scale > 0.0f);
    k_dequantize_i8_f32<<<blocks_for(written_elems(ov, ov.c)), kThreads, 0, stream>>>(
        in, iv, in_scale, out, ov);
    return cudaGetLastError();
}

cudaError_t convert_i8_f16(const int8_t *in, gr_kview iv, float in_scale, uint16_t *out,
                          gr_kview ov, cudaStream_t stream)
{
    GR_ARG_CHECK(in && out && view_ok(iv, GR_KALIGN_I8) && view_ok(ov, GR_KALIGN_F16) &&
                 same_shape(iv, ov) && in_scale > 0.0f);
    int cw = channels_written(ov, GR_KALIGN_F16);
    k_convert_i8_f16<<<blocks_for(written_elems(ov, cw)), kThreads, 0, stream>>>(
        in, iv, in_scale, (__half *)out, ov, cw);
    return cudaGetLastError();
}

cudaError_t convert_f16_i8(const uint16_t *in, gr_kview iv, int8_t *out, gr_kview ov,
                          float out_scale, cudaStream_t stream)
{
    GR_ARG_CHECK(in && out && view_ok(iv, GR_KALIGN_F16) && view_ok(ov, GR_KALIGN_I8) &&
                 same_shape(iv, ov) && out_scale > 0.0f);
    int cw = channels_written(ov, GR_KALIGN_I8);
    k_convert_f16_i8<<<blocks_for(written_elems(ov, cw)), kThreads, 0, stream>>>(
        (const __half *)in, iv, out, ov, out_scale, cw);
    return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t gr_launch_convert(gr_dtype from, gr_dtype to, const void *in, gr_kview iv,
                                         float in_scale, void *out, gr_kview ov, float out_scale,
                                         cudaStream_t stream)
{
    const uint8_t *u8 = (const uint8_t *)in;
    if (from == GR_DTYPE_U8 && to == GR_DTYPE_F32)
        return convert_u8_f32(u8, (float *)out, ov, stream);
    if (from == GR_DTYPE_U8 && to == GR_DTYPE_F16)
        return quantize_u8_f16(u8, (uint16_t *)out, ov, stream);
    if (from == GR_DTYPE_U8 && to == GR_DTYPE_I8)
        return quantize_u8_i8(u8, (int8_t *)out, ov, out_scale, stream);
    if (from == GR_DTYPE_F32 && to == GR_DTYPE_F16)
        return quantize_f32_f16((const float *)in, iv, (uint16_t *)out, ov, stream);
    if (from == GR_DTYPE_F32 && to == GR_DTYPE_I8)
        return quantize_f32_i8((const float *)in, iv, (int8_t *)out, ov, out_scale, stream);
    if (from == GR_DTYPE_F16 && to == GR_DTYPE_F32)
        return dequantize_f16_f32((const uint16_t *)in, iv, (float *)out, ov, stream);
    if (from == GR_DTYPE_I8 && to == GR_DTYPE_F32)
        return dequantize_i8_f32((const int8_t *)in, iv, in_scale, (float *)out, ov, stream);
    if (from == GR_DTYPE_I8 && to == GR_DTYPE_F16)
        return convert_i8_f16((const int8_t *)in, iv, in_scale, (uint16_t *)out, ov, stream);
    if (from == GR_DTYPE_F16 && to == GR_DTYPE_I8)
        return convert_f16_i8((const uint16_t *)in, iv, (int8_t *)out, ov, out_scale, stream);
    return no_kernel(__FILE__, __LINE__, "gr_launch_convert");
}
