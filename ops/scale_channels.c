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
#include <string.h>

#include "ops/op_util.h"
#include "ops/ops.h"

gr_status gr_op_scale_channels_infer(const gr_op_params *p, const gr_shape *in, int n_in,
                                     gr_shape *out)
{
    const gr_op_kind op = GR_OP_SCALE_CHANNELS;
    GR_TRY(gr_op_check_n_in(op, in, n_in, 2));
    GR_TRY(gr_op_check_input(op, in[0], 0));
    GR_TRY(gr_op_check_input(op, in[1], 1));
    GR_TRY(gr_op_check_activation(op, p->activation));
    GR_TRY(gr_op_check_range(op, "scale_wh", p->scale_wh, 0, 1));
    const gr_shape from = in[0], s = in[1];
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

void gr_op_scale_channels_cost(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out,
                               gr_cost *cost)
{
    (void)n_in;
    double out_elems = (double)gr_shape_elems(out);
    memset(cost, 0, sizeof *cost);
    cost->flops = out_elems * (1.0 + gr_activation_flops(p->activation));
    cost->in_elems = (double)gr_shape_elems(in[0]) + (double)gr_shape_elems(in[1]);
    cost->out_elems = out_elems;
}

/* Output row y reads row y of `from`, and of s per position (scale_wh=1) or s's one row. */
void gr_op_scale_channels_rows(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out,
                               int k, int r0, int r1, int *lo, int *hi)
{
    (void)n_in;
    (void)out;
    if (k == 1 && !p->scale_wh) {
        if (r1 <= r0)
            *lo = *hi = 0;
        else
            gr_op_rows_all(in[1].h, lo, hi);
        return;
    }
    gr_op_rows_window(r0, r1, 1, 0, 1, in[k].h, lo, hi);
}

void gr_op_scale_channels_ref(const gr_op_params *p, const gr_weights *w, const float *const *in,
                              const gr_shape *in_shapes, int n_in, float *out, gr_shape out_shape,
                              int batch)
{
    (void)w;
    (void)in_shapes;
    (void)n_in;
    const size_t plane = (size_t)out_shape.h * (size_t)out_shape.w;
    const size_t image = gr_shape_elems(out_shape), n = (size_t)batch * image;
    const float *from = in[0], *s = in[1];
    for (size_t i = 0; i < n; i++) {
        /* Darknet's indices: i / plane (image and channel) or (i % plane) + image number * plane */
        size_t si = p->scale_wh ? i % plane + i / image * plane : i / plane;
        out[i] = s[si] * from[i];
    }
    gr_activate_array(out, n, p->activation, gr_act_form_of(p, false));
}
