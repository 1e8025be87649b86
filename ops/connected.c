/* [connected]: fully connected layer on the flattened input (c*h*w values per image):
 * out = W x with W [outputs][inputs], then batch norm (same inference formula as conv) or bias,
 * then activation; output outputs x 1 x 1. `filters` holds Darknet's `output`. */
#include <math.h>

#include "ops/op_util.h"
#include "ops/ops.h"

static gr_status infer(const gr_op_ctx *c, gr_shape *out)
{
    const gr_op_kind op = GR_OP_CONNECTED;
    const gr_op_params *p = c->p;
    GR_TRY(gr_op_check_inputs(c, 1));
    GR_TRY(gr_op_check_range(op, "output", p->filters, 1, GR_MAX_DIM));
    GR_TRY(gr_op_check_activation(op, p->activation));
    size_t n_weights;
    if (!gr_mul_size(gr_shape_elems(c->in[0]), (size_t)p->filters, &n_weights) ||
        n_weights > GR_MAX_TENSOR_ELEMS)
        return gr_fail(GR_ERR_LIMIT, "[connected] weight matrix %d x %zu exceeds %zu elements",
                       p->filters, gr_shape_elems(c->in[0]), GR_MAX_TENSOR_ELEMS);
    return gr_op_set_output(op, p->filters, 1, 1, out);
}

static void cost(const gr_op_ctx *c, gr_cost *cost)
{
    const gr_op_params *p = c->p;
    double inputs = (double)gr_shape_elems(c->in[0]);
    double outputs = (double)gr_shape_elems(c->out);
    double per_output = (p->batch_normalize ? 4.0 : 1.0) + gr_activation_flops(p->activation);
    cost->flops = 2.0 * inputs * outputs + per_output * outputs;
    cost->n_weights = gr_shape_elems(c->in[0]) * (size_t)p->filters;
    cost->n_params = cost->n_weights + (size_t)p->filters * (p->batch_normalize ? 4u : 1u);
}

static void ref(const gr_op_ctx *c)
{
    const gr_op_params *p = c->p;
    const gr_weights *w = c->w;
    const size_t inputs = gr_shape_elems(c->in[0]);
    for (int b = 0; b < c->batch; b++) {
        const float *x = c->src[0] + (size_t)b * inputs;
        float *y = c->dst + (size_t)b * (size_t)p->filters;
        for (int o = 0; o < p->filters; o++) {
            const float *row = w->weights + (size_t)o * inputs;
            float sum = 0.0f;
            for (size_t i = 0; i < inputs; i++)
                sum += row[i] * x[i];
            if (p->batch_normalize) {
                /* as conv: Darknet's normalize_cpu in double, then scale, then bias */
                double denom = gr_bn_denominator(p->alexeyab, w->rolling_variance[o]);
                float normalized = (float)((double)(sum - w->rolling_mean[o]) / denom);
                sum = normalized * w->scales[o] + w->biases[o];
            } else {
                sum += w->biases[o];
            }
            y[o] = gr_activate_as(sum, p->activation, gr_act_form_of(p, false));
        }
    }
}

/* parse_connected: output 1, activation logistic */
static void defaults(gr_op_params *p)
{
    p->activation = GR_ACT_LOGISTIC;
    p->filters = 1;
}

/* Every output reads every input. */
const gr_op_hooks gr_op_connected_hooks = {.infer = infer, .cost = cost, .rows = gr_op_rows_whole,
                                           .ref = ref, .defaults = defaults};
