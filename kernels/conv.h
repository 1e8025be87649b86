/* Tensor-core convolution (FP16 and INT8) as an implicit GEMM on channels-last tensors.
 *
 * GEMM view: M = batch*out_h*out_w output pixels, N = out_c filters, K = ksize*ksize*in_c_pad.
 * The kernel builds the im2col rows on the fly from the NHWC input (no workspace), multiplies on
 * tensor cores through WMMA (16x16x16 fragments) and applies the whole epilogue (planner/plan.h's
 * header comment, docs/planner.md) in registers before one write: per-channel multiplier and
 * bias, activation, conversion to i8 / f16 / f32.
 *
 * Layouts (the planner's, see planner/plan.h)
 *   - Input: f16 or i8 NHWC. Element (n, y, x, ch) is at ((n*in_h + y)*in_w + x)*in_c_stride +
 *     in_c_offset + ch. Channels in [in_c, in_c_pad) must hold 0 (in_c_pad = round_up(in_c, 8) for
 *     f16, 16 for i8); in_c_stride and in_c_offset are multiples of that granule and the pointer is
 *     16-byte aligned.
 *   - Weights, re-laid out by the host (kernels/conv_weights.h): [out_c][ksize][ksize][in_c_pad],
 *     dense, f16 or i8 (the planner's int8 quantization), padded input channels 0. Darknet's order
 *     is [out_c][in_c][ksize][ksize]; the re-layout transposes. No padding of out_c
 *     is needed: the kernel masks filters >= out_c.
 *   - Output NHWC (f16, i8, or f32): written at ((n*out_h + y)*out_w + x)*out_c_stride +
 *     out_c_offset + ch for ch in [0, out_c_pad), where out_c_pad = round_up(out_c, 16) for i8
 *     and round_up(out_c, 8) for f16/f32; channels in [out_c, out_c_pad) are written as 0 and
 *     nothing else is touched, so a conv can write a channel slice of a concat buffer.
 *     out_c_stride / out_c_offset are multiples of the granule; the pointer is 16-byte aligned.
 *   - Output NCHW (f32 only, GR_CONV_OUT_F32_NCHW, the network output or a channel slice of it):
 *     element (n, ch, y, x) at ((n*out_c_stride + out_c_offset + ch)*out_h + y)*out_w + x for ch
 *     in [0, out_c), no padding: out_c_stride is the channels per image of the tensor written
 *     into, out_c_offset the slice's first channel (out_c_offset + out_c <= out_c_stride, any
 *     alignment); a dense tensor is out_c_stride = out_c, out_c_offset = 0. Channels outside
 *     the slice are not touched, so convs can write the f32 slices of a concat.
 *
 * Epilogue, per output channel c (acc is the f32 or int32 dot product):
 *   y = mul ? fmaf((float)acc, mul[c], bias[c]) : acc + bias[c]   (bias NULL = 0)
 *   y = act(y)
 *   i8 out:  clamp(rint(y * out_inv_scale), -127, 127)   (round-half-even, __float2int_rn)
 *   f16 out: __float2half_rn(y);   f32 out: y.
 * For INT8 convs mul[c] = s_in * s_w[c] (f32, host-computed); for FP16 convs mul is NULL.
 *
 * Requirements: FP16 needs compute capability 7.0+, INT8 7.2+ (checked at every launch; an older
 * device gives cudaErrorNotSupported). Launchers neither allocate nor synchronize.
 * This header is plain C11. */
#ifndef GR_KERNELS_CONV_H
#define GR_KERNELS_CONV_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Activation codes: the same values as gr_activation in ops/ops.h (the tests assert it); every
 * gr_activation below GR_CONV_ACT_COUNT is accepted (ops/activation.h's gr_act_epilogue). */
enum {
    GR_CONV_ACT_LINEAR = 0,
    GR_CONV_ACT_LEAKY = 1,
    GR_CONV_ACT_RELU = 2,
    GR_CONV_ACT_LOGISTIC = 3,
    GR_CONV_ACT_SWISH = 5, /* x * logistic(x): SiLU, every conv of a YOLOv5/v8/11 export */
    GR_CONV_ACT_COUNT = 19 /* = GR_ACT_COUNT */
};

typedef enum gr_conv_out_kind {
    GR_CONV_OUT_I8 = 0,      /* NHWC, channel-padded to 16 */
    GR_CONV_OUT_F16 = 1,     /* NHWC, channel-padded to 8 */
    GR_CONV_OUT_F32 = 2,     /* NHWC, channel-padded to 8 */
    GR_CONV_OUT_F32_NCHW = 3 /* NCHW, unpadded, a channel slice of out_c_stride channels */
} gr_conv_out_kind;

typedef struct gr_conv_args {
    /* shapes */
    int batch;
    int in_h, in_w, in_c;           /* in_c: real channels (3 for the first layer) */
    int in_c_stride, in_c_offset;   /* elements; in_c_stride >= in_c_offset + in_c_pad */
    int out_c;                      /* filters */
    int out_c_stride, out_c_offset; /* elements: per pixel (NHWC) or channels per image (NCHW) */
    int ksize, stride, pad;         /* square kernel; pad pixels on each side */
    /* device pointers */
    const void *in;      /* f16 (as uint16 bits) or i8 */
    const void *weights; /* [out_c][ksize][ksize][in_c_pad], see above */
    const float *mul;    /* [out_c] or NULL (FP16 convs) */
    const float *bias;   /* [out_c] or NULL */
    void *out;
    /* epilogue */
    int activation; /* GR_CONV_ACT_* */
    gr_conv_out_kind out_kind;
    float out_inv_scale; /* i8 output: 1.0f / s_out */
    int fp16_accumulate; /* FP16 conv only: accumulate in f16 instead of f32 */
    int tile_config;     /* 0 = chosen from the shape and the SM count; 1..GR_CONV_TILES
                            forces one (tests, tuning): see gr_conv_tile_name() */
    /* Split-K for small feature maps (13x13 layers fill few blocks otherwise): the K range is
     * cut into split_k parts computed by separate blocks; each writes its partial tile to
     * `workspace`, and the last block of a tile sums the partials in a fixed order (deterministic)
     * and runs the epilogue. workspace: device memory of gr_conv_workspace_bytes_f16/_i8(args)
     * bytes, zeroed ONCE when allocated (it ends every launch zeroed again where it matters: tile
     * counters); one workspace must not be used by two launches running at the same time.
     * workspace NULL = no split. split_k: 0 = automatic (layers with long K on few tiles split
     * to about one block per SM: see docs/performance.md), 1 = off, n = n parts (at most 64; fewer when K has fewer steps).
     * Not combined with fp16_accumulate (ignored there). */
    void *workspace;
    size_t workspace_bytes;
    int split_k;
    /* Fused 2x2 maxpool (a Darknet [maxpool] size=2 right after this conv, planner flag
     * GR_FUSED_MAXPOOL): pool_size 0 = none, 2 = the conv output is pooled before the output
     * conversion and only the pooled map is written (NHWC outputs only). pool_stride 1 or 2,
     * pool_pad Darknet's total padding (window start i*stride + (-pool_pad)/2; taps outside the
     * conv output never win). The output's pixel grid is then the pooled one. The kernel orders
     * the GEMM rows window by window (4 rows per pooled pixel), so a window never straddles two
     * blocks; a stride-1 pool recomputes each conv pixel up to four times. */
    int pool_size, pool_stride, pool_pad;
    /* First layer straight from the network input (planner flag GR_FUSED_QUANTIZE_IN): `in` is
     * uint8 NHWC with in_c_stride channels per pixel (value v means v/255), quantized as it is
     * read: i8 q = clamp(rint((v / 255.0f) / in_scale), -127, 127), f16 half_rn(v / 255.0f).
     * Needs in_c <= 4 and ksize <= 7 (kernels/conv_first.cu: a SIMT kernel for tile_config 0; for
     * tile_config GR_CONV_TILE_STREAM a tensor-core one, sm_80+, 3x3 convs of strides <= 2, pooled
     * or not, and at most 32 filters only; GR_CONV_TILE_STREAM_SMALL the same at two blocks per SM,
     * for 17-32 filters; the GEMM has K = 27 for the usual 3x3x3). */
    int in_u8;
    float in_scale;
    /* Programmatic dependent launch (sm_90+, ignored before): the kernel may be scheduled while
     * the previous kernel on the stream finishes; it waits for it (griddepcontrol.wait) before
     * reading anything. Works inside stream capture (programmatic graph edges). */
    int pdl;
} gr_conv_args;

/* Bytes of workspace a launch of `args` needs for its split_k / tile_config, assuming a
 * workspace will be given (0 when it would not split, and for invalid arguments). Computed for
 * the current device (SM count). The runtime sizes the buffer with this, then sets workspace. */
size_t gr_conv_workspace_bytes_f16(const gr_conv_args *args);
size_t gr_conv_workspace_bytes_i8(const gr_conv_args *args);

/* Tile shapes (M pixels x N filters per block): 1 = 128x64 (8 warps), 2 = 64x64 (4 warps),
 * 3 = 128x16 (4 warps, for out_c <= 16), 4 = 32x64 (4 warps, small feature maps).
 * 5 and 6: the resident-weights kernel (conv_stream.cu: persistent blocks that keep their filters'
 * whole K in shared memory and stream pixel tiles; 8 warps, 256x32 or 128xBN, and 4 warps, 64xBN);
 * only where the filters fit in shared memory, NHWC outputs, no split-K, f32 accumulation,
 * sm_80+ (otherwise the launch and gr_conv_check refuse). 7 ("patch"): the same kernel, 8 warps,
 * on 2D tiles of the output map whose input patch is staged once and read in place as the im2col
 * matrix (no per-row copies: the 3x3 taps of neighbouring pixels share the patch). */
#define GR_CONV_TILE_STREAM 5
#define GR_CONV_TILE_STREAM_SMALL 6
#define GR_CONV_TILE_PATCH 7
#define GR_CONV_TILES 7
/* "128x64" etc. for 1..GR_CONV_TILES, "auto" for 0, "?" otherwise. */
const char *gr_conv_tile_name(int tile_config);

/* Output size of a Darknet conv along one axis: (in + 2*pad - ksize)/stride + 1. */
int gr_conv_out_dim(int in, int ksize, int stride, int pad);

/* Launch one convolution on `stream`. Returns cudaErrorInvalidValue for inconsistent arguments
 * (the reason is in gr_kernels_last_failure()), cudaErrorNotSupported on a device without the
 * tensor-core instructions, else the launch's cudaGetLastError(). */
cudaError_t gr_launch_conv_f16(const gr_conv_args *args, cudaStream_t stream);
cudaError_t gr_launch_conv_i8(const gr_conv_args *args, cudaStream_t stream);
/* The checks of a launch (shapes, layouts, fusions, the device's capability) without the
 * pointers and without launching: the runtime asks before it plans fusions into a network. */
cudaError_t gr_conv_check(const gr_conv_args *args, int is_i8);

#ifdef __cplusplus
}
#endif

#endif
