/* The task-graph pass (planner/tasks.h has the model): split every node of a plan into row-band x
 * channel-slice tasks, find each task's RAW and WAR dependencies, and order the tasks
 * topologically by depth. Plain C, no CUDA: the dataflow executor consumes the result. */
#include "planner/tasks.h"

#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

void gr_task_options_default(gr_task_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->target_tasks = 132;
    opt->channel_align = 16;
}

/* Dependencies of the task being built, before sorting: ids and whether each is RAW. */
typedef struct dep_list {
    int *id;
    unsigned char *raw;
    int n, cap;
} dep_list;

typedef struct builder {
    const gr_plan *plan;
    gr_task_graph *g;
    dep_list cur;
    int self;               /* the task whose dependencies are being collected */
    int cap_deps;
} builder;

static int has_tasks(const gr_plan_node *nd)
{
    return nd->output >= 0 && !nd->noop && nd->kind != GR_NODE_INPUT &&
           nd->kind != GR_NODE_OUTPUT;
}

static int div_up(int a, int b) { return (a + b - 1) / b; }

static gr_shape shape_of(const gr_plan_tensor *t) { return (gr_shape){t->c, t->h, t->w}; }

/* How node `nd` is cut: row bands, and channel slices for convs when the bands alone do not
 * reach the target. */
static void split_node(const gr_plan_node *nd, const gr_plan_tensor *out, const gr_task_options *o,
                       gr_task_node *tn)
{
    const int bands_wanted = out->h < o->target_tasks ? out->h : o->target_tasks;
    tn->rows_per_band = div_up(out->h, bands_wanted);
    tn->bands = div_up(out->h, tn->rows_per_band);
    tn->slices = 1;
    tn->channels_per_slice = out->c;
    if (nd->kind == GR_OP_CONV && tn->bands < o->target_tasks) {
        int per = div_up(out->c, div_up(o->target_tasks, tn->bands));
        per = div_up(per, o->channel_align) * o->channel_align;
        tn->channels_per_slice = per < out->c ? per : out->c;
        tn->slices = div_up(out->c, tn->channels_per_slice);
    }
}

static gr_status make_tasks(builder *b)
{
    const gr_plan *plan = b->plan;
    gr_task_graph *g = b->g;
    size_t total = 0;
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        if (!has_tasks(nd))
            continue;
        const gr_plan_tensor *out = &plan->tensors[nd->output];
        split_node(nd, out, &g->options, &g->nodes[i]);
        total += (size_t)out->n * (size_t)g->nodes[i].bands * (size_t)g->nodes[i].slices;
    }
    if (total > (size_t)(1 << 24))
        return gr_fail(GR_ERR_LIMIT, "task graph: %zu tasks (at most %d)", total, 1 << 24);
    g->tasks = gr_calloc(total ? total : 1, sizeof *g->tasks, "task graph tasks");
    if (!g->tasks)
        return GR_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < plan->n_nodes; i++) {
        gr_task_node *tn = &g->nodes[i];
        tn->first = g->n_tasks;
        if (!has_tasks(&plan->nodes[i]))
            continue;
        const gr_plan_tensor *out = &plan->tensors[plan->nodes[i].output];
        for (int im = 0; im < out->n; im++)
            for (int band = 0; band < tn->bands; band++)
                for (int s = 0; s < tn->slices; s++) {
                    gr_task *t = &g->tasks[g->n_tasks++];
                    t->node = i;
                    t->image = im;
                    t->row0 = band * tn->rows_per_band;
                    t->rows = out->h - t->row0 < tn->rows_per_band ? out->h - t->row0
                                                                    : tn->rows_per_band;
                    t->ch0 = s * tn->channels_per_slice;
                    t->chs = out->c - t->ch0 < tn->channels_per_slice ? out->c - t->ch0
                                                                       : tn->channels_per_slice;
                }
        tn->count = g->n_tasks - tn->first;
    }
    return GR_OK;
}

void gr_task_graph_input_rows(const gr_plan *plan, int node, int k, int r0, int r1, int *lo,
                              int *hi)
{
    const gr_plan_node *nd = &plan->nodes[node];
    const gr_plan_tensor *out = &plan->tensors[nd->output];
    if (nd->kind == GR_NODE_CONVERT || nd->kind >= GR_OP_COUNT) {
        const int h = plan->tensors[nd->inputs[k]].h;
        *lo = r0 < h ? r0 : h;
        *hi = r1 < h ? r1 : h;
        return;
    }
    gr_shape in[GR_MAX_INPUTS];
    for (int j = 0; j < nd->n_inputs; j++)
        in[j] = shape_of(&plan->tensors[nd->inputs[j]]);
    gr_shape os = shape_of(out);
    if (nd->fused & GR_FUSED_MAXPOOL) {
        /* The pool's rows over the conv's own (unpooled) output first. */
        gr_op_params pool;
        gr_op_params_default(GR_OP_MAXPOOL, &pool);
        pool.size = nd->pool_size;
        pool.stride = nd->pool_stride;
        pool.pad = nd->pool_pad;
        gr_shape conv_out = os;
        conv_out.h = (in[0].h + 2 * nd->p.pad - nd->p.size) / nd->p.stride + 1;
        gr_op_rows(&pool, &conv_out, 1, os, 0, r0, r1, &r0, &r1);
        os = conv_out;
    }
    gr_op_rows(&nd->p, in, nd->n_inputs, os, k, r0, r1, lo, hi);
}

static gr_status push_dep(builder *b, int id, int raw)
{
    dep_list *d = &b->cur;
    if (b->g->tasks[id].node == b->g->tasks[b->self].node)
        return GR_OK; /* an in-place (elementwise) task reads only the rows it writes: overlaps
                         with its siblings are the NCHW byte envelope's, not real */
    if (d->n == d->cap) {
        int cap = d->cap ? 2 * d->cap : 64;
        int *id2 = realloc(d->id, (size_t)cap * sizeof *id2);
        if (id2)
            d->id = id2;
        unsigned char *raw2 = id2 ? realloc(d->raw, (size_t)cap) : NULL;
        if (!raw2)
            return gr_fail(GR_ERR_OUT_OF_MEMORY, "task graph: out of memory (dependencies)");
        d->raw = raw2;
        d->cap = cap;
    }
    d->id[d->n] = id;
    d->raw[d->n++] = (unsigned char)raw;
    return GR_OK;
}

/* RAW: the tasks writing rows [lo, hi) of tensor t, image im. A node without tasks (a concat
 * written in place) passes the question on to its inputs' writers. */
static gr_status add_writers(builder *b, int t, int im, int lo, int hi)
{
    if (lo >= hi || t < 0)
        return GR_OK;
    const int p = b->plan->tensors[t].producer;
    if (p < 0)
        return GR_OK;
    const gr_plan_node *nd = &b->plan->nodes[p];
    if (!has_tasks(nd)) {
        if (!nd->noop)
            return GR_OK; /* the network input: copied in before the executor starts */
        for (int k = 0; k < nd->n_inputs; k++) {
            int ilo, ihi;
            gr_task_graph_input_rows(b->plan, p, k, lo, hi, &ilo, &ihi);
            GR_TRY(add_writers(b, nd->inputs[k], im, ilo, ihi));
        }
        return GR_OK;
    }
    const gr_task_node *tn = &b->g->nodes[p];
    for (int i = tn->first; i < tn->first + tn->count; i++) {
        const gr_task *w = &b->g->tasks[i];
        if (w->image == im && w->row0 < hi && lo < w->row0 + w->rows)
            GR_TRY(push_dep(b, i, 1));
    }
    return GR_OK;
}

/* The arena bytes [*begin, *end) that rows [r0, r1) of image im of tensor t span (an envelope:
 * NCHW rows of different channels are strided). */
static void row_bytes(const gr_plan *plan, int t, int im, int r0, int r1, size_t *begin,
                      size_t *end)
{
    const gr_plan_tensor *x = &plan->tensors[t];
    const size_t base = plan->buffers[x->buffer].offset, es = gr_dtype_size(x->dtype);
    const size_t w = (size_t)x->w, cs = (size_t)x->c_stride, co = (size_t)x->c_offset;
    size_t first, last; /* element indices, inclusive */
    if (x->layout == GR_LAYOUT_NHWC) {
        first = (((size_t)im * x->h + r0) * w) * cs + co;
        last = (((size_t)im * x->h + r1 - 1) * w + w - 1) * cs + co + (size_t)x->c - 1;
    } else {
        first = (((size_t)im * cs + co) * x->h + r0) * w;
        last = (((size_t)im * cs + co + (size_t)x->c - 1) * x->h + r1 - 1) * w + w - 1;
    }
    *begin = base + first * es;
    *end = base + (last + 1) * es;
}

static int overlaps(size_t a0, size_t a1, size_t b0, size_t b1) { return a0 < b1 && b0 < a1; }

/* Tasks of node r that touch arena bytes [w0, w1) through tensor u: as a reader of input k
 * (k >= 0), or as its writer (k < 0). Any image: the tenants' layouts need not line up. */
static gr_status add_touching(builder *b, int r, int k, int u, size_t w0, size_t w1)
{
    const gr_task_node *tn = &b->g->nodes[r];
    for (int i = tn->first; i < tn->first + tn->count; i++) {
        const gr_task *rt = &b->g->tasks[i];
        int lo = rt->row0, hi = rt->row0 + rt->rows;
        size_t r0, r1;
        if (k >= 0)
            gr_task_graph_input_rows(b->plan, r, k, rt->row0, rt->row0 + rt->rows, &lo, &hi);
        if (lo >= hi)
            continue;
        row_bytes(b->plan, u, rt->image, lo, hi, &r0, &r1);
        if (overlaps(r0, r1, w0, w1))
            GR_TRY(push_dep(b, i, 0));
    }
    return GR_OK;
}

/* WAR and WAW against one earlier tenant u of the bytes [w0, w1): every task reading those bytes
 * of u, and every task writing them (a byte of u that nobody reads is still written, and must
 * not land after the new tenant's value). */
static gr_status add_readers_of(builder *b, int u, size_t w0, size_t w1)
{
    const gr_plan *plan = b->plan;
    const int p = plan->tensors[u].producer;
    if (has_tasks(&plan->nodes[p]))
        GR_TRY(add_touching(b, p, -1, u, w0, w1));
    for (int r = 0; r < plan->n_nodes; r++) {
        const gr_plan_node *nd = &plan->nodes[r];
        if (!has_tasks(nd))
            continue;
        for (int k = 0; k < nd->n_inputs; k++)
            if (nd->inputs[k] == u)
                GR_TRY(add_touching(b, r, k, u, w0, w1));
    }
    return GR_OK;
}

/* Tensors whose storage a write to t's bytes may overwrite: earlier tensors on overlapping arena
 * bytes that are neither t itself nor one of its views. */
static int earlier_tenant(const gr_plan *plan, int t, int u)
{
    const gr_plan_tensor *x = &plan->tensors[t], *y = &plan->tensors[u];
    if (u == t || y->view_of == t || x->view_of == u || y->producer < 0)
        return 0;
    if (x->view_of >= 0 && y->view_of == x->view_of)
        return 0; /* sibling slices of one concat: disjoint channels by construction */
    if (x->inplace_of == u)
        return 1;
    const gr_plan_buffer *bx = &plan->buffers[x->buffer], *by = &plan->buffers[y->buffer];
    if (x->buffer == y->buffer || !overlaps(bx->offset, bx->offset + bx->bytes, by->offset,
                                            by->offset + by->bytes))
        return 0;
    return y->live_end < x->live_begin;
}

static gr_status add_war(builder *b, const gr_task *t)
{
    const gr_plan *plan = b->plan;
    const int out = plan->nodes[t->node].output;
    size_t w0, w1;
    row_bytes(plan, out, t->image, t->row0, t->row0 + t->rows, &w0, &w1);
    for (int u = 0; u < plan->n_tensors; u++)
        if (earlier_tenant(plan, out, u))
            GR_TRY(add_readers_of(b, u, w0, w1));
    return GR_OK;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Sort and deduplicate the current list (a pair that is both RAW and WAR counts as RAW) and
 * append it to the graph. */
static gr_status commit_deps(builder *b, gr_task *t)
{
    dep_list *d = &b->cur;
    gr_task_graph *g = b->g;
    int *raw_of = NULL;
    if (d->n) {
        raw_of = gr_malloc((size_t)d->n * 2 * sizeof *raw_of, "task graph dependencies");
        if (!raw_of)
            return GR_ERR_OUT_OF_MEMORY;
        for (int i = 0; i < d->n; i++)
            raw_of[2 * i] = d->id[i], raw_of[2 * i + 1] = d->raw[i];
        qsort(raw_of, (size_t)d->n, 2 * sizeof *raw_of, cmp_int);
    }
    if (g->n_deps + d->n > b->cap_deps) {
        int cap = b->cap_deps ? b->cap_deps : 1024;
        while (cap < g->n_deps + d->n)
            cap *= 2;
        int *deps = realloc(g->deps, (size_t)cap * sizeof *deps);
        if (!deps) {
            free(raw_of);
            return gr_fail(GR_ERR_OUT_OF_MEMORY, "task graph: out of memory (dependencies)");
        }
        g->deps = deps;
        b->cap_deps = cap;
    }
    t->dep_begin = g->n_deps;
    for (int i = 0; i < d->n;) {
        const int id = raw_of[2 * i];
        int raw = 0;
        for (; i < d->n && raw_of[2 * i] == id; i++)
            raw |= raw_of[2 * i + 1];
        g->deps[g->n_deps++] = id;
        raw ? g->n_raw++ : g->n_war++;
        const int depth = g->tasks[id].depth + 1;
        t->depth = depth > t->depth ? depth : t->depth;
    }
    t->n_deps = g->n_deps - t->dep_begin;
    free(raw_of);
    return GR_OK;
}

static gr_status task_deps(builder *b, gr_task *t)
{
    const gr_plan_node *nd = &b->plan->nodes[t->node];
    b->cur.n = 0;
    b->self = (int)(t - b->g->tasks);
    for (int k = 0; k < nd->n_inputs; k++) {
        int lo, hi;
        gr_task_graph_input_rows(b->plan, t->node, k, t->row0, t->row0 + t->rows, &lo, &hi);
        GR_TRY(add_writers(b, nd->inputs[k], t->image, lo, hi));
    }
    GR_TRY(add_war(b, t));
    return commit_deps(b, t);
}

/* Pairs (depth, task id), compared as such: the static order. */
static int cmp_pair(const void *a, const void *b)
{
    const int *x = a, *y = b;
    return x[0] != y[0] ? (x[0] > y[0]) - (x[0] < y[0]) : (x[1] > y[1]) - (x[1] < y[1]);
}

static gr_status finish_graph(gr_task_graph *g)
{
    const size_t n = (size_t)(g->n_tasks ? g->n_tasks : 1);
    g->order = gr_malloc(n * sizeof *g->order, "task order");
    int *pairs = g->order ? gr_malloc(2 * n * sizeof *pairs, "task order") : NULL;
    if (!pairs)
        return GR_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < g->n_tasks; i++) {
        const gr_task *t = &g->tasks[i];
        pairs[2 * i] = t->depth;
        pairs[2 * i + 1] = i; /* task ids are node-major: node, then creation order */
        g->max_depth = t->depth > g->max_depth ? t->depth : g->max_depth;
        g->max_fan_in = t->n_deps > g->max_fan_in ? t->n_deps : g->max_fan_in;
        gr_task_node *tn = &g->nodes[t->node];
        tn->max_fan_in = t->n_deps > tn->max_fan_in ? t->n_deps : tn->max_fan_in;
    }
    qsort(pairs, (size_t)g->n_tasks, 2 * sizeof *pairs, cmp_pair);
    for (int i = 0; i < g->n_tasks; i++)
        g->order[i] = pairs[2 * i + 1];
    free(pairs);
    return GR_OK;
}

gr_status gr_task_graph_build(const gr_plan *plan, const gr_task_options *opt,
                              gr_task_graph **out)
{
    if (!plan || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_task_graph_build: NULL argument");
    *out = NULL;
    gr_task_options o;
    gr_task_options_default(&o);
    if (opt)
        o = *opt;
    if (o.target_tasks < 1 || o.target_tasks > 65536 || o.channel_align < 1 ||
        o.channel_align > 1024)
        return gr_fail(GR_ERR_INVALID_ARGUMENT,
                       "task graph: target_tasks %d (1..65536) or channel_align %d (1..1024) "
                       "out of range", o.target_tasks, o.channel_align);
    gr_task_graph *g = gr_calloc(1, sizeof *g, "task graph");
    if (!g)
        return GR_ERR_OUT_OF_MEMORY;
    g->options = o;
    g->n_nodes = plan->n_nodes;
    g->nodes = gr_calloc((size_t)(plan->n_nodes ? plan->n_nodes : 1), sizeof *g->nodes,
                         "task graph nodes");
    builder b = {.plan = plan, .g = g};
    gr_status st = g->nodes ? make_tasks(&b) : GR_ERR_OUT_OF_MEMORY;
    for (int i = 0; st == GR_OK && i < g->n_tasks; i++)
        st = task_deps(&b, &g->tasks[i]);
    if (st == GR_OK)
        st = finish_graph(g);
    free(b.cur.id);
    free(b.cur.raw);
    if (st != GR_OK) {
        gr_task_graph_free(g);
        return st;
    }
    *out = g;
    return GR_OK;
}

void gr_task_graph_free(gr_task_graph *g)
{
    if (!g)
        return;
    free(g->tasks);
    free(g->deps);
    free(g->order);
    free(g->nodes);
    free(g);
}
