/* CUDA backend: turns a plan (planner/plan.h) into one captured CUDA graph.
 *
 * Build: plan the network for (precision, batch, input type); make sure there are as many
 * streams and events as the plan uses; allocate one arena for every activation, one block for the
 * weights, one device block for the network input and the outputs (outputs back to back, so one
 * copy brings them all home), pinned host staging for both; upload the weights (build-time
 * copies, gpu_weights.c); run the forward pass once eagerly (module loading, cuBLAS setup) and
 * time it node by node for the time split; then capture the same dispatch loop (gpu_dispatch.c)
 * on the plan's streams - H2D input copy, every node, D2H output copy - into one graph and
 * instantiate it.
 *
 * Run: one cudaGraphLaunch and one stream synchronization. Nothing is allocated, copied by the host
 * or synchronized besides. With use_cuda_graph = 0 the same dispatch loop runs eagerly instead.
 *
 * An engine takes u8 HWC input by default (a quarter of the bytes of float). Float input (the
 * f32 entry points) gets its own plan and graph, built the first time it is asked for.
 * Every CUDA and cuBLAS status is checked; a failure during a run marks the engine failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/gpu_private.h"

static const size_t cublas_ws_bytes = 32u << 20; /* what cuBLAS asks for on Hopper */

/* ---- streams and events -------------------------------------------------------------------- */

/* A cuBLAS handle for stream s, with its own workspace so capture never allocates and parallel
 * branches never share scratch. */
static gr_status create_cublas(gpu_state *g, int s)
{
    if (!g->cublas_ws[s])
        CUDA_TRY(cudaMalloc(&g->cublas_ws[s], cublas_ws_bytes));
    if (cublasCreate(&g->cublas[s]) != CUBLAS_STATUS_SUCCESS) {
        g->cublas[s] = NULL;
        return gr_fail(GR_ERR_CUBLAS, "cublasCreate failed");
    }
    /* Stream first: cublasSetStream resets the workspace to cuBLAS's own pool, which would
     * then allocate inside graph capture. */
    if (cublasSetStream(g->cublas[s], g->streams[s]) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(g->cublas[s], g->cublas_ws[s], cublas_ws_bytes) !=
            CUBLAS_STATUS_SUCCESS) {
        cublasDestroy(g->cublas[s]);
        g->cublas[s] = NULL;
        return gr_fail(GR_ERR_CUBLAS, "cublasSetStream/cublasSetWorkspace failed");
    }
    return GR_OK;
}

/* Grow the streams (with their join events, and a cuBLAS handle on each once a plan calls
 * cuBLAS: f32 convs, [connected], in any engine precision) and the plan events to what `plan`
 * uses. Variants built earlier keep working: their plans use a prefix of both. */
static gr_status ensure_streams(gpu_state *g, const gr_plan *plan)
{
    int streams = plan->n_streams < 1 ? 1 : plan->n_streams;
    if (streams > GR_GPU_MAX_STREAMS)
        return gr_fail(GR_ERR_UNSUPPORTED, "the plan uses %d streams, the engine at most %d",
                       streams, GR_GPU_MAX_STREAMS);
    for (; g->n_streams < streams; g->n_streams++) {
        int s = g->n_streams;
        CUDA_TRY(cudaStreamCreateWithFlags(&g->streams[s], cudaStreamNonBlocking));
        if (s > 0)
            CUDA_TRY(cudaEventCreateWithFlags(&g->join[s], cudaEventDisableTiming));
    }
    int uses_cublas = 0;
    for (int i = 0; i < plan->n_nodes && !uses_cublas; i++)
        uses_cublas = gr_gpu_node_uses_cublas(plan, &plan->nodes[i]);
    for (int s = 0; s < streams && uses_cublas; s++)
        if (!g->cublas[s])
            GR_TRY(create_cublas(g, s));
    if (plan->n_events > g->n_events) {
        cudaEvent_t *events = gr_calloc((size_t)plan->n_events, sizeof *events, "events");
        if (!events)
            return GR_ERR_OUT_OF_MEMORY;
        if (g->n_events)
            memcpy(events, g->events, (size_t)g->n_events * sizeof *events);
        free(g->events);
        g->events = events;
        for (; g->n_events < plan->n_events; g->n_events++)
            CUDA_TRY(cudaEventCreateWithFlags(&g->events[g->n_events], cudaEventDisableTiming));
    }
    return GR_OK;
}

/* ---- variants ----------------------------------------------------------------------------- */

static void variant_free(gpu_variant *v)
{
    if (v->exec)
        cudaGraphExecDestroy(v->exec);
    if (v->graph)
        cudaGraphDestroy(v->graph);
    for (int s = 0; s < GR_GPU_MAX_STREAMS; s++)
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
    free(v->pdl);
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
static gr_status instrumented_runs(gpu_state *g, gpu_variant *v)
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
            st = gr_gpu_cuda_fail(err, "cudaEventCreate", __FILE__, __LINE__);
    }
    float convert[RUNS], copy[RUNS], compute[RUNS], total[RUNS];
    for (int r = 0; r < RUNS && st == GR_OK; r++) {
        st = gr_gpu_enqueue_forward(g, v, ev, ev + n_ev);
        if (st == GR_OK) {
            cudaError_t err = cudaStreamSynchronize(g->streams[0]);
            if (err != cudaSuccess)
                st = gr_gpu_cuda_fail(err, "cudaStreamSynchronize (instrumented run)", __FILE__,
                                      __LINE__);
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

/* The variant's plan, its int8 scales set. */
static gr_status plan_variant(gr_engine *e, const gpu_state *g, gpu_variant *v, int input_u8,
                              int fuse)
{
    gr_plan_options po;
    gr_plan_options_default(&po);
    po.precision = e->opt.precision;
    po.batch = e->opt.batch;
    po.input_u8 = input_u8;
    po.fuse_maxpool = po.fuse_input_quantize = po.fuse_output_dequantize = fuse;
    GR_TRY(gr_plan_build(e->net, &po, &v->plan));
    const gr_plan *plan = v->plan;
    if (plan->n_outputs != e->n_heads || plan->n_outputs > GR_MAX_HEADS)
        return gr_fail(GR_ERR_INTERNAL, "plan has %d outputs, the network %d heads",
                       plan->n_outputs, e->n_heads);
    if (e->opt.precision == GR_PREC_INT8)
        GR_TRY(gr_plan_set_ranges(v->plan, g->layer_range, g->input_range));
    if (!plan->scales_ready)
        return gr_fail(GR_ERR_INTERNAL, "plan has int8 tensors without scales");
    return GR_OK;
}

static gr_status variant_build(gr_engine *e, gpu_state *g, gpu_variant *v, int input_u8)
{
    /* The tensor-core precisions fuse what the kernels can: maxpools into the convs' epilogues,
     * the input quantization into the first conv, the output dequantization into the heads.
     * If a kernel cannot take one of the planned convs (a 3x3 pool, say), plan again without. */
    int fuse = e->opt.precision != GR_PREC_FP32;
    gr_status st = plan_variant(e, g, v, input_u8, fuse);
    if (st == GR_OK && fuse && gr_gpu_plan_check(g, v) != GR_OK) {
        gr_plan_free(v->plan);
        v->plan = NULL;
        st = plan_variant(e, g, v, input_u8, 0);
    }
    GR_TRY(st);
    gr_plan *plan = v->plan;
    GR_TRY(ensure_streams(g, plan));
    v->nw = gr_calloc((size_t)plan->n_nodes, sizeof *v->nw, "node weights");
    v->pdl = gr_calloc((size_t)plan->n_nodes, 1, "launch modes");
    if (!v->nw || !v->pdl)
        return GR_ERR_OUT_OF_MEMORY;
    gr_gpu_mark_pdl(g, v);

    /* The io block: input, then each output (f32 NCHW, 256-byte aligned) back to back. */
    const gr_plan_tensor *in = &plan->tensors[plan->input_tensor];
    v->in_bytes = gr_gpu_align(in->bytes, 256);
    v->out_bytes = 0;
    for (int k = 0; k < plan->n_outputs; k++) {
        const gr_plan_tensor *t = &plan->tensors[plan->output_tensors[k]];
        if (t->dtype != GR_DTYPE_F32 || t->view_of >= 0)
            return gr_fail(GR_ERR_INTERNAL, "plan output %d is not a dense f32 tensor", k);
        v->out_offset[k] = v->out_bytes;
        v->out_bytes += gr_gpu_align(t->bytes, 256);
    }
    CUDA_TRY(cudaMalloc((void **)&v->arena, plan->arena_bytes ? plan->arena_bytes : 256));
    CUDA_TRY(cudaMalloc((void **)&v->io, v->in_bytes + v->out_bytes));
    CUDA_TRY(cudaMallocHost(&v->host_in, v->in_bytes));
    CUDA_TRY(cudaMallocHost((void **)&v->host_out, v->out_bytes));
    /* Deterministic, non-zero contents before the first run (warm-up and timing). */
    memset(v->host_in, 0x40, v->in_bytes);
    CUDA_TRY(cudaMemset(v->arena, 0, plan->arena_bytes ? plan->arena_bytes : 256));
    GR_TRY(gr_gpu_upload_weights(v));
    GR_TRY(gr_gpu_alloc_scratch(g, v));
    CUDA_TRY(cudaDeviceSynchronize());

    /* Warm-up and the time split, eagerly; then capture the same launches. */
    GR_TRY(instrumented_runs(g, v));
    if (e->opt.use_cuda_graph) {
        CUDA_TRY(cudaStreamBeginCapture(g->streams[0], cudaStreamCaptureModeThreadLocal));
        st = gr_gpu_enqueue_forward(g, v, NULL, NULL);
        cudaGraph_t graph = NULL;
        cudaError_t err = cudaStreamEndCapture(g->streams[0], &graph);
        if (st != GR_OK) {
            if (graph)
                cudaGraphDestroy(graph);
            return st;
        }
        if (err != cudaSuccess)
            return gr_gpu_cuda_fail(err, "cudaStreamEndCapture", __FILE__, __LINE__);
        v->graph = graph;
        CUDA_TRY(cudaGraphInstantiate(&v->exec, v->graph, 0));
        CUDA_TRY(cudaGraphUpload(v->exec, g->streams[0]));
        CUDA_TRY(cudaStreamSynchronize(g->streams[0]));
    }
    v->built = 1;
    return GR_OK;
}

gr_status gr_gpu_ensure_variant(gr_engine *e, int u8)
{
    gpu_state *g = e->impl;
    gpu_variant *v = gr_gpu_variant(g, u8);
    if (v->built)
        return GR_OK;
    CUDA_TRY(cudaSetDevice(g->device));
    gr_status st = variant_build(e, g, v, u8);
    if (st != GR_OK)
        variant_free(v);
    return st;
}

/* ---- backend ops -------------------------------------------------------------------------- */

static void point_outputs(gr_engine *e, gpu_variant *v)
{
    for (int k = 0; k < e->n_heads; k++)
        e->outputs[k] = (float *)(v->host_out + v->out_offset[k]);
}

static gr_status gpu_input_buffer(gr_engine *e, int u8, void **buffer, size_t *bytes)
{
    GR_TRY(gr_gpu_ensure_variant(e, u8));
    gpu_variant *v = gr_gpu_variant(e->impl, u8);
    *buffer = v->host_in;
    *bytes = v->plan->tensors[v->plan->input_tensor].bytes;
    return GR_OK;
}

static gr_status run_failed(gr_engine *e, cudaError_t err, const char *what)
{
    e->failed = 1;
    cudaGetLastError();
    return gr_gpu_cuda_fail(err, what, __FILE__, __LINE__);
}

static gr_status gpu_run(gr_engine *e, int u8)
{
    gpu_state *g = e->impl;
    GR_TRY(gr_gpu_ensure_variant(e, u8));
    gpu_variant *v = gr_gpu_variant(g, u8);
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
        gr_status st = gr_gpu_enqueue_forward(g, v, NULL, NULL);
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
    GR_TRY(gr_gpu_ensure_variant(e, e->input_u8));
    gpu_variant *v = gr_gpu_variant(g, e->input_u8);
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
    for (int s = 0; s < GR_GPU_MAX_STREAMS; s++)
        if (g->streams[s])
            cudaStreamSynchronize(g->streams[s]);
    for (int i = 0; i < 2; i++)
        variant_free(&g->var[i]);
    for (int i = 0; i < g->n_events; i++)
        cudaEventDestroy(g->events[i]);
    free(g->events);
    if (g->fork)
        cudaEventDestroy(g->fork);
    for (int s = 0; s < GR_GPU_MAX_STREAMS; s++) {
        if (g->join[s])
            cudaEventDestroy(g->join[s]);
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
    const char *no_pdl = getenv("GR_DISABLE_PDL");
    g->pdl = !(no_pdl && no_pdl[0] == '1');
    CUDA_TRY(cudaSetDevice(g->device));
    struct cudaDeviceProp prop;
    CUDA_TRY(cudaGetDeviceProperties(&prop, g->device));
    if (e->opt.precision != GR_PREC_FP32 && prop.major * 10 + prop.minor < 72)
        return gr_fail(GR_ERR_UNSUPPORTED, "%s needs tensor cores with int8 (sm_72+); %s is sm_%d%d",
                       gr_precision_name(e->opt.precision), prop.name, prop.major, prop.minor);
    snprintf(e->device_name, sizeof e->device_name, "%.100s (sm_%d%d)", prop.name, prop.major,
             prop.minor);
    CUDA_TRY(cudaEventCreateWithFlags(&g->fork, cudaEventDisableTiming));

    /* int8 scales before planning. */
    if (e->opt.precision == GR_PREC_INT8)
        GR_TRY(gr_engine_calibrate(e, &g->layer_range, &g->input_range));

    /* The default input is uint8; build it now so a failure shows at build time (its plan sizes
     * the streams and events; a float-input variant built later may add more). */
    GR_TRY(gr_gpu_ensure_variant(e, 1));
    point_outputs(e, gr_gpu_variant(g, 1));
    return GR_OK;
}
