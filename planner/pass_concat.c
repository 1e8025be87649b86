/* Concatenation without a copy: a route's inputs write straight into their channel slice of the
 * route's tensor and the route becomes a no-op (a one-input route is a view of its input, a
 * one-input [route] groups=G group_id=k a view of its channel slice k), where the layouts allow it
 * (docs/planner.md lists the conditions). */
#include "planner/passes.h"

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

/* Do t's readers all address their input through c_offset / c_stride? The heads' kernels read a
 * dense tensor (no view); the plan's outputs keep their own storage anyway. */
static int readers_take_views(const gr_plan *plan, int t)
{
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        for (int k = 0; k < nd->n_inputs; k++)
            if (nd->inputs[k] == t && (nd->kind == GR_NODE_OUTPUT || gr_op_has(nd->kind, GR_OPF_HEAD)))
                return 0;
    }
    return 1;
}

/* A one-input [route] groups=G group_id=k is channels [k*C/G, (k+1)*C/G) of its input: a view
 * where the slice starts and ends on the dtype's channel granule (so its padding is its own: none)
 * and is addressable as one - NHWC, or NCHW for one image (or strided views allowed). */
static void group_view(gr_plan *plan, gr_plan_node *nd)
{
    const int src = nd->inputs[0], out = nd->output;
    const gr_plan_tensor *s = &plan->tensors[src];
    gr_plan_tensor *o = &plan->tensors[out];
    const int width = o->c, granule = gr_plan_channel_granule(o->dtype);
    const int dense = o->layout == GR_LAYOUT_NHWC || o->n == 1 || plan->options.nchw_strided_views;
    if (nd->n_inputs != 1 || !dense || s->dtype != o->dtype || s->layout != o->layout ||
        width % granule != 0 || width * nd->p.groups != s->c || src == plan->input_tensor ||
        has_views(plan, out) || !readers_take_views(plan, out))
        return;
    const int root = s->view_of >= 0 ? s->view_of : src;
    o->view_of = root;
    o->c_offset = (s->view_of >= 0 ? s->c_offset : 0) + nd->p.group_id * width;
    o->c_stride = plan->tensors[root].c_stride;
    nd->noop = 1;
}

/* Inputs k, k+1, ... of route nd that are views of one root tensor, at channel offsets 0, c0,
 * c0 + c1, ... of it, up to all its channels: true with the root in *root, the input after the
 * run in *next and the run's channels in *width; false when the views leave a gap, overlap or
 * do not reach the root's end (the root cannot be one slice of the concat then). */
static int whole_run(const gr_plan *plan, const gr_plan_node *nd, int k, int *root, int *next,
                     int *width)
{
    const int r = plan->tensors[nd->inputs[k]].view_of;
    int covered = 0, j = k;
    for (; j < nd->n_inputs; j++) {
        const gr_plan_tensor *v = &plan->tensors[nd->inputs[j]];
        if (v->view_of != r || v->c_offset != covered)
            break;
        covered += v->c;
    }
    if (covered != plan->tensors[r].c || plan->tensors[r].c_pad != plan->tensors[r].c)
        return 0;
    *root = r;
    *next = j;
    *width = covered;
    return 1;
}

gr_status gr_pass_concat_views(gr_plan *plan)
{
    int nchw_strided_views = plan->options.nchw_strided_views;
    for (int i = 0; i < plan->n_nodes; i++) {
        gr_plan_node *nd = &plan->nodes[i];
        /* a no-op already: a concat whose convs write the f32 slices themselves (pass_fuse.c) */
        if (nd->kind != GR_OP_ROUTE || nd->noop)
            continue;
        int out = nd->output;
        gr_plan_tensor *o = &plan->tensors[out];
        if (o->view_of >= 0 || is_plan_io(plan, out))
            continue;
        if (nd->p.groups > 1) {
            group_view(plan, nd);
            continue;
        }
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
        int granule = gr_plan_channel_granule(o->dtype);
        /* The tensors that become slices: each input, or, for a run of inputs that are views of
         * one tensor covering all its channels in order (a C2f block's two halves of one conv
         * output, then its bottlenecks), that tensor once. at[m] is its channel offset. */
        int slices[GR_MAX_INPUTS], at[GR_MAX_INPUTS], n_slices = 0, offset = 0;
        for (int k = 0; k < nd->n_inputs && ok;) {
            int src = nd->inputs[k], width = plan->tensors[src].c, next = k + 1;
            if (plan->tensors[src].view_of >= 0)
                ok = whole_run(plan, nd, k, &src, &next, &width);
            const gr_plan_tensor *s = &plan->tensors[src];
            ok = ok && s->dtype == o->dtype && s->view_of < 0 && !is_plan_io(plan, src) &&
                 plan->nodes[s->producer].kind != GR_NODE_INPUT &&
                 (next == nd->n_inputs || s->c % granule == 0);
            for (int j = 0; j < n_slices && ok; j++)
                ok = slices[j] != src;
            slices[n_slices] = src;
            at[n_slices++] = offset;
            offset += width;
            k = next;
        }
        if (!ok)
            continue;
        for (int m = 0; m < n_slices; m++)
            make_slice(plan, slices[m], out, at[m]);
        nd->noop = 1;
    }
    return GR_OK;
}
