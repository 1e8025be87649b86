/* [scale_channels] (AlexeyAB Darknet; squeeze-and-excitation and its spatial variant):
 * out = activation(from * s), where s, the previous layer's output, holds one value per channel
 * (scale_wh=0: s is c x 1 x 1, each channel of `from` times its value) or one per position
 * (scale_wh=1: s is 1 x h x w, every channel of `from` at (y, x) times s[y][x]).
 * make_scale_channels_layer (scale_channels_layer.c:18-25) asserts those shapes, and the output
 * is `from`'s shape; forward_scale_channels_layer (scale_channels_layer.c:65-90) is the loop the
 * reference follows, one float product per element, then the activation.
 * Inputs, in this order so that the output may overwrite `from` in place (GR_OPF_IN_PLACE acts on
 * input 0, the one with the output's shape): in[0] = the `from` layer, in[1] = s (the previous
 * layer, Darknet's state.input). The product is the same either way round. */
#include "ops/op_util.h"
#include "ops/ops.h"

static gr_status infer(const gr_op_ctx *c, gr_shape *out)
{
    const gr_op_kind op = GR_OP_SCALE_CHANNELS;
    const gr_op_params *p = c->p;
    GR_TRY(gr_op_check_inputs(c, 2));
    GR_TRY(gr_op_check_activation(op, p->activation));
    GR_TRY(gr_op_check_range(op, "scale_wh", p->scale_wh, 0, 1));
    const gr_shape from = c->in[0], s = c->in[1];
    if (!p->scale_wh && (s.h != 1 || s.w != 1 || s.c != from.c))
        return gr_fail(GR_ERR_PARSE,
                       "[scale_channels] input %dx%dx%d must be %dx1x1 (one value per channel of "
                       "the from-layer's %dx%dx%d; scale_wh=0, as AlexeyAB asserts)",
                       s.c, s.h, s.w, from.c, from.c, from.h, from.w);
    if (p->scale_wh && (s.c != 1 || s.h != from.h || s.w != from.w))
        return gr_fail(GR_ERR_PARSE,
                       "[scale_channels] input %dx%dx%d must be 1x%dx%d (one value per position "
                       "of the from-layer's %dx%dx%d; scale_wh=1, as AlexeyAB asserts)",
                       s.c, s.h, s.w, from.h, from.w, from.c, from.h, from.w);
    return gr_op_set_output(op, from.c, from.h, from.w, out);
}

/* Output row y reads row y of `from`, and of s per position (scale_wh=1) or s's one row. */
static void rows(const gr_op_ctx *c, int k, int r0, int r1, int *lo, int *hi)
{
    if (k == 1 && !c->p->scale_wh)
        gr_op_rows_whole(c, k, r0, r1, lo, hi);
    else
        gr_op_rows_window(r0, r1, 1, 0, 1, c->in[k].h, lo, hi);
}

static void ref(const gr_op_ctx *c)
{
    const gr_op_params *p = c->p;
    const size_t plane = (size_t)c->out.h * (size_t)c->out.w;
    const size_t image = gr_shape_elems(c->out), n = (size_t)c->batch * image;
    const float *from = c->src[0], *s = c->src[1];
    for (size_t i = 0; i < n; i++) {
        /* Darknet's indices: i / plane (image and channel) or (i % plane) + image number * plane */
        size_t si = p->scale_wh ? i % plane + i / image * plane : i / plane;
        c->dst[i] = s[si] * from[i];
    }
    gr_activate_array(c->dst, n, p->activation, gr_act_form_of(p, false));
}

const gr_op_hooks gr_op_scale_channels_hooks = {.infer = infer, .cost = gr_op_cost_activated,
                                                .rows = rows, .ref = ref};
