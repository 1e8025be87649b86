/* gr_engine front: the public build and everything after it - runs, slots, outputs, detection
 * decoding, timing and error messages, the busy flag that rejects a second thread entering a run.
 * gr_engine_build resolves what the backend needs before building: the precision map (explicit,
 * or precision/auto.c's search) and the int8 ranges (precision/calibrate.c), then builds through
 * the one build path, gr_engine_create (build.c). Execution is the backend's (cpu/, gpu/). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/onnx/tail.h"
#include "runtime/detect.h"
#include "runtime/engine_internal.h"

/* The explicit map (layer_precision): exactly one FP32 / FP16 / INT8 per layer, copied. */
static gr_status take_layer_precision(const gr_net *net, const gr_engine_options *opt,
                                      gr_precision **map)
{
    if (!opt->layer_precision) {
        if (opt->n_layer_precision != 0)
            return gr_fail(GR_ERR_INVALID_ARGUMENT,
                           "engine option n_layer_precision=%d without layer_precision",
                           opt->n_layer_precision);
        return GR_OK;
    }
    if (opt->precision == GR_PREC_AUTO)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "engine options layer_precision and precision "
                                                "auto exclude each other");
    if (opt->n_layer_precision != net->n_layers)
        return gr_fail(GR_ERR_INVALID_ARGUMENT,
                       "engine option layer_precision has %d entries; %s has %d layers",
                       opt->n_layer_precision, net->name, net->n_layers);
    for (int i = 0; i < net->n_layers; i++)
        if ((unsigned)opt->layer_precision[i] > GR_PREC_INT8)
            return gr_fail(GR_ERR_INVALID_ARGUMENT,
                           "engine option layer_precision[%d]=%d is not fp32, fp16 or int8", i,
                           (int)opt->layer_precision[i]);
    *map = gr_malloc((size_t)net->n_layers * sizeof **map, "precision map");
    if (!*map)
        return GR_ERR_OUT_OF_MEMORY;
    memcpy(*map, opt->layer_precision, (size_t)net->n_layers * sizeof **map);
    return GR_OK;
}

/* What the request's backend needs, resolved in order: the precision map (the caller's, or the
 * automatic search, which calibrates for itself), then - when a layer computes in int8 - the
 * ranges from the calibration cache or a calibration. A GPU engine's device is checked before
 * calibrating, so an engine the device cannot take fails as the backend would, and first.
 * *map and *ranges are malloc'd (NULL when not needed), the caller's also on failure. */
static gr_status resolve(gr_build_request *req, gr_precision **map, float **ranges, char *notice)
{
    const gr_engine_options *opt = &req->opt;
    GR_TRY(take_layer_precision(req->net, opt, map));
    if (opt->precision == GR_PREC_AUTO)
        GR_TRY(gr_auto_precision(req, map, ranges, &req->input_range, notice, GR_NOTICE_LEN));
    if (*map)
        req->opt.precision = gr_precision_widest(req->net, *map);
    req->layer_precision = *map;
    if (req->opt.precision != GR_PREC_INT8 || *ranges) {
        req->layer_range = *ranges;
        return GR_OK;
    }
    if (req->device == GR_DEVICE_GPU)
        GR_TRY(gr_gpu_device_check(opt->gpu_index, req->opt.precision));
    if (req->net->qdq && req->net->qdq->n_ranges > 0) /* the file's scales: no calibration */
        GR_TRY(gr_file_ranges(req, ranges, &req->input_range, notice, GR_NOTICE_LEN));
    else
        GR_TRY(gr_calibrate(req, ranges, &req->input_range, notice, GR_NOTICE_LEN));
    req->layer_range = *ranges;
    return GR_OK;
}

gr_status gr_engine_build(const gr_model *model, const gr_engine_options *opt, gr_engine **out)
{
    if (!model || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_build: NULL %s", model ? "out" : "model");
    *out = NULL;
    gr_engine_options full;
    GR_TRY(gr_engine_options_take(opt, &full));
    opt = &full;
    GR_TRY(gr_engine_validate(model->net, opt));
    if (full.preprocess == GR_PREPROCESS_AUTO) /* resolved before calibration reads images */
        full.preprocess = gr_model_preprocess(model);
    gr_build_request req = {.net = model->net, .opt = *opt, .device = opt->device};
    if (req.device == GR_DEVICE_AUTO)
        req.device = gr_cuda_device_count() > 0 ? GR_DEVICE_GPU : GR_DEVICE_CPU;
    char notice[GR_NOTICE_LEN] = "";
    req.notice = notice;
    gr_precision *map = NULL;
    float *ranges = NULL;
    const double start = gr_now_us();
    gr_status st = resolve(&req, &map, &ranges, notice);
    const double resolved = gr_now_us();
    if (st == GR_OK)
        st = gr_engine_create(&req, out);
    if (st == GR_OK && opt->precision == GR_PREC_AUTO && req.device == GR_DEVICE_GPU)
        st = gr_auto_precision_measure(*out);
    if (st == GR_OK) {
        (*out)->build_times.resolve_ms = (resolved - start) / 1e3;
        (*out)->build_times.total_ms = (gr_now_us() - start) / 1e3;
    }
    if (st != GR_OK) {
        gr_engine_destroy(*out);
        *out = NULL;
    }
    free(map);
    free(ranges);
    return st;
}

const gr_precision *gr_engine_layer_precision(const gr_engine *engine, int *n)
{
    if (n)
        *n = engine ? engine->net->n_layers : 0;
    return engine ? engine->layer_prec_view : NULL;
}

gr_device gr_engine_device(const gr_engine *engine) { return engine ? engine->device : GR_DEVICE_AUTO; }

const char *gr_engine_device_name(const gr_engine *engine)
{
    return engine ? engine->device_name : "";
}

gr_status gr_engine_input_desc(const gr_engine *engine, gr_tensor_desc *desc)
{
    if (!engine || !desc)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_input_desc: NULL argument");
    *desc = (gr_tensor_desc){engine->opt.batch, engine->net->c, engine->net->h, engine->net->w,
                             GR_DTYPE_F32};
    return GR_OK;
}

int gr_engine_output_count(const gr_engine *engine) { return engine ? engine->n_heads : 0; }

gr_status gr_engine_output_desc(const gr_engine *engine, int index, gr_tensor_desc *desc)
{
    if (!engine || !desc)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_output_desc: NULL argument");
    if (index < 0 || index >= engine->n_heads)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "output index %d is outside 0..%d", index,
                       engine->n_heads - 1);
    *desc = engine->head_desc[index];
    return GR_OK;
}

/* Take the engine for one run. The busy flag is taken first: `failed` and `error` belong to the
 * thread inside a run, so a second thread must not read them until it owns the engine. */
static gr_status enter(gr_engine *e)
{
    int expected = 0;
    if (!atomic_compare_exchange_strong(&e->busy, &expected, 1))
        return gr_fail(GR_ERR_BUSY,
                       "engine is already running on another thread (one thread per engine at a "
                       "time; build one engine per thread)");
    if (e->failed) {
        gr_fail(GR_ERR_STATE, "engine is unusable after an earlier failure: %s", e->error);
        gr_engine_fail(e, GR_ERR_STATE);
        atomic_store(&e->busy, 0);
        return GR_ERR_STATE;
    }
    /* A loaded engine's network reads its weights from the file's mapping: a file rewritten in
     * place since would give wrong results or, truncated, a SIGBUS (base/base.h, gr_file_view). */
    gr_status st = gr_file_view_check(&e->weight_file);
    if (st != GR_OK) {
        e->failed = 1;
        gr_engine_fail(e, st);
        atomic_store(&e->busy, 0);
        return st;
    }
    return GR_OK;
}

/* Count the non-finite values of output `index` (host copy, valid after a synchronous run). */
static size_t count_nonfinite(const gr_engine *e, int index)
{
    const gr_tensor_desc *d = &e->head_desc[index];
    size_t n = (size_t)d->n * (size_t)d->c * (size_t)d->h * (size_t)d->w, bad = 0;
    const float *v = e->outputs[index];
    for (size_t i = 0; i < n; i++)
        bad += !isfinite(v[i]);
    return bad;
}

/* With nonfinite_is_error, a synchronous run whose outputs hold NaN/Inf fails with
 * GR_ERR_NUMERIC; the outputs stay readable (has_run is set all the same). */
static gr_status check_finite(gr_engine *e, gr_status st)
{
    if (st != GR_OK || !e->opt.nonfinite_is_error)
        return st;
    for (int i = 0; i < e->n_heads; i++) {
        size_t bad = count_nonfinite(e, i);
        if (bad) {
            e->has_run = 1;
            return gr_fail(GR_ERR_NUMERIC,
                           "output %d (layer %d) holds %zu non-finite values (NaN/Inf) at %s: "
                           "activations overflow; fp32 or int8 avoid it",
                           i, e->head_layers[i], bad, gr_precision_name(e->opt.precision));
        }
    }
    return GR_OK;
}

static gr_status leave(gr_engine *e, gr_status st)
{
    if (st == GR_OK)
        e->has_run = 1;
    else
        gr_engine_fail(e, st);
    atomic_store(&e->busy, 0);
    return st;
}

/* A synchronous run is slot 0 submitted and waited for. */
static gr_status run_slot0(gr_engine *e, int u8)
{
    if (e->slot_busy[0])
        return gr_fail(GR_ERR_STATE, "slot 0 is in flight: gr_engine_wait(engine, 0) before a "
                                     "synchronous run");
    GR_TRY(e->ops->submit(e, 0, u8));
    return check_finite(e, e->ops->wait(e, 0, u8));
}

static gr_status run_copy(gr_engine *e, const void *input, int u8)
{
    if (!e || !input)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_run: NULL %s", e ? "input" : "engine");
    GR_TRY(enter(e));
    void *buffer;
    size_t bytes;
    if (e->slot_busy[0])
        return leave(e, run_slot0(e, u8)); /* refused before the input buffer is touched */
    gr_status st = e->ops->input_buffer(e, 0, u8, &buffer, &bytes);
    if (st == GR_OK) {
        memcpy(buffer, input, bytes);
        st = run_slot0(e, u8);
    }
    return leave(e, st);
}

gr_status gr_engine_run_f32(gr_engine *engine, const float *input) { return run_copy(engine, input, 0); }

gr_status gr_engine_run_u8(gr_engine *engine, const uint8_t *input) { return run_copy(engine, input, 1); }

/* Slot numbers come from the caller: outside 0..inflight-1 is an invalid argument. */
static gr_status check_slot(const gr_engine *e, int slot, const char *fn)
{
    if (!e)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: NULL engine", fn);
    if (slot < 0 || slot >= e->inflight)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: slot %d is outside 0..%d (engine option "
                                                "inflight=%d)",
                       fn, slot, e->inflight - 1, e->inflight);
    return GR_OK;
}

gr_status gr_engine_slot_input(gr_engine *engine, int slot, int u8, void **buffer, size_t *bytes)
{
    GR_TRY(check_slot(engine, slot, "gr_engine_slot_input"));
    if (!buffer || !bytes)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_slot_input: NULL argument");
    *buffer = NULL;
    *bytes = 0;
    GR_TRY(engine->ops->input_buffer(engine, slot, u8 != 0, buffer, bytes));
    engine->input_u8 = u8 != 0;
    return GR_OK;
}

gr_status gr_engine_input_buffer(gr_engine *engine, int u8, void **buffer, size_t *bytes)
{
    if (!engine || !buffer || !bytes)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_input_buffer: NULL argument");
    return gr_engine_slot_input(engine, 0, u8, buffer, bytes);
}

gr_status gr_engine_submit(gr_engine *engine, int slot)
{
    GR_TRY(check_slot(engine, slot, "gr_engine_submit"));
    GR_TRY(enter(engine));
    gr_status st = GR_OK;
    if (engine->slot_busy[slot])
        st = gr_fail(GR_ERR_STATE, "gr_engine_submit: slot %d is in flight already "
                                   "(gr_engine_wait for it first)", slot);
    if (st == GR_OK)
        st = engine->ops->submit(engine, slot, engine->input_u8);
    if (st == GR_OK) {
        engine->slot_busy[slot] = 1;
        engine->slot_u8[slot] = engine->input_u8;
    } else {
        gr_engine_fail(engine, st);
    }
    atomic_store(&engine->busy, 0); /* the results are the wait's: has_run stays as it was */
    return st;
}

gr_status gr_engine_wait(gr_engine *engine, int slot)
{
    GR_TRY(check_slot(engine, slot, "gr_engine_wait"));
    GR_TRY(enter(engine));
    if (!engine->slot_busy[slot]) {
        gr_fail(GR_ERR_STATE, "gr_engine_wait: nothing was submitted on slot %d", slot);
        return leave(engine, GR_ERR_STATE);
    }
    engine->slot_busy[slot] = 0;
    return leave(engine, check_finite(engine, engine->ops->wait(engine, slot,
                                                                engine->slot_u8[slot])));
}

int gr_engine_inflight(const gr_engine *engine) { return engine ? engine->inflight : 0; }

gr_status gr_engine_build_times(const gr_engine *engine, gr_build_times *times)
{
    if (!engine || !times)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_build_times: NULL argument");
    *times = engine->build_times;
    times->tactic_ms = engine->tactic_stats.search_ms;
    return GR_OK;
}

void gr_engine_build_detail(const gr_engine *engine, gr_build_detail *detail)
{
    if (!detail)
        return;
    memset(detail, 0, sizeof *detail);
    if (engine)
        *detail = engine->build_detail;
}

int gr_engine_micro_batch(const gr_engine *engine)
{
    if (!engine)
        return 0;
    return engine->micro_batch > 0 ? engine->micro_batch : engine->opt.batch;
}

gr_status gr_engine_memory(const gr_engine *engine, gr_engine_memory_info *info)
{
    if (!engine || !info)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_memory: NULL argument");
    memset(info, 0, sizeof *info);
    info->inflight = engine->inflight;
    return engine->ops->memory(engine, info);
}

gr_status gr_engine_run(gr_engine *engine)
{
    if (!engine)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_run: NULL engine");
    GR_TRY(enter(engine));
    return leave(engine, run_slot0(engine, engine->input_u8));
}

gr_status gr_engine_run_async(gr_engine *engine, void *cuda_stream, void *done_event)
{
    if (!engine)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_run_async: NULL engine");
    if (!engine->ops->run_async)
        return gr_fail(GR_ERR_UNSUPPORTED, "gr_engine_run_async: the %s backend runs synchronously "
                                           "only; use gr_engine_run()", engine->ops->name);
    GR_TRY(enter(engine));
    if (engine->slot_busy[0]) {
        gr_fail(GR_ERR_STATE, "gr_engine_run_async: slot 0 is in flight (gr_engine_wait first)");
        return leave(engine, GR_ERR_STATE);
    }
    return leave(engine, engine->ops->run_async(engine, cuda_stream, done_event));
}

gr_status gr_engine_output(const gr_engine *engine, int index, const float **data)
{
    if (!engine || !data)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_output: NULL argument");
    *data = NULL;
    if (index < 0 || index >= engine->n_heads)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "output index %d is outside 0..%d", index,
                       engine->n_heads - 1);
    if (!engine->has_run)
        return gr_fail(GR_ERR_STATE, "gr_engine_output: the engine has not run yet");
    *data = engine->outputs[index];
    return GR_OK;
}

gr_status gr_engine_output_nonfinite(const gr_engine *engine, int index, size_t *count)
{
    if (!engine || !count)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_output_nonfinite: NULL argument");
    *count = 0;
    if (index < 0 || index >= engine->n_heads)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "output index %d is outside 0..%d", index,
                       engine->n_heads - 1);
    if (!engine->has_run)
        return gr_fail(GR_ERR_STATE, "gr_engine_output_nonfinite: the engine has not run yet");
    *count = count_nonfinite(engine, index);
    return GR_OK;
}

/* Reads only what the build fixed (the network, the head count, the batch), never the state a
 * run changes: so it may run on any thread, beside runs and other calls of it. */
gr_status gr_engine_detect_outputs(const gr_engine *engine, const float *const *outputs,
                                   int batch_index, const gr_detect_options *opt,
                                   gr_detection **dets, int *n)
{
    if (!engine || !outputs || !opt || !dets || !n)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_detect: NULL argument");
    *dets = NULL;
    *n = 0;
    if (batch_index < 0 || batch_index >= engine->opt.batch)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "batch index %d is outside 0..%d", batch_index,
                       engine->opt.batch - 1);
    const gr_net *net = engine->net;
    if (net->tail) { /* an ONNX detection head, run on the host (runtime/detect_tail.c) */
        gr_detect_options full;
        GR_TRY(gr_detect_options_take(opt, &full));
        if (full.preprocess == GR_PREPROCESS_AUTO)
            full.preprocess = net->preprocess;
        return gr_detect_tail(net, outputs, batch_index, &full, dets, n);
    }
    /* Heads are raw conv outputs: the raw decoders apply the region/yolo activation (the ops'
     * reference arithmetic) to the boxes that can pass the threshold. */
    gr_head_output heads[GR_MAX_HEADS];
    int n_heads = 0;
    for (int i = 0; i < engine->n_heads; i++) {
        int decoder = gr_net_head_decoder(net, i);
        if (decoder < 0)
            continue;
        if (!outputs[i])
            return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_detect: output %d is NULL", i);
        const gr_layer *l = &net->layers[decoder];
        const float *raw = outputs[i] + (size_t)batch_index * gr_shape_elems(l->out);
        heads[n_heads++] = (gr_head_output){&l->p, raw, l->out, 1};
    }
    if (n_heads == 0)
        return gr_fail(GR_ERR_UNSUPPORTED, "%s: the network has no region or yolo layer to decode",
                       net->name);
    gr_detect_options full;
    GR_TRY(gr_detect_options_take(opt, &full));
    if (full.preprocess == GR_PREPROCESS_AUTO)
        full.preprocess = net->preprocess;
    return gr_detect_heads(heads, n_heads, net->w, net->h, &full, dets, n);
}

gr_status gr_engine_graph_output(const gr_engine *engine, const float *const *outputs,
                                 int batch_index, float **data, int64_t *dims, int *n_dims)
{
    if (!engine || !outputs || !data || !dims || !n_dims)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_graph_output: NULL argument");
    *data = NULL;
    *n_dims = 0;
    if (!engine->net->tail)
        return gr_fail(GR_ERR_UNSUPPORTED, "%s: no detection head runs on the host (its "
                       "outputs are gr_engine_output's)", engine->net->name);
    if (batch_index < 0 || batch_index >= engine->opt.batch)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "batch index %d is outside 0..%d", batch_index,
                       engine->opt.batch - 1);
    GR_TRY(gr_detect_tail_output(engine->net, outputs, batch_index, data));
    *n_dims = gr_tail_output_dims(engine->net->tail, dims);
    return GR_OK;
}

gr_status gr_engine_detect(const gr_engine *engine, int batch_index, const gr_detect_options *opt,
                           gr_detection **dets, int *n)
{
    if (!engine || !opt || !dets || !n)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_detect: NULL argument");
    *dets = NULL;
    *n = 0;
    if (!engine->has_run)
        return gr_fail(GR_ERR_STATE, "gr_engine_detect: the engine has not run yet");
    return gr_engine_detect_outputs(engine, (const float *const *)engine->outputs, batch_index,
                                    opt, dets, n);
}

gr_status gr_engine_timing(const gr_engine *engine, gr_timing *timing)
{
    if (!engine || !timing)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_timing: NULL argument");
    if (!engine->has_run)
        return gr_fail(GR_ERR_STATE, "gr_engine_timing: the engine has not run yet");
    *timing = engine->timing;
    return GR_OK;
}

const char *gr_engine_last_error(const gr_engine *engine) { return engine ? engine->error : ""; }

const char *gr_engine_notice(const gr_engine *engine) { return engine ? engine->notice : ""; }

int gr_engine_node_time_count(const gr_engine *engine) { return engine ? engine->n_node_times : 0; }

gr_status gr_engine_node_time(const gr_engine *engine, int index, gr_node_time *time)
{
    if (!engine || !time)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_node_time: NULL argument");
    if (index < 0 || index >= engine->n_node_times)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_node_time: index %d is outside 0..%d",
                       index, engine->n_node_times - 1);
    *time = engine->node_times[index];
    return GR_OK;
}

int gr_engine_tactic_count(const gr_engine *engine) { return engine ? engine->n_tactics : 0; }

gr_status gr_engine_tactic(const gr_engine *engine, int index, gr_tactic_info *info)
{
    if (!engine || !info)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_tactic: NULL argument");
    if (index < 0 || index >= engine->n_tactics)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_tactic: index %d is outside 0..%d",
                       index, engine->n_tactics - 1);
    *info = engine->tactics[index];
    return GR_OK;
}

gr_status gr_engine_tactic_stats(const gr_engine *engine, gr_tactic_stats *stats)
{
    if (!engine || !stats)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_tactic_stats: NULL argument");
    *stats = engine->tactic_stats;
    return GR_OK;
}
