#include "tests/support/gpu_trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "planner/plan.h"
#include "runtime/gpu/debug.h"

size_t gr_test_tensor_elems(const gr_plan *plan, int tensor)
{
    const gr_plan_tensor *pt = &plan->tensors[tensor];
    return (size_t)pt->n * pt->c * pt->h * pt->w;
}

gr_test_diff gr_test_compare(const float *got, const float *want, size_t count)
{
    gr_test_diff d = {0, count, 0.0, 0.0, 0.0, 0};
    double sq = 0.0, lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < count; i++) {
        if (got[i] != want[i] && !(isnan(got[i]) && isnan(want[i])) && d.differing++ == 0)
            d.first = i;
        if (isfinite(got[i]) != isfinite(want[i])) {
            d.nonfinite_mismatch = 1;
            continue;
        }
        if (!isfinite(want[i]))
            continue;
        double e = fabs((double)got[i] - (double)want[i]);
        sq += e * e;
        d.max_abs = fmax(d.max_abs, e);
        lo = fmin(lo, (double)want[i]);
        hi = fmax(hi, (double)want[i]);
    }
    d.range = hi > lo ? hi - lo : 0.0;
    d.nrmse = sqrt(sq / (double)(count ? count : 1)) / (hi > lo ? hi - lo : 1.0);
    return d;
}

void gr_test_where(char *buf, size_t len, size_t i, int c, int h, int w, const float *got,
                   const float *want)
{
    size_t plane = (size_t)h * (size_t)w, image = (size_t)c * plane;
    snprintf(buf, len, "(n %zu, c %zu, y %zu, x %zu): GPU %.9g, CPU %.9g", i / image,
             i % image / plane, i % plane / (size_t)w, i % (size_t)w, (double)got[i],
             (double)want[i]);
}

#ifdef GR_HAVE_CUDA
typedef struct node_trace {
    const gr_plan *plan;
    float **cpu; /* per node, the emulation's output */
    int failed;  /* a copy of the emulation's output failed */
    gr_test_node_fn fn;
    void *user;
} node_trace;

static void cpu_hook(const gr_plan_exec *ex, int node, void *user)
{
    node_trace *t = user;
    const gr_plan_node *nd = &t->plan->nodes[node];
    if (nd->output < 0 || t->failed)
        return;
    t->cpu[node] = malloc(gr_test_tensor_elems(t->plan, nd->output) * sizeof(float));
    if (!t->cpu[node] || gr_plan_exec_read_tensor(ex, nd->output, t->cpu[node]) != GR_OK)
        t->failed = 1;
}

static void gpu_hook(const gr_plan *plan, int node, const float *values, void *user)
{
    node_trace *t = user;
    t->fn(plan, node, values, t->cpu[node], gr_test_tensor_elems(plan, plan->nodes[node].output),
          t->user);
}
#endif

gr_status gr_test_trace_nodes(gr_engine *engine, const uint8_t *input, gr_test_node_fn fn,
                              void *user)
{
#ifdef GR_HAVE_CUDA
    const gr_plan *plan = gr_engine_debug_plan(engine);
    if (!plan || !input || !fn)
        return GR_ERR_INVALID_ARGUMENT;
    node_trace t = {plan, calloc((size_t)plan->n_nodes, sizeof(float *)), 0, fn, user};
    if (!t.cpu)
        return GR_ERR_OUT_OF_MEMORY;
    gr_plan_exec *ex = NULL;
    gr_status st = gr_plan_exec_create(plan, 0, &ex);
    if (st == GR_OK) {
        gr_plan_exec_set_hook(ex, cpu_hook, &t);
        st = gr_plan_execute(ex, input);
    }
    if (st == GR_OK && t.failed)
        st = GR_ERR_OUT_OF_MEMORY;
    if (st == GR_OK)
        st = gr_engine_debug_trace(engine, input, gpu_hook, &t);
    for (int i = 0; i < plan->n_nodes; i++)
        free(t.cpu[i]);
    free(t.cpu);
    gr_plan_exec_destroy(ex);
    return st;
#else
    (void)engine;
    (void)input;
    (void)fn;
    (void)user;
    return GR_ERR_UNSUPPORTED;
#endif
}
