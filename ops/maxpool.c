/* [maxpool]: Darknet's max pooling. `pad` holds Darknet's total padding (default size-1, resolved
 * by the parser). out = (in + padding - size)/stride + 1; the window of output i starts at
 * i*stride + (-padding)/2 (C's truncating division), and taps outside the input count as
 * -FLT_MAX, i.e. never win. So size 2 / stride 1 keeps the size and pads only right and bottom,
 * and size 2 / stride 2 gives ceil(in/2). */
#include <float.h>

#include "ops/op_util.h"
#include "ops/ops.h"

/* Shared with [local_avgpool] (ops/local_avgpool.c), whose windows are maxpool's. */
gr_status gr_op_pool_window_infer(const gr_op_ctx *c, gr_shape *out)
{
    const gr_op_kind op = c->p->op;
    const gr_op_params *p = c->p;
    const gr_shape *in = c->in;
    GR_TRY(gr_op_check_inputs(c, 1));
    GR_TRY(gr_op_check_range(op, "size", p->size, 1, GR_MAX_DIM));
    GR_TRY(gr_op_check_range(op, "stride", p->stride, 1, GR_MAX_DIM));
    GR_TRY(gr_op_check_range(op, "padding", p->pad, 0, GR_MAX_DIM));
    /* A window lies wholly in the padding (and would output -FLT_MAX) exactly when
     * ceil(padding/2) >= size (an average would divide by 0 taps); Darknet would compute that
     * garbage, we refuse it. */
    if ((p->pad + 1) / 2 >= p->size)
        return gr_fail(GR_ERR_PARSE,
                       "[%s] padding %d too large for size %d (at most 2*size-2 = %d)",
                       gr_op_tag(op), p->pad, p->size, 2 * p->size - 2);
    long long span_h = (long long)in[0].h + p->pad;
    long long span_w = (long long)in[0].w + p->pad;
    if (span_h < p->size || span_w < p->size)
        return gr_fail(GR_ERR_PARSE, "[%s] size %d larger than the padded input %lldx%lld",
                       gr_op_tag(op), p->size, span_h, span_w);
    return gr_op_set_output(op, in[0].c, (span_h - p->size) / p->stride + 1,
                            (span_w - p->size) / p->stride + 1, out);
}

static void cost(const gr_op_ctx *c, gr_cost *cost)
{
    /* one comparison per tap */
    cost->flops = (double)gr_shape_elems(c->out) * (double)c->p->size * (double)c->p->size;
}

/* Output row y reads input rows y*stride + (-padding)/2 + [0, size) (the header's window). */
void gr_op_pool_window_rows(const gr_op_ctx *c, int k, int r0, int r1, int *lo, int *hi)
{
    const gr_op_params *p = c->p;
    gr_op_rows_window(r0, r1, p->stride, -p->pad / 2, p->size, c->in[k].h, lo, hi);
}

static void ref(const gr_op_ctx *c)
{
    const gr_op_params *p = c->p;
    const gr_shape is = c->in[0], out_shape = c->out;
    const int offset = -p->pad / 2;
    for (int b = 0; b < c->batch; b++) {
        for (int ch = 0; ch < is.c; ch++) {
            const float *src = c->src[0] + ((size_t)b * is.c + ch) * is.h * is.w;
            float *dst = c->dst + ((size_t)b * out_shape.c + ch) * out_shape.h * out_shape.w;
            for (int oy = 0; oy < out_shape.h; oy++) {
                for (int ox = 0; ox < out_shape.w; ox++) {
                    float best = -FLT_MAX;
                    for (int ky = 0; ky < p->size; ky++) {
                        int y = oy * p->stride + offset + ky;
                        if (y < 0 || y >= is.h)
                            continue;
                        for (int kx = 0; kx < p->size; kx++) {
                            int x = ox * p->stride + offset + kx;
                            if (x < 0 || x >= is.w)
                                continue;
                            float v = src[(size_t)y * is.w + x];
                            best = v > best ? v : best;
                        }
                    }
                    dst[(size_t)oy * out_shape.w + ox] = best;
                }
            }
        }
    }
}

/* parse_maxpool (and parse_local_avgpool): stride 1, size = stride, padding = size - 1 (the last
 * two: resolve) */
void gr_op_pool_window_defaults(gr_op_params *p)
{
    p->stride = 1;
    p->size = GR_PARAM_DERIVED;
    p->pad = GR_PARAM_DERIVED;
}

void gr_op_pool_window_resolve(gr_op_params *p)
{
    if (p->size == GR_PARAM_DERIVED)
        p->size = p->stride;
    if (p->pad == GR_PARAM_DERIVED)
        p->pad = p->size - 1;
}

const gr_op_hooks gr_op_maxpool_hooks = {.infer = gr_op_pool_window_infer, .cost = cost,
                                         .rows = gr_op_pool_window_rows, .ref = ref,
                                         .defaults = gr_op_pool_window_defaults,
                                         .resolve = gr_op_pool_window_resolve};
