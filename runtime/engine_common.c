/* Helpers on the engine that every layer of the runtime uses, the backends included: the clock,
 * notices and error messages, the plan precision of an engine. They call
 * nothing else of the runtime, so any file may call them without closing a circle (the front
 * calls the backends, and the backends call these). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "planner/plan.h"
#include "runtime/engine_internal.h"

double gr_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static const char *const f32_algo_names[] = {"auto", "sgemm", "tf32x3", "implicit", "direct3x3"};
static const char *const toggle_names[] = {"auto", "on", "off"};
static const char *const executor_names[] = {"graph", "dataflow", "auto"};
static const char *const preprocess_names[] = {"auto", "letterbox", "stretch", "letterbox114"};

/* The index of `name` among the n names of an enum, or -1. */
static int name_index(const char *const *names, int n, const char *name)
{
    for (int i = 0; name && i < n; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

const char *gr_f32_algo_name(gr_f32_algo algo)
{
    return (unsigned)algo <= GR_F32_ALGO_DIRECT3X3 ? f32_algo_names[algo] : "?";
}

gr_status gr_f32_algo_parse(const char *name, gr_f32_algo *out)
{
    if (!name || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_f32_algo_parse: NULL argument");
    const int a = name_index(f32_algo_names, GR_F32_ALGO_DIRECT3X3 + 1, name);
    if (a < 0)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "'%.40s' is not an fp32 algorithm (auto, sgemm, "
                       "tf32x3, implicit, direct3x3)", name);
    *out = (gr_f32_algo)a;
    return GR_OK;
}

const char *gr_toggle_name(gr_toggle toggle)
{
    return (unsigned)toggle <= GR_TOGGLE_OFF ? toggle_names[toggle] : "?";
}

gr_status gr_toggle_parse(const char *name, gr_toggle *out)
{
    if (!name || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_toggle_parse: NULL argument");
    const int t = name_index(toggle_names, GR_TOGGLE_OFF + 1, name);
    if (t < 0)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "'%.40s' is not auto, on or off", name);
    *out = (gr_toggle)t;
    return GR_OK;
}

const char *gr_preprocess_name(gr_preprocess p)
{
    return (unsigned)p <= GR_PREPROCESS_LETTERBOX_114 ? preprocess_names[p] : "?";
}

gr_status gr_preprocess_parse(const char *name, gr_preprocess *out)
{
    if (!name || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_preprocess_parse: NULL argument");
    const int x = name_index(preprocess_names, GR_PREPROCESS_LETTERBOX_114 + 1, name);
    if (x < 0)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "'%.40s' is not auto, letterbox, stretch or "
                       "letterbox114", name);
    *out = (gr_preprocess)x;
    return GR_OK;
}

const char *gr_executor_name(gr_executor executor)
{
    return (unsigned)executor <= GR_EXECUTOR_AUTO ? executor_names[executor] : "?";
}

gr_status gr_executor_parse(const char *name, gr_executor *out)
{
    if (!name || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_executor_parse: NULL argument");
    const int x = name_index(executor_names, GR_EXECUTOR_AUTO + 1, name);
    if (x < 0)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "'%.40s' is not graph, dataflow or auto", name);
    *out = (gr_executor)x;
    return GR_OK;
}

gr_status gr_engine_fail(gr_engine *e, gr_status status)
{
    if (e)
        snprintf(e->error, sizeof e->error, "%s", gr_last_error());
    return status;
}

void gr_engine_add_notice(gr_engine *e, const char *line)
{
    size_t used = strlen(e->notice);
    if (!line[0] || used + 2 >= sizeof e->notice)
        return;
    snprintf(e->notice + used, sizeof e->notice - used, "%s%s", used ? "\n" : "", line);
}

void gr_engine_plan_precision(const gr_engine *e, gr_plan_options *po)
{
    po->precision = e->opt.precision;
    po->layer_precision = e->layer_prec;
    po->n_layer_precision = e->layer_prec ? e->net->n_layers : 0;
}

gr_precision gr_precision_widest(const gr_net *net, const gr_precision *map)
{
    int any_i8 = 0, any_f16 = 0;
    for (int i = 0; map && i < net->n_layers; i++) {
        if (gr_op_has((int)net->layers[i].p.op, GR_OPF_F32_ONLY))
            continue;
        any_i8 |= map[i] == GR_PREC_INT8;
        any_f16 |= map[i] == GR_PREC_FP16;
    }
    return any_i8 ? GR_PREC_INT8 : any_f16 ? GR_PREC_FP16 : GR_PREC_FP32;
}

gr_status gr_ranges_copy(const float *layer_range, int n_layers, float **copy)
{
    size_t bytes = (size_t)n_layers * sizeof(float);
    *copy = gr_malloc(bytes, "calibration ranges");
    if (!*copy)
        return GR_ERR_OUT_OF_MEMORY;
    memcpy(*copy, layer_range, bytes);
    return GR_OK;
}
