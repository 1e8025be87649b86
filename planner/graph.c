/* The planner's graph passes: the DAG built from the layer list, dead-node elimination, BN
 * folding, maxpool fusion, precision assignment with explicit Q/DQ, epilogue fusion, int8 weight
 * quantization and concatenation without a copy. Each pass rewrites the plan in place and keeps
 * plan->nodes in a valid schedule (every input produced by an earlier node). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner/passes.h"

static int round_up_int(int x, int m) { return (x + m - 1) / m * m; }

static int channel_granule(gr_dtype dtype)
{
    switch (dtype) {
    case GR_DTYPE_F16: return 8;
    case GR_DTYPE_I8: return 16;
    default: return 1;
    }
}

void gr_plan_set_dtype(gr_plan_tensor *t, gr_dtype dtype)
{
    t->dtype = dtype;
    if (dtype == GR_DTYPE_F32) {
        t->layout = GR_LAYOUT_NCHW;
        t->c_pad = t->c;
    } else if (dtype == GR_DTYPE_U8) {
        t->layout = GR_LAYOUT_NHWC; /* the network input: 3 channels, unpadded */
        t->c_pad = t->c;
    } else {
        t->layout = GR_LAYOUT_NHWC;
        t->c_pad = round_up_int(t->c, channel_granule(dtype));
    }
    t->c_stride = t->c_pad;
    t->c_offset = 0;
    t->bytes = (size_t)t->n * (size_t)t->h * (size_t)t->w * (size_t)t->c_pad * gr_dtype_size(dtype);
}

int gr_plan_new_tensor(gr_plan *plan, int n, int c, int h, int w, gr_dtype dtype, int layer)
{
    if (plan->n_tensors == plan->cap_tensors) {
        int cap = plan->cap_tensors ? plan->cap_tensors * 2 : 64;
        gr_plan_tensor *grown = realloc(plan->tensors, (size_t)cap * sizeof *grown);
        if (!grown) {
            gr_fail(GR_ERR_OUT_OF_MEMORY, "planner: out of memory growing the tensor table");
            return -1;
        }
        plan->tensors = grown;
        plan->cap_tensors = cap;
    }
    gr_plan_tensor *t = &plan->tensors[plan->n_tensors];
    memset(t, 0, sizeof *t);
    t->n = n;
    t->c = c;
    t->h = h;
    t->w = w;
    t->view_of = -1;
    t->inplace_of = -1;
    t->buffer = -1;
    t->producer = -1;
    t->layer = layer;
    t->scale = 0.0f;
    gr_plan_set_dtype(t, dtype);
    return plan->n_tensors++;
}

int gr_plan_new_node(gr_plan *plan, int kind, int layer)
{
    if (plan->n_nodes == plan->cap_nodes) {
        int cap = plan->cap_nodes ? plan->cap_nodes * 2 : 64;
        gr_plan_node *grown = realloc(plan->nodes, (size_t)cap * sizeof *grown);
        if (!grown) {
            gr_fail(GR_ERR_OUT_OF_MEMORY, "planner: out of memory growing the node table");
            return -1;
        }
        plan->nodes = grown;
        plan->cap_nodes = cap;
    }
    gr_plan_node *nd = &plan->nodes[plan->n_nodes];
    memset(nd, 0, sizeof *nd);
    nd->kind = kind;
    nd->layer = layer;
    nd->output = -1;
    nd->pool_layer = -1;
    nd->record_event = -1;
    gr_op_params_default(GR_OP_CONV, &nd->p);
    nd->p.op = kind < GR_OP_COUNT ? (gr_op_kind)kind : GR_OP_QUANTIZE;
    return plan->n_nodes++;
}

int gr_plan_root(const gr_plan *plan, int t)
{
    for (;;) {
        const gr_plan_tensor *x = &plan->tensors[t];
        if (x->view_of >= 0)
            t = x->view_of;
        else if (x->inplace_of >= 0)
            t = x->inplace_of;
        else
            return t;
    }
}

int gr_plan_consumers(const gr_plan *plan, int t)
{
    int count = 0;
    for (int i = 0; i < plan->n_nodes; i++)
        for (int k = 0; k < plan->nodes[i].n_inputs; k++)
            count += plan->nodes[i].inputs[k] == t;
    return count;
}

gr_status gr_plan_compact(gr_plan *plan)
{
    int *tensor_map = gr_malloc((size_t)(plan->n_tensors + 1) * sizeof *tensor_map, "tensor map");
    if (!tensor_map)
        return GR_ERR_OUT_OF_MEMORY;
    for (int t = 0; t < plan->n_tensors; t++)
        tensor_map[t] = -1;
    int kept = 0;
    for (int i = 0; i < plan->n_nodes; i++) {
        if (plan->nodes[i].kind < 0)
            continue;
        plan->nodes[kept++] = plan->nodes[i];
    }
    plan->n_nodes = kept;
    /* A tensor survives when a surviving node writes or reads it, or it hosts a view. */
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        if (nd->output >= 0)
            tensor_map[nd->output] = 0;
        for (int k = 0; k < nd->n_inputs; k++)
            tensor_map[nd->inputs[k]] = 0;
    }
    for (int t = 0; t < plan->n_tensors; t++)
        if (tensor_map[t] == 0 && plan->tensors[t].view_of >= 0)
            tensor_map[plan->tensors[t].view_of] = 0;
    int n_kept = 0;
    for (int t = 0; t < plan->n_tensors; t++) {
        if (tensor_map[t] < 0)
            continue;
        tensor_map[t] = n_kept;
        plan->tensors[n_kept++] = plan->tensors[t];
    }
    plan->n_tensors = n_kept;
    for (int t = 0; t < plan->n_tensors; t++) {
        gr_plan_tensor *x = &plan->tensors[t];
        if (x->view_of >= 0)
            x->view_of = tensor_map[x->view_of];
        if (x->inplace_of >= 0)
            x->inplace_of = tensor_map[x->inplace_of];
        x->producer = -1;
    }
    for (int i = 0; i < plan->n_nodes; i++) {
        gr_plan_node *nd = &plan->nodes[i];
        if (nd->output >= 0) {
            nd->output = tensor_map[nd->output];
            plan->tensors[nd->output].producer = i;
        }
        for (int k = 0; k < nd->n_inputs; k++)
            nd->inputs[k] = tensor_map[nd->inputs[k]];
    }
    plan->input_tensor = plan->input_tensor >= 0 ? tensor_map[plan->input_tensor] : -1;
    for (int k = 0; k < plan->n_outputs; k++)
        plan->output_tensors[k] = tensor_map[plan->output_tensors[k]];
    free(tensor_map);
    return GR_OK;
}

/* ---- build the DAG ----------------------------------------------------------------------- */

static int is_head_decoder(gr_op_kind op) { return op == GR_OP_REGION || op == GR_OP_YOLO; }

/* Ops that only exist in f32 in graphrun: the heads' decoders and the classifier tail. */
static int fp32_only(int kind)
{
    return kind == GR_OP_REGION || kind == GR_OP_YOLO || kind == GR_OP_SOFTMAX ||
           kind == GR_OP_CONNECTED || kind == GR_OP_AVGPOOL;
}

static gr_status append_floats(gr_plan *plan, const float *src, size_t count, size_t *offset)
{
    size_t total;
    if (!gr_add_size(plan->n_weight_floats, count, &total) || total > SIZE_MAX / sizeof(float))
        return gr_fail(GR_ERR_LIMIT, "planner: weight block size overflow");
    float *grown = realloc(plan->weights, (total ? total : 1) * sizeof *grown);
    if (!grown)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "planner: out of memory copying %zu weights", count);
    plan->weights = grown;
    if (src)
        memcpy(plan->weights + plan->n_weight_floats, src, count * sizeof *src);
    else
        memset(plan->weights + plan->n_weight_floats, 0, count * sizeof *grown);
    *offset = plan->n_weight_floats;
    plan->n_weight_floats = total;
    return GR_OK;
}

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
    GR_TRY(append_floats(plan, w->weights, w->n_weights, &nd->w_offset));
    GR_TRY(append_floats(plan, w->biases, filters, &nd->b_offset));
    if (l->p.batch_normalize) {
        if (!w->scales || !w->rolling_mean || !w->rolling_variance)
            return gr_fail(GR_ERR_INVALID_ARGUMENT,
                           "planner: layer %d (cfg line %d) has batch_normalize=1 but no BN "
                           "parameters",
                           index, l->cfg_line);
        GR_TRY(append_floats(plan, w->scales, filters, &nd->bn_offset));
        size_t unused;
        GR_TRY(append_floats(plan, w->rolling_mean, filters, &unused));
        GR_TRY(append_floats(plan, w->rolling_variance, filters, &unused));
    }
    return GR_OK;
}

static gr_precision layer_precision(const gr_plan_options *opt, int layer, int kind)
{
    if (fp32_only(kind))
        return GR_PREC_FP32;
    if (opt->layer_precision && layer >= 0 && layer < opt->n_layer_precision)
        return opt->layer_precision[layer];
    return opt->precision;
}

/* Output layers: with decode_heads the region/yolo layers; else the layers feeding them; with no
 * head at all, the last layer. */
static int find_outputs(const gr_net *net, int decode_heads, int *out, int max)
{
    int n = 0;
    for (int i = 0; i < net->n_layers && n < max; i++) {
        if (!is_head_decoder(net->layers[i].p.op))
            continue;
        out[n++] = decode_heads ? i : net->layers[i].inputs[0];
    }
    if (n == 0 && net->n_layers > 0)
        out[n++] = net->n_layers - 1;
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
        if ((unsigned)l->p.op >= GR_OP_COUNT || l->p.op == GR_OP_QUANTIZE ||
            l->p.op == GR_OP_DEQUANTIZE)
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

    int n_out = find_outputs(net, opt->decode_heads, outputs, net->n_layers);
    for (int k = 0; k < n_out; k++)
        is_output[outputs[k]] = 1;
    plan->output_tensors = gr_calloc((size_t)n_out, sizeof *plan->output_tensors, "outputs");
    if (!plan->output_tensors) {
        st = GR_ERR_OUT_OF_MEMORY;
        goto done;
    }
    plan->n_outputs = n_out;

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
        if (l->p.op == GR_OP_CONV || l->p.op == GR_OP_CONNECTED) {
            st = copy_layer_weights(plan, nd, l, i);
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

/* ---- batch norm folding ------------------------------------------------------------------ */

gr_status gr_pass_fold_bn(gr_plan *plan)
{
    for (int i = 0; i < plan->n_nodes; i++) {
        gr_plan_node *nd = &plan->nodes[i];
        if (nd->kind != GR_OP_CONV || !nd->p.batch_normalize)
            continue;
        int filters = nd->p.filters;
        size_t per_filter = nd->n_w / (size_t)filters;
        float *w = plan->weights + nd->w_offset;
        float *b = plan->weights + nd->b_offset;
        const float *scales = plan->weights + nd->bn_offset;
        const float *mean = scales + filters;
        const float *var = mean + filters;
        for (int c = 0; c < filters; c++) {
            /* Darknet: (x - mean) / (sqrt(var) + 0.000001) * scale + bias, in double. */
            double factor = (double)scales[c] / (sqrt((double)var[c]) + (double)GR_BN_EPSILON);
            for (size_t k = 0; k < per_filter; k++)
                w[(size_t)c * per_filter + k] =
                    (float)((double)w[(size_t)c * per_filter + k] * factor);
            b[c] = (float)((double)b[c] - (double)mean[c] * factor);
        }
        nd->p.batch_normalize = 0;
        nd->fused |= GR_FUSED_BN;
    }
    return GR_OK;
}

/* ---- maxpool fusion ---------------------------------------------------------------------- */

gr_status gr_pass_fuse_maxpool(gr_plan *plan)
{
    int fused = 0;
    for (int i = 0; i < plan->n_nodes; i++) {
        gr_plan_node *conv = &plan->nodes[i];
        if (conv->kind != GR_OP_CONV || (conv->fused & GR_FUSED_MAXPOOL))
            continue;
        int t = conv->output;
        if (gr_plan_consumers(plan, t) != 1)
            continue;
        int pool = -1;
        for (int j = i + 1; j < plan->n_nodes && pool < 0; j++)
            for (int k = 0; k < plan->nodes[j].n_inputs; k++)
                if (plan->nodes[j].inputs[k] == t)
                    pool = j;
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

/* ---- precision and explicit Q/DQ --------------------------------------------------------- */

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

gr_status gr_pass_precision(gr_plan *plan, gr_precision input_side)
{
    /* Node outputs take their node's precision. */
    for (int i = 0; i < plan->n_nodes; i++) {
        gr_plan_node *nd = &plan->nodes[i];
        if (nd->output < 0)
            continue;
        if (nd->kind == GR_NODE_INPUT)
            gr_plan_set_dtype(&plan->tensors[nd->output],
                              input_side == GR_PREC_FP32 ? GR_DTYPE_F32 : GR_DTYPE_U8);
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

/* ---- epilogue fusion --------------------------------------------------------------------- */

gr_status gr_pass_fuse_epilogue(gr_plan *plan)
{
    for (int i = 0; i < plan->n_nodes; i++) {
        gr_plan_node *nd = &plan->nodes[i];
        if (nd->kind == GR_OP_CONV || nd->kind == GR_OP_CONNECTED) {
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

/* ---- int8 weights ------------------------------------------------------------------------ */

gr_status gr_pass_quantize_weights(gr_plan *plan)
{
    for (int i = 0; i < plan->n_nodes; i++) {
        gr_plan_node *nd = &plan->nodes[i];
        if (nd->kind != GR_OP_CONV || plan->tensors[nd->inputs[0]].dtype != GR_DTYPE_I8)
            continue;
        int filters = nd->p.filters;
        size_t per_filter = nd->n_w / (size_t)filters;
        GR_TRY(append_floats(plan, NULL, (size_t)filters, &nd->ws_offset));
        size_t total;
        if (!gr_add_size(plan->n_qweights, nd->n_w, &total))
            return gr_fail(GR_ERR_LIMIT, "planner: int8 weight block size overflow");
        int8_t *grown = realloc(plan->qweights, total ? total : 1);
        if (!grown)
            return gr_fail(GR_ERR_OUT_OF_MEMORY, "planner: out of memory quantizing weights");
        plan->qweights = grown;
        nd->qw_offset = plan->n_qweights;
        plan->n_qweights = total;
        const float *w = plan->weights + nd->w_offset;
        float *ws = plan->weights + nd->ws_offset;
        int8_t *q = plan->qweights + nd->qw_offset;
        for (int c = 0; c < filters; c++) {
            const float *wc = w + (size_t)c * per_filter;
            float max_abs = 0.0f;
            for (size_t k = 0; k < per_filter; k++)
                max_abs = fmaxf(max_abs, fabsf(wc[k]));
            float s = max_abs > 0.0f ? max_abs / 127.0f : 1.0f;
            ws[c] = s;
            for (size_t k = 0; k < per_filter; k++) {
                float r = rintf(wc[k] / s);
                r = r > 127.0f ? 127.0f : (r < -127.0f ? -127.0f : r);
                q[(size_t)c * per_filter + k] = (int8_t)r;
            }
        }
    }
    return GR_OK;
}

/* ---- concatenation without a copy -------------------------------------------------------- */

static int has_views(const gr_plan *plan, int t)
{
    for (int u = 0; u < plan->n_tensors; u++)
        if (plan->tensors[u].view_of == t)
            return 1;
    return 0;
}

/* The network input and the tensors output nodes read keep their own storage. */
static int is_plan_io(const gr_plan *plan, int t)
{
    if (t == plan->input_tensor)
        return 1;
    for (int i = 0; i < plan->n_nodes; i++)
        if (plan->nodes[i].kind == GR_NODE_OUTPUT && plan->nodes[i].inputs[0] == t)
            return 1;
    return 0;
}

/* Make tensor t (and the views it hosts) a slice of parent at channel offset. */
static void make_slice(gr_plan *plan, int t, int parent, int offset)
{
    const gr_plan_tensor *p = &plan->tensors[parent];
    for (int u = 0; u < plan->n_tensors; u++) {
        gr_plan_tensor *x = &plan->tensors[u];
        if (x->view_of == t) {
            x->view_of = parent;
            x->c_offset += offset;
            x->c_stride = p->c_stride;
        }
    }
    gr_plan_tensor *x = &plan->tensors[t];
    x->view_of = parent;
    x->c_offset = offset;
    x->c_stride = p->c_stride;
}

gr_status gr_pass_concat_views(gr_plan *plan, int nchw_strided_views)
{
    for (int i = 0; i < plan->n_nodes; i++) {
        gr_plan_node *nd = &plan->nodes[i];
        if (nd->kind != GR_OP_ROUTE || nd->p.groups > 1)
            continue;
        int out = nd->output;
        gr_plan_tensor *o = &plan->tensors[out];
        if (o->view_of >= 0 || is_plan_io(plan, out))
            continue;
        if (nd->n_inputs == 1) {
            /* A one-input route is the same tensor: read it through a view. */
            int src = nd->inputs[0];
            const gr_plan_tensor *s = &plan->tensors[src];
            if (s->dtype != o->dtype || s->c_pad != o->c_pad || has_views(plan, out))
                continue;
            int root = s->view_of >= 0 ? s->view_of : src;
            int offset = s->view_of >= 0 ? s->c_offset : 0;
            o->view_of = root;
            o->c_offset = offset;
            o->c_stride = plan->tensors[root].c_stride;
            nd->noop = 1;
            continue;
        }
        /* A channel slice of an NCHW tensor is dense only for one image. */
        int ok = o->layout != GR_LAYOUT_NCHW || o->n == 1 || nchw_strided_views;
        int granule = channel_granule(o->dtype);
        for (int k = 0; k < nd->n_inputs && ok; k++) {
            int src = nd->inputs[k];
            const gr_plan_tensor *s = &plan->tensors[src];
            const gr_plan_node *prod = &plan->nodes[s->producer];
            ok = s->dtype == o->dtype && s->view_of < 0 && !is_plan_io(plan, src) &&
                 prod->kind != GR_NODE_INPUT && (k == nd->n_inputs - 1 || s->c % granule == 0);
            for (int j = 0; j < k && ok; j++)
                ok = nd->inputs[j] != src;
        }
        if (!ok)
            continue;
        int offset = 0;
        for (int k = 0; k < nd->n_inputs; k++) {
            make_slice(plan, nd->inputs[k], out, offset);
            offset += plan->tensors[nd->inputs[k]].c;
        }
        nd->noop = 1;
    }
    return GR_OK;
}
