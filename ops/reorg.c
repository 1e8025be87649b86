/* [reorg]: Darknet's reorg (YOLOv2's passthrough, e.g. 64x26x26 -> 256x13x13). Not the usual
 * space-to-depth: with input (C, H, W), s = stride and oc = C/s^2, for flat indices k < C,
 * j < H, i < W:
 *   out[i + W*(j + H*k)] = in[(i*s + (k/oc)%s) + W*s*((j*s + (k/oc)/s) + H*s*(k%oc))]
 * and the result is read as (C*s^2, H/s, W/s). This is Darknet's reorg_cpu(..., forward=0), the
 * path its non-reverse layer takes. */
#include <string.h>

#include "ops/op_util.h"
#include "ops/ops.h"

gr_status gr_op_reorg_infer(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape *out)
{
    const gr_op_kind op = GR_OP_REORG;
    GR_TRY(gr_op_check_n_in(op, in, n_in, 1));
    GR_TRY(gr_op_check_input(op, in[0], 0));
    GR_TRY(gr_op_check_range(op, "stride", p->stride, 1, 256));
    const int s = p->stride;
    if (in[0].h % s != 0 || in[0].w % s != 0)
        return gr_fail(GR_ERR_PARSE, "[reorg] input %dx%d not divisible by stride %d", in[0].h,
                       in[0].w, s);
    if (in[0].c % (s * s) != 0)
        return gr_fail(GR_ERR_PARSE, "[reorg] input channels %d not divisible by stride^2 = %d",
                       in[0].c, s * s);
    return gr_op_set_output(op, (long long)in[0].c * s * s, in[0].h / s, in[0].w / s, out);
}

void gr_op_reorg_cost(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out,
                      gr_cost *cost)
{
    (void)p;
    (void)n_in;
    memset(cost, 0, sizeof *cost);
    cost->in_elems = (double)gr_shape_elems(in[0]);
    cost->out_elems = (double)gr_shape_elems(out);
}

/* Darknet's reorg scrambles the flat index (above): an output row mixes input rows from all
 * over the tensor, so it reads them all. */
void gr_op_reorg_rows(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out, int k,
                      int r0, int r1, int *lo, int *hi)
{
    (void)p;
    (void)n_in;
    (void)out;
    (void)k;
    (void)r0;
    (void)r1;
    gr_op_rows_all(in[0].h, lo, hi);
}

void gr_op_reorg_ref(const gr_op_params *p, const gr_weights *w, const float *const *in,
                     const gr_shape *in_shapes, int n_in, float *out, gr_shape out_shape,
                     int batch)
{
    (void)w;
    (void)n_in;
    (void)out_shape;
    const gr_shape is = in_shapes[0];
    const size_t C = (size_t)is.c, H = (size_t)is.h, W = (size_t)is.w, s = (size_t)p->stride;
    const size_t oc = C / (s * s);
    for (int b = 0; b < batch; b++) {
        const float *src = in[0] + (size_t)b * C * H * W;
        float *dst = out + (size_t)b * C * H * W;
        for (size_t k = 0; k < C; k++) {
            const size_t block = k / oc, c2 = k % oc;
            for (size_t j = 0; j < H; j++) {
                const size_t y2 = j * s + block / s;
                for (size_t i = 0; i < W; i++) {
                    const size_t x2 = i * s + block % s;
                    dst[i + W * (j + H * k)] = src[x2 + W * s * (y2 + H * s * c2)];
                }
            }
        }
    }
}
