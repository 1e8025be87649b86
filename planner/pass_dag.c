/* The first passes: the DAG built from the layer list (input node, one node per layer in layer
 * order, output nodes, copies of the weights) and dead-node elimination. */
#include <stdlib.h>
#include <string.h>

#include "planner/passes.h"

/* ---- build the DAG ----------------------------------------------------------------------- */

static gr_status copy_layer_weights(gr_plan *plan, gr_plan_node *nd, const gr_layer *l, int index)
{
    const gr_weights *w = &l->w;
    if (!w->weights || !w->biases)
        return gr_fail(GR_ERR_INVALID_ARGUMENT,
                       "planner: layer %d (cfg line %d, %s) has no weights: load or synthesize "
                       "them before planning",
                       index, l->cfg_line, gr_plan_kind_name(l->p.op));
    size_t filters = (size_t)l->p.filters;
    nd->n_w = w->n_weights;
    GR_TRY(gr_plan_append_floats(plan, w->weights, w->n_weights, &nd->w_offset));
    GR_TRY(gr_plan_append_floats(plan, w->biases, filters, &nd->b_offset));
    if (l->p.batch_normalize) {
        if (!w->scales || !w->rolling_mean || !w->rolling_variance)
            return gr_fail(GR_ERR_INVALID_ARGUMENT,
                           "planner: layer %d (cfg line %d) has batch_normalize=1 but no BN "
                           "parameters",
                           index, l->cfg_line);
        GR_TRY(gr_plan_append_floats(plan, w->scales, filters, &nd->bn_offset));
        size_t unused;
        GR_TRY(gr_plan_append_floats(plan, w->rolling_mean, filters, &unused));
        GR_TRY(gr_plan_append_floats(plan, w->rolling_variance, filters, &unused));
    }
    return GR_OK;
}

/* The floats copy_layer_weights appends for the whole net, and one per filter for the int8
 * weight scales gr_pass_quantize_weights appends later: reserved at once. */
static size_t weight_floats_needed(const gr_net *net)
{
    size_t n = 0;
    for (int i = 0; i < net->n_layers; i++) {
        const gr_layer *l = &net->layers[i];
        if (gr_op_has((int)l->p.op, GR_OPF_WEIGHTS))
            n += l->w.n_weights + (size_t)l->p.filters * (l->p.batch_normalize ? 5 : 2);
        if (net->qdq && net->qdq->wscale[i])
            n += (size_t)net->qdq->n_wscale[i];
    }
    return n;
}

static gr_precision layer_precision(const gr_plan_options *opt, int layer, int kind)
{
    if (gr_op_has(kind, GR_OPF_F32_ONLY))
        return GR_PREC_FP32;
    if (opt->layer_precision && layer >= 0 && layer < opt->n_layer_precision)
        return opt->layer_precision[layer];
    return opt->precision;
}

/* Output layers: with decode_heads the region/yolo layers; else the layers feeding them; with no
 * head at all, gr_net_heads' (the net's output layers, or its last layer). */
static int find_outputs(const gr_net *net, int decode_heads, int *out, int max)
{
    int n = 0;
    for (int i = 0; i < net->n_layers && n < max; i++) {
        if (!gr_op_has((int)net->layers[i].p.op, GR_OPF_HEAD))
            continue;
        out[n++] = decode_heads ? i : net->layers[i].inputs[0];
    }
    if (n == 0 && net->n_layers > 0)
        n = gr_net_heads(net, out, max); /* the net's outputs (ONNX) or its last layer */
    return n;
}

static gr_status check_options(const gr_net *net, const gr_plan_options *opt)
{
    if (!net || !opt)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_build: NULL argument");
    if (net->n_layers <= 0 || !net->layers)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_build: network '%s' has no layers",
                       net->name);
    if (net->n_layers > GR_MAX_LAYERS)
        return gr_fail(GR_ERR_LIMIT, "gr_plan_build: %d layers (limit %d)", net->n_layers,
                       GR_MAX_LAYERS);
    if (opt->batch < 1 || opt->batch > GR_MAX_BATCH)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_build: batch %d outside 1..%d", opt->batch,
                       GR_MAX_BATCH);
    if ((unsigned)opt->precision > GR_PREC_INT8)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_build: unknown precision %d",
                       (int)opt->precision);
    for (int i = 0; opt->layer_precision && i < opt->n_layer_precision; i++)
        if ((unsigned)opt->layer_precision[i] > GR_PREC_INT8)
            return gr_fail(GR_ERR_INVALID_ARGUMENT,
                           "gr_plan_build: layer_precision[%d] = %d is not a precision", i,
                           (int)opt->layer_precision[i]);
    if (opt->n_no_fuse_layer < 0 || (opt->n_no_fuse_layer > 0 && !opt->no_fuse_layer))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_build: n_no_fuse_layer %d without flags",
                       opt->n_no_fuse_layer);
    /* Every tensor of the plan holds `batch` images: bounded like any tensor, before any is made. */
    gr_shape in_shape = {net->c, net->h, net->w};
    size_t elems;
    if (!gr_mul_size(gr_shape_elems(in_shape), (size_t)opt->batch, &elems) ||
        elems > GR_MAX_TENSOR_ELEMS)
        return gr_fail(GR_ERR_LIMIT, "gr_plan_build: input %dx%dx%d x batch %d is more than %zu "
                       "elements", net->c, net->h, net->w, opt->batch, GR_MAX_TENSOR_ELEMS);
    for (int i = 0; i < net->n_layers; i++) {
        const gr_layer *l = &net->layers[i];
        if (!gr_mul_size(gr_shape_elems(l->out), (size_t)opt->batch, &elems) ||
            elems > GR_MAX_TENSOR_ELEMS)
            return gr_fail(GR_ERR_LIMIT,
                           "gr_plan_build: layer %d (cfg line %d): output %dx%dx%d x batch %d is "
                           "more than %zu elements",
                           i, l->cfg_line, l->out.c, l->out.h, l->out.w, opt->batch,
                           GR_MAX_TENSOR_ELEMS);
        if (l->n_inputs < 1 || l->n_inputs > GR_MAX_INPUTS)
            return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_build: layer %d has %d inputs", i,
                           l->n_inputs);
        for (int k = 0; k < l->n_inputs; k++)
            if (l->inputs[k] < -1 || l->inputs[k] >= i)
                return gr_fail(GR_ERR_INVALID_ARGUMENT,
                               "gr_plan_build: layer %d input %d = %d does not point backwards", i,
                               k, l->inputs[k]);
        if ((unsigned)l->p.op >= GR_OP_COUNT || gr_op_has((int)l->p.op, GR_OPF_CONVERSION))
            return gr_fail(GR_ERR_UNSUPPORTED, "gr_plan_build: layer %d has op %d", i,
                           (int)l->p.op);
        if (l->p.op == GR_OP_CONNECTED && l->p.batch_normalize)
            return gr_fail(GR_ERR_UNSUPPORTED,
                           "gr_plan_build: layer %d (cfg line %d): connected with "
                           "batch_normalize is not supported",
                           i, l->cfg_line);
        if (l->p.op == GR_OP_ROUTE && l->p.groups > 1 && l->n_inputs != 1)
            return gr_fail(GR_ERR_UNSUPPORTED,
                           "gr_plan_build: layer %d (cfg line %d): route groups with several "
                           "inputs",
                           i, l->cfg_line);
    }
    return GR_OK;
}

gr_status gr_pass_build_dag(const gr_net *net, const gr_plan_options *opt, gr_plan **out)
{
    *out = NULL;
    GR_TRY(check_options(net, opt));
    gr_plan *plan = gr_calloc(1, sizeof *plan, "plan");
    if (!plan)
        return GR_ERR_OUT_OF_MEMORY;
    gr_status st = GR_OK;
    int *layer_tensor = gr_malloc((size_t)net->n_layers * sizeof *layer_tensor, "layer tensors");
    int *outputs = gr_malloc((size_t)net->n_layers * sizeof *outputs, "outputs");
    char *is_output = gr_calloc((size_t)net->n_layers, 1, "output flags");
    if (!layer_tensor || !outputs || !is_output) {
        st = GR_ERR_OUT_OF_MEMORY;
        goto done;
    }
    plan->n_layers = net->n_layers;
    plan->net_w = net->w;
    plan->net_h = net->h;
    plan->net_c = net->c;
    plan->batch = opt->batch;
    plan->precision = opt->precision;
    plan->input_tensor = -1;
    plan->options = *opt;
    plan->options.layer_precision = NULL; /* applied to the nodes below; not owned */
    plan->options.n_layer_precision = 0;

    int n_out = find_outputs(net, opt->decode_heads, outputs, net->n_layers);
    for (int k = 0; k < n_out; k++)
        is_output[outputs[k]] = 1;
    plan->output_tensors = gr_calloc((size_t)n_out, sizeof *plan->output_tensors, "outputs");
    if (!plan->output_tensors) {
        st = GR_ERR_OUT_OF_MEMORY;
        goto done;
    }
    plan->n_outputs = n_out;
    st = gr_plan_reserve_floats(plan, weight_floats_needed(net));
    if (st != GR_OK)
        goto done;

    int in_node = gr_plan_new_node(plan, GR_NODE_INPUT, -1);
    int in_tensor = gr_plan_new_tensor(plan, opt->batch, net->c, net->h, net->w, GR_DTYPE_F32, -1);
    if (in_node < 0 || in_tensor < 0) {
        st = GR_ERR_OUT_OF_MEMORY;
        goto done;
    }
    plan->nodes[in_node].output = in_tensor;
    plan->nodes[in_node].prec = opt->precision;
    plan->tensors[in_tensor].producer = in_node;
    plan->input_tensor = in_tensor;

    for (int i = 0; i < net->n_layers; i++) {
        const gr_layer *l = &net->layers[i];
        int nd_index = gr_plan_new_node(plan, (int)l->p.op, i);
        int t = gr_plan_new_tensor(plan, opt->batch, l->out.c, l->out.h, l->out.w, GR_DTYPE_F32, i);
        if (nd_index < 0 || t < 0) {
            st = GR_ERR_OUT_OF_MEMORY;
            goto done;
        }
        gr_plan_node *nd = &plan->nodes[nd_index];
        nd->p = l->p;
        nd->prec = layer_precision(opt, i, l->p.op);
        nd->n_inputs = l->n_inputs;
        for (int k = 0; k < l->n_inputs; k++)
            nd->inputs[k] = l->inputs[k] < 0 ? in_tensor : layer_tensor[l->inputs[k]];
        nd->output = t;
        plan->tensors[t].producer = nd_index;
        layer_tensor[i] = t;
        if (gr_op_has((int)l->p.op, GR_OPF_WEIGHTS)) {
            st = copy_layer_weights(plan, nd, l, i);
            /* The file's int8 weight scales (ONNX Q/DQ), used by quantize_weights. */
            if (st == GR_OK && net->qdq && net->qdq->wscale[i] &&
                net->qdq->n_wscale[i] == l->p.filters) {
                st = gr_plan_append_floats(plan, net->qdq->wscale[i], (size_t)l->p.filters,
                                           &nd->fws_offset);
                nd->file_wscale = 1;
            }
            if (st != GR_OK)
                goto done;
        }
        if (is_output[i]) {
            int o = gr_plan_new_node(plan, GR_NODE_OUTPUT, i);
            if (o < 0) {
                st = GR_ERR_OUT_OF_MEMORY;
                goto done;
            }
            plan->nodes[o].n_inputs = 1;
            plan->nodes[o].inputs[0] = t;
            plan->nodes[o].prec = GR_PREC_FP32;
        }
    }
    for (int k = 0; k < n_out; k++)
        plan->output_tensors[k] = layer_tensor[outputs[k]];

done:
    free(layer_tensor);
    free(outputs);
    free(is_output);
    if (st != GR_OK) {
        gr_plan_free(plan);
        return st;
    }
    *out = plan;
    return GR_OK;
}

/* ---- dead nodes -------------------------------------------------------------------------- */

gr_status gr_pass_dead_nodes(gr_plan *plan)
{
    char *needed = gr_calloc((size_t)plan->n_tensors, 1, "live tensors");
    if (!needed)
        return GR_ERR_OUT_OF_MEMORY;
    /* Walk the schedule backwards: a node is needed when it is an output/input node or writes a
     * tensor some needed node reads. */
    int removed = 0;
    for (int i = plan->n_nodes - 1; i >= 0; i--) {
        gr_plan_node *nd = &plan->nodes[i];
        int keep = nd->kind == GR_NODE_OUTPUT || nd->kind == GR_NODE_INPUT ||
                   (nd->output >= 0 && needed[nd->output]);
        if (!keep) {
            nd->kind = -1;
            removed++;
            continue;
        }
        for (int k = 0; k < nd->n_inputs; k++)
            needed[nd->inputs[k]] = 1;
    }
    free(needed);
    plan->dead_nodes_removed += removed;
    return gr_plan_compact(plan);
}
