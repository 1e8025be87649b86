/* Host-side int8 calibration on the CPU: run an fp32 plan of the network over calibration images
 * with the plan executor, record each layer output's |x| statistics (max, or every value for a
 * percentile), and turn them into per-layer ranges (gr_plan_set_ranges makes the scales). The GPU
 * engine may fill the same table from its own runs; the ranges are what a calibration cache keeps.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner/plan.h"

typedef struct value_list {
    float *values;
    size_t count, cap;
} value_list;

typedef struct calib_state {
    const gr_plan *plan;
    int keep_values;   /* percentile: keep every |x| */
    float *layer_max;  /* [n_layers] */
    value_list *lists; /* [n_layers] when keep_values */
    float *scratch;
    size_t scratch_cap;
    gr_status status;
} calib_state;

static gr_status list_append(value_list *l, const float *v, size_t n)
{
    if (l->count + n > l->cap) {
        size_t cap = l->cap ? l->cap : 4096;
        while (cap < l->count + n)
            cap *= 2;
        float *grown = realloc(l->values, cap * sizeof *grown);
        if (!grown)
            return gr_fail(GR_ERR_OUT_OF_MEMORY, "calibration: out of memory keeping %zu values",
                           cap);
        l->values = grown;
        l->cap = cap;
    }
    for (size_t i = 0; i < n; i++)
        l->values[l->count + i] = fabsf(v[i]);
    l->count += n;
    return GR_OK;
}

static void record_node(const gr_plan_exec *ex, int node, void *user)
{
    calib_state *cs = user;
    const gr_plan_node *nd = &cs->plan->nodes[node];
    if (cs->status != GR_OK || nd->output < 0)
        return;
    const gr_plan_tensor *t = &cs->plan->tensors[nd->output];
    if (t->layer < 0 || t->layer >= cs->plan->n_layers)
        return;
    size_t n = (size_t)t->n * (size_t)t->c * (size_t)t->h * (size_t)t->w;
    if (n > cs->scratch_cap) {
        float *grown = realloc(cs->scratch, n * sizeof *grown);
        if (!grown) {
            cs->status = gr_fail(GR_ERR_OUT_OF_MEMORY, "calibration: out of memory");
            return;
        }
        cs->scratch = grown;
        cs->scratch_cap = n;
    }
    gr_plan_exec_read_tensor(ex, nd->output, cs->scratch);
    float m = cs->layer_max[t->layer];
    for (size_t i = 0; i < n; i++)
        m = fmaxf(m, fabsf(cs->scratch[i]));
    cs->layer_max[t->layer] = m;
    if (cs->keep_values)
        cs->status = list_append(&cs->lists[t->layer], cs->scratch, n);
}

static int compare_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The value at `percentile` percent of the sorted |x| (nearest rank). */
static float percentile_of(value_list *l, float percentile)
{
    if (l->count == 0)
        return 0.0f;
    qsort(l->values, l->count, sizeof *l->values, compare_float);
    double rank = ceil((double)percentile / 100.0 * (double)l->count);
    size_t index = rank < 1.0 ? 0 : (size_t)rank - 1;
    if (index >= l->count)
        index = l->count - 1;
    return l->values[index];
}

gr_status gr_plan_calibrate_ranges(const gr_net *net, const float *images, int n_images,
                                   gr_calib_method method, float percentile, float *layer_range,
                                   float *input_range)
{
    if (!net || !images || n_images < 1 || !layer_range || !input_range)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_calibrate_ranges: bad argument");
    if (method == GR_CALIB_PERCENTILE && !(percentile > 0.0f && percentile <= 100.0f))
        return gr_fail(GR_ERR_INVALID_ARGUMENT,
                       "gr_plan_calibrate_ranges: percentile %g outside (0, 100]",
                       (double)percentile);
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.precision = GR_PREC_FP32;
    gr_plan *plan = NULL;
    gr_plan_exec *ex = NULL;
    GR_TRY(gr_plan_build(net, &opt, &plan));
    calib_state cs;
    memset(&cs, 0, sizeof cs);
    cs.plan = plan;
    cs.keep_values = method == GR_CALIB_PERCENTILE;
    cs.layer_max = gr_calloc((size_t)net->n_layers, sizeof *cs.layer_max, "calibration");
    cs.lists = gr_calloc((size_t)net->n_layers + 1, sizeof *cs.lists, "calibration");
    value_list input_values = {0};
    gr_status st =
        cs.layer_max && cs.lists ? gr_plan_exec_create(plan, 0, &ex) : GR_ERR_OUT_OF_MEMORY;
    size_t image_elems = (size_t)net->c * (size_t)net->h * (size_t)net->w;
    float input_max = 0.0f;
    if (st == GR_OK)
        gr_plan_exec_set_hook(ex, record_node, &cs);
    for (int i = 0; i < n_images && st == GR_OK; i++) {
        const float *image = images + (size_t)i * image_elems;
        for (size_t k = 0; k < image_elems; k++)
            input_max = fmaxf(input_max, fabsf(image[k]));
        if (cs.keep_values)
            st = list_append(&input_values, image, image_elems);
        if (st == GR_OK)
            st = gr_plan_execute(ex, image);
        if (st == GR_OK)
            st = cs.status;
    }
    if (st == GR_OK) {
        for (int l = 0; l < net->n_layers; l++)
            layer_range[l] =
                cs.keep_values ? percentile_of(&cs.lists[l], percentile) : cs.layer_max[l];
        *input_range = cs.keep_values ? percentile_of(&input_values, percentile) : input_max;
    }
    for (int l = 0; cs.lists && l < net->n_layers; l++)
        free(cs.lists[l].values);
    free(cs.lists);
    free(cs.layer_max);
    free(cs.scratch);
    free(input_values.values);
    gr_plan_exec_destroy(ex);
    gr_plan_free(plan);
    return st;
}

gr_status gr_plan_calibrate(gr_plan *plan, const gr_net *net, const float *images, int n_images,
                            gr_calib_method method, float percentile)
{
    if (!plan || !net)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_calibrate: NULL argument");
    if (plan->n_layers != net->n_layers)
        return gr_fail(GR_ERR_INVALID_ARGUMENT,
                       "gr_plan_calibrate: the plan has %d layers, the network %d", plan->n_layers,
                       net->n_layers);
    float *ranges = gr_calloc((size_t)net->n_layers, sizeof *ranges, "calibration ranges");
    if (!ranges)
        return GR_ERR_OUT_OF_MEMORY;
    float input_range = 0.0f;
    gr_status st =
        gr_plan_calibrate_ranges(net, images, n_images, method, percentile, ranges, &input_range);
    if (st == GR_OK)
        st = gr_plan_set_ranges(plan, ranges, input_range);
    free(ranges);
    return st;
}
