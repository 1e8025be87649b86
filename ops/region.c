/* [region]: YOLOv2's head activations (decoding boxes is the runtime's job). Channel
 * a*(coords+1+classes) + e of each cell: logistic on x, y (e = 0, 1) and objectness (e = coords);
 * the classes (e > coords) get a softmax over the classes of each anchor at each cell when
 * softmax=1, else a logistic (Darknet's forward_region_layer CPU path); w, h stay raw. The shape
 * is unchanged. Only coords=4 without softmax_tree/background is supported. */
#include <string.h>

#include "ops/op_util.h"
#include "ops/ops.h"

gr_status gr_op_region_infer(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape *out)
{
    const gr_op_kind op = GR_OP_REGION;
    GR_TRY(gr_op_check_n_in(op, in, n_in, 1));
    GR_TRY(gr_op_check_input(op, in[0], 0));
    GR_TRY(gr_op_check_range(op, "classes", p->classes, 1, GR_MAX_DIM));
    GR_TRY(gr_op_check_range(op, "num", p->num, 1, GR_MAX_ANCHORS));
    if (p->coords != 4)
        return gr_fail(GR_ERR_UNSUPPORTED, "[region] coords %d unsupported (only 4)", p->coords);
    if (p->softmax != 0 && p->softmax != 1)
        return gr_fail(GR_ERR_PARSE, "[region] softmax %d must be 0 or 1", p->softmax);
    long long expected = (long long)p->num * (p->coords + 1 + p->classes);
    if (in[0].c != expected)
        return gr_fail(GR_ERR_PARSE,
                       "[region] input has %d channels, expected num*(coords+1+classes) = "
                       "%d*(%d+1+%d) = %lld",
                       in[0].c, p->num, p->coords, p->classes, expected);
    return gr_op_set_output(op, in[0].c, in[0].h, in[0].w, out);
}

void gr_op_region_cost(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out,
                       gr_cost *cost)
{
    (void)n_in;
    double cells = (double)out.h * (double)out.w * (double)p->num;
    memset(cost, 0, sizeof *cost);
    /* 3 logistics per anchor and cell, then a softmax (8 per class) or logistics (4 per class) */
    cost->flops = cells * (3.0 * 4.0 + (p->softmax ? 8.0 : 4.0) * (double)p->classes);
    cost->in_elems = (double)gr_shape_elems(in[0]);
    cost->out_elems = (double)gr_shape_elems(out);
}

/* Per cell: row y of the output is row y of the input. */
void gr_op_region_rows(const gr_op_params *p, const gr_shape *in, int n_in, gr_shape out, int k,
                       int r0, int r1, int *lo, int *hi)
{
    (void)p;
    (void)n_in;
    (void)out;
    (void)k;
    gr_op_rows_window(r0, r1, 1, 0, 1, in[0].h, lo, hi);
}

void gr_op_region_ref(const gr_op_params *p, const gr_weights *w, const float *const *in,
                      const gr_shape *in_shapes, int n_in, float *out, gr_shape out_shape,
                      int batch)
{
    (void)w;
    (void)n_in;
    (void)out_shape;
    const gr_shape s = in_shapes[0];
    const size_t plane = (size_t)s.h * (size_t)s.w;
    const size_t per_anchor = (size_t)(p->coords + 1 + p->classes) * plane;
    memcpy(out, in[0], (size_t)batch * gr_shape_elems(s) * sizeof *out);
    for (int b = 0; b < batch; b++) {
        for (int a = 0; a < p->num; a++) {
            float *anchor = out + (size_t)b * gr_shape_elems(s) + (size_t)a * per_anchor;
            gr_activate_array(anchor, 2 * plane, GR_ACT_LOGISTIC, GR_ACT_FORM_PJREDDIE);
            gr_activate_array(anchor + (size_t)p->coords * plane, plane, GR_ACT_LOGISTIC,
                              GR_ACT_FORM_PJREDDIE);
            float *classes = anchor + (size_t)(p->coords + 1) * plane;
            if (p->softmax) {
                for (size_t cell = 0; cell < plane; cell++)
                    gr_softmax_strided(classes + cell, (size_t)p->classes, plane, classes + cell);
            } else {
                gr_activate_array(classes, (size_t)p->classes * plane, GR_ACT_LOGISTIC,
                                  GR_ACT_FORM_PJREDDIE);
            }
        }
    }
}
