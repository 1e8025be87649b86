/* [route]: concatenation along channels of the listed layers' outputs, in list order. With
 * groups=G and group_id=g (Darknet/AlexeyAB's CSP extension) each input contributes only its
 * channels [g*c/G, (g+1)*c/G). All inputs must share h and w. */
#include <string.h>

#include "ops/op_util.h"
#include "ops/ops.h"

static gr_status infer(const gr_op_ctx *c, gr_shape *out)
{
    const gr_op_kind op = GR_OP_ROUTE;
    const gr_op_params *p = c->p;
    const gr_shape *in = c->in;
    const int n_in = c->n_in;
    if (!in || n_in < 1 || n_in > GR_MAX_INPUTS)
        return gr_fail(GR_ERR_PARSE, "[route] needs 1 to %d layers, got %d", GR_MAX_INPUTS,
                       in ? n_in : 0);
    GR_TRY(gr_op_check_range(op, "groups", p->groups, 1, GR_MAX_DIM));
    if (p->group_id < 0 || p->group_id >= p->groups)
        return gr_fail(GR_ERR_PARSE, "[route] group_id %d must be in 0..%d", p->group_id,
                       p->groups - 1);
    long long channels = 0;
    for (int k = 0; k < n_in; k++) {
        GR_TRY(gr_op_check_input(op, in[k], k));
        if (in[k].h != in[0].h || in[k].w != in[0].w)
            return gr_fail(GR_ERR_PARSE,
                           "[route] input %d is %dx%d but input 0 is %dx%d (h x w must match)", k,
                           in[k].h, in[k].w, in[0].h, in[0].w);
        if (in[k].c % p->groups != 0)
            return gr_fail(GR_ERR_PARSE, "[route] input %d channels %d not divisible by groups %d",
                           k, in[k].c, p->groups);
        channels += in[k].c / p->groups;
    }
    return gr_op_set_output(op, channels, in[0].h, in[0].w, out);
}

static void cost(const gr_op_ctx *c, gr_cost *cost)
{
    cost->in_elems = (double)gr_shape_elems(c->out); /* only the routed groups are read */
}

static void ref(const gr_op_ctx *c)
{
    const gr_op_params *p = c->p;
    for (int b = 0; b < c->batch; b++) {
        float *dst = c->dst + (size_t)b * gr_shape_elems(c->out);
        for (int k = 0; k < c->n_in; k++) {
            size_t part = gr_shape_elems(c->in[k]) / (size_t)p->groups;
            const float *src =
                c->src[k] + (size_t)b * gr_shape_elems(c->in[k]) + (size_t)p->group_id * part;
            memcpy(dst, src, part * sizeof *dst);
            dst += part;
        }
    }
}

/* A concatenation along channels: row y of the output is row y of every input. */
const gr_op_hooks gr_op_route_hooks = {.infer = infer, .cost = cost, .ref = ref};
