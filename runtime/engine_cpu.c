/* CPU backend: runs the reference executor (runtime/reference.c) layer by layer in float32 with
 * Darknet's semantics. It is the oracle the GPU engine is checked against, and what graphrun runs
 * on a machine without a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/engine_internal.h"
#include "runtime/reference.h"

typedef struct cpu_state {
    float *input; /* batch x c x h x w, for u8 input conversion */
    float **layer_outputs;
} cpu_state;

static void cpu_destroy(gr_engine *e)
{
    cpu_state *s = e->impl;
    if (!s)
        return;
    free(s->input);
    free(s->layer_outputs);
    free(s);
    e->impl = NULL;
}

static gr_status cpu_run(gr_engine *e, const float *f32, const uint8_t *u8)
{
    cpu_state *s = e->impl;
    const gr_net *net = e->net;
    int batch = e->opt.batch;
    double t0 = gr_now_us();
    if (u8) {
        /* uint8 HWC -> float CHW in [0,1]. */
        size_t plane = (size_t)net->w * (size_t)net->h;
        for (int b = 0; b < batch; b++) {
            const uint8_t *src = u8 + (size_t)b * plane * (size_t)net->c;
            float *dst = s->input + (size_t)b * plane * (size_t)net->c;
            for (size_t p = 0; p < plane; p++)
                for (int ch = 0; ch < net->c; ch++)
                    dst[(size_t)ch * plane + p] = (float)src[p * (size_t)net->c + (size_t)ch] / 255.0f;
        }
        f32 = s->input;
    }
    double t1 = gr_now_us();
    memset(s->layer_outputs, 0, (size_t)net->n_layers * sizeof *s->layer_outputs);
    gr_status st = gr_reference_forward(net, f32, batch, 0, s->layer_outputs);
    double t2 = gr_now_us();
    if (st == GR_OK) {
        for (int i = 0; i < e->n_heads; i++) {
            const float *src = s->layer_outputs[e->head_layers[i]];
            size_t elems = gr_shape_elems(net->layers[e->head_layers[i]].out) * (size_t)batch;
            memcpy(e->outputs[i], src, elems * sizeof(float));
        }
    }
    for (int i = 0; i < net->n_layers; i++)
        free(s->layer_outputs[i]);
    double t3 = gr_now_us();
    e->timing = (gr_timing){.convert_us = t1 - t0, .copy_us = 0.0, .compute_us = t2 - t1,
                            .end_to_end_us = t3 - t0};
    return st;
}

static const gr_backend_ops cpu_ops = {"cpu", cpu_run, cpu_destroy};

gr_status gr_backend_cpu_init(gr_engine *e)
{
    if (e->opt.precision != GR_PREC_FP32)
        return gr_fail(GR_ERR_UNSUPPORTED,
                       "the CPU reference runs fp32 only so far; %s needs the GPU engine",
                       gr_precision_name(e->opt.precision));
    cpu_state *s = gr_calloc(1, sizeof *s, "CPU engine");
    if (!s)
        return GR_ERR_OUT_OF_MEMORY;
    e->impl = s;
    e->ops = &cpu_ops;
    size_t elems = (size_t)e->net->c * (size_t)e->net->h * (size_t)e->net->w * (size_t)e->opt.batch;
    s->input = gr_calloc(elems, sizeof(float), "CPU engine input");
    s->layer_outputs = gr_calloc((size_t)e->net->n_layers, sizeof(float *), "CPU engine outputs");
    if (!s->input || !s->layer_outputs)
        return GR_ERR_OUT_OF_MEMORY;
    snprintf(e->device_name, sizeof e->device_name, "CPU reference");
    return GR_OK;
}
