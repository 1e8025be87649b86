/* [route]: concatenation along channels of the listed layers' outputs, in list order. With
 * groups=G and group_id=g (Darknet/AlexeyAB's CSP extension) each input contributes only its
 * channels [g*c/G, (g+1)*c/G). All inputs must share h and w. */
#include <string.h>

#include "ops/op_util.h"
#include "ops/ops.h"

gr_status gr_op_route_infer(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape *out)
{
    const gr_op_kind op = GR_OP_ROUTE;
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

void gr_op_route_cost(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out,
                      gr_cost *cost)
{
    (void)p;
    (void)in;
    (void)n_in;
    memset(cost, 0, sizeof *cost);
    cost->in_elems = (double)gr_shape_elems(out); /* only the routed groups are read */
    cost->out_elems = (double)gr_shape_elems(out);
}

/* A concatenation along channels: row y of the output is row y of every input. */
void gr_op_route_rows(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out, int k,
                      int r0, int r1, int *lo, int *hi)
{
    (void)p;
    (void)n_in;
    (void)out;
    gr_op_rows_window(r0, r1, 1, 0, 1, in[k].h, lo, hi);
}

void gr_op_route_ref(const gr_op_params *p, const gr_weights *w, const float *const *in,
                     const gr_shape *in_shapes, int n_in, float *out, gr_shape out_shape,
                     int batch)
{
    (void)w;
    for (int b = 0; b < batch; b++) {
        float *dst = out + (size_t)b * gr_shape_elems(out_shape);
        for (int k = 0; k < n_in; k++) {
            size_t part = gr_shape_elems(in_shapes[k]) / (size_t)p->groups;
            const float *src =
                in[k] + (size_t)b * gr_shape_elems(in_shapes[k]) + (size_t)p->group_id * part;
            memcpy(dst, src, part * sizeof *dst);
            dst += part;
        }
    }
}
