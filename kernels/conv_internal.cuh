/* Shared between the convolution kernel files (CUDA side only): the tensor-core launcher
 * (conv_wmma.cu) hands first-layer convolutions on the uint8 network input to conv_first.cu. */
#ifndef GR_KERNELS_CONV_INTERNAL_CUH
#define GR_KERNELS_CONV_INTERNAL_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/conv.h"

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

/* The epilogue's activation (codes of conv.h), the f32 expressions planner/plan.h specifies. */
__device__ __forceinline__ float gr_conv_activate(float y, int act)
{
    switch (act) {
    case GR_CONV_ACT_LEAKY: return y > 0.0f ? y : 0.1f * y;
    case GR_CONV_ACT_RELU: return y > 0.0f ? y : 0.0f;
    case GR_CONV_ACT_LOGISTIC: return 1.0f / (1.0f + expf(-y));
    default: return y;
    }
}

/* True when the current device can take programmatic dependent launches (sm_90+). */
bool gr_conv_pdl_supported();

#endif
