/* CUDA backend: turns a plan (planner/plan.h) into one captured CUDA graph.
 *
 * Build: plan the network for (precision, batch, input type); allocate one arena for every
 * activation, one block for the packed weights, one device block for the network input and the
 * outputs (outputs back to back, so one copy brings them all home), pinned host staging for both;
 * upload the weights (build-time copies); run the forward pass once eagerly (module loading, cuBLAS
 * setup) and time it node by node for the time split; then capture the same dispatch loop on the
 * plan's streams - H2D input copy, every node, D2H output copy - into one graph and instantiate it.
 *
 * Run: one cudaGraphLaunch and one stream synchronization. Nothing is allocated, copied by the host
 * or synchronized besides. With use_cuda_graph = 0 the same dispatch loop runs eagerly instead.
 *
 * An engine takes u8 HWC input by default (a quarter of the bytes of float). Float input (the
 * f32 entry points) gets its own plan and graph, built the first time it is asked for.
 * Every CUDA and cuBLAS status is checked; a failure during a run marks the engine failed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "kernels/conv.h"
#include "kernels/gemm_f32.h"
#include "kernels/misc.h"
#include "planner/plan.h"
#include "runtime/engine_internal.h"
#include "runtime/gpu_internal.h"

#define MAX_STREAMS 8

/* Record a CUDA failure with its name and the statement, and return from the function. */
#define CUDA_TRY(call)                                                                             \
    do {                                                                                           \
        cudaError_t cuda_err_ = (call);                                                            \
        if (cuda_err_ != cudaSuccess)                                                              \
            return cuda_fail(cuda_err_, #call, __LINE__);                                          \
    } while (0)

static gr_status cuda_fail(cudaError_t err, const char *what, int line)
{
    gr_status st = err == cudaErrorMemoryAllocation ? GR_ERR_OUT_OF_MEMORY
                   : err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver
                       ? GR_ERR_NO_DEVICE
                       : GR_ERR_CUDA;
    return gr_fail(st, "CUDA error %s (%s) in %s (gpu_engine.c:%d)", cudaGetErrorName(err),
                   cudaGetErrorString(err), what, line);
}

typedef struct node_weights {
    void *weights; /* packed: f32 Darknet order, f16 / i8 [out_c][k][k][in_c_pad] */
    float *mul;    /* i8: s_in * s_w[c] */
    float *bias;
} node_weights;

/* Everything that depends on the input type: plan, memory, graph. */
typedef struct variant {
    int built;
    int input_u8;
    gr_plan *plan;
    uint8_t *arena;
    uint8_t *io;            /* device: input, then the outputs back to back */
    size_t in_bytes, out_bytes;
    size_t out_offset[GR_MAX_HEADS];
    void *host_in;          /* pinned */
    uint8_t *host_out;      /* pinned */
    uint8_t *weights;       /* device */
    node_weights *nw;
    float *im2col[MAX_STREAMS];
    uint8_t *splitk;        /* split-K partials and tile counters, one region per conv node: the
                               counters of one launch must never see another's partials */
    size_t *splitk_offset, *splitk_bytes; /* per node */
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    gr_timing split;        /* from the instrumented run */
} variant;

typedef struct gpu_state {
    int device;
    cudaStream_t streams[MAX_STREAMS];
    int n_streams;
    cudaEvent_t *events;
    int n_events;
    cudaEvent_t fork;
    cudaEvent_t run_start, run_stop;
    cublasHandle_t cublas[MAX_STREAMS];
    void *cublas_ws[MAX_STREAMS];
    float *layer_range;     /* int8: per-layer activation ranges, shared by the variants */
    float input_range;
    variant var[2];         /* [0] float input, [1] u8 input */
    cudaError_t inject;     /* tests: the next run fails with this error */
    int tf32;               /* fp32 convs may use TF32 tensor cores */
    int fp16_accumulate;    /* fp16 convs accumulate in fp16 */
} gpu_state;

static const size_t cublas_ws_bytes = 32u << 20; /* what cuBLAS asks for on Hopper */

/* ---- addresses -------------------------------------------------------------------------- */

static int is_output(const gr_plan *plan, int tensor, int *k)
{
    for (int i = 0; i < plan->n_outputs; i++)
        if (plan->output_tensors[i] == tensor) {
            if (k)
                *k = i;
            return 1;
        }
    return 0;
}

/* Device address of a tensor's storage (its buffer's start: views index with c_offset). The
 * network input and the outputs live in the io block, everything else in the arena. */
static uint8_t *tensor_storage(const variant *v, int tensor)
{
    const gr_plan *plan = v->plan;
    const gr_plan_tensor *t = &plan->tensors[tensor];
    int root = t->view_of >= 0 ? t->view_of : tensor;
    int k;
    if (root == plan->input_tensor)
        return v->io;
    if (is_output(plan, root, &k))
        return v->io + v->in_bytes + v->out_offset[k];
    return v->arena + plan->buffers[t->buffer].offset;
}

static gr_kview kview(const gr_plan_tensor *t)
{
    gr_kview kv = {t->n, t->c, t->h, t->w, t->c_stride, t->c_offset};
    return kv;
}

/* ---- node dispatch ---------------------------------------------------------------------- */

static gr_status kernel_status(cudaError_t err, const gr_plan_node *nd, int index)
{
    if (err == cudaSuccess)
        return GR_OK;
    return gr_fail(err == cudaErrorMemoryAllocation ? GR_ERR_OUT_OF_MEMORY : GR_ERR_CUDA,
                   "plan node %d (%s, layer %d): launch failed: %s (%s)", index,
                   gr_plan_kind_name(nd->kind), nd->layer, cudaGetErrorName(err),
                   cudaGetErrorString(err));
}

static gr_status unsupported(const gr_plan_node *nd, const gr_plan_tensor *x, const gr_plan_tensor *y)
{
    return gr_fail(GR_ERR_UNSUPPORTED, "the GPU engine has no kernel for %s (layer %d) from %s to %s",
                   gr_plan_kind_name(nd->kind), nd->layer, gr_dtype_name(x->dtype),
                   gr_dtype_name(y->dtype));
}

static gr_status launch_conv(gpu_state *g, variant *v, int index, int s)
{
    const gr_plan *plan = v->plan;
    const gr_plan_node *nd = &plan->nodes[index];
    const gr_plan_tensor *x = &plan->tensors[nd->inputs[0]];
    const gr_plan_tensor *y = &plan->tensors[nd->output];
    const node_weights *w = &v->nw[index];
    cudaStream_t stream = g->streams[s];
    if (x->dtype == GR_DTYPE_F32) {
        if (y->dtype != GR_DTYPE_F32)
            return unsupported(nd, x, y);
        /* cuBLAS path on NCHW; a channel slice with batch > 1 is not contiguous: one image at a
         * time, each a contiguous block. */
        int per_image = x->n > 1 && (x->c_stride != x->c || y->c_stride != y->c);
        int images = per_image ? x->n : 1;
        size_t x_image = (size_t)x->c_stride * x->h * x->w, y_image = (size_t)y->c_stride * y->h * y->w;
        for (int b = 0; b < images; b++) {
            gr_conv_f32_args a = {
                .batch = per_image ? 1 : x->n,
                .in_c = x->c, .in_h = x->h, .in_w = x->w, .out_c = y->c,
                .ksize = nd->p.size, .stride = nd->p.stride, .pad = nd->p.pad,
                .in = (const float *)tensor_storage(v, nd->inputs[0]) + (size_t)b * x_image +
                      (size_t)x->c_offset * x->h * x->w,
                .weights = w->weights, .bias = w->bias,
                .out = (float *)tensor_storage(v, nd->output) + (size_t)b * y_image +
                       (size_t)y->c_offset * y->h * y->w,
                .workspace = v->im2col[s], .activation = (int)nd->p.activation,
                .tf32 = g->tf32};
            cudaError_t cerr = cudaSuccess;
            cublasStatus_t bst = gr_launch_conv_f32(g->cublas[s], &a, stream, &cerr);
            if (bst != CUBLAS_STATUS_SUCCESS)
                return cerr != cudaSuccess ? kernel_status(cerr, nd, index)
                                           : gr_fail(GR_ERR_CUBLAS,
                                                     "plan node %d (conv, layer %d): cuBLAS status %d",
                                                     index, nd->layer, (int)bst);
        }
        return GR_OK;
    }
    gr_conv_out_kind out_kind;
    switch (y->dtype) {
    case GR_DTYPE_I8: out_kind = GR_CONV_OUT_I8; break;
    case GR_DTYPE_F16: out_kind = GR_CONV_OUT_F16; break;
    default: return unsupported(nd, x, y);
    }
    if ((x->dtype != GR_DTYPE_I8 && x->dtype != GR_DTYPE_F16) || (nd->p.groups > 1))
        return unsupported(nd, x, y);
    gr_conv_args a = {
        .batch = x->n, .in_h = x->h, .in_w = x->w, .in_c = x->c,
        .in_c_stride = x->c_stride, .in_c_offset = x->c_offset,
        .out_c = y->c, .out_c_stride = y->c_stride, .out_c_offset = y->c_offset,
        .ksize = nd->p.size, .stride = nd->p.stride, .pad = nd->p.pad,
        .in = tensor_storage(v, nd->inputs[0]), .weights = w->weights, .mul = w->mul,
        .bias = w->bias, .out = tensor_storage(v, nd->output),
        .activation = (int)nd->p.activation, .out_kind = out_kind,
        .out_inv_scale = y->dtype == GR_DTYPE_I8 ? 1.0f / y->scale : 1.0f,
        .fp16_accumulate = x->dtype == GR_DTYPE_F16 && g->fp16_accumulate, .tile_config = 0,
        .workspace = v->splitk_bytes[index] ? v->splitk + v->splitk_offset[index] : NULL,
        .workspace_bytes = v->splitk_bytes[index], .split_k = 0};
    cudaError_t err = x->dtype == GR_DTYPE_I8 ? gr_launch_conv_i8(&a, stream)
                                              : gr_launch_conv_f16(&a, stream);
    return kernel_status(err, nd, index);
}

static gr_status launch_node(gpu_state *g, variant *v, int index)
{
    const gr_plan *plan = v->plan;
    const gr_plan_node *nd = &plan->nodes[index];
    int s = nd->stream;
    cudaStream_t stream = g->streams[s];
    if (nd->noop || nd->kind == GR_NODE_INPUT || nd->kind == GR_NODE_OUTPUT)
        return GR_OK;
    const gr_plan_tensor *x = &plan->tensors[nd->inputs[0]];
    const gr_plan_tensor *y = &plan->tensors[nd->output];
    void *in = tensor_storage(v, nd->inputs[0]);
    void *out = tensor_storage(v, nd->output);
    gr_kview xv = kview(x), yv = kview(y);
    cudaError_t err = cudaErrorNotSupported;
    switch (nd->kind) {
    case GR_OP_CONV: return launch_conv(g, v, index, s);
    case GR_OP_QUANTIZE:
        if (x->dtype == GR_DTYPE_U8 && y->dtype == GR_DTYPE_I8)
            err = gr_launch_quantize_u8_i8(in, out, yv, y->scale, stream);
        else if (x->dtype == GR_DTYPE_U8 && y->dtype == GR_DTYPE_F16)
            err = gr_launch_quantize_u8_f16(in, out, yv, stream);
        else if (x->dtype == GR_DTYPE_F32 && y->dtype == GR_DTYPE_I8)
            err = gr_launch_quantize_f32_i8(in, xv, out, yv, y->scale, stream);
        else if (x->dtype == GR_DTYPE_F32 && y->dtype == GR_DTYPE_F16)
            err = gr_launch_quantize_f32_f16(in, xv, out, yv, stream);
        else
            return unsupported(nd, x, y);
        break;
    case GR_OP_DEQUANTIZE:
        if (x->dtype == GR_DTYPE_I8)
            err = gr_launch_dequantize_i8_f32(in, xv, x->scale, out, yv, stream);
        else if (x->dtype == GR_DTYPE_F16)
            err = gr_launch_dequantize_f16_f32(in, xv, out, yv, stream);
        else
            return unsupported(nd, x, y);
        break;
    case GR_NODE_CONVERT:
        if (x->dtype == GR_DTYPE_U8 && y->dtype == GR_DTYPE_F32)
            err = gr_launch_convert_u8_f32(in, out, yv, stream);
        else
            return unsupported(nd, x, y);
        break;
    case GR_OP_MAXPOOL:
        if (y->dtype == GR_DTYPE_F32)
            err = gr_launch_maxpool_f32(in, xv, out, yv, nd->p.size, nd->p.stride, nd->p.pad, stream);
        else if (y->dtype == GR_DTYPE_F16)
            err = gr_launch_maxpool_f16(in, xv, out, yv, nd->p.size, nd->p.stride, nd->p.pad, stream);
        else
            err = gr_launch_maxpool_i8(in, xv, out, yv, nd->p.size, nd->p.stride, nd->p.pad, stream);
        break;
    case GR_OP_AVGPOOL:
        if (y->dtype == GR_DTYPE_F32)
            err = gr_launch_avgpool_f32(in, xv, out, yv, stream);
        else if (y->dtype == GR_DTYPE_F16)
            err = gr_launch_avgpool_f16(in, xv, out, yv, stream);
        else
            err = gr_launch_avgpool_i8(in, xv, x->scale, out, yv, y->scale, stream);
        break;
    case GR_OP_UPSAMPLE:
        if (y->dtype == GR_DTYPE_F32)
            err = gr_launch_upsample_f32(in, xv, out, yv, nd->p.stride, stream);
        else if (y->dtype == GR_DTYPE_F16)
            err = gr_launch_upsample_f16(in, xv, out, yv, nd->p.stride, stream);
        else
            err = gr_launch_upsample_i8(in, xv, out, yv, nd->p.stride, stream);
        break;
    case GR_OP_REORG:
        if (y->dtype == GR_DTYPE_F32)
            err = gr_launch_reorg_f32(in, xv, out, yv, nd->p.stride, stream);
        else if (y->dtype == GR_DTYPE_F16)
            err = gr_launch_reorg_f16(in, xv, out, yv, nd->p.stride, stream);
        else
            err = gr_launch_reorg_i8(in, xv, out, yv, nd->p.stride, stream);
        break;
    case GR_OP_SHORTCUT: {
        const gr_plan_tensor *f = &plan->tensors[nd->inputs[1]];
        void *from = tensor_storage(v, nd->inputs[1]);
        if (y->dtype == GR_DTYPE_F32)
            err = gr_launch_shortcut_f32(in, xv, from, kview(f), out, yv, nd->p.activation, stream);
        else if (y->dtype == GR_DTYPE_F16)
            err = gr_launch_shortcut_f16(in, xv, from, kview(f), out, yv, nd->p.activation, stream);
        else
            err = gr_launch_shortcut_i8(in, xv, x->scale, from, kview(f), f->scale, out, yv,
                                        y->scale, nd->p.activation, stream);
        break;
    }
    case GR_OP_ROUTE: {
        /* Not aliased by the planner: copy each input (or its group slice) into place. */
        int offset = 0;
        for (int k = 0; k < nd->n_inputs; k++) {
            const gr_plan_tensor *src = &plan->tensors[nd->inputs[k]];
            gr_kview sv = kview(src);
            int groups = nd->p.groups > 1 ? nd->p.groups : 1;
            sv.c = src->c / groups;
            sv.c_offset += (nd->p.groups > 1 ? nd->p.group_id : 0) * sv.c;
            gr_kview dv = yv;
            dv.c = sv.c;
            dv.c_offset += offset;
            offset += sv.c;
            const void *sp = tensor_storage(v, nd->inputs[k]);
            if (y->dtype == GR_DTYPE_F32)
                err = gr_launch_route_copy_f32(sp, sv, out, dv, stream);
            else if (y->dtype == GR_DTYPE_F16)
                err = gr_launch_route_copy_f16(sp, sv, out, dv, stream);
            else
                err = gr_launch_route_copy_i8(sp, sv, out, dv, stream);
            if (err != cudaSuccess)
                break;
        }
        break;
    }
    case GR_OP_REGION:
        if (y->dtype != GR_DTYPE_F32)
            return unsupported(nd, x, y);
        err = gr_launch_region_f32(in, out, x->n, x->h, x->w, nd->p.num, nd->p.coords,
                                   nd->p.classes, nd->p.softmax, stream);
        break;
    case GR_OP_YOLO:
        if (y->dtype != GR_DTYPE_F32)
            return unsupported(nd, x, y);
        err = gr_launch_yolo_f32(in, out, x->n, x->h, x->w, nd->p.n_mask, nd->p.classes, stream);
        break;
    default: return unsupported(nd, x, y);
    }
    return kernel_status(err, nd, index);
}

/* The whole forward pass on the plan's streams, as launched eagerly or recorded by capture.
 * `node_events` (optional, 2 per node) brackets every node for the instrumented run. */
static gr_status enqueue_forward(gpu_state *g, variant *v, cudaEvent_t *node_events,
                                 cudaEvent_t *copy_events)
{
    const gr_plan *plan = v->plan;
    cudaStream_t s0 = g->streams[0];
    if (copy_events)
        CUDA_TRY(cudaEventRecord(copy_events[0], s0));
    CUDA_TRY(cudaMemcpyAsync(v->io, v->host_in, v->in_bytes, cudaMemcpyHostToDevice, s0));
    if (copy_events)
        CUDA_TRY(cudaEventRecord(copy_events[1], s0));
    /* Fork: every other stream starts after the input copy. */
    if (g->n_streams > 1) {
        CUDA_TRY(cudaEventRecord(g->fork, s0));
        for (int s = 1; s < g->n_streams; s++)
            CUDA_TRY(cudaStreamWaitEvent(g->streams[s], g->fork, 0));
    }
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        cudaStream_t stream = g->streams[nd->stream];
        for (int k = 0; k < nd->n_waits; k++)
            CUDA_TRY(cudaStreamWaitEvent(stream, g->events[plan->waits[nd->wait_begin + k]], 0));
        if (node_events)
            CUDA_TRY(cudaEventRecord(node_events[2 * i], stream));
        GR_TRY(launch_node(g, v, i));
        if (node_events)
            CUDA_TRY(cudaEventRecord(node_events[2 * i + 1], stream));
        if (nd->record_event >= 0)
            CUDA_TRY(cudaEventRecord(g->events[nd->record_event], stream));
    }
    for (int k = 0; k < plan->n_join_waits; k++)
        CUDA_TRY(cudaStreamWaitEvent(s0, g->events[plan->waits[plan->join_wait_begin + k]], 0));
    /* Join every stream back (capture requires it; eagerly it orders the output copy). */
    for (int s = 1; s < g->n_streams; s++) {
        CUDA_TRY(cudaEventRecord(g->events[g->n_events - MAX_STREAMS + s], g->streams[s]));
        CUDA_TRY(cudaStreamWaitEvent(s0, g->events[g->n_events - MAX_STREAMS + s], 0));
    }
    if (copy_events)
        CUDA_TRY(cudaEventRecord(copy_events[2], s0));
    CUDA_TRY(cudaMemcpyAsync(v->host_out, v->io + v->in_bytes, v->out_bytes, cudaMemcpyDeviceToHost,
                             s0));
    if (copy_events)
        CUDA_TRY(cudaEventRecord(copy_events[3], s0));
    return GR_OK;
}

/* ---- weights ------------------------------------------------------------------------------ */

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Pack and upload every conv's weights, multipliers and biases (build-time copies). */
static gr_status upload_weights(variant *v)
{
    const gr_plan *plan = v->plan;
    size_t total = 0;
    size_t *offsets = gr_calloc((size_t)plan->n_nodes * 3, sizeof *offsets, "weight offsets");
    if (!offsets)
        return GR_ERR_OUT_OF_MEMORY;
    /* Measure. */
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        if (nd->kind != GR_OP_CONV)
            continue;
        const gr_plan_tensor *x = &plan->tensors[nd->inputs[0]];
        int out_c = nd->p.filters, k = nd->p.size;
        size_t wbytes = x->dtype == GR_DTYPE_I8
                            ? gr_conv_packed_weight_count_i8(out_c, x->c, k)
                        : x->dtype == GR_DTYPE_F16
                            ? gr_conv_packed_weight_count_f16(out_c, x->c, k) * 2
                            : nd->n_w * sizeof(float);
        offsets[3 * i] = total;
        total = align_up(total + wbytes, 256);
        offsets[3 * i + 1] = total;
        total = align_up(total + (size_t)out_c * sizeof(float), 256);
        offsets[3 * i + 2] = total;
        total = align_up(total + (size_t)out_c * sizeof(float), 256);
    }
    uint8_t *host = gr_calloc(total ? total : 1, 1, "packed weights");
    if (!host) {
        free(offsets);
        return GR_ERR_OUT_OF_MEMORY;
    }
    gr_status st = GR_OK;
    for (int i = 0; i < plan->n_nodes && st == GR_OK; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        if (nd->kind != GR_OP_CONV)
            continue;
        const gr_plan_tensor *x = &plan->tensors[nd->inputs[0]];
        int out_c = nd->p.filters, k = nd->p.size;
        const float *w = plan->weights + nd->w_offset;
        float *mul = (float *)(host + offsets[3 * i + 1]);
        float *bias = (float *)(host + offsets[3 * i + 2]);
        memcpy(bias, plan->weights + nd->b_offset, (size_t)out_c * sizeof(float));
        cudaError_t err = cudaSuccess;
        if (x->dtype == GR_DTYPE_I8) {
            err = gr_conv_pack_weights_i8(w, out_c, x->c, k, (int8_t *)(host + offsets[3 * i]), mul);
            for (int c = 0; c < out_c; c++)
                mul[c] = x->scale * mul[c]; /* m[c] = s_in * s_w[c], in f32 as the spec says */
        } else if (x->dtype == GR_DTYPE_F16) {
            err = gr_conv_pack_weights_f16(w, out_c, x->c, k, (uint16_t *)(host + offsets[3 * i]));
        } else {
            memcpy(host + offsets[3 * i], w, nd->n_w * sizeof(float));
        }
        if (err != cudaSuccess)
            st = gr_fail(GR_ERR_INTERNAL, "packing the weights of layer %d failed: %s", nd->layer,
                         cudaGetErrorName(err));
    }
    if (st == GR_OK) {
        cudaError_t err = cudaMalloc((void **)&v->weights, total ? total : 256);
        if (err == cudaSuccess)
            err = cudaMemcpy(v->weights, host, total, cudaMemcpyHostToDevice);
        if (err != cudaSuccess)
            st = cuda_fail(err, "uploading the weights", __LINE__);
    }
    if (st == GR_OK) {
        for (int i = 0; i < plan->n_nodes; i++) {
            if (plan->nodes[i].kind != GR_OP_CONV)
                continue;
            const gr_plan_tensor *x = &plan->tensors[plan->nodes[i].inputs[0]];
            v->nw[i].weights = v->weights + offsets[3 * i];
            v->nw[i].mul = x->dtype == GR_DTYPE_I8 ? (float *)(v->weights + offsets[3 * i + 1]) : NULL;
            v->nw[i].bias = (float *)(v->weights + offsets[3 * i + 2]);
        }
    }
    free(host);
    free(offsets);
    return st;
}

/* Scratch: im2col per stream for fp32 convs (convs on one stream run one after another);
 * split-K partials per tensor-core conv node. */
static gr_status alloc_scratch(gpu_state *g, variant *v)
{
    const gr_plan *plan = v->plan;
    size_t im2col[MAX_STREAMS] = {0}, splitk_total = 0;
    v->splitk_offset = gr_calloc((size_t)plan->n_nodes, sizeof(size_t), "split-K offsets");
    v->splitk_bytes = gr_calloc((size_t)plan->n_nodes, sizeof(size_t), "split-K sizes");
    if (!v->splitk_offset || !v->splitk_bytes)
        return GR_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        if (nd->kind != GR_OP_CONV || nd->noop)
            continue;
        const gr_plan_tensor *x = &plan->tensors[nd->inputs[0]];
        const gr_plan_tensor *y = &plan->tensors[nd->output];
        int s = nd->stream;
        if (x->dtype == GR_DTYPE_F32) {
            int per_image = x->n > 1 && (x->c_stride != x->c || y->c_stride != y->c);
            gr_conv_f32_args a = {.batch = per_image ? 1 : x->n, .in_c = x->c, .in_h = x->h,
                                  .in_w = x->w, .out_c = y->c, .ksize = nd->p.size,
                                  .stride = nd->p.stride, .pad = nd->p.pad};
            int ok = 1;
            size_t floats = gr_conv_f32_workspace_floats(&a, &ok);
            if (!ok)
                return gr_fail(GR_ERR_LIMIT, "layer %d: im2col workspace too large", nd->layer);
            if (floats > im2col[s])
                im2col[s] = floats;
        } else {
            gr_conv_args a = {.batch = x->n, .in_h = x->h, .in_w = x->w, .in_c = x->c,
                              .in_c_stride = x->c_stride, .in_c_offset = x->c_offset,
                              .out_c = y->c, .out_c_stride = y->c_stride,
                              .out_c_offset = y->c_offset, .ksize = nd->p.size,
                              .stride = nd->p.stride, .pad = nd->p.pad,
                              .activation = (int)nd->p.activation,
                              .out_kind = y->dtype == GR_DTYPE_I8 ? GR_CONV_OUT_I8 : GR_CONV_OUT_F16};
            size_t bytes = x->dtype == GR_DTYPE_I8 ? gr_conv_workspace_bytes_i8(&a)
                                                   : gr_conv_workspace_bytes_f16(&a);
            v->splitk_offset[i] = splitk_total;
            v->splitk_bytes[i] = bytes;
            splitk_total = align_up(splitk_total + bytes, 256);
        }
    }
    for (int s = 0; s < g->n_streams; s++)
        if (im2col[s])
            CUDA_TRY(cudaMalloc((void **)&v->im2col[s], im2col[s] * sizeof(float)));
    if (splitk_total) {
        CUDA_TRY(cudaMalloc((void **)&v->splitk, splitk_total));
        CUDA_TRY(cudaMemset(v->splitk, 0, splitk_total)); /* tile counters start at zero */
    }
    return GR_OK;
}

/* ---- variants ----------------------------------------------------------------------------- */

static void variant_free(variant *v)
{
    if (v->exec)
        cudaGraphExecDestroy(v->exec);
    if (v->graph)
        cudaGraphDestroy(v->graph);
    for (int s = 0; s < MAX_STREAMS; s++)
        cudaFree(v->im2col[s]);
    cudaFree(v->splitk);
    free(v->splitk_offset);
    free(v->splitk_bytes);
    cudaFree(v->weights);
    cudaFree(v->arena);
    cudaFree(v->io);
    if (v->host_in)
        cudaFreeHost(v->host_in);
    if (v->host_out)
        cudaFreeHost(v->host_out);
    free(v->nw);
    gr_plan_free(v->plan);
    memset(v, 0, sizeof *v);
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* One eager run with events around every node: the time split (type conversion, copies,
 * computation), median over a few runs. Also the warm-up before capture. */
static gr_status instrumented_runs(gpu_state *g, variant *v)
{
    const gr_plan *plan = v->plan;
    enum { RUNS = 5 };
    int n_ev = 2 * plan->n_nodes;
    cudaEvent_t *ev = gr_calloc((size_t)n_ev + 4, sizeof *ev, "timing events");
    if (!ev)
        return GR_ERR_OUT_OF_MEMORY;
    gr_status st = GR_OK;
    int created = 0;
    for (; created < n_ev + 4 && st == GR_OK; created++) {
        cudaError_t err = cudaEventCreate(&ev[created]);
        if (err != cudaSuccess)
            st = cuda_fail(err, "cudaEventCreate", __LINE__);
    }
    float convert[RUNS], copy[RUNS], compute[RUNS], total[RUNS];
    for (int r = 0; r < RUNS && st == GR_OK; r++) {
        st = enqueue_forward(g, v, ev, ev + n_ev);
        if (st == GR_OK) {
            cudaError_t err = cudaStreamSynchronize(g->streams[0]);
            if (err != cudaSuccess)
                st = cuda_fail(err, "cudaStreamSynchronize (instrumented run)", __LINE__);
        }
        float cv = 0, cp = 0, cm = 0, ms = 0;
        for (int i = 0; i < plan->n_nodes && st == GR_OK; i++) {
            const gr_plan_node *nd = &plan->nodes[i];
            if (cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]) != cudaSuccess)
                continue;
            if (nd->kind == GR_OP_QUANTIZE || nd->kind == GR_OP_DEQUANTIZE ||
                nd->kind == GR_NODE_CONVERT)
                cv += ms;
            else
                cm += ms;
        }
        float a = 0, b = 0, all = 0;
        cudaEventElapsedTime(&a, ev[n_ev], ev[n_ev + 1]);
        cudaEventElapsedTime(&b, ev[n_ev + 2], ev[n_ev + 3]);
        cudaEventElapsedTime(&all, ev[n_ev], ev[n_ev + 3]);
        cp = a + b;
        convert[r] = cv;
        copy[r] = cp;
        compute[r] = cm;
        total[r] = all;
    }
    cudaGetLastError();
    for (int i = 0; i < created; i++)
        cudaEventDestroy(ev[i]);
    free(ev);
    if (st != GR_OK)
        return st;
    qsort(convert, RUNS, sizeof(float), cmp_float);
    qsort(copy, RUNS, sizeof(float), cmp_float);
    qsort(compute, RUNS, sizeof(float), cmp_float);
    qsort(total, RUNS, sizeof(float), cmp_float);
    v->split = (gr_timing){1e3 * (double)convert[RUNS / 2], 1e3 * (double)copy[RUNS / 2],
                           1e3 * (double)compute[RUNS / 2], 1e3 * (double)total[RUNS / 2]};
    return GR_OK;
}

static gr_status variant_build(gr_engine *e, gpu_state *g, variant *v, int input_u8)
{
    const gr_net *net = e->net;
    gr_plan_options po;
    gr_plan_options_default(&po);
    po.precision = e->opt.precision;
    po.batch = e->opt.batch;
    po.input_u8 = input_u8;
    v->input_u8 = input_u8;
    GR_TRY(gr_plan_build(net, &po, &v->plan));
    gr_plan *plan = v->plan;
    if (plan->n_outputs != e->n_heads || plan->n_outputs > GR_MAX_HEADS)
        return gr_fail(GR_ERR_INTERNAL, "plan has %d outputs, the network %d heads",
                       plan->n_outputs, e->n_heads);
    if (e->opt.precision == GR_PREC_INT8)
        GR_TRY(gr_plan_set_ranges(plan, g->layer_range, g->input_range));
    if (!plan->scales_ready)
        return gr_fail(GR_ERR_INTERNAL, "plan has int8 tensors without scales");
    if (plan->n_streams > g->n_streams || plan->n_events > g->n_events - MAX_STREAMS)
        return gr_fail(GR_ERR_INTERNAL, "plan uses %d streams and %d events, the engine has %d and %d",
                       plan->n_streams, plan->n_events, g->n_streams, g->n_events - MAX_STREAMS);
    v->nw = gr_calloc((size_t)plan->n_nodes, sizeof *v->nw, "node weights");
    if (!v->nw)
        return GR_ERR_OUT_OF_MEMORY;

    /* The io block: input, then each output (f32 NCHW, 256-byte aligned) back to back. */
    const gr_plan_tensor *in = &plan->tensors[plan->input_tensor];
    v->in_bytes = align_up(in->bytes, 256);
    v->out_bytes = 0;
    for (int k = 0; k < plan->n_outputs; k++) {
        const gr_plan_tensor *t = &plan->tensors[plan->output_tensors[k]];
        if (t->dtype != GR_DTYPE_F32 || t->view_of >= 0)
            return gr_fail(GR_ERR_INTERNAL, "plan output %d is not a dense f32 tensor", k);
        v->out_offset[k] = v->out_bytes;
        v->out_bytes += align_up(t->bytes, 256);
    }
    CUDA_TRY(cudaMalloc((void **)&v->arena, plan->arena_bytes ? plan->arena_bytes : 256));
    CUDA_TRY(cudaMalloc((void **)&v->io, v->in_bytes + v->out_bytes));
    CUDA_TRY(cudaMallocHost(&v->host_in, v->in_bytes));
    CUDA_TRY(cudaMallocHost((void **)&v->host_out, v->out_bytes));
    /* Deterministic, non-zero contents before the first run (warm-up and timing). */
    memset(v->host_in, 0x40, v->in_bytes);
    CUDA_TRY(cudaMemset(v->arena, 0, plan->arena_bytes ? plan->arena_bytes : 256));
    GR_TRY(upload_weights(v));
    GR_TRY(alloc_scratch(g, v));
    CUDA_TRY(cudaDeviceSynchronize());

    /* Warm-up and the time split, eagerly; then capture the same launches. */
    GR_TRY(instrumented_runs(g, v));
    if (e->opt.use_cuda_graph) {
        CUDA_TRY(cudaStreamBeginCapture(g->streams[0], cudaStreamCaptureModeThreadLocal));
        gr_status st = enqueue_forward(g, v, NULL, NULL);
        cudaGraph_t graph = NULL;
        cudaError_t err = cudaStreamEndCapture(g->streams[0], &graph);
        if (st != GR_OK) {
            if (graph)
                cudaGraphDestroy(graph);
            return st;
        }
        if (err != cudaSuccess)
            return cuda_fail(err, "cudaStreamEndCapture", __LINE__);
        v->graph = graph;
        CUDA_TRY(cudaGraphInstantiate(&v->exec, v->graph, 0));
        CUDA_TRY(cudaGraphUpload(v->exec, g->streams[0]));
        CUDA_TRY(cudaStreamSynchronize(g->streams[0]));
    }
    v->built = 1;
    return GR_OK;
}

static variant *current(gpu_state *g, int u8) { return &g->var[u8 ? 1 : 0]; }

static gr_status ensure_variant(gr_engine *e, int u8)
{
    gpu_state *g = e->impl;
    variant *v = current(g, u8);
    if (v->built)
        return GR_OK;
    CUDA_TRY(cudaSetDevice(g->device));
    gr_status st = variant_build(e, g, v, u8);
    if (st != GR_OK)
        variant_free(v);
    return st;
}

/* ---- backend ops -------------------------------------------------------------------------- */

static void point_outputs(gr_engine *e, variant *v)
{
    for (int k = 0; k < e->n_heads; k++)
        e->outputs[k] = (float *)(v->host_out + v->out_offset[k]);
}

static gr_status gpu_input_buffer(gr_engine *e, int u8, void **buffer, size_t *bytes)
{
    GR_TRY(ensure_variant(e, u8));
    variant *v = current(e->impl, u8);
    *buffer = v->host_in;
    *bytes = v->plan->tensors[v->plan->input_tensor].bytes;
    return GR_OK;
}

static gr_status run_failed(gr_engine *e, cudaError_t err, const char *what)
{
    e->failed = 1;
    cudaGetLastError();
    return cuda_fail(err, what, __LINE__);
}

static gr_status gpu_run(gr_engine *e, int u8)
{
    gpu_state *g = e->impl;
    GR_TRY(ensure_variant(e, u8));
    variant *v = current(g, u8);
    double t0 = gr_now_us();
    cudaError_t err;
    if (g->inject != cudaSuccess) {
        err = g->inject;
        g->inject = cudaSuccess;
        return run_failed(e, err, "cudaGraphLaunch (injected by a test)");
    }
    if (v->exec) {
        err = cudaGraphLaunch(v->exec, g->streams[0]);
        if (err != cudaSuccess)
            return run_failed(e, err, "cudaGraphLaunch");
    } else {
        gr_status st = enqueue_forward(g, v, NULL, NULL);
        if (st != GR_OK) {
            e->failed = 1;
            return st;
        }
    }
    err = cudaStreamSynchronize(g->streams[0]);
    if (err != cudaSuccess)
        return run_failed(e, err, "cudaStreamSynchronize after the run");
    double t1 = gr_now_us();
    point_outputs(e, v);
    e->timing = v->split;
    e->timing.end_to_end_us = t1 - t0;
    return GR_OK;
}

static gr_status gpu_run_async(gr_engine *e, void *stream, void *event)
{
    gpu_state *g = e->impl;
    GR_TRY(ensure_variant(e, e->input_u8));
    variant *v = current(g, e->input_u8);
    if (!v->exec)
        return gr_fail(GR_ERR_STATE, "gr_engine_run_async needs use_cuda_graph = 1");
    cudaStream_t s = stream ? (cudaStream_t)stream : g->streams[0];
    cudaError_t err = cudaGraphLaunch(v->exec, s);
    if (err != cudaSuccess)
        return run_failed(e, err, "cudaGraphLaunch (async)");
    if (event && (err = cudaEventRecord((cudaEvent_t)event, s)) != cudaSuccess)
        return run_failed(e, err, "cudaEventRecord (async completion)");
    point_outputs(e, v);
    e->timing = v->split;
    e->timing.end_to_end_us = 0.0;
    return GR_OK;
}

static void gpu_destroy(gr_engine *e)
{
    gpu_state *g = e->impl;
    if (!g)
        return;
    cudaSetDevice(g->device);
    for (int s = 0; s < MAX_STREAMS; s++)
        if (g->streams[s])
            cudaStreamSynchronize(g->streams[s]);
    for (int i = 0; i < 2; i++)
        variant_free(&g->var[i]);
    for (int i = 0; i < g->n_events; i++)
        if (g->events[i])
            cudaEventDestroy(g->events[i]);
    free(g->events);
    if (g->fork)
        cudaEventDestroy(g->fork);
    for (int s = 0; s < MAX_STREAMS; s++) {
        if (g->cublas[s])
            cublasDestroy(g->cublas[s]);
        cudaFree(g->cublas_ws[s]);
        if (g->streams[s])
            cudaStreamDestroy(g->streams[s]);
    }
    free(g->layer_range);
    cudaGetLastError();
    for (int k = 0; k < e->n_heads; k++)
        e->outputs[k] = NULL;
    free(g);
    e->impl = NULL;
}

static const gr_backend_ops gpu_ops = {"gpu", gpu_input_buffer, gpu_run, gpu_run_async, gpu_destroy};

gr_status gr_backend_gpu_init(gr_engine *e)
{
    int count = gr_cuda_device_count();
    if (count == 0)
        return gr_fail(GR_ERR_NO_DEVICE, "no CUDA device is visible (--device gpu)");
    if (e->opt.gpu_index >= count)
        return gr_fail(GR_ERR_NO_DEVICE, "gpu_index %d: only %d CUDA device%s visible",
                       e->opt.gpu_index, count, count == 1 ? " is" : "s are");
    gpu_state *g = gr_calloc(1, sizeof *g, "GPU engine");
    if (!g)
        return GR_ERR_OUT_OF_MEMORY;
    e->impl = g;
    e->ops = &gpu_ops;
    g->device = e->opt.gpu_index;
    g->tf32 = e->opt.tf32 != 0;
    g->fp16_accumulate = e->opt.fp16_accumulate != 0;
    CUDA_TRY(cudaSetDevice(g->device));
    struct cudaDeviceProp prop;
    CUDA_TRY(cudaGetDeviceProperties(&prop, g->device));
    if (e->opt.precision != GR_PREC_FP32 && prop.major * 10 + prop.minor < 72)
        return gr_fail(GR_ERR_UNSUPPORTED, "%s needs tensor cores with int8 (sm_72+); %s is sm_%d%d",
                       gr_precision_name(e->opt.precision), prop.name, prop.major, prop.minor);
    snprintf(e->device_name, sizeof e->device_name, "%.100s (sm_%d%d)", prop.name, prop.major,
             prop.minor);

    /* How many streams and events the plans use (the float-input plan may add a conversion). */
    gr_plan_options po;
    gr_plan_options_default(&po);
    po.precision = e->opt.precision;
    po.batch = e->opt.batch;
    gr_plan *probe = NULL;
    GR_TRY(gr_plan_build(e->net, &po, &probe));
    g->n_events = probe->n_events * 2 + MAX_STREAMS; /* room for either input variant + joins */
    g->n_streams = probe->n_streams < 1 ? 1 : probe->n_streams;
    gr_plan_free(probe);
    if (g->n_streams > MAX_STREAMS)
        return gr_fail(GR_ERR_UNSUPPORTED, "the plan uses %d streams, the engine at most %d",
                       g->n_streams, MAX_STREAMS);

    /* Streams, events and cuBLAS handles (one per stream, each with its own workspace so capture
     * never allocates and parallel branches never share scratch). */
    for (int s = 0; s < g->n_streams; s++) {
        CUDA_TRY(cudaStreamCreateWithFlags(&g->streams[s], cudaStreamNonBlocking));
        if (e->opt.precision != GR_PREC_FP32)
            continue; /* only the fp32 path calls cuBLAS */
        if (cublasCreate(&g->cublas[s]) != CUBLAS_STATUS_SUCCESS)
            return gr_fail(GR_ERR_CUBLAS, "cublasCreate failed");
        CUDA_TRY(cudaMalloc(&g->cublas_ws[s], cublas_ws_bytes));
        /* Stream first: cublasSetStream resets the workspace to cuBLAS's own pool, which would
         * then allocate inside graph capture. */
        if (cublasSetStream(g->cublas[s], g->streams[s]) != CUBLAS_STATUS_SUCCESS ||
            cublasSetWorkspace(g->cublas[s], g->cublas_ws[s], cublas_ws_bytes) != CUBLAS_STATUS_SUCCESS)
            return gr_fail(GR_ERR_CUBLAS, "cublasSetStream/cublasSetWorkspace failed");
    }
    CUDA_TRY(cudaEventCreateWithFlags(&g->fork, cudaEventDisableTiming));
    g->events = gr_calloc((size_t)g->n_events, sizeof *g->events, "events");
    if (!g->events)
        return GR_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < g->n_events; i++)
        CUDA_TRY(cudaEventCreateWithFlags(&g->events[i], cudaEventDisableTiming));

    /* int8 scales before planning. */
    if (e->opt.precision == GR_PREC_INT8)
        GR_TRY(gr_engine_calibrate(e, &g->layer_range, &g->input_range));

    /* The default input is uint8; build it now so a failure shows at build time. */
    GR_TRY(ensure_variant(e, 1));
    point_outputs(e, current(g, 1));
    return GR_OK;
}

/* ---- inspection (tests) ------------------------------------------------------------------- */

static int is_host_pointer(const void *p)
{
    struct cudaPointerAttributes attr;
    if (!p || cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return attr.type == cudaMemoryTypeHost || attr.type == cudaMemoryTypeUnregistered;
}

gr_status gr_engine_graph_info(const gr_engine *engine, gr_graph_info *info)
{
    if (!engine || !info)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_graph_info: NULL argument");
    memset(info, 0, sizeof *info);
    if (engine->device != GR_DEVICE_GPU || !engine->impl)
        return gr_fail(GR_ERR_STATE, "gr_engine_graph_info: not a GPU engine");
    const gpu_state *g = engine->impl;
    const variant *v = &g->var[engine->input_u8 ? 1 : 0];
    if (!v->graph)
        return gr_fail(GR_ERR_STATE, "gr_engine_graph_info: the engine runs without a CUDA graph");
    size_t n = 0;
    CUDA_TRY(cudaGraphGetNodes(v->graph, NULL, &n));
    cudaGraphNode_t *nodes = gr_calloc(n ? n : 1, sizeof *nodes, "graph nodes");
    if (!nodes)
        return GR_ERR_OUT_OF_MEMORY;
    cudaError_t err = cudaGraphGetNodes(v->graph, nodes, &n);
    info->nodes = (int)n;
    for (size_t i = 0; i < n && err == cudaSuccess; i++) {
        enum cudaGraphNodeType type;
        err = cudaGraphNodeGetType(nodes[i], &type);
        if (err != cudaSuccess)
            break;
        switch (type) {
        case cudaGraphNodeTypeKernel: info->kernels++; break;
        case cudaGraphNodeTypeMemcpy: {
            struct cudaMemcpy3DParms p;
            err = cudaGraphMemcpyNodeGetParams(nodes[i], &p);
            if (err != cudaSuccess)
                break;
            int src_host = is_host_pointer(p.srcPtr.ptr);
            int dst_host = is_host_pointer(p.dstPtr.ptr);
            if (p.kind == cudaMemcpyHostToDevice || (p.kind == cudaMemcpyDefault && src_host && !dst_host))
                info->memcpy_h2d++;
            else if (p.kind == cudaMemcpyDeviceToHost || (p.kind == cudaMemcpyDefault && !src_host && dst_host))
                info->memcpy_d2h++;
            else
                info->memcpy_other++;
            break;
        }
        case cudaGraphNodeTypeMemset: info->memsets++; break;
        case cudaGraphNodeTypeMemAlloc: info->mem_alloc++; break;
        case cudaGraphNodeTypeMemFree: info->mem_free++; break;
        case cudaGraphNodeTypeEventRecord:
        case cudaGraphNodeTypeWaitEvent: info->events++; break;
        case cudaGraphNodeTypeEmpty: info->empty++; break;
        default: info->other++; break;
        }
    }
    free(nodes);
    if (err != cudaSuccess)
        return cuda_fail(err, "inspecting the graph", __LINE__);
    return GR_OK;
}

gr_status gr_engine_plan_stats(const gr_engine *engine, int *launching_nodes, size_t *arena_bytes)
{
    if (!engine || engine->device != GR_DEVICE_GPU || !engine->impl)
        return gr_fail(GR_ERR_STATE, "gr_engine_plan_stats: not a GPU engine");
    const gpu_state *g = engine->impl;
    const variant *v = &g->var[engine->input_u8 ? 1 : 0];
    if (!v->plan)
        return gr_fail(GR_ERR_STATE, "gr_engine_plan_stats: no plan built");
    int n = 0;
    for (int i = 0; i < v->plan->n_nodes; i++) {
        const gr_plan_node *nd = &v->plan->nodes[i];
        n += !(nd->noop || nd->kind == GR_NODE_INPUT || nd->kind == GR_NODE_OUTPUT);
    }
    if (launching_nodes)
        *launching_nodes = n;
    if (arena_bytes)
        *arena_bytes = v->plan->arena_bytes;
    return GR_OK;
}

/* ---- tracing (tests, debugging) ------------------------------------------------------------ */

const struct gr_plan *gr_engine_debug_plan(const gr_engine *engine)
{
    if (!engine || engine->device != GR_DEVICE_GPU || !engine->impl)
        return NULL;
    const gpu_state *g = engine->impl;
    return g->var[1].plan;
}

/* Copy every buffer (arena, input, outputs) into a CPU executor's storage so its decoder reads
 * the GPU's values. */
static gr_status mirror_buffers(const variant *v, gr_plan_exec *ex, uint8_t *scratch)
{
    const gr_plan *plan = v->plan;
    for (int b = 0; b < plan->n_buffers; b++) {
        int root = plan->buffers[b].root;
        const uint8_t *src = tensor_storage(v, root);
        size_t bytes = plan->tensors[root].bytes;
        CUDA_TRY(cudaMemcpy(scratch, src, bytes, cudaMemcpyDeviceToHost));
        GR_TRY(gr_plan_exec_load_buffer(ex, b, scratch, bytes));
    }
    return GR_OK;
}

gr_status gr_engine_debug_trace(gr_engine *engine, const uint8_t *input, gr_trace_fn fn, void *user)
{
    if (!engine || !input || !fn)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_debug_trace: NULL argument");
    if (engine->device != GR_DEVICE_GPU || !engine->impl)
        return gr_fail(GR_ERR_STATE, "gr_engine_debug_trace: not a GPU engine");
    GR_TRY(ensure_variant(engine, 1));
    gpu_state *g = engine->impl;
    variant *v = &g->var[1];
    const gr_plan *plan = v->plan;
    gr_plan_exec *ex = NULL;
    GR_TRY(gr_plan_exec_create(plan, 1, &ex));
    size_t largest = 0, elems = 0;
    for (int t = 0; t < plan->n_tensors; t++) {
        const gr_plan_tensor *pt = &plan->tensors[t];
        size_t n = (size_t)pt->n * pt->c * pt->h * pt->w;
        if (pt->bytes > largest)
            largest = pt->bytes;
        if (n > elems)
            elems = n;
    }
    uint8_t *scratch = gr_malloc(largest, "trace scratch");
    float *values = gr_malloc(elems * sizeof(float), "trace values");
    gr_status st = scratch && values ? GR_OK : GR_ERR_OUT_OF_MEMORY;
    const gr_plan_tensor *in = &plan->tensors[plan->input_tensor];
    if (st == GR_OK) {
        memcpy(v->host_in, input, in->bytes);
        cudaError_t err = cudaMemcpy(v->io, v->host_in, in->bytes, cudaMemcpyHostToDevice);
        if (err != cudaSuccess)
            st = cuda_fail(err, "trace input copy", __LINE__);
    }
    for (int i = 0; i < plan->n_nodes && st == GR_OK; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        if (nd->noop || nd->kind == GR_NODE_INPUT || nd->kind == GR_NODE_OUTPUT)
            continue;
        st = launch_node(g, v, i);
        if (st != GR_OK)
            break;
        cudaError_t err = cudaDeviceSynchronize();
        if (err != cudaSuccess) {
            st = cuda_fail(err, "trace node", __LINE__);
            break;
        }
        st = mirror_buffers(v, ex, scratch);
        if (st == GR_OK)
            st = gr_plan_exec_read_tensor(ex, nd->output, values);
        if (st == GR_OK)
            fn(plan, i, values, user);
    }
    free(scratch);
    free(values);
    gr_plan_exec_destroy(ex);
    return st;
}

gr_status gr_engine_debug_inject_error(gr_engine *engine, int cuda_error)
{
    if (!engine || engine->device != GR_DEVICE_GPU || !engine->impl)
        return gr_fail(GR_ERR_STATE, "gr_engine_debug_inject_error: not a GPU engine");
    ((gpu_state *)engine->impl)->inject = (cudaError_t)cuda_error;
    return GR_OK;
}
