/* [avgpool]: Darknet's global average pool, c x h x w -> c x 1 x 1 (mean of each channel). */
#include "ops/op_util.h"
#include "ops/ops.h"

static gr_status infer(const gr_op_ctx *c, gr_shape *out)
{
    GR_TRY(gr_op_check_inputs(c, 1));
    return gr_op_set_output(GR_OP_AVGPOOL, c->in[0].c, 1, 1, out);
}

static void cost(const gr_op_ctx *c, gr_cost *cost)
{
    /* adds, divides */
    cost->flops = (double)gr_shape_elems(c->in[0]) + (double)gr_shape_elems(c->out);
}

static void ref(const gr_op_ctx *c)
{
    const gr_shape is = c->in[0];
    const size_t plane = (size_t)is.h * (size_t)is.w;
    for (int b = 0; b < c->batch; b++) {
        for (int ch = 0; ch < is.c; ch++) {
            const float *src = c->src[0] + ((size_t)b * is.c + ch) * plane;
            /* Darknet sums in float and divides by h*w */
            float sum = 0.0f;
            for (size_t i = 0; i < plane; i++)
                sum += src[i];
            c->dst[(size_t)b * is.c + ch] = sum / (float)plane;
        }
    }
}

/* Global average: every output reads the whole plane. */
const gr_op_hooks gr_op_avgpool_hooks = {.infer = infer, .cost = cost, .rows = gr_op_rows_whole,
                                         .ref = ref};
