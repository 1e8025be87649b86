/* Internal view of gr_model and gr_engine, shared by the runtime's files.
 *
 * An engine is a front (this struct: options, output buffers, detection, timing, error message,
 * the busy flag that rejects concurrent runs) and a backend that executes: the CPU reference
 * (cpu/engine.c) or the CUDA engine (the files of gpu/, see gpu/backend.h). Backends own the input staging
 * buffers and the output buffers (float NCHW, one per head) of every slot (runs in flight: the
 * front checks slot numbers and which slots are in flight; backends see valid slots only) and
 * fill `timing` on each wait.
 *
 * A build flows one way (docs/calibration.md, "How a build flows"): gr_engine_build (engine.c)
 * resolves everything first - the precision map (explicit, or the automatic search of
 * precision/auto.c) and the int8 ranges (precision/calibrate.c: the calibration cache or a
 * calibration) - and then builds the engine from those resolved inputs with gr_engine_create
 * (build.c), the one build path, which hands them to the backend's init. Calibration's fp32
 * statistics engine and the automatic search's timing engines are ordinary requests to that same
 * gr_engine_create. Backends never call back up: file by file,
 *   engine.c -> precision/auto.c -> precision/calibrate.c -> gpu/calib.c -> build.c
 *            -> cpu/engine.c, gpu/engine.c -> engine_common.c
 * and tests/test_layering.py fails on any cycle among runtime/ files. */
#ifndef GR_RUNTIME_ENGINE_INTERNAL_H
#define GR_RUNTIME_ENGINE_INTERNAL_H

#include <stdatomic.h>

#include "graphrun/runtime.h"
#include "models/net.h"
#include "runtime/build_detail.h"

#define GR_MAX_HEADS 8
#define GR_NOTICE_LEN 2048 /* the engine's notice, and the front's while it resolves */

struct gr_model {
    gr_net *net;
    uint64_t seed;
};

typedef struct gr_backend gr_backend;
struct gr_bytes;

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
    /* Saved engines (engine_file.c): append what the backend needs besides the front's plan
     * inputs to rebuild this engine without searching (gr_backend_inputs.blob on load). */
    gr_status (*save_blob)(const gr_engine *e, struct gr_bytes *out);
    /* JPEG decoding on the device into the slot's next input (gr_engine_decode_jpegs), and the
     * decoder's name once opened; NULL where the backend has none. */
    gr_status (*decode_jpegs)(gr_engine *e, int slot, int n, const uint8_t *const *jpeg,
                              const size_t *bytes, int *decoded);
    const char *(*jpeg_decoder)(const gr_engine *e);
} gr_backend_ops;

struct gr_engine {
    gr_engine_options opt;
    gr_device device;      /* resolved */
    char device_name[128];
    gr_net *net;           /* the engine's own copy of the model's network */
    gr_file_view weight_file; /* a load from a mapped file: the mapping net's weights point into
                                 (net->weights_borrowed), released after the net */
    int n_heads;
    int head_layers[GR_MAX_HEADS];
    gr_tensor_desc head_desc[GR_MAX_HEADS];
    float *outputs[GR_MAX_HEADS]; /* raw head outputs of the last run, float NCHW; set by the
                                     backend, which owns them (pinned memory on the GPU) */
    int input_u8;          /* type of the staging buffer gr_engine_run() and submits read */
    int inflight;          /* slots: opt.inflight, 0 taken as 1 */
    int micro_batch;       /* images per pass of the GPU graph (gr_engine_micro_batch); 0: the
                              whole batch (the CPU engine) */
    int slot_busy[GR_MAX_INFLIGHT]; /* submitted and not waited for */
    int slot_u8[GR_MAX_INFLIGHT];   /* the input type of the slot's submitted run */
    int has_run;
    int failed;            /* a run failed in a way that leaves the engine unusable */
    gr_timing timing;
    double jpeg_us;        /* the last waited run's JPEG decoding on the device (gr_engine_jpeg_decoder) */
    const gr_backend_ops *ops;
    void *impl;            /* backend state */
    atomic_int busy;
    char error[1024];
    char notice[GR_NOTICE_LEN]; /* gr_engine_notice(): from the build, e.g. a stale calibration
                                   cache, the automatic precision map */
    /* Precision per network layer (net->n_layers entries, owned), or NULL for a uniform
     * engine. With a map, opt.precision is the map's widest reduced precision (INT8 when any
     * layer is int8, else FP16, else FP32): what the backends calibrate and fuse for. */
    gr_precision *layer_prec;
    gr_precision *layer_prec_view; /* gr_engine_layer_precision(): layer_prec or uniform */
    gr_tactic_info *tactics; /* the GPU backend's conv tactics (uint8 graph), malloc'd */
    int n_tactics;
    gr_tactic_stats tactic_stats;
    /* The int8 ranges the engine was built with (n_layers entries, owned; NULL when no layer
     * computes in int8) and the input's: kept for gr_engine_save. */
    float *layer_range;
    float input_range;
    int observable;
    struct gr_model model_view; /* gr_engine_model(): the engine's network as a model (borrowed
                                   net; never destroyed as a model) */
    gr_build_times build_times; /* filled as the build goes (the front and the backend) */
    gr_build_detail build_detail; /* finer: runtime/build_detail.h */
    gr_node_time *node_times;   /* the GPU backend's per-node times (uint8 graph), malloc'd */
    int n_node_times;
};

/* An engine to build, with everything resolved: what gr_engine_create takes. The front fills it
 * for gr_engine_build; calibration and the automatic search fill it for their own engines.
 * Pointers are borrowed for the call (the engine copies what it keeps). */
typedef struct gr_build_request {
    const gr_net *net;             /* the network (the engine clones it), unless... */
    gr_net *adopt_net;             /* ...this is set: gr_engine_create takes it (req.net is then
                                      the same network) and frees it if it fails. A load's
                                      network is its own copy: cloning tens of megabytes of
                                      weights again would cost a saved engine's start 35 ms. */
    gr_engine_options opt;         /* precision: FP32, FP16 or INT8 (AUTO was resolved into
                                      layer_precision); opt.layer_precision is ignored */
    gr_device device;              /* CPU or GPU (AUTO was resolved) */
    const gr_precision *layer_precision; /* per network layer (n_layers entries), or NULL for a
                                            uniform opt.precision */
    const float *layer_range;      /* int8 activation range per layer (n_layers entries) and of
                                      the input; required when any layer computes in int8 */
    float input_range;
    int observable;                /* every layer's value kept as its own tensor (no fusion): int8
                                      calibration's fp32 engine, which observes each layer */
    const char *notice;            /* lines the resolution left (calibration, the map), or NULL */
    /* A saved engine being loaded (engine_file.c): opt is the file's, so the process
     * environment's say (GR_DISABLE_TACTIC_SEARCH) is not applied again, and the backend gets
     * its blob. */
    int stored;
    const void *backend_blob;
    size_t backend_blob_len;
} gr_build_request;

/* What a backend's init gets besides the engine (whose opt, net, layer_prec it reads). */
typedef struct gr_backend_inputs {
    const float *layer_range;      /* int8 engines: per layer (n_layers entries); else NULL */
    float input_range;
    int observable;                /* gr_build_request.observable */
    const void *blob;              /* a loaded engine's backend blob (save_blob's), else NULL */
    size_t blob_len;
} gr_backend_inputs;

/* The device an engine file was built for, and the one loading it (engine_file.c compares them
 * field by field). */
typedef struct gr_device_identity {
    gr_device kind;       /* CPU or GPU */
    int sm;               /* GPU: compute capability major * 10 + minor */
    char name[128];       /* GPU name */
    int sm_count;
    int cuda_runtime, cuda_driver; /* cudaRuntimeGetVersion, cudaDriverGetVersion */
    uint64_t cublaslt;    /* cublasLtGetVersion */
} gr_device_identity;

/* gpu/device.c (gpu/none.c): the identity of CUDA device gpu_index (GR_ERR_NO_DEVICE without). */
gr_status gr_gpu_device_identity(int gpu_index, gr_device_identity *id);

/* ---- options.c: the option structs' struct_size contract (runtime.h, "Option structs") ----- */

/* *full = the caller's options in this library's layout: the fields within given->struct_size
 * from the caller, the rest defaults (given NULL: all defaults). GR_ERR_INVALID_ARGUMENT, naming
 * the struct, for a struct_size outside [0.1.0's size, this library's]. Every entry point that
 * takes an option struct reads it through these. */
gr_status gr_model_options_take(const gr_model_options *given, gr_model_options *full);
gr_status gr_engine_options_take(const gr_engine_options *given, gr_engine_options *full);
gr_status gr_detect_options_take(const gr_detect_options *given, gr_detect_options *full);
gr_status gr_files_options_take(const gr_files_options *given, gr_files_options *full);
/* The ranges of graphrun/options.def's engine rows (enums, toggles, numbers): GR_OK, or
 * GR_ERR_INVALID_ARGUMENT naming the first option outside its range (runtime/options.c). */
gr_status gr_engine_options_check(const gr_engine_options *opt);

/* ---- build.c: the one build path ---------------------------------------------------------- */

/* The checks every build makes before anything is resolved or allocated: options, tensor sizes
 * (GR_MAX_TENSOR_ELEMS), at least one output. */
gr_status gr_engine_validate(const gr_net *net, const gr_engine_options *opt);

/* Build an engine from a resolved request: validate, clone the network, set the precision map,
 * hand the ranges to the backend's init. Calls no calibration and no search. */
gr_status gr_engine_create(const gr_build_request *req, gr_engine **out);

/* Deep copy of a network (layers, weights, class names) for an engine to own (model.c). */
gr_status gr_net_clone(const gr_net *src, gr_net **out);

/* Backends: build the engine's execution from the engine (opt, net, layer_prec) and `in`. */
gr_status gr_backend_cpu_init(gr_engine *e, const gr_backend_inputs *in);
gr_status gr_backend_gpu_init(gr_engine *e, const gr_backend_inputs *in);

/* gpu/device.c (gpu/none.c): the refusals gr_backend_gpu_init makes first (no device, gpu_index
 * past the devices, a reduced precision below sm_72), with its messages: the front makes them
 * before it calibrates for an engine the device could not take. */
gr_status gr_gpu_device_check(int gpu_index, gr_precision precision);

/* ---- engine_image.c ------------------------------------------------------------------------ */

/* gr_engine_letterbox of an image decoded at a reduced scale from a file_w x file_h file
 * (gr_image_reader_fast_decode): placed and sized in the input as the file's size is
 * (gr_image_preprocess_as), so its boxes map back with that size. 0 x 0: im's own size. */
gr_status gr_engine_letterbox_as(const gr_engine *engine, const gr_image *im, int file_w,
                                 int file_h, void *dst);

/* ---- engine_common.c: helpers every layer uses (backends included) ----------------------- */

/* Append one line to e->notice (lines separated by '\n'). */
void gr_engine_add_notice(gr_engine *e, const char *line);

/* Record the thread message into the engine too and return status. */
gr_status gr_engine_fail(gr_engine *e, gr_status status);

/* The backends' plan options for the engine's precision: po->precision and, for a mixed
 * engine, po->layer_precision (pointing into the engine). */
struct gr_plan_options;
void gr_engine_plan_precision(const gr_engine *e, struct gr_plan_options *po);

/* The widest reduced precision of a per-layer map (INT8 when any computing layer is int8, else
 * FP16 when any is fp16, else FP32): what an engine with the map calibrates and fuses for. */
gr_precision gr_precision_widest(const gr_net *net, const gr_precision *map);

/* A malloc'd copy of n_layers ranges in *copy. */
gr_status gr_ranges_copy(const float *layer_range, int n_layers, float **copy);

/* Monotonic clock in microseconds. */
double gr_now_us(void);

/* ---- precision/: what the front resolves before building --------------------------------- */

/* INT8 activation ranges (per layer, and the input) of req's network and options, from
 * opt.calib_cache or by calibrating on opt.calib_images, on req->device's side (or
 * opt.calib_device's); lines (a stale cache, the calibration's time) are appended to notice.
 * *layer_range is malloc'd, the caller's also on failure. */
gr_status gr_calibrate(const gr_build_request *req, float **layer_range, float *input_range,
                       char *notice, size_t notice_len);

/* precision/file_scales.c: the int8 ranges of a network whose file states them (net->qdq: ONNX
 * Q/DQ), instead of calibration; a layer computing in int8 without one is refused. A line is
 * appended to notice. *layer_range is malloc'd, the caller's also on failure. */
gr_status gr_file_ranges(const gr_build_request *req, float **layer_range, float *input_range,
                         char *notice, size_t notice_len);

/* precision/auto.c: the per-layer map of a GR_PREC_AUTO request (*map, n_layers entries) and the
 * int8 ranges it was chosen with (*layer_range, *input_range), both malloc'd and the caller's
 * also on failure; the search is described in notice. */
gr_status gr_auto_precision(const gr_build_request *req, gr_precision **map, float **layer_range,
                            float *input_range, char *notice, size_t notice_len);
/* After a GR_PREC_AUTO GPU engine is built: its measured per-layer latency, into the notice. */
gr_status gr_auto_precision_measure(gr_engine *e);
/* One line "precision map: L0 int8, L2 fp16, ..." of the reduced-precision layers that compute
 * (convolutions) into buf. */
void gr_precision_map_str(const gr_net *net, const gr_precision *map, char *buf, size_t len);

/* GPU engines (gpu/debug.c): the time of each network layer in microseconds (us_per_layer has
 * net->n_layers entries; 0 for layers without a node), medians of eager runs node by node. */
gr_status gr_engine_layer_times(gr_engine *engine, double *us_per_layer);

#endif
