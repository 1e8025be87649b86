/* CPU backend. fp32 runs the reference executor (runtime/cpu/reference.c) layer by layer with Darknet's
 * semantics: the oracle the GPU engine is checked against, and what graphrun runs on a machine
 * without a GPU. fp16 and int8 run the planner's CPU executor on the same plan the GPU would run,
 * emulating the precision's arithmetic (f16 rounding, int8 quantization with the same calibrated
 * scales, exact int32 accumulation): slow, but the same numbers as the GPU's up to accumulation
 * order.
 * Runs in flight: every slot has its own input buffers and outputs; a submit runs to the end (the
 * activations are shared, as only one run is ever in progress) and a wait points the engine's
 * outputs at the slot's. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "planner/plan.h"
#include "runtime/engine_internal.h"
#include "runtime/cpu/reference.h"

typedef struct cpu_state {
    float *input_f32[GR_MAX_INFLIGHT];  /* per slot: batch x c x h x w in [0,1] */
    uint8_t *input_u8[GR_MAX_INFLIGHT]; /* per slot: batch x h x w x c */
    float *outputs[GR_MAX_INFLIGHT][GR_MAX_HEADS]; /* per slot: the heads, float NCHW */
    gr_timing timing[GR_MAX_INFLIGHT];
    float **layer_outputs;
    gr_plan *plan;       /* fp16 / int8 emulation */
    gr_plan_exec *exec;
} cpu_state;

static void cpu_destroy(gr_engine *e)
{
    cpu_state *s = e->impl;
    if (!s)
        return;
    for (int k = 0; k < GR_MAX_INFLIGHT; k++) {
        free(s->input_f32[k]);
        free(s->input_u8[k]);
        for (int i = 0; i < e->n_heads; i++)
            free(s->outputs[k][i]);
    }
    free(s->layer_outputs);
    gr_plan_exec_destroy(s->exec);
    gr_plan_free(s->plan);
    for (int i = 0; i < e->n_heads; i++)
        e->outputs[i] = NULL;
    free(s);
    e->impl = NULL;
}

static size_t input_elems(const gr_engine *e)
{
    return (size_t)e->net->c * (size_t)e->net->h * (size_t)e->net->w * (size_t)e->opt.batch;
}

static gr_status cpu_input_buffer(gr_engine *e, int slot, int u8, void **buffer, size_t *bytes)
{
    cpu_state *s = e->impl;
    *buffer = u8 ? (void *)s->input_u8[slot] : (void *)s->input_f32[slot];
    *bytes = input_elems(e) * (u8 ? 1 : sizeof(float));
    return GR_OK;
}

static gr_status cpu_submit(gr_engine *e, int slot, int u8)
{
    cpu_state *s = e->impl;
    const gr_net *net = e->net;
    int batch = e->opt.batch;
    float *input_f32 = s->input_f32[slot];
    float **outputs = s->outputs[slot];
    double t0 = gr_now_us();
    if (u8) {
        /* uint8 HWC -> float CHW in [0,1]. */
        size_t plane = (size_t)net->w * (size_t)net->h;
        for (int b = 0; b < batch; b++) {
            const uint8_t *src = s->input_u8[slot] + (size_t)b * plane * (size_t)net->c;
            float *dst = input_f32 + (size_t)b * plane * (size_t)net->c;
            for (size_t p = 0; p < plane; p++)
                for (int ch = 0; ch < net->c; ch++)
                    dst[(size_t)ch * plane + p] = (float)src[p * (size_t)net->c + (size_t)ch] / 255.0f;
        }
    }
    double t1 = gr_now_us();
    if (s->exec) {
        gr_status st = gr_plan_execute(s->exec, input_f32);
        double t2 = gr_now_us();
        for (int i = 0; i < e->n_heads && st == GR_OK; i++)
            memcpy(outputs[i], gr_plan_exec_output(s->exec, i),
                   gr_shape_elems(net->layers[e->head_layers[i]].out) * (size_t)batch * sizeof(float));
        s->timing[slot] = (gr_timing){.convert_us = t1 - t0, .compute_us = t2 - t1,
                                .end_to_end_us = gr_now_us() - t0};
        return st;
    }
    memset(s->layer_outputs, 0, (size_t)net->n_layers * sizeof *s->layer_outputs);
    gr_status st = gr_reference_forward(net, input_f32, batch, 0, s->layer_outputs);
    double t2 = gr_now_us();
    if (st == GR_OK) {
        for (int i = 0; i < e->n_heads; i++) {
            const float *src = s->layer_outputs[e->head_layers[i]];
            size_t elems = gr_shape_elems(net->layers[e->head_layers[i]].out) * (size_t)batch;
            memcpy(outputs[i], src, elems * sizeof(float));
        }
    }
    for (int i = 0; i < net->n_layers; i++)
        free(s->layer_outputs[i]);
    double t3 = gr_now_us();
    s->timing[slot] = (gr_timing){.convert_us = t1 - t0, .copy_us = 0.0, .compute_us = t2 - t1,
                            .end_to_end_us = t3 - t0};
    return st;
}

static gr_status cpu_wait(gr_engine *e, int slot, int u8)
{
    (void)u8; /* both input types run into the same outputs */
    cpu_state *s = e->impl;
    for (int i = 0; i < e->n_heads; i++)
        e->outputs[i] = s->outputs[slot][i];
    e->timing = s->timing[slot];
    return GR_OK;
}

/* Host bytes of a run, as the fp32 reference executor allocates them: per slot the two input
 * buffers and the head outputs (*io), and once the peak of the layer outputs alive at once (an output lives from its layer to
 * its last reader; heads live to the end). The fp16/int8 emulation keeps the same activations in
 * a liveness-planned arena, so this is its estimate too. Sizes were bounded by the front, so
 * nothing overflows: at most GR_MAX_LAYERS tensors of GR_MAX_TENSOR_ELEMS floats. */
static gr_status cpu_run_bytes(const gr_engine *e, size_t *io, size_t *live_peak_bytes)
{
    const gr_net *net = e->net;
    size_t batch = (size_t)e->opt.batch;
    int *last_reader = gr_calloc((size_t)net->n_layers, sizeof *last_reader, "CPU engine sizing");
    if (!last_reader)
        return GR_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < net->n_layers; i++)
        last_reader[i] = i;
    for (int i = 0; i < net->n_layers; i++)
        for (int k = 0; k < net->layers[i].n_inputs; k++)
            if (net->layers[i].inputs[k] >= 0)
                last_reader[net->layers[i].inputs[k]] = i;
    for (int h = 0; h < e->n_heads; h++)
        last_reader[e->head_layers[h]] = net->n_layers;
    size_t total = input_elems(e) * (sizeof(float) + 1), live_peak = 0;
    for (int h = 0; h < e->n_heads; h++)
        total += gr_shape_elems(net->layers[e->head_layers[h]].out) * batch * sizeof(float);
    for (int i = 0; i < net->n_layers; i++) {
        size_t live = 0;
        for (int j = 0; j <= i; j++)
            if (last_reader[j] >= i)
                live += gr_shape_elems(net->layers[j].out) * batch * sizeof(float);
        if (live > live_peak)
            live_peak = live;
    }
    free(last_reader);
    *io = total;
    *live_peak_bytes = live_peak;
    return GR_OK;
}

/* Refuse a run that cannot fit in this machine's memory before allocating any of it. */
static gr_status check_host_memory(const gr_engine *e)
{
    size_t io, live;
    GR_TRY(cpu_run_bytes(e, &io, &live));
    size_t need = io * (size_t)e->inflight + live;
    long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page_size <= 0)
        return GR_OK; /* unknown: let the allocations decide */
    size_t have;
    if (!gr_mul_size((size_t)pages, (size_t)page_size, &have))
        return GR_OK;
    if (need > have)
        return gr_fail(GR_ERR_LIMIT,
                       "%s: the CPU engine needs about %.1f GiB of host memory for a batch of %d "
                       "(inputs, live activations, outputs); this machine has %.1f GiB",
                       e->net->name, (double)need / 1073741824.0, e->opt.batch,
                       (double)have / 1073741824.0);
    return GR_OK;
}

static gr_status cpu_memory(const gr_engine *e, gr_engine_memory_info *info)
{
    size_t floats = 0;
    for (int i = 0; i < e->net->n_layers; i++) {
        const gr_weights *w = &e->net->layers[i].w;
        floats += w->n_weights + (size_t)w->n * (1 + (w->scales ? 3 : 0));
    }
    info->weights_bytes = floats * sizeof(float);
    GR_TRY(cpu_run_bytes(e, &info->io_bytes, &info->arena_bytes));
    info->total_bytes = info->weights_bytes + info->arena_bytes +
                        info->io_bytes * (size_t)e->inflight;
    return GR_OK;
}

/* A saved CPU engine needs nothing beyond the front's plan inputs (network, precision map, int8
 * ranges): the CPU backend plans from those and searches nothing, so its blob is empty. */
static gr_status cpu_save_blob(const gr_engine *e, struct gr_bytes *out)
{
    (void)e;
    (void)out;
    return GR_OK;
}

static const gr_backend_ops cpu_ops = {"cpu",      cpu_input_buffer, cpu_submit,   cpu_wait,
                                       NULL,       cpu_memory,       cpu_destroy,  cpu_save_blob,
                                       NULL,       NULL};

gr_status gr_backend_cpu_init(gr_engine *e, const gr_backend_inputs *in)
{
    GR_TRY(check_host_memory(e));
    cpu_state *s = gr_calloc(1, sizeof *s, "CPU engine");
    if (!s)
        return GR_ERR_OUT_OF_MEMORY;
    e->impl = s;
    e->ops = &cpu_ops;
    if (e->opt.precision != GR_PREC_FP32) {
        gr_plan_options po;
        gr_plan_options_default(&po);
        gr_engine_plan_precision(e, &po);
        po.batch = e->opt.batch;
        po.input_u8 = 0; /* float input: u8 input is widened to v / 255 first, the same values */
        /* The GPU engine's arithmetic: a head whose output is dequantized writes f32 from its
         * accumulator (no int8/f16 rounding of the network output). The other fusions change no
         * value. So the CPU engine stays the exact emulation of the GPU's int8. */
        po.fuse_output_dequantize = 1;
        GR_TRY(gr_plan_build(e->net, &po, &s->plan));
        if (e->opt.precision == GR_PREC_INT8)
            GR_TRY(gr_plan_set_ranges(s->plan, in->layer_range, in->input_range));
        GR_TRY(gr_plan_exec_create(s->plan, 0, &s->exec));
    }
    s->layer_outputs = gr_calloc((size_t)e->net->n_layers, sizeof(float *), "CPU engine outputs");
    if (!s->layer_outputs)
        return GR_ERR_OUT_OF_MEMORY;
    for (int k = 0; k < e->inflight; k++) {
        s->input_f32[k] = gr_calloc(input_elems(e), sizeof(float), "CPU engine input");
        s->input_u8[k] = gr_calloc(input_elems(e), 1, "CPU engine input");
        if (!s->input_f32[k] || !s->input_u8[k])
            return GR_ERR_OUT_OF_MEMORY;
        for (int i = 0; i < e->n_heads; i++) {
            const gr_tensor_desc *d = &e->head_desc[i];
            s->outputs[k][i] = gr_calloc((size_t)d->n * (size_t)d->c * (size_t)d->h * (size_t)d->w,
                                         sizeof(float), "CPU engine output");
            if (!s->outputs[k][i])
                return GR_ERR_OUT_OF_MEMORY;
        }
    }
    for (int i = 0; i < e->n_heads; i++)
        e->outputs[i] = s->outputs[0][i];
    snprintf(e->device_name, sizeof e->device_name, "%s",
             s->exec ? "CPU reference (emulating the GPU's arithmetic)" : "CPU reference");
    return GR_OK;
}
