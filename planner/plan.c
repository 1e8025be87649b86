/* The plan as a data structure: options, allocation and release, adding nodes and tensors,
 * dtypes and layouts of a tensor, compaction after a pass removes nodes, consumers and storage
 * roots, the weight block, names for views, and the int8 scale table (ranges -> per-tensor
 * scales, unified where stored values are shared). The passes (planner/passes.h) and the pipeline
 * that runs them (planner/pipeline.c) are built on this file; it calls none of them. */
#include <stdlib.h>
#include <string.h>

#include "planner/passes.h"

void gr_plan_options_default(gr_plan_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->precision = GR_PREC_FP32;
    opt->batch = 1;
    opt->fold_bn = 1;
    opt->fuse_maxpool = 0;
    opt->fuse_input_quantize = 0;
    opt->fuse_output_dequantize = 0;
    opt->concat_in_place = 1;
    opt->in_place = 1;
    opt->single_stream = 0;
    opt->max_streams = 0;
    opt->decode_heads = 0;
    opt->input_u8 = -1;
    opt->weight_data = 1;
}

static int round_up_int(int x, int m) { return (x + m - 1) / m * m; }

int gr_plan_channel_granule(gr_dtype dtype)
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
        t->c_pad = round_up_int(t->c, gr_plan_channel_granule(dtype));
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

gr_status gr_plan_reserve_floats(gr_plan *plan, size_t count)
{
    size_t total;
    if (!gr_add_size(plan->n_weight_floats, count, &total) || total > SIZE_MAX / sizeof(float))
        return gr_fail(GR_ERR_LIMIT, "planner: weight block size overflow");
    if (total <= plan->weight_capacity || !plan->options.weight_data)
        return GR_OK;
    float *grown = realloc(plan->weights, (total ? total : 1) * sizeof *grown);
    if (!grown)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "planner: out of memory for %zu weights", total);
    plan->weights = grown;
    plan->weight_capacity = total;
    return GR_OK;
}

gr_status gr_plan_append_floats(gr_plan *plan, const float *src, size_t count, size_t *offset)
{
    if (!plan->options.weight_data) { /* where the floats would be, nothing stored */
        size_t total;
        if (!gr_add_size(plan->n_weight_floats, count, &total) || total > SIZE_MAX / sizeof(float))
            return gr_fail(GR_ERR_LIMIT, "planner: weight block size overflow");
        *offset = plan->n_weight_floats;
        plan->n_weight_floats = total;
        return GR_OK;
    }
    if (count > plan->weight_capacity - plan->n_weight_floats) {
        /* past the reservation: grow by half again, so that n appends cost O(n) copies */
        size_t more = count > plan->weight_capacity / 2 ? count : plan->weight_capacity / 2;
        GR_TRY(gr_plan_reserve_floats(plan, more));
    }
    if (src)
        memcpy(plan->weights + plan->n_weight_floats, src, count * sizeof *src);
    else
        memset(plan->weights + plan->n_weight_floats, 0, count * sizeof *plan->weights);
    *offset = plan->n_weight_floats;
    plan->n_weight_floats += count;
    return GR_OK;
}

int gr_plan_may_fuse(const gr_plan *plan, const gr_plan_node *conv)
{
    const gr_plan_options *o = &plan->options;
    return !(o->no_fuse_layer && conv->layer >= 0 && conv->layer < o->n_no_fuse_layer &&
             o->no_fuse_layer[conv->layer]);
}

int gr_plan_sole_consumer(const gr_plan *plan, int t)
{
    int found = -1;
    for (int i = 0; i < plan->n_nodes; i++)
        for (int k = 0; k < plan->nodes[i].n_inputs; k++) {
            if (plan->nodes[i].inputs[k] != t)
                continue;
            if (found >= 0)
                return -1;
            found = i;
        }
    return found;
}

gr_dtype gr_plan_conv_in_dtype(const gr_plan *plan, const gr_plan_node *nd)
{
    if (nd->fused & GR_FUSED_QUANTIZE_IN)
        return nd->in_dtype;
    return plan->tensors[nd->inputs[0]].dtype;
}

float gr_plan_conv_in_scale(const gr_plan *plan, const gr_plan_node *nd)
{
    if (nd->fused & GR_FUSED_QUANTIZE_IN)
        return nd->in_scale;
    return plan->tensors[nd->inputs[0]].scale;
}

void gr_plan_free(gr_plan *plan)
{
    if (!plan)
        return;
    free(plan->nodes);
    free(plan->tensors);
    free(plan->buffers);
    free(plan->output_tensors);
    free(plan->weights);
    free(plan->qweights);
    free(plan->waits);
    free(plan->order);
    free(plan);
}

const char *gr_plan_kind_name(int kind)
{
    if (kind >= 0 && kind < GR_OP_COUNT) {
        static const char *const names[] = {
#define GR_OP(e, stem, section, flags) #stem,
#include "ops/ops.def"
#undef GR_OP
        };
        return names[kind];
    }
    switch (kind) {
    case GR_NODE_INPUT: return "input";
    case GR_NODE_OUTPUT: return "output";
    case GR_NODE_CONVERT: return "convert";
    default: return "?";
    }
}

const char *gr_plan_fused_str(const gr_plan_node *node, char *buf, size_t len)
{
    static const struct {
        unsigned bit;
        const char *name;
    } parts[] = {{GR_FUSED_QUANTIZE_IN, "quant-in"}, {GR_FUSED_BN, "bn"},
                 {GR_FUSED_BIAS, "bias"},            {GR_FUSED_ACT, NULL},
                 {GR_FUSED_MAXPOOL, "maxpool"},      {GR_FUSED_REQUANT, "requant"},
                 {GR_FUSED_CONVERT, "f16"},          {GR_FUSED_DEQUANT_OUT, "dequant-out"}};
    size_t used = 0;
    if (len == 0)
        return buf;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (!(node->fused & parts[i].bit))
            continue;
        const char *name = parts[i].name ? parts[i].name : gr_activation_name(node->p.activation);
        size_t need = strlen(name) + (used ? 1 : 0);
        if (used + need + 1 > len)
            break;
        if (used)
            buf[used++] = '+';
        memcpy(buf + used, name, strlen(name) + 1);
        used += strlen(name);
    }
    if (used == 0 && len > 1) {
        buf[0] = '-';
        buf[1] = '\0';
    }
    return buf;
}

int gr_plan_count_kind(const gr_plan *plan, int kind)
{
    int count = 0;
    for (int i = 0; plan && i < plan->n_nodes; i++)
        count += plan->nodes[i].kind == kind;
    return count;
}

/* ---- scales ------------------------------------------------------------------------------ */

static int find_set(int *parent, int x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

static void join_sets(int *parent, int a, int b)
{
    a = find_set(parent, a);
    b = find_set(parent, b);
    if (a != b)
        parent[a < b ? b : a] = a < b ? a : b;
}

gr_status gr_plan_set_ranges(gr_plan *plan, const float *layer_range, float input_range)
{
    if (!plan || !layer_range)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_set_ranges: NULL argument");
    int n = plan->n_tensors;
    int *parent = gr_malloc((size_t)n * sizeof *parent + 1, "scale groups");
    float *range = gr_calloc((size_t)n + 1, sizeof *range, "scale groups");
    if (!parent || !range) {
        free(parent);
        free(range);
        return GR_ERR_OUT_OF_MEMORY;
    }
    for (int t = 0; t < n; t++)
        parent[t] = t;
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        if (!gr_op_has(nd->kind, GR_OPF_STORED_VALUES))
            continue;
        for (int k = 0; k < nd->n_inputs; k++)
            join_sets(parent, nd->output, nd->inputs[k]);
    }
    for (int t = 0; t < n; t++)
        if (plan->tensors[t].view_of >= 0)
            join_sets(parent, t, plan->tensors[t].view_of);
    for (int t = 0; t < n; t++) {
        int layer = plan->tensors[t].layer;
        float r = layer < 0 ? input_range : (layer < plan->n_layers ? layer_range[layer] : 0.0f);
        int g = find_set(parent, t);
        if (r > range[g])
            range[g] = r;
    }
    for (int t = 0; t < n; t++) {
        float r = range[find_set(parent, t)];
        plan->tensors[t].scale =
            plan->tensors[t].dtype == GR_DTYPE_I8 ? (r > 0.0f ? r / 127.0f : 1.0f / 127.0f) : 0.0f;
    }
    /* A conv reading the u8 input directly applies the scale its removed quantize had: that
     * tensor held the network input's values and shared them with nothing. */
    for (int i = 0; i < plan->n_nodes; i++) {
        gr_plan_node *nd = &plan->nodes[i];
        if ((nd->fused & GR_FUSED_QUANTIZE_IN) && nd->in_dtype == GR_DTYPE_I8)
            nd->in_scale = input_range > 0.0f ? input_range / 127.0f : 1.0f / 127.0f;
    }
    free(parent);
    free(range);
    plan->scales_ready = 1;
    return GR_OK;
}
