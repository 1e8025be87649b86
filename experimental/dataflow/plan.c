/* The dataflow program (experimental/dataflow/plan.h): which plan nodes the persistent kernel
 * runs, and the flattening of a plan plus its task graph into one pointer-free block. Plain C, no
 * CUDA. */
#include "experimental/dataflow/plan.h"

#include <stdlib.h>
#include <string.h>

#include "planner/passes.h"

void gr_df_options_default(gr_df_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->timeout_ns = 200ull * 1000 * 1000;
}

const char *gr_df_op_name(int op)
{
    static const char *const names[GR_DF_OP_COUNT] = {"conv", "maxpool", "upsample", "copy",
                                                      "convert"};
    return op >= 0 && op < GR_DF_OP_COUNT ? names[op] : "?";
}

/* ---- what the kernel runs ----------------------------------------------------------------- */

static int has_tasks(const gr_plan_node *nd)
{
    return nd->output >= 0 && !nd->noop && nd->kind != GR_NODE_INPUT &&
           nd->kind != GR_NODE_OUTPUT;
}

static int nhwc_of(const gr_plan_tensor *t, gr_dtype dtype)
{
    return t->dtype == dtype && t->layout == GR_LAYOUT_NHWC;
}

static int stored_nhwc(const gr_plan_tensor *t)
{
    return nhwc_of(t, GR_DTYPE_I8) || nhwc_of(t, GR_DTYPE_F16);
}

static gr_status refuse(const gr_plan *plan, int i, const char *why)
{
    return gr_fail(GR_ERR_UNSUPPORTED, "unsupported: %s (node %d%s%s)",
                   gr_plan_kind_name(plan->nodes[i].kind), i, why ? ", " : "", why ? why : "");
}

static gr_status conv_supported(const gr_plan *plan, int i)
{
    const gr_plan_node *nd = &plan->nodes[i];
    const gr_plan_tensor *x = &plan->tensors[nd->inputs[0]], *y = &plan->tensors[nd->output];
    const gr_dtype compute = gr_plan_conv_in_dtype(plan, nd);
    if (compute != GR_DTYPE_I8 && compute != GR_DTYPE_F16)
        return refuse(plan, i, "computes in fp32");
    if ((nd->p.groups > 1) || gr_conv_dilation(&nd->p) > 1 || gr_conv_stride_y(&nd->p) != nd->p.stride)
        return refuse(plan, i, "groups, dilation or an own vertical stride");
    if (nd->fused & GR_FUSED_QUANTIZE_IN) {
        if (x->dtype != GR_DTYPE_U8 || x->c > 4 || x->layout != GR_LAYOUT_NHWC)
            return refuse(plan, i, "fused input quantize of other than u8 NHWC with <= 4 channels");
    } else if (!nhwc_of(x, compute)) {
        return refuse(plan, i, "input not in its compute dtype, NHWC");
    }
    if (nd->fused & GR_FUSED_DEQUANT_OUT) {
        if (y->dtype != GR_DTYPE_F32 || y->layout != GR_LAYOUT_NCHW ||
            (y->n > 1 && y->c_stride != y->c))
            return refuse(plan, i, "fused dequantize into other than dense f32 NCHW");
    } else if (!stored_nhwc(y)) {
        return refuse(plan, i, "output not i8 / f16 NHWC");
    }
    if ((nd->fused & GR_FUSED_MAXPOOL) &&
        (nd->pool_size != 2 || nd->pool_stride < 1 || nd->pool_stride > 2 || nd->pool_pad < 0 ||
         nd->pool_pad > 2 || (nd->fused & GR_FUSED_DEQUANT_OUT)))
        return refuse(plan, i, "fused maxpool other than 2x2, stride 1 or 2");
    if (nd->p.size < 1 || nd->p.size > 7 || nd->p.stride < 1 || nd->p.stride > 4)
        return refuse(plan, i, "kernel larger than 7 or stride above 4");
    return GR_OK;
}

static gr_status node_supported(const gr_plan *plan, int i)
{
    const gr_plan_node *nd = &plan->nodes[i];
    if (!has_tasks(nd))
        return GR_OK;
    const gr_plan_tensor *x = &plan->tensors[nd->inputs[0]], *y = &plan->tensors[nd->output];
    switch (nd->kind) {
    case GR_OP_CONV: return conv_supported(plan, i);
    case GR_OP_MAXPOOL:
    case GR_OP_UPSAMPLE:
        if (!stored_nhwc(y) || x->dtype != y->dtype || x->layout != y->layout)
            return refuse(plan, i, "not i8 / f16 NHWC in and out");
        if (nd->kind == GR_OP_MAXPOOL && (nd->p.size < 1 || nd->p.stride < 1))
            return refuse(plan, i, "empty window");
        if (nd->kind == GR_OP_UPSAMPLE && nd->p.stride < 1)
            return refuse(plan, i, "reverse upsample (stride < 1)");
        return GR_OK;
    case GR_OP_ROUTE:
        if (nd->p.groups > 1 || nd->n_inputs > GR_DF_MAX_INPUTS || !stored_nhwc(y))
            return refuse(plan, i, "route with groups, too many inputs or not i8 / f16 NHWC");
        for (int k = 0; k < nd->n_inputs; k++)
            if (!nhwc_of(&plan->tensors[nd->inputs[k]], y->dtype))
                return refuse(plan, i, "route inputs of another dtype");
        return GR_OK;
    case GR_OP_QUANTIZE:
        if (x->dtype == GR_DTYPE_U8 && stored_nhwc(y) && x->c <= 4)
            return GR_OK;
        return refuse(plan, i, "quantize from other than the u8 input");
    case GR_OP_DEQUANTIZE:
        if (stored_nhwc(x) && y->dtype == GR_DTYPE_F32 && y->layout == GR_LAYOUT_NCHW &&
            y->c_stride == y->c && y->c_offset == 0)
            return GR_OK;
        return refuse(plan, i, "dequantize into other than dense f32 NCHW");
    default: return refuse(plan, i, NULL);
    }
}

gr_status gr_df_plan_supported(const gr_plan *plan)
{
    if (!plan)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_df_plan_supported: NULL plan");
    if (plan->n_outputs > GR_DF_MAX_OUTPUTS)
        return gr_fail(GR_ERR_UNSUPPORTED, "unsupported: %d outputs (at most %d)", plan->n_outputs,
                       GR_DF_MAX_OUTPUTS);
    for (int i = 0; i < plan->n_nodes; i++)
        GR_TRY(node_supported(plan, i));
    return GR_OK;
}

/* ---- flattening --------------------------------------------------------------------------- */

static int output_index(const gr_plan *plan, int tensor)
{
    for (int k = 0; k < plan->n_outputs; k++)
        if (plan->output_tensors[k] == tensor)
            return k;
    return -1;
}

/* Where the runtime keeps tensor t (runtime/gpu/dispatch.c's gr_gpu_tensor_storage): the input
 * and the outputs in the io block, everything else at its buffer's arena offset. */
static gr_df_view view_of(const gr_plan *plan, int t)
{
    const gr_plan_tensor *x = &plan->tensors[t];
    const int root = x->view_of >= 0 ? x->view_of : t;
    gr_df_view v;
    memset(&v, 0, sizeof v);
    const int k = output_index(plan, root);
    if (root == plan->input_tensor) {
        v.space = GR_DF_SPACE_INPUT;
    } else if (k >= 0) {
        v.space = GR_DF_SPACE_OUTPUT + k;
    } else {
        v.space = GR_DF_SPACE_ARENA;
        v.offset = plan->buffers[x->buffer].offset;
    }
    v.dtype = (int32_t)x->dtype;
    v.layout = x->layout == GR_LAYOUT_NHWC;
    v.n = x->n, v.c = x->c, v.h = x->h, v.w = x->w;
    v.c_pad = x->c_pad;
    v.c_stride = x->c_stride;
    v.c_offset = x->c_offset;
    v.scale = x->scale;
    v.tensor = t;
    return v;
}

static void fill_node(const gr_plan *plan, int i, gr_df_node *dn)
{
    const gr_plan_node *nd = &plan->nodes[i];
    memset(dn, 0, sizeof *dn);
    dn->plan_node = i;
    dn->layer = nd->layer;
    dn->n_inputs = nd->n_inputs;
    for (int k = 0; k < nd->n_inputs; k++)
        dn->in[k] = view_of(plan, nd->inputs[k]);
    dn->out = view_of(plan, nd->output);
    dn->w_offset = dn->mul_offset = dn->bias_offset = GR_DF_UNBOUND;
    dn->out_inv_scale = dn->out.dtype == GR_DTYPE_I8 ? 1.0f / dn->out.scale : 1.0f;
    switch (nd->kind) {
    case GR_OP_CONV: {
        const gr_dtype compute = gr_plan_conv_in_dtype(plan, nd);
        const gr_plan_tensor *x = &plan->tensors[nd->inputs[0]];
        const int granule = gr_plan_channel_granule(compute);
        dn->op = GR_DF_OP_CONV;
        dn->flags = (compute == GR_DTYPE_I8 ? GR_DF_CONV_I8 : 0) |
                    (nd->fused & GR_FUSED_QUANTIZE_IN ? GR_DF_CONV_QUANTIZE_IN : 0) |
                    (nd->fused & GR_FUSED_MAXPOOL ? GR_DF_CONV_POOL : 0) |
                    (nd->fused & GR_FUSED_DEQUANT_OUT ? GR_DF_CONV_DEQUANT_OUT : 0);
        dn->ksize = nd->p.size;
        dn->stride = nd->p.stride;
        dn->pad = nd->p.pad;
        dn->activation = (int32_t)nd->p.activation;
        dn->cin_pad = (x->c + granule - 1) / granule * granule;
        dn->k_bytes = dn->ksize * dn->ksize * dn->cin_pad * (int32_t)gr_dtype_size(compute);
        dn->conv_h = (x->h + 2 * nd->p.pad - nd->p.size) / nd->p.stride + 1;
        dn->conv_w = (x->w + 2 * nd->p.pad - nd->p.size) / nd->p.stride + 1;
        if (nd->fused & GR_FUSED_MAXPOOL) {
            dn->pool_size = nd->pool_size;
            dn->pool_stride = nd->pool_stride;
            dn->pool_offset = -nd->pool_pad / 2;
        }
        dn->in_scale = nd->fused & GR_FUSED_QUANTIZE_IN ? nd->in_scale : 0.0f;
        break;
    }
    case GR_OP_MAXPOOL:
        dn->op = GR_DF_OP_MAXPOOL;
        dn->pool_size = nd->p.size;
        dn->pool_stride = nd->p.stride;
        dn->pool_offset = -nd->p.pad / 2;
        break;
    case GR_OP_UPSAMPLE:
        dn->op = GR_DF_OP_UPSAMPLE;
        dn->pool_stride = nd->p.stride;
        break;
    case GR_OP_ROUTE: dn->op = GR_DF_OP_COPY; break;
    default: dn->op = GR_DF_OP_CONVERT; break; /* quantize / dequantize (checked supported) */
    }
}

/* Position of each graph task in the static order, and the sections' sizes. */
static size_t align16(size_t x) { return (x + 15) / 16 * 16; }

gr_status gr_df_program_build(const gr_plan *plan, const gr_task_graph *g,
                              const gr_df_options *opt, gr_df_program **out)
{
    if (!plan || !g || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_df_program_build: NULL argument");
    *out = NULL;
    if (g->n_nodes != plan->n_nodes)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_df_program_build: the task graph has %d "
                       "nodes, the plan %d", g->n_nodes, plan->n_nodes);
    GR_TRY(gr_df_plan_supported(plan));
    gr_df_options o;
    gr_df_options_default(&o);
    if (opt)
        o = *opt;
    int n_nodes = 0;
    for (int i = 0; i < plan->n_nodes; i++)
        n_nodes += g->nodes[i].count > 0;
    const size_t nodes_at = align16(sizeof(gr_df_header));
    const size_t tasks_at = align16(nodes_at + (size_t)n_nodes * sizeof(gr_df_node));
    const size_t deps_at = align16(tasks_at + (size_t)g->n_tasks * sizeof(gr_df_task));
    const size_t total = align16(deps_at + (size_t)g->n_deps * sizeof(int32_t));
    gr_df_program *p = gr_calloc(1, sizeof *p, "dataflow program");
    if (!p)
        return GR_ERR_OUT_OF_MEMORY;
    p->blob = gr_calloc(1, total, "dataflow program");
    p->node_of_plan = gr_malloc((size_t)(plan->n_nodes ? plan->n_nodes : 1) * sizeof(int),
                                "dataflow program");
    p->task_of_graph = gr_malloc((size_t)(g->n_tasks ? g->n_tasks : 1) * sizeof(int),
                                 "dataflow program");
    if (!p->blob || !p->node_of_plan || !p->task_of_graph) {
        gr_df_program_free(p);
        return GR_ERR_OUT_OF_MEMORY;
    }
    unsigned char *base = p->blob;
    p->bytes = total;
    p->header = p->blob;
    p->nodes = (gr_df_node *)(void *)(base + nodes_at);
    p->tasks = (gr_df_task *)(void *)(base + tasks_at);
    p->deps = (int32_t *)(void *)(base + deps_at);
    p->n_raw = g->n_raw;
    p->n_war = g->n_war;

    gr_df_header *h = p->header;
    h->magic = GR_DF_MAGIC;
    h->version = GR_DF_VERSION;
    h->n_nodes = n_nodes;
    h->n_tasks = g->n_tasks;
    h->n_deps = g->n_deps;
    h->n_flags = g->n_tasks;
    h->nodes_at = nodes_at;
    h->tasks_at = tasks_at;
    h->deps_at = deps_at;
    h->total_bytes = total;
    h->timeout_ns = o.timeout_ns;
    h->max_fan_in = g->max_fan_in;
    h->n_spaces = 2 + plan->n_outputs;
    h->space_bytes[GR_DF_SPACE_ARENA] = plan->arena_bytes;
    h->space_bytes[GR_DF_SPACE_INPUT] = plan->tensors[plan->input_tensor].bytes;
    for (int k = 0; k < plan->n_outputs; k++)
        h->space_bytes[GR_DF_SPACE_OUTPUT + k] = plan->tensors[plan->output_tensors[k]].bytes;

    int next = 0;
    for (int i = 0; i < plan->n_nodes; i++) {
        p->node_of_plan[i] = -1;
        if (g->nodes[i].count == 0)
            continue;
        p->node_of_plan[i] = next;
        fill_node(plan, i, &p->nodes[next++]);
    }
    for (int pos = 0; pos < g->n_tasks; pos++)
        p->task_of_graph[g->order[pos]] = pos;
    /* Tasks in the static order; each dependency list renamed to positions and sorted (the kernel
     * waits for them in that order: the oldest first). */
    int n_deps = 0;
    for (int pos = 0; pos < g->n_tasks; pos++) {
        const gr_task *t = &g->tasks[g->order[pos]];
        gr_df_task *dt = &p->tasks[pos];
        dt->node = p->node_of_plan[t->node];
        dt->image = t->image;
        dt->row0 = t->row0;
        dt->rows = t->rows;
        dt->ch0 = t->ch0;
        dt->chs = t->chs;
        dt->dep_begin = n_deps;
        dt->n_deps = t->n_deps;
        for (int d = 0; d < t->n_deps; d++) {
            int32_t dep = p->task_of_graph[g->deps[t->dep_begin + d]];
            int k = n_deps + d;
            while (k > n_deps && p->deps[k - 1] > dep) { /* insertion: lists are short */
                p->deps[k] = p->deps[k - 1];
                k--;
            }
            p->deps[k] = dep;
        }
        n_deps += t->n_deps;
    }
    gr_status st = gr_df_program_check(p);
    if (st != GR_OK) {
        gr_df_program_free(p);
        return st;
    }
    *out = p;
    return GR_OK;
}

void gr_df_program_free(gr_df_program *p)
{
    if (!p)
        return;
    free(p->blob);
    free(p->node_of_plan);
    free(p->task_of_graph);
    free(p);
}

gr_status gr_df_program_bind_weights(gr_df_program *p, int plan_node, uint64_t w_offset,
                                     uint64_t mul_offset, uint64_t bias_offset)
{
    for (int i = 0; i < p->header->n_nodes; i++) {
        gr_df_node *dn = &p->nodes[i];
        if (dn->plan_node != plan_node)
            continue;
        if (dn->op != GR_DF_OP_CONV)
            return gr_fail(GR_ERR_INVALID_ARGUMENT, "dataflow program: node %d is a %s, not a "
                           "conv", plan_node, gr_df_op_name(dn->op));
        dn->w_offset = w_offset;
        dn->mul_offset = mul_offset;
        dn->bias_offset = bias_offset;
        return GR_OK;
    }
    return gr_fail(GR_ERR_INVALID_ARGUMENT, "dataflow program: plan node %d has no tasks",
                   plan_node);
}

/* ---- checks ------------------------------------------------------------------------------- */

/* Byte just past the last element of view v (its storage envelope). */
static uint64_t view_end(const gr_df_view *v)
{
    const uint64_t elem = gr_dtype_size((gr_dtype)v->dtype);
    const uint64_t per_image = (uint64_t)v->c_stride * (uint64_t)v->h * (uint64_t)v->w;
    return v->offset + (uint64_t)v->n * per_image * elem;
}

static gr_status check_view(const gr_df_header *h, const gr_df_view *v, int node, const char *what)
{
    if (v->space < 0 || v->space >= h->n_spaces || v->n < 1 || v->h < 1 || v->w < 1 || v->c < 1 ||
        v->c_offset < 0 || v->c_stride < v->c_offset + v->c ||
        (v->layout && v->c_offset + v->c_pad > v->c_stride) || view_end(v) > h->space_bytes[v->space])
        return gr_fail(GR_ERR_INTERNAL, "dataflow program: node %d's %s view (space %d, offset "
                       "%llu) lies outside its space (%llu bytes)", node, what, v->space,
                       (unsigned long long)v->offset,
                       (unsigned long long)(v->space >= 0 && v->space < GR_DF_MAX_SPACES
                                                ? h->space_bytes[v->space] : 0));
    return GR_OK;
}

gr_status gr_df_program_check(const gr_df_program *p)
{
    const gr_df_header *h = p->header;
    if (h->magic != GR_DF_MAGIC || h->version != GR_DF_VERSION || h->n_flags != h->n_tasks ||
        h->deps_at + (uint64_t)h->n_deps * sizeof(int32_t) > h->total_bytes ||
        h->tasks_at + (uint64_t)h->n_tasks * sizeof(gr_df_task) > h->deps_at ||
        h->nodes_at + (uint64_t)h->n_nodes * sizeof(gr_df_node) > h->tasks_at ||
        h->total_bytes != p->bytes || h->n_spaces < 2 || h->n_spaces > GR_DF_MAX_SPACES)
        return gr_fail(GR_ERR_INTERNAL, "dataflow program: header inconsistent");
    for (int i = 0; i < h->n_nodes; i++) {
        const gr_df_node *dn = &p->nodes[i];
        if (dn->op < 0 || dn->op >= GR_DF_OP_COUNT || dn->n_inputs < 1 ||
            dn->n_inputs > GR_DF_MAX_INPUTS)
            return gr_fail(GR_ERR_INTERNAL, "dataflow program: node %d: op %d, %d inputs",
                           dn->plan_node, dn->op, dn->n_inputs);
        for (int k = 0; k < dn->n_inputs; k++)
            GR_TRY(check_view(h, &dn->in[k], dn->plan_node, "input"));
        GR_TRY(check_view(h, &dn->out, dn->plan_node, "output"));
        if (dn->op == GR_DF_OP_CONV && (dn->k_bytes % 16 != 0 || dn->k_bytes <= 0))
            return gr_fail(GR_ERR_INTERNAL, "dataflow program: node %d: filter of %d bytes",
                           dn->plan_node, dn->k_bytes);
    }
    for (int t = 0; t < h->n_tasks; t++) {
        const gr_df_task *dt = &p->tasks[t];
        if (dt->node < 0 || dt->node >= h->n_nodes)
            return gr_fail(GR_ERR_INTERNAL, "dataflow program: task %d: node %d", t, dt->node);
        const gr_df_view *o = &p->nodes[dt->node].out;
        if (dt->image < 0 || dt->image >= o->n || dt->row0 < 0 || dt->rows < 1 ||
            dt->row0 + dt->rows > o->h || dt->ch0 < 0 || dt->chs < 1 || dt->ch0 + dt->chs > o->c)
            return gr_fail(GR_ERR_INTERNAL, "dataflow program: task %d outside its node's "
                           "output", t);
        if (dt->dep_begin < 0 || dt->n_deps < 0 || dt->dep_begin + dt->n_deps > h->n_deps)
            return gr_fail(GR_ERR_INTERNAL, "dataflow program: task %d: dependencies out of "
                           "range", t);
        for (int d = 0; d < dt->n_deps; d++) {
            const int32_t dep = p->deps[dt->dep_begin + d];
            if (dep < 0 || dep >= t || (d > 0 && dep <= p->deps[dt->dep_begin + d - 1]))
                return gr_fail(GR_ERR_INTERNAL, "dataflow program: task %d waits for task %d "
                               "(not an earlier one, or listed twice)", t, dep);
        }
    }
    return GR_OK;
}

gr_status gr_df_program_dump_text(const gr_df_program *p, FILE *f)
{
    const gr_df_header *h = p->header;
    fprintf(f, "dataflow program: %d nodes, %d tasks, %d dependencies (%d RAW, %d WAR/WAW), max "
               "fan-in %d, %zu bytes, wait timeout %.0f ms\n", h->n_nodes, h->n_tasks, h->n_deps,
            p->n_raw, p->n_war, h->max_fan_in, p->bytes, (double)h->timeout_ns / 1e6);
    fprintf(f, " node layer op        tasks  deps  fused\n");
    for (int i = 0; i < h->n_nodes; i++) {
        const gr_df_node *dn = &p->nodes[i];
        int tasks = 0, deps = 0;
        for (int t = 0; t < h->n_tasks; t++)
            if (p->tasks[t].node == i) {
                tasks++;
                deps += p->tasks[t].n_deps;
            }
        fprintf(f, "%5d %5d %-9s %5d %5d  %s%s%s%s\n", dn->plan_node, dn->layer,
                gr_df_op_name(dn->op), tasks, deps,
                dn->op == GR_DF_OP_CONV ? (dn->flags & GR_DF_CONV_I8 ? "int8" : "fp16") : "-",
                dn->flags & GR_DF_CONV_QUANTIZE_IN ? "+quant-in" : "",
                dn->flags & GR_DF_CONV_POOL ? "+maxpool" : "",
                dn->flags & GR_DF_CONV_DEQUANT_OUT ? "+dequant-out" : "");
    }
    return ferror(f) ? gr_fail(GR_ERR_IO, "write error") : GR_OK;
}
