/* The roofline model of a plan node (planner/plan.h, gr_plan_node_cost_of): the work and the bytes
 * that must move, from the op table's cost (ops/<op>.c) and the plan's dtypes. The GPU runtime
 * turns them into floors (runtime/gpu/roofline.c); nothing here knows a device. */
#include <string.h>

#include "ops/ops.h"
#include "planner/plan.h"

static double tensor_bytes(const gr_plan_tensor *t)
{
    return (double)t->n * (double)t->c * (double)t->h * (double)t->w *
           (double)gr_dtype_size(t->dtype);
}

static gr_shape shape_of(const gr_plan_tensor *t)
{
    gr_shape s = {t->c, t->h, t->w};
    return s;
}

/* Bytes of one weight at the precision a node computes in. */
static double weight_size(gr_precision prec)
{
    switch (prec) {
    case GR_PREC_INT8: return 1.0;
    case GR_PREC_FP16: return 2.0;
    default: return 4.0;
    }
}

gr_status gr_plan_node_cost_of(const gr_plan *plan, int node, gr_plan_node_cost *cost)
{
    if (!plan || !cost)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_node_cost_of: NULL argument");
    if (node < 0 || node >= plan->n_nodes)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_node_cost_of: node %d is outside 0..%d",
                       node, plan->n_nodes - 1);
    memset(cost, 0, sizeof *cost);
    const gr_plan_node *nd = &plan->nodes[node];
    if (nd->noop || nd->kind == GR_NODE_INPUT || nd->kind == GR_NODE_OUTPUT || nd->output < 0)
        return GR_OK;
    const gr_plan_tensor *out = &plan->tensors[nd->output];
    const double batch = (double)out->n;
    gr_shape in[GR_MAX_INPUTS];
    for (int k = 0; k < nd->n_inputs; k++) {
        in[k] = shape_of(&plan->tensors[nd->inputs[k]]);
        cost->act_bytes += tensor_bytes(&plan->tensors[nd->inputs[k]]);
    }
    cost->act_bytes += tensor_bytes(out);
    if (nd->kind >= GR_OP_COUNT) { /* a conversion the planner inserted: one op per element */
        cost->flops = batch * (double)gr_shape_elems(shape_of(out));
        return GR_OK;
    }
    /* The op's own output shape: a fused maxpool's conv computes the unpooled one. */
    gr_shape op_out = shape_of(out);
    if (nd->fused & GR_FUSED_MAXPOOL)
        GR_TRY(gr_op_infer(&nd->p, in, nd->n_inputs, &op_out));
    gr_cost c;
    memset(&c, 0, sizeof c);
    gr_op_cost(&nd->p, in, nd->n_inputs, op_out, &c);
    cost->flops = batch * c.flops;
    if (gr_op_has(nd->kind, GR_OPF_WEIGHTS)) {
        const double filters = (double)nd->p.filters;
        double per_channel = 1.0; /* b' */
        if (nd->prec == GR_PREC_INT8)
            per_channel += 1.0; /* m[c] */
        if (nd->p.batch_normalize && !(nd->fused & GR_FUSED_BN))
            per_channel += 3.0; /* scales, mean, variance */
        cost->weight_bytes = (double)nd->n_w * weight_size(nd->prec) + 4.0 * per_channel * filters;
    }
    return GR_OK;
}
