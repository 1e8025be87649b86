/* Shared between the convolution kernel files (CUDA side only): the tensor-core launcher
 * (conv_wmma.cu) hands first-layer convolutions on the uint8 network input to conv_first.cu. */
#ifndef GR_KERNELS_CONV_INTERNAL_CUH
#define GR_KERNELS_CONV_INTERNAL_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/conv.h"
#include "ops/activation.h"

/* Launch the SIMT first-layer kernel for args->in_u8 (conv.h); is_i8 selects the INT8 or the
 * FP16 arithmetic. Same return contract as gr_launch_conv_i8/_f16. check_only: validate the
 * arguments (not the pointers) and return without launching. */
cudaError_t gr_conv_first_launch(const gr_conv_args *a, bool is_i8, cudaStream_t stream,
                                 bool check_only);

/* The epilogues' output conversions (conv.h): int8 = clamp(round-half-even(y * inv_scale), -127,
 * 127) as the low byte of the result; two halves (round to nearest) packed lo | hi << 16. */
__device__ __forceinline__ unsigned gr_conv_i8_bits(float y, float inv_scale)
{
    int q = __float2int_rn(y * inv_scale);
    q = q < -127 ? -127 : (q > 127 ? 127 : q);
    return static_cast<unsigned>(q) & 0xffu;
}

__device__ __forceinline__ unsigned gr_conv_half2_bits(float lo, float hi)
{
    return static_cast<unsigned>(__half_as_ushort(__float2half_rn(lo))) |
           (static_cast<unsigned>(__half_as_ushort(__float2half_rn(hi))) << 16);
}

/* The rarer activations, out of line: inlined, their exp/log code made every epilogue of every
 * conv kernel heavier in registers even for leaky (measured on the H100, no tactic search:
 * YOLOv2-tiny int8 batch 1 201.7 -> 226.5 us, fp32 batch 64 6,272 -> 4,779 img/s). */
static __device__ __noinline__ float gr_conv_activate_rare(float y, int act)
{
    return gr_act_epilogue(y, static_cast<gr_activation>(act));
}

/* The epilogue's activation (codes of conv.h = gr_activation): ops/activation.h's
 * gr_act_epilogue, the one definition the CPU emulation (planner/exec.c) shares. Two variants,
 * the same values:
 *   gr_conv_activate       linear, leaky, relu, logistic and swish inline, the rest one call;
 *   gr_conv_activate_lean  swish through the call too.
 * Swish (SiLU) is not rare: every conv of a YOLOv5/v8/11 export has it, and its call per value
 * cost YOLOv8n 5-8% at batch 64 (docs/performance.md, "SiLU in the epilogue"). Inline in the
 * switch it left the registers of the stream and GEMM-epilogue kernels unchanged (ptxas), but
 * raised the implicit-GEMM tiles' (conv_wmma.cu: int8 32x64 88 -> 103, one block per SM fewer)
 * and made the first-layer kernel, whose body holds every activation's epilogue, spill: those use
 * the lean variant (the first layer has a kernel of its own for swish). A constant activation
 * folds either switch. */
static_assert(GR_CONV_ACT_SWISH == static_cast<int>(GR_ACT_SWISH), "conv.h's code of swish");

__device__ __forceinline__ float gr_conv_activate_lean(float y, int act)
{
    switch (act) {
    case GR_CONV_ACT_LINEAR: return y;
    case GR_CONV_ACT_LEAKY: return gr_act_epilogue(y, GR_ACT_LEAKY);
    case GR_CONV_ACT_RELU: return gr_act_epilogue(y, GR_ACT_RELU);
    case GR_CONV_ACT_LOGISTIC: return gr_act_epilogue(y, GR_ACT_LOGISTIC);
    default: return gr_conv_activate_rare(y, act);
    }
}

__device__ __forceinline__ float gr_conv_activate(float y, int act)
{
    switch (act) {
    case GR_CONV_ACT_LINEAR: return y;
    case GR_CONV_ACT_LEAKY: return gr_act_epilogue(y, GR_ACT_LEAKY);
    case GR_CONV_ACT_RELU: return gr_act_epilogue(y, GR_ACT_RELU);
    case GR_CONV_ACT_LOGISTIC: return gr_act_epilogue(y, GR_ACT_LOGISTIC);
    case GR_CONV_ACT_SWISH: return gr_act_swish(y);
    default: return gr_conv_activate_rare(y, act);
    }
}

/* The epilogue of one value before its output conversion (conv.h): multiplier (i8) or none (f16),
 * bias, activation. The per-layer kernels and the dataflow kernel share it, so their int8 outputs
 * round the same values the same way. _loaded: the same with the channel's multiplier and bias
 * (0 when none) already in registers. gr_conv_epilogue is the implicit-GEMM tiles' (conv_wmma.cu),
 * with the lean activation (above). */
__device__ __forceinline__ float gr_conv_epilogue_affine(float acc, bool has_mul, float mul, float b)
{
    return has_mul ? fmaf(acc, mul, b) : acc + b;
}

__device__ __forceinline__ float gr_conv_epilogue_loaded(float acc, bool has_mul, float mul, float b,
                                                         int act)
{
    return gr_conv_activate(gr_conv_epilogue_affine(acc, has_mul, mul, b), act);
}

__device__ __forceinline__ float gr_conv_epilogue(float acc, const float *mul, const float *bias,
                                                  int n, int act)
{
    return gr_conv_activate_lean(
        gr_conv_epilogue_affine(acc, mul != nullptr, mul ? mul[n] : 0.0f, bias ? bias[n] : 0.0f),
        act);
}

/* The fused input quantize of a u8 value v (v / 255 is the real value): i8 clamp(rint((v / 255) /
 * s_in), -127, 127) and f16 half_rn(v / 255), the quantize node's formulas (planner/plan.h). */
__device__ __forceinline__ int gr_conv_quantize_u8_i8(int v, float s_in)
{
    const int q = __float2int_rn(__fdiv_rn(__fdiv_rn(static_cast<float>(v), 255.0f), s_in));
    return q < -127 ? -127 : (q > 127 ? 127 : q);
}

__device__ __forceinline__ __half gr_conv_quantize_u8_f16(int v)
{
    return __float2half_rn(__fdiv_rn(static_cast<float>(v), 255.0f));
}

/* May a maxpool be taken on the accumulators before the epilogue? Only where act(fmaf(acc, mul,
 * bias)) is non-decreasing in acc for mul >= 0 without doubt: linear, leaky, relu (mish, swish,
 * hard_mish, gelu are not monotonic; the exp-based ones are left out so the pooled value is the
 * activated one exactly as the CPU emulation computes it). */
__device__ __forceinline__ bool gr_conv_act_pools_first(int act)
{
    return act == GR_CONV_ACT_LINEAR || act == GR_CONV_ACT_LEAKY || act == GR_CONV_ACT_RELU;
}

/* Is act(0) == 0 (filters past out_c, all zero, then come out 0 without a mask)? */
__device__ __forceinline__ bool gr_conv_act_zero_at_zero(int act)
{
    return act == GR_CONV_ACT_LINEAR || act == GR_CONV_ACT_LEAKY || act == GR_CONV_ACT_RELU;
}

/* True when the current device can take programmatic dependent launches (sm_90+). */
bool gr_conv_pdl_supported();

#endif
