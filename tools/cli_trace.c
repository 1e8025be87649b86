/* The CLI's view inside a network: the planner's layer-by-layer CPU trace (where --find-overflow
 * and compare --per-layer see every tensor). The only tools file besides cmd_plan.c that includes
 * planner/plan.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "planner/plan.h"
#include "tools/cli.h"

gr_status gr_cli_load_net(const gr_cli_options *o, gr_net **net)
{
    return gr_net_open(o->model, o->cfg, o->weights, o->seed, net);
}

typedef struct trace_state {
    const gr_plan *plan;
    gr_cli_layer_fn fn;
    void *user;
    float *values;
    size_t cap;
    int stopped;
    gr_status status;
} trace_state;

static void trace_node(const gr_plan_exec *ex, int node, void *user)
{
    trace_state *ts = user;
    const gr_plan_node *nd = &ts->plan->nodes[node];
    if (ts->stopped || nd->output < 0 || nd->layer < 0)
        return;
    const gr_plan_tensor *t = &ts->plan->tensors[nd->output];
    if (t->layer != nd->layer)
        return; /* a planner-inserted conversion's output */
    size_t n = (size_t)t->n * (size_t)t->c * (size_t)t->h * (size_t)t->w;
    if (n > ts->cap) {
        float *grown = realloc(ts->values, n * sizeof *grown);
        if (!grown) {
            ts->status = gr_fail(GR_ERR_OUT_OF_MEMORY, "layer trace: out of memory");
            ts->stopped = 1;
            return;
        }
        ts->values = grown;
        ts->cap = n;
    }
    gr_plan_exec_read_tensor(ex, nd->output, ts->values);
    ts->stopped = ts->fn(nd->layer, nd->kind, ts->values, n, ts->user);
}

gr_status gr_cli_trace_layers(const gr_net *net, gr_precision prec, const float *layer_range,
                              float input_range, const float *input, gr_cli_layer_fn fn,
                              void *user)
{
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.precision = prec;
    opt.input_u8 = 0;
    gr_plan *plan = NULL;
    gr_plan_exec *ex = NULL;
    GR_TRY(gr_plan_build(net, &opt, &plan));
    gr_status st = prec == GR_PREC_INT8 ? gr_plan_set_ranges(plan, layer_range, input_range) : GR_OK;
    if (st == GR_OK)
        st = gr_plan_exec_create(plan, 0, &ex);
    trace_state ts = {.plan = plan, .fn = fn, .user = user};
    if (st == GR_OK) {
        gr_plan_exec_set_hook(ex, trace_node, &ts);
        st = gr_plan_execute(ex, input);
    }
    if (st == GR_OK)
        st = ts.status;
    free(ts.values);
    gr_plan_exec_destroy(ex);
    gr_plan_free(plan);
    return st;
}

typedef struct overflow_search {
    const gr_net *net;
    int layer, kind;
    size_t bad;
} overflow_search;

static int first_nonfinite(int layer, int kind, const float *values, size_t n, void *user)
{
    overflow_search *os = user;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !isfinite(values[i]);
    if (bad) {
        os->layer = layer;
        os->kind = kind;
        os->bad = bad;
    }
    return bad != 0;
}

/* --find-overflow: run the same input layer by layer in the CPU emulation of the precision (int8
 * clamps, so it is searched in fp32) and name the first layer whose output is not finite. */
gr_status gr_cli_find_overflow(const gr_cli_options *o, const float *input)
{
    gr_net *net = NULL;
    GR_TRY(gr_cli_load_net(o, &net));
    overflow_search os = {net, -1, 0, 0};
    /* auto: its fp16 layers are where an overflow can come from */
    gr_precision prec = o->precision == GR_PREC_INT8  ? GR_PREC_FP32
                        : o->precision == GR_PREC_AUTO ? GR_PREC_FP16
                                                       : o->precision;
    gr_status st = gr_cli_trace_layers(net, prec, NULL, 0.0f, input, first_nonfinite, &os);
    if (st == GR_OK && os.layer >= 0) {
        const gr_layer *l = &net->layers[os.layer];
        fprintf(stderr,
                "graphrun: first non-finite value at layer %d (%s, cfg line %d): %zu of its "
                "values are NaN/Inf in %s; use --prec fp32 or int8\n",
                os.layer, gr_op_get(l->p.op)->name, l->cfg_line, os.bad, gr_precision_name(prec));
    } else if (st == GR_OK) {
        fprintf(stderr, "graphrun: --find-overflow: every layer is finite in the CPU emulation of "
                        "%s for the first input\n", gr_precision_name(prec));
    }
    gr_net_free(net);
    return st;
}
