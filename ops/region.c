/* [region]: YOLOv2's head activations (decoding boxes is the runtime's job). Channel
 * a*(coords+1+classes) + e of each cell: logistic on x, y (e = 0, 1) and objectness (e = coords);
 * the classes (e > coords) get a softmax over the classes of each anchor at each cell when
 * softmax=1, else a logistic (Darknet's forward_region_layer CPU path); w, h stay raw. The shape
 * is unchanged. Only coords=4 without softmax_tree/background is supported. */
#include <string.h>

#include "ops/op_util.h"
#include "ops/ops.h"

static gr_status infer(const gr_op_ctx *c, gr_shape *out)
{
    const gr_op_kind op = GR_OP_REGION;
    const gr_op_params *p = c->p;
    GR_TRY(gr_op_check_inputs(c, 1));
    GR_TRY(gr_op_check_range(op, "classes", p->classes, 1, GR_MAX_DIM));
    GR_TRY(gr_op_check_range(op, "num", p->num, 1, GR_MAX_ANCHORS));
    if (p->coords != 4)
        return gr_fail(GR_ERR_UNSUPPORTED, "[region] coords %d unsupported (only 4)", p->coords);
    if (p->softmax != 0 && p->softmax != 1)
        return gr_fail(GR_ERR_PARSE, "[region] softmax %d must be 0 or 1", p->softmax);
    const gr_shape in = c->in[0];
    long long expected = (long long)p->num * (p->coords + 1 + p->classes);
    if (in.c != expected)
        return gr_fail(GR_ERR_PARSE,
                       "[region] input has %d channels, expected num*(coords+1+classes) = "
                       "%d*(%d+1+%d) = %lld",
                       in.c, p->num, p->coords, p->classes, expected);
    return gr_op_set_output(op, in.c, in.h, in.w, out);
}

static void cost(const gr_op_ctx *c, gr_cost *cost)
{
    const gr_op_params *p = c->p;
    double cells = (double)c->out.h * (double)c->out.w * (double)p->num;
    /* 3 logistics per anchor and cell, then a softmax (8 per class) or logistics (4 per class) */
    cost->flops = cells * (3.0 * 4.0 + (p->softmax ? 8.0 : 4.0) * (double)p->classes);
}

static void ref(const gr_op_ctx *c)
{
    const gr_op_params *p = c->p;
    const gr_shape s = c->in[0];
    const size_t plane = (size_t)s.h * (size_t)s.w;
    const size_t per_anchor = (size_t)(p->coords + 1 + p->classes) * plane;
    memcpy(c->dst, c->src[0], (size_t)c->batch * gr_shape_elems(s) * sizeof *c->dst);
    for (int b = 0; b < c->batch; b++) {
        for (int a = 0; a < p->num; a++) {
            float *anchor = c->dst + (size_t)b * gr_shape_elems(s) + (size_t)a * per_anchor;
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

/* parse_region: coords 4, classes 20, num 1, softmax 0; anchors .5 */
static void defaults(gr_op_params *p)
{
    p->coords = 4;
    p->classes = 20;
    p->num = 1;
    p->softmax = 0;
    for (int i = 0; i < 2 * GR_MAX_ANCHORS; i++)
        p->anchors[i] = 0.5f;
}

/* Per cell: row y of the output is row y of the input. */
const gr_op_hooks gr_op_region_hooks = {.infer = infer, .cost = cost, .ref = ref,
                                        .defaults = defaults};
