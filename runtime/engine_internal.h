/* Internal view of gr_model and gr_engine, shared by the runtime's files.
 *
 * An engine is a front (this struct: options, output buffers, detection, timing, error message,
 * the busy flag that rejects concurrent runs) and a backend that executes: the CPU reference
 * (cpu/engine.c) or the CUDA engine (gpu_*.c, see gpu/backend.h). Backends own the input staging
 * buffers and the output buffers (float NCHW, one per head) of every slot (runs in flight: the
 * front checks slot numbers and which slots are in flight; backends see valid slots only) and
 * fill `timing` on each wait. */
#ifndef GR_RUNTIME_ENGINE_INTERNAL_H
#define GR_RUNTIME_ENGINE_INTERNAL_H

#include <stdatomic.h>

#include "graphrun/runtime.h"
#include "models/net.h"

#define GR_MAX_HEADS 8

struct gr_model {
    gr_net *net;
    uint64_t seed;
};

typedef struct gr_backend gr_backend;

typedef struct gr_backend_ops {
    const char *name;
    /* Slot `slot`'s input staging buffer: uint8 HWC (u8 = 1) or float CHW in [0,1]. */
    gr_status (*input_buffer)(gr_engine *e, int slot, int u8, void **buffer, size_t *bytes);
    /* Start a run of the slot on its staging buffer of that type (the CPU runs it to the end). */
    gr_status (*submit)(gr_engine *e, int slot, int u8);
    /* Finish the slot's run: point e->outputs at the slot's outputs and fill e->timing. */
    gr_status (*wait)(gr_engine *e, int slot, int u8);
    /* Asynchronous run of slot 0 on a caller's stream; NULL when the backend cannot. */
    gr_status (*run_async)(gr_engine *e, void *stream, void *event);
    gr_status (*memory)(const gr_engine *e, gr_engine_memory_info *info);
    void (*destroy)(gr_engine *e);
} gr_backend_ops;

struct gr_engine {
    gr_engine_options opt;
    gr_device device;      /* resolved */
    char device_name[128];
    gr_net *net;           /* the engine's own copy of the model's network */
    int n_heads;
    int head_layers[GR_MAX_HEADS];
    gr_tensor_desc head_desc[GR_MAX_HEADS];
    float *outputs[GR_MAX_HEADS]; /* raw head outputs of the last run, float NCHW; set by the
                                     backend, which owns them (pinned memory on the GPU) */
    int input_u8;          /* type of the staging buffer gr_engine_run() and submits read */
    int inflight;          /* slots: opt.inflight, 0 taken as 1 */
    int slot_busy[GR_MAX_INFLIGHT]; /* submitted and not waited for */
    int slot_u8[GR_MAX_INFLIGHT];   /* the input type of the slot's submitted run */
    int has_run;
    int failed;            /* a run failed in a way that leaves the engine unusable */
    gr_timing timing;
    const gr_backend_ops *ops;
    void *impl;            /* backend state */
    atomic_int busy;
    char error[1024];
    char notice[2048];     /* gr_engine_notice(): from the build, e.g. a stale calibration cache,
                              the automatic precision map */
    /* Precision per network layer (net->n_layers entries, owned), or NULL for a uniform
     * engine. With a map, opt.precision is the map's widest reduced precision (INT8 when any
     * layer is int8, else FP16, else FP32): what the backends calibrate and fuse for. */
    gr_precision *layer_prec;
    gr_precision *layer_prec_view; /* gr_engine_layer_precision(): layer_prec or uniform */
    /* Build-time only (NULL afterwards): int8 ranges already computed (by the automatic
     * search), which gr_engine_ranges() hands to the backend instead of calibrating again. */
    float *preset_range;
    float preset_input_range;
    int observable; /* gr_engine_build_observable: plan without fusions */
    gr_tactic_info *tactics; /* the GPU backend's conv tactics (uint8 graph), malloc'd */
    int n_tactics;
    gr_tactic_stats tactic_stats;
};

/* Append one line to e->notice (lines separated by '\n'). */
void gr_engine_add_notice(gr_engine *e, const char *line);

/* Deep copy of a network (layers, weights, class names) for an engine to own. */
gr_status gr_net_clone(const gr_net *src, gr_net **out);

/* Record the thread message into the engine too and return status. */
gr_status gr_engine_fail(gr_engine *e, gr_status status);

/* Backends. */
gr_status gr_backend_cpu_init(gr_engine *e);
gr_status gr_backend_gpu_init(gr_engine *e);

/* INT8 activation ranges for the engine's network (per layer, and the input), from
 * e->opt.calib_cache or by calibrating on e->opt.calib_images. *layer_range is malloc'd. */
gr_status gr_engine_calibrate(gr_engine *e, float **layer_range, float *input_range);

/* The int8 ranges of the engine's network: a copy of the preset ones, else calibrated
 * (gr_engine_calibrate). *layer_range is malloc'd. */
gr_status gr_engine_ranges(gr_engine *e, float **layer_range, float *input_range);

/* The backends' plan options for the engine's precision: po->precision and, for a mixed
 * engine, po->layer_precision (pointing into the engine). */
struct gr_plan_options;
void gr_engine_plan_precision(const gr_engine *e, struct gr_plan_options *po);

/* runtime/precision/auto.c: choose the per-layer map of a GR_PREC_AUTO engine (e->layer_prec,
 * e->preset_range) and describe it in e->notice. */
gr_status gr_auto_precision(gr_engine *e);
/* After a GR_PREC_AUTO GPU engine is built: its measured per-layer latency, into the notice. */
gr_status gr_auto_precision_measure(gr_engine *e);
/* One line "precision map: L0 int8, L2 fp16, ..." of the reduced-precision layers that compute
 * (convolutions) into buf. */
void gr_precision_map_str(const gr_net *net, const gr_precision *map, char *buf, size_t len);

/* GPU engines (gpu/debug.c): the time of each network layer in microseconds (us_per_layer has
 * net->n_layers entries; 0 for layers without a node), medians of eager runs node by node. */
gr_status gr_engine_layer_times(gr_engine *engine, double *us_per_layer);

/* gr_engine_build with int8 ranges already known (layer_range: n_layers entries, copied): no
 * calibration. For the automatic search's timing engines. */
gr_status gr_engine_build_preset(const gr_model *model, const gr_engine_options *opt,
                                 const float *layer_range, float input_range, gr_engine **out);

/* gr_engine_build with every network layer's value kept as its own tensor (no fusion, so no
 * maxpool hides its conv's output): for int8 calibration's fp32 statistics engine, which observes
 * each layer's value after its node. */
gr_status gr_engine_build_observable(const gr_model *model, const gr_engine_options *opt,
                                     gr_engine **out);

/* Monotonic clock in microseconds. */
double gr_now_us(void);

#endif
