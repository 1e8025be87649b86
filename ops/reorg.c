/* [reorg]: Darknet's reorg (YOLOv2's passthrough, e.g. 64x26x26 -> 256x13x13). Not the usual
 * space-to-depth: with input (C, H, W), s = stride and oc = C/s^2, for flat indices k < C,
 * j < H, i < W:
 *   out[i + W*(j + H*k)] = in[(i*s + (k/oc)%s) + W*s*((j*s + (k/oc)/s) + H*s*(k%oc))]
 * and the result is read as (C*s^2, H/s, W/s). This is Darknet's reorg_cpu(..., forward=0), the
 * path its non-reverse layer takes. */
#include "ops/op_util.h"
#include "ops/ops.h"

static gr_status infer(const gr_op_ctx *c, gr_shape *out)
{
    const gr_op_kind op = GR_OP_REORG;
    const gr_op_params *p = c->p;
    GR_TRY(gr_op_check_inputs(c, 1));
    GR_TRY(gr_op_check_range(op, "stride", p->stride, 1, 256));
    const int s = p->stride;
    const gr_shape in = c->in[0];
    if (in.h % s != 0 || in.w % s != 0)
        return gr_fail(GR_ERR_PARSE, "[reorg] input %dx%d not divisible by stride %d", in.h, in.w,
                       s);
    if (in.c % (s * s) != 0)
        return gr_fail(GR_ERR_PARSE, "[reorg] input channels %d not divisible by stride^2 = %d",
                       in.c, s * s);
    return gr_op_set_output(op, (long long)in.c * s * s, in.h / s, in.w / s, out);
}

static void ref(const gr_op_ctx *c)
{
    const gr_shape is = c->in[0];
    const size_t C = (size_t)is.c, H = (size_t)is.h, W = (size_t)is.w, s = (size_t)c->p->stride;
    const size_t oc = C / (s * s);
    for (int b = 0; b < c->batch; b++) {
        const float *src = c->src[0] + (size_t)b * C * H * W;
        float *dst = c->dst + (size_t)b * C * H * W;
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

/* Cost: data movement only. Rows: Darknet's reorg scrambles the flat index (above), so an output
 * row mixes input rows from all over the tensor and reads them all. */
static void defaults(gr_op_params *p) { p->stride = 1; }

const gr_op_hooks gr_op_reorg_hooks = {.infer = infer, .rows = gr_op_rows_whole, .ref = ref,
                                       .defaults = defaults};
