/* Fusion passes: parts of the work move into a conv so a node, and the round trip of its tensor
 * through memory, disappears.
 *   fuse_maxpool           a conv's sole-consumer maxpool is applied in the conv's epilogue
 *   fuse_input_quantize    the quantize of the u8 network input is done by the conv reading it
 *   fuse_output_dequantize the dequantize of a conv's output is the conv writing f32 itself; of
 *                          a concat of convs' outputs, each conv writing its f32 channel slice
 *   fuse_epilogue          bias, activation and the output conversion recorded on each conv
 * The math of each is in plan.h's header comment; the CPU executor (exec.c) emulates it. */
#include "planner/passes.h"

gr_status gr_pass_fuse_maxpool(gr_plan *plan)
{
    int fused = 0;
    for (int i = 0; i < plan->n_nodes; i++) {
        gr_plan_node *conv = &plan->nodes[i];
        if (conv->kind != GR_OP_CONV || (conv->fused & GR_FUSED_MAXPOOL) ||
            !gr_plan_may_fuse(plan, conv))
            continue;
        int pool = gr_plan_sole_consumer(plan, conv->output);
        if (pool < 0 || plan->nodes[pool].kind != GR_OP_MAXPOOL ||
            plan->nodes[pool].prec != conv->prec)
            continue;
        gr_plan_node *mp = &plan->nodes[pool];
        conv->fused |= GR_FUSED_MAXPOOL;
        conv->pool_size = mp->p.size;
        conv->pool_stride = mp->p.stride;
        conv->pool_pad = mp->p.pad;
        conv->pool_layer = mp->layer;
        /* The conv now writes the pool's tensor; the pool node takes the conv's schedule slot. */
        conv->output = mp->output;
        mp->kind = -1;
        fused++;
    }
    plan->fused_nodes_removed += fused;
    return gr_plan_compact(plan);
}

gr_status gr_pass_fuse_input_quantize(gr_plan *plan)
{
    int fused = 0;
    int in = plan->input_tensor;
    const gr_plan_tensor *u8 = &plan->tensors[in];
    if (u8->dtype != GR_DTYPE_U8 || u8->layout != GR_LAYOUT_NHWC || u8->c != 3)
        return GR_OK;
    for (int i = 0; i < plan->n_nodes; i++) {
        gr_plan_node *q = &plan->nodes[i];
        if (q->kind != GR_OP_QUANTIZE || q->inputs[0] != in)
            continue;
        gr_dtype target = plan->tensors[q->output].dtype;
        int c = gr_plan_sole_consumer(plan, q->output);
        if (c < 0 || plan->nodes[c].kind != GR_OP_CONV || plan->nodes[c].inputs[0] != q->output ||
            (target != GR_DTYPE_I8 && target != GR_DTYPE_F16) ||
            !gr_plan_may_fuse(plan, &plan->nodes[c]))
            continue;
        gr_plan_node *conv = &plan->nodes[c];
        conv->inputs[0] = in;
        conv->fused |= GR_FUSED_QUANTIZE_IN;
        conv->in_dtype = target;
        conv->in_scale = 0.0f; /* i8: set with the tensor scales (gr_plan_set_ranges) */
        q->kind = -1;
        fused++;
    }
    plan->fused_nodes_removed += fused;
    return fused ? gr_plan_compact(plan) : GR_OK;
}

/* May route node r, the producer of a dequantized tensor, hand the dequantize to the convs it
 * concatenates? A plain concat (no groups) whose every input is a conv's output read by nothing
 * but the route (so each input is used once and each conv writes one slice), convs the fusions
 * may touch. */
static int concat_of_fusable_convs(const gr_plan *plan, int r)
{
    const gr_plan_node *route = &plan->nodes[r];
    if (route->kind != GR_OP_ROUTE || route->p.groups > 1 || route->n_inputs < 1)
        return 0;
    for (int k = 0; k < route->n_inputs; k++) {
        int src = route->inputs[k], c = plan->tensors[src].producer;
        if (c < 0 || plan->nodes[c].kind != GR_OP_CONV || src == plan->input_tensor ||
            plan->tensors[src].view_of >= 0 || gr_plan_sole_consumer(plan, src) != r ||
            !gr_plan_may_fuse(plan, &plan->nodes[c]))
            return 0;
    }
    return 1;
}

/* The dequantize of such a concat disappears: each conv writes its channel slice of the f32
 * NCHW result from its unrounded epilogue value, and the route produces the f32 tensor - a no-op
 * whose inputs are views of it (concat_in_place), or an f32 copy. Nothing between a conv and the
 * dequantize read the convs' or the concat's values, and the f32 tensor's readers all come after
 * the dequantize's slot, so the schedule stays valid. The slices are strided NCHW for batch > 1
 * whatever nchw_strided_views says: only the convs write them, and nothing reads them but the
 * no-op route. */
static void fuse_concat_dequantize(gr_plan *plan, gr_plan_node *dq)
{
    const int f32 = dq->output, r = plan->tensors[dq->inputs[0]].producer;
    gr_plan_node *route = &plan->nodes[r];
    const int in_place = plan->options.concat_in_place;
    int offset = 0;
    for (int k = 0; k < route->n_inputs; k++) {
        gr_plan_tensor *s = &plan->tensors[route->inputs[k]];
        gr_plan_set_dtype(s, GR_DTYPE_F32);
        if (in_place) {
            s->view_of = f32;
            s->c_offset = offset;
            s->c_stride = plan->tensors[f32].c_stride;
        }
        offset += s->c;
        plan->nodes[s->producer].fused |= GR_FUSED_DEQUANT_OUT;
    }
    route->output = f32;
    route->noop = in_place;
    plan->tensors[f32].producer = r;
    dq->kind = -1;
}

gr_status gr_pass_fuse_output_dequantize(gr_plan *plan)
{
    int fused = 0;
    for (int i = 0; i < plan->n_nodes; i++) {
        gr_plan_node *dq = &plan->nodes[i];
        if (dq->kind != GR_OP_DEQUANTIZE)
            continue;
        int t = dq->inputs[0];
        int c = plan->tensors[t].producer;
        if (c < 0 || gr_plan_sole_consumer(plan, t) != i || t == plan->input_tensor)
            continue;
        if (plan->nodes[c].kind == GR_OP_ROUTE && concat_of_fusable_convs(plan, c)) {
            fuse_concat_dequantize(plan, dq);
            fused++;
            continue;
        }
        if (plan->nodes[c].kind != GR_OP_CONV || !gr_plan_may_fuse(plan, &plan->nodes[c]))
            continue;
        gr_plan_node *conv = &plan->nodes[c];
        /* The conv writes the dequantized tensor in its own schedule slot: nothing between the
         * two reads it, and the f32 tensor's readers all come after the dequantize's slot. */
        conv->output = dq->output;
        conv->fused |= GR_FUSED_DEQUANT_OUT;
        plan->tensors[dq->output].producer = c;
        dq->kind = -1;
        fused++;
    }
    plan->fused_nodes_removed += fused;
    return fused ? gr_plan_compact(plan) : GR_OK;
}

gr_status gr_pass_fuse_epilogue(gr_plan *plan)
{
    for (int i = 0; i < plan->n_nodes; i++) {
        gr_plan_node *nd = &plan->nodes[i];
        if (gr_op_has(nd->kind, GR_OPF_WEIGHTS)) {
            nd->fused |= GR_FUSED_BIAS;
            if (nd->p.activation != GR_ACT_LINEAR)
                nd->fused |= GR_FUSED_ACT;
            gr_dtype out = plan->tensors[nd->output].dtype;
            if (out == GR_DTYPE_I8)
                nd->fused |= GR_FUSED_REQUANT;
            else if (out == GR_DTYPE_F16)
                nd->fused |= GR_FUSED_CONVERT;
        } else if (nd->kind == GR_OP_SHORTCUT && nd->p.activation != GR_ACT_LINEAR) {
            nd->fused |= GR_FUSED_ACT;
        }
    }
    return GR_OK;
}
