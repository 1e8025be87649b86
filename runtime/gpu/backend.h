/* Private to the CUDA engine's files, and only them:
 *   gpu/engine.c    state, variants (plan, memory, timing, capture), streams, backend entry points
 *   gpu/dispatch.c  tensor addresses, plan node -> kernel launcher, the forward pass on the streams
 *   gpu/weights.c   weights in the kernels' layouts and their upload, scratch buffers
 *   gpu/tactic.c    every kernel choice: each tensor-core conv's tactic and each fp32 conv's
 *                   algorithm, by measurement at build (timing cache) or by the fixed rule
 *   gpu/error.c     CUDA / cuBLAS / launcher failures -> gr_status with a one-line message
 *   gpu/debug.c     what runtime/gpu/debug.h declares (graph info, plan stats, trace, faults)
 *   and experimental/dataflow/runtime.c, the (experimental) dataflow executor's program, state
 *   and launch (docs/dataflow.md)
 * A build without CUDA has none of them (runtime/gpu/none.c stands in). */
#ifndef GR_RUNTIME_GPU_BACKEND_H
#define GR_RUNTIME_GPU_BACKEND_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "experimental/dataflow/format.h"
#include "kernels/conv.h"
#include "kernels/conv_direct.h"
#include "kernels/conv_gemm.h"
#include "kernels/gemm_f32.h"
#include "planner/plan.h"
#include "runtime/engine_internal.h"
#include "runtime/saved_gpu.h"

#define GR_GPU_MAX_STREAMS 8

/* Record a CUDA runtime failure with its name and the statement, and return from the function. */
#define CUDA_TRY(call)                                                                             \
    do {                                                                                           \
        cudaError_t cuda_err_ = (call);                                                            \
        if (cuda_err_ != cudaSuccess)                                                              \
            return gr_gpu_cuda_fail(cuda_err_, #call, __FILE__, __LINE__);                        \
    } while (0)

/* A tensor-core conv node's tactic (runtime/gpu/tactic.c): what gr_gpu_conv_args passes as
 * tile_config / split_k. All zero = the kernels' automatic choice. */
typedef struct gpu_tactic {
    int tile, split;        /* the implicit-GEMM kernel's (both 0 for the GEMM tactic) */
    int gemm;               /* 1: the GEMM tactic (kernels/conv_gemm.h, im2col + cuBLASLt +
                               epilogue); its plan is v->gemm[node] */
    size_t gemm_scratch;    /* bytes per launch of the GEMM tactic */
    double us, auto_us;     /* measured (or cached) median times, 0 when not searched */
    int candidates;         /* candidates timed at this build; 0 when it came from the cache */
    int searched;           /* 1 when a search (or a cache hit) decided it */
    int batch_timed;        /* images us and auto_us are for (the representative sub-batch) */
    /* fp32 convs (f32_search): the measured (or cached) algorithm, GR_CONV_F32_*, and its split-K
     * parts, where f32_measured is 1; else gr_gpu_f32_rule decides */
    int f32_measured, f32_algo, f32_splits;
} gpu_tactic;

/* A conv node's device parameters. */
typedef struct gpu_conv_weights {
    void *weights; /* f32 and direct convs: Darknet order; f16 / i8 tensor-core convs:
                      [out_c][k][k][in_c_pad] (conv_weights.h) */
    float *mul;    /* i8: s_in * s_w[c] */
    float *bias;
} gpu_conv_weights;

/* One run in flight (runtime.h, "Runs in flight"): everything a run writes, and its graph. The
 * variant's instances share its plan and weights; instance 0 is what gr_engine_run uses. */
typedef struct gpu_instance {
    uint8_t *arena;
    uint8_t *io;            /* device: input, then the outputs back to back */
    void *host_in;          /* pinned */
    uint8_t *host_out;      /* pinned */
    float *im2col[GR_GPU_MAX_STREAMS];
    uint8_t *splitk;        /* split-K partials and tile counters (or the GEMM tactic's scratch),
                               one region per conv node: the
                               counters of one launch must never see another's partials, so no
                               two instances share them either */
    void *cublas_ws[GR_GPU_MAX_STREAMS]; /* instances >= 1: the cuBLAS workspaces their
                               graphs were captured with (instance 0 uses gpu_state's) */
    cudaStream_t stream;    /* instances >= 1: where the graph is launched; 0 uses streams[0] */
    cudaEvent_t done;       /* recorded after the run's launches; a wait synchronizes on it */
    int slice;              /* the sub-batch the addresses are for (gr_gpu_tensor_storage): 0
                               except in the copies gr_gpu_enqueue_forward makes per slice */
    void *df_state;         /* dataflow: this instance's gr_df_state and flags (zeroed once) */
    uint32_t df_epoch;      /* dataflow: the epoch of the last run checked (its runtime.c) */
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaGraphNode_t input_copy; /* the graph's input copy node (NULL: none found), disabled in
                               exec for a launch whose input is on the device already */
    int input_copy_off;     /* it is disabled in exec now */
    /* gr_engine_decode_jpegs (gpu/jpeg.c): the next submit's input is in io already, except the
     * images with host_image[i] = 1, copied from host_in before the launch */
    int input_on_device;
    uint8_t *host_image;
    struct gpu_jpeg_slot *jpeg; /* its nvJPEG state and decoded images */
    double submitted_us;    /* host clock at submit: end_to_end of the wait */
} gpu_instance;

/* Everything that depends on the input type: plan, weights, and the instances. */
typedef struct gpu_variant {
    int built;
    /* Micro-batching (docs/performance.md): the plan is for micro_batch images and a run is
     * n_slices = batch / micro_batch passes of it, one after the other in the one graph, slice j
     * reading images [j x micro_batch, (j+1) x micro_batch) of the input and writing the same
     * images of each output. micro_batch is the one field that records the choice (batch: not
     * split). The io block and the pinned buffers hold the whole batch. */
    int micro_batch, n_slices;
    gr_plan *plan;
    size_t in_bytes, out_bytes;       /* io block: the whole batch's input, its outputs */
    size_t out_offset[GR_MAX_HEADS];
    size_t slice_in_bytes;            /* one slice's input (the plan's input tensor) */
    size_t slice_out_bytes[GR_MAX_HEADS]; /* one slice's part of each output */
    uint8_t *weights;       /* device */
    size_t weights_bytes;
    size_t weights_packed;  /* of which the packed layout (gr_gpu_weights_layout) */
    gpu_conv_weights *nw;   /* per plan node */
    size_t *splitk_offset, *splitk_bytes; /* per node */
    size_t splitk_total, im2col_bytes;    /* per instance */
    size_t im2col_floats[GR_GPU_MAX_STREAMS]; /* per instance and stream */
    int n_inst;             /* the engine's inflight */
    gpu_instance inst[GR_MAX_INFLIGHT];
    gr_timing split;        /* from the instrumented run */
    float *node_us;         /* per plan node: its median time in the instrumented runs, every
                               pass (0 for nodes that launch nothing) */
    unsigned char *pdl;     /* per plan node: launched as a programmatic dependent launch */
    gpu_tactic *tactic;     /* per plan node (zero: automatic); set before scratch is sized */
    /* The dataflow executor (experimental/dataflow/runtime.c): the program where the plan
     * allows it (NULL else), its device copy, where in the io block's output part the kernel
     * reports each run, and whether the graphs (and eager runs) use it instead of the per-node
     * launches. */
    struct gr_df_program *df_program;
    void *df_device;
    size_t df_status_offset;
    int dataflow;
    gr_conv_gemm **gemm;    /* per plan node: the GEMM tactic's plan where it was chosen */
} gpu_variant;

typedef struct gpu_state gpu_state;

/* Called by gr_gpu_enqueue_forward after every plan node is enqueued on its stream (launching or
 * not), before the node's event is recorded: work it enqueues on g->streams[node's stream] runs
 * after the node and before anything that waits for the node, so it reads the node's output
 * before any later node may reuse its memory (int8 calibration, gpu/calib.c). */
typedef gr_status (*gpu_node_hook)(gpu_state *g, const gpu_variant *v, const gpu_instance *inst,
                                   int node, void *user);

struct gpu_state {
    int device;
    int n_streams;          /* as many as the largest plan built so far uses */
    cudaStream_t streams[GR_GPU_MAX_STREAMS];
    cublasHandle_t cublas[GR_GPU_MAX_STREAMS]; /* one per stream, once a plan calls cuBLAS */
    void *cublas_ws[GR_GPU_MAX_STREAMS];
    cudaEvent_t fork;       /* recorded on stream 0 after the input copy; every stream waits */
    cudaEvent_t join[GR_GPU_MAX_STREAMS]; /* join[s], s >= 1: stream s is done; stream 0 waits */
    cudaEvent_t *events;    /* the plans' cross-stream events, by plan event id */
    int n_events;
    float *layer_range;     /* int8: per-layer activation ranges, shared by the variants */
    float input_range;
    int observable;         /* every layer's value kept: no fusion (calibration's engine) */
    gpu_variant var[2];     /* [0] float input, [1] u8 input */
    cudaError_t inject;     /* tests: the next run fails with this error */
    int tf32;               /* fp32 convs may use TF32 tensor cores (cuBLAS's TF32 math) */
    gr_f32_algo f32_algo;   /* e->opt.f32_algo: what gr_gpu_f32_rule applies (gpu/dispatch.c) */
    int f32_tensor_cores;   /* the 3xTF32 GEMMs may run: sm_80+ and not tf32 */
    int f32_search;         /* f32_algo AUTO with the tactic search on: each fp32 conv's algorithm
                               is measured (gpu/tactic.c), the rule only its reference */
    gr_toggle f32_split_k;  /* e->opt.f32_split_k */
    int sm_count;
    int fp16_accumulate;    /* fp16 convs accumulate in fp16 */
    int pdl;                /* programmatic dependent launch between convs (sm_90+): e->opt.pdl
                               not OFF */
    int tactic_search;      /* time the tactics of every tensor-core conv at build */
    char *timing_cache_path; /* the engine's copy of opt.timing_cache, or NULL */
    struct gr_timing_cache *tcache; /* entries for this GPU: read from the file, and measured */
    gr_saved_gpu saved;     /* a saved engine's blob (tactics, device weights), while its load
                               builds: it points into the caller's file bytes */
    int has_saved;
    const gr_saved_weights *reuse; /* while a build's micro-batch search builds its candidates:
                               the first candidate's packed weights, for the others */
    int tcache_trusted;             /* tcache is a saved engine's own tactics, loaded on the GPU,
                                       driver, CUDA runtime and cuBLASLt they were chosen and
                                       checked on: taken without the numerics run */
    cublasLtHandle_t lt;    /* for the GEMM tactic's plans, created by the first search */
    int gemm_tactic;        /* the GEMM tactic is a candidate: e->opt.gemm_tactic not OFF (and
                               cuBLASLt could be set up) */
    gpu_node_hook after_node; /* NULL except while calibrating (gpu/calib.c) */
    void *after_node_user;
    gpu_node_hook before_node; /* NULL except while the roofline captures (gpu/roofline.c):
                               called before each plan node is enqueued, with after_node_user */
    struct gpu_jpeg *jpeg;  /* the nvJPEG decoder, opened by the first gr_engine_decode_jpegs */
    gr_executor executor;   /* e->opt.executor */
    gr_df_trace_record *df_trace; /* debugging (gr_engine_debug_dataflow_trace): device records of
                                     the dataflow kernel's tasks, NULL when not tracing */
    int df_trace_tasks;             /* records df_trace holds */
    int df_skip_publish;    /* tests (gr_engine_debug_dataflow_skip_publish): a task whose flag
                               the dataflow kernel never publishes; -1 none */
};

static inline size_t gr_gpu_align(size_t x, size_t a) { return (x + a - 1) / a * a; }

static inline gpu_variant *gr_gpu_variant(gpu_state *g, int input_u8)
{
    return &g->var[input_u8 ? 1 : 0];
}

/* ---- gpu/jpeg.c ---- */
/* Decode the JPEG files of images i < n (jpeg[i] non-NULL) into inst's device input, letterboxed
 * (or stretched: `how`) to net_w x net_h uint8, on `stream`; decoded[i] = 1 for each image it
 * took (runtime.h, gr_engine_decode_jpegs). */
gr_status gr_gpu_decode_jpegs(gpu_state *g, gpu_instance *inst, gr_jpeg_decoder which,
                              cudaStream_t stream, int n, const uint8_t *const *jpeg,
                              const size_t *bytes, int *decoded, gr_preprocess how, int net_w,
                              int net_h);
/* "nvJPEG hardware decoder" / "nvJPEG GPU hybrid decoder" once opened, else NULL. */
const char *gr_gpu_jpeg_backend(const gpu_state *g);
void gr_gpu_jpeg_free(gpu_state *g);
void gr_gpu_jpeg_slot_free(struct gpu_jpeg_slot *s);
/* Device microseconds the slot's last decoding and letterbox took (0: its last run had none);
 * read once, after the run's wait. */
double gr_gpu_jpeg_slot_us(struct gpu_jpeg_slot *s);
/* Host seconds the slot's calls spent so far checking files and inside nvjpegDecodeBatched,
 * added to *check_s and *call_s (runtime/gpu/debug.h). */
void gr_gpu_jpeg_host_seconds(const struct gpu_jpeg_slot *s, double *check_s, double *call_s);
/* The k-th image the slot's last decode decoded, read back (runtime/gpu/debug.h). */
gr_status gr_gpu_jpeg_pixels(const struct gpu_jpeg_slot *s, int k, gr_image **out);

/* ---- gpu/engine.c ---- */
/* Build the variant for that input type if it is not built yet. */
gr_status gr_gpu_ensure_variant(gr_engine *e, int input_u8);
/* Capture every built variant's instances again (their launches' arguments changed: tests). */
gr_status gr_gpu_recapture(gr_engine *e);

/* ---- gpu/dispatch.c ---- */
/* Device address of a tensor's storage in instance `inst` (its buffer's start: views index with
 * c_offset). */
uint8_t *gr_gpu_tensor_storage(const gpu_variant *v, const gpu_instance *inst, int tensor);
/* Does plan node `index` launch work? (not a no-op, an input or an output marker) */
int gr_gpu_node_launches(const gr_plan_node *nd);

/* Does plan node `nd` call cuBLAS? (f32 convs and [connected]) */
int gr_gpu_node_uses_cublas(const gr_plan *plan, const gr_plan_node *nd);

/* A conv node's kernel arguments, built once for the launch and for sizing its scratch
 * ([connected] too: an f32 1x1 conv on the flattened image):
 * f32 convs go through cuBLAS (f32, one launch per image when a channel slice of a batch is not
 * contiguous: `images` launches, the pointers advancing by x_image / y_image floats), f16 and i8
 * through the tensor-core kernels (tc; workspace not set), except the convs
 * gr_gpu_conv_direct() sends to the direct kernels. GR_ERR_UNSUPPORTED for dtypes or fusions
 * without a kernel. */
typedef struct gpu_conv {
    int tensor_cores;
    int is_i8;
    gr_conv_args tc;
    gr_conv_f32_args f32;
    int images;
    size_t x_image, y_image;
    /* f32 grouped convs (Darknet's groups): `groups` launches per image, each on its channel
     * slice, the pointers advancing by these many floats per group. */
    int groups;
    size_t x_group, y_group, w_group, b_group;
    /* convs gr_gpu_conv_direct() takes: one launch of the direct kernel (kernels/conv_direct.h),
     * no tactic, no workspace; f32 (direct_args) or, with direct_nhwc, f16 / i8 (nhwc_args,
     * is_i8 saying which) */
    int direct, direct_nhwc;
    gr_conv_direct_f32_args direct_args;
    gr_conv_direct_nhwc_args nhwc_args;
} gpu_conv;
/* Does conv node `nd` run on the direct kernels (kernels/conv_direct.h)? fp32: dilation,
 * stride_x != stride_y (the GEMM paths have neither) and groups of at most 8 input channels
 * (a GEMM per group would be a launch per channel, each too small to fill the GPU); fp16 / int8:
 * every grouped, dilated or stride_x != stride_y conv (the tensor-core kernels take none). Its
 * f16 / i8 weights stay in Darknet's order (gpu/weights.c). */
int gr_gpu_conv_direct(const gr_plan *plan, const gr_plan_node *nd);
/* `inst` NULL: shapes only (no addresses). */
gr_status gr_gpu_conv_args(const gpu_state *g, const gpu_variant *v, const gpu_instance *inst,
                           int index, gpu_conv *out);
/* Before anything is allocated: can the kernels run every conv of v->plan as planned (fusions
 * included)? The launchers' own checks (gr_conv_check), so a failure names the check; *bad_node
 * is then the node refused (else -1). */
gr_status gr_gpu_plan_check(const gpu_state *g, const gpu_variant *v, int *bad_node);
/* Set v->pdl: a conv directly after another kernel on the only stream, with no event between,
 * launches as a programmatic dependent launch (its kernels wait for their producer inside). */
void gr_gpu_mark_pdl(const gpu_state *g, gpu_variant *v);

/* Launch plan node `index` of instance `inst` on its stream. */
gr_status gr_gpu_launch_node(gpu_state *g, gpu_variant *v, const gpu_instance *inst, int index);
/* The whole forward pass of instance `inst` on the plan's streams (input copy, every node, output
 * copy), as run eagerly or recorded by capture. node_events (2 per node) and copy_events (4) are
 * optional timing brackets for the instrumented runs. */
/* The input images of inst marked host_image (after gr_engine_decode_jpegs: those the GPU did
 * not decode) from the pinned buffer to the device input, one copy per run of them. */
gr_status gr_gpu_copy_host_images(const gpu_variant *v, const gpu_instance *inst,
                                  cudaStream_t stream);
gr_status gr_gpu_enqueue_forward(gpu_state *g, gpu_variant *v, const gpu_instance *inst,
                                 cudaEvent_t *node_events, cudaEvent_t *copy_events);

/* ---- experimental/dataflow/runtime.c ---- */
/* The variant's dataflow program, when the engine asks for the dataflow executor and the plan
 * allows it (int8 / fp16 nodes the kernel runs, one slice, f32 accumulation, sm_80+); otherwise
 * v->df_program stays NULL and `why` says why. Host only: before anything is allocated. */
gr_status gr_gpu_dataflow_prepare(const gpu_state *g, gpu_variant *v, char *why, size_t len);
/* After the weights' upload: bind their offsets into the program and copy it to the device. */
gr_status gr_gpu_dataflow_upload(gpu_variant *v);
/* An instance's protocol state (zeroed once, never reset). */
gr_status gr_gpu_dataflow_alloc_state(const gpu_variant *v, gpu_instance *inst);
/* Launch the persistent kernel of instance `inst` on stream 0 (between the copies). */
gr_status gr_gpu_dataflow_launch(gpu_state *g, const gpu_variant *v, const gpu_instance *inst);
/* After a run has ended (its output copy included): the kernel's report in host_out. GR_OK, or
 * GR_ERR_INTERNAL naming the task whose wait timed out and the dependency it waited for, or that
 * the kernel did not report at all. */
gr_status gr_gpu_dataflow_check_run(const gpu_variant *v, gpu_instance *inst);
/* The program and its device copy (the instances free their states). */
void gr_gpu_dataflow_free(gpu_variant *v);

/* ---- gpu/weights.c ---- */
/* Every conv's weights, multipliers and biases in the kernels' layouts, uploaded (build-time
 * copies); sets v->weights, v->weights_bytes, v->weights_packed and v->nw. Once per variant:
 * instances share them. `saved` (a saved engine's, gr_gpu_weights_layout-checked by the caller)
 * is uploaded as it is; NULL packs them from the plan, which must carry its weight data. */
gr_status gr_gpu_upload_weights(gpu_variant *v, const gr_saved_weights *saved);
/* The hash of the packed layout of a plan's weights (offsets, sizes, what each conv's kernel
 * takes): saved device weights fit a plan exactly when their hash is its hash. */
uint64_t gr_gpu_weights_layout(const gr_plan *plan);
/* A host copy of v's packed device weights (what gr_engine_save stores), malloc'd. */
gr_status gr_gpu_download_weights(const gpu_variant *v, uint8_t **host, size_t *bytes);
/* im2col per stream for fp32 convs, split-K workspace per tensor-core conv node, for every
 * instance allocated (sized with instance 0's arguments; its arena and io must be allocated). */
gr_status gr_gpu_alloc_scratch(gpu_state *g, gpu_variant *v);
/* The scratch gr_gpu_alloc_scratch sized, for one more instance (a micro-batch winner's runs in
 * flight after the first). */
gr_status gr_gpu_alloc_instance_scratch(const gpu_state *g, const gpu_variant *v,
                                        gpu_instance *inst);

/* ---- gpu/tactic.c ---- */
/* The device key of the timing cache: GPU name, compute capability, SM count, CUDA runtime and
 * driver versions, cuBLASLt version. */
gr_status gr_gpu_device_key(const gpu_state *g, char *key, size_t len);
/* Choose the tactic of every tensor-core conv of v (v->tactic, allocated here), by timing the
 * candidates on instance 0's buffers or from the timing cache; adds the new measurements to the
 * cache. Needs the weights uploaded and instance 0's arena and io; runs before the scratch is
 * sized (gr_gpu_alloc_scratch sizes each node's split-K workspace for its chosen tactic) and
 * leaves the arena zeroed as instance_alloc did. With g->tactic_search 0 it only allocates
 * v->tactic (all automatic). */
gr_status gr_gpu_choose_tactics(gr_engine *e, gpu_state *g, gpu_variant *v);
/* May the 3xTF32 GEMM split K (gpu/dispatch.c)? `automatic`: the algorithm is AUTO's rule. */
int gr_gpu_f32_split_allowed(const gpu_state *g, const gpu_variant *v, int automatic);
/* The fp32 conv's algorithm and split-K (a->algo, a->splits) by e->opt.f32_algo and the fixed
 * rule (docs/tactics.md; gpu/dispatch.c): the reference the fp32 tactic search measures against,
 * and the choice when it does not run. `columns`: batch x output pixels of the GEMM. */
void gr_gpu_f32_rule(const gpu_state *g, const gpu_variant *v, int connected, long long columns,
                     gr_conv_f32_args *a);
/* The tactic's name: "auto", "128x64", "64x64 split 4". */
void gr_gpu_tactic_name(int tile, int split, char *buf, size_t len);
/* e->tactics: the tactics of v's tensor-core convs (gr_engine_tactic). */
gr_status gr_gpu_publish_tactics(gr_engine *e, const gpu_variant *v);

/* ---- gpu/error.c ---- */
/* A CUDA runtime call failed: "CUDA error <name> (<text>) in <what> (<file>:<line>)". */
gr_status gr_gpu_cuda_fail(cudaError_t err, const char *what, const char *file, int line);
/* A kernel launcher for plan node `index` returned err: GR_ERR_UNSUPPORTED for
 * cudaErrorNotSupported (no kernel for these dtypes, or this device), else GR_ERR_CUDA (or
 * GR_ERR_OUT_OF_MEMORY). The message names the node and carries gr_kernels_last_failure(): the
 * launcher's check that failed, with its file and line. GR_OK for cudaSuccess. */
gr_status gr_gpu_launch_status(cudaError_t err, const gr_plan *plan, int index);
/* The cuBLAS conv or connected of plan node `index` failed: a kernel launch (cuda_err) or
 * cuBLAS itself. */
gr_status gr_gpu_cublas_fail(cublasStatus_t status, cudaError_t cuda_err, const gr_plan *plan,
                             int index);
/* No kernel for plan node `index` with its input and output dtypes. */
gr_status gr_gpu_unsupported(const gr_plan *plan, int index);
/* The same with the reason appended ("...: <why>"). */
gr_status gr_gpu_unsupported_because(const gr_plan *plan, int index, const char *why);

#endif
