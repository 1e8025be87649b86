/* [sam] (AlexeyAB Darknet's spatial attention module): out = activation(x * from), element by
 * element. Inputs: in[0] = x (the previous layer), in[1] = the `from` layer; both must have the
 * same shape (make_sam_layer, sam_layer.c:21-22, asserts it), which is the output's. The
 * reference is forward_sam_layer's loop (sam_layer.c:61-74): one float product per element, then
 * the activation over the whole output. */
#include <string.h>

#include "ops/op_util.h"
#include "ops/ops.h"

gr_status gr_op_sam_infer(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape *out)
{
    const gr_op_kind op = GR_OP_SAM;
    GR_TRY(gr_op_check_n_in(op, in, n_in, 2));
    GR_TRY(gr_op_check_input(op, in[0], 0));
    GR_TRY(gr_op_check_input(op, in[1], 1));
    GR_TRY(gr_op_check_activation(op, p->activation));
    const gr_shape x = in[0], from = in[1];
    if (x.c != from.c || x.h != from.h || x.w != from.w)
        return gr_fail(GR_ERR_PARSE,
                       "[sam] input %dx%dx%d and from-layer %dx%dx%d differ (c x h x w must match, "
                       "as AlexeyAB's make_sam_layer asserts)",
                       x.c, x.h, x.w, from.c, from.h, from.w);
    return gr_op_set_output(op, from.c, from.h, from.w, out);
}

void gr_op_sam_cost(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out,
                    gr_cost *cost)
{
    (void)n_in;
    double out_elems = (double)gr_shape_elems(out);
    memset(cost, 0, sizeof *cost);
    cost->flops = out_elems * (1.0 + gr_activation_flops(p->activation));
    cost->in_elems = (double)gr_shape_elems(in[0]) + (double)gr_shape_elems(in[1]);
    cost->out_elems = out_elems;
}

/* Element by element: output row y reads row y of both inputs. */
void gr_op_sam_rows(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out, int k,
                    int r0, int r1, int *lo, int *hi)
{
    (void)p;
    (void)n_in;
    (void)out;
    gr_op_rows_window(r0, r1, 1, 0, 1, in[k].h, lo, hi);
}

void gr_op_sam_ref(const gr_op_params *p, const gr_weights *w, const float *const *in,
                   const gr_shape *in_shapes, int n_in, float *out, gr_shape out_shape, int batch)
{
    (void)w;
    (void)in_shapes;
    (void)n_in;
    const size_t n = (size_t)batch * gr_shape_elems(out_shape);
    for (size_t i = 0; i < n; i++)
        out[i] = in[0][i] * in[1][i];
    gr_activate_array(out, n, p->activation, gr_act_form_of(p, false));
}
