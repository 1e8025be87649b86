/* [convolutional]: 2-D convolution with groups, then batch norm (or bias), then activation, in
 * Darknet's order. Weights are [filters][c/groups][size][size]; pad is pixels on each side (the
 * parser turns pad=1 into size/2). out_h = (in_h + 2*pad - size)/stride_y + 1, out_w likewise
 * with stride (AlexeyAB's stride_x). With dilation d the taps are d apart and the padding is
 * pad*d (AlexeyAB's im2col_cpu_ext call, convolutional_layer.c:1371-1378) while the output size
 * formula ignores d (convolutional_layer.c:78-86): the two agree only when d = 1 or
 * 2*pad = size - 1, and any other combination is refused (Darknet would read its im2col buffer
 * with the wrong row length).
 *
 * The reference accumulates one output plane at a time: for each input channel and kernel tap it
 * adds weight * (shifted input rows) to the plane, so the innermost loop runs over contiguous
 * output columns and the compiler vectorizes it; no im2col buffer is needed. This is also the
 * summation order of Darknet's CPU im2col + gemm_nn (per filter, for each (channel, ky, kx) row
 * of the im2col matrix, add weight * row to the output), padded taps there adding exact zeros. */
#include <math.h>
#include <string.h>

#include "ops/op_util.h"
#include "ops/ops.h"

static gr_status infer(const gr_op_ctx *c, gr_shape *out)
{
    const gr_op_kind op = GR_OP_CONV;
    const gr_op_params *p = c->p;
    const gr_shape *in = c->in;
    GR_TRY(gr_op_check_inputs(c, 1));
    GR_TRY(gr_op_check_range(op, "filters", p->filters, 1, GR_MAX_DIM));
    GR_TRY(gr_op_check_range(op, "size", p->size, 1, GR_MAX_DIM));
    GR_TRY(gr_op_check_range(op, "stride", p->stride, 1, GR_MAX_DIM));
    GR_TRY(gr_op_check_range(op, "padding", p->pad, 0, GR_MAX_DIM));
    GR_TRY(gr_op_check_range(op, "groups", p->groups, 1, GR_MAX_DIM));
    GR_TRY(gr_op_check_range(op, "stride_y", gr_conv_stride_y(p), 1, GR_MAX_DIM));
    GR_TRY(gr_op_check_range(op, "dilation", gr_conv_dilation(p), 1, GR_MAX_DIM));
    const int dilation = gr_conv_dilation(p);
    if (dilation > 1 && 2 * p->pad != p->size - 1)
        return gr_fail(GR_ERR_UNSUPPORTED,
                       "[convolutional] dilation %d needs padding (size-1)/2 = %d (pad=1 with an "
                       "odd size); padding %d gives Darknet an output size its im2col disagrees "
                       "with",
                       dilation, (p->size - 1) / 2, p->pad);
    GR_TRY(gr_op_check_activation(op, p->activation));
    if (in[0].c % p->groups != 0)
        return gr_fail(GR_ERR_PARSE, "[convolutional] input channels %d not divisible by groups %d",
                       in[0].c, p->groups);
    if (p->filters % p->groups != 0)
        return gr_fail(GR_ERR_PARSE, "[convolutional] filters %d not divisible by groups %d",
                       p->filters, p->groups);
    long long padded_h = (long long)in[0].h + 2LL * p->pad;
    long long padded_w = (long long)in[0].w + 2LL * p->pad;
    if (padded_h < p->size || padded_w < p->size)
        return gr_fail(GR_ERR_PARSE,
                       "[convolutional] size %d larger than the padded input %lldx%lld", p->size,
                       padded_h, padded_w);
    size_t n_weights;
    size_t per_filter = (size_t)(in[0].c / p->groups) * (size_t)p->size * (size_t)p->size;
    if (!gr_mul_size(per_filter, (size_t)p->filters, &n_weights) || n_weights > GR_MAX_TENSOR_ELEMS)
        return gr_fail(GR_ERR_LIMIT, "[convolutional] weight tensor %d x %zu exceeds %zu elements",
                       p->filters, per_filter, GR_MAX_TENSOR_ELEMS);
    return gr_op_set_output(op, p->filters, (padded_h - p->size) / gr_conv_stride_y(p) + 1,
                            (padded_w - p->size) / p->stride + 1, out);
}

static void cost(const gr_op_ctx *c, gr_cost *cost)
{
    const gr_op_params *p = c->p;
    size_t per_filter = (size_t)(c->in[0].c / p->groups) * (size_t)p->size * (size_t)p->size;
    double out_elems = (double)gr_shape_elems(c->out);
    /* Elementwise after the convolution: BN is 4 ops (subtract mean, divide by std, scale, add
     * bias), a plain bias 1; plus the activation's charge. */
    double per_output = (p->batch_normalize ? 4.0 : 1.0) + gr_activation_flops(p->activation);
    cost->flops = 2.0 * (double)per_filter * out_elems + per_output * out_elems;
    cost->n_weights = per_filter * (size_t)p->filters;
    cost->n_params = cost->n_weights + (size_t)p->filters * (p->batch_normalize ? 4u : 1u);
}

/* Outputs o in [lo, hi) read input o*stride + offset inside [0, in_n). */
static void tap_range(int out_n, int in_n, int stride, int offset, int *lo, int *hi)
{
    int first = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
    int last_in = in_n - 1 - offset; /* o*stride <= last_in */
    int end = last_in < 0 ? 0 : last_in / stride + 1;
    if (end > out_n)
        end = out_n;
    if (first > end)
        first = end;
    *lo = first;
    *hi = end;
}

/* plane[oy][ox] += weight * src[oy*stride_y + dy][ox*stride_x + dx] wherever the source is
 * inside. */
static void accumulate_tap(float *restrict plane, gr_shape out_shape, const float *restrict src,
                           int in_h, int in_w, int stride_y, int stride_x, int dy, int dx,
                           float weight)
{
    int y0, y1, x0, x1;
    tap_range(out_shape.h, in_h, stride_y, dy, &y0, &y1);
    tap_range(out_shape.w, in_w, stride_x, dx, &x0, &x1);
    for (int oy = y0; oy < y1; oy++) {
        float *restrict out_row = plane + (size_t)oy * out_shape.w;
        const float *restrict in_row = src + (size_t)(oy * stride_y + dy) * in_w;
        if (stride_x == 1) {
            for (int ox = x0; ox < x1; ox++)
                out_row[ox] += weight * in_row[ox + dx];
        } else {
            for (int ox = x0; ox < x1; ox++)
                out_row[ox] += weight * in_row[ox * stride_x + dx];
        }
    }
}

/* Darknet's batch norm at inference, computed as Darknet does: pjreddie's (x - mean) /
 * (sqrt(var) + eps) in double (sqrt() and the 1e-6f promote), stored as float, then * scale, then
 * + bias; AlexeyAB's folded into the weights at load (ref below scales them), so only its
 * folded bias is added here. */
static void finish_channel(float *plane, size_t n, const gr_op_params *p, const gr_weights *w,
                           int oc)
{
    if (p->batch_normalize && p->alexeyab) {
        float bias = gr_bn_alexeyab_fused_bias(w, oc);
        for (size_t i = 0; i < n; i++)
            plane[i] += bias;
    } else if (p->batch_normalize) {
        float mean = w->rolling_mean[oc];
        double denom = gr_bn_denominator(0, w->rolling_variance[oc]);
        float scale = w->scales[oc];
        float bias = w->biases[oc];
        for (size_t i = 0; i < n; i++) {
            float normalized = (float)((double)(plane[i] - mean) / denom);
            plane[i] = normalized * scale + bias;
        }
    } else {
        float bias = w->biases[oc];
        for (size_t i = 0; i < n; i++)
            plane[i] += bias;
    }
    gr_activate_array(plane, n, p->activation, gr_act_form_of(p, true));
}

/* Output row y reads input rows y*stride_y - pad*d + d*[0, size) (d the dilation). */
static void rows(const gr_op_ctx *c, int k, int r0, int r1, int *lo, int *hi)
{
    const gr_op_params *p = c->p;
    const int d = gr_conv_dilation(p);
    gr_op_rows_window(r0, r1, gr_conv_stride_y(p), -p->pad * d, (p->size - 1) * d + 1, c->in[k].h,
                      lo, hi);
}

static void ref(const gr_op_ctx *c)
{
    const gr_op_params *p = c->p;
    const gr_weights *w = c->w;
    const gr_shape is = c->in[0], out_shape = c->out;
    const int k = p->size, d = gr_conv_dilation(p), stride_y = gr_conv_stride_y(p);
    const int in_per_group = is.c / p->groups;
    const int out_per_group = p->filters / p->groups;
    const size_t in_plane = (size_t)is.h * (size_t)is.w;
    const size_t out_plane = (size_t)out_shape.h * (size_t)out_shape.w;
    for (int b = 0; b < c->batch; b++) {
        const float *src = c->src[0] + (size_t)b * gr_shape_elems(is);
        float *dst = c->dst + (size_t)b * gr_shape_elems(out_shape);
        for (int oc = 0; oc < p->filters; oc++) {
            const int group = oc / out_per_group;
            float *plane = dst + (size_t)oc * out_plane;
            memset(plane, 0, out_plane * sizeof *plane);
            const bool fused = p->batch_normalize && p->alexeyab;
            const double factor = fused ? gr_bn_alexeyab_factor(w, oc) : 1.0;
            for (int ic = 0; ic < in_per_group; ic++) {
                const float *src_plane = src + (size_t)(group * in_per_group + ic) * in_plane;
                const float *kernel = w->weights + ((size_t)oc * in_per_group + ic) * k * k;
                for (int ky = 0; ky < k; ky++)
                    for (int kx = 0; kx < k; kx++) {
                        float weight = kernel[ky * k + kx];
                        if (fused)
                            weight = (float)((double)weight * factor);
                        accumulate_tap(plane, out_shape, src_plane, is.h, is.w, stride_y,
                                       p->stride, (ky - p->pad) * d, (kx - p->pad) * d, weight);
                    }
            }
            finish_channel(plane, out_plane, p, w, oc);
        }
    }
}

/* parse_convolutional: filters 1, size 1, stride 1, pad 0, activation logistic */
static void defaults(gr_op_params *p)
{
    p->activation = GR_ACT_LOGISTIC;
    p->filters = 1;
    p->size = 1;
    p->stride = 1;
}

const gr_op_hooks gr_op_conv_hooks = {.infer = infer, .cost = cost, .rows = rows, .ref = ref,
                                      .defaults = defaults};
