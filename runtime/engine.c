/* gr_engine front: options, device resolution, output descriptors, the busy flag that rejects a
 * second thread entering a run, detection decoding, timing and error messages. Execution itself is
 * the backend's (cpu/engine.c, gpu/engine.c and the other gpu_*.c). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "planner/plan.h"
#include "runtime/detect.h"
#include "runtime/engine_internal.h"
#include "runtime/trace.h"

double gr_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

void gr_engine_options_default(gr_engine_options *opt)
{
    if (!opt)
        return;
    memset(opt, 0, sizeof *opt);
    opt->device = GR_DEVICE_AUTO;
    opt->precision = GR_PREC_FP32;
    opt->batch = 1;
    opt->gpu_index = 0;
    opt->use_cuda_graph = 1;
    opt->calib_method = GR_CALIB_MAX;
    opt->calib_percentile = 99.99f;
    opt->inflight = 1;
    opt->calib_device = GR_DEVICE_AUTO; /* a GPU engine calibrates on the GPU */
    opt->max_nrmse = GR_MAX_NRMSE_DEFAULT;
    opt->tactic_search = 1; /* docs/tactics.md: measured on the H100, 2026-11-23 */
    opt->f32_algo = GR_F32_ALGO_AUTO;
    opt->f32_split_k = GR_TOGGLE_AUTO;
    opt->pdl = GR_TOGGLE_AUTO;
    opt->gemm_tactic = GR_TOGGLE_AUTO;
}

static const char *const f32_algo_names[] = {"auto", "sgemm", "tf32x3", "implicit", "direct3x3"};
static const char *const toggle_names[] = {"auto", "on", "off"};

const char *gr_f32_algo_name(gr_f32_algo algo)
{
    return (unsigned)algo <= GR_F32_ALGO_DIRECT3X3 ? f32_algo_names[algo] : "?";
}

gr_status gr_f32_algo_parse(const char *name, gr_f32_algo *out)
{
    if (!name || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_f32_algo_parse: NULL argument");
    for (int a = 0; a <= GR_F32_ALGO_DIRECT3X3; a++)
        if (strcmp(name, f32_algo_names[a]) == 0) {
            *out = (gr_f32_algo)a;
            return GR_OK;
        }
    return gr_fail(GR_ERR_INVALID_ARGUMENT, "'%.40s' is not an fp32 algorithm (auto, sgemm, "
                   "tf32x3, implicit, direct3x3)", name);
}

const char *gr_toggle_name(gr_toggle toggle)
{
    return (unsigned)toggle <= GR_TOGGLE_OFF ? toggle_names[toggle] : "?";
}

gr_status gr_toggle_parse(const char *name, gr_toggle *out)
{
    if (!name || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_toggle_parse: NULL argument");
    for (int t = 0; t <= GR_TOGGLE_OFF; t++)
        if (strcmp(name, toggle_names[t]) == 0) {
            *out = (gr_toggle)t;
            return GR_OK;
        }
    return gr_fail(GR_ERR_INVALID_ARGUMENT, "'%.40s' is not auto, on or off", name);
}

/* The process environment's say over an engine's options, read here and nowhere else (README,
 * "Environment variables"): what CI and the test suites need to set for every engine of a
 * process without changing the programs. */
static void apply_environment(gr_engine_options *opt)
{
    const char *no_search = getenv("GR_DISABLE_TACTIC_SEARCH");
    if (no_search && no_search[0] == '1')
        opt->tactic_search = 0;
}

gr_status gr_engine_fail(gr_engine *e, gr_status status)
{
    if (e)
        snprintf(e->error, sizeof e->error, "%s", gr_last_error());
    return status;
}

static gr_status check_options(const gr_engine_options *opt)
{
    if (opt->batch < 1 || opt->batch > GR_MAX_BATCH)
        return gr_fail(GR_ERR_LIMIT, "engine option batch=%d is outside 1..%d", opt->batch,
                       GR_MAX_BATCH);
    if ((unsigned)opt->precision > GR_PREC_AUTO)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "engine option precision=%d is not a gr_precision",
                       (int)opt->precision);
    if (!(opt->max_nrmse >= 0.0f && opt->max_nrmse <= 1e30f))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "engine option max_nrmse=%g is not a number >= 0",
                       (double)opt->max_nrmse);
    if ((unsigned)opt->device > GR_DEVICE_GPU)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "engine option device=%d is not a gr_device",
                       (int)opt->device);
    if (opt->gpu_index < 0)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "engine option gpu_index=%d is negative",
                       opt->gpu_index);
    if ((unsigned)opt->calib_method > GR_CALIB_MSE)
        return gr_fail(GR_ERR_INVALID_ARGUMENT,
                       "engine option calib_method=%d is not a gr_calib_method",
                       (int)opt->calib_method);
    if (opt->inflight < 0 || opt->inflight > GR_MAX_INFLIGHT)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "engine option inflight=%d is outside 1..%d",
                       opt->inflight, GR_MAX_INFLIGHT);
    if ((unsigned)opt->calib_device > GR_DEVICE_GPU)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "engine option calib_device=%d is not a gr_device",
                       (int)opt->calib_device);
    if (opt->calib_threads < 0)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "engine option calib_threads=%d is negative",
                       opt->calib_threads);
    if ((unsigned)opt->f32_algo > GR_F32_ALGO_DIRECT3X3)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "engine option f32_algo=%d is not a gr_f32_algo",
                       (int)opt->f32_algo);
    const gr_toggle toggles[] = {opt->f32_split_k, opt->pdl, opt->gemm_tactic};
    const char *const toggle_options[] = {"f32_split_k", "pdl", "gemm_tactic"};
    for (int k = 0; k < 3; k++)
        if ((unsigned)toggles[k] > GR_TOGGLE_OFF)
            return gr_fail(GR_ERR_INVALID_ARGUMENT, "engine option %s=%d is not a gr_toggle",
                           toggle_options[k], (int)toggles[k]);
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

static void engine_free(gr_engine *e)
{
    if (e->ops && e->ops->destroy)
        e->ops->destroy(e);
    gr_net_free(e->net);
    free(e->layer_prec);
    free(e->layer_prec_view);
    free(e->preset_range);
    free(e->tactics);
    free(e);
}

/* The explicit map (layer_precision): exactly one FP32 / FP16 / INT8 per layer, copied. */
static gr_status take_layer_precision(gr_engine *e, const gr_engine_options *opt)
{
    const gr_net *net = e->net;
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
    e->layer_prec = gr_malloc((size_t)net->n_layers * sizeof *e->layer_prec, "precision map");
    if (!e->layer_prec)
        return GR_ERR_OUT_OF_MEMORY;
    memcpy(e->layer_prec, opt->layer_precision, (size_t)net->n_layers * sizeof *e->layer_prec);
    return GR_OK;
}

/* Resolve the engine's precision: the automatic search, then, for a map, opt.precision becomes
 * its widest reduced precision (what the backends calibrate and fuse for); the per-layer view
 * for gr_engine_layer_precision(). */
static gr_status resolve_precision(gr_engine *e, const gr_engine_options *opt)
{
    const gr_net *net = e->net;
    GR_TRY(take_layer_precision(e, opt));
    if (opt->precision == GR_PREC_AUTO)
        GR_TRY(gr_auto_precision(e));
    e->opt.layer_precision = NULL; /* copied: no pointer to the caller's map is kept */
    e->opt.n_layer_precision = 0;
    e->layer_prec_view = gr_malloc((size_t)net->n_layers * sizeof *e->layer_prec_view,
                                   "precision map");
    if (!e->layer_prec_view)
        return GR_ERR_OUT_OF_MEMORY;
    if (e->layer_prec) {
        int any_i8 = 0, any_f16 = 0;
        for (int i = 0; i < net->n_layers; i++) {
            if (gr_op_has((int)net->layers[i].p.op, GR_OPF_F32_ONLY))
                continue;
            any_i8 |= e->layer_prec[i] == GR_PREC_INT8;
            any_f16 |= e->layer_prec[i] == GR_PREC_FP16;
        }
        e->opt.precision = any_i8 ? GR_PREC_INT8 : any_f16 ? GR_PREC_FP16 : GR_PREC_FP32;
    }
    for (int i = 0; i < net->n_layers; i++)
        e->layer_prec_view[i] = gr_op_has((int)net->layers[i].p.op, GR_OPF_F32_ONLY) ? GR_PREC_FP32
                                : e->layer_prec ? e->layer_prec[i]
                                                : e->opt.precision;
    return GR_OK;
}

void gr_engine_plan_precision(const gr_engine *e, gr_plan_options *po)
{
    po->precision = e->opt.precision;
    po->layer_precision = e->layer_prec;
    po->n_layer_precision = e->layer_prec ? e->net->n_layers : 0;
}

gr_status gr_engine_ranges(gr_engine *e, float **layer_range, float *input_range)
{
    if (!e->preset_range)
        return gr_engine_calibrate(e, layer_range, input_range);
    size_t bytes = (size_t)e->net->n_layers * sizeof(float);
    *layer_range = gr_malloc(bytes, "calibration ranges");
    if (!*layer_range)
        return GR_ERR_OUT_OF_MEMORY;
    memcpy(*layer_range, e->preset_range, bytes);
    *input_range = e->preset_input_range;
    return GR_OK;
}

const gr_precision *gr_engine_layer_precision(const gr_engine *engine, int *n)
{
    if (n)
        *n = engine ? engine->net->n_layers : 0;
    return engine ? engine->layer_prec_view : NULL;
}

static gr_status build(const gr_model *model, const gr_engine_options *opt,
                       const float *preset_range, float preset_input_range, int observable,
                       gr_engine **out);

gr_status gr_engine_build(const gr_model *model, const gr_engine_options *opt, gr_engine **out)
{
    return build(model, opt, NULL, 0.0f, 0, out);
}

gr_status gr_engine_build_preset(const gr_model *model, const gr_engine_options *opt,
                                 const float *layer_range, float input_range, gr_engine **out)
{
    return build(model, opt, layer_range, input_range, 0, out);
}

gr_status gr_engine_build_observable(const gr_model *model, const gr_engine_options *opt,
                                     gr_engine **out)
{
    return build(model, opt, NULL, 0.0f, 1, out);
}

static gr_status build(const gr_model *model, const gr_engine_options *opt,
                       const float *preset_range, float preset_input_range, int observable,
                       gr_engine **out)
{
    if (!model || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_build: NULL %s", model ? "out" : "model");
    *out = NULL;
    gr_engine_options defaults;
    if (!opt) {
        gr_engine_options_default(&defaults);
        opt = &defaults;
    }
    GR_TRY(check_options(opt));
    GR_TRY(check_tensor_sizes(model->net, opt->batch));
    gr_engine *e = gr_calloc(1, sizeof *e, "engine");
    if (!e)
        return GR_ERR_OUT_OF_MEMORY;
    e->opt = *opt;
    apply_environment(&e->opt);
    e->observable = observable;
    e->inflight = opt->inflight > 0 ? opt->inflight : 1;
    e->opt.inflight = e->inflight;
    atomic_init(&e->busy, 0);
    gr_status st = gr_net_clone(model->net, &e->net);
    if (st != GR_OK) {
        free(e);
        return st;
    }
    e->n_heads = gr_net_heads(e->net, e->head_layers, GR_MAX_HEADS);
    if (e->n_heads < 1) {
        gr_fail(GR_ERR_UNSUPPORTED, "%s: network has no output layer", e->net->name);
        engine_free(e);
        return GR_ERR_UNSUPPORTED;
    }
    for (int i = 0; i < e->n_heads; i++) {
        gr_shape s = e->net->layers[e->head_layers[i]].out;
        e->head_desc[i] = (gr_tensor_desc){opt->batch, s.c, s.h, s.w, GR_DTYPE_F32};
        size_t elems;
        if (!gr_mul_size(gr_shape_elems(s), (size_t)opt->batch, &elems) ||
            elems > GR_MAX_TENSOR_ELEMS) {
            engine_free(e);
            return gr_fail(GR_ERR_LIMIT, "output %d of %d x %dx%dx%d is too large", i, opt->batch,
                           s.c, s.h, s.w);
        }
    }
    e->input_u8 = 1;

    gr_device device = opt->device;
    if (device == GR_DEVICE_AUTO)
        device = gr_cuda_device_count() > 0 ? GR_DEVICE_GPU : GR_DEVICE_CPU;
    e->device = device;
    if (preset_range) {
        size_t bytes = (size_t)e->net->n_layers * sizeof(float);
        e->preset_range = gr_malloc(bytes, "calibration ranges");
        if (!e->preset_range) {
            engine_free(e);
            return GR_ERR_OUT_OF_MEMORY;
        }
        memcpy(e->preset_range, preset_range, bytes);
        e->preset_input_range = preset_input_range;
    }
    st = resolve_precision(e, opt);
    if (st != GR_OK) {
        engine_free(e);
        return st;
    }
    gr_trace_push(device == GR_DEVICE_GPU ? "graphrun: engine build (GPU)"
                                          : "graphrun: engine build (CPU)");
    st = device == GR_DEVICE_GPU ? gr_backend_gpu_init(e) : gr_backend_cpu_init(e);
    gr_trace_pop();
    /* The caller's calibration inputs are read during build only: keep no pointers to them. */
    e->opt.calib_images = NULL;
    e->opt.calib_cache = NULL;
    e->opt.timing_cache = NULL;
    e->opt.calib_progress = NULL;
    e->opt.calib_progress_user = NULL;
    free(e->preset_range);
    e->preset_range = NULL;
    if (st == GR_OK && opt->precision == GR_PREC_AUTO && device == GR_DEVICE_GPU)
        st = gr_auto_precision_measure(e);
    if (st != GR_OK) {
        engine_free(e);
        return st;
    }
    *out = e;
    return GR_OK;
}

void gr_engine_destroy(gr_engine *engine)
{
    if (engine)
        engine_free(engine);
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
    /* Heads are raw conv outputs: the raw decoders apply the region/yolo activation (the ops'
     * reference arithmetic) to the boxes that can pass the threshold. */
    const gr_net *net = engine->net;
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
    return gr_detect_heads(heads, n_heads, net->w, net->h, opt, dets, n);
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

void gr_engine_add_notice(gr_engine *e, const char *line)
{
    size_t used = strlen(e->notice);
    if (!line[0] || used + 2 >= sizeof e->notice)
        return;
    snprintf(e->notice + used, sizeof e->notice - used, "%s%s", used ? "\n" : "", line);
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
