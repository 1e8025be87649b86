/* gr_plan_build: runs the passes in order (planner/passes.h), plus the plan's small utilities and
 * the int8 scale table (ranges -> per-tensor scales, unified where stored values are shared). */
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
    opt->concat_in_place = 1;
    opt->in_place = 1;
    opt->single_stream = 0;
    opt->decode_heads = 0;
    opt->input_u8 = -1;
}

/* The precision whose input dtype the network input takes (gr_pass_precision: fp32 -> f32 NCHW,
 * otherwise u8 NHWC). */
static gr_precision input_side(const gr_plan_options *opt)
{
    if (opt->input_u8 < 0)
        return opt->precision;
    return opt->input_u8 ? GR_PREC_INT8 : GR_PREC_FP32;
}

gr_status gr_plan_build(const gr_net *net, const gr_plan_options *opt, gr_plan **out)
{
    if (!out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_build: NULL output");
    *out = NULL;
    gr_plan *plan = NULL;
    GR_TRY(gr_pass_build_dag(net, opt, &plan));
    gr_status st = gr_pass_dead_nodes(plan);
    if (st == GR_OK && opt->fold_bn)
        st = gr_pass_fold_bn(plan);
    if (st == GR_OK && opt->fuse_maxpool)
        st = gr_pass_fuse_maxpool(plan);
    if (st == GR_OK)
        st = gr_pass_precision(plan, input_side(opt));
    if (st == GR_OK)
        st = gr_pass_fuse_epilogue(plan);
    if (st == GR_OK)
        st = gr_pass_quantize_weights(plan);
    if (st == GR_OK && opt->concat_in_place)
        st = gr_pass_concat_views(plan, opt->nchw_strided_views);
    if (st == GR_OK)
        st = gr_pass_streams(plan, opt->single_stream);
    if (st == GR_OK)
        st = gr_pass_memory(plan, opt->in_place);
    if (st == GR_OK) {
        /* i8 tensors have no scale until calibration or gr_plan_set_ranges. */
        plan->scales_ready = 1;
        for (int t = 0; t < plan->n_tensors; t++)
            if (plan->tensors[t].dtype == GR_DTYPE_I8)
                plan->scales_ready = 0;
    }
    if (st != GR_OK) {
        gr_plan_free(plan);
        return st;
    }
    *out = plan;
    return GR_OK;
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
#define GR_OP(e, stem, section) #stem,
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
    } parts[] = {{GR_FUSED_BN, "bn"},           {GR_FUSED_BIAS, "bias"},
                 {GR_FUSED_ACT, NULL},          {GR_FUSED_MAXPOOL, "maxpool"},
                 {GR_FUSED_REQUANT, "requant"}, {GR_FUSED_CONVERT, "f16"}};
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

/* Ops whose output holds the input's stored values (copies, max): one scale for both. */
static int shares_stored_values(int kind)
{
    return kind == GR_OP_MAXPOOL || kind == GR_OP_UPSAMPLE || kind == GR_OP_REORG ||
           kind == GR_OP_ROUTE;
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
        if (!shares_stored_values(nd->kind))
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
    free(parent);
    free(range);
    plan->scales_ready = 1;
    return GR_OK;
}
