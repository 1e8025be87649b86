/* [yolo]: YOLOv3's head activations. The input holds n_mask anchors (those `mask` selects from
 * the `num` anchors) of 5+classes channels each: channel a*(5+classes) + e with e = 0:x 1:y 2:w
 * 3:h 4:objectness 5..:classes. Logistic on x, y, objectness and every class; w, h stay raw. The
 * shape is unchanged. AlexeyAB's forward_yolo_layer (yolo_layer.c:662-684) adds two keys:
 * scale_x_y scales x and y after the logistic (gr_yolo_scale_xy), and new_coords=1 drops the
 * logistic entirely (the conv before it has activation=logistic instead); x, y are still scaled. */
#include <string.h>

#include "ops/op_util.h"
#include "ops/ops.h"

static gr_status infer(const gr_op_ctx *c, gr_shape *out)
{
    const gr_op_kind op = GR_OP_YOLO;
    const gr_op_params *p = c->p;
    GR_TRY(gr_op_check_inputs(c, 1));
    GR_TRY(gr_op_check_range(op, "classes", p->classes, 1, GR_MAX_DIM));
    GR_TRY(gr_op_check_range(op, "num", p->num, 1, GR_MAX_ANCHORS));
    GR_TRY(gr_op_check_range(op, "mask count", p->n_mask, 1, GR_MAX_ANCHORS));
    GR_TRY(gr_op_check_range(op, "new_coords", p->new_coords, 0, 1));
    if (!(p->scale_x_y > 0.0f && p->scale_x_y <= 16.0f))
        return gr_fail(GR_ERR_PARSE, "[yolo] scale_x_y %g must be in (0, 16]", (double)p->scale_x_y);
    if (!(p->beta_nms > 0.0f && p->beta_nms <= 16.0f))
        return gr_fail(GR_ERR_PARSE, "[yolo] beta_nms %g must be in (0, 16]", (double)p->beta_nms);
    for (int i = 0; i < p->n_mask; i++)
        if (p->mask[i] < 0 || p->mask[i] >= p->num)
            return gr_fail(GR_ERR_PARSE, "[yolo] mask entry %d is %d, must be in 0..%d", i,
                           p->mask[i], p->num - 1);
    const gr_shape in = c->in[0];
    long long expected = (long long)p->n_mask * (5LL + p->classes);
    if (in.c != expected)
        return gr_fail(GR_ERR_PARSE,
                       "[yolo] input has %d channels, expected masks*(5+classes) = %d*(5+%d) = "
                       "%lld",
                       in.c, p->n_mask, p->classes, expected);
    return gr_op_set_output(op, in.c, in.h, in.w, out);
}

static void cost(const gr_op_ctx *c, gr_cost *cost)
{
    const gr_op_params *p = c->p;
    double cells = (double)c->out.h * (double)c->out.w * (double)p->n_mask;
    double logistics = p->new_coords ? 0.0 : 3.0 + (double)p->classes; /* logistic = 4 flops */
    double scale = p->scale_x_y != 1.0f ? 2.0 * 2.0 : 0.0;               /* x, y: mul + add */
    cost->flops = cells * (4.0 * logistics + scale);
}

static void ref(const gr_op_ctx *c)
{
    const gr_op_params *p = c->p;
    const gr_shape s = c->in[0];
    const size_t plane = (size_t)s.h * (size_t)s.w;
    const size_t per_anchor = (size_t)(5 + p->classes) * plane;
    memcpy(c->dst, c->src[0], (size_t)c->batch * gr_shape_elems(s) * sizeof *c->dst);
    for (int b = 0; b < c->batch; b++) {
        for (int a = 0; a < p->n_mask; a++) {
            float *anchor = c->dst + (size_t)b * gr_shape_elems(s) + (size_t)a * per_anchor;
            if (!p->new_coords) {
                gr_activate_array(anchor, 2 * plane, GR_ACT_LOGISTIC, gr_act_form_of(p, false));
                gr_activate_array(anchor + 4 * plane, (size_t)(1 + p->classes) * plane,
                                  GR_ACT_LOGISTIC, gr_act_form_of(p, false));
            }
            for (size_t i = 0; i < 2 * plane; i++)
                anchor[i] = gr_yolo_scale_xy(p, anchor[i]);
        }
    }
}

/* parse_yolo: classes 20, num 1, no mask = every anchor (resolve); anchors .5; AlexeyAB's
 * parse_yolo: scale_x_y 1, new_coords 0, beta_nms 0.6 */
static void defaults(gr_op_params *p)
{
    p->coords = 4;
    p->classes = 20;
    p->num = 1;
    p->n_mask = GR_PARAM_DERIVED;
    p->scale_x_y = 1.0f;
    p->beta_nms = 0.6f;
    p->nms_kind = GR_NMS_DEFAULT;
    for (int i = 0; i < 2 * GR_MAX_ANCHORS; i++)
        p->anchors[i] = 0.5f;
}

static void resolve(gr_op_params *p)
{
    if (p->n_mask != GR_PARAM_DERIVED)
        return;
    for (int k = 0; k < p->num && k < GR_MAX_ANCHORS; k++)
        p->mask[k] = k;
    p->n_mask = p->num;
}

/* Per cell: row y of the output is row y of the input. */
const gr_op_hooks gr_op_yolo_hooks = {.infer = infer, .cost = cost, .ref = ref,
                                      .defaults = defaults, .resolve = resolve};

float gr_yolo_scale_xy(const gr_op_params *p, float v)
{
    /* scal_add_cpu(n, ALPHA = scale_x_y, BETA = -0.5*(scale_x_y - 1) computed in double and
     * passed as float): X = X*ALPHA + BETA. The explicit float temporary keeps a compiler from
     * contracting it into an FMA, which Darknet's -Ofast build may or may not do: the two differ
     * by at most one rounding (< 1e-7 relative). */
    float offset = (float)(-0.5 * ((double)p->scale_x_y - 1.0));
    float scaled = v * p->scale_x_y;
    return scaled + offset;
}
