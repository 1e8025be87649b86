/* Non-GEMM GPU kernels of graphrun: pooling, data movement (upsample, reorg, route copy,
 * shortcut, the product of [sam] / [scale_channels]), precision conversion (quantize /
 * dequantize), the detection-head activations and the classifier's softmax.
 * Plain C11 interface; the kernels live in kernels/{pool,data,quant,head,attention}.cu.
 *
 * Layouts (the contract with the planner's CPU emulation: planner/plan.h's header comment and
 * docs/planner.md):
 *   f32 tensors are NCHW, f16 and i8 tensors are NHWC with padded channels. A gr_kview names the
 *   logical shape (n, c, h, w) and where those channels sit in the buffer:
 *     NCHW: element (n, ch, y, x) at ((n*c_stride + c_offset + ch)*h + y)*w + x
 *     NHWC: element (n, y, x, ch) at ((n*h + y)*w + x)*c_stride + c_offset + ch
 *   so c_stride is the buffer's channel count (padded for NHWC) and c_offset the first channel of
 *   a slice (route/concat). A dense tensor has c_offset 0 and c_stride = c (f32),
 *   round_up(c, 8) (f16) or round_up(c, 16) (i8); gr_kview_dense() fills that.
 *
 * Padding rule for NHWC outputs: the padded channels of a buffer hold 0, and the producer of the
 * buffer's last channel writes them: a kernel whose output slice ends inside the buffer's last
 * group of GR_KALIGN channels (c_offset + c > c_stride - align) also writes zeros to channels
 * [c_offset + c, c_stride). Every other channel outside the slice is left untouched.
 *
 * Numerics (exact formulas, so the CPU emulation can match bit for bit):
 *   - i8 -> real: q * s.  real -> i8 at the input side (quantize): clamp(rint(x / s), -127, 127).
 *     real -> i8 at a kernel's output (avgpool, shortcut): clamp(rint(y * inv_s), -127, 127) with
 *     inv_s = 1.0f / s computed in f32 by the launcher. rint is round-half-to-even.
 *   - f16 stores round to nearest even; f16 loads widen exactly.
 *   - maxpool/upsample/reorg/route copy move stored values (no conversion); a maxpool window
 *     with no tap inside the input gives -FLT_MAX (f32), -inf (f16) or -127 (i8).
 *   - avgpool: f32/f16: sum = sequential f32 sum over (y, x) row-major of the widened values,
 *     mean = sum / (float)(h*w). i8: sum of q in int32 (exact), mean = ((float)sum * s_in) / (h*w),
 *     then requantized with inv_s_out.
 *   - shortcut: y = x + from (f32 add of the widened values; i8: (q_x*s_x) + (q_from*s_from), each
 *     product rounded to f32 first, no fma), channels/pixels outside Darknet's sampled overlap
 *     pass x through; then the activation; then the output conversion.
 *   - mul (sam, scale_channels): y = x * s in f32 of the widened values (i8: (q_x*s_x) *
 *     (q_s*s_s), each product rounded to f32 first, no fma), then the activation, then the
 *     output conversion.
 *     Activations (shortcut, mul) exactly as the CPU reference gr_activate() (ops/ops.c, Darknet's CPU code):
 *     leaky y > 0 ? y : (float)(0.1 * (double)y) (NOTE: not the conv epilogue's 0.1f*y of
 *     planner/plan.h, which differs in the last bit for some y), relu y * (y > 0), logistic (float)(1./(1.+exp(-(double)y))),
 *     mish y*tanhf(softplus(y)) with Darknet's threshold 20, swish y * logistic(y).
 *   - region/yolo/softmax: Darknet's CPU arithmetic: logistic as 1/(1+exp(-x)) in double rounded
 *     to f32;
 *     softmax e_i = (float)exp((double)(x_i - max)), sum sequential in f32, out = e_i / sum.
 *
 * Launchers take a cudaStream_t, launch (never allocate or synchronize) and return
 * cudaGetLastError(), or cudaErrorInvalidValue for inconsistent arguments (nothing launched; the
 * failed check is in gr_kernels_last_failure()). f16 data are IEEE binary16 bits. In-place use
 * is allowed only where a launcher says so. */
#ifndef GR_KERNELS_MISC_H
#define GR_KERNELS_MISC_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "ops/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Channel padding granule of each NHWC dtype (f16: 8, i8: 16). */
#define GR_KALIGN_F16 8
#define GR_KALIGN_I8 16

typedef struct gr_kview {
    int n, c, h, w; /* logical shape: batch, channels, height, width */
    int c_stride;   /* channels of the underlying buffer (NHWC: padded) */
    int c_offset;   /* first channel of this tensor inside the buffer */
} gr_kview;

/* A whole, dense tensor of dtype `t` (F32: NCHW, c_stride = c; F16/I8: NHWC, padded). */
static inline gr_kview gr_kview_dense(gr_dtype t, int n, int c, int h, int w)
{
    int align = t == GR_DTYPE_F16 ? GR_KALIGN_F16 : t == GR_DTYPE_I8 ? GR_KALIGN_I8 : 1;
    gr_kview v = {n, c, h, w, (c + align - 1) / align * align, 0};
    return v;
}

/* Every launcher takes the stored dtype of its tensors (`dtype`: GR_DTYPE_F32, _F16 or _I8,
 * as in gr_kview_dense) and picks the kernel; a dtype (or pair) without a kernel gives
 * cudaErrorNotSupported, recorded for gr_kernels_last_failure() (kernels/common.h) like every
 * rejected argument. Scale arguments are read for i8 only (real = q * scale, > 0). Pointers
 * are device memory of that dtype. */

/* ---- pooling (pool.cu) ------------------------------------------------------------------------
 * maxpool, Darknet semantics: out.h = (in.h + padding - size)/stride + 1 (same for w), window of
 * output i starts at i*stride + (-padding)/2 (C division), taps outside never win. out.n/c must
 * equal in.n/c. */
cudaError_t gr_launch_maxpool(gr_dtype dtype, const void *in, gr_kview in_view, void *out,
                              gr_kview out_view, int size, int stride, int padding,
                              cudaStream_t stream);

/* AlexeyAB's [local_avgpool], f32 only: maxpool's windows and output size, each output the
 * mean of its window's taps inside the input (a window cut by the padding averages fewer). */
cudaError_t gr_launch_local_avgpool(gr_dtype dtype, const void *in, gr_kview in_view, void *out,
                                    gr_kview out_view, int size, int stride, int padding,
                                    cudaStream_t stream);

/* Global average pool: out is (n, c, 1, 1). */
cudaError_t gr_launch_avgpool(gr_dtype dtype, const void *in, gr_kview in_view, float in_scale,
                              void *out, gr_kview out_view, float out_scale, cudaStream_t stream);

/* ---- data movement (data.cu) -----------------------------------------------------------------
 * Nearest upsample by `factor`: out (n, c, h*factor, w*factor),
 * out[y][x] = in[y/factor][x/factor]. */
cudaError_t gr_launch_upsample(gr_dtype dtype, const void *in, gr_kview in_view, void *out,
                               gr_kview out_view, int factor, cudaStream_t stream);

/* Darknet reorg (stride s, docs/darknet.md's formula on flat per-image indices): in (n, C, H, W),
 * out (n, C*s*s, H/s, W/s); needs C % (s*s) == 0, H % s == 0, W % s == 0. */
cudaError_t gr_launch_reorg(gr_dtype dtype, const void *in, gr_kview in_view, void *out,
                            gr_kview out_view, int stride, cudaStream_t stream);

/* Route / concat copy: copies in (all in_view.c channels, from in_view.c_offset) into out's
 * channels [out_view.c_offset, out_view.c_offset + in_view.c); out_view.c must equal in_view.c and
 * out_view.c_offset may be any channel (not only a multiple of the granule). A route with
 * groups/group_id reads a channel slice: set in_view.c_offset / in_view.c. i8: both sides must
 * have the same scale (the values are copied). */
cudaError_t gr_launch_route_copy(gr_dtype dtype, const void *in, gr_kview in_view, void *out,
                                 gr_kview out_view, cudaStream_t stream);

/* Shortcut: out = act(x + from) with Darknet's mismatched-shape rule: stride = from.w / x.w,
 * sample = x.w / from.w (each at least 1; from.h / x.h and x.h / from.h must give the same two
 * numbers), for ch < min(c_x, c_from), j < min(h_x, h_from), i < min(w_x, w_from):
 * out[ch][j*sample][i*sample] += from[ch][j*stride][i*stride]; everything else passes x through.
 * out has x's shape. out may be x itself (same view) for in-place use. */
cudaError_t gr_launch_shortcut(gr_dtype dtype, const void *x, gr_kview x_view, float x_scale,
                               const void *from, gr_kview from_view, float from_scale, void *out,
                               gr_kview out_view, float out_scale, gr_activation act,
                               cudaStream_t stream);

/* Elementwise product with broadcast, [sam] and [scale_channels]: out = act(x * s) where s has
 * x's channels or one channel (the same value for every channel: scale_channels scale_wh=1) and
 * x's h x w or 1 x 1 (one value per channel: scale_channels scale_wh=0); sam passes two tensors
 * of x's shape. out has x's shape; out may be x itself (same view) for in-place use. */
cudaError_t gr_launch_mul(gr_dtype dtype, const void *x, gr_kview x_view, float x_scale,
                          const void *s, gr_kview s_view, float s_scale, void *out,
                          gr_kview out_view, float out_scale, gr_activation act,
                          cudaStream_t stream);

/* ---- precision conversion (quant.cu) ---------------------------------------------------------
 * From dtype `from` to dtype `to`:
 *   u8 -> f16 / i8 (quantize) or f32 (convert): the network input, u8 NHWC dense with
 *     out_view's n, c (3), h, w; value v means v/255; in_view is not read.
 *   f32 NCHW -> f16 / i8 NHWC padded (quantize).
 *   f16 / i8 NHWC padded -> f32 NCHW (dequantize: out_view.c channels, the padding is dropped).
 *   i8 -> f16 NHWC padded: half_rn(q * in_scale); f16 -> i8: clamp(rint(x / out_scale), -127,
 *     127) (the boundaries of a mixed-precision plan; output padding written as 0).
 * in_view and out_view must have the same shape where in_view is read. */
cudaError_t gr_launch_convert(gr_dtype from, gr_dtype to, const void *in, gr_kview in_view,
                              float in_scale, void *out, gr_kview out_view, float out_scale,
                              cudaStream_t stream);

/* ---- detection heads and softmax (head.cu): f32 NCHW, out may equal in (in place) -----------
 * region (dense): c = num*(coords+1+classes); per anchor a, channel a*(coords+1+classes)+e:
 * logistic on e = 0, 1 (x, y) and e = coords (objectness); classes e = coords+1 ...: softmax per
 * cell if softmax, else logistic (Darknet's forward_region_layer CPU path); w, h copied raw. */
cudaError_t gr_launch_region(gr_dtype dtype, const void *in, void *out, int n, int h, int w,
                             int num, int coords, int classes, int softmax, cudaStream_t stream);
/* yolo (dense): c = n_anchors*(5+classes); logistic on e = 0, 1 and e >= 4 (none when
 * new_coords); then e = 0, 1 become v * scale_x_y - (scale_x_y - 1) / 2; w, h copied raw. */
cudaError_t gr_launch_yolo(gr_dtype dtype, const void *in, void *out, int n, int h, int w,
                           int n_anchors, int classes, float scale_x_y, int new_coords,
                           cudaStream_t stream);
/* [softmax] (f32 NCHW, channel slices allowed): each image's c*h*w values, flattened in NCHW
 * order, are `groups` groups of consecutive values, each normalized with the softmax above.
 * in_view and out_view have the same shape; out may be in (same view). */
cudaError_t gr_launch_softmax(gr_dtype dtype, const void *in, gr_kview in_view, void *out,
                              gr_kview out_view, int groups, cudaStream_t stream);

/* dfl_head (ops/dfl_head.c: YOLOv8 / YOLO11's anchor-free head decode; f32 NCHW, channel slices
 * allowed): in[k] (in_views[k]) is one scale's n x (4 bins + classes) x h_k x w_k raw head,
 * strides[k] its stride in input pixels; out (out_view) is n x (4 + classes) x 1 x A, A the sum of
 * the inputs' h_k w_k, anchors in input order. The reference's float arithmetic (expf, float
 * sums in bin order). 1 to 8 inputs; out must not overlap an input. */
cudaError_t gr_launch_dfl_head(gr_dtype dtype, const void *const *in, const gr_kview *in_views,
                               const float *strides, int n_in, void *out, gr_kview out_view,
                               int bins, int classes, cudaStream_t stream);

/* ---- attention (attention.cu): f32 NCHW, channel slices allowed --------------------------------
 * ops/attention.c's op: in holds per image heads x (2 key_dim + head_dim) channels in blocks
 * [q of every head | k | v], out heads x head_dim channels of the same h x w; per head and query
 * token n, out[head*head_dim + d][n] = sum_m v[d][m] softmax_m(scale * q[.][n] . k[.][m]) (expf
 * after subtracting the max; f32 sums in parallel order). h * w at most GR_ATTENTION_MAX_TOKENS.
 * out must not overlap in. */
cudaError_t gr_launch_attention(gr_dtype dtype, const void *in, gr_kview in_view, void *out,
                                gr_kview out_view, int heads, int key_dim, float scale,
                                cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
