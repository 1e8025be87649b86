/* Precision assignment with explicit Q/DQ: each node's output tensor takes its node's precision
 * (dtype and layout), and quantize/dequantize/convert nodes are inserted exactly where a consumer
 * needs another dtype, one per (tensor, target dtype), right before its first consumer. */
#include <stdlib.h>
#include <string.h>

#include "planner/passes.h"

static gr_dtype precision_dtype(gr_precision p)
{
    switch (p) {
    case GR_PREC_FP16: return GR_DTYPE_F16;
    case GR_PREC_INT8: return GR_DTYPE_I8;
    default: return GR_DTYPE_F32;
    }
}

static int conversion_kind(gr_dtype from, gr_dtype to)
{
    int from_real = from == GR_DTYPE_F32 || from == GR_DTYPE_U8;
    if (from_real && (to == GR_DTYPE_I8 || to == GR_DTYPE_F16))
        return GR_OP_QUANTIZE;
    if ((from == GR_DTYPE_I8 || from == GR_DTYPE_F16) && to == GR_DTYPE_F32)
        return GR_OP_DEQUANTIZE;
    return GR_NODE_CONVERT;
}

typedef struct conversion {
    int source, tensor; /* source tensor, converted tensor */
    gr_dtype dtype;
} conversion;

/* The precision whose input dtype the network input takes: fp32 -> f32 NCHW, otherwise u8 NHWC
 * (input_u8 < 0 follows the plan's precision). */
static gr_precision input_side(const gr_plan_options *opt)
{
    if (opt->input_u8 < 0)
        return opt->precision;
    return opt->input_u8 ? GR_PREC_INT8 : GR_PREC_FP32;
}

gr_status gr_pass_precision(gr_plan *plan)
{
    gr_precision in_side = input_side(&plan->options);
    /* Node outputs take their node's precision. */
    for (int i = 0; i < plan->n_nodes; i++) {
        gr_plan_node *nd = &plan->nodes[i];
        if (nd->output < 0)
            continue;
        if (nd->kind == GR_NODE_INPUT)
            gr_plan_set_dtype(&plan->tensors[nd->output],
                              in_side == GR_PREC_FP32 ? GR_DTYPE_F32 : GR_DTYPE_U8);
        else
            gr_plan_set_dtype(&plan->tensors[nd->output], precision_dtype(nd->prec));
    }
    /* Rebuild the schedule, emitting each conversion right before its first consumer. */
    int old_count = plan->n_nodes;
    gr_plan_node *old = gr_malloc((size_t)old_count * sizeof *old, "schedule copy");
    conversion *conv =
        gr_malloc((size_t)(old_count * GR_MAX_INPUTS + 1) * sizeof *conv, "conversions");
    if (!old || !conv) {
        free(old);
        free(conv);
        return GR_ERR_OUT_OF_MEMORY;
    }
    memcpy(old, plan->nodes, (size_t)old_count * sizeof *old);
    plan->n_nodes = 0;
    int n_conv = 0;
    gr_status st = GR_OK;
    for (int i = 0; i < old_count && st == GR_OK; i++) {
        gr_plan_node nd = old[i];
        gr_dtype want = precision_dtype(nd.kind == GR_NODE_OUTPUT ? GR_PREC_FP32 : nd.prec);
        for (int k = 0; k < nd.n_inputs && nd.kind != GR_NODE_INPUT; k++) {
            int src = nd.inputs[k];
            if (plan->tensors[src].dtype == want)
                continue;
            int found = -1;
            for (int j = 0; j < n_conv; j++)
                if (conv[j].source == src && conv[j].dtype == want)
                    found = conv[j].tensor;
            if (found < 0) {
                const gr_plan_tensor *s = &plan->tensors[src];
                int kind = conversion_kind(s->dtype, want);
                int t = gr_plan_new_tensor(plan, s->n, s->c, s->h, s->w, want, s->layer);
                int q = t < 0 ? -1 : gr_plan_new_node(plan, kind, -1);
                if (q < 0) {
                    st = GR_ERR_OUT_OF_MEMORY;
                    break;
                }
                gr_plan_node *qn = &plan->nodes[q];
                qn->n_inputs = 1;
                qn->inputs[0] = src;
                qn->output = t;
                qn->prec = nd.prec;
                qn->p.op = kind < GR_OP_COUNT ? (gr_op_kind)kind : GR_OP_QUANTIZE;
                qn->p.dtype = want == GR_DTYPE_F32 ? plan->tensors[src].dtype : want;
                plan->tensors[t].producer = q;
                conv[n_conv].source = src;
                conv[n_conv].tensor = t;
                conv[n_conv].dtype = want;
                n_conv++;
                found = t;
            }
            nd.inputs[k] = found;
        }
        if (st != GR_OK)
            break;
        int slot = gr_plan_new_node(plan, 0, 0);
        if (slot < 0) {
            st = GR_ERR_OUT_OF_MEMORY;
            break;
        }
        plan->nodes[slot] = nd;
        if (nd.output >= 0)
            plan->tensors[nd.output].producer = slot;
    }
    /* Outputs are now the f32 conversions of the heads. */
    for (int k = 0; k < plan->n_outputs && st == GR_OK; k++)
        for (int j = 0; j < n_conv; j++)
            if (conv[j].source == plan->output_tensors[k] && conv[j].dtype == GR_DTYPE_F32)
                plan->output_tensors[k] = conv[j].tensor;
    free(old);
    free(conv);
    if (st != GR_OK)
        return st;
    return gr_plan_compact(plan);
}
