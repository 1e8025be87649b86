/* [softmax]: Darknet's softmax layer over `groups` groups of (c*h*w)/groups consecutive values of
 * each image (temperature 1). The shape is unchanged. */
#include "ops/op_util.h"
#include "ops/ops.h"

static gr_status infer(const gr_op_ctx *c, gr_shape *out)
{
    const gr_op_kind op = GR_OP_SOFTMAX;
    const gr_op_params *p = c->p;
    GR_TRY(gr_op_check_inputs(c, 1));
    GR_TRY(gr_op_check_range(op, "groups", p->groups, 1, GR_MAX_DIM));
    const gr_shape in = c->in[0];
    if (gr_shape_elems(in) % (size_t)p->groups != 0)
        return gr_fail(GR_ERR_PARSE, "[softmax] %zu inputs not divisible by groups %d",
                       gr_shape_elems(in), p->groups);
    return gr_op_set_output(op, in.c, in.h, in.w, out);
}

static void cost(const gr_op_ctx *c, gr_cost *cost)
{
    /* max, subtract, exp (counted 4), sum, divide */
    cost->flops = 8.0 * (double)gr_shape_elems(c->out);
}

static void ref(const gr_op_ctx *c)
{
    const int groups = c->p->groups;
    const size_t elems = gr_shape_elems(c->in[0]);
    const size_t group_size = elems / (size_t)groups;
    for (int b = 0; b < c->batch; b++)
        for (int g = 0; g < groups; g++) {
            size_t offset = (size_t)b * elems + (size_t)g * group_size;
            gr_softmax_strided(c->src[0] + offset, group_size, 1, c->dst + offset);
        }
}

/* Softmax groups run over the flattened tensor: every row. */
const gr_op_hooks gr_op_softmax_hooks = {.infer = infer, .cost = cost, .rows = gr_op_rows_whole,
                                         .ref = ref};
