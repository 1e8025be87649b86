/* [sam] (AlexeyAB Darknet's spatial attention module): out = activation(x * from), element by
 * element. Inputs: in[0] = x (the previous layer), in[1] = the `from` layer; both must have the
 * same shape (make_sam_layer, sam_layer.c:21-22, asserts it), which is the output's. The
 * reference is forward_sam_layer's loop (sam_layer.c:61-74): one float product per element, then
 * the activation over the whole output. */
#include "ops/op_util.h"
#include "ops/ops.h"

static gr_status infer(const gr_op_ctx *c, gr_shape *out)
{
    const gr_op_kind op = GR_OP_SAM;
    GR_TRY(gr_op_check_inputs(c, 2));
    GR_TRY(gr_op_check_activation(op, c->p->activation));
    const gr_shape x = c->in[0], from = c->in[1];
    if (x.c != from.c || x.h != from.h || x.w != from.w)
        return gr_fail(GR_ERR_PARSE,
                       "[sam] input %dx%dx%d and from-layer %dx%dx%d differ (c x h x w must match, "
                       "as AlexeyAB's make_sam_layer asserts)",
                       x.c, x.h, x.w, from.c, from.h, from.w);
    return gr_op_set_output(op, from.c, from.h, from.w, out);
}

static void ref(const gr_op_ctx *c)
{
    const size_t n = (size_t)c->batch * gr_shape_elems(c->out);
    for (size_t i = 0; i < n; i++)
        c->dst[i] = c->src[0][i] * c->src[1][i];
    gr_activate_array(c->dst, n, c->p->activation, gr_act_form_of(c->p, false));
}

/* Element by element: output row y reads row y of both inputs. */
const gr_op_hooks gr_op_sam_hooks = {.infer = infer, .cost = gr_op_cost_activated, .ref = ref};
