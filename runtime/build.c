/* The one build path: gr_engine_create builds an engine from a resolved request (precision map
 * and int8 ranges already known) and hands those to the backend's init. gr_engine_build (engine.c)
 * is its public wrapper, which resolves them first; calibration's fp32 statistics engine
 * (gpu/calib.c) and the automatic search's timing engines (precision/auto.c) are requests too.
 * Nothing here calibrates or searches: this file calls only the backends and what they call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/plan.h"
#include "runtime/engine_internal.h"
#include "runtime/image/image.h"
#include "runtime/trace.h"

static gr_status check_options(const gr_engine_options *opt)
{
    if (opt->batch < 1 || opt->batch > GR_MAX_BATCH)
        return gr_fail(GR_ERR_LIMIT, "engine option batch=%d is outside 1..%d", opt->batch,
                       GR_MAX_BATCH);
    if (opt->micro_batch < 0 || opt->micro_batch > opt->batch ||
        (opt->micro_batch > 0 && opt->batch % opt->micro_batch != 0))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "engine option micro_batch=%d does not divide "
                       "batch=%d (0 = auto, else a divisor of the batch)", opt->micro_batch,
                       opt->batch);
    /* Enums, toggles and numbers: their ranges in graphrun/options.def. */
    GR_TRY(gr_engine_options_check(opt));
    if (opt->calib_method == GR_CALIB_PERCENTILE &&
        !(opt->calib_percentile > 50.0f && opt->calib_percentile <= 100.0f))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "engine option calib_percentile=%g is outside (50, 100]",
                       (double)opt->calib_percentile);
    return GR_OK;
}

/* Every tensor of a run (the input and each layer's output, times the batch) must stay within
 * GR_MAX_TENSOR_ELEMS: checked before any backend allocates, so an absurd batch or network is a
 * clear GR_ERR_LIMIT rather than an allocation failure (or success) halfway through. */
static gr_status check_tensor_sizes(const gr_net *net, int batch)
{
    gr_shape in = {net->c, net->h, net->w};
    size_t elems;
    if (!gr_mul_size(gr_shape_elems(in), (size_t)batch, &elems) || elems > GR_MAX_TENSOR_ELEMS)
        return gr_fail(GR_ERR_LIMIT,
                       "%s: input %dx%dx%d x batch %d is more than %zu elements per tensor",
                       net->name, in.c, in.h, in.w, batch, GR_MAX_TENSOR_ELEMS);
    for (int i = 0; i < net->n_layers; i++) {
        const gr_layer *l = &net->layers[i];
        if (!gr_mul_size(gr_shape_elems(l->out), (size_t)batch, &elems) ||
            elems > GR_MAX_TENSOR_ELEMS)
            return gr_fail(GR_ERR_LIMIT,
                           "%s:%d: layer %d (%s): output %dx%dx%d x batch %d is more than %zu "
                           "elements per tensor (use a smaller batch)",
                           net->name, l->cfg_line, i, gr_op_get(l->p.op)->name, l->out.c,
                           l->out.h, l->out.w, batch, GR_MAX_TENSOR_ELEMS);
    }
    return GR_OK;
}

gr_status gr_engine_validate(const gr_net *net, const gr_engine_options *opt)
{
    GR_TRY(check_options(opt));
    GR_TRY(check_tensor_sizes(net, opt->batch));
    int heads[GR_MAX_HEADS];
    if (gr_net_heads(net, heads, GR_MAX_HEADS) < 1)
        return gr_fail(GR_ERR_UNSUPPORTED, "%s: network has no output layer", net->name);
    return GR_OK;
}

static void engine_free(gr_engine *e)
{
    if (e->ops && e->ops->destroy)
        e->ops->destroy(e);
    gr_net_free(e->net);
    gr_file_view_release(&e->weight_file);
    free(e->layer_prec);
    free(e->layer_prec_view);
    free(e->tactics);
    free(e->layer_range);
    free(e->node_times);
    free(e);
}

void gr_engine_destroy(gr_engine *engine)
{
    if (engine)
        engine_free(engine);
}

/* The engine's precision from the request: the map (copied) and, with one, opt.precision its
 * widest reduced precision (what the backends calibrate and fuse for); the per-layer view for
 * gr_engine_layer_precision(). */
static gr_status set_precision(gr_engine *e, const gr_precision *map)
{
    const gr_net *net = e->net;
    size_t bytes = (size_t)net->n_layers * sizeof *e->layer_prec;
    e->opt.layer_precision = NULL; /* no pointer to the caller's map is kept */
    e->opt.n_layer_precision = 0;
    if (map) {
        e->layer_prec = gr_malloc(bytes, "precision map");
        if (!e->layer_prec)
            return GR_ERR_OUT_OF_MEMORY;
        memcpy(e->layer_prec, map, bytes);
        e->opt.precision = gr_precision_widest(net, map);
    }
    if (e->opt.precision == GR_PREC_AUTO)
        return gr_fail(GR_ERR_INTERNAL, "engine build: precision auto reached the build "
                                        "unresolved");
    e->layer_prec_view = gr_malloc(bytes, "precision map");
    if (!e->layer_prec_view)
        return GR_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < net->n_layers; i++)
        e->layer_prec_view[i] = gr_op_has((int)net->layers[i].p.op, GR_OPF_F32_ONLY) ? GR_PREC_FP32
                                : e->layer_prec ? e->layer_prec[i]
                                                : e->opt.precision;
    return GR_OK;
}

/* The process environment's say over an engine's options, read here and nowhere else (README,
 * "Environment variables"): what CI and the test suites need to set for every engine of a
 * process - calibration's and the automatic search's engines included - without changing the
 * programs. */
static void apply_environment(gr_engine_options *opt)
{
    const char *no_search = getenv("GR_DISABLE_TACTIC_SEARCH");
    if (no_search && no_search[0] == '1')
        opt->tactic_search = 0;
}

/* The engine's front state: options, its network, heads and their descriptors. */
static gr_status engine_new(const gr_build_request *req, gr_engine **out)
{
    const gr_engine_options *opt = &req->opt;
    gr_engine *e = gr_calloc(1, sizeof *e, "engine");
    if (!e) {
        gr_net_free(req->adopt_net);
        return GR_ERR_OUT_OF_MEMORY;
    }
    e->opt = *opt;
    if (!req->stored) /* a loaded engine's options are the file's, as they were built */
        apply_environment(&e->opt);
    e->inflight = opt->inflight > 0 ? opt->inflight : 1;
    e->opt.inflight = e->inflight;
    atomic_init(&e->busy, 0);
    gr_status st = GR_OK;
    if (req->adopt_net)
        e->net = req->adopt_net;
    else
        st = gr_net_clone(req->net, &e->net);
    if (st != GR_OK) {
        free(e);
        return st;
    }
    if (e->opt.preprocess != GR_PREPROCESS_AUTO) /* the engine's copy: the engine's choice */
        e->net->preprocess = e->opt.preprocess;
    e->opt.preprocess = gr_preprocess_concrete(e->net->preprocess);
    e->model_view = (struct gr_model){e->net, 0};
    e->n_heads = gr_net_heads(e->net, e->head_layers, GR_MAX_HEADS);
    for (int i = 0; i < e->n_heads; i++) {
        gr_shape s = e->net->layers[e->head_layers[i]].out;
        e->head_desc[i] = (gr_tensor_desc){opt->batch, s.c, s.h, s.w, GR_DTYPE_F32};
    }
    e->input_u8 = 1;
    e->device = req->device;
    if (req->notice)
        snprintf(e->notice, sizeof e->notice, "%s", req->notice);
    *out = e;
    return GR_OK;
}

gr_status gr_engine_create(const gr_build_request *req, gr_engine **out)
{
    *out = NULL;
    const double start = gr_now_us();
    gr_status valid = gr_engine_validate(req->net, &req->opt);
    if (valid != GR_OK) {
        gr_net_free(req->adopt_net);
        return valid;
    }
    gr_engine *e = NULL;
    GR_TRY(engine_new(req, &e));
    gr_status st = set_precision(e, req->layer_precision);
    if (st == GR_OK && e->opt.precision == GR_PREC_INT8 && !req->layer_range)
        st = gr_fail(GR_ERR_INTERNAL, "engine build: an int8 engine without its ranges");
    if (st == GR_OK && req->layer_range) /* kept for gr_engine_save */
        st = gr_ranges_copy(req->layer_range, e->net->n_layers, &e->layer_range);
    e->input_range = req->input_range;
    e->observable = req->observable;
    if (st == GR_OK) {
        gr_backend_inputs in = {req->layer_range, req->input_range, req->observable,
                                req->backend_blob, req->backend_blob_len};
        int gpu = e->device == GR_DEVICE_GPU;
        gr_trace_push(gpu ? "graphrun: engine build (GPU)" : "graphrun: engine build (CPU)");
        st = gpu ? gr_backend_gpu_init(e, &in) : gr_backend_cpu_init(e, &in);
        gr_trace_pop();
    }
    /* The caller's calibration inputs are read during build only: keep no pointers to them. */
    e->opt.calib_images = NULL;
    e->opt.calib_cache = NULL;
    e->opt.timing_cache = NULL;
    e->opt.calib_progress = NULL;
    e->opt.calib_progress_user = NULL;
    if (st != GR_OK) {
        engine_free(e);
        return st;
    }
    e->build_times.total_ms = (gr_now_us() - start) / 1e3; /* a build's front adds its own part */
    *out = e;
    return GR_OK;
}
