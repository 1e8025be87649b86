/* What runtime/gpu/debug.h declares for the GPU tests, the benchmark and debugging: the
 * captured graph's contents, plan statistics, a node-by-node trace read back through the planner's
 * CPU executor, and fault injection. Nothing here runs in a normal inference. */
#include <stdlib.h>
#include <string.h>

#include "experimental/dataflow/plan.h"
#include "runtime/gpu/debug.h"
#include "runtime/gpu/backend.h"

/* ---- inspection ------------------------------------------------------------------------------ */

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
    return gr_engine_slot_graph_info(engine, 0, info);
}

gr_status gr_engine_slot_graph_info(const gr_engine *engine, int slot, gr_graph_info *info)
{
    if (!engine || !info)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_graph_info: NULL argument");
    memset(info, 0, sizeof *info);
    if (engine->device != GR_DEVICE_GPU || !engine->impl)
        return gr_fail(GR_ERR_STATE, "gr_engine_graph_info: not a GPU engine");
    if (slot < 0 || slot >= engine->inflight)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_graph_info: slot %d is outside 0..%d",
                       slot, engine->inflight - 1);
    const gpu_state *g = engine->impl;
    cudaGraph_t graph = g->var[engine->input_u8 ? 1 : 0].inst[slot].graph;
    if (!graph)
        return gr_fail(GR_ERR_STATE, "gr_engine_graph_info: the engine runs without a CUDA graph");
    size_t n = 0;
    CUDA_TRY(cudaGraphGetNodes(graph, NULL, &n));
    cudaGraphNode_t *nodes = gr_calloc(n ? n : 1, sizeof *nodes, "graph nodes");
    if (!nodes)
        return GR_ERR_OUT_OF_MEMORY;
    cudaError_t err = cudaGraphGetNodes(graph, nodes, &n);
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
        return gr_gpu_cuda_fail(err, "inspecting the graph", __FILE__, __LINE__);
    return GR_OK;
}

gr_status gr_engine_plan_stats(const gr_engine *engine, int *launching_nodes, size_t *arena_bytes)
{
    if (!engine || engine->device != GR_DEVICE_GPU || !engine->impl)
        return gr_fail(GR_ERR_STATE, "gr_engine_plan_stats: not a GPU engine");
    const gpu_state *g = engine->impl;
    const gpu_variant *v = &g->var[engine->input_u8 ? 1 : 0];
    if (!v->plan)
        return gr_fail(GR_ERR_STATE, "gr_engine_plan_stats: no plan built");
    int n = 0;
    for (int i = 0; i < v->plan->n_nodes; i++)
        n += gr_gpu_node_launches(&v->plan->nodes[i]);
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
static gr_status mirror_buffers(const gpu_variant *v, const gpu_instance *inst, gr_plan_exec *ex,
                                uint8_t *scratch)
{
    const gr_plan *plan = v->plan;
    for (int b = 0; b < plan->n_buffers; b++) {
        int root = plan->buffers[b].root;
        const uint8_t *src = gr_gpu_tensor_storage(v, inst, root);
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
    GR_TRY(gr_gpu_ensure_variant(engine, 1));
    gpu_state *g = engine->impl;
    gpu_variant *v = &g->var[1];
    gpu_instance *inst = &v->inst[0];
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
        memcpy(inst->host_in, input, in->bytes);
        cudaError_t err = cudaMemcpy(inst->io, inst->host_in, in->bytes, cudaMemcpyHostToDevice);
        if (err != cudaSuccess)
            st = gr_gpu_cuda_fail(err, "trace input copy", __FILE__, __LINE__);
    }
    for (int i = 0; i < plan->n_nodes && st == GR_OK; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        if (!gr_gpu_node_launches(nd))
            continue;
        st = gr_gpu_launch_node(g, v, inst, i);
        if (st != GR_OK)
            break;
        cudaError_t err = cudaDeviceSynchronize();
        if (err != cudaSuccess) {
            st = gr_gpu_cuda_fail(err, "trace node", __FILE__, __LINE__);
            break;
        }
        st = mirror_buffers(v, inst, ex, scratch);
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

static gpu_variant *dataflow_variant(const gr_engine *engine)
{
    if (!engine || engine->device != GR_DEVICE_GPU || !engine->impl)
        return NULL;
    gpu_variant *v = gr_gpu_variant(engine->impl, 1);
    return v->built && v->dataflow ? v : NULL;
}

gr_status gr_engine_debug_dataflow_skip_publish(gr_engine *engine, int task)
{
    if (!dataflow_variant(engine))
        return gr_fail(GR_ERR_STATE, "gr_engine_debug_dataflow_skip_publish: the engine does not "
                                     "run the dataflow executor");
    ((gpu_state *)engine->impl)->df_skip_publish = task;
    return gr_gpu_recapture(engine);
}

gr_status gr_engine_debug_dataflow_program(const gr_engine *engine, const gr_df_program **program)
{
    const gpu_variant *v = dataflow_variant(engine);
    if (!v || !program)
        return gr_fail(v ? GR_ERR_INVALID_ARGUMENT : GR_ERR_STATE,
                       "gr_engine_debug_dataflow_program: %s",
                       v ? "NULL program" : "the engine does not run the dataflow executor");
    *program = v->df_program;
    return GR_OK;
}

gr_status gr_engine_debug_dataflow_trace(gr_engine *engine, int on)
{
    const gpu_variant *v = dataflow_variant(engine);
    if (!v)
        return gr_fail(GR_ERR_STATE, "gr_engine_debug_dataflow_trace: the engine does not run the "
                                     "dataflow executor");
    gpu_state *g = engine->impl;
    CUDA_TRY(cudaSetDevice(g->device));
    CUDA_TRY(cudaDeviceSynchronize());
    cudaFree(g->df_trace);
    g->df_trace = NULL;
    g->df_trace_tasks = 0;
    if (on) {
        const int n = v->df_program->header->n_tasks;
        const size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(gr_df_trace_record);
        CUDA_TRY(cudaMalloc((void **)&g->df_trace, bytes));
        CUDA_TRY(cudaMemset(g->df_trace, 0, bytes));
        g->df_trace_tasks = n;
    }
    return gr_gpu_recapture(engine);
}

gr_status gr_engine_debug_dataflow_trace_read(gr_engine *engine, gr_df_trace_record *records,
                                              int n_tasks)
{
    const gpu_variant *v = dataflow_variant(engine);
    if (!v || !records)
        return gr_fail(v ? GR_ERR_INVALID_ARGUMENT : GR_ERR_STATE,
                       "gr_engine_debug_dataflow_trace_read: %s",
                       v ? "NULL records" : "the engine does not run the dataflow executor");
    gpu_state *g = engine->impl;
    if (!g->df_trace || n_tasks != g->df_trace_tasks)
        return gr_fail(GR_ERR_STATE, "gr_engine_debug_dataflow_trace_read: %s (%d records asked, "
                       "%d traced)", g->df_trace ? "wrong count" : "tracing is off", n_tasks,
                       g->df_trace_tasks);
    CUDA_TRY(cudaSetDevice(g->device));
    CUDA_TRY(cudaDeviceSynchronize());
    CUDA_TRY(cudaMemcpy(records, g->df_trace, (size_t)n_tasks * sizeof *records,
                        cudaMemcpyDeviceToHost));
    return GR_OK;
}

gr_status gr_engine_debug_dataflow_tasks(const gr_engine *engine, int *n_tasks)
{
    const gpu_variant *v = dataflow_variant(engine);
    if (!v)
        return gr_fail(GR_ERR_STATE, "gr_engine_debug_dataflow_tasks: the engine does not run the "
                                     "dataflow executor");
    *n_tasks = v->df_program->header->n_tasks;
    return GR_OK;
}

/* ---- per-layer timing (automatic mixed precision) ---------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Eager runs of the uint8-input plan with events around every node; each node's median over the
 * runs is added to its layer (a conversion node to the layer whose value it converts, a fused
 * maxpool is in its conv's time). Kernel launch overheads between nodes are not included. */
gr_status gr_engine_layer_times(gr_engine *engine, double *us_per_layer)
{
    if (!engine || !us_per_layer)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_layer_times: NULL argument");
    if (engine->device != GR_DEVICE_GPU || !engine->impl)
        return gr_fail(GR_ERR_STATE, "gr_engine_layer_times: not a GPU engine");
    GR_TRY(gr_gpu_ensure_variant(engine, 1));
    gpu_state *g = engine->impl;
    gpu_variant *v = &g->var[1];
    const gr_plan *plan = v->plan;
    enum { RUNS = 9 };
    int n_ev = 2 * plan->n_nodes;
    cudaEvent_t *ev = gr_calloc((size_t)n_ev + 1, sizeof *ev, "timing events");
    double *samples = gr_calloc((size_t)plan->n_nodes * RUNS + 1, sizeof *samples, "node times");
    gr_status st = ev && samples ? GR_OK : GR_ERR_OUT_OF_MEMORY;
    int created = 0;
    for (; st == GR_OK && created < n_ev; created++) {
        cudaError_t err = cudaEventCreate(&ev[created]);
        if (err != cudaSuccess)
            st = gr_gpu_cuda_fail(err, "cudaEventCreate", __FILE__, __LINE__);
    }
    for (int r = 0; r < RUNS && st == GR_OK; r++) {
        st = gr_gpu_enqueue_forward(g, v, &v->inst[0], ev, NULL);
        cudaError_t err = st == GR_OK ? cudaDeviceSynchronize() : cudaSuccess;
        if (err != cudaSuccess)
            st = gr_gpu_cuda_fail(err, "cudaDeviceSynchronize (layer timing)", __FILE__, __LINE__);
        for (int i = 0; i < plan->n_nodes && st == GR_OK; i++) {
            float ms = 0.0f;
            if (!gr_gpu_node_launches(&plan->nodes[i]) ||
                cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]) != cudaSuccess)
                ms = 0.0f;
            samples[(size_t)i * RUNS + (size_t)r] = 1e3 * (double)ms;
        }
    }
    cudaGetLastError(); /* nodes that launched nothing have unrecorded events */
    for (int l = 0; l < plan->n_layers && st == GR_OK; l++)
        us_per_layer[l] = 0.0;
    for (int i = 0; i < plan->n_nodes && st == GR_OK; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        int layer = nd->layer;
        if (layer < 0 && nd->output >= 0)
            layer = plan->tensors[nd->output].layer;
        if (layer < 0 || layer >= plan->n_layers)
            continue;
        double *s = samples + (size_t)i * RUNS;
        qsort(s, RUNS, sizeof *s, cmp_double);
        us_per_layer[layer] += s[RUNS / 2];
    }
    for (int i = 0; i < created; i++)
        cudaEventDestroy(ev[i]);
    free(ev);
    free(samples);
    return st;
}

/* ---- JPEG decoding on the GPU ---------------------------------------------------------------- */

static gr_status u8_instance(gr_engine *engine, int slot, const char *fn, gpu_instance **inst,
                             cudaStream_t *stream)
{
    if (!engine || engine->device != GR_DEVICE_GPU || !engine->impl)
        return gr_fail(GR_ERR_STATE, "%s: not a GPU engine", fn);
    if (slot < 0 || slot >= engine->inflight)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "%s: slot %d is outside 0..%d", fn, slot,
                       engine->inflight - 1);
    gpu_state *g = engine->impl;
    gpu_variant *v = gr_gpu_variant(g, 1);
    if (!v->built)
        return gr_fail(GR_ERR_STATE, "%s: no uint8 input variant built", fn);
    *inst = &v->inst[slot];
    *stream = (*inst)->stream ? (*inst)->stream : g->streams[0];
    CUDA_TRY(cudaSetDevice(g->device));
    CUDA_TRY(cudaStreamSynchronize(*stream));
    return GR_OK;
}

gr_status gr_engine_debug_device_input(gr_engine *engine, int slot, uint8_t *host, size_t bytes)
{
    gpu_instance *inst = NULL;
    cudaStream_t stream = NULL;
    GR_TRY(u8_instance(engine, slot, "gr_engine_debug_device_input", &inst, &stream));
    const gpu_variant *v = gr_gpu_variant(engine->impl, 1);
    if (!host || bytes != v->in_bytes)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_debug_device_input: %zu bytes for an "
                       "input of %zu", bytes, v->in_bytes);
    CUDA_TRY(cudaMemcpy(host, inst->io, bytes, cudaMemcpyDeviceToHost));
    return GR_OK;
}

gr_status gr_engine_debug_jpeg_pixels(gr_engine *engine, int slot, int k, gr_image **out)
{
    gpu_instance *inst = NULL;
    cudaStream_t stream = NULL;
    if (out)
        *out = NULL;
    GR_TRY(u8_instance(engine, slot, "gr_engine_debug_jpeg_pixels", &inst, &stream));
    if (!out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_debug_jpeg_pixels: NULL out");
    return gr_gpu_jpeg_pixels(inst->jpeg, k, out);
}

gr_status gr_engine_debug_jpeg_host(const gr_engine *engine, double *check_s, double *call_s)
{
    if (!engine || !check_s || !call_s || engine->device != GR_DEVICE_GPU || !engine->impl)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_engine_debug_jpeg_host: not a GPU engine");
    *check_s = *call_s = 0.0;
    const gpu_variant *v = &((const gpu_state *)engine->impl)->var[1];
    for (int k = 0; k < GR_MAX_INFLIGHT; k++)
        gr_gpu_jpeg_host_seconds(v->inst[k].jpeg, check_s, call_s);
    return GR_OK;
}

gr_status gr_engine_debug_slot_sync(gr_engine *engine, int slot)
{
    gpu_instance *inst = NULL;
    cudaStream_t stream = NULL;
    return u8_instance(engine, slot, "gr_engine_debug_slot_sync", &inst, &stream);
}
