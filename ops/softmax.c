/* [softmax]: Darknet's softmax layer over `groups` groups of (c*h*w)/groups consecutive values of
 * each image (temperature 1). The shape is unchanged. */
#include <string.h>

#include "ops/op_util.h"
#include "ops/ops.h"

gr_status gr_op_softmax_infer(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape *out)
{
    const gr_op_kind op = GR_OP_SOFTMAX;
    GR_TRY(gr_op_check_n_in(op, in, n_in, 1));
    GR_TRY(gr_op_check_input(op, in[0], 0));
    GR_TRY(gr_op_check_range(op, "groups", p->groups, 1, GR_MAX_DIM));
    if (gr_shape_elems(in[0]) % (size_t)p->groups != 0)
        return gr_fail(GR_ERR_PARSE, "[softmax] %zu inputs not divisible by groups %d",
                       gr_shape_elems(in[0]), p->groups);
    return gr_op_set_output(op, in[0].c, in[0].h, in[0].w, out);
}

void gr_op_softmax_cost(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out,
                        gr_cost *cost)
{
    (void)p;
    (void)n_in;
    memset(cost, 0, sizeof *cost);
    /* max, subtract, exp (counted 4), sum, divide */
    cost->flops = 8.0 * (double)gr_shape_elems(out);
    cost->in_elems = (double)gr_shape_elems(in[0]);
    cost->out_elems = (double)gr_shape_elems(out);
}

/* Softmax groups run over the flattened tensor: every row. */
void gr_op_softmax_rows(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out, int k,
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

void gr_op_softmax_ref(const gr_op_params *p, const gr_weights *w, const float *const *in,
                       const gr_shape *in_shapes, int n_in, float *out, gr_shape out_shape,
                       int batch)
{
    (void)w;
    (void)n_in;
    (void)out_shape;
    const size_t elems = gr_shape_elems(in_shapes[0]);
    const size_t group_size = elems / (size_t)p->groups;
    for (int b = 0; b < batch; b++)
        for (int g = 0; g < p->groups; g++) {
            size_t offset = (size_t)b * elems + (size_t)g * group_size;
            gr_softmax_strided(in[0] + offset, group_size, 1, out + offset);
        }
}
